//! Swarm services diagnosed and repaired by the real daemons, on a real
//! Swarm (the second engine of `second_engine.rs`): a plain question finds
//! the service, the rules name the cause from its tasks, nodes and logs,
//! and a write (a force update, a rollback) runs only with a person's
//! approval or a grant, and is verified from the engine's state.

use std::time::{Duration, Instant};

use drydock_e2e::second_engine::SecondEngine;
use drydock_e2e::*;
use serde_json::Value;

use crate::swarm::swarm_config;

const FIXTURE: &str = drydock::fixture::FIXTURE_IMAGE;
const WEB: &str = drydock::fixture::FIXTURE_WEB_IMAGE;

/// The executor's config edited for Swarm (`stacks` in scope, rollbacks
/// and automation allowed), and the agent's debounce and service poll
/// shortened.
fn swarm_home(engine: &SecondEngine, stacks: &[&str], watch_mode: &str) -> Drydock {
    let dd = Drydock::init_options(|o| {
        o.docker_endpoint = engine.endpoint();
        o.watch = true;
    });
    let path = dd.home.executor_config();
    let yaml = std::fs::read_to_string(&path).expect("executor config");
    std::fs::write(&path, swarm_config(yaml, stacks)).expect("write executor config");
    let agent = dd.home.path("agent.yaml");
    let yaml = std::fs::read_to_string(&agent).expect("agent config");
    let watch = "watch:\n  enabled: true\n  mode: notify\n";
    assert!(yaml.contains(watch), "agent.yaml has no watch section");
    std::fs::write(
        &agent,
        yaml.replace(
            watch,
            &format!(
                "watch:\n  enabled: true\n  mode: {watch_mode}\n  debounce: 2s\n  cooldown: 60s\n  service_poll: 1s\n"
            ),
        ),
    )
    .expect("write agent config");
    dd
}

/// `docker service create -d --name NAME --label stack=shop ARGS...`.
fn create(engine: &SecondEngine, name: &str, args: &[&str]) {
    let mut all = vec![
        "service",
        "create",
        "-d",
        "--name",
        name,
        "--label",
        "com.docker.stack.namespace=shop",
    ];
    all.extend_from_slice(args);
    engine.ok(&all);
}

/// The first cause's class of a request document.
fn class(req: &Value) -> &str {
    req["diagnosis"]["causes"][0]["class"]
        .as_str()
        .unwrap_or("")
}

/// The actions of a request's plan.
fn actions(req: &Value) -> Vec<&str> {
    req["plan"]["steps"]
        .as_array()
        .map(|s| s.iter().filter_map(|s| s["action"].as_str()).collect())
        .unwrap_or_default()
}

/// The image of a service's spec now.
fn image_of(engine: &SecondEngine, service: &str) -> String {
    engine.ok(&[
        "service",
        "inspect",
        service,
        "--format",
        "{{.Spec.TaskTemplate.ContainerSpec.Image}}",
    ])
}

/// The states of a service's tasks that should run, as `docker service ps`
/// says.
fn running_tasks(engine: &SecondEngine, service: &str) -> Vec<String> {
    engine
        .ok(&[
            "service",
            "ps",
            service,
            "--filter",
            "desired-state=running",
            "--format",
            "{{.CurrentState}}",
        ])
        .lines()
        .map(str::to_string)
        .collect()
}

/// The health of the containers of a service's running tasks.
fn task_health(engine: &SecondEngine, service: &str) -> Vec<String> {
    let ids = engine.ok(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=com.docker.swarm.service.name={service}"),
    ]);
    ids.lines()
        .map(|id| engine.ok(&["inspect", "-f", "{{.State.Health.Status}}", id]))
        .collect()
}

fn stderr_and_log(dd: &Drydock, out: &std::process::Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}\nagent log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        dd.agent_log()
    )
}

#[test]
fn services_are_diagnosed_from_plain_questions_and_repaired_with_an_approval() {
    prepare();
    let v1 = unique("dd-swarm-api-v1");
    let v2 = unique("dd-swarm-api-v2");
    build_image(
        &v1,
        &format!("FROM {WEB}\nLABEL drydock.test={v1}\nCMD [\"serve\", \"--port\", \"8080\"]\n"),
    );
    build_image(
        &v2,
        &format!(
            "FROM {WEB}\nLABEL drydock.test={v2}\nCMD [\"crash\", \"--code\", \"3\", \"--line\", \"panic: runtime error: index out of range [3] with length 3\"]\n"
        ),
    );
    let engine = SecondEngine::start_swarm(&[FIXTURE, WEB, v1.as_str(), v2.as_str()]);
    for image in [&v1, &v2] {
        let _ = docker(&["rmi", "-f", image]);
    }
    create(
        &engine,
        "shop_config",
        &[
            FIXTURE,
            "crash",
            "--code",
            "1",
            "--line",
            "Error: missing required environment variable DATABASE_URL",
        ],
    );
    create(
        &engine,
        "shop_big",
        &["--reserve-memory", "100000G", FIXTURE, "sleep"],
    );
    create(
        &engine,
        "shop_api",
        &[
            "--update-failure-action",
            "pause",
            "--update-monitor",
            "4s",
            &v1,
        ],
    );
    engine.create_wedging_once("shop_web");
    engine.ok(&[
        "service",
        "create",
        "-d",
        "--name",
        "bank_hidden",
        "--label",
        "com.docker.stack.namespace=bank",
        FIXTURE,
        "sleep",
    ]);
    engine.wait_for("shop_api to run v1", Duration::from_secs(60), |e| {
        e.replicas("shop_api") == "1/1"
    });
    let dd = swarm_home(&engine, &["shop"], "notify");
    dd.up();

    // A config error in a service's tasks reads like one in a container:
    // advice, no write.
    engine.wait_for("shop_config to fail", Duration::from_secs(60), |e| {
        e.ok(&["service", "ps", "shop_config", "--format", "{{.Error}}"])
            .contains("non-zero exit")
    });
    let (_, config) = dd.ask_json(&["the config service is down"]);
    assert_eq!(config["target"]["kind"], "service", "{config:#}");
    assert_eq!(config["target"]["container_name"], "shop_config");
    assert_eq!(config["target"]["stack"], "shop");
    assert_eq!(class(&config), "config_error", "{config:#}");
    assert!(
        config["diagnosis"]["causes"][0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("DATABASE_URL")),
        "{config:#}"
    );
    assert!(
        actions(&config).iter().all(|a| *a == "advice"),
        "{config:#}"
    );
    assert!(config["execution"].as_array().is_none_or(|e| e.is_empty()));

    // A reservation no node can meet: the tasks wait, the cause is named.
    let (_, big) = dd.ask_json(&["why is big not running?"]);
    assert_eq!(big["target"]["container_name"], "shop_big", "{big:#}");
    assert_eq!(class(&big), "unschedulable", "{big:#}");
    let reason = big["diagnosis"]["causes"][0]["reason"]
        .as_str()
        .unwrap_or("");
    assert!(
        reason.contains("no suitable node") && reason.contains("reserves"),
        "{big:#}"
    );
    assert!(actions(&big).iter().all(|a| *a == "advice"), "{big:#}");

    // The operator's views: the services with running/desired, the nodes,
    // a service's tasks with the engine's words; a hidden one is missing.
    let token = std::fs::read_to_string(dd.home.path("agent.token")).expect("agent token");
    let get = |path: &str| {
        let http = dd.agent_http();
        let url = format!("http://agent{path}");
        let token = token.trim().to_string();
        tokio::runtime::Runtime::new()
            .expect("runtime")
            .block_on(async move {
                let r = http.get(url).bearer_auth(token).send().await.expect("get");
                (
                    r.status().as_u16(),
                    r.json::<Value>().await.unwrap_or(Value::Null),
                )
            })
    };
    let (status, listed) = get("/api/v1/services");
    assert_eq!(status, 200, "{listed:#}");
    assert_eq!(listed["swarm"], true, "{listed:#}");
    let big_row = listed["services"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "shop_big"))
        .unwrap_or_else(|| panic!("shop_big listed: {listed:#}"));
    assert_eq!(
        (&big_row["running"], &big_row["desired"]),
        (&Value::from(0), &Value::from(1))
    );
    assert_eq!(listed["nodes"][0]["role"], "manager", "{listed:#}");
    assert!(
        !listed.to_string().contains("bank_hidden"),
        "a service outside the scope is not listed: {listed:#}"
    );
    let (status, tasks) = get("/api/v1/services/shop_big/tasks");
    assert_eq!(status, 200, "{tasks:#}");
    assert!(
        tasks["tasks"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no suitable node"))
            || tasks["tasks"][0]["error"]
                .as_str()
                .is_some_and(|m| m.contains("no suitable node")),
        "{tasks:#}"
    );
    assert_eq!(get("/api/v1/services/bank_hidden/tasks").0, 404);
    assert_eq!(get("/api/v1/services/..%2Fx/tasks").0, 400);

    // The console shows the same, in a real browser.
    let console = crate::ui::Console::start(&dd);
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let mut browser = crate::ui::Browser::start().await;
            browser.goto(&console.url).await;
            browser
                .goto(&format!("{}/#/services/shop_big", console.origin))
                .await;
            let wait = Duration::from_secs(20);
            browser.wait_for("#service-shop_big", "0/1", wait).await;
            browser.wait_for("#service-shop_api", "1/1", wait).await;
            browser
                .wait_for("#service-tasks", "no suitable node", wait)
                .await;
            browser.wait_for("#nodes", "manager", wait).await;
            browser.quit().await;
        });
    drop(console);

    // A task container's name leads to its service.
    let task = engine.ok(&[
        "ps",
        "--filter",
        "label=com.docker.swarm.service.name=shop_api",
        "--format",
        "{{.Names}}",
    ]);
    let task = task.lines().next().expect("a task container of shop_api");
    let (_, by_task) = dd.ask_json(&["--diagnose-only", &format!("is {task} ok?")]);
    assert_eq!(by_task["target"]["kind"], "service", "{by_task:#}");
    assert_eq!(by_task["target"]["container_name"], "shop_api");
    assert_eq!(class(&by_task), "healthy", "{by_task:#}");

    // An update to a broken image: Swarm pauses it; drydock names the
    // update and, after a person's approval, rolls the service back.
    engine.ok(&["service", "update", "-d", "--image", &v2, "shop_api"]);
    engine.wait_for("the update to pause", Duration::from_secs(90), |e| {
        e.ok(&[
            "service",
            "inspect",
            "shop_api",
            "--format",
            "{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}",
        ]) == "paused"
    });
    let out = dd.cli(&["ask", "--yes", "the api is down"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_and_log(&dd, &out));
    assert!(
        said.contains("approving (--yes): service_rollback Swarm service shop_api")
            && said.contains(&format!("back to image {v1}")),
        "{said}"
    );
    assert!(image_of(&engine, "shop_api").starts_with(&v1));
    engine.wait_for("shop_api back on v1", Duration::from_secs(60), |e| {
        e.replicas("shop_api") == "1/1"
    });
    let id = said
        .lines()
        .find_map(|l| l.strip_prefix("request ").and_then(|r| r.split(':').next()))
        .expect("the request id")
        .to_string();
    let shown: Value =
        serde_json::from_slice(&dd.cli(&["show", "--json", &id]).stdout).expect("show --json");
    assert_eq!(shown["status"], "completed", "{shown:#}");
    assert_eq!(actions(&shown), ["service_rollback"], "{said}\n{shown:#}");
    assert_eq!(shown["execution"][0]["ok"], true);
    assert!(shown["execution"][0]["service_version"].as_u64().is_some());
    let plain = String::from_utf8_lossy(&dd.cli(&["show", &id]).stdout).to_string();
    assert!(
        plain.contains("target: Swarm service shop_api (stack shop)"),
        "{plain}"
    );

    // Tasks that turn unhealthy after start (and are not restarted):
    // a force update, approved, and the replacement stays healthy.
    engine.wait_for("shop_web's task to end", Duration::from_secs(90), |e| {
        e.replicas("shop_web") == "0/1"
    });
    let out = dd.cli(&["ask", "--yes", "web is down"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(out.status.code(), Some(0), "{}", stderr_and_log(&dd, &out));
    assert!(said.contains("unhealthy"), "{said}");
    assert!(
        said.contains("approving (--yes): force_update Swarm service shop_web"),
        "{said}"
    );
    assert_eq!(engine.replicas("shop_web"), "1/1");
    assert_eq!(task_health(&engine, "shop_web"), ["healthy"]);
    assert!(running_tasks(&engine, "shop_web")
        .iter()
        .all(|s| s.starts_with("Running")));

    // Every write was audited with its outcome; the chain verifies.
    let listed = String::from_utf8_lossy(&dd.cli(&["requests"]).stdout).to_string();
    assert!(
        listed.contains("Swarm service shop_web (stack shop)"),
        "{listed}"
    );
    let writes = dd.write_rows();
    for action in ["service_rollback", "force_update"] {
        assert!(
            writes
                .iter()
                .any(|r| r["action"] == action && r["decision"] == "allowed"),
            "no allowed {action} in {writes:#?}"
        );
    }
    dd.assert_audit_intact();
}

/// The requests the agent holds, newest first.
fn requests(dd: &Drydock) -> Vec<Value> {
    let out = dd.cli(&["requests", "--json"]);
    serde_json::from_slice::<Value>(&out.stdout)
        .ok()
        .and_then(|v| v.as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn a_service_short_of_tasks_is_repaired_under_a_grant_with_no_person_asked() {
    prepare();
    let engine = SecondEngine::start_swarm(&[FIXTURE, WEB]);
    let dd = swarm_home(&engine, &["shop"], "repair");
    dd.up();
    let out = dd.cli(&[
        "grant",
        "create",
        "--action",
        "force_update",
        "--stack",
        "shop",
        "--class",
        "unhealthy",
        "--max",
        "1/1h",
        "--expires",
        "1h",
        "--yes",
    ]);
    assert!(out.status.success(), "{}", stderr_and_log(&dd, &out));
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(said.contains("stack shop"), "{said}");
    let grant = said
        .lines()
        .rev()
        .find(|l| l.starts_with("grt-"))
        .expect("the grant id")
        .trim()
        .to_string();

    engine.create_wedging_once("shop_cart");
    let started = Instant::now();
    let done = loop {
        let found = requests(&dd).into_iter().find(|r| {
            r["source"] == "watch"
                && r["options"]["container"] == "shop_cart"
                && matches!(r["status"].as_str(), Some("completed" | "failed"))
        });
        if let Some(r) = found {
            break r;
        }
        assert!(
            started.elapsed() < Duration::from_secs(150),
            "no finished watch request for shop_cart; requests: {:#?}\nagent log:\n{}",
            requests(&dd),
            dd.agent_log()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(done["status"], "completed", "{done:#}");
    assert_eq!(done["target"]["kind"], "service");
    assert_eq!(class(&done), "unhealthy", "{done:#}");
    assert_eq!(actions(&done), ["force_update"]);
    assert_eq!(done["execution"][0]["grant_id"], grant.as_str(), "{done:#}");
    assert!(
        done["approvals"]
            .as_array()
            .is_some_and(|a| a.iter().all(|a| a["grant_id"] == grant.as_str())),
        "no person was asked: {done:#}"
    );
    assert_eq!(engine.replicas("shop_cart"), "1/1");
    assert_eq!(task_health(&engine, "shop_cart"), ["healthy"]);
    // The executor recorded the grant's use in the chain.
    assert!(
        dd.audit_rows().iter().any(|r| r["action"] == "force_update"
            && r["decision"] == "intent"
            && r["approval_id"]
                .as_str()
                .is_some_and(|a| a.starts_with(&format!("{grant}/")))),
        "{:#?}",
        dd.audit_rows()
    );
    dd.assert_audit_intact();
}
