//! docs/deploy.md's "Services on Docker Swarm", walked as written, as
//! root, on the second engine of `second_engine.rs` (in Swarm mode, in a
//! network namespace of its own): the stack comes up locked down, root's
//! CLI on the node repairs a failing service through it, the audit and
//! backup block and a restore work, a user the agent's socket does not
//! admit is told why, an operator's group is let in with
//! DRYDOCK_AGENT_GID, and the removal works.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use drydock_e2e::second_engine::SecondEngine;
use drydock_e2e::*;
use serde_json::Value;

use crate::deploy::{checkout, images, output_text, walked_block, TAG};

const WEB: &str = drydock::fixture::FIXTURE_WEB_IMAGE;
/// The host folder deploy/stack.yaml binds for the agent's socket.
const SOCKET_DIR: &str = "/run/drydock-agent";
/// The operator: a user who is not root, with its own group.
const OPERATOR_UID: u32 = 4242;
const OPERATOR_GID: u32 = 4242;
/// Another group of another user.
const OTHER_GID: u32 = 4343;

/// `drydock ARGS` as uid `OPERATOR_UID` with primary group `gid` and
/// supplementary `groups`, on a copy of the home that user owns (with
/// util-linux's `setpriv`).
fn cli_as(home: &Path, gid: u32, groups: &[u32], args: &[&str]) -> Output {
    let mut cmd = Command::new("setpriv");
    cmd.arg(format!("--reuid={OPERATOR_UID}"))
        .arg(format!("--regid={gid}"));
    if groups.is_empty() {
        cmd.arg("--clear-groups");
    } else {
        let list: Vec<String> = groups.iter().map(u32::to_string).collect();
        cmd.arg(format!("--groups={}", list.join(",")));
    }
    cmd.arg("--")
        .arg(bin("drydock"))
        .args(args)
        .env("DRYDOCK_HOME", home)
        .env("HOME", home)
        .stdin(Stdio::null())
        .output()
        .expect("run drydock as the operator (setpriv, from util-linux)")
}

/// A copy of the home the operator owns (its keys stay private to it),
/// in `dir`.
fn operators_home(dd: &Drydock, dir: &Path) -> std::path::PathBuf {
    let copy = dir.join("operator-home");
    let out = Command::new("cp")
        .args(["-a"])
        .arg(&dd.home.root)
        .arg(&copy)
        .output()
        .expect("cp");
    assert!(out.status.success(), "{}", output_text(&out));
    let out = Command::new("chown")
        .args(["-R", &format!("{OPERATOR_UID}:{OPERATOR_GID}")])
        .arg(&copy)
        .output()
        .expect("chown");
    assert!(out.status.success(), "{}", output_text(&out));
    // The operator must reach its home through the test's folders.
    let mut dir = copy.parent();
    while let Some(d) = dir {
        if d == Path::new("/") {
            break;
        }
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(meta) = std::fs::metadata(d) {
            let mode = meta.permissions().mode() | 0o001;
            let _ = std::fs::set_permissions(d, std::fs::Permissions::from_mode(mode));
        }
        dir = d.parent();
    }
    copy
}

/// Run a walked block with bash from the checkout, with the docker CLI
/// pointed at `engine` and the images of this test's tag.
fn walk(name: &str, dd: &Drydock, root: &Path, engine: &SecondEngine) -> Output {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let socket = engine.endpoint();
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", &walked_block(name)])
        .current_dir(root)
        .env("PATH", path)
        .env("DRYDOCK_HOME", &dd.home.root)
        .env("DRYDOCK_TAG", TAG)
        .env("DOCKER_HOST", &socket)
        .env_remove("DRYDOCK_AGENT_GID")
        .env_remove("SUDO_GID")
        .env(
            "DOCKER_SOCKET",
            socket.strip_prefix("unix://").unwrap_or(&socket),
        )
        .stdin(Stdio::null())
        .output()
        .expect("run bash")
}

/// A service's spec, as the engine has it.
fn spec(engine: &SecondEngine, service: &str) -> Value {
    let text = engine.ok(&["service", "inspect", service, "--format", "{{json .Spec}}"]);
    serde_json::from_str(&text).expect("service spec json")
}

/// The one running container of a service.
fn container_of(engine: &SecondEngine, service: &str) -> String {
    engine
        .ok(&[
            "ps",
            "-q",
            "--filter",
            &format!("label=com.docker.swarm.service.name={service}"),
        ])
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn healthy(engine: &SecondEngine, service: &str) -> bool {
    let c = container_of(engine, service);
    !c.is_empty()
        && engine
            .run(&["inspect", "-f", "{{.State.Health.Status}}", &c])
            .stdout
            .starts_with(b"healthy")
}

/// The stack's engine state, for a failure message.
fn state(engine: &SecondEngine) -> String {
    let mut out = String::new();
    for service in ["drydock_executor", "drydock_agent"] {
        out.push_str(&format!(
            "{service}:\n{}\n{}\n",
            String::from_utf8_lossy(&engine.run(&["service", "ps", "--no-trunc", service]).stdout),
            String::from_utf8_lossy(&engine.run(&["service", "logs", "--raw", service]).stdout)
        ));
    }
    out
}

/// Removes the agent's socket folder (and its tmpfs) this test made on
/// the host.
struct SocketDir;
impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = Command::new("umount").args(["-l", SOCKET_DIR]).output();
        let _ = std::fs::remove_dir_all(SOCKET_DIR);
    }
}

#[test]
fn swarm_stack_repairs_a_service_through_locked_down_services() {
    prepare();
    images();
    let executor_image = format!("drydock-executor:{TAG}");
    let agent_image = format!("drydock-agent:{TAG}");
    let engine = SecondEngine::start_swarm(&[WEB, &executor_image, &agent_image]);
    let _socket_dir = SocketDir;
    // The broken workload: its task turns unhealthy after start and is
    // not restarted (a force update starts one that stays healthy).
    engine.create_wedging_once("shop_web");

    let dd = Drydock::uninitialized();
    let root = checkout(&dd);
    let setup = walk("swarm-setup", &dd, &root, &engine);
    assert!(
        setup.status.success(),
        "the Swarm set-up of docs/deploy.md failed: {}\n{}",
        output_text(&setup),
        state(&engine)
    );
    wait_healthy(&engine);

    // Locked down, as the engine runs them.
    let exec = spec(&engine, "drydock_executor");
    let agent = spec(&engine, "drydock_agent");
    let docker_gid = std::fs::metadata(
        engine
            .endpoint()
            .strip_prefix("unix://")
            .expect("a unix endpoint"),
    )
    .map(|m| std::os::unix::fs::MetadataExt::gid(&m))
    .expect("the engine's socket");
    let c = |s: &Value| s["TaskTemplate"]["ContainerSpec"].clone();
    assert_eq!(c(&exec)["User"], format!("65532:{docker_gid}"));
    assert!(c(&agent)["User"]
        .as_str()
        .is_some_and(|u| u.starts_with("65533:")));
    for (spec, role) in [(&exec, "executor"), (&agent, "agent")] {
        let cs = c(spec);
        assert_eq!(cs["ReadOnly"], true, "{role}: {cs:#}");
        assert_eq!(cs["CapabilityDrop"], serde_json::json!(["ALL"]), "{role}");
        assert_eq!(spec["Labels"]["io.drydock.role"], role, "{role}");
        for secret in cs["Secrets"].as_array().expect("secrets") {
            assert_eq!(secret["File"]["Mode"], 0o400, "{role}: {secret}");
        }
    }
    let sockets = |cs: &Value| {
        cs["Mounts"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter(|m| m["Target"] == "/var/run/docker.sock")
                    .count()
            })
            .unwrap_or(0)
    };
    assert_eq!(sockets(&c(&exec)), 1, "the executor has the socket");
    assert_eq!(sockets(&c(&agent)), 0, "the agent has no socket");
    let constraints = exec["TaskTemplate"]["Placement"]["Constraints"].to_string();
    assert!(
        constraints.contains("node.role == manager"),
        "{constraints}"
    );
    let network = engine.ok(&[
        "network",
        "inspect",
        "drydock_backplane",
        "--format",
        "{{.Internal}}",
    ]);
    assert_eq!(network, "true", "the backplane has no route out");

    // The loop, through the services: the real CLI on the node, on the
    // agent's socket.
    engine.wait_for("shop_web's task to end", Duration::from_secs(90), |e| {
        e.replicas("shop_web") == "0/1"
    });
    // Root, who deployed it, uses it as written.
    let said = output_text(&setup);
    assert!(said.contains("it admits root only"), "{said}");
    let (code, req) = dd.ask_json(&["--yes", "the web is down"]);
    assert_eq!(code, 0, "{req:#}\n{}", state(&engine));
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(req["target"]["container_name"], "shop_web", "{req:#}");
    assert_eq!(req["plan"]["steps"][0]["action"], "force_update", "{req:#}");
    assert_eq!(engine.replicas("shop_web"), "1/1");
    // drydock never shows its own services.
    let listed = req["evidence"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["type"] == "service_list"))
        .map(|e| e["data"].to_string())
        .unwrap_or_default();
    assert!(
        listed.contains("shop_web") && !listed.contains("drydock_"),
        "{listed}"
    );
    // The audit chain, verified inside the executor's container.
    let public = std::fs::read_to_string(dd.home.path("pki/audit.pub")).expect("audit.pub");
    let verify = engine.run(&[
        "exec",
        &container_of(&engine, "drydock_executor"),
        "/drydock-executor",
        "audit",
        "verify",
        "--public-key",
        public.trim(),
    ]);
    assert!(verify.status.success(), "{}", output_text(&verify));

    // Another user is told who the socket admits, not to start it.
    let operator_dir = tempfile::tempdir().expect("a folder for the operator's home");
    let operator = operators_home(&dd, operator_dir.path());
    let refused = cli_as(&operator, OPERATOR_GID, &[], &["requests"]);
    let said = output_text(&refused);
    assert!(
        !refused.status.success()
            && said.contains("is not open to you (permission denied)")
            && said.contains(&format!("you are uid {OPERATOR_UID} gid {OPERATOR_GID}"))
            && !said.contains("drydock up"),
        "{said}"
    );

    // The audit chain and a backup, as written; then a restore of it.
    let audit = walk("swarm-audit", &dd, &root, &engine);
    assert!(audit.status.success(), "{}", output_text(&audit));
    let exported = std::fs::read_to_string(root.join("audit.jsonl")).expect("audit.jsonl");
    assert!(exported.contains("force_update"), "{exported}");
    let backups: Vec<String> = std::fs::read_dir(root.join("backups"))
        .expect("backups/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(backups.len(), 1, "{backups:?}");
    let taken = &backups[0];
    for part in ["executor", "agent"] {
        assert!(
            root.join("backups").join(taken).join(part).is_dir(),
            "backups/{taken}/{part}"
        );
    }
    let restore = script(&dd, &root, &engine, &["restore", taken], &[]);
    assert!(
        restore.status.success(),
        "{}\n{}",
        output_text(&restore),
        state(&engine)
    );
    wait_healthy(&engine);
    let listed = dd.cli(&["requests", "--json"]);
    assert!(
        String::from_utf8_lossy(&listed.stdout).contains(req["id"].as_str().unwrap_or("?")),
        "the restored agent store has the repair: {}",
        output_text(&listed)
    );

    // The operator's group let in: its members with it as their primary
    // group use the socket; a member by a secondary group is told how.
    let up = script(
        &dd,
        &root,
        &engine,
        &["up"],
        &[("DRYDOCK_AGENT_GID", &OPERATOR_GID.to_string())],
    );
    assert!(up.status.success(), "{}", output_text(&up));
    let started = std::time::Instant::now();
    loop {
        let out = cli_as(&operator, OPERATOR_GID, &[], &["requests"]);
        if out.status.success() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the operator's group is not let in: {}\n{}",
            output_text(&out),
            state(&engine)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let refused = cli_as(&operator, OTHER_GID, &[OPERATOR_GID], &["doctor"]);
    let said = output_text(&refused);
    assert!(
        said.contains("refuses this user")
            && said.contains(&format!("primary group is gid {OPERATOR_GID}"))
            && said.contains(&format!("you are uid {OPERATOR_UID} gid {OTHER_GID}"))
            && said.contains(&format!("sg {OPERATOR_GID}")),
        "{said}"
    );

    let down = walk("swarm-down", &dd, &root, &engine);
    assert!(down.status.success(), "{}", output_text(&down));
    engine.wait_for("the stack removed", Duration::from_secs(60), |e| {
        !String::from_utf8_lossy(&e.run(&["service", "ls"]).stdout).contains("drydock_")
    });
    assert!(
        !Path::new(SOCKET_DIR).exists(),
        "down removes the socket folder"
    );
    let labels = engine.ok(&[
        "node",
        "inspect",
        "self",
        "--format",
        "{{json .Spec.Labels}}",
    ]);
    assert!(
        !labels.contains("drydock"),
        "down removes the node label: {labels}"
    );
}

/// Both of the stack's services running and healthy (or a failed test
/// after 90 s).
fn wait_healthy(engine: &SecondEngine) {
    let started = std::time::Instant::now();
    while !(healthy(engine, "drydock_executor") && healthy(engine, "drydock_agent")) {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the stack's services are not healthy within 90 s:\n{}",
            state(engine)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `deploy/swarm-deploy.sh HOME ARGS` as root, with `env` set, the docker
/// CLI pointed at `engine`.
fn script(
    dd: &Drydock,
    root: &Path,
    engine: &SecondEngine,
    args: &[&str],
    env: &[(&str, &str)],
) -> Output {
    let socket = engine.endpoint();
    let mut cmd = Command::new(root.join("deploy/swarm-deploy.sh"));
    cmd.arg(&dd.home.root)
        .args(args)
        .current_dir(root)
        .env("DRYDOCK_TAG", TAG)
        .env("DOCKER_HOST", &socket)
        .env_remove("DRYDOCK_AGENT_GID")
        .env_remove("SUDO_GID")
        .env(
            "DOCKER_SOCKET",
            socket.strip_prefix("unix://").unwrap_or(&socket),
        )
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run deploy/swarm-deploy.sh")
}
