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

/// An active grant covering `action` on this container for this class, by
/// the policy of the executor that will be asked (its revocations, its
/// host).
pub fn covering<'a>(
    grants: &'a [StoredGrant],
    action: WriteAction,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
    class: &str,
    now: i64,
    executor: &PolicyView,
) -> Option<&'a StoredGrant> {
    let host = Some(executor.host.as_str()).filter(|h| !h.is_empty());
    grants.iter().find(|g| {
        g.status(now, &executor.revoked_grants) == GrantStatus::Active
            // Made for another host: that host's executor alone honours it.
            && g.claims.host.as_deref().is_none_or(|h| Some(h) == host)
            && g.claims.issued_at <= now + 60
            && g.claims.refuses(action, name, labels, class).is_none()
            && (action != WriteAction::Update || executor.update_grants)
            // Its hours, in the executor host's local time.
            && g.claims.outside_hours(executor.local_minute(now)).is_none()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use drydock_proto::grant::{GrantScope, GRANT_KIND};

    fn grant(host: Option<&str>) -> StoredGrant {
        StoredGrant {
            id: "grt-1".into(),
            key_id: "ops".into(),
            created_at: now_rfc3339(),
            revoked_at: None,
            claims: GrantClaims {
                version: if host.is_some() { 2 } else { 1 },
                kind: GRANT_KIND.into(),
                grant_id: "grt-1".into(),
                actions: vec![WriteAction::Restart],
                scope: GrantScope {
                    names: vec!["web".into()],
                    ..Default::default()
                },
                classes: vec![],
                max_per_container: 2,
                window_secs: 3600,
                max_total: 10,
                issued_at: 1000,
                expires_at: 100_000,
                host: host.map(str::to_string),
                hours: None,
            },
            claims_b64: String::new(),
            signature_b64: String::new(),
        }
    }

    #[test]
    fn a_grant_made_for_one_host_covers_no_step_on_another() {
        let labels = Default::default();
        let covers = |g: StoredGrant, host: Option<&str>| {
            let grants = [g];
            let executor = PolicyView {
                host: host.unwrap_or_default().into(),
                ..Default::default()
            };
            covering(
                &grants,
                WriteAction::Restart,
                "web",
                &labels,
                "unhealthy",
                2000,
                &executor,
            )
            .is_some()
        };
        assert!(covers(grant(Some("host-a")), Some("host-a")));
        assert!(!covers(grant(Some("host-a")), Some("host-b")));
        assert!(
            !covers(grant(Some("host-a")), None),
            "an executor without a name is not host-a"
        );
        assert!(
            covers(grant(None), Some("host-b")),
            "a grant without a host: the executor decides"
        );
        assert!(covers(grant(None), None));
    }
}
