//! One function per command; `run` is the table from a parsed command line
//! to them. Each returns the exit code (`exit`); an error is mapped to one
//! by `main`.

use anyhow::Context as _;
use drydock_vocab::Status;

use crate::args::{ApproverKind, AuditCommand, Cli, Command, GrantCommand, HostCommand};
use crate::ask::{self, AskOptions};
use crate::client::AgentClient;
use crate::home::{self, CliConfig, Home, InitOptions};
use crate::text::safe;
use crate::{approve, claims, daemons, demo, doctor, exit, grant, render, show};

/// Run one parsed command line.
pub async fn run(cli: Cli) -> anyhow::Result<u8> {
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
            approver,
            ssh_key,
        } => init(
            &home,
            InitOptions {
                approver_ssh: match approver {
                    ApproverKind::File if ssh_key.is_some() => {
                        anyhow::bail!("--ssh-key names the key of `--approver ssh`: add that, or leave --ssh-key out")
                    }
                    ApproverKind::File => None,
                    ApproverKind::Ssh => Some(ssh_approver(ssh_key.as_deref())?),
                },
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
            },
        ),
        Command::Ui { port, no_open } => {
            let (agent, cfg) = agent(&home)?;
            crate::ui::serve(home, agent, cfg, port, !no_open).await?;
            Ok(exit::COMPLETED)
        }
        Command::Mcp => {
            // Only what reaching the agent needs: the approver key is never
            // loaded, so no tool can sign anything.
            let (agent, _) = agent(&home)?;
            crate::mcp::serve(agent).await?;
            Ok(exit::COMPLETED)
        }
        Command::Up => up(&home).await,
        Command::Down => down(&home).await,
        Command::Ask {
            container,
            host,
            diagnose_only,
            yes,
            json,
            to,
            message,
        } => {
            let options = AskOptions {
                message: message.join(" "),
                container,
                host,
                diagnose_only,
                update: false,
                build: None,
                yes,
                json,
                to,
            };
            Ok(ask::ask(&home.load_cli_config()?, &options)
                .await?
                .exit_code)
        }
        Command::Update {
            container,
            host,
            yes,
            json,
        } => {
            let message = format!("update {container}");
            let options = AskOptions::change(message, container, host, yes, json);
            let options = AskOptions {
                update: true,
                ..options
            };
            Ok(ask::ask(&home.load_cli_config()?, &options)
                .await?
                .exit_code)
        }
        Command::Build {
            container,
            at,
            host,
            yes,
            json,
        } => {
            let message = match &at {
                Some(at) => format!("build {container} at {at}"),
                None => format!("build {container}"),
            };
            let options = AskOptions::change(message, container, host, yes, json);
            let options = AskOptions {
                build: Some(drydock_vocab::BuildOptions {
                    at: at.unwrap_or_default(),
                }),
                ..options
            };
            Ok(ask::ask(&home.load_cli_config()?, &options)
                .await?
                .exit_code)
        }
        Command::Follow { id, yes } => {
            let (agent, cfg) = agent(&home)?;
            let mode = ask::approval_mode(yes);
            Ok(ask::follow_request(&agent, &cfg, &id, mode, false)
                .await?
                .exit_code)
        }
        Command::Approve { id, yes } => {
            let (agent, cfg) = agent(&home)?;
            approve_one(&agent, &cfg, &id, yes).await
        }
        Command::Reject { id } => {
            let (agent, _) = agent(&home)?;
            agent.reject(&id).await?;
            println!("rejected {}; nothing was changed", safe(&id));
            Ok(exit::COMPLETED)
        }
        Command::Approvals => approvals(&agent(&home)?.0).await,
        Command::Updates { check, json } => {
            let (agent, cfg) = agent(&home)?;
            updates(&agent, &cfg.sources, check, json).await
        }
        Command::Requests { status, host, json } => {
            requests(&agent(&home)?.0, status, host.as_deref(), json).await
        }
        Command::Show { id, json } => {
            let (agent, cfg) = agent(&home)?;
            show::show(&agent, &cfg.sources, &id, json).await
        }
        Command::Cancel { id } => {
            let request = agent(&home)?.0.cancel(&id).await?;
            println!(
                "canceled {}: {}",
                safe(&id),
                safe(request.outcome.as_deref().unwrap_or(""))
            );
            Ok(exit::COMPLETED)
        }
        Command::Doctor => Ok(doctor::run(&home).await),
        Command::Note { command } => crate::memory::note(&agent(&home)?.0, command).await,
        Command::Schedule { command } => crate::memory::schedule(&agent(&home)?.0, command).await,
        Command::Grant { command } => {
            let (agent, cfg) = agent(&home)?;
            match command {
                GrantCommand::Create(args) => grant::create(&agent, &cfg, &args).await,
                GrantCommand::List { json } => grant::list(&agent, json).await,
                GrantCommand::Revoke { id } => grant::revoke(&home, &agent, &id).await,
            }
        }
        Command::Host {
            command:
                HostCommand::Add {
                    name,
                    addresses,
                    layout,
                    out,
                    force,
                },
        } => crate::host::add_and_say(&home, &name, &addresses, layout, out.as_deref(), force),
        Command::Audit { command } => audit(&home, command),
        Command::Backup { dir } => crate::backup::backup(&home, &dir),
        Command::Restore { dir } => crate::backup::restore(&home, &dir),
        Command::Completions { shell } => {
            let mut cmd = crate::args::command();
            clap_complete::generate(shell, &mut cmd, "drydock", &mut std::io::stdout());
            Ok(exit::COMPLETED)
        }
        Command::Man { out } => man(out),
        Command::Demo { yes, keep } => demo::run(&demo::DemoOptions { yes, keep }).await,
    }
}

fn agent(home: &Home) -> anyhow::Result<(AgentClient, CliConfig)> {
    let cfg = home.load_cli_config()?;
    Ok((AgentClient::from_config(&cfg)?, cfg))
}

/// The ssh key an approver signs with: the `.pub` file named, or else the
/// first security key (`sk-`) the ssh-agent holds. A plain key there is
/// often the everyday login key, which signs without a touch wherever the
/// agent is forwarded: it is taken only when named.
fn ssh_approver(file: Option<&std::path::Path>) -> anyhow::Result<String> {
    use drydock_proto::approval::ssh::SshPublicKey;
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .with_context(|| format!("cannot read --ssh-key {}", file.display()))?;
        let key = SshPublicKey::parse(text.lines().next().unwrap_or_default())
            .map_err(|e| anyhow::anyhow!("--ssh-key {}: {e}", file.display()))?;
        return Ok(key.to_line());
    }
    let keys = crate::ssh_agent::identities()?;
    let Some((key, comment)) = keys.iter().find(|(k, _)| k.kind.is_security_key()) else {
        anyhow::bail!(
            "the ssh-agent holds no security key (sk-ssh-ed25519 or sk-ecdsa): name the key to approve with by its .pub file, --ssh-key FILE.pub (best one used only for drydock, added with `ssh-add -c` so the agent asks before each signature)"
        );
    };
    println!(
        "approver key: {} {} from the ssh-agent",
        key.kind.name(),
        safe(comment)
    );
    Ok(key.to_line())
}

fn init(home: &Home, options: InitOptions) -> anyhow::Result<u8> {
    let opts = options.for_layout();
    let written = home::init(home, &opts)?;
    println!("initialized {}:", home.root.display());
    for p in written {
        println!("  {}", p.display());
    }
    println!("{}", opts.scope_note());
    println!("{}", opts.next_step(&home.root));
    Ok(exit::COMPLETED)
}

async fn up(home: &Home) -> anyhow::Result<u8> {
    daemons::up(home).await?;
    println!(
        "drydock-executor and drydock-agent are running (logs in {})",
        home.path("logs").display()
    );
    Ok(exit::COMPLETED)
}

async fn down(home: &Home) -> anyhow::Result<u8> {
    let stopped = daemons::down(home).await?;
    if stopped.is_empty() {
        println!("nothing was running");
    } else {
        println!("stopped {}", stopped.join(", "));
    }
    Ok(exit::COMPLETED)
}

/// `drydock approve`: show the decoded claims, confirm, sign.
async fn approve_one(
    agent: &AgentClient,
    cfg: &CliConfig,
    id: &str,
    yes: bool,
) -> anyhow::Result<u8> {
    let pending = approve::pending(agent, id).await?.with_context(|| {
        format!(
            "no pending approval {}; `drydock approvals` lists them",
            safe(id)
        )
    })?;
    let (claims, bytes) = claims::decode(&pending.approval, None)?;
    println!("{}", claims::describe(&claims));
    if !yes {
        use std::io::{BufRead as _, IsTerminal as _, Write as _};
        if !std::io::stdin().is_terminal() {
            anyhow::bail!("no terminal to confirm on; pass --yes to approve without asking");
        }
        print!("Approve? [y/N] ");
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            println!(
                "not approved; it is still pending (`drydock reject {}` rejects it)",
                safe(id)
            );
            return Ok(exit::APPROVAL_PENDING);
        }
    }
    let signed = approve::sign(agent, cfg, &claims, &bytes).await?;
    if let Some(missing) = approve::still_missing(&signed, id) {
        println!("{}", approve::waiting_note(id, missing));
        return Ok(exit::APPROVAL_PENDING);
    }
    println!(
        "approved {}; follow the request with `drydock follow {}`",
        safe(id),
        safe(&claims.request_id)
    );
    Ok(exit::COMPLETED)
}

/// `drydock approvals`: each pending approval from its decoded claims.
async fn approvals(agent: &AgentClient) -> anyhow::Result<u8> {
    let pending = agent.approvals().await?;
    if pending.is_empty() {
        println!("no pending approvals");
    }
    for p in pending {
        match claims::decode(&p.approval, None) {
            Ok((c, _)) => {
                println!("{}  {}", safe(&c.approval_id), claims::describe(&c));
                let a = &p.approval;
                if a.required > 1 {
                    let signers = a.signers();
                    println!(
                        "  {} approvers must sign; signed by {}",
                        a.required,
                        match signers.is_empty() {
                            true => "nobody yet".to_string(),
                            false => safe(&signers.join(", ")),
                        }
                    );
                }
            }
            Err(e) => println!("(undecodable approval: {})", safe(&format!("{e:#}"))),
        }
    }
    Ok(exit::COMPLETED)
}

async fn updates(
    agent: &AgentClient,
    sources: &std::collections::BTreeMap<String, std::path::PathBuf>,
    check: bool,
    json: bool,
) -> anyhow::Result<u8> {
    let list = agent.updates(check).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(exit::COMPLETED);
    }
    match &list.checked_at {
        Some(at) => println!("checked {}", safe(at)),
        None => {
            println!("not checked since the agent started; `drydock updates --check` checks now")
        }
    }
    if list.updates.is_empty() {
        println!("no updates available");
    }
    let labelled = |version: &Option<String>, revision: &Option<String>| match (version, revision) {
        (Some(v), Some(r)) => format!(" version {}, revision {},", safe(v), safe(r)),
        (Some(v), None) => format!(" version {},", safe(v)),
        (None, Some(r)) => format!(" revision {},", safe(r)),
        (None, None) => String::new(),
    };
    for u in &list.updates {
        println!(
            "{}  {}: runs{} {}; the registry names{}{} {} (since {})",
            safe(&u.command_name()),
            safe(&u.reference),
            labelled(&u.version, &u.revision),
            safe(&u.image_id),
            u.new_tag
                .as_ref()
                .map(|t| format!(" the newer tag {}:", safe(t)))
                .unwrap_or_default(),
            labelled(&u.new_version, &u.new_revision),
            safe(&u.registry_digest),
            safe(&u.found_at),
        );
        if let Some(why) = &u.labels_unread {
            println!("  (the new image's labels were not read: {})", safe(why));
        }
        if let (Some(from), Some(to)) = (&u.revision, &u.new_revision) {
            let service = u.service.as_deref().unwrap_or_default();
            crate::show::commits(sources, service, &u.container, from, to, "  ");
        }
        println!("  drydock update {}", safe(&u.command_name()));
    }
    for n in &list.not_checked {
        println!(
            "not checked: {} on {}: {}",
            safe(&n.container),
            safe(&n.host),
            safe(&n.why)
        );
    }
    Ok(exit::COMPLETED)
}

async fn requests(
    agent: &AgentClient,
    status: Option<Status>,
    host: Option<&str>,
    json: bool,
) -> anyhow::Result<u8> {
    let list = agent.requests_on(status, host, None).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&list)?);
    } else {
        for r in &list {
            println!("{}", render::request_line(r));
        }
    }
    Ok(exit::COMPLETED)
}

fn man(out: Option<std::path::PathBuf>) -> anyhow::Result<u8> {
    let cmd = crate::args::command();
    match out {
        Some(dir) => {
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(cmd, &dir)
                .with_context(|| format!("cannot write man pages into {}", dir.display()))?;
            println!("man pages written to {}", dir.display());
        }
        None => clap_mangen::Man::new(cmd).render(&mut std::io::stdout())?,
    }
    Ok(exit::COMPLETED)
}

/// The local layout's audit log, through the executor's own audit tools
/// (the CLI never opens the executor's store itself).
fn audit(home: &Home, command: AuditCommand) -> anyhow::Result<u8> {
    let bin = daemons::find_binary("drydock-executor").context(
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
