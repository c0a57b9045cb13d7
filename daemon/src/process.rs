//! Process hardening done first thing in each daemon's `serve`.

use nix::sys::resource::{setrlimit, Resource};
use nix::sys::stat::{umask, Mode};

/// Files the daemon creates (stores, WAL companions, logs) are private to its
/// user by default, and a crash never writes a core file that would hold key
/// material or approval signatures.
pub fn harden() {
    umask(Mode::from_bits_truncate(0o077));
    if let Err(e) = setrlimit(Resource::RLIMIT_CORE, 0, 0) {
        tracing::warn!(error = %e, "cannot disable core dumps");
    }
}
