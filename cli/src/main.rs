//! `drydock`: the operator CLI. Failures map to exit codes in one place
//! (`main`); see `ask::exit`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use drydock::ask::{self, exit, AskOptions};
use drydock::client::AgentClient;
use drydock::home::{self, Home, InitOptions};
use drydock::{daemons, demo};
use serde_json::{json, Value};

#[derive(Parser)]
#[command(
    name = "drydock",
    version,
    about = "Find out why a Docker container is broken and fix it safely"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the CA, certificates, approver key, agent token and configs into $DRYDOCK_HOME.
    Init {
        /// Replace an existing home's keys and configs.
        #[arg(long)]
        force: bool,
        #[arg(long, default_value_t = home::DEFAULT_EXECUTOR_PORT)]
        executor_port: u16,
        #[arg(long, default_value_t = home::DEFAULT_AGENT_PORT)]
        agent_port: u16,
        /// Extra DNS names for the executor's certificate (for example the compose service name).
        #[arg(long = "executor-name")]
        executor_names: Vec<String>,
        /// The approver id the executor knows this operator's key by.
        #[arg(long, default_value = home::DEFAULT_APPROVER_ID)]
        approver_id: String,
    },
    /// Start the executor and the agent in the background.
    Up,
    /// Stop both daemons.
    Down,
    /// Ask drydock about a broken service: diagnose, plan, approve, fix, verify.
    Ask {
        /// The exact container (name or id) instead of discovery from the message.
        #[arg(long)]
        container: Option<String>,
        /// Diagnose only: never propose a change.
        #[arg(long)]
        diagnose_only: bool,
        /// Approve the proposed plan without asking (still signed with the local approver key).
        #[arg(long)]
        yes: bool,
        /// Print only the final request as one JSON object.
        #[arg(long)]
        json: bool,
        /// What is wrong, in your words: "backend is down".
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
    },
    /// Follow an existing request until it finishes.
    Follow {
        id: String,
        #[arg(long)]
        yes: bool,
    },
    /// Approve a pending approval (signs its claims with your key).
    Approve {
        id: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
    /// Reject a pending approval; nothing is changed.
    Reject { id: String },
    /// List pending approvals.
    Approvals,
    /// List recent requests.
    Requests {
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Run the whole loop on a local demo service (builds what it needs).
    Demo {
        /// Approve the fix without asking.
        #[arg(long)]
        yes: bool,
        /// Keep the demo container and the daemons running afterwards.
        #[arg(long)]
        keep: bool,
    },
}

fn agent(home: &Home) -> anyhow::Result<(AgentClient, home::CliConfig)> {
    let cfg = home.load_cli_config()?;
    Ok((AgentClient::new(&cfg.agent_url, cfg.token()?)?, cfg))
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    let home = Home::locate()?;
    match cli.command {
        Command::Init {
            force,
            executor_port,
            agent_port,
            executor_names,
            approver_id,
        } => {
            let written = home::init(
                &home,
                &InitOptions {
                    force,
                    executor_port,
                    agent_port,
                    executor_names,
                    approver_id,
                    docker_endpoint: home::default_docker_endpoint(),
                },
            )?;
            println!("initialized {}:", home.root.display());
            for p in written {
                println!("  {}", p.display());
            }
            println!("next: `drydock up`, then `drydock ask \"<what is wrong>\"`");
            Ok(exit::COMPLETED)
        }
        Command::Up => {
            daemons::up(&home).await?;
            println!(
                "drydock-executor and drydock-agent are running (logs in {})",
                home.path("logs").display()
            );
            Ok(exit::COMPLETED)
        }
        Command::Down => {
            let stopped = daemons::down(&home).await?;
            if stopped.is_empty() {
                println!("nothing was running");
            } else {
                println!("stopped {}", stopped.join(", "));
            }
            Ok(exit::COMPLETED)
        }
        Command::Ask {
            container,
            diagnose_only,
            yes,
            json,
            message,
        } => {
            let cfg = home.load_cli_config()?;
            let result = ask::ask(
                &cfg,
                &AskOptions {
                    message: message.join(" "),
                    container,
                    diagnose_only,
                    yes,
                    json,
                },
            )
            .await?;
            Ok(result.exit_code)
        }
        Command::Follow { id, yes } => {
            let (agent, cfg) = agent(&home)?;
            Ok(
                ask::follow_request(&agent, &cfg, &id, ask::approval_mode(yes), false)
                    .await?
                    .exit_code,
            )
        }
        Command::Approve { id, yes } => {
            let (agent, cfg) = agent(&home)?;
            let pending = agent.get("/api/v1/approvals").await?;
            let entry = pending
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| {
                    p.get("approval")
                        .and_then(|a| a.get("id"))
                        .and_then(Value::as_str)
                        == Some(id.as_str())
                })
                .with_context(|| {
                    format!("no pending approval {id}; `drydock approvals` lists them")
                })?;
            let approval = entry.get("approval").cloned().unwrap_or(Value::Null);
            let (claims, bytes) = ask::decode_claims(&approval, None)?;
            println!("{}", ask::describe_claims(&claims));
            if !yes {
                use std::io::{BufRead as _, IsTerminal as _, Write as _};
                if !std::io::stdin().is_terminal() {
                    anyhow::bail!(
                        "no terminal to confirm on; pass --yes to approve without asking"
                    );
                }
                print!("Approve? [y/N] ");
                std::io::stdout().flush()?;
                let mut line = String::new();
                std::io::stdin().lock().read_line(&mut line)?;
                if !matches!(line.trim(), "y" | "Y" | "yes") {
                    println!(
                        "not approved; it is still pending (`drydock reject {id}` rejects it)"
                    );
                    return Ok(exit::APPROVAL_PENDING);
                }
            }
            ask::sign_and_approve(&agent, &cfg, &claims, &bytes).await?;
            println!(
                "approved {id}; follow the request with `drydock follow {}`",
                claims.request_id
            );
            Ok(exit::COMPLETED)
        }
        Command::Reject { id } => {
            let (agent, _) = agent(&home)?;
            agent
                .post(&format!("/api/v1/approvals/{id}/reject"), json!({}))
                .await?;
            println!("rejected {id}; nothing was changed");
            Ok(exit::COMPLETED)
        }
        Command::Approvals => {
            let (agent, _) = agent(&home)?;
            let pending = agent.get("/api/v1/approvals").await?;
            let list = pending.as_array().cloned().unwrap_or_default();
            if list.is_empty() {
                println!("no pending approvals");
            }
            for p in list {
                let approval = p.get("approval").cloned().unwrap_or(Value::Null);
                match ask::decode_claims(&approval, None) {
                    Ok((c, _)) => println!("{}  {}", c.approval_id, ask::describe_claims(&c)),
                    Err(e) => println!("(undecodable approval: {e})"),
                }
            }
            Ok(exit::COMPLETED)
        }
        Command::Requests { status, json } => {
            let (agent, _) = agent(&home)?;
            let path = match &status {
                Some(s) => format!("/api/v1/requests?status={s}"),
                None => "/api/v1/requests".to_string(),
            };
            let list = agent.get(&path).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                for r in list.as_array().into_iter().flatten() {
                    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                    println!(
                        "{}  {:<20} {}  {}",
                        ask::safe(&s("id")),
                        ask::safe(&s("status")),
                        ask::safe(&s("created_at")),
                        ask::safe(&s("message"))
                    );
                }
            }
            Ok(exit::COMPLETED)
        }
        Command::Demo { yes, keep } => demo::run(&demo::DemoOptions { yes, keep }).await,
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("drydock: {}", ask::safe_lines(&format!("{e:#}")));
            ExitCode::from(exit::USAGE)
        }
    }
}
