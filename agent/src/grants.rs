//! Automation grants as the agent keeps them: the signed bytes an operator
//! made with `drydock grant create`, to present to the executor with a
//! watch request's repair. The agent checks a grant's signature against the
//! executor's approver keys when it is added (to refuse a typo early) and
//! whether one covers a step before using it; the executor checks
//! everything again at every use, trusting none of it.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::WriteAction;
use drydock_proto::grant::GrantClaims;

use crate::model::{now_rfc3339, GrantRecord, GrantStatus, PolicyView};
use crate::store::{self, Store, StoreError};

/// A grant as stored, with its decoded claims for display and matching.
#[derive(Debug, Clone)]
pub struct StoredGrant {
    pub id: String,
    pub key_id: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
    pub claims: GrantClaims,
    /// base64 of the signed bytes and of the signature (not secret: a grant
    /// is useless without the executor's trust in its signer).
    pub claims_b64: String,
    pub signature_b64: String,
}

impl StoredGrant {
    /// `active`, `expired` or `revoked` (by the agent's record; the
    /// executor's revocation list is what counts).
    pub fn status(&self, now: i64, revoked_by_executor: &[String]) -> GrantStatus {
        if self.revoked_at.is_some() || revoked_by_executor.contains(&self.id) {
            GrantStatus::Revoked
        } else if now >= self.claims.expires_at {
            GrantStatus::Expired
        } else {
            GrantStatus::Active
        }
    }

    /// The grant as the API shows it.
    pub fn record(&self) -> GrantRecord {
        GrantRecord {
            id: self.id.clone(),
            key_id: self.key_id.clone(),
            created_at: self.created_at.clone(),
            revoked_at: self.revoked_at.clone(),
            claims: self.claims.clone(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum GrantStoreError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Invalid(String),
}

/// Check a grant's bytes and signature against the executor's approvers,
/// then store it.
pub fn add(
    store: &Store,
    policy: &PolicyView,
    claims_b64: &str,
    signature_b64: &str,
    key_id: &str,
    now: i64,
) -> Result<StoredGrant, GrantStoreError> {
    let invalid = |m: String| GrantStoreError::Invalid(m);
    let claims_bytes = B64
        .decode(claims_b64)
        .map_err(|_| invalid("claims are not base64".into()))?;
    let signature = B64
        .decode(signature_b64)
        .map_err(|_| invalid("signature is not base64".into()))?;
    let approver = policy
        .approvers
        .iter()
        .find(|a| a.id == key_id)
        .ok_or_else(|| {
            invalid(format!(
                "key id `{key_id}` is not an approver the executor trusts"
            ))
        })?;
    let key = drydock_proto::approval::parse_public_key(&approver.public_key)
        .map_err(|e| invalid(format!("approver {key_id}: {e}")))?;
    let claims = drydock_proto::grant::verify(&claims_bytes, &signature, &key)
        .map_err(|e| invalid(e.to_string()))?;
    if now >= claims.expires_at {
        return Err(invalid(format!(
            "grant {} has already expired",
            claims.grant_id
        )));
    }
    let created_at = now_rfc3339();
    let row = store::grants::GrantRow {
        id: claims.grant_id.clone(),
        claims_b64: claims_b64.to_string(),
        signature_b64: signature_b64.to_string(),
        key_id: key_id.to_string(),
        created_at: created_at.clone(),
        revoked_at: None,
    };
    if !store::grants::insert(store, &row)? {
        return Err(invalid(format!(
            "grant {} is already stored",
            claims.grant_id
        )));
    }
    Ok(StoredGrant {
        id: claims.grant_id.clone(),
        key_id: key_id.to_string(),
        created_at,
        revoked_at: None,
        claims,
        claims_b64: claims_b64.to_string(),
        signature_b64: signature_b64.to_string(),
    })
}

/// Every stored grant, newest first. A row whose claims no longer decode
/// (it cannot happen through `add`) is skipped.
pub fn list(store: &Store) -> Result<Vec<StoredGrant>, StoreError> {
    Ok(store::grants::all(store)?
        .into_iter()
        .filter_map(|row| {
            let bytes = B64.decode(&row.claims_b64).ok()?;
            let claims = GrantClaims::decode(&bytes).ok()?;
            Some(StoredGrant {
                id: row.id,
                key_id: row.key_id,
                created_at: row.created_at,
                revoked_at: row.revoked_at,
                claims,
                claims_b64: row.claims_b64,
                signature_b64: row.signature_b64,
            })
        })
        .collect())
}

/// Mark a grant revoked in the agent (it is no longer offered); the
/// executor's own list is what refuses it. Returns false if unknown.
pub fn revoke(store: &Store, id: &str) -> Result<bool, StoreError> {
    store::grants::revoke(store, id, &now_rfc3339())
}

/// An active grant covering `action` on this container for this class.
pub fn covering<'a>(
    grants: &'a [StoredGrant],
    action: WriteAction,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
    class: &str,
    now: i64,
    revoked_by_executor: &[String],
) -> Option<&'a StoredGrant> {
    grants.iter().find(|g| {
        g.status(now, revoked_by_executor) == GrantStatus::Active
            && g.claims.issued_at <= now + 60
            && g.claims.refuses(action, name, labels, class).is_none()
    })
}
