//! Dependencies point one way (ARCHITECTURE.md): the agent and the CLI never
//! link bollard, the executor never links the agent (and so no model code),
//! and the contract crate depends on neither. Checked over `cargo metadata`.

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

/// Normal (non-dev, non-build) dependencies of `root`, transitively, by name.
fn runtime_deps(meta: &Value, root: &str) -> BTreeSet<String> {
    let names: HashMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let nodes: HashMap<&str, &Value> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| (n["id"].as_str().unwrap(), n))
        .collect();
    let start = names
        .iter()
        .find(|(_, n)| **n == root)
        .map(|(id, _)| *id)
        .unwrap_or_else(|| panic!("{root} not in the workspace"));
    let mut seen = BTreeSet::new();
    let mut stack = vec![start];
    while let Some(id) = stack.pop() {
        for dep in nodes[id]["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            let dep_id = dep["pkg"].as_str().unwrap();
            if normal && seen.insert(names[dep_id].to_string()) {
                stack.push(dep_id);
            }
        }
    }
    seen
}

#[test]
fn dependencies_point_one_way() {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(drydock_e2e::workspace_root())
        .args(["metadata", "--format-version", "1"])
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    for unprivileged in ["drydock-agent", "drydock"] {
        let deps = runtime_deps(&meta, unprivileged);
        assert!(
            deps.contains("tonic"),
            "sanity: {unprivileged} has dependencies"
        );
        assert!(
            !deps.contains("bollard"),
            "{unprivileged} must never link bollard"
        );
        assert!(
            !deps.contains("drydock-executor"),
            "{unprivileged} must not link the executor"
        );
    }
    let executor = runtime_deps(&meta, "drydock-executor");
    assert!(executor.contains("bollard"));
    assert!(
        !executor.contains("drydock-agent"),
        "the executor never links agent (model) code"
    );
    assert!(
        !executor.contains("reqwest"),
        "the executor has no general HTTP client (CheckHttp is a bounded GET of configured URLs)"
    );
    let proto = runtime_deps(&meta, "drydock-proto");
    for forbidden in ["bollard", "drydock-agent", "drydock-executor", "rusqlite"] {
        assert!(
            !proto.contains(forbidden),
            "drydock-proto must not depend on {forbidden}"
        );
    }
}
