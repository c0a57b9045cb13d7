//! Consistent copies of a live SQLite store (`agent.db`, the audit store),
//! with SQLite's online backup API: a file copy of a store in WAL mode can
//! miss what is still in its `-wal` file, or catch a page mid-write. Used
//! for `backup` and before a migration changes a store in place.

use std::path::{Path, PathBuf};

use rusqlite::backup::Backup;
use rusqlite::Connection;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0} already exists; a backup never replaces a file")]
    Exists(String),
    #[error(transparent)]
    Folder(#[from] crate::files::FolderError),
    #[error("cannot back up to {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
}

/// Copy the database `conn` has open to a new file `dest` (mode 0600)
/// while it stays in use. All pages go in one step, under one read lock:
/// the copy is one consistent snapshot, and a store another process keeps
/// writing to (a live daemon's) cannot restart the copy over and over, as
/// a copy in small steps would be.
pub fn backup_to(conn: &Connection, dest: &Path) -> Result<(), BackupError> {
    if dest.exists() {
        return Err(BackupError::Exists(dest.display().to_string()));
    }
    let fail = |source| BackupError::Sqlite {
        path: dest.display().to_string(),
        source,
    };
    let mut to = Connection::open(dest).map_err(fail)?;
    crate::files::restrict_sqlite(dest);
    {
        let backup = Backup::new(conn, &mut to).map_err(fail)?;
        backup
            .run_to_completion(i32::MAX, std::time::Duration::from_millis(5), None)
            .map_err(fail)?;
    }
    // One self-contained file, not a WAL pair.
    to.execute_batch("PRAGMA journal_mode=DELETE;")
        .map_err(fail)?;
    Ok(())
}

/// Before a migration changes a store in place, a copy of it at
/// `migration_backup_path` (a store with no tables yet needs none): a
/// migration that fails, or a release rolled back, leaves the copy.
/// Returns where the copy went.
pub fn backup_before_migrating(
    conn: &Connection,
    path: &Path,
    from: u32,
) -> Result<Option<PathBuf>, BackupError> {
    let fail = |source| BackupError::Sqlite {
        path: path.display().to_string(),
        source,
    };
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .map_err(fail)?;
    if tables == 0 {
        return Ok(None);
    }
    let copy = migration_backup_path(path, from);
    backup_to(conn, &copy)?;
    Ok(Some(copy))
}

/// Where the copy taken before migrating `path` from schema `from` goes:
/// `<path>.v<from>.bak`, or with the time appended when that exists.
pub fn migration_backup_path(path: &Path, from: u32) -> PathBuf {
    let with = |suffix: String| {
        let mut p = path.as_os_str().to_os_string();
        p.push(suffix);
        PathBuf::from(p)
    };
    let plain = with(format!(".v{from}.bak"));
    if !plain.exists() {
        return plain;
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    with(format!(".v{from}.{now}.bak"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_is_a_consistent_copy_and_never_replaces_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("live.db");
        let conn = Connection::open(&src).unwrap();
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1), (2);",
        )
        .unwrap();
        let dest = migration_backup_path(&src, 3);
        assert!(dest.ends_with("live.db.v3.bak"));
        backup_to(&conn, &dest).unwrap();
        let copy = Connection::open(&dest).unwrap();
        let n: i64 = copy
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 2, "rows still in the WAL are in the copy");
        assert!(matches!(
            backup_to(&conn, &dest),
            Err(BackupError::Exists(_))
        ));
        assert_ne!(
            migration_backup_path(&src, 3),
            dest,
            "a second backup gets its own name"
        );
        let folder = dir.path().join("backups/one");
        crate::files::new_backup_folder(&folder).unwrap();
        crate::files::new_backup_folder(&folder).unwrap();
        assert!(matches!(
            crate::files::new_backup_folder(dir.path()),
            Err(crate::files::FolderError::NotEmpty(_))
        ));
    }
}
