//! Execute: send each approved write to the executor exactly once. A
//! dependency started first must be ready before the service that needs it
//! is touched.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::WriteAction;
use serde_json::json;

use super::{Engine, Stop};
use crate::model::*;

impl Engine {
    pub(super) async fn execute(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let Some(plan) = req.plan.clone() else {
            return Ok(false);
        };
        for approval in Self::current_approvals(req) {
            self.check_canceled(id)?;
            let Some(step) = plan.steps.get(approval.step) else {
                continue;
            };
            if req.execution.iter().any(|e| e.approval_id == approval.id) {
                continue;
            }
            let (Some(action), Some(key_id), Some(sig)) = (
                WriteAction::parse(&step.action),
                approval.key_id.clone(),
                approval.signature.clone(),
            ) else {
                self.finish(
                    id,
                    Status::Failed,
                    format!(
                        "approval {} is incomplete; nothing was executed",
                        approval.id
                    ),
                )
                .await?;
                return Ok(false);
            };
            let claims = B64.decode(&approval.claims).unwrap_or_default();
            let signature = B64.decode(&sig).unwrap_or_default();
            let result = self
                .executor
                .write(
                    action,
                    id,
                    &step.target.container_id,
                    claims,
                    signature,
                    &key_id,
                )
                .await;
            let in_doubt = matches!(&result, Err(e) if e.outcome_in_doubt());
            let record = ExecutionRecord {
                step: approval.step,
                action: step.action.clone(),
                container_id: step.target.container_id.clone(),
                approval_id: approval.id.clone(),
                ok: result.is_ok(),
                message: match &result {
                    Ok(()) => format!("{} {}: done", step.action, step.target.container_name),
                    Err(e) if in_doubt => format!(
                        "{} {}: outcome in doubt ({e}); it is not sent again, the container's state decides",
                        step.action, step.target.container_name
                    ),
                    Err(e) => e.to_string(),
                },
                at: now_rfc3339(),
                in_doubt,
            };
            let approval_id = approval.id.clone();
            self.update(id, "execution", json!({"execution": record}), |r| {
                r.execution.push(record.clone());
                // The signature was single-use; do not keep it.
                if let Some(a) = r.approvals.iter_mut().find(|a| a.id == approval_id) {
                    a.signature = None;
                }
            })
            .await?;
            if in_doubt {
                // An unknown outcome is not a failure: look at the
                // container instead of guessing, and never re-send.
                self.set_status(
                    id,
                    Status::Verifying,
                    "the executor's answer was lost: the outcome is in doubt; verifying",
                )
                .await?;
                return Ok(true);
            }
            if let Err(e) = result {
                self.finish(
                    id,
                    Status::Failed,
                    format!(
                        "the executor refused or failed {} of {}: {e}",
                        step.action, step.target.container_name
                    ),
                )
                .await?;
                return Ok(false);
            }
            // A dependency must be up (healthy, if it has a healthcheck)
            // before the service that needs it is touched.
            let is_dependency = req
                .target
                .as_ref()
                .is_some_and(|t| t.container_id != step.target.container_id);
            if is_dependency && approval.step + 1 < plan.steps.len() {
                let (checks, _) = self.wait_ready(id, &step.target.container_id).await?;
                let ok = checks.iter().all(|c| c.ok);
                let detail: Vec<String> = checks
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {}: {}",
                            c.level,
                            if c.ok { "ok" } else { "FAILED" },
                            c.detail
                        )
                    })
                    .collect();
                self.update(id, "dependency_ready", json!({"container": step.target.container_name, "ok": ok, "message": detail.join("; ")}), |_| {}).await?;
                if !ok {
                    self.finish(
                        id,
                        Status::Failed,
                        format!(
                            "{} did not become ready after {}: {}; the next step was not executed",
                            step.target.container_name,
                            step.action,
                            detail.join("; ")
                        ),
                    )
                    .await?;
                    return Ok(false);
                }
            }
        }
        self.set_status(id, Status::Verifying, "verifying").await?;
        Ok(true)
    }
}
