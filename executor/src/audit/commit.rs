//! Group commit: rows of calls that arrive together share one transaction
//! (one fsync), and a read's row may be committed just after its answer.
//!
//! The rule (SECURITY.md, "Audit"):
//! - every row that records a change or a refusal (a write's intent, its
//!   outcome, any refused call, a grant use, a rotation) is committed
//!   before the call goes on: `append` returns only once the row is on disk;
//! - an answered read's row (T0: list, inspect, logs, stats, health,
//!   policy, events) is queued before its answer is sent and committed by the flusher
//!   thread within `FLUSH_WINDOW` (5 ms) plus the commit's own time,
//!   with whatever else is queued. At most
//!   `MAX_QUEUED` rows wait; past that, reads wait for their own commit. A
//!   commit that fails turns deferral off until one succeeds, so every
//!   later call waits for its row and fails if it cannot be written. An
//!   orderly shutdown writes every queued row before the final checkpoint;
//!   a crash (kill -9, power loss) loses at most the rows of reads answered
//!   since the last commit, never a write's.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use rusqlite::Connection;

use super::{append_in, AuditEntry, AuditError, AuditLog};

/// Rows of answered reads that may wait for the flusher at once.
pub const MAX_QUEUED: usize = 1024;
/// Rows written in one transaction at most.
const MAX_BATCH: usize = 64;
/// How long the flusher lets rows gather after the first one arrives.
pub const FLUSH_WINDOW: Duration = Duration::from_millis(5);

/// Where a queued row learns its outcome: its seq, or why the batch that
/// held it failed.
#[derive(Default)]
struct Slot(Mutex<Option<Result<i64, String>>>);

impl Slot {
    fn take(&self) -> Option<Result<i64, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
    fn set(&self, r: Result<i64, String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
    }
}

/// A row waiting for the next commit; a deferred read's has no waiter.
type Queued = (AuditEntry, Option<Arc<Slot>>);

/// Wakes the flusher thread.
#[derive(Default)]
struct Signal {
    pending: Mutex<bool>,
    wake: Condvar,
}

#[derive(Default)]
pub(super) struct Pending {
    queue: Mutex<Vec<Queued>>,
    /// Set once the flusher runs; until then every row is committed by its
    /// own caller.
    flusher: OnceLock<Arc<Signal>>,
    /// The last commit failed: defer nothing until one succeeds.
    failed: AtomicBool,
}

impl Pending {
    fn queue(&self) -> std::sync::MutexGuard<'_, Vec<Queued>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl AuditLog {
    /// Append one row, chained to the last one; returns once it is on disk,
    /// with its sequence number.
    ///
    /// The row is queued, then the caller takes the store's lock. Whoever
    /// holds the lock writes every queued row in one transaction (one
    /// fsync), so calls that arrive together share the fsync. A caller whose
    /// row a previous holder already wrote finds its outcome and returns;
    /// none returns before its row is committed.
    pub fn append(&self, entry: &AuditEntry) -> Result<i64, AuditError> {
        let slot = Arc::new(Slot::default());
        self.pending
            .queue()
            .push((entry.clone(), Some(slot.clone())));
        loop {
            let mut conn = self.lock();
            if let Some(done) = slot.take() {
                return done.map_err(AuditError::Batch);
            }
            let written = self.commit_queued(&mut conn);
            drop(conn);
            self.after_commit(written);
            if written == 0 {
                // Nothing was written: the batch failed (its outcome is in
                // the slot) or, impossibly, the row was not queued.
                return slot
                    .take()
                    .unwrap_or_else(|| Err("the row was not written".into()))
                    .map_err(AuditError::Batch);
            }
        }
    }

    /// A read's row: queued for the flusher, which commits it straight
    /// after the answer (the rule is at the top of this file). Gives the
    /// entry back when it must be appended and waited for instead: no
    /// flusher, a full queue, or a failed last commit. Never blocks on I/O.
    pub fn append_deferred(&self, entry: AuditEntry) -> Result<(), Box<AuditEntry>> {
        let Some(signal) = self.pending.flusher.get() else {
            return Err(Box::new(entry));
        };
        if self.pending.failed.load(Ordering::SeqCst) {
            return Err(Box::new(entry));
        }
        {
            let mut queue = self.pending.queue();
            if queue.len() >= MAX_QUEUED {
                return Err(Box::new(entry));
            }
            queue.push((entry, None));
        }
        let mut pending = signal.pending.lock().unwrap_or_else(|p| p.into_inner());
        if !*pending {
            // Only the first row since the last commit wakes the flusher.
            *pending = true;
            signal.wake.notify_one();
        }
        Ok(())
    }

    /// Start the thread that commits deferred rows. Until it runs, reads
    /// wait for their rows like writes do.
    pub fn start_flusher(self: &Arc<Self>) -> std::io::Result<()> {
        let signal = Arc::new(Signal::default());
        if self.pending.flusher.set(signal.clone()).is_err() {
            return Ok(());
        }
        let log: Weak<AuditLog> = Arc::downgrade(self);
        std::thread::Builder::new()
            .name("audit-flusher".into())
            .spawn(move || loop {
                {
                    let mut pending = signal.pending.lock().unwrap_or_else(|p| p.into_inner());
                    while !*pending {
                        // Wakes now and then to notice the log is gone.
                        let (p, _) = signal
                            .wake
                            .wait_timeout(pending, Duration::from_secs(1))
                            .unwrap_or_else(|p| p.into_inner());
                        pending = p;
                        if log.strong_count() == 0 {
                            return;
                        }
                    }
                }
                // Let the rows of calls answered meanwhile join this
                // commit: one fsync for many reads, not one each.
                std::thread::sleep(FLUSH_WINDOW);
                *signal.pending.lock().unwrap_or_else(|p| p.into_inner()) = false;
                let Some(log) = log.upgrade() else {
                    return;
                };
                log.flush();
            })?;
        Ok(())
    }

    /// Commit every queued row now (before a checkpoint, a spent approval,
    /// and at shutdown, so rows keep the order their calls were answered in).
    pub fn flush(&self) {
        while !self.pending.queue().is_empty() {
            let written = {
                let mut conn = self.lock();
                self.commit_queued(&mut conn)
            };
            self.after_commit(written);
            if written == 0 {
                return;
            }
        }
    }

    /// Write the oldest queued rows (at most `MAX_BATCH`) in one
    /// transaction, under the store's lock, and give each waiter its
    /// outcome. Returns how many were written. The cap keeps rotation's
    /// size check close behind the store's growth.
    fn commit_queued(&self, conn: &mut Connection) -> usize {
        let batch: Vec<Queued> = {
            let mut queue = self.pending.queue();
            let n = queue.len().min(MAX_BATCH);
            queue.drain(..n).collect()
        };
        if batch.is_empty() {
            return 0;
        }
        let written = write_batch(conn, &batch);
        // Outcomes are set while the lock is still held: a caller whose row
        // is in this batch takes the lock next and must find its outcome.
        match written {
            Ok(seqs) => {
                self.pending.failed.store(false, Ordering::SeqCst);
                for ((_, slot), seq) in batch.iter().zip(&seqs) {
                    if let Some(slot) = slot {
                        slot.set(Ok(*seq));
                    }
                }
                batch.len()
            }
            Err(e) => {
                self.pending.failed.store(true, Ordering::SeqCst);
                let why = e.to_string();
                // The store is failing: every row still queued fails with
                // this batch, so no caller waits on a row written later.
                let mut batch = batch;
                batch.append(&mut self.pending.queue());
                let unrecorded = batch.iter().filter(|(_, s)| s.is_none()).count();
                if unrecorded > 0 {
                    tracing::error!(error = %why, reads = unrecorded,
                        "audit write failed: reads already answered are not recorded; every call now waits for its own row");
                }
                for (_, slot) in &batch {
                    if let Some(slot) = slot {
                        slot.set(Err(why.clone()));
                    }
                }
                0
            }
        }
    }

    /// Checkpoints and rotation count committed rows (outside the lock:
    /// both take it).
    fn after_commit(&self, written: usize) {
        if written == 0 {
            return;
        }
        for _ in 0..written {
            self.count_for_checkpoint();
        }
        self.maybe_rotate(u32::try_from(written).unwrap_or(u32::MAX));
    }
}

/// One transaction for the batch. `BEGIN` and `COMMIT` are cached
/// statements, not parsed again for every commit (a read's row is often
/// committed alone); a failure rolls the whole batch back.
fn write_batch(conn: &Connection, batch: &[Queued]) -> Result<Vec<i64>, AuditError> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let written = (|| {
        let mut seqs = Vec::with_capacity(batch.len());
        for (e, _) in batch {
            seqs.push(append_in(conn, e)?);
        }
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(seqs)
    })();
    if written.is_err() && !conn.is_autocommit() {
        if let Err(e) = conn.execute_batch("ROLLBACK") {
            tracing::error!(error = %e, "cannot roll back a failed audit batch");
        }
    }
    written
}

impl Drop for AuditLog {
    /// Rows still queued are written when the log goes (an orderly exit).
    fn drop(&mut self) {
        let mut conn = self.lock();
        while self.commit_queued(&mut conn) > 0 {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(n: usize) -> AuditEntry {
        AuditEntry {
            action: "inspect".into(),
            decision: crate::audit::Decision::Allowed,
            code: crate::audit::Code::of(tonic::Code::Ok),
            request_id: format!("r{n}"),
            ..Default::default()
        }
    }

    fn rows(path: &std::path::Path) -> i64 {
        Connection::open(path)
            .expect("open")
            .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
            .expect("count")
    }

    fn wait_for_rows(path: &std::path::Path, want: i64) {
        let started = std::time::Instant::now();
        while rows(path) < want {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "only {} of {want} rows were committed",
                rows(path)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn without_the_flusher_a_read_is_not_deferred() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = AuditLog::open_or_create(&dir.path().join("audit.db")).expect("open");
        assert!(log.append_deferred(read(1)).is_err());
    }

    #[test]
    fn deferred_reads_are_committed_in_order_and_chain_with_waited_rows() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.db");
        let log = Arc::new(AuditLog::open_or_create(&path).expect("open"));
        log.start_flusher().expect("flusher");
        for n in 0..300 {
            log.append_deferred(read(n)).expect("deferred");
        }
        // A waited row after them is committed with or after them, never
        // before: the chain keeps the order the calls were answered in.
        let seq = log.append(&read(300)).expect("append");
        assert_eq!(seq, 301);
        wait_for_rows(&path, 301);
        assert_eq!(log.verify().expect("verify"), Ok(301));
        let ids: Vec<String> = Connection::open(&path)
            .expect("open")
            .prepare("SELECT request_id FROM audit ORDER BY seq")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows");
        assert_eq!(ids, (0..=300).map(|n| format!("r{n}")).collect::<Vec<_>>());
    }

    #[test]
    fn queued_rows_are_written_when_the_log_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.db");
        let log = Arc::new(AuditLog::open_or_create(&path).expect("open"));
        log.start_flusher().expect("flusher");
        // Queue rows while the store's lock is held, so the flusher cannot
        // take them; then drop the log with them still queued.
        {
            let _held = log.lock();
            for n in 0..50 {
                log.append_deferred(read(n)).expect("deferred");
            }
        }
        drop(log);
        assert_eq!(rows(&path), 50);
    }

    #[test]
    fn a_failed_commit_stops_deferral_until_a_commit_succeeds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("audit.db");
        let log = Arc::new(AuditLog::open_or_create(&path).expect("open"));
        log.start_flusher().expect("flusher");
        let raw = Connection::open(&path).expect("open");
        raw.execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON audit BEGIN SELECT RAISE(ABORT, 'disk says no'); END;",
        )
        .expect("trigger");
        log.append_deferred(read(1)).expect("deferred");
        let started = std::time::Instant::now();
        while !log.pending.failed.load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(10), "never failed");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Now reads wait for their own row, and the caller hears it failed.
        let back = log.append_deferred(read(2)).expect_err("not deferred");
        assert!(
            matches!(log.append(&back), Err(AuditError::Batch(why)) if why.contains("disk says no"))
        );
        raw.execute_batch("DROP TRIGGER refuse").expect("drop");
        log.append(&read(3)).expect("append");
        log.append_deferred(read(4)).expect("deferred again");
        wait_for_rows(&path, 2);
    }

    #[test]
    fn a_full_queue_makes_reads_wait() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Arc::new(AuditLog::open_or_create(&dir.path().join("audit.db")).expect("open"));
        log.start_flusher().expect("flusher");
        let _held = log.lock();
        for n in 0..MAX_QUEUED {
            log.append_deferred(read(n)).expect("deferred");
        }
        assert!(log.append_deferred(read(MAX_QUEUED)).is_err());
    }
}
