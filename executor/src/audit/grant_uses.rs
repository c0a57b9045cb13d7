//! Uses of automation grants, counted in the executor's own store (the
//! agent's word is never taken for how often a grant was used). Like the
//! nonces, the table stays in the live store across rotations.

use rusqlite::params;

use super::{append_in, AuditEntry, AuditError, AuditLog};

/// One use about to be spent, and the caps it must fit.
#[derive(Debug, Clone, Copy)]
pub struct GrantUse<'a> {
    pub grant_id: &'a str,
    pub container_id: &'a str,
    pub now: i64,
    pub window_secs: u64,
    pub max_per_container: u32,
    pub max_total: u32,
}

/// Why a use did not fit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapExceeded {
    PerContainer { used: u32 },
    Total,
}

pub(super) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS grant_uses (
    grant_id TEXT NOT NULL,
    container_id TEXT NOT NULL,
    used_at INTEGER NOT NULL,
    use_number INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS grant_uses_by_grant ON grant_uses (grant_id, container_id, used_at);";

impl AuditLog {
    /// Count the grant's uses, refuse over either cap, else record the use
    /// and append the write's intent row (its `approval_id` is
    /// `<grant>/use-<n>`, unique per use), in one transaction before Docker
    /// is called: two concurrent uses cannot both pass the last slot.
    /// Returns the intent row's seq and the use number.
    pub fn spend_grant(
        &self,
        u: &GrantUse<'_>,
        intent: &AuditEntry,
    ) -> Result<Result<(i64, u32), CapExceeded>, AuditError> {
        let mut conn = self.lock();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let since = u
            .now
            .saturating_sub(u.window_secs.min(i64::MAX as u64) as i64);
        let used: u32 = tx.query_row(
            "SELECT count(*) FROM grant_uses WHERE grant_id = ?1 AND container_id = ?2 AND used_at > ?3",
            params![u.grant_id, u.container_id, since],
            |r| r.get(0),
        )?;
        if used >= u.max_per_container {
            return Ok(Err(CapExceeded::PerContainer { used }));
        }
        let total: u32 = tx.query_row(
            "SELECT count(*) FROM grant_uses WHERE grant_id = ?1",
            [u.grant_id],
            |r| r.get(0),
        )?;
        if total >= u.max_total {
            return Ok(Err(CapExceeded::Total));
        }
        let number = total + 1;
        tx.execute(
            "INSERT INTO grant_uses (grant_id, container_id, used_at, use_number) VALUES (?1, ?2, ?3, ?4)",
            params![u.grant_id, u.container_id, u.now, number],
        )?;
        let mut intent = intent.clone();
        intent.approval_id = use_id(u.grant_id, number);
        let seq = append_in(&tx, &intent)?;
        tx.commit()?;
        drop(conn);
        self.count_for_checkpoint();
        self.maybe_rotate(1);
        Ok(Ok((seq, number)))
    }
}

/// The id of one use of a grant, as the audit rows name it.
pub fn use_id(grant_id: &str, number: u32) -> String {
    format!("{grant_id}/use-{number}")
}
