//! Two people for what matters: `approvals.required: {restart: 2}` on the
//! executor. One approver's signature leaves the approval pending (the
//! CLI says who else must sign, the console shows who has), the same
//! approver cannot sign twice, a second approver's signature over the same
//! claims lets the restart run, and the audit row names both. Sent
//! straight to the executor, one signature is refused and audited.

use drydock_e2e::approvals::{claims, sign};
use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_that_needs_two_approvers_waits_for_the_second() {
    drydock_daemon::tls::install_crypto_provider();
    let c = Container::unhealthy_web("quorum", &[]);
    let other = Container::unhealthy_web("quorum2", &[]);
    let dd = Drydock::init();
    // A second approver, bob, with a key of his own.
    let bob = drydock_proto::approval::generate_signing_key();
    let bob_key = dd.home.path("bob.key");
    drydock_daemon::files::write_new(
        &bob_key,
        drydock_proto::approval::format_secret_key(&bob).as_bytes(),
        true,
    )
    .expect("bob's key");
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor.yaml");
    let config = config.replace(
        "approvers:\n",
        &format!(
            "approvals:\n  required: {{restart: 2}}\napprovers:\n  - id: bob\n    public_key: \"{}\"\n",
            drydock_proto::approval::format_public_key(&bob.verifying_key())
        ),
    );
    std::fs::write(dd.home.executor_config(), config).expect("write executor.yaml");
    dd.up();

    // Straight to the executor: one signature is not enough.
    let mut exec = dd.executor_as_agent().await;
    let one = sign(
        &claims("req-quorum-one", WriteAction::Restart, &other.id()),
        &dd.approver_key(),
        "local-operator",
    );
    let e = exec
        .restart_container(pb::WriteRequest {
            request_id: "req-quorum-one".into(),
            container: other.name.clone(),
            approval: Some(one),
            ..Default::default()
        })
        .await
        .expect_err("one of two approvers");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("needs 2 approvers"), "{e:?}");
    let row = dd
        .audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["request_id"] == "req-quorum-one")
        .expect("the refusal's audit row");
    assert_eq!(row["decision"], "denied", "{row:#}");

    // The first approver (`ask --yes`) signs; the approval stays pending.
    let started = c.inspect("{{.State.StartedAt}}");
    let (code, req) = dd.ask_json(&["--yes", "--container", &c.name, "it is unhealthy"]);
    assert_eq!(code, 3, "waits for another approver: {req:#}");
    assert_eq!(req["status"], "waiting_approval", "{req:#}");
    let approval = &req["approvals"][0];
    let id = approval["id"].as_str().expect("an approval id").to_string();
    assert_eq!(approval["required"], 2, "{approval:#}");
    assert_eq!(approval["key_id"], "local-operator", "{approval:#}");
    assert!(
        approval.get("signature").is_none(),
        "no signature leaves the agent"
    );
    assert_eq!(
        c.inspect("{{.State.StartedAt}}"),
        started,
        "nothing ran yet"
    );
    let again = dd.cli(&["approve", "--yes", &id]);
    assert!(
        !again.status.success(),
        "the same approver twice: {again:?}"
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("signed this approval already"),
        "{again:?}"
    );
    let listed = dd.cli(&["approvals"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("2 approvers must sign; signed by local-operator"),
        "the pending list says who signed: {listed}"
    );

    // bob signs the same approval: it runs.
    let cli = std::fs::read_to_string(dd.home.cli_config()).expect("cli.yaml");
    std::fs::write(
        dd.home.cli_config(),
        cli.replace("id: local-operator", "id: bob")
            .replace("key: approver.key", &format!("key: {}", bob_key.display())),
    )
    .expect("cli.yaml as bob");
    let out = dd.cli(&["approve", "--yes", &id]);
    assert!(out.status.success(), "{out:?}\n{}", dd.agent_log());
    let started_wait = std::time::Instant::now();
    loop {
        let out = dd.cli(&["show", "--json", req["id"].as_str().unwrap_or_default()]);
        let now: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        let status = now["status"].as_str().unwrap_or_default().to_string();
        if status != "waiting_approval" && status != "executing" && status != "verifying" {
            assert_eq!(status, "completed", "{now:#}\n{}", dd.agent_log());
            break;
        }
        assert!(
            started_wait.elapsed() < std::time::Duration::from_secs(120),
            "the request did not end: {now:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    assert_ne!(c.inspect("{{.State.StartedAt}}"), started, "restarted");
    let rows = dd.audit_rows();
    assert!(
        rows.iter().any(|r| r["action"] == "restart"
            && r["decision"] == "allowed"
            && r["key_id"] == "local-operator,bob"),
        "{rows:#?}"
    );
    dd.assert_audit_intact();
}
