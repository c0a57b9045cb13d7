//! The executor killed (`kill -9`) in an update's health window, on the
//! real engine and Debian's registry: started again, it finds the swap by
//! its containers' names and finishes it as the update promised. A new
//! image that holds through the window again is kept and the old container
//! removed; one that turns unhealthy is replaced by the old container, with
//! its data and its tag. Each outcome is an audit row.

use std::process::Command;
use std::time::Duration;

use drydock_e2e::approvals::update_approval;
use drydock_e2e::*;
use drydock_proto::pb;
use serde_json::Value;

use crate::update::{file_size, inspect, wait, with_registry, Project, Registry, SERVE, UNHEALTHY};

/// The swap's aside container, once the new one holds the name.
fn aside(project: &Project) -> String {
    docker_ok(&[
        "ps",
        "-a",
        "-q",
        "--filter",
        &format!("name={}-drydock-old-", project.api_name()),
    ])
}

/// Update `container` to `digest` and kill the executor as soon as the
/// old container is set aside (the new one holds the name, in its window).
async fn kill_in_window(
    dd: &Drydock,
    exec: ExecutorProcess,
    request_id: &str,
    project: &Project,
    container: &str,
    digest: &str,
    from: &str,
) {
    let key = dd.approver_key();
    let approval = update_approval(
        &key,
        request_id,
        container,
        &project.tag,
        digest,
        from,
        None,
    );
    let mut client = exec.agent_client(dd).await;
    let request = pb::UpdateRequest {
        request_id: request_id.to_string(),
        container: container.to_string(),
        digest: digest.to_string(),
        approval: Some(approval),
        grant: None,
        to_tag: String::new(),
        built_commit: String::new(),
    };
    let call = tokio::spawn(async move { client.update_container(request).await });
    wait("the swap", Duration::from_secs(60), || {
        !aside(project).is_empty()
    });
    let killed = Command::new("kill")
        .args(["-KILL", &exec.pid().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    let answer = call.await.expect("the call's task");
    assert!(
        answer.is_err(),
        "no answer from a killed executor: {answer:?}"
    );
    drop(exec);
}

/// The rows of `request_id` after its intent: the "outcome unknown" row
/// of the start, then what the finished swap did.
fn outcome_rows(dd: &Drydock, request_id: &str) -> Vec<Value> {
    dd.audit_rows()
        .into_iter()
        .filter(|r| r["request_id"] == request_id && r["decision"] != "intent")
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_executor_killed_in_an_update_s_window_finishes_it_when_it_starts_again() {
    let registry = Registry::start();
    let mut project = Project::new("update-resume", &registry);
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{}_*", project.name)]);
    let creds = dd.home.path("registry.json");
    drydock_daemon::files::write_new(&creds, br#"{"username": "ci", "password": "pw"}"#, true)
        .expect("write credentials");
    let creds = creds.display().to_string();
    let (host, prefix) = (registry.host(), project.name.clone());
    let config = |y: String| with_registry(y, &host, &prefix, &creds);
    let (v1, _, old) = project.v1_running_with_data();
    let (v2, v2_digest) = project.push("2", SERVE);
    project.only_in_registry(&v2, &v1);

    // v2 holds: the executor, back, holds it again and keeps it.
    let exec = ExecutorProcess::start(&dd, config);
    kill_in_window(&dd, exec, "req-resume-v2", &project, &old, &v2_digest, &v1).await;
    let exec = ExecutorProcess::start(&dd, config);
    wait("the kept update's row", Duration::from_secs(60), || {
        outcome_rows(&dd, "req-resume-v2").len() >= 2
    });
    let rows = outcome_rows(&dd, "req-resume-v2");
    assert_eq!(rows[0]["decision"], "unknown", "{rows:#?}");
    let row = rows[1].clone();
    assert_eq!(row["action"], "update", "{row}");
    assert_eq!(row["decision"], "allowed", "{row}");
    assert!(
        row["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("was kept"),
        "{row}"
    );
    let new = project.api_id();
    assert_ne!(new, old);
    assert_eq!(row["container_id"], new.as_str());
    assert_eq!(inspect(&new, "{{.Image}}"), v2);
    assert!(aside(&project).is_empty(), "the old container is gone");
    assert!(
        !docker(&["inspect", &old]).status.success(),
        "the old container is removed"
    );
    assert!(file_size(&new, "/named/marker") > 1_000_000);
    drop(exec);

    // v3 turns unhealthy: the executor, back, puts v2 back with its tag.
    let (v3, v3_digest) = project.push("3", UNHEALTHY);
    project.only_in_registry(&v3, &v2);
    let exec = ExecutorProcess::start(&dd, config);
    kill_in_window(&dd, exec, "req-resume-v3", &project, &new, &v3_digest, &v2).await;
    assert_eq!(
        docker_ok(&["image", "inspect", "-f", "{{.Id}}", &project.tag]),
        v3,
        "the killed update had moved the tag"
    );
    let _exec = ExecutorProcess::start(&dd, config);
    wait("the restored update's row", Duration::from_secs(90), || {
        outcome_rows(&dd, "req-resume-v3").len() >= 2
    });
    let row = outcome_rows(&dd, "req-resume-v3").remove(1);
    assert_eq!(row["action"], "update", "{row}");
    assert_eq!(row["decision"], "error", "{row}");
    let reason = row["reason"].as_str().unwrap_or_default();
    assert!(
        reason.contains("unhealthy") && reason.contains("put back as it was"),
        "{row}"
    );
    assert_eq!(project.api_id(), new, "v2's container has its name back");
    assert_eq!(inspect(&new, "{{.State.Running}}"), "true");
    assert_eq!(inspect(&new, "{{.Image}}"), v2);
    assert_eq!(
        docker_ok(&["image", "inspect", "-f", "{{.Id}}", &project.tag]),
        v2,
        "the tag names v2 again"
    );
    assert!(file_size(&new, "/named/marker") > 1_000_000);
    let leftovers = docker_ok(&[
        "ps",
        "-a",
        "-q",
        "--filter",
        &format!("name={}-drydock", project.api_name()),
    ]);
    assert!(leftovers.is_empty(), "no swap container left: {leftovers}");
    dd.assert_audit_intact();
}
