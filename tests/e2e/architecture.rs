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

/// `cargo metadata` of the workspace, as Cargo.lock pins it. Not
/// `--offline`: it reads the manifests of every platform's dependencies,
/// which a fresh machine has not downloaded (crates.io is reachable).
pub fn metadata() -> Value {
    let out = std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .current_dir(drydock_e2e::workspace_root())
        .args(["metadata", "--format-version", "1", "--locked"])
        .output()
        .expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata JSON")
}

#[test]
fn dependencies_point_one_way() {
    let meta = metadata();
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

/// The modules of a crate, bottom up: a module may import from its own
/// layer or below, never from above. ARCHITECTURE.md draws the same layers.
const AGENT_LAYERS: &[&[&str]] = &[
    // The vocabulary and plain helpers.
    &["model", "config", "text"],
    // Reasoning: pure functions over the domain.
    &[
        "rules",
        "discovery",
        "dependency",
        "disk",
        "planner",
        "runbook",
        "change",
    ],
    // The store, owning every table and its migrations.
    &["store"],
    // What talks to the world: the executor, the model, webhooks; the
    // watcher; grants and a target's memory over the store.
    &[
        "executor_client",
        // The scripted executor of the tests (never in a daemon).
        "test_util",
        "hosts",
        "grants",
        "memory",
        "llm",
        "watch",
        "notify",
    ],
    // The request engine.
    &["engine"],
    // What opens requests through the engine on a cadence, and asks the
    // registries about the containers' tags.
    &["schedule", "updates"],
    // The API and its listener.
    &["api", "listen"],
];

const CLI_LAYERS: &[&[&str]] = &[
    &[
        "exit",
        "text",
        "term",
        "claims",
        "pki",
        "fixture",
        "ssh_agent",
    ],
    &["home"],
    &["args", "client"],
    &["render", "approve"],
    &[
        "ask", "show", "grant", "host", "daemons", "doctor", "backup", "memory",
    ],
    &["demo", "mcp", "ui"],
    &["commands"],
];

/// The executor's modules, bottom up, in the order a call's checks build
/// on each other.
const EXECUTOR_LAYERS: &[&[&str]] = &[
    // Plain helpers with no executor state: redaction, the peer's
    // identity, the revocation list's format, one bounded HTTP GET, the
    // registries' entries and image references, the build contexts and
    // their git reads.
    &[
        "redact",
        "tls",
        "revocations",
        "http_check",
        "registry",
        "build",
    ],
    // `executor.yaml`.
    &["config"],
    // Policy (selectors and permits) and the audit store.
    &["policy", "audit"],
    // Approvals, the Docker adapter, the rate limiter (which audits).
    &["approval", "docker", "ratelimit"],
    // Grants: approvals' checks, the store's counts and the engine's state.
    &["grants"],
    // What tonic refuses before a handler.
    &["prehandler"],
    // The pipeline.
    &["service"],
    // Start-up and the accept loop.
    &["server"],
];

/// `crate::x` paths in Rust source (comments left out), including the
/// members of `use crate::{a, b::c}`.
fn crate_modules_named(source: &str) -> BTreeSet<String> {
    let code: String = source
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        rest = &rest[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let first = item.trim().split("::").next().unwrap_or("").trim();
                if !first.is_empty() && first != "self" {
                    out.insert(first.to_string());
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// For each top-level module of `src`, the crate modules its files name.
fn module_graph(src: &std::path::Path) -> HashMap<String, BTreeSet<String>> {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut all = Vec::new();
    files(src, &mut all);
    let mut graph: HashMap<String, BTreeSet<String>> = HashMap::new();
    for path in all {
        let rel = path.strip_prefix(src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        if top == "lib" || top == "main" {
            continue;
        }
        let named = crate_modules_named(&std::fs::read_to_string(&path).unwrap());
        let entry = graph.entry(top.clone()).or_default();
        entry.extend(named.into_iter().filter(|m| *m != top));
    }
    graph
}

/// Every import that points up a layer, every module the table does not
/// place, and every cycle.
fn layer_problems(src: &std::path::Path, layers: &[&[&str]]) -> Vec<String> {
    let layer_of = |m: &str| layers.iter().position(|l| l.contains(&m));
    let graph = module_graph(src);
    let mut problems = Vec::new();
    let mut modules: Vec<&String> = graph.keys().collect();
    modules.sort();
    for m in &modules {
        let Some(own) = layer_of(m) else {
            problems.push(format!("module `{m}` has no layer in the table"));
            continue;
        };
        for dep in &graph[*m] {
            match layer_of(dep) {
                Some(l) if l > own => problems.push(format!(
                    "`{m}` (layer {own}) imports `{dep}` (layer {l}), which is above it"
                )),
                Some(_) => {}
                // Not a module (a macro or a re-export at the root).
                None => {}
            }
        }
    }
    // Cycles among modules of one layer (edges between layers all point
    // down once the check above passes).
    fn visit<'a>(
        m: &'a str,
        graph: &'a HashMap<String, BTreeSet<String>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
        problems: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| *p == m) {
            let mut cycle = path[at..].to_vec();
            cycle.push(m);
            problems.push(format!("import cycle: {}", cycle.join(" → ")));
            return;
        }
        if !done.insert(m) {
            return;
        }
        path.push(m);
        for dep in graph.get(m).into_iter().flatten() {
            if graph.contains_key(dep) {
                visit(dep, graph, path, done, problems);
            }
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for m in modules {
        visit(m, &graph, &mut Vec::new(), &mut done, &mut problems);
    }
    problems
}

#[test]
fn modules_of_the_agent_the_executor_and_the_cli_point_one_way() {
    let root = drydock_e2e::workspace_root();
    for (src, layers) in [
        (root.join("agent/src"), AGENT_LAYERS),
        (root.join("executor/src"), EXECUTOR_LAYERS),
        (root.join("cli/src"), CLI_LAYERS),
    ] {
        let graph = module_graph(&src);
        assert!(
            graph.len() >= 10,
            "sanity: read the modules of {}",
            src.display()
        );
        let problems = layer_problems(&src, layers);
        assert!(
            problems.is_empty(),
            "{}:\n{}",
            src.display(),
            problems.join("\n")
        );
    }
}

#[test]
fn the_layer_check_sees_an_upward_import_and_a_cycle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("low.rs"), "use crate::high::Thing;\n").unwrap();
    std::fs::create_dir(src.join("high")).unwrap();
    std::fs::write(src.join("high/mod.rs"), "use crate::{low, other::X};\n").unwrap();
    std::fs::write(src.join("other.rs"), "// use crate::high;\nfn f() {}\n").unwrap();
    let problems = layer_problems(src, &[&["low", "other"], &["high"]]);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("`low` (layer 0) imports `high` (layer 1)")),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("import cycle")),
        "{problems:?}"
    );
    assert!(
        !problems.iter().any(|p| p.contains("`other`")),
        "a comment is not an import: {problems:?}"
    );
}

/// `unsafe` code lives in one place: `drydock-heap`'s single call to
/// glibc's `malloc_trim`. Every other crate takes the workspace's lints
/// (`unsafe_code = "forbid"`), and no source outside `heap/` writes an
/// `unsafe` block, function, impl or extern.
#[test]
fn unsafe_code_lives_only_in_drydock_heap() {
    let root = drydock_e2e::workspace_root();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    assert!(
        manifest.contains("[workspace.lints.rust]\nunsafe_code = \"forbid\""),
        "the workspace forbids unsafe code"
    );
    let meta = metadata();
    let members: Vec<&Value> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"].is_null())
        .collect();
    assert!(
        members.len() >= 8,
        "sanity: the workspace's crates are seen"
    );
    let keyword = regex::Regex::new(r"\bunsafe\s*(\{|fn\b|impl\b|extern\b|trait\b)").unwrap();
    let mut blocks_in_heap = 0;
    for package in members {
        let name = package["name"].as_str().unwrap();
        let manifest_path = std::path::PathBuf::from(package["manifest_path"].as_str().unwrap());
        let dir = manifest_path.parent().unwrap();
        let toml = std::fs::read_to_string(&manifest_path).unwrap();
        if name != "drydock-heap" {
            assert!(
                toml.contains("[lints]\nworkspace = true"),
                "{name} must take the workspace's lints (unsafe forbidden)"
            );
        }
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap().flatten() {
                let path = entry.path();
                let file = path.file_name().unwrap().to_string_lossy().to_string();
                if path.is_dir() {
                    // A nested crate is checked as its own package.
                    if file != "target" && !path.join("Cargo.toml").exists() {
                        stack.push(path);
                    }
                    continue;
                }
                if !file.ends_with(".rs") {
                    continue;
                }
                let source = std::fs::read_to_string(&path).unwrap();
                for (n, line) in source.lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    if keyword.is_match(code) {
                        assert_eq!(
                            name,
                            "drydock-heap",
                            "unsafe code at {}:{}: {line}",
                            path.display(),
                            n + 1
                        );
                        blocks_in_heap += 1;
                    }
                }
            }
        }
    }
    assert_eq!(blocks_in_heap, 1, "drydock-heap holds one unsafe block");
}

/// Docker's words (a container's state, its health, an event's action, a
/// task's or an update's state, a service's mode, a node's state) as
/// strings compared in `source`: each `(line, text)`.
fn docker_words_compared(source: &str) -> Vec<(usize, String)> {
    // (`status` is left out: a container's is typed, and the list's is
    // `docker ps`'s prose, read by `ContainerSummaryView::health`.)
    let fields = "state|health|health_status|action|desired_state|update_state|mode|availability";
    let compared = regex::Regex::new(&format!(
        r#"\.({fields})\s*(==|!=)\s*"|\.({fields})\.as_str\(\)\s*(==|!=)|\.({fields})\.as_deref\(\)\s*(==|!=)|match\s+[\w.]*\.({fields})\.as_str\(\)"#
    ))
    .unwrap();
    source
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim_start().starts_with("//"))
        .filter(|(_, l)| compared.is_match(l))
        .map(|(n, l)| (n + 1, l.trim().to_string()))
        .collect()
}

/// Docker's words are parsed once, where an engine's answer enters drydock
/// (`drydock_proto::docker`: the executor's adapter, the agent's executor
/// client); every crate matches on the enums and never compares Docker's
/// strings.
#[test]
fn no_docker_word_is_compared_as_a_string_past_the_parser() {
    let root = drydock_e2e::workspace_root();
    let mut found = Vec::new();
    for dir in [
        "agent/src",
        "cli/src",
        "vocab/src",
        "executor/src",
        "proto/src",
    ] {
        for entry in walk(&root.join(dir)) {
            let text = std::fs::read_to_string(&entry).unwrap();
            for (line, code) in docker_words_compared(&text) {
                found.push(format!("{}:{line}: {code}", entry.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "compare the enums instead:\n{}",
        found.join("\n")
    );
    // The check sees what it looks for.
    assert_eq!(
        docker_words_compared(
            "if c.state == \"running\" {}\nmatch e.action.as_str() {\nlet x = t.state.as_str() == y;\n// c.state == \"x\"\n"
        )
        .len(),
        3
    );
}

/// Every `.rs` file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}
