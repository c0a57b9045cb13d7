//! A plan step's approval as the agent keeps it: the claims to sign, who
//! has signed, and how many the executor asks for.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    Pending,
    Approved,
    Rejected,
    Expired,
    /// Withdrawn unapproved: another request repaired the target first.
    Withdrawn,
}

impl ApprovalStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Expired => "expired",
            ApprovalStatus::Withdrawn => "withdrawn",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ApprovalRecord {
    pub id: String,
    pub request_id: String,
    pub step: usize,
    pub status: ApprovalStatus,
    /// base64 of the encoded claims: exactly the bytes the approver signs.
    pub claims: String,
    pub expires_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// base64 signature, kept (in the agent's store only) until execution;
    /// the API never returns it (see `Request::for_api`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// Set when an automation grant, not a person, authorised this step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// How many distinct approvers the executor asks for (its
    /// `approvals.required`); one when absent.
    #[serde(default, skip_serializing_if = "is_one")]
    pub required: u32,
    /// The signatures of further approvers over the same claims, in the
    /// order they came; approved when, with the first, there are
    /// `required` of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cosignatures: Vec<Cosignature>,
}

fn is_one(n: &u32) -> bool {
    *n <= 1
}

/// Another approver's signature of an approval.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Cosignature {
    pub key_id: String,
    /// base64, kept in the agent's store only, as `ApprovalRecord::signature`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    pub signed_at: String,
}

impl ApprovalRecord {
    /// The approvers who have signed, first to last.
    pub fn signers(&self) -> Vec<&str> {
        self.key_id
            .iter()
            .map(String::as_str)
            .chain(self.cosignatures.iter().map(|c| c.key_id.as_str()))
            .collect()
    }

    /// Drop every signature (single-use; the API never returns one).
    pub fn forget_signatures(&mut self) {
        self.signature = None;
        self.cosignatures
            .iter_mut()
            .for_each(|c| c.signature = None);
    }

    /// Signatures still missing before it is approved.
    pub fn missing(&self) -> u32 {
        self.required
            .max(1)
            .saturating_sub(self.signers().len() as u32)
    }
}
