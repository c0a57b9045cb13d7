//! `drydock ask` and `drydock follow`: submit a request, stream its
//! progress, and decide its approvals as the person asked (prompt, `--yes`,
//! or leave them pending). What is shown comes from `render`; what is signed
//! comes from `claims`, never from the agent's free text.

use std::cell::RefCell;
use std::io::{BufRead as _, IsTerminal as _, Write as _};

use drydock_vocab::{EventPayload, Request};

use crate::approve;
use crate::claims;
use crate::client::AgentClient;
use crate::exit;
use crate::home::CliConfig;
use crate::render;
use crate::term::{confirm, Spinner};
use crate::text::{capitalized, safe};

#[derive(Debug, Clone, Default)]
pub struct AskOptions {
    pub message: String,
    pub container: Option<String>,
    pub host: Option<String>,
    pub diagnose_only: bool,
    /// `drydock update`: update the container to its tag's newest image.
    pub update: bool,
    /// `drydock build`: build the container from its build context (at a
    /// revision) and run what was built.
    pub build: Option<drydock_vocab::BuildOptions>,
    pub yes: bool,
    pub json: bool,
    /// `--to REQ`: a follow-up on that request instead of a new one.
    pub to: Option<String>,
}

impl AskOptions {
    /// A person's change of one named container (an update, a build),
    /// followed as `ask` follows a request.
    pub fn change(
        message: String,
        container: String,
        host: Option<String>,
        yes: bool,
        json: bool,
    ) -> AskOptions {
        AskOptions {
            message,
            container: Some(container),
            host,
            diagnose_only: false,
            update: false,
            build: None,
            yes,
            json,
            to: None,
        }
    }
}

/// How an approval gets decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// `--yes`: sign what was proposed without asking.
    AutoApprove,
    /// A terminal: ask the person.
    Prompt,
    /// No terminal and no `--yes`: leave it pending.
    LeavePending,
}

pub fn approval_mode(yes: bool) -> ApprovalMode {
    if yes {
        ApprovalMode::AutoApprove
    } else if std::io::stdin().is_terminal() {
        ApprovalMode::Prompt
    } else {
        ApprovalMode::LeavePending
    }
}

/// The result of following one request.
pub struct AskResult {
    pub request: Request,
    pub exit_code: u8,
}

/// What the follow loop decided along the way.
#[derive(Default)]
struct Decisions {
    /// Approvals left for a person (no terminal, no `--yes`).
    pending: Vec<String>,
    /// Containers a person refused to have changed.
    rejected: Vec<String>,
    /// Approvals signed here that wait for more approvers.
    waiting: Vec<String>,
}

/// Follow `request_id` to its end, deciding approvals per `mode`.
pub async fn follow_request(
    agent: &AgentClient,
    cfg: &CliConfig,
    request_id: &str,
    mode: ApprovalMode,
    quiet: bool,
) -> anyhow::Result<AskResult> {
    follow_request_after(agent, cfg, request_id, None, mode, quiet).await
}

/// Like `follow_request`, from the event after `after` (a follow-up's
/// round starts at its own event).
async fn follow_request_after(
    agent: &AgentClient,
    cfg: &CliConfig,
    request_id: &str,
    after: Option<i64>,
    mode: ApprovalMode,
    quiet: bool,
) -> anyhow::Result<AskResult> {
    let decisions = RefCell::new(Decisions::default());
    let spinner = if quiet {
        Spinner::none()
    } else {
        Spinner::start()
    };
    let followed = agent.follow(request_id, after, |event| {
        let (decisions, spinner) = (&decisions, &spinner);
        async move {
            spinner.clear();
            if !quiet {
                render::event(&event);
            }
            let approval = match &event.payload {
                EventPayload::Status(s) | EventPayload::Interrupted(s) => {
                    spinner.set_phase(s.status.as_str());
                    return Ok(true);
                }
                EventPayload::ApprovalRequested(a) => &a.approval,
                _ => return Ok(true),
            };
            let (claims, bytes) = claims::decode(approval, Some(request_id))?;
            // A replayed stream (reconnect, `drydock follow`) shows
            // approvals decided long ago: only a pending one is asked.
            if !approve::still_pending(agent, request_id, &claims.approval_id, &cfg.approver.id)
                .await?
            {
                return Ok(true);
            }
            match mode {
                ApprovalMode::AutoApprove => {
                    if !quiet {
                        println!("  approving (--yes): {}", claims::describe(&claims));
                    }
                    let signed = approve::sign(agent, cfg, &claims, &bytes).await?;
                    Ok(!waits_for_others(
                        &signed,
                        &claims.approval_id,
                        decisions,
                        quiet,
                    ))
                }
                ApprovalMode::Prompt => {
                    println!("  approval needed: {}", claims::describe(&claims));
                    let (_, name, _) = claims::target_of(&claims);
                    let question =
                        format!("{} {}?", capitalized(claims.action.as_str()), safe(&name));
                    if confirm(&question).await {
                        let signed = approve::sign(agent, cfg, &claims, &bytes).await?;
                        if waits_for_others(&signed, &claims.approval_id, decisions, quiet) {
                            return Ok(false);
                        }
                    } else {
                        agent.reject(&claims.approval_id).await?;
                        decisions.borrow_mut().rejected.push(name);
                    }
                    Ok(true)
                }
                ApprovalMode::LeavePending => {
                    if !quiet {
                        println!("  approval needed: {}", claims::describe(&claims));
                    }
                    decisions.borrow_mut().pending.push(claims.approval_id);
                    Ok(false)
                }
            }
        }
    });
    tokio::select! {
        followed = followed => followed?,
        _ = tokio::signal::ctrl_c() => {
            spinner.stop();
            return interrupted(agent, request_id).await;
        }
    }
    spinner.stop();
    let decisions = decisions.into_inner();
    let request = agent.request(request_id).await?;
    if !decisions.waiting.is_empty() {
        return Ok(AskResult {
            request,
            exit_code: exit::APPROVAL_PENDING,
        });
    }
    if !decisions.pending.is_empty() {
        if !quiet {
            println!("No terminal to ask on and --yes not given: the approval is pending.");
            for id in &decisions.pending {
                let id = safe(id);
                println!(
                    "  approve it with: drydock approve {id}   (or reject: drydock reject {id})"
                );
            }
        }
        return Ok(AskResult {
            request,
            exit_code: exit::APPROVAL_PENDING,
        });
    }
    if !quiet {
        render::outcome(request.status, request.outcome.as_deref().unwrap_or(""));
        for name in &decisions.rejected {
            println!("Left {} untouched: no change was made.", safe(name));
        }
    }
    Ok(AskResult {
        exit_code: exit::for_status(request.status),
        request,
    })
}

/// After this person signed: whether the approval waits for more approvers
/// (it is then left to them, and said so).
fn waits_for_others(
    signed: &Request,
    approval_id: &str,
    decisions: &std::cell::RefCell<Decisions>,
    quiet: bool,
) -> bool {
    let Some(missing) = approve::still_missing(signed, approval_id) else {
        return false;
    };
    if !quiet {
        println!("  {}", approve::waiting_note(approval_id, missing));
    }
    decisions.borrow_mut().waiting.push(approval_id.to_string());
    true
}

/// Ctrl-C while following: offer to cancel the request; otherwise leave it
/// running and say how to come back to it. A second Ctrl-C at the question
/// means "just stop following".
async fn interrupted(agent: &AgentClient, request_id: &str) -> anyhow::Result<AskResult> {
    let id = safe(request_id);
    let question = format!("\nCancel request {id}?");
    let cancel = std::io::stdin().is_terminal()
        && tokio::select! {
            yes = confirm(&question) => yes,
            _ = tokio::signal::ctrl_c() => false,
        };
    if cancel {
        let request = agent.cancel(request_id).await?;
        println!(
            "canceled {id}: {}",
            safe(request.outcome.as_deref().unwrap_or(""))
        );
        return Ok(AskResult {
            request,
            exit_code: exit::CANCELED,
        });
    }
    println!("\nstopped following; {id} goes on. `drydock follow {id}` resumes, `drydock cancel {id}` stops it.");
    Ok(AskResult {
        request: agent.request(request_id).await?,
        exit_code: exit::INTERRUPTED,
    })
}

pub async fn ask(cfg: &CliConfig, opts: &AskOptions) -> anyhow::Result<AskResult> {
    let agent = AgentClient::from_config(cfg)?;
    if let Some(to) = &opts.to {
        return follow_up(&agent, cfg, to, opts).await;
    }
    let created = agent
        .create(
            &opts.message,
            drydock_vocab::RequestOptions {
                container: opts.container.clone(),
                host: opts.host.clone(),
                diagnose_only: opts.diagnose_only,
                update: opts.update,
                build: opts.build.clone(),
                utc_offset_minutes: None,
            },
        )
        .await?;
    let id = created.id;
    if !opts.json {
        println!("request {}: {}", safe(&id), safe(&opts.message));
    }
    let result = follow_request(&agent, cfg, &id, approval_mode(opts.yes), opts.json).await?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&result.request)?);
        return Ok(result);
    }
    // An unclear target on a terminal: let the person pick, then ask again
    // about exactly that container.
    if result.exit_code == exit::NEEDS_CLARIFICATION
        && opts.container.is_none()
        && std::io::stdin().is_terminal()
    {
        if let Some(choice) = pick_candidate(&result.request) {
            let again = AskOptions {
                container: Some(choice),
                ..opts.clone()
            };
            return Box::pin(ask(cfg, &again)).await;
        }
    }
    Ok(result)
}

/// `drydock ask --to REQ "..."`: add the words to that request and follow
/// it from there (a finished one runs a new round).
async fn follow_up(
    agent: &AgentClient,
    cfg: &CliConfig,
    id: &str,
    opts: &AskOptions,
) -> anyhow::Result<AskResult> {
    let added = agent.follow_up(id, &opts.message).await?;
    if !opts.json {
        let how = if added.reopened {
            format!("reopened it as round {}", added.round)
        } else {
            format!(
                "it is {}; it counts from its next phase",
                added.request.status
            )
        };
        println!("request {}: follow-up added; {how}", safe(id));
    }
    // A new round is followed from the follow-up on; a request still under
    // way from its start, so that an approval it already waits for is
    // asked (or left pending) as `drydock follow` would.
    let after = added.reopened.then_some(added.seq - 1);
    let result =
        follow_request_after(agent, cfg, id, after, approval_mode(opts.yes), opts.json).await?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&result.request)?);
    }
    Ok(result)
}

/// Number the candidates and read a choice; `None` when the person declines.
fn pick_candidate(request: &Request) -> Option<String> {
    // On several hosts a candidate is `NAME@HOST`, which the agent reads.
    let candidates: Vec<String> = request
        .candidates
        .iter()
        .map(|c| match &c.host {
            Some(h) => format!("{}@{h}", c.container_name),
            None => c.container_name.clone(),
        })
        .collect();
    if candidates.is_empty() {
        return None;
    }
    println!("Which container did you mean?");
    for (i, name) in candidates.iter().enumerate() {
        println!("  {}) {}", i + 1, safe(name));
    }
    print!("Pick 1-{} (anything else cancels): ", candidates.len());
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    let n: usize = line.trim().parse().ok()?;
    candidates.get(n.checked_sub(1)?).cloned()
}
