//! Deployment (issue 6): the daemons as two locked-down containers
//! (`deploy/compose.yaml`) and as two hardened systemd services
//! (`deploy/systemd/`).
//!
//! The compose test uses exactly what docs/deploy.md tells an operator to
//! run: `deploy/build-images.sh` (static binaries in `FROM scratch` images),
//! `deploy/stage-compose.sh` (each container's files, owned by its user) and
//! `docker-compose up`. The whole loop then runs through the containers: the
//! real CLI on the host → the agent container → the executor container →
//! Docker. What the containers may do is checked on the containers
//! themselves (Docker's inspect, `docker cp`, a client on the internal
//! network), not on the compose file.

use std::collections::BTreeSet;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use drydock_e2e::*;
use serde_json::Value;

/// Images built by this test are tagged apart from an operator's `latest`.
pub(crate) const TAG: &str = "e2e";
/// Must match `user:` in deploy/compose.yaml, USER in the images and the
/// owners set by deploy/stage-compose.sh (checked by
/// `deploy_files_agree_with_each_other`).
const EXECUTOR_USER: &str = "65532:65532";
const AGENT_USER: &str = "65533:65533";
const DOCKER_SOCKET: &str = "/var/run/docker.sock";

fn deploy_dir() -> PathBuf {
    workspace_root().join("deploy")
}

fn deploy_file(rel: &str) -> String {
    let path = deploy_dir().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub(crate) fn output_text(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Build drydock-executor:e2e and drydock-agent:e2e once per test process,
/// the way an operator without a registry does.
pub(crate) fn images() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let result = READY.get_or_init(|| {
        require_docker();
        // At the lowest CPU priority: other tests run their daemons and
        // health timeouts meanwhile, and a release build would starve them.
        let status = Command::new("nice")
            .args(["-n", "19", "bash"])
            .arg(deploy_dir().join("build-images.sh"))
            .env("DRYDOCK_TAG", TAG)
            .stdin(Stdio::null())
            .status()
            .map_err(|e| format!("cannot run deploy/build-images.sh: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("deploy/build-images.sh failed: {status}"))
        }
    });
    if let Err(e) = result {
        panic!("building the deploy images failed: {e}");
    }
}

/// docs/deploy.md: each image is at most 15 MB, measured with the command
/// the docs show.
#[test]
fn deploy_images_are_at_most_15_mb() {
    images();
    let command =
        "docker image inspect -f '{{.Size}}' drydock-executor:latest drydock-agent:latest";
    assert!(
        std::fs::read_to_string(workspace_root().join("docs/deploy.md"))
            .expect("docs/deploy.md")
            .contains(command),
        "docs/deploy.md shows how the sizes are measured"
    );
    for daemon in ["executor", "agent"] {
        let image = format!("drydock-{daemon}:{TAG}");
        let size: u64 = docker_ok(&["image", "inspect", "-f", "{{.Size}}", &image])
            .parse()
            .expect("a size in bytes");
        assert!(
            size <= 15_000_000,
            "{image} is {size} bytes, more than 15 MB"
        );
    }
}

/// A home made as `drydock init --layout compose` makes it, with its own
/// loopback port for the agent.
fn init_home() -> Drydock {
    Drydock::init_options(|o| {
        o.layout = drydock::home::Layout::Compose;
        o.executor_names = vec![drydock::home::COMPOSE_EXECUTOR_NAME.into()];
        o.agent_tcp = true;
    })
}

/// `deploy/stage-compose.sh HOME DEST`; returns DEST.
fn stage(dd: &Drydock) -> PathBuf {
    let dest = dd.dir.path().join("staged");
    let out = Command::new("bash")
        .arg(deploy_dir().join("stage-compose.sh"))
        .arg(&dd.home.root)
        .arg(&dest)
        .stdin(Stdio::null())
        .output()
        .expect("run deploy/stage-compose.sh");
    assert!(
        out.status.success(),
        "deploy/stage-compose.sh failed (it must run as root, it hands the keys to the containers' users): {}",
        output_text(&out)
    );
    dest
}

/// Every file under `dir`, relative, with its owner and mode.
fn tree(dir: &Path) -> BTreeSet<(String, u32, u32)> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<(String, u32, u32)>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).expect("stat");
            if meta.is_dir() {
                walk(root, &path, out);
            } else {
                let rel = path.strip_prefix(root).expect("prefix");
                out.insert((
                    rel.to_string_lossy().into_owned(),
                    meta.uid(),
                    meta.permissions().mode() & 0o777,
                ));
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

fn set(items: &[(&str, u32, u32)]) -> BTreeSet<(String, u32, u32)> {
    items
        .iter()
        .map(|(p, uid, mode)| (p.to_string(), *uid, *mode))
        .collect()
}

/// The shell block of docs/deploy.md marked
/// `<!-- walked by tests/e2e/deploy.rs: NAME -->`, as written.
pub(crate) fn walked_block(name: &str) -> String {
    let doc =
        std::fs::read_to_string(workspace_root().join("docs/deploy.md")).expect("docs/deploy.md");
    let marker = format!("<!-- walked by tests/e2e/deploy.rs: {name} -->");
    let after = doc
        .split_once(&marker)
        .unwrap_or_else(|| panic!("docs/deploy.md has no block marked {marker}"))
        .1;
    let body = after
        .trim_start()
        .strip_prefix("```sh\n")
        .unwrap_or_else(|| panic!("{marker} must be followed by a ```sh block"));
    body.split_once("\n```")
        .unwrap_or_else(|| panic!("{marker}: the block never ends"))
        .0
        .to_string()
}

/// A copy of the repository's deploy/ folder: the walked commands run in
/// it, so the deploy/.env they write is this test's own.
pub(crate) fn checkout(dd: &Drydock) -> PathBuf {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).expect("mkdir");
        for entry in std::fs::read_dir(from).expect("read deploy/") {
            let entry = entry.expect("entry");
            let name = entry.file_name();
            if name == ".env" {
                continue;
            }
            let (src, dst) = (entry.path(), to.join(&name));
            if entry.file_type().expect("type").is_dir() {
                copy(&src, &dst);
            } else {
                std::fs::copy(&src, &dst).expect("copy");
            }
        }
    }
    let root = dd.dir.path().join("checkout");
    copy(&deploy_dir(), &root.join("deploy"));
    root
}

/// Run a walked block with bash, from the checkout, as an operator whose
/// `drydock` is on PATH. The only change to the text: the staging folder
/// is the test's own instead of /etc/drydock-compose.
fn walk(name: &str, dd: &Drydock, root: &Path, staged: &Path, project: &str) -> Output {
    let script = walked_block(name).replace("/etc/drydock-compose", &staged.display().to_string());
    // Chosen by the test where the docs take the defaults (7420), so that
    // it can run beside anything.
    let port = dd.agent_port.to_string();
    run_walked(&script, dd, root, project, &[("DRYDOCK_AGENT_PORT", &port)])
}

/// Run a walked block's text with bash, from the checkout `root`, as an
/// operator whose `drydock` is on PATH, with the test's home, image tag,
/// compose project and a 1 s health interval (Docker runs the first probe
/// one interval after the start; the default 10s would only make the test
/// wait), and `env`.
pub(crate) fn run_walked(
    script: &str,
    dd: &Drydock,
    root: &Path,
    project: &str,
    env: &[(&str, &str)],
) -> Output {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(root)
        .env("PATH", path)
        .env("DRYDOCK_HOME", &dd.home.root)
        .env("DRYDOCK_TAG", TAG)
        .env("COMPOSE_PROJECT_NAME", project)
        .env("DRYDOCK_HEALTH_INTERVAL", "1s")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .expect("run bash")
}

/// A compose project, taken down with its volumes when dropped (also when
/// the test fails).
struct Stack {
    project: String,
    /// The checkout whose deploy/.env the stack's commands read.
    root: PathBuf,
}

impl Stack {
    /// `docker-compose -f deploy/compose.yaml ARGS` from the checkout with
    /// none of drydock's variables set: deploy/.env must carry them all.
    fn compose(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("docker-compose");
        cmd.arg("-f").arg("deploy/compose.yaml").args(args);
        for var in [
            "COMPOSE_PROJECT_NAME",
            "DRYDOCK_STAGED",
            "DOCKER_GID",
            "DOCKER_SOCKET",
            "DRYDOCK_AGENT_PORT",
            "DRYDOCK_TAG",
            "DRYDOCK_HEALTH_INTERVAL",
        ] {
            cmd.env_remove(var);
        }
        cmd.current_dir(&self.root)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run docker-compose (Debian: apt-get install docker-compose): {e}")
            })
    }

    fn logs(&self) -> String {
        output_text(&self.compose(&["logs", "--no-color", "--tail", "100"]))
    }

    /// The containers of this project (by Docker's labels).
    fn containers(&self, service: &str) -> String {
        docker_ok(&[
            "ps",
            "-aq",
            "--filter",
            &format!("label=com.docker.compose.project={}", self.project),
            "--filter",
            &format!("label=com.docker.compose.service={service}"),
        ])
    }

    /// The container id of a service.
    fn container(&self, service: &str) -> String {
        let id = self.containers(service);
        assert!(
            !id.is_empty() && !id.contains('\n'),
            "one {service} container expected in project {}, got {id:?}",
            self.project
        );
        id
    }

    fn network(&self, name: &str) -> String {
        format!("{}_{name}", self.project)
    }

    fn wait_healthy(&self, service: &str, timeout: Duration) {
        let id = self.container(service);
        let started = Instant::now();
        loop {
            let health = docker_ok(&[
                "inspect",
                "-f",
                "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}",
                &id,
            ]);
            if health == "healthy" {
                return;
            }
            assert!(
                started.elapsed() < timeout,
                "{service} is {health} after {timeout:?}:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // By project name, so that a broken deploy/.env cannot leak a stack.
        let _ = Command::new("docker-compose")
            .args(["-p", &self.project, "-f", "deploy/compose.yaml"])
            .args(["down", "-v", "--remove-orphans", "-t", "5"])
            // Only to interpolate the file, whatever deploy/.env holds.
            .env("DRYDOCK_STAGED", "/nonexistent")
            .env("DOCKER_GID", "0")
            .current_dir(&self.root)
            .stdin(Stdio::null())
            .output();
    }
}

fn inspect(id: &str) -> Value {
    let text = docker_ok(&["inspect", id]);
    let mut all: Value = serde_json::from_str(&text).expect("inspect is JSON");
    all[0].take()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// One mount as Docker reports it: type, host source (binds only),
/// destination, writable.
type Mount = (String, String, String, bool);

fn mounts(c: &Value) -> BTreeSet<Mount> {
    c["Mounts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let kind = m["Type"].as_str().unwrap_or("").to_string();
            let source = if kind == "bind" {
                m["Source"].as_str().unwrap_or("").to_string()
            } else {
                String::new()
            };
            (
                kind,
                source,
                m["Destination"].as_str().unwrap_or("").to_string(),
                m["RW"].as_bool().unwrap_or(true),
            )
        })
        .collect()
}

fn bind(source: &Path, dest: &str, rw: bool) -> Mount {
    ("bind".into(), source.display().to_string(), dest.into(), rw)
}

fn volume(dest: &str) -> Mount {
    ("volume".into(), String::new(), dest.into(), true)
}

fn networks(c: &Value) -> BTreeSet<String> {
    c["NetworkSettings"]["Networks"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// What both containers share: read-only root, no capabilities, no way to
/// gain privileges, a fixed non-root user, resource limits.
fn assert_locked_down(name: &str, c: &Value, user: &str) {
    let hc = &c["HostConfig"];
    assert_eq!(
        hc["ReadonlyRootfs"], true,
        "{name}: read-only root filesystem"
    );
    assert_eq!(strings(&hc["CapDrop"]), ["ALL"], "{name}: cap_drop ALL");
    assert!(
        strings(&hc["CapAdd"]).is_empty(),
        "{name}: no capability added"
    );
    assert_eq!(hc["Privileged"], false, "{name}: not privileged");
    assert!(
        strings(&hc["SecurityOpt"]).contains(&"no-new-privileges:true".to_string()),
        "{name}: no-new-privileges, got {}",
        hc["SecurityOpt"]
    );
    assert_eq!(c["Config"]["User"], user, "{name}: runs as {user}");
    for limit in ["Memory", "NanoCpus", "PidsLimit"] {
        assert!(
            hc[limit].as_i64().unwrap_or(0) > 0,
            "{name}: {limit} is limited, got {}",
            hc[limit]
        );
    }
    assert_ne!(hc["PidMode"], "host", "{name}: own pid namespace");
    assert_ne!(hc["NetworkMode"], "host", "{name}: own network namespace");
}

/// `docker cp` reads a container's filesystem as the container sees it,
/// mounts included. A missing path is "Could not find the file"; an
/// existing socket is found (and copied as nothing, tar skips sockets).
fn container_has_path(id: &str, path: &str) -> bool {
    let dest = tempfile::tempdir().expect("temp dir");
    let out = docker(&[
        "cp",
        &format!("{id}:{path}"),
        &dest.path().display().to_string(),
    ]);
    out.status.success() || !output_text(&out).contains("Could not find the file")
}

/// Each container gets exactly its own files, owned by its own user: never
/// the approver key, never the CA key, never the other daemon's key.
fn assert_staged_files(staged: &Path) {
    assert_eq!(
        tree(&staged.join("executor")),
        set(&[
            ("executor.yaml", 0, 0o644),
            ("pki/ca.crt", 0, 0o644),
            ("pki/executor.crt", 0, 0o644),
            ("pki/executor.key", 65532, 0o600),
            ("pki/healthcheck.crt", 0, 0o644),
            ("pki/healthcheck.key", 65532, 0o600),
            ("pki/audit.key", 65532, 0o600),
        ]),
        "the executor's staged files"
    );
    assert_eq!(
        tree(&staged.join("agent")),
        set(&[
            ("agent.yaml", 0, 0o644),
            ("agent.token", 65533, 0o600),
            ("pki/ca.crt", 0, 0o644),
            ("pki/agent.crt", 0, 0o644),
            ("pki/agent.key", 65533, 0o600),
        ]),
        "the agent's staged files"
    );
}

/// The agent: no socket and no way to one, no host mount but its staged
/// read-only folder, a root filesystem that refuses writes, its API on
/// loopback only.
fn assert_agent_isolated(stack: &Stack, staged: &Path, dd: &Drydock) {
    let id = stack.container("agent");
    let agent = inspect(&id);
    assert_locked_down("agent", &agent, AGENT_USER);
    assert_eq!(
        mounts(&agent),
        [
            bind(&staged.join("agent"), "/etc/drydock", false),
            volume("/var/lib/drydock"),
        ]
        .into_iter()
        .collect(),
        "the agent's mounts: {}",
        agent["Mounts"]
    );
    assert!(
        strings(&agent["HostConfig"]["GroupAdd"]).is_empty(),
        "the agent is in no extra group: {}",
        agent["HostConfig"]["GroupAdd"]
    );
    for path in [
        "/var/run/docker.sock",
        "/run/docker.sock",
        "/run/containerd",
    ] {
        assert!(
            !container_has_path(&id, path),
            "{path} exists in the agent container"
        );
    }
    assert!(
        container_has_path(&stack.container("executor"), "/var/run/docker.sock"),
        "control: the same probe finds the executor's socket"
    );
    assert_eq!(
        agent["HostConfig"]["PortBindings"]["7420/tcp"],
        serde_json::json!([{"HostIp": "127.0.0.1", "HostPort": dd.agent_port.to_string()}]),
        "the agent API is published on loopback only"
    );
    assert_eq!(
        networks(&agent),
        [stack.network("backplane"), stack.network("frontend")]
            .into_iter()
            .collect()
    );
    // The root filesystem and the config folder refuse writes, even from
    // the Docker daemon; the state volume (the control) takes them.
    let probe = dd.dir.path().join("write-probe");
    std::fs::write(&probe, "x").expect("write probe");
    for (dest, writable) in [
        ("/", false),
        ("/etc/drydock/", false),
        ("/var/lib/drydock/", true),
    ] {
        let out = docker(&["cp", &probe.display().to_string(), &format!("{id}:{dest}")]);
        if writable {
            assert!(
                out.status.success(),
                "control: {dest} takes a write: {}",
                output_text(&out)
            );
        } else {
            assert!(
                !out.status.success() && output_text(&out).contains("read-only"),
                "writing into the agent's {dest} must fail as read-only: {}",
                output_text(&out)
            );
        }
    }
}

/// The executor: the socket through its group alone, nothing published,
/// only on the internal network.
fn assert_executor_confined(stack: &Stack, staged: &Path) {
    let executor = inspect(&stack.container("executor"));
    assert_locked_down("executor", &executor, EXECUTOR_USER);
    assert_eq!(
        mounts(&executor),
        [
            bind(Path::new(DOCKER_SOCKET), "/var/run/docker.sock", true),
            bind(&staged.join("executor"), "/etc/drydock", false),
            volume("/var/lib/drydock"),
        ]
        .into_iter()
        .collect(),
        "the executor's mounts: {}",
        executor["Mounts"]
    );
    let gid = std::fs::metadata(DOCKER_SOCKET).expect("socket").gid();
    assert_eq!(
        strings(&executor["HostConfig"]["GroupAdd"]),
        [gid.to_string()],
        "the executor gets the socket's group and nothing else"
    );
    assert!(
        executor["HostConfig"]["PortBindings"]
            .as_object()
            .is_none_or(|m| m.is_empty()),
        "nothing of the executor is published: {}",
        executor["HostConfig"]["PortBindings"]
    );
    assert_eq!(
        networks(&executor),
        [stack.network("backplane")].into_iter().collect()
    );
    assert_eq!(
        docker_ok(&[
            "network",
            "inspect",
            "-f",
            "{{.Internal}}",
            &stack.network("backplane")
        ]),
        "true",
        "the backplane has no route out"
    );
}

/// From a container on the internal network: the real health identity is
/// served over the service name the certificate carries (the control), and
/// a client certificate from another CA is refused, even one naming itself
/// drydock-agent.
fn assert_foreign_client_refused(stack: &Stack, staged: &Path, dd: &Drydock) {
    let rogue_dir = dd.dir.path().join("rogue");
    std::fs::create_dir_all(&rogue_dir).expect("rogue dir");
    let rogue = drydock::pki::Authority::new("rogue CA")
        .and_then(|ca| {
            ca.issue(
                drydock::pki::AGENT_IDENTITY,
                &[],
                drydock::pki::Usage::Client,
                0,
                1,
            )
        })
        .expect("rogue cert");
    for (file, text) in [
        (
            "ca.crt",
            String::from_utf8_lossy(&read(&dd.home.path("pki/ca.crt"))).into_owned(),
        ),
        ("client.crt", rogue.cert_pem),
        ("client.key", rogue.key_pem),
    ] {
        let path = rogue_dir.join(file);
        std::fs::write(&path, text).expect("write rogue file");
        // A throwaway key, readable by the client container's user.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    }
    let health_from_backplane = |pki: &Path, cert: &str, key: &str| -> Output {
        docker(&[
            "run",
            "--rm",
            "--network",
            &stack.network("backplane"),
            "--read-only",
            "--cap-drop",
            "ALL",
            "-v",
            &format!("{}:/pki:ro", pki.display()),
            &format!("drydock-executor:{TAG}"),
            "health",
            "--addr",
            "executor:7443",
            "--server-name",
            "executor",
            "--ca",
            "/pki/ca.crt",
            "--cert",
            &format!("/pki/{cert}"),
            "--key",
            &format!("/pki/{key}"),
        ])
    };
    let ok = health_from_backplane(
        &staged.join("executor/pki"),
        "healthcheck.crt",
        "healthcheck.key",
    );
    assert!(
        ok.status.success(),
        "the health identity must be served: {}",
        output_text(&ok)
    );
    let refused = health_from_backplane(&rogue_dir, "client.crt", "client.key");
    assert!(
        !refused.status.success(),
        "a certificate from another CA must be refused: {}",
        output_text(&refused)
    );
}

/// Every audit row, through the executor's own tool inside its container.
fn audit_rows_in_container(stack: &Stack) -> Vec<Value> {
    let out = docker(&[
        "exec",
        &stack.container("executor"),
        "/drydock-executor",
        "audit",
        "export",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit row is JSON"))
        .collect()
}

#[test]
fn compose_stack_repairs_through_locked_down_containers() {
    images();
    // An empty home (the fixture images are built here); the walked
    // commands run `drydock init` in it.
    let dd = Drydock::uninitialized();
    // The broken workload, started first: it turns unhealthy while the
    // stack comes up.
    let broken = Container::run(
        "deploy-unhealthy",
        &[
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
    // docs/deploy.md's set-up, walked as written (the CLI and the images
    // are the steps before it: bin_dir() and images()).
    let root = checkout(&dd);
    let staged = dd.dir.path().join("staged");
    let project = unique("deploy");
    let setup = walk("compose-setup", &dd, &root, &staged, &project);
    let stack = Stack {
        project: project.clone(),
        root: root.clone(),
    };
    assert!(
        setup.status.success(),
        "the compose set-up of docs/deploy.md failed: {}\n{}",
        output_text(&setup),
        stack.logs()
    );
    assert_staged_files(&staged);
    let env = std::fs::read_to_string(root.join("deploy/.env"))
        .expect("stage-compose.sh writes deploy/.env");
    for line in [
        format!("COMPOSE_PROJECT_NAME={project}"),
        format!("DRYDOCK_STAGED={}", staged.display()),
        format!("DRYDOCK_AGENT_PORT={}", dd.agent_port),
        format!("DRYDOCK_TAG={TAG}"),
    ] {
        assert!(
            env.lines().any(|l| l == line),
            "deploy/.env lacks {line}:\n{env}"
        );
    }
    let executor_yaml = std::fs::read_to_string(staged.join("executor/executor.yaml"))
        .expect("staged executor.yaml");
    assert!(
        executor_yaml.contains("redact:\n  env: all\n"),
        "the compose layout withholds every environment value: {executor_yaml}"
    );
    stack.wait_healthy("executor", Duration::from_secs(60));
    stack.wait_healthy("agent", Duration::from_secs(60));

    assert_agent_isolated(&stack, &staged, &dd);
    assert_executor_confined(&stack, &staged);
    assert_foreign_client_refused(&stack, &staged, &dd);

    // The loop, through the containers: the real CLI on the host, its
    // cli.yaml pointing at the published loopback port.
    broken.wait_for("unhealthy", Duration::from_secs(60), |c| {
        c.health() == "unhealthy"
    });
    let (code, req) = dd.ask_json(&[
        "--yes",
        "--container",
        &broken.name,
        "the service is unhealthy",
    ]);
    assert_eq!(code, 0, "exit code; request: {req:#}\n{}", stack.logs());
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(
        req["diagnosis"]["causes"][0]["class"], "unhealthy",
        "{req:#}"
    );
    assert_eq!(req["plan"]["steps"][0]["action"], "restart", "{req:#}");
    assert_eq!(req["verification"]["ok"], true, "{req:#}");
    assert_eq!(
        broken.health(),
        "healthy",
        "Docker itself must report the container healthy"
    );

    // The audit, read inside the executor's container: the restart came
    // from the agent's identity, the refused handshake is recorded, the
    // chain is intact.
    let rows = audit_rows_in_container(&stack);
    let restarts: Vec<_> = rows.iter().filter(|r| r["action"] == "restart").collect();
    assert_eq!(
        decisions(restarts.iter().copied()),
        ["intent", "allowed"],
        "the approval spent before Docker, then the outcome: {rows:#?}"
    );
    let restart = restarts[1];
    assert_eq!(
        rows[0]["decision"], "init",
        "the store was initialised deliberately"
    );
    assert_eq!(restart["caller"], "drydock-agent");
    assert_eq!(restart["container_id"], broken.id().as_str());
    assert!(
        rows.iter().any(|r| r["action"] == "connect"
            && r["decision"] == "denied"
            && r["caller"]
                .as_str()
                .is_some_and(|c| c.starts_with("unauthenticated@"))),
        "the refused handshake is audited: {rows:#?}"
    );
    let verify = docker(&[
        "exec",
        &stack.container("executor"),
        "/drydock-executor",
        "audit",
        "verify",
    ]);
    assert!(verify.status.success(), "{}", output_text(&verify));

    // `drydock doctor`, as the docs say to run it: the compose layout is
    // checked through the agent.
    let doctor = dd.cli(&["doctor"]);
    assert!(
        doctor.status.success(),
        "drydock doctor: {}",
        output_text(&doctor)
    );

    // The later commands, from a fresh shell: deploy/.env carries what
    // they need (no -p, no variables but the walk's own).
    let executor_before = stack.container("executor");
    let later = walk("compose-later", &dd, &root, &staged, &project);
    assert!(
        later.status.success(),
        "the later commands of docs/deploy.md failed: {}\n{}",
        output_text(&later),
        stack.logs()
    );
    let export =
        std::fs::read_to_string(root.join("audit.jsonl")).expect("audit export wrote audit.jsonl");
    assert!(
        export.lines().any(|l| l.contains("\"restart\"")),
        "the export holds the restart: {export}"
    );
    assert_eq!(
        stack.container("executor"),
        executor_before,
        "restart keeps the container"
    );
    stack.wait_healthy("executor", Duration::from_secs(60));
    stack.wait_healthy("agent", Duration::from_secs(60));
    let (code, req) = dd.ask_json(&[
        "--diagnose-only",
        "--container",
        &broken.name,
        "check again",
    ]);
    assert_eq!(code, 0, "after the restart: {req:#}\n{}", stack.logs());

    let down = walk("compose-down", &dd, &root, &staged, &project);
    assert!(
        down.status.success(),
        "docker-compose down: {}",
        output_text(&down)
    );
    assert!(
        stack.containers("executor").is_empty() && stack.containers("agent").is_empty(),
        "down removes the project's containers"
    );
}

/// One `[Service]` directive's values (a directive may repeat).
fn directive(unit: &str, key: &str) -> Vec<String> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
        .collect()
}

fn assert_directive(name: &str, unit: &str, key: &str, value: &str) {
    assert!(
        directive(unit, key).iter().any(|v| v == value),
        "{name}: {key}={value} expected, found {:?}",
        directive(unit, key)
    );
}

#[test]
fn systemd_units_are_hardened() {
    let executor = deploy_file("systemd/drydock-executor.service");
    let agent = deploy_file("systemd/drydock-agent.service");
    for (name, unit) in [("executor", &executor), ("agent", &agent)] {
        for (key, value) in [
            ("DynamicUser", "yes"),
            ("NoNewPrivileges", "yes"),
            ("CapabilityBoundingSet", ""),
            ("AmbientCapabilities", ""),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("PrivateTmp", "yes"),
            ("PrivateDevices", "yes"),
            ("ProtectKernelTunables", "yes"),
            ("ProtectKernelModules", "yes"),
            ("ProtectControlGroups", "yes"),
            ("RestrictNamespaces", "yes"),
            ("RestrictSUIDSGID", "yes"),
            ("LockPersonality", "yes"),
            ("MemoryDenyWriteExecute", "yes"),
            ("SystemCallArchitectures", "native"),
            ("SystemCallFilter", "@system-service"),
            ("UMask", "0077"),
        ] {
            assert_directive(name, unit, key, value);
        }
        for key in ["StateDirectory", "MemoryMax", "TasksMax", "ExecStart"] {
            assert!(!directive(unit, key).is_empty(), "{name}: {key} is set");
        }
        assert_eq!(
            directive(unit, "CapabilityBoundingSet"),
            [""],
            "{name}: one empty CapabilityBoundingSet"
        );
    }
    // The executor: the socket's group is its one grant; no user namespace
    // (it would unmap that group).
    assert_eq!(directive(&executor, "SupplementaryGroups"), ["docker"]);
    assert_directive(
        "executor",
        &executor,
        "RestrictAddressFamilies",
        "AF_UNIX AF_INET AF_INET6",
    );
    assert!(directive(&executor, "PrivateUsers").is_empty());
    // The agent: no group, the socket hidden, and no unix socket at all.
    assert!(directive(&agent, "SupplementaryGroups").is_empty());
    let hidden = directive(&agent, "InaccessiblePaths").join(" ");
    for path in ["-/run/docker.sock", "-/var/run/docker.sock"] {
        assert!(
            hidden.split_whitespace().any(|p| p == path),
            "agent: InaccessiblePaths has {path}: {hidden}"
        );
    }
    assert_eq!(
        directive(&agent, "RestrictAddressFamilies"),
        ["AF_INET AF_INET6"]
    );
    assert_directive("agent", &agent, "PrivateUsers", "yes");

    // Each credential a config names is one its unit loads.
    for (unit_name, unit, config) in [
        (
            "drydock-executor",
            &executor,
            deploy_file("systemd/executor.yaml"),
        ),
        ("drydock-agent", &agent, deploy_file("systemd/agent.yaml")),
    ] {
        let prefix = format!("/run/credentials/{unit_name}.service/");
        let loaded: Vec<String> = directive(unit, "LoadCredential")
            .iter()
            .filter_map(|v| v.split_once(':').map(|(id, _)| id.to_string()))
            .collect();
        let named: Vec<&str> = config
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(|l| l.split_once(prefix.as_str()).map(|(_, id)| id.trim()))
            .collect();
        assert!(
            !named.is_empty(),
            "{unit_name}: its config uses credentials"
        );
        for id in named {
            assert!(
                loaded.iter().any(|l| l == id),
                "{unit_name}: the config reads credential {id}, the unit loads {loaded:?}"
            );
        }
    }

    // systemd's own checks, where systemd-analyze exists (the directive
    // checks above stand in where it does not). verify warns about unknown
    // keys and bad values on stderr yet exits 0, so any output fails.
    if Command::new("systemd-analyze")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("systemd-analyze is not installed: only the directive checks ran");
        return;
    }
    prepare();
    let dir = tempfile::tempdir().expect("temp dir");
    for (daemon, unit) in [("drydock-executor", &executor), ("drydock-agent", &agent)] {
        // verify needs ExecStart to exist: point it at the binary built here.
        let text = unit.replace(
            &format!("/usr/local/bin/{daemon}"),
            &bin(daemon).display().to_string(),
        );
        let path = dir.path().join(format!("{daemon}.service"));
        std::fs::write(&path, text).expect("write unit");
        let verify = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&path)
            .output()
            .expect("systemd-analyze verify");
        assert!(
            verify.status.success() && verify.stderr.is_empty() && verify.stdout.is_empty(),
            "systemd-analyze verify {daemon}: {}",
            output_text(&verify)
        );
        // Exposure on systemd's 0–10 scale (threshold in tenths): at most
        // 2.0, well inside the "OK" band.
        let security = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--threshold=20", "--no-pager"])
            .arg(&path)
            .output()
            .expect("systemd-analyze security");
        assert!(
            security.status.success(),
            "{daemon} is exposed above 2.0: {}",
            output_text(&security)
        );
    }
}

/// The systemd example configs load in the real daemons, with every file
/// at the absolute path the units give it (inside a container, so the test
/// can put files at /etc/drydock and /run/credentials without touching the
/// host).
#[test]
fn systemd_example_configs_load_in_the_daemons() {
    images();
    let dd = init_home();
    let staged = stage(&dd);
    let public = std::fs::read_to_string(dd.home.path("approver.pub")).expect("approver.pub");
    let executor_yaml = deploy_file("systemd/executor.yaml");
    assert!(executor_yaml.contains("ed25519:PASTE-approver.pub-HERE"));
    let executor_yaml = executor_yaml.replace("ed25519:PASTE-approver.pub-HERE", public.trim());
    let config_dir = dd.dir.path().join("systemd-etc");
    std::fs::create_dir_all(&config_dir).expect("dir");
    std::fs::write(config_dir.join("executor.yaml"), executor_yaml).expect("write");
    std::fs::write(
        config_dir.join("agent.yaml"),
        deploy_file("systemd/agent.yaml"),
    )
    .expect("write");
    let pki = dd.home.path("pki");
    let check = |image: &str, mounts: &[(PathBuf, &str)], config: &str| {
        let mut args = vec![
            "run".to_string(),
            "--rm".into(),
            "--read-only".into(),
            "--network".into(),
            "none".into(),
        ];
        for (src, dest) in mounts {
            args.push("-v".into());
            args.push(format!("{}:{dest}:ro", src.display()));
        }
        args.extend([
            format!("{image}:{TAG}"),
            "check-config".into(),
            "--config".into(),
            config.into(),
        ]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = docker(&args);
        assert!(
            out.status.success(),
            "{image} check-config {config}: {}",
            output_text(&out)
        );
    };
    check(
        "drydock-executor",
        &[
            (
                config_dir.join("executor.yaml"),
                "/etc/drydock/executor.yaml",
            ),
            (pki.join("ca.crt"), "/etc/drydock/pki/ca.crt"),
            (pki.join("executor.crt"), "/etc/drydock/pki/executor.crt"),
            // What LoadCredential= makes: owned by the service's uid, 0600.
            (
                staged.join("executor/pki/executor.key"),
                "/run/credentials/drydock-executor.service/executor.key",
            ),
        ],
        "/etc/drydock/executor.yaml",
    );
    check(
        "drydock-agent",
        &[
            (config_dir.join("agent.yaml"), "/etc/drydock/agent.yaml"),
            (pki.join("ca.crt"), "/etc/drydock/pki/ca.crt"),
            (pki.join("agent.crt"), "/etc/drydock/pki/agent.crt"),
            (
                staged.join("agent/pki/agent.key"),
                "/run/credentials/drydock-agent.service/agent.key",
            ),
            (
                staged.join("agent/agent.token"),
                "/run/credentials/drydock-agent.service/agent.token",
            ),
        ],
        "/etc/drydock/agent.yaml",
    );
}

/// A Dockerfile stage's instructions without comments and FROM, with the
/// build stage's paths mapped onto the local build context's.
fn dockerfile_body(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with("FROM "))
        .map(|l| l.replace("--from=build ", "").replace("/out/", ""))
        .collect()
}

/// The files that must agree do: the local Dockerfiles with the multi-stage
/// one, and the users in the images, the compose file and the stage script.
#[test]
fn deploy_files_agree_with_each_other() {
    let multi = deploy_file("Dockerfile");
    for daemon in ["executor", "agent"] {
        let header = format!("FROM scratch AS {daemon}");
        let stage = multi
            .split("\nFROM ")
            .map(|s| format!("FROM {s}"))
            .find(|s| s.starts_with(&header))
            .unwrap_or_else(|| panic!("deploy/Dockerfile has no `{header}` stage"));
        let from_local = dockerfile_body(&deploy_file(&format!("images/{daemon}.Dockerfile")));
        assert_eq!(
            dockerfile_body(&stage),
            from_local,
            "deploy/Dockerfile's {daemon} stage and deploy/images/{daemon}.Dockerfile differ"
        );
        let user = if daemon == "executor" {
            EXECUTOR_USER
        } else {
            AGENT_USER
        };
        assert!(
            from_local.contains(&format!("USER {user}")),
            "{daemon}: USER {user}"
        );
        let uid = user.split(':').next().unwrap_or_default();
        assert!(
            from_local
                .iter()
                .any(|l| l.starts_with(&format!("COPY --chown={user} state/"))),
            "{daemon}: the state folder belongs to {user}"
        );
        assert!(
            deploy_file("stage-compose.sh").contains(&format!("{daemon}_uid={uid}")),
            "stage-compose.sh gives {daemon}'s keys to {uid}"
        );
        // On Swarm: the same uid runs the service and owns its secrets.
        assert!(
            deploy_file("swarm-deploy.sh").contains(&format!("{daemon}_uid={uid}")),
            "swarm-deploy.sh gives {daemon}'s files to {uid}"
        );
        let stack = deploy_file("stack.yaml");
        assert!(
            stack.contains(&format!("user: \"{uid}:")),
            "stack.yaml runs {daemon} as {uid}"
        );
        assert!(
            stack.contains(&format!("uid: \"{uid}\"")),
            "stack.yaml hands {daemon}'s secrets to {uid}"
        );
    }
    let compose = deploy_file("compose.yaml");
    for user in [EXECUTOR_USER, AGENT_USER] {
        assert!(
            compose.contains(&format!("user: \"{user}\"")),
            "compose.yaml runs a service as {user}"
        );
    }
    assert_eq!(
        compose.matches(":/var/run/docker.sock\"").count(),
        1,
        "exactly one service mounts the Docker socket"
    );
}
