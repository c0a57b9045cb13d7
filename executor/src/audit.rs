//! The audit log and the approval nonce store, in one SQLite file.
//!
//! Every call the executor answers (refusals included) becomes one row. Each
//! row's hash covers its content and the previous row's hash, so an edited,
//! deleted or reordered row breaks the chain and `audit verify` reports where.
//! Nonces live in the same file so that "the nonce was consumed" and "the
//! audit log is writable" are facts about one store. Past `audit.max_size`
//! the rows rotate into read-only segment files and the chain continues
//! across them (see `segments`).

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension as _};
use serde::Serialize;

pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("audit store error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot create audit folder {0}: {1}")]
    Folder(String, std::io::Error),
    #[error("approval nonce was already used")]
    NonceReplayed,
    #[error("audit store error: {0}")]
    Batch(String),
    #[error("no audit log at {0}")]
    Missing(String),
    #[error("no audit store at {path}: a new, empty store would forget which approvals were already used (so they could be replayed), and the executor does not create one by itself. For a new installation run `drydock-executor audit init --config FILE` (drydock init prepares it for you); if a store should be there, restore it")]
    Uninitialised { path: String },
    #[error("{path} already holds an audit store; it is never replaced")]
    AlreadyInitialised { path: String },
    #[error("the audit store {path} was written by a newer drydock-executor (schema version {found}; this release knows up to {known}): run that release, or restore the copy taken before it migrated the store (`<audit.path>.v{known}.bak` next to it); the store was not changed")]
    Newer {
        path: String,
        found: u32,
        known: u32,
    },
    #[error("cannot back up the audit store before migrating it: {0}")]
    Backup(#[from] drydock_daemon::sqlite::BackupError),
}

/// A file next to the store, `<audit.path>.init`, that tells the executor to
/// create the store at its first start (and is removed then). `drydock init`
/// writes it; without it, a missing store is refused.
pub fn init_marker(path: &Path) -> std::path::PathBuf {
    let mut p = path.as_os_str().to_os_string();
    p.push(".init");
    std::path::PathBuf::from(p)
}

fn holds_a_store(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.len() > 0)
}

/// What one call did, as recorded.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct AuditEntry {
    pub request_id: String,
    pub caller: String,
    pub action: String,
    pub target: String,
    pub container_id: String,
    pub tier: u32,
    pub approval_id: String,
    pub key_id: String,
    pub decision: Decision,
    /// The gRPC status the call was answered with.
    pub code: Code,
    pub reason: String,
    pub duration_ms: u64,
    pub input: String,
    pub result: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct AuditRow {
    pub seq: i64,
    pub ts: String,
    #[serde(flatten)]
    pub entry: AuditEntry,
    pub prev_hash: String,
    pub hash: String,
}

pub struct AuditLog {
    conn: Mutex<Connection>,
    /// Rows waiting for the next group commit (commit.rs).
    pending: commit::Pending,
    path: std::path::PathBuf,
    checkpoints: Option<Checkpointer>,
    rotation: Option<segments::Rotation>,
}

mod backup;
mod commit;
mod words;
pub use words::{Code, Decision};
mod grant_uses;
mod schema;
mod segments;
pub use backup::{restore, BackupReport, Carried, RestoreReport, MANIFEST, RESTORED};

/// Since when an audit store counts every approval and grant use (unix
/// seconds), and why from then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountsSince {
    /// A new store: nothing was spent in it before.
    Created(i64),
    /// A store restored from a backup: what was spent after the backup
    /// was taken may be missing from it.
    Restored(i64),
}
pub use grant_uses::{use_id, CapExceeded, GrantUse};
pub use segments::{Segment, RETENTION, ROTATED};

/// Signs the chain's head every `every` rows and on demand (at shutdown),
/// with a key whose public half lives outside the store: whoever rewrites a
/// row and every later hash (the chain alone has no key) breaks every
/// signed checkpoint after it, and a truncated tail is caught against the
/// last checkpoint an operator exported.
struct Checkpointer {
    key: ed25519_dalek::SigningKey,
    every: u32,
    since: std::sync::atomic::AtomicU32,
}

/// Domain separation for checkpoint signatures (approvals use their own).
pub const CHECKPOINT_CONTEXT: &[u8] = b"drydock-audit-checkpoint-v1\0";

fn checkpoint_message(seq: i64, hash: &str) -> Vec<u8> {
    let mut m = CHECKPOINT_CONTEXT.to_vec();
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(hash.as_bytes());
    m
}

/// What a signed verification found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedReport {
    pub rows: usize,
    pub checkpoints: usize,
    /// The newest attested head: `(seq, hash)`.
    pub last_checkpoint: Option<(i64, String)>,
    /// Rows after the newest checkpoint (not yet attested).
    pub unattested: usize,
    /// The exported checkpoint asked for was in a segment that retention
    /// deleted since: it can no longer be compared. The chain's first row.
    pub expect_removed: Option<i64>,
}

/// What consuming an approval records.
#[derive(Debug, Clone, Copy)]
pub struct NonceRecord<'a> {
    pub nonce: &'a str,
    pub approval_id: &'a str,
    pub expires_at: i64,
    pub request_id: &'a str,
    pub action: &'a str,
    pub container_id: &'a str,
    pub caller: &'a str,
    pub key_id: &'a str,
}

/// Bring a store written by an earlier version up to date. The first
/// version's nonce table recorded only the nonce, approval, expiry and time;
/// the columns added since get empty values for old rows. Audit rows are
/// never rewritten (that would break the hash chain).
fn row_hash(seq: i64, ts: &str, e: &AuditEntry, prev_hash: &str) -> String {
    let material = serde_json::to_vec(&Material {
        seq,
        ts,
        e,
        prev_hash,
    })
    .unwrap_or_default();
    // ring's SHA-256: its assembly kernels (SHA-NI, AVX2) are already
    // linked for TLS and cost a fraction of a portable one.
    hex_string(ring::digest::digest(&ring::digest::SHA256, &material).as_ref())
}

/// Lowercase hex, as `hex::encode` writes it, a byte's two digits from a
/// table: `hex::encode` collects a `char` iterator, a tenth of a read's row
/// hash on its own.
pub(crate) fn hex_string(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// What a row's hash covers: a JSON array of fixed positions (an
/// unambiguous encoding), written straight from the row, as
/// `[seq, ts, request_id, caller, action, target, container_id, tier,
/// approval_id, key_id, decision, code, reason, duration_ms, input, result,
/// prev_hash]`. The bytes must never change: every stored hash covers them.
struct Material<'a> {
    seq: i64,
    ts: &'a str,
    e: &'a AuditEntry,
    prev_hash: &'a str,
}

impl Serialize for Material<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple as _;
        let e = self.e;
        let mut t = s.serialize_tuple(17)?;
        t.serialize_element(&self.seq)?;
        t.serialize_element(self.ts)?;
        for field in [
            &e.request_id,
            &e.caller,
            &e.action,
            &e.target,
            &e.container_id,
        ] {
            t.serialize_element(field)?;
        }
        t.serialize_element(&e.tier)?;
        for field in [
            e.approval_id.as_str(),
            &e.key_id,
            e.decision.as_str(),
            e.code.as_str(),
            &e.reason,
        ] {
            t.serialize_element(field)?;
        }
        t.serialize_element(&e.duration_ms)?;
        t.serialize_element(&e.input)?;
        t.serialize_element(&e.result)?;
        t.serialize_element(self.prev_hash)?;
        t.end()
    }
}

impl AuditLog {
    /// Open an existing audit log (for `audit verify` / `export`): a wrong
    /// path is an error, not a new, empty, "intact" log.
    pub fn open_existing(path: &Path) -> Result<AuditLog, AuditError> {
        if !path.is_file() {
            return Err(AuditError::Missing(path.display().to_string()));
        }
        // Read-only first: a file that is not an audit log is reported, not
        // given empty tables and called intact.
        let probe = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
        let tables: i64 = probe.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('audit', 'nonces')", [], |r| r.get(0))?;
        if tables != 2 {
            return Err(AuditError::Missing(format!(
                "{} (a SQLite file, but not a drydock audit log)",
                path.display()
            )));
        }
        drop(probe);
        Self::open_or_create(path)
    }

    /// Open the store the executor serves with. A missing or empty store is
    /// refused unless its init marker is there (then it is created and the
    /// marker removed): a silently recreated store would forget the used
    /// nonces, and unexpired approvals could be replayed after a restore or
    /// a volume mix-up.
    pub fn open(path: &Path) -> Result<AuditLog, AuditError> {
        if holds_a_store(path) {
            let log = Self::open_or_create(path)?;
            log.recover_rotation()?;
            return Ok(log);
        }
        let marker = init_marker(path);
        if !marker.is_file() {
            return Err(AuditError::Uninitialised {
                path: path.display().to_string(),
            });
        }
        let log = Self::create(path)?;
        if let Err(e) = std::fs::remove_file(&marker) {
            tracing::warn!(marker = %marker.display(), error = %e, "cannot remove the audit init marker");
        }
        Ok(log)
    }

    /// Create a new store (`audit init`); an existing one is never replaced.
    /// Its first row says when it was initialised.
    pub fn create(path: &Path) -> Result<AuditLog, AuditError> {
        if holds_a_store(path) {
            return Err(AuditError::AlreadyInitialised {
                path: path.display().to_string(),
            });
        }
        let log = Self::open_or_create(path)?;
        log.lock().execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('created_at', ?1)",
            [std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0)
                .to_string()],
        )?;
        log.append(&AuditEntry {
            caller: "drydock-executor".into(),
            action: "init".into(),
            decision: Decision::Init,
            reason: "audit store initialised".into(),
            ..Default::default()
        })?;
        Ok(log)
    }

    fn open_or_create(path: &Path) -> Result<AuditLog, AuditError> {
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| AuditError::Folder(dir.display().to_string(), e))?;
            }
        }
        let mut conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL;
             PRAGMA synchronous=FULL;
             PRAGMA busy_timeout=5000;
             -- Appends touch a few pages; a scan (dangling intents at
             -- start, verify) must not leave megabytes of cache behind.
             PRAGMA cache_size=-256;",
        )?;
        schema::migrate(&mut conn, path)?;
        drydock_daemon::files::restrict_sqlite(path);
        Ok(AuditLog {
            conn: Mutex::new(conn),
            pending: commit::Pending::default(),
            path: path.to_path_buf(),
            checkpoints: None,
            rotation: None,
        })
    }

    /// When this store was created (unix seconds), if it says: grant uses
    /// counted before then are not in it.
    pub fn created_at(&self) -> Result<Option<i64>, AuditError> {
        self.meta_i64("created_at")
    }

    /// Since when this store counts every approval and grant use: its
    /// creation, or its restore from a backup (which may lack uses spent
    /// after the backup was taken), whichever is later, and which it was.
    pub fn counts_since(&self) -> Result<Option<CountsSince>, AuditError> {
        Ok(match (self.created_at()?, self.restored_at()?) {
            (_, Some(restored)) => Some(CountsSince::Restored(restored)),
            (Some(created), None) => Some(CountsSince::Created(created)),
            (None, None) => None,
        })
    }

    fn meta_i64(&self, key: &str) -> Result<Option<i64>, AuditError> {
        let value: Option<String> = self
            .lock()
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()?;
        Ok(value.and_then(|v| v.parse().ok()))
    }

    /// The key of the keyed hashes of environment values that
    /// `InspectContainer` answers with: made once, at random, and kept in
    /// this store, so a value hashes the same across restarts (and so a
    /// changed value can be told from an unchanged one) while the agent,
    /// which never sees the key, cannot test guesses against a hash.
    pub fn env_hash_key(&self) -> Result<[u8; 32], AuditError> {
        use std::io::Read as _;
        let conn = self.lock();
        let kept: Option<String> = conn
            .query_row(
                "SELECT value FROM meta WHERE key = 'env_hash_key'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(key) = kept
            .and_then(|h| hex::decode(h).ok())
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
        {
            return Ok(key);
        }
        let mut key = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut key))
            .map_err(|e| AuditError::Batch(format!("cannot read /dev/urandom for a key: {e}")))?;
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('env_hash_key', ?1)",
            [hex::encode(key)],
        )?;
        Ok(key)
    }

    /// Sign a checkpoint of the chain head every `every` rows.
    pub fn with_checkpoints(mut self, key: ed25519_dalek::SigningKey, every: u32) -> AuditLog {
        self.checkpoints = Some(Checkpointer {
            key,
            every: every.max(1),
            since: std::sync::atomic::AtomicU32::new(0),
        });
        self
    }

    /// Append a signed checkpoint of the current head, if there is a key and
    /// anything new to attest. Returns the attested `(seq, hash)`.
    pub fn checkpoint(&self) -> Result<Option<(i64, String)>, AuditError> {
        // The checkpoint covers every row answered so far.
        self.flush();
        let mut conn = self.lock();
        self.checkpoint_locked(&mut conn)
    }

    fn checkpoint_locked(
        &self,
        conn: &mut Connection,
    ) -> Result<Option<(i64, String)>, AuditError> {
        let Some(cp) = &self.checkpoints else {
            return Ok(None);
        };
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let head: Option<(i64, String, Decision)> = tx
            .query_row(
                "SELECT seq, hash, decision FROM audit ORDER BY seq DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        let Some((seq, hash, decision)) = head else {
            return Ok(None);
        };
        if decision == Decision::Checkpoint {
            return Ok(None);
        }
        use ed25519_dalek::Signer as _;
        let signature = cp.key.sign(&checkpoint_message(seq, &hash));
        append_in(
            &tx,
            &AuditEntry {
                caller: "drydock-executor".into(),
                action: CHECKPOINT.into(),
                decision: Decision::Checkpoint,
                reason: format!("head seq={seq} hash={hash}"),
                result: base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    signature.to_bytes(),
                ),
                ..Default::default()
            },
        )?;
        tx.commit()?;
        cp.since.store(0, std::sync::atomic::Ordering::SeqCst);
        Ok(Some((seq, hash)))
    }

    fn count_for_checkpoint(&self) {
        if let Some(cp) = &self.checkpoints {
            let n = cp.since.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            if n >= cp.every {
                if let Err(e) = self.checkpoint() {
                    tracing::error!(error = %e, "cannot write an audit checkpoint");
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written
        // (every write is one transaction), so a poisoned lock is still usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Spend an approval: record its nonce (refused if it was used before,
    /// by this run or an earlier one) and append the write's **intent** row
    /// to the chain, in one transaction, before Docker is called. The chain
    /// itself then proves the approval was spent, and a write whose caller
    /// or executor died mid-call still has its row.
    pub fn spend_approval(
        &self,
        r: &NonceRecord<'_>,
        intent: &AuditEntry,
    ) -> Result<i64, AuditError> {
        // Reads answered before this write keep their place in the chain.
        self.flush();
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let ts = now_ts();
        match tx.execute(
            "INSERT INTO nonces (nonce, approval_id, expires_at, used_at, request_id, action, container_id, caller, key_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![r.nonce, r.approval_id, r.expires_at, ts, r.request_id, r.action, r.container_id, r.caller, r.key_id],
        ) {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                return Err(AuditError::NonceReplayed)
            }
            Err(e) => return Err(e.into()),
        }
        let seq = append_in(&tx, intent)?;
        tx.commit()?;
        drop(conn);
        self.count_for_checkpoint();
        self.maybe_rotate(1);
        Ok(seq)
    }

    /// Intent rows with no later outcome row for the same approval: writes
    /// that were in flight when the executor stopped. Each gets an explicit
    /// "outcome unknown" row; returns those writes' intent rows.
    pub fn close_dangling_intents(&self) -> Result<Vec<AuditEntry>, AuditError> {
        let dangling: Vec<AuditEntry> = {
            let conn = self.lock();
            let mut stmt = conn.prepare(
                "SELECT request_id, caller, action, target, container_id, tier, approval_id, key_id, input
                 FROM audit i WHERE i.decision = ?1 AND NOT EXISTS (
                   SELECT 1 FROM audit o WHERE o.seq > i.seq AND o.approval_id = i.approval_id
                     AND o.decision != ?1)
                 ORDER BY seq",
            )?;
            let rows = stmt
                .query_map([Decision::Intent], |r| {
                    Ok(AuditEntry {
                        request_id: r.get(0)?,
                        caller: r.get(1)?,
                        action: r.get(2)?,
                        target: r.get(3)?,
                        container_id: r.get(4)?,
                        tier: r.get(5)?,
                        approval_id: r.get(6)?,
                        key_id: r.get(7)?,
                        input: r.get(8)?,
                        ..Default::default()
                    })
                })?
                .collect::<Result<Vec<_>, _>>()?;
            rows
        };
        for mut entry in dangling.iter().cloned() {
            entry.decision = Decision::Unknown;
            entry.code = Code::of(tonic::Code::Unknown);
            entry.reason = "outcome unknown: the executor stopped after the approval was spent and before Docker answered; the container's state tells what happened".into();
            self.append(&entry)?;
        }
        Ok(dangling)
    }
}

/// The action of a signed checkpoint row (its decision is
/// `Decision::Checkpoint`).
pub const CHECKPOINT: &str = Decision::Checkpoint.as_str();

fn now_ts() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// Append within the transaction open on `tx`.
fn append_in(tx: &Connection, entry: &AuditEntry) -> Result<i64, AuditError> {
    // Cached statements: a busy executor appends thousands of rows a second.
    let last: Option<(i64, String)> = tx
        .prepare_cached("SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let (seq, prev) = match last {
        Some((s, h)) => (s + 1, h),
        // Empty: a new store, or one whose rows were all rotated out (its
        // next row chains to the last row of the newest segment).
        None => {
            let base = segments::base(tx)?;
            (base.0 + 1, base.1)
        }
    };
    let ts = now_ts();
    let hash = row_hash(seq, &ts, entry, &prev);
    tx.prepare_cached(
            "INSERT INTO audit (seq, ts, request_id, caller, action, target, container_id, tier, approval_id, key_id, decision, code, reason, duration_ms, input, result, prev_hash, hash)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18)",
        )?
        .execute(params![
                seq, ts, entry.request_id, entry.caller, entry.action, entry.target, entry.container_id,
                entry.tier, entry.approval_id, entry.key_id, entry.decision, entry.code, entry.reason,
                entry.duration_ms as i64, entry.input, entry.result, prev, hash
            ])?;
    Ok(seq)
}

impl AuditLog {
    /// Forget nonces of approvals that expired before `before` (unix
    /// seconds): an expired approval is refused before its nonce is looked
    /// at, so keeping them forever buys nothing.
    pub fn prune_nonces(&self, before: i64) -> Result<usize, AuditError> {
        Ok(self
            .lock()
            .execute("DELETE FROM nonces WHERE expires_at < ?1", params![before])?)
    }

    /// Every row still kept: the rotated segments', oldest first, then the
    /// live store's.
    pub fn rows(&self) -> Result<Vec<AuditRow>, AuditError> {
        let mut rows = Vec::new();
        for segment in segments::list(&self.path)? {
            rows.extend(select(&segment.open()?, "ORDER BY seq", i64::MAX)?);
        }
        rows.extend(self.live_rows()?);
        Ok(rows)
    }

    /// The live store's rows only.
    pub fn live_rows(&self) -> Result<Vec<AuditRow>, AuditError> {
        select(&self.lock(), "ORDER BY seq", i64::MAX)
    }

    /// The newest `n` rows, oldest first (reaching back into segments when
    /// the live store holds fewer).
    pub fn tail(&self, n: u32) -> Result<Vec<AuditRow>, AuditError> {
        let want = i64::from(n);
        let mut rows = select(&self.lock(), "ORDER BY seq DESC", want)?;
        for segment in segments::list(&self.path)?.iter().rev() {
            let missing = want - rows.len() as i64;
            if missing <= 0 {
                break;
            }
            rows.extend(select(&segment.open()?, "ORDER BY seq DESC", missing)?);
        }
        rows.reverse();
        Ok(rows)
    }
}

fn select(conn: &Connection, order: &'static str, limit: i64) -> Result<Vec<AuditRow>, AuditError> {
    let mut stmt = conn.prepare(&format!(
            "SELECT seq, ts, request_id, caller, action, target, container_id, tier, approval_id, key_id, decision, code, reason, duration_ms, input, result, prev_hash, hash FROM audit {order} LIMIT ?1",
        ))?;
    let rows = stmt
        .query_map([limit], |r| {
            Ok(AuditRow {
                seq: r.get(0)?,
                ts: r.get(1)?,
                entry: AuditEntry {
                    request_id: r.get(2)?,
                    caller: r.get(3)?,
                    action: r.get(4)?,
                    target: r.get(5)?,
                    container_id: r.get(6)?,
                    tier: r.get(7)?,
                    approval_id: r.get(8)?,
                    key_id: r.get(9)?,
                    decision: r.get(10)?,
                    code: r.get(11)?,
                    reason: r.get(12)?,
                    duration_ms: r.get::<_, i64>(13)?.max(0) as u64,
                    input: r.get(14)?,
                    result: r.get(15)?,
                },
                prev_hash: r.get(16)?,
                hash: r.get(17)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

impl AuditLog {
    /// Check the whole chain. `Ok(n)` is the number of intact rows; an error
    /// names the first row that does not fit.
    pub fn verify(&self) -> Result<Result<usize, String>, AuditError> {
        Ok(verify_rows(&self.rows()?))
    }
}

mod verify;
pub use verify::{verify_rows, verify_signed};

#[cfg(test)]
mod tests;
