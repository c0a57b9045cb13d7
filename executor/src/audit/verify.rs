//! Verification of the chain: hashes and sequence, the start of a chain
//! whose oldest segments retention deleted, and the signed checkpoints.

use super::{checkpoint_message, row_hash, segments, AuditRow, SignedReport, GENESIS_HASH};

/// The chain, then every checkpoint's signature with `key`, then (when the
/// operator kept one) that an exported checkpoint `(seq, hash)` is still in
/// the store: a store cut back to before it, or rewritten since, fails.
pub fn verify_signed(
    rows: &[AuditRow],
    key: &ed25519_dalek::VerifyingKey,
    expect: Option<(i64, &str)>,
) -> Result<SignedReport, String> {
    verify_rows(rows)?;
    let mut report = SignedReport {
        rows: rows.len(),
        checkpoints: 0,
        last_checkpoint: None,
        unattested: rows.len(),
        expect_removed: None,
    };
    let first = rows.first().map_or(1, |r| r.seq);
    for (i, row) in rows.iter().enumerate() {
        if row.entry.decision != super::Decision::Checkpoint {
            continue;
        }
        let at = row.seq;
        let parsed = row
            .entry
            .reason
            .strip_prefix("head seq=")
            .and_then(|r| r.split_once(" hash="))
            .and_then(|(s, h)| Some((s.parse::<i64>().ok()?, h.to_string())));
        let Some((seq, hash)) = parsed else {
            return Err(format!("checkpoint row {at} is malformed"));
        };
        let attested = rows.iter().find(|r| r.seq == seq);
        // A checkpoint never attests a row of an older segment, but if it
        // did and that segment is gone, its signature still counts.
        if seq >= first && attested.map(|r| r.hash.as_str()) != Some(hash.as_str()) {
            return Err(format!(
                "checkpoint row {at} attests row {seq} with a hash the store no longer has: rows up to {seq} were rewritten"
            ));
        }
        let sig: Option<[u8; 64]> = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            &row.entry.result,
        )
        .ok()
        .and_then(|b| b.try_into().ok());
        let ok = sig.is_some_and(|s| {
            key.verify_strict(
                &checkpoint_message(seq, &hash),
                &ed25519_dalek::Signature::from_bytes(&s),
            )
            .is_ok()
        });
        if !ok {
            return Err(format!(
                "checkpoint row {at} is not signed by the audit key: the chain was rewritten from row {seq} or earlier"
            ));
        }
        report.checkpoints += 1;
        report.last_checkpoint = Some((seq, hash));
        report.unattested = rows.len() - (i + 1);
    }
    if let Some((seq, hash)) = expect {
        let found = rows.iter().find(|r| r.seq == seq);
        match found {
            None if seq < first => report.expect_removed = Some(first),
            None => {
                return Err(format!(
                    "row {seq} of the exported checkpoint is gone: the store was truncated (it ends at row {})",
                    rows.last().map_or(0, |r| r.seq)
                ))
            }
            Some(r) if r.hash != hash => {
                return Err(format!(
                    "row {seq} no longer has the exported checkpoint's hash: the store was rewritten"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(report)
}

/// Check the chain. It starts at row 1 from the genesis hash, or, when
/// retention deleted the oldest segments, at a later row whose deletion of
/// everything before it a retention row in the chain records.
pub fn verify_rows(rows: &[AuditRow]) -> Result<usize, String> {
    let first = rows.first().map_or(1, |r| r.seq);
    let mut prev = GENESIS_HASH.to_string();
    if first != 1 {
        let recorded = rows
            .iter()
            .any(|r| segments::removed_through(r) == Some(first - 1));
        if first < 1 || !recorded {
            return Err(format!(
                "rows 1 to {} are missing and no retention row in the chain says they were deleted",
                first - 1
            ));
        }
        prev = rows[0].prev_hash.clone();
    }
    for (i, row) in rows.iter().enumerate() {
        let expected_seq = first + i as i64;
        if row.seq != expected_seq {
            return Err(format!(
                "row {expected_seq} is missing (found seq {} in its place)",
                row.seq
            ));
        }
        if row.prev_hash != prev {
            return Err(format!(
                "row {} does not chain to the row before it",
                row.seq
            ));
        }
        if row_hash(row.seq, &row.ts, &row.entry, &row.prev_hash) != row.hash {
            return Err(format!(
                "row {} was modified (its hash does not match its content)",
                row.seq
            ));
        }
        prev = row.hash.clone();
    }
    Ok(rows.len())
}
