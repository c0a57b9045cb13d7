//! The operator's side of drydock: the `drydock` CLI as a library, so the
//! end-to-end tests use the same PKI, home layout and approval signing as the
//! product. It talks to the agent only; it never links bollard (the demo's
//! workload set-up uses the `docker` CLI, outside drydock's control path).
//!
//! Modules, bottom up (a module imports only from its own layer or below;
//! `tests/e2e/architecture.rs` keeps it so):
//! 1. words and checks: `exit`, `text`, `term`, `claims`, `pki`, `fixture`;
//! 2. the operator's home: `home`;
//! 3. the command line and the agent's API: `args`, `client`;
//! 4. reading and deciding: `render`, `approve`;
//! 5. the flows: `ask`, `show`, `grant`, `host`, `daemons`, `doctor`,
//!    `backup`, `memory` (notes, schedules);
//! 6. the surfaces: `demo`, `mcp`, `ui`;
//! 7. `commands`, the table from a command line to the flows.
#![forbid(unsafe_code)]

pub mod approve;
pub mod args;
pub mod ask;
pub mod backup;
pub mod claims;
pub mod client;
pub mod commands;
pub mod daemons;
pub mod demo;
pub mod doctor;
pub mod exit;
pub mod fixture;
pub mod grant;
pub mod home;
pub mod host;
pub mod mcp;
pub mod memory;
pub mod pki;
pub mod render;
pub mod show;
pub mod ssh_agent;
pub mod term;
pub mod text;
pub mod ui;
