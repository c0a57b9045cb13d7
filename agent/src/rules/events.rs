//! What the engine's event record says that the container's state forgot:
//! an OOM kill whose flag a restart cleared (or Docker 20.10 lost under
//! load), who stopped it (`docker stop` sends `kill` before `die`), and how
//! often it died (a crash loop without a restart policy).

use crate::watch::journal::JournalEvent;

/// Seconds between a `kill`/`stop` and the `die` it caused, at most.
const STOP_TO_DIE_SECS: i64 = 30;

fn secs(e: &JournalEvent) -> i64 {
    e.time_nanos / 1_000_000_000
}

/// `HH:MM:SS UTC` of an event, for reasons people read.
pub fn clock(e: &JournalEvent) -> String {
    let t = secs(e).rem_euclid(86_400);
    format!("{:02}:{:02}:{:02} UTC", t / 3600, t % 3600 / 60, t % 60)
}

/// The newest `oom` event, when the engine recorded one in the window.
pub fn oom(events: &[JournalEvent]) -> Option<&JournalEvent> {
    events.iter().rev().find(|e| e.action == "oom")
}

/// How the newest `die` came about, as the engine recorded it.
#[derive(Debug, PartialEq)]
pub enum Death<'a> {
    /// The record has no `die`: it says nothing either way.
    NotRecorded,
    /// A `kill` or `stop` came just before it: a person or a tool stopped it.
    Requested(&'a JournalEvent),
    /// It died with nothing asking it to.
    Unrequested,
}

pub fn death(events: &[JournalEvent]) -> Death<'_> {
    let Some(die) = events.iter().rposition(|e| e.action == "die") else {
        return Death::NotRecorded;
    };
    let died_at = secs(&events[die]);
    events[..die]
        .iter()
        .rev()
        .find(|e| {
            (e.action == "kill" || e.action == "stop") && died_at - secs(e) <= STOP_TO_DIE_SECS
        })
        .map_or(Death::Unrequested, Death::Requested)
}

/// `die` events with a non-zero exit in the window.
pub fn failed_deaths(events: &[JournalEvent]) -> Vec<&JournalEvent> {
    events
        .iter()
        .filter(|e| e.action == "die" && e.exit_code.is_some_and(|c| c != 0))
        .collect()
}

/// What happened, oldest first, in a few words each: the answer to "why did
/// it restart at 3 am?".
pub fn timeline(events: &[JournalEvent]) -> String {
    events
        .iter()
        .filter(|e| e.action != "health_status" || e.health == "unhealthy")
        .rev()
        .take(12)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|e| {
            let what = match (e.action.as_str(), e.exit_code) {
                ("die", Some(code)) => format!("died (exit {code})"),
                ("kill", _) if !e.signal.is_empty() => format!("was sent signal {}", e.signal),
                ("health_status", _) => "turned unhealthy".to_string(),
                ("oom", _) => "hit its memory limit (oom)".to_string(),
                ("start", _) => "started".to_string(),
                (a, _) => a.replace('_', " "),
            };
            format!("{} {what}", clock(e))
        })
        .collect::<Vec<_>>()
        .join("; ")
}
