//! Server-side mTLS. A client must present a certificate chaining to the
//! configured client CA; rustls checks the chain and validity period during
//! the handshake, and the service then checks the identity (the
//! certificate's common name, `identity_from_cert`) against the allow list.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::{
    self,
    pki_types::{pem::PemObject as _, CertificateDer, PrivateKeyDer},
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
    #[error("{key} file {path} is not valid PEM: {message}")]
    Pem {
        key: &'static str,
        path: String,
        message: String,
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
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem {
            key,
            path: path.display().to_string(),
            message: e.to_string(),
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
    PrivateKeyDer::from_pem_slice(&data).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::Empty {
            key,
            path: path.display().to_string(),
            what: "PEM private key",
        },
        other => TlsError::Pem {
            key,
            path: path.display().to_string(),
            message: other.to_string(),
        },
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

/// The client certificate's common name is its identity.
pub fn identity_from_cert(der: &[u8]) -> Option<String> {
    // Every call of a connection presents the same certificate (rustls has
    // verified its chain at the handshake): parse each one once. The last
    // few are kept, compared byte for byte.
    static SEEN: std::sync::Mutex<Vec<(Vec<u8>, Option<String>)>> =
        std::sync::Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, cn)) = seen.iter().find(|(d, _)| d.as_slice() == der) {
        return cn.clone();
    }
    let cn = parse_common_name(der);
    if seen.len() >= 8 {
        seen.remove(0);
    }
    seen.push((der.to_vec(), cn.clone()));
    cn
}

fn parse_common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let cn = cert
        .subject()
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    Some(cn)
}
