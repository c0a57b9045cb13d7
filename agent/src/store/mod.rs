//! The agent's durable state, in one SQLite file: requests and their event
//! log (`requests`), automation grants (`grants`), the watcher's journal of
//! container events (`journal`), webhook deliveries (`deliveries`),
//! operators' notes (`notes`) and schedules (`schedules`).
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
pub mod notes;
mod requests;
pub use requests::RequestHead;
pub mod schedules;
pub mod schema;
pub mod updates;

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
    #[error("{path} was written by a newer drydock-agent (store version {found}; this release knows up to {known}): run that release, or restore the copy taken before it migrated the store (`agent.db.v{known}.bak` next to it)")]
    Newer {
        path: String,
        found: u32,
        known: u32,
    },
    #[error("cannot back up the store: {0}")]
    Backup(#[from] drydock_daemon::sqlite::BackupError),
    #[error("{0}")]
    Restore(String),
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

    /// A consistent copy of the store, taken while the agent keeps using
    /// it, as `dir/<file name>` in a new or empty folder `dir`; returns the
    /// copy's path.
    pub fn backup(&self, path: &Path, dir: &Path) -> Result<std::path::PathBuf, StoreError> {
        drydock_daemon::files::new_backup_folder(dir)
            .map_err(drydock_daemon::sqlite::BackupError::from)?;
        let dest = dir.join(path.file_name().unwrap_or(std::ffi::OsStr::new("agent.db")));
        drydock_daemon::sqlite::backup_to(&self.lock(), &dest)?;
        Ok(dest)
    }

    /// Restore the copy `backup` wrote into `dir` to `path`, where no store
    /// may be (stop the agent and move the old one aside first); the
    /// restored store is then brought to this release's schema.
    /// With `move_aside`, a store at `path` is first moved into a
    /// `replaced-<time>` folder next to it instead.
    pub fn restore(dir: &Path, path: &Path, move_aside: bool) -> Result<Store, StoreError> {
        let name = path.file_name().unwrap_or(std::ffi::OsStr::new("agent.db"));
        let copy = if dir.is_file() {
            dir.to_path_buf()
        } else {
            dir.join(name)
        };
        if !copy.is_file() {
            return Err(StoreError::Restore(format!(
                "{} holds no {}: give the folder `drydock-agent backup --to` wrote",
                dir.display(),
                name.to_string_lossy()
            )));
        }
        let folder = path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(folder)
            .map_err(|e| StoreError::Folder(folder.display().to_string(), e))?;
        let present: Vec<std::path::PathBuf> = ["", "-wal", "-shm"]
            .iter()
            .map(|suffix| {
                let mut p = path.as_os_str().to_os_string();
                p.push(suffix);
                std::path::PathBuf::from(p)
            })
            .collect();
        if move_aside {
            drydock_daemon::files::move_aside(&present, folder)
                .map_err(|e| StoreError::Folder(folder.display().to_string(), e))?;
        }
        for p in &present {
            if p.exists() {
                return Err(StoreError::Restore(format!(
                    "{} is there: a restore never replaces a store. Stop the agent, then restore with --move-aside (the store goes into a replaced-<time> folder next to it)",
                    p.display()
                )));
            }
        }
        let from = Connection::open_with_flags(&copy, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        drydock_daemon::sqlite::backup_to(&from, path)?;
        Store::open(path)
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
    if let Some(copy) = drydock_daemon::sqlite::backup_before_migrating(conn, path, found)? {
        tracing::info!(backup = %copy.display(), "agent store backed up before migrating");
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
        // The copy taken first still has the old schema and the row.
        let copy = Connection::open(dir.path().join("agent.db.v0.bak")).unwrap();
        let (version, rows): (u32, i64) = copy
            .query_row(
                "SELECT (SELECT user_version FROM pragma_user_version), count(*) FROM requests",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((version, rows), (0, 1));
        // A new, empty store needs no copy.
        let fresh = dir.path().join("fresh.db");
        Store::open(&fresh).unwrap();
        assert!(!dir.path().join("fresh.db.v0.bak").exists());
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

    #[test]
    fn a_backup_restores_where_no_store_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("live/agent.db");
        let store = Store::open(&path).unwrap();
        store
            .lock()
            .execute(
                "INSERT INTO requests (id, created_at, status, doc) VALUES ('r1', 't', 'completed', '{}')",
                [],
            )
            .unwrap();
        let backup = dir.path().join("backup");
        let copy = store.backup(&path, &backup).unwrap();
        assert!(copy.ends_with("backup/agent.db"));
        assert!(store.backup(&path, &backup).is_err(), "never over a backup");
        let over = Store::restore(&backup, &path, false)
            .err()
            .expect("refused")
            .to_string();
        assert!(over.contains("never replaces a store"), "{over}");
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let none = Store::restore(&empty, &dir.path().join("new/agent.db"), false)
            .err()
            .expect("refused")
            .to_string();
        assert!(none.contains("holds no agent.db"), "{none}");
        let restored = Store::restore(&backup, &dir.path().join("new/agent.db"), false).unwrap();
        let n: i64 = restored
            .lock()
            .query_row("SELECT count(*) FROM requests", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 1);
        drop(restored);
        let again = Store::restore(&backup, &dir.path().join("new/agent.db"), true).unwrap();
        drop(again);
        let aside = std::fs::read_dir(dir.path().join("new"))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("replaced-"))
            .count();
        assert_eq!(aside, 1, "--move-aside keeps what it replaces");
    }
}
