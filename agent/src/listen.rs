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
        // connect() needs write permission on the socket: the allowed group
        // gets it (the socket has the agent's group, so run the agent with
        // that group as its own, as deploy/stack.yaml does).
        use std::os::unix::fs::PermissionsExt as _;
        let socket_mode = if allowed_gid.is_some() { 0o660 } else { 0o600 };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(socket_mode))
            .with_context(|| format!("listen: cannot set the mode of {}", path.display()))?;
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

/// HTTPS on TCP: TLS handshakes run in tasks of their own (bounded in time),
/// so a slow or silent client cannot hold up the others.
pub struct TlsListener {
    ready: tokio::sync::mpsc::Receiver<(
        tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
        std::net::SocketAddr,
    )>,
    local: std::net::SocketAddr,
}

/// rustls server config from PEM files (ring provider, TLS 1.2 and 1.3).
pub fn tls_server_config(
    cert: &Path,
    key: &Path,
) -> anyhow::Result<std::sync::Arc<tokio_rustls::rustls::ServerConfig>> {
    use tokio_rustls::rustls::pki_types::{pem::PemObject as _, CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert)
        .with_context(|| format!("api.tls.cert {}", cert.display()))?
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("api.tls.cert {}", cert.display()))?;
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("api.tls.key {}", key.display()))?;
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut config = tokio_rustls::rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("api.tls: the certificate and key do not fit")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(std::sync::Arc::new(config))
}

impl TlsListener {
    pub async fn bind(
        addr: std::net::SocketAddr,
        config: std::sync::Arc<tokio_rustls::rustls::ServerConfig>,
    ) -> anyhow::Result<TlsListener> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listen {addr}"))?;
        let local = listener.local_addr()?;
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let (tx, ready) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                let Ok((tcp, peer)) = listener.accept().await else {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                };
                let _ = tcp.set_nodelay(true);
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(
                        std::time::Duration::from_secs(10),
                        acceptor.accept(tcp),
                    )
                    .await
                    {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => {
                            tracing::warn!(%peer, error = %e, "API TLS handshake refused")
                        }
                        Err(_) => tracing::warn!(%peer, "API TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            if let Some(pair) = self.ready.recv().await {
                return pair;
            }
            // The accept task ended (it never does): do not spin.
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
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
