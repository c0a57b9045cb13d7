//! Webhook deliveries: each is a row before it is sent (so a restart does
//! not lose it), and its attempts are the delivery log. When and how to
//! send is `crate::notify`'s job.

use rusqlite::params;
use serde::Serialize;

use super::{Store, StoreError};
use crate::model::{DeliveryStatus, NotifyEvent};

/// A word of the vocabulary read back from a column; one this release
/// does not know is an error naming it.
fn word<T>(r: &rusqlite::Row<'_>, i: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = r.get(i)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            i,
            rusqlite::types::Type::Text,
            format!("`{text}` is not a word this release knows").into(),
        )
    })
}

/// One row of the delivery log, as `GET /api/v1/deliveries` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Delivery {
    pub id: i64,
    pub webhook: String,
    pub event: NotifyEvent,
    pub request_id: String,
    pub status: DeliveryStatus,
    pub attempts: u32,
    pub last_error: String,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<String>,
}

/// A delivery that is due, with what to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Due {
    pub id: i64,
    pub webhook: String,
    pub event: NotifyEvent,
    pub body: String,
    pub attempts: u32,
}

/// Queue a delivery, due at `next_at` (unix seconds).
pub fn queue(
    store: &Store,
    webhook: &str,
    event: NotifyEvent,
    request_id: &str,
    body: &str,
    next_at: i64,
    created_at: &str,
) -> Result<(), StoreError> {
    store.lock().execute(
        "INSERT INTO deliveries (webhook, event, request_id, body, status, next_at, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            webhook,
            event.as_str(),
            request_id,
            body,
            DeliveryStatus::Pending.as_str(),
            next_at,
            created_at
        ],
    )?;
    Ok(())
}

/// The newest `limit` deliveries, newest first.
pub fn newest(store: &Store, limit: u32) -> Result<Vec<Delivery>, StoreError> {
    let conn = store.lock();
    let mut stmt = conn.prepare(
        "SELECT id, webhook, event, request_id, status, attempts, last_error, created_at, delivered_at
         FROM deliveries ORDER BY id DESC LIMIT ?1",
    )?;
    let rows = stmt
        .query_map([limit], |r| {
            Ok(Delivery {
                id: r.get(0)?,
                webhook: r.get(1)?,
                event: word(r, 2, NotifyEvent::parse)?,
                request_id: r.get(3)?,
                status: word(r, 4, DeliveryStatus::parse)?,
                attempts: r.get(5)?,
                last_error: r.get(6)?,
                created_at: r.get(7)?,
                delivered_at: r.get(8)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Pending deliveries due by `now` (unix seconds), oldest first, at most 50.
pub fn due(store: &Store, now: i64) -> Result<Vec<Due>, StoreError> {
    let conn = store.lock();
    let mut stmt = conn.prepare(
        "SELECT id, webhook, event, body, attempts FROM deliveries
         WHERE status = ?2 AND next_at <= ?1 ORDER BY id LIMIT 50",
    )?;
    let rows = stmt
        .query_map(params![now, DeliveryStatus::Pending.as_str()], |r| {
            Ok(Due {
                id: r.get(0)?,
                webhook: r.get(1)?,
                event: word(r, 2, NotifyEvent::parse)?,
                body: r.get(3)?,
                attempts: r.get(4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// A failed attempt that will be tried again at `next_at`.
pub fn retry_at(
    store: &Store,
    id: i64,
    attempts: u32,
    next_at: i64,
    error: &str,
) -> Result<(), StoreError> {
    store.lock().execute(
        "UPDATE deliveries SET attempts = ?2, next_at = ?3, last_error = ?4 WHERE id = ?1",
        params![id, attempts, next_at, error],
    )?;
    Ok(())
}

/// The delivery's end: `Delivered` (at `at`) or `Failed`.
pub fn settle(
    store: &Store,
    id: i64,
    status: DeliveryStatus,
    attempts: u32,
    error: &str,
    at: Option<&str>,
) -> Result<(), StoreError> {
    store.lock().execute(
        "UPDATE deliveries SET status = ?2, attempts = ?3, last_error = ?4, delivered_at = ?5 WHERE id = ?1",
        params![id, status.as_str(), attempts, error, at],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_delivery_is_due_then_retried_then_settled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        queue(&store, "ops", NotifyEvent::Opened, "req-1", "{}", 100, "t").unwrap();
        assert!(due(&store, 99).unwrap().is_empty(), "not yet due");
        let d = due(&store, 100).unwrap().remove(0);
        assert_eq!((d.webhook.as_str(), d.attempts), ("ops", 0));
        retry_at(&store, d.id, 1, 200, "HTTP 500").unwrap();
        assert!(due(&store, 150).unwrap().is_empty(), "backing off");
        settle(&store, d.id, DeliveryStatus::Delivered, 2, "", Some("t2")).unwrap();
        assert!(due(&store, 1_000).unwrap().is_empty());
        let log = newest(&store, 10).unwrap();
        assert_eq!(
            (
                log[0].status,
                log[0].attempts,
                log[0].delivered_at.as_deref()
            ),
            (DeliveryStatus::Delivered, 2, Some("t2"))
        );
    }
}
