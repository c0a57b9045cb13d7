//! Automation grants, checked by the executor without trusting the agent:
//! automation on, the signature of a configured approver (over the exact
//! bytes, under the grant signing context), the grant's window and the
//! executor's maximum lifetime, the revocation list (read at every use),
//! action, scope and class. The caps are counted in the audit store when the
//! use is spent (`AuditLog::spend_grant`), and the container's state is
//! checked at call time by the service (`precondition`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Duration;

use drydock_proto::approval::{self, WriteAction};
use drydock_proto::grant::{self, GrantClaims, GrantError};
use ed25519_dalek::VerifyingKey;

use crate::config::{ApproverConfig, AutomationConfig};
use crate::docker::ContainerDetails;
use crate::policy::ResolvedTarget;

/// Clock skew tolerated between the signer and the executor.
const CLOCK_SKEW_SECS: i64 = 60;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrantRefusal {
    #[error(
        "automation is off on this executor (automation.enabled): a grant authorises nothing here"
    )]
    Disabled,
    #[error("send exactly one of an approval and a grant")]
    Both,
    #[error("grant signed with unknown key id `{0}`")]
    UnknownKey(String),
    #[error("grant rejected: {0}")]
    Format(#[from] GrantError),
    #[error("grant {id} expired at {expires_at} (now {now})")]
    Expired {
        id: String,
        expires_at: i64,
        now: i64,
    },
    #[error("grant {id} is not valid before {issued_at} (now {now})")]
    NotYetValid {
        id: String,
        issued_at: i64,
        now: i64,
    },
    #[error("grant {id} lasts {lifetime}s, longer than the executor's automation.max_grant_ttl of {max}s")]
    TooLong { id: String, lifetime: i64, max: i64 },
    #[error("grant {0} was revoked")]
    Revoked(String),
    #[error(
        "the revocation list {path} cannot be read ({why}); no grant is honoured until it can"
    )]
    RevocationsUnreadable { path: String, why: String },
    #[error("{0}")]
    NotCovered(String),
    #[error("grant {id} allows {max} uses per container every {window}s; this container already had {used}")]
    PerContainerCap {
        id: String,
        max: u32,
        window: u64,
        used: u32,
    },
    #[error("grant {id} allows {max} uses in all; they are spent")]
    TotalCap { id: String, max: u32 },
    #[error("precondition failed: {0}")]
    Precondition(String),
}

/// A grant whose signature, window, revocation status and coverage check
/// out; its caps are checked when the use is spent.
#[derive(Debug, Clone)]
pub struct VerifiedGrant {
    pub claims: GrantClaims,
    pub key_id: String,
}

pub struct GrantInput<'a> {
    pub claims: &'a [u8],
    pub signature: &'a [u8],
    pub key_id: &'a str,
    pub fault_class: &'a str,
}

pub struct GrantVerifier {
    keys: HashMap<String, VerifyingKey>,
    enabled: bool,
    max_ttl: Duration,
    revocations: Option<PathBuf>,
}

impl GrantVerifier {
    pub fn new(approvers: &[ApproverConfig], automation: &AutomationConfig) -> GrantVerifier {
        let keys = approvers
            .iter()
            .filter_map(|a| {
                approval::parse_public_key(&a.public_key)
                    .ok()
                    .map(|k| (a.id.clone(), k))
            })
            .collect();
        GrantVerifier {
            keys,
            enabled: automation.enabled,
            max_ttl: automation.max_grant_ttl,
            revocations: automation.revocations.clone(),
        }
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn max_ttl(&self) -> Duration {
        self.max_ttl
    }

    /// The revoked grant ids, read now. A list that is configured but cannot
    /// be read refuses every grant (fail closed).
    pub fn revoked(&self) -> Result<HashSet<String>, GrantRefusal> {
        let Some(path) = &self.revocations else {
            return Ok(HashSet::new());
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| GrantRefusal::RevocationsUnreadable {
                path: path.display().to_string(),
                why: e.to_string(),
            })?;
        Ok(text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect())
    }

    pub fn verify(
        &self,
        input: &GrantInput<'_>,
        action: WriteAction,
        target: &ResolvedTarget,
        now: i64,
    ) -> Result<VerifiedGrant, GrantRefusal> {
        if !self.enabled {
            return Err(GrantRefusal::Disabled);
        }
        let key = self
            .keys
            .get(input.key_id)
            .ok_or_else(|| GrantRefusal::UnknownKey(input.key_id.to_string()))?;
        let claims = grant::verify(input.claims, input.signature, key)?;
        let id = claims.grant_id.clone();
        let lifetime = claims.expires_at.saturating_sub(claims.issued_at);
        let max = self.max_ttl.as_secs() as i64;
        if lifetime > max {
            return Err(GrantRefusal::TooLong { id, lifetime, max });
        }
        if claims.issued_at > now.saturating_add(CLOCK_SKEW_SECS) {
            return Err(GrantRefusal::NotYetValid {
                id,
                issued_at: claims.issued_at,
                now,
            });
        }
        if now >= claims.expires_at {
            return Err(GrantRefusal::Expired {
                id,
                expires_at: claims.expires_at,
                now,
            });
        }
        if self.revoked()?.contains(&claims.grant_id) {
            return Err(GrantRefusal::Revoked(id));
        }
        if let Some(why) = claims.refuses(action, &target.name, &target.labels, input.fault_class) {
            return Err(GrantRefusal::NotCovered(why));
        }
        Ok(VerifiedGrant {
            claims,
            key_id: input.key_id.to_string(),
        })
    }
}

/// Append `id` to the revocation list at `path` (created if missing).
/// Returns false when it was already there.
pub fn revoke(path: &std::path::Path, id: &str) -> anyhow::Result<bool> {
    use std::io::Write as _;
    let valid = id.len() <= 64
        && id.starts_with("grt-")
        && id.len() > 4
        && id[4..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-');
    if !valid {
        anyhow::bail!(
            "`{id}` is not a grant id (grt-<letters or digits>); `drydock grant list` shows them"
        );
    }
    let current = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    };
    let listed = current
        .lines()
        .any(|l| l.split('#').next().unwrap_or("").trim() == id);
    if listed {
        return Ok(false);
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now());
    writeln!(file, "{id}  # revoked {stamp}")?;
    file.sync_all()?;
    Ok(true)
}

/// The state a container must be in, at call time, for a repair under a
/// grant: restart only one that is running and unhealthy or has exited
/// non-zero; start only one that has exited. Docker restarting it (its
/// restart policy at work) is left alone.
pub fn precondition(action: WriteAction, c: &ContainerDetails) -> Result<(), GrantRefusal> {
    let s = &c.state;
    let fail = |m: String| Err(GrantRefusal::Precondition(m));
    if s.restarting {
        return fail(format!(
            "{} is being restarted by Docker (restart policy `{}`); a grant does not compete with it",
            c.name, c.restart_policy
        ));
    }
    let exited = !s.running && s.status == "exited";
    match action {
        WriteAction::Restart if s.running && c.health.status == "unhealthy" => Ok(()),
        WriteAction::Restart if exited && s.exit_code != 0 => Ok(()),
        WriteAction::Restart => fail(format!(
            "{} is {}{}; under a grant, restart only a container that is running and unhealthy or has exited non-zero",
            c.name,
            s.status,
            if s.running && !c.health.status.is_empty() && c.health.status != "none" {
                format!(" and {}", c.health.status)
            } else if exited {
                format!(" with code {}", s.exit_code)
            } else {
                String::new()
            }
        )),
        WriteAction::Start if exited => Ok(()),
        WriteAction::Start => fail(format!(
            "{} is {}; under a grant, start only a container that has exited",
            c.name, s.status
        )),
        WriteAction::Stop => fail("stop is never covered by a grant".into()),
    }
}

/// Labels of a container for scope checks from an event's attributes (the
/// engine mixes the labels with a few keys of its own).
pub fn labels_from_attributes(attributes: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    attributes
        .iter()
        .filter(|(k, _)| {
            !matches!(
                k.as_str(),
                "name" | "image" | "exitCode" | "signal" | "execDuration"
            )
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::docker::{Health, StateInfo};

    fn container(status: &str, running: bool, health: &str, exit_code: i64) -> ContainerDetails {
        ContainerDetails {
            name: "shop-web-1".into(),
            state: StateInfo {
                status: status.into(),
                running,
                exit_code,
                ..Default::default()
            },
            health: Health {
                status: health.into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn only_a_broken_container_may_be_repaired_under_a_grant() {
        use WriteAction::*;
        assert!(precondition(Restart, &container("running", true, "unhealthy", 0)).is_ok());
        assert!(precondition(Restart, &container("exited", false, "", 1)).is_ok());
        let healthy = precondition(Restart, &container("running", true, "healthy", 0));
        assert!(
            matches!(&healthy, Err(GrantRefusal::Precondition(m)) if m.contains("running and healthy")),
            "{healthy:?}"
        );
        assert!(precondition(Restart, &container("running", true, "none", 0)).is_err());
        assert!(
            precondition(Restart, &container("exited", false, "", 0)).is_err(),
            "a clean exit is someone's stop"
        );
        assert!(precondition(Start, &container("exited", false, "", 0)).is_ok());
        assert!(precondition(Start, &container("running", true, "unhealthy", 0)).is_err());
        let mut restarting = container("restarting", false, "", 1);
        restarting.state.restarting = true;
        assert!(precondition(Restart, &restarting).is_err());
        assert!(precondition(Stop, &container("running", true, "unhealthy", 0)).is_err());
    }

    #[test]
    fn a_revocation_list_that_cannot_be_read_refuses_every_grant() {
        let dir = tempfile::tempdir().unwrap();
        let list = dir.path().join("revoked");
        let v = GrantVerifier::new(
            &[],
            &AutomationConfig {
                enabled: true,
                max_grant_ttl: Duration::from_secs(3600),
                revocations: Some(list.clone()),
            },
        );
        assert!(matches!(
            v.revoked(),
            Err(GrantRefusal::RevocationsUnreadable { .. })
        ));
        std::fs::write(&list, "# revoked grants\ngrt-aa  # leaked\n\ngrt-bb\n").unwrap();
        let revoked = v.revoked().unwrap();
        assert!(revoked.contains("grt-aa") && revoked.contains("grt-bb") && revoked.len() == 2);
    }
}
