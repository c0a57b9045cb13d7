//! `drydock`: the operator CLI. Failures map to exit codes in one place
//! (`main`); see `ask::exit`.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser as _;
use drydock::args::{AuditCommand, Cli, Command, GrantCommand};
use drydock::ask::{self, exit, AskOptions};
use drydock::client::AgentClient;
use drydock::home::{self, Home, InitOptions};
use drydock::{daemons, demo};
use serde_json::{json, Value};

fn agent(home: &Home) -> anyhow::Result<(AgentClient, home::CliConfig)> {
    let cfg = home.load_cli_config()?;
    Ok((AgentClient::from_config(&cfg)?, cfg))
}

async fn run(cli: Cli) -> anyhow::Result<u8> {
    let home = Home::locate()?;
    match cli.command {
        Command::Init {
            force,
            layout,
            executor_port,
            agent_port,
            executor_names,
            approver_id,
            targets,
            agent_tcp,
            agent_tls,
            no_watch,
        } => {
            let opts = InitOptions {
                force,
                executor_port,
                agent_port,
                executor_names,
                approver_id,
                docker_endpoint: home::default_docker_endpoint(),
                targets,
                agent_tcp,
                agent_tls,
                watch: !no_watch,
                layout,
            }
            .for_layout();
            let written = home::init(&home, &opts)?;
            println!("initialized {}:", home.root.display());
            for p in written {
                println!("  {}", p.display());
            }
            println!("{}", opts.scope_note());
            println!("{}", opts.next_step(&home.root));
            Ok(exit::COMPLETED)
        }
        Command::Ui { port, no_open } => {
            let (agent, cfg) = agent(&home)?;
            drydock::ui::serve(home, agent, cfg, port, !no_open).await?;
            Ok(exit::COMPLETED)
        }
        Command::Mcp => {
            // Only what reaching the agent needs: the approver key is never
            // loaded, so no tool can sign anything.
            let (agent, _) = agent(&home)?;
            drydock::mcp::serve(agent).await?;
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
            let approval = ask::pending_approval(&agent, &id).await?.with_context(|| {
                format!("no pending approval {id}; `drydock approvals` lists them")
            })?;
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
                    let source = match s("source") {
                        src if src.is_empty() => "ask".to_string(),
                        src => src,
                    };
                    println!(
                        "{}  {:<20} {:<6} {}  {}",
                        ask::safe(&s("id")),
                        ask::safe(&s("status")),
                        ask::safe(&source),
                        ask::safe(&s("created_at")),
                        ask::safe(&s("message"))
                    );
                }
            }
            Ok(exit::COMPLETED)
        }
        Command::Show { id, json } => {
            let (agent, _) = agent(&home)?;
            drydock::show::show(&agent, &id, json).await
        }
        Command::Cancel { id } => {
            let (agent, _) = agent(&home)?;
            let request = drydock::show::cancel(&agent, &id).await?;
            println!(
                "canceled {}: {}",
                ask::safe(&id),
                ask::safe(request.get("outcome").and_then(Value::as_str).unwrap_or(""))
            );
            Ok(exit::COMPLETED)
        }
        Command::Doctor => Ok(drydock::doctor::run(&home).await),
        Command::Grant { command } => {
            let (agent, cfg) = agent(&home)?;
            match command {
                GrantCommand::Create(args) => drydock::grant::create(&agent, &cfg, &args).await,
                GrantCommand::List { json } => drydock::grant::list(&agent, json).await,
                GrantCommand::Revoke { id } => drydock::grant::revoke(&home, &agent, &id).await,
            }
        }
        Command::Audit { command } => audit(&home, command),
        Command::Completions { shell } => {
            let mut cmd = drydock::args::command();
            clap_complete::generate(shell, &mut cmd, "drydock", &mut std::io::stdout());
            Ok(exit::COMPLETED)
        }
        Command::Man { out } => {
            let cmd = drydock::args::command();
            match out {
                Some(dir) => {
                    std::fs::create_dir_all(&dir)
                        .with_context(|| format!("cannot create {}", dir.display()))?;
                    clap_mangen::generate_to(cmd, &dir).with_context(|| {
                        format!("cannot write man pages into {}", dir.display())
                    })?;
                    println!("man pages written to {}", dir.display());
                }
                None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
            }
            Ok(exit::COMPLETED)
        }
        Command::Demo { yes, keep } => demo::run(&demo::DemoOptions { yes, keep }).await,
    }
}

/// The local layout's audit log, through the executor's own audit tools
/// (the CLI never opens the executor's store itself).
fn audit(home: &Home, command: AuditCommand) -> anyhow::Result<u8> {
    let bin = drydock::daemons::find_binary("drydock-executor").context(
        "drydock-executor not found (looked at $DRYDOCK_EXECUTOR_BIN, next to drydock, and on PATH)",
    )?;
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("audit");
    match command {
        AuditCommand::Verify { expect } => {
            cmd.arg("verify");
            let public = home.path("pki/audit.pub");
            if public.is_file() {
                cmd.arg("--public-key").arg(public);
            }
            if let Some(e) = expect {
                cmd.arg("--expect").arg(e);
            }
            &mut cmd
        }
        AuditCommand::Export => cmd.arg("export"),
        AuditCommand::Tail { lines } => cmd.arg("tail").arg("--lines").arg(lines.to_string()),
    };
    let status = cmd
        .arg("--config")
        .arg(home.executor_config())
        .status()
        .context("cannot run drydock-executor")?;
    Ok(match status.code() {
        Some(0) => exit::COMPLETED,
        Some(1) => exit::FAILED,
        _ => exit::USAGE,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    drydock::term::init_color(cli.color);
    match run(cli).await {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("drydock: {}", ask::safe_lines(&format!("{e:#}")));
            ExitCode::from(exit::USAGE)
        }
    }
}
