//! The Docker engine restarts while drydock watches: the executor's event
//! stream survives it (it reconnects and resumes from the last event it
//! delivered), and the agent's journal has no gap. A container that died
//! while the engine was down is seen from its state when the engine is back,
//! and opens its request. A second engine in a network namespace of its own
//! (`second_engine.rs`) is the one restarted, never the main engine. It runs
//! with `live-restore`, so containers outlive the daemon, as in production.

use std::time::{Duration, Instant};

use drydock::fixture::FIXTURE_IMAGE as FIXTURE;
use drydock_e2e::second_engine::SecondEngine;
use drydock_e2e::*;
use serde_json::Value;

fn requests(dd: &Drydock) -> Vec<Value> {
    let out = dd.cli(&["requests", "--json"]);
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

/// The finished watch request about `name`, within `timeout`.
fn watch_request(dd: &Drydock, name: &str, timeout: Duration) -> Value {
    let started = Instant::now();
    loop {
        let found = requests(dd).into_iter().find(|r| {
            r["source"] == "watch"
                && r["options"]["container"] == name
                && !matches!(
                    r["status"].as_str(),
                    Some("observing" | "diagnosing" | "planning")
                )
        });
        if let Some(r) = found {
            return r;
        }
        assert!(
            started.elapsed() < timeout,
            "no watch request for {name} within {timeout:?}; requests: {:#?}\nagent log:\n{}\nexecutor log:\n{}",
            requests(dd),
            dd.agent_log(),
            dd.executor_log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn a_death_while_the_engine_restarts_is_seen_and_opens_its_request() {
    prepare();
    let prefix = unique("er");
    let mut engine = SecondEngine::start_configured(r#"{"live-restore": true}"#, &[FIXTURE]);
    let dd = Drydock::init_options(|o| {
        o.targets = vec![format!("{prefix}-*")];
        o.watch = true;
    });
    let config = dd.home.executor_config();
    let yaml = std::fs::read_to_string(&config).expect("executor.yaml");
    std::fs::write(&config, with_docker_endpoint(&yaml, &engine.endpoint()))
        .expect("executor.yaml");
    let agent_yaml = dd.home.agent_config();
    let yaml = std::fs::read_to_string(&agent_yaml).expect("agent.yaml");
    std::fs::write(&agent_yaml, format!("{yaml}  debounce: 1s\n")).expect("agent.yaml");
    dd.up();

    // The stream is open and journaling: a first crash is seen as usual.
    let before = format!("{prefix}-before");
    engine.ok(&[
        "run",
        "-d",
        "--name",
        &before,
        FIXTURE,
        "crash",
        "--code",
        "2",
        "--stderr-line",
        "panic: runtime error: index out of range [1] with length 1",
    ]);
    let first = watch_request(&dd, &before, Duration::from_secs(60));
    assert_eq!(
        first["diagnosis"]["causes"][0]["class"], "crash",
        "{first:#}"
    );

    // A container that dies while the engine is down.
    let gap = format!("{prefix}-gap");
    engine.ok(&[
        "run",
        "-d",
        "--name",
        &gap,
        FIXTURE,
        "crash",
        "--code",
        "3",
        "--delay-ms",
        "4000",
        "--line",
        "ERROR lost the lock on the queue",
        "--stderr-line",
        "panic: queue lock lost",
    ]);
    engine.stop_daemon();
    std::thread::sleep(Duration::from_secs(7));
    engine.start_daemon();
    assert_eq!(
        engine.ok(&[
            "inspect",
            "-f",
            "{{.State.Status}} {{.State.ExitCode}}",
            &gap
        ]),
        "exited 3",
        "it died while the engine was down\n{}",
        engine.log()
    );
    let seen = watch_request(&dd, &gap, Duration::from_secs(60));
    assert_eq!(seen["diagnosis"]["causes"][0]["class"], "crash", "{seen:#}");
    assert!(
        seen["diagnosis"]["causes"][0]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("exited with code 3"),
        "{seen:#}"
    );

    // The stream resumed: a death after the restart is seen too, and the
    // agent's stream to the executor was never broken.
    let after = format!("{prefix}-after");
    engine.ok(&[
        "run",
        "-d",
        "--name",
        &after,
        FIXTURE,
        "crash",
        "--code",
        "4",
        "--stderr-line",
        "panic: runtime error: invalid memory address or nil pointer dereference",
    ]);
    let later = watch_request(&dd, &after, Duration::from_secs(60));
    assert_eq!(
        later["diagnosis"]["causes"][0]["class"], "crash",
        "{later:#}"
    );
    assert!(
        dd.executor_log().contains("reconnecting"),
        "the executor reconnected to the engine:\n{}",
        dd.executor_log()
    );
    // One request per death, none twice.
    for name in [&before, &gap, &after] {
        let n = requests(&dd)
            .iter()
            .filter(|r| r["source"] == "watch" && r["options"]["container"] == name.as_str())
            .count();
        assert_eq!(n, 1, "{name}: {:#?}", requests(&dd));
    }
}
