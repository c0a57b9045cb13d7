//! Approve: each write step becomes exact claims (action, full container
//! id, request, plan digest, expiry, nonce) that a human signs with the
//! approver key; the agent only stores the signature, the executor checks
//! it. The worker waits here until every step is approved, one is rejected,
//! or one expires.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::ApprovalClaims;

use super::{Engine, EngineError, Stop};
use crate::model::*;

impl Engine {
    /// One approval request per write step: exact claims for a human to
    /// sign, valid for the configured TTL, each with a fresh nonce, naming
    /// the executor's host when it has a name (every other executor then
    /// refuses them).
    pub(super) fn approval_requests(
        &self,
        id: &str,
        plan: &Plan,
        host: Option<&str>,
    ) -> Vec<ApprovalRecord> {
        let now = unix_now();
        let expires_at = now + self.config.approval_ttl.as_secs() as i64;
        plan.steps
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let claims = ApprovalClaims {
                    version: ApprovalClaims::version_for(host),
                    approval_id: format!("apr-{}", uuid::Uuid::new_v4().simple()),
                    request_id: id.to_string(),
                    action: s.action(),
                    // A service's write names the service, and no container.
                    container_id: match s.target().subject {
                        Subject::Container(ref c) => c.id.clone(),
                        Subject::Service(_) => String::new(),
                    },
                    container_name: match s.target().subject {
                        Subject::Container(ref c) => c.name.clone(),
                        Subject::Service(_) => String::new(),
                    },
                    plan_digest: plan.digest.clone(),
                    issued_at: now,
                    expires_at,
                    nonce: ApprovalClaims::new_nonce(),
                    // A rollback's person signs both images.
                    image_id: s.images().map(|(to, _)| to.to_string()),
                    from_image_id: s
                        .images()
                        .map(|(_, from)| from.to_string())
                        .or(s.from_image().map(ToString::to_string)),
                    service: s.service_claims(),
                    host: host.map(str::to_string),
                    update: s.update_claims(),
                    build: s.build_claims(),
                };
                ApprovalRecord {
                    id: claims.approval_id.clone(),
                    request_id: id.to_string(),
                    step: i,
                    status: ApprovalStatus::Pending,
                    claims: B64.encode(claims.encode()),
                    expires_at,
                    key_id: None,
                    signature: None,
                    decided_at: None,
                    grant_id: None,
                    required: 1,
                    cosignatures: Vec::new(),
                }
            })
            .collect()
    }

    /// A watch or alert request in `repair` mode, on its first plan: when an
    /// active automation grant covers every write step (action, container,
    /// the rules engine's class), the grant authorises them and no person is
    /// asked. The executor checks the grant again, with its caps and the
    /// container's state, at the write. The grant, its key and the class,
    /// per approval, or `None`.
    async fn grant_cover(
        &self,
        id: &str,
        req: &Request,
        plan: &Plan,
        approvals: &[ApprovalRecord],
    ) -> Result<Option<GrantCover>, Stop> {
        // The update checker opens a request only under an update grant;
        // every other automatic request is repaired in repair mode only.
        if self.config.watch_mode != crate::config::WatchMode::Repair
            && req.source != RequestSource::Update
        {
            return Ok(None);
        }
        if req.source == RequestSource::Ask
            || !req.execution.is_empty()
            || req.iterations > 0
            || !req.followups.is_empty()
        {
            return Ok(None);
        }
        if req
            .latest::<kind::History>()
            .is_some_and(|h| h.restart_does_not_hold())
        {
            // The plan says why; a person decides whether to try again.
            tracing::info!(
                request_id = id,
                "no grant: restarts of this target did not hold"
            );
            return Ok(None);
        }
        let class = Self::repair_class(req);
        let policy = match self.exec(id).policy(id).await {
            Ok(p) if p.automation_enabled => p,
            _ => return Ok(None),
        };
        let grants = crate::grants::list(&self.store)?;
        let now = unix_now();
        let mut chosen = Vec::new();
        for a in approvals {
            let Some(step) = plan.steps.get(a.step) else {
                return Ok(None);
            };
            let labels = Self::labels_of(req, step.target().id());
            match crate::grants::covering(
                &grants,
                step.action(),
                step.target().name(),
                &labels,
                &class,
                now,
                &policy,
            ) {
                Some(g) => chosen.push((a.id.clone(), g.id.clone(), g.key_id.clone())),
                None => return Ok(None),
            }
        }
        Ok((!chosen.is_empty()).then_some(GrantCover { chosen, class }))
    }
}

/// What grants authorise a plan's approvals: per approval, the grant and
/// its key; and the class the repair is for.
struct GrantCover {
    chosen: Vec<(String, String, String)>,
    class: String,
}

impl Engine {
    /// The fault class a repair under a grant is for: the rules engine's
    /// (a model's only when the rules engine did not diagnose).
    pub(super) fn repair_class(req: &Request) -> String {
        req.rules_diagnosis
            .as_ref()
            .or(req.diagnosis.as_ref())
            .and_then(|d| d.causes.first())
            .and_then(|c| serde_json::to_value(c.class).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    /// Ask for one approval per write step of `plan` and wait for them, in
    /// one transaction, with the grant that authorises them when `grants`
    /// (a first plan in repair mode): no client sees an approval before the
    /// request waits for it, so a CLI that signs at once is never refused
    /// as "not pending", and none is announced as needing a person that a
    /// grant covers.
    pub(super) async fn request_approvals(
        &self,
        id: &str,
        plan: &Plan,
        grants: bool,
        message: &str,
    ) -> Result<(), Stop> {
        // The host the executor says it is, asked now: claims without one
        // go to an executor that does not require it, or are refused there.
        // With several hosts, claims are never made without their host.
        let (host, quorum) = match self.exec(id).policy(id).await {
            Ok(p) => (Some(p.host).filter(|h| !h.is_empty()), p.approvers_required),
            Err(e) if self.hosts.all().len() > 1 => {
                self.required::<()>(
                    id,
                    "read the executor's policy, whose host the approvals name",
                    Err(e),
                )
                .await?;
                return Err(Stop::Canceled);
            }
            Err(e) => {
                tracing::warn!(request_id = %id, error = %e, "policy not read: the approvals name no host");
                (None, Default::default())
            }
        };
        let mut approvals = self.approval_requests(id, plan, host.as_deref());
        for a in &mut approvals {
            let action = plan.steps.get(a.step).map(|s| s.action());
            a.required = action.and_then(|x| quorum.get(&x)).copied().unwrap_or(1);
        }
        let mut events: Vec<EventPayload> = approvals
            .iter()
            .map(|a| {
                EventPayload::ApprovalRequested(ApprovalRequested {
                    approval: a.clone(),
                    step: plan.steps.get(a.step).cloned(),
                })
            })
            .collect();
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        let cover = match grants {
            true => self.grant_cover(id, &req, plan, &approvals).await?,
            false => None,
        };
        let message = match cover {
            Some(GrantCover { chosen, class }) => {
                for (approval_id, grant_id, key_id) in &chosen {
                    if let Some(rec) = approvals.iter_mut().find(|x| &x.id == approval_id) {
                        rec.status = ApprovalStatus::Approved;
                        rec.grant_id = Some(grant_id.clone());
                        rec.key_id = Some(key_id.clone());
                        rec.decided_at = Some(now_rfc3339());
                    }
                }
                let steps = chosen
                    .into_iter()
                    .map(|(approval_id, grant_id, _)| GrantedStep {
                        approval_id,
                        grant_id,
                    })
                    .collect();
                events.push(EventPayload::ApprovedByGrant(ApprovedByGrant {
                    steps,
                    class,
                }));
                "authorised by an automation grant"
            }
            None => message,
        };
        events.push(EventPayload::Status(StatusChanged {
            status: Status::WaitingApproval,
            message: message.into(),
        }));
        tracing::info!(
            request_id = id,
            status = "waiting_approval",
            message,
            "transition"
        );
        self.update_with_events(id, events, |r| {
            r.approvals.extend(approvals);
            r.status = Status::WaitingApproval;
            Ok::<(), crate::store::StoreError>(())
        })
        .await?;
        Ok(())
    }

    /// A container's or a Swarm service's labels, from the newest
    /// evidence that shows them (an inspect of either).
    fn labels_of(req: &Request, id: &str) -> std::collections::BTreeMap<String, String> {
        req.evidence
            .iter()
            .rev()
            .find_map(|e| {
                let (shown, labels) = match &e.payload {
                    EvidencePayload::Inspect(c)
                    | EvidencePayload::RelatedInspect(c)
                    | EvidencePayload::Verification(AfterWrite::Container(c)) => (&c.id, &c.labels),
                    EvidencePayload::Service(s)
                    | EvidencePayload::Verification(AfterWrite::Service(s)) => {
                        (&s.summary.id, &s.summary.labels)
                    }
                    _ => return None,
                };
                (shown == id).then(|| labels.clone())
            })
            .unwrap_or_default()
    }

    /// Approvals of the current plan (the newest round of them).
    pub(super) fn current_approvals(req: &Request) -> Vec<ApprovalRecord> {
        let n = req.plan.as_ref().map(|p| p.steps.len()).unwrap_or(0);
        let start = req.approvals.len().saturating_sub(n);
        req.approvals[start..].to_vec()
    }

    pub(super) async fn wait_for_approval(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let control = self.control(id);
        loop {
            self.check_canceled(id)?;
            let notified = control.notify.notified();
            let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
            if req.status != Status::WaitingApproval {
                return Ok(!req.status.is_terminal());
            }
            let current = Self::current_approvals(&req);
            if current.iter().any(|a| a.status == ApprovalStatus::Rejected) {
                self.finish(
                    id,
                    Status::Rejected,
                    "the operator rejected the plan; nothing was changed".into(),
                )
                .await?;
                return Ok(false);
            }
            if !current.is_empty() && current.iter().all(|a| a.status == ApprovalStatus::Approved) {
                self.set_status(id, Status::Executing, "approved; executing")
                    .await?;
                return Ok(true);
            }
            let now = unix_now();
            let expired: Vec<String> = current
                .iter()
                .filter(|a| a.status == ApprovalStatus::Pending && a.expires_at <= now)
                .map(|a| a.id.clone())
                .collect();
            if !expired.is_empty() {
                self.update(
                    id,
                    EventPayload::ApprovalExpired(ApprovalsExpired {
                        approvals: expired.clone(),
                    }),
                    |r| {
                        for a in r.approvals.iter_mut().filter(|a| expired.contains(&a.id)) {
                            a.status = ApprovalStatus::Expired;
                        }
                    },
                )
                .await?;
                self.finish(
                    id,
                    Status::Failed,
                    "the approval expired before anyone approved it; nothing was changed".into(),
                )
                .await?;
                return Ok(false);
            }
            let next_expiry = current
                .iter()
                .filter(|a| a.status == ApprovalStatus::Pending)
                .map(|a| a.expires_at)
                .min()
                .unwrap_or(now + 1);
            let wait = Duration::from_secs((next_expiry - now).clamp(1, 3600) as u64);
            let _ = tokio::time::timeout(wait, notified).await;
        }
    }

    /// Once `by` has verified `target` healthy, a request still waiting
    /// for a person to approve a plan for the same target is moot: its
    /// plan was made for a failure that is gone, and its claims for a
    /// container or spec that has changed. Each such request (none of whose
    /// approvals was decided) is withdrawn with a `superseded` event and
    /// ends canceled, nothing changed.
    pub(super) async fn supersede_waiting(&self, by: &str, target: &Target) -> Result<(), Stop> {
        let waiting: Vec<Request> = self
            .store
            .unfinished()?
            .into_iter()
            .filter(|r| {
                r.id != by
                    && r.status == Status::WaitingApproval
                    && r.target.as_ref().is_some_and(|t| t.same_as(target))
            })
            .collect();
        for r in waiting {
            let pending: Vec<String> = Self::current_approvals(&r)
                .iter()
                .map(|a| a.id.clone())
                .collect();
            let control = self.control(&r.id);
            let withdrawn = self
                .try_update(
                    &r.id,
                    EventPayload::Superseded(Superseded {
                        by: by.to_string(),
                        approvals: pending.clone(),
                    }),
                    |x| {
                        let undecided = Self::current_approvals(x)
                            .iter()
                            .all(|a| a.status == ApprovalStatus::Pending);
                        if x.status != Status::WaitingApproval || !undecided {
                            return Err(EngineError::AlreadyFinished {
                                id: x.id.clone(),
                                status: x.status.as_str().into(),
                            });
                        }
                        for a in x.approvals.iter_mut().filter(|a| pending.contains(&a.id)) {
                            a.status = ApprovalStatus::Withdrawn;
                        }
                        Ok(())
                    },
                )
                .await;
            if withdrawn.is_err() {
                // Decided or finished meanwhile: it goes its own way.
                continue;
            }
            self.finish(
                &r.id,
                Status::Canceled,
                format!(
                    "withdrawn: {by} repaired {} and verified it; this plan, made for the same failure, was never approved and nothing was changed",
                    target.name()
                ),
            )
            .await?;
            control.notify.notify_one();
        }
        Ok(())
    }

    pub fn pending_approvals(&self) -> Result<Vec<(Request, ApprovalRecord)>, EngineError> {
        let mut out = Vec::new();
        for req in self.store.unfinished()? {
            for a in Self::current_approvals(&req) {
                if a.status == ApprovalStatus::Pending && req.status == Status::WaitingApproval {
                    out.push((req.clone(), a));
                }
            }
        }
        Ok(out)
    }

    pub(super) fn find_approval(
        &self,
        approval_id: &str,
    ) -> Result<(Request, ApprovalRecord), EngineError> {
        for req in self.store.unfinished()? {
            if let Some(a) = req.approvals.iter().find(|a| a.id == approval_id) {
                return Ok((req.clone(), a.clone()));
            }
        }
        Err(EngineError::ApprovalNotFound(approval_id.to_string()))
    }

    /// Record a signature. The agent cannot check it (it holds no approver
    /// keys) beyond its shape; the executor verifies it.
    pub async fn approve(
        &self,
        approval_id: &str,
        key_id: &str,
        signature_b64: &str,
    ) -> Result<Request, EngineError> {
        let signature = B64
            .decode(signature_b64)
            .map_err(|_| EngineError::InvalidApproval("signature is not base64".into()))?;
        // An approver key's Ed25519 signature, or an ssh-agent key's SSHSIG.
        let sshsig = signature.starts_with(b"SSHSIG") && signature.len() <= 4096;
        if signature.len() != 64 && !sshsig {
            return Err(EngineError::InvalidApproval(
                "signature must be 64 bytes (Ed25519) or an SSHSIG blob".into(),
            ));
        }
        if key_id.is_empty() || key_id.len() > 64 {
            return Err(EngineError::InvalidApproval(
                "key_id must be 1 to 64 characters".into(),
            ));
        }
        self.decide(
            approval_id,
            ApprovalStatus::Approved,
            Some((key_id.to_string(), signature_b64.to_string())),
        )
        .await
    }

    pub async fn reject(&self, approval_id: &str) -> Result<Request, EngineError> {
        self.decide(approval_id, ApprovalStatus::Rejected, None)
            .await
    }

    pub(super) async fn decide(
        &self,
        approval_id: &str,
        status: ApprovalStatus,
        signed: Option<(String, String)>,
    ) -> Result<Request, EngineError> {
        let (req, _) = self.find_approval(approval_id)?;
        let updated = self
            .update_saying(&req.id, |r| {
                let waiting = r.status == Status::WaitingApproval;
                let Some(rec) = r.approvals.iter_mut().find(|x| x.id == approval_id) else {
                    return Err(EngineError::ApprovalNotFound(approval_id.into()));
                };
                if rec.status != ApprovalStatus::Pending || !waiting {
                    return Err(EngineError::ApprovalNotPending {
                        id: approval_id.into(),
                        status: format!("{:?}", rec.status).to_lowercase(),
                    });
                }
                if rec.expires_at <= unix_now() {
                    return Err(EngineError::ApprovalNotPending {
                        id: approval_id.into(),
                        status: "expired".into(),
                    });
                }
                match &signed {
                    // A further approver's signature: approved once there
                    // are as many as the executor asks for.
                    Some((key_id, sig)) if rec.key_id.is_some() => {
                        if rec.signers().contains(&key_id.as_str()) {
                            return Err(EngineError::InvalidApproval(format!(
                                "`{key_id}` has signed this approval already: another approver must sign"
                            )));
                        }
                        rec.cosignatures.push(Cosignature {
                            key_id: key_id.clone(),
                            signature: Some(sig.clone()),
                            signed_at: now_rfc3339(),
                        });
                    }
                    Some((key_id, sig)) => {
                        rec.key_id = Some(key_id.clone());
                        rec.signature = Some(sig.clone());
                    }
                    None => {}
                }
                // A signature that leaves some missing is recorded, not a
                // decision.
                let event = match &signed {
                    Some((key_id, _)) if status != ApprovalStatus::Rejected && rec.missing() > 0 => {
                        EventPayload::ApprovalSigned(ApprovalSigned {
                            approval_id: approval_id.into(),
                            key_id: key_id.clone(),
                            missing: rec.missing(),
                        })
                    }
                    _ => {
                        rec.status = status;
                        rec.decided_at = Some(now_rfc3339());
                        EventPayload::ApprovalDecided(ApprovalDecided {
                            approval_id: approval_id.into(),
                            decision: if status == ApprovalStatus::Approved {
                                Decision::Approved
                            } else {
                                Decision::Rejected
                            },
                            key_id: signed.as_ref().map(|s| s.0.clone()),
                        })
                    }
                };
                Ok(vec![event])
            })
            .await?;
        self.control(&req.id).notify.notify_one();
        Ok(updated)
    }
}
