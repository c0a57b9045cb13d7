//! Automation grants as the agent keeps them: the signed bytes and who
//! signed them, as the operator handed them in. Deciding what a grant means
//! is `crate::grants`' job; this is only where they are kept.

use rusqlite::{params, OptionalExtension as _};

use super::{Store, StoreError};

/// One stored grant, its claims and signature still base64 as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantRow {
    pub id: String,
    pub claims_b64: String,
    pub signature_b64: String,
    pub key_id: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

/// Keep a grant; `false` when one with its id is already kept.
pub fn insert(store: &Store, row: &GrantRow) -> Result<bool, StoreError> {
    let inserted = store.lock().execute(
        "INSERT OR IGNORE INTO grants (id, claims, signature, key_id, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![row.id, row.claims_b64, row.signature_b64, row.key_id, row.created_at],
    )?;
    Ok(inserted == 1)
}

/// Every kept grant, newest first.
pub fn all(store: &Store) -> Result<Vec<GrantRow>, StoreError> {
    let conn = store.lock();
    let mut stmt = conn.prepare(
        "SELECT id, claims, signature, key_id, created_at, revoked_at FROM grants ORDER BY created_at DESC",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(GrantRow {
                id: r.get(0)?,
                claims_b64: r.get(1)?,
                signature_b64: r.get(2)?,
                key_id: r.get(3)?,
                created_at: r.get(4)?,
                revoked_at: r.get(5)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Mark a grant revoked at `at` (the first revocation's time stays);
/// `false` if no grant has that id.
pub fn revoke(store: &Store, id: &str, at: &str) -> Result<bool, StoreError> {
    let conn = store.lock();
    let exists: Option<String> = conn
        .query_row("SELECT id FROM grants WHERE id = ?1", [id], |r| r.get(0))
        .optional()?;
    if exists.is_none() {
        return Ok(false);
    }
    conn.execute(
        "UPDATE grants SET revoked_at = COALESCE(revoked_at, ?2) WHERE id = ?1",
        params![id, at],
    )?;
    Ok(true)
}
