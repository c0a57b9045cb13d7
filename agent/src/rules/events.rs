//! What the engine's event record says that the container's state forgot:
//! an OOM kill whose flag a restart cleared (or Docker 20.10 lost under
//! load), who stopped it (`docker stop` sends `kill` before `die`), and how
//! often it died (a crash loop without a restart policy).

use crate::model::ContainerEvent;
use crate::model::{EventAction, HealthStatus};

/// Seconds between a `kill`/`stop` and the `die` it caused, at most.
const STOP_TO_DIE_SECS: i64 = 30;

fn secs(e: &ContainerEvent) -> i64 {
    e.time_nanos / 1_000_000_000
}

/// `HH:MM:SS UTC` of an event, for reasons people read.
pub fn clock(e: &ContainerEvent) -> String {
    clock_of(secs(e))
}

/// `HH:MM:SS UTC` of a unix time.
pub fn clock_of(unix: i64) -> String {
    let t = unix.rem_euclid(86_400);
    format!("{:02}:{:02}:{:02} UTC", t / 3600, t % 3600 / 60, t % 60)
}

/// The newest `oom` event, when the engine recorded one in the window.
pub fn oom(events: &[ContainerEvent]) -> Option<&ContainerEvent> {
    events.iter().rev().find(|e| e.action == EventAction::Oom)
}

/// How the newest `die` came about, as the engine recorded it.
#[derive(Debug, PartialEq)]
pub enum Death<'a> {
    /// The record has no `die`: it says nothing either way.
    NotRecorded,
    /// A `kill` or `stop` came just before it: a person or a tool stopped it.
    Requested(&'a ContainerEvent),
    /// It died with nothing asking it to.
    Unrequested,
}

pub fn death(events: &[ContainerEvent]) -> Death<'_> {
    let Some(die) = events.iter().rfind(|e| e.action == EventAction::Die) else {
        return Death::NotRecorded;
    };
    match before_death(events, die) {
        (_, Some(stop)) => Death::Requested(stop),
        _ => Death::Unrequested,
    }
}

/// `die` events with a non-zero exit since `since_unix`.
pub fn failed_deaths(events: &[ContainerEvent], since_unix: i64) -> Vec<&ContainerEvent> {
    events
        .iter()
        .filter(|e| {
            e.action == EventAction::Die
                && e.exit_code.is_some_and(|c| c != 0)
                && secs(e) >= since_unix
        })
        // A death someone asked for (`docker kill`, `stop`, `restart`) is
        // not a failure, unless the kernel's OOM killer came first.
        .filter(|e| !matches!(before_death(events, e), (None, Some(_))))
        .collect()
}

/// The death to explain that is not the state the container is in now:
/// with a time asked, the `die` nearest it (unless that is the death the
/// stopped container still shows); otherwise, for a container running now,
/// its newest `die`, the one it was started again after.
pub fn past_death(
    events: &[ContainerEvent],
    running: bool,
    asked_unix: Option<i64>,
) -> Option<&ContainerEvent> {
    let deaths = || events.iter().filter(|e| e.action == EventAction::Die);
    let newest = deaths().next_back();
    let chosen = match asked_unix {
        Some(t) => deaths().min_by_key(|e| (secs(e) - t).abs()),
        None => newest.filter(|_| running),
    }?;
    let current = !running && newest.is_some_and(|n| std::ptr::eq(n, chosen));
    (!current).then_some(chosen)
}

/// Where a `die` of this slice sits in it (the engine's order).
fn index_of(events: &[ContainerEvent], die: &ContainerEvent) -> usize {
    events
        .iter()
        .position(|e| std::ptr::eq(e, die))
        .unwrap_or(events.len())
}

/// What came just before a `die` of this slice (within the time a stop
/// takes): an `oom` event, and a `kill` or `stop` someone sent.
pub fn before_death<'a>(
    events: &'a [ContainerEvent],
    die: &ContainerEvent,
) -> (Option<&'a ContainerEvent>, Option<&'a ContainerEvent>) {
    let died_at = secs(die);
    // Only what came during this run: a kill before its start was the
    // previous run's.
    let before = &events[..index_of(events, die)];
    let run = before
        .iter()
        .rposition(|e| e.action == EventAction::Start)
        .map_or(before, |i| &before[i + 1..]);
    let near = || {
        run.iter()
            .filter(move |e| died_at - secs(e) <= STOP_TO_DIE_SECS)
    };
    let oom = near().rfind(|e| e.action == EventAction::Oom);
    let stop = near().rfind(|e| e.action == EventAction::Kill || e.action == EventAction::Stop);
    (oom, stop)
}

/// The `start` after a `die` of this slice, and whether a `restart`
/// (`docker restart`) came with it.
pub fn started_after<'a>(
    events: &'a [ContainerEvent],
    die: &ContainerEvent,
) -> Option<(&'a ContainerEvent, bool)> {
    let later = events.get(index_of(events, die) + 1..).unwrap_or_default();
    let start = later.iter().find(|e| e.action == EventAction::Start)?;
    let restart = later.iter().any(|e| {
        e.action == EventAction::Restart && (secs(e) - secs(start)).abs() <= STOP_TO_DIE_SECS
    });
    Some((start, restart))
}
/// What happened, oldest first, in a few words each: the answer to "why did
/// it restart at 3 am?".
pub fn timeline(events: &[ContainerEvent]) -> String {
    events
        .iter()
        .filter(|e| {
            e.action != EventAction::HealthStatus || e.health == Some(HealthStatus::Unhealthy)
        })
        .rev()
        .take(12)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .map(|e| {
            let what = match (&e.action, e.exit_code) {
                (EventAction::Die, Some(code)) => format!("died (exit {code})"),
                (EventAction::Kill, _) if !e.signal.is_empty() => {
                    format!("was sent signal {}", e.signal)
                }
                (EventAction::HealthStatus, _) => "turned unhealthy".to_string(),
                (EventAction::Oom, _) => "hit its memory limit (oom)".to_string(),
                (EventAction::Start, _) => "started".to_string(),
                (a, _) => a.as_str().replace('_', " "),
            };
            format!("{} {what}", clock(e))
        })
        .collect::<Vec<_>>()
        .join("; ")
}
