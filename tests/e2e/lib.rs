//! Shared helpers for drydock's end-to-end tests: real Docker, real daemon
//! processes, real mTLS and real SQLite files. Every resource is named after
//! its test and removed afterwards, also when the test fails (guards with
//! `Drop`).
#![forbid(unsafe_code)]

pub mod bench;
pub mod registry;
pub mod second_engine;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use drydock::home::{self, Home, InitOptions};

/// The workspace root (this crate lives in `tests/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// `release` when `DRYDOCK_E2E_PROFILE=release` (the benchmark sets it),
/// else `debug`: which build of the daemons the helpers start.
pub fn profile() -> &'static str {
    if RELEASE.load(std::sync::atomic::Ordering::SeqCst) {
        return "release";
    }
    match std::env::var("DRYDOCK_E2E_PROFILE").as_deref() {
        Ok("release") => "release",
        _ => "debug",
    }
}

static RELEASE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Start the release build of the daemons (a program built with
/// `--release`, such as the benchmark, without `DRYDOCK_E2E_PROFILE`).
pub fn use_release_build() {
    RELEASE.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Where `cargo build` put the daemons and the CLI.
pub fn bin_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join(profile())
}

pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// Docker must be reachable: a missing engine fails the suite, it does not
/// skip it.
pub fn require_docker() {
    let out = Command::new("docker")
        .args(["version", "--format", "{{.Server.APIVersion}}"])
        .output();
    match out {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "Docker is not reachable: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("the docker CLI cannot be run: {e}"),
    }
}

/// Build the binaries and the fixture images once per test process.
pub fn prepare() {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let result = READY.get_or_init(|| {
        require_docker();
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .current_dir(workspace_root())
            .args([
                "build",
                "-p",
                "drydock-executor",
                "-p",
                "drydock-agent",
                "-p",
                "drydock",
            ])
            .args((profile() == "release").then_some("--release"))
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if !status.success() {
            return Err(format!("building the binaries failed: {status}"));
        }
        drydock::fixture::ensure_images(&workspace_root(), true).map_err(|e| format!("{e:#}"))
    });
    if let Err(e) = result {
        panic!("test preparation failed: {e}");
    }
}

impl Drydock {
    /// The local approver's signing key, as `drydock approve` uses it.
    pub fn approver_key(&self) -> ed25519_dalek::SigningKey {
        self.home
            .load_cli_config()
            .expect("cli config")
            .signing_key()
            .expect("approver key")
    }

    /// A git checkout with one empty commit per `(subject, tag)`, named in
    /// cli.yaml's `sources` for `service`.
    pub fn source_checkout(&self, service: &str, commits: &[(&str, &str)]) -> tempfile::TempDir {
        let repo = tempfile::tempdir().expect("temp dir");
        let git = |args: &[&str]| {
            git(repo.path(), args);
        };
        git(&["init", "-q"]);
        for (subject, tag) in commits {
            git(&["commit", "-q", "--allow-empty", "-m", subject]);
            git(&["tag", tag]);
        }
        let cli_yaml = self.home.path("cli.yaml");
        let yaml = std::fs::read_to_string(&cli_yaml).expect("cli.yaml");
        std::fs::write(
            &cli_yaml,
            format!("{yaml}sources:\n  {service}: {}\n", repo.path().display()),
        )
        .expect("write cli.yaml");
        repo
    }
    /// A gRPC connection to this home's executor with the agent's
    /// identity, as the agent connects.
    async fn channel_as_agent(&self) -> tonic::transport::Channel {
        grpc::channel(
            self.executor_port,
            &read(&self.home.path("pki/ca.crt")),
            Some((
                &read(&self.home.path("pki/agent.crt")),
                &read(&self.home.path("pki/agent.key")),
            )),
        )
        .await
        .expect("connect as the agent")
    }

    /// A gRPC client of this home's executor with the agent's identity.
    pub async fn executor_as_agent(
        &self,
    ) -> drydock_proto::pb::executor_client::ExecutorClient<tonic::transport::Channel> {
        drydock_proto::pb::executor_client::ExecutorClient::new(self.channel_as_agent().await)
    }

    /// A client of the executor's gRPC health service on a connection of
    /// its own with the agent's identity: the transport alone (no policy,
    /// engine call or audit row), for the benchmarks.
    pub async fn executor_health_as_agent(
        &self,
    ) -> tonic_health::pb::health_client::HealthClient<tonic::transport::Channel> {
        tonic_health::pb::health_client::HealthClient::new(self.channel_as_agent().await)
    }

    /// The agent's API socket in the local layout.
    pub fn agent_socket(&self) -> PathBuf {
        self.home.path("run/agent.sock")
    }

    /// An HTTP client on the agent's API socket (the host in URLs is not
    /// used).
    pub fn agent_http(&self) -> reqwest::Client {
        drydock_daemon::tls::install_crypto_provider();
        reqwest::Client::builder()
            .unix_socket(self.agent_socket())
            .build()
            .expect("http client")
    }
}

/// Resident memory of a process, in KiB (0 when it cannot be read).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The `decision` of each audit row, in order.
pub fn decisions<'a>(rows: impl IntoIterator<Item = &'a serde_json::Value>) -> Vec<&'a str> {
    rows.into_iter()
        .map(|r| r["decision"].as_str().unwrap_or(""))
        .collect()
}

/// A port for a test's daemon or published container to listen on.
///
/// Taken below the kernel's ephemeral range: a port from `bind(0)` is free
/// only until the caller's daemon binds it, and meanwhile any outgoing
/// connection (whose local port comes from that range) or another test's
/// `bind(0)` may take it. A test once failed so ("Address already in use").
/// Below the range, nothing takes a port on its own. Each call in this
/// process gets the next port from a random start, so parallel tests never
/// share one and two test processes rarely meet; a port something already
/// listens on is passed over.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FLOOR: u32 = 10_000;
    static NEXT: OnceLock<AtomicU32> = OnceLock::new();
    let ephemeral_low: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next().and_then(|n| n.parse().ok()))
        .unwrap_or(32_768);
    let span = ephemeral_low.saturating_sub(FLOOR);
    if span >= 1_000 {
        let next = NEXT.get_or_init(|| AtomicU32::new(rand::random::<u32>() % span));
        for _ in 0..span {
            let Ok(port) = u16::try_from(FLOOR + next.fetch_add(1, Ordering::Relaxed) % span)
            else {
                continue;
            };
            if TcpListener::bind(("0.0.0.0", port)).is_ok()
                && TcpListener::bind(("127.0.0.1", port)).is_ok()
            {
                return port;
            }
        }
    }
    // A machine whose ephemeral range starts low: the kernel's choice.
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

pub fn unique(prefix: &str) -> String {
    format!("dd-{prefix}-{:06x}", rand::random::<u32>() & 0xff_ffff)
}

pub fn docker(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("docker {args:?}: {e}"))
}

pub fn docker_ok(args: &[&str]) -> String {
    let o = docker(args);
    assert!(
        o.status.success(),
        "docker {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A user-defined network (Docker's embedded DNS resolves aliases on it),
/// removed when the guard drops. Declare it before the containers on it:
/// locals drop in reverse order, so the containers are gone first.
pub struct Network {
    pub name: String,
}

impl Network {
    pub fn create(test: &str) -> Network {
        let name = unique(test);
        docker_ok(&["network", "create", &name]);
        Network { name }
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["network", "rm", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A container that is removed when the guard drops.
pub struct Container {
    pub name: String,
}

impl Container {
    /// `docker run -d --name <unique> <args...>`.
    pub fn run(test: &str, args: &[&str]) -> Container {
        let name = unique(test);
        let mut all = vec!["run", "-d", "--name", name.as_str()];
        all.extend_from_slice(args);
        docker_ok(&all);
        Container { name }
    }

    pub fn id(&self) -> String {
        docker_ok(&["inspect", "-f", "{{.Id}}", &self.name])
    }

    pub fn inspect(&self, format: &str) -> String {
        docker_ok(&["inspect", "-f", format, &self.name])
    }

    pub fn health(&self) -> String {
        self.inspect("{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}")
    }

    /// Poll until `pred` holds for the container's inspect output.
    pub fn wait_for(&self, what: &str, timeout: Duration, pred: impl Fn(&Container) -> bool) {
        let started = Instant::now();
        while !pred(self) {
            assert!(
                started.elapsed() < timeout,
                "{} did not become {what} within {timeout:?}; its state: {}",
                self.name,
                self.inspect("{{.State.Status}} exit={{.State.ExitCode}} oom_killed={{.State.OOMKilled}} restarts={{.RestartCount}} error={{.State.Error}}")
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

/// `docker run` arguments (after the name) of the fixture's web service
/// with a 1 s healthcheck, wedged (unhealthy) after its first second.
pub const WEDGING_WEB: &[&str] = &[
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
];

impl Container {
    /// The fixture's web service with a healthcheck, wedged (unhealthy) after
    /// its first second of life; `extra` are more `docker run` flags.
    pub fn unhealthy_web(test: &str, extra: &[&str]) -> Container {
        Self::unhealthy_web_with(test, extra, &[])
    }

    /// `unhealthy_web`, with more arguments for the fixture's `serve`
    /// (`--line TEXT` to log a line).
    pub fn unhealthy_web_with(test: &str, extra: &[&str], serve: &[&str]) -> Container {
        let mut args: Vec<&str> = extra.to_vec();
        args.extend_from_slice(WEDGING_WEB);
        args.extend_from_slice(serve);
        let c = Container::run(test, &args);
        c.wait_for("unhealthy", Duration::from_secs(60), |c| {
            c.health() == "unhealthy"
        });
        c
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["rm", "-f", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// An initialized `$DRYDOCK_HOME` with its own ports; daemons are stopped
/// when it drops.
pub struct Drydock {
    pub dir: tempfile::TempDir,
    pub home: Home,
    pub executor_port: u16,
    pub agent_port: u16,
}

impl Drydock {
    pub fn init() -> Drydock {
        Self::init_with(Vec::new())
    }

    /// A home whose executor certificate also names `executor_names` (what
    /// `drydock init --executor-name` does).
    pub fn init_with(executor_names: Vec<String>) -> Drydock {
        Self::init_options(|o| o.executor_names = executor_names)
    }

    /// An empty home folder with its own ports, for a test that runs
    /// `drydock init` itself.
    pub fn uninitialized() -> Drydock {
        prepare();
        let dir = tempfile::Builder::new()
            .prefix("drydock-e2e-")
            .tempdir()
            .expect("temp dir");
        let home = Home {
            root: dir.path().to_path_buf(),
        };
        Drydock {
            dir,
            home,
            executor_port: free_port(),
            agent_port: free_port(),
        }
    }

    /// A home written with `InitOptions` as `edit` sets them (ports are
    /// chosen here).
    pub fn init_options(edit: impl FnOnce(&mut InitOptions)) -> Drydock {
        let dd = Self::uninitialized();
        let (home, executor_port, agent_port) = (&dd.home, dd.executor_port, dd.agent_port);
        home::init(home, &{
            let mut o = InitOptions {
                executor_port,
                agent_port,
                // Tests run side by side with every container in scope:
                // an agent watching them all would open requests on the
                // other tests' failures. Tests of watching turn it on.
                watch: false,
                ..Default::default()
            };
            edit(&mut o);
            o
        })
        .expect("drydock init");
        dd
    }

    /// Run the real `drydock` binary against this home.
    pub fn cli(&self, args: &[&str]) -> Output {
        self.cli_with_env(args, &[])
    }

    /// `cli`, with extra environment variables (`DRYDOCK_*` ones reach the
    /// daemons that `drydock up` starts).
    pub fn cli_with_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        Command::new(bin("drydock"))
            .envs(env.iter().copied())
            .args(args)
            .env("DRYDOCK_HOME", &self.home.root)
            .env("DRYDOCK_EXECUTOR_BIN", bin("drydock-executor"))
            .env("DRYDOCK_AGENT_BIN", bin("drydock-agent"))
            .stdin(Stdio::null())
            .output()
            .expect("run drydock")
    }

    pub fn up(&self) {
        let out = self.cli(&["up"]);
        assert!(
            out.status.success(),
            "drydock up failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `drydock ask --json ...`: the exit code and the final request.
    pub fn ask_json(&self, args: &[&str]) -> (i32, serde_json::Value) {
        let mut all = vec!["ask", "--json"];
        all.extend_from_slice(args);
        let out = self.cli(&all);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "ask printed no JSON ({e}):\nstdout: {stdout}\nstderr: {}\nagent log:\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.agent_log()
            )
        });
        (out.status.code().unwrap_or(-1), value)
    }

    pub fn agent_log(&self) -> String {
        std::fs::read_to_string(self.home.log("drydock-agent")).unwrap_or_default()
    }

    pub fn executor_log(&self) -> String {
        std::fs::read_to_string(self.home.log("drydock-executor")).unwrap_or_default()
    }

    pub fn audit_db(&self) -> PathBuf {
        self.home.path("state/audit.db")
    }

    /// Every audit row as JSON, through the executor's own export tool.
    /// Every audit row. An answered read's row is committed just after the
    /// answer (within the executor's 5 ms flush window): read until two
    /// reads 50 ms apart agree, so a row of a call just made is there.
    pub fn audit_rows(&self) -> Vec<serde_json::Value> {
        let started = Instant::now();
        let mut rows = self.audit_rows_now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let again = self.audit_rows_now();
            if again.len() == rows.len() || started.elapsed() > Duration::from_secs(3) {
                return again;
            }
            rows = again;
        }
    }

    fn audit_rows_now(&self) -> Vec<serde_json::Value> {
        audit_export(&self.home.executor_config())
    }

    pub fn audit_verify(&self) -> Output {
        Command::new(bin("drydock-executor"))
            .args(["audit", "verify", "--config"])
            .arg(self.home.executor_config())
            .output()
            .expect("audit verify")
    }
}

impl Drop for Drydock {
    fn drop(&mut self) {
        let _ = self.cli(&["down"]);
    }
}

/// Every audit row of the executor configured by `config`, through its own
/// export tool.
pub fn audit_export(config: &Path) -> Vec<serde_json::Value> {
    let out = Command::new(bin("drydock-executor"))
        .args(["audit", "export", "--config"])
        .arg(config)
        .output()
        .expect("audit export");
    assert!(
        out.status.success(),
        "audit export failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("audit row is JSON"))
        .collect()
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A `drydock-executor` process started directly (no agent), killed on drop.
pub struct ExecutorProcess {
    child: std::process::Child,
    pub port: u16,
    pub config: PathBuf,
    pub log: PathBuf,
}

impl ExecutorProcess {
    /// Start with the home's executor config, optionally edited (the edit
    /// gets the YAML text and returns the new one).
    pub fn start(dd: &Drydock, edit: impl Fn(String) -> String) -> ExecutorProcess {
        let text = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
        let config = dd
            .home
            .path(&format!("executor-{}.yaml", rand::random::<u32>()));
        std::fs::write(&config, edit(text)).expect("write config");
        Self::start_with(dd, config)
    }

    pub fn start_with(dd: &Drydock, config: PathBuf) -> ExecutorProcess {
        Self::spawn(dd, config, &[], Duration::from_secs(20))
    }

    /// Start it under `wrapper` (`valgrind --tool=callgrind ...`), which
    /// runs it in the same process, allowing `ready_within` to start.
    pub fn start_wrapped(
        dd: &Drydock,
        edit: impl Fn(String) -> String,
        wrapper: &[&str],
        ready_within: Duration,
    ) -> ExecutorProcess {
        let text = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
        let config = dd
            .home
            .path(&format!("executor-{}.yaml", rand::random::<u32>()));
        std::fs::write(&config, edit(text)).expect("write config");
        Self::spawn(dd, config, wrapper, ready_within)
    }

    fn spawn(
        dd: &Drydock,
        config: PathBuf,
        wrapper: &[&str],
        ready_within: Duration,
    ) -> ExecutorProcess {
        let log = dd
            .home
            .path(&format!("logs/executor-{}.log", rand::random::<u32>()));
        std::fs::create_dir_all(dd.home.path("logs")).expect("logs dir");
        let file = std::fs::File::create(&log).expect("log file");
        let executor = bin("drydock-executor");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&executor);
                c
            }
            None => Command::new(&executor),
        };
        let child = command
            .args(["serve", "--config"])
            .arg(&config)
            .stdout(file.try_clone().expect("log"))
            .stderr(file)
            .spawn()
            .expect("spawn executor");
        let mut p = ExecutorProcess {
            child,
            port: dd.executor_port,
            config,
            log,
        };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!(
                    "executor exited ({status}): {}",
                    std::fs::read_to_string(&p.log).unwrap_or_default()
                );
            }
            if std::fs::read_to_string(&p.log)
                .unwrap_or_default()
                .contains(drydock::daemons::EXECUTOR_READY_LINE)
            {
                break;
            }
            assert!(
                started.elapsed() < ready_within,
                "executor did not start: {}",
                std::fs::read_to_string(&p.log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        p.port = dd.executor_port;
        p
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A gRPC client with the agent's identity, as the agent connects.
    pub async fn agent_client(
        &self,
        dd: &Drydock,
    ) -> drydock_proto::pb::executor_client::ExecutorClient<tonic::transport::Channel> {
        dd.executor_as_agent().await
    }

    /// SIGTERM and wait: the graceful path.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            if started.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                return self.child.wait().expect("wait");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for ExecutorProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub mod grpc {
    //! A real gRPC client over real TLS, with whatever identity a test wants.
    use drydock_proto::pb::executor_client::ExecutorClient;
    use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

    pub async fn connect(
        port: u16,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<ExecutorClient<Channel>, tonic::transport::Error> {
        Ok(ExecutorClient::new(channel(port, ca_pem, identity).await?))
    }

    /// One call of the executor's gRPC health service: whether it answered.
    pub async fn health_check(
        c: &mut tonic_health::pb::health_client::HealthClient<Channel>,
    ) -> bool {
        c.check(tonic_health::pb::HealthCheckRequest {
            service: "drydock.executor.v1.Executor".into(),
        })
        .await
        .is_ok()
    }

    /// The mTLS channel itself, for calls no generated client would make.
    pub async fn channel(
        port: u16,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<Channel, tonic::transport::Error> {
        channel_to("drydock-executor", port, ca_pem, identity).await
    }

    /// A channel that accepts only a server certificate naming `name`, as
    /// an agent dialling a named host (`executor.server_name`).
    pub async fn channel_to(
        name: &str,
        port: u16,
        ca_pem: &[u8],
        identity: Option<(&[u8], &[u8])>,
    ) -> Result<Channel, tonic::transport::Error> {
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(ca_pem))
            .domain_name(name);
        if let Some((cert, key)) = identity {
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        Endpoint::from_shared(format!("https://127.0.0.1:{port}"))?
            .tls_config(tls)?
            .connect_timeout(std::time::Duration::from_secs(5))
            .timeout(std::time::Duration::from_secs(60))
            .connect()
            .await
    }
}

pub mod approvals {
    //! Approvals signed like the CLI signs them.
    use drydock_proto::approval::{self, ApprovalClaims, WriteAction, CLAIMS_VERSION_NO_HOST};
    use drydock_proto::pb;

    pub fn unix_now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0)
    }

    /// Claims for a real container: its name is looked up, as the agent
    /// would show it to the human.
    pub fn claims(request_id: &str, action: WriteAction, container_id: &str) -> ApprovalClaims {
        let name = crate::docker(&["inspect", "-f", "{{.Name}}", container_id]);
        let name = String::from_utf8_lossy(&name.stdout)
            .trim()
            .trim_start_matches('/')
            .to_string();
        claims_named(request_id, action, container_id, &name)
    }

    pub fn claims_named(
        request_id: &str,
        action: WriteAction,
        container_id: &str,
        name: &str,
    ) -> ApprovalClaims {
        let now = unix_now();
        // Claims naming no host, as made for an executor without a name.
        ApprovalClaims {
            version: CLAIMS_VERSION_NO_HOST,
            approval_id: format!("apr-test-{:08x}", rand::random::<u32>()),
            request_id: request_id.into(),
            action,
            container_id: container_id.into(),
            container_name: name.into(),
            plan_digest: "0".repeat(64),
            issued_at: now,
            expires_at: now + 300,
            nonce: ApprovalClaims::new_nonce(),
            image_id: None,
            from_image_id: None,
            service: None,
            host: None,
            update: None,
            build: None,
        }
    }

    /// An update's approval: `container` (running image `from`) to `digest`
    /// of `reference`, signed as `local-operator`.
    pub fn update_approval(
        key: &ed25519_dalek::SigningKey,
        request_id: &str,
        container: &str,
        reference: &str,
        digest: &str,
        from: &str,
        from_version: Option<&str>,
    ) -> pb::Approval {
        let mut c = claims(request_id, WriteAction::Update, container);
        c.from_image_id = Some(from.into());
        c.update = Some(approval::UpdateClaims {
            reference: reference.into(),
            digest: digest.into(),
            from_version: from_version.map(str::to_string),
            to_version: None,
            to_tag: None,
        });
        sign(&c, key, "local-operator")
    }

    pub fn sign(
        claims: &ApprovalClaims,
        key: &ed25519_dalek::SigningKey,
        key_id: &str,
    ) -> pb::Approval {
        let bytes = claims.encode();
        pb::Approval {
            signature: approval::sign(&bytes, key),
            claims: bytes,
            key_id: key_id.into(),
            cosignatures: Vec::new(),
        }
    }
}

pub mod fake_docker {
    //! A stand-in Docker engine on a unix socket, for failure modes a real
    //! engine will not produce on demand: hanging, failing, slow. It speaks
    //! just enough HTTP/1.1 for bollard and counts requests per path.

    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Mode {
        /// Accept connections and never answer anything.
        Hang,
        /// Answer the version handshake; every container call gets a 500.
        Fail,
        /// Inspect succeeds (one fake container); writes get a 500.
        WritesFail,
        /// Like `WritesFail`, but every answer is delayed by a second.
        Slow,
    }

    pub const FAKE_ID: &str = "f00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeedf00dfeed";
    pub const FAKE_NAME: &str = "fake-backend";

    pub struct FakeDocker {
        pub socket: PathBuf,
        counts: Arc<Mutex<HashMap<String, usize>>>,
        _dir: tempfile::TempDir,
    }

    impl FakeDocker {
        pub fn start(mode: Mode) -> FakeDocker {
            let dir = tempfile::tempdir().expect("temp dir");
            let socket = dir.path().join("docker.sock");
            let listener = UnixListener::bind(&socket).expect("bind fake docker");
            let counts = Arc::new(Mutex::new(HashMap::new()));
            let c = counts.clone();
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for stream in listener.incoming().flatten() {
                    if mode == Mode::Hang {
                        held.push(stream);
                        continue;
                    }
                    let c = c.clone();
                    std::thread::spawn(move || serve(stream, mode, c));
                }
            });
            FakeDocker {
                socket,
                counts,
                _dir: dir,
            }
        }

        pub fn endpoint(&self) -> String {
            format!("unix://{}", self.socket.display())
        }

        /// Requests whose path contains `needle`.
        pub fn count(&self, needle: &str) -> usize {
            self.counts
                .lock()
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| k.contains(needle))
                        .map(|(_, v)| *v)
                        .sum()
                })
                .unwrap_or(0)
        }
    }

    fn inspect_body() -> String {
        serde_json::json!({
            "Id": FAKE_ID,
            "Name": format!("/{FAKE_NAME}"),
            "Created": "2026-01-01T00:00:00Z",
            "RestartCount": 0,
            "State": {"Status": "running", "Running": true, "Restarting": false, "OOMKilled": false, "Dead": false, "ExitCode": 0, "Error": "", "StartedAt": "2026-01-01T00:00:00Z", "FinishedAt": "0001-01-01T00:00:00Z"},
            "Config": {"Image": "fake:latest", "Labels": {}, "Env": []},
            "HostConfig": {"RestartPolicy": {"Name": "no"}},
            "NetworkSettings": {"Networks": {}}
        })
        .to_string()
    }

    fn serve(stream: UnixStream, mode: Mode, counts: Arc<Mutex<HashMap<String, usize>>>) {
        let mut reader = BufReader::new(match stream.try_clone() {
            Ok(s) => s,
            Err(_) => return,
        });
        let mut writer = stream;
        loop {
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                return;
            }
            let mut content_length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    return;
                }
                if line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    content_length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; content_length];
            let _ = reader.read_exact(&mut body);
            let mut parts = request_line.split_whitespace();
            let method = parts.next().unwrap_or("").to_string();
            let path = parts.next().unwrap_or("").to_string();
            if let Ok(mut m) = counts.lock() {
                *m.entry(format!("{method} {path}")).or_insert(0) += 1;
            }
            if mode == Mode::Slow {
                std::thread::sleep(Duration::from_secs(1));
            }
            let (status, body) = if path.ends_with("/version") || path.ends_with("/_ping") {
                (200, serde_json::json!({"ApiVersion": "1.41", "Version": "20.10.0", "MinAPIVersion": "1.12"}).to_string())
            } else if mode == Mode::Fail {
                (500, r#"{"message":"fake engine failure"}"#.to_string())
            } else if method == "GET" && path.contains("/containers/") && path.contains("/json") {
                (200, inspect_body())
            } else {
                (
                    500,
                    r#"{"message":"fake engine refuses writes"}"#.to_string(),
                )
            };
            let reason = if status == 200 {
                "OK"
            } else {
                "Internal Server Error"
            };
            let response = format!("HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len());
            if writer.write_all(response.as_bytes()).is_err() {
                return;
            }
        }
    }
}

/// Point an executor config at another Docker endpoint.
pub fn with_docker_endpoint(yaml: &str, endpoint: &str) -> String {
    yaml.lines()
        .map(|l| {
            if l.trim_start().starts_with("endpoint: ")
                && (l.contains("unix://") || l.contains("tcp://"))
            {
                format!("  endpoint: {endpoint}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

pub mod scripted_model {
    //! A scripted OpenAI-compatible model: a real HTTP server that answers
    //! every Chat Completions call with one streamed tool call from a
    //! script (call N gets entry N, the last entry repeats). `{EV}` in the
    //! arguments becomes the first evidence id of the request it answers,
    //! so a scripted cause can cite real evidence. Every request body is
    //! kept, so a test can read what the agent told the model.

    use std::io::{BufRead as _, BufReader, Read as _, Write as _};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    use serde_json::{json, Value};

    pub struct Model {
        pub url: String,
        bodies: Arc<Mutex<Vec<String>>>,
    }

    impl Model {
        /// The request bodies received so far.
        pub fn bodies(&self) -> Vec<String> {
            self.bodies.lock().map(|b| b.clone()).unwrap_or_default()
        }
    }

    fn first_evidence_id(body: &str) -> String {
        body.match_indices("ev-")
            .map(|(i, _)| &body[i..])
            .find_map(|rest| {
                let id: String = rest.chars().take(15).collect();
                (id.len() == 15 && id[3..].chars().all(|c| c.is_ascii_hexdigit())).then_some(id)
            })
            .unwrap_or_else(|| "ev-none".into())
    }

    pub fn start(script: Vec<(&'static str, Value)>) -> Model {
        start_with(move |n, body| {
            let (tool, args) = script[n.min(script.len() - 1)].clone();
            let args = args.to_string().replace("{EV}", &first_evidence_id(body));
            (tool.to_string(), args)
        })
    }

    /// A model whose every answer is `respond(call number, request body)`:
    /// one tool call, its name and its arguments (JSON text).
    pub fn start_with(respond: impl Fn(usize, &str) -> (String, String) + Send + 'static) -> Model {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let kept = bodies.clone();
        std::thread::spawn(move || {
            for (n, stream) in listener.incoming().flatten().enumerate() {
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0u8; length];
                let _ = reader.read_exact(&mut body);
                let body = String::from_utf8_lossy(&body).to_string();
                let (tool, args) = respond(n, &body);
                if let Ok(mut b) = kept.lock() {
                    b.push(body);
                }
                let chunks = [
                    json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0, "id": format!("c{n}"), "type": "function", "function": {"name": tool, "arguments": ""}}]}}]}),
                    json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": args}}]}}]}),
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                    json!({"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}}),
                ];
                let mut out = String::from(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
                );
                for c in chunks {
                    out.push_str(&format!("data: {c}\n\n"));
                }
                out.push_str("data: [DONE]\n\n");
                let mut s = stream;
                let _ = s.write_all(out.as_bytes());
            }
        });
        Model { url, bodies }
    }
}

impl Drydock {
    /// Configure the agent to investigate with the model at `url` (one
    /// invalid answer allowed, no retries), then `drydock up`.
    pub fn up_with_model(&self, url: &str) {
        self.up_with_model_investigating(url, "when_unsure");
    }

    /// `up_with_model`, with `llm.investigate` set to `investigate`.
    pub fn up_with_model_investigating(&self, url: &str, investigate: &str) {
        let config = std::fs::read_to_string(self.home.agent_config()).expect("agent config");
        std::fs::write(
            self.home.agent_config(),
            format!("{config}llm:\n  provider: openai\n  base_url: {url}\n  model: scripted\n  api_key_env: DRYDOCK_TEST_LLM_KEY\n  max_retries: 0\n  max_invalid_answers: 1\n  investigate: {investigate}\n"),
        )
        .expect("agent config");
        let up = Command::new(bin("drydock"))
            .arg("up")
            .env("DRYDOCK_HOME", &self.home.root)
            .env("DRYDOCK_EXECUTOR_BIN", bin("drydock-executor"))
            .env("DRYDOCK_AGENT_BIN", bin("drydock-agent"))
            .env("DRYDOCK_TEST_LLM_KEY", "test-key-not-a-secret")
            .output()
            .expect("up");
        assert!(
            up.status.success(),
            "{}{}",
            String::from_utf8_lossy(&up.stdout),
            String::from_utf8_lossy(&up.stderr)
        );
    }

    /// `audit verify` passes on this home's audit store.
    pub fn assert_audit_intact(&self) {
        let verify = self.audit_verify();
        assert!(
            verify.status.success(),
            "audit verify: {}",
            String::from_utf8_lossy(&verify.stdout)
        );
    }

    /// Audit rows of write calls (tier > 0).
    pub fn write_rows(&self) -> Vec<serde_json::Value> {
        self.audit_rows()
            .into_iter()
            .filter(|r| r["tier"].as_u64().unwrap_or(0) > 0)
            .collect()
    }
}

/// `git -C DIR ARGS` as a person with a name and an e-mail; its output,
/// trimmed.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["-c", "user.name=Ann", "-c", "user.email=ann@example.com"])
        .args(args)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// `docker build -t IMAGE -` with the Dockerfile on stdin (no context).
pub fn build_image(tag: &str, dockerfile: &str) {
    let mut child = Command::new("docker")
        .args(["build", "-q", "-t", tag, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run docker build");
    std::io::Write::write_all(
        &mut child.stdin.take().expect("piped stdin"),
        dockerfile.as_bytes(),
    )
    .expect("write the Dockerfile");
    let out = child.wait_with_output().expect("docker build");
    assert!(
        out.status.success(),
        "docker build {tag} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The python of the virtualenv `target/<name>`, in which `import <module>`
/// works: the third-party clients no one here wrote (the MCP SDK,
/// schemathesis), from PyPI. `scripts/test-env.sh` makes them, with the
/// versions it pins; without one, the failure says so.
pub fn python_venv(name: &str, module: &str) -> PathBuf {
    let python = workspace_root()
        .join("target")
        .join(name)
        .join("bin/python");
    let has = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has,
        "this test needs the Python package `{module}` in target/{name}: run scripts/test-env.sh, which makes the virtualenvs the tests use"
    );
    python
}
