//! Server-side mTLS. A client must present a certificate chaining to the
//! configured client CA; rustls checks the chain and validity period during
//! the handshake, and the service then checks the identity against the allow
//! list.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::{
    self,
    pki_types::{CertificateDer, PrivateKeyDer},
    server::WebPkiClientVerifier,
    RootCertStore, ServerConfig,
};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {key} file {path}: {source}")]
    Read {
        key: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{key} file {path} contains no {what}")]
    Empty {
        key: &'static str,
        path: String,
        what: &'static str,
    },
    #[error("TLS configuration rejected: {0}")]
    Rustls(String),
}

pub fn load_certs(
    key: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let data = std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.display().to_string(),
        source,
    })?;
    let certs: Vec<_> = rustls_pemfile::certs(&mut data.as_slice())
        .collect::<Result<_, _>>()
        .map_err(|source| TlsError::Read {
            key,
            path: path.display().to_string(),
            source,
        })?;
    if certs.is_empty() {
        return Err(TlsError::Empty {
            key,
            path: path.display().to_string(),
            what: "PEM certificate",
        });
    }
    Ok(certs)
}

pub fn load_key(key: &'static str, path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let data = std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.display().to_string(),
        source,
    })?;
    rustls_pemfile::private_key(&mut data.as_slice())
        .map_err(|source| TlsError::Read {
            key,
            path: path.display().to_string(),
            source,
        })?
        .ok_or_else(|| TlsError::Empty {
            key,
            path: path.display().to_string(),
            what: "PEM private key",
        })
}

pub fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: &Path,
) -> Result<Arc<ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for ca in load_certs("tls.client_ca", client_ca)? {
        roots
            .add(ca)
            .map_err(|e| TlsError::Rustls(format!("tls.client_ca: {e}")))?;
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| TlsError::Rustls(format!("tls.client_ca: {e}")))?;
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?
        .with_client_cert_verifier(verifier)
        .with_single_cert(load_certs("tls.cert", cert)?, load_key("tls.key", key)?)
        .map_err(|e| TlsError::Rustls(format!("tls.cert/tls.key: {e}")))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}
