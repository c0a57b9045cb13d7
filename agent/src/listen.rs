//! The API's transport. Locally a unix socket in a folder only the agent's
//! user can enter, and every connection's peer credentials are checked
//! (same uid, or the configured group), so no other local user can reach
//! the API or squat its address while the agent is down. Plain TCP only when
//! the operator asked for it, with a warning.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use tokio::net::{UnixListener, UnixStream};

/// Whether a peer with `uid`/`gid` may use the socket of an agent running
/// as `own_uid`.
pub fn peer_allowed(uid: u32, gid: u32, own_uid: u32, allowed_gid: Option<u32>) -> bool {
    uid == own_uid || allowed_gid == Some(gid)
}

/// A unix listener that drops connections from peers who are neither the
/// agent's user nor in the allowed group.
pub struct PeerCheckedListener {
    inner: UnixListener,
    own_uid: u32,
    allowed_gid: Option<u32>,
    path: PathBuf,
}

impl PeerCheckedListener {
    /// Bind `path`. Its folder must exist and be private to the agent's user
    /// (0700; 0750 when a group is allowed), so nobody else can reach or
    /// replace the socket. A stale socket from an earlier run is replaced;
    /// any other file there is refused.
    pub fn bind(path: &Path, allowed_gid: Option<u32>) -> anyhow::Result<PeerCheckedListener> {
        let dir = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .context("listen: the socket needs a folder")?;
        let mode = drydock_daemon::files::mode_of("listen", dir)
            .with_context(|| format!("listen: the socket's folder {}", dir.display()))?;
        let too_open = if allowed_gid.is_some() { 0o027 } else { 0o077 };
        if mode & too_open != 0 {
            bail!(
                "listen: the socket's folder {} has mode {:o}; it must be private to the agent's user (chmod 700 {})",
                dir.display(),
                mode & 0o777,
                dir.display()
            );
        }
        match std::fs::symlink_metadata(path) {
            Ok(meta) => {
                use std::os::unix::fs::FileTypeExt as _;
                if !meta.file_type().is_socket() {
                    bail!(
                        "listen: {} exists and is not a socket; refusing to replace it",
                        path.display()
                    );
                }
                std::fs::remove_file(path).with_context(|| {
                    format!("listen: cannot replace the stale socket {}", path.display())
                })?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("listen: {}", path.display())),
        }
        let inner = UnixListener::bind(path)
            .with_context(|| format!("listen: cannot bind {}", path.display()))?;
        Ok(PeerCheckedListener {
            inner,
            own_uid: nix::unistd::geteuid().as_raw(),
            allowed_gid,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl axum::serve::Listener for PeerCheckedListener {
    type Io = UnixStream;
    type Addr = tokio::net::unix::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = match self.inner.accept().await {
                Ok(pair) => pair,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            };
            match getsockopt(&stream, PeerCredentials) {
                Ok(cred)
                    if peer_allowed(cred.uid(), cred.gid(), self.own_uid, self.allowed_gid) =>
                {
                    return (stream, addr)
                }
                Ok(cred) => tracing::warn!(
                    peer_uid = cred.uid(),
                    peer_gid = cred.gid(),
                    peer_pid = cred.pid(),
                    "refused an API connection from another user"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "refused an API connection without peer credentials")
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_user_or_the_allowed_group() {
        assert!(peer_allowed(1000, 1000, 1000, None));
        assert!(!peer_allowed(1001, 1000, 1000, None));
        assert!(peer_allowed(1001, 50, 1000, Some(50)));
        assert!(!peer_allowed(1001, 51, 1000, Some(50)));
    }

    #[tokio::test]
    async fn an_open_folder_and_a_foreign_file_are_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        std::fs::create_dir(&run).unwrap();
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = PeerCheckedListener::bind(&run.join("a.sock"), None)
            .err()
            .unwrap();
        assert!(err.to_string().contains("chmod 700"), "{err}");
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(run.join("a.sock"), "not a socket").unwrap();
        let err = PeerCheckedListener::bind(&run.join("a.sock"), None)
            .err()
            .unwrap();
        assert!(err.to_string().contains("not a socket"), "{err}");
        std::fs::remove_file(run.join("a.sock")).unwrap();
        let first = PeerCheckedListener::bind(&run.join("a.sock"), None).unwrap();
        drop(first);
        // A stale socket of an earlier run is replaced.
        assert!(PeerCheckedListener::bind(&run.join("a.sock"), None).is_ok());
    }
}
