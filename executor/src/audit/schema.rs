//! The audit store's schema version (`user_version`) and its migrations.
//! Opening a store runs the migrations it has not had, in one transaction,
//! after a consistent copy of it is taken (`<audit.path>.v<N>.bak`); a store
//! a newer release wrote is refused and left as it is, since its rows may
//! mean something this release does not know.
//!
//! To change the schema, add a migration at the end and raise `CURRENT`;
//! never edit one that shipped. The hash chain covers rows, not tables: a
//! migration that adds a column or a table leaves every hash valid.

use std::path::Path;

use rusqlite::Connection;

use super::{grant_uses, AuditError};

/// The version this release writes.
pub const CURRENT: u32 = 1;

/// Version 1: the chain, the used nonces, meta and grant uses. A store of
/// the releases before versions (version 0) has these tables already, some
/// of them without the nonce columns added since: `IF NOT EXISTS` keeps its
/// rows and the columns are added where missing.
const V1_TABLES: &str = "CREATE TABLE IF NOT EXISTS audit (
       seq INTEGER PRIMARY KEY,
       ts TEXT NOT NULL,
       request_id TEXT NOT NULL,
       caller TEXT NOT NULL,
       action TEXT NOT NULL,
       target TEXT NOT NULL,
       container_id TEXT NOT NULL,
       tier INTEGER NOT NULL,
       approval_id TEXT NOT NULL,
       key_id TEXT NOT NULL,
       decision TEXT NOT NULL,
       code TEXT NOT NULL,
       reason TEXT NOT NULL,
       duration_ms INTEGER NOT NULL,
       input TEXT NOT NULL,
       result TEXT NOT NULL,
       prev_hash TEXT NOT NULL,
       hash TEXT NOT NULL
     );
     CREATE TABLE IF NOT EXISTS nonces (
       nonce TEXT PRIMARY KEY,
       approval_id TEXT NOT NULL,
       expires_at INTEGER NOT NULL,
       used_at TEXT NOT NULL,
       request_id TEXT NOT NULL,
       action TEXT NOT NULL,
       container_id TEXT NOT NULL,
       caller TEXT NOT NULL,
       key_id TEXT NOT NULL
     );
     CREATE TABLE IF NOT EXISTS meta (
       key TEXT PRIMARY KEY,
       value TEXT NOT NULL
     );";

fn to_v1(tx: &rusqlite::Transaction<'_>) -> Result<(), AuditError> {
    tx.execute_batch(V1_TABLES)?;
    tx.execute_batch(grant_uses::SCHEMA)?;
    let have: Vec<String> = {
        let mut stmt = tx.prepare("SELECT name FROM pragma_table_info('nonces')")?;
        let names = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        names
    };
    for column in ["request_id", "action", "container_id", "caller", "key_id"] {
        if !have.iter().any(|c| c == column) {
            tx.execute_batch(&format!(
                "ALTER TABLE nonces ADD COLUMN {column} TEXT NOT NULL DEFAULT ''"
            ))?;
        }
    }
    Ok(())
}

/// Migration `i` takes a store from version `i` to `i + 1`.
type Migration = fn(&rusqlite::Transaction<'_>) -> Result<(), AuditError>;
const MIGRATIONS: [Migration; CURRENT as usize] = [to_v1];

/// Bring the store at `path` (open as `conn`) to `CURRENT`.
pub fn migrate(conn: &mut Connection, path: &Path) -> Result<(), AuditError> {
    let found: u32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > CURRENT {
        return Err(AuditError::Newer {
            path: path.display().to_string(),
            found,
            known: CURRENT,
        });
    }
    if found == CURRENT {
        return Ok(());
    }
    let copy = drydock_daemon::sqlite::backup_before_migrating(conn, path, found)?;
    if let Some(copy) = &copy {
        tracing::info!(backup = %copy.display(), from = found, to = CURRENT, "audit store backed up before migrating");
    }
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    for step in &MIGRATIONS[found as usize..] {
        step(&tx)?;
    }
    tx.pragma_update(None, "user_version", CURRENT)?;
    tx.commit()?;
    if copy.is_some() {
        tracing::info!(from = found, to = CURRENT, "audit store migrated");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_from_before_versions_is_copied_then_migrated_and_a_newer_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.db");
        {
            // The oldest shape: nonces without the columns added since.
            let c = Connection::open(&path).unwrap();
            c.execute_batch(
                "CREATE TABLE nonces (nonce TEXT PRIMARY KEY, approval_id TEXT NOT NULL, expires_at INTEGER NOT NULL, used_at TEXT NOT NULL);
                 INSERT INTO nonces VALUES ('n1', 'apr-1', 0, 't');",
            )
            .unwrap();
        }
        let mut c = Connection::open(&path).unwrap();
        migrate(&mut c, &path).unwrap();
        let version: u32 = c
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, CURRENT);
        let (nonce, key): (String, String) = c
            .query_row("SELECT nonce, key_id FROM nonces", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((nonce.as_str(), key.as_str()), ("n1", ""));
        let copy = Connection::open(dir.path().join("audit.db.v0.bak")).unwrap();
        let old: i64 = copy
            .query_row(
                "SELECT count(*) FROM pragma_table_info('nonces')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(old, 4, "the copy is the store as it was");
        // Again: nothing to do, no second copy.
        migrate(&mut c, &path).unwrap();
        assert!(!std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .any(|e| e.file_name().to_string_lossy().starts_with("audit.db.v1")));
        c.pragma_update(None, "user_version", 7).unwrap();
        let err = migrate(&mut c, &path).unwrap_err().to_string();
        assert!(
            err.contains("newer drydock-executor (schema version 7"),
            "{err}"
        );
    }
}
