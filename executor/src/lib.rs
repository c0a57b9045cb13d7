//! drydock-executor: the only drydock process that holds Docker's power.
//!
//! It trusts nothing the agent says that it cannot check. Reads are served
//! within the configured policy; writes additionally need an approval signed
//! by a configured human key, bound to the exact action and container. There
//! is no exec and no command RPC. See `service` for the call pipeline.
#![forbid(unsafe_code)]

pub mod approval;
pub mod audit;
pub mod build;
pub mod config;
pub mod docker;
pub mod grants;
pub mod http_check;
pub mod policy;
pub mod prehandler;
pub mod ratelimit;
pub mod redact;
pub mod registry;
pub mod revocations;
pub mod server;
pub mod service;
pub mod tls;
