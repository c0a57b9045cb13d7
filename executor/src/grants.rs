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

use drydock_proto::approval::{ContainerAction, ServiceAction, WriteAction, CLOCK_SKEW_SECS};
use drydock_proto::grant::{self, GrantClaims, GrantError};
use ed25519_dalek::VerifyingKey;

use crate::config::{ApproverConfig, AutomationConfig};
use crate::docker::{ContainerDetails, ContainerState, HealthStatus, ServiceInfo, TaskInfo};
use drydock_proto::FaultClass;

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
    #[error("{action} needs {required} approvers here (approvals.required), and a grant carries one signature: it needs a person's approvals")]
    Quorum { action: &'static str, required: u32 },
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
    #[error("grant {id} is not for this executor: {why}")]
    WrongHost { id: String, why: String },
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
    #[error("grant {0} covers updates, and this executor does not let a grant update (actions.update.grants is false): a person approves each update")]
    UpdateGrantsOff(String),
    #[error("{0}")]
    OutsideHours(String),
    #[error("grant {id} was issued before this audit store was created (at {since}), so uses it had before then may not be counted here; sign a new grant (`drydock grant create`)")]
    OlderThanStore { id: String, since: i64 },
    #[error("grant {id} was issued at {issued_at}, not after the audit store was restored from a backup (at {restored_at}, plus {skew}s for the signer's clock): uses it had after the backup was taken are not in the restored store; sign a new grant (`drydock grant create`)", skew = CLOCK_SKEW_SECS)]
    BeforeRestore {
        id: String,
        issued_at: i64,
        restored_at: i64,
    },
}

/// A grant's caps are counted in the audit store: a grant issued before the
/// store was created (a new store) or restored (a backup, which may lack
/// the uses spent after it was taken) could have used up its caps
/// elsewhere, so it is refused.
pub fn check_store_age(
    claims: &drydock_proto::grant::GrantClaims,
    counts_since: Option<crate::audit::CountsSince>,
) -> Result<(), GrantRefusal> {
    use crate::audit::CountsSince;
    match counts_since {
        // A new store allows for the signer's clock (a grant made right
        // after `drydock init` on a clock a little behind). A restore
        // allows nothing: a grant dated up to the skew after it may have
        // been used in the store it replaced.
        Some(CountsSince::Created(since))
            if claims.issued_at < since.saturating_sub(CLOCK_SKEW_SECS) =>
        {
            Err(GrantRefusal::OlderThanStore {
                id: claims.grant_id.clone(),
                since,
            })
        }
        Some(CountsSince::Restored(restored_at))
            if !crate::approval::issued_after_restore(claims.issued_at, restored_at) =>
        {
            Err(GrantRefusal::BeforeRestore {
                id: claims.grant_id.clone(),
                issued_at: claims.issued_at,
                restored_at,
            })
        }
        _ => Ok(()),
    }
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
    host: crate::approval::HostBinding,
    /// `actions.update.grants`: whether a grant may update at all.
    update_grants: bool,
    quorum: crate::approval::Quorum,
    /// The zone a grant's hours are read in: this host's (TZ,
    /// /etc/localtime), UTC when it has none.
    zone: jiff::tz::TimeZone,
}

impl GrantVerifier {
    pub fn new(approvers: &[ApproverConfig], automation: &AutomationConfig) -> GrantVerifier {
        // Grants are signed with file keys: an approver whose key is in an
        // ssh-agent signs approvals only.
        let keys = crate::approval::approver_keys(approvers)
            .into_iter()
            .filter_map(|(id, k)| k.file_key().copied().map(|k| (id, k)))
            .collect();
        GrantVerifier {
            keys,
            enabled: automation.enabled,
            max_ttl: automation.max_grant_ttl,
            revocations: automation.revocations.clone(),
            host: Default::default(),
            update_grants: false,
            quorum: Default::default(),
            zone: jiff::tz::TimeZone::try_system().unwrap_or_else(|e| {
                tracing::warn!(error = %e, "this host's time zone cannot be read (TZ, /etc/localtime): a grant's hours are read in UTC");
                jiff::tz::TimeZone::UTC
            }),
        }
    }

    /// Whether a grant may update (`actions.update.grants`).
    /// How many approvers each action needs: a grant stands for one.
    pub fn with_quorum(mut self, quorum: crate::approval::Quorum) -> GrantVerifier {
        self.quorum = quorum;
        self
    }

    pub fn with_update_grants(mut self, allowed: bool) -> GrantVerifier {
        self.update_grants = allowed;
        self
    }

    /// The zone a grant's hours are read in (tests; the host's otherwise).
    pub fn with_zone(mut self, zone: jiff::tz::TimeZone) -> GrantVerifier {
        self.zone = zone;
        self
    }

    pub fn update_grants(&self) -> bool {
        self.update_grants
    }

    /// The minutes after local midnight at `now` (unix seconds), and the
    /// zone's offset from UTC then, in seconds.
    pub fn local_time(&self, now: i64) -> (u16, i32) {
        let at = jiff::Timestamp::from_second(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let zoned = at.to_zoned(self.zone.clone());
        let minute =
            u16::try_from(i32::from(zoned.hour()) * 60 + i32::from(zoned.minute())).unwrap_or(0);
        (minute, zoned.offset().seconds())
    }

    /// The host grants must name (`host` in the config).
    pub fn with_host(mut self, host: crate::approval::HostBinding) -> GrantVerifier {
        self.host = host;
        self
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
        crate::revocations::read(path).map_err(|why| GrantRefusal::RevocationsUnreadable {
            path: path.display().to_string(),
            why,
        })
    }

    /// Whether the grant covers `action` on the target named `name` (a
    /// container's or a service's, by the action) with these labels.
    pub fn verify(
        &self,
        input: &GrantInput<'_>,
        action: WriteAction,
        name: &str,
        labels: &BTreeMap<String, String>,
        now: i64,
    ) -> Result<VerifiedGrant, GrantRefusal> {
        if !self.enabled {
            return Err(GrantRefusal::Disabled);
        }
        let required = self.quorum.required(action);
        if required > 1 {
            return Err(GrantRefusal::Quorum {
                action: action.as_str(),
                required,
            });
        }
        let key = self
            .keys
            .get(input.key_id)
            .ok_or_else(|| GrantRefusal::UnknownKey(input.key_id.to_string()))?;
        let claims = grant::verify(input.claims, input.signature, key)?;
        let id = claims.grant_id.clone();
        self.host
            .check(claims.host.as_deref())
            .map_err(|m| GrantRefusal::WrongHost {
                id: id.clone(),
                why: match m {
                    crate::approval::HostMismatch::Wrong { signed, actual } => {
                        format!("it was made for host `{signed}`, but this executor is {actual}")
                    }
                    crate::approval::HostMismatch::Missing { actual } => format!(
                        "it names no host, and this executor (host `{actual}`) requires one (host.require)"
                    ),
                },
            })?;
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
        if let Some(why) = claims.refuses(action, name, labels, input.fault_class) {
            return Err(GrantRefusal::NotCovered(why));
        }
        if action == WriteAction::Update && !self.update_grants {
            return Err(GrantRefusal::UpdateGrantsOff(id));
        }
        if let Some(why) = claims.outside_hours(self.local_time(now).0) {
            return Err(GrantRefusal::OutsideHours(why));
        }
        Ok(VerifiedGrant {
            claims,
            key_id: input.key_id.to_string(),
        })
    }
}

/// Exit codes of a process ended by SIGINT, SIGKILL or SIGTERM: what
/// `docker stop` and `docker kill` leave behind. Without the OOM flag, such
/// an exit is someone's decision, not a crash, and a grant does not undo it.
const SIGNAL_EXITS: [i64; 3] = [130, 137, 143];

/// Whether an exited container crashed (as opposed to being stopped).
fn crashed(c: &ContainerDetails) -> bool {
    let s = &c.state;
    !s.running
        && s.status == ContainerState::Exited
        && s.exit_code != 0
        && (s.oom_killed || !SIGNAL_EXITS.contains(&s.exit_code))
}

/// The state a container must be in, at call time, for a repair under a
/// grant: restart only one that is running (not paused) and unhealthy, or
/// that crashed; start only one that crashed. A clean exit or a signal's
/// exit code (a person's `docker stop` or `docker kill`) is left alone, and
/// so is a container Docker is restarting (its restart policy at work).
pub fn precondition(action: ContainerAction, c: &ContainerDetails) -> Result<(), GrantRefusal> {
    let s = &c.state;
    let fail = |m: String| Err(GrantRefusal::Precondition(m));
    if s.restarting {
        return fail(format!(
            "{} is being restarted by Docker (restart policy `{}`); a grant does not compete with it",
            c.name, c.restart_policy
        ));
    }
    let unhealthy = s.running
        && s.status == ContainerState::Running
        && c.health.status == HealthStatus::Unhealthy;
    let state = if s.status == ContainerState::Exited {
        format!("exited with code {}", s.exit_code)
    } else if c.health.status != HealthStatus::None {
        format!("{} and {}", s.status, c.health.status)
    } else {
        s.status.to_string()
    };
    match action {
        ContainerAction::Restart if unhealthy || crashed(c) => Ok(()),
        ContainerAction::Restart => fail(format!(
            "{} is {state}; under a grant, restart only a container that is running and unhealthy or that crashed (a clean exit or a stop by signal is someone's decision)",
            c.name
        )),
        ContainerAction::Start if crashed(c) => Ok(()),
        ContainerAction::Start => fail(format!(
            "{} is {state}; under a grant, start only a container that crashed (a clean exit or a stop by signal is someone's decision)",
            c.name
        )),
        ContainerAction::Stop
        | ContainerAction::Rollback
        | ContainerAction::Update
        | ContainerAction::Build => fail(format!(
            "{} is never covered by a grant",
            action.as_str()
        )),
    }
}

/// How recent a task's failure must be to count as the service failing now.
pub const RECENT_TASK_FAILURE_SECS: i64 = 600;

fn unix_of(rfc3339: &str) -> Option<i64> {
    humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z'))
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
}

/// The tasks that failed (or were rejected) within the last ten minutes.
fn recent_failures(tasks: &[TaskInfo], now: i64) -> Vec<&TaskInfo> {
    tasks
        .iter()
        .filter(|t| t.state.is_failure())
        .filter(|t| unix_of(&t.timestamp).is_some_and(|at| now - at <= RECENT_TASK_FAILURE_SECS))
        .collect()
}

/// The state a Swarm service must be in, at call time, for a force update
/// under a grant: tasks that failed in the last ten minutes. A job, a
/// service a person scaled to zero, or one whose update is under way or
/// paused (Swarm's own update machinery, or a person's decision to hold
/// it), is left alone.
pub fn service_precondition(
    action: ServiceAction,
    s: &ServiceInfo,
    tasks: &[TaskInfo],
    now: i64,
) -> Result<(), GrantRefusal> {
    let fail = |m: String| Err(GrantRefusal::Precondition(m));
    match action {
        ServiceAction::ForceUpdate => {}
        ServiceAction::Rollback | ServiceAction::Update => {
            return fail(format!("{} is never covered by a grant", action.as_str()))
        }
    }
    if s.mode.is_job() {
        return fail(format!(
            "{} is a {} service: a force update would run the job again, which only a person decides",
            s.name, s.mode
        ));
    }
    if s.desired == 0 {
        return fail(format!(
            "{} wants no task (scaled to zero): someone's decision, which a grant does not undo",
            s.name
        ));
    }
    if s.update_state.in_progress() || s.update_state.paused() {
        return fail(format!(
            "{}'s update is {}: Swarm or a person is changing it, and a grant does not compete",
            s.name, s.update_state
        ));
    }
    // Fewer tasks than wanted alone is also a scale-up or a drain under
    // way: a grant needs tasks that failed.
    if !recent_failures(tasks, now).is_empty() {
        return Ok(());
    }
    fail(format!(
        "{} runs {}/{} tasks and none failed in the last {} min; under a grant, force an update only of a service whose tasks fail",
        s.name,
        s.running,
        s.desired,
        RECENT_TASK_FAILURE_SECS / 60
    ))
}

/// The classes a service's tasks can confirm, checked against them.
pub fn service_class_consistent(
    class: &str,
    s: &ServiceInfo,
    tasks: &[TaskInfo],
    now: i64,
) -> Result<(), GrantRefusal> {
    let failed = recent_failures(tasks, now);
    let says = |t: &&TaskInfo, what: &str| t.error.contains(what) || t.message.contains(what);
    let ok = match FaultClass::parse(class) {
        Some(FaultClass::Unhealthy | FaultClass::HealthcheckBroken) => {
            failed.iter().any(|t| says(t, "unhealthy"))
        }
        Some(FaultClass::Crash | FaultClass::CrashLoop | FaultClass::ConfigError) => failed
            .iter()
            .any(|t| t.exit_code.is_some_and(|c| c != 0) || says(t, "non-zero exit")),
        Some(FaultClass::Unschedulable) => tasks.iter().any(|t| says(&t, "no suitable node")),
        Some(FaultClass::ImageUnavailable) => failed.iter().any(|t| says(t, "image")),
        Some(FaultClass::Healthy) => false,
        // Classes no task can confirm: a failed task at least.
        _ => !failed.is_empty(),
    };
    if ok {
        Ok(())
    } else {
        Err(GrantRefusal::Precondition(format!(
            "the stated fault class `{class}` does not match {}'s tasks ({}/{} running, {} failed in the last {} min)",
            s.name,
            s.running,
            s.desired,
            failed.len(),
            RECENT_TASK_FAILURE_SECS / 60
        )))
    }
}

/// The classes the container's own state can confirm are checked against
/// it: a grant for `oom_killed` repairs only what the engine says was OOM
/// killed, whatever the agent's diagnosis claims. Classes about causes
/// outside the container (a dependency, the config, a port, the disk) cannot
/// be checked here and are taken as stated.
pub fn class_consistent(class: &str, c: &ContainerDetails) -> Result<(), GrantRefusal> {
    let s = &c.state;
    let unhealthy = s.running && c.health.status == HealthStatus::Unhealthy;
    let ok = match FaultClass::parse(class) {
        Some(FaultClass::Unhealthy | FaultClass::HealthcheckBroken) => unhealthy,
        Some(FaultClass::OomKilled) => s.oom_killed,
        Some(FaultClass::Crash | FaultClass::CrashLoop) => crashed(c),
        Some(FaultClass::Stopped) => s.status == ContainerState::Exited,
        Some(FaultClass::Healthy) => false,
        _ => true,
    };
    if ok {
        Ok(())
    } else {
        Err(GrantRefusal::Precondition(format!(
            "the stated fault class `{class}` does not match {}'s state ({}, health {}, exit code {}, OOM-killed {})",
            c.name,
            s.status,
            c.health.status,
            s.exit_code,
            s.oom_killed
        )))
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
mod tests;
