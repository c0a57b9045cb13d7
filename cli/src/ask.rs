//! `drydock ask`: submit a request, stream its progress, and handle approvals.
//!
//! The approval prompt is built from the decoded claims the CLI is about to
//! sign (action, container name and id, expiry), never from the agent's free
//! text, so a compromised agent cannot get a signature for something other
//! than what the human saw.

use std::cell::RefCell;
use std::io::{BufRead as _, IsTerminal as _, Write as _};

use anyhow::{bail, Context as _};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::{self, ApprovalClaims};
use serde_json::{json, Value};

use crate::client::AgentClient;
use crate::home::CliConfig;
use crate::term::{confirm, paint, Spinner, Style};

/// Exit codes, in one place.
pub mod exit {
    pub const COMPLETED: u8 = 0;
    pub const FAILED: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const APPROVAL_PENDING: u8 = 3;
    pub const NEEDS_CLARIFICATION: u8 = 4;
    pub const REJECTED: u8 = 5;
    pub const CANCELED: u8 = 6;
    /// Ctrl-C while following, and the request was left running.
    pub const INTERRUPTED: u8 = 130;
}

#[derive(Debug, Clone, Default)]
pub struct AskOptions {
    pub message: String,
    pub container: Option<String>,
    pub diagnose_only: bool,
    pub yes: bool,
    pub json: bool,
}

/// How an approval gets decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalMode {
    /// `--yes`: sign what was proposed without asking.
    AutoApprove,
    /// A terminal: ask the human.
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

fn short(id: &str) -> String {
    safe(&id.chars().take(12).collect::<String>())
}

/// Text from the agent is untrusted: control characters (terminal escape
/// sequences) are shown as `?`, never interpreted by the terminal.
pub fn safe(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Like `safe`, keeping line breaks (multi-line error reports).
pub fn safe_lines(text: &str) -> String {
    text.lines().map(safe).collect::<Vec<_>>().join("\n")
}

fn capitalized(action: &str) -> String {
    let mut c = action.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// The pending approval `id` as the agent lists it (`None` when it is not
/// pending): what `drydock approve` and the console decode and sign.
pub async fn pending_approval(agent: &AgentClient, id: &str) -> anyhow::Result<Option<Value>> {
    let pending = agent.get("/api/v1/approvals").await?;
    Ok(pending
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p.get("approval"))
        .find(|a| a.get("id").and_then(Value::as_str) == Some(id))
        .cloned())
}

/// Decode what the agent asks us to sign and check it belongs to the request
/// we are following.
pub fn decode_claims(
    approval: &Value,
    expected_request: Option<&str>,
) -> anyhow::Result<(ApprovalClaims, Vec<u8>)> {
    let b64 = approval
        .get("claims")
        .and_then(Value::as_str)
        .context("approval has no claims")?;
    let bytes = B64.decode(b64).context("approval claims are not base64")?;
    let claims = ApprovalClaims::decode(&bytes)?;
    if let Some(req) = expected_request {
        if claims.request_id != req {
            bail!("the agent asked to sign an approval for request {} while following {req}; refusing", claims.request_id);
        }
    }
    let id = approval
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if claims.approval_id != id {
        bail!(
            "approval {id} carries claims for {}; refusing",
            claims.approval_id
        );
    }
    Ok((claims, bytes))
}

/// The latest time humantime (and RFC 3339) can write: 9999-12-31T23:59:59Z.
const LAST_WRITABLE_SECOND: i64 = 253_402_300_799;
/// Claims are signed only if their lifetime is at most this long, whatever
/// the agent asks: the agent's own `approval_ttl` cannot be set higher.
pub const MAX_SIGNED_LIFETIME_SECS: i64 = 3600;
/// How far the agent's clock may be ahead of ours when it issued claims.
const ISSUED_AT_SKEW_SECS: i64 = 60;

/// `2026-11-30T21:09:00Z (in 9 min)`: absolute and relative, and never a
/// panic, whatever the agent put in the claims.
pub fn describe_time(t: i64, now: i64) -> String {
    if !(0..=LAST_WRITABLE_SECOND).contains(&t) {
        return format!("at unix time {t}, which is not a real date");
    }
    let absolute = humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(t.unsigned_abs()),
    );
    let delta = t.saturating_sub(now);
    let span = |secs: i64| {
        let secs = secs.unsigned_abs();
        match secs {
            0..=89 => format!("{secs} s"),
            90..=5399 => format!("{} min", (secs + 30) / 60),
            5400..=129_599 => format!("{} h", (secs + 1800) / 3600),
            _ => format!("{} days", (secs + 43_200) / 86_400),
        }
    };
    let relative = if delta >= 0 {
        format!("in {}", span(delta))
    } else {
        format!("{} ago", span(delta))
    };
    format!("{absolute} ({relative})")
}

/// Refuse to sign claims a careful human would not: an empty or inverted
/// window, a lifetime longer than any the agent may give
/// (`max_lifetime` seconds), an `issued_at` not close to now, or claims
/// already expired. The executor checks the same, but a signature that
/// is never made cannot be misused.
pub fn check_signable(c: &ApprovalClaims, now: i64, max_lifetime: i64) -> anyhow::Result<()> {
    if c.expires_at <= c.issued_at {
        bail!("refusing to sign: the claims' expiry is not after their issue time");
    }
    let lifetime = c.expires_at.checked_sub(c.issued_at);
    if lifetime.is_none_or(|l| l > max_lifetime) {
        bail!(
            "refusing to sign: the claims would stay valid for longer than {} (expires {})",
            humantime::format_duration(std::time::Duration::from_secs(max_lifetime.unsigned_abs())),
            describe_time(c.expires_at, now)
        );
    }
    if c.expires_at <= now {
        bail!(
            "refusing to sign: the approval expired {}",
            describe_time(c.expires_at, now)
        );
    }
    if c.issued_at > now.saturating_add(ISSUED_AT_SKEW_SECS)
        || c.issued_at < now.saturating_sub(max_lifetime.saturating_add(ISSUED_AT_SKEW_SECS))
    {
        bail!(
            "refusing to sign: the claims say they were issued {}, which is not close to now; check the agent's clock",
            describe_time(c.issued_at, now)
        );
    }
    Ok(())
}

pub fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub fn describe_claims(c: &ApprovalClaims) -> String {
    let expires = describe_time(c.expires_at, unix_now());
    format!(
        "{} container {} (id {}) — request {}, approval {}, expires {expires}",
        c.action,
        safe(&c.container_name),
        safe(&c.container_id),
        safe(&c.request_id),
        safe(&c.approval_id)
    )
}

/// Sign and send the approval.
pub async fn sign_and_approve(
    agent: &AgentClient,
    cfg: &CliConfig,
    claims: &ApprovalClaims,
    bytes: &[u8],
) -> anyhow::Result<()> {
    check_signable(claims, unix_now(), cfg.max_signed_lifetime())?;
    let key = cfg.signing_key()?;
    let sig = approval::sign(bytes, &key);
    agent
        .post(
            &format!("/api/v1/approvals/{}/approve", claims.approval_id),
            json!({"key_id": cfg.approver.id, "signature": B64.encode(sig)}),
        )
        .await?;
    Ok(())
}

/// The last line of a followed or shown request.
pub fn print_outcome(status: &str, outcome: &str) {
    let mark = if status == "completed" {
        paint("✔", Style::Good)
    } else {
        paint("✘", Style::Bad)
    };
    println!(
        "{mark} {}: {}",
        paint(&safe(status), Style::Bold),
        safe(outcome)
    );
}

/// How to decide the request's pending approvals.
pub fn print_pending_approvals(request: &Value) {
    println!("… waiting for approval:");
    for a in request
        .get("approvals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| a.get("status").and_then(Value::as_str) == Some("pending"))
    {
        let id = safe(a.get("id").and_then(Value::as_str).unwrap_or(""));
        println!("  approve it with: drydock approve {id}   (or reject: drydock reject {id})");
    }
}

/// Print one event for a human.
pub fn render(event: &Value) {
    let kind = event.get("kind").and_then(Value::as_str).unwrap_or("");
    let d = event.get("data").cloned().unwrap_or(Value::Null);
    let s = |v: &Value, k: &str| safe(v.get(k).and_then(Value::as_str).unwrap_or(""));
    match kind {
        "created" => {}
        "status" => println!(
            "→ {}: {}",
            paint(&s(&d, "status"), Style::Bold),
            s(&d, "message")
        ),
        "evidence" => println!(
            "  evidence {} [{} via {}]: {}",
            s(&d, "id"),
            s(&d, "type"),
            s(&d, "source"),
            s(&d, "summary")
        ),
        "target" => {
            let t = d.get("target").cloned().unwrap_or(Value::Null);
            println!(
                "  target: {} ({}) — {}",
                s(&t, "container_name"),
                short(&s(&t, "container_id")),
                s(&d, "why")
            );
        }
        "candidates" => {
            for c in d
                .get("candidates")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                println!(
                    "  candidate: {} [{}] image {} — {}",
                    s(c, "container_name"),
                    s(c, "state"),
                    s(c, "image"),
                    s(c, "why")
                );
            }
        }
        "diagnosis" => {
            let dg = d.get("diagnosis").cloned().unwrap_or(Value::Null);
            let conf = dg.get("confidence").and_then(Value::as_f64).unwrap_or(0.0);
            println!(
                "Diagnosis ({:.0}% confidence): {}",
                conf * 100.0,
                s(&dg, "summary")
            );
            for c in dg
                .get("causes")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let ids: Vec<String> = c
                    .get("evidence_ids")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                let conf = c.get("confidence").and_then(Value::as_f64).unwrap_or(0.0);
                println!(
                    "  - [{}] {} ({:.0}%; evidence {})",
                    s(c, "class"),
                    s(c, "reason"),
                    conf * 100.0,
                    ids.join(", ")
                );
            }
        }
        "plan" => {
            let p = d.get("plan").cloned().unwrap_or(Value::Null);
            let steps = p
                .get("steps")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if steps.is_empty() {
                println!("Plan: no change proposed");
            } else {
                println!("Plan:");
            }
            for (i, st) in steps.iter().enumerate() {
                let t = st.get("target").cloned().unwrap_or(Value::Null);
                println!(
                    "  {}. {} {} — {} (risk {}; expected: {})",
                    i + 1,
                    s(st, "action"),
                    s(&t, "container_name"),
                    s(st, "reason"),
                    s(st, "risk"),
                    s(st, "expected_effect")
                );
            }
            for a in p
                .get("advice")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                println!("  advice: {}", safe(a.as_str().unwrap_or("")));
            }
        }
        "approval_decided" => {
            println!("  approval {}: {}", s(&d, "approval_id"), s(&d, "decision"))
        }
        "approval_expired" => println!("  approval expired"),
        "execution" => {
            let e = d.get("execution").cloned().unwrap_or(Value::Null);
            println!("  executed: {}", s(&e, "message"));
        }
        "verification" => {
            let v = d.get("verification").cloned().unwrap_or(Value::Null);
            for c in v
                .get("checks")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let ok = c.get("ok").and_then(Value::as_bool).unwrap_or(false);
                println!(
                    "  verify {}: {} ({})",
                    s(c, "level"),
                    if ok {
                        paint("ok", Style::Good)
                    } else {
                        paint("FAILED", Style::Bad)
                    },
                    s(c, "detail")
                );
            }
        }
        "interrupted" | "iteration" | "error" | "dependency_ready" => {
            println!("  {}", s(&d, "message"))
        }
        "final" => {}
        _ => {}
    }
}

pub fn exit_code_for(status: &str) -> u8 {
    match status {
        "completed" => exit::COMPLETED,
        "needs_clarification" => exit::NEEDS_CLARIFICATION,
        "rejected" => exit::REJECTED,
        "canceled" => exit::CANCELED,
        _ => exit::FAILED,
    }
}

/// The result of following one request.
pub struct AskResult {
    pub request: Value,
    pub exit_code: u8,
}

async fn approval_still_pending(
    agent: &AgentClient,
    request_id: &str,
    approval_id: &str,
) -> anyhow::Result<bool> {
    let request = agent.get(&format!("/api/v1/requests/{request_id}")).await?;
    Ok(request
        .get("approvals")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|a| {
            a.get("id").and_then(Value::as_str) == Some(approval_id)
                && a.get("status").and_then(Value::as_str) == Some("pending")
        }))
}

/// Follow `request_id` to its end, deciding approvals per `mode`.
pub async fn follow_request(
    agent: &AgentClient,
    cfg: &CliConfig,
    request_id: &str,
    mode: ApprovalMode,
    quiet: bool,
) -> anyhow::Result<AskResult> {
    let pending: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let rejected_names: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let spinner = if quiet {
        Spinner::none()
    } else {
        Spinner::start()
    };
    let followed = agent.follow(request_id, |event| {
        let (pending, rejected_names, spinner) = (&pending, &rejected_names, &spinner);
        async move {
            spinner.clear();
            if !quiet {
                render(&event);
            }
            if let Some(phase) = event
                .get("data")
                .and_then(|d| d.get("status"))
                .and_then(Value::as_str)
            {
                spinner.set_phase(phase);
            }
            if event.get("kind").and_then(Value::as_str) != Some("approval_requested") {
                return Ok(true);
            }
            let approval = event
                .get("data")
                .and_then(|d| d.get("approval"))
                .cloned()
                .unwrap_or(Value::Null);
            let (claims, bytes) = decode_claims(&approval, Some(request_id))?;
            // A replayed stream (reconnect, `drydock follow`) shows
            // approvals decided long ago: only a pending one is asked.
            if !approval_still_pending(agent, request_id, &claims.approval_id).await? {
                return Ok(true);
            }
            match mode {
                ApprovalMode::AutoApprove => {
                    if !quiet {
                        println!("  approving (--yes): {}", describe_claims(&claims));
                    }
                    sign_and_approve(agent, cfg, &claims, &bytes).await?;
                    Ok(true)
                }
                ApprovalMode::Prompt => {
                    println!("  approval needed: {}", describe_claims(&claims));
                    if confirm(&format!(
                        "{} {}?",
                        capitalized(claims.action.as_str()),
                        safe(&claims.container_name)
                    ))
                    .await
                    {
                        sign_and_approve(agent, cfg, &claims, &bytes).await?;
                    } else {
                        agent
                            .post(
                                &format!("/api/v1/approvals/{}/reject", claims.approval_id),
                                json!({}),
                            )
                            .await?;
                        rejected_names
                            .borrow_mut()
                            .push(claims.container_name.clone());
                    }
                    Ok(true)
                }
                ApprovalMode::LeavePending => {
                    pending.borrow_mut().push(claims.approval_id.clone());
                    if !quiet {
                        println!("  approval needed: {}", describe_claims(&claims));
                    }
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
    let (pending, rejected_names) = (pending.into_inner(), rejected_names.into_inner());
    let request = agent.get(&format!("/api/v1/requests/{request_id}")).await?;
    if !pending.is_empty() {
        if !quiet {
            println!("No terminal to ask on and --yes not given: the approval is pending.");
            for id in &pending {
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
    let status = request
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("failed")
        .to_string();
    let outcome = request
        .get("outcome")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if !quiet {
        print_outcome(&status, &outcome);
        for name in &rejected_names {
            println!("Left {} untouched: no change was made.", safe(name));
        }
    }
    Ok(AskResult {
        exit_code: exit_code_for(&status),
        request,
    })
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
        let request = crate::show::cancel(agent, request_id).await?;
        println!(
            "canceled {id}: {}",
            safe(request.get("outcome").and_then(Value::as_str).unwrap_or(""))
        );
        return Ok(AskResult {
            request,
            exit_code: exit::CANCELED,
        });
    }
    println!("\nstopped following; {id} goes on. `drydock follow {id}` resumes, `drydock cancel {id}` stops it.");
    let request = agent.get(&format!("/api/v1/requests/{request_id}")).await?;
    Ok(AskResult {
        request,
        exit_code: exit::INTERRUPTED,
    })
}

pub async fn ask(cfg: &CliConfig, opts: &AskOptions) -> anyhow::Result<AskResult> {
    let agent = AgentClient::from_config(cfg)?;
    let created = agent
        .create(&opts.message, opts.container.as_deref(), opts.diagnose_only)
        .await?;
    let id = created
        .get("id")
        .and_then(Value::as_str)
        .context("agent returned no request id")?
        .to_string();
    if !opts.json {
        println!("request {id}: {}", opts.message);
    }
    let result = follow_request(&agent, cfg, &id, approval_mode(opts.yes), opts.json).await?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&result.request)?);
        return Ok(result);
    }
    // An unclear target on a terminal: let the human pick, then ask again
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

/// Number the candidates and read a choice; `None` when the human declines.
fn pick_candidate(request: &Value) -> Option<String> {
    let candidates: Vec<String> = request
        .get("candidates")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.get("container_name")
                .and_then(Value::as_str)
                .map(String::from)
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

#[cfg(test)]
mod tests {
    use super::*;
    use drydock_proto::approval::{WriteAction, CLAIMS_VERSION};

    const NOW: i64 = 1_800_000_000;

    fn claims(issued_at: i64, expires_at: i64) -> ApprovalClaims {
        ApprovalClaims {
            version: CLAIMS_VERSION,
            approval_id: "apr-1".into(),
            request_id: "req-1".into(),
            action: WriteAction::Restart,
            container_id: "c".repeat(64),
            container_name: "web".into(),
            plan_digest: "0".repeat(64),
            issued_at,
            expires_at,
            nonce: "n".into(),
        }
    }

    #[test]
    fn extreme_times_are_described_not_panicked_on() {
        for t in [
            i64::MIN,
            -1,
            0,
            LAST_WRITABLE_SECOND,
            LAST_WRITABLE_SECOND + 1,
            253_402_300_800 * 4,
            i64::MAX,
        ] {
            let text = describe_claims(&claims(NOW, t));
            assert!(text.contains("expires"), "{text}");
        }
        assert_eq!(
            describe_time(NOW + 540, NOW),
            "2027-01-15T08:09:00Z (in 9 min)"
        );
        assert!(describe_time(NOW - 120, NOW).ends_with("(2 min ago)"));
        assert!(describe_time(LAST_WRITABLE_SECOND + 1, NOW).contains("not a real date"));
    }

    #[test]
    fn only_sane_windows_are_signed() {
        assert!(check_signable(&claims(NOW, NOW + 600), NOW, 600).is_ok());
        let wrapped = (NOW + 300).wrapping_sub(i64::MIN);
        for (issued, expires, why) in [
            (wrapped, NOW + 300, "longer than"),
            (NOW, NOW + 601, "longer than"),
            (NOW + 10, NOW + 5, "not after"),
            (NOW + 3600, NOW + 3700, "not close to now"),
            (NOW - 700, NOW - 100, "expired"),
            (i64::MIN, i64::MAX, "longer than"),
            (NOW, i64::MAX, "longer than"),
        ] {
            let err = check_signable(&claims(issued, expires), NOW, 600).unwrap_err();
            assert!(err.to_string().contains(why), "{issued}..{expires}: {err}");
        }
    }
}
