//! Writes in doubt: a write that happened is always in the audit chain, and
//! an answer that never came is not taken for a failure. Real processes are
//! killed while a restart is in flight (the fixture ignores SIGTERM, so
//! Docker waits out the stop grace and the restart takes seconds).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use drydock_e2e::approvals::{claims, sign};
use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use serde_json::Value;

fn rows_for(dd: &Drydock, request_id: &str) -> Vec<Value> {
    dd.audit_rows()
        .into_iter()
        .filter(|r| r["request_id"] == request_id)
        .collect()
}

fn wait_until(what: &str, timeout: Duration, mut ok: impl FnMut() -> bool) {
    let started = Instant::now();
    while !ok() {
        assert!(started.elapsed() < timeout, "{what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The caller (the agent) goes away mid-write: the executor still finishes
/// the write and records it, intent row first, outcome row after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_caller_disconnects_is_finished_and_audited() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let c = Container::run("doubt-caller", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    let started_at = c.inspect("{{.State.StartedAt}}");
    let ca = read(&dd.home.path("pki/ca.crt"));
    let cert = read(&dd.home.path("pki/agent.crt"));
    let key_pem = read(&dd.home.path("pki/agent.key"));
    let key = dd.home.load_cli_config().unwrap().signing_key().unwrap();
    let approval = sign(
        &claims("req-disconnect", WriteAction::Restart, &c.id()),
        &key,
        "local-operator",
    );
    let name = c.name.clone();
    let port = exec.port;
    let call = tokio::spawn(async move {
        let mut client = grpc::connect(port, &ca, Some((&cert, &key_pem)))
            .await
            .expect("connect");
        client
            .restart_container(pb::WriteRequest {
                request_id: "req-disconnect".into(),
                container: name,
                approval: Some(approval),
                ..Default::default()
            })
            .await
    });
    // The restart is in flight (the stop grace is 10 s): drop the caller.
    let dd_ref = &dd;
    wait_until("the intent row", Duration::from_secs(10), || {
        rows_for(dd_ref, "req-disconnect")
            .iter()
            .any(|r| r["decision"] == "intent")
    });
    call.abort();
    let _ = call.await;
    wait_until("the restart", Duration::from_secs(40), || {
        c.inspect("{{.State.StartedAt}}") != started_at
    });
    wait_until("the outcome row", Duration::from_secs(10), || {
        rows_for(dd_ref, "req-disconnect")
            .iter()
            .any(|r| r["decision"] == "allowed")
    });
    let rows = rows_for(&dd, "req-disconnect");
    let decisions: Vec<&str> = rows.iter().filter_map(|r| r["decision"].as_str()).collect();
    assert_eq!(decisions, vec!["intent", "allowed"], "{rows:#?}");
    assert!(
        rows[0]["reason"].as_str().unwrap_or("").contains("nonce"),
        "the intent row carries the spent nonce: {}",
        rows[0]
    );
    assert_eq!(rows[0]["approval_id"], rows[1]["approval_id"]);
    dd.assert_audit_intact();
}

/// The executor dies mid-write: Docker finishes the restart, the agent
/// does not call that a failure, re-observes instead of re-sending, and the
/// restarted executor closes the dangling intent as "outcome unknown".
#[test]
fn an_executor_killed_mid_write_leaves_the_outcome_to_verification() {
    let dd = Drydock::init();
    let c = Container::unhealthy_web("doubt-executor", &[]);
    let started_at = c.inspect("{{.State.StartedAt}}");
    dd.up();
    let ask = Command::new(bin("drydock"))
        .args([
            "ask",
            "--json",
            "--yes",
            "--container",
            &c.name,
            "the web service is unhealthy",
        ])
        .env("DRYDOCK_HOME", &dd.home.root)
        .env("DRYDOCK_EXECUTOR_BIN", bin("drydock-executor"))
        .env("DRYDOCK_AGENT_BIN", bin("drydock-agent"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ask");
    // Wait for the write to be in flight: the request is executing and the
    // executor has written the intent row.
    let executing = || {
        dd.audit_rows()
            .iter()
            .any(|r| r["decision"] == "intent" && r["action"] == "restart")
    };
    wait_until("a restart in flight", Duration::from_secs(60), executing);
    let pid = drydock::daemons::read_pid(&dd.home, "drydock-executor").expect("executor pid");
    let killed = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // Docker finishes the restart on its own.
    wait_until(
        "Docker to finish the restart",
        Duration::from_secs(40),
        || c.inspect("{{.State.StartedAt}}") != started_at,
    );
    let restarted_at = c.inspect("{{.State.StartedAt}}");
    // The executor comes back (the agent's verification needs it).
    dd.up();
    let out = ask.wait_with_output().expect("ask finished");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let req: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "ask printed no JSON ({e}): {stdout}\n{}\nagent log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            dd.agent_log()
        )
    });
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(out.status.code(), Some(0));
    assert!(
        req["outcome"].as_str().unwrap_or("").contains("in doubt"),
        "{}",
        req["outcome"]
    );
    let executions = req["execution"].as_array().unwrap();
    assert_eq!(
        executions.len(),
        1,
        "the write was not re-sent: {executions:#?}"
    );
    assert_eq!(executions[0]["in_doubt"], true);
    assert_eq!(
        c.inspect("{{.State.StartedAt}}"),
        restarted_at,
        "restarted exactly once"
    );
    // The chain: the intent, then "outcome unknown" written at start.
    let rows: Vec<Value> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["action"] == "restart")
        .collect();
    let decisions: Vec<&str> = rows.iter().filter_map(|r| r["decision"].as_str()).collect();
    assert_eq!(decisions, vec!["intent", "unknown"], "{rows:#?}");
    assert!(dd.audit_verify().status.success());
}

/// The executor is killed during a restart and comes back only 12 s later:
/// its outage is a wait, not a verdict. The agent says it is waiting,
/// decides from fresh evidence once the executor answers, and the request
/// completes with the container healthy; the write is never sent again.
#[test]
fn an_executor_back_12_s_after_a_kill_mid_write_is_waited_for() {
    let dd = Drydock::init();
    let c = Container::unhealthy_web("doubt-outage", &[]);
    let started_at = c.inspect("{{.State.StartedAt}}");
    dd.up();
    let ask = Command::new(bin("drydock"))
        .args([
            "ask",
            "--json",
            "--yes",
            "--container",
            &c.name,
            "web is unhealthy",
        ])
        .env("DRYDOCK_HOME", &dd.home.root)
        .env("DRYDOCK_EXECUTOR_BIN", bin("drydock-executor"))
        .env("DRYDOCK_AGENT_BIN", bin("drydock-agent"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ask");
    wait_until("a restart in flight", Duration::from_secs(60), || {
        dd.audit_rows()
            .iter()
            .any(|r| r["decision"] == "intent" && r["action"] == "restart")
    });
    let pid = drydock::daemons::read_pid(&dd.home, "drydock-executor").expect("executor pid");
    assert!(Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(Duration::from_secs(12));
    dd.up();
    let out = ask.wait_with_output().expect("ask finished");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let req: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "ask printed no JSON ({e}): {stdout}\n{}\nagent log:\n{}",
            String::from_utf8_lossy(&out.stderr),
            dd.agent_log()
        )
    });
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(
        req["execution"].as_array().map(Vec::len),
        Some(1),
        "not re-sent: {req:#}"
    );
    assert_ne!(c.inspect("{{.State.StartedAt}}"), started_at);
    assert_eq!(c.health(), "healthy");
    let id = req["id"].as_str().unwrap();
    let shown = dd.cli(&["show", id]);
    let said = String::from_utf8_lossy(&shown.stdout);
    assert!(said.contains("executor unreachable; waiting"), "{said}");
}
