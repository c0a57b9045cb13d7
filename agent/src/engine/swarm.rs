//! A request about a Swarm service: the same phases as a container's, with
//! the service's own evidence (its definition, its tasks, the nodes, the
//! logs of all its tasks), the rules for services, the service planner
//! (force update, rollback to the previous spec, advice) and a
//! verification that waits for every task it wants to run and stay up.

use std::time::Duration;

use super::stable::Judged;
use super::{Engine, Gathered, Stop};
use crate::executor_client::ExecutorError;
use crate::model::UpdateState;
use crate::model::*;
use crate::rules::swarm::{diagnose_service, ServiceFinding, ServiceObservation};

/// A task that fails after a write within this margin of the write's
/// start still counts against it (the clocks of agent and engine differ).
const CLOCK_MARGIN_SECS: i64 = 2;

/// The request id the operator's views read the Swarm under.
const VIEW_REQUEST: &str = "req-services";

impl Engine {
    /// The services in scope and the nodes, for the operator's views (the
    /// console, MCP); an engine that is not a Swarm manager, or a scope
    /// with no service, is an answer saying so, not an error.
    pub async fn service_list(&self, host: Option<&str>) -> Result<ServiceList, ExecutorError> {
        let executor = self.view_host(host)?.executor.clone();
        let off = |why: String| ServiceList {
            swarm: false,
            why: Some(why),
            ..Default::default()
        };
        let policy = executor.policy(VIEW_REQUEST).await?;
        if !policy.services_in_scope {
            return Ok(off(
                "no Swarm service is in the executor's scope (targets.services)".into(),
            ));
        }
        let (services, nodes) = tokio::join!(
            executor.services(VIEW_REQUEST),
            executor.nodes(VIEW_REQUEST)
        );
        match services {
            Ok(services) => Ok(ServiceList {
                swarm: true,
                why: None,
                services,
                nodes: nodes.unwrap_or_else(|e| {
                    tracing::warn!(error = %e, "nodes not listed");
                    Vec::new()
                }),
            }),
            Err(e) if e.code == tonic::Code::FailedPrecondition => Ok(off(e.message)),
            Err(e) => Err(e),
        }
    }

    /// One service (by name or id) and its tasks, newest first.
    pub async fn service_tasks(
        &self,
        host: Option<&str>,
        service: &str,
    ) -> Result<ServiceTaskList, ExecutorError> {
        let executor = self.view_host(host)?.executor.clone();
        let (inspected, tasks) = tokio::join!(
            executor.service(VIEW_REQUEST, service),
            executor.tasks(VIEW_REQUEST, service)
        );
        Ok(ServiceTaskList {
            service: inspected?,
            tasks: tasks?,
        })
    }
}

/// The evidence a service's diagnosis reads, decoded.
pub(super) struct ServiceObserved {
    service: ServiceView,
    service_ev: String,
    tasks: Vec<TaskView>,
    tasks_ev: String,
    nodes: Vec<NodeView>,
    nodes_ev: String,
    logs: LogsView,
    logs_ev: String,
}

impl ServiceObserved {
    fn observation(&self) -> ServiceObservation<'_> {
        ServiceObservation {
            service: &self.service,
            service_ev: &self.service_ev,
            tasks: &self.tasks,
            tasks_ev: &self.tasks_ev,
            nodes: &self.nodes,
            nodes_ev: &self.nodes_ev,
            logs: &self.logs,
            logs_ev: &self.logs_ev,
        }
    }

    pub(super) fn finding(&self) -> ServiceFinding {
        diagnose_service(&self.observation())
    }
}

/// Tasks in a line: `2 running, 3 failed ("task: non-zero exit (1)")`.
fn tasks_said(tasks: &[TaskView]) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for t in tasks {
        *counts.entry(t.state.as_str()).or_default() += 1;
    }
    let mut said: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    if let Some(t) = tasks.iter().find(|t| t.failed() || !t.reason().is_empty()) {
        said.push(format!("newest reason: \"{}\"", t.reason()));
    }
    said.join(", ")
}

fn unix_of(rfc3339: &str) -> Option<i64> {
    humantime::parse_rfc3339_weak(rfc3339.trim_end_matches('Z'))
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64)
}

impl Engine {
    /// Observe a service: its definition, its tasks, the nodes and its
    /// logs, read together, each as evidence; the phase ends in one
    /// transaction.
    pub(super) async fn read_service(
        &self,
        req: &Request,
        target: &Target,
        policy: &PolicyView,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        let sid = &target.id();
        let tail = match policy.logs_max_lines {
            0 => self.config.logs_tail,
            max => self.config.logs_tail.min(max),
        };
        let ex = self.exec(id);
        let Some(mut service) = self
            .required(id, "inspect the service", ex.service(id, sid).await)
            .await?
        else {
            return Ok(false);
        };
        // An update the engine is carrying out changes the spec version
        // when it ends, and an approval binds the version: wait for it to
        // settle (up to verify.max_wait) before anything is planned.
        let mut settling = None;
        if service.summary.update_state.in_progress() {
            let started = std::time::Instant::now();
            while service.summary.update_state.in_progress()
                && started.elapsed() < self.config.verify_max_wait
            {
                self.check_canceled(id)?;
                tokio::time::sleep(self.config.verify_poll).await;
                match ex.service(id, sid).await {
                    Ok(now) => service = now,
                    Err(e) => {
                        tracing::warn!(request_id = %id, error = %e, "service not read while it settles");
                        break;
                    }
                }
            }
            settling = Some(started.elapsed());
        }
        let (tasks, nodes, logs) = tokio::join!(
            ex.tasks(id, sid),
            ex.nodes(id),
            ex.service_logs(id, sid, tail),
        );
        let Some(tasks) = self.required(id, "list the service's tasks", tasks).await? else {
            return Ok(false);
        };
        let mut gathered = vec![
            Gathered::new(
                "InspectService",
                EvidencePayload::Service(service.clone()),
                format!(
                    "{}: {}/{} tasks, image {}, spec version {}{}{}",
                    service.summary.name,
                    service.summary.running,
                    service.summary.desired,
                    service.summary.image,
                    service.summary.version,
                    if service.summary.update_state == UpdateState::None {
                        String::new()
                    } else {
                        format!(", update {}", service.summary.update_state)
                    },
                    match settling {
                        Some(waited) if service.summary.update_state.in_progress() => format!(
                            "; the engine was still updating it after {} s of waiting",
                            waited.as_secs()
                        ),
                        Some(waited) => format!(
                            "; read again after the engine's update settled ({} ms)",
                            waited.as_millis()
                        ),
                        None => String::new(),
                    }
                ),
            ),
            Gathered::new(
                "ServiceTasks",
                EvidencePayload::Tasks(tasks.clone()),
                tasks_said(&tasks),
            ),
        ];
        // Nodes and logs help; a failure to read them does not end the
        // request (an empty list stands in).
        let nodes = nodes.unwrap_or_else(|e| {
            tracing::warn!(request_id = %id, error = %e, "nodes not read");
            Vec::new()
        });
        let down = nodes.iter().filter(|n| !n.schedulable()).count();
        gathered.push(Gathered::new(
            "ListNodes",
            EvidencePayload::Nodes(nodes.clone()),
            format!("{} nodes, {down} not taking tasks", nodes.len()),
        ));
        let logs = logs.unwrap_or_else(|e| {
            tracing::warn!(request_id = %id, error = %e, "service logs not read");
            LogsView::default()
        });
        gathered.push(Gathered::logs(&logs, "ServiceLogs"));
        gathered.push(Self::policy_gathered(policy));
        if req.options.update {
            let Some(registry) = self.registry_gathered(req, target).await? else {
                return Ok(false);
            };
            gathered.push(registry);
        }
        self.record(
            id,
            gathered,
            Some((Status::Diagnosing, "evidence gathered")),
        )
        .await?;
        Ok(true)
    }

    /// A service is the rules engine's: the model's tools read containers.
    pub(super) async fn diagnose_service(&self, req: &Request) -> Result<bool, Stop> {
        let Some(observed) = Self::service_observed(req) else {
            self.finish(&req.id, Status::Failed, "no evidence to diagnose".into())
                .await?;
            return Ok(false);
        };
        let note = self
            .config
            .llm
            .is_some()
            .then(|| "the model does not investigate Swarm services".to_string());
        let diagnosis = observed.finding().finding.diagnosis;
        self.diagnose_with_rules(req, note, Some(diagnosis)).await
    }

    /// The newest evidence of a service, decoded; `None` without it.
    pub(super) fn service_observed(req: &Request) -> Option<ServiceObserved> {
        use super::cited;
        let (service, service_ev) = cited::<kind::Service>(req)?;
        let (tasks, tasks_ev) = cited::<kind::Tasks>(req)?;
        let (nodes, nodes_ev) = cited::<kind::Nodes>(req).unwrap_or_default();
        let (logs, logs_ev) = cited::<kind::Logs>(req).unwrap_or_default();
        Some(ServiceObserved {
            service,
            service_ev,
            tasks,
            tasks_ev,
            nodes,
            nodes_ev,
            logs,
            logs_ev,
        })
    }

    /// Plan for a service from its newest evidence.
    pub(super) async fn plan_service(&self, req: &Request) -> Result<bool, Stop> {
        let (Some(target), Some(policy), Some(observed)) = (
            req.target.as_ref(),
            Self::latest_policy(req),
            Self::service_observed(req),
        ) else {
            self.finish(&req.id, Status::Failed, "no evidence to plan from".into())
                .await?;
            return Ok(false);
        };
        if req.options.update {
            return self.plan_service_update(req, &observed.service).await;
        }
        let mut found = observed.finding();
        if let Some(d) = req.diagnosis.clone() {
            found.finding.diagnosis = d;
        }
        let plan =
            crate::planner::swarm::plan(&found, &observed.service, target, &policy, &req.execution);
        self.propose(req, plan, &found.finding.diagnosis).await
    }

    /// The service and its tasks before a write, kept as evidence (a write
    /// replaces the tasks diagnosis looked at).
    pub(super) async fn snapshot_service(
        &self,
        id: &str,
        action: WriteAction,
        target: &Target,
    ) -> Result<(), Stop> {
        let ex = self.exec(id);
        let (service, tasks) = tokio::join!(ex.service(id, target.id()), ex.tasks(id, target.id()));
        let (Ok(service), Ok(tasks)) = (service, tasks) else {
            tracing::warn!(request_id = %id, "no snapshot before the write: the service was not read");
            return Ok(());
        };
        let summary = format!(
            "before {action}: {}/{} tasks, spec version {}; {}",
            service.summary.running,
            service.summary.desired,
            service.summary.version,
            tasks_said(&tasks)
        );
        let snapshot = ServiceSnapshot {
            action,
            service: service.summary,
            tasks,
        };
        self.record(
            id,
            vec![Gathered::new(
                "InspectService+ServiceTasks",
                EvidencePayload::PreWriteSnapshot(PreWriteSnapshot::Service(snapshot)),
                summary,
            )],
            None,
        )
        .await
    }

    /// Hold a service until it runs every task it wants, no task failed
    /// since the write (tasks `known_before` it, which the write replaces,
    /// may still fail as they go), its update (or rollback) is done, and
    /// after a rollback its spec runs `expect_image`
    /// (`hold_until_stable`, polled).
    pub(super) async fn wait_service_ready(
        &self,
        id: &str,
        service_id: &str,
        written_at: i64,
        known_before: &[String],
        expect_image: Option<&str>,
    ) -> Result<Option<(Vec<VerificationCheck>, Option<ServiceView>)>, Stop> {
        let ex = &self.exec(id);
        let (stable_for, max_wait) = (self.config.stable_for, self.config.verify_max_wait);
        let read = || async move {
            let (s, tasks) = tokio::join!(ex.service(id, service_id), ex.tasks(id, service_id));
            Ok::<_, ExecutorError>((s?, tasks?))
        };
        let judge = |(s, tasks): &(ServiceView, Vec<TaskView>)| {
            service_judged(
                s,
                tasks,
                written_at,
                known_before,
                expect_image,
                stable_for,
                max_wait,
            )
        };
        Ok(self
            .hold_until_stable(id, None, read, judge)
            .await?
            .map(|(checks, last)| (checks, last.map(|(s, _)| s))))
    }
}

/// Why a service update did not hold, when the engine undid or paused it:
/// its state, its message, the tasks that failed and the image its spec
/// runs now. `None` while it holds.
pub(super) fn update_undone(s: &ServiceView, checks: &[VerificationCheck]) -> Option<String> {
    let sum = &s.summary;
    let rolled_back = matches!(
        sum.update_state,
        UpdateState::RollbackStarted | UpdateState::RollbackCompleted | UpdateState::RollbackPaused
    );
    if !rolled_back && !sum.update_state.paused() {
        return None;
    }
    let failed = checks
        .iter()
        .find(|c| c.level == "healthy" && !c.ok)
        .map(|c| format!("; {}", c.detail))
        .unwrap_or_default();
    let message = if s.update_message.is_empty() {
        String::new()
    } else {
        format!(": \"{}\"", s.update_message)
    };
    Some(if rolled_back {
        format!(
            "the engine rolled the update of {} back ({}{message}){failed}; its spec runs {} again. The rollback was Swarm's own (failure_action: rollback), within the executor's health window.",
            sum.name, sum.update_state, sum.image
        )
    } else {
        format!(
            "the engine paused the update of {} ({}{message}){failed}; a person decides: `docker service update --rollback {}` or fix and update again.",
            sum.name, sum.update_state, sum.name
        )
    })
}

/// A service's checks: every task it wants runs, its update is settled,
/// after a rollback its spec runs `expect_image`, and no task failed since
/// the write. With a healthcheck they must hold for its start period and
/// probe schedule (at most 60 s); they are waited for `max_wait`.
fn service_judged(
    s: &ServiceView,
    tasks: &[TaskView],
    written_at: i64,
    known_before: &[String],
    expect_image: Option<&str>,
    stable_for: Duration,
    max_wait: Duration,
) -> Judged {
    let hold = match &s.healthcheck {
        Some(hc) => stable_for.max(
            Duration::from_millis(
                hc.start_period_ms
                    + (hc.interval_ms + hc.timeout_ms) * u64::from(hc.retries.max(1)),
            )
            .min(Duration::from_secs(60)),
        ),
        None => stable_for,
    };
    let sum = &s.summary;
    // An update the engine undid (its spec back on another image) or
    // paused is settled: no point waiting for what it will not run.
    let deadline = match (expect_image, &sum.update_state) {
        (Some(_), UpdateState::Paused | UpdateState::RollbackPaused) => Duration::ZERO,
        (Some(image), UpdateState::RollbackCompleted) if sum.image != image => Duration::ZERO,
        _ => max_wait,
    };
    let mut checks = vec![VerificationCheck {
        level: "running".into(),
        ok: sum.desired > 0 && sum.running >= sum.desired,
        detail: format!("{}: {}/{} tasks run", sum.name, sum.running, sum.desired),
    }];
    checks.push(VerificationCheck {
        level: "updated".into(),
        ok: !(sum.update_state.in_progress() || sum.update_state.paused()),
        detail: format!(
            "update state: {}",
            if sum.update_state == UpdateState::None {
                "none"
            } else {
                sum.update_state.as_str()
            }
        ),
    });
    if let Some(image) = expect_image {
        // The spec names it at once; its tasks run it only once the engine
        // has replaced them.
        let on_it = tasks
            .iter()
            .filter(|t| t.state == TaskState::Running && t.image == image)
            .count() as u64;
        checks.push(VerificationCheck {
            level: "image".into(),
            ok: sum.image == image && on_it >= sum.desired,
            detail: format!(
                "its spec runs {}; {on_it}/{} tasks run it",
                sum.image, sum.desired
            ),
        });
    }
    let failed_since: Vec<&TaskView> = tasks
        .iter()
        .filter(|t| t.failed() && !known_before.contains(&t.id))
        .filter(|t| unix_of(&t.timestamp).is_some_and(|at| at + CLOCK_MARGIN_SECS >= written_at))
        .collect();
    checks.push(VerificationCheck {
        level: "healthy".into(),
        ok: failed_since.is_empty(),
        detail: match failed_since.first() {
            None => "no task failed since the write".into(),
            Some(t) => format!(
                "{} task(s) failed since the write: \"{}\"",
                failed_since.len(),
                t.reason()
            ),
        },
    });
    Judged {
        checks,
        hold,
        deadline,
    }
}
