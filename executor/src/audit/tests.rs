use super::*;

fn entry(action: &str) -> AuditEntry {
    AuditEntry {
        action: action.into(),
        decision: "allowed".into(),
        code: "OK".into(),
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
        decision: INTENT.into(),
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
        decision: "allowed".into(),
        ..Default::default()
    })
    .unwrap();
    assert_eq!(log.close_dangling_intents().unwrap(), 0);
    // Not answered (the executor died): closed once, explicitly.
    let other = AuditEntry {
        approval_id: "b".into(),
        ..intent()
    };
    log.spend_approval(&nonce("n2", 100), &other).unwrap();
    assert_eq!(log.close_dangling_intents().unwrap(), 1);
    assert_eq!(log.close_dangling_intents().unwrap(), 0);
    let rows = log.rows().unwrap();
    let last = rows.last().unwrap();
    assert_eq!(last.entry.decision, OUTCOME_UNKNOWN);
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
    assert_eq!(log.rows().unwrap()[0].entry.decision, "init");
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
            decision: "allowed".into(),
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
