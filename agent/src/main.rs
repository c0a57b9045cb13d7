//! `drydock-agent serve --config FILE`.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use drydock_agent::api::{self, AppState};
use drydock_agent::config::{Config, Listen};
use drydock_agent::engine::{Engine, EngineConfig};
use drydock_agent::executor_client::ExecutorClient;
use drydock_agent::hosts::{Host, Hosts};
use drydock_agent::listen::PeerCheckedListener;
use drydock_agent::llm::agent_loop::Limits;
use drydock_agent::llm::investigate;
use drydock_agent::llm::provider::{ApiKey, Provider};
use drydock_agent::runbook::Runbook;
use drydock_agent::store::Store;

#[derive(Parser)]
#[command(
    name = "drydock-agent",
    version,
    about = "drydock's unprivileged agent: diagnosis, plans, approvals, API"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the REST/SSE API.
    Serve {
        #[arg(long, env = "DRYDOCK_AGENT_CONFIG")]
        config: PathBuf,
    },
    /// GET the agent's /healthz; exit 0 when it answers 200 (for container
    /// healthchecks: no shell or curl needed). `--addr` is `HOST:PORT` or
    /// `unix:PATH`.
    Health {
        #[arg(long, default_value = "127.0.0.1:7420")]
        addr: String,
    },
    /// Check the config file and exit.
    CheckConfig {
        #[arg(long, env = "DRYDOCK_AGENT_CONFIG")]
        config: PathBuf,
    },
    /// Take a consistent copy of the agent's store (while the agent runs)
    /// into a new or empty folder.
    Backup {
        #[arg(long, env = "DRYDOCK_AGENT_CONFIG")]
        config: PathBuf,
        /// The folder to write (made if missing; must be empty).
        #[arg(long)]
        to: PathBuf,
    },
    /// Restore a backup to `store.path`, where no store may be (stop the
    /// agent and move the old store aside first).
    Restore {
        #[arg(long, env = "DRYDOCK_AGENT_CONFIG")]
        config: PathBuf,
        /// The folder `backup --to` wrote.
        #[arg(long)]
        from: PathBuf,
        /// Move a store at `store.path` into a `replaced-<time>` folder
        /// next to it first, instead of refusing.
        #[arg(long)]
        move_aside: bool,
    },
}

fn backup(config: &std::path::Path, to: &std::path::Path) -> anyhow::Result<()> {
    let config = Config::read(config)?;
    let path = &config.store.path;
    anyhow::ensure!(
        path.is_file(),
        "no store at {} (store.path): nothing to back up",
        path.display()
    );
    let store = Store::open(path).with_context(|| format!("store.path {}", path.display()))?;
    let copy = store.backup(path, to)?;
    println!("backed up {} to {}", path.display(), copy.display());
    Ok(())
}

fn restore(
    config: &std::path::Path,
    from: &std::path::Path,
    move_aside: bool,
) -> anyhow::Result<()> {
    let config = Config::read(config)?;
    let path = &config.store.path;
    Store::restore(from, path, move_aside)
        .with_context(|| format!("restoring {}", from.display()))?;
    println!("restored {} from {}", path.display(), from.display());
    Ok(())
}

/// How often finished requests past `store.retention` or
/// `store.max_requests` are forgotten (and once at start).
const RETENTION_EVERY: std::time::Duration = std::time::Duration::from_secs(600);

fn spawn_retention(store: Arc<Store>, config: drydock_agent::config::StoreConfig) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RETENTION_EVERY);
        loop {
            tick.tick().await;
            let before = std::time::SystemTime::now()
                .checked_sub(config.retention)
                .unwrap_or(std::time::UNIX_EPOCH);
            let before = humantime::format_rfc3339_millis(before).to_string();
            match store.prune_finished(&before, config.max_requests) {
                Ok(0) => {}
                Ok(n) => tracing::info!(forgotten = n, "finished requests left the store"),
                Err(e) => tracing::error!(error = %e, "cannot prune finished requests"),
            }
            let before_unix = drydock_agent::model::unix_now()
                - i64::try_from(config.retention.as_secs()).unwrap_or(i64::MAX);
            if let Err(e) = drydock_agent::store::notes::prune(&store, before_unix) {
                tracing::error!(error = %e, "cannot prune notes");
            }
        }
    });
}

/// How long after a request's event freed memory is handed back: once
/// per burst, not at every step of it.
const HEAP_RELEASE_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

/// A second after work (a request's event), the allocator's free pages go
/// back to the system (`drydock-heap`): glibc would otherwise keep the peak
/// of 64 diagnoses at once for good. Events that arrive meanwhile join the
/// same release, so there is at most one a second while requests keep
/// coming, and one within a second of the last.
fn spawn_heap_release(mut events: tokio::sync::broadcast::Receiver<drydock_agent::model::Event>) {
    use tokio::sync::broadcast::error::{RecvError, TryRecvError};
    tokio::spawn(async move {
        loop {
            if let Err(RecvError::Closed) = events.recv().await {
                return;
            }
            tokio::time::sleep(HEAP_RELEASE_AFTER).await;
            // What arrived meanwhile belongs to the same burst.
            while let Ok(_) | Err(TryRecvError::Lagged(_)) = events.try_recv() {}
            let _ = tokio::task::spawn_blocking(drydock_heap::release_free_memory).await;
        }
    });
}

async fn serve(config: Config) -> anyhow::Result<()> {
    drydock_daemon::logging::init(config.log_format);
    let token = config.token()?;
    let runbook = match &config.runbook {
        Some(path) => Runbook::load(path).context("runbook")?,
        None => Runbook::default(),
    };
    let store = Arc::new(
        Store::open(&config.store.path)
            .with_context(|| format!("store.path {}", config.store.path.display()))?,
    );
    spawn_retention(store.clone(), config.store.clone());
    // One client per host, each with its own lazily connected channel.
    let mut clients = Vec::new();
    for reach in config.reaches() {
        let client = ExecutorClient::new(
            &reach.endpoint,
            &reach.server_name,
            &config.executor.ca,
            &config.executor.cert,
            &config.executor.key,
        )
        .with_context(|| {
            format!(
                "executor of host {}",
                reach.name.as_deref().unwrap_or("local")
            )
        })?;
        clients.push((reach, client));
    }
    let hosts = Arc::new(Hosts::new(
        clients
            .iter()
            .map(|(r, c)| Host::new(r.name.clone(), r.endpoint.clone(), Arc::new(c.clone())))
            .collect(),
    ));
    hosts.spawn_probes();
    // With several hosts every watcher names its host (the first's is
    // `local` unless named), so its requests stay on it.
    let watch_hosts: Vec<Option<String>> = hosts
        .all()
        .iter()
        .map(|h| hosts.named().then(|| h.label().to_string()))
        .collect();
    let llm = match &config.llm {
        Some(llm) => {
            // Read once here; the key lives only inside the provider, whose
            // Debug hides it, and is never logged.
            let key = ApiKey::new(llm.api_key()?);
            let provider = Provider::new(llm, key).context("llm")?;
            tracing::info!(
                provider = ?llm.provider,
                model = %llm.model,
                base_url = %llm.base_url(),
                "model investigation enabled"
            );
            Some(Arc::new(investigate::Setup {
                provider,
                limits: Limits {
                    max_turns: llm.max_turns,
                    max_retries: llm.max_retries,
                    ..Limits::default()
                },
                max_invalid_answers: llm.max_invalid_answers,
                investigate: llm.investigate,
                runbook: Arc::new(runbook.clone()),
                logs_tail: config.logs_tail,
                context_budget: investigate::DEFAULT_CONTEXT_BUDGET,
            }))
        }
        None => None,
    };
    let engine = Engine::with_hosts(
        store.clone(),
        hosts,
        EngineConfig {
            approval_ttl: config.approval_ttl,
            max_iterations: config.max_iterations,
            verify_max_wait: config.verify.max_wait,
            verify_poll: config.verify.poll_interval,
            stable_for: config.verify.stable_for,
            ran_well_after: config.diagnosis.ran_well_after,
            logs_tail: config.logs_tail,
            runbook: Arc::new(runbook),
            llm,
            watch_mode: config.watch.mode,
        },
    );
    let resumed = engine.recover().await?;
    if resumed > 0 {
        tracing::info!(resumed, "resumed unfinished requests");
    }
    if config.watch.enabled {
        for ((_, client), host) in clients.into_iter().zip(watch_hosts) {
            drydock_agent::watch::Watcher::spawn(
                store.clone(),
                Arc::new(engine.clone()),
                client,
                host,
                config.watch.clone(),
            );
        }
        tracing::info!(mode = ?config.watch.mode, "watching container events");
    }
    let notifier = drydock_agent::notify::Notifier::spawn(
        store,
        engine.subscribe(),
        config.notify.webhooks.clone(),
    )?;
    drydock_agent::schedule::Scheduler::spawn(engine.clone(), notifier.clone());
    let updates = drydock_agent::updates::UpdateChecker::new(engine.clone(), notifier);
    updates.spawn(config.updates.check_every);
    spawn_heap_release(engine.subscribe());
    let app = api::router(AppState {
        engine,
        token: Arc::new(token),
        watch: Arc::new(config.watch.clone()),
        updates,
    });
    match config.listen_on()? {
        Listen::Unix(path) => {
            let listener = PeerCheckedListener::bind(&path, config.api.allowed_gid)?;
            tracing::info!(socket = %listener.path().display(), "drydock-agent listening");
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown_signal())
                .await?;
            let _ = std::fs::remove_file(&path);
        }
        Listen::Tcp(addr) if config.api.tls.is_some() => {
            let tls = config.api.tls.clone().context("api.tls")?;
            let server = drydock_agent::listen::tls_server_config(&tls.cert, &tls.key)?;
            let listener = drydock_agent::listen::TlsListener::bind(addr, server).await?;
            tracing::info!(%addr, "drydock-agent listening (HTTPS)");
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown_signal())
                .await?;
        }
        Listen::Tcp(addr) => {
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("listen {addr}"))?;
            tracing::warn!(
                %addr,
                "the agent API is on plain TCP (api.allow_plain_tcp): a local user who binds this port while the agent is down gets the CLI's token; prefer listen: unix:..."
            );
            tracing::info!(addr = %listener.local_addr()?, "drydock-agent listening");
            // TCP_NODELAY on every accepted connection: small JSON answers
            // and SSE frames go out at once instead of waiting on the
            // client's delayed ACK.
            use axum::serve::ListenerExt as _;
            let listener = listener.tap_io(|tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::warn!(error = %e, "cannot set TCP_NODELAY");
                }
            });
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown_signal())
                .await?;
        }
    }
    Ok(())
}

/// A minimal HTTP GET so the healthcheck needs nothing but this binary.
async fn health(addr: &str) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    /// The request on a connected stream, TCP or unix.
    async fn get<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
        mut s: S,
        addr: &str,
    ) -> anyhow::Result<()> {
        s.write_all(
            format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .await?;
        let mut buf = Vec::new();
        s.take(4096).read_to_end(&mut buf).await?;
        let head = String::from_utf8_lossy(&buf);
        anyhow::ensure!(
            head.starts_with("HTTP/1.1 200"),
            "unhealthy: {}",
            head.lines().next().unwrap_or("no answer")
        );
        // The agent serves; with several hosts, say which do not answer
        // (the agent stays healthy: it serves the others).
        let body = head.split("\r\n\r\n").nth(1).unwrap_or_default();
        let down: Vec<String> = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| serde_json::from_value(v["hosts_down"].clone()).ok())
            .unwrap_or_default();
        match down.as_slice() {
            [] => println!("serving"),
            hosts => println!("serving; hosts down: {}", hosts.join(", ")),
        }
        Ok(())
    }
    let attempt = async {
        match addr.strip_prefix("unix:") {
            Some(path) => {
                get(
                    tokio::net::UnixStream::connect(path)
                        .await
                        .with_context(|| format!("cannot connect to {addr}"))?,
                    "localhost",
                )
                .await
            }
            None => {
                get(
                    tokio::net::TcpStream::connect(addr)
                        .await
                        .with_context(|| format!("cannot connect to {addr}"))?,
                    addr,
                )
                .await
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(3), attempt)
        .await
        .map_err(|_| anyhow::anyhow!("no answer from {addr} within 3s"))?
}

async fn shutdown_signal() {
    let signal = drydock_daemon::signals::shutdown().await;
    tracing::info!(%signal, "shutting down");
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Command::Serve { .. }) {
        drydock_daemon::process::harden();
    }
    let result = match cli.command {
        Command::Serve { config } => match Config::load(&config) {
            Ok(c) => serve(c).await,
            Err(e) => Err(e.into()),
        },
        Command::Health { addr } => health(&addr).await,
        Command::Backup { config, to } => backup(&config, &to),
        Command::Restore {
            config,
            from,
            move_aside,
        } => restore(&config, &from, move_aside),
        Command::CheckConfig { config } => Config::load(&config)
            .map(|_| println!("{}: ok", config.display()))
            .map_err(Into::into),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("drydock-agent: {e:#}");
            ExitCode::from(2)
        }
    }
}
