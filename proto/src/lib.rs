//! The contract between drydock's parts: the executor's gRPC API (generated
//! from `proto/drydock/executor/v1/executor.proto`) and the approval claims
//! that a human's key signs. It lives in its own crate so the CLI (which signs)
//! and the executor (which verifies) share one definition of the signed bytes,
//! and so neither Docker nor model code can leak into the contract.
#![forbid(unsafe_code)]

pub mod approval;
pub mod docker;
pub mod fault;
pub mod grant;

pub use fault::{FaultClass, FAULT_CLASSES};

/// Generated protobuf and tonic types. They stop at the gRPC edge: the daemons
/// convert them into their own domain types.
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("drydock.executor.v1");
}
