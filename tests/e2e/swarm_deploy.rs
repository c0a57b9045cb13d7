//! docs/deploy.md's "Services on Docker Swarm", walked as written on the
//! second engine of `second_engine.rs` (in Swarm mode, in a network
//! namespace of its own): the stack comes up locked down, the real CLI on
//! the node repairs a failing service through it, and the removal works.

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
/// The operator's group: the agent's socket admits it (and not root's).
const OPERATOR_GID: u32 = 4242;

/// `drydock ask --json ARGS` as a member of the operator's group only.
fn ask_as_operator(dd: &Drydock, args: &[&str]) -> (i32, Value) {
    use std::os::unix::process::CommandExt as _;
    let out = Command::new(bin("drydock"))
        .arg("ask")
        .arg("--json")
        .args(args)
        .env("DRYDOCK_HOME", &dd.home.root)
        .stdin(Stdio::null())
        .gid(OPERATOR_GID)
        .output()
        .expect("run drydock");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "ask printed no JSON ({e}):\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), value)
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
        .env("DRYDOCK_AGENT_GID", OPERATOR_GID.to_string())
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
    let started = std::time::Instant::now();
    while !(healthy(&engine, "drydock_executor") && healthy(&engine, "drydock_agent")) {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "the stack's services are not healthy within 90 s:\n{}",
            state(&engine)
        );
        std::thread::sleep(Duration::from_millis(500));
    }

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
    // Root is not admitted: the socket is the operator's group's.
    let refused = dd.cli(&["requests"]);
    assert!(!refused.status.success(), "{}", output_text(&refused));
    let (code, req) = ask_as_operator(&dd, &["--yes", "the web is down"]);
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

    let down = walk("swarm-down", &dd, &root, &engine);
    assert!(down.status.success(), "{}", output_text(&down));
    engine.wait_for("the stack removed", Duration::from_secs(60), |e| {
        !String::from_utf8_lossy(&e.run(&["service", "ls"]).stdout).contains("drydock_")
    });
}
