//! The whole loop through both daemons: CLI → agent → executor → Docker.

use std::time::Duration;

use drydock_e2e::*;
use serde_json::Value;

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_str().unwrap_or("")
}

#[test]
fn unhealthy_container_is_restarted_and_verified_healthy() {
    let dd = Drydock::init();
    let port = free_port();
    let published = format!("127.0.0.1:{port}:8080");
    let c = Container::unhealthy_web("unhealthy", &["-p", &published]);
    let id = c.id();
    // Level 3 of verification: the operator's HTTP check for this service.
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("config");
    std::fs::write(
        dd.home.executor_config(),
        format!(
            "{config}http_checks:\n  {}: \"http://127.0.0.1:{port}/health\"\n",
            c.name
        ),
    )
    .expect("config");
    dd.up();

    let (code, req) = dd.ask_json(&["--yes", "--container", &c.name, "the service is unhealthy"]);
    assert_eq!(
        code,
        0,
        "exit code; request: {req:#}\nagent log:\n{}",
        dd.agent_log()
    );
    assert_eq!(s(&req, &["status"]), "completed", "{req:#}");
    assert_eq!(s(&req, &["target", "container_id"]), id);
    assert_eq!(s(&req, &["target", "container_name"]), c.name);
    assert_eq!(
        s(&req["diagnosis"]["causes"][0], &["class"]),
        "unhealthy",
        "{req:#}"
    );
    let evidence_ids: Vec<&str> = req["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    for cited in req["diagnosis"]["causes"][0]["evidence_ids"]
        .as_array()
        .unwrap()
    {
        assert!(
            evidence_ids.contains(&cited.as_str().unwrap()),
            "cause cites unknown evidence {cited}"
        );
    }
    assert_eq!(s(&req["plan"]["steps"][0], &["action"]), "restart");
    assert_eq!(req["verification"]["ok"], Value::Bool(true), "{req:#}");
    let levels: Vec<(&str, bool)> = req["verification"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["level"].as_str().unwrap(), c["ok"].as_bool().unwrap()))
        .collect();
    for level in ["running", "healthy", "stable", "http"] {
        assert!(
            levels.contains(&(level, true)),
            "verification level {level} passed: {levels:?}"
        );
    }
    assert_eq!(
        c.health(),
        "healthy",
        "Docker itself must report the container healthy"
    );
    assert_eq!(
        c.inspect("{{.RestartCount}}"),
        "0",
        "a docker restart does not count as a policy restart"
    );

    // The audit shows the restart with the approval that authorized it.
    let approval_id = s(&req["approvals"][0], &["id"]).to_string();
    assert!(approval_id.starts_with("apr-"));
    let rows = dd.audit_rows();
    let restarts: Vec<_> = rows.iter().filter(|r| r["action"] == "restart").collect();
    assert_eq!(
        decisions(restarts.iter().copied()),
        ["intent", "allowed"],
        "the approval is spent in the chain before Docker is called, then the outcome: {restarts:#?}"
    );
    assert_eq!(restarts[0]["approval_id"], approval_id.as_str());
    let restart = restarts[1];
    assert_eq!(restart["approval_id"], approval_id.as_str());
    assert_eq!(restart["container_id"], id.as_str());
    assert_eq!(restart["decision"], "allowed");
    assert_eq!(restart["caller"], "drydock-agent");
    assert_eq!(restart["key_id"], "local-operator");
    dd.assert_audit_intact();
}

#[test]
fn crash_on_missing_env_var_is_config_error_with_no_write() {
    let dd = Drydock::init();
    let c = Container::run(
        "config-error",
        &[
            drydock::fixture::FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--line",
            "INFO booting orders service",
            "--stderr-line",
            "Error: missing required environment variable DATABASE_URL",
        ],
    );
    c.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    dd.up();

    let (code, req) = dd.ask_json(&["--yes", "--container", &c.name, "orders is down"]);
    assert_eq!(code, 0, "{req:#}");
    let cause = &req["diagnosis"]["causes"][0];
    assert_eq!(s(cause, &["class"]), "config_error", "{req:#}");
    assert!(s(cause, &["reason"]).contains("DATABASE_URL"), "{cause:#}");
    assert_eq!(
        req["plan"]["steps"].as_array().map(Vec::len),
        Some(0),
        "no write for a config error: {req:#}"
    );
    let advice = req["plan"]["advice"].to_string();
    assert!(
        advice.contains("DATABASE_URL"),
        "advice names the variable: {advice}"
    );
    assert!(req["approvals"].as_array().is_none_or(Vec::is_empty));
    assert_eq!(
        c.inspect("{{.State.Status}}"),
        "exited",
        "the container was not touched"
    );
    let writes: Vec<_> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["tier"] != 0)
        .collect();
    assert!(
        writes.is_empty(),
        "no write reached the executor: {writes:?}"
    );
}
