//! `drydock update` end to end, on the real daemons and Debian's registry:
//! the check finds the update (CLI, webhook), a person proposes it in the
//! console (Chromium), sees the tag, version and digest on the approval
//! card and approves it there; it is pulled, held and verified. A broken
//! newer image is put
//! back by the executor even though the agent was killed (`kill -9`) in
//! the health window, and the agent, back up, reports that the update was
//! not kept instead of calling it done.

use std::process::{Command, Stdio};
use std::time::Duration;

use drydock_e2e::*;
use serde_json::Value;

use crate::ui::{Browser, Console};
use crate::update::{file_size, inspect, wait, with_registry, Project, Registry, SERVE, UNHEALTHY};
use crate::webhooks::Receiver;

/// A container removed when the test ends, however it ends.
pub(crate) struct Removed(pub(crate) String);

impl Drop for Removed {
    fn drop(&mut self) {
        let _ = docker(&["rm", "-f", &self.0]);
    }
}

fn request(dd: &Drydock, id: &str) -> Value {
    // Its exit code says the request's status; the JSON is what counts.
    let out = dd.cli(&["show", id, "--json"]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_is_found_approved_in_the_console_and_a_failed_one_reported_after_the_agent_died()
{
    drydock_daemon::tls::install_crypto_provider();
    let registry = Registry::start();
    let mut project = Project::new("update-flow", &registry);
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{}_*", project.name)]);
    drydock_e2e::registry::allow_registry(&dd, "flow-pa55word", |y, creds| {
        with_registry(y, &registry.host(), &project.name, creds)
    });
    let hook = Receiver::start();
    let agent = std::fs::read_to_string(dd.home.agent_config()).expect("agent config");
    std::fs::write(
        dd.home.agent_config(),
        format!(
            "{agent}updates:\n  check_every: 0s\nnotify:\n  webhooks:\n    - name: test\n      url: {}\n      events: [update_available]\n",
            hook.url
        ),
    )
    .expect("write agent config");
    let (v1, _, old) = project.v1_running_with_data();
    let (v2, v2_digest) = project.push("2", SERVE);
    project.only_in_registry(&v2, &v1);
    let opted_out = Removed(format!("{}_pinned", project.name));
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &opted_out.0,
        "--label",
        "drydock.update=none",
        &project.tag,
        "serve",
        "--port",
        "8080",
    ]);
    dd.up();

    // The check finds the update (and only once says so), never asks
    // about the container that opted out.
    let out = dd.cli(&["updates", "--check", "--json"]);
    let found: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let updates = found["updates"].as_array().expect("updates");
    assert_eq!(updates.len(), 1, "{found:#}");
    assert_eq!(updates[0]["container"], project.api_name().as_str());
    assert_eq!(updates[0]["registry_digest"], v2_digest.as_str());
    assert_eq!(updates[0]["image_id"], v1.as_str());
    assert_eq!(updates[0]["version"], "1");
    assert_eq!(updates[0]["revision"], "rev-1");
    // The new image's labels, read from its config in the registry: v2 is
    // not on the engine.
    assert_eq!(updates[0]["new_version"], "2", "{found:#}");
    assert_eq!(updates[0]["new_revision"], "rev-2", "{found:#}");
    assert!(updates[0].get("labels_unread").is_none(), "{found:#}");
    assert!(
        found["not_checked"].as_array().is_none_or(|n| n.is_empty()),
        "{found:#}"
    );
    // With the service's checkout in cli.yaml, the list names the
    // commits between the running and the new revision.
    let _repo = dd.source_checkout(
        "api",
        &[
            ("the release that runs", "rev-1"),
            ("serve the new page", "rev-2"),
        ],
    );
    let out = dd.cli(&["updates", "--check"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("drydock update {}", project.api_name()))
            && text.contains("the registry names version 2, revision rev-2,")
            && text.contains("commits between the images (rev-1..rev-2")
            && text.contains("serve the new page")
            && !text.contains("the release that runs"),
        "{text}"
    );
    wait(
        "the update_available webhook",
        Duration::from_secs(30),
        || !hook.events().is_empty(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let sent = hook.events();
    assert_eq!(sent.len(), 1, "one notification per digest: {sent:#?}");
    assert_eq!(sent[0]["event"], "update_available");
    assert_eq!(sent[0]["update"]["registry_digest"], v2_digest.as_str());
    assert_eq!(
        sent[0]["approve_command"],
        format!("drydock update {}", project.api_name()).as_str()
    );
    assert!(!serde_json::to_string(&sent)
        .unwrap()
        .contains("flow-pa55word"));

    // Asked in words: the plan is the update, bound to v2's digest.
    let refused = dd.cli(&["ask", "--diagnose-only", "update the api"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("diagnose_only forbids any change"),
        "{refused:?}"
    );
    // Proposed and approved in the console, from the claims it decoded.
    let console = Console::start(&dd);
    let mut browser = Browser::start().await;
    browser.goto(&console.url).await;
    browser.goto(&format!("{}/#/updates", console.origin)).await;
    browser
        .wait_for("#updates", &v2_digest, Duration::from_secs(20))
        .await;
    let listed = browser
        .run("return document.querySelector('#updates').innerText")
        .await;
    assert!(
        listed
            .as_str()
            .is_some_and(|t| t.contains("version 2, revision rev-2")),
        "the Updates view shows the new image's labels: {listed}"
    );
    browser.click(".update-propose").await;
    // The page follows the request it opened; the approval is decided on
    // the approvals page.
    browser
        .wait_for("h1", "waiting_approval", Duration::from_secs(60))
        .await;
    browser
        .goto(&format!("{}/#/approvals", console.origin))
        .await;
    browser
        .wait_for("#approvals", &v2_digest, Duration::from_secs(60))
        .await;
    let card = browser
        .run("return document.querySelector('#approvals .approval').innerText")
        .await;
    let card = card.as_str().unwrap_or_default().to_string();
    for shown in [
        project.tag.as_str(),
        "version 1",
        v1.as_str(),
        "Will run",
        "version 2",
    ] {
        assert!(card.contains(shown), "the card shows {shown}: {card}");
    }
    let approval_id = browser
        .run("return document.querySelector('#approvals .approval').id.replace('approval-', '')")
        .await
        .as_str()
        .expect("approval id")
        .to_string();
    let button = browser
        .wait_for(
            &format!("#approve-{approval_id}"),
            "Approve",
            Duration::from_secs(10),
        )
        .await;
    browser.press_enter(&button).await;
    let approvals: Value = {
        let started = std::time::Instant::now();
        loop {
            let out = dd.cli(&["requests", "--json"]);
            let list: Value = serde_json::from_slice(&out.stdout).expect("requests");
            let done = list.as_array().and_then(|l| {
                l.iter()
                    .find(|r| r["options"]["update"] == true && r["status"] == "completed")
                    .cloned()
            });
            if let Some(r) = done {
                break r;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the console's update did not complete: {list:#}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    browser.quit().await;
    drop(console);
    let req = request(&dd, approvals["id"].as_str().expect("id"));
    assert_eq!(req["status"], "completed", "{req:#}");
    let step = &req["plan"]["steps"][0];
    assert_eq!(step["action"], "update", "{req:#}");
    assert_eq!(step["update"]["digest"], v2_digest.as_str());
    assert_eq!(step["update"]["from_version"], "1");
    assert_eq!(step["update"]["to_version"], "2");
    assert_eq!(step["from_image_id"], v1.as_str());
    assert!(
        req["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "registry" && e["data"]["update_available"] == true),
        "{req:#}"
    );
    assert_eq!(req["execution"][0]["ok"], true, "{req:#}");
    let new = project.api_id();
    assert_ne!(new, old);
    assert_eq!(req["target"]["container_id"], new.as_str(), "{req:#}");
    assert_eq!(inspect(&new, "{{.Image}}"), v2);
    assert!(file_size(&new, "/named/marker") > 1_000_000);
    let row = dd
        .audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["action"] == "update" && r["decision"] == "allowed")
        .expect("the update's audit row");
    assert!(
        row["result"].as_str().unwrap_or_default().contains(&v2),
        "{row}"
    );

    // Up to date now: nothing to approve.
    let (code, req) = dd.ask_json(&["--container", &project.api_name(), "update the api"]);
    assert_eq!(code, 0, "{req:#}");
    let out = dd.cli(&["updates", "--check", "--json"]);
    let found: Value = serde_json::from_slice(&out.stdout).expect("updates");
    assert_eq!(
        found["updates"],
        serde_json::json!([]),
        "up to date: {found:#}"
    );
    assert!(
        req["outcome"]
            .as_str()
            .unwrap_or_default()
            .contains("is up to date"),
        "{req:#}"
    );

    // v3 fails its healthcheck; the agent is killed in the window.
    let (v3, _) = project.push("3", UNHEALTHY);
    project.only_in_registry(&v3, &v2);
    let mut cli = Command::new(bin("drydock"))
        .args(["update", &project.api_name(), "--yes", "--json"])
        .env("DRYDOCK_HOME", &dd.home.root)
        .env("DRYDOCK_EXECUTOR_BIN", bin("drydock-executor"))
        .env("DRYDOCK_AGENT_BIN", bin("drydock-agent"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("drydock update");
    let intents = || {
        dd.audit_rows()
            .into_iter()
            .filter(|r| r["action"] == "update" && r["decision"] == "intent")
            .collect::<Vec<_>>()
    };
    wait(
        "the second update in flight",
        Duration::from_secs(90),
        || intents().len() == 2,
    );
    let request_id = intents()[1]["request_id"]
        .as_str()
        .expect("request id")
        .to_string();
    let pid = drydock::daemons::read_pid(&dd.home, "drydock-agent").expect("agent pid");
    assert!(Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill")
        .success());
    let _ = cli.kill();
    let _ = cli.wait();
    let outcome = || {
        dd.audit_rows().into_iter().find(|r| {
            r["request_id"] == request_id.as_str()
                && r["action"] == "update"
                && r["decision"] != "intent"
        })
    };
    wait(
        "the executor's own restore",
        Duration::from_secs(90),
        || outcome().is_some(),
    );
    let row = outcome().expect("outcome row");
    assert!(
        row["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("put back as it was"),
        "{row}"
    );
    assert_eq!(project.api_id(), new, "v2's container is back");
    assert_eq!(inspect(&new, "{{.Image}}"), v2);
    assert_eq!(inspect(&new, "{{.State.Running}}"), "true");

    // The agent comes back, resumes the request, and says what happened.
    dd.up();
    wait("the request to end", Duration::from_secs(120), || {
        let r = request(&dd, &request_id);
        matches!(r["status"].as_str(), Some("failed" | "completed"))
    });
    let req = request(&dd, &request_id);
    assert_eq!(req["status"], "failed", "{req:#}");
    let said = req["outcome"].as_str().unwrap_or_default();
    assert!(said.contains("was not kept"), "{said}");
    assert!(said.contains("the image it ran before"), "{said}");
    drop(opted_out);
}
