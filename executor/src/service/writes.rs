//! T1/T2 writes: policy, then the signed approval bound to this action and
//! this container id, then the approval spent (its nonce recorded and an
//! intent row appended to the chain) before Docker is called. A write is
//! attempted once and, once authorised, runs to completion and is audited
//! whatever the caller does: a caller that disconnects mid-write cannot
//! leave a write that happened without its row.

use super::reads::invisible;
use super::*;
use crate::audit::{use_id, CapExceeded, GrantUse};

impl ExecutorService {
    /// The write path. Order matters: the target is resolved to its id now
    /// (so a recreated container does not match an old approval); policy
    /// comes before the approval (a disabled action is refused whatever was
    /// signed); the nonce is consumed last, so a refused call does not burn
    /// a valid approval, and consuming it commits a record of who may do what
    /// to which container before Docker is called (a store that cannot be
    /// written stops the write).
    ///
    /// A rollback is approval only, and its approval must name the image
    /// it runs and the one the container runs now; the image must be on the
    /// engine (nothing is pulled). `Call::open_write` has run.
    pub(super) async fn authorize_write(
        &self,
        call: &mut Call,
        req: pb::WriteRequest,
        write: ContainerWrite,
    ) -> Result<AuthorizedWrite, ExecError> {
        let action = write.action();
        let target = self.resolve(call, &req.container).await?.target;
        let permit = self
            .policy
            .permit_write(&write, &target)
            .map_err(|e| match e {
                PolicyError::TargetNotAllowed { .. } | PolicyError::Drydock { .. } => {
                    invisible(&req.container, e)
                }
                other => ExecError::Policy(other),
            })?;
        if let Some(grant) = &req.grant {
            return self
                .authorize_grant(call, grant, &req.fault_class, &write, target, permit)
                .await;
        }
        let input = req.approval.as_ref().map(ApprovalInput::of);
        let approved =
            self.approvals
                .verify(input, &write, &target, &req.request_id, unix_now())?;
        call.entry.approval_id = truncate_for_audit(&approved.claims.approval_id);
        call.entry.input = format!(
            "plan_digest={} expires_at={}",
            truncate_for_audit(&approved.claims.plan_digest),
            approved.claims.expires_at
        );
        let update = match (&write, write.digest()) {
            (_, Some(digest)) => Some(
                self.update_job(call, &target, digest, write.to_tag())
                    .await?,
            ),
            (ContainerWrite::UpdateBuilt { commit }, None) => Some(
                self.built_update_job(call, &target, commit, &approved.claims)
                    .await?,
            ),
            _ => None,
        };
        let build = match &write {
            ContainerWrite::Build { commit } => Some(
                self.build_job(call, &target, commit, &approved.claims)
                    .await?,
            ),
            _ => None,
        };
        if let Some(image) = write.to_image() {
            call.entry.input.push_str(&format!(
                " image_id={image} from_image_id={}",
                target.image_id
            ));
            // Checked before the approval is spent, so a missing image
            // does not burn it.
            if !self.docker.image_exists(image.as_str()).await? {
                return Err(ExecError::Docker(DockerError::Rejected {
                    operation: "rollback",
                    message: format!(
                        "image {image} is not on the engine; drydock never pulls: pull or rebuild it, then ask again"
                    ),
                }));
            }
        }
        // Synchronous on purpose (`spend_approval`).
        self.spend_approval(call, &approved, &req.request_id, action.into(), &target.id)?;
        Ok(AuthorizedWrite {
            permit,
            action,
            response: pb::WriteResponse {
                container_id: target.id,
                action: action.as_str().into(),
                approval_id: approved.claims.approval_id,
                grant_id: String::new(),
                ..Default::default()
            },
            recheck_state: false,
            update,
            build,
        })
    }

    /// A write under an automation grant: the grant verified (automation
    /// on, signature, window, revocation, action, scope, class), then the
    /// container's state checked now (only a broken container may be
    /// repaired), then the use spent against the caps, counted in the
    /// executor's store, with the intent row, before Docker is called.
    async fn authorize_grant(
        &self,
        call: &mut Call,
        grant: &pb::Grant,
        fault_class: &str,
        write: &ContainerWrite,
        target: ResolvedTarget,
        permit: WritePermit,
    ) -> Result<AuthorizedWrite, ExecError> {
        let action = write.action();
        // A build, and what it built, are a person's decision each time.
        if write.commit().is_some() {
            return Err(GrantRefusal::NotCovered(format!(
                "{} of a built image is never covered by a grant: a person approves each",
                match write {
                    ContainerWrite::Build { .. } => "a build",
                    _ => "an update",
                }
            ))
            .into());
        }
        // An update is for no fault: it names no class.
        let fault_class = match write.digest() {
            Some(_) => "",
            None => {
                validate_fault_class(fault_class)?;
                fault_class
            }
        };
        let input = GrantInput {
            claims: &grant.claims,
            signature: &grant.signature,
            key_id: &grant.key_id,
            fault_class,
        };
        let verified = self.grants.verify(
            &input,
            action.into(),
            &target.name,
            &target.labels,
            unix_now(),
        )?;
        let claims = &verified.claims;
        call.entry.approval_id = truncate_for_audit(&claims.grant_id);
        crate::grants::check_store_age(claims, self.audit.counts_since()?)?;
        call.entry.input = format!(
            "grant={} class={fault_class} expires_at={} max={}/{}s total={}{}",
            claims.grant_id,
            claims.expires_at,
            claims.max_per_container,
            claims.window_secs,
            claims.max_total,
            claims
                .hours
                .as_deref()
                .map(|h| format!(" hours={}", truncate_for_audit(h)))
                .unwrap_or_default()
        );
        // A repair: only of a container broken now. An update: only to
        // what the tag names in an allowed registry now (checked before
        // the use is spent, so a moved tag does not burn it).
        let update = match write.digest() {
            Some(digest) => Some(
                self.update_job(call, &target, digest, write.to_tag())
                    .await?,
            ),
            None => {
                let state = self.docker.inspect(&permit.to_read()).await?;
                crate::grants::precondition(action, &state)?;
                crate::grants::class_consistent(fault_class, &state)?;
                None
            }
        };
        let mut intent = call.entry.clone();
        intent.decision = crate::audit::Decision::Intent;
        intent.code = crate::audit::Code::NONE;
        intent.reason = match update {
            Some(_) => format!(
                "grant {} used for the update of {}; calling Docker",
                claims.grant_id, target.name
            ),
            None => format!(
                "grant {} used for {} of {} ({fault_class}); calling Docker",
                claims.grant_id,
                action.as_str(),
                target.name
            ),
        };
        // An update gives the container a new id: its uses are counted by
        // name, so the per-container cap holds across updates.
        let counted = match update {
            Some(_) => format!("name:{}", target.name.trim_start_matches('/')),
            None => target.id.clone(),
        };
        self.spend_grant_use(call, claims, &counted, unix_now(), &intent)?;
        Ok(AuthorizedWrite {
            permit,
            action,
            response: pb::WriteResponse {
                container_id: target.id,
                action: action.as_str().into(),
                approval_id: String::new(),
                grant_id: claims.grant_id.clone(),
                ..Default::default()
            },
            recheck_state: update.is_none(),
            update,
            build: None,
        })
    }

    /// Call Docker for an authorised write and audit the outcome, in a task
    /// of its own: if the caller goes away (its connection drops and tonic
    /// drops this handler), the task still finishes and writes its row.
    /// Record the approval's nonce with the intent row, in one transaction,
    /// before the engine is called; `target_id` is a container's or a
    /// service's id.
    ///
    /// Synchronous on purpose (the one audit write left on an async
    /// worker, and only for authorised writes): with an await between
    /// spending the approval and spawning the write, a caller that
    /// disconnected right then would leave an approval spent and a write
    /// never sent. Without one, cancellation cannot fall in between.
    pub(super) fn spend_approval(
        &self,
        call: &Call,
        approved: &crate::approval::VerifiedApproval,
        request_id: &str,
        action: WriteAction,
        target_id: &str,
    ) -> Result<(), ExecError> {
        if let Some(restored_at) = self.audit.restored_at()? {
            if !crate::approval::issued_after_restore(approved.claims.issued_at, restored_at) {
                return Err(ExecError::Approval(
                    if self.audit.nonce_used(&approved.claims.nonce)? {
                        ApprovalError::Replayed
                    } else {
                        ApprovalError::BeforeRestore {
                            issued_at: approved.claims.issued_at,
                            restored_at,
                        }
                    },
                ));
            }
        }
        let record = NonceRecord {
            nonce: &approved.claims.nonce,
            approval_id: &approved.claims.approval_id,
            expires_at: approved.claims.expires_at,
            request_id,
            action: action.as_str(),
            container_id: target_id,
            caller: &call.entry.caller,
            key_id: &approved.key_id,
        };
        let mut intent = call.entry.clone();
        intent.decision = crate::audit::Decision::Intent;
        intent.code = crate::audit::Code::NONE;
        intent.reason = format!(
            "approval {} spent (nonce {}); calling Docker",
            truncate_for_audit(&approved.claims.approval_id),
            truncate_for_audit(&approved.claims.nonce)
        );
        self.audit
            .spend_approval(&record, &intent)
            .map_err(|e| match e {
                AuditError::NonceReplayed => ExecError::Approval(ApprovalError::Replayed),
                other => ExecError::Audit(other),
            })?;
        Ok(())
    }

    /// Spend one use of a grant on `target_id` (a container's or a
    /// service's id) in the same transaction as the intent row, and name
    /// the use in the audit; or refuse at the cap that is reached.
    pub(super) fn spend_grant_use(
        &self,
        call: &mut Call,
        claims: &drydock_proto::grant::GrantClaims,
        target_id: &str,
        now: i64,
        intent: &crate::audit::AuditEntry,
    ) -> Result<(), ExecError> {
        let spent = self.audit.spend_grant(
            &GrantUse {
                grant_id: &claims.grant_id,
                container_id: target_id,
                now,
                window_secs: claims.window_secs,
                max_per_container: claims.max_per_container,
                max_total: claims.max_total,
            },
            intent,
        )?;
        match spent {
            Ok((_, number)) => {
                call.entry.approval_id = use_id(&claims.grant_id, number);
                Ok(())
            }
            Err(CapExceeded::PerContainer { used }) => Err(GrantRefusal::PerContainerCap {
                id: claims.grant_id.clone(),
                max: claims.max_per_container,
                window: claims.window_secs,
                used,
            }
            .into()),
            Err(CapExceeded::Total) => Err(GrantRefusal::TotalCap {
                id: claims.grant_id.clone(),
                max: claims.max_total,
            }
            .into()),
        }
    }

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
                mut response,
                recheck_state,
                update,
                build,
            } = write;
            let still_broken = if recheck_state {
                match docker.inspect(&permit.to_read()).await {
                    Ok(state) => {
                        crate::grants::precondition(action, &state).map_err(ExecError::from)
                    }
                    Err(e) => Err(ExecError::from(e)),
                }
            } else {
                Ok(())
            };
            let result = match still_broken {
                Ok(()) => {
                    // Each write takes only the permit for itself.
                    let done = match &permit {
                        WritePermit::Restart(p) => docker.restart(p).await.map(|()| None),
                        WritePermit::Start(p) => docker.start(p).await.map(|()| None),
                        WritePermit::Stop(p) => docker.stop(p).await.map(|()| None),
                        WritePermit::Rollback { permit, to_image } => {
                            docker.rollback(permit, to_image.as_str()).await.map(Some)
                        }
                        WritePermit::Update { permit, digest } => match &update {
                            Some(job) => {
                                job.run(&docker, permit, digest.as_str(), &mut response)
                                    .await
                            }
                            None => Err(DockerError::Rejected {
                                operation: "update",
                                message: "no registry was checked for this update".into(),
                            }),
                        },
                        WritePermit::UpdateBuilt { permit, .. } => match &update {
                            Some(job) => job.run(&docker, permit, "", &mut response).await,
                            None => Err(DockerError::Rejected {
                                operation: "update",
                                message: "no built image was checked for this update".into(),
                            }),
                        },
                        WritePermit::Build { permit, .. } => match build {
                            Some(job) => job.run(&docker, permit, &mut response).await,
                            None => Err(DockerError::Rejected {
                                operation: "build",
                                message: "no source was checked for this build".into(),
                            }),
                        },
                    };
                    let building = action == ContainerAction::Build;
                    done.map_err(ExecError::from).map(|new_id| {
                        let action = action.as_str();
                        call.entry.result = match &new_id {
                            Some(id) => format!("{action} done: new container {id}"),
                            None => format!("{action} done"),
                        };
                        if building {
                            // The output's last lines, redacted when read.
                            let tail = response.build_log.iter().rev().take(3).rev();
                            call.entry.result = format!(
                                "build done: image {} ({}s); its output ended: {}",
                                response.new_image_id,
                                response.watched_secs,
                                truncate_for_audit(&tail.cloned().collect::<Vec<_>>().join(" | "))
                            );
                        } else if !response.new_image_id.is_empty() {
                            call.entry.result.push_str(&format!(
                                " running {} ({}; held {}s)",
                                response.new_image_id,
                                if response.pulled {
                                    "pulled"
                                } else {
                                    "already on the engine"
                                },
                                response.watched_secs
                            ));
                        }
                        response.new_container_id = new_id.unwrap_or_default();
                        response
                    })
                }
                // The use stays counted (its intent row is in the chain);
                // Docker was not called.
                Err(e) => Err(e),
            };
            finish_call(audit, call, result).await
        });
        write_task_result(task.await)
    }
}

/// A write that policy and a verified approval allow, whose approval is
/// spent: all that is left is to call Docker.
pub(super) struct AuthorizedWrite {
    permit: WritePermit,
    action: ContainerAction,
    response: pb::WriteResponse,
    /// Under a grant: the state is checked once more right before Docker is
    /// called (it may have recovered, or Docker restarted it, meanwhile).
    recheck_state: bool,
    /// An update's registry, reference and window.
    update: Option<super::updates::UpdateJob>,
    /// A build's checked source and limits.
    build: Option<super::builds::BuildJob>,
}

/// A spawned write's answer; a task that died (a panic) is an internal
/// error whose intent row is already in the chain.
pub(super) fn write_task_result<T>(
    joined: Result<Result<T, Status>, tokio::task::JoinError>,
) -> Result<T, Status> {
    joined.unwrap_or_else(|e| {
        tracing::error!(error = %e, "write task failed");
        Err(Status::internal(
            "the write task failed; its intent row is in the audit log",
        ))
    })
}
