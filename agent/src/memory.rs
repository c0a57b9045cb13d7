//! What drydock remembers of a target: its earlier requests and their
//! causes, the repairs they made and how long each held, and its deaths
//! and OOM kills in the watcher's journal. Observation records it as
//! `history` evidence; planning reads it, so a restart that did not hold
//! twice is not proposed a third time without saying so, and never under
//! an automation grant.
//!
//! Everything here comes from the agent's store, which forgets finished
//! requests and journal rows after `store.retention`: the memory is
//! bounded by the same caps.

use crate::change::unix_of;
use crate::model::{EventAction, HealthStatus};
use crate::model::{History, PastRepair, PastRequest, WriteAction, HELD_FOR_SECS};
use crate::store::{journal, Store, StoreError};

/// Earlier requests looked at.
const MAX_PAST: u32 = 20;
const WEEK_SECS: i64 = 7 * 86_400;
/// A failure this soon after a write is the write's own restart.
const SETTLE_SECS: i64 = 5;

/// The history of the target named `name` on `host` (`None`: a lone
/// executor), for request `this` asked at `now_unix`.
pub fn gather(
    store: &Store,
    name: &str,
    host: Option<&str>,
    this: &str,
    now_unix: i64,
) -> Result<History, StoreError> {
    let past = store.about_target(name, host, this, MAX_PAST)?;
    let week_ago = now_unix - WEEK_SECS;
    let events = journal::for_name(
        store,
        name,
        host.unwrap_or(""),
        week_ago.saturating_mul(1_000_000_000),
        2000,
    )?;
    let deaths_this_week = events
        .iter()
        .filter(|e| e.action == EventAction::Die)
        .count() as u32;
    let oom_kills_this_week = events
        .iter()
        .filter(|e| e.action == EventAction::Oom)
        .count() as u32;
    // Every moment the target was seen failing: its deaths and
    // unhealthy turns, each request about it, and this one.
    let mut failures: Vec<i64> = events
        .iter()
        .filter(|e| e.action == EventAction::Die || e.health == Some(HealthStatus::Unhealthy))
        .map(|e| e.time_nanos / 1_000_000_000)
        .chain(past.iter().filter_map(|r| unix_of(&r.created_at)))
        .chain([now_unix])
        .collect();
    failures.sort_unstable();
    let mut repairs: Vec<PastRepair> = past
        .iter()
        .flat_map(|r| {
            r.execution
                .iter()
                .filter(|e| e.ok && matches!(e.action, WriteAction::Restart | WriteAction::Start))
                .map(move |e| (r, e))
        })
        .filter_map(|(r, e)| {
            let at = unix_of(&e.at)?;
            let next = failures
                .iter()
                .copied()
                .find(|t| *t > at + SETTLE_SECS)
                .unwrap_or(now_unix);
            let held_secs = (next - at).max(0);
            Some(PastRepair {
                request_id: r.id.clone(),
                action: e.action,
                at: e.at.clone(),
                held_secs,
                held: held_secs >= HELD_FOR_SECS,
            })
        })
        .collect();
    repairs.sort_by(|a, b| b.at.cmp(&a.at));
    Ok(History {
        requests: past
            .iter()
            .map(|r| PastRequest {
                id: r.id.clone(),
                created_at: r.created_at.clone(),
                status: r.status,
                class: r
                    .diagnosis
                    .as_ref()
                    .and_then(|d| d.causes.first())
                    .map(|c| c.class),
            })
            .collect(),
        repairs,
        deaths_this_week,
        oom_kills_this_week,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ExecutionRecord, Request, RequestOptions, Status};

    fn at(unix: i64) -> String {
        humantime::format_rfc3339_millis(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix as u64),
        )
        .to_string()
    }

    fn repaired(store: &Store, id: &str, created: i64, restarted: i64) {
        let mut r = Request::new(
            id.into(),
            "web is unhealthy".into(),
            RequestOptions::default(),
            Default::default(),
            at(created),
        );
        r.status = Status::Completed;
        r.target = Some(crate::model::Target::container(
            "c".repeat(64),
            "web",
            None,
            None,
        ));
        r.execution.push(ExecutionRecord {
            step: 0,
            action: WriteAction::Restart,
            container_id: "c".repeat(64),
            approval_id: "apr-1".into(),
            ok: true,
            message: "restart web: done".into(),
            at: at(restarted),
            in_doubt: false,
            grant_id: None,
            new_container_id: None,
            service_version: None,
        });
        store
            .save(
                &r,
                crate::model::EventPayload::Created(crate::model::Created {
                    message: r.message.clone(),
                    options: r.options.clone(),
                    source: r.source,
                }),
            )
            .unwrap();
    }

    #[test]
    fn restarts_that_failed_again_soon_are_counted_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let now = 2_000_000_000;
        let h = 3600;
        // Repaired 20 h ago (held 9 h: the next request came 11 h ago),
        // and 11 h ago (held until the journal's death 9 h ago).
        repaired(&store, "req-a", now - 20 * h - 60, now - 20 * h);
        repaired(&store, "req-b", now - 11 * h, now - 11 * h + 30);
        journal::record(
            &store,
            &crate::model::ContainerEvent {
                time_nanos: (now - 9 * h + 30) * 1_000_000_000,
                container_id: "d".repeat(64),
                name: "web".into(),
                action: "die".into(),
                exit_code: Some(137),
                ..Default::default()
            },
        )
        .unwrap();
        let history = gather(&store, "web", None, "req-now", now).unwrap();
        assert_eq!(history.requests.len(), 2);
        assert_eq!(history.requests[0].id, "req-b", "newest first");
        let held: Vec<i64> = history.repairs.iter().map(|r| r.held_secs / h).collect();
        assert_eq!(held, [2, 9]);
        assert!(history.restart_does_not_hold());
        assert_eq!(history.held_words(), "held 2 h and 9 h");
        let said = history.summary("web");
        assert!(said.contains("2 earlier requests about web"), "{said}");
        assert!(said.contains("the last 2 restarts did not hold"), "{said}");
        assert!(said.contains("1 death in the journal this week"), "{said}");
        // Another name, or another host, has no history.
        assert!(gather(&store, "db", None, "x", now).unwrap().is_empty());
        assert!(gather(&store, "web", Some("b"), "x", now)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_restart_that_held_a_day_stops_the_count() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let now = 2_000_000_000;
        repaired(&store, "req-old", now - 50 * 3600, now - 50 * 3600 + 10);
        repaired(&store, "req-new", now - 3600, now - 3590);
        let history = gather(&store, "web", None, "req-now", now).unwrap();
        assert_eq!(history.restarts_that_did_not_hold().len(), 1);
        assert!(!history.restart_does_not_hold());
    }
}
