//! drydock-agent: the unprivileged half of drydock. It reasons (rules engine
//! by default), keeps each request's state machine in SQLite, serves the API
//! the CLI uses, and asks the executor for everything it knows about Docker.
//!
//! Architecture invariant: this crate never links bollard and never opens a
//! Docker socket; it never holds an approver's private key.
#![forbid(unsafe_code)]

pub mod api;
pub mod change;
pub mod config;
pub mod dependency;
pub mod discovery;
pub mod disk;
pub mod engine;
pub mod executor_client;
pub mod grants;
pub mod hosts;
pub mod listen;
pub mod llm;
pub mod memory;
pub mod model;
pub mod notify;
pub mod planner;
pub mod rules;
pub mod runbook;
pub mod schedule;
pub mod store;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
pub mod text;
pub mod updates;
pub mod watch;
