//! What each container was: its fingerprint (see `crate::change`), when it
//! was first and last seen, and when it was first seen failing. Bounded
//! and pruned like the journal.

use rusqlite::{params, OptionalExtension as _};

use super::{Store, StoreError};
use crate::model::Fingerprint;

/// One remembered container.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub fingerprint: Fingerprint,
    pub first_seen: i64,
    pub last_seen: i64,
    pub failed_at: Option<i64>,
}

/// Remember (or refresh) a container's fingerprint, seen at `now` on
/// `host` (`""` for a lone executor).
pub fn record(store: &Store, f: &Fingerprint, host: &str, now: i64) -> Result<(), StoreError> {
    let doc = serde_json::to_string(f)?;
    store.lock().execute(
        "INSERT INTO fingerprints (container_id, name, project, service, doc, first_seen, last_seen, host)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)
         ON CONFLICT(container_id) DO UPDATE SET name = excluded.name, doc = excluded.doc,
           project = excluded.project, service = excluded.service, last_seen = excluded.last_seen,
           host = excluded.host",
        params![
            f.container_id,
            f.name,
            f.project.as_deref().unwrap_or(""),
            f.service.as_deref().unwrap_or(""),
            doc,
            now,
            host
        ],
    )?;
    Ok(())
}

/// The container was seen failing at `at`; the first time is kept.
pub fn failed(store: &Store, container_id: &str, at: i64) -> Result<(), StoreError> {
    store.lock().execute(
        "UPDATE fingerprints SET failed_at = COALESCE(failed_at, ?2) WHERE container_id = ?1",
        params![container_id, at],
    )?;
    Ok(())
}

/// One container, if remembered.
pub fn get(store: &Store, container_id: &str) -> Result<Option<Row>, StoreError> {
    let row = store
        .lock()
        .query_row(
            "SELECT doc, first_seen, last_seen, failed_at FROM fingerprints WHERE container_id = ?1",
            [container_id],
            |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    row.map(|(doc, first_seen, last_seen, failed_at)| {
        Ok(Row {
            fingerprint: serde_json::from_str(&doc)?,
            first_seen,
            last_seen,
            failed_at,
        })
    })
    .transpose()
}

/// The other containers of the same service on the same host (the same
/// compose project and service, or without them the same name), newest
/// first, at most `limit`.
pub fn predecessors(
    store: &Store,
    f: &Fingerprint,
    host: &str,
    limit: u32,
) -> Result<Vec<Row>, StoreError> {
    let conn = store.lock();
    let (project, service) = (
        f.project.as_deref().unwrap_or(""),
        f.service.as_deref().unwrap_or(""),
    );
    let composed = !project.is_empty() && !service.is_empty();
    let mut stmt = conn.prepare(
        "SELECT doc, first_seen, last_seen, failed_at FROM fingerprints
         WHERE container_id != ?1 AND host = ?7
           AND ((?2 AND project = ?3 AND service = ?4) OR (NOT ?2 AND name = ?5))
         ORDER BY last_seen DESC LIMIT ?6",
    )?;
    let rows = stmt
        .query_map(
            params![
                f.container_id,
                composed,
                project,
                service,
                f.name,
                limit,
                host
            ],
            |r| Ok((r.get::<_, String>(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?
        .collect::<Result<Vec<(String, i64, i64, Option<i64>)>, _>>()?;
    rows.into_iter()
        .map(|(doc, first_seen, last_seen, failed_at)| {
            Ok(Row {
                fingerprint: serde_json::from_str(&doc)?,
                first_seen,
                last_seen,
                failed_at,
            })
        })
        .collect()
}

/// Forget containers not seen since `before`, then the oldest beyond
/// `max_rows`.
pub fn prune(store: &Store, before: i64, max_rows: u32) -> Result<usize, StoreError> {
    let conn = store.lock();
    let old = conn.execute("DELETE FROM fingerprints WHERE last_seen < ?1", [before])?;
    let excess = conn.execute(
        "DELETE FROM fingerprints WHERE container_id IN
           (SELECT container_id FROM fingerprints ORDER BY last_seen DESC LIMIT -1 OFFSET ?1)",
        [max_rows],
    )?;
    Ok(old + excess)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(id: &str, name: &str, service: Option<&str>) -> Fingerprint {
        Fingerprint {
            container_id: id.into(),
            name: name.into(),
            project: service.map(|_| "shop".to_string()),
            service: service.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn incarnations_of_a_service_are_found_newest_first_and_failures_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        record(&store, &fp("a", "shop-api-1", Some("api")), "", 10).unwrap();
        record(&store, &fp("b", "shop-api-1", Some("api")), "", 20).unwrap();
        record(&store, &fp("c", "shop-web-1", Some("web")), "", 30).unwrap();
        record(&store, &fp("d", "solo", None), "", 40).unwrap();
        // The same service on another host is not a predecessor.
        record(&store, &fp("z", "shop-api-1", Some("api")), "host-b", 45).unwrap();
        let now = fp("e", "shop-api-1", Some("api"));
        let found: Vec<String> = predecessors(&store, &now, "", 10)
            .unwrap()
            .into_iter()
            .map(|r| r.fingerprint.container_id)
            .collect();
        assert_eq!(found, ["b", "a"]);
        let on_b: Vec<String> = predecessors(&store, &now, "host-b", 10)
            .unwrap()
            .into_iter()
            .map(|r| r.fingerprint.container_id)
            .collect();
        assert_eq!(on_b, ["z"]);
        let by_name: Vec<String> = predecessors(&store, &fp("f", "solo", None), "", 10)
            .unwrap()
            .into_iter()
            .map(|r| r.fingerprint.container_id)
            .collect();
        assert_eq!(by_name, ["d"]);
        failed(&store, "b", 25).unwrap();
        failed(&store, "b", 99).unwrap();
        assert_eq!(get(&store, "b").unwrap().unwrap().failed_at, Some(25));
        // Seen again: refreshed, its failure kept.
        record(&store, &fp("b", "shop-api-1", Some("api")), "", 50).unwrap();
        let b = get(&store, "b").unwrap().unwrap();
        assert_eq!((b.first_seen, b.last_seen, b.failed_at), (20, 50, Some(25)));
        assert_eq!(prune(&store, 15, 2).unwrap(), 3);
        assert!(get(&store, "a").unwrap().is_none());
    }
}
