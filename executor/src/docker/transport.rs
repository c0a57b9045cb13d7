//! The connection to the engine. bollard's own unix and TCP transports open
//! a new connection for every request (their pool is turned off); this one
//! keeps idle connections and reuses them, so a read costs one request on a
//! warm connection instead of a connect, an accept and a close as well.
//!
//! Nothing else changes: bollard still builds every request, and the
//! executor never upgrades a connection (no attach, no exec), so a pooled
//! connection only ever carries plain request/response exchanges. A
//! connection the engine closed while idle is noticed by the pool and not
//! reused; a request that finds its connection closed before it was sent is
//! sent again on a new one (hyper's rule, safe for writes too: nothing
//! reached the engine).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bollard::{BollardRequest, ClientVersion, Docker};
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};

/// Idle connections are closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// At most this many idle connections are kept (calls in flight may use
/// more; those are closed when they finish).
const MAX_IDLE: usize = 32;

/// The body type of bollard's requests (named only through its request).
trait BodyOf {
    type Body;
}
impl<B> BodyOf for http::Request<B> {
    type Body = B;
}
type DockerBody = <BollardRequest as BodyOf>::Body;

/// Connects every request to one unix socket, whatever its URI says.
#[derive(Clone)]
struct UnixConnector(Arc<PathBuf>);

impl tower_service::Service<http::Uri> for UnixConnector {
    type Response = TokioIo<tokio::net::UnixStream>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let path = self.0.clone();
        Box::pin(async move {
            Ok(TokioIo::new(
                tokio::net::UnixStream::connect(path.as_path()).await?,
            ))
        })
    }
}

/// The most bytes a raw engine answer may have.
const MAX_RAW_ANSWER: usize = 16 * 1024 * 1024;

/// A raw GET's own deadline, for a caller without a shorter one.
const RAW_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a raw GET has no answer: the connection (worth another try) or the
/// answer itself (too big, cut off: not worth one).
#[derive(Debug)]
pub enum RawError {
    Connection(String),
    Answer(String),
}

type RawFuture =
    Pin<Box<dyn Future<Output = Result<(http::StatusCode, bytes::Bytes), RawError>> + Send>>;

/// Plain GETs on the same pooled connection, for the engine answers whose
/// shape bollard's models do not follow on every API version (`/system/df`
/// changed shape in API 1.52; bollard models only the new one).
#[derive(Clone)]
pub struct Raw {
    send: Arc<dyn Fn(BollardRequest) -> RawFuture + Send + Sync>,
    base: String,
}

impl Raw {
    /// `GET /v{version}{path}`: the status and the whole body, at most
    /// `MAX_RAW_ANSWER` bytes.
    pub async fn get(
        &self,
        version: &ClientVersion,
        path_and_query: &str,
    ) -> Result<(http::StatusCode, bytes::Bytes), RawError> {
        let uri = format!(
            "{}/v{}.{}{path_and_query}",
            self.base, version.major_version, version.minor_version
        );
        let req = http::Request::get(uri)
            .body(bollard::body_full(bytes::Bytes::new()))
            .map_err(|e| RawError::Answer(e.to_string()))?;
        tokio::time::timeout(RAW_TIMEOUT, (self.send)(req))
            .await
            .map_err(|_| RawError::Connection(format!("no answer within {RAW_TIMEOUT:?}")))?
    }

    /// `POST /v{version}{path}` with a JSON body: the status and the whole
    /// answer. For the Swarm writes, which must send back the engine's own
    /// spec whole (bollard's models leave out fields an engine may have,
    /// and a spec sent back without them would lose them). `registry_auth`
    /// is the `X-Registry-Auth` header's value, for a spec whose image the
    /// nodes pull. The caller puts its own deadline around it.
    pub async fn post_json(
        &self,
        version: &ClientVersion,
        path_and_query: &str,
        body: Vec<u8>,
        registry_auth: Option<String>,
    ) -> Result<(http::StatusCode, bytes::Bytes), RawError> {
        let uri = format!(
            "{}/v{}.{}{path_and_query}",
            self.base, version.major_version, version.minor_version
        );
        let mut req =
            http::Request::post(uri).header(http::header::CONTENT_TYPE, "application/json");
        if let Some(auth) = registry_auth {
            req = req.header("X-Registry-Auth", auth);
        }
        let req = req
            .body(bollard::body_full(bytes::Bytes::from(body)))
            .map_err(|e| RawError::Answer(e.to_string()))?;
        (self.send)(req).await
    }
}

/// A bollard client on a pooled connection to `endpoint`: `unix:///path`,
/// or `tcp://host:port` / `http://host:port`; and raw GETs on the same pool.
pub fn connect(
    endpoint: &str,
    timeout_secs: u64,
    version: &ClientVersion,
) -> Result<(Docker, Raw), String> {
    if let Some(path) = endpoint.strip_prefix("unix://") {
        if !std::path::Path::new(path).exists() {
            return Err(format!("no socket at {path}"));
        }
        let connector = UnixConnector(Arc::new(PathBuf::from(path)));
        // The host only names the pool; the connector ignores it.
        with_pool(connector, "http://docker", timeout_secs, version)
    } else {
        let addr = endpoint
            .strip_prefix("tcp://")
            .or_else(|| endpoint.strip_prefix("http://"))
            .ok_or_else(|| format!("`{endpoint}` is neither unix:///PATH nor tcp://HOST:PORT"))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        with_pool(connector, &format!("http://{addr}"), timeout_secs, version)
    }
}

fn with_pool<C>(
    connector: C,
    addr: &str,
    timeout_secs: u64,
    version: &ClientVersion,
) -> Result<(Docker, Raw), String>
where
    C: Connect + Clone + Send + Sync + 'static,
{
    let client: Client<C, DockerBody> = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .pool_max_idle_per_host(MAX_IDLE)
        .pool_timer(hyper_util::rt::TokioTimer::new())
        .build(connector);
    let raw_client = client.clone();
    let raw = Raw {
        send: Arc::new(move |req: BollardRequest| -> RawFuture {
            let client = raw_client.clone();
            Box::pin(async move {
                use http_body_util::BodyExt as _;
                let response = client
                    .request(req)
                    .await
                    .map_err(|e| RawError::Connection(e.to_string()))?;
                let status = response.status();
                let body = http_body_util::Limited::new(response.into_body(), MAX_RAW_ANSWER)
                    .collect()
                    .await
                    .map_err(|e| {
                        RawError::Answer(format!(
                            "the engine's answer could not be read (at most {MAX_RAW_ANSWER} bytes): {e}"
                        ))
                    })?
                    .to_bytes();
                Ok((status, body))
            })
        }),
        base: addr.to_string(),
    };
    let docker = Docker::connect_with_custom_transport(
        move |req: BollardRequest| {
            let client = client.clone();
            async move {
                client
                    .request(req)
                    .await
                    .map_err(|err| bollard::errors::Error::HyperLegacyError { err })
            }
        },
        Some(addr),
        timeout_secs,
        version,
    )
    .map_err(|e| e.to_string())?;
    Ok((docker, raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    /// An engine that answers `OK` to everything, counting connections.
    async fn engine(dir: &std::path::Path) -> crate::docker::fake_engine::FakeEngine {
        crate::docker::fake_engine::start(
            dir,
            Arc::new(|_| Box::pin(async { ("text/plain", "OK".to_string()) })),
        )
        .await
    }

    #[tokio::test]
    async fn sequential_requests_share_one_engine_connection() {
        let dir = tempfile::tempdir().expect("tempdir");
        let engine = engine(dir.path()).await;
        let docker = connect(&engine.endpoint, 5, bollard::API_DEFAULT_VERSION)
            .expect("client")
            .0;
        for _ in 0..20 {
            docker.ping().await.expect("ping");
        }
        assert_eq!(
            engine.accepted.load(Ordering::SeqCst),
            1,
            "one connection, reused"
        );
        // bollard's own unix transport, for comparison: one per request.
        let fresh = Docker::connect_with_unix(&engine.endpoint, 5, bollard::API_DEFAULT_VERSION)
            .expect("client");
        for _ in 0..3 {
            fresh.ping().await.expect("ping");
        }
        assert_eq!(engine.accepted.load(Ordering::SeqCst), 4);
    }

    #[test]
    fn endpoints_that_are_neither_unix_nor_tcp_are_refused_with_the_forms_that_work() {
        let Err(err) = connect("ftp://x", 5, bollard::API_DEFAULT_VERSION) else {
            panic!("ftp:// accepted")
        };
        assert!(err.contains("unix:///PATH"), "{err}");
        let Err(err) = connect("unix:///no/such.sock", 5, bollard::API_DEFAULT_VERSION) else {
            panic!("a missing socket accepted")
        };
        assert!(err.contains("no socket at /no/such.sock"), "{err}");
    }
}
