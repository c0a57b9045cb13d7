//! `drydock doctor`: one verdict line per check of the local installation,
//! and a non-zero exit when any check fails. Each check says what it found
//! and, when it fails, what to do.
//!
//! The checks look where an operator would: the files in `$DRYDOCK_HOME`
//! (modes, certificates, configs through the daemons' own `check-config`),
//! the running daemons, and — through the agent — what the running executor
//! actually trusts, which is the only thing that decides whether a
//! signature will be accepted.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use drydock_vocab::{ExecutorReach, HostView, PolicyView};
use serde_json::Value;

use crate::client::AgentClient;
use crate::daemons;
use crate::home::{Home, Layout};
use crate::term::{paint, Style};
use crate::text::{safe, unix_now};

/// Certificates closer than this to their end are reported as a warning.
const EXPIRY_WARNING_DAYS: i64 = 30;
/// Approvals carry absolute times: more skew than this between the CLI and
/// the agent makes them expire early or late.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
}

fn check(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Check {
    Check {
        name,
        verdict,
        detail: detail.into(),
    }
}

impl Check {
    pub fn line(&self) -> String {
        let tag = match self.verdict {
            Verdict::Ok => paint("ok  ", Style::Good),
            Verdict::Warn => paint("warn", Style::Warn),
            Verdict::Fail => paint("FAIL", Style::Bad),
        };
        format!("{tag}  {:<12} {}", self.name, safe(&self.detail))
    }
}

/// Run every check, print a line for each, and return the exit code.
pub async fn run(home: &Home) -> u8 {
    let checks = checks(home).await;
    for c in &checks {
        println!("{}", c.line());
    }
    let failed = checks.iter().filter(|c| c.verdict == Verdict::Fail).count();
    if failed > 0 {
        println!("{failed} check(s) failed");
        1
    } else {
        0
    }
}

pub async fn checks(home: &Home) -> Vec<Check> {
    let mut out = Vec::new();
    if !home.is_initialized() {
        out.push(check(
            "home",
            Verdict::Fail,
            format!(
                "{} is not initialized: run `drydock init`",
                home.root.display()
            ),
        ));
        return out;
    }
    out.push(check("home", Verdict::Ok, home.root.display().to_string()));
    out.extend(key_modes(home));
    out.extend(certificates(home));
    let cfg = match home.load_cli_config() {
        Ok(c) => c,
        Err(e) => {
            out.push(check("cli config", Verdict::Fail, format!("{e:#}")));
            return out;
        }
    };
    let local = cfg.layout == Layout::Local;
    if local {
        out.extend(configs(home));
    }
    out.push(docker());
    if local {
        out.push(executor_running(home));
    } else {
        // The daemons run elsewhere, with their own configs: the executor
        // is checked through the agent (the `mtls` and `approvers` lines).
        out.push(check(
            "layout",
            Verdict::Ok,
            format!(
                "{:?} (cli.yaml): the daemons run apart, so the key modes and certificates above are this home's copies (re-stage after `init --force`); the deployed executor is checked through the agent",
                cfg.layout
            )
            .to_lowercase(),
        ));
    }
    let agent = match AgentClient::from_config(&cfg) {
        Ok(a) => a,
        Err(e) => {
            out.push(check("agent", Verdict::Fail, format!("{e:#}")));
            return out;
        }
    };
    let unreachable = match agent.health().await {
        crate::client::Health::Serving => None,
        crate::client::Health::Refused(why) => Some(why),
        crate::client::Health::Unreachable(why) => Some(format!(
            "no answer at {} ({why}): start it with {} ({})",
            cfg.agent_url,
            cfg.layout.start_command(),
            match cfg.layout {
                Layout::Local => format!("log: {}", home.log("drydock-agent").display()),
                Layout::Compose => {
                    "logs: `docker-compose -f deploy/compose.yaml logs agent`".into()
                }
                Layout::Swarm => "logs: `docker service logs drydock_agent`".into(),
                Layout::Systemd => "logs: `journalctl -u drydock-agent`".into(),
            }
        )),
    };
    if let Some(why) = unreachable {
        out.push(check("agent", Verdict::Fail, why));
        return out;
    }
    out.push(check(
        "agent",
        Verdict::Ok,
        format!("healthy at {}", cfg.agent_url),
    ));
    out.push(clock(&agent).await);
    let status: ExecutorReach = match agent.get_as("/api/v1/executor").await {
        Ok(s) => s,
        Err(e) => {
            out.push(check(
                "mtls",
                Verdict::Fail,
                format!("the agent cannot use the executor: {e:#}"),
            ));
            // The other hosts, each asked now.
            if let Ok(list) = agent.get_as::<HostList>("/api/v1/hosts").await {
                if list.hosts.len() > 1 {
                    for h in &list.hosts {
                        out.extend(host_now(&agent, &cfg, h).await);
                    }
                }
            }
            return out;
        }
    };
    out.push(check(
        "mtls",
        Verdict::Ok,
        format!(
            "agent → executor over mutual TLS in {} ms",
            status.latency_ms
        ),
    ));
    out.push(approver(&cfg, &status.policy));
    out.push(scope(&status.policy));
    out.extend(hosts(&agent, &cfg, &status).await);
    out
}

/// With several hosts: each host's executor, asked now through the agent,
/// in one line, and whether each one that answers trusts this key.
async fn hosts(
    agent: &AgentClient,
    cfg: &crate::home::CliConfig,
    first: &ExecutorReach,
) -> Vec<Check> {
    let mut out = Vec::new();
    for h in first.hosts.iter() {
        if first.host.as_deref() == Some(h.name.as_str()) {
            // Asked a moment ago: the `mtls` and `approver` lines above.
            out.push(check(
                "host",
                Verdict::Ok,
                format!(
                    "{} at {}: executor answers in {} ms",
                    safe(&h.name),
                    safe(&h.endpoint),
                    first.latency_ms
                ),
            ));
            continue;
        }
        out.extend(host_now(agent, cfg, h).await);
    }
    out
}

/// One host's executor, asked now through the agent: a `host` line (and
/// its `approver` line when it answers). A name that cannot go into a
/// query string is shown as the agent last probed it, and says when.
async fn host_now(agent: &AgentClient, cfg: &crate::home::CliConfig, h: &HostView) -> Vec<Check> {
    let name = safe(&h.name);
    let at = safe(&h.endpoint);
    if !drydock_proto::approval::is_host_name(&h.name) {
        return vec![host_line(h)];
    }
    match agent
        .get_as::<ExecutorReach>(&format!("/api/v1/executor?host={}", h.name))
        .await
    {
        Ok(reach) => {
            let mut c = approver(cfg, &reach.policy);
            c.detail = format!("on {name}: {}", c.detail);
            vec![
                check(
                    "host",
                    Verdict::Ok,
                    format!(
                        "{name} at {at}: executor answers in {} ms",
                        reach.latency_ms
                    ),
                ),
                c,
            ]
        }
        Err(e) => {
            let since = h
                .down_since
                .as_deref()
                .map(|s| format!(" (down since {})", safe(s)))
                .unwrap_or_default();
            vec![check(
                "host",
                Verdict::Fail,
                format!("{name} at {at}: does not answer now{since}: {e:#}"),
            )]
        }
    }
}

/// `GET /api/v1/hosts`.
#[derive(serde::Deserialize)]
struct HostList {
    hosts: Vec<HostView>,
}

/// One host as the agent last probed it, saying when.
fn host_line(h: &HostView) -> Check {
    let name = safe(&h.name);
    let at = safe(&h.endpoint);
    let when = h
        .checked_at
        .as_deref()
        .map(|t| format!(" (the agent's probe at {})", safe(t)))
        .unwrap_or_default();
    if h.reachable {
        return check(
            "host",
            Verdict::Ok,
            format!(
                "{name} at {at}: executor answered in {} ms{when}",
                h.latency_ms.unwrap_or(0)
            ),
        );
    }
    let why = match (&h.error, &h.down_since) {
        (Some(e), Some(since)) => format!("down since {}: {}", safe(since), safe(e)),
        (Some(e), None) => format!("down: {}", safe(e)),
        _ => "not reached yet (the agent probes each host every few seconds)".into(),
    };
    check("host", Verdict::Fail, format!("{name} at {at}: {why}"))
}

/// Private files must be readable by their owner only.
fn key_modes(home: &Home) -> Vec<Check> {
    let mut files = vec![home.path("approver.key"), home.path("agent.token")];
    if let Ok(dir) = std::fs::read_dir(home.path("pki")) {
        let mut keys: Vec<_> = dir
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "key"))
            .collect();
        keys.sort();
        files.extend(keys);
    }
    let mut bad = Vec::new();
    for f in &files {
        if let Err(e) = drydock_daemon::files::check_private("key file", f) {
            bad.push(check("key modes", Verdict::Fail, e.to_string()));
        }
    }
    if bad.is_empty() {
        vec![check(
            "key modes",
            Verdict::Ok,
            format!("{} private files, owner-only", files.len()),
        )]
    } else {
        bad
    }
}

fn certificates(home: &Home) -> Vec<Check> {
    let Ok(dir) = std::fs::read_dir(home.path("pki")) else {
        return vec![check(
            "certificates",
            Verdict::Fail,
            format!(
                "{} is missing: run `drydock init`",
                home.path("pki").display()
            ),
        )];
    };
    let mut certs: Vec<_> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "crt"))
        .collect();
    certs.sort();
    let now = unix_now();
    certs
        .iter()
        .map(|path| match validity(path) {
            Err(e) => check("certificates", Verdict::Fail, e),
            Ok((not_before, not_after)) => {
                let name = path.file_name().map(|n| n.to_string_lossy().to_string());
                let name = name.unwrap_or_default();
                let days = (not_after - now).div_euclid(86_400);
                if now < not_before {
                    check(
                        "certificates",
                        Verdict::Fail,
                        format!("{name} is not valid yet (check the clock)"),
                    )
                } else if now >= not_after {
                    check(
                        "certificates",
                        Verdict::Fail,
                        format!(
                            "{name} expired {} days ago: renew with `drydock init --force`",
                            -days
                        ),
                    )
                } else if days < EXPIRY_WARNING_DAYS {
                    check(
                        "certificates",
                        Verdict::Warn,
                        format!("{name} expires in {days} days: renew soon"),
                    )
                } else {
                    check(
                        "certificates",
                        Verdict::Ok,
                        format!("{name} valid, expires in {days} days"),
                    )
                }
            }
        })
        .collect()
}

/// `(not_before, not_after)` in Unix seconds.
fn validity(path: &Path) -> Result<(i64, i64), String> {
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem)
        .map_err(|e| format!("{} is not a PEM certificate: {e}", path.display()))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("{} is not an X.509 certificate: {e}", path.display()))?;
    let v = cert.validity();
    Ok((v.not_before.timestamp(), v.not_after.timestamp()))
}

/// Each daemon validates its own config, exactly as it would at start.
fn configs(home: &Home) -> Vec<Check> {
    [
        ("drydock-executor", home.executor_config()),
        ("drydock-agent", home.agent_config()),
    ]
    .into_iter()
    .map(|(daemon, config)| {
        let Some(bin) = daemons::find_binary(daemon) else {
            return check(
                "config",
                Verdict::Fail,
                format!("{daemon} not found: build it with `cargo build --release -p {daemon}`"),
            );
        };
        match Command::new(bin)
            .arg("check-config")
            .arg("--config")
            .arg(&config)
            .output()
        {
            Ok(out) if out.status.success() => check(
                "config",
                Verdict::Ok,
                format!("{} is valid", config.display()),
            ),
            Ok(out) => check(
                "config",
                Verdict::Fail,
                String::from_utf8_lossy(&out.stderr).trim().to_string(),
            ),
            Err(e) => check("config", Verdict::Fail, format!("cannot run {daemon}: {e}")),
        }
    })
    .collect()
}

/// The engine as the operator's own docker CLI sees it (drydock itself
/// reaches Docker only through the executor).
fn docker() -> Check {
    match Command::new("docker")
        .args([
            "version",
            "--format",
            "{{.Server.Version}} (API {{.Server.APIVersion}})",
        ])
        .output()
    {
        Ok(out) if out.status.success() => check(
            "docker",
            Verdict::Ok,
            format!("engine {}", String::from_utf8_lossy(&out.stdout).trim()),
        ),
        Ok(out) => check(
            "docker",
            Verdict::Fail,
            format!(
                "engine unreachable: {}",
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .next()
                    .unwrap_or("")
            ),
        ),
        Err(e) => check(
            "docker",
            Verdict::Warn,
            format!("no docker CLI to ask ({e})"),
        ),
    }
}

/// The executor answers its gRPC health service over mTLS (with the
/// health-only certificate), as a container healthcheck would ask it.
fn executor_running(home: &Home) -> Check {
    let listen = std::fs::read_to_string(home.executor_config())
        .ok()
        .and_then(|t| serde_yaml_ng::from_str::<Value>(&t).ok())
        .and_then(|v| v.get("listen").and_then(Value::as_str).map(String::from))
        .unwrap_or_else(|| "127.0.0.1:7443".into());
    let Some(bin) = daemons::find_binary("drydock-executor") else {
        return check("executor", Verdict::Fail, "drydock-executor not found");
    };
    let out = Command::new(bin)
        .arg("health")
        .arg("--addr")
        .arg(&listen)
        .arg("--ca")
        .arg(home.path("pki/ca.crt"))
        .arg("--cert")
        .arg(home.path("pki/healthcheck.crt"))
        .arg("--key")
        .arg(home.path("pki/healthcheck.key"))
        .output();
    match out {
        Ok(o) if o.status.success() => {
            check("executor", Verdict::Ok, format!("serving at {listen}"))
        }
        Ok(o) => check(
            "executor",
            Verdict::Fail,
            format!(
                "not serving at {listen}: {}; start it with `drydock up` (log: {})",
                String::from_utf8_lossy(&o.stderr).trim(),
                home.log("drydock-executor").display()
            ),
        ),
        Err(e) => check("executor", Verdict::Fail, format!("cannot ask: {e}")),
    }
}

async fn clock(agent: &AgentClient) -> Check {
    match agent.server_time().await {
        Some(server) => {
            let skew = SystemTime::now()
                .duration_since(server)
                .unwrap_or_else(|e| e.duration());
            if skew > MAX_CLOCK_SKEW {
                check(
                    "clock",
                    Verdict::Fail,
                    format!("this machine and the agent differ by {}s: approvals would expire early or late; fix NTP", skew.as_secs()),
                )
            } else {
                check("clock", Verdict::Ok, "agrees with the agent's")
            }
        }
        None => check(
            "clock",
            Verdict::Warn,
            "the agent sent no Date header to compare",
        ),
    }
}

/// The key this CLI signs with must be one the running executor trusts,
/// under the same id; otherwise every approval is refused.
fn approver(cfg: &crate::home::CliConfig, policy: &PolicyView) -> Check {
    let signer = match cfg.signer() {
        Ok(k) => k,
        Err(e) => return check("approver", Verdict::Fail, format!("{e:#}")),
    };
    if let crate::home::Signer::Ssh(key) = &signer {
        let held = crate::ssh_agent::identities().map(|ids| ids.iter().any(|(k, _)| k == key));
        match held {
            Ok(true) => {}
            Ok(false) => {
                return check(
                    "approver",
                    Verdict::Fail,
                    format!(
                        "the ssh-agent does not hold your key ({}): `ssh-add` it",
                        key.kind.name()
                    ),
                )
            }
            Err(e) => return check("approver", Verdict::Fail, format!("{e:#}")),
        }
    }
    let public = signer.public();
    let trusted = &policy.approvers;
    match trusted
        .iter()
        .find(|a| a.public_key == public)
        .map(|a| safe(&a.id))
    {
        Some(id) if id == cfg.approver.id => check(
            "approver",
            Verdict::Ok,
            format!("the executor trusts your key as `{id}`"),
        ),
        Some(id) => check(
            "approver",
            Verdict::Fail,
            format!(
                "the executor knows your key as `{id}`, but cli.yaml signs as `{}`: set approver.id to `{id}`",
                cfg.approver.id
            ),
        ),
        None => check(
            "approver",
            Verdict::Fail,
            format!(
                "the executor does not trust your key ({public}); trusted: [{}]. Add it to approvers in executor.yaml and restart the executor",
                trusted.iter().map(|a| safe(&a.id)).collect::<Vec<_>>().join(", ")
            ),
        ),
    }
}

fn scope(policy: &PolicyView) -> Check {
    let names: Vec<String> = policy.allow_names.iter().map(|n| safe(n)).collect();
    let every = |names: &[String]| names.iter().any(|n| n == "*");
    if every(&names) {
        check(
            "scope",
            Verdict::Warn,
            "targets.allow_names includes `*`: every container on this host is in scope; name the services drydock may touch",
        )
    } else if every(&policy.allow_service_names) {
        check(
            "scope",
            Verdict::Warn,
            "targets.services.allow_names includes `*`: every Swarm service of the cluster is in scope; name the services or stacks drydock may touch",
        )
    } else {
        check(
            "scope",
            Verdict::Ok,
            format!("name selectors [{}]", names.join(", ")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_of_every_container_or_every_service_is_a_warning() {
        let policy = |containers: &[&str], services: &[&str]| PolicyView {
            allow_names: containers.iter().map(|s| s.to_string()).collect(),
            allow_service_names: services.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        for (p, verdict, says) in [
            (policy(&["shop-*"], &[]), Verdict::Ok, "shop-*"),
            (policy(&["*"], &[]), Verdict::Warn, "every container"),
            (
                policy(&["shop-*"], &["*"]),
                Verdict::Warn,
                "every Swarm service",
            ),
        ] {
            let c = scope(&p);
            assert_eq!(c.verdict, verdict, "{}", c.detail);
            assert!(c.detail.contains(says), "{}", c.detail);
        }
    }
}
