//! Schedules: a diagnose-only look every so often, with when it last ran
//! and what it found, so the answer's change (not every run) is notified
//! and a restarted agent keeps the cadence.

use rusqlite::{params, OptionalExtension as _};

use super::{Store, StoreError};
use crate::model::{Schedule, Verdict};

/// Schedules one agent keeps.
pub const MAX_SCHEDULES: usize = 100;

pub fn add(store: &Store, s: &Schedule) -> Result<bool, StoreError> {
    let mut conn = store.lock();
    let tx = conn.transaction()?;
    let n: i64 = tx.query_row("SELECT count(*) FROM schedules", [], |r| r.get(0))?;
    if n as usize >= MAX_SCHEDULES {
        return Ok(false);
    }
    tx.execute(
        "INSERT INTO schedules (id, message, every_secs, host, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![s.id, s.message, s.every_secs as i64, s.host, s.created_at],
    )?;
    tx.commit()?;
    Ok(true)
}

pub fn list(store: &Store) -> Result<Vec<Schedule>, StoreError> {
    let conn = store.lock();
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM schedules ORDER BY created_at, id"
    ))?;
    let rows = stmt.query_map([], row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

pub fn get(store: &Store, id: &str) -> Result<Option<Schedule>, StoreError> {
    Ok(store
        .lock()
        .query_row(
            &format!("SELECT {COLUMNS} FROM schedules WHERE id = ?1"),
            [id],
            row,
        )
        .optional()?)
}

/// Remove a schedule; `false` when there was none with that id.
pub fn remove(store: &Store, id: &str) -> Result<bool, StoreError> {
    Ok(store
        .lock()
        .execute("DELETE FROM schedules WHERE id = ?1", [id])?
        == 1)
}

/// A run started: when, and the request it opened.
pub fn started(store: &Store, id: &str, at_unix: i64, request_id: &str) -> Result<(), StoreError> {
    store.lock().execute(
        "UPDATE schedules SET last_run_unix = ?2, last_request_id = ?3 WHERE id = ?1",
        params![id, at_unix, request_id],
    )?;
    Ok(())
}

/// A run's answer; returns the answer before it (`None` for the first).
pub fn answered(store: &Store, id: &str, verdict: Verdict) -> Result<Option<Verdict>, StoreError> {
    let mut conn = store.lock();
    let tx = conn.transaction()?;
    let before: Option<String> = tx
        .query_row(
            "SELECT last_verdict FROM schedules WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .optional()?
        .flatten();
    tx.execute(
        "UPDATE schedules SET last_verdict = ?2 WHERE id = ?1",
        params![id, verdict.as_str()],
    )?;
    tx.commit()?;
    Ok(before.as_deref().and_then(Verdict::parse))
}

const COLUMNS: &str =
    "id, message, every_secs, host, created_at, last_run_unix, last_request_id, last_verdict";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Schedule> {
    Ok(Schedule {
        id: r.get(0)?,
        message: r.get(1)?,
        every_secs: r.get::<_, i64>(2)?.max(0) as u64,
        host: r.get(3)?,
        created_at: r.get(4)?,
        last_run_unix: r.get(5)?,
        last_request_id: r.get(6)?,
        last_verdict: r
            .get::<_, Option<String>>(7)?
            .as_deref()
            .and_then(Verdict::parse),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule(id: &str) -> Schedule {
        Schedule {
            id: id.into(),
            message: "is the shop healthy?".into(),
            every_secs: 3600,
            host: None,
            created_at: format!("2026-12-03T00:00:0{}.000Z", id.len() % 10),
            last_run_unix: None,
            last_request_id: None,
            last_verdict: None,
        }
    }

    #[test]
    fn a_schedule_keeps_its_last_run_and_answer_and_says_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        assert!(add(&store, &schedule("sch-1")).unwrap());
        started(&store, "sch-1", 100, "req-1").unwrap();
        assert_eq!(answered(&store, "sch-1", Verdict::Healthy).unwrap(), None);
        assert_eq!(
            answered(&store, "sch-1", Verdict::Broken).unwrap(),
            Some(Verdict::Healthy)
        );
        let s = get(&store, "sch-1").unwrap().unwrap();
        assert_eq!(
            (
                s.last_run_unix,
                s.last_request_id.as_deref(),
                s.last_verdict
            ),
            (Some(100), Some("req-1"), Some(Verdict::Broken))
        );
        for i in 1..MAX_SCHEDULES {
            assert!(add(&store, &schedule(&format!("sch-x{i}"))).unwrap());
        }
        assert!(!add(&store, &schedule("sch-over")).unwrap(), "bounded");
        assert!(remove(&store, "sch-1").unwrap());
        assert!(!remove(&store, "sch-1").unwrap());
        assert_eq!(list(&store).unwrap().len(), MAX_SCHEDULES - 1);
    }
}
