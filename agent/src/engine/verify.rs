//! Verify: success of the Docker call is not success. The container must
//! be running, healthy when it has a healthcheck, stay so for a while, and
//! answer its HTTP check when one is configured. A failed verification
//! starts another round, within the iteration budget.

use std::time::{Duration, Instant};

use super::stable::Judged;
use super::{Engine, Stop};
use crate::model::HealthStatus;
use crate::model::*;

impl Engine {
    /// Hold one container until it is running (and healthy, when it has
    /// a healthcheck, waiting out its probe schedule; stable for a few
    /// seconds when it has none), or until the deadline
    /// (`hold_until_stable`, woken by its own events). Returns the last
    /// checks and the last inspect; `None` when the executor did not
    /// answer before the verification deadline (the request has ended).
    pub(super) async fn wait_ready(
        &self,
        id: &str,
        container_id: &str,
    ) -> Result<Option<(Vec<VerificationCheck>, Option<ContainerView>)>, Stop> {
        self.wait_ready_for(id, container_id, Some(self.config.stable_for))
            .await
    }

    /// `wait_ready` with its own stability hold; `None`: none at all (the
    /// executor held it already), not even a healthcheck's schedule.
    async fn wait_ready_for(
        &self,
        id: &str,
        container_id: &str,
        stable_for: Option<Duration>,
    ) -> Result<Option<(Vec<VerificationCheck>, Option<ContainerView>)>, Stop> {
        // Woken by the container's own events (a health verdict, a start, a
        // death) as they happen; polled only as a fallback, or when the
        // executor gives no stream (it caps them per identity).
        let events = self.exec(id).follow(id, container_id).await.ok();
        let ex = self.exec(id);
        let max_wait = self.config.verify_max_wait;
        self.hold_until_stable(
            id,
            events,
            || ex.inspect(id, container_id),
            |c: &ContainerView| container_judged(c, stable_for, max_wait),
        )
        .await
    }

    /// Success of the Docker call is not success: the container must be
    /// running, then healthy when it has a healthcheck (waiting out its
    /// interval), and must stay up; then the HTTP check, if one is set.
    pub(super) async fn verify(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let Some(target) = req.target.clone() else {
            return Ok(false);
        };
        let target = match req.options.update {
            true => match self.updated_target(req, target).await? {
                Some(t) => t,
                None => return Ok(false),
            },
            false => target,
        };
        let started = Instant::now();
        // An update was held running and healthy through the executor's
        // health window before it was kept: it needs no second hold here.
        let deployed = req.options.update || req.options.build.is_some();
        let stable_for = (!deployed).then_some(self.config.stable_for);
        let Some((mut checks, last)) = self.wait_ready_for(id, target.id(), stable_for).await?
        else {
            return Ok(false);
        };
        let mut evidence_ids = Vec::new();
        // Level 3: the operator-configured HTTP check, once the container is
        // running (and healthy); polled until it answers 2xx or time is up.
        let runbook_check = req
            .latest::<kind::Runbook>()
            .and_then(|r| r.http_check.clone());
        let http_service = Self::latest_policy(req).and_then(|p| {
            [
                runbook_check.clone(),
                target.compose_service().map(str::to_string),
                Some(target.name().to_string()),
            ]
            .into_iter()
            .flatten()
            .find(|s| p.http_checks.contains(s))
        });
        if let (Some(service), true) = (http_service, checks.iter().all(|c| c.ok)) {
            let http_deadline = started.elapsed() + Duration::from_secs(20);
            let last_check = loop {
                self.check_canceled(id)?;
                let result = self.exec(id).check_http(id, &service).await;
                if matches!(&result, Ok(r) if r.ok) || started.elapsed() >= http_deadline {
                    break result;
                }
                tokio::time::sleep(self.config.verify_poll).await;
            };
            match last_check {
                Ok(r) => {
                    let detail = if r.ok {
                        format!("{service}: HTTP {} in {} ms", r.status_code, r.latency_ms)
                    } else {
                        format!("{service}: {}", r.error)
                    };
                    evidence_ids.push(
                        self.add_evidence(
                            id,
                            "CheckHttp",
                            EvidencePayload::HttpCheck(r.clone()),
                            detail.clone(),
                        )
                        .await?,
                    );
                    checks.push(VerificationCheck {
                        level: "http".into(),
                        ok: r.ok,
                        detail,
                    });
                }
                Err(e) => checks.push(VerificationCheck {
                    level: "http".into(),
                    ok: false,
                    detail: e.to_string(),
                }),
            }
        }
        if let Some(c) = &last {
            let summary = format!(
                "after the action: state={} health={}",
                c.status, c.health_status
            );
            evidence_ids.push(
                self.add_evidence(
                    id,
                    "InspectContainer",
                    EvidencePayload::Verification(AfterWrite::Container(c.clone())),
                    summary,
                )
                .await?,
            );
        }
        self.conclude(req, &target, checks, evidence_ids).await
    }

    /// A Swarm service is verified on its own terms: every task it wants
    /// runs, none failed since the write, its update (or rollback) is done,
    /// it holds; after a rollback, its spec runs the image the approval
    /// named.
    pub(super) async fn verify_service(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let Some(target) = req.target.as_ref() else {
            return Ok(false);
        };
        let last_write = req.execution.last();
        let written_at = last_write
            .and_then(|e| humantime::parse_rfc3339_weak(e.at.trim_end_matches('Z')).ok())
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or_else(unix_now, |d| d.as_secs() as i64);
        let expect_image =
            last_write.and_then(|e| match req.plan.as_ref()?.steps.get(e.step)?.write() {
                StepWrite::Service(ServiceStep::Rollback { to_image, .. }) => {
                    Some(to_image.clone())
                }
                StepWrite::Service(ServiceStep::Update {
                    reference, digest, ..
                }) => Some(format!("{reference}@{digest}")),
                _ => None,
            });
        let updating = last_write.is_some_and(|e| e.action == WriteAction::ServiceUpdate);
        // The tasks the snapshot before the write saw: the write replaces
        // them, and one failing on its way out is not the new spec failing.
        let known_before: Vec<String> = match req.latest::<kind::PreWriteSnapshot>() {
            Some(PreWriteSnapshot::Service(s)) => s.tasks.iter().map(|t| t.id.clone()).collect(),
            _ => Vec::new(),
        };
        let Some((checks, last)) = self
            .wait_service_ready(
                id,
                target.id(),
                written_at,
                &known_before,
                expect_image.as_deref(),
            )
            .await?
        else {
            return Ok(false);
        };
        let mut evidence_ids = Vec::new();
        if let Some(s) = &last {
            evidence_ids.push(
                self.add_evidence(
                    id,
                    "InspectService",
                    EvidencePayload::Verification(AfterWrite::Service(s.clone())),
                    format!(
                        "after the action: {}/{} tasks, image {}, spec version {}",
                        s.summary.running, s.summary.desired, s.summary.image, s.summary.version
                    ),
                )
                .await?,
            );
        }
        // The engine rolled an update back (or paused it): its decision,
        // which another round would not change.
        if let (true, Some(s)) = (updating, &last) {
            if let Some(why) = super::swarm::update_undone(s, &checks) {
                self.finish(id, Status::Failed, why).await?;
                return Ok(false);
            }
        }
        self.conclude(req, target, checks, evidence_ids).await
    }

    /// Record the verification; finish when it holds, else start another
    /// round within the iteration budget.
    async fn conclude(
        &self,
        req: &Request,
        target: &Target,
        checks: Vec<VerificationCheck>,
        evidence_ids: Vec<String>,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        let ok = checks.iter().all(|c| c.ok);
        let verification = Verification {
            ok,
            checks: checks.clone(),
            evidence_ids,
        };
        self.update(
            id,
            EventPayload::Verification(Verified {
                verification: verification.clone(),
            }),
            |r| r.verification = Some(verification.clone()),
        )
        .await?;
        if ok {
            let levels: Vec<&str> = checks.iter().map(|c| c.level.as_str()).collect();
            self.finish(
                id,
                Status::Completed,
                format!(
                    "{} recovered: verified {}{}",
                    target.name(),
                    levels.join(", "),
                    if req.execution.iter().any(|e| e.in_doubt) {
                        " (the executor's answer to the write was lost, so the outcome was in doubt until verified)"
                    } else {
                        ""
                    }
                ),
            )
            .await?;
            self.supersede_waiting(id, target).await?;
            return Ok(false);
        }
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        let iterations = req.iterations + 1;
        if iterations >= self.config.max_iterations {
            let outcome = format!(
                "not recovered after {} round(s); tried {}",
                iterations,
                Self::tried(&req)
            );
            self.update(
                id,
                EventPayload::Iteration(Iteration {
                    iterations,
                    message: None,
                }),
                |r| r.iterations = iterations,
            )
            .await?;
            self.finish(id, Status::Failed, outcome).await?;
            return Ok(false);
        }
        self.update(
            id,
            EventPayload::Iteration(Iteration {
                iterations,
                message: Some("verification failed; diagnosing again with new evidence".into()),
            }),
            |r| {
                r.iterations = iterations;
                r.status = Status::Observing;
            },
        )
        .await?;
        Ok(true)
    }
}

/// A container's checks: running, and healthy when it has a healthcheck.
/// With one, they must hold for its interval times its retries (at least
/// `stable_for`, at most 30 s), and are waited for as long as its schedule
/// needs to reach a verdict (10 s to `max_wait`); without one, for
/// `stable_for`, waited for at most 15 s. `None`: the executor held it
/// already (an update's health window), so the checks need not hold again.
fn container_judged(c: &ContainerView, stable_for: Option<Duration>, max_wait: Duration) -> Judged {
    let held = stable_for.is_none();
    let stable_for = stable_for.unwrap_or_default();
    let (hold, deadline) = match &c.healthcheck {
        Some(_) if held => (Duration::ZERO, max_wait.min(Duration::from_secs(15))),
        Some(hc) => {
            let hold = stable_for
                .max(Duration::from_millis(
                    hc.interval_ms * u64::from(hc.retries.max(1)),
                ))
                .min(Duration::from_secs(30));
            let needed = Duration::from_millis(
                hc.start_period_ms + (hc.interval_ms + hc.timeout_ms) * (hc.retries as u64 + 2),
            ) + Duration::from_secs(5);
            // At least 10 s, at most the configured wait (which may be
            // shorter: `clamp` would panic then).
            (hold, needed.max(Duration::from_secs(10)).min(max_wait))
        }
        None => (stable_for, max_wait.min(Duration::from_secs(15))),
    };
    let mut checks = vec![VerificationCheck {
        level: "running".into(),
        ok: c.running && !c.restarting,
        detail: format!("{}: state={} exit={}", c.name, c.status, c.exit_code),
    }];
    if c.healthcheck.is_some() {
        checks.push(VerificationCheck {
            level: "healthy".into(),
            ok: c.health_status == HealthStatus::Healthy,
            detail: format!("{}: health={}", c.name, c.health_status),
        });
    }
    Judged {
        checks,
        hold,
        deadline,
    }
}
