//! Calls that tonic refuses before any handler runs — a message that does
//! not decode, one over the size limit, a method that does not exist — are
//! audited here, so "every refusal leaves a row" holds for them too.
//!
//! The layer marks each request with a `Handled` flag that the service's
//! `begin` (and the health gate) set; a refusal answered without the flag
//! set never reached drydock's code and gets its row from this layer. Such
//! rows go through the same per-identity rate limiter, so they cannot be
//! used to flood the store either.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

use crate::audit::{AuditEntry, AuditLog};
use crate::ratelimit::{Admission, RateLimiter};

/// Set once drydock's own code has seen the request (and audits it).
#[derive(Clone, Default)]
pub struct Handled(Arc<AtomicBool>);

impl Handled {
    pub fn mark(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[derive(Clone)]
pub struct PreHandlerAuditLayer {
    audit: Arc<AuditLog>,
    rate: Arc<RateLimiter>,
}

impl PreHandlerAuditLayer {
    pub fn new(audit: Arc<AuditLog>, rate: Arc<RateLimiter>) -> Self {
        PreHandlerAuditLayer { audit, rate }
    }
}

impl<S> tower_layer::Layer<S> for PreHandlerAuditLayer {
    type Service = PreHandlerAudit<S>;
    fn layer(&self, inner: S) -> Self::Service {
        PreHandlerAudit {
            inner,
            audit: self.audit.clone(),
            rate: self.rate.clone(),
        }
    }
}

#[derive(Clone)]
pub struct PreHandlerAudit<S> {
    inner: S,
    audit: Arc<AuditLog>,
    rate: Arc<RateLimiter>,
}

fn caller<B>(req: &http::Request<B>) -> String {
    req.extensions()
        .get::<TlsConnectInfo<TcpConnectInfo>>()
        .and_then(|info| info.peer_certs())
        .and_then(|certs| certs.first().cloned())
        .and_then(|cert| crate::tls::identity_from_cert(cert.as_ref()))
        .map(|id| {
            crate::redact::neutralise_controls(&id)
                .chars()
                .take(64)
                .collect()
        })
        .unwrap_or_else(|| "unknown".into())
}

impl<S, B, R> tower_service::Service<http::Request<B>> for PreHandlerAudit<S>
where
    S: tower_service::Service<http::Request<B>, Response = http::Response<R>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let handled = Handled::default();
        req.extensions_mut().insert(handled.clone());
        let caller = caller(&req);
        let method = req
            .uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or("")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect::<String>();
        let audit = self.audit.clone();
        let rate = self.rate.clone();
        // The service that was made ready is the one to call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let response = inner.call(req).await?;
            let status = response
                .headers()
                .get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if let Some(status) = status.filter(|s| s != "0") {
                if !handled.0.load(Ordering::SeqCst)
                    && rate.admit(&caller) != (Admission::Limited { audit: false })
                {
                    let message = response
                        .headers()
                        .get("grpc-message")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .chars()
                        .take(200)
                        .collect::<String>();
                    let entry = AuditEntry {
                        caller,
                        action: if method.is_empty() {
                            "unknown".into()
                        } else {
                            method
                        },
                        decision: crate::audit::Decision::Denied,
                        // The status's number, as the audit names it.
                        code: crate::audit::Code::of(
                            status
                                .parse::<i32>()
                                .map_or(tonic::Code::Unknown, tonic::Code::from),
                        ),
                        reason: format!("refused before any handler ran: {message}"),
                        ..Default::default()
                    };
                    // On a blocking thread, not the async workers; the
                    // answer does not wait for it.
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = audit.append(&entry) {
                            tracing::error!(error = %e, "audit write failed for a call refused before its handler");
                        }
                    });
                }
            }
            Ok(response)
        })
    }
}
