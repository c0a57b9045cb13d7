//! Execute: send each approved write to the executor exactly once. A
//! dependency started first must be ready before the service that needs it
//! is touched.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;

use super::{Engine, Stop};
use crate::executor_client::{Authority, ExecutorError, WriteOp, Written};

use crate::model::*;

/// Log lines kept in the snapshot taken before a write.
const SNAPSHOT_LOG_LINES: u32 = 50;

impl Engine {
    /// A write erases what diagnosis looked at: a restart resets the state
    /// and the exit code, the health log starts over, and the logs roll on.
    /// Keep them in the request first (evidence `pre_write_snapshot`). A
    /// failed read does not hold the approved write back.
    async fn snapshot_before_write(
        &self,
        id: &str,
        action: WriteAction,
        target: &Target,
    ) -> Result<(), Stop> {
        let cid = &target.id();
        let ex = self.exec(id);
        let (inspected, logs) =
            tokio::join!(ex.inspect(id, cid), ex.logs(id, cid, SNAPSHOT_LOG_LINES));
        let Ok(c) = inspected else {
            tracing::warn!(request_id = %id, "no snapshot before the write: inspect failed");
            return Ok(());
        };
        let last_lines: Vec<String> = logs
            .map(|l| l.lines.into_iter().map(|l| l.text).collect())
            .unwrap_or_default();
        let summary = format!(
            "before {action}: state={} exit={} health={} ({} health probes, {} log lines kept)",
            c.status,
            c.exit_code,
            c.health_status,
            c.health_log.len(),
            last_lines.len()
        );
        let snapshot = ContainerSnapshot {
            action,
            status: c.status,
            exit_code: c.exit_code,
            oom_killed: c.oom_killed,
            error: c.error,
            started_at: c.started_at,
            finished_at: c.finished_at,
            restart_count: c.restart_count,
            health_status: c.health_status,
            failing_streak: c.failing_streak,
            health_log: c.health_log,
            last_lines,
        };
        self.record(
            id,
            vec![super::Gathered::new(
                "InspectContainer+ContainerLogs",
                EvidencePayload::PreWriteSnapshot(PreWriteSnapshot::Container(snapshot)),
                summary,
            )],
            None,
        )
        .await
    }

    pub(super) async fn execute(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let Some(plan) = req.plan.clone() else {
            return Ok(false);
        };
        let mut ran_a_step = false;
        for approval in Self::current_approvals(req) {
            self.check_canceled(id)?;
            let Some(step) = plan.steps.get(approval.step) else {
                continue;
            };
            if req.execution.iter().any(|e| e.approval_id == approval.id) {
                continue;
            }
            let authority = match &approval.grant_id {
                Some(grant_id) => self.grant_authority(req, grant_id)?,
                None => match (approval.key_id.clone(), approval.signature.clone()) {
                    (Some(key_id), Some(sig)) => Some(Authority::Approval {
                        claims: B64.decode(&approval.claims).unwrap_or_default(),
                        signature: B64.decode(&sig).unwrap_or_default(),
                        key_id,
                        cosigners: approval
                            .cosignatures
                            .iter()
                            .map(|c| {
                                let sig = c.signature.as_deref().unwrap_or_default();
                                (c.key_id.clone(), B64.decode(sig).unwrap_or_default())
                            })
                            .collect(),
                    }),
                    _ => None,
                },
            };
            let action = step.action();
            let Some(authority) = authority else {
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
            let op = WriteOp::of(step);
            match &op {
                WriteOp::Service { .. } => self.snapshot_service(id, action, step.target()).await?,
                WriteOp::Container { .. } => {
                    self.snapshot_before_write(id, action, step.target())
                        .await?
                }
            }
            let result = self.exec(id).write(id, &op, authority).await;
            let in_doubt = matches!(&result, Err(e) if e.outcome_in_doubt());
            let record = ExecutionRecord {
                step: approval.step,
                action: step.action(),
                container_id: step.target().id().to_string(),
                approval_id: approval.id.clone(),
                ok: result.is_ok(),
                message: match &result {
                    Ok(Written {
                        new_container_id: Some(new),
                        ..
                    }) => format!(
                        "{} {}: done; it runs as container {} now",
                        step.action(),
                        step.target().name(),
                        new.chars().take(12).collect::<String>()
                    ),
                    Ok(Written {
                        built: Some(b), ..
                    }) => format!(
                        "build for {}: done in {}s; image {}{}",
                        step.target().name(),
                        b.secs,
                        b.image_id.chars().take(19).collect::<String>(),
                        b.log
                            .last()
                            .map(|l| format!(" (its build said: {l})"))
                            .unwrap_or_default()
                    ),
                    Ok(_) => format!("{} {}: done", step.action(), step.target().name()),
                    Err(e) if in_doubt => format!(
                        "{} {}: outcome in doubt ({e}); it is not sent again, the container's state decides",
                        step.action(), step.target().name()
                    ),
                    Err(e) => e.to_string(),
                },
                at: now_rfc3339(),
                in_doubt,
                grant_id: approval.grant_id.clone(),
                new_container_id: result
                    .as_ref()
                    .ok()
                    .and_then(|w| w.new_container_id.clone()),
                service_version: result.as_ref().ok().and_then(|w| w.service_version),
            };
            let approval_id = approval.id.clone();
            let old_id = step.target().id().to_string();
            self.update(
                id,
                EventPayload::Execution(Executed {
                    execution: record.clone(),
                }),
                |r| {
                    r.execution.push(record.clone());
                    // A rollback's container took the old one's name: it is
                    // the target from now on (verification looks at it).
                    if let Some(new) = &record.new_container_id {
                        if let Some(Subject::Container(c)) =
                            r.target.as_mut().map(|t| &mut t.subject)
                        {
                            if c.id == old_id {
                                c.id = new.clone();
                            }
                        }
                    }
                    // The signature was single-use; do not keep it.
                    if let Some(a) = r.approvals.iter_mut().find(|a| a.id == approval_id) {
                        a.forget_signatures();
                    }
                },
            )
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
            if let (Err(e), Some(grant_id)) = (&result, &approval.grant_id) {
                // The executor refused the grant (a cap, the container's
                // state, a revocation): nothing was done; a person decides,
                // as long as no step of this plan has run (a plan half done
                // under a grant is not handed over to be done twice).
                // Never an update: its refusal and a new image put back
                // after its health window answer alike, and the checker's
                // request is not a person's to finish; it fails, saying why.
                if e.code == tonic::Code::FailedPrecondition
                    && !ran_a_step
                    && req.execution.is_empty()
                    && step.action() != WriteAction::Update
                {
                    return self.fall_back_to_a_person(id, &plan, grant_id, e).await;
                }
            }
            ran_a_step = true;
            if let Err(e) = result {
                self.finish(
                    id,
                    Status::Failed,
                    format!(
                        "the executor refused or failed {} of {}: {e}",
                        step.action(),
                        step.target().name()
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
                .is_some_and(|t| t.id() != step.target().id());
            if is_dependency && approval.step + 1 < plan.steps.len() {
                let Some((checks, _)) = self.wait_ready(id, step.target().id()).await? else {
                    return Ok(false);
                };
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
                self.update(
                    id,
                    EventPayload::DependencyReady(DependencyReady {
                        container: step.target().name().to_string(),
                        ok,
                        message: detail.join("; "),
                    }),
                    |_| {},
                )
                .await?;
                if !ok {
                    self.finish(
                        id,
                        Status::Failed,
                        format!(
                            "{} did not become ready after {}: {}; the next step was not executed",
                            step.target().name(),
                            step.action(),
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

impl Engine {
    /// The stored grant's signed bytes and the class the repair is for.
    fn grant_authority(&self, req: &Request, grant_id: &str) -> Result<Option<Authority>, Stop> {
        let grants = crate::grants::list(&self.store)?;
        let Some(g) = grants.into_iter().find(|g| g.id == grant_id) else {
            return Ok(None);
        };
        let class = Self::repair_class(req);
        Ok(Some(Authority::Grant {
            claims: B64.decode(&g.claims_b64).unwrap_or_default(),
            signature: B64.decode(&g.signature_b64).unwrap_or_default(),
            key_id: g.key_id,
            fault_class: class,
        }))
    }

    /// A grant the executor refused authorised nothing: ask a person for
    /// the same plan, with fresh approvals.
    async fn fall_back_to_a_person(
        &self,
        id: &str,
        plan: &Plan,
        grant_id: &str,
        refusal: &ExecutorError,
    ) -> Result<bool, Stop> {
        let message = format!(
            "the executor refused grant {grant_id} ({}); nothing was changed; waiting for a person to approve",
            refusal.message
        );
        self.request_approvals(id, plan, false, &message).await?;
        Ok(true)
    }
}
