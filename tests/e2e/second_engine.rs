//! A second Docker engine, for the tests that need an engine of their own:
//! another host (`hosts_many.rs`), or a cluster (in Swarm mode): the main
//! engine's state is never touched, and the other tests run beside it.
//!
//! It runs as a process of the test, inside a network namespace of its own
//! (`ip netns add`, then `nsenter --net=…`; `ip netns exec` would remount
//! `/sys`, and the daemon would find no cgroups): a second daemon in the
//! host's namespace deletes or shadows the main engine's `docker0`. It has
//! an empty config file of its own (the machine's pins the data root), its
//! own data root, exec root, pid file and unix socket, no iptables rules,
//! an address pool apart from the main engine's, and the main engine's
//! storage driver. Images come from the main engine (`docker save | docker
//! load`). It is stopped by its pid when the value drops, and its
//! namespace and folders are removed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{docker_ok, unique};

pub struct SecondEngine {
    pub dir: PathBuf,
    netns: String,
    daemon: Option<Child>,
    /// Its address pool, apart from the main engine's (and kept across a
    /// restart).
    pool: String,
    _tmp: tempfile::TempDir,
}

/// `ip`, as root; panics with what it said.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .expect("run ip (Debian: apt-get install iproute2)");
    assert!(
        out.status.success(),
        "ip {args:?} failed (the Swarm tests need root for a network namespace): {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl SecondEngine {
    /// Start the engine, load `images` into it from the main engine, and
    /// make it a one-node Swarm manager.
    pub fn start_swarm(images: &[&str]) -> SecondEngine {
        let engine = Self::start(images);
        engine.ok(&[
            "swarm",
            "init",
            "--advertise-addr",
            "127.0.0.1",
            "--listen-addr",
            "127.0.0.1:2377",
        ]);
        engine
    }

    /// Start the engine and load `images` into it from the main engine.
    pub fn start(images: &[&str]) -> SecondEngine {
        Self::start_configured("{}", images)
    }

    /// `start`, with a `daemon.json` of `config` (JSON).
    pub fn start_configured(config: &str, images: &[&str]) -> SecondEngine {
        crate::require_docker();
        // Short: the engine's sockets live under it (a unix socket path
        // has at most 107 bytes).
        let tmp = tempfile::Builder::new()
            .prefix("dds")
            .tempdir_in("/tmp")
            .expect("temp dir");
        let dir = tmp.path().to_path_buf();
        for d in ["data", "exec"] {
            std::fs::create_dir_all(dir.join(d)).expect("engine folders");
        }
        std::fs::write(dir.join("daemon.json"), format!("{config}\n")).expect("daemon.json");
        let netns = unique("dds");
        ip(&["netns", "add", &netns]);
        ip(&["-n", &netns, "link", "set", "lo", "up"]);
        let mut engine = SecondEngine {
            dir,
            netns,
            daemon: None,
            pool: format!("base=10.{}.0.0/16,size=24", 200 + rand::random::<u8>() % 50),
            _tmp: tmp,
        };
        engine.spawn_daemon();
        engine.wait_up();
        for image in images {
            engine.load(image);
        }
        engine
    }

    /// Start dockerd in the namespace (again, after `stop_daemon`).
    fn spawn_daemon(&mut self) {
        let driver = docker_ok(&["info", "--format", "{{.Driver}}"]);
        let (dir, netns) = (&self.dir, &self.netns);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("dockerd.log"))
            .expect("dockerd log");
        let daemon = Command::new("nsenter")
            .arg(format!("--net=/var/run/netns/{netns}"))
            .arg("dockerd")
            .arg("--config-file")
            .arg(dir.join("daemon.json"))
            .arg("--data-root")
            .arg(dir.join("data"))
            .arg("--exec-root")
            .arg(dir.join("exec"))
            .arg("--pidfile")
            .arg(dir.join("dockerd.pid"))
            .arg("-H")
            .arg(format!("unix://{}", dir.join("docker.sock").display()))
            .args(["--iptables=false", "--ip-masq=false"])
            .args(["--default-address-pool", &self.pool])
            .args(["--storage-driver", &driver])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start dockerd in its namespace (nsenter, dockerd)");
        self.daemon = Some(daemon);
    }

    /// Stop dockerd (SIGTERM, as systemd does) and wait for it to exit.
    pub fn stop_daemon(&mut self) {
        let Some(mut daemon) = self.daemon.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &daemon.id().to_string()])
            .output();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(30) {
            if daemon.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = daemon.kill();
        let _ = daemon.wait();
    }

    /// Start dockerd again after `stop_daemon`, and wait until it answers.
    pub fn start_daemon(&mut self) {
        self.spawn_daemon();
        self.wait_up();
    }

    /// `nsenter --net=…` for a process that must share the engine's
    /// network namespace (its loopback is the engine's, not the host's).
    pub fn nsenter(&self) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/var/run/netns/{}", self.netns));
        c
    }

    /// `unix:///…/docker.sock`: what an executor's `docker.endpoint` names.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.dir.join("docker.sock").display())
    }

    fn wait_up(&mut self) {
        let started = Instant::now();
        loop {
            if self
                .run(&["info", "--format", "{{.ServerVersion}}"])
                .status
                .success()
            {
                return;
            }
            if let Some(status) = self
                .daemon
                .as_mut()
                .and_then(|d| d.try_wait().ok().flatten())
            {
                panic!("the second dockerd exited ({status}):\n{}", self.log());
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the second dockerd did not answer within 60 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("dockerd.log")).unwrap_or_default()
    }

    /// `docker save IMAGE` from the main engine into this one.
    pub fn load(&self, image: &str) {
        let mut save = Command::new("docker")
            .args(["save", image])
            .stdout(Stdio::piped())
            .spawn()
            .expect("docker save");
        let out = Command::new("docker")
            .arg("-H")
            .arg(self.endpoint())
            .arg("load")
            .stdin(save.stdout.take().expect("piped"))
            .output()
            .expect("docker load");
        let saved = save.wait().expect("docker save");
        assert!(saved.success(), "docker save {image} failed");
        assert!(
            out.status.success(),
            "loading {image}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The `docker` CLI against this engine.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        Command::new("docker")
            .arg("-H")
            .arg(self.endpoint())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run docker")
    }

    /// `run`, which must succeed; its trimmed stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "docker {args:?} on the second engine failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Wait until `done` holds, or fail naming `what` after `timeout`.
    pub fn wait_for(&self, what: &str, timeout: Duration, mut done: impl FnMut(&Self) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < timeout,
                "timed out waiting for {what}; services:\n{}",
                String::from_utf8_lossy(&self.run(&["service", "ls"]).stdout)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// A service of stack `shop` whose first task turns unhealthy a few
    /// seconds after start and is not restarted (`--restart-condition
    /// none`); a task started after it (a force update) stays healthy, as
    /// the first one left a marker in the service's volume.
    pub fn create_wedging_once(&self, name: &str) {
        self.ok(&[
            "service",
            "create",
            "-d",
            "--name",
            name,
            "--label",
            "com.docker.stack.namespace=shop",
            "--restart-condition",
            "none",
            "--mount",
            &format!("type=volume,source={name}-state,target=/state"),
            drydock::fixture::FIXTURE_WEB_IMAGE,
            "serve",
            "--port",
            "8080",
            "--wedge-after-secs",
            "4",
            "--boot-marker",
            "/state/booted",
        ]);
    }

    /// A container of the fixture's web service with a healthcheck, wedged
    /// (unhealthy) a second after it starts, as `Container::unhealthy_web`
    /// makes on the main engine; returns once it is unhealthy.
    pub fn run_wedging(&self, name: &str) {
        let mut args = vec!["run", "-d", "--name", name];
        args.extend_from_slice(crate::WEDGING_WEB);
        self.ok(&args);
        self.wait_for("an unhealthy container", Duration::from_secs(60), |e| {
            e.ok(&["inspect", "-f", "{{.State.Health.Status}}", name]) == "unhealthy"
        });
    }

    /// `running/desired` of a service, as `docker service ls` says.
    pub fn replicas(&self, service: &str) -> String {
        self.ok(&[
            "service",
            "ls",
            "--filter",
            &format!("name={service}"),
            "--format",
            "{{.Name}} {{.Replicas}}",
        ])
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{service} ")).map(str::to_string))
        .unwrap_or_default()
    }
}

/// Unmount whatever the daemon left mounted below `dir` (it does not when
/// it is killed), deepest first.
fn unmount_below(dir: &Path) {
    let Ok(mounts) = std::fs::read_to_string("/proc/self/mounts") else {
        return;
    };
    let prefix = dir.display().to_string();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split(' ').nth(1))
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in points {
        let _ = Command::new("umount").args(["-l", p]).output();
    }
}

impl Drop for SecondEngine {
    fn drop(&mut self) {
        if let Some(mut daemon) = self.daemon.take() {
            // SIGTERM by pid: the daemon stops its containers and unmounts.
            let _ = Command::new("kill")
                .args(["-TERM", &daemon.id().to_string()])
                .output();
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(20) {
                if daemon.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if daemon.try_wait().ok().flatten().is_none() {
                let _ = daemon.kill();
                let _ = daemon.wait();
            }
        }
        // Its containerd and shims, if any outlived it.
        if let Ok(pids) = Command::new("pgrep")
            .args(["-f", &self.dir.display().to_string()])
            .output()
        {
            for pid in String::from_utf8_lossy(&pids.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).output();
            }
        }
        unmount_below(&self.dir);
        let _ = Command::new("ip")
            .args(["netns", "del", &self.netns])
            .output();
    }
}
