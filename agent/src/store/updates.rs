//! Updates found by the checker: one row per container with a newer image
//! behind its tag. A check replaces what it looked at: a container now up
//! to date loses its row, a digest seen before keeps its `found_at` (it is
//! not news again).

use rusqlite::{params, OptionalExtension as _};

use super::{Store, StoreError};
use crate::model::UpdateFound;

const COLUMNS: &str = "host, container, container_id, reference, image_id, version, revision, registry_digest, found_at, checked_at, new_version, new_revision, labels_unread, service, new_tag";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<UpdateFound> {
    Ok(UpdateFound {
        host: r.get(0)?,
        container: r.get(1)?,
        container_id: r.get(2)?,
        reference: r.get(3)?,
        image_id: r.get(4)?,
        version: r.get(5)?,
        revision: r.get(6)?,
        registry_digest: r.get(7)?,
        found_at: r.get(8)?,
        checked_at: r.get(9)?,
        new_version: r.get(10)?,
        new_revision: r.get(11)?,
        labels_unread: r.get(12)?,
        service: r.get(13)?,
        new_tag: r.get(14)?,
    })
}

/// Record one host's check: `found` are the containers with an update,
/// `checked` every container it asked about (so those not in `found` are
/// up to date now). Returns the updates that are news: a container or a
/// digest not recorded before.
pub fn record(
    store: &Store,
    host: &str,
    checked: &[String],
    found: &[UpdateFound],
) -> Result<Vec<UpdateFound>, StoreError> {
    let mut conn = store.lock();
    let tx = conn.transaction()?;
    let mut news = Vec::new();
    for name in checked {
        if !found.iter().any(|f| &f.container == name) {
            tx.execute(
                "DELETE FROM updates WHERE host = ?1 AND container = ?2",
                params![host, name],
            )?;
        }
    }
    for f in found {
        let before: Option<(String, String)> = tx
            .query_row(
                "SELECT registry_digest, found_at FROM updates WHERE host = ?1 AND container = ?2",
                params![host, f.container],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let found_at = match &before {
            Some((digest, at)) if *digest == f.registry_digest => at.clone(),
            _ => {
                news.push(f.clone());
                f.found_at.clone()
            }
        };
        tx.execute(
            &format!("INSERT OR REPLACE INTO updates ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"),
            params![
                host,
                f.container,
                f.container_id,
                f.reference,
                f.image_id,
                f.version,
                f.revision,
                f.registry_digest,
                found_at,
                f.checked_at,
                f.new_version,
                f.new_revision,
                f.labels_unread,
                f.service,
                f.new_tag
            ],
        )?;
    }
    tx.commit()?;
    Ok(news)
}

/// Every update found, by host and container.
pub fn list(store: &Store) -> Result<Vec<UpdateFound>, StoreError> {
    let conn = store.lock();
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM updates ORDER BY host, container"
    ))?;
    let rows = stmt.query_map([], row)?.collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(container: &str, digest: &str, at: &str) -> UpdateFound {
        UpdateFound {
            host: "local".into(),
            container: container.into(),
            container_id: "c".repeat(64),
            reference: "r.example.com/shop/api:stable".into(),
            image_id: format!("sha256:{}", "1".repeat(64)),
            version: Some("1.4".into()),
            revision: None,
            registry_digest: digest.into(),
            found_at: at.into(),
            checked_at: at.into(),
            new_version: Some("1.5".into()),
            new_revision: Some("9c2d1e0".into()),
            labels_unread: None,
            service: Some("shop/api".into()),
            new_tag: None,
        }
    }

    #[test]
    fn a_digest_is_news_once_and_an_up_to_date_container_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let names = vec!["api".to_string(), "web".to_string()];
        let news = record(&store, "local", &names, &[found("api", "sha256:a", "t1")]).unwrap();
        assert_eq!(news.len(), 1);
        let news = record(&store, "local", &names, &[found("api", "sha256:a", "t2")]).unwrap();
        assert!(news.is_empty(), "the same digest is not news again");
        assert_eq!(list(&store).unwrap()[0].found_at, "t1");
        assert_eq!(list(&store).unwrap()[0].checked_at, "t2");
        assert_eq!(list(&store).unwrap()[0].new_version.as_deref(), Some("1.5"));
        assert_eq!(
            list(&store).unwrap()[0].new_revision.as_deref(),
            Some("9c2d1e0")
        );
        let news = record(&store, "local", &names, &[found("api", "sha256:b", "t3")]).unwrap();
        assert_eq!(news.len(), 1, "a newer digest is");
        record(&store, "local", &names, &[]).unwrap();
        assert!(list(&store).unwrap().is_empty(), "up to date now");
    }
}
