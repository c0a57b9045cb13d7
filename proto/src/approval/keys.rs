//! The kinds of approver key executor.yaml registers, and an approval's
//! signature checked by any of them.

use ed25519_dalek::VerifyingKey;

use super::{
    check_signature, format_public_key, parse_public_key, ssh, ApprovalClaims, ApprovalFormatError,
    MAX_CLAIMS_BYTES, PUBLIC_PREFIX, SIGNING_CONTEXT,
};

/// An approver's public key as executor.yaml registers it: a key of
/// drydock's own (`ed25519:<base64>`, its secret in a file), or an OpenSSH
/// public key whose secret an ssh-agent (or a security key) holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApproverKey {
    File(VerifyingKey),
    Ssh(ssh::SshPublicKey),
}

impl ApproverKey {
    pub fn parse(text: &str) -> Result<ApproverKey, ApprovalFormatError> {
        let text = text.trim();
        if text.starts_with(PUBLIC_PREFIX) {
            return parse_public_key(text).map(ApproverKey::File);
        }
        ssh::SshPublicKey::parse(text)
            .map(ApproverKey::Ssh)
            .map_err(|e| ApprovalFormatError::SshKey(e.0))
    }

    /// The form executor.yaml and the policy carry.
    pub fn to_text(&self) -> String {
        match self {
            ApproverKey::File(k) => format_public_key(k),
            ApproverKey::Ssh(k) => k.to_line(),
        }
    }

    /// `file`, or the ssh key's kind (`ssh-ed25519`, `sk-ssh-ed25519@…`).
    pub fn kind(&self) -> &'static str {
        match self {
            ApproverKey::File(_) => "file",
            ApproverKey::Ssh(k) => k.kind.name(),
        }
    }

    /// The raw public key whatever its form: one Ed25519 key registered as
    /// a file key and as an ssh key is one key.
    pub fn raw(&self) -> &[u8] {
        match self {
            ApproverKey::File(k) => k.as_bytes(),
            ApproverKey::Ssh(k) => k.point(),
        }
    }

    /// The Ed25519 key of a file key: what grants are signed with.
    pub fn file_key(&self) -> Option<&VerifyingKey> {
        match self {
            ApproverKey::File(k) => Some(k),
            ApproverKey::Ssh(_) => None,
        }
    }
}

/// Verify an approval's signature by `key` over exactly `claims_bytes`
/// (an Ed25519 signature for a file key, an SSHSIG blob for an ssh key),
/// then decode those bytes.
pub fn verify_by(
    claims_bytes: &[u8],
    signature: &[u8],
    key: &ApproverKey,
) -> Result<ApprovalClaims, ApprovalFormatError> {
    check_by(claims_bytes, signature, key)?;
    ApprovalClaims::decode(claims_bytes)
}

/// `verify_by` without the decoding: a further approver's signature over
/// claims already verified and decoded.
pub fn check_by(
    claims_bytes: &[u8],
    signature: &[u8],
    key: &ApproverKey,
) -> Result<(), ApprovalFormatError> {
    match key {
        ApproverKey::File(k) => check_signature(
            SIGNING_CONTEXT,
            claims_bytes,
            MAX_CLAIMS_BYTES,
            signature,
            k,
        ),
        ApproverKey::Ssh(k) => {
            if claims_bytes.len() > MAX_CLAIMS_BYTES {
                return Err(ApprovalFormatError::TooLarge(claims_bytes.len()));
            }
            ssh::verify(signature, claims_bytes, k)
                .map_err(|e| ApprovalFormatError::SshSignature(e.0))
        }
    }
}
