//! One agent, two hosts: the home's executor in front of the main engine
//! (host `local`), and host B's executor, issued by `drydock host add`, in
//! front of a second engine in its own network namespace
//! (`second_engine.rs`). A plain question finds the fault on B and repairs
//! it there only; the same name on both hosts is a question naming them;
//! with B's executor stopped, requests on the other host complete and
//! `doctor` names B as down; once B is back, its watch stream resumes where
//! it left off and a crash on B while it was away opens a request.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use drydock_e2e::second_engine::SecondEngine;
use drydock_e2e::*;
use serde_json::Value;

const FIXTURE: &str = drydock::fixture::FIXTURE_IMAGE;
const WEB: &str = drydock::fixture::FIXTURE_WEB_IMAGE;

/// Host B's executor config, from `drydock host add host-b`, listening on
/// its own port in front of `engine`; returns it and the port.
fn host_b(dd: &Drydock, engine: &SecondEngine) -> (PathBuf, u16) {
    let added = dd.cli(&["host", "add", "host-b", "--address", "127.0.0.1"]);
    let said = String::from_utf8_lossy(&added.stdout).to_string();
    assert!(
        added.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&added.stderr)
    );
    assert!(said.contains("hosts:\n  - name: host-b"), "{said}");
    let config = dd.home.path("hosts/host-b/executor.yaml");
    let port = free_port();
    let yaml = std::fs::read_to_string(&config).expect("host B's executor.yaml");
    let yaml = with_docker_endpoint(&yaml, &engine.endpoint())
        .lines()
        .map(|l| match l.strip_prefix("listen: ") {
            Some(_) => format!("listen: 127.0.0.1:{port}"),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    std::fs::write(&config, yaml).expect("write host B's config");
    (config, port)
}

/// `ExecutorProcess::start_with`, for an executor on another port.
fn start_b(dd: &Drydock, config: &std::path::Path, port: u16) -> ExecutorProcess {
    let mut b = ExecutorProcess::start_with(dd, config.to_path_buf());
    b.port = port;
    b
}

/// `drydock requests --json [--host HOST]`.
fn requests(dd: &Drydock, host: Option<&str>) -> Vec<Value> {
    let mut args = vec!["requests", "--json"];
    if let Some(h) = host {
        args.extend(["--host", h]);
    }
    let out = dd.cli(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("requests as JSON")
}

fn doctor(dd: &Drydock) -> String {
    output_of(&dd.cli(&["doctor"]))
}

/// Poll `done` until it holds, or fail with `what` and the agent's log.
fn wait_until(dd: &Drydock, what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < timeout,
            "timed out waiting for {what}; agent log:\n{}",
            dd.agent_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn one_agent_serves_two_hosts_and_losing_one_blocks_nothing_else() {
    let prefix = unique("mh");
    prepare();
    let engine = SecondEngine::start(&[FIXTURE, WEB]);
    // Only this test's containers are in scope (the main engine runs the
    // other tests'), and the agent watches, with a short debounce.
    let dd = Drydock::init_options(|o| {
        o.targets = vec![format!("*{prefix}-*")];
        o.watch = true;
    });
    let (config_b, port_b) = host_b(&dd, &engine);
    let agent_yaml = dd.home.path("agent.yaml");
    let yaml = std::fs::read_to_string(&agent_yaml).expect("agent.yaml");
    std::fs::write(
        &agent_yaml,
        format!(
            "{yaml}  debounce: 1s\nhosts:\n  - name: host-b\n    endpoint: https://127.0.0.1:{port_b}\n"
        ),
    )
    .expect("agent.yaml with host B");
    let b = start_b(&dd, &config_b, port_b);
    dd.up();

    // On host B only: a web service that wedges (unhealthy); on both
    // hosts: a plain container of the same name.
    let api = format!("{prefix}-api");
    engine.run_wedging(&api);
    let twin = format!("{prefix}-twin");
    engine.ok(&["run", "-d", "--name", &twin, FIXTURE, "sleep"]);
    let _twin_here = Container { name: twin.clone() };
    docker_ok(&["run", "-d", "--name", &twin, FIXTURE, "sleep"]);
    let health = |name: &str| engine.ok(&["inspect", "-f", "{{.State.Health.Status}}", name]);

    // A plain question finds it on B, and B's executor repairs it.
    let started_before = engine.ok(&["inspect", "-f", "{{.State.StartedAt}}", &api]);
    let (code, req) = dd.ask_json(&["--yes", &format!("{api} is unhealthy")]);
    assert_eq!(req["status"], "completed", "exit {code}: {req:#}");
    assert_eq!(req["target"]["host"], "host-b", "{:#}", req["target"]);
    assert_ne!(
        engine.ok(&["inspect", "-f", "{{.State.StartedAt}}", &api]),
        started_before,
        "restarted on B"
    );
    assert_eq!(health(&api), "healthy");
    let id = req["id"].as_str().expect("id").to_string();
    let rows_b = audit_export(&config_b);
    assert!(
        rows_b.iter().any(|r| r["request_id"] == id.as_str()
            && r["action"] == "restart"
            && r["decision"] == "allowed"),
        "B's audit has the restart"
    );
    assert!(
        !dd.audit_rows()
            .iter()
            .any(|r| r["request_id"] == id.as_str() && r["action"] == "restart"),
        "nothing was written on the other host"
    );

    // The same name on both hosts: which one?
    let (_, req) = dd.ask_json(&[&format!("{twin} is down")]);
    assert_eq!(req["status"], "needs_clarification", "{req:#}");
    let outcome = req["outcome"].as_str().unwrap_or_default();
    assert!(
        outcome.contains(&format!("{twin} on host local"))
            && outcome.contains(&format!("{twin} on host host-b")),
        "{outcome}"
    );
    // Named with its host, it is found.
    let (_, req) = dd.ask_json(&[
        "--diagnose-only",
        "--container",
        &format!("{twin}@host-b"),
        "is it ok?",
    ]);
    assert_eq!(req["target"]["host"], "host-b", "{req:#}");

    // A grant is for one host: which one must be said, and it names it.
    let grant = |host: Option<&str>| {
        let mut args = vec![
            "grant",
            "create",
            "--action",
            "restart",
            "--name",
            &api,
            "--max",
            "1/1h",
            "--expires",
            "1h",
            "--yes",
        ];
        if let Some(h) = host {
            args.extend(["--host", h]);
        }
        let out = dd.cli(&args);
        (out.status.success(), output_of(&out))
    };
    let (ok, said) = grant(None);
    assert!(
        !ok && said.contains("add --host NAME") && said.contains("host-b"),
        "{said}"
    );
    let (ok, said) = grant(Some("host-b"));
    assert!(ok && said.contains("on host host-b"), "{said}");

    // "walk api" is on B, "walk db" here; with B up, the api is found.
    let walk_api = format!("{prefix}-walk-api");
    engine.ok(&["run", "-d", "--name", &walk_api, FIXTURE, "sleep"]);
    let walk_db = format!("{prefix}-walk-db");
    docker_ok(&["run", "-d", "--name", &walk_db, FIXTURE, "sleep"]);
    let _walk_db = Container {
        name: walk_db.clone(),
    };
    let (_, req) = dd.ask_json(&["--diagnose-only", "walk api is down"]);
    assert_eq!(
        req["target"]["container_name"],
        walk_api.as_str(),
        "{req:#}"
    );

    // Host B's executor stops: a request on the other host completes, and
    // doctor names B as down.
    b.stop();
    // The api's host does not answer: the db here is not taken for it,
    // and the answer says B was not searched.
    let (code, req) = dd.ask_json(&["walk api is down"]);
    assert_eq!(req["status"], "needs_clarification", "{req:#}");
    assert_ne!(code, 0, "{req:#}");
    let outcome = req["outcome"].as_str().unwrap_or_default();
    assert!(
        outcome.contains("it is the db, not the api") && outcome.contains("Not searched: host-b"),
        "{outcome}"
    );
    // Only this host searched, by choice: the db is still not the api.
    let (_, req) = dd.ask_json(&["--host", "local", "walk api is down"]);
    assert_eq!(req["status"], "needs_clarification", "{req:#}");
    let outcome = req["outcome"].as_str().unwrap_or_default();
    assert!(
        outcome.contains("it is the db, not the api") && !outcome.contains("host-b"),
        "{outcome}"
    );
    // A container here that fits "walk" only in part is not taken while
    // the host that may hold a better match does not answer.
    let walk_old = format!("{prefix}-walk-old");
    docker_ok(&["run", "-d", "--name", &walk_old, FIXTURE, "sleep"]);
    let _walk_old = Container {
        name: walk_old.clone(),
    };
    let (code, req) = dd.ask_json(&["walk api is down"]);
    assert_eq!(req["status"], "needs_clarification", "{req:#}");
    assert_ne!(code, 0, "{req:#}");
    let outcome = req["outcome"].as_str().unwrap_or_default();
    assert!(
        outcome.contains("not searched: host-b")
            && outcome.contains(&format!("{walk_old} on host local"))
            && outcome.contains(&format!("--container {walk_old}@local")),
        "{outcome}"
    );
    // A name given with --container is quoted back as given.
    let (_, req) = dd.ask_json(&["--container", &format!("{walk_api}@local"), "check"]);
    let outcome = req["outcome"].as_str().unwrap_or_default();
    assert!(
        outcome.contains(&format!(
            "no container is named \"{walk_api}\" on host local"
        )),
        "{outcome}"
    );
    let here = Container::unhealthy_web(&format!("{prefix}-here"), &[]);
    let (_, req) = dd.ask_json(&["--yes", &format!("{} is unhealthy", here.name)]);
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(req["target"]["host"], "local");
    wait_until(
        &dd,
        "doctor naming host-b as down",
        Duration::from_secs(40),
        || {
            doctor(&dd).contains("host-b at https://127.0.0.1")
                && doctor(&dd).contains("down since")
        },
    );
    assert_eq!(agent_health(&dd), "serving; hosts down: host-b");
    // The operator's views list what answers and say which host does not.
    let listed = agent_get(&dd, "/api/v1/containers");
    assert_eq!(listed["unreachable"][0]["host"], "host-b", "{listed:#}");
    let rows = listed["containers"].as_array().cloned().unwrap_or_default();
    assert!(
        !rows.is_empty() && rows.iter().all(|c| c["host"] == "local"),
        "{listed:#}"
    );

    // The console says the same, in a real browser: a Host column, the
    // host that does not answer, and requests filtered by host.
    let console = crate::ui::Console::start(&dd);
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let mut browser = crate::ui::Browser::start().await;
            browser.goto(&console.url).await;
            let wait = Duration::from_secs(20);
            browser
                .wait_for("#hosts-down", "Host host-b does not answer", wait)
                .await;
            browser
                .wait_for(&format!("[id=\"container-{twin}@local\"]"), "local", wait)
                .await;
            browser
                .goto(&format!("{}/#/requests?host=host-b", console.origin))
                .await;
            browser.wait_for("#host-filter", "host-b", wait).await;
            browser.wait_for("#requests", &api, wait).await;
            let rows = browser
                .run("return document.getElementById('requests').innerText")
                .await;
            let rows = rows.as_str().unwrap_or_default();
            assert!(
                rows.contains("host-b") && !rows.contains(&here.name),
                "only B's requests: {rows}"
            );
            browser.quit().await;
        });
    drop(console);

    // While B is away, a container on it crashes; once B is back, the
    // watch resumes B's stream from where it left off and opens a request.
    let crashy = format!("{prefix}-crashy");
    engine.ok(&[
        "run",
        "-d",
        "--name",
        &crashy,
        FIXTURE,
        "crash",
        "--code",
        "3",
        "--delay-ms",
        "300",
    ]);
    wait_until(&dd, "crashy to exit", Duration::from_secs(30), || {
        engine.ok(&["inspect", "-f", "{{.State.Status}}", &crashy]) == "exited"
    });
    assert!(
        !requests(&dd, Some("host-b"))
            .iter()
            .any(|r| r["message"].as_str().is_some_and(|m| m.contains(&crashy))),
        "nothing could be seen while B was away"
    );
    let _b = start_b(&dd, &config_b, port_b);
    wait_until(
        &dd,
        "a watch request for the crash on B",
        Duration::from_secs(90),
        || {
            requests(&dd, Some("host-b")).iter().any(|r| {
                r["source"] == "watch"
                    && r["target"]["container_name"] == crashy.as_str()
                    && r["target"]["host"] == "host-b"
            })
        },
    );
    assert!(
        requests(&dd, Some("host-b"))
            .iter()
            .all(|r| r["target"]["host"] == "host-b" || r["options"]["host"] == "host-b"),
        "--host lists B's requests only"
    );
    wait_until(
        &dd,
        "doctor to see B again",
        Duration::from_secs(40),
        || !doctor(&dd).contains("down since"),
    );
    assert_eq!(agent_health(&dd), "serving");
}

fn output_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

/// `GET path` on the agent's API, with the CLI's token.
fn agent_get(dd: &Drydock, path: &str) -> Value {
    let token = std::fs::read_to_string(dd.home.path("agent.token")).expect("agent token");
    let http = dd.agent_http();
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            http.get(format!("http://agent{path}"))
                .bearer_auth(token.trim())
                .send()
                .await
                .expect("agent answers")
                .json()
                .await
                .expect("json")
        })
}

/// What `drydock-agent health` says of the home's agent.
fn agent_health(dd: &Drydock) -> String {
    let out = std::process::Command::new(bin("drydock-agent"))
        .args(["health", "--addr"])
        .arg(format!("unix:{}", dd.agent_socket().display()))
        .output()
        .expect("run drydock-agent health");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}
