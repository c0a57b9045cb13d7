//! The fault classes: the stable, machine-readable name of a cause. A
//! diagnosis names one, a model may answer only with one, and an automation
//! grant may be limited to some, which the executor enforces. So they are
//! part of the contract, defined here once.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FaultClass {
    /// A dependency refused, timed out or does not resolve.
    DependencyUnavailable,
    /// A missing variable, an invalid configuration, a missing file or module.
    ConfigError,
    /// The address it binds is in use, or Docker could not publish its port.
    PortConflict,
    /// The kernel killed it for its memory limit, or its runtime ran out.
    OomKilled,
    /// A non-zero exit, panic or uncaught exception not covered above.
    Crash,
    /// Restarting repeatedly.
    CrashLoop,
    /// Running, but its healthcheck fails.
    Unhealthy,
    /// The healthcheck itself cannot run (its command is missing).
    HealthcheckBroken,
    PermissionDenied,
    DiskFull,
    /// A setting of the Docker host, outside the container and outside
    /// Docker, is too low or missing: a kernel parameter
    /// (`vm.max_map_count`), a file-descriptor, process or inotify limit, a
    /// kernel module. No write on the container can change it.
    HostConfig,
    /// A Swarm task no node can run: resources short, a constraint no node
    /// meets, a plugin missing, or the nodes that could are down or drained.
    Unschedulable,
    /// The image cannot be found or pulled where it must run.
    ImageUnavailable,
    /// Exited 0, or stopped by a signal someone sent (not an OOM kill).
    Stopped,
    /// Nothing wrong was found.
    Healthy,
    Unknown,
}

impl FaultClass {
    pub const ALL: [FaultClass; 16] = [
        FaultClass::DependencyUnavailable,
        FaultClass::ConfigError,
        FaultClass::PortConflict,
        FaultClass::OomKilled,
        FaultClass::Crash,
        FaultClass::CrashLoop,
        FaultClass::Unhealthy,
        FaultClass::HealthcheckBroken,
        FaultClass::PermissionDenied,
        FaultClass::DiskFull,
        FaultClass::HostConfig,
        FaultClass::Unschedulable,
        FaultClass::ImageUnavailable,
        FaultClass::Stopped,
        FaultClass::Healthy,
        FaultClass::Unknown,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            FaultClass::DependencyUnavailable => "dependency_unavailable",
            FaultClass::ConfigError => "config_error",
            FaultClass::PortConflict => "port_conflict",
            FaultClass::OomKilled => "oom_killed",
            FaultClass::Crash => "crash",
            FaultClass::CrashLoop => "crash_loop",
            FaultClass::Unhealthy => "unhealthy",
            FaultClass::HealthcheckBroken => "healthcheck_broken",
            FaultClass::PermissionDenied => "permission_denied",
            FaultClass::DiskFull => "disk_full",
            FaultClass::HostConfig => "host_config",
            FaultClass::Unschedulable => "unschedulable",
            FaultClass::ImageUnavailable => "image_unavailable",
            FaultClass::Stopped => "stopped",
            FaultClass::Healthy => "healthy",
            FaultClass::Unknown => "unknown",
        }
    }

    pub fn parse(name: &str) -> Option<FaultClass> {
        FaultClass::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for FaultClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The classes by name, in the order of `FaultClass::ALL`: what a model's
/// answer schema enumerates and a grant's `classes` are checked against.
pub const FAULT_CLASSES: [&str; 16] = {
    let mut names = [""; 16];
    let mut i = 0;
    while i < names.len() {
        names[i] = FaultClass::ALL[i].as_str();
        i += 1;
    }
    names
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_serde_names_and_parse_back() {
        for c in FaultClass::ALL {
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::json!(c.as_str())
            );
            assert_eq!(FaultClass::parse(c.as_str()), Some(c));
        }
        assert_eq!(FAULT_CLASSES[0], "dependency_unavailable");
        assert_eq!(FaultClass::parse("cosmic_rays"), None);
    }
}
