//! deny.toml's rules, checked over `cargo metadata` on every test run, so
//! CI needs no `cargo deny` binary for them (`.ci/run` also runs `cargo
//! deny` when it is installed): every crate's licence is allowed, every
//! crate comes from crates.io, no banned crate is linked but through the
//! wrappers deny.toml names, and no workspace dependency is a wildcard.
//! deny.toml stays the one list of the rules.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

fn deny_toml() -> toml::Table {
    let text = std::fs::read_to_string(drydock_e2e::workspace_root().join("deny.toml")).unwrap();
    text.parse().expect("deny.toml parses")
}

fn strings(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an SPDX expression (`A OR B`, `A AND (B OR C)`, `A WITH X`, the
/// old `A/B`) is satisfied by the allowed licences.
pub fn licence_allowed(expression: &str, allowed: &[String]) -> bool {
    let spaced = expression
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace('/', " OR ");
    let tokens: Vec<&str> = spaced.split_whitespace().collect();
    let mut pos = 0;
    let value = or_expr(&tokens, &mut pos, allowed);
    value == Some(true) && pos == tokens.len()
}

fn or_expr(t: &[&str], pos: &mut usize, allowed: &[String]) -> Option<bool> {
    let mut value = and_expr(t, pos, allowed)?;
    while t.get(*pos) == Some(&"OR") {
        *pos += 1;
        value |= and_expr(t, pos, allowed)?;
    }
    Some(value)
}

fn and_expr(t: &[&str], pos: &mut usize, allowed: &[String]) -> Option<bool> {
    let mut value = term(t, pos, allowed)?;
    while t.get(*pos) == Some(&"AND") {
        *pos += 1;
        value &= term(t, pos, allowed)?;
    }
    Some(value)
}

fn term(t: &[&str], pos: &mut usize, allowed: &[String]) -> Option<bool> {
    let token = *t.get(*pos)?;
    *pos += 1;
    if token == "(" {
        let value = or_expr(t, pos, allowed)?;
        (t.get(*pos) == Some(&")")).then_some(())?;
        *pos += 1;
        return Some(value);
    }
    if matches!(token, ")" | "AND" | "OR" | "WITH") {
        return None;
    }
    let mut id = token.trim_end_matches('+').to_string();
    if t.get(*pos) == Some(&"WITH") {
        id = format!("{id} WITH {}", t.get(*pos + 1)?);
        *pos += 2;
    }
    Some(allowed.contains(&id))
}

#[test]
fn the_licence_expression_check_can_refuse() {
    let allowed = vec!["MIT".to_string(), "Apache-2.0".to_string()];
    assert!(licence_allowed("MIT OR Apache-2.0", &allowed));
    assert!(licence_allowed("MIT/Apache-2.0", &allowed));
    assert!(licence_allowed("(MIT OR GPL-3.0) AND Apache-2.0", &allowed));
    assert!(!licence_allowed("MIT AND GPL-3.0", &allowed));
    assert!(!licence_allowed("GPL-3.0", &allowed));
    assert!(!licence_allowed("Apache-2.0 WITH LLVM-exception", &allowed));
    assert!(!licence_allowed("MIT OR", &allowed), "malformed");
}

#[test]
fn every_crate_keeps_deny_toml() {
    let meta = crate::architecture::metadata();
    let deny = deny_toml();
    let packages = meta["packages"].as_array().unwrap();
    let by_id: HashMap<&str, &Value> = packages
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p))
        .collect();
    let workspace: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m.as_str())
        .collect();

    // Licences, with deny.toml's clarifications.
    let licences = deny["licenses"].as_table().expect("[licenses]");
    let allowed = strings(licences.get("allow"));
    let clarified: HashMap<String, String> = licences
        .get("clarify")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| {
            Some((
                c.get("crate")?.as_str()?.to_string(),
                c.get("expression")?.as_str()?.to_string(),
            ))
        })
        .collect();
    let mut refused = Vec::new();
    let mut checked = 0;
    for p in packages {
        if workspace.contains(p["id"].as_str().unwrap()) {
            continue;
        }
        let name = p["name"].as_str().unwrap();
        let expression = clarified
            .get(name)
            .cloned()
            .or_else(|| p["license"].as_str().map(String::from))
            .unwrap_or_default();
        checked += 1;
        if !licence_allowed(&expression, &allowed) {
            refused.push(format!("{name} {}: `{expression}`", p["version"]));
        }
    }
    assert!(checked > 100, "sanity: {checked} crates checked");
    assert!(
        refused.is_empty(),
        "licences deny.toml does not allow: {refused:#?}"
    );

    // Sources: crates.io only (no git, no other registry).
    let foreign: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            let source = p["source"].as_str()?;
            (source != "registry+https://github.com/rust-lang/crates.io-index")
                .then(|| format!("{} from {source}", p["name"]))
        })
        .collect();
    assert!(
        foreign.is_empty(),
        "crates from elsewhere than crates.io: {foreign:?}"
    );

    // Bans: a banned crate is linked (in any kind of dependency) only by
    // the wrappers its entry names, and one with no wrappers not at all.
    let mut dependents: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for node in meta["resolve"]["nodes"].as_array().unwrap() {
        let from = by_id[node["id"].as_str().unwrap()]["name"]
            .as_str()
            .unwrap();
        for dep in node["deps"].as_array().unwrap() {
            let to = by_id[dep["pkg"].as_str().unwrap()]["name"]
                .as_str()
                .unwrap();
            dependents.entry(to).or_default().insert(from);
        }
    }
    let bans = deny["bans"]["deny"].as_array().expect("[bans] deny");
    assert!(bans.len() > 10, "sanity: deny.toml's bans are read");
    let mut broken = Vec::new();
    for ban in bans {
        let name = ban["crate"].as_str().expect("a ban names its crate");
        let wrappers = strings(ban.get("wrappers"));
        for by in dependents.get(name).into_iter().flatten() {
            if !wrappers.iter().any(|w| w == by) {
                broken.push(format!("{by} links {name} (allowed only in {wrappers:?})"));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
    assert!(
        dependents
            .get("bollard")
            .is_some_and(|d| d.contains("drydock-executor")),
        "sanity: the bans see the executor's Docker client"
    );

    // Wildcards: no workspace crate asks for `*` (paths are allowed).
    let wildcards: Vec<String> = packages
        .iter()
        .filter(|p| workspace.contains(p["id"].as_str().unwrap()))
        .flat_map(|p| {
            p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["req"] == "*" && d["path"].is_null())
                .map(move |d| format!("{} -> {}", p["name"], d["name"]))
        })
        .collect();
    assert!(wildcards.is_empty(), "wildcard requirements: {wildcards:?}");
}
