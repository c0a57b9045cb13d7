//! Start-up and the accept loop. TLS handshakes are done here rather than
//! inside tonic so that a refused handshake (no certificate, wrong CA,
//! expired) is audited like every other refusal.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use drydock_proto::pb::executor_server::ExecutorServer;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

use crate::approval::ApprovalVerifier;
use crate::audit::{AuditEntry, AuditLog};
use crate::config::Config;
use crate::docker::{DockerAdapter, Timeouts};
use crate::policy::Policy;
use crate::service::{ExecutorService, ServiceParts};

const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// A running executor: where it listens, and how to stop it.
pub struct RunningExecutor {
    pub local_addr: SocketAddr,
    shutdown: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl RunningExecutor {
    /// Stop accepting, let in-flight calls finish, then return.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        let _ = self.shutdown.send(true);
        self.task.await?
    }

    pub async fn wait(self) -> anyhow::Result<()> {
        self.task.await?
    }

    pub fn shutdown_handle(&self) -> tokio::sync::watch::Sender<bool> {
        self.shutdown.clone()
    }
}

/// The start-up order is deliberate: the audit store opens first (a daemon
/// that cannot audit must not serve), then TLS material (misconfiguration
/// fails before binding), then Docker, then the listener.
pub async fn start(config: Config) -> anyhow::Result<RunningExecutor> {
    use anyhow::Context as _;
    let mut log = AuditLog::open(&config.audit.path)
        .with_context(|| format!("audit.path {}", config.audit.path.display()))?
        .with_rotation(config.audit.max_size, config.audit.keep_segments);
    if let Some(key) = config.audit_signing_key()? {
        log = log.with_checkpoints(key, config.audit.checkpoint_every);
    } else {
        tracing::warn!("audit.signing_key is not set: the audit chain has no signed checkpoints");
    }
    let audit = Arc::new(log);
    // Reads' rows are committed just after their answers (audit/commit.rs).
    audit
        .start_flusher()
        .context("cannot start the audit flusher thread")?;
    let tls = crate::tls::server_config(&config.tls.cert, &config.tls.key, &config.tls.client_ca)?;
    let timeouts = Timeouts {
        read: config.timeouts.read,
        logs: config.timeouts.logs,
        write: config.timeouts.write,
    };
    let docker = DockerAdapter::connect(&config.docker.endpoint, timeouts)
        .await
        .with_context(|| format!("docker.endpoint {}", config.docker.endpoint))?;
    // Validated with the config; parse once here.
    let http_checks = config
        .http_checks
        .iter()
        .map(|(k, v)| crate::http_check::parse_url(v).map(|t| (k.clone(), t)))
        .collect::<Result<_, _>>()?;
    // Writes that were in flight when the executor last stopped: their
    // outcome is unknown, and the chain says so explicitly.
    let interrupted = audit.close_dangling_intents()?;
    if !interrupted.is_empty() {
        tracing::warn!(
            writes = interrupted.len(),
            "writes were in flight when the executor stopped; recorded as outcome unknown"
        );
    }
    let pruned = audit
        .prune_nonces(unix_now() - config.timeouts.max_approval_ttl.as_secs() as i64 - 86_400)?;
    if pruned > 0 {
        tracing::info!(pruned, "forgot nonces of long-expired approvals");
    }
    // Validation refuses a config without targets; never fall back to a
    // default scope here either.
    let targets = config
        .targets
        .clone()
        .context("targets: the executor's scope is required")?;
    if targets.allow_names.iter().any(|g| g == "*") {
        tracing::warn!(
            "targets.allow_names includes \"*\": every container on this host is in scope (drydock's own excepted); name the services drydock may touch"
        );
    }
    let rate = Arc::new(crate::ratelimit::RateLimiter::new(
        config.limits.calls_per_second,
        config.limits.burst,
    ));
    let host = crate::approval::HostBinding {
        name: config.host.as_ref().map(|h| h.name.clone()),
        require: config.host.as_ref().is_some_and(|h| h.require),
    };
    let registries = crate::registry::Registries::load(&config.registries)?;
    // A registry's password or token: withheld from every answer, audit
    // row and evidence text, whatever shape the engine echoes it in.
    for secret in registries.secrets() {
        crate::redact::withhold(&secret);
    }
    let (shutdown_tx, mut shutdown_rx) = tokio::sync::watch::channel(false);
    let pre_handler = crate::prehandler::PreHandlerAuditLayer::new(audit.clone(), rate.clone());
    resume_swaps(
        &interrupted,
        docker.clone(),
        audit.clone(),
        Policy::new(targets.clone(), config.actions.clone()),
        config.update.health_window,
    );
    let quorum = crate::approval::Quorum::new(&config.approvals.required);
    let service = ExecutorService::new(ServiceParts {
        docker,
        policy: Policy::new(targets, config.actions.clone()),
        approvals: ApprovalVerifier::new(&config.approvers, config.timeouts.max_approval_ttl)
            .with_host(host.clone())
            .with_quorum(quorum.clone()),
        grants: crate::grants::GrantVerifier::new(&config.approvers, &config.automation)
            .with_host(host)
            .with_quorum(quorum)
            .with_update_grants(config.actions.update.grants),
        audit: audit.clone(),
        allowed_clients: config.tls.allowed_clients.iter().cloned().collect(),
        limits: config.limits.clone(),
        http_checks,
        http_timeout: config.timeouts.http,
        rate: rate.clone(),
        shutdown: shutdown_rx.clone(),
        env_policy: match config.redact.env {
            crate::config::EnvRedaction::SecretLooking => crate::redact::EnvPolicy::SecretLooking,
            crate::config::EnvRedaction::All => crate::redact::EnvPolicy::All {
                allow: config.redact.env_allow.iter().cloned().collect(),
            },
        },
        registries,
        update: config.update.clone(),
        build: config.build.clone(),
    });
    let mut allowed = service.allowed_clients();
    allowed.extend(config.tls.health_clients.iter().cloned());
    let listener = TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("listen {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<ExecutorServer<ExecutorService>>()
        .await;

    let (conn_tx, conn_rx) =
        tokio::sync::mpsc::channel::<Result<TlsStream<TcpStream>, std::io::Error>>(64);
    let acceptor = TlsAcceptor::from(tls);
    let mut accept_shutdown = shutdown_rx.clone();
    let accept_audit = audit.clone();
    let limiter = Arc::new(crate::ratelimit::RefusalRows::handshakes());
    // Refused health probes (a certificate from the CA, a CN not allowed)
    // are written the same way: up to a count per window, the rest counted.
    let health_refusals = Arc::new(crate::ratelimit::RefusalRows::health_probes());
    let flush = (
        audit.clone(),
        rate.clone(),
        limiter.clone(),
        health_refusals.clone(),
    );
    let mut flush_shutdown = shutdown_rx.clone();
    {
        let flush = flush.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(crate::ratelimit::REFUSAL_WINDOW);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = flush_shutdown.changed() => break,
                    _ = tick.tick() => {}
                }
                flush_refusal_counts(flush.clone(), false).await;
            }
        });
    }
    tokio::spawn(async move {
        loop {
            let (tcp, peer) = tokio::select! {
                _ = accept_shutdown.changed() => break,
                accepted = accept(&listener) => match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let acceptor = acceptor.clone();
            let conn_tx = conn_tx.clone();
            let audit = accept_audit.clone();
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let why = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(tls)) => {
                        let _ = conn_tx.send(Ok(tls)).await;
                        return;
                    }
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "handshake timed out".to_string(),
                };
                // The row waits for its fsync on a blocking thread, not on a
                // runtime worker that serves the other calls.
                let _ = tokio::task::spawn_blocking(move || {
                    audit_handshake(&audit, &limiter, peer, &why)
                })
                .await;
            });
        }
    });

    let limits = config.limits.clone();
    // Above every per-call deadline, including a write that waits for the
    // longest stop timeout the executor honours.
    let longest_write =
        Duration::from_secs(u64::from(crate::docker::MAX_STOP_WAIT_SECS)) + Duration::from_secs(20);
    let server_deadline = [
        config.timeouts.read,
        config.timeouts.logs,
        config.timeouts.write,
        config.timeouts.http,
        longest_write,
    ]
    .into_iter()
    .max()
    .unwrap_or(Duration::from_secs(30))
        + Duration::from_secs(5);
    let final_checkpoint = audit.clone();
    let task = tokio::spawn(async move {
        tonic::transport::Server::builder()
            // Bounds for a compromised or buggy agent: calls and streams in
            // flight per connection, a server-side deadline above every
            // per-action timeout, and HTTP/2 keepalive to drop dead peers.
            .concurrency_limit_per_connection(limits.max_concurrent_calls_per_connection as usize)
            .max_concurrent_streams(Some(limits.max_concurrent_streams))
            .timeout(server_deadline)
            .http2_keepalive_interval(Some(Duration::from_secs(30)))
            .http2_keepalive_timeout(Some(Duration::from_secs(10)))
            .layer(pre_handler)
            .add_service(tonic::service::interceptor::InterceptedService::new(
                health_service,
                ExecutorService::health_gate(allowed, audit.clone(), health_refusals),
            ))
            .add_service(ExecutorServer::new(service))
            .serve_with_incoming_shutdown(ReceiverStream::new(conn_rx), async move {
                let _ = shutdown_rx.changed().await;
            })
            .await?;
        // In-flight calls are done: write what was only counted, then
        // attest the final head.
        flush_refusal_counts(flush, true).await;
        if let Some((seq, hash)) = final_checkpoint.checkpoint()? {
            tracing::info!(seq, hash = %hash, "signed the audit chain's head at shutdown");
        }
        Ok(())
    });
    tracing::info!(%local_addr, "drydock-executor listening (mTLS required)");
    Ok(RunningExecutor {
        local_addr,
        shutdown: shutdown_tx,
        task,
    })
}

/// Accept one connection, tuned for small request/response exchanges:
/// TCP_NODELAY, so a gRPC answer is not held back by Nagle's algorithm
/// waiting for the client's delayed ACK (about 40 ms per call otherwise).
async fn accept(listener: &TcpListener) -> std::io::Result<(TcpStream, SocketAddr)> {
    let (tcp, peer) = listener.accept().await?;
    tcp.set_nodelay(true)?;
    // Keepalive: a peer that vanished without a FIN does not hold a
    // connection (and its share of the limits) forever.
    nix::sys::socket::setsockopt(&tcp, nix::sys::socket::sockopt::KeepAlive, &true)?;
    Ok((tcp, peer))
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Write the summaries of refusals that were counted and not yet written:
/// every window, so the last burst of a caller that stops calling is in the
/// chain too, and everything at shutdown.
type RefusalCounts = (
    Arc<AuditLog>,
    Arc<crate::ratelimit::RateLimiter>,
    Arc<crate::ratelimit::RefusalRows>,
    Arc<crate::ratelimit::RefusalRows>,
);

async fn flush_refusal_counts(counts: RefusalCounts, shutting_down: bool) {
    let (audit, rate, handshakes, health) = counts;
    let mut rows: Vec<AuditEntry> = rate
        .take_all_suppressed(shutting_down)
        .into_iter()
        .map(|(identity, n)| crate::ratelimit::summary_entry(&identity, n))
        .collect();
    let refused = handshakes.take_closed(shutting_down);
    if refused > 0 {
        rows.push(handshakes.summary(refused));
    }
    let refused = health.take_closed(shutting_down);
    if refused > 0 {
        rows.push(health.summary(refused));
    }
    if rows.is_empty() {
        return;
    }
    let written = tokio::task::spawn_blocking(move || {
        for row in &rows {
            if let Err(e) = audit.append(row) {
                tracing::error!(error = %e, "audit write failed for a refusal summary");
            }
        }
    })
    .await;
    if let Err(e) = written {
        tracing::error!(error = %e, "the refusal summary task failed");
    }
}

fn audit_handshake(
    audit: &AuditLog,
    limiter: &crate::ratelimit::RefusalRows,
    peer: SocketAddr,
    reason: &str,
) {
    tracing::warn!(%peer, reason, "TLS handshake refused");
    limiter.audit(audit, || AuditEntry {
        caller: format!("unauthenticated@{peer}"),
        action: "connect".into(),
        decision: crate::audit::Decision::Denied,
        code: crate::audit::Code::of(tonic::Code::Unauthenticated),
        reason: format!("TLS handshake refused: {reason}"),
        ..Default::default()
    });
}

/// Finish, in a task of its own, the swaps (an update's or a rollback's)
/// an earlier run was stopped in the middle of, as each promised: the new
/// container kept only if it holds through the health window again, the
/// old one put back otherwise. Each outcome is an audit row.
fn resume_swaps(
    interrupted: &[AuditEntry],
    docker: DockerAdapter,
    audit: Arc<AuditLog>,
    policy: Policy,
    window: Duration,
) {
    // A swap this executor's own store says was in flight: never one
    // another executor on the same engine is still carrying out.
    let swaps: std::collections::HashMap<String, (String, &'static str)> = interrupted
        .iter()
        .filter_map(|e| {
            use drydock_proto::approval::WriteAction;
            let action = match WriteAction::parse(&e.action)? {
                WriteAction::Update => "update",
                WriteAction::Rollback => "rollback",
                _ => return None,
            };
            Some((e.container_id.clone(), (e.request_id.clone(), action)))
        })
        .collect();
    if swaps.is_empty() {
        return;
    }
    tokio::spawn(async move {
        // The engine answered at start; a list that fails now is tried
        // again a few times before the swaps are left to a person.
        let mut resumed = Vec::new();
        for attempt in 0..5u32 {
            match docker
                .resume_swaps(
                    window,
                    |id| swaps.get(id).map(|(_, action)| *action),
                    |name, labels| policy.target_allowed(name, labels),
                )
                .await
            {
                Ok(r) => {
                    resumed = r;
                    break;
                }
                Err(e) if attempt < 4 => {
                    tracing::warn!(error = %e, "cannot list containers to finish interrupted swaps; trying again");
                    tokio::time::sleep(Duration::from_secs(2 << attempt)).await;
                }
                Err(e) => {
                    tracing::error!(error = %e, "interrupted swaps were not finished: the engine did not list its containers")
                }
            }
        }
        for r in resumed {
            let entry = AuditEntry {
                request_id: swaps
                    .get(&r.old_id)
                    .map(|(id, _)| id.clone())
                    .unwrap_or_default(),
                caller: "drydock-executor".into(),
                action: r.action.into(),
                target: r.name.clone(),
                container_id: r.container_id.clone(),
                tier: crate::policy::Tier::Disruptive as u32,
                decision: if r.kept {
                    crate::audit::Decision::Allowed
                } else {
                    crate::audit::Decision::Error
                },
                code: crate::audit::Code::of(if r.kept {
                    tonic::Code::Ok
                } else {
                    tonic::Code::FailedPrecondition
                }),
                reason: crate::redact::withhold_known(&r.what).0,
                ..Default::default()
            };
            tracing::warn!(container = %r.name, action = r.action, kept = r.kept, "{}", entry.reason);
            let audit = audit.clone();
            match tokio::task::spawn_blocking(move || audit.append(&entry)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::error!(error = %e, "cannot audit a finished swap"),
                Err(e) => tracing::error!(error = %e, "cannot audit a finished swap"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn accepted_connections_have_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client = tokio::spawn(tokio::net::TcpStream::connect(addr));
        let (server_side, _) = super::accept(&listener).await.unwrap();
        assert!(server_side.nodelay().unwrap());
        client.await.unwrap().unwrap();
    }
}
