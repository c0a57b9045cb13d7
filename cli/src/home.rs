//! `$DRYDOCK_HOME`: the PKI, the operator's approver key, the agent token,
//! one config file per daemon, their state, logs and pid files.
//!
//! The approver's private key lives here for the CLI alone: the agent's
//! config never names it and the agent process is never given its path.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use crate::pki;

pub const DEFAULT_EXECUTOR_PORT: u16 = 7443;
pub const DEFAULT_AGENT_PORT: u16 = 7420;
pub const DEFAULT_APPROVER_ID: &str = "local-operator";

/// The folder and the names of everything in it.
#[derive(Debug, Clone)]
pub struct Home {
    pub root: PathBuf,
}

impl Home {
    /// `$DRYDOCK_HOME`, else `$XDG_DATA_HOME/drydock`, else
    /// `~/.local/share/drydock`.
    pub fn locate() -> anyhow::Result<Home> {
        if let Some(h) = std::env::var_os("DRYDOCK_HOME").filter(|v| !v.is_empty()) {
            return Ok(Home {
                root: PathBuf::from(h),
            });
        }
        if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
            return Ok(Home {
                root: PathBuf::from(x).join("drydock"),
            });
        }
        let home = std::env::var_os("HOME").filter(|v| !v.is_empty()).context("neither DRYDOCK_HOME nor HOME is set; set DRYDOCK_HOME to a folder for drydock's keys and state")?;
        Ok(Home {
            root: PathBuf::from(home).join(".local/share/drydock"),
        })
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
    pub fn executor_config(&self) -> PathBuf {
        self.path("executor.yaml")
    }
    pub fn agent_config(&self) -> PathBuf {
        self.path("agent.yaml")
    }
    pub fn cli_config(&self) -> PathBuf {
        self.path("cli.yaml")
    }
    pub fn log(&self, daemon: &str) -> PathBuf {
        self.path(&format!("logs/{daemon}.log"))
    }
    pub fn pid(&self, daemon: &str) -> PathBuf {
        self.path(&format!("run/{daemon}.pid"))
    }
    pub fn is_initialized(&self) -> bool {
        self.cli_config().is_file()
            && self.executor_config().is_file()
            && self.agent_config().is_file()
    }

    pub fn load_cli_config(&self) -> anyhow::Result<CliConfig> {
        let path = self.cli_config();
        let text = std::fs::read_to_string(&path).with_context(|| {
            format!("cannot read {} — run `drydock init` first", path.display())
        })?;
        let mut c: CliConfig = serde_yaml_ng::from_str(&text)
            .with_context(|| format!("{} is invalid", path.display()))?;
        if let Ok(url) = std::env::var("DRYDOCK_AGENT_URL") {
            c.agent_url = url;
        }
        for p in [&mut c.token_file]
            .into_iter()
            .chain(c.approver.key.as_mut())
            .chain(c.agent_ca.as_mut())
        {
            if p.is_relative() {
                *p = self.root.join(&*p);
            }
        }
        if let Some(socket) = c.agent_url.strip_prefix("unix:") {
            let socket = Path::new(socket);
            if socket.is_relative() {
                c.agent_url = format!("unix:{}", self.root.join(socket).display());
            }
        }
        c.agent_approval_ttl = std::fs::read_to_string(self.agent_config())
            .ok()
            .and_then(|t| serde_yaml_ng::from_str::<serde_yaml_ng::Value>(&t).ok())
            .map(|v| {
                v.get("approval_ttl")
                    .and_then(|d| d.as_str())
                    .and_then(|d| humantime::parse_duration(d).ok())
                    .map(|d| d.as_secs())
                    .unwrap_or(DEFAULT_AGENT_APPROVAL_TTL_SECS)
            });
        Ok(c)
    }
}

/// The agent's default `approval_ttl` (agent/src/config.rs), for a local
/// `agent.yaml` that does not set it.
const DEFAULT_AGENT_APPROVAL_TTL_SECS: u64 = 600;

/// What the CLI needs: where the agent is, its token, the operator's key.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CliConfig {
    pub agent_url: String,
    pub token_file: PathBuf,
    pub approver: ApproverKey,
    pub executor_port: u16,
    /// The CA the agent's HTTPS certificate must chain to (an `https://`
    /// `agent_url` needs it): drydock's own, so the CLI pins it.
    #[serde(default)]
    pub agent_ca: Option<PathBuf>,
    /// Where the daemons run (`drydock init --layout`): `doctor` checks a
    /// local executor only in the local layout.
    #[serde(default)]
    pub layout: Layout,
    /// Local checkouts of services' sources, by compose service (`api`,
    /// or `project/service`) or container name: `drydock show` lists the
    /// commits between the images of a change from there.
    #[serde(default)]
    pub sources: std::collections::BTreeMap<String, PathBuf>,
    /// The local agent's `approval_ttl` in seconds, read from `agent.yaml`
    /// in the same home when there is one; not a key of `cli.yaml`.
    #[serde(skip)]
    pub agent_approval_ttl: Option<u64>,
}

/// How this operator signs: with drydock's own key in a file (`key`), or
/// through the ssh-agent that holds `ssh` (an OpenSSH public key line),
/// whose secret never touches this disk.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproverKey {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh: Option<String>,
}

/// A key this CLI signs approvals with.
pub enum Signer {
    File(ed25519_dalek::SigningKey),
    Ssh(drydock_proto::approval::ssh::SshPublicKey),
}

impl Signer {
    /// The public key as executor.yaml registers it.
    pub fn public(&self) -> String {
        match self {
            Signer::File(k) => drydock_proto::approval::format_public_key(&k.verifying_key()),
            Signer::Ssh(k) => k.to_line(),
        }
    }

    /// A signature over exactly `claims`: Ed25519 by the file key, or an
    /// SSHSIG the ssh-agent makes (a security key asks for a touch).
    pub fn sign(&self, claims: &[u8]) -> anyhow::Result<Vec<u8>> {
        use drydock_proto::approval::ssh;
        match self {
            Signer::File(k) => Ok(drydock_proto::approval::sign(claims, k)),
            Signer::Ssh(k) => {
                let signature = crate::ssh_agent::sign(k, &ssh::signed_data(claims))?;
                Ok(ssh::wrap(k, &signature))
            }
        }
    }
}

impl CliConfig {
    pub fn token(&self) -> anyhow::Result<String> {
        Ok(std::fs::read_to_string(&self.token_file)
            .with_context(|| format!("cannot read the agent token {}", self.token_file.display()))?
            .trim()
            .to_string())
    }

    /// The longest approval this CLI signs: the agent's `approval_ttl` when
    /// its config is in this home (the local layout), else the most any
    /// agent may be configured with.
    pub fn max_signed_lifetime(&self) -> i64 {
        let cap = crate::claims::MAX_SIGNED_LIFETIME_SECS;
        self.agent_approval_ttl
            .map(|t| i64::try_from(t).unwrap_or(cap).min(cap))
            .unwrap_or(cap)
    }

    /// The approver's file key (what grants are signed with).
    pub fn signing_key(&self) -> anyhow::Result<ed25519_dalek::SigningKey> {
        let Some(path) = &self.approver.key else {
            anyhow::bail!(
                "approver `{}` signs through an ssh-agent (approver.ssh in cli.yaml), and a grant is signed with a file key: sign grants as an approver with `key:` (drydock init --approver file)",
                self.approver.id
            );
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the approver key {}", path.display()))?;
        drydock_proto::approval::parse_secret_key(&text)
            .with_context(|| format!("{} is not an approver key", path.display()))
    }

    /// What this CLI signs approvals with.
    pub fn signer(&self) -> anyhow::Result<Signer> {
        match (&self.approver.ssh, &self.approver.key) {
            (Some(line), None) => drydock_proto::approval::ssh::SshPublicKey::parse(line)
                .map(Signer::Ssh)
                .map_err(|e| anyhow::anyhow!("approver.ssh in cli.yaml is not a key drydock signs with: {e}")),
            (None, Some(_)) => self.signing_key().map(Signer::File),
            _ => anyhow::bail!(
                "cli.yaml's approver names {} of `key` (a file) and `ssh` (an ssh-agent's key): name exactly one",
                if self.approver.ssh.is_some() { "both" } else { "neither" }
            ),
        }
    }
}

#[derive(Debug, Clone)]
pub struct InitOptions {
    pub force: bool,
    pub executor_port: u16,
    pub agent_port: u16,
    pub executor_names: Vec<String>,
    pub approver_id: String,
    pub docker_endpoint: String,
    /// Name globs for `targets.allow_names`; empty means every container
    /// on the host (drydock's own are always excepted by the executor).
    pub targets: Vec<String>,
    /// The agent listens on plain TCP (`agent_port`) instead of a unix
    /// socket in `run/`: for layouts where the CLI reaches it over TCP.
    pub agent_tcp: bool,
    /// The agent serves HTTPS on `agent_port` with a certificate for this
    /// name from drydock's CA, which the CLI pins: for remote use.
    pub agent_tls: Option<String>,
    /// The agent watches container events (`watch.enabled`).
    pub watch: bool,
    /// Where the daemons will run.
    pub layout: Layout,
    /// An OpenSSH public key line the approver signs with through an
    /// ssh-agent; `None`: a new file key (`approver.key`).
    pub approver_ssh: Option<String>,
}

/// Where the daemons will run, as `drydock init --layout` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// Both daemons on this machine, started by `drydock up`.
    #[default]
    Local,
    /// Two containers from deploy/compose.yaml.
    Compose,
    /// Two systemd services from deploy/systemd.
    Systemd,
    /// Two Swarm services from deploy/stack.yaml (`docker stack deploy`).
    Swarm,
}

impl Layout {
    /// The command that starts the daemons in this layout.
    pub fn start_command(self) -> &'static str {
        match self {
            Layout::Local => "`drydock up`",
            Layout::Compose => "`docker-compose -f deploy/compose.yaml up -d`",
            Layout::Swarm => "`deploy/swarm-deploy.sh \"$H\" up` as root on the manager",
            Layout::Systemd => "`systemctl start drydock-executor drydock-agent`",
        }
    }
}

/// How another host's executor runs there, as `drydock host add --layout`
/// names it (a Swarm cluster's executor is its stack's, never another
/// host's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum HostLayout {
    /// `drydock-executor serve --config executor.yaml`, the files as written.
    #[default]
    Local,
    /// A container from deploy/host.yaml (deploy/stage-host.sh stages it).
    Compose,
    /// The systemd unit deploy/systemd/drydock-executor.service, with its
    /// paths.
    Systemd,
}

/// Environment names whose values production layouts still show: they
/// explain behaviour and are not credentials.
pub const PRODUCTION_ENV_ALLOW: &[&str] = &[
    "PORT",
    "NODE_ENV",
    "RAILS_ENV",
    "APP_ENV",
    "LOG_LEVEL",
    "TZ",
];

/// The compose (and stack) service the agent dials (deploy/compose/agent.yaml,
/// deploy/swarm/agent.yaml).
pub const COMPOSE_EXECUTOR_NAME: &str = "executor";

/// The agent's socket on the Swarm node that runs it (deploy/stack.yaml
/// binds this folder): the CLI on that node reaches it there.
pub const SWARM_AGENT_SOCKET: &str = "/run/drydock-agent/agent.sock";

impl Default for InitOptions {
    fn default() -> Self {
        InitOptions {
            force: false,
            executor_port: DEFAULT_EXECUTOR_PORT,
            agent_port: DEFAULT_AGENT_PORT,
            executor_names: vec![],
            approver_id: DEFAULT_APPROVER_ID.into(),
            docker_endpoint: default_docker_endpoint(),
            targets: vec![],
            agent_tcp: false,
            agent_tls: None,
            watch: true,
            layout: Layout::Local,
            approver_ssh: None,
        }
    }
}

impl InitOptions {
    /// The name globs written to `targets.allow_names`.
    pub fn allow_names(&self) -> Vec<String> {
        if self.targets.is_empty() {
            vec!["*".into()]
        } else {
            self.targets.clone()
        }
    }

    /// What a layout needs on top of the flags given: compose's agent dials
    /// the service `executor`, and in both production layouts the CLI
    /// reaches the agent over TCP (unless `--agent-tls` was asked for).
    pub fn for_layout(mut self) -> InitOptions {
        if matches!(self.layout, Layout::Compose | Layout::Swarm)
            && !self
                .executor_names
                .iter()
                .any(|n| n == COMPOSE_EXECUTOR_NAME)
        {
            self.executor_names.push(COMPOSE_EXECUTOR_NAME.into());
        }
        if matches!(self.layout, Layout::Compose | Layout::Systemd) && self.agent_tls.is_none() {
            self.agent_tcp = true;
        }
        self
    }

    /// What `drydock init` prints as the next step, for its layout.
    pub fn next_step(&self, home: &Path) -> String {
        let home = home.display();
        match self.layout {
            Layout::Compose => format!(
                "next (docs/deploy.md, \"Containers with compose\"), from the repository's root:\n  \
                 deploy/build-images.sh\n  \
                 deploy/stage-compose.sh \"{home}\" /etc/drydock-compose   # as root (with sudo otherwise); writes deploy/.env\n  \
                 docker-compose -f deploy/compose.yaml run --rm executor audit init\n  \
                 docker-compose -f deploy/compose.yaml up -d\n\
                 then `drydock doctor` and `drydock ask \"<what is wrong>\"`"
            ),
            Layout::Swarm => format!(
                "next (docs/deploy.md, \"Services on Docker Swarm\"), on the manager node that runs drydock, from the repository's root:\n  \
                 deploy/build-images.sh\n  \
                 deploy/swarm-deploy.sh \"{home}\" audit-init   # as root; once, for a new installation\n  \
                 deploy/swarm-deploy.sh \"{home}\" up\n\
                 then `drydock doctor` and `drydock ask \"<what is wrong>\"`"
            ),
            Layout::Systemd => format!(
                "next (docs/deploy.md, \"systemd\"): install the binaries, the certificates and keys from {home}/pki, \
                 deploy/systemd/*.yaml into /etc/drydock (paste {home}/approver.pub into executor.yaml) and the units; \
                 then `drydock doctor` and `drydock ask \"<what is wrong>\"`"
            ),
            Layout::Local if self.agent_tcp || self.agent_tls.is_some() => {
                "next: deploy the daemons as docs/deploy.md describes (compose: deploy/stage-compose.sh; systemd: the units in deploy/systemd), then `drydock doctor` and `drydock ask \"<what is wrong>\"`".into()
            }
            Layout::Local => "next: `drydock up`, then `drydock ask \"<what is wrong>\"`".into(),
        }
    }

    /// executor.yaml's `redact` section: production layouts show names and
    /// withhold values (names are evidence; values rarely are).
    fn redact_section(&self) -> String {
        if self.layout == Layout::Local {
            "# Values of secret-looking environment names are withheld; `env: all`\n\
             # withholds every value but those of `env_allow` (docs/configuration.md).\n\
             redact:\n  env: secret-looking\n"
                .into()
        } else {
            format!(
                "# Every environment value is withheld from the agent but those named here\n\
                 # (names are evidence; values rarely are).\n\
                 redact:\n  env: all\n  env_allow: [{}]\n",
                PRODUCTION_ENV_ALLOW.join(", ")
            )
        }
    }

    /// What `drydock init` tells the operator about the scope it wrote.
    pub fn scope_note(&self) -> String {
        let services = if self.layout == Layout::Swarm {
            " The same globs select Swarm services (targets.services.allow_names)."
        } else {
            ""
        };
        if self.targets.is_empty() {
            format!(
                "targets: every container on this host (allow_names: [\"*\"]), except drydock's own.{services} \
                 Narrow it with `drydock init --force --target 'shop-*'` or by editing targets in executor.yaml."
            )
        } else {
            format!(
                "targets: containers named {} (allow_names), except drydock's own.{services}",
                self.targets.join(", ")
            )
        }
    }
}

/// A name glob safe to write into YAML and meaningful to the executor.
fn check_target_glob(glob: &str) -> anyhow::Result<()> {
    let ok = !glob.is_empty()
        && glob.len() <= 128
        && glob
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-*?[]!".contains(&b));
    if !ok {
        bail!("--target `{glob}` is not a container-name glob: use 1 to 128 of [A-Za-z0-9_.-] and the wildcards * ? [ ] (for example 'shop-*')");
    }
    Ok(())
}

/// `DOCKER_HOST` when it names a unix socket or tcp endpoint, else the
/// standard socket.
pub fn default_docker_endpoint() -> String {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if h.starts_with("unix://") || h.starts_with("tcp://") => h,
        _ => "unix:///var/run/docker.sock".into(),
    }
}

pub(crate) fn write_file(path: &Path, content: &str, private: bool) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    // A file being replaced (`init --force`) is removed first, so a private
    // file is always created anew with mode 0600 and is never readable by
    // others, not even for a moment, whatever mode the old file had.
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("cannot replace {}", path.display())),
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(if private { 0o600 } else { 0o644 });
    }
    let mut f = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(content.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

fn random_token() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// Write a fresh home. Refuses to overwrite an existing one without `force`.
pub fn init(home: &Home, opts: &InitOptions) -> anyhow::Result<Vec<PathBuf>> {
    if home.is_initialized() && !opts.force {
        bail!("{} is already initialized; use `drydock init --force` to replace its keys and configs (running daemons must be restarted)", home.root.display());
    }
    for glob in &opts.targets {
        check_target_glob(glob)?;
    }
    if let Some(name) = &opts.agent_tls {
        let ok = !name.is_empty()
            && name.len() <= 253
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b));
        if !ok {
            bail!("--agent-tls `{name}` is not a host name or IP address (letters, digits, '-' and '.')");
        }
    }
    let bundle = pki::generate(&opts.executor_names)?;
    let agent_api = match &opts.agent_tls {
        Some(name) => Some(bundle.ca.issue(
            pki::AGENT_API_IDENTITY,
            &[name.clone(), "localhost".into(), "127.0.0.1".into()],
            pki::Usage::Server,
            0,
            825,
        )?),
        None => None,
    };
    let approver = drydock_proto::approval::generate_signing_key();
    // Signs the executor's audit checkpoints. Its public half is for
    // whoever verifies the chain, outside the store.
    let audit_key = drydock_proto::approval::generate_signing_key();
    let public = match &opts.approver_ssh {
        Some(line) => drydock_proto::approval::ssh::SshPublicKey::parse(line)
            .map_err(|e| anyhow::anyhow!("the approver's ssh key: {e}"))?
            .to_line(),
        None => drydock_proto::approval::format_public_key(&approver.verifying_key()),
    };
    let files: Vec<(&str, String, bool)> = vec![
        ("pki/ca.crt", bundle.ca.cert_pem(), false),
        ("pki/ca.key", bundle.ca.key_pem(), true),
        ("pki/executor.crt", bundle.executor.cert_pem.clone(), false),
        ("pki/executor.key", bundle.executor.key_pem.clone(), true),
        ("pki/agent.crt", bundle.agent.cert_pem.clone(), false),
        ("pki/agent.key", bundle.agent.key_pem.clone(), true),
        (
            "pki/healthcheck.crt",
            bundle.healthcheck.cert_pem.clone(),
            false,
        ),
        (
            "pki/healthcheck.key",
            bundle.healthcheck.key_pem.clone(),
            true,
        ),
        ("approver.pub", format!("{public}\n"), false),
        (
            "pki/audit.key",
            drydock_proto::approval::format_secret_key(&audit_key),
            true,
        ),
        (
            "pki/audit.pub",
            format!(
                "{}\n",
                drydock_proto::approval::format_public_key(&audit_key.verifying_key())
            ),
            false,
        ),
        ("agent.token", format!("{}\n", random_token()), true),
        ("executor.yaml", executor_yaml(opts, &public), false),
        ("agent.yaml", agent_yaml(opts), false),
        ("cli.yaml", cli_yaml(opts), false),
    ];
    let mut files = files;
    // An approver in an ssh-agent has no secret here.
    if opts.approver_ssh.is_none() {
        files.push((
            "approver.key",
            drydock_proto::approval::format_secret_key(&approver),
            true,
        ));
    }
    if let Some(api) = &agent_api {
        files.push(("pki/agent-api.crt", api.cert_pem.clone(), false));
        files.push(("pki/agent-api.key", api.key_pem.clone(), true));
    }
    let mut written = Vec::new();
    for (rel, content, private) in files {
        let path = home.path(rel);
        write_file(&path, &content, private)?;
        written.push(path);
    }
    // Tells the executor to create its audit store at the first start;
    // without it a missing store is refused (a new store forgets used
    // nonces). The path is executor.yaml's `audit.path` plus `.init`.
    // Only for a home without a store: a marker left next to an existing
    // store would let a later loss of that store pass unnoticed.
    // The executor's grant revocation list (empty: nothing revoked yet).
    let revocations = home.path("state/revoked-grants");
    if !revocations.exists() {
        write_file(
            &revocations,
            "# Revoked automation grants, one id per line (drydock grant revoke ID).\n",
            true,
        )?;
        written.push(revocations);
    }
    let marker = home.path("state/audit.db.init");
    let store = home.path("state/audit.db");
    if std::fs::metadata(&store).map_or(true, |m| m.len() == 0) {
        write_file(&marker, "created by drydock init\n", true)?;
        written.push(marker);
    }
    for dir in ["state", "logs", "run"] {
        let path = home.path(dir);
        std::fs::create_dir_all(&path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            // The stores hold pending signatures and the audit log.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(written)
}

fn executor_yaml(opts: &InitOptions, approver_public: &str) -> String {
    format!(
        "# drydock-executor configuration (written by `drydock init`).\n\
         # Relative paths are relative to this file. Every key is documented in docs/configuration.md.\n\
         listen: 127.0.0.1:{port}\n\
         tls:\n  cert: pki/executor.crt\n  key: pki/executor.key\n  client_ca: pki/ca.crt\n  allowed_clients: [{agent}]\n  health_clients: [{health}]\n\
         docker:\n  endpoint: {docker}\n\
         approvers:\n  - id: {approver}\n    public_key: \"{approver_public}\"\n\
         targets:\n  allow_names: [{targets}]\n{services}\
         # T2, off until you turn them on: stop, rollback (re-create a container\n\
         # with the image it ran before a change), service_rollback (a Swarm service\n\
         # back to its previous spec), update (a newer image of the container's tag\n\
         # from a registry listed under `registries`) and build (an image from a git\n\
         # checkout listed under `build.contexts`): always your approval, never a grant.\n\
         # Swarm services are seen only with targets.services (docs/configuration.md).\n\
         actions:\n  restart: {{enabled: true}}\n  start: {{enabled: true}}\n  stop: {{enabled: false}}\n  rollback: {{enabled: false}}\n  force_update: {{enabled: true}}\n  service_rollback: {{enabled: false}}\n  update: {{enabled: false}}\n  build: {{enabled: false}}\n\
         limits:\n  logs_max_lines: 500\n  logs_max_bytes: 262144\n\
         timeouts:\n  read: 5s\n  logs: 10s\n  write: 30s\n\
         audit:\n  path: state/audit.db\n  signing_key: pki/audit.key\n\
         # Automation grants (`drydock grant create`) authorise nothing until this is on.\n\
         automation:\n  enabled: false\n  max_grant_ttl: 7d\n  revocations: state/revoked-grants\n\
         {redact}",
        redact = opts.redact_section(),
        services = if opts.layout == Layout::Swarm {
            // The same globs name the services; drydock's own stack is
            // labelled and never shown.
            format!("  services:\n    allow_names: [{}]\n", quoted(&opts.allow_names()))
        } else {
            String::new()
        },
        port = opts.executor_port,
        agent = pki::AGENT_IDENTITY,
        health = pki::HEALTHCHECK_IDENTITY,
        docker = opts.docker_endpoint,
        approver = opts.approver_id,
        targets = quoted(&opts.allow_names()),
    )
}

/// `"a", "b"`: YAML flow-list items.
fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|g| format!("\"{g}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

fn agent_yaml(opts: &InitOptions) -> String {
    let listen = if opts.agent_tls.is_some() {
        format!(
            "# HTTPS with a certificate from drydock's CA (`drydock init --agent-tls`);\n\
             # the CLI pins that CA.\n\
             listen: 0.0.0.0:{}\napi:\n  tls:\n    cert: pki/agent-api.crt\n    key: pki/agent-api.key\n",
            opts.agent_port
        )
    } else if opts.agent_tcp {
        format!(
            "# Plain TCP, asked for with `drydock init --agent-tcp` (another layout\n\
             # reaches the agent over the network).\n\
             listen: 127.0.0.1:{}\napi:\n  allow_plain_tcp: true\n",
            opts.agent_port
        )
    } else {
        "# A unix socket in run/ (0700): no other local user can reach it.\n\
         listen: unix:run/agent.sock\n"
            .to_string()
    };
    format!(
        "# drydock-agent configuration (written by `drydock init`).\n\
         # It names no approver private key on purpose: only the CLI signs.\n\
         {listen}\
         token_file: agent.token\n\
         executor:\n  endpoint: https://127.0.0.1:{executor_port}\n  server_name: {server}\n  ca: pki/ca.crt\n  cert: pki/agent.crt\n  key: pki/agent.key\n\
         store:\n  path: state/agent.db\n\
         approval_ttl: 10m\n\
         max_iterations: 3\n\
         verify:\n  max_wait: 120s\n  poll_interval: 250ms\n\
         # Watch the engine's events: a container that turns unhealthy, crashes or is\n\
         # OOM-killed gets a request by itself. `notify` diagnoses and asks a person;\n\
         # `repair` also fixes what an automation grant covers.\n\
         watch:\n  enabled: {watch}\n  mode: notify\n",
        watch = opts.watch,
        executor_port = opts.executor_port,
        server = pki::EXECUTOR_IDENTITY,
    )
}

fn cli_yaml(opts: &InitOptions) -> String {
    format!(
        "# drydock CLI configuration (written by `drydock init`).\n\
         agent_url: {agent_url}\n\
         token_file: agent.token\n\
         executor_port: {executor_port}\n\
         approver:\n  id: {approver}\n  {approver_key}\n\
         layout: {layout}\n",
        layout = match opts.layout {
            Layout::Local => "local",
            Layout::Compose => "compose",
            Layout::Systemd => "systemd",
            Layout::Swarm => "swarm",
        },
        agent_url = match (&opts.agent_tls, opts.agent_tcp) {
            (None, false) if opts.layout == Layout::Swarm => format!("unix:{SWARM_AGENT_SOCKET}"),
            (Some(name), _) => format!("https://{name}:{}\nagent_ca: pki/ca.crt", opts.agent_port),
            (None, true) => format!("http://127.0.0.1:{}", opts.agent_port),
            (None, false) => "unix:run/agent.sock".to_string(),
        },
        executor_port = opts.executor_port,
        approver = opts.approver_id,
        approver_key = match &opts.approver_ssh {
            Some(line) => format!("ssh: \"{line}\""),
            None => "key: approver.key".into(),
        },
    )
}

#[cfg(test)]
mod tests;
