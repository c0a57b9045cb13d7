//! Watching, automation grants and notifications, on the real engine with
//! real daemons: a watch request repaired under a grant with no `ask`, one
//! outside the grant left to a person, the executor's own grant checks from
//! a client holding the agent's certificate, a flapping container, and an
//! agent restarted mid-watch.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::grant::{self, GrantClaims, GrantScope, GRANT_KIND, GRANT_VERSION_NO_HOST};
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

use crate::webhooks::Receiver;

const WEBHOOK_SECRET: &str = "test-webhook-secret";

pub(crate) fn edit(path: &std::path::Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read config");
    assert!(text.contains(from), "{} has no `{from}`", path.display());
    std::fs::write(path, text.replace(from, to)).expect("write config");
}

/// A home that watches only containers named `prefix-*`, with the executor's
/// automation on, the agent in `mode`, a short debounce and a webhook.
pub(crate) fn watching_home(prefix: &str, mode: &str, hook: &Receiver) -> Drydock {
    let dd = Drydock::init_options(|o| {
        o.targets = vec![format!("{prefix}-*")];
        o.watch = true;
    });
    edit(
        &dd.home.executor_config(),
        "automation:\n  enabled: false",
        "automation:\n  enabled: true",
    );
    std::fs::write(dd.home.path("webhook.secret"), WEBHOOK_SECRET).expect("secret");
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(
        dd.home.path("webhook.secret"),
        std::fs::Permissions::from_mode(0o600),
    )
    .expect("chmod");
    edit(
        &dd.home.path("agent.yaml"),
        "watch:\n  enabled: true\n  mode: notify\n",
        &format!(
            "watch:\n  enabled: true\n  mode: {mode}\n  debounce: 2s\n  cooldown: 60s\n\
             notify:\n  webhooks:\n    - name: test\n      url: {}\n      secret_file: webhook.secret\n",
            hook.url
        ),
    );
    dd
}

pub(crate) fn requests(dd: &Drydock) -> Vec<Value> {
    let out = dd.cli(&["requests", "--json"]);
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

fn watch_requests_for(dd: &Drydock, name: &str) -> Vec<Value> {
    requests(dd)
        .into_iter()
        .filter(|r| r["source"] == "watch" && r["options"]["container"] == name)
        .collect()
}

pub(crate) fn wait_request(
    dd: &Drydock,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let started = Instant::now();
    loop {
        if let Some(r) = requests(dd).into_iter().find(|r| pred(r)) {
            return r;
        }
        assert!(
            started.elapsed() < timeout,
            "no request {what} within {timeout:?}; requests: {:#?}\nagent log:\n{}",
            requests(dd),
            dd.agent_log()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub(crate) fn grant_id_of(out: &std::process::Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "grant create failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .rev()
        .find(|l| l.starts_with("grt-"))
        .unwrap_or_else(|| panic!("no grant id printed: {stdout}"))
        .trim()
        .to_string()
}

/// `drydock grant create --action restart --name GLOB --max MAX --expires 1h
/// --yes [EXTRA...]`, through the real CLI; returns the grant id.
pub(crate) fn restart_grant(dd: &Drydock, glob: &str, max: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "grant",
        "create",
        "--action",
        "restart",
        "--name",
        glob,
        "--max",
        max,
        "--expires",
        "1h",
        "--yes",
    ];
    args.extend_from_slice(extra);
    grant_id_of(&dd.cli(&args))
}

fn hmac_ok(headers: &BTreeMap<String, String>, body: &str) -> bool {
    let mac = drydock_agent::notify::hmac_sha256(WEBHOOK_SECRET.as_bytes(), body.as_bytes());
    headers.get("x-drydock-signature") == Some(&format!("sha256={}", hex::encode(mac)))
}

#[test]
fn an_unhealthy_container_in_scope_is_repaired_under_a_grant_with_no_ask() {
    let hook = Receiver::start();
    let dd = watching_home("dd-granted", "repair", &hook);
    dd.up();
    let grant = restart_grant(&dd, "dd-granted-*", "1/1h", &["--class", "unhealthy"]);
    let list = dd.cli(&["grant", "list", "--json"]);
    let listed: Value = serde_json::from_slice(&list.stdout).expect("grant list json");
    assert_eq!(listed["grants"][0]["status"], "active", "{listed:#}");

    let web = Container::unhealthy_web("granted", &[]);
    let done = wait_request(&dd, "repaired", Duration::from_secs(120), |r| {
        r["source"] == "watch"
            && r["options"]["container"] == web.name
            && r["status"] == "completed"
    });
    assert_eq!(web.health(), "healthy");
    let execution = &done["execution"][0];
    assert_eq!(execution["grant_id"], grant.as_str(), "{done:#}");
    assert_eq!(execution["ok"], true);
    assert!(
        done["approvals"]
            .as_array()
            .is_some_and(|a| a.iter().all(|a| a["grant_id"] == grant.as_str())),
        "{done:#}"
    );
    let id = done["id"].as_str().expect("id").to_string();
    for event in ["opened", "executed", "recovered"] {
        hook.wait_for(event, &id, Duration::from_secs(30));
    }
    let order: Vec<String> = hook
        .events()
        .iter()
        .filter(|e| e["request_id"] == id.as_str())
        .map(|e| e["event"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        order,
        ["opened", "executed", "recovered"],
        "no needs_approval under a grant"
    );
    for (headers, body) in hook.got.lock().expect("got").iter() {
        assert!(hmac_ok(headers, body), "signed: {headers:?}");
    }
    let executed = hook.wait_for("executed", &id, Duration::from_secs(5));
    assert_eq!(executed["authorised_by"], format!("grant {grant}"));
    // The executor recorded the use in the chain, naming the grant.
    let writes = dd.write_rows();
    assert!(
        writes
            .iter()
            .any(|r| r["decision"] == "intent" && r["approval_id"] == format!("{grant}/use-1")),
        "{writes:#?}"
    );
    dd.assert_audit_intact();
}

#[test]
fn outside_the_grant_a_watch_request_waits_for_a_person() {
    let hook = Receiver::start();
    let dd = watching_home("dd-ungranted", "repair", &hook);
    dd.up();
    // A grant for other containers only.
    restart_grant(&dd, "dd-ungranted-other-*", "1/1h", &[]);
    let web = Container::unhealthy_web("ungranted", &[]);
    let waiting = wait_request(&dd, "waiting for approval", Duration::from_secs(90), |r| {
        r["source"] == "watch"
            && r["options"]["container"] == web.name
            && r["status"] == "waiting_approval"
    });
    let id = waiting["id"].as_str().expect("id").to_string();
    let needs = hook.wait_for("needs_approval", &id, Duration::from_secs(30));
    let cmd = needs["approve_command"].as_str().unwrap_or("");
    assert!(cmd.starts_with("drydock approve apr-"), "{needs:#}");
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(web.inspect("{{.RestartCount}}"), "0", "left untouched");
    assert_eq!(web.health(), "unhealthy");
    assert!(dd.write_rows().is_empty(), "nothing was written");
    // The command in the notification works as given.
    let approval = cmd.trim_start_matches("drydock approve ").to_string();
    let out = dd.cli(&["approve", &approval, "--yes"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_request(&dd, "completed", Duration::from_secs(90), |r| {
        r["id"] == id.as_str() && r["status"] == "completed"
    });
}

/// A fixture container that crashed with `code`, once it has exited.
fn exited_with(test: &str, code: &str) -> Container {
    let c = Container::run(
        test,
        &[drydock::fixture::FIXTURE_IMAGE, "crash", "--code", code],
    );
    c.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    c
}

/// A grant signed with the home's approver key: a restart and start grant
/// over `dd-grpcgrant-*`, one use per container an hour, as `change` makes
/// it.
pub(crate) fn signed_grant(dd: &Drydock, change: impl FnOnce(&mut GrantClaims)) -> pb::Grant {
    let key = dd
        .home
        .load_cli_config()
        .expect("cli config")
        .signing_key()
        .expect("key");
    let now = approvals::unix_now();
    let mut claims = GrantClaims {
        version: GRANT_VERSION_NO_HOST,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions: vec![WriteAction::Restart, WriteAction::Start],
        scope: GrantScope {
            names: vec!["dd-grpcgrant-*".into()],
            ..Default::default()
        },
        classes: vec![],
        max_per_container: 1,
        window_secs: 3600,
        max_total: 5,
        issued_at: now - 10,
        expires_at: now + 3600,
        host: None,
        hours: None,
    };
    change(&mut claims);
    let bytes = claims.encode();
    pb::Grant {
        signature: grant::sign(&bytes, &key),
        claims: bytes,
        key_id: drydock::home::DEFAULT_APPROVER_ID.into(),
    }
}

fn with_grant(container: &str, grant: pb::Grant) -> pb::WriteRequest {
    pb::WriteRequest {
        request_id: "req-grant-test".into(),
        container: container.into(),
        grant: Some(grant),
        fault_class: "crash".into(),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_executor_enforces_grants_whatever_the_caller_holds() {
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-grpcgrant-*".into()]);
    let revocations = dd.home.path("state/revoked-grants");
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace(
            "automation:\n  enabled: false",
            "automation:\n  enabled: true",
        )
    });
    let mut c = exec.agent_client(&dd).await;
    let refused = |r: Result<tonic::Response<pb::WriteResponse>, tonic::Status>, says: &str| {
        let s = r.expect_err("refused");
        assert_eq!(s.code(), Code::FailedPrecondition, "{s:?}");
        assert!(s.message().contains(says), "{says}: {}", s.message());
    };

    // A healthy container: the grant is valid, the state is not.
    let healthy = Container::run("grpcgrant", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    refused(
        c.restart_container(with_grant(&healthy.name, signed_grant(&dd, |_| {})))
            .await,
        "precondition failed",
    );
    // A crashed container outside the grant's scope (but inside the
    // executor's): not covered.
    let crashed = exited_with("grpcgrant", "3");
    refused(
        c.restart_container(with_grant(
            &crashed.name,
            signed_grant(&dd, |g| {
                g.scope.names = vec!["dd-grpcgrant-nothing-*".into()]
            }),
        ))
        .await,
        "outside grant",
    );
    // Widened after signing, expired, signed as an approval: refused.
    let mut widened = signed_grant(&dd, |_| {});
    let mut claims: GrantClaims = serde_json::from_slice(&widened.claims).expect("claims");
    claims.max_per_container = 100;
    widened.claims = claims.encode();
    refused(
        c.restart_container(with_grant(&crashed.name, widened))
            .await,
        "signature",
    );
    refused(
        c.restart_container(with_grant(
            &crashed.name,
            signed_grant(&dd, |g| {
                g.issued_at -= 7200;
                g.expires_at -= 7200;
            }),
        ))
        .await,
        "expired",
    );
    let approval_claims = approvals::claims("req-grant-test", WriteAction::Restart, &crashed.id());
    let key = dd
        .home
        .load_cli_config()
        .expect("cfg")
        .signing_key()
        .expect("key");
    let as_approval = approvals::sign(&approval_claims, &key, drydock::home::DEFAULT_APPROVER_ID);
    refused(
        c.restart_container(with_grant(
            &crashed.name,
            pb::Grant {
                claims: as_approval.claims,
                signature: as_approval.signature,
                key_id: as_approval.key_id,
            },
        ))
        .await,
        "grant rejected",
    );

    // The real thing: a crashed container in scope is restarted once; it
    // crashes again, and the second restart in the window is refused.
    let good = signed_grant(&dd, |_| {});
    let id: GrantClaims = serde_json::from_slice(&good.claims).expect("claims");
    let answer = c
        .restart_container(with_grant(&crashed.name, good.clone()))
        .await
        .expect("first use");
    assert_eq!(answer.into_inner().grant_id, id.grant_id);
    crashed.wait_for("exited again", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited" && c.inspect("{{.RestartCount}}") != "0"
            || c.inspect("{{.State.StartedAt}}") != c.inspect("{{.Created}}")
                && c.inspect("{{.State.Status}}") == "exited"
    });
    refused(
        c.restart_container(with_grant(&crashed.name, good.clone()))
            .await,
        "uses per container",
    );
    // Revoked without a restart: the list is read at every use.
    let another = exited_with("grpcgrant", "4");
    let out = std::process::Command::new(bin("drydock-executor"))
        .args(["grant", "revoke", "--config"])
        .arg(&exec.config)
        .arg(&id.grant_id)
        .output()
        .expect("revoke");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(std::fs::read_to_string(&revocations)
        .unwrap_or_default()
        .contains(&id.grant_id));
    refused(
        c.restart_container(with_grant(&another.name, good)).await,
        "revoked",
    );

    // Every refusal and the use are in the chain, naming the grant.
    let rows = dd.audit_rows();
    let grant_rows: Vec<&Value> = rows
        .iter()
        .filter(|r| r["action"] == "restart" && r["caller"] == "drydock-agent")
        .collect();
    assert!(
        grant_rows
            .iter()
            .filter(|r| r["decision"] == "denied")
            .count()
            >= 7,
        "{grant_rows:#?}"
    );
    assert!(
        grant_rows
            .iter()
            .any(|r| r["decision"] == "intent"
                && r["approval_id"] == format!("{}/use-1", id.grant_id))
    );
    dd.assert_audit_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn automation_off_refuses_every_grant_and_events_show_only_visible_containers() {
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-evvisible-*".into()]);
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut c = exec.agent_client(&dd).await;
    let mut stream = c
        .watch_events(pb::WatchEventsRequest {
            request_id: "req-events".into(),
            since_unix_nanos: 0,
        })
        .await
        .expect("stream")
        .into_inner();
    let hidden = Container::run(
        "evhidden",
        &[drydock::fixture::FIXTURE_IMAGE, "crash", "--code", "7"],
    );
    let visible = Container::run(
        "evvisible",
        &[drydock::fixture::FIXTURE_IMAGE, "crash", "--code", "5"],
    );
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(2), stream.message()).await {
            Ok(Ok(Some(e))) => {
                let done = e.action == "die" && e.name == visible.name;
                seen.push(e);
                if done {
                    break;
                }
            }
            Ok(_) => break,
            Err(_) => {}
        }
    }
    let die = seen
        .iter()
        .find(|e| e.action == "die" && e.name == visible.name)
        .unwrap_or_else(|| panic!("no die event for {}: {seen:?}", visible.name));
    assert!(die.has_exit_code && die.exit_code == 5, "{die:?}");
    assert_eq!(die.container_id, visible.id());
    assert!(
        seen.iter()
            .all(|e| e.name != hidden.name && e.container_id != hidden.id()),
        "a hidden container's events leaked: {seen:?}"
    );
    visible.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let s = c
        .restart_container(with_grant(
            &visible.name,
            signed_grant(&dd, |g| {
                g.scope.names = vec!["dd-evvisible-*".into()];
            }),
        ))
        .await
        .expect_err("automation is off");
    assert_eq!(s.code(), Code::FailedPrecondition);
    assert!(s.message().contains("automation is off"), "{}", s.message());
}

#[test]
fn a_flapping_container_yields_one_request_and_a_crash_loop_gets_advice() {
    let hook = Receiver::start();
    let dd = watching_home("dd-flapping", "repair", &hook);
    dd.up();
    restart_grant(&dd, "dd-flapping-*", "5/1h", &[]);
    // Docker restarts it on every crash: die, start, die, start...
    let flapping = Container::run(
        "flapping",
        &[
            "--restart",
            "on-failure:6",
            drydock::fixture::FIXTURE_IMAGE,
            "crash",
            "--code",
            "2",
            "--delay-ms",
            "300",
        ],
    );
    let first = wait_request(&dd, "for the crash loop", Duration::from_secs(90), |r| {
        r["source"] == "watch" && r["options"]["container"] == flapping.name
    });
    // Let it flap on; the debounce, the open request and the cooldown
    // fold every later trigger into that one request.
    std::thread::sleep(Duration::from_secs(12));
    let all = watch_requests_for(&dd, &flapping.name);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(first["options"]["diagnose_only"], true, "{first:#}");
    assert!(
        first["message"]
            .as_str()
            .unwrap_or("")
            .contains("crash-looping"),
        "{first:#}"
    );
    assert!(
        dd.write_rows().is_empty(),
        "a crash loop gets advice, never a restart"
    );
}

#[test]
fn an_agent_restarted_mid_watch_resumes_without_missing_or_duplicating() {
    let hook = Receiver::start();
    let dd = watching_home("dd-resume", "notify", &hook);
    // A first crash waits `restart_grace`: long enough here to kill the
    // agent while it waits.
    edit(
        &dd.home.path("agent.yaml"),
        "debounce: 2s",
        "debounce: 6s\n  restart_grace: 6s",
    );
    dd.up();
    // Let the watcher journal a first event (proof the stream is open).
    let probe = Container::run("resume", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    let started = Instant::now();
    while !dd.agent_log().contains("watching container events") {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            dd.agent_log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    drop(probe);
    // A crash, then the agent dies while its trigger is being debounced.
    let crashed = exited_with("resume", "9");
    std::thread::sleep(Duration::from_secs(2));
    let pid = drydock::daemons::read_pid(&dd.home, "drydock-agent").expect("agent pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill agent");
    // Another crash while the agent is down.
    let while_down = exited_with("resume", "8");
    std::thread::sleep(Duration::from_secs(1));
    dd.up();
    for c in [&crashed, &while_down] {
        wait_request(&dd, "after the restart", Duration::from_secs(90), |r| {
            r["source"] == "watch" && r["options"]["container"] == c.name
        });
    }
    std::thread::sleep(Duration::from_secs(8));
    for c in [&crashed, &while_down] {
        let n = watch_requests_for(&dd, &c.name).len();
        assert_eq!(n, 1, "{}: {n} requests", c.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firing_alerts_open_requests_and_webhooks_retry_redact_and_speak_slack() {
    let flaky = Receiver::failing_first(2);
    let slack = Receiver::start();
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-alerted-*".into()]);
    edit(
        &dd.home.path("agent.yaml"),
        "watch:\n  enabled: false\n  mode: notify\n",
        &format!(
            "watch:\n  enabled: false\n  mode: notify\n\
             notify:\n  webhooks:\n    - name: flaky\n      url: {}\n      events: [opened]\n\
             \x20   - name: chat\n      url: {}\n      format: slack\n",
            flaky.url, slack.url
        ),
    );
    dd.up();
    let web = Container::unhealthy_web("alerted", &[]);
    let token = std::fs::read_to_string(dd.home.path("agent.token")).expect("token");
    let body = serde_json::json!({
        "version": "4",
        "status": "firing",
        "receiver": "drydock",
        "alerts": [
            {"status": "firing", "labels": {"alertname": "WebDown", "container": web.name},
             "annotations": {"summary": "web is down, password=hunter2"}},
            {"status": "resolved", "labels": {"alertname": "WebDown", "container": web.name}},
            {"status": "firing", "labels": {"alertname": "DiskFull", "instance": "host-1"}},
            {"status": "firing", "labels": {"alertname": "SvcDown", "service": "dd-alerted-svc"}},
            {"status": "firing", "labels": {"alertname": "SvcDown", "service": "dd-alerted-svc"}}
        ]
    });
    let http = dd.agent_http();
    let unauthenticated = http
        .post("http://agent/api/v1/alerts")
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(unauthenticated.status().as_u16(), 401);
    let answer: Value = http
        .post("http://agent/api/v1/alerts")
        .bearer_auth(token.trim())
        .json(&body)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let outcomes = answer["alerts"].as_array().cloned().unwrap_or_default();
    assert_eq!(outcomes.len(), 5, "{answer:#}");
    let id = outcomes[0]["request_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no request: {answer:#}"))
        .to_string();
    assert!(
        outcomes[1]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("only firing"),
        "{answer:#}"
    );
    assert!(
        outcomes[2]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("no target"),
        "{answer:#}"
    );
    // A service-labelled alert opens one request; its repeat is covered.
    assert!(outcomes[3]["request_id"].is_string(), "{answer:#}");
    assert!(outcomes[4]["request_id"].is_null(), "{answer:#}");
    // The same alert again: the open request covers it.
    let again: Value = http
        .post("http://agent/api/v1/alerts")
        .bearer_auth(token.trim())
        .json(&body)
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    assert!(again["alerts"][0]["request_id"].is_null(), "{again:#}");

    let request = wait_request(&dd, "waiting for approval", Duration::from_secs(90), |r| {
        r["id"] == id.as_str() && r["status"] == "waiting_approval"
    });
    assert_eq!(request["source"], "alert");
    assert!(
        !request["message"]
            .as_str()
            .unwrap_or("")
            .contains("hunter2"),
        "{request:#}"
    );
    // The hook fails its first two POSTs: every `opened` delivery is still
    // delivered, retried with backoff (2 s, 4 s), and the delivery log
    // accounts for every attempt the receiver saw.
    flaky.wait_for("opened", &id, Duration::from_secs(20));
    let started = Instant::now();
    let rows = loop {
        let log: Value = http
            .get("http://agent/api/v1/deliveries")
            .bearer_auth(token.trim())
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        let rows: Vec<Value> = log["deliveries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|d| d["webhook"] == "flaky")
            .cloned()
            .collect();
        if rows.len() == 2 && rows.iter().all(|r| r["status"] == "delivered") {
            break rows;
        }
        assert!(started.elapsed() < Duration::from_secs(40), "{log:#}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let attempts: u64 = rows.iter().filter_map(|r| r["attempts"].as_u64()).sum();
    assert_eq!(
        attempts, 4,
        "two deliveries, two failed attempts: {rows:#?}"
    );
    assert!(
        rows.iter().any(|r| r["attempts"].as_u64() > Some(1)),
        "{rows:#?}"
    );
    assert_eq!(
        flaky.got.lock().expect("got").len() as u64,
        attempts,
        "only `opened` goes to this hook, once per attempt"
    );
    // The Slack-compatible hook got text, with the command to approve.
    let started = Instant::now();
    let text = loop {
        let texts: Vec<String> = slack
            .got
            .lock()
            .expect("got")
            .iter()
            .filter_map(|(_, b)| serde_json::from_str::<Value>(b).ok())
            .filter_map(|v| v["text"].as_str().map(str::to_string))
            .collect();
        if let Some(t) = texts
            .iter()
            .find(|t| t.contains("needs approval") && t.contains(&id))
        {
            break t.clone();
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{texts:#?}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(
        text.contains(&id) && text.contains("drydock approve apr-"),
        "{text}"
    );
    for (_, body) in flaky
        .got
        .lock()
        .expect("got")
        .iter()
        .chain(slack.got.lock().expect("got").iter())
    {
        assert!(
            !body.contains("hunter2"),
            "a secret reached a webhook: {body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_are_bounded_per_identity_and_end_at_shutdown() {
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-streams-*".into()]);
    let exec = ExecutorProcess::start(&dd, |y| y);
    let c = exec.agent_client(&dd).await;
    let open_one = || {
        let mut c = c.clone();
        async move {
            c.watch_events(pb::WatchEventsRequest {
                request_id: "req-streams".into(),
                since_unix_nanos: 0,
            })
            .await
        }
    };
    let mut open = Vec::new();
    for _ in 0..4 {
        open.push(open_one().await.expect("a stream").into_inner());
    }
    let fifth = open_one().await.expect_err("a fifth stream");
    assert_eq!(fifth.code(), Code::ResourceExhausted, "{fifth:?}");
    assert!(
        fifth.message().contains("event streams open"),
        "{}",
        fifth.message()
    );
    // Closing one frees its slot.
    drop(open.pop());
    let started = Instant::now();
    loop {
        match open_one().await {
            Ok(s) => {
                open.push(s.into_inner());
                break;
            }
            Err(e) => {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "slot not freed: {e:?}"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
    // Streams open, SIGTERM: the executor ends them, finishes and signs
    // its final checkpoint (it used to wait for them forever).
    let started = Instant::now();
    let status = tokio::task::spawn_blocking(move || exec.stop())
        .await
        .expect("stop");
    assert!(status.success(), "{status:?}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "shutdown took {:?}",
        started.elapsed()
    );
    let rows = dd.audit_rows();
    assert_eq!(
        rows.last().map(|r| r["decision"].clone()),
        Some(Value::from("checkpoint")),
        "the final checkpoint is written"
    );
    assert!(
        rows.iter()
            .any(|r| r["action"] == "watch_events" && r["decision"] == "denied"),
        "the refused fifth stream is audited"
    );
}
