//! docs/deploy.md, "A second host": host B's executor as the container of
//! `deploy/host.yaml`, walked as written, in front of a second engine (its
//! own network namespace: `second_engine.rs`), reached over mTLS by the
//! local agent; and the config `host add --layout systemd` writes, loaded at
//! the unit's paths.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use drydock_e2e::second_engine::SecondEngine;
use drydock_e2e::*;

use crate::deploy::{checkout, images, output_text, run_walked, walked_block, TAG};

const WEB: &str = drydock::fixture::FIXTURE_WEB_IMAGE;

/// The compose project of host B's executor, taken down with its volume
/// when dropped (also when the test fails).
struct HostStack {
    project: String,
    root: PathBuf,
    env: PathBuf,
}

impl HostStack {
    fn compose(&self, args: &[&str]) -> Output {
        Command::new("docker-compose")
            .arg("--env-file")
            .arg(&self.env)
            .args(["-f", "deploy/host.yaml"])
            .args(args)
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output()
            .expect("run docker-compose (Debian: apt-get install docker-compose)")
    }
}

impl Drop for HostStack {
    fn drop(&mut self) {
        let _ = Command::new("docker-compose")
            .args(["-p", &self.project, "-f", "deploy/host.yaml"])
            .args(["down", "-v", "--remove-orphans", "-t", "5"])
            .env("DRYDOCK_STAGED", "/nonexistent")
            .env("DOCKER_GID", "0")
            .env("DRYDOCK_EXECUTOR_ADDRESS", "127.0.0.1")
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output();
    }
}

/// Run the walked block as an operator on one machine would: host B's
/// address is loopback, its port one of the test's, its engine the second
/// one, and the staging folder the test's own.
fn walk_second_host(
    dd: &Drydock,
    root: &Path,
    staged: &Path,
    engine: &SecondEngine,
    port: u16,
    project: &str,
) -> Output {
    let script = walked_block("second-host-compose")
        .replace("10.0.0.5:7443", &format!("127.0.0.1:{port}"))
        .replace("10.0.0.5", "127.0.0.1")
        .replace("/etc/drydock-host", &staged.display().to_string());
    let socket = engine.dir.join("docker.sock").display().to_string();
    let port = port.to_string();
    run_walked(
        &script,
        dd,
        root,
        project,
        &[("DOCKER_SOCKET", &socket), ("DRYDOCK_EXECUTOR_PORT", &port)],
    )
}

#[test]
fn second_host_compose_serves_the_agent_across_the_network() {
    images();
    let prefix = unique("sh");
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{prefix}-*")]);
    let engine = SecondEngine::start(&[drydock::fixture::FIXTURE_IMAGE, WEB]);
    let api = format!("{prefix}-api");
    engine.run_wedging(&api);
    dd.up();

    let root = checkout(&dd);
    let staged = dd.dir.path().join("staged-host");
    let project = unique("host-b");
    let port = free_port();
    let walked = walk_second_host(&dd, &root, &staged, &engine, port, &project);
    let stack = HostStack {
        project: project.clone(),
        root: root.clone(),
        env: staged.join("host.env"),
    };
    assert!(
        walked.status.success(),
        "docs/deploy.md's second host failed: {}\n{}",
        output_text(&walked),
        output_text(&stack.compose(&["logs", "--no-color", "--tail", "50"]))
    );
    let env = std::fs::read_to_string(&stack.env).expect("host.env in the staged folder");
    assert!(
        !root.join("deploy/host.env").exists(),
        "nothing written into the checkout"
    );
    for line in [
        format!("COMPOSE_PROJECT_NAME={project}"),
        format!("DRYDOCK_STAGED={}", staged.display()),
        "DRYDOCK_EXECUTOR_ADDRESS=127.0.0.1".to_string(),
        format!("DRYDOCK_EXECUTOR_PORT={port}"),
    ] {
        assert!(env.lines().any(|l| l == line), "{line} in:\n{env}");
    }
    // The keys are the executor's user's alone.
    use std::os::unix::fs::MetadataExt as _;
    for key in ["executor.key", "healthcheck.key", "audit.key"] {
        let meta = std::fs::metadata(staged.join("executor/pki").join(key)).expect("staged key");
        assert_eq!((meta.uid(), meta.mode() & 0o777), (65532, 0o600), "{key}");
    }
    // Published on the address given, and nowhere else.
    let container = docker_ok(&[
        "ps",
        "-q",
        "--filter",
        &format!("label=com.docker.compose.project={project}"),
    ]);
    let ports = docker_ok(&["port", &container]);
    assert_eq!(ports, format!("7443/tcp -> 127.0.0.1:{port}"));

    // The agent reaches both hosts.
    let started = Instant::now();
    loop {
        let doctor = dd.cli(&["doctor"]);
        let said = output_text(&doctor);
        if said.contains(&format!(
            "host-b at https://127.0.0.1:{port}: executor answers"
        )) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "doctor never saw host-b:\n{said}\n{}",
            output_text(&stack.compose(&["logs", "--no-color", "--tail", "50"]))
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    // A fault on B is found from a plain question and repaired through B's
    // executor container, on B's engine.
    let health = || engine.ok(&["inspect", "-f", "{{.State.Health.Status}}", &api]);
    assert_eq!(health(), "unhealthy");
    let (code, req) = dd.ask_json(&["--yes", &format!("{api} is unhealthy")]);
    assert_eq!(req["status"], "completed", "exit {code}: {req:#}");
    assert_eq!(req["target"]["host"], "host-b");
    assert_eq!(health(), "healthy");
    let exported = stack.compose(&[
        "exec",
        "-T",
        "executor",
        "/drydock-executor",
        "audit",
        "export",
    ]);
    assert!(exported.status.success(), "{}", output_text(&exported));
    let id = req["id"].as_str().expect("id");
    assert!(
        String::from_utf8_lossy(&exported.stdout).lines().any(|l| {
            serde_json::from_str::<serde_json::Value>(l).is_ok_and(|r| {
                r["request_id"] == id && r["action"] == "restart" && r["decision"] == "allowed"
            })
        }),
        "host B's audit has the restart"
    );
}

/// `drydock host add --layout systemd` writes a config with the unit's
/// paths; it loads in the executor with every file where the unit and the
/// docs put it (in a container, so nothing on the host is touched).
#[test]
fn second_host_systemd_config_loads() {
    images();
    let dd = Drydock::init();
    let out = dd.cli(&[
        "host",
        "add",
        "host-b",
        "--address",
        "10.0.0.5",
        "--layout",
        "systemd",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    let dir = dd.home.path("hosts/host-b");
    assert!(
        !dir.join("pki/audit.key").exists() && !dir.join("state").exists(),
        "systemd hands over no signing key and keeps the state itself"
    );
    let yaml = std::fs::read_to_string(dir.join("executor.yaml")).expect("executor.yaml");
    assert!(
        yaml.contains("key: /run/credentials/drydock-executor.service/executor.key")
            && yaml.contains("path: /var/lib/drydock-executor/audit.db"),
        "{yaml}"
    );
    // The key as LoadCredential= hands it over: owned by the service's uid
    // (the image's user here), 0600.
    let key = dd.dir.path().join("credential-executor.key");
    std::fs::copy(dir.join("pki/executor.key"), &key).expect("copy key");
    std::os::unix::fs::chown(&key, Some(65532), Some(65532)).expect("chown");
    let mut args: Vec<String> = vec![
        "run".into(),
        "--rm".into(),
        "--network".into(),
        "none".into(),
    ];
    for (src, dest) in [
        (dir.join("executor.yaml"), "/etc/drydock/executor.yaml"),
        (dir.join("pki/ca.crt"), "/etc/drydock/pki/ca.crt"),
        (
            dir.join("pki/executor.crt"),
            "/etc/drydock/pki/executor.crt",
        ),
        (
            key.clone(),
            "/run/credentials/drydock-executor.service/executor.key",
        ),
    ] {
        args.push("-v".into());
        args.push(format!("{}:{dest}:ro", src.display()));
    }
    args.extend([
        format!("drydock-executor:{TAG}"),
        "check-config".into(),
        "--config".into(),
        "/etc/drydock/executor.yaml".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let checked = docker(&args);
    assert!(checked.status.success(), "{}", output_text(&checked));
}
