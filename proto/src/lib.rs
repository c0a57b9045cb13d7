//! The contract between drydock's parts: the executor's gRPC API (generated
//! from `proto/drydock/executor/v1/executor.proto`) and the approval claims
//! that a human's key signs. It lives in its own crate so the CLI (which signs)
//! and the executor (which verifies) share one definition of the signed bytes,
//! and so neither Docker nor model code can leak into the contract.
#![forbid(unsafe_code)]

pub mod approval;
pub mod grant;

/// The rules engine's fault classes: what a diagnosis names, what a model
/// may answer, and what an automation grant may be limited to.
pub const FAULT_CLASSES: [&str; 13] = [
    "dependency_unavailable",
    "config_error",
    "port_conflict",
    "oom_killed",
    "crash",
    "crash_loop",
    "unhealthy",
    "healthcheck_broken",
    "permission_denied",
    "disk_full",
    "stopped",
    "healthy",
    "unknown",
];

/// Generated protobuf and tonic types. They stop at the gRPC edge: the daemons
/// convert them into their own domain types.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("drydock.executor.v1");
}
