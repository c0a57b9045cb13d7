//! The operator's side of drydock: the `drydock` CLI as a library, so the
//! end-to-end tests use the same PKI, home layout and approval signing as the
//! product. It talks to the agent only; it never links bollard (the demo's
//! workload set-up uses the `docker` CLI, outside drydock's control path).
#![forbid(unsafe_code)]

pub mod args;
pub mod ask;
pub mod client;
pub mod daemons;
pub mod demo;
pub mod doctor;
pub mod fixture;
pub mod grant;
pub mod home;
pub mod mcp;
pub mod pki;
pub mod show;
pub mod term;
pub mod ui;
