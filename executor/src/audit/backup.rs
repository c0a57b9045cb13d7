//! Online backups of the audit store, and their restore.
//!
//! A backup is a folder: a consistent copy of the live store (SQLite's
//! backup API, taken while the executor keeps writing), the rotated
//! segments (read-only files, copied after the live store so that a
//! rotation in between leaves an overlap, which the restored store removes
//! at its first start, never a gap), the revocation list, and
//! `backup.json` naming them.
//!
//! A restored store is older than the one it replaces: approvals spent and
//! grant uses counted after the backup are not in it. Two things close
//! that gap, each enough on its own for an approval:
//! - the nonces spent in the store being replaced (when there is one and
//!   it can be read) are carried over into the restored one, so each is
//!   refused as a replay;
//! - the restore records when it happened (`meta.restored_at`, and a
//!   `restored` row in the chain), and from then on the executor refuses
//!   every approval and grant dated up to that moment plus the clock skew
//!   it accepts (`approval::issued_after_restore`): whatever its dates, a
//!   claim that could have been spent before the restore is refused, even
//!   when the replaced store is lost.
//!
//! Revocations are never undone by a restore: the backup's list is added
//! to the current one.

use std::path::{Path, PathBuf};

use rusqlite::OptionalExtension as _;
use serde::{Deserialize, Serialize};

use super::{segments, AuditEntry, AuditError, AuditLog};

/// The manifest's file name in a backup folder.
pub const MANIFEST: &str = "backup.json";
const FORMAT: &str = "drydock-audit-backup-v1";
/// The action of the row a restore appends (its decision is
/// `Decision::Restored`).
pub const RESTORED: &str = super::Decision::Restored.as_str();

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    /// Unix seconds.
    taken_at: i64,
    /// File names inside the backup folder.
    store: String,
    segments: Vec<String>,
    revocations: Option<String>,
    rows: usize,
}

/// What a backup or a restore copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupReport {
    pub rows: usize,
    pub segments: usize,
    pub revocations: bool,
    pub taken_at: i64,
}

/// What a restore did with the nonces spent in the store it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carried {
    /// No store was there to replace.
    NoStore,
    /// This many nonces, not already in the backup, were carried over.
    Nonces(usize),
    /// The replaced store could not be read (why): only the time cut-off
    /// guards what it had spent.
    Unreadable(String),
}

/// What a restore copied, and what it carried over from the store it
/// replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreReport {
    pub backup: BackupReport,
    pub carried: Carried,
}

impl std::fmt::Display for Carried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Carried::NoStore => f.write_str("no store was replaced"),
            Carried::Nonces(n) => {
                write!(f, "{n} approvals spent in the replaced store carried over")
            }
            Carried::Unreadable(why) => write!(
                f,
                "the replaced store's spent approvals could not be read ({why})"
            ),
        }
    }
}

/// One spent approval, as the `nonces` table holds it.
type NonceRow = (
    String,
    String,
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
);
const NONCE_COLUMNS: &str =
    "nonce, approval_id, expires_at, used_at, request_id, action, container_id, caller, key_id";

/// The nonces spent in the store at `path`, read without changing it.
fn spent_nonces(path: &Path) -> Result<Vec<NonceRow>, String> {
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| e.to_string())?;
    let mut stmt = conn
        .prepare(&format!("SELECT {NONCE_COLUMNS} FROM nonces"))
        .map_err(|e| e.to_string())?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
            ))
        })
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    Ok(rows)
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn io<'a>(what: &'a str, path: &'a Path) -> impl FnOnce(std::io::Error) -> AuditError + 'a {
    move |e| AuditError::Batch(format!("{what} {}: {e}", path.display()))
}

fn file_name(path: &Path) -> Result<String, AuditError> {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| AuditError::Batch(format!("{} names no file", path.display())))
}

impl AuditLog {
    /// Copy the store, its segments and the revocation list (when set) into
    /// `dir`, a new or empty folder. Nothing in `dir` is ever replaced.
    pub fn backup(
        &self,
        dir: &Path,
        revocations: Option<&Path>,
    ) -> Result<BackupReport, AuditError> {
        drydock_daemon::files::new_backup_folder(dir)
            .map_err(drydock_daemon::sqlite::BackupError::from)?;
        let taken_at = now();
        let store = file_name(&self.path)?;
        drydock_daemon::sqlite::backup_to(&self.lock(), &dir.join(&store))?;
        // After the live copy: see the module's note on overlaps.
        let mut names = Vec::new();
        for segment in segments::list(&self.path)? {
            let name = file_name(&segment.path)?;
            let dest = dir.join(&name);
            match std::fs::copy(&segment.path, &dest) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(AuditError::Batch(format!(
                        "segment {} was deleted by retention while the backup ran; run the backup again",
                        segment.path.display()
                    )))
                }
                Err(e) => return Err(io("cannot copy segment", &segment.path)(e)),
            }
            read_only(&dest)?;
            names.push(name);
        }
        let revocations = match revocations {
            Some(path) if path.exists() => {
                let name = format!("revocations-{}", file_name(path)?);
                std::fs::copy(path, dir.join(&name)).map_err(io("cannot copy", path))?;
                Some(name)
            }
            _ => None,
        };
        // The copy must verify on its own, or it is no backup.
        let rows = match AuditLog::open_existing(&dir.join(&store))?.verify()? {
            Ok(n) => n,
            Err(problem) => {
                return Err(AuditError::Batch(format!(
                    "the copy in {} does not verify ({problem}); the live store may be damaged: run `drydock-executor audit verify`",
                    dir.display()
                )))
            }
        };
        let manifest = Manifest {
            format: FORMAT.into(),
            taken_at,
            store,
            segments: names,
            revocations,
            rows,
        };
        let text = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| AuditError::Batch(format!("cannot write {MANIFEST}: {e}")))?;
        let path = dir.join(MANIFEST);
        drydock_daemon::files::write_new(&path, &text, true).map_err(io("cannot write", &path))?;
        Ok(BackupReport {
            rows,
            segments: manifest.segments.len(),
            revocations: manifest.revocations.is_some(),
            taken_at,
        })
    }

    /// When this store was restored from a backup (unix seconds), if it was.
    pub fn restored_at(&self) -> Result<Option<i64>, AuditError> {
        self.meta_i64("restored_at")
    }

    /// Whether this store holds `nonce` as used (to name a replay as such
    /// rather than as an approval from before a restore).
    pub fn nonce_used(&self, nonce: &str) -> Result<bool, AuditError> {
        Ok(self
            .lock()
            .query_row("SELECT 1 FROM nonces WHERE nonce = ?1", [nonce], |_| Ok(()))
            .optional()?
            .is_some())
    }
}

/// Restore the backup in `from` to `audit_path`, where no store may be, and
/// add its revocations to the list at `revocations`. The backup must
/// verify first; the nonces spent in a store moved aside are carried over,
/// and the restored store then records the restore.
pub fn restore(
    from: &Path,
    audit_path: &Path,
    revocations: Option<&Path>,
    move_aside: bool,
) -> Result<RestoreReport, AuditError> {
    let manifest_path = from.join(MANIFEST);
    let text = std::fs::read(&manifest_path).map_err(|e| {
        AuditError::Batch(format!(
            "{} is not a backup folder: cannot read {MANIFEST} ({e}); give the folder `drydock-executor audit backup --to` wrote",
            from.display()
        ))
    })?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .ok()
        .filter(|m: &Manifest| m.format == FORMAT)
        .ok_or_else(|| {
            AuditError::Batch(format!(
                "{} is not a manifest of an audit backup ({FORMAT})",
                manifest_path.display()
            ))
        })?;
    for name in std::iter::once(&manifest.store)
        .chain(&manifest.segments)
        .chain(&manifest.revocations)
    {
        if name.contains('/') || name.starts_with('.') {
            return Err(AuditError::Batch(format!(
                "{MANIFEST} names `{name}`, which is not a file in the backup folder"
            )));
        }
    }
    let leftovers: Vec<PathBuf> = ["", "-wal", "-shm"]
        .iter()
        .map(|s| {
            let mut p = audit_path.as_os_str().to_os_string();
            p.push(s);
            PathBuf::from(p)
        })
        .filter(|p| p.exists())
        .chain(segments::list(audit_path)?.into_iter().map(|s| s.path))
        .collect();
    let copy = from.join(&manifest.store);
    let backup = AuditLog::open_existing(&copy)?;
    let rows = match backup.verify()? {
        Ok(n) => n,
        Err(problem) => {
            return Err(AuditError::Batch(format!(
                "the backup in {} does not verify ({problem}); it was not restored",
                from.display()
            )))
        }
    };
    let folder = audit_path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(folder)
        .map_err(|e| AuditError::Folder(folder.display().to_string(), e))?;
    // Read before anything moves: what the store being replaced has spent.
    // A store damaged past reading is often why one restores, so that is
    // reported, not fatal: the time cut-off still refuses its approvals.
    let replaced = (move_aside && audit_path.exists()).then(|| spent_nonces(audit_path));
    if move_aside {
        if let Some(aside) = drydock_daemon::files::move_aside(&leftovers, folder)
            .map_err(io("cannot move the old store aside in", folder))?
        {
            tracing::info!(folder = %aside.display(), "moved the replaced store aside");
        }
    } else if let Some(first) = leftovers.first() {
        return Err(AuditError::Batch(format!(
            "{} is there: a restore never replaces a store. Stop the executor, then restore with --move-aside (the store and its segments go into a replaced-<time> folder next to it)",
            first.display()
        )));
    }
    drydock_daemon::sqlite::backup_to(&backup.lock(), audit_path)?;
    for segment in segments::list(&copy)? {
        let dest = segments::path_for(audit_path, segment.first, segment.last);
        std::fs::copy(&segment.path, &dest).map_err(io("cannot copy segment", &segment.path))?;
        read_only(&dest)?;
    }
    let mut revoked = false;
    if let (Some(name), Some(list)) = (&manifest.revocations, revocations) {
        crate::revocations::merge(&from.join(name), list)
            .map_err(|e| AuditError::Batch(format!("{e:#}")))?;
        revoked = true;
    }
    let restored = AuditLog::open(audit_path)?;
    let at = now();
    let carried = {
        let mut conn = restored.lock();
        let tx = conn.transaction()?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('restored_at', ?1)",
            [at.to_string()],
        )?;
        let carried = match &replaced {
            None => Carried::NoStore,
            Some(Ok(rows)) => {
                let mut insert = tx.prepare(&format!(
                    "INSERT OR IGNORE INTO nonces ({NONCE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                ))?;
                let mut added = 0;
                for r in rows {
                    added += insert.execute(rusqlite::params![
                        r.0, r.1, r.2, r.3, r.4, r.5, r.6, r.7, r.8
                    ])?;
                }
                Carried::Nonces(added)
            }
            Some(Err(why)) => Carried::Unreadable(why.clone()),
        };
        tx.commit()?;
        carried
    };
    restored.append(&AuditEntry {
        caller: "drydock-executor".into(),
        action: RESTORED.into(),
        decision: super::Decision::Restored,
        reason: format!(
            "restored from a backup taken at {} ({rows} rows); {carried}; approvals and grants issued up to {} (this row's time plus the accepted clock skew) are refused, since uses spent after the backup may be missing from this store",
            manifest.taken_at,
            at.saturating_add(drydock_proto::approval::CLOCK_SKEW_SECS)
        ),
        ..Default::default()
    })?;
    Ok(RestoreReport {
        backup: BackupReport {
            rows,
            segments: manifest.segments.len(),
            revocations: revoked,
            taken_at: manifest.taken_at,
        },
        carried,
    })
}

fn read_only(path: &Path) -> Result<(), AuditError> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o400))
        .map_err(io("cannot make read-only", path))
}
