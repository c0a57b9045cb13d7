//! Time to an update: from "update available" to verified healthy, with
//! `drydock update --yes` against `docker-compose pull && docker-compose
//! up -d` plus polling the health status every 100 ms, on the same images
//! and registry in one run. drydock's figure includes its health window
//! (the executor holds the new container that long after it is first
//! healthy); the ratio without it is printed beside it.

use std::time::{Duration, Instant};

use drydock_e2e::registry::{with_registry, Project, Registry, SERVE};
use drydock_e2e::*;

/// The window the benchmark's executor holds an update for.
const WINDOW: Duration = Duration::from_secs(6);

/// Poll `container`'s health every 100 ms until healthy.
fn healthy_within(container: &str, timeout: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < timeout {
        let out = docker(&["inspect", "-f", "{{.State.Health.Status}}", container]);
        if String::from_utf8_lossy(&out.stdout).trim() == "healthy" {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// v1 running under compose, v2 pushed under the same tag and not on the
/// engine: what a host sees when an update is available.
fn available(project: &mut Project) -> String {
    let (v1, _, _) = project.v1_running_with_data();
    let (v2, _) = project.push("2", SERVE);
    project.only_in_registry(&v2, &v1);
    v2
}

pub fn section() {
    println!("## Time to an update: available → verified healthy\n");
    let registry = Registry::start();

    // Baseline: docker-compose pull && up -d, then poll health.
    let mut baseline = Project::new("bench-upd-compose", &registry);
    let v2 = available(&mut baseline);
    let t = Instant::now();
    let pull = baseline.compose(&["pull", "-q"]);
    assert!(pull.status.success(), "{pull:?}");
    let up = baseline.compose(&["up", "-d"]);
    assert!(up.status.success(), "{up:?}");
    let id = baseline.api_id();
    assert!(healthy_within(&id, Duration::from_secs(60)));
    let compose_took = t.elapsed();
    assert_eq!(
        docker_ok(&["inspect", "-f", "{{.Image}}", &id]),
        v2,
        "compose runs v2"
    );

    // drydock: the whole request, signed by the CLI.
    let mut project = Project::new("bench-upd", &registry);
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{}_*", project.name)]);
    let credentials = dd.home.path("registry.json");
    drydock_daemon::files::write_new(&credentials, br#"{"identitytoken": "unused"}"#, true)
        .expect("credentials");
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
    let config = with_registry(
        config,
        &registry.host(),
        &project.name,
        &credentials.display().to_string(),
    )
    .replace(
        "health_window: 6s",
        &format!("health_window: {}s", WINDOW.as_secs()),
    );
    std::fs::write(dd.home.executor_config(), config).expect("executor config");
    let v2 = available(&mut project);
    dd.up();
    let t = Instant::now();
    let out = dd.cli(&["update", &project.api_name(), "--yes", "--json"]);
    let drydock_took = t.elapsed();
    let req: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the request");
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(
        docker_ok(&["inspect", "-f", "{{.Image}}", &project.api_id()]),
        v2,
        "drydock runs v2"
    );

    // Where drydock's time goes: the request's own clock.
    let at = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|t| humantime::parse_rfc3339_weak(t.trim_end_matches('Z')).ok())
    };
    let created = at(&req["created_at"]);
    let decided = at(&req["approvals"][0]["decided_at"]);
    let written = at(&req["execution"][0]["at"]);
    let ended = at(&req["updated_at"]);
    let span = |a: Option<std::time::SystemTime>, b: Option<std::time::SystemTime>| match (a, b) {
        (Some(a), Some(b)) => b
            .duration_since(a)
            .map(|d| format!("{:.2} s", d.as_secs_f64()))
            .unwrap_or_else(|_| "?".into()),
        _ => "?".into(),
    };
    let row = dd
        .audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["action"] == "update" && r["decision"] == "allowed");
    let executor_ms = row
        .as_ref()
        .and_then(|r| r["duration_ms"].as_u64())
        .unwrap_or(0);
    println!(
        "drydock's request: opened → approved {}, approved → written {} (the executor's call: {:.2} s, of which the window {} s), written → verified {}\n",
        span(created, decided),
        span(decided, written),
        executor_ms as f64 / 1000.0,
        WINDOW.as_secs(),
        span(written, ended)
    );
    println!("| path | time | note |\n|---|---|---|");
    println!(
        "| `drydock update --yes` | {:.2} s | registry read, plan, signature, pull by digest, swap, {} s health window, verification |",
        drydock_took.as_secs_f64(),
        WINDOW.as_secs()
    );
    println!(
        "| `docker-compose pull && up -d` + polling health every 100 ms | {:.2} s | no hold, no way back |",
        compose_took.as_secs_f64()
    );
    println!(
        "\nratio: **{:.2}**; without the health window: **{:.2}** (the window adds {} s: the old container is kept until the new one has been healthy that long)\n",
        drydock_took.as_secs_f64() / compose_took.as_secs_f64(),
        drydock_took.saturating_sub(WINDOW).as_secs_f64() / compose_took.as_secs_f64(),
        WINDOW.as_secs()
    );
}
