//! `drydock show ID`: a request after the fact, rendered exactly as `ask`
//! renders it while it runs.

use drydock_vocab::Status;

use crate::client::AgentClient;
use crate::exit;
use crate::render;
use crate::text::safe;

/// Print a request's timeline and where it stands; returns the exit code
/// `ask` would have returned for it (0 while it is still running).
pub async fn show(agent: &AgentClient, id: &str, as_json: bool) -> anyhow::Result<u8> {
    let request = agent.request(id).await?;
    if as_json {
        println!("{}", serde_json::to_string_pretty(&request)?);
        return Ok(exit::for_status(request.status));
    }
    println!("request {}: {}", safe(id), safe(&request.message));
    for event in agent.timeline(id).await? {
        render::event(&event);
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
