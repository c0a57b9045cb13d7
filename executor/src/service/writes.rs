//! T1/T2 writes: policy, then the signed approval bound to this action and
//! this container id, then the approval spent (its nonce recorded and an
//! intent row appended to the chain) before Docker is called. A write is
//! attempted once and, once authorised, runs to completion and is audited
//! whatever the caller does: a caller that disconnects mid-write cannot
//! leave a write that happened without its row.

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
    pub(super) async fn authorize_write(
        &self,
        call: &mut Call,
        req: pb::WriteRequest,
        action: WriteAction,
    ) -> Result<AuthorizedWrite, ExecError> {
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
        let mut intent = call.entry.clone();
        intent.decision = crate::audit::INTENT.into();
        intent.code = String::new();
        intent.reason = format!(
            "approval {} spent (nonce {}); calling Docker",
            truncate_for_audit(&approved.claims.approval_id),
            truncate_for_audit(&approved.claims.nonce)
        );
        // Synchronous on purpose (the one audit write left on an async
        // worker, and only for authorised writes): with an await between
        // spending the approval and spawning the write, a caller that
        // disconnected right then would leave an approval spent and a write
        // never sent. Without one, cancellation cannot fall in between.
        self.audit
            .spend_approval(&record, &intent)
            .map_err(|e| match e {
                AuditError::NonceReplayed => ExecError::Approval(ApprovalError::Replayed),
                other => ExecError::Audit(other),
            })?;
        Ok(AuthorizedWrite {
            permit,
            action,
            response: pb::WriteResponse {
                container_id: target.id,
                action: action.as_str().into(),
                approval_id: approved.claims.approval_id,
            },
        })
    }

    /// Call Docker for an authorised write and audit the outcome, in a task
    /// of its own: if the caller goes away (its connection drops and tonic
    /// drops this handler), the task still finishes and writes its row.
    pub(super) async fn run_write(
        &self,
        mut call: Call,
        write: AuthorizedWrite,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let docker = self.docker.clone();
        let audit = self.audit.clone();
        let task = tokio::spawn(async move {
            let AuthorizedWrite {
                permit,
                action,
                response,
            } = write;
            let done = match action {
                WriteAction::Restart => docker.restart(&permit).await,
                WriteAction::Start => docker.start(&permit).await,
                WriteAction::Stop => docker.stop(&permit).await,
            };
            let result = done.map_err(ExecError::from).map(|()| {
                call.entry.result = format!("{action} done");
                response
            });
            finish_call(audit, call, result).await
        });
        task.await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "write task failed");
            Err(Status::internal(
                "the write task failed; its intent row is in the audit log",
            ))
        })
    }
}

/// A write that policy and a verified approval allow, whose approval is
/// spent: all that is left is to call Docker.
pub(super) struct AuthorizedWrite {
    permit: Permit,
    action: WriteAction,
    response: pb::WriteResponse,
}
