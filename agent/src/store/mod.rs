//! The agent's durable state, in one SQLite file: requests and their event
//! log (`requests`), automation grants (`grants`), the watcher's journal of
//! container events (`journal`) and webhook deliveries (`deliveries`).
//!
//! The store owns every table and its schema (`schema`, versioned
//! migrations); the modules above it call these functions and never write
//! SQL of their own. Every state transition saves the request document and
//! appends its event in one transaction, so a crash never leaves a state
//! without its event or the reverse, and the SSE stream can be replayed from
//! here.

pub mod deliveries;
pub mod fingerprints;
pub mod grants;
pub mod journal;
mod requests;
pub mod schema;

use std::path::Path;
use std::sync::Mutex;

use rusqlite::Connection;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("stored document is corrupt: {0}")]
    Corrupt(#[from] serde_json::Error),
    #[error("cannot create store folder {0}: {1}")]
    Folder(String, std::io::Error),
    #[error("{path} was written by a newer drydock-agent (store version {found}; this release knows up to {known}): run that release, or move the file away to start afresh")]
    Newer {
        path: String,
        found: u32,
        known: u32,
    },
}

pub struct Store {
    conn: Mutex<Connection>,
}

impl Store {
    /// Open (or create) the store at `path`, bringing its schema to this
    /// release's version.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| StoreError::Folder(dir.display().to_string(), e))?;
            }
        }
        let mut conn = Connection::open(path)?;
        // Pending approvals' signatures live here until they are used.
        drydock_daemon::files::restrict_sqlite(path);
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=NORMAL;
             PRAGMA busy_timeout=5000;",
        )?;
        migrate(&mut conn, path)?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    /// The schema version of the open file.
    pub fn version(&self) -> Result<u32, StoreError> {
        Ok(self
            .lock()
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Run the migrations this file has not had, in one transaction.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let known = schema::current();
    if found > known {
        return Err(StoreError::Newer {
            path: path.display().to_string(),
            found,
            known,
        });
    }
    if found == known {
        return Ok(());
    }
    let tx = conn.transaction()?;
    for sql in &schema::MIGRATIONS[found as usize..] {
        tx.execute_batch(sql)?;
    }
    tx.pragma_update(None, "user_version", known)?;
    tx.commit()?;
    tracing::info!(from = found, to = known, "agent store migrated");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_store_is_at_this_releases_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        assert_eq!(store.version().unwrap(), schema::current());
    }

    #[test]
    fn a_store_from_before_versions_keeps_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        {
            // What the release before versions wrote: the same tables, and
            // user_version 0.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(schema::MIGRATIONS[0]).unwrap();
            conn.execute(
                "INSERT INTO requests (id, created_at, status, doc) VALUES ('r1', 't', 'completed', '{}')",
                [],
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        assert_eq!(store.version().unwrap(), schema::current());
        let n: i64 = store
            .lock()
            .query_row("SELECT count(*) FROM requests", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
    }

    #[test]
    fn a_store_from_a_newer_release_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.db");
        Connection::open(&path)
            .unwrap()
            .pragma_update(None, "user_version", 99)
            .unwrap();
        let err = Store::open(&path).err().expect("refused").to_string();
        assert!(
            err.contains("newer drydock-agent (store version 99"),
            "{err}"
        );
        let version: u32 = Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, 99, "nothing was written");
    }
}
