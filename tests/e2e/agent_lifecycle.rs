//! The agent's request lifecycle through real processes: the retry budget,
//! restart safety, durable SSE replay, the API's auth and errors, the
//! dependency chain and runbook notes.

use std::time::Duration;

use drydock_e2e::*;
use futures::StreamExt as _;
use serde_json::{json, Value};

fn status(v: &Value) -> &str {
    v["status"].as_str().unwrap_or("")
}

fn token(dd: &Drydock) -> String {
    std::fs::read_to_string(dd.home.path("agent.token"))
        .expect("token")
        .trim()
        .to_string()
}

/// The agent's API address as cli.yaml has it: its unix socket.
fn agent_url(dd: &Drydock) -> String {
    format!("unix:{}", dd.agent_socket().display())
}

/// A raw HTTP client on the agent's socket, and the base URL to use with it.
fn raw_agent(dd: &Drydock) -> (reqwest::Client, String) {
    (dd.agent_http(), "http://drydock-agent".to_string())
}

/// A container whose healthcheck fails again shortly after every restart.
fn always_wedging(test: &str) -> Container {
    let c = Container::run(
        test,
        &[
            "--read-only",
            "--health-interval",
            "1s",
            "--health-retries",
            "1",
            "--health-timeout",
            "2s",
            drydock::fixture::FIXTURE_WEB_IMAGE,
            "serve",
            "--port",
            "8080",
            "--wedge-after-secs",
            "1",
        ],
    );
    c.wait_for("unhealthy", Duration::from_secs(60), |c| {
        c.health() == "unhealthy"
    });
    c
}

#[test]
fn a_fault_that_returns_after_restart_is_not_restarted_blindly_again() {
    let dd = Drydock::init();
    let c = always_wedging("budget");
    dd.up();
    let (code, req) = dd.ask_json(&["--yes", "--container", &c.name, "it is unhealthy"]);
    assert_eq!(status(&req), "failed", "{req:#}");
    assert_eq!(code, 1);
    let restarts: Vec<&Value> = req["execution"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "restart")
        .collect();
    assert_eq!(
        restarts.len(),
        1,
        "exactly one restart, never repeated: {req:#}"
    );
    assert_eq!(req["verification"]["ok"], false);
    assert!(
        req["iterations"].as_u64().unwrap_or(0) >= 1,
        "verification failure re-entered diagnosis: {req:#}"
    );
    let outcome = req["outcome"].as_str().unwrap_or("");
    assert!(
        outcome.contains("restart"),
        "the report says what was tried: {outcome}"
    );
    let audit_restarts = dd
        .audit_rows()
        .iter()
        .filter(|r| r["action"] == "restart" && r["decision"] == "allowed")
        .count();
    assert_eq!(audit_restarts, 1);
}

/// Stop only the agent (the executor keeps running).
fn stop_agent(dd: &Drydock) {
    let pid: u32 = std::fs::read_to_string(dd.home.pid("drydock-agent"))
        .expect("agent pid")
        .trim()
        .parse()
        .expect("pid");
    std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("kill");
    let started = std::time::Instant::now();
    while drydock::daemons::pid_alive(pid) {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "agent did not stop"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_waiting_approval_survives_an_agent_restart() {
    let dd = Drydock::init();
    let c = Container::unhealthy_web("restart-safe", &[]);
    dd.up();
    // No terminal and no --yes: the approval is left pending, exit 3.
    let (code, req) = dd.ask_json(&["--container", &c.name, "it is unhealthy"]);
    assert_eq!(code, 3, "{req:#}");
    assert_eq!(status(&req), "waiting_approval");
    let approval_id = req["approvals"][0]["id"]
        .as_str()
        .expect("approval id")
        .to_string();
    let request_id = req["id"].as_str().unwrap().to_string();

    stop_agent(&dd);
    dd.up();
    let out = dd.cli(&["approvals"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&approval_id),
        "pending after restart: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = dd.cli(&["approve", "--yes", &approval_id]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let out = dd.cli(&["follow", &request_id]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(c.health(), "healthy");
}

#[test]
fn a_request_caught_executing_is_reverified_never_reexecuted() {
    let dd = Drydock::init();
    let c = Container::unhealthy_web("interrupted", &[]);
    dd.up();
    let (code, req) = dd.ask_json(&["--container", &c.name, "it is unhealthy"]);
    assert_eq!(code, 3, "{req:#}");
    let request_id = req["id"].as_str().unwrap().to_string();
    stop_agent(&dd);

    // Simulate a crash in the middle of executing: the approval was signed
    // and the state saved as `executing`, but we cannot know whether the
    // restart reached Docker.
    let db = rusqlite::Connection::open(dd.home.path("state/agent.db")).expect("agent db");
    let doc: String = db
        .query_row(
            "SELECT doc FROM requests WHERE id = ?1",
            [&request_id],
            |r| r.get(0),
        )
        .expect("request");
    let mut doc: Value = serde_json::from_str(&doc).expect("json");
    doc["status"] = json!("executing");
    doc["approvals"][0]["status"] = json!("approved");
    db.execute(
        "UPDATE requests SET status = 'executing', doc = ?1 WHERE id = ?2",
        rusqlite::params![doc.to_string(), request_id],
    )
    .expect("update");
    drop(db);

    dd.up();
    let agent = drydock::client::AgentClient::new(&agent_url(&dd), token(&dd)).expect("client");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let events: Vec<Value> = rt.block_on(async {
        let mut seen = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(60), async {
            let _ = agent
                .follow(&request_id, None, |e| {
                    // The replay starts with the first round's approval; the
                    // second one comes after re-verification.
                    let rounds = seen
                        .iter()
                        .filter(|e: &&Value| e["kind"] == "approval_requested")
                        .count();
                    let done =
                        e.kind() == drydock_vocab::EventKind::ApprovalRequested && rounds >= 1;
                    seen.push(serde_json::to_value(&e).expect("an event is JSON"));
                    async move { Ok(!done) }
                })
                .await;
        })
        .await;
        seen
    });
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["kind"].as_str()).collect();
    assert!(kinds.contains(&"interrupted"), "{kinds:?}");
    let after_interrupt = kinds
        .iter()
        .skip_while(|k| **k != "interrupted")
        .copied()
        .collect::<Vec<_>>();
    assert!(
        after_interrupt.contains(&"verification"),
        "re-verified: {kinds:?}"
    );
    assert!(
        !after_interrupt.contains(&"execution"),
        "never re-executed: {kinds:?}"
    );
    let writes = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["action"] == "restart")
        .count();
    assert_eq!(writes, 0, "no restart reached the executor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_replays_every_event_exactly_once_after_a_reconnect() {
    let dd = Drydock::init();
    let c = Container::run(
        "sse",
        &[drydock::fixture::FIXTURE_IMAGE, "crash", "--code", "0"],
    );
    c.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    dd.up();
    let (_, req) = dd.ask_json(&["--diagnose-only", "--container", &c.name, "is it down?"]);
    let id = req["id"].as_str().unwrap();
    let (http, base) = raw_agent(&dd);
    let events_url = format!("{base}/api/v1/requests/{id}/events");
    let read_all = |resp: reqwest::Response| async move {
        let mut body = String::new();
        let mut stream = resp.bytes_stream();
        while let Some(Ok(chunk)) = stream.next().await {
            body.push_str(&String::from_utf8_lossy(&chunk));
        }
        body.split("\n\n")
            .filter_map(|block| {
                block
                    .lines()
                    .find_map(|l| l.strip_prefix("id:"))
                    .map(|v| v.trim().parse::<i64>().unwrap_or(-1))
            })
            .collect::<Vec<i64>>()
    };
    let all = read_all(
        http.get(&events_url)
            .bearer_auth(token(&dd))
            .send()
            .await
            .expect("events"),
    )
    .await;
    assert!(all.len() >= 5, "{all:?}");
    let mut sorted = all.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted, all, "ids ascend with no repeats");
    let cut = all[all.len() / 2];
    let rest = read_all(
        http.get(&events_url)
            .bearer_auth(token(&dd))
            .header("Last-Event-ID", cut.to_string())
            .send()
            .await
            .expect("events"),
    )
    .await;
    let mut joined: Vec<i64> = all.iter().copied().filter(|s| *s <= cut).collect();
    joined.extend(rest);
    assert_eq!(
        joined, all,
        "a reconnect with Last-Event-ID sees every event exactly once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_requires_the_token_and_answers_problem_details() {
    let dd = Drydock::init();
    dd.up();
    let (http, base) = raw_agent(&dd);
    let health = http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(health.status(), 200, "healthz needs no token");
    for (method, path) in [
        ("GET", "/api/v1/requests"),
        ("POST", "/api/v1/requests"),
        ("GET", "/api/v1/requests/x"),
        ("GET", "/api/v1/requests/x/events"),
        ("POST", "/api/v1/requests/x/cancel"),
        ("GET", "/api/v1/approvals"),
        ("POST", "/api/v1/approvals/x/approve"),
        ("POST", "/api/v1/approvals/x/reject"),
        ("GET", "/metrics"),
    ] {
        let req = http.request(method.parse().unwrap(), format!("{base}{path}"));
        let resp = req.try_clone().unwrap().send().await.expect("send");
        assert_eq!(resp.status(), 401, "{method} {path} without a token");
        assert_eq!(resp.headers()["content-type"], "application/problem+json");
        let wrong = req.bearer_auth("not-the-token").send().await.expect("send");
        assert_eq!(wrong.status(), 401, "{method} {path} with a wrong token");
    }
    let t = token(&dd);
    let missing = http
        .get(format!("{base}/api/v1/requests/req-nope"))
        .bearer_auth(&t)
        .send()
        .await
        .expect("send");
    assert_eq!(missing.status(), 404);
    let problem: Value = missing.json().await.expect("json");
    assert_eq!(problem["status"], 404);
    assert!(problem["detail"].as_str().unwrap().contains("req-nope"));
    let bad = http
        .post(format!("{base}/api/v1/requests"))
        .bearer_auth(&t)
        .json(&json!({"message": ""}))
        .send()
        .await
        .expect("send");
    assert_eq!(bad.status(), 400);
    let unknown_field = http
        .post(format!("{base}/api/v1/requests"))
        .bearer_auth(&t)
        .json(&json!({"message": "x", "exec": "rm -rf /"}))
        .send()
        .await
        .expect("send");
    assert_eq!(unknown_field.status(), 400);
    // An offset no clock has, the most negative integer too: refused, with
    // the field and its bounds named.
    for offset in [json!(1081), json!(i32::MIN), json!(-1081)] {
        let bad_offset = http
            .post(format!("{base}/api/v1/requests"))
            .bearer_auth(&t)
            .json(&json!({"message": "why did web restart at 3 am?", "utc_offset_minutes": offset}))
            .send()
            .await
            .expect("send");
        assert_eq!(bad_offset.status(), 400, "{offset}");
        let problem: Value = bad_offset.json().await.expect("json");
        assert!(
            problem["detail"].as_str().is_some_and(
                |d| d.contains("utc_offset_minutes") && d.contains("between -1080 and 1080")
            ),
            "{problem}"
        );
    }
    let bad_status = http
        .get(format!("{base}/api/v1/requests?status=bogus"))
        .bearer_auth(&t)
        .send()
        .await
        .expect("send");
    assert_eq!(bad_status.status(), 400);

    // Cancel a request that is waiting, then list by status.
    let c = Container::unhealthy_web("cancel", &[]);
    let (code, req) = dd.ask_json(&["--container", &c.name, "unhealthy"]);
    assert_eq!(code, 3);
    let id = req["id"].as_str().unwrap();
    let canceled: Value = http
        .post(format!("{base}/api/v1/requests/{id}/cancel"))
        .bearer_auth(&t)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert_eq!(canceled["status"], "canceled");
    let again = http
        .post(format!("{base}/api/v1/requests/{id}/cancel"))
        .bearer_auth(&t)
        .send()
        .await
        .expect("send");
    assert_eq!(again.status(), 409, "canceling twice is a conflict");
    let approve = http
        .post(format!(
            "{base}/api/v1/approvals/{}/approve",
            req["approvals"][0]["id"].as_str().unwrap()
        ))
        .bearer_auth(&t)
        .json(&json!({"key_id": "local-operator", "signature": "AAAA"}))
        .send()
        .await
        .expect("send");
    assert!(
        approve.status() == 400 || approve.status() == 404 || approve.status() == 409,
        "a canceled request's approval cannot be approved: {}",
        approve.status()
    );
    let list: Vec<Value> = http
        .get(format!("{base}/api/v1/requests?status=canceled"))
        .bearer_auth(&t)
        .send()
        .await
        .expect("send")
        .json()
        .await
        .expect("json");
    assert!(list.iter().any(|r| r["id"] == id) && list.iter().all(|r| r["status"] == "canceled"));
    assert_eq!(c.health(), "unhealthy", "nothing was done to the container");
}

#[test]
fn a_stopped_dependency_is_started_first_then_the_service() {
    let dd = Drydock::init();
    let net = Network::create("dep-net");
    let network = net.name.clone();
    let project = unique("shop");
    let labels = |service: &str| {
        vec![
            format!("com.docker.compose.project={project}"),
            format!("com.docker.compose.service={service}"),
        ]
    };
    let db_labels = labels("db");
    let db = Container::run(
        "dep-db",
        &[
            "--network",
            &network,
            "--network-alias",
            "db",
            "--label",
            &db_labels[0],
            "--label",
            &db_labels[1],
            "--health-interval",
            "1s",
            "--health-retries",
            "1",
            drydock::fixture::FIXTURE_WEB_IMAGE,
            "serve",
            "--port",
            "8080",
        ],
    );
    db.wait_for("healthy", Duration::from_secs(60), |c| {
        c.health() == "healthy"
    });
    docker_ok(&["stop", &db.name]);
    let app_labels = labels("app");
    let app = Container::run(
        "dep-app",
        &[
            "--network",
            &network,
            "--label",
            &app_labels[0],
            "--label",
            &app_labels[1],
            drydock::fixture::FIXTURE_IMAGE,
            "depend",
            "--on",
            "db:8080",
            "--port",
            "8081",
            "--wait-secs",
            "1",
        ],
    );
    app.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    dd.up();

    let (code, req) = dd.ask_json(&["--yes", "--container", &app.name, "app is down"]);
    assert_eq!(code, 0, "{req:#}\n{}", dd.agent_log());
    assert_eq!(
        req["diagnosis"]["causes"][0]["class"], "dependency_unavailable",
        "{req:#}"
    );
    let causes = req["diagnosis"]["causes"].to_string();
    assert!(
        causes.contains(&db.name),
        "the diagnosis names the container behind db: {causes}"
    );
    let steps: Vec<(String, String)> = req["plan"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["action"].as_str().unwrap().to_string(),
                s["target"]["container_name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [
            ("start".to_string(), db.name.clone()),
            ("start".to_string(), app.name.clone())
        ]
    );
    assert_eq!(db.health(), "healthy");
    assert_eq!(app.inspect("{{.State.Running}}"), "true");
    let order: Vec<String> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["action"] == "start" && r["decision"] == "allowed")
        .map(|r| r["container_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, [db.id(), app.id()], "the dependency first");
}

#[test]
fn a_missing_dependency_is_reported_with_advice_and_no_write() {
    let dd = Drydock::init();
    let app = Container::run(
        "dep-missing",
        &[
            drydock::fixture::FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "dial tcp: lookup zzq-payments on 127.0.0.11:53: no such host",
        ],
    );
    app.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    std::fs::write(
        dd.home.path("runbook.yaml"),
        format!(
            "services:\n  {}:\n    notes: payments is hosted by the billing team\n",
            app.name
        ),
    )
    .expect("runbook");
    let cfg = std::fs::read_to_string(dd.home.agent_config()).expect("agent config");
    std::fs::write(
        dd.home.agent_config(),
        format!("{cfg}runbook: runbook.yaml\n"),
    )
    .expect("agent config");
    dd.up();
    let (code, req) = dd.ask_json(&["--yes", "--container", &app.name, "app is down"]);
    assert_eq!(code, 0, "{req:#}");
    assert!(
        req["plan"]["steps"].as_array().unwrap().is_empty(),
        "{req:#}"
    );
    let advice = req["plan"]["advice"].to_string();
    assert!(
        advice.contains("zzq-payments") && advice.contains("no container"),
        "{advice}"
    );
    assert!(
        advice.contains("billing team"),
        "runbook notes are in the report: {advice}"
    );
    assert!(req["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["type"] == "runbook"));
}

#[test]
fn a_dependency_known_only_by_its_network_alias_is_found() {
    let dd = Drydock::init();
    let net = Network::create("alias-net");
    let network = net.name.clone();
    let alias = unique("cachealias");
    let cache = Container::run(
        "alias-cache",
        &[
            "--network",
            &network,
            "--network-alias",
            &alias,
            drydock::fixture::FIXTURE_IMAGE,
            "serve",
            "--port",
            "8080",
        ],
    );
    docker_ok(&["stop", &cache.name]);
    let on = format!("{alias}:8080");
    let app = Container::run(
        "alias-app",
        &[
            "--network",
            &network,
            drydock::fixture::FIXTURE_IMAGE,
            "depend",
            "--on",
            &on,
            "--port",
            "8081",
            "--wait-secs",
            "1",
        ],
    );
    app.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    dd.up();
    let (code, req) = dd.ask_json(&["--diagnose-only", "--container", &app.name, "app is down"]);
    assert_eq!(code, 0, "{req:#}");
    let causes = req["diagnosis"]["causes"].to_string();
    assert!(
        causes.contains(&cache.name),
        "the alias resolves to its container: {causes}"
    );
}

#[test]
fn a_pending_approval_still_expires_on_time_across_an_agent_restart() {
    let dd = Drydock::init();
    let cfg = std::fs::read_to_string(dd.home.agent_config()).expect("agent config");
    std::fs::write(
        dd.home.agent_config(),
        cfg.replace("approval_ttl: 10m", "approval_ttl: 10s"),
    )
    .expect("agent config");
    let c = Container::unhealthy_web("expiry", &[]);
    dd.up();
    let (code, req) = dd.ask_json(&["--container", &c.name, "unhealthy"]);
    assert_eq!(code, 3, "{req:#}");
    let request_id = req["id"].as_str().unwrap().to_string();
    let approval_id = req["approvals"][0]["id"].as_str().unwrap().to_string();
    stop_agent(&dd);
    dd.up();
    let started = std::time::Instant::now();
    let out = loop {
        let out = dd.cli(&["follow", &request_id]);
        if out.status.code() != Some(3) || started.elapsed() > Duration::from_secs(40) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the request failed on expiry: {stdout}"
    );
    assert!(stdout.contains("expired"), "{stdout}");
    let approve = dd.cli(&["approve", "--yes", &approval_id]);
    assert!(
        !approve.status.success(),
        "an expired approval cannot be approved"
    );
    assert_eq!(c.health(), "unhealthy", "nothing was changed");
}

/// The local layout's API is a unix socket in `run/` (0700), and every
/// connection's peer credentials are checked: even with the folder and the
/// socket opened up, another user's connection is dropped. No TCP port is
/// listened on, so there is none to squat.
#[test]
fn the_local_api_is_a_private_unix_socket() {
    use std::os::unix::fs::PermissionsExt as _;
    let dd = Drydock::init();
    dd.up();
    let socket = dd.agent_socket();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dd.home.path("run")), 0o700);
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", dd.agent_port)).is_err(),
        "nothing listens on the TCP port"
    );
    let probe = |user: &str| {
        std::process::Command::new("runuser")
            .args(["-u", user, "--", "/usr/bin/python3", "-c"])
            .arg(format!(
                "import socket,sys\n\
                 s=socket.socket(socket.AF_UNIX)\n\
                 s.settimeout(5)\n\
                 s.connect({:?})\n\
                 s.sendall(b'GET /healthz HTTP/1.1\\r\\nHost: a\\r\\nConnection: close\\r\\n\\r\\n')\n\
                 data=b''\n\
                 while True:\n\
                 \x20   b=s.recv(4096)\n\
                 \x20   if not b: break\n\
                 \x20   data+=b\n\
                 sys.stdout.write(data.decode(errors='replace'))",
                socket.display().to_string()
            ))
            .output()
            .expect("runuser")
    };
    let own = probe("root");
    assert!(
        String::from_utf8_lossy(&own.stdout).starts_with("HTTP/1.1 200"),
        "the agent's own user is served: {}",
        String::from_utf8_lossy(&own.stderr)
    );
    // Another user cannot even enter run/.
    let other = probe("nobody");
    assert!(
        String::from_utf8_lossy(&other.stderr).contains("Permission denied"),
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    // Open the folder and the socket: the peer-credential check still
    // refuses it, with one 403 that says who is admitted, and serves it
    // nothing.
    std::fs::set_permissions(dd.home.root.clone(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dd.home.path("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let other = probe("nobody");
    let stderr = String::from_utf8_lossy(&other.stderr);
    let stdout = String::from_utf8_lossy(&other.stdout);
    let nobody = String::from_utf8_lossy(
        &std::process::Command::new("id")
            .args(["-u", "nobody"])
            .output()
            .expect("id")
            .stdout,
    )
    .trim()
    .to_string();
    assert!(
        stdout.starts_with("HTTP/1.1 403 Forbidden")
            && stdout.contains(&format!("you are uid {nobody} gid"))
            && stdout.contains("uid 0 (the agent's user) and root")
            && !stdout.contains("\"status\":\"ok\""),
        "another user reaches the socket and is refused with the reason, never served: {stdout} {stderr}"
    );
    assert!(
        dd.agent_log()
            .contains("refused an API connection from another user"),
        "{}",
        dd.agent_log()
    );
}
