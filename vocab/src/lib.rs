//! drydock-vocab: the words every operator-facing part of drydock speaks.
//!
//! The agent serializes these types into its REST API and event stream; the
//! CLI, its MCP server and the console (through the CLI) read them back and
//! match on them exhaustively. A new status, event kind or write action is
//! added here once, and a consumer that forgets it fails to compile (or, for
//! the console's script, fails a test), never silently.
//!
//! The wire format is the documented one (`docs/api.md`): field names are
//! added over time, never renamed.
//!
//! Architecture invariant: this crate holds data and the words for it, no
//! behaviour that needs I/O. The words that the executor enforces too (a
//! fault class a grant is limited to, a write action an approval names) are
//! defined once in the contract crate, `drydock-proto`, and re-exported here.
#![forbid(unsafe_code)]

pub mod api;
pub mod build;
pub mod change;
pub mod container;
pub mod event;
pub mod evidence;
pub mod notify;
pub mod request;
pub mod swarm;
pub mod time;
pub mod update;

pub use api::*;
pub use build::{BuildOptions, BuildSourceView};
pub use change::*;
pub use container::*;
pub use drydock_proto::approval::{ImageId, ServiceClaims, WriteAction};
pub use drydock_proto::docker::*;
pub use drydock_proto::FaultClass;
pub use event::*;
pub use evidence::kind;
pub use evidence::{
    AfterWrite, ContainerSnapshot, DependencyState, Evidence, EvidenceKind, EvidencePayload,
    FailureShape, History, HostUnreachable, NotesFound, PastRepair, PastRequest, PreWriteSnapshot,
    RunbookEntry, ServiceSnapshot, HELD_FOR_SECS, RESTARTS_BEFORE_TELLING,
};
pub use notify::{DeliveryStatus, NotifyEvent};
pub use request::*;
pub use swarm::*;
pub use time::{now_rfc3339, span, unix_now};
pub use update::{NotChecked, UpdateFound, UpdateList, UPDATE_LABEL};
