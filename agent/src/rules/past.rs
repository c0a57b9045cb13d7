//! A death the container has moved on from: it was started again since
//! (by its restart policy, a person, a tool), or a question asked about an
//! earlier one. Its state now says nothing of it; the engine's events say
//! when and how it died, and what it logged up to that moment says why.

use super::events::{self, clock};
use super::question::AskedTime;
use super::{cause, match_logs};
use crate::model::{Cause, ContainerView, DeathLogs, FaultClass};
use crate::model::{ContainerEvent, EventAction};

/// The most of a log line a reason quotes: the evidence holds it whole.
const MAX_QUOTE_CHARS: usize = 200;

/// A log line as a reason quotes it, cut at `MAX_QUOTE_CHARS`.
fn quoted(line: &str) -> String {
    match line.char_indices().nth(MAX_QUOTE_CHARS) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line.to_string(),
    }
}

/// A past death and the evidence about it.
#[derive(Clone, Copy)]
pub struct PastDeath<'a> {
    pub logs: &'a DeathLogs,
    pub evidence: &'a str,
}

/// The cause of a past death: an OOM kill (the engine's `oom` event), a
/// stop someone asked for, the log line nearest the exit, a clean exit, or
/// a crash its log does not explain. `None` when the events do not hold
/// that death (they are what dates it).
pub fn cause_of(
    c: &ContainerView,
    events: &[ContainerEvent],
    events_evidence: &str,
    death: &PastDeath<'_>,
    asked: Option<&AskedTime>,
) -> Option<Cause> {
    let die = events
        .iter()
        .find(|e| e.action == EventAction::Die && e.time_nanos == death.logs.died_at_unix_nanos)?;
    let name = &c.name;
    let exit = die.exit_code.map_or_else(
        || "exit code not recorded".to_string(),
        |code| format!("exit {code}"),
    );
    let (oom, stop) = events::before_death(events, die);
    // What it recovered from before it died is no cause of the death.
    let lines: Vec<String> = super::recovered::without_recovered(&death.logs.logs)
        .lines
        .into_iter()
        .map(|l| l.text)
        .collect();
    let found =
        match_logs(&lines).filter(|m| m.class != FaultClass::Crash || die.exit_code != Some(0));
    let (class, why, confidence) = if let Some(oom) = oom {
        (
            FaultClass::OomKilled,
            format!(
                "the kernel killed it for exceeding its memory limit (the engine's oom event at {})",
                clock(oom)
            ),
            0.9,
        )
    } else if let Some(stop) = stop {
        (
            FaultClass::Stopped,
            format!(
                "someone stopped it: {} at {}{}, not a crash",
                if stop.action == EventAction::Kill {
                    "a kill"
                } else {
                    "a stop"
                },
                clock(stop),
                if stop.signal.is_empty() {
                    String::new()
                } else {
                    format!(" with signal {}", stop.signal)
                }
            ),
            0.85,
        )
    } else if let Some(m) = found {
        (
            m.class,
            format!(
                "{} (its log before it died: \"{}\")",
                m.what,
                quoted(&m.line)
            ),
            0.8,
        )
    } else if die.exit_code == Some(0) {
        (FaultClass::Stopped, "it exited cleanly".to_string(), 0.7)
    } else {
        // The line a person reads first, and the family of its words.
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let said = super::salient::salient(&refs);
        match said
            .as_ref()
            .and_then(|s| s.family.as_ref().map(|f| (f, s)))
        {
            Some((family, s)) => (
                family.class,
                format!(
                    "it {} (its log before it died: \"{}\")",
                    family.what,
                    quoted(&s.message)
                ),
                0.7,
            ),
            None => {
                let last = said
                    .as_ref()
                    .map(|s| s.line.clone())
                    .or_else(|| {
                        lines
                            .iter()
                            .rev()
                            .find(|l| !l.trim().is_empty())
                            .map(|l| l.trim().to_string())
                    })
                    .map_or_else(
                        || "it logged nothing before it died".to_string(),
                        |l| format!("its last words: \"{}\"", quoted(&l)),
                    );
                (
                    FaultClass::Unknown,
                    format!("drydock cannot tell why; {last}"),
                    0.25,
                )
            }
        }
    };
    let again = match events::started_after(events, die) {
        Some((start, true)) => format!(
            "; it was started again at {} by `docker restart`",
            clock(start)
        ),
        Some((start, false)) if !c.restart_policy.is_empty() && c.restart_policy != "no" => {
            format!(
                "; its restart policy (`{}`) started it again at {}",
                c.restart_policy,
                clock(start)
            )
        }
        Some((start, false)) => format!(
            "; it was started again at {} (it has no restart policy: a person or a tool did)",
            clock(start)
        ),
        None => String::new(),
    };
    let nearest = asked.map_or_else(String::new, |a| {
        format!(
            "Of its deaths, the one nearest the time asked ({}): ",
            a.said()
        )
    });
    let mut evidence = vec![events_evidence, death.evidence];
    evidence.retain(|e| !e.is_empty());
    Some(cause(
        class,
        format!(
            "{nearest}{name} died at {} ({exit}): {why}{again}.",
            clock(die)
        ),
        confidence,
        &evidence,
    ))
}
