//! What the configured operator allows. A `Permit` is the only way to reach
//! the Docker adapter for a container, and only this module can build one:
//! code that skips the policy check does not compile.
//!
//! A permit also says what it allows, in its type: `Permit<Read>` reads a
//! container, `Permit<Restart>` restarts it (and reads it), and so on. The
//! adapter's `restart` takes only a `Permit<Restart>`, so a read permit, or
//! a permit for another action, cannot be passed to a write:
//!
//! ```compile_fail,E0308
//! use drydock_executor::docker::DockerAdapter;
//! use drydock_executor::policy::{Permit, Read};
//! async fn restart_with_a_read_permit(docker: &DockerAdapter, permit: &Permit<Read>) {
//!     let _ = docker.restart(permit).await;
//! }
//! ```
//!
//! ```compile_fail,E0308
//! use drydock_executor::docker::DockerAdapter;
//! use drydock_executor::policy::{Permit, Start};
//! async fn stop_with_a_start_permit(docker: &DockerAdapter, permit: &Permit<Start>) {
//!     let _ = docker.stop(permit).await;
//! }
//! ```
//!
//! The matching permit does:
//!
//! ```no_run
//! use drydock_executor::docker::DockerAdapter;
//! use drydock_executor::policy::{Permit, Restart};
//! async fn restart_with_its_permit(docker: &DockerAdapter, permit: &Permit<Restart>) {
//!     let _ = docker.restart(permit).await;
//! }
//! ```

use std::collections::BTreeMap;
use std::marker::PhantomData;

use drydock_proto::approval::WriteAction;

use crate::config::{ActionsConfig, TargetsConfig};

pub const COMPOSE_PROJECT_LABEL: &str = "com.docker.compose.project";
/// Set on drydock's own containers (the images carry it, and so do the
/// compose services): the executor never shows or acts on them, so neither
/// a confused model nor a compromised agent can restart or stop drydock.
pub const DRYDOCK_ROLE_LABEL: &str = "io.drydock.role";

/// Risk tiers from the executor contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Read = 0,
    Change = 1,
    Disruptive = 2,
}

/// A container as the engine reports it at call time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedTarget {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The container's own `StopTimeout`, when it sets one (the engine's
    /// default, 10 s, otherwise).
    pub stop_timeout_secs: Option<u32>,
    /// The image it runs, by content (`sha256:…`).
    pub image_id: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("action {action} is disabled by the executor's policy")]
    ActionDisabled { action: &'static str },
    #[error("container {name} is outside the executor's target selectors")]
    TargetNotAllowed { name: String },
    #[error("container {name} is one of drydock's own ({DRYDOCK_ROLE_LABEL}={role}); drydock never shows or acts on itself")]
    Drydock { name: String, role: String },
}

mod sealed {
    pub trait Sealed {}
}

/// What a permit allows; implemented only here.
pub trait Allows: sealed::Sealed {
    const TIER: Tier;
}

/// Reading one container: inspect, logs, stats, events, disk usage.
#[derive(Debug)]
pub enum Read {}
/// Starting one container (T1).
#[derive(Debug)]
pub enum Start {}
/// Restarting one container (T1).
#[derive(Debug)]
pub enum Restart {}
/// Stopping one container (T2).
#[derive(Debug)]
pub enum Stop {}
/// Re-creating one container with another image (T2).
#[derive(Debug)]
pub enum Rollback {}

macro_rules! allows {
    ($($kind:ident = $tier:expr),*) => {$(
        impl sealed::Sealed for $kind {}
        impl Allows for $kind {
            const TIER: Tier = $tier;
        }
    )*};
}
allows!(
    Read = Tier::Read,
    Start = Tier::Change,
    Restart = Tier::Change,
    Stop = Tier::Disruptive,
    Rollback = Tier::Disruptive
);

/// Proof that policy allowed `A` on one container id.
#[derive(Debug)]
pub struct Permit<A: Allows> {
    container_id: String,
    stop_timeout_secs: Option<u32>,
    allows: PhantomData<A>,
}

impl<A: Allows> Permit<A> {
    fn new(target: &ResolvedTarget) -> Permit<A> {
        Permit {
            container_id: target.id.clone(),
            stop_timeout_secs: target.stop_timeout_secs,
            allows: PhantomData,
        }
    }

    pub fn container_id(&self) -> &str {
        &self.container_id
    }

    /// The container's own `StopTimeout`, which the engine honours on a
    /// restart or stop (as `docker restart` does); `None`: the engine's
    /// default of 10 s.
    pub fn stop_timeout_secs(&self) -> Option<u32> {
        self.stop_timeout_secs
    }

    pub fn tier(&self) -> Tier {
        A::TIER
    }

    /// Whoever may change a container may read it (a write checks its
    /// state first).
    pub fn to_read(&self) -> Permit<Read> {
        Permit {
            container_id: self.container_id.clone(),
            stop_timeout_secs: self.stop_timeout_secs,
            allows: PhantomData,
        }
    }
}

/// The permit for one write, by action: what `permit_write` gives, and what
/// the write path matches on to call the adapter's one matching method.
#[derive(Debug)]
pub enum WritePermit {
    Start(Permit<Start>),
    Restart(Permit<Restart>),
    Stop(Permit<Stop>),
    Rollback(Permit<Rollback>),
}

impl WritePermit {
    pub fn action(&self) -> WriteAction {
        match self {
            WritePermit::Start(_) => WriteAction::Start,
            WritePermit::Restart(_) => WriteAction::Restart,
            WritePermit::Stop(_) => WriteAction::Stop,
            WritePermit::Rollback(_) => WriteAction::Rollback,
        }
    }

    pub fn tier(&self) -> Tier {
        match self {
            WritePermit::Start(p) => p.tier(),
            WritePermit::Restart(p) => p.tier(),
            WritePermit::Stop(p) => p.tier(),
            WritePermit::Rollback(p) => p.tier(),
        }
    }

    pub fn to_read(&self) -> Permit<Read> {
        match self {
            WritePermit::Start(p) => p.to_read(),
            WritePermit::Restart(p) => p.to_read(),
            WritePermit::Stop(p) => p.to_read(),
            WritePermit::Rollback(p) => p.to_read(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Policy {
    targets: TargetsConfig,
    actions: ActionsConfig,
}

impl Policy {
    pub fn new(targets: TargetsConfig, actions: ActionsConfig) -> Policy {
        Policy { targets, actions }
    }

    /// The configured selectors, as the operator wrote them.
    pub fn targets(&self) -> &TargetsConfig {
        &self.targets
    }

    pub fn action_enabled(&self, action: WriteAction) -> bool {
        match action {
            WriteAction::Start => self.actions.start.enabled,
            WriteAction::Restart => self.actions.restart.enabled,
            WriteAction::Stop => self.actions.stop.enabled,
            WriteAction::Rollback => self.actions.rollback.enabled,
        }
    }

    /// Every write needs an approval; the tier says how disruptive it is.
    pub fn tier(action: WriteAction) -> Tier {
        match action {
            WriteAction::Start => Start::TIER,
            WriteAction::Restart => Restart::TIER,
            WriteAction::Stop => Stop::TIER,
            WriteAction::Rollback => Rollback::TIER,
        }
    }

    /// A container outside the selectors is invisible to reads and refused
    /// for writes.
    pub fn target_allowed(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if labels.contains_key(DRYDOCK_ROLE_LABEL) {
            return false;
        }
        let name = name.trim_start_matches('/');
        let t = &self.targets;
        // An empty selector list does not restrict; the config refuses a
        // `targets` section with all three empty.
        let name_ok = t.allow_names.is_empty()
            || t.allow_names
                .iter()
                .any(|g| glob_match::glob_match(g, name));
        let labels_ok = t.allow_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
        let project_ok = t.allow_compose_projects.is_empty()
            || labels
                .get(COMPOSE_PROJECT_LABEL)
                .is_some_and(|p| t.allow_compose_projects.iter().any(|a| a == p));
        name_ok && labels_ok && project_ok
    }

    pub fn permit_read(&self, target: &ResolvedTarget) -> Result<Permit<Read>, PolicyError> {
        self.check_target(target)?;
        Ok(Permit::new(target))
    }

    /// Policy half of a write. The approval is checked after this, by the
    /// approval module, against the same resolved target.
    pub fn permit_write(
        &self,
        action: WriteAction,
        target: &ResolvedTarget,
    ) -> Result<WritePermit, PolicyError> {
        // The target first: a container outside the selectors must look
        // the same whatever action is asked for (a disabled action must not
        // become a way to probe which containers exist).
        self.check_target(target)?;
        if !self.action_enabled(action) {
            return Err(PolicyError::ActionDisabled {
                action: action.as_str(),
            });
        }
        Ok(match action {
            WriteAction::Start => WritePermit::Start(Permit::new(target)),
            WriteAction::Restart => WritePermit::Restart(Permit::new(target)),
            WriteAction::Stop => WritePermit::Stop(Permit::new(target)),
            WriteAction::Rollback => WritePermit::Rollback(Permit::new(target)),
        })
    }

    fn check_target(&self, target: &ResolvedTarget) -> Result<(), PolicyError> {
        if let Some(role) = target.labels.get(DRYDOCK_ROLE_LABEL) {
            return Err(PolicyError::Drydock {
                name: target.name.clone(),
                role: role.chars().take(64).collect(),
            });
        }
        if self.target_allowed(&target.name, &target.labels) {
            Ok(())
        } else {
            Err(PolicyError::TargetNotAllowed {
                name: target.name.clone(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ActionToggle;

    fn target(name: &str, labels: &[(&str, &str)]) -> ResolvedTarget {
        ResolvedTarget {
            id: "f".repeat(64),
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn selector_table() {
        let managed: BTreeMap<String, String> =
            [("drydock.managed".to_string(), "true".to_string())].into();
        let rows: &[(TargetsConfig, ResolvedTarget, bool)] = &[
            (
                TargetsConfig {
                    allow_names: vec!["*".into()],
                    ..Default::default()
                },
                target("/anything", &[]),
                true,
            ),
            // drydock's own containers, whatever the selectors say.
            (
                TargetsConfig {
                    allow_names: vec!["*".into()],
                    ..Default::default()
                },
                target("/drydock-executor-1", &[(DRYDOCK_ROLE_LABEL, "executor")]),
                false,
            ),
            (
                TargetsConfig {
                    allow_labels: [("a".to_string(), "b".to_string())].into(),
                    ..Default::default()
                },
                target("/agent", &[("a", "b"), (DRYDOCK_ROLE_LABEL, "agent")]),
                false,
            ),
            (
                TargetsConfig {
                    allow_names: vec!["shop-*".into()],
                    ..Default::default()
                },
                target("/shop-db-1", &[]),
                true,
            ),
            (
                TargetsConfig {
                    allow_names: vec!["shop-*".into()],
                    ..Default::default()
                },
                target("/other", &[]),
                false,
            ),
            (
                TargetsConfig {
                    allow_labels: managed.clone(),
                    ..Default::default()
                },
                target("x", &[("drydock.managed", "true")]),
                true,
            ),
            (
                TargetsConfig {
                    allow_labels: managed.clone(),
                    ..Default::default()
                },
                target("x", &[("drydock.managed", "false")]),
                false,
            ),
            (
                TargetsConfig {
                    allow_labels: managed,
                    ..Default::default()
                },
                target("x", &[]),
                false,
            ),
            (
                TargetsConfig {
                    allow_compose_projects: vec!["shop".into()],
                    ..Default::default()
                },
                target("x", &[(COMPOSE_PROJECT_LABEL, "shop")]),
                true,
            ),
            (
                TargetsConfig {
                    allow_compose_projects: vec!["shop".into()],
                    ..Default::default()
                },
                target("x", &[(COMPOSE_PROJECT_LABEL, "other")]),
                false,
            ),
        ];
        for (targets, t, want) in rows {
            let policy = Policy::new(targets.clone(), ActionsConfig::default());
            assert_eq!(policy.permit_read(t).is_ok(), *want, "{targets:?} {t:?}");
            assert_eq!(policy.permit_write(WriteAction::Restart, t).is_ok(), *want);
        }
    }

    #[test]
    fn disabled_action_is_refused_even_for_allowed_targets() {
        let actions = ActionsConfig {
            restart: ActionToggle { enabled: false },
            start: ActionToggle { enabled: true },
            stop: ActionToggle { enabled: false },
            rollback: ActionToggle { enabled: false },
        };
        let policy = Policy::new(TargetsConfig::default(), actions);
        assert_eq!(
            policy
                .permit_write(WriteAction::Stop, &target("a", &[]))
                .unwrap_err(),
            PolicyError::ActionDisabled { action: "stop" }
        );
        assert_eq!(Policy::tier(WriteAction::Stop), Tier::Disruptive);
        assert_eq!(
            policy
                .permit_write(WriteAction::Rollback, &target("a", &[]))
                .unwrap_err(),
            PolicyError::ActionDisabled { action: "rollback" }
        );
        assert_eq!(Policy::tier(WriteAction::Rollback), Tier::Disruptive);
        assert!(!ActionsConfig::default().rollback.enabled, "off by default");
        assert_eq!(
            policy
                .permit_write(WriteAction::Restart, &target("a", &[]))
                .unwrap_err(),
            PolicyError::ActionDisabled { action: "restart" }
        );
        assert!(policy
            .permit_write(WriteAction::Start, &target("a", &[]))
            .is_ok());
    }
}
