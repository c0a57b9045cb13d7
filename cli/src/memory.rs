//! What the agent keeps between requests, from the command line: `drydock
//! note` (operators' notes on a target) and `drydock schedule` (a
//! diagnose-only look on a cadence).

use crate::args::{NoteCommand, ScheduleCommand};
use crate::client::AgentClient;
use crate::exit::COMPLETED;
use crate::text::safe;

pub async fn note(agent: &AgentClient, command: NoteCommand) -> anyhow::Result<u8> {
    match command {
        NoteCommand::Add { target, text } => {
            let note = agent.add_note(&target, &text.join(" ")).await?;
            println!(
                "{} on {}: {}",
                note.id,
                safe(&note.target),
                safe(&note.text)
            );
        }
        NoteCommand::List { target, json } => {
            let list = agent.notes(target.as_deref()).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(COMPLETED);
            }
            if list.notes.is_empty() {
                println!("no notes");
            }
            for n in &list.notes {
                println!(
                    "{}  {}  {}  {}",
                    n.id,
                    safe(&n.target),
                    n.created_at,
                    safe(&n.text)
                );
            }
        }
        NoteCommand::Remove { id } => {
            agent.remove_note(&id).await?;
            println!("removed {id}");
        }
    }
    Ok(COMPLETED)
}

pub async fn schedule(agent: &AgentClient, command: ScheduleCommand) -> anyhow::Result<u8> {
    match command {
        ScheduleCommand::Add {
            every,
            host,
            message,
        } => {
            let s = agent
                .add_schedule(&message.join(" "), every, host.as_deref())
                .await?;
            println!(
                "{}: every {}, \"{}\"; its first run starts now, a webhook fires when its answer changes",
                s.id,
                every_said(s.every_secs),
                safe(&s.message)
            );
        }
        ScheduleCommand::List { json } => {
            let list = agent.schedules().await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
                return Ok(COMPLETED);
            }
            if list.schedules.is_empty() {
                println!("no schedules");
            }
            let now = crate::text::unix_now();
            for s in &list.schedules {
                let last = match (s.last_run_unix, &s.last_request_id) {
                    (Some(at), Some(req)) => format!(
                        "last run {} ago ({req}): {}",
                        every_said(now.saturating_sub(at).max(0) as u64),
                        s.last_verdict.map_or("no answer yet", |v| v.as_str())
                    ),
                    _ => "not run yet".to_string(),
                };
                let on = s
                    .host
                    .as_ref()
                    .map(|h| format!(" on {}", safe(h)))
                    .unwrap_or_default();
                println!(
                    "{}  every {}{on}  \"{}\"  {last}",
                    s.id,
                    every_said(s.every_secs),
                    safe(&s.message)
                );
            }
        }
        ScheduleCommand::Remove { id } => {
            agent.remove_schedule(&id).await?;
            println!("removed {id}");
        }
    }
    Ok(COMPLETED)
}

fn every_said(secs: u64) -> String {
    humantime::format_duration(std::time::Duration::from_secs(secs)).to_string()
}
