//! `drydock-executor serve --config FILE` and the audit tools.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use drydock_executor::{audit::AuditLog, config::Config, server};

#[derive(Parser)]
#[command(
    name = "drydock-executor",
    version,
    about = "drydock's privileged executor: the only process that talks to Docker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the gRPC API over mutual TLS.
    Serve {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
    },
    /// Check the config file and exit.
    CheckConfig {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
    },
    /// Ask a running executor's gRPC health service over mTLS; exit 0 when
    /// it is serving (for container healthchecks: no shell or curl needed).
    Health {
        #[arg(long, default_value = "127.0.0.1:7443")]
        addr: String,
        #[arg(long)]
        ca: PathBuf,
        #[arg(long)]
        cert: PathBuf,
        #[arg(long)]
        key: PathBuf,
        #[arg(long, default_value = "drydock-executor")]
        server_name: String,
    },
    /// Audit log tools.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Create the audit store of a new installation (refused if one exists).
    Init {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
    },
    /// Verify the hash chain; exit 1 and name the first bad row if broken.
    Verify {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
    },
    /// Print every row as one JSON object per line.
    Export {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
    },
    /// Print the newest rows as JSON lines, oldest first.
    Tail {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
        /// How many rows.
        #[arg(long, short = 'n', default_value_t = 20)]
        lines: u32,
    },
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Serve { config } => {
            drydock_daemon::process::harden();
            let config = Config::load(&config)?;
            drydock_daemon::logging::init(config.log_format);
            let running = server::start(config).await?;
            let stop = running.shutdown_handle();
            tokio::spawn(async move {
                let signal = drydock_daemon::signals::shutdown().await;
                tracing::info!(%signal, "shutting down: finishing in-flight calls");
                let _ = stop.send(true);
            });
            running.wait().await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Health {
            addr,
            ca,
            cert,
            key,
            server_name,
        } => health(&addr, &ca, &cert, &key, &server_name).await,
        Command::CheckConfig { config } => {
            Config::load(&config)?;
            println!("{}: ok", config.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Audit { command } => {
            if let AuditCommand::Init { config } = &command {
                let config = Config::load(config)?;
                AuditLog::create(&config.audit.path)
                    .with_context(|| format!("audit.path {}", config.audit.path.display()))?;
                println!(
                    "initialised the audit store at {}",
                    config.audit.path.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let config = match &command {
                AuditCommand::Init { config }
                | AuditCommand::Verify { config }
                | AuditCommand::Export { config }
                | AuditCommand::Tail { config, .. } => Config::load(config)?,
            };
            let log =
                AuditLog::open_existing(&config.audit.path).context("opening the audit log")?;
            let rows = match command {
                AuditCommand::Init { .. } | AuditCommand::Verify { .. } => None,
                AuditCommand::Export { .. } => Some(log.rows()?),
                AuditCommand::Tail { lines, .. } => Some(log.tail(lines)?),
            };
            if let Some(rows) = rows {
                for row in rows {
                    println!("{}", serde_json::to_string(&row)?);
                }
                return Ok(ExitCode::SUCCESS);
            }
            match log.verify()? {
                Ok(n) => {
                    println!("audit log intact: {n} rows");
                    Ok(ExitCode::SUCCESS)
                }
                Err(problem) => {
                    println!("audit log TAMPERED: {problem}");
                    Ok(ExitCode::from(1))
                }
            }
        }
    }
}

async fn health(
    addr: &str,
    ca: &std::path::Path,
    cert: &std::path::Path,
    key: &std::path::Path,
    server_name: &str,
) -> anyhow::Result<ExitCode> {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};
    let read = |p: &std::path::Path| {
        std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))
    };
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(read(ca)?))
        .identity(Identity::from_pem(read(cert)?, read(key)?))
        .domain_name(server_name.to_string());
    let channel = Endpoint::from_shared(format!("https://{addr}"))?
        .tls_config(tls)?
        .connect_timeout(std::time::Duration::from_secs(3))
        .timeout(std::time::Duration::from_secs(3))
        .connect()
        .await
        .with_context(|| format!("cannot connect to {addr}"))?;
    let mut client = tonic_health::pb::health_client::HealthClient::new(channel);
    let answer = client
        .check(tonic_health::pb::HealthCheckRequest {
            service: "drydock.executor.v1.Executor".into(),
        })
        .await
        .context("health check failed")?
        .into_inner();
    let serving =
        answer.status == tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
    println!("{}", if serving { "serving" } else { "not serving" });
    Ok(if serving {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("drydock-executor: {e:#}");
            ExitCode::from(2)
        }
    }
}
