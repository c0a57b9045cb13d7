//! The reference docs stay true mechanically: every key of the config
//! structs is in docs/configuration.md (in the section of its file), every
//! subcommand of the CLI in docs/cli.md, and every event kind and every
//! executor RPC in docs/api.md (and nothing there that no longer exists).

use std::collections::BTreeMap;

use drydock_e2e::workspace_root;

/// `struct Name { field: Type, ... }` of every `Deserialize` struct in a
/// source file: a small reader for this project's own config files, which
/// declare one `pub field: Type,` per line.
fn structs(source: &str) -> BTreeMap<String, Vec<(String, String)>> {
    let mut out = BTreeMap::new();
    let mut lines = source.lines().peekable();
    let mut deserialize = false;
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.starts_with("#[derive(") && t.contains("Deserialize") {
            deserialize = true;
            continue;
        }
        if let Some(rest) = t.strip_prefix("pub struct ") {
            let name = rest.split([' ', '{']).next().unwrap_or("").to_string();
            let mut fields = Vec::new();
            if deserialize && t.ends_with('{') {
                let mut skipped = false;
                for l in lines.by_ref() {
                    let l = l.trim();
                    if l == "}" {
                        break;
                    }
                    // Not a key of the file: `#[serde(skip)]` fields are
                    // filled in by code.
                    if l.starts_with("#[serde(skip") {
                        skipped = true;
                    }
                    if l.starts_with("pub ") && std::mem::take(&mut skipped) {
                        continue;
                    }
                    if let Some(f) = l.strip_prefix("pub ") {
                        if let Some((field, ty)) = f.split_once(':') {
                            fields.push((
                                field.trim().to_string(),
                                ty.trim().trim_end_matches(',').to_string(),
                            ));
                        }
                    }
                }
                out.insert(name, fields);
            }
            deserialize = false;
        } else if !t.starts_with("#[") && !t.starts_with("///") && !t.is_empty() {
            deserialize = false;
        }
    }
    out
}

/// Dotted paths of the leaf keys under `root`, descending into nested config structs
/// (`Option<T>` and `Vec<T>` included, the latter as `key[].field`).
fn keys(
    all: &BTreeMap<String, Vec<(String, String)>>,
    root: &str,
    prefix: &str,
    out: &mut Vec<String>,
) {
    for (field, ty) in all.get(root).into_iter().flatten() {
        let path = format!("{prefix}{field}");
        let inner = ty
            .trim_start_matches("Option<")
            .trim_start_matches("Vec<")
            .trim_end_matches('>');
        // A section (a nested struct) is documented through its keys.
        if all.contains_key(inner) && inner != root {
            let sep = if ty.starts_with("Vec<") { "[]." } else { "." };
            keys(all, inner, &format!("{path}{sep}"), out);
        } else {
            out.push(path);
        }
    }
}

/// The part of a Markdown file from heading `start` to the next heading of
/// the same level.
fn section<'a>(doc: &'a str, start: &str) -> &'a str {
    let Some(at) = doc.find(start) else {
        panic!("docs/configuration.md has no heading {start}")
    };
    let rest = &doc[at + start.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn every_config_key_is_in_the_configuration_reference() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/configuration.md")).unwrap();
    let cases = [
        ("executor/src/config.rs", "Config", "## `executor.yaml`"),
        ("agent/src/config.rs", "Config", "## `agent.yaml`"),
        ("cli/src/home.rs", "CliConfig", "## `cli.yaml`"),
    ];
    let mut missing = Vec::new();
    for (file, root_struct, heading) in cases {
        let source = std::fs::read_to_string(root.join(file)).unwrap();
        let all = structs(&source);
        let mut found = Vec::new();
        keys(&all, root_struct, "", &mut found);
        assert!(found.len() >= 5, "{file}: read only {found:?}");
        let text = section(&doc, heading);
        for key in found {
            if !text.contains(&format!("`{key}`")) {
                missing.push(format!("{heading}: `{key}` (from {file})"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "config keys missing from docs/configuration.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_subcommand_is_in_the_cli_reference() {
    let doc = std::fs::read_to_string(workspace_root().join("docs/cli.md")).unwrap();
    let cmd = drydock::args::command();
    let mut missing = Vec::new();
    for sub in cmd.get_subcommands() {
        let name = format!("drydock {}", sub.get_name());
        if !doc.contains(&format!("### `{name}`")) {
            missing.push(name.clone());
        }
        for nested in sub.get_subcommands() {
            let full = format!("{name} {}", nested.get_name());
            if !doc.contains(&full) && !doc.contains(&format!("{name} {{")) {
                missing.push(full);
            }
        }
        for arg in sub.get_arguments().filter(|a| a.get_long().is_some()) {
            let flag = format!("--{}", arg.get_long().unwrap_or_default());
            if flag != "--help" && !doc.contains(&flag) {
                missing.push(format!("{name} {flag}"));
            }
        }
    }
    assert!(missing.is_empty(), "missing from docs/cli.md: {missing:?}");
}

/// The rows of the Markdown table that follows `heading`, by their first
/// cell's backquoted names (`` `a`, `b` `` counts both); the header row
/// (the one above the `|---|` line) is not a row.
fn table_names(doc: &str, heading: &str) -> Vec<String> {
    let Some(at) = doc.find(heading) else {
        panic!("docs/api.md has no heading {heading}")
    };
    let rest = &doc[at + heading.len()..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    let lines: Vec<&str> = rest[..end].lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            !lines
                .get(i + 1)
                .is_some_and(|next| next.starts_with("|---"))
        })
        .map(|(_, l)| *l)
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let first = l.split('|').nth(1).unwrap_or("");
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn every_event_kind_is_in_the_api_reference_and_no_other() {
    let doc = std::fs::read_to_string(workspace_root().join("docs/api.md")).unwrap();
    let documented = table_names(&doc, "### Event stream (SSE)");
    let known: Vec<String> = drydock_vocab::EventKind::ALL
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    let missing: Vec<&String> = known.iter().filter(|k| !documented.contains(k)).collect();
    let stale: Vec<&String> = documented.iter().filter(|d| !known.contains(d)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/api.md's event table: missing {missing:?}, no such kind {stale:?}"
    );
}

#[test]
fn every_rpc_is_in_the_api_reference_and_no_other() {
    let root = workspace_root();
    let proto =
        std::fs::read_to_string(root.join("proto/proto/drydock/executor/v1/executor.proto"))
            .unwrap();
    let rpcs: Vec<String> = proto
        .lines()
        .filter_map(|l| l.trim().strip_prefix("rpc "))
        .filter_map(|l| l.split('(').next())
        .map(|name| name.trim().to_string())
        .collect();
    assert!(rpcs.len() >= 10, "sanity: read the rpcs, got {rpcs:?}");
    let doc = std::fs::read_to_string(root.join("docs/api.md")).unwrap();
    let documented = table_names(&doc, "## Executor gRPC API");
    let missing: Vec<&String> = rpcs.iter().filter(|r| !documented.contains(r)).collect();
    let stale: Vec<&String> = documented.iter().filter(|d| !rpcs.contains(d)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/api.md's RPC table: missing {missing:?}, no such RPC {stale:?}"
    );
}

/// Every kind of evidence (`drydock_vocab::EvidenceKind`, the `evidence!`
/// table) has a row in docs/diagnosis.md's evidence table, and every row
/// names a kind that exists.
#[test]
fn every_evidence_kind_is_in_the_diagnosis_reference_and_no_other() {
    let doc = std::fs::read_to_string(workspace_root().join("docs/diagnosis.md")).unwrap();
    let documented = table_names(&doc, "\n## Evidence\n");
    let known: Vec<String> = drydock_vocab::EvidenceKind::ALL
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    let missing: Vec<&String> = known.iter().filter(|k| !documented.contains(k)).collect();
    let stale: Vec<&String> = documented.iter().filter(|d| !known.contains(d)).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/diagnosis.md's evidence table: missing {missing:?}, no such kind {stale:?}"
    );
}
