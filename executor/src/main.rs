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
    /// Automation grant tools.
    Grant {
        #[command(subcommand)]
        command: GrantCommand,
    },
}

#[derive(Subcommand)]
enum GrantCommand {
    /// Add a grant id to `automation.revocations`; the executor refuses the
    /// grant from its next use on (no restart needed).
    Revoke {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
        /// The grant id (`grt-...`), as `drydock grant list` shows it.
        id: String,
    },
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Create the audit store of a new installation (refused if one exists).
    Init {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
    },
    /// Verify the hash chain, and with --public-key every signed checkpoint;
    /// exit 1 and say what is wrong if the store was altered.
    Verify {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
        /// The audit key's public half (`ed25519:...`, or a file holding it),
        /// kept outside the store.
        #[arg(long)]
        public_key: Option<String>,
        /// A checkpoint exported earlier, as SEQ:HASH (what verify prints as
        /// "last signed checkpoint"): a store truncated or rewritten since
        /// fails.
        #[arg(long)]
        expect: Option<String>,
    },
    /// Print every row as one JSON object per line.
    Export {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
    },
    /// Take a consistent copy of the audit store (while the executor
    /// runs), its segments and the revocation list, into a new or empty
    /// folder.
    Backup {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
        /// The folder to write (made if missing; must be empty).
        #[arg(long)]
        to: PathBuf,
    },
    /// Restore a backup to `audit.path`, where no store may be (stop the
    /// executor and move the old store aside first). Approvals and grants
    /// issued before the restore are refused from then on.
    Restore {
        #[arg(long, env = "DRYDOCK_EXECUTOR_CONFIG")]
        config: PathBuf,
        /// The folder `audit backup --to` wrote.
        #[arg(long)]
        from: PathBuf,
        /// Move a store (and its segments) at `audit.path` into a
        /// `replaced-<time>` folder next to it first, instead of refusing.
        #[arg(long)]
        move_aside: bool,
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
        Command::Grant {
            command: GrantCommand::Revoke { config, id },
        } => {
            let config = Config::load(&config)?;
            let path = config.automation.revocations.as_deref().context(
                "automation.revocations is not set in the executor's config: there is no revocation list to add to",
            )?;
            let added = drydock_executor::revocations::revoke(path, &id)?;
            println!(
                "{} {id} in {} (refused from its next use on)",
                if added { "revoked" } else { "already revoked:" },
                path.display()
            );
            Ok(ExitCode::SUCCESS)
        }
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
            if let AuditCommand::Restore {
                config,
                from,
                move_aside,
            } = &command
            {
                let config = Config::read(config)?;
                let report = drydock_executor::audit::restore(
                    from,
                    &config.audit.path,
                    config.automation.revocations.as_deref(),
                    *move_aside,
                )
                .with_context(|| format!("restoring {}", from.display()))?;
                let backup = &report.backup;
                println!(
                    "restored {} rows ({} segments{}) from the backup taken at {} to {}; {}; approvals and grants issued up to {}s from now (the accepted clock skew) are refused",
                    backup.rows,
                    backup.segments,
                    if backup.revocations { ", revocations added" } else { "" },
                    backup.taken_at,
                    config.audit.path.display(),
                    report.carried,
                    drydock_proto::approval::CLOCK_SKEW_SECS
                );
                return Ok(ExitCode::SUCCESS);
            }
            let config = match &command {
                AuditCommand::Restore { config, .. } | AuditCommand::Backup { config, .. } => {
                    Config::read(config)?
                }
                AuditCommand::Init { config }
                | AuditCommand::Verify { config, .. }
                | AuditCommand::Export { config }
                | AuditCommand::Tail { config, .. } => Config::load(config)?,
            };
            let log =
                AuditLog::open_existing(&config.audit.path).context("opening the audit log")?;
            if let AuditCommand::Backup { to, .. } = &command {
                let report = log
                    .backup(to, config.automation.revocations.as_deref())
                    .with_context(|| format!("backing up to {}", to.display()))?;
                println!(
                    "backed up {} rows ({} segments{}) to {}; the copy verifies",
                    report.rows,
                    report.segments,
                    if report.revocations {
                        ", the revocation list"
                    } else {
                        ""
                    },
                    to.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let rows = match command {
                AuditCommand::Init { .. }
                | AuditCommand::Verify { .. }
                | AuditCommand::Backup { .. }
                | AuditCommand::Restore { .. } => None,
                AuditCommand::Export { .. } => Some(log.rows()?),
                AuditCommand::Tail { lines, .. } => Some(log.tail(lines)?),
            };
            if let Some(rows) = rows {
                for row in rows {
                    println!("{}", serde_json::to_string(&row)?);
                }
                return Ok(ExitCode::SUCCESS);
            }
            let AuditCommand::Verify {
                public_key, expect, ..
            } = command
            else {
                return Ok(ExitCode::SUCCESS);
            };
            verify(&log, public_key.as_deref(), expect.as_deref())
        }
    }
}

fn verify(
    log: &AuditLog,
    public_key: Option<&str>,
    expect: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let rows = log.rows()?;
    let Some(public_key) = public_key else {
        if expect.is_some() {
            anyhow::bail!("--expect needs --public-key (the checkpoint's signature is what makes it evidence)");
        }
        return Ok(match drydock_executor::audit::verify_rows(&rows) {
            Ok(n) => {
                let signed = rows
                    .iter()
                    .filter(|r| r.entry.decision == drydock_executor::audit::Decision::Checkpoint)
                    .count();
                println!("audit log intact: {n} rows{}", kept_note(&rows));
                if signed > 0 {
                    println!("{signed} signed checkpoints not checked: pass --public-key");
                }
                ExitCode::SUCCESS
            }
            Err(problem) => {
                println!("audit log TAMPERED: {problem}");
                ExitCode::from(1)
            }
        });
    };
    let text = if public_key.starts_with("ed25519:") {
        public_key.to_string()
    } else {
        std::fs::read_to_string(public_key)
            .with_context(|| format!("--public-key: cannot read {public_key}"))?
    };
    let key = drydock_proto::approval::parse_public_key(&text)
        .with_context(|| "--public-key is not an ed25519: public key")?;
    let expect = match expect {
        None => None,
        Some(e) => {
            let (seq, hash) = e
                .split_once(':')
                .and_then(|(s, h)| Some((s.parse::<i64>().ok()?, h)))
                .context("--expect takes SEQ:HASH, as verify prints it")?;
            Some((seq, hash))
        }
    };
    match drydock_executor::audit::verify_signed(&rows, &key, expect) {
        Ok(report) if report.expect_removed.is_some() => {
            println!(
                "audit log NOT CONFIRMED: the exported checkpoint's row was in a segment that retention deleted since (the chain now starts at row {}); \
                 the rows kept are intact, but the exported checkpoint can no longer be compared: export a newer one",
                report.expect_removed.unwrap_or_default()
            );
            Ok(ExitCode::from(1))
        }
        Ok(report) => {
            println!(
                "audit log intact: {} rows{}, {} signed checkpoints",
                report.rows,
                kept_note(&rows),
                report.checkpoints
            );
            match report.last_checkpoint {
                Some((seq, hash)) => {
                    println!("last signed checkpoint: {seq}:{hash}");
                    println!("rows after it (not yet attested): {}", report.unattested);
                }
                None => println!("no signed checkpoint yet"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(problem) => {
            println!("audit log TAMPERED: {problem}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Where the kept chain starts, when retention deleted its oldest rows.
fn kept_note(rows: &[drydock_executor::audit::AuditRow]) -> String {
    match rows.first() {
        Some(r) if r.seq > 1 => format!(
            " (rows {} to {}; rows before {} were deleted by retention, as the chain records)",
            r.seq,
            rows.last().map_or(r.seq, |l| l.seq),
            r.seq
        ),
        _ => String::new(),
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
