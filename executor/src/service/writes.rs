//! T1/T2 writes: policy, then the signed approval bound to this action and
//! this container id, then the nonce recorded before Docker is called. A
//! write is attempted once.

use super::reads::invisible;
use super::*;

impl ExecutorService {
    /// The write path. Order matters: the target is resolved to its id now
    /// (so a recreated container does not match an old approval); policy
    /// comes before the approval (a disabled action is refused whatever was
    /// signed); the nonce is consumed last, so a refused call does not burn
    /// a valid approval, and consuming it commits a record of who may do what
    /// to which container before Docker is called (a store that cannot be
    /// written stops the write).
    pub(super) async fn write(
        &self,
        call: &mut Call,
        req: pb::WriteRequest,
        action: WriteAction,
    ) -> Result<pb::WriteResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        if let Some(a) = &req.approval {
            call.entry.key_id = truncate_for_audit(&redact::neutralise_controls(&a.key_id));
        }
        let target = self.resolve(call, &req.container).await?;
        let permit = self
            .policy
            .permit_write(action, &target)
            .map_err(|e| match e {
                PolicyError::TargetNotAllowed { .. } | PolicyError::Drydock { .. } => {
                    invisible(&req.container, e)
                }
                other => ExecError::Policy(other),
            })?;
        let input = req.approval.as_ref().map(|a| ApprovalInput {
            claims: &a.claims,
            signature: &a.signature,
            key_id: &a.key_id,
        });
        let approved =
            self.approvals
                .verify(input, action, &target, &req.request_id, unix_now())?;
        call.entry.approval_id = truncate_for_audit(&approved.claims.approval_id);
        call.entry.input = format!(
            "plan_digest={} expires_at={}",
            truncate_for_audit(&approved.claims.plan_digest),
            approved.claims.expires_at
        );
        let record = NonceRecord {
            nonce: &approved.claims.nonce,
            approval_id: &approved.claims.approval_id,
            expires_at: approved.claims.expires_at,
            request_id: &req.request_id,
            action: action.as_str(),
            container_id: &target.id,
            caller: &call.entry.caller,
            key_id: &approved.key_id,
        };
        self.audit.consume_nonce(&record).map_err(|e| match e {
            AuditError::NonceReplayed => ExecError::Approval(ApprovalError::Replayed),
            other => ExecError::Audit(other),
        })?;
        match action {
            WriteAction::Restart => self.docker.restart(&permit).await?,
            WriteAction::Start => self.docker.start(&permit).await?,
            WriteAction::Stop => self.docker.stop(&permit).await?,
        }
        call.entry.result = format!("{action} done");
        Ok(pb::WriteResponse {
            container_id: target.id,
            action: action.as_str().into(),
            approval_id: approved.claims.approval_id,
        })
    }
}
