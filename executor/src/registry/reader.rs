//! The executor's own reads of an allowed registry: what the engine cannot
//! say before a pull (a manifest's image config, with its OCI labels, and
//! a repository's tags).
//!
//! Deliberately small and narrow, not a general HTTP client: GETs only, to
//! the registry an entry of `registries:` names (`https`, plain HTTP only on
//! loopback as the engine does), to the token service that registry's own
//! `401` names and to the storage its blob answer redirects to (both
//! `https` unless loopback, neither given the registry's credentials unless
//! it is the token service asking for them). Every answer is bounded in
//! size and, with the whole read, in time; every manifest and config is
//! checked against its sha256 digest, so a redirect or a proxy cannot
//! change what is read.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{header, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use sha2::Digest as _;

use super::{Credentials, ImageRef};

/// The largest manifest or index read.
const MAX_MANIFEST: usize = 1 << 20;
/// The largest image config read (its history can be long).
const MAX_CONFIG: usize = 4 << 20;
/// The largest tag list or token answer read.
const MAX_SMALL: usize = 1 << 20;
/// Redirects followed for one blob.
const MAX_REDIRECTS: usize = 3;

const ACCEPT_MANIFESTS: &str = "application/vnd.oci.image.index.v1+json, \
application/vnd.docker.distribution.manifest.list.v2+json, \
application/vnd.oci.image.manifest.v1+json, \
application/vnd.docker.distribution.manifest.v2+json";

/// Why a read did not answer; said to the agent as is (no credential is
/// ever part of it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ReadError(pub String);

fn fail(message: impl Into<String>) -> ReadError {
    ReadError(message.into())
}

/// The image config a manifest names: its labels and creation time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageConfig {
    pub labels: BTreeMap<String, String>,
    pub created: Option<String>,
}

/// The TLS settings of the reads: the system's roots (`SSL_CERT_FILE` and
/// `SSL_CERT_DIR` honoured) and the entry's `ca_file`.
pub fn tls_config(ca_file: Option<&std::path::Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_native_certs::load_native_certs().certs {
        // A system root rustls cannot parse is skipped, as browsers do.
        let _ = roots.add(cert);
    }
    if let Some(path) = ca_file {
        let pem =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let mut added = 0;
        for cert in rustls_pemfile_certs(&pem) {
            roots.add(cert).map_err(|e| {
                format!("{} holds a certificate rustls refuses: {e}", path.display())
            })?;
            added += 1;
        }
        if added == 0 {
            return Err(format!("{} holds no PEM certificate", path.display()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// The certificates of a PEM file.
fn rustls_pemfile_certs(pem: &[u8]) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject as _;
    rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .filter_map(Result::ok)
        .collect()
}

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    https: bool,
    host: String,
    port: u16,
}

impl Origin {
    /// The API origin of a registry as references name it.
    fn of_registry(registry: &str) -> Result<Origin, ReadError> {
        let registry = if registry == "docker.io" {
            "registry-1.docker.io"
        } else {
            registry
        };
        let uri: Uri = format!("https://{registry}/")
            .parse()
            .map_err(|_| fail(format!("`{registry}` is not a host")))?;
        Origin::of(&uri, true)
    }

    /// The origin of an absolute URI; plain HTTP only to loopback. For the
    /// registry's own origin (`registry`), a loopback host is plain HTTP as
    /// the engine reads it; a URI the registry names may be plain HTTP only
    /// when the registry itself is (on loopback), so an HTTPS registry
    /// cannot send the reads, or its credentials, to a local port in the
    /// clear.
    fn named_by(&self, uri: &Uri) -> Result<Origin, ReadError> {
        let origin = Origin::of(uri, false)?;
        if !origin.https && self.https {
            return Err(fail(format!(
                "the HTTPS registry pointed to {}, which is plain HTTP; not followed",
                shown(&uri.to_string())
            )));
        }
        Ok(origin)
    }

    fn of(uri: &Uri, registry: bool) -> Result<Origin, ReadError> {
        let host = uri
            .host()
            .ok_or_else(|| fail("an address with no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let loopback = host == "localhost"
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        let https = match uri.scheme_str() {
            Some("https") => !(registry && loopback),
            Some("http") if loopback => false,
            _ => {
                return Err(fail(format!(
                    "the registry pointed to {}, which is neither https nor loopback; not followed",
                    shown(&uri.to_string())
                )))
            }
        };
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        Ok(Origin { https, host, port })
    }

    fn authority(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match (self.https, self.port) {
            (true, 443) | (false, 80) => host,
            _ => format!("{host}:{}", self.port),
        }
    }
}

fn shown(s: &str) -> String {
    s.chars().take(120).collect()
}

/// One answer, its body read within its bound.
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: Bytes,
}

/// Send one GET and read the answer, at most `max` bytes of body.
async fn get(
    tls: &Arc<rustls::ClientConfig>,
    origin: &Origin,
    path: &str,
    headers: &[(header::HeaderName, String)],
    max: usize,
) -> Result<Answer, ReadError> {
    let tcp = tokio::net::TcpStream::connect((origin.host.as_str(), origin.port))
        .await
        .map_err(|e| fail(format!("cannot connect to {}: {e}", origin.authority())))?;
    let mut request = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(header::HOST, origin.authority())
        .header(header::USER_AGENT, "drydock-executor");
    for (name, value) in headers {
        request = request.header(name, value);
    }
    let request = request
        .body(Empty::<Bytes>::new())
        .map_err(|_| fail("a request that cannot be written"))?;
    let response = if origin.https {
        let name = rustls::pki_types::ServerName::try_from(origin.host.clone())
            .map_err(|_| fail(format!("`{}` is not a TLS server name", origin.host)))?;
        let stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, tcp)
            .await
            .map_err(|e| {
                fail(format!(
                    "TLS with {} failed: {e} (a private CA goes in `ca_file` of its registries entry)",
                    origin.authority()
                ))
            })?;
        send(TokioIo::new(stream), request).await?
    } else {
        send(TokioIo::new(tcp), request).await?
    };
    let (parts, body) = response.into_parts();
    let body = Limited::new(body, max)
        .collect()
        .await
        .map_err(|_| {
            fail(format!(
                "{} answered more than {max} bytes, or broke off",
                origin.authority()
            ))
        })?
        .to_bytes();
    Ok(Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

async fn send<S>(
    io: TokioIo<S>,
    request: Request<Empty<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, ReadError>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| fail(format!("HTTP with the registry failed: {e}")))?;
    tokio::spawn(async move {
        // The connection ends with the one exchange; its error is the
        // answer's.
        let _ = connection.await;
    });
    sender
        .send_request(request)
        .await
        .map_err(|e| fail(format!("the registry did not answer: {e}")))
}

/// A read session with one repository of one registry: its credentials,
/// and the token its token service gave.
pub struct Session<'a> {
    tls: Arc<rustls::ClientConfig>,
    origin: Origin,
    repository: String,
    credentials: Option<&'a Credentials>,
    authorization: Option<String>,
}

impl<'a> Session<'a> {
    pub fn new(
        tls: Arc<rustls::ClientConfig>,
        reference: &ImageRef,
        credentials: Option<&'a Credentials>,
    ) -> Result<Session<'a>, ReadError> {
        Ok(Session {
            tls,
            origin: Origin::of_registry(&reference.registry)?,
            repository: reference.repository.clone(),
            credentials,
            authorization: None,
        })
    }

    /// The image config `digest` names (a manifest, or an index whose
    /// entry for this host's platform is read), each part checked against
    /// its digest.
    pub async fn image_config(&mut self, digest: &str) -> Result<ImageConfig, ReadError> {
        // Content named by its digest never changes: read once (a registry
        // such as Docker Hub counts every manifest read against a quota).
        let key = format!("{}/{}@{digest}", self.origin.authority(), self.repository);
        if let Some(known) = read_before(&key) {
            return Ok(known);
        }
        let config = self.read_image_config(digest).await?;
        remember(key, &config);
        Ok(config)
    }

    async fn read_image_config(&mut self, digest: &str) -> Result<ImageConfig, ReadError> {
        let mut manifest = self.manifest(digest).await?;
        if let Some(entries) = manifest.manifests.take() {
            let (os, arch) = ("linux", platform_arch());
            let chosen = entries
                .iter()
                .find(|m| {
                    m.platform
                        .as_ref()
                        .is_some_and(|p| p.os == os && p.architecture == arch)
                })
                .ok_or_else(|| {
                    fail(format!("the index {digest} names no image for {os}/{arch}"))
                })?;
            manifest = self.manifest(&chosen.digest).await?;
        }
        let config = manifest
            .config
            .ok_or_else(|| fail(format!("the manifest {digest} names no image config")))?;
        let body = self.blob(&config.digest, MAX_CONFIG).await?;
        let parsed: ConfigJson = serde_json::from_slice(&body)
            .map_err(|_| fail(format!("the image config {} is not JSON", config.digest)))?;
        Ok(ImageConfig {
            labels: parsed.config.and_then(|c| c.labels).unwrap_or_default(),
            created: parsed.created,
        })
    }

    /// The repository's tags (one page of up to 1000: enough to find a
    /// newer version of a line).
    pub async fn tags(&mut self) -> Result<Vec<String>, ReadError> {
        let path = format!("/v2/{}/tags/list?n=1000", self.repository);
        let answer = self
            .authorised(&path, "application/json", MAX_SMALL, false)
            .await?;
        let list: TagList =
            serde_json::from_slice(&answer.body).map_err(|_| fail("the tag list is not JSON"))?;
        Ok(list.tags.unwrap_or_default())
    }

    async fn manifest(&mut self, digest: &str) -> Result<ManifestJson, ReadError> {
        check_digest_form(digest)?;
        let path = format!("/v2/{}/manifests/{digest}", self.repository);
        let answer = self
            .authorised(&path, ACCEPT_MANIFESTS, MAX_MANIFEST, false)
            .await?;
        verify(digest, &answer.body)?;
        serde_json::from_slice(&answer.body)
            .map_err(|_| fail(format!("the manifest {digest} is not JSON")))
    }

    /// A blob, following the registry's redirects to its storage (without
    /// the registry's authorization).
    async fn blob(&mut self, digest: &str, max: usize) -> Result<Bytes, ReadError> {
        check_digest_form(digest)?;
        let path = format!("/v2/{}/blobs/{digest}", self.repository);
        let mut answer = self.authorised(&path, "*/*", max, true).await?;
        let mut base = self.origin.clone();
        for _ in 0..MAX_REDIRECTS {
            if !answer.status.is_redirection() {
                break;
            }
            let location = answer
                .headers
                .get(header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| fail("a redirect with no location"))?;
            let uri: Uri = location
                .parse()
                .map_err(|_| fail("a redirect to an address that is not a URI"))?;
            let (origin, path) = match uri.host() {
                Some(_) => (
                    self.origin.named_by(&uri)?,
                    uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
                ),
                // Only a path of the same origin (`/x`, not `//host/x`).
                None if location.starts_with('/') && !location.starts_with("//") => {
                    (base.clone(), location.to_string())
                }
                None => {
                    return Err(fail(format!(
                    "a redirect to `{}`, which is neither an absolute URI nor a path; not followed",
                    shown(location)
                )))
                }
            };
            answer = get(&self.tls, &origin, &path, &[], max).await?;
            base = origin;
        }
        ok(&answer, "the blob")?;
        verify(digest, &answer.body)?;
        Ok(answer.body)
    }

    /// GET at the registry, authorising as its `401` asks (once); a
    /// redirect is returned only to a blob's read (`redirects`), which
    /// follows it.
    async fn authorised(
        &mut self,
        path: &str,
        accept: &str,
        max: usize,
        redirects: bool,
    ) -> Result<Answer, ReadError> {
        let answer = self.authorised_once(path, accept, max).await?;
        if answer.status.is_redirection() && !redirects {
            return Err(fail(format!(
                "the registry redirected {}; only a blob's read follows a redirect",
                shown(path)
            )));
        }
        Ok(answer)
    }

    async fn authorised_once(
        &mut self,
        path: &str,
        accept: &str,
        max: usize,
    ) -> Result<Answer, ReadError> {
        let mut headers = vec![(header::ACCEPT, accept.to_string())];
        if let Some(a) = &self.authorization {
            headers.push((header::AUTHORIZATION, a.clone()));
        }
        let answer = get(&self.tls, &self.origin, path, &headers, max).await?;
        if answer.status != StatusCode::UNAUTHORIZED || self.authorization.is_some() {
            return match answer.status.is_redirection() {
                true => Ok(answer),
                false => ok(&answer, path).map(|()| answer),
            };
        }
        let challenge = answer
            .headers
            .get(header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        self.authorization = Some(self.authorize(&challenge).await?);
        let mut headers = vec![(header::ACCEPT, accept.to_string())];
        if let Some(a) = &self.authorization {
            headers.push((header::AUTHORIZATION, a.clone()));
        }
        let answer = get(&self.tls, &self.origin, path, &headers, max).await?;
        if !answer.status.is_redirection() {
            ok(&answer, path)?;
        }
        Ok(answer)
    }

    /// The `Authorization` value a challenge asks for.
    async fn authorize(&self, challenge: &str) -> Result<String, ReadError> {
        let basic = self.credentials.and_then(|c| {
            let user = c.username.as_deref()?;
            let pass = c.password.as_deref()?;
            Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"))
            ))
        });
        let (scheme, params) = challenge.split_once(' ').unwrap_or((challenge, ""));
        if scheme.eq_ignore_ascii_case("basic") {
            return basic.ok_or_else(|| {
                fail("the registry asks for a username and password; give them in the entry's `credentials` file")
            });
        }
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(fail(format!(
                "the registry asks for `{}` authentication, which drydock does not speak",
                shown(scheme)
            )));
        }
        let params = challenge_params(params);
        let realm = params
            .get("realm")
            .ok_or_else(|| fail("the registry's token challenge names no realm"))?;
        let realm: Uri = realm
            .parse()
            .map_err(|_| fail("the registry's token realm is not a URI"))?;
        let origin = self.origin.named_by(&realm)?;
        let mut query = vec![format!(
            "scope={}",
            encode(&format!("repository:{}:pull", self.repository))
        )];
        if let Some(service) = params.get("service") {
            query.push(format!("service={}", encode(service)));
        }
        let path = match realm.query() {
            Some(q) => format!("{}?{q}&{}", realm.path(), query.join("&")),
            None => format!("{}?{}", realm.path(), query.join("&")),
        };
        let mut headers = Vec::new();
        if let Some(b) = &basic {
            headers.push((header::AUTHORIZATION, b.clone()));
        }
        let answer = get(&self.tls, &origin, &path, &headers, MAX_SMALL).await?;
        ok(&answer, "the token service")?;
        let token: TokenJson = serde_json::from_slice(&answer.body)
            .map_err(|_| fail("the token service's answer is not JSON"))?;
        let token = token
            .token
            .or(token.access_token)
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or_else(|| fail("the token service answered no token"))?;
        Ok(format!("Bearer {token}"))
    }
}

/// Image configs read, by registry, repository and digest; at most
/// `MAX_REMEMBERED`, the oldest forgotten first.
static REMEMBERED: std::sync::Mutex<Vec<(String, ImageConfig)>> = std::sync::Mutex::new(Vec::new());
const MAX_REMEMBERED: usize = 256;

fn read_before(key: &str) -> Option<ImageConfig> {
    let known = REMEMBERED.lock().unwrap_or_else(|p| p.into_inner());
    known.iter().find(|(k, _)| k == key).map(|(_, c)| c.clone())
}

fn remember(key: String, config: &ImageConfig) {
    let mut known = REMEMBERED.lock().unwrap_or_else(|p| p.into_inner());
    if known.iter().any(|(k, _)| *k == key) {
        return;
    }
    if known.len() >= MAX_REMEMBERED {
        known.remove(0);
    }
    known.push((key, config.clone()));
}

/// `2xx`, or why not (status only; a registry's error body is not repeated).
fn ok(answer: &Answer, what: &str) -> Result<(), ReadError> {
    match answer.status {
        s if s.is_success() => Ok(()),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Err(fail(format!(
            "the registry refused to read {what} ({}); check the entry's `credentials`",
            answer.status
        ))),
        StatusCode::NOT_FOUND => Err(fail(format!("the registry has no {}", shown(what)))),
        s => Err(fail(format!(
            "the registry answered {s} for {}",
            shown(what)
        ))),
    }
}

fn check_digest_form(digest: &str) -> Result<(), ReadError> {
    if drydock_proto::approval::is_image_id(digest) {
        Ok(())
    } else {
        Err(fail(format!("`{}` is not a sha256 digest", shown(digest))))
    }
}

/// The body is what its digest names.
fn verify(digest: &str, body: &[u8]) -> Result<(), ReadError> {
    let got = format!("sha256:{}", hex::encode(sha2::Sha256::digest(body)));
    if got == digest {
        Ok(())
    } else {
        Err(fail(format!(
            "the registry answered content that is not {digest}; not used"
        )))
    }
}

/// The engine's architecture as image indexes name it.
fn platform_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        other => other,
    }
}

/// `realm="…",service="…"` into its pairs.
fn challenge_params(s: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = s.trim();
    while let Some((key, after)) = rest.split_once('=') {
        let key = key
            .trim()
            .trim_start_matches(',')
            .trim()
            .to_ascii_lowercase();
        let (value, next) = match after.strip_prefix('"') {
            Some(quoted) => match quoted.split_once('"') {
                Some((v, n)) => (v.to_string(), n),
                None => (quoted.to_string(), ""),
            },
            None => match after.split_once(',') {
                Some((v, n)) => (v.trim().to_string(), n),
                None => (after.trim().to_string(), ""),
            },
        };
        out.insert(key, value);
        rest = next.trim_start_matches(',').trim();
    }
    out
}

/// Percent-encoding of a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[derive(Deserialize)]
struct ManifestJson {
    #[serde(default)]
    manifests: Option<Vec<IndexEntry>>,
    #[serde(default)]
    config: Option<Descriptor>,
}

#[derive(Deserialize)]
struct IndexEntry {
    digest: String,
    #[serde(default)]
    platform: Option<Platform>,
}

#[derive(Deserialize)]
struct Platform {
    #[serde(default)]
    os: String,
    #[serde(default)]
    architecture: String,
}

#[derive(Deserialize)]
struct Descriptor {
    digest: String,
}

#[derive(Deserialize)]
struct ConfigJson {
    #[serde(default)]
    created: Option<String>,
    #[serde(default)]
    config: Option<ContainerConfigJson>,
}

#[derive(Deserialize)]
struct ContainerConfigJson {
    #[serde(rename = "Labels", default)]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct TagList {
    #[serde(default)]
    tags: Option<Vec<String>>,
}

#[derive(Deserialize)]
struct TokenJson {
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    access_token: Option<String>,
}

/// Bound a whole read in time.
pub async fn within<T>(
    timeout: Duration,
    read: impl std::future::Future<Output = Result<T, ReadError>>,
) -> Result<T, ReadError> {
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or_else(|_| Err(fail(format!("the registry took longer than {timeout:?}"))))
}

#[cfg(test)]
mod tests;
