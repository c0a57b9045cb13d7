//! `drydock show ID`: a request after the fact, rendered exactly as `ask`
//! renders it while it runs.

use std::collections::BTreeMap;
use std::path::PathBuf;

use drydock_vocab::{Change, Status};

use crate::client::AgentClient;
use crate::exit;
use crate::render;
use crate::text::safe;

/// Print a request's timeline and where it stands; returns the exit code
/// `ask` would have returned for it (0 while it is still running).
pub async fn show(
    agent: &AgentClient,
    sources: &BTreeMap<String, PathBuf>,
    id: &str,
    as_json: bool,
) -> anyhow::Result<u8> {
    let request = agent.request(id).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&request)?);
        return Ok(exit::for_status(request.status));
    }
    println!("request {}: {}", safe(id), safe(&request.message));
    for event in agent.timeline(id).await? {
        render::event(&event);
    }
    if let Some(change) = request.blamed_change() {
        commits_between(sources, &change);
    }
    match request.status {
        Status::WaitingApproval => render::pending_approvals(&request),
        s if s.is_terminal() => render::outcome(s, request.outcome.as_deref().unwrap_or("")),
        s => println!(
            "… {}: still running; follow it with `drydock follow {}`",
            s.as_str(),
            safe(id)
        ),
    }
    Ok(exit::for_status(request.status))
}

/// A revision as a git argument: a commit id or a plain ref name. Image
/// labels are untrusted; nothing that could read as an option or a range
/// of its own passes.
fn is_plain_revision(rev: &str) -> bool {
    !rev.is_empty()
        && rev.len() <= 100
        && !rev.starts_with(['-', '.', '/'])
        && !rev.contains("..")
        && rev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-'))
}

/// The commits between the two images of a change, from the service's
/// local checkout (`sources` in cli.yaml), when both images name their
/// revision.
fn commits_between(sources: &BTreeMap<String, PathBuf>, change: &Change) {
    let (Some(from), Some(to)) = (&change.previous.revision, &change.current.revision) else {
        return;
    };
    commits(sources, &change.service, &change.current.name, from, to, "");
}

/// The commits `from..to` in the checkout `sources` names for a service
/// (`project/service` or `service`) or a container, each line indented
/// after `indent`; nothing without a checkout.
pub fn commits(
    sources: &BTreeMap<String, PathBuf>,
    service: &str,
    container: &str,
    from: &str,
    to: &str,
    indent: &str,
) {
    let short = service.rsplit('/').next().unwrap_or(service);
    let Some(checkout) = [service, short, container]
        .into_iter()
        .filter(|k| !k.is_empty())
        .find_map(|k| sources.get(k))
    else {
        return;
    };
    if !is_plain_revision(from) || !is_plain_revision(to) {
        println!("{indent}(the images' revision labels are not plain commit ids; not looked up)");
        return;
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(checkout)
        .args(["log", "--oneline", "--no-decorate", "-n", "50"])
        .arg(format!("{from}..{to}"))
        .arg("--")
        .output();
    match out {
        Ok(o) if o.status.success() => {
            let log = String::from_utf8_lossy(&o.stdout);
            println!(
                "{indent}commits between the images ({}..{} in {}):",
                safe(from),
                safe(to),
                checkout.display()
            );
            for line in log.lines() {
                println!("{indent}  {}", safe(line));
            }
        }
        Ok(o) => println!(
            "{indent}git log {}..{} in {} failed: {}",
            safe(from),
            safe(to),
            checkout.display(),
            safe(String::from_utf8_lossy(&o.stderr).trim())
        ),
        Err(e) => println!("{indent}cannot run git for {}: {e}", checkout.display()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_revisions_reach_git() {
        for ok in [
            "9c2d1e0",
            "9c2d1e0aa11bb22cc33dd44ee55ff66778899aab",
            "v1.2.3",
            "release/7",
        ] {
            assert!(is_plain_revision(ok), "{ok}");
        }
        for bad in [
            "",
            "--output=/tmp/x",
            "-n1",
            "a..b",
            "../x",
            "a b",
            "$(id)",
            "x;y",
        ] {
            assert!(!is_plain_revision(bad), "{bad}");
        }
    }
}
