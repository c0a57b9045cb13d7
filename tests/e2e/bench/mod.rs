//! The Docker troubleshooting benchmark: scenarios as data
//! (`tests/bench/scenarios/*.yaml`), each set up on a real engine, asked
//! about through the real CLI and daemons, and scored from the engine's
//! state, the executor's audit log and the request. The runner is the
//! `drydock-bench` example; the CI test runs the scenarios marked `ci`.
//!
//! Any two scenarios can run at once (`load` refuses names two share), and
//! each run has a drydock home of its own whose executor sees only that
//! scenario's containers, so runs never see each other.

pub mod agents;
pub mod model;
pub mod neighbourhood;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;
pub mod sealed;
pub mod setup;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use run::{Diagnoser, Outcome};
use scenario::Scenario;

/// Held by whatever stages scenarios in this process: two runs (two
/// tests) would stage the same names, and a run's end removes every
/// benchmark image, the layers of a build still under way among them.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// Run every scenario `runs` times, `jobs` scenarios at a time (the runs
/// of one scenario one after the other); `progress` hears of each run as
/// it ends.
pub fn run_all(
    scenarios: &[Scenario],
    diagnoser: &Diagnoser,
    runs: usize,
    jobs: usize,
    progress: &(dyn Fn(usize, usize, &Outcome) + Sync),
) -> Vec<Outcome> {
    let _one = one_at_a_time();
    crate::prepare();
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let total = scenarios.len() * runs;
    let outcomes = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(s) = scenarios.get(i) else { break };
                for r in 1..=runs {
                    let o = run::run_once(s, diagnoser, r);
                    let n = done.fetch_add(1, Ordering::SeqCst) + 1;
                    progress(n, total, &o);
                    if let Ok(mut all) = outcomes.lock() {
                        all.push(o);
                    }
                }
            });
        }
    });
    setup::remove_images();
    let mut all = outcomes.into_inner().unwrap_or_else(|p| p.into_inner());
    all.sort_by(|a, b| (&a.scenario, a.run).cmp(&(&b.scenario, b.run)));
    all
}

/// The environment variable the benchmark hands a model's API key in
/// (`drydock up` passes only `DRYDOCK_*` variables to the daemons).
const KEY_VAR: &str = "DRYDOCK_BENCH_LLM_KEY";

/// A diagnoser from a user's `llm:` file (the section itself, or a file
/// with an `llm:` key, as in agent.yaml); the key is read from the
/// variable its `api_key_env` names.
pub fn model_from_file(path: &std::path::Path) -> anyhow::Result<Diagnoser> {
    use serde_yaml_ng::{Mapping, Value};
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let doc: Value = serde_yaml_ng::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not YAML: {e}", path.display()))?;
    let mut section: Mapping = match doc.get("llm").cloned().unwrap_or(doc) {
        Value::Mapping(m) => m,
        _ => anyhow::bail!("{}: expected an `llm:` section (provider, base_url, model, api_key_env), as in agent.yaml", path.display()),
    };
    let key_env = section
        .get("api_key_env")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: llm.api_key_env is required: the name of the variable that holds your API key",
                path.display()
            )
        })?
        .to_string();
    let key = std::env::var(&key_env).map_err(|_| {
        anyhow::anyhow!(
            "{key_env} is not set: export your API key in it (llm.api_key_env in {} names it)",
            path.display()
        )
    })?;
    let model = section
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("model")
        .to_string();
    section.insert("api_key_env".into(), KEY_VAR.into());
    // A model is measured on its own: no rules answer to confirm, no
    // veto by the rules' class, no target chosen for it (unless the file
    // chose otherwise).
    if !section.contains_key("investigate") {
        section.insert("investigate".into(), "blind".into());
    }
    let mut root = Mapping::new();
    root.insert("llm".into(), Value::Mapping(section));
    Ok(Diagnoser::Model {
        name: format!("llm:{model}"),
        decides_as: format!("llm:{model}"),
        section: serde_yaml_ng::to_string(&root)?,
        env: vec![(KEY_VAR.to_string(), key)],
    })
}

/// The scripted model of the tests (`model.rs`), at `url`.
pub fn scripted(url: &str) -> Diagnoser {
    Diagnoser::Model {
        name: "scripted model".into(),
        decides_as: "llm:scripted".into(),
        section: format!("llm:\n  provider: openai\n  base_url: {url}\n  model: scripted\n  api_key_env: {KEY_VAR}\n  max_retries: 0\n  max_invalid_answers: 1\n"),
        env: vec![(KEY_VAR.to_string(), "not-a-secret".to_string())],
    }
}
