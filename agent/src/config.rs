//! Agent configuration. The agent's config never names the approver's
//! private key: only the CLI signs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// A unix socket next to the config (in `run/`, a 0700 folder): no other
/// local user can reach it, or squat its address while the agent is down.
pub const DEFAULT_LISTEN: &str = "unix:run/agent.sock";
pub const DEFAULT_EXECUTOR_ENDPOINT: &str = "https://127.0.0.1:7443";
pub const DEFAULT_EXECUTOR_SERVER_NAME: &str = "drydock-executor";
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(600);
pub const DEFAULT_MAX_ITERATIONS: u32 = 3;
pub const DEFAULT_VERIFY_MAX_WAIT: Duration = Duration::from_secs(120);
pub const DEFAULT_VERIFY_POLL: Duration = Duration::from_millis(250);
pub const DEFAULT_LOGS_TAIL: u32 = 200;

pub use drydock_daemon::logging::LogFormat;
pub use drydock_daemon::ConfigError;
use drydock_daemon::{config::resolve_relative, invalid};

mod hosts;
pub use hosts::{reaches, HostConfig, Reach};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `unix:PATH` (relative to this file) or `HOST:PORT` (plain TCP, only
    /// with `api.allow_plain_tcp`).
    #[serde(default = "default_listen")]
    pub listen: String,
    #[serde(default)]
    pub api: ApiConfig,
    pub token_file: PathBuf,
    pub executor: ExecutorConfig,
    /// Other Docker hosts, each with its own executor (`config/hosts.rs`).
    #[serde(default)]
    pub hosts: Vec<HostConfig>,
    pub store: StoreConfig,
    #[serde(default = "default_ttl", with = "drydock_daemon::duration")]
    pub approval_ttl: Duration,
    #[serde(default = "default_iterations")]
    pub max_iterations: u32,
    #[serde(default)]
    pub verify: VerifyConfig,
    /// How the rules engine weighs a failure.
    #[serde(default)]
    pub diagnosis: DiagnosisConfig,
    #[serde(default = "default_tail")]
    pub logs_tail: u32,
    #[serde(default)]
    pub log_format: LogFormat,
    /// Optional per-service operator notes (dependencies, HTTP check, quirks).
    #[serde(default)]
    pub runbook: Option<PathBuf>,
    /// Optional model-backed investigation; absent means rules only.
    #[serde(default)]
    pub llm: Option<LlmConfig>,
    /// Watching the engine's events and opening requests by itself.
    #[serde(default)]
    pub watch: WatchConfig,
    /// Outgoing webhooks on request events.
    #[serde(default)]
    pub notify: NotifyConfig,
    /// Checking containers' tags against their registries.
    #[serde(default)]
    pub updates: UpdatesConfig,
}

/// `updates`: how often the containers' tags are checked.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdatesConfig {
    /// `0s`: only on demand (`drydock updates --check`).
    #[serde(default = "default_check_every", with = "drydock_daemon::duration")]
    pub check_every: Duration,
}

impl Default for UpdatesConfig {
    fn default() -> Self {
        UpdatesConfig {
            check_every: default_check_every(),
        }
    }
}

fn default_check_every() -> Duration {
    Duration::from_secs(6 * 3600)
}

/// What watching does with a failure it sees.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum WatchMode {
    /// Diagnose, plan and notify; a person approves.
    #[default]
    Notify,
    /// Also repair without asking when an automation grant covers the plan.
    Repair,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WatchConfig {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub mode: WatchMode,
    /// A container that flaps (it triggered already within
    /// `crash_loop_window`) waits this long before a request is opened, and
    /// its further triggers fold into it. A first trigger does not: Docker's
    /// health retries already debounced an `unhealthy`.
    #[serde(default = "default_debounce", with = "drydock_daemon::duration")]
    pub debounce: Duration,
    /// A first crash or OOM kill waits this long for Docker's restart
    /// policy (which restarts after 100 ms at first): a container Docker
    /// restarted by itself is left to Docker.
    #[serde(default = "default_restart_grace", with = "drydock_daemon::duration")]
    pub restart_grace: Duration,
    /// After a watch request for a container ends, no new one is opened for
    /// it this long: a flapping container yields one request.
    #[serde(default = "default_cooldown", with = "drydock_daemon::duration")]
    pub cooldown: Duration,
    /// This many `die` events of one container within `crash_loop_window`
    /// is a crash loop: advice, never a restart.
    #[serde(default = "default_crash_loop_restarts")]
    pub crash_loop_restarts: u32,
    #[serde(
        default = "default_crash_loop_window",
        with = "drydock_daemon::duration"
    )]
    pub crash_loop_window: Duration,
    /// Events older than this leave the journal.
    #[serde(
        default = "default_journal_retention",
        with = "drydock_daemon::duration"
    )]
    pub journal_retention: Duration,
    /// The journal never holds more rows than this (oldest leave first).
    #[serde(default = "default_journal_max_rows")]
    pub journal_max_rows: u32,
    /// Alert labels, in order, whose value names the target container or
    /// compose service (for `POST /api/v1/alerts`).
    #[serde(default = "default_alert_labels")]
    pub alert_target_labels: Vec<String>,
    /// How often the Swarm services in the executor's scope are read: one
    /// that runs fewer tasks than it wants for longer than `debounce`
    /// opens a request.
    #[serde(default = "default_service_poll", with = "drydock_daemon::duration")]
    pub service_poll: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            enabled: false,
            mode: WatchMode::Notify,
            debounce: default_debounce(),
            restart_grace: default_restart_grace(),
            cooldown: default_cooldown(),
            crash_loop_restarts: default_crash_loop_restarts(),
            crash_loop_window: default_crash_loop_window(),
            journal_retention: default_journal_retention(),
            journal_max_rows: default_journal_max_rows(),
            alert_target_labels: default_alert_labels(),
            service_poll: default_service_poll(),
        }
    }
}

fn default_service_poll() -> Duration {
    Duration::from_secs(10)
}

fn default_debounce() -> Duration {
    Duration::from_secs(10)
}
fn default_restart_grace() -> Duration {
    Duration::from_secs(1)
}
fn default_cooldown() -> Duration {
    Duration::from_secs(300)
}
fn default_crash_loop_restarts() -> u32 {
    3
}
fn default_crash_loop_window() -> Duration {
    Duration::from_secs(600)
}
fn default_journal_retention() -> Duration {
    Duration::from_secs(7 * 86_400)
}
fn default_journal_max_rows() -> u32 {
    100_000
}
fn default_alert_labels() -> Vec<String> {
    [
        "container",
        "container_name",
        "name",
        "compose_service",
        "service",
    ]
    .into_iter()
    .map(String::from)
    .collect()
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    #[serde(default)]
    pub webhooks: Vec<WebhookConfig>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum WebhookFormat {
    /// drydock's JSON, signed with HMAC-SHA256.
    #[default]
    Json,
    /// `{"text": ...}` for Slack-compatible incoming webhooks.
    Slack,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub format: WebhookFormat,
    /// A file holding the HMAC key; the signature goes in
    /// `X-Drydock-Signature: sha256=<hex>`.
    #[serde(default)]
    pub secret_file: Option<PathBuf>,
    /// Which events; empty means every one.
    #[serde(default)]
    pub events: Vec<crate::model::NotifyEvent>,
}

pub const DEFAULT_LLM_TIMEOUT: Duration = Duration::from_secs(60);
pub const DEFAULT_LLM_MAX_TURNS: u32 = 8;
pub const DEFAULT_LLM_MAX_RETRIES: u32 = 3;
pub const DEFAULT_LLM_MAX_INVALID_ANSWERS: u32 = 2;
pub const DEFAULT_OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_ANTHROPIC_BASE_URL: &str = "https://api.anthropic.com/v1";

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LlmProvider {
    /// OpenAI Chat Completions, or any server speaking that API.
    Openai,
    /// Anthropic Messages API.
    Anthropic,
}

/// When the model investigates with no rules answer to confirm.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Investigate {
    /// Openly when the rules are unsure (`unknown`, or below the
    /// confidence a write needs); else it is asked to confirm or refute
    /// the rules' answer.
    #[default]
    WhenUnsure,
    /// Always openly: the model never sees the rules' answer, and the
    /// rules' class never vetoes its writes (the evidence gate still
    /// does).
    Open,
    /// Openly, and with no chosen target: drydock's discovery does not
    /// pick the container; the model finds it among the containers in
    /// scope and names it, and drydock then observes it and holds the
    /// model's writes to what that evidence supports. What a fair measure
    /// of a model runs. With several hosts, discovery still picks the
    /// host's container.
    Blind,
}

impl Investigate {
    /// Every investigation is open: no rules answer to confirm.
    pub fn always_open(self) -> bool {
        self != Investigate::WhenUnsure
    }
}

/// The `llm:` section. The API key itself never appears here: only the name
/// of the environment variable that holds it, read once at start.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmConfig {
    pub provider: LlmProvider,
    #[serde(default)]
    pub base_url: Option<String>,
    pub model: String,
    pub api_key_env: String,
    #[serde(default = "default_llm_timeout", with = "drydock_daemon::duration")]
    pub timeout: Duration,
    #[serde(default = "default_llm_max_turns")]
    pub max_turns: u32,
    #[serde(default = "default_llm_max_retries")]
    pub max_retries: u32,
    #[serde(default = "default_llm_max_invalid")]
    pub max_invalid_answers: u32,
    #[serde(default)]
    pub investigate: Investigate,
}

impl LlmConfig {
    pub fn base_url(&self) -> String {
        let url = self.base_url.clone().unwrap_or_else(|| {
            match self.provider {
                LlmProvider::Openai => DEFAULT_OPENAI_BASE_URL,
                LlmProvider::Anthropic => DEFAULT_ANTHROPIC_BASE_URL,
            }
            .to_string()
        });
        url.trim_end_matches('/').to_string()
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let url = self.base_url();
        if !(url.starts_with("https://") || url.starts_with("http://")) {
            return Err(invalid(
                "llm.base_url",
                format!("`{url}` must be an http:// or https:// URL"),
            ));
        }
        if self.model.trim().is_empty() {
            return Err(invalid("llm.model", "must name a model"));
        }
        let env_ok = !self.api_key_env.is_empty()
            && self
                .api_key_env
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
        if !env_ok {
            // Do not echo the value: someone may have pasted the key itself.
            return Err(invalid(
                "llm.api_key_env",
                "must be the NAME of an environment variable (A-Z, 0-9, _), never the key itself",
            ));
        }
        if self.timeout < Duration::from_secs(1) || self.timeout > Duration::from_secs(600) {
            return Err(invalid("llm.timeout", "must be between 1s and 10m"));
        }
        if self.max_turns == 0 || self.max_turns > 50 {
            return Err(invalid(
                "llm.max_turns",
                format!("{} is outside 1..=50", self.max_turns),
            ));
        }
        if self.max_retries > 10 {
            return Err(invalid(
                "llm.max_retries",
                format!("{} is outside 0..=10", self.max_retries),
            ));
        }
        if self.max_invalid_answers > 10 {
            return Err(invalid(
                "llm.max_invalid_answers",
                format!("{} is outside 0..=10", self.max_invalid_answers),
            ));
        }
        Ok(())
    }

    /// The key, from the environment variable the config names.
    pub fn api_key(&self) -> Result<String, ConfigError> {
        match std::env::var(&self.api_key_env) {
            Ok(k) if !k.trim().is_empty() => Ok(k.trim().to_string()),
            _ => Err(invalid(
                "llm.api_key_env",
                format!("environment variable {} is not set", self.api_key_env),
            )),
        }
    }
}

fn default_llm_timeout() -> Duration {
    DEFAULT_LLM_TIMEOUT
}
fn default_llm_max_turns() -> u32 {
    DEFAULT_LLM_MAX_TURNS
}
fn default_llm_max_retries() -> u32 {
    DEFAULT_LLM_MAX_RETRIES
}
fn default_llm_max_invalid() -> u32 {
    DEFAULT_LLM_MAX_INVALID_ANSWERS
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorConfig {
    #[serde(default = "default_endpoint")]
    pub endpoint: String,
    #[serde(default = "default_server_name")]
    pub server_name: String,
    /// This executor's host name (`local` when absent and `hosts:` lists
    /// others).
    #[serde(default)]
    pub host: Option<String>,
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiConfig {
    /// Serve the API over plain TCP. A local user who binds the port while
    /// the agent is down gets the bearer token of the next CLI call, so it
    /// must be asked for (and is warned about at start).
    #[serde(default)]
    pub allow_plain_tcp: bool,
    /// Besides the agent's own user, peers in this group may use the unix
    /// socket (its folder may then be group-accessible).
    #[serde(default)]
    pub allowed_gid: Option<u32>,
    /// HTTPS on a TCP `listen`, with a certificate from drydock's CA that
    /// the CLI pins (`agent_ca` in cli.yaml): for an agent reached remotely.
    #[serde(default)]
    pub tls: Option<ApiTlsConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiTlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Where the API listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(PathBuf),
    Tcp(std::net::SocketAddr),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    pub path: PathBuf,
    /// Finished requests (and their events) older than this leave the
    /// store; unfinished ones never do.
    #[serde(default = "default_store_retention", with = "drydock_daemon::duration")]
    pub retention: Duration,
    /// The store never keeps more finished requests than this (the oldest
    /// leave first).
    #[serde(default = "default_store_max_requests")]
    pub max_requests: u32,
}

fn default_store_retention() -> Duration {
    Duration::from_secs(30 * 86_400)
}
fn default_store_max_requests() -> u32 {
    10_000
}

/// The default of `diagnosis.ran_well_after`, in seconds.
pub const RAN_WELL_AFTER_SECS: u64 = 60;

/// `diagnosis:` in agent.yaml.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnosisConfig {
    /// How long a run must last to count as having run well: a container
    /// that died sooner, without saying it was ready or passing its
    /// healthcheck, had a startup failure, and a start is proposed only
    /// with other evidence that it helps.
    #[serde(default = "default_ran_well_after", with = "drydock_daemon::duration")]
    pub ran_well_after: Duration,
}

impl Default for DiagnosisConfig {
    fn default() -> Self {
        DiagnosisConfig {
            ran_well_after: default_ran_well_after(),
        }
    }
}

fn default_ran_well_after() -> Duration {
    Duration::from_secs(RAN_WELL_AFTER_SECS)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyConfig {
    #[serde(default = "default_max_wait", with = "drydock_daemon::duration")]
    pub max_wait: Duration,
    #[serde(default = "default_poll", with = "drydock_daemon::duration")]
    pub poll_interval: Duration,
    /// How long every check must keep holding before a repair is called
    /// verified (longer for a health check with a slow schedule).
    #[serde(default = "default_stable_for", with = "drydock_daemon::duration")]
    pub stable_for: Duration,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            max_wait: DEFAULT_VERIFY_MAX_WAIT,
            poll_interval: DEFAULT_VERIFY_POLL,
            stable_for: default_stable_for(),
        }
    }
}

fn default_stable_for() -> Duration {
    Duration::from_secs(3)
}

fn default_listen() -> String {
    DEFAULT_LISTEN.into()
}
fn default_endpoint() -> String {
    DEFAULT_EXECUTOR_ENDPOINT.into()
}
fn default_server_name() -> String {
    DEFAULT_EXECUTOR_SERVER_NAME.into()
}
fn default_ttl() -> Duration {
    DEFAULT_APPROVAL_TTL
}
fn default_iterations() -> u32 {
    DEFAULT_MAX_ITERATIONS
}
fn default_max_wait() -> Duration {
    DEFAULT_VERIFY_MAX_WAIT
}
fn default_poll() -> Duration {
    DEFAULT_VERIFY_POLL
}
fn default_tail() -> u32 {
    DEFAULT_LOGS_TAIL
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let config = Self::read(path)?;
        config.validate()?;
        Ok(config)
    }

    /// The file with the environment's overrides and its paths resolved,
    /// not validated: for the store tools (`backup`, `restore`), which need
    /// only the store's path and run where the files the service is handed
    /// (systemd's credentials) may not be.
    pub fn read(path: &Path) -> Result<Config, ConfigError> {
        let mut c: Config = drydock_daemon::load_yaml(path)?;
        if let Ok(v) = std::env::var("DRYDOCK_AGENT_LISTEN") {
            c.listen = v;
        }
        if let Ok(v) = std::env::var("DRYDOCK_EXECUTOR_ENDPOINT") {
            c.executor.endpoint = v;
        }
        if let Ok(v) = std::env::var("DRYDOCK_AGENT_ALLOWED_GID") {
            let gid = v.trim().parse::<u32>().map_err(|_| {
                invalid(
                    "api.allowed_gid",
                    format!("DRYDOCK_AGENT_ALLOWED_GID `{v}` is not a group id (a number, as `id -g` prints it)"),
                )
            })?;
            c.api.allowed_gid = Some(gid);
        }
        let mut paths = vec![
            &mut c.token_file,
            &mut c.executor.ca,
            &mut c.executor.cert,
            &mut c.executor.key,
            &mut c.store.path,
        ];
        if let Some(rb) = c.runbook.as_mut() {
            paths.push(rb);
        }
        if let Some(tls) = c.api.tls.as_mut() {
            paths.push(&mut tls.cert);
            paths.push(&mut tls.key);
        }
        for hook in c.notify.webhooks.iter_mut() {
            if let Some(secret) = hook.secret_file.as_mut() {
                paths.push(secret);
            }
        }
        resolve_relative(path, &mut paths);
        if let Some(socket) = c.listen.strip_prefix("unix:").filter(|p| !p.is_empty()) {
            let mut socket = PathBuf::from(socket);
            resolve_relative(path, &mut [&mut socket]);
            c.listen = format!("unix:{}", socket.display());
        }
        Ok(c)
    }

    fn validate_watch(&self) -> Result<(), ConfigError> {
        let w = &self.watch;
        if w.debounce > Duration::from_secs(600) {
            return Err(invalid("watch.debounce", "must be at most 10m"));
        }
        if w.restart_grace > Duration::from_secs(60) {
            return Err(invalid("watch.restart_grace", "must be at most 1m"));
        }
        if w.service_poll < Duration::from_secs(1) || w.service_poll > Duration::from_secs(600) {
            return Err(invalid("watch.service_poll", "must be between 1s and 10m"));
        }
        if w.crash_loop_restarts < 2 {
            return Err(invalid("watch.crash_loop_restarts", "must be at least 2"));
        }
        if w.journal_max_rows < 100 {
            return Err(invalid("watch.journal_max_rows", "must be at least 100"));
        }
        if w.journal_retention < Duration::from_secs(3600) {
            return Err(invalid("watch.journal_retention", "must be at least 1h"));
        }
        let mut names = std::collections::HashSet::new();
        for h in &self.notify.webhooks {
            if h.name.is_empty() || !names.insert(h.name.as_str()) {
                return Err(invalid(
                    "notify.webhooks[].name",
                    format!("`{}` is empty or used twice", h.name),
                ));
            }
            if !(h.url.starts_with("http://") || h.url.starts_with("https://")) {
                return Err(invalid(
                    "notify.webhooks[].url",
                    format!("webhook {}: `{}` is not an http(s) URL", h.name, h.url),
                ));
            }
            if let Some(secret) = &h.secret_file {
                drydock_daemon::files::check_private("notify.webhooks[].secret_file", secret)?;
            }
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_watch()?;
        let every = self.updates.check_every;
        if !every.is_zero() && every < Duration::from_secs(300) {
            return Err(invalid(
                "updates.check_every",
                "must be 0s (only on demand) or at least 5m: each check asks every registry once per container",
            ));
        }
        if self.store.retention < Duration::from_secs(3600) {
            return Err(invalid("store.retention", "must be at least 1h"));
        }
        if self.store.max_requests < 100 {
            return Err(invalid("store.max_requests", "must be at least 100"));
        }
        if self.api.allowed_gid == Some(0) {
            return Err(invalid(
                "api.allowed_gid",
                "0 would admit every process of group root to the API; name the operator's own group (id -g)",
            ));
        }
        match self.listen_on()? {
            Listen::Unix(path) => {
                if self.api.tls.is_some() {
                    return Err(invalid(
                        "api.tls",
                        "TLS is for a TCP listen address; a unix socket is already private",
                    ));
                }
                if path.as_os_str().len() > 100 {
                    return Err(invalid(
                        "listen",
                        format!(
                            "{} is too long for a unix socket path (at most 100 bytes)",
                            path.display()
                        ),
                    ));
                }
            }
            Listen::Tcp(_) if self.api.tls.is_some() => {
                for (key, p) in self
                    .api
                    .tls
                    .iter()
                    .flat_map(|t| [("api.tls.cert", &t.cert), ("api.tls.key", &t.key)])
                {
                    if !p.is_file() {
                        return Err(invalid(key, format!("file {} does not exist", p.display())));
                    }
                }
                if let Some(t) = &self.api.tls {
                    drydock_daemon::files::check_private("api.tls.key", &t.key)?;
                }
            }
            Listen::Tcp(_) if !self.api.allow_plain_tcp => {
                return Err(invalid(
                    "listen",
                    format!(
                        "`{}` is plain TCP: a local user who binds it while the agent is down gets the CLI's token. Use `listen: unix:run/agent.sock`, or set `api.allow_plain_tcp: true` if you mean it",
                        self.listen
                    ),
                ));
            }
            Listen::Tcp(_) => {}
        }
        hosts::validate(&self.executor, &self.hosts)?;
        for (key, p) in [
            ("token_file", &self.token_file),
            ("executor.ca", &self.executor.ca),
            ("executor.cert", &self.executor.cert),
            ("executor.key", &self.executor.key),
        ] {
            if !p.is_file() {
                return Err(invalid(key, format!("file {} does not exist", p.display())));
            }
        }
        if self.max_iterations == 0 || self.max_iterations > 10 {
            return Err(invalid(
                "max_iterations",
                format!("{} is outside 1..=10", self.max_iterations),
            ));
        }
        if self.approval_ttl < Duration::from_secs(10)
            || self.approval_ttl > Duration::from_secs(3600)
        {
            return Err(invalid("approval_ttl", "must be between 10s and 1h"));
        }
        if self.logs_tail == 0 || self.logs_tail > 500 {
            return Err(invalid(
                "logs_tail",
                format!("{} is outside 1..=500", self.logs_tail),
            ));
        }
        if self.verify.poll_interval.is_zero() || self.verify.max_wait.is_zero() {
            return Err(invalid(
                "verify",
                "poll_interval and max_wait must be greater than zero",
            ));
        }
        if self.verify.stable_for > Duration::from_secs(300) {
            return Err(invalid("verify.stable_for", "must be at most 5m"));
        }
        let ran_well_after = self.diagnosis.ran_well_after;
        if ran_well_after < Duration::from_secs(1) || ran_well_after > Duration::from_secs(3600) {
            return Err(invalid(
                "diagnosis.ran_well_after",
                "must be between 1s and 1h (how long a run must last to count as having run well)",
            ));
        }
        if let Some(llm) = &self.llm {
            llm.validate()?;
        }
        Ok(())
    }

    /// Every executor, `executor:`'s first.
    pub fn reaches(&self) -> Vec<Reach> {
        reaches(&self.executor, &self.hosts)
    }

    /// The parsed `listen` (relative unix paths were resolved at load).
    pub fn listen_on(&self) -> Result<Listen, ConfigError> {
        match self.listen.strip_prefix("unix:") {
            Some("") => Err(invalid("listen", "`unix:` needs a path")),
            Some(path) => Ok(Listen::Unix(PathBuf::from(path))),
            None => drydock_daemon::config::socket_addr("listen", &self.listen).map(Listen::Tcp),
        }
    }

    pub fn token(&self) -> Result<String, ConfigError> {
        let t = std::fs::read_to_string(&self.token_file).map_err(|source| ConfigError::Read {
            path: self.token_file.clone(),
            source,
        })?;
        let t = t.trim().to_string();
        if t.len() < 16 {
            return Err(invalid(
                "token_file",
                "the token must be at least 16 characters",
            ));
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests;
