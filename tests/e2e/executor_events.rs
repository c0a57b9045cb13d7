//! `ContainerEvents`: one container's recent engine events as a typed read,
//! with every refusal path audited; and what the agent makes of them (a
//! `docker stop` told apart from a crash, a question answered without a
//! plan).

use drydock_e2e::*;
use drydock_proto::pb;
use tonic::Code;

fn req(
    request_id: &str,
    container: &str,
    since_unix: i64,
    limit: u32,
) -> pb::ContainerEventsRequest {
    pb::ContainerEventsRequest {
        request_id: request_id.into(),
        container: container.into(),
        since_unix,
        limit,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_events_reads_one_containers_record_and_refuses_the_rest() {
    let dd = Drydock::init();
    let c = Container::run("events", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    docker_ok(&["stop", &c.name]);
    let hidden = Container::run(
        "events-hidden",
        &[
            "--label",
            "io.drydock.role=agent",
            drydock::fixture::FIXTURE_IMAGE,
            "sleep",
        ],
    );
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut client = exec.agent_client(&dd).await;

    let all = client
        .container_events(req("req-events-1", &c.name, 0, 0))
        .await
        .expect("events")
        .into_inner();
    let actions: Vec<&str> = all.events.iter().map(|e| e.action.as_str()).collect();
    for wanted in ["start", "kill", "die", "stop"] {
        assert!(actions.contains(&wanted), "{wanted} in {actions:?}");
    }
    let die = all.events.iter().find(|e| e.action == "die").expect("die");
    assert!(die.has_exit_code && die.exit_code == 137, "{die:?}");
    assert!(
        all.events.iter().all(|e| e.container_id == c.id()),
        "only its own events"
    );
    assert!(!all.truncated);
    let one = client
        .container_events(req("req-events-2", &c.name, 0, 1))
        .await
        .expect("events")
        .into_inner();
    assert_eq!(one.events.len(), 1);
    assert!(one.truncated, "more events than the limit");
    assert_eq!(
        one.events[0].action,
        all.events.last().expect("newest").action,
        "the newest is kept"
    );

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    let refusals = [
        (
            req("req-events-3", &c.name, 0, 257),
            Code::InvalidArgument,
            "limit may be at most 256",
        ),
        (
            req("req-events-4", &c.name, now + 600, 0),
            Code::InvalidArgument,
            "in the future",
        ),
        (
            req("req-events-5", &c.name, now - 8 * 86_400, 0),
            Code::InvalidArgument,
            "days back",
        ),
        (
            req("req-events-6", "a;rm -rf /", 0, 0),
            Code::InvalidArgument,
            "container must be",
        ),
        (
            req("req events 7", &c.name, 0, 0),
            Code::InvalidArgument,
            "request_id must be",
        ),
        (
            req("req-events-8", "dd-no-such-container", 0, 0),
            Code::NotFound,
            "not found",
        ),
        (
            req("req-events-9", &hidden.name, 0, 0),
            Code::NotFound,
            "not found",
        ),
    ];
    for (r, code, needle) in refusals {
        let id = r.request_id.clone();
        let err = client.container_events(r).await.expect_err(&id);
        assert_eq!(err.code(), code, "{id}: {err:?}");
        assert!(err.message().contains(needle), "{id}: {}", err.message());
    }
    let rows: Vec<_> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["action"] == "events")
        .collect();
    assert_eq!(rows.len(), 9, "every call audited, refusals too: {rows:#?}");
    assert_eq!(
        rows.iter().filter(|r| r["decision"] == "allowed").count(),
        2,
        "{rows:#?}"
    );
    drop(exec);
}

#[test]
fn a_docker_stop_is_told_from_a_crash_and_a_question_gets_an_answer_not_a_plan() {
    let dd = Drydock::init();
    let stopped = Container::run(
        "events-stopped",
        &[drydock::fixture::FIXTURE_IMAGE, "sleep"],
    );
    docker_ok(&["stop", &stopped.name]);
    dd.up();
    let question = format!("why did {} stop?", stopped.name);
    let (code, req) = dd.ask_json(&[&question]);
    assert_eq!(code, 0, "{req:#}");
    assert_eq!(req["status"], "completed", "{req:#}");
    assert!(req["plan"].is_null(), "a question gets no plan: {req:#}");
    let cause = &req["diagnosis"]["causes"][0];
    assert_eq!(cause["class"], "stopped", "{req:#}");
    assert!(
        cause["reason"]
            .as_str()
            .is_some_and(|r| r.contains("was stopped at")),
        "the engine's kill event says who stopped it: {cause:#}"
    );
    let summary = req["diagnosis"]["summary"].as_str().unwrap_or("");
    assert!(
        summary.contains("Recent events:") && summary.contains("died (exit 137)"),
        "{summary}"
    );
    assert!(
        req["outcome"]
            .as_str()
            .is_some_and(|o| o.contains("This was a question")),
        "{req:#}"
    );
    assert!(
        req["evidence"].as_array().is_some_and(|e| e
            .iter()
            .any(|e| e["type"] == "events" && e["source"] == "ContainerEvents")),
        "the events are evidence"
    );
}
