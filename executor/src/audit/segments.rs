//! Rotation keeps the audit store bounded without breaking the chain.
//!
//! When the live store passes `audit.max_size`, its rows are copied into a
//! read-only segment file next to it, `<audit.path>.seg.<first>-<last>`, and
//! deleted from the live store. The live store remembers the last row's seq
//! and hash (its `meta` table), so its next row, a `rotated` row naming the
//! segment, chains to the segment's last row. Nonces stay in the live store:
//! rotation never forgets a used approval.
//!
//! Beyond `audit.keep_segments`, the oldest segment is deleted, after a
//! `retention` row recording its range is in the chain. `audit verify`
//! accepts a chain that starts after row 1 only when such a row says so;
//! a segment missing in the middle is a gap in the sequence and fails.
//!
//! Order of effects (each step survives a crash at any point): the segment is
//! written under a `.tmp` name, synced and renamed; then the live rows are
//! deleted in one transaction. A segment whose rows are still in the live
//! store is the leftover of an interrupted rotation and is removed at start.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use rusqlite::{params, Connection, OptionalExtension as _};

use super::{append_in, AuditEntry, AuditError, AuditLog, AuditRow, Decision, GENESIS_HASH};

/// The action of the row that starts the live store again after its rows
/// moved into a segment (its decision is `Decision::Rotated`).
pub const ROTATED: &str = Decision::Rotated.as_str();
/// The action of the row that records a deleted segment (its decision is
/// `Decision::Retention`).
pub const RETENTION: &str = Decision::Retention.as_str();

const SEGMENT_INFIX: &str = ".seg.";
/// The size is looked at every this many appended rows.
const CHECK_EVERY: u32 = 16;

pub(super) struct Rotation {
    max_size: u64,
    keep: usize,
    since_check: AtomicU32,
    /// Size of the live store right after the last rotation (nonces and
    /// the rotated row): the next rotation waits until the store has grown
    /// by half of `max_size` beyond it, so a large nonce table cannot make
    /// every check rotate.
    floor: AtomicU64,
}

/// A rotated, read-only part of the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub path: PathBuf,
    pub first: i64,
    pub last: i64,
}

impl Segment {
    pub(super) fn open(&self) -> Result<Connection, AuditError> {
        Ok(Connection::open_with_flags(
            &self.path,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?)
    }

    fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// The name the segment of rows `first..=last` of the store at `live` has.
pub(super) fn path_for(live: &Path, first: i64, last: i64) -> PathBuf {
    let mut p = live.as_os_str().to_os_string();
    p.push(format!("{SEGMENT_INFIX}{first:012}-{last:012}"));
    PathBuf::from(p)
}

fn folder(live: &Path) -> &Path {
    live.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Segments next to the live store at `live`, oldest first. Files that are
/// not complete segments (a `.tmp` left by a crash) are not listed.
pub fn list(live: &Path) -> Result<Vec<Segment>, AuditError> {
    let Some(name) = live.file_name().and_then(|n| n.to_str()) else {
        return Ok(Vec::new());
    };
    let prefix = format!("{name}{SEGMENT_INFIX}");
    let dir = folder(live);
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(AuditError::Folder(dir.display().to_string(), e)),
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(range) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else {
            continue;
        };
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        if let (Ok(first), Ok(last)) = (a.parse::<i64>(), b.parse::<i64>()) {
            out.push(Segment {
                path: entry.path(),
                first,
                last,
            });
        }
    }
    out.sort_by_key(|s| s.first);
    Ok(out)
}

/// The seq and hash the live store's next row chains to when it holds no
/// rows: the genesis for a new store, the newest segment's last row after a
/// rotation.
pub(super) fn base(tx: &rusqlite::Connection) -> Result<(i64, String), AuditError> {
    let get = |key: &str| -> Result<Option<String>, AuditError> {
        Ok(tx
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?)
    };
    match (get("base_seq")?, get("base_hash")?) {
        (Some(seq), Some(hash)) => match seq.parse::<i64>() {
            Ok(seq) => Ok((seq, hash)),
            Err(_) => Err(AuditError::Sqlite(rusqlite::Error::InvalidColumnType(
                0,
                "meta.base_seq".into(),
                rusqlite::types::Type::Text,
            ))),
        },
        _ => Ok((0, GENESIS_HASH.to_string())),
    }
}

/// The last seq a `retention` row says was deleted with everything before
/// it.
pub(super) fn removed_through(row: &AuditRow) -> Option<i64> {
    if row.entry.decision != Decision::Retention {
        return None;
    }
    let input: serde_json::Value = serde_json::from_str(&row.entry.input).ok()?;
    input["last"].as_i64()
}

fn live_size(conn: &Connection) -> Result<u64, AuditError> {
    let pages: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
    let size: i64 = conn.query_row("PRAGMA page_size", [], |r| r.get(0))?;
    Ok(((pages - free).max(0) as u64).saturating_mul(size.max(0) as u64))
}

fn sync_path(path: &Path) -> std::io::Result<()> {
    std::fs::File::open(path)?.sync_all()
}

impl AuditLog {
    /// Rotate past `max_size`, keeping `keep_segments` rotated segments.
    pub fn with_rotation(mut self, max_size: u64, keep_segments: u32) -> AuditLog {
        {
            let conn = self.lock();
            // Bound the write-ahead log too: checkpoint it at a quarter of
            // the store's cap and truncate it back afterwards.
            let pages = (max_size / 4 / 4096).clamp(4, 1000);
            if let Err(e) = conn.execute_batch(&format!(
                "PRAGMA wal_autocheckpoint = {pages}; PRAGMA journal_size_limit = {};",
                max_size / 4
            )) {
                tracing::warn!(error = %e, "cannot bound the audit write-ahead log");
            }
        }
        self.rotation = Some(Rotation {
            max_size,
            keep: keep_segments.max(1) as usize,
            since_check: AtomicU32::new(CHECK_EVERY - 1),
            floor: AtomicU64::new(0),
        });
        self
    }

    /// Called after every commit of `rows` rows: rotate when the live store
    /// is past its cap.
    pub(super) fn maybe_rotate(&self, rows: u32) {
        let Some(rot) = &self.rotation else {
            return;
        };
        if rot.since_check.fetch_add(rows, Ordering::SeqCst) + rows < CHECK_EVERY {
            return;
        }
        rot.since_check.store(0, Ordering::SeqCst);
        let size = match live_size(&self.lock()) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the audit store's size");
                return;
            }
        };
        let threshold = rot
            .max_size
            .max(rot.floor.load(Ordering::SeqCst) + rot.max_size / 2);
        if size < threshold {
            return;
        }
        match self.rotate() {
            Ok(Some(segment)) => tracing::info!(
                segment = %segment.path.display(),
                first = segment.first,
                last = segment.last,
                "rotated the audit store"
            ),
            Ok(None) => {}
            Err(e) => tracing::error!(error = %e, "cannot rotate the audit store"),
        }
    }

    /// Move every live row into a new segment now. Postponed (`Ok(None)`)
    /// while a write is in flight, so that an intent row and its outcome
    /// row are never split by a crash in between.
    pub fn rotate(&self) -> Result<Option<Segment>, AuditError> {
        let Some(rot) = &self.rotation else {
            return Ok(None);
        };
        let mut conn = self.lock();
        let open_intent: Option<i64> = conn
            .query_row(
                "SELECT i.seq FROM audit i WHERE i.decision = ?1 AND NOT EXISTS (
                   SELECT 1 FROM audit o WHERE o.seq > i.seq AND o.approval_id = i.approval_id
                     AND o.decision != ?1) LIMIT 1",
                [Decision::Intent],
                |r| r.get(0),
            )
            .optional()?;
        if open_intent.is_some() {
            return Ok(None);
        }
        // The segment ends attested by the audit key.
        self.checkpoint_locked(&mut conn)?;
        let range: Option<(i64, i64, String)> = conn
            .query_row(
                "SELECT (SELECT min(seq) FROM audit), seq, hash FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((first, last, last_hash)) = range else {
            return Ok(None);
        };
        let segment = Segment {
            path: path_for(&self.path, first, last),
            first,
            last,
        };
        write_segment(&conn, &segment)?;

        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM audit WHERE seq <= ?1", [last])?;
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('base_seq', ?1), ('base_hash', ?2)",
            params![last.to_string(), last_hash],
        )?;
        append_in(
            &tx,
            &AuditEntry {
                caller: "drydock-executor".into(),
                action: ROTATED.into(),
                decision: Decision::Rotated,
                reason: format!(
                    "rows {first} to {last} moved to segment {} (audit.max_size {} bytes)",
                    segment.name(),
                    rot.max_size
                ),
                input: serde_json::json!({"first": first, "last": last, "segment": segment.name()})
                    .to_string(),
                ..Default::default()
            },
        )?;
        tx.commit()?;
        conn.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")?;
        rot.floor.store(live_size(&conn)?, Ordering::SeqCst);

        let segments = list(&self.path)?;
        let excess = segments.len().saturating_sub(rot.keep);
        for old in &segments[..excess] {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            append_in(
                &tx,
                &AuditEntry {
                    caller: "drydock-executor".into(),
                    action: RETENTION.into(),
                    decision: Decision::Retention,
                    reason: format!(
                        "segment {} holding rows {} to {} deleted (audit.keep_segments {})",
                        old.name(),
                        old.first,
                        old.last,
                        rot.keep
                    ),
                    input: serde_json::json!({"first": old.first, "last": old.last, "segment": old.name()})
                        .to_string(),
                    ..Default::default()
                },
            )?;
            tx.commit()?;
            if let Err(e) = std::fs::remove_file(&old.path) {
                tracing::error!(segment = %old.path.display(), error = %e, "cannot delete an expired audit segment");
            }
        }
        Ok(Some(segment))
    }

    /// At start: remove what an interrupted rotation left behind (a `.tmp`
    /// copy, or a complete segment whose rows the live store still holds).
    pub(super) fn recover_rotation(&self) -> Result<(), AuditError> {
        let live_first: Option<i64> =
            self.lock()
                .query_row("SELECT min(seq) FROM audit", [], |r| r.get(0))?;
        for segment in list(&self.path)? {
            if live_first.is_some_and(|f| f <= segment.last) {
                tracing::warn!(segment = %segment.path.display(), "removing the copy of an interrupted audit rotation (its rows are still in the live store)");
                std::fs::remove_file(&segment.path)
                    .map_err(|e| AuditError::Folder(segment.path.display().to_string(), e))?;
            }
        }
        if let Some(name) = self.path.file_name().and_then(|n| n.to_str()) {
            let prefix = format!("{name}{SEGMENT_INFIX}");
            let dir = folder(&self.path);
            for entry in std::fs::read_dir(dir)
                .map_err(|e| AuditError::Folder(dir.display().to_string(), e))?
                .flatten()
            {
                let file = entry.file_name();
                let file = file.to_string_lossy();
                if file.starts_with(&prefix) && file.ends_with(".tmp") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(())
    }
}

/// Copy the live store into the segment's file: under a `.tmp` name, the
/// nonces left out (they stay live), synced, then renamed into place.
fn write_segment(conn: &Connection, segment: &Segment) -> Result<(), AuditError> {
    let mut tmp = segment.path.as_os_str().to_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let Some(tmp_text) = tmp.to_str() else {
        return Err(AuditError::Folder(
            tmp.display().to_string(),
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "audit.path must be UTF-8"),
        ));
    };
    conn.execute("VACUUM INTO ?1", [tmp_text])?;
    {
        let copy = Connection::open(&tmp)?;
        copy.execute_batch(
            "PRAGMA journal_mode = DELETE;
             DELETE FROM nonces;
             DELETE FROM grant_uses;
             DELETE FROM meta;
             INSERT INTO meta (key, value) VALUES ('role', 'segment');
             VACUUM;",
        )?;
    }
    drydock_daemon::files::restrict_sqlite(&tmp);
    let io = |e: std::io::Error| AuditError::Folder(segment.path.display().to_string(), e);
    sync_path(&tmp).map_err(io)?;
    std::fs::rename(&tmp, &segment.path).map_err(io)?;
    sync_path(folder(&segment.path)).map_err(io)?;
    Ok(())
}
