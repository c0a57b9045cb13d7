//! A registry for the tests and benchmarks of updates: Debian's
//! `docker-registry` (the CNCF distribution registry) on a free loopback
//! port, which the engine speaks plain HTTP to, and a compose project
//! whose service runs a tag in it, with images built here and pushed.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::{build_image, docker, docker_ok, unique};

/// A registry of its own on a free loopback port, with its storage in a
/// temporary directory.
pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Registry {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let registry = Self::spawn(Command::new("docker-registry"), port);
        let started = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the registry did not listen on 127.0.0.1:{port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        registry
    }

    /// A registry on the loopback of `engine`'s network namespace: the
    /// engine pushes and pulls from it as from a local registry, and the
    /// host cannot reach it.
    pub fn start_in(engine: &crate::second_engine::SecondEngine) -> Registry {
        let port = 5000 + rand::random::<u16>() % 1000;
        let mut command = engine.nsenter();
        command.arg("docker-registry");
        let registry = Self::spawn(command, port);
        let started = Instant::now();
        loop {
            let probe = engine
                .nsenter()
                .args(["bash", "-c", &format!("echo > /dev/tcp/127.0.0.1/{port}")])
                .stderr(Stdio::null())
                .status()
                .expect("nsenter bash");
            if probe.success() {
                return registry;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the registry did not listen on 127.0.0.1:{port} in the engine's namespace"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `command serve CONFIG` for a registry on `port`, storing in a
    /// temporary directory.
    fn spawn(mut command: Command, port: u16) -> Registry {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .expect("write registry config");
        let child = command
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run docker-registry ({e}); scripts/test-env.sh installs Debian's docker-registry")
            });
        Registry {
            child,
            port,
            _dir: dir,
        }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A compose project whose api service runs `<registry>/<project>/api:stable`.
pub struct Project {
    pub name: String,
    dir: tempfile::TempDir,
    pub tag: String,
    images: Vec<String>,
}

impl Project {
    pub fn new(test: &str, registry: &Registry) -> Project {
        let name = unique(test);
        let tag = format!("{}/{name}/api:stable", registry.host());
        Project {
            name,
            dir: tempfile::tempdir().expect("temp dir"),
            tag,
            images: Vec::new(),
        }
    }

    /// Build `version` of the fixture web image under the tag, push it, and
    /// return (image id, manifest digest).
    pub fn push(&mut self, version: &str, cmd: &str) -> (String, String) {
        build_image(
            &self.tag,
            &format!(
                "FROM {}\nLABEL org.opencontainers.image.version={version} org.opencontainers.image.revision=rev-{version} drydock.test.project={}\nVOLUME /anon\nCMD {cmd}\n",
                drydock::fixture::FIXTURE_WEB_IMAGE,
                self.name
            ),
        );
        let id = docker_ok(&["image", "inspect", "-f", "{{.Id}}", &self.tag]);
        self.images.push(id.clone());
        docker_ok(&["push", &self.tag]);
        let repo_digest = docker_ok(&[
            "image",
            "inspect",
            "-f",
            "{{range .RepoDigests}}{{println .}}{{end}}",
            &self.tag,
        ]);
        let digest = repo_digest
            .lines()
            .find_map(|l| l.split_once('@').map(|(_, d)| d.to_string()))
            .expect("a pushed image has a repo digest");
        (id, digest)
    }

    /// As on a host that pulled `image` under the tag and nothing since:
    /// the newer image is only in the registry.
    pub fn only_in_registry(&self, newer: &str, keep: &str) {
        docker_ok(&["rmi", "-f", newer]);
        docker_ok(&["tag", keep, &self.tag]);
    }

    /// v1 pushed and running under compose, healthy, with a MiB in its
    /// named and its anonymous volume: (v1's image id, its digest, the
    /// container's id).
    pub fn v1_running_with_data(&mut self) -> (String, String, String) {
        let (v1, digest) = self.push("1", SERVE);
        self.write_compose();
        let up = self.compose(&["up", "-d"]);
        assert!(up.status.success(), "{up:?}");
        let id = self.api_id();
        let started = Instant::now();
        while docker_ok(&["inspect", "-f", "{{.State.Health.Status}}", &id]) != "healthy" {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "v1 did not turn healthy"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        docker_ok(&[
            "run",
            "--rm",
            "--volumes-from",
            &id,
            drydock::fixture::FIXTURE_IMAGE,
            "fill",
            "--write",
            "/named/marker=1",
            "--write",
            "/anon/marker=1",
        ]);
        (v1, digest, id)
    }

    pub fn write_compose(&self) {
        let yaml = format!(
            "version: \"2.4\"\nservices:\n  api:\n    image: {}\n    environment:\n      DATABASE_URL: postgres://db:5432/shop\n    volumes:\n      - data:/named\n      - /anon\nvolumes:\n  data: {{}}\n",
            self.tag
        );
        std::fs::write(self.file(), yaml).expect("write compose file");
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("docker-compose.yml")
    }

    pub fn compose(&self, args: &[&str]) -> Output {
        Command::new("docker-compose")
            .arg("-p")
            .arg(&self.name)
            .arg("-f")
            .arg(self.file())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run docker-compose: {e}"))
    }

    pub fn api_id(&self) -> String {
        let out = self.compose(&["ps", "-q", "api"]);
        assert!(out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    pub fn api_name(&self) -> String {
        format!("{}_api_1", self.name)
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = self.compose(&["down", "-v", "--remove-orphans", "-t", "1"]);
        for image in &self.images {
            let _ = docker(&["rmi", "-f", image]);
        }
        let _ = docker(&["rmi", "-f", &self.tag]);
    }
}

pub const SERVE: &str = "[\"serve\", \"--port\", \"8080\"]";
pub const UNHEALTHY: &str = "[\"serve\", \"--port\", \"8080\", \"--wedge-after-secs\", \"1\", \"--line\", \"v3: listening on :8080\"]";

/// Write a credentials file for the registry into `dd`'s home and edit
/// its executor.yaml with `edit` (given the file's path): the file.
pub fn allow_registry(
    dd: &crate::Drydock,
    password: &str,
    edit: impl Fn(String, &str) -> String,
) -> PathBuf {
    let creds = dd.home.path("registry.json");
    drydock_daemon::files::write_new(
        &creds,
        format!("{{\"username\": \"ci\", \"password\": \"{password}\"}}").as_bytes(),
        true,
    )
    .expect("write credentials");
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
    std::fs::write(
        dd.home.executor_config(),
        edit(config, &creds.display().to_string()),
    )
    .expect("write executor config");
    creds
}

/// The executor's config with updates on, the registry allowed for the
/// project's repositories, its credentials file, and a short window.
pub fn with_registry(yaml: String, host: &str, prefix: &str, credentials: &str) -> String {
    format!(
        "{}registries:\n  - host: \"{host}\"\n    prefix: {prefix}\n    credentials: {credentials}\n    pull_timeout: 2m\nupdate:\n  health_window: 6s\n",
        yaml.replace("update: {enabled: false}", "update: {enabled: true}")
    )
}
