//! Executor configuration: YAML, every key with a default, validated at start
//! with errors that name the key. `DRYDOCK_*` environment variables override
//! a few deployment-specific keys.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

mod checks;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7443";
pub const DEFAULT_DOCKER_ENDPOINT: &str = "unix:///var/run/docker.sock";
pub const DEFAULT_LOGS_MAX_LINES: u32 = 500;
pub const DEFAULT_LOGS_MAX_BYTES: u32 = 262_144;
pub const DEFAULT_LOGS_TAIL: u32 = 200;
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_LOGS_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
/// An approval may not be valid for longer than this, whatever it claims.
pub const DEFAULT_MAX_APPROVAL_TTL: Duration = Duration::from_secs(3600);
/// `timeouts.max_approval_ttl` itself may not be set above this.
pub const MAX_APPROVAL_TTL_BOUND: Duration = Duration::from_secs(24 * 3600);
pub const DEFAULT_HTTP_TIMEOUT: Duration = Duration::from_secs(5);

pub use drydock_daemon::logging::LogFormat;
pub use drydock_daemon::ConfigError;
use drydock_daemon::{config::resolve_relative, invalid};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default = "default_listen")]
    pub listen: String,
    pub tls: TlsConfig,
    #[serde(default)]
    pub docker: DockerConfig,
    #[serde(default)]
    pub approvers: Vec<ApproverConfig>,
    /// No default: which containers drydock may see and touch is a decision
    /// the operator writes down (`drydock init` writes one and says so).
    #[serde(default)]
    pub targets: Option<TargetsConfig>,
    #[serde(default)]
    pub actions: ActionsConfig,
    #[serde(default)]
    pub limits: LimitsConfig,
    #[serde(default)]
    pub timeouts: TimeoutsConfig,
    pub audit: AuditConfig,
    /// Service name → `http://` URL the executor may check for the agent.
    #[serde(default)]
    pub http_checks: BTreeMap<String, String>,
    #[serde(default)]
    pub log_format: LogFormat,
    #[serde(default)]
    pub automation: AutomationConfig,
    #[serde(default)]
    pub redact: RedactConfig,
    /// This executor's host name, which approvals and grants made for it
    /// carry (one agent may drive executors on several hosts).
    #[serde(default)]
    pub host: Option<HostConfig>,
    /// The registries an update may pull from, with their credentials.
    #[serde(default)]
    pub registries: Vec<crate::registry::RegistryConfig>,
    #[serde(default)]
    pub update: crate::registry::UpdateConfig,
    /// The contexts a build may read, and its limits.
    #[serde(default)]
    pub build: crate::build::BuildConfig,
    #[serde(default)]
    pub approvals: ApprovalsConfig,
}

/// `approvals`: how many distinct approvers a write needs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// By action (`rollback: 2`) or tier (`t1`, `t2`); an action's own
    /// entry wins over its tier's; one when neither names it.
    #[serde(default)]
    pub required: BTreeMap<String, u32>,
}

/// `host`: the name approvals and grants for this executor must carry.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// 1 to 63 lowercase letters, digits, `-` and `.`.
    pub name: String,
    /// Refuse approvals and grants that name no host (made before hosts,
    /// or by an agent that does not know this executor's name).
    #[serde(default)]
    pub require: bool,
}

/// What of a container's environment leaves the executor.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedactConfig {
    /// `secret-looking` (the default): values of secret-looking names are
    /// withheld, the others shown with credentials stripped. `all`: every
    /// value is withheld except those of `env_allow`; the names stay, since
    /// names are evidence and values rarely are.
    #[serde(default)]
    pub env: EnvRedaction,
    /// Names whose values `all` still shows (redacted like any text).
    #[serde(default)]
    pub env_allow: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnvRedaction {
    #[default]
    SecretLooking,
    All,
}

/// Automation grants: off unless the executor's operator turns them on.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutomationConfig {
    #[serde(default)]
    pub enabled: bool,
    /// The longest `expires_at − issued_at` a grant may have.
    #[serde(default = "default_max_grant_ttl", with = "drydock_daemon::duration")]
    pub max_grant_ttl: Duration,
    /// A file of revoked grant ids, one per line (`#` comments). Read at
    /// every use of a grant, so a revocation takes effect without a restart.
    /// Relative paths are relative to this config file.
    #[serde(default)]
    pub revocations: Option<PathBuf>,
}

pub const DEFAULT_MAX_GRANT_TTL: Duration = Duration::from_secs(7 * 86_400);
/// A grant is a standing authorisation; the executor bounds how long one
/// may stand.
pub const MAX_GRANT_TTL_BOUND: Duration = Duration::from_secs(90 * 86_400);
fn default_max_grant_ttl() -> Duration {
    DEFAULT_MAX_GRANT_TTL
}

impl Default for AutomationConfig {
    fn default() -> Self {
        AutomationConfig {
            enabled: false,
            max_grant_ttl: DEFAULT_MAX_GRANT_TTL,
            revocations: None,
        }
    }
}

fn default_listen() -> String {
    DEFAULT_LISTEN.to_string()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub client_ca: PathBuf,
    pub allowed_clients: Vec<String>,
    /// Identities that may call only the standard gRPC health service (for
    /// a container healthcheck); they can reach no executor RPC.
    #[serde(default)]
    pub health_clients: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DockerConfig {
    #[serde(default = "default_docker_endpoint")]
    pub endpoint: String,
}

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            endpoint: default_docker_endpoint(),
        }
    }
}

fn default_docker_endpoint() -> String {
    DEFAULT_DOCKER_ENDPOINT.to_string()
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproverConfig {
    pub id: String,
    pub public_key: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetsConfig {
    /// Glob patterns over container names (without the leading slash).
    /// Empty: names do not restrict (another selector must be set).
    #[serde(default)]
    pub allow_names: Vec<String>,
    /// Every listed label must be present with this value.
    #[serde(default)]
    pub allow_labels: BTreeMap<String, String>,
    /// When non-empty, only containers of these compose projects.
    #[serde(default)]
    pub allow_compose_projects: Vec<String>,
    /// Swarm services in scope. Absent: no service is visible (services
    /// fail closed), whatever the container selectors say.
    #[serde(default)]
    pub services: Option<ServiceTargetsConfig>,
}

impl TargetsConfig {
    /// Whether any container selector is set; with none, no container is
    /// visible (only a config with `services` may leave them all empty).
    pub fn selects_containers(&self) -> bool {
        !self.allow_names.is_empty()
            || !self.allow_labels.is_empty()
            || !self.allow_compose_projects.is_empty()
    }
}

/// `targets.services`: which Swarm services drydock may see and act on.
/// Every non-empty selector must match, as for containers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceTargetsConfig {
    /// Glob patterns over service names (`shop_*`).
    #[serde(default)]
    pub allow_names: Vec<String>,
    /// Every listed service label must be present with this value.
    #[serde(default)]
    pub allow_labels: BTreeMap<String, String>,
    /// Stacks (`com.docker.stack.namespace`); any one matching is enough.
    #[serde(default)]
    pub allow_stacks: Vec<String>,
    /// Whether `ListNodes` answers the nodes' labels (off: they often name
    /// hosts, racks and owners a diagnosis does not need).
    #[serde(default)]
    pub node_labels: bool,
}

impl ServiceTargetsConfig {
    pub fn is_empty(&self) -> bool {
        self.allow_names.is_empty() && self.allow_labels.is_empty() && self.allow_stacks.is_empty()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionToggle {
    pub enabled: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionsConfig {
    #[serde(default = "enabled")]
    pub restart: ActionToggle,
    #[serde(default = "enabled")]
    pub start: ActionToggle,
    /// T2: disruptive, so off unless the operator turns it on.
    #[serde(default = "disabled")]
    pub stop: ActionToggle,
    /// T2: re-creates a container with a previous image; off unless the
    /// operator turns it on, and never under a grant.
    #[serde(default = "disabled")]
    pub rollback: ActionToggle,
    /// T1: replaces a Swarm service's tasks with the same spec.
    #[serde(default = "enabled")]
    pub force_update: ActionToggle,
    /// T2: returns a Swarm service to its previous spec; off unless the
    /// operator turns it on, and never under a grant.
    #[serde(default = "disabled")]
    pub service_rollback: ActionToggle,
    /// T2: pulls a newer image of the container's tag and re-creates it;
    /// off unless the operator turns it on, and under a grant only with
    /// `grants: true`.
    #[serde(default)]
    pub update: UpdateToggle,
    /// T2: builds an image from a context in `build.contexts`; off unless
    /// the operator turns it on, and never under a grant.
    #[serde(default = "disabled")]
    pub build: ActionToggle,
}

/// `actions.update`: whether updates are allowed, and whether a grant (with
/// its hours) may make one without a person.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateToggle {
    #[serde(default)]
    pub enabled: bool,
    #[serde(default)]
    pub grants: bool,
}

impl Default for ActionsConfig {
    fn default() -> Self {
        ActionsConfig {
            restart: enabled(),
            start: enabled(),
            stop: disabled(),
            rollback: disabled(),
            force_update: enabled(),
            service_rollback: disabled(),
            update: UpdateToggle::default(),
            build: disabled(),
        }
    }
}

fn disabled() -> ActionToggle {
    ActionToggle { enabled: false }
}

fn enabled() -> ActionToggle {
    ActionToggle { enabled: true }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    #[serde(default = "default_logs_max_lines")]
    pub logs_max_lines: u32,
    #[serde(default = "default_logs_max_bytes")]
    pub logs_max_bytes: u32,
    #[serde(default = "default_logs_tail")]
    pub logs_default_tail: u32,
    /// Calls per second each caller identity may make, on average.
    #[serde(default = "default_calls_per_second")]
    pub calls_per_second: u32,
    /// Calls a caller may make at once above that rate.
    #[serde(default = "default_burst")]
    pub burst: u32,
    /// Calls in flight on one connection.
    #[serde(default = "default_calls_per_connection")]
    pub max_concurrent_calls_per_connection: u32,
    /// HTTP/2 streams one connection may open at once.
    #[serde(default = "default_streams")]
    pub max_concurrent_streams: u32,
}

pub const DEFAULT_CALLS_PER_SECOND: u32 = 200;
pub const DEFAULT_BURST: u32 = 400;
pub const DEFAULT_CALLS_PER_CONNECTION: u32 = 32;
pub const DEFAULT_STREAMS: u32 = 64;
fn default_calls_per_second() -> u32 {
    DEFAULT_CALLS_PER_SECOND
}
fn default_burst() -> u32 {
    DEFAULT_BURST
}
fn default_calls_per_connection() -> u32 {
    DEFAULT_CALLS_PER_CONNECTION
}
fn default_streams() -> u32 {
    DEFAULT_STREAMS
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            logs_max_lines: DEFAULT_LOGS_MAX_LINES,
            logs_max_bytes: DEFAULT_LOGS_MAX_BYTES,
            logs_default_tail: DEFAULT_LOGS_TAIL,
            calls_per_second: DEFAULT_CALLS_PER_SECOND,
            burst: DEFAULT_BURST,
            max_concurrent_calls_per_connection: DEFAULT_CALLS_PER_CONNECTION,
            max_concurrent_streams: DEFAULT_STREAMS,
        }
    }
}

fn default_logs_max_lines() -> u32 {
    DEFAULT_LOGS_MAX_LINES
}
fn default_logs_max_bytes() -> u32 {
    DEFAULT_LOGS_MAX_BYTES
}
fn default_logs_tail() -> u32 {
    DEFAULT_LOGS_TAIL
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimeoutsConfig {
    #[serde(default = "default_read", with = "drydock_daemon::duration")]
    pub read: Duration,
    #[serde(default = "default_logs", with = "drydock_daemon::duration")]
    pub logs: Duration,
    #[serde(default = "default_write", with = "drydock_daemon::duration")]
    pub write: Duration,
    #[serde(default = "default_max_ttl", with = "drydock_daemon::duration")]
    pub max_approval_ttl: Duration,
    #[serde(default = "default_http", with = "drydock_daemon::duration")]
    pub http: Duration,
}

impl Default for TimeoutsConfig {
    fn default() -> Self {
        TimeoutsConfig {
            read: DEFAULT_READ_TIMEOUT,
            logs: DEFAULT_LOGS_TIMEOUT,
            write: DEFAULT_WRITE_TIMEOUT,
            max_approval_ttl: DEFAULT_MAX_APPROVAL_TTL,
            http: DEFAULT_HTTP_TIMEOUT,
        }
    }
}

fn default_read() -> Duration {
    DEFAULT_READ_TIMEOUT
}
fn default_logs() -> Duration {
    DEFAULT_LOGS_TIMEOUT
}
fn default_write() -> Duration {
    DEFAULT_WRITE_TIMEOUT
}
fn default_max_ttl() -> Duration {
    DEFAULT_MAX_APPROVAL_TTL
}
fn default_http() -> Duration {
    DEFAULT_HTTP_TIMEOUT
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditConfig {
    pub path: PathBuf,
    /// `ed25519-secret:` key that signs checkpoints of the chain head. Its
    /// public half (`audit.pub`) belongs outside the store, with whoever
    /// verifies. Without it the chain is unsigned.
    #[serde(default)]
    pub signing_key: Option<PathBuf>,
    /// A signed checkpoint after this many rows (and at shutdown).
    #[serde(default = "default_checkpoint_every")]
    pub checkpoint_every: u32,
    /// When the live store passes this size, its rows move into a
    /// read-only segment file next to it and the chain continues in the
    /// live store (`64MiB`, `512KiB`, or bytes).
    #[serde(default = "default_max_size", with = "drydock_daemon::size")]
    pub max_size: u64,
    /// How many rotated segments are kept; the oldest beyond this is
    /// deleted, and the chain records that it was. The audit files never
    /// take much more than `(keep_segments + 1) × max_size`.
    #[serde(default = "default_keep_segments")]
    pub keep_segments: u32,
}

pub const DEFAULT_AUDIT_MAX_SIZE: u64 = 64 << 20;
fn default_max_size() -> u64 {
    DEFAULT_AUDIT_MAX_SIZE
}
pub const DEFAULT_KEEP_SEGMENTS: u32 = 8;
fn default_keep_segments() -> u32 {
    DEFAULT_KEEP_SEGMENTS
}
/// Below this a segment would hold a handful of rows.
pub const MIN_AUDIT_MAX_SIZE: u64 = 64 << 10;

pub const DEFAULT_CHECKPOINT_EVERY: u32 = 100;
fn default_checkpoint_every() -> u32 {
    DEFAULT_CHECKPOINT_EVERY
}

impl Config {
    /// The checkpoint signing key, if configured.
    pub fn audit_signing_key(&self) -> Result<Option<ed25519_dalek::SigningKey>, ConfigError> {
        let Some(path) = &self.audit.signing_key else {
            return Ok(None);
        };
        let text = std::fs::read_to_string(path).map_err(|e| {
            invalid(
                "audit.signing_key",
                format!("cannot read {}: {e}", path.display()),
            )
        })?;
        drydock_proto::approval::parse_secret_key(&text)
            .map(Some)
            .map_err(|e| invalid("audit.signing_key", format!("{}: {e}", path.display())))
    }

    /// Read, apply environment overrides, resolve relative paths against the
    /// config file's folder, and validate.
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
        let mut config: Config = drydock_daemon::load_yaml(path)?;
        config.apply_env(|k| std::env::var(k).ok());
        resolve_relative(
            path,
            &mut [
                &mut config.tls.cert,
                &mut config.tls.key,
                &mut config.tls.client_ca,
                &mut config.audit.path,
            ],
        );
        if let Some(key) = config.audit.signing_key.as_mut() {
            resolve_relative(path, &mut [key]);
        }
        if let Some(file) = config.automation.revocations.as_mut() {
            resolve_relative(path, &mut [file]);
        }
        Ok(config)
    }

    fn apply_env(&mut self, get: impl Fn(&str) -> Option<String>) {
        if let Some(v) = get("DRYDOCK_EXECUTOR_LISTEN") {
            self.listen = v;
        }
        if let Some(v) = get("DRYDOCK_DOCKER_ENDPOINT") {
            self.docker.endpoint = v;
        }
        if let Some(v) = get("DRYDOCK_AUDIT_PATH") {
            self.audit.path = PathBuf::from(v);
        }
        if let Some(v) = get("DRYDOCK_REVOCATIONS") {
            self.automation.revocations = Some(PathBuf::from(v));
        }
    }

    /// Every check of the file, section by section (`CHECKS`); the first
    /// failure names its key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        checks::CHECKS.iter().try_for_each(|check| check(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_files(dir: &Path) {
        for f in ["server.crt", "ca.crt"] {
            std::fs::write(dir.join(f), "x").unwrap();
        }
        std::fs::write(dir.join("server.key"), "x").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(
                dir.join("server.key"),
                std::fs::Permissions::from_mode(0o600),
            )
            .unwrap();
        }
    }

    const BASE: &str = "tls: {cert: server.crt, key: server.key, client_ca: ca.crt, allowed_clients: [drydock-agent]}\naudit: {path: audit.db}\ntargets: {allow_names: [\"shop-*\"]}\n";

    fn load(extra: &str) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path());
        let path = dir.path().join("executor.yaml");
        std::fs::write(&path, format!("{BASE}{extra}")).unwrap();
        Config::load(&path)
    }

    #[test]
    fn audit_rotation_sizes_are_read_and_checked() {
        let with = |audit: &str| {
            let dir = tempfile::tempdir().unwrap();
            write_files(dir.path());
            let path = dir.path().join("executor.yaml");
            std::fs::write(&path, BASE.replace("audit: {path: audit.db}", audit)).unwrap();
            Config::load(&path)
        };
        let c = with("audit: {path: audit.db}").unwrap();
        assert_eq!(c.audit.max_size, DEFAULT_AUDIT_MAX_SIZE);
        assert_eq!(c.audit.keep_segments, DEFAULT_KEEP_SEGMENTS);
        let c = with("audit: {path: audit.db, max_size: 256KiB, keep_segments: 3}").unwrap();
        assert_eq!((c.audit.max_size, c.audit.keep_segments), (256 << 10, 3));
        for (bad, says) in [
            ("audit: {path: a.db, max_size: 1KiB}", "audit.max_size"),
            ("audit: {path: a.db, max_size: lots}", "64MiB"),
            (
                "audit: {path: a.db, keep_segments: 0}",
                "audit.keep_segments",
            ),
        ] {
            let err = with(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn minimal_config_gets_defaults() {
        let c = load("").unwrap();
        assert_eq!(c.listen, DEFAULT_LISTEN);
        assert!(c.actions.restart.enabled);
        assert!(!c.actions.stop.enabled, "stop is T2 and off by default");
        assert_eq!(c.timeouts.write, DEFAULT_WRITE_TIMEOUT);
        assert!(c.audit.path.is_absolute());
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("bogus: 1\n", "bogus"),
            ("timeouts: {read: soon}\n", "soon"),
            ("listen: nowhere\n", "`listen`"),
            (
                "approvers: [{id: a, public_key: 'ed25519:xx'}]\n",
                "approvers[].public_key",
            ),
            ("approvals: {required: {reboot: 1}}\n", "approvals.required"),
            ("approvals: {required: {t2: 2}}\n", "approvals.required"),
            (
                "approvals: {required: {restart: 0}}\n",
                "approvals.required",
            ),
            ("limits: {logs_max_lines: 0}\n", "limits.logs_max_lines"),
            ("docker: {endpoint: 'ftp://x'}\n", "docker.endpoint"),
            ("http_checks: {web: 'https://x/'}\n", "http_checks"),
            ("actions: {exec: {enabled: true}}\n", "exec"),
            (
                "timeouts: {max_approval_ttl: 25h}\n",
                "timeouts.max_approval_ttl",
            ),
            (
                "actions: {update: {grants: true}}\n",
                "actions.update.enabled is false",
            ),
            (
                "actions: {update: {enabled: true, grants: true}}\n",
                "automation.enabled is false",
            ),
            ("actions: {update: {enabled: true, when: always}}\n", "when"),
        ];
        for (extra, needle) in cases {
            let err = load(extra).unwrap_err().to_string();
            assert!(err.contains(needle), "{extra:?}: {err}");
        }
    }

    #[test]
    fn targets_have_no_default() {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path());
        let path = dir.path().join("executor.yaml");
        let without = BASE.replace("targets: {allow_names: [\"shop-*\"]}\n", "");
        for (yaml, needle) in [
            (without.clone(), "is required"),
            (format!("{without}targets: {{}}\n"), "no selector set"),
        ] {
            std::fs::write(&path, yaml).unwrap();
            let err = Config::load(&path).unwrap_err().to_string();
            assert!(err.contains("`targets`") && err.contains(needle), "{err}");
        }
    }

    #[test]
    fn group_readable_key_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        write_files(dir.path());
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(
            dir.path().join("server.key"),
            std::fs::Permissions::from_mode(0o640),
        )
        .unwrap();
        let path = dir.path().join("executor.yaml");
        std::fs::write(&path, BASE).unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("tls.key") && err.contains("chmod 600"),
            "{err}"
        );
    }
}
