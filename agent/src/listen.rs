//! The API's transport. Locally a unix socket in a folder only the agent's
//! user can enter, and every connection's peer credentials are checked
//! (same uid, root, or the configured group), so no other local user can
//! reach the API or squat its address while the agent is down. A refused
//! peer is told why in one HTTP answer (which ids the socket admits, and
//! its own), then the connection closes. Plain TCP only when the operator
//! asked for it, with a warning.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use tokio::net::{UnixListener, UnixStream};

/// Whether a peer with `uid`/`gid` may use the socket of an agent running
/// as `own_uid`. Root is admitted: it can read the token and the agent's
/// memory anyway, and on a Swarm manager it is who deploys drydock.
pub fn peer_allowed(uid: u32, gid: u32, own_uid: u32, allowed_gid: Option<u32>) -> bool {
    uid == own_uid || uid == 0 || allowed_gid == Some(gid)
}

/// What a refused peer is told: who the socket admits and who it is. The
/// kernel reports only a peer's primary group, so a member of the allowed
/// group by a secondary group is refused too, and told how to use it.
pub fn refusal(uid: u32, gid: u32, own_uid: u32, allowed_gid: Option<u32>) -> String {
    let admits = match allowed_gid {
        Some(g) => format!(
            "uid {own_uid} (the agent's user), root, and processes whose primary group is gid {g}"
        ),
        None => format!("uid {own_uid} (the agent's user) and root"),
    };
    let how = match allowed_gid {
        Some(g) => format!(
            "run the CLI as root or with gid {g} as its primary group (a member of that group by a secondary group: `sg {g} -c 'drydock …'`), or name your group in the agent's api.allowed_gid (DRYDOCK_AGENT_GID for deploy/swarm-deploy.sh)"
        ),
        None => "run the CLI as the agent's user or root, or let your group in with the agent's api.allowed_gid (DRYDOCK_AGENT_GID for deploy/swarm-deploy.sh)".to_string(),
    };
    format!("the agent's socket admits {admits}; you are uid {uid} gid {gid}: {how}")
}

/// The one answer a refused peer gets: 403 with a problem body.
fn refusal_answer(detail: &str) -> Vec<u8> {
    let body = serde_json::json!({
        "type": "about:blank",
        "title": "not admitted",
        "status": 403,
        "detail": detail,
    })
    .to_string();
    format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Tell a refused peer why, in a task of its own, bounded in time and in
/// how many run at once: its request head is read (so closing does not
/// reset the answer away), the answer written, the connection closed.
fn answer_refused(
    stream: UnixStream,
    detail: String,
    slots: &std::sync::Arc<tokio::sync::Semaphore>,
) {
    let Ok(slot) = slots.clone().try_acquire_owned() else {
        return;
    };
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let _slot = slot;
        let mut stream = stream;
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), async {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let _ = stream.write_all(&refusal_answer(&detail)).await;
            let _ = stream.shutdown().await;
        })
        .await;
    });
}

/// A unix listener that drops connections from peers who are neither the
/// agent's user nor in the allowed group.
pub struct PeerCheckedListener {
    inner: UnixListener,
    own_uid: u32,
    allowed_gid: Option<u32>,
    path: PathBuf,
    /// Refused peers being answered at once, at most.
    refusing: std::sync::Arc<tokio::sync::Semaphore>,
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
            refusing: std::sync::Arc::new(tokio::sync::Semaphore::new(8)),
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
                Ok(cred) => {
                    tracing::warn!(
                        peer_uid = cred.uid(),
                        peer_gid = cred.gid(),
                        peer_pid = cred.pid(),
                        "refused an API connection from another user"
                    );
                    let detail = refusal(cred.uid(), cred.gid(), self.own_uid, self.allowed_gid);
                    answer_refused(stream, detail, &self.refusing);
                }
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
        assert!(peer_allowed(0, 0, 1000, None), "root");
        assert!(peer_allowed(0, 0, 65533, Some(50)), "root");
    }

    #[test]
    fn a_refused_peer_is_told_who_is_admitted_and_who_it_is() {
        let said = refusal(1001, 51, 65533, Some(4242));
        assert!(
            said.contains("primary group is gid 4242")
                && said.contains("you are uid 1001 gid 51")
                && said.contains("sg 4242"),
            "{said}"
        );
        let said = refusal(1001, 51, 1000, None);
        assert!(
            said.contains("uid 1000 (the agent's user) and root"),
            "{said}"
        );
        let answer = String::from_utf8(refusal_answer(&said)).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 403 Forbidden"), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["detail"], said);
    }

    #[tokio::test]
    async fn a_refused_peer_gets_the_reason_over_the_socket() {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let (a, mut b) = UnixStream::pair().unwrap();
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
        answer_refused(a, "not you".into(), &slots);
        b.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        b.read_to_string(&mut answer).await.unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 403") && answer.contains("not you"),
            "{answer}"
        );
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
