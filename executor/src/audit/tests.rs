use super::*;
use sha2::{Digest as _, Sha256};
use std::sync::Arc;

fn entry(action: &str) -> AuditEntry {
    AuditEntry {
        action: action.into(),
        decision: crate::audit::Decision::Allowed,
        code: crate::audit::Code::of(tonic::Code::Ok),
        ..Default::default()
    }
}

#[test]
fn chain_detects_edit_delete_and_reorder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open_or_create(&path).unwrap();
    for a in ["list", "inspect", "restart", "logs"] {
        log.append(&entry(a)).unwrap();
    }
    assert_eq!(log.verify().unwrap(), Ok(4));
    let raw = Connection::open(&path).unwrap();

    raw.execute("UPDATE audit SET decision='denied' WHERE seq=3", [])
        .unwrap();
    assert!(log
        .verify()
        .unwrap()
        .unwrap_err()
        .contains("row 3 was modified"));
    raw.execute("UPDATE audit SET decision='allowed' WHERE seq=3", [])
        .unwrap();
    assert_eq!(log.verify().unwrap(), Ok(4));

    raw.execute("UPDATE audit SET seq=10 WHERE seq=2", [])
        .unwrap();
    raw.execute("UPDATE audit SET seq=2 WHERE seq=3", [])
        .unwrap();
    raw.execute("UPDATE audit SET seq=3 WHERE seq=10", [])
        .unwrap();
    assert!(log.verify().unwrap().is_err(), "reorder must be detected");

    raw.execute("DELETE FROM audit WHERE seq=2", []).unwrap();
    assert!(log
        .verify()
        .unwrap()
        .unwrap_err()
        .contains("row 2 is missing"));
}

fn nonce(n: &str, expires_at: i64) -> NonceRecord<'_> {
    NonceRecord {
        nonce: n,
        approval_id: "a",
        expires_at,
        request_id: "r",
        action: "restart",
        container_id: "c",
        caller: "drydock-agent",
        key_id: "k",
    }
}

#[test]
fn nonces_are_single_use_across_reopen_and_pruned_after_expiry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    AuditLog::open_or_create(&path)
        .unwrap()
        .spend_approval(&nonce("n1", 100), &intent())
        .unwrap();
    let reopened = AuditLog::open_or_create(&path).unwrap();
    assert!(matches!(
        reopened.spend_approval(&nonce("n1", 100), &intent()),
        Err(AuditError::NonceReplayed)
    ));
    reopened
        .spend_approval(&nonce("n2", 300), &intent())
        .unwrap();
    assert_eq!(reopened.prune_nonces(200).unwrap(), 1);
    assert!(matches!(
        reopened.spend_approval(&nonce("n2", 300), &intent()),
        Err(AuditError::NonceReplayed)
    ));
}

fn intent() -> AuditEntry {
    AuditEntry {
        action: "restart".into(),
        approval_id: "a".into(),
        decision: Decision::Intent,
        ..Default::default()
    }
}

#[test]
fn spending_an_approval_chains_its_intent_and_a_dangling_one_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::open_or_create(&path).unwrap();
    log.spend_approval(&nonce("n1", 100), &intent()).unwrap();
    // A replay adds neither a nonce nor a row.
    assert!(matches!(
        log.spend_approval(&nonce("n1", 100), &intent()),
        Err(AuditError::NonceReplayed)
    ));
    assert_eq!(log.rows().unwrap().len(), 1);
    // Answered: nothing dangles.
    log.append(&AuditEntry {
        approval_id: "a".into(),
        decision: crate::audit::Decision::Allowed,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(log.close_dangling_intents().unwrap().len(), 0);
    // Not answered (the executor died): closed once, explicitly.
    let other = AuditEntry {
        approval_id: "b".into(),
        ..intent()
    };
    log.spend_approval(&nonce("n2", 100), &other).unwrap();
    assert_eq!(log.close_dangling_intents().unwrap().len(), 1);
    assert_eq!(log.close_dangling_intents().unwrap().len(), 0);
    let rows = log.rows().unwrap();
    let last = rows.last().unwrap();
    assert_eq!(last.entry.decision, Decision::Unknown);
    assert_eq!(last.entry.approval_id, "b");
    assert!(matches!(log.verify().unwrap(), Ok(4)));
}

#[test]
fn a_missing_store_is_refused_unless_its_init_marker_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let err = AuditLog::open(&path).err().unwrap().to_string();
    assert!(
        err.contains("audit init") && err.contains("replayed"),
        "{err}"
    );
    assert!(!path.exists(), "nothing was created");
    std::fs::write(&path, b"").unwrap();
    assert!(AuditLog::open(&path).is_err(), "an empty file is no store");
    std::fs::write(init_marker(&path), b"").unwrap();
    let log = AuditLog::open(&path).unwrap();
    assert!(!init_marker(&path).exists(), "the marker is used once");
    assert_eq!(log.rows().unwrap()[0].entry.decision, Decision::Init);
    drop(log);
    assert!(AuditLog::open(&path).is_ok(), "an existing store opens");
    assert!(matches!(
        AuditLog::create(&path),
        Err(AuditError::AlreadyInitialised { .. })
    ));
}

/// What an attacker with write access to the file can do without the
/// audit key: edit a row and recompute every later hash.
fn rewrite_row(path: &Path, seq: i64, reason: &str) {
    let conn = Connection::open(path).unwrap();
    conn.execute(
        "UPDATE audit SET reason = ?1 WHERE seq = ?2",
        params![reason, seq],
    )
    .unwrap();
    let log = AuditLog::open_or_create(path).unwrap();
    let mut prev = GENESIS_HASH.to_string();
    for row in log.rows().unwrap() {
        let hash = row_hash(row.seq, &row.ts, &row.entry, &prev);
        conn.execute(
            "UPDATE audit SET prev_hash = ?1, hash = ?2 WHERE seq = ?3",
            params![prev, hash, row.seq],
        )
        .unwrap();
        prev = hash;
    }
}

#[test]
fn signed_checkpoints_catch_a_recomputed_chain_and_a_truncated_tail() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let key = drydock_proto::approval::generate_signing_key();
    let public = key.verifying_key();
    let log = AuditLog::create(&path).unwrap().with_checkpoints(key, 3);
    for i in 0..7 {
        log.append(&AuditEntry {
            action: format!("call-{i}"),
            decision: crate::audit::Decision::Allowed,
            ..Default::default()
        })
        .unwrap();
    }
    let attested = log.checkpoint().unwrap().expect("a final checkpoint");
    assert!(log.checkpoint().unwrap().is_none(), "nothing new to attest");
    let rows = log.rows().unwrap();
    let report = verify_signed(&rows, &public, None).unwrap();
    assert_eq!(report.checkpoints, 3, "{rows:#?}");
    assert_eq!(report.last_checkpoint, Some(attested.clone()));
    assert_eq!(report.unattested, 0);
    // Another key does not verify them.
    let other = drydock_proto::approval::generate_signing_key().verifying_key();
    assert!(verify_signed(&rows, &other, None).is_err());
    drop(log);

    // Rewritten with the chain recomputed: the chain alone cannot tell.
    let copy = dir.path().join("copy.db");
    std::fs::copy(&path, &copy).unwrap();
    rewrite_row(&copy, 2, "nothing happened here");
    let rewritten = AuditLog::open_or_create(&copy).unwrap().rows().unwrap();
    assert!(
        verify_rows(&rewritten).is_ok(),
        "the unsigned chain verifies"
    );
    let err = verify_signed(&rewritten, &public, None).unwrap_err();
    assert!(err.contains("rewritten"), "{err}");

    // Truncated back to before the exported checkpoint.
    let conn = Connection::open(&path).unwrap();
    conn.execute("DELETE FROM audit WHERE seq > 4", []).unwrap();
    let truncated = AuditLog::open_or_create(&path).unwrap().rows().unwrap();
    assert!(
        verify_signed(&truncated, &public, None).is_ok(),
        "a clean cut verifies alone"
    );
    let err = verify_signed(&truncated, &public, Some((attested.0, &attested.1))).unwrap_err();
    assert!(err.contains("truncated"), "{err}");
}

#[test]
fn a_first_version_store_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE nonces (nonce TEXT PRIMARY KEY, approval_id TEXT NOT NULL, expires_at INTEGER NOT NULL, used_at TEXT NOT NULL); INSERT INTO nonces VALUES ('old', 'a', 1, 't');")
        .unwrap();
    let log = AuditLog::open_or_create(&path).unwrap();
    assert!(
        matches!(
            log.spend_approval(&nonce("old", 1), &intent()),
            Err(AuditError::NonceReplayed)
        ),
        "old nonces still count"
    );
    log.spend_approval(&nonce("new", 1), &intent()).unwrap();
}

#[test]
fn verify_of_a_missing_log_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        AuditLog::open_existing(&dir.path().join("nope.db")),
        Err(AuditError::Missing(_))
    ));
    assert!(!dir.path().join("nope.db").exists());
    let other = dir.path().join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x INTEGER)")
        .unwrap();
    assert!(
        matches!(AuditLog::open_existing(&other), Err(AuditError::Missing(m)) if m.contains("not a drydock audit log"))
    );
}

fn spend(log: &AuditLog, nonce: &str) -> Result<i64, AuditError> {
    let intent = AuditEntry {
        action: "restart".into(),
        decision: Decision::Intent,
        approval_id: format!("appr-{nonce}"),
        tier: 1,
        ..Default::default()
    };
    log.spend_approval(
        &NonceRecord {
            nonce,
            approval_id: &intent.approval_id,
            expires_at: i64::MAX,
            request_id: "req",
            action: "restart",
            container_id: "c1",
            caller: "drydock-agent",
            key_id: "k",
        },
        &intent,
    )
}

fn outcome(log: &AuditLog, nonce: &str) {
    log.append(&AuditEntry {
        action: "restart".into(),
        decision: crate::audit::Decision::Allowed,
        approval_id: format!("appr-{nonce}"),
        tier: 1,
        ..Default::default()
    })
    .unwrap();
}

#[test]
fn rotation_moves_rows_into_segments_and_the_chain_continues_across_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::create(&path).unwrap().with_rotation(1 << 20, 10);
    for i in 0..5 {
        log.append(&entry(&format!("call-{i}"))).unwrap();
    }
    spend(&log, "n-1").unwrap();
    outcome(&log, "n-1");
    let segment = log.rotate().unwrap().expect("rotated");
    assert_eq!((segment.first, segment.last), (1, 8));
    assert!(segment.path.is_file());
    let live = log.live_rows().unwrap();
    assert_eq!(live.len(), 1, "only the rotated row is live: {live:#?}");
    assert_eq!(live[0].entry.decision, Decision::Rotated);
    assert_eq!(live[0].seq, 9);
    log.append(&entry("after")).unwrap();
    let rows = log.rows().unwrap();
    assert_eq!(rows.len(), 10);
    assert_eq!(log.verify().unwrap(), Ok(10));
    assert_eq!(
        log.tail(3)
            .unwrap()
            .iter()
            .map(|r| r.seq)
            .collect::<Vec<_>>(),
        [8, 9, 10]
    );
    // The used nonce stayed in the live store: a replay is still refused.
    assert!(matches!(spend(&log, "n-1"), Err(AuditError::NonceReplayed)));

    // An edited row in a segment is caught like one in the live store.
    let raw = Connection::open(&segment.path).unwrap();
    raw.execute("UPDATE audit SET reason='edited' WHERE seq=3", [])
        .unwrap();
    let err = log.verify().unwrap().unwrap_err();
    assert!(err.contains("row 3 was modified"), "{err}");
}

#[test]
fn a_write_in_flight_postpones_rotation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::create(&path).unwrap().with_rotation(1 << 20, 10);
    spend(&log, "n-1").unwrap();
    assert!(log.rotate().unwrap().is_none(), "intent without outcome");
    outcome(&log, "n-1");
    assert!(log.rotate().unwrap().is_some());
}

#[test]
fn retention_deletes_the_oldest_segments_and_the_chain_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let key = drydock_proto::approval::generate_signing_key();
    let public = key.verifying_key();
    let log = AuditLog::create(&path)
        .unwrap()
        .with_checkpoints(key, 4)
        .with_rotation(1 << 20, 2);
    let mut exported = None;
    for round in 0..5 {
        for i in 0..6 {
            log.append(&entry(&format!("r{round}-{i}"))).unwrap();
        }
        if round == 0 {
            exported = log.checkpoint().unwrap();
        }
        log.rotate().unwrap().expect("rotated");
    }
    let segments = segments::list(&path).unwrap();
    assert_eq!(segments.len(), 2, "{segments:?}");
    let rows = log.rows().unwrap();
    assert!(rows[0].seq > 1);
    let retention: Vec<_> = rows
        .iter()
        .filter(|r| r.entry.decision == Decision::Retention)
        .collect();
    assert_eq!(retention.len(), 3, "{rows:#?}");
    assert_eq!(log.verify().unwrap(), Ok(rows.len()));
    let report = verify_signed(&rows, &public, None).unwrap();
    assert!(report.checkpoints >= 2, "{report:?}");
    // The exported checkpoint's row is gone by retention: not comparable,
    // and said so (not called tampering, not called intact).
    let (seq, hash) = exported.expect("checkpoint");
    let report = verify_signed(&rows, &public, Some((seq, &hash))).unwrap();
    assert_eq!(report.expect_removed, Some(rows[0].seq));

    // Deleting the oldest kept segment by hand: no retention row covers it.
    let copy = dir.path().join("copy");
    std::fs::create_dir(&copy).unwrap();
    std::fs::copy(
        &segments[1].path,
        copy.join(segments[1].path.file_name().unwrap()),
    )
    .unwrap();
    let mut without_oldest: Vec<AuditRow> = rows
        .iter()
        .filter(|r| r.seq > segments[0].last)
        .cloned()
        .collect();
    let err = verify_rows(&without_oldest).unwrap_err();
    assert!(err.contains("no retention row"), "{err}");
    // Deleting a segment in the middle: a gap.
    without_oldest = rows
        .iter()
        .filter(|r| r.seq <= segments[0].last || r.seq > segments[1].last)
        .cloned()
        .collect();
    let err = verify_rows(&without_oldest).unwrap_err();
    assert!(err.contains("missing"), "{err}");
    std::fs::remove_file(&segments[0].path).unwrap();
    let err = log.verify().unwrap().unwrap_err();
    assert!(err.contains("no retention row"), "{err}");
}

#[test]
fn rotation_happens_by_itself_past_the_cap_and_bounds_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let cap = 64 << 10;
    let keep = 3;
    let log = AuditLog::create(&path).unwrap().with_rotation(cap, keep);
    let big = "x".repeat(400);
    for i in 0..3000 {
        log.append(&AuditEntry {
            action: format!("call-{i}"),
            reason: big.clone(),
            decision: crate::audit::Decision::Denied,
            ..Default::default()
        })
        .unwrap();
    }
    let segments = segments::list(&path).unwrap();
    assert_eq!(segments.len(), keep as usize, "{segments:?}");
    let total: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.metadata().unwrap().len())
        .sum();
    // The live store and each segment pass the cap by at most the rows
    // between two size checks; the write-ahead log is bounded to a quarter
    // of it between checkpoints; SQLite's shared-memory index is 32 KiB.
    assert!(
        total <= (u64::from(keep) + 2) * cap + (32 << 10),
        "audit files take {total} bytes for a cap of {cap} and {keep} segments"
    );
    assert!(log.verify().unwrap().is_ok());
}

#[test]
fn an_interrupted_rotation_is_undone_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let log = AuditLog::create(&path).unwrap().with_rotation(1 << 20, 4);
    for i in 0..3 {
        log.append(&entry(&format!("call-{i}"))).unwrap();
    }
    let segment = log.rotate().unwrap().expect("rotated");
    log.append(&entry("live")).unwrap();
    drop(log);
    // A crash after the copy was renamed into place, before the live rows
    // were deleted: the live store still holds rows 5.. and a segment
    // claims them too. Simulated with a copy of the live store.
    let stale = path.with_file_name(format!("audit.db.seg.{:012}-{:012}", 5, 6));
    {
        let live = Connection::open(&path).unwrap();
        live.execute("VACUUM INTO ?1", [stale.to_str().unwrap()])
            .unwrap();
    }
    let tmp = path.with_file_name("audit.db.seg.000000000007-000000000009.tmp");
    std::fs::write(&tmp, b"half a copy").unwrap();
    let log = AuditLog::open(&path).unwrap();
    assert!(!stale.exists(), "the leftover copy is removed");
    assert!(!tmp.exists(), "the half-written copy is removed");
    assert!(segment.path.exists(), "the complete segment is kept");
    assert_eq!(log.verify().unwrap(), Ok(6));
}

#[test]
fn concurrent_appends_share_commits_and_every_row_is_written_once() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(AuditLog::create(&dir.path().join("audit.db")).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = log.clone();
            std::thread::spawn(move || {
                (0..200)
                    .map(|i| log.append(&entry(&format!("t{t}-{i}"))).unwrap())
                    .collect::<Vec<i64>>()
            })
        })
        .collect();
    let mut seqs: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), 1600, "every append got its own row");
    let rows = log.rows().unwrap();
    assert_eq!(rows.len(), 1601, "the init row and 1,600 appends");
    assert_eq!(log.verify().unwrap(), Ok(1601));
    // Each caller got the seq of its own row.
    for r in rows.iter().skip(1) {
        assert!(r.entry.action.starts_with('t'), "{r:?}");
    }
}

#[test]
fn a_backup_restores_only_where_no_store_is_and_only_when_it_verifies() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live/audit.db");
    let log = AuditLog::create(&live).unwrap();
    log.append(&entry("restart")).unwrap();
    spend(&log, "n-1").unwrap();
    let backup = dir.path().join("backup");
    let report = log.backup(&backup, None).unwrap();
    assert_eq!(report.rows, 3);
    assert!(
        matches!(log.backup(&backup, None), Err(AuditError::Backup(_))),
        "a backup never writes into a folder that holds one"
    );

    // Over the live store: refused, and the live store is untouched.
    let over = restore(&backup, &live, None, false)
        .unwrap_err()
        .to_string();
    assert!(over.contains("never replaces a store"), "{over}");
    assert_eq!(log.verify().unwrap(), Ok(3));

    // A tampered backup, or a folder that is not one: refused.
    let tampered = dir.path().join("tampered");
    std::fs::create_dir(&tampered).unwrap();
    for f in ["audit.db", MANIFEST] {
        std::fs::copy(backup.join(f), tampered.join(f)).unwrap();
    }
    Connection::open(tampered.join("audit.db"))
        .unwrap()
        .execute("UPDATE audit SET reason = 'edited' WHERE seq = 2", [])
        .unwrap();
    let target = dir.path().join("new/audit.db");
    let bad = restore(&tampered, &target, None, false)
        .unwrap_err()
        .to_string();
    assert!(bad.contains("does not verify"), "{bad}");
    assert!(!target.exists(), "nothing half-restored");
    let not_one = restore(dir.path(), &target, None, false)
        .unwrap_err()
        .to_string();
    assert!(not_one.contains("is not a backup folder"), "{not_one}");

    // Where no store is: restored, the nonce still spent, the restore
    // recorded and counted from; nothing to carry over.
    let report = restore(&backup, &target, None, false).unwrap();
    assert_eq!(report.carried, Carried::NoStore);
    let restored = AuditLog::open(&target).unwrap();
    assert!(matches!(
        spend(&restored, "n-1"),
        Err(AuditError::NonceReplayed)
    ));
    assert!(restored.nonce_used("n-1").unwrap());
    let rows = restored.rows().unwrap();
    assert_eq!(
        rows.last().map(|r| r.entry.decision),
        Some(Decision::Restored)
    );
    assert_eq!(restored.verify().unwrap(), Ok(rows.len()));
    let since = restored.counts_since().unwrap();
    assert_eq!(
        since,
        restored.restored_at().unwrap().map(CountsSince::Restored)
    );
    // A nonce spent after the backup, in the store the next restore
    // replaces.
    spend(&restored, "n-2").unwrap();
    drop(restored);
    // --move-aside: what it replaces is kept, next to the store, and the
    // nonces it had spent (and the backup lacks) are carried over.
    let report = restore(&backup, &target, None, true).unwrap();
    assert_eq!(report.carried, Carried::Nonces(1), "n-1 was in the backup");
    let kept = std::fs::read_dir(dir.path().join("new"))
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("replaced-"))
        .expect("a replaced-<time> folder");
    assert!(kept.path().join("audit.db").is_file());
    let restored = AuditLog::open(&target).unwrap();
    for nonce in ["n-1", "n-2"] {
        assert!(
            matches!(spend(&restored, nonce), Err(AuditError::NonceReplayed)),
            "{nonce} is still spent"
        );
    }
    let last = restored.rows().unwrap().pop().unwrap().entry;
    assert_eq!(last.decision, Decision::Restored);
    assert!(
        last.reason
            .contains("1 approvals spent in the replaced store carried over"),
        "the restore row says what it carried: {}",
        last.reason
    );
    assert_eq!(
        restored.verify().unwrap(),
        Ok(restored.rows().unwrap().len())
    );
    drop(restored);

    // A replaced store that cannot be read does not stop the restore: it
    // is moved aside and the report says its nonces were not carried.
    for f in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{f}", target.display()));
    }
    std::fs::write(&target, b"not a database at all, just bytes").unwrap();
    let report = restore(&backup, &target, None, true).unwrap();
    assert!(
        matches!(report.carried, Carried::Unreadable(_)),
        "{:?}",
        report.carried
    );
    assert!(AuditLog::open(&target).unwrap().nonce_used("n-1").unwrap());
}

#[test]
fn a_rows_hash_covers_the_same_bytes_as_ever() {
    let e = AuditEntry {
        request_id: "req-1".into(),
        caller: "drydock-agent".into(),
        action: "inspect".into(),
        target: "shop-web-1".into(),
        container_id: "c".repeat(64),
        tier: 2,
        approval_id: String::new(),
        key_id: "k\"ey\\".into(),
        decision: crate::audit::Decision::Allowed,
        code: crate::audit::Code::of(tonic::Code::Ok),
        reason: "ünïcode \u{1b}[31m\n\t".into(),
        duration_ms: u64::MAX,
        input: "container=web".into(),
        result: "state=running".into(),
    };
    // The encoding the chain was started with, kept here as the reference.
    let material = serde_json::json!([
        -7,
        "2026-12-03T00:00:00.000Z",
        e.request_id,
        e.caller,
        e.action,
        e.target,
        e.container_id,
        e.tier,
        e.approval_id,
        e.key_id,
        e.decision,
        e.code,
        e.reason,
        e.duration_ms,
        e.input,
        e.result,
        "prev"
    ]);
    let expected = hex::encode(Sha256::digest(material.to_string().as_bytes()));
    assert_eq!(
        row_hash(-7, "2026-12-03T00:00:00.000Z", &e, "prev"),
        expected
    );
}

#[test]
fn hex_string_writes_what_hex_encode_writes() {
    for bytes in [
        &[][..],
        &[0u8][..],
        &[0xab, 0x01, 0xff, 0x10][..],
        &[0x5a; 32][..],
    ] {
        assert_eq!(super::hex_string(bytes), hex::encode(bytes));
    }
}
