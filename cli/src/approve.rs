//! A person's decision on an approval: find it pending, sign exactly its
//! claims with the approver key, or reject it. `drydock approve`, the follow
//! loop of `ask` and the console all decide through here.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::ApprovalClaims;
use drydock_vocab::{PendingApproval, Request};

use crate::claims;
use crate::client::AgentClient;
use crate::home::CliConfig;
use crate::text::{safe, unix_now};

/// The pending approval `id` as the agent lists it (`None` when it is not
/// pending): what `drydock approve` and the console decode and sign.
pub async fn pending(agent: &AgentClient, id: &str) -> anyhow::Result<Option<PendingApproval>> {
    Ok(agent
        .approvals()
        .await?
        .into_iter()
        .find(|p| p.approval.id == id))
}

/// Whether approval `approval_id` of `request_id` still waits for a
/// person, and `signer` has not signed it yet.
pub async fn still_pending(
    agent: &AgentClient,
    request_id: &str,
    approval_id: &str,
    signer: &str,
) -> anyhow::Result<bool> {
    Ok(agent
        .request(request_id)
        .await?
        .pending_approvals()
        .any(|a| a.id == approval_id && !a.signers().contains(&signer)))
}

/// How many more approvers must sign approval `id` of `req`, while it
/// waits for them (`approvals.required` on the executor).
pub fn still_missing(req: &Request, id: &str) -> Option<u32> {
    req.approvals
        .iter()
        .find(|a| a.id == id && a.status == drydock_vocab::ApprovalStatus::Pending)
        .map(|a| a.missing())
        .filter(|m| *m > 0)
}

/// What to tell the person who signed an approval that needs more.
pub fn waiting_note(id: &str, missing: u32) -> String {
    format!(
        "signed; {missing} more approver{} must sign it: each runs `drydock approve {}`",
        if missing == 1 { "" } else { "s" },
        safe(id)
    )
}

/// Sign `bytes` (the claims as decoded into `claims`) and hand the signature
/// to the agent, after checking the claims are signable at all.
pub async fn sign(
    agent: &AgentClient,
    cfg: &CliConfig,
    claims: &ApprovalClaims,
    bytes: &[u8],
) -> anyhow::Result<Request> {
    claims::check_signable(claims, unix_now(), cfg.max_signed_lifetime())?;
    let signer = cfg.signer()?;
    let owned = bytes.to_vec();
    // An ssh-agent answers over a socket, after a touch for a security key.
    let signature = tokio::task::spawn_blocking(move || signer.sign(&owned)).await??;
    agent
        .approve(
            &claims.approval_id,
            &cfg.approver.id,
            &B64.encode(signature),
        )
        .await
}
