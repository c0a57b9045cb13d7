//! Plumbing that both daemons need and neither should own: reading a YAML
//! config file with errors that name the key, human durations and sizes, shutdown
//! signals, log set-up, private-file checks and process hardening.
//!
//! It exists so the executor and the agent cannot drift apart on these
//! (a private-key check that one daemon tightens and the other forgets is a
//! hole). It knows nothing of Docker, gRPC or models; `drydock-proto` stays the
//! wire contract and nothing else.
#![forbid(unsafe_code)]

pub mod config;
pub mod duration;
pub mod files;
pub mod logging;
pub mod process;
pub mod signals;
pub mod size;
#[cfg(feature = "sqlite")]
pub mod sqlite;
pub mod tls;

pub use config::{invalid, load_yaml, ConfigError};
