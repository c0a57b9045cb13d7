//! The reference docs stay true mechanically, both ways (every word the
//! code knows is documented, and nothing documented that no longer
//! exists): config keys in docs/configuration.md (in the section of their
//! file), subcommands in docs/cli.md, event kinds, RPCs and write actions
//! (at their tiers) in docs/api.md, evidence kinds, fault classes and
//! request states in docs/diagnosis.md, notify events in
//! docs/configuration.md.

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
    table_rows(doc, heading)
        .iter()
        .filter(|cells| cells.first().is_some_and(|c| c.starts_with('`')))
        .flat_map(|cells| words(&cells[0]))
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

/// The cells of each row of the table under `heading` in `doc`, the
/// header row left out.
fn table_rows(doc: &str, heading: &str) -> Vec<Vec<String>> {
    let Some(at) = doc.find(heading) else {
        panic!("no heading {heading}")
    };
    let rest = &doc[at + heading.len()..];
    let end = rest.find("\n#").unwrap_or(rest.len());
    let lines: Vec<&str> = rest[..end].lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(i, l)| {
            l.starts_with('|')
                && !l.starts_with("|---")
                && !lines.get(i + 1).is_some_and(|n| n.starts_with("|---"))
        })
        .map(|(_, l)| {
            let cells: Vec<&str> = l.split('|').collect();
            cells[1..cells.len().saturating_sub(1)]
                .iter()
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect()
}

/// The backquoted words of a cell.
fn words(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The backquoted words of column `col` (0 is the first) of each row of
/// the table under `heading` in `doc`, the header row left out.
fn column_words(doc: &str, heading: &str, col: usize) -> Vec<Vec<String>> {
    table_rows(doc, heading)
        .iter()
        .map(|cells| words(cells.get(col).map_or("", String::as_str)))
        .collect()
}

/// `missing` and `stale` between the words a build knows and the ones a
/// document names, as one failure message (empty when they agree).
fn disagreement(what: &str, known: &[String], documented: &[String]) -> String {
    let missing: Vec<&String> = known.iter().filter(|k| !documented.contains(k)).collect();
    let stale: Vec<&String> = documented.iter().filter(|d| !known.contains(d)).collect();
    if missing.is_empty() && stale.is_empty() {
        String::new()
    } else {
        format!("{what}: missing {missing:?}, no such word {stale:?}")
    }
}

fn read_doc(path: &str) -> String {
    std::fs::read_to_string(workspace_root().join(path)).unwrap()
}

#[test]
fn every_fault_class_and_status_is_in_the_diagnosis_reference_and_no_other() {
    let doc = read_doc("docs/diagnosis.md");
    let classes: Vec<String> = column_words(&doc, "\n## Diagnosis and fault classes\n", 0)
        .into_iter()
        .filter_map(|w| w.into_iter().next())
        .collect();
    let known: Vec<String> = drydock_vocab::FaultClass::ALL
        .iter()
        .map(|c| c.as_str().to_string())
        .collect();
    let statuses: Vec<String> = column_words(&doc, "\n## Request lifecycle\n", 0)
        .into_iter()
        .filter_map(|w| w.into_iter().next())
        .collect();
    let known_statuses: Vec<String> = drydock_vocab::Status::ALL
        .iter()
        .map(|s| s.as_str().to_string())
        .collect();
    let problems = [
        disagreement("docs/diagnosis.md's fault classes", &known, &classes),
        disagreement("docs/diagnosis.md's states", &known_statuses, &statuses),
    ];
    assert!(problems.iter().all(String::is_empty), "{problems:?}");
}

/// docs/api.md's RPC table names each write action as its audit `action`,
/// at the tier the executor gives it, and no other write.
#[test]
fn every_write_action_is_in_the_api_reference_at_its_tier() {
    let doc = read_doc("docs/api.md");
    let rows = table_rows(&doc, "\n## Executor gRPC API\n");
    assert!(rows.len() >= 10, "sanity: read the RPC table, got {rows:?}");
    let mut writes = Vec::new();
    for cells in &rows {
        let tier = cells.get(1).map_or("", String::as_str);
        if tier == "T1" || tier == "T2" {
            let word = words(cells.get(2).map_or("", String::as_str))
                .into_iter()
                .next()
                .unwrap_or_default();
            if let Some(a) = drydock_vocab::WriteAction::parse(&word) {
                assert_eq!(
                    tier,
                    drydock_vocab::default_tier(a).label(),
                    "docs/api.md gives `{word}` the wrong tier"
                );
            }
            writes.push(word);
        }
    }
    let known: Vec<String> = drydock_vocab::WriteAction::ALL
        .iter()
        .map(|a| a.as_str().to_string())
        .collect();
    let problem = disagreement("docs/api.md's write RPCs", &known, &writes);
    assert!(problem.is_empty(), "{problem}");
}

#[test]
fn every_notify_event_is_in_the_configuration_reference_and_no_other() {
    let doc = read_doc("docs/configuration.md");
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `notify.webhooks[].events` |"))
        .expect("docs/configuration.md has the events row");
    let documented = words(row.split('|').nth(3).unwrap_or(""));
    let known: Vec<String> = drydock_vocab::NotifyEvent::ALL
        .iter()
        .map(|e| e.as_str().to_string())
        .collect();
    let problem = disagreement("docs/configuration.md's notify events", &known, &documented);
    assert!(problem.is_empty(), "{problem}");
}
