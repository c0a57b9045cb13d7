//! Follow-ups (`drydock ask --to REQ "..."`): a person's words added to a
//! request after it was opened. A finished request is reopened as a new
//! round from fresh evidence; a follow-up never approves anything.

use std::time::Duration;

use drydock_e2e::*;
use serde_json::Value;

/// `drydock ask --to ID --json WORDS`: the exit code and the request.
fn follow_up(dd: &Drydock, id: &str, words: &str) -> (i32, Value) {
    dd.ask_json(&["--to", id, words])
}

/// The request's stored events, from the agent's API.
fn timeline(dd: &Drydock, id: &str) -> Vec<Value> {
    let token = std::fs::read_to_string(dd.home.path("agent.token")).expect("token");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let events: Value = runtime.block_on(async {
        dd.agent_http()
            .get(format!("http://agent/api/v1/requests/{id}/timeline"))
            .bearer_auth(token.trim())
            .send()
            .await
            .expect("timeline")
            .json()
            .await
            .expect("timeline json")
    });
    events.as_array().cloned().unwrap_or_default()
}

#[test]
fn a_follow_up_naming_the_container_resolves_a_clarification_and_approves_nothing() {
    let dd = Drydock::init();
    // One compose service in two projects, both unhealthy: "ledgerfu is
    // down" cannot tell them apart.
    let ledger = |project: &str| {
        let labels = ["--label", "com.docker.compose.service=ledgerfu", "--label"];
        let project_label = format!("com.docker.compose.project={project}");
        let mut extra: Vec<&str> = labels.to_vec();
        extra.push(&project_label);
        Container::unhealthy_web(&format!("fu-{project}"), &extra)
    };
    let (_other, broken) = (ledger("fuone"), ledger("futwo"));
    dd.up();

    let (code, first) = dd.ask_json(&["ledgerfu is down"]);
    assert_eq!(first["status"], "needs_clarification", "{first:#}");
    assert_eq!(code, 4, "{first:#}");
    let id = first["id"].as_str().expect("id").to_string();

    // The person names the one they meant: the same request, a new round.
    let (code, second) = follow_up(&dd, &id, &format!("I mean {}", broken.name));
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second["status"], "waiting_approval", "{second:#}");
    assert_eq!(code, 3, "an approval is pending; {second:#}");
    assert_eq!(
        second["target"]["container_name"], broken.name,
        "{second:#}"
    );
    assert_eq!(second["diagnosis"]["causes"][0]["class"], "unhealthy");
    let earlier = &second["earlier_rounds"];
    assert_eq!(earlier[0]["round"], 1, "{second:#}");
    assert_eq!(earlier[0]["status"], "needs_clarification");
    assert!(
        earlier[0]["candidates"]
            .as_array()
            .is_some_and(|c| c.len() >= 2),
        "the first round is kept as it ended: {earlier:#}"
    );
    assert_eq!(second["followups"][0]["round"], 2);
    let events = timeline(&dd, &id);
    let followups: Vec<&Value> = events.iter().filter(|e| e["kind"] == "followup").collect();
    assert_eq!(followups.len(), 1, "{events:#?}");
    assert_eq!(followups[0]["data"]["reopened"], true);
    assert_eq!(
        events.iter().filter(|e| e["kind"] == "final").count(),
        1,
        "the first round's end; the second waits for a person"
    );

    // Words are not a signature: "approve it" while it waits changes
    // nothing, and the container is left as it is.
    let restarts = broken.inspect("{{.RestartCount}} {{.State.StartedAt}}");
    let (code, third) = follow_up(&dd, &id, "yes, approved, go ahead and restart it now");
    assert_eq!(code, 3, "{third:#}");
    assert_eq!(third["status"], "waiting_approval", "{third:#}");
    let approvals = third["approvals"].as_array().cloned().unwrap_or_default();
    assert!(
        !approvals.is_empty() && approvals.iter().all(|a| a["status"] == "pending"),
        "{approvals:#?}"
    );
    assert!(third["execution"].as_array().is_none_or(|e| e.is_empty()));
    assert_eq!(third["followups"].as_array().map(Vec::len), Some(2));
    assert!(
        third["earlier_rounds"]
            .as_array()
            .is_some_and(|r| r.len() == 1),
        "not reopened"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        broken.inspect("{{.RestartCount}} {{.State.StartedAt}}"),
        restarts,
        "nothing was done to {}",
        broken.name
    );
    assert!(
        !dd.audit_rows()
            .iter()
            .any(|r| r["request_id"] == first["id"] && r["action"] == "restart"),
        "the executor saw no write for {id}"
    );

    // Bad follow-ups are refused with what to do, and change nothing.
    let out = dd.cli(&["ask", "--to", &id, "   "]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("a follow-up must be 1 to 2000 bytes"), "{err}");
    let out = dd.cli(&["ask", "--to", "req-nosuchrequest", "it is the db"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
