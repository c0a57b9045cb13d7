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

use drydock_proto::approval::{
    CommitId, ContainerAction, ContainerWrite, ImageId, ServiceAction, ServiceWrite, WriteAction,
};

use crate::config::{ActionsConfig, TargetsConfig};

pub const COMPOSE_PROJECT_LABEL: &str = "com.docker.compose.project";
pub use drydock_proto::grant::STACK_NAMESPACE_LABEL;
/// Set on drydock's own containers (the images carry it, and so do the
/// compose services): the executor never shows or acts on them, so neither
/// a confused model nor a compromised agent can restart or stop drydock.
pub const DRYDOCK_ROLE_LABEL: &str = "io.drydock.role";
/// The label Swarm puts on each task's container: the service's id.
pub const SWARM_TASK_SERVICE_LABEL: &str = "com.docker.swarm.service.id";

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
    /// The reference it was created from (`Config.Image`).
    pub image_ref: String,
}

/// A Swarm service as the engine reports it at call time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResolvedService {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The spec version: an approval binds it, and a write sends it back
    /// so the engine refuses if the spec changed in between.
    pub version: u64,
    /// The image reference its spec runs.
    pub image: String,
    /// The previous spec's image, when there is a previous spec.
    pub previous_image: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("action {action} is disabled by the executor's policy")]
    ActionDisabled { action: &'static str },
    #[error("container {name} is outside the executor's target selectors")]
    TargetNotAllowed { name: String },
    #[error("container {name} is one of drydock's own ({DRYDOCK_ROLE_LABEL}={role}); drydock never shows or acts on itself")]
    Drydock { name: String, role: String },
    #[error("service {name} is outside the executor's service selectors (targets.services)")]
    ServiceNotAllowed { name: String },
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
/// Re-creating one container with a newer image of its tag, pulled (T2).
#[derive(Debug)]
pub enum Update {}
/// Building an image for one container from its build context (T2).
#[derive(Debug)]
pub enum Build {}
/// Replacing a Swarm service's tasks with the same spec (T1).
#[derive(Debug)]
pub enum ForceUpdate {}
/// Returning a Swarm service to its previous spec (T2).
#[derive(Debug)]
pub enum ServiceRollback {}
/// Moving a Swarm service's spec to a newer image of its tag (T2).
#[derive(Debug)]
pub enum ServiceUpdate {}

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
    Rollback = Tier::Disruptive,
    Update = Tier::Disruptive,
    Build = Tier::Disruptive
);

mod sealed_service {
    pub trait Sealed {}
}

/// What a service permit allows; implemented only here, and only for the
/// service kinds: a `ServicePermit<Restart>` does not exist.
pub trait AllowsService: sealed_service::Sealed {
    const TIER: Tier;
}

macro_rules! allows_service {
    ($($kind:ident = $tier:expr),*) => {$(
        impl sealed_service::Sealed for $kind {}
        impl AllowsService for $kind {
            const TIER: Tier = $tier;
        }
    )*};
}
allows_service!(
    Read = Tier::Read,
    ForceUpdate = Tier::Change,
    ServiceRollback = Tier::Disruptive,
    ServiceUpdate = Tier::Disruptive
);

/// Proof that policy allowed `A` on one Swarm service, at the spec version
/// it was resolved at.
#[derive(Debug)]
pub struct ServicePermit<A: AllowsService> {
    service_id: String,
    version: u64,
    allows: PhantomData<A>,
}

impl<A: AllowsService> ServicePermit<A> {
    fn new(service: &ResolvedService) -> ServicePermit<A> {
        ServicePermit {
            service_id: service.id.clone(),
            version: service.version,
            allows: PhantomData,
        }
    }

    pub fn service_id(&self) -> &str {
        &self.service_id
    }

    /// The spec version policy (and an approval) saw.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn to_read(&self) -> ServicePermit<Read> {
        ServicePermit {
            service_id: self.service_id.clone(),
            version: self.version,
            allows: PhantomData,
        }
    }
}

/// The permit for one service write, by action.
#[derive(Debug)]
pub enum ServiceWritePermit {
    ForceUpdate(ServicePermit<ForceUpdate>),
    Rollback(ServicePermit<ServiceRollback>),
    /// An update carries the manifest digest its spec moves to.
    Update {
        permit: ServicePermit<ServiceUpdate>,
        digest: ImageId,
    },
}

impl ServiceWritePermit {
    pub fn action(&self) -> ServiceAction {
        match self {
            ServiceWritePermit::ForceUpdate(_) => ServiceAction::ForceUpdate,
            ServiceWritePermit::Rollback(_) => ServiceAction::Rollback,
            ServiceWritePermit::Update { .. } => ServiceAction::Update,
        }
    }

    pub fn to_read(&self) -> ServicePermit<Read> {
        match self {
            ServiceWritePermit::ForceUpdate(p) => p.to_read(),
            ServiceWritePermit::Rollback(p) => p.to_read(),
            ServiceWritePermit::Update { permit, .. } => permit.to_read(),
        }
    }
}

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
    /// A rollback carries the image it runs: a rollback permit without one
    /// cannot be made.
    Rollback {
        permit: Permit<Rollback>,
        to_image: ImageId,
    },
    /// An update carries the manifest digest it pulls.
    Update {
        permit: Permit<Update>,
        digest: ImageId,
    },
    /// An update to a built image carries the commit it was built from.
    UpdateBuilt {
        permit: Permit<Update>,
        commit: CommitId,
    },
    /// A build carries the commit it builds.
    Build {
        permit: Permit<Build>,
        commit: CommitId,
    },
}

impl WritePermit {
    pub fn action(&self) -> ContainerAction {
        match self {
            WritePermit::Start(_) => ContainerAction::Start,
            WritePermit::Restart(_) => ContainerAction::Restart,
            WritePermit::Stop(_) => ContainerAction::Stop,
            WritePermit::Rollback { .. } => ContainerAction::Rollback,
            WritePermit::Update { .. } | WritePermit::UpdateBuilt { .. } => ContainerAction::Update,
            WritePermit::Build { .. } => ContainerAction::Build,
        }
    }

    pub fn to_read(&self) -> Permit<Read> {
        match self {
            WritePermit::Start(p) => p.to_read(),
            WritePermit::Restart(p) => p.to_read(),
            WritePermit::Stop(p) => p.to_read(),
            WritePermit::Rollback { permit, .. } => permit.to_read(),
            WritePermit::Update { permit, .. } | WritePermit::UpdateBuilt { permit, .. } => {
                permit.to_read()
            }
            WritePermit::Build { permit, .. } => permit.to_read(),
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
            WriteAction::ForceUpdate => self.actions.force_update.enabled,
            WriteAction::ServiceRollback => self.actions.service_rollback.enabled,
            // One toggle for updates, of containers and of services.
            WriteAction::Update | WriteAction::ServiceUpdate => self.actions.update.enabled,
            WriteAction::Build => self.actions.build.enabled,
        }
    }

    /// Every write needs an approval; the tier says how disruptive it is.
    pub fn tier(action: WriteAction) -> Tier {
        match action {
            WriteAction::Start => Start::TIER,
            WriteAction::Restart => Restart::TIER,
            WriteAction::Stop => Stop::TIER,
            WriteAction::Rollback => <Rollback as Allows>::TIER,
            WriteAction::ForceUpdate => <ForceUpdate as AllowsService>::TIER,
            WriteAction::ServiceRollback => <ServiceRollback as AllowsService>::TIER,
            WriteAction::Update => <Update as Allows>::TIER,
            WriteAction::ServiceUpdate => <ServiceUpdate as AllowsService>::TIER,
            WriteAction::Build => Build::TIER,
        }
    }

    /// A container outside the selectors is invisible to reads and refused
    /// for writes. So is a Swarm task's container, whatever the selectors
    /// say: Swarm replaces it (the repair is the service's), and a service
    /// outside `targets.services` must not show through its tasks.
    pub fn target_allowed(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if labels.contains_key(DRYDOCK_ROLE_LABEL)
            || labels.contains_key(SWARM_TASK_SERVICE_LABEL)
            || !self.targets.selects_containers()
        {
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

    /// A service outside `targets.services` (or with none configured) is
    /// invisible to reads and refused for writes, as a container is.
    pub fn service_allowed(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        let Some(s) = &self.targets.services else {
            return false;
        };
        if labels.contains_key(DRYDOCK_ROLE_LABEL) || s.is_empty() {
            return false;
        }
        let name_ok = s.allow_names.is_empty()
            || s.allow_names
                .iter()
                .any(|g| glob_match::glob_match(g, name));
        let labels_ok = s.allow_labels.iter().all(|(k, v)| labels.get(k) == Some(v));
        let stack_ok = s.allow_stacks.is_empty()
            || labels
                .get(STACK_NAMESPACE_LABEL)
                .is_some_and(|st| s.allow_stacks.iter().any(|a| a == st));
        name_ok && labels_ok && stack_ok
    }

    /// Whether `ListNodes` may answer node labels.
    pub fn node_labels(&self) -> bool {
        self.targets
            .services
            .as_ref()
            .is_some_and(|s| s.node_labels)
    }

    pub fn permit_service_read(
        &self,
        service: &ResolvedService,
    ) -> Result<ServicePermit<Read>, PolicyError> {
        self.check_service(service)?;
        Ok(ServicePermit::new(service))
    }

    /// Policy half of a service write; the approval or grant is checked
    /// after it, against the same resolved service.
    pub fn permit_service_write(
        &self,
        write: &ServiceWrite,
        service: &ResolvedService,
    ) -> Result<ServiceWritePermit, PolicyError> {
        self.check_service(service)?;
        let action = write.action();
        if !self.action_enabled(action.into()) {
            return Err(PolicyError::ActionDisabled {
                action: action.as_str(),
            });
        }
        Ok(match write {
            ServiceWrite::ForceUpdate => {
                ServiceWritePermit::ForceUpdate(ServicePermit::new(service))
            }
            ServiceWrite::Rollback => ServiceWritePermit::Rollback(ServicePermit::new(service)),
            ServiceWrite::Update { digest } => ServiceWritePermit::Update {
                permit: ServicePermit::new(service),
                digest: digest.clone(),
            },
        })
    }

    fn check_service(&self, service: &ResolvedService) -> Result<(), PolicyError> {
        if let Some(role) = service.labels.get(DRYDOCK_ROLE_LABEL) {
            return Err(PolicyError::Drydock {
                name: service.name.clone(),
                role: role.chars().take(64).collect(),
            });
        }
        if self.service_allowed(&service.name, &service.labels) {
            Ok(())
        } else {
            Err(PolicyError::ServiceNotAllowed {
                name: service.name.clone(),
            })
        }
    }

    pub fn permit_read(&self, target: &ResolvedTarget) -> Result<Permit<Read>, PolicyError> {
        self.check_target(target)?;
        Ok(Permit::new(target))
    }

    /// Policy half of a write. The approval is checked after this, by the
    /// approval module, against the same resolved target.
    pub fn permit_write(
        &self,
        write: &ContainerWrite,
        target: &ResolvedTarget,
    ) -> Result<WritePermit, PolicyError> {
        // The target first: a container outside the selectors must look
        // the same whatever action is asked for (a disabled action must not
        // become a way to probe which containers exist).
        self.check_target(target)?;
        let action: ContainerAction = write.action();
        if !self.action_enabled(action.into()) {
            return Err(PolicyError::ActionDisabled {
                action: action.as_str(),
            });
        }
        Ok(match write {
            ContainerWrite::Start => WritePermit::Start(Permit::new(target)),
            ContainerWrite::Restart => WritePermit::Restart(Permit::new(target)),
            ContainerWrite::Stop => WritePermit::Stop(Permit::new(target)),
            ContainerWrite::Rollback { to_image } => WritePermit::Rollback {
                permit: Permit::new(target),
                to_image: to_image.clone(),
            },
            ContainerWrite::Update { digest, .. } => WritePermit::Update {
                permit: Permit::new(target),
                digest: digest.clone(),
            },
            ContainerWrite::UpdateBuilt { commit } => WritePermit::UpdateBuilt {
                permit: Permit::new(target),
                commit: commit.clone(),
            },
            ContainerWrite::Build { commit } => WritePermit::Build {
                permit: Permit::new(target),
                commit: commit.clone(),
            },
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
mod tests;
