//! `drydock show ID` and `drydock cancel ID`: look at a request after the
//! fact, rendered exactly as `ask` renders it while it runs, and stop one.

use serde_json::{json, Value};

use crate::ask::{self, exit};
use crate::client::AgentClient;

/// Print a request's timeline and where it stands; returns the exit code
/// `ask` would have returned for it (0 while it is still running).
pub async fn show(agent: &AgentClient, id: &str, as_json: bool) -> anyhow::Result<u8> {
    let request = agent.get(&format!("/api/v1/requests/{id}")).await?;
    let status = request
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    if as_json {
        println!("{}", serde_json::to_string_pretty(&request)?);
    } else {
        let message = request.get("message").and_then(Value::as_str).unwrap_or("");
        println!("request {}: {}", ask::safe(id), ask::safe(message));
        let events = agent
            .get(&format!("/api/v1/requests/{id}/timeline"))
            .await?;
        for event in events.as_array().into_iter().flatten() {
            ask::render(event);
        }
        let outcome = request.get("outcome").and_then(Value::as_str).unwrap_or("");
        match status.as_str() {
            "waiting_approval" => {
                ask::print_pending_approvals(&request);
            }
            s if is_terminal(s) => ask::print_outcome(s, outcome),
            s => println!(
                "… {}: still running; follow it with `drydock follow {}`",
                ask::safe(s),
                ask::safe(id)
            ),
        }
    }
    Ok(match status.as_str() {
        "waiting_approval" => exit::APPROVAL_PENDING,
        s if is_terminal(s) => ask::exit_code_for(s),
        _ => exit::COMPLETED,
    })
}

fn is_terminal(status: &str) -> bool {
    matches!(
        status,
        "completed" | "failed" | "needs_clarification" | "rejected" | "canceled"
    )
}

/// Cancel a request; the agent refuses (409) one that already finished.
pub async fn cancel(agent: &AgentClient, id: &str) -> anyhow::Result<Value> {
    agent
        .post(&format!("/api/v1/requests/{id}/cancel"), json!({}))
        .await
}
