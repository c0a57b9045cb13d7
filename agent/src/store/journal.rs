//! The agent's own journal of container events. The engine keeps only its
//! last 256 events, so the agent records what the executor streams (visible
//! containers only, already redacted) in SQLite with bounded retention, and
//! uses it for watch triggers and as evidence. Each row also carries its
//! trigger state, so an agent restarted while a trigger was being debounced
//! picks it up again, and a replayed event (same time, container, action)
//! is recognised and never triggers twice.

use rusqlite::{params, OptionalExtension as _};

use super::{Store, StoreError};
use crate::model::{ContainerEvent, EventAction, HealthStatus};

/// A health_status event's verdict as the journal stores it ("" for none).
fn health_text(e: &ContainerEvent) -> &str {
    e.health.as_ref().map_or("", HealthStatus::as_str)
}

/// Record an event; `false` when it was already there (a replay).
pub fn record(store: &Store, e: &ContainerEvent) -> Result<bool, StoreError> {
    let n = store.lock().execute(
        "INSERT OR IGNORE INTO journal (time_nanos, container_id, name, action, exit_code, signal, health, image, project, service, host)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        params![e.time_nanos, e.container_id, e.name, e.action.as_str(), e.exit_code, e.signal, health_text(e), e.image, e.project, e.service, e.host],
    )?;
    Ok(n == 1)
}

/// The newest event's time on one host (`""` for a lone executor): where
/// that host's reconnecting stream resumes.
pub fn last_time(store: &Store, host: &str) -> Result<Option<i64>, StoreError> {
    Ok(store
        .lock()
        .query_row(
            "SELECT max(time_nanos) FROM journal WHERE host = ?1",
            [host],
            |r| r.get(0),
        )
        .optional()?
        .flatten())
}

/// Set the trigger state of one event (`pending`, `opened`, `skipped`).
pub fn set_trigger(store: &Store, e: &ContainerEvent, state: &str) -> Result<(), StoreError> {
    store.lock().execute(
        "UPDATE journal SET trigger = ?5 WHERE time_nanos = ?1 AND container_id = ?2 AND action = ?3 AND health = ?4",
        params![e.time_nanos, e.container_id, e.action.as_str(), health_text(e), state],
    )?;
    Ok(())
}

fn select(
    store: &Store,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<ContainerEvent>, StoreError> {
    let conn = store.lock();
    let mut stmt = conn.prepare(sql)?;
    let rows = stmt
        .query_map(args, |r| {
            Ok(ContainerEvent {
                time_nanos: r.get(0)?,
                container_id: r.get(1)?,
                name: r.get(2)?,
                action: EventAction::parse(&r.get::<_, String>(3)?),
                exit_code: r.get(4)?,
                signal: r.get(5)?,
                health: Some(r.get::<_, String>(6)?)
                    .filter(|h| !h.is_empty())
                    .map(|h| HealthStatus::parse(&h)),
                image: r.get(7)?,
                project: r.get(8)?,
                service: r.get(9)?,
                host: r.get(10)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

const COLUMNS: &str =
    "time_nanos, container_id, name, action, exit_code, signal, health, image, project, service, host";

/// One host's events whose trigger was still being debounced when the
/// agent stopped.
pub fn pending(store: &Store, host: &str) -> Result<Vec<ContainerEvent>, StoreError> {
    select(
        store,
        &format!("SELECT {COLUMNS} FROM journal WHERE trigger = 'pending' AND host = ?1 ORDER BY time_nanos"),
        [host],
    )
}

/// One container's events since `since_nanos`, oldest first, at most `limit`
/// (the newest ones).
pub fn for_container(
    store: &Store,
    container_id: &str,
    since_nanos: i64,
    limit: u32,
) -> Result<Vec<ContainerEvent>, StoreError> {
    let mut rows = select(
        store,
        &format!("SELECT {COLUMNS} FROM journal WHERE container_id = ?1 AND time_nanos >= ?2 ORDER BY time_nanos DESC LIMIT ?3"),
        params![container_id, since_nanos, limit],
    )?;
    rows.reverse();
    Ok(rows)
}

/// The events of every container that had this name on `host` since
/// `since_nanos` (a recreated container keeps its name, not its id),
/// oldest first, at most `limit` (the newest ones).
pub fn for_name(
    store: &Store,
    name: &str,
    host: &str,
    since_nanos: i64,
    limit: u32,
) -> Result<Vec<ContainerEvent>, StoreError> {
    let mut rows = select(
        store,
        &format!("SELECT {COLUMNS} FROM journal WHERE name = ?1 AND host = ?2 AND time_nanos >= ?3 ORDER BY time_nanos DESC LIMIT ?4"),
        params![name, host, since_nanos, limit],
    )?;
    rows.reverse();
    Ok(rows)
}

/// Drop events older than `before_nanos`, then the oldest beyond `max_rows`.
/// Each host's newest event stays whatever its age: it is where that
/// host's stream resumes (a busy host must not prune a quiet one's place).
pub fn prune(store: &Store, before_nanos: i64, max_rows: u32) -> Result<usize, StoreError> {
    const NOT_NEWEST: &str =
        "(host, time_nanos) NOT IN (SELECT host, max(time_nanos) FROM journal GROUP BY host)";
    let conn = store.lock();
    let old = conn.execute(
        &format!(
            "DELETE FROM journal WHERE time_nanos < ?1 AND trigger != 'pending' AND {NOT_NEWEST}"
        ),
        [before_nanos],
    )?;
    let excess = conn.execute(
        &format!("DELETE FROM journal WHERE rowid IN (SELECT rowid FROM journal ORDER BY time_nanos DESC LIMIT -1 OFFSET ?1) AND {NOT_NEWEST}"),
        [max_rows],
    )?;
    Ok(old + excess)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(t: i64, action: &str) -> ContainerEvent {
        ContainerEvent {
            time_nanos: t,
            container_id: "c1".into(),
            name: "shop-web-1".into(),
            action: action.into(),
            ..Default::default()
        }
    }

    #[test]
    fn replays_are_recognised_and_retention_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        assert!(record(&store, &event(1, "die")).unwrap());
        assert!(!record(&store, &event(1, "die")).unwrap(), "a replay");
        assert!(record(&store, &event(1, "start")).unwrap());
        for t in 2..200 {
            record(&store, &event(t, "start")).unwrap();
        }
        assert_eq!(last_time(&store, "").unwrap(), Some(199));
        set_trigger(&store, &event(1, "die"), "pending").unwrap();
        assert_eq!(pending(&store, "").unwrap(), vec![event(1, "die")]);
        prune(&store, 100, 150).unwrap();
        let kept = for_container(&store, "c1", 0, 1000).unwrap();
        assert!(kept.len() <= 150, "{}", kept.len());
        assert_eq!(kept.last().unwrap().time_nanos, 199);
        assert_eq!(for_container(&store, "c1", 195, 2).unwrap().len(), 2);
    }

    #[test]
    fn each_host_resumes_from_its_own_newest_event_which_pruning_keeps() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let on = |t: i64, host: &str| ContainerEvent {
            host: host.into(),
            container_id: format!("c-{host}"),
            ..event(t, "start")
        };
        record(&store, &on(5, "quiet")).unwrap();
        for t in 10..60 {
            record(&store, &on(t, "busy")).unwrap();
        }
        assert_eq!(last_time(&store, "quiet").unwrap(), Some(5));
        assert_eq!(last_time(&store, "busy").unwrap(), Some(59));
        assert_eq!(last_time(&store, "").unwrap(), None);
        // Older than the retention, and beyond the row cap: the quiet
        // host's only event stays all the same.
        prune(&store, 30, 10).unwrap();
        assert_eq!(last_time(&store, "quiet").unwrap(), Some(5));
        assert_eq!(last_time(&store, "busy").unwrap(), Some(59));
        assert!(for_container(&store, "c-busy", 0, 100).unwrap().len() <= 10);
    }
}
