//! Approval verification: is this write exactly what a configured human
//! signed? The checks run in order from cheapest to the one with a side
//! effect; consuming the nonce happens last, in the service, only once every
//! other check has passed.

use std::collections::HashMap;
use std::time::Duration;

use drydock_proto::approval::{
    self, ApprovalClaims, ApprovalFormatError, ApproverKey, ContainerWrite, ServiceAction,
    ServiceWrite, WriteAction, CLOCK_SKEW_SECS,
};

use crate::config::ApproverConfig;
use crate::policy::{ResolvedService, ResolvedTarget};

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApprovalError {
    #[error("approval missing: {action} needs an approval signed by a configured approver")]
    Missing { action: &'static str },
    #[error("approval signed with unknown key id `{key_id}`")]
    UnknownKey { key_id: String },
    #[error("approval signed twice by `{key_id}` (or by one key under two ids): each signature must be another approver's")]
    SameApprover { key_id: String },
    #[error("{action} needs {required} approvers (approvals.required), and only {signed} signed: ask another approver to sign the same approval")]
    Quorum {
        action: &'static str,
        required: u32,
        signed: String,
    },
    #[error("approval rejected: {0}")]
    Format(#[from] ApprovalFormatError),
    #[error("approval names container `{signed}`, but the target is `{actual}`")]
    WrongContainerName { signed: String, actual: String },
    #[error("approval was made for host `{signed}`, but this executor is {actual}")]
    WrongHost { signed: String, actual: String },
    #[error(
        "approval names no host, and this executor (host `{actual}`) requires one (host.require)"
    )]
    HostMissing { actual: String },
    #[error("approval is for action {signed}, not {called}")]
    WrongAction {
        signed: &'static str,
        called: &'static str,
    },
    #[error("approval is for container {signed}, but the target is now {actual}")]
    WrongContainer { signed: String, actual: String },
    #[error("approval is for request {signed}, not {called}")]
    WrongRequest { signed: String, called: String },
    #[error("approval expired at {expires_at} (now {now})")]
    Expired { expires_at: i64, now: i64 },
    #[error("approval is not valid before {issued_at} (now {now})")]
    NotYetValid { issued_at: i64, now: i64 },
    #[error("approval lifetime of {lifetime}s exceeds the executor's maximum of {max}s")]
    LifetimeTooLong { lifetime: i64, max: i64 },
    #[error("approval window is empty or inverted: expires_at {expires_at} is not after issued_at {issued_at}")]
    EmptyWindow { issued_at: i64, expires_at: i64 },
    #[error("approval lifetime from issued_at {issued_at} to expires_at {expires_at} exceeds the executor's maximum of {max}s")]
    LifetimeOverflow {
        issued_at: i64,
        expires_at: i64,
        max: i64,
    },
    #[error("approval was issued at {issued_at}, longer ago than the executor's maximum lifetime of {max}s (now {now})")]
    IssuedTooLongAgo { issued_at: i64, now: i64, max: i64 },
    #[error("approval was already used (nonce replayed)")]
    Replayed,
    #[error("approval was issued at {issued_at}, not after the audit store was restored from a backup (at {restored_at}, plus {skew}s for the signer's clock); a use spent after the backup was taken may be missing from the restored store, so such approvals are refused: ask again for one issued after {cutoff}", skew = CLOCK_SKEW_SECS, cutoff = restored_at.saturating_add(CLOCK_SKEW_SECS))]
    BeforeRestore { issued_at: i64, restored_at: i64 },
    #[error("approval is for image {signed}, not {requested}")]
    WrongImage { signed: String, requested: String },
    #[error("approval was made while the container ran image {signed}; it runs {actual} now")]
    ImageMoved { signed: String, actual: String },
    #[error("approval is for service {signed}, but the target is {actual}")]
    WrongService { signed: String, actual: String },
    #[error("approval names service `{signed}`, but the target is `{actual}`")]
    WrongServiceName { signed: String, actual: String },
    #[error("approval was made at spec version {signed} of the service; it is at version {actual} now (a person or a stack deploy updated it, or the engine finished or rolled back an update since): ask again")]
    SpecChanged { signed: u64, actual: u64 },
    #[error("approval was made while the service's spec ran image {signed}; it runs {actual} now")]
    ServiceImageMoved { signed: String, actual: String },
    #[error("approval returns the service to image {signed}, but its previous spec runs {actual}")]
    WrongPreviousImage { signed: String, actual: String },
    #[error("approval is for an update to {signed}, but {requested} was asked for")]
    WrongDigest { signed: String, requested: String },
    #[error("approval is for an update to tag {signed}, but {requested} was asked for")]
    WrongTag { signed: String, requested: String },
    #[error("approval updates the tag {signed}, but the container runs {actual}")]
    WrongReference { signed: String, actual: String },
    #[error("approval is for a build of commit {signed}, but {requested} was asked for")]
    WrongCommit { signed: String, requested: String },
    #[error("approval was made for the build's {field} {signed}; it is {actual} now: ask again")]
    SourceMoved {
        field: &'static str,
        signed: String,
        actual: String,
    },
    #[error("{reference} names {now} in its registry now, not the approved {approved}: an update runs only what the tag names when it runs; ask again")]
    TagMoved {
        reference: String,
        approved: String,
        now: String,
    },
}

/// Caller-supplied text in an error: bounded and printable.
fn shown(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// An approval whose signature, binding and validity window all check out;
/// its nonce has not been consumed yet.
#[derive(Debug, Clone)]
pub struct VerifiedApproval {
    pub claims: ApprovalClaims,
    pub key_id: String,
}

pub struct ApprovalInput<'a> {
    pub claims: &'a [u8],
    pub signature: &'a [u8],
    pub key_id: &'a str,
    /// More approvers' `(key id, signature)` over the same claims bytes.
    pub cosigners: Vec<(&'a str, &'a [u8])>,
}

impl<'a> ApprovalInput<'a> {
    pub fn of(a: &'a drydock_proto::pb::Approval) -> ApprovalInput<'a> {
        ApprovalInput {
            claims: &a.claims,
            signature: &a.signature,
            key_id: &a.key_id,
            cosigners: a
                .cosignatures
                .iter()
                .map(|c| (c.key_id.as_str(), c.signature.as_slice()))
                .collect(),
        }
    }

    /// Every signer it names, first to last, as the audit row lists them.
    pub fn signers(&self) -> String {
        std::iter::once(self.key_id)
            .chain(self.cosigners.iter().map(|(id, _)| *id))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// How many distinct approvers each write needs (`approvals.required`):
/// an action's own entry, else its tier's (`t1`, `t2`), else one.
#[derive(Debug, Clone, Default)]
pub struct Quorum(std::collections::BTreeMap<WriteAction, u32>);

impl Quorum {
    pub fn new(required: &std::collections::BTreeMap<String, u32>) -> Quorum {
        Quorum(
            WriteAction::ALL
                .into_iter()
                .map(|a| {
                    let tier = format!("t{}", crate::policy::Policy::tier(a) as u32);
                    let n = required
                        .get(a.as_str())
                        .or_else(|| required.get(&tier))
                        .copied()
                        .unwrap_or(1);
                    (a, n.max(1))
                })
                .collect(),
        )
    }

    pub fn required(&self, action: WriteAction) -> u32 {
        self.0.get(&action).copied().unwrap_or(1)
    }
}

/// The host approvals and grants must name: this executor's `host`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostBinding {
    pub name: Option<String>,
    pub require: bool,
}

/// Why claims do not fit this executor's host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostMismatch {
    Wrong { signed: String, actual: String },
    Missing { actual: String },
}

impl HostBinding {
    /// Claims for another host are refused; claims for none only when the
    /// executor requires one. An executor with no name refuses claims that
    /// name a host: they were made for some other executor.
    pub fn check(&self, signed: Option<&str>) -> Result<(), HostMismatch> {
        match (signed, &self.name) {
            (Some(s), Some(me)) if s == me => Ok(()),
            (Some(s), me) => Err(HostMismatch::Wrong {
                signed: shown(s, 64),
                actual: me.as_ref().map_or_else(
                    || "not named (no `host` in its config)".to_string(),
                    |m| format!("`{m}`"),
                ),
            }),
            (None, Some(me)) if self.require => Err(HostMismatch::Missing { actual: me.clone() }),
            (None, _) => Ok(()),
        }
    }
}

pub struct ApprovalVerifier {
    keys: HashMap<String, ApproverKey>,
    max_lifetime: Duration,
    host: HostBinding,
    quorum: Quorum,
}

impl ApprovalVerifier {
    /// Keys were validated with the config; an unparsable one is skipped
    /// (and so can never verify anything).
    pub fn new(approvers: &[ApproverConfig], max_lifetime: Duration) -> ApprovalVerifier {
        let keys = approver_keys(approvers);
        ApprovalVerifier {
            keys,
            max_lifetime,
            host: HostBinding::default(),
            quorum: Quorum::default(),
        }
    }

    /// How many approvers each action needs.
    pub fn with_quorum(mut self, quorum: Quorum) -> ApprovalVerifier {
        self.quorum = quorum;
        self
    }

    pub fn quorum(&self) -> &Quorum {
        &self.quorum
    }

    pub fn host(&self) -> &HostBinding {
        &self.host
    }

    /// The host approvals must name (`host` in the config).
    pub fn with_host(mut self, host: HostBinding) -> ApprovalVerifier {
        self.host = host;
        self
    }

    pub fn approver_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.keys.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// `(id, public key)` of every trusted approver (`ed25519:<base64>`
    /// or an OpenSSH line), sorted by id.
    pub fn approver_keys(&self) -> Vec<(String, String)> {
        let mut keys: Vec<(String, String)> = self
            .keys
            .iter()
            .map(|(id, k)| (id.clone(), k.to_text()))
            .collect();
        keys.sort();
        keys
    }

    /// Whether the approval is a configured human's signature over exactly
    /// this write: the action, the container (id and name), the request,
    /// the validity window, and for a rollback both images: the one it
    /// runs, and the one the container runs now.
    pub fn verify(
        &self,
        input: Option<ApprovalInput<'_>>,
        write: &ContainerWrite,
        target: &ResolvedTarget,
        request_id: &str,
        now: i64,
    ) -> Result<VerifiedApproval, ApprovalError> {
        let (claims, input) = self.open(input, write.action().into())?;
        if claims.container_id != target.id {
            return Err(ApprovalError::WrongContainer {
                signed: claims.container_id,
                actual: target.id.clone(),
            });
        }
        // The human was shown the name; it must be the target's name too, so
        // an agent cannot pair a harmless name with another container's id.
        if claims.container_name.trim_start_matches('/') != target.name.trim_start_matches('/') {
            return Err(ApprovalError::WrongContainerName {
                signed: claims.container_name.chars().take(128).collect(),
                actual: target.name.clone(),
            });
        }
        // A rollback's claims name both images (decoding refuses claims of
        // any other action that name one).
        if let Some(requested) = write.to_image() {
            let signed = claims.image_id.clone().unwrap_or_default();
            if signed != requested.as_str() {
                return Err(ApprovalError::WrongImage {
                    signed,
                    requested: requested.to_string(),
                });
            }
            let from = claims.from_image_id.clone().unwrap_or_default();
            if from != target.image_id {
                return Err(ApprovalError::ImageMoved {
                    signed: from,
                    actual: target.image_id.clone(),
                });
            }
        }
        // An update's claims name the tag, the digest and the image the
        // container runs (decoding refuses an update without them).
        if let Some(requested) = write.digest() {
            let update = claims
                .update
                .clone()
                .unwrap_or(drydock_proto::approval::UpdateClaims {
                    reference: String::new(),
                    digest: String::new(),
                    from_version: None,
                    to_version: None,
                    to_tag: None,
                });
            if update.digest != requested.as_str() {
                return Err(ApprovalError::WrongDigest {
                    signed: shown(&update.digest, 80),
                    requested: requested.to_string(),
                });
            }
            if update.to_tag.as_deref() != write.to_tag() {
                return Err(ApprovalError::WrongTag {
                    signed: shown(update.to_tag.as_deref().unwrap_or("(the tag it runs)"), 128),
                    requested: shown(write.to_tag().unwrap_or("(the tag it runs)"), 128),
                });
            }
            if update.reference != target.image_ref {
                return Err(ApprovalError::WrongReference {
                    signed: shown(&update.reference, 256),
                    actual: shown(&target.image_ref, 256),
                });
            }
            let from = claims.from_image_id.clone().unwrap_or_default();
            if from != target.image_id {
                return Err(ApprovalError::ImageMoved {
                    signed: from,
                    actual: target.image_id.clone(),
                });
            }
        }
        // A build's, or an update to a built image's, claims name the
        // commit (its tree and context are checked once the executor has
        // read the checkout, before the approval is spent).
        if let Some(requested) = write.commit() {
            let signed = claims
                .build
                .as_ref()
                .map(|b| b.commit.to_string())
                .unwrap_or_default();
            if signed != requested.as_str() {
                return Err(ApprovalError::WrongCommit {
                    signed: shown(&signed, 80),
                    requested: requested.to_string(),
                });
            }
            if matches!(write, ContainerWrite::UpdateBuilt { .. }) {
                let from = claims.from_image_id.clone().unwrap_or_default();
                if from != target.image_id {
                    return Err(ApprovalError::ImageMoved {
                        signed: from,
                        actual: target.image_id.clone(),
                    });
                }
            }
        }
        self.close(claims, input, request_id, now)
    }

    /// Whether the approval is a configured human's signature over exactly
    /// this write of a Swarm service: the action, the service (id and
    /// name), its spec version and image as they were shown (and for a
    /// rollback the previous spec's image), the request, the window.
    pub fn verify_service(
        &self,
        input: Option<ApprovalInput<'_>>,
        write: &ServiceWrite,
        service: &ResolvedService,
        request_id: &str,
        now: i64,
    ) -> Result<VerifiedApproval, ApprovalError> {
        let action = write.action();
        let (claims, input) = self.open(input, action.into())?;
        // Decoding refuses a service action's claims without a service.
        let Some(signed) = claims.service.clone() else {
            return Err(ApprovalError::WrongService {
                signed: String::new(),
                actual: service.id.clone(),
            });
        };
        if signed.id != service.id {
            return Err(ApprovalError::WrongService {
                signed: signed.id,
                actual: service.id.clone(),
            });
        }
        if signed.name != service.name {
            return Err(ApprovalError::WrongServiceName {
                signed: shown(&signed.name, 128),
                actual: service.name.clone(),
            });
        }
        if signed.version != service.version {
            return Err(ApprovalError::SpecChanged {
                signed: signed.version,
                actual: service.version,
            });
        }
        if signed.image != service.image {
            return Err(ApprovalError::ServiceImageMoved {
                signed: shown(&signed.image, 200),
                actual: service.image.clone(),
            });
        }
        if action == ServiceAction::Rollback {
            let to = signed.to_image.clone().unwrap_or_default();
            let previous = service.previous_image.clone().unwrap_or_default();
            if to != previous || previous.is_empty() {
                return Err(ApprovalError::WrongPreviousImage {
                    signed: shown(&to, 200),
                    actual: if previous.is_empty() {
                        "nothing (the service has no previous spec)".into()
                    } else {
                        previous
                    },
                });
            }
        }
        // An update's claims name the tag its spec follows (the spec's
        // image without its digest pin) and the digest it moves to
        // (decoding refuses a service_update without them).
        if let Some(requested) = write.digest() {
            let (reference, digest) = claims
                .update
                .as_ref()
                .map(|u| (u.reference.as_str(), u.digest.as_str()))
                .unwrap_or_default();
            if digest != requested.as_str() {
                return Err(ApprovalError::WrongDigest {
                    signed: shown(digest, 80),
                    requested: requested.to_string(),
                });
            }
            let followed = approval::followed_tag(&service.image);
            if reference != followed {
                return Err(ApprovalError::WrongReference {
                    signed: shown(reference, 256),
                    actual: shown(followed, 256),
                });
            }
        }
        self.close(claims, input, request_id, now)
    }

    /// The checks every approval starts with, cheapest first: a key this
    /// executor trusts, the signature over the exact received bytes (only
    /// then are the claims decoded and trusted), the action.
    fn open<'a>(
        &self,
        input: Option<ApprovalInput<'a>>,
        action: WriteAction,
    ) -> Result<(ApprovalClaims, ApprovalInput<'a>), ApprovalError> {
        let input = input.ok_or(ApprovalError::Missing {
            action: action.as_str(),
        })?;
        let key = self
            .keys
            .get(input.key_id)
            .ok_or_else(|| ApprovalError::UnknownKey {
                key_id: shown(input.key_id, 64),
            })?;
        let claims = approval::verify_by(input.claims, input.signature, key)?;
        if claims.action != action {
            return Err(ApprovalError::WrongAction {
                signed: claims.action.as_str(),
                called: action.as_str(),
            });
        }
        // Every further signature over the very same bytes, each by
        // another approver (and another key: one key under two ids is one
        // person).
        let mut signers = vec![(input.key_id, key)];
        for (key_id, signature) in &input.cosigners {
            let cokey = self
                .keys
                .get(*key_id)
                .ok_or_else(|| ApprovalError::UnknownKey {
                    key_id: shown(key_id, 64),
                })?;
            if signers
                .iter()
                .any(|(id, k)| id == key_id || k.raw() == cokey.raw())
            {
                return Err(ApprovalError::SameApprover {
                    key_id: shown(key_id, 64),
                });
            }
            approval::check_by(input.claims, signature, cokey)?;
            signers.push((key_id, cokey));
        }
        let required = self.quorum.required(action);
        if (signers.len() as u32) < required {
            return Err(ApprovalError::Quorum {
                action: action.as_str(),
                required,
                signed: signers
                    .iter()
                    .map(|(id, _)| shown(id, 64))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok((claims, input))
    }

    /// The checks every approval ends with: the host, the request, the
    /// window.
    fn close(
        &self,
        claims: ApprovalClaims,
        input: ApprovalInput<'_>,
        request_id: &str,
        now: i64,
    ) -> Result<VerifiedApproval, ApprovalError> {
        self.host
            .check(claims.host.as_deref())
            .map_err(|m| match m {
                HostMismatch::Wrong { signed, actual } => {
                    ApprovalError::WrongHost { signed, actual }
                }
                HostMismatch::Missing { actual } => ApprovalError::HostMissing { actual },
            })?;
        if claims.request_id != request_id {
            return Err(ApprovalError::WrongRequest {
                signed: claims.request_id,
                called: request_id.to_string(),
            });
        }
        check_window(claims.issued_at, claims.expires_at, now, self.max_lifetime)?;
        Ok(VerifiedApproval {
            claims,
            key_id: input.signers(),
        })
    }
}

/// The approvers' public keys by id, for approvals and grants alike. A
/// key that does not parse was refused when the config was read
/// (`config.rs`), so none is skipped here in practice.
pub fn approver_keys(approvers: &[ApproverConfig]) -> HashMap<String, ApproverKey> {
    approvers
        .iter()
        .filter_map(|a| {
            ApproverKey::parse(&a.public_key)
                .ok()
                .map(|k| (a.id.clone(), k))
        })
        .collect()
}

/// Whether claims issued at `issued_at` cannot have been used before a
/// restore at `restored_at`. A claim is usable once `now + skew` reaches its
/// `issued_at` (`check_window`), and every use before the restore happened
/// at `now <= restored_at`; so a claim dated up to `restored_at + skew` may
/// have been spent in the store the restore replaced, and only later ones
/// are certainly new. Used for approvals and grants alike.
pub fn issued_after_restore(issued_at: i64, restored_at: i64) -> bool {
    issued_at > restored_at.saturating_add(CLOCK_SKEW_SECS)
}

/// The validity window, in checked arithmetic: the claims' times are chosen
/// by whoever signed (or forged the request around) them, so no subtraction
/// may wrap. An approval is valid when `issued_at < expires_at`, the
/// lifetime is at most `max_lifetime`, now is before `expires_at`, and
/// `issued_at` is neither in the future (beyond the clock skew) nor further
/// in the past than `max_lifetime` plus the skew.
pub fn check_window(
    issued_at: i64,
    expires_at: i64,
    now: i64,
    max_lifetime: std::time::Duration,
) -> Result<(), ApprovalError> {
    let max = i64::try_from(max_lifetime.as_secs()).unwrap_or(i64::MAX);
    if expires_at <= issued_at {
        return Err(ApprovalError::EmptyWindow {
            issued_at,
            expires_at,
        });
    }
    let lifetime = expires_at
        .checked_sub(issued_at)
        .ok_or(ApprovalError::LifetimeOverflow {
            issued_at,
            expires_at,
            max,
        })?;
    if lifetime > max {
        return Err(ApprovalError::LifetimeTooLong { lifetime, max });
    }
    if now >= expires_at {
        return Err(ApprovalError::Expired { expires_at, now });
    }
    if issued_at > now.saturating_add(CLOCK_SKEW_SECS) {
        return Err(ApprovalError::NotYetValid { issued_at, now });
    }
    let oldest = now.saturating_sub(max.saturating_add(CLOCK_SKEW_SECS));
    if issued_at < oldest {
        return Err(ApprovalError::IssuedTooLongAgo {
            issued_at,
            now,
            max,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
