//! The request state machine:
//! `observing → diagnosing → planning → waiting_approval → executing →
//! verifying → completed | failed` (plus `needs_clarification`, `rejected`,
//! `canceled`). Each transition is saved with its event before the next step
//! starts, so a restarted agent resumes from the store: waiting approvals
//! keep waiting, and a request caught mid-execution is re-verified, never
//! re-executed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::{ApprovalClaims, WriteAction, CLAIMS_VERSION};
use serde_json::json;
use tokio::sync::{broadcast, watch, Notify};

use crate::dependency;
use crate::discovery::{self, Discovery};
use crate::executor_client::{ExecutorClient, ExecutorError};
use crate::llm::investigate::{self, Verdict};
use crate::llm::tools::Journal;
use crate::model::*;
use crate::planner;
use crate::rules::{self, Observation};
use crate::runbook::Runbook;
use crate::store::{Store, StoreError};

/// Without a healthcheck, a container must stay up this long after an action.
const STABLE_FOR: Duration = Duration::from_secs(3);

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub approval_ttl: Duration,
    pub max_iterations: u32,
    pub verify_max_wait: Duration,
    pub verify_poll: Duration,
    pub logs_tail: u32,
    pub runbook: Arc<Runbook>,
    /// Model-backed investigation; `None` (the default) is rules only.
    pub llm: Option<Arc<investigate::Setup>>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("request {0} not found")]
    RequestNotFound(String),
    #[error("approval {0} not found")]
    ApprovalNotFound(String),
    #[error("approval {id} is {status}, not pending")]
    ApprovalNotPending { id: String, status: String },
    #[error("invalid approval: {0}")]
    InvalidApproval(String),
    #[error("request {id} is already {status}")]
    AlreadyFinished { id: String, status: String },
}

/// How a worker learns that something changed under it.
struct Control {
    notify: Notify,
    canceled: AtomicBool,
    /// The same cancellation, for code that must be interrupted mid-await
    /// (a streaming model answer, a retry backoff).
    cancel: watch::Sender<bool>,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            notify: Notify::new(),
            canceled: AtomicBool::new(false),
            cancel: watch::channel(false).0,
        }
    }
}

pub struct Engine {
    store: Arc<Store>,
    executor: ExecutorClient,
    config: EngineConfig,
    events: broadcast::Sender<Event>,
    controls: Mutex<HashMap<String, Arc<Control>>>,
    /// Serializes read-modify-write of one request's document between its
    /// worker and API calls (approve, reject, cancel).
    doc_lock: tokio::sync::Mutex<()>,
    /// Validated model plans between diagnosis and planning. In memory on
    /// purpose: a restarted agent observes again from scratch.
    llm_plans: Mutex<HashMap<String, Plan>>,
}

/// Why a worker stopped early.
enum Stop {
    Canceled,
    Store(StoreError),
}

impl From<StoreError> for Stop {
    fn from(e: StoreError) -> Self {
        Stop::Store(e)
    }
}

impl Engine {
    pub fn new(store: Arc<Store>, executor: ExecutorClient, config: EngineConfig) -> Arc<Engine> {
        let (events, _) = broadcast::channel(1024);
        Arc::new(Engine {
            store,
            executor,
            config,
            events,
            controls: Mutex::new(HashMap::new()),
            doc_lock: tokio::sync::Mutex::new(()),
            llm_plans: Mutex::new(HashMap::new()),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    fn control(&self, id: &str) -> Arc<Control> {
        let mut map = self.controls.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(id.to_string()).or_default().clone()
    }

    /// Load, change and save one request atomically with its event.
    async fn update(
        &self,
        id: &str,
        kind: &str,
        data: serde_json::Value,
        change: impl FnOnce(&mut Request),
    ) -> Result<Request, StoreError> {
        let result = self
            .try_update(id, kind, data, |r| {
                change(r);
                Ok::<(), StoreError>(())
            })
            .await?;
        Ok(result)
    }

    /// Like `update`, but the change may refuse (checked under the same lock
    /// as the write, so two decisions on one approval cannot both win).
    async fn try_update<E: From<StoreError>>(
        &self,
        id: &str,
        kind: &str,
        data: serde_json::Value,
        change: impl FnOnce(&mut Request) -> Result<(), E>,
    ) -> Result<Request, E> {
        let _guard = self.doc_lock.lock().await;
        let mut req = self.store.get(id)?.ok_or_else(|| {
            StoreError::Corrupt(serde::de::Error::custom(format!("request {id} vanished")))
        })?;
        if req.status.is_terminal() {
            // A finished request (canceled, say) is never changed again; the
            // worker notices at its next check and stops.
            return Ok(req);
        }
        change(&mut req)?;
        req.updated_at = now_rfc3339();
        let event = self.store.save(&req, kind, data)?;
        let _ = self.events.send(event);
        Ok(req)
    }

    async fn set_status(
        &self,
        id: &str,
        status: Status,
        message: &str,
    ) -> Result<Request, StoreError> {
        tracing::info!(
            request_id = id,
            status = status.as_str(),
            message,
            "transition"
        );
        self.update(
            id,
            "status",
            json!({"status": status, "message": message}),
            |r| r.status = status,
        )
        .await
    }

    /// Finish a request with its outcome; the `final` event closes streams.
    async fn finish(
        &self,
        id: &str,
        status: Status,
        outcome: String,
    ) -> Result<Request, StoreError> {
        tracing::info!(request_id = id, status = status.as_str(), outcome = %outcome, "finished");
        let req = self
            .update(
                id,
                "final",
                json!({"status": status, "outcome": outcome}),
                |r| {
                    r.status = status;
                    r.outcome = Some(outcome.clone());
                },
            )
            .await?;
        self.controls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        Ok(req)
    }

    pub async fn create(
        self: &Arc<Self>,
        message: String,
        options: RequestOptions,
    ) -> Result<Request, EngineError> {
        let now = now_rfc3339();
        let req = Request {
            id: format!("req-{}", uuid::Uuid::new_v4().simple()),
            message,
            status: Status::Observing,
            created_at: now.clone(),
            updated_at: now,
            options,
            target: None,
            candidates: vec![],
            evidence: vec![],
            diagnosis: None,
            plan: None,
            approvals: vec![],
            execution: vec![],
            verification: None,
            iterations: 0,
            outcome: None,
            error: None,
            llm_usage: None,
        };
        let event = self.store.save(
            &req,
            "created",
            json!({"message": req.message, "options": req.options}),
        )?;
        let _ = self.events.send(event);
        self.spawn(req.id.clone());
        Ok(req)
    }

    fn spawn(self: &Arc<Self>, id: String) {
        let engine = self.clone();
        tokio::spawn(async move {
            match engine.run(&id).await {
                Ok(()) => {}
                Err(Stop::Canceled) => tracing::info!(request_id = %id, "worker stopped: canceled"),
                Err(Stop::Store(e)) => {
                    tracing::error!(request_id = %id, error = %e, "worker stopped: store error")
                }
            }
        });
    }

    /// Resume every unfinished request after a restart.
    pub async fn recover(self: &Arc<Self>) -> Result<usize, EngineError> {
        let unfinished = self.store.unfinished()?;
        for req in &unfinished {
            match req.status {
                Status::Executing => {
                    // The write may or may not have happened; never repeat it.
                    self.update(&req.id, "interrupted", json!({"message": "agent restarted during execution; re-verifying instead of re-executing"}), |r| {
                        r.status = Status::Verifying
                    })
                    .await?;
                }
                Status::Diagnosing | Status::Planning => {
                    self.set_status(
                        &req.id,
                        Status::Observing,
                        "agent restarted; observing again",
                    )
                    .await?;
                }
                _ => {}
            }
            self.spawn(req.id.clone());
        }
        Ok(unfinished.len())
    }

    fn check_canceled(&self, id: &str) -> Result<(), Stop> {
        let finished = self.store.get(id)?.is_none_or(|r| r.status.is_terminal());
        if finished || self.control(id).canceled.load(Ordering::SeqCst) {
            Err(Stop::Canceled)
        } else {
            Ok(())
        }
    }

    async fn run(&self, id: &str) -> Result<(), Stop> {
        loop {
            let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
            if req.status.is_terminal() {
                return Ok(());
            }
            self.check_canceled(id)?;
            let next = match req.status {
                Status::Observing => self.observe(&req).await?,
                Status::Diagnosing => self.diagnose(&req).await?,
                Status::Planning => self.plan(&req).await?,
                Status::WaitingApproval => self.wait_for_approval(&req).await?,
                Status::Executing => self.execute(&req).await?,
                Status::Verifying => self.verify(&req).await?,
                _ => return Ok(()),
            };
            if !next {
                return Ok(());
            }
        }
    }

    async fn fail_on_executor(&self, id: &str, what: &str, e: ExecutorError) -> Result<bool, Stop> {
        let outcome = format!("could not {what}: {e}");
        self.update(id, "error", json!({"message": outcome}), |r| {
            r.error = Some(outcome.clone())
        })
        .await?;
        self.finish(id, Status::Failed, outcome).await?;
        Ok(false)
    }

    async fn add_evidence(
        &self,
        id: &str,
        kind: &str,
        source: &str,
        data: serde_json::Value,
        summary: String,
    ) -> Result<String, Stop> {
        let ev = Evidence {
            id: format!("ev-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
            kind: kind.into(),
            source: source.into(),
            timestamp: now_rfc3339(),
            data,
        };
        let ev_id = ev.id.clone();
        self.update(
            id,
            "evidence",
            json!({"id": ev.id, "type": ev.kind, "source": ev.source, "summary": summary}),
            move |r| r.evidence.push(ev),
        )
        .await?;
        Ok(ev_id)
    }

    /// Observe: find the target, then gather its state and logs.
    async fn observe(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        if req.target.is_none() {
            let containers = match self.executor.list(id, true).await {
                Ok(c) => c,
                Err(e) => return self.fail_on_executor(id, "list containers", e).await,
            };
            let summary = format!("{} containers visible", containers.len());
            self.add_evidence(
                id,
                "container_list",
                "ListContainers",
                serde_json::to_value(&containers).unwrap_or_default(),
                summary,
            )
            .await?;
            let found = match &req.options.container {
                Some(name) => discovery::exact(name, &containers),
                None => discovery::discover(&req.message, &containers),
            };
            match found {
                Discovery::Found(c) => {
                    let target = Target {
                        kind: "container".into(),
                        container_id: c.container_id.clone(),
                        container_name: c.container_name.clone(),
                        service: c.service.clone(),
                    };
                    self.update(id, "target", json!({"target": target, "why": c.why}), |r| {
                        r.target = Some(target.clone())
                    })
                    .await?;
                }
                Discovery::Ambiguous(cands) | Discovery::NoMatch(cands) => {
                    let outcome = Self::clarification(&req.message, &cands);
                    self.update(id, "candidates", json!({"candidates": cands}), |r| {
                        r.candidates = cands.clone()
                    })
                    .await?;
                    if self.config.llm.is_some() && req.options.container.is_none() {
                        // A question ("which containers use the most
                        // memory?") names no container: the model may
                        // answer it from evidence, or ask its own question.
                        if self.observe_policy(id).await?.is_none() {
                            return Ok(false);
                        }
                        self.set_status(
                            id,
                            Status::Diagnosing,
                            "no single target; the model investigates",
                        )
                        .await?;
                        return Ok(true);
                    }
                    self.finish(id, Status::NeedsClarification, outcome).await?;
                    return Ok(false);
                }
            }
        }
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        let Some(target) = req.target.clone() else {
            return Ok(false);
        };
        if !req.evidence.iter().any(|e| e.kind == "runbook") {
            if let Some((service, notes)) = self
                .config
                .runbook
                .lookup(target.service.as_deref(), &target.container_name)
            {
                let entry = RunbookEvidence {
                    service: service.to_string(),
                    depends_on: notes.depends_on.clone(),
                    http_check: notes.http_check.clone(),
                    notes: notes.notes.clone(),
                };
                let summary = format!(
                    "runbook entry `{service}`: depends on [{}]{}",
                    entry.depends_on.join(", "),
                    entry
                        .notes
                        .as_ref()
                        .map(|n| format!("; notes: {n}"))
                        .unwrap_or_default()
                );
                self.add_evidence(
                    id,
                    "runbook",
                    "runbook",
                    serde_json::to_value(&entry).unwrap_or_default(),
                    summary,
                )
                .await?;
            }
        }
        let container = match self.executor.inspect(id, &target.container_id).await {
            Ok(c) => c,
            Err(e) => {
                return self
                    .fail_on_executor(id, &format!("inspect {}", target.container_name), e)
                    .await
            }
        };
        let summary = format!(
            "state={} exit={} health={} oom_killed={} restarts={}",
            container.status,
            container.exit_code,
            container.health_status,
            container.oom_killed,
            container.restart_count
        );
        self.add_evidence(
            id,
            "inspect",
            "InspectContainer",
            serde_json::to_value(&container).unwrap_or_default(),
            summary,
        )
        .await?;
        let policy = self.observe_policy(id).await?;
        let Some(policy) = policy else {
            return Ok(false);
        };
        // Never ask for more than the executor allows: it refuses, not clamps.
        let tail = match policy.logs_max_lines {
            0 => self.config.logs_tail,
            max => self.config.logs_tail.min(max),
        };
        let logs = match self.executor.logs(id, &target.container_id, tail).await {
            Ok(l) => l,
            Err(e) => {
                return self
                    .fail_on_executor(id, &format!("read logs of {}", target.container_name), e)
                    .await
            }
        };
        let summary = format!(
            "{} lines{}{}",
            logs.lines.len(),
            if logs.truncated { ", truncated" } else { "" },
            if logs.redactions > 0 {
                format!(", {} secrets redacted", logs.redactions)
            } else {
                String::new()
            }
        );
        self.add_evidence(
            id,
            "logs",
            "ContainerLogs",
            serde_json::to_value(&logs).unwrap_or_default(),
            summary,
        )
        .await?;
        if container.running {
            // Resource usage backs memory and CPU advice; a failure here is
            // not worth failing the request over.
            match self.executor.stats(id, &target.container_id).await {
                Ok(stats) => {
                    let summary = format!(
                        "cpu {:.1}%, memory {} of {} ({:.0}%)",
                        stats.cpu_percent,
                        planner::human_bytes(stats.memory_usage_bytes),
                        planner::human_bytes(stats.memory_limit_bytes),
                        stats.memory_percent
                    );
                    self.add_evidence(
                        id,
                        "stats",
                        "ContainerStats",
                        serde_json::to_value(&stats).unwrap_or_default(),
                        summary,
                    )
                    .await?;
                }
                Err(e) => tracing::warn!(request_id = %id, error = %e, "stats unavailable"),
            }
        }
        self.set_status(id, Status::Diagnosing, "evidence gathered")
            .await?;
        Ok(true)
    }

    /// The executor's policy, recorded as evidence; `None` when the request
    /// was failed because it could not be read.
    async fn observe_policy(&self, id: &str) -> Result<Option<PolicyView>, Stop> {
        let policy = match self.executor.policy(id).await {
            Ok(p) => p,
            Err(e) => {
                self.fail_on_executor(id, "read the executor's policy", e)
                    .await?;
                return Ok(None);
            }
        };
        let summary = format!(
            "start={} restart={} stop={} http_checks=[{}]",
            policy.start_enabled,
            policy.restart_enabled,
            policy.stop_enabled,
            policy.http_checks.join(", ")
        );
        self.add_evidence(
            id,
            "policy",
            "GetPolicy",
            serde_json::to_value(&policy).unwrap_or_default(),
            summary,
        )
        .await?;
        Ok(Some(policy))
    }

    fn latest_policy(req: &Request) -> Option<PolicyView> {
        let ev = req.evidence.iter().rev().find(|e| e.kind == "policy")?;
        serde_json::from_value(ev.data.clone()).ok()
    }

    /// The newest inspect and logs evidence of the target.
    fn latest(req: &Request) -> Option<(ContainerView, String, LogsView, String)> {
        let ins = req.evidence.iter().rev().find(|e| e.kind == "inspect")?;
        let logs = req.evidence.iter().rev().find(|e| e.kind == "logs")?;
        let c: ContainerView = serde_json::from_value(ins.data.clone()).ok()?;
        let l: LogsView = serde_json::from_value(logs.data.clone()).ok()?;
        Some((c, ins.id.clone(), l, logs.id.clone()))
    }

    /// What to ask the operator when no single container fits.
    fn clarification(message: &str, cands: &[Candidate]) -> String {
        let ambiguous = cands.iter().all(|c| c.score > 0) && !cands.is_empty();
        let names: Vec<String> = cands.iter().map(|c| c.container_name.clone()).collect();
        if ambiguous {
            format!(
                "more than one container fits: {}. Ask again with --container NAME.",
                names.join(", ")
            )
        } else if names.is_empty() {
            "no container matches and none is visible to the executor".to_string()
        } else {
            format!("no container matches \"{}\". Visible containers: {}. Ask again with --container NAME.", message, names.join(", "))
        }
    }

    async fn diagnose(&self, req: &Request) -> Result<bool, Stop> {
        match self.config.llm.clone() {
            Some(setup) => self.diagnose_with_model(req, &setup).await,
            None => self.diagnose_with_rules(req, None, None).await,
        }
    }

    /// The model investigates; whatever it cannot deliver, the rules engine
    /// does, and the request says so (an `llm_fallback` event and a note in
    /// the diagnosis).
    async fn diagnose_with_model(
        &self,
        req: &Request,
        setup: &investigate::Setup,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        // The analyzer's view, as the rules path would have it, including
        // the dependency's state.
        let mut analyzer = None;
        if let Some((c, ins, logs, logs_ev)) = Self::latest(req) {
            let finding = rules::diagnose(&Observation {
                container: &c,
                container_evidence: &ins,
                logs: &logs,
                logs_evidence: &logs_ev,
            });
            let mut diagnosis = finding.diagnosis.clone();
            if let Some(cause) = self.examine_dependency(req, &finding, &c, &logs_ev).await? {
                diagnosis.causes.push(cause);
            }
            analyzer = Some(diagnosis);
        }
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        self.update(
            id,
            "llm_started",
            json!({"model": setup.provider.model, "analyzer": analyzer.as_ref().map(|d| &d.summary)}),
            |_| {},
        )
        .await?;
        let mut cancel = self.control(id).cancel.subscribe();
        let journal = EngineJournal { engine: self, id };
        let report = investigate::investigate(
            setup,
            investigate::Input {
                request: &req,
                analyzer: analyzer.as_ref(),
                policy: Self::latest_policy(&req),
            },
            &self.executor,
            &journal,
            &mut cancel,
        )
        .await;
        let usage = report.usage;
        let turns = report.turns;
        self.update(
            id,
            "llm_usage",
            json!({"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens, "model_calls": turns}),
            |r| {
                let u = r.llm_usage.get_or_insert_with(LlmUsage::default);
                u.prompt_tokens += usage.prompt_tokens;
                u.completion_tokens += usage.completion_tokens;
                u.model_calls += turns;
            },
        )
        .await?;
        match report.verdict {
            Verdict::Canceled => Err(Stop::Canceled),
            Verdict::Answer {
                answer,
                evidence_ids,
            } => {
                self.update(
                    id,
                    "answer",
                    json!({"answer": answer, "evidence_ids": evidence_ids}),
                    |_| {},
                )
                .await?;
                self.finish(id, Status::Completed, answer).await?;
                Ok(false)
            }
            Verdict::Clarify { question } => {
                self.finish(id, Status::NeedsClarification, question)
                    .await?;
                Ok(false)
            }
            Verdict::Fallback { reason } => {
                tracing::warn!(request_id = %id, reason = %reason, "falling back to the rules engine");
                self.update(
                    id,
                    "llm_fallback",
                    json!({"message": format!("{reason}; the rules engine decides")}),
                    |_| {},
                )
                .await?;
                if req.target.is_none() {
                    let outcome = Self::clarification(&req.message, &req.candidates);
                    self.finish(id, Status::NeedsClarification, outcome).await?;
                    return Ok(false);
                }
                self.diagnose_with_rules(&req, Some(reason), analyzer).await
            }
            Verdict::Diagnosis {
                mut diagnosis,
                plan,
                note,
            } => {
                if let Some(note) = &note {
                    self.update(
                        id,
                        "llm_fallback",
                        json!({"message": format!("{note}; the rules planner plans from the model's diagnosis")}),
                        |_| {},
                    )
                    .await?;
                }
                if let Some(note) = &note {
                    diagnosis.summary = format!(
                        "{} (planned by the rules planner: {note})",
                        diagnosis.summary
                    );
                }
                self.update(id, "diagnosis", json!({"diagnosis": diagnosis}), |r| {
                    r.diagnosis = Some(diagnosis.clone())
                })
                .await?;
                if req.options.diagnose_only || req.target.is_none() {
                    let outcome = format!(
                        "diagnosis: {} (confidence {:.0}%). {}",
                        diagnosis.summary,
                        diagnosis.confidence * 100.0,
                        if req.options.diagnose_only {
                            "Suggest-only mode: no plan was proposed."
                        } else {
                            "No single target container, so no plan."
                        }
                    );
                    self.finish(id, Status::Completed, outcome).await?;
                    return Ok(false);
                }
                if let Some(plan) = plan {
                    self.llm_plans
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id.clone(), plan);
                }
                self.set_status(id, Status::Planning, "planning").await?;
                Ok(true)
            }
        }
    }

    /// The rules engine's diagnosis. `model_note` says why a configured model
    /// did not decide (it is appended to the summary).
    async fn diagnose_with_rules(
        &self,
        req: &Request,
        model_note: Option<String>,
        analyzed: Option<Diagnosis>,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        // The model path already ran the rules (and looked at the
        // dependency); do not look twice.
        let mut diagnosis = match analyzed {
            Some(d) => d,
            None => {
                let Some((c, ins, logs, logs_ev)) = Self::latest(req) else {
                    self.finish(id, Status::Failed, "no evidence to diagnose".into())
                        .await?;
                    return Ok(false);
                };
                let finding = rules::diagnose(&Observation {
                    container: &c,
                    container_evidence: &ins,
                    logs: &logs,
                    logs_evidence: &logs_ev,
                });
                let mut diagnosis = finding.diagnosis.clone();
                if let Some(cause) = self.examine_dependency(req, &finding, &c, &logs_ev).await? {
                    diagnosis.causes.push(cause);
                }
                diagnosis
            }
        };
        if let Some(note) = model_note {
            diagnosis.summary = format!(
                "{} (diagnosed by the rules engine: {note})",
                diagnosis.summary
            );
        }
        self.update(id, "diagnosis", json!({"diagnosis": diagnosis}), |r| {
            r.diagnosis = Some(diagnosis.clone())
        })
        .await?;
        if req.options.diagnose_only {
            let outcome = format!(
                "diagnosis: {} (confidence {:.0}%). Suggest-only mode: no plan was proposed.",
                diagnosis.summary,
                diagnosis.confidence * 100.0
            );
            self.finish(id, Status::Completed, outcome).await?;
            return Ok(false);
        }
        self.set_status(id, Status::Planning, "planning").await?;
        Ok(true)
    }

    async fn plan(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let model_plan = self
            .llm_plans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let (Some(plan), Some(diagnosis)) = (model_plan, req.diagnosis.clone()) {
            return self.propose(req, plan, &diagnosis).await;
        }
        let (Some((c, ins, logs, logs_ev)), Some(target)) = (Self::latest(req), req.target.clone())
        else {
            self.finish(id, Status::Failed, "no evidence to plan from".into())
                .await?;
            return Ok(false);
        };
        let Some(policy) = Self::latest_policy(req) else {
            self.finish(
                id,
                Status::Failed,
                "the executor's policy was not observed".into(),
            )
            .await?;
            return Ok(false);
        };
        let finding = rules::diagnose(&Observation {
            container: &c,
            container_evidence: &ins,
            logs: &logs,
            logs_evidence: &logs_ev,
        });
        // The saved diagnosis includes what diagnosis learned beyond the
        // rules (the dependency's state).
        let mut finding = finding;
        if let Some(d) = &req.diagnosis {
            finding.diagnosis = d.clone();
        }
        let context = Self::context(req, &finding, &c);
        let plan = planner::plan(&finding, &c, &target, &policy, &req.execution, &context);
        self.propose(req, plan, &finding.diagnosis).await
    }

    /// Save the plan; finish when it has no step, else request approvals.
    async fn propose(
        &self,
        req: &Request,
        plan: Plan,
        diagnosis: &Diagnosis,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        self.update(id, "plan", json!({"plan": plan}), |r| {
            r.plan = Some(plan.clone())
        })
        .await?;
        let class = diagnosis
            .causes
            .first()
            .map(|c| c.class)
            .unwrap_or(FaultClass::Unknown);
        if plan.steps.is_empty() {
            let tried = Self::tried(req);
            let (status, outcome) = if !req.execution.is_empty() {
                (
                    Status::Failed,
                    format!("not recovered after {tried}. {}", plan.advice.join(" ")),
                )
            } else if class == FaultClass::Healthy {
                (
                    Status::Completed,
                    format!("nothing wrong found: {}", diagnosis.summary),
                )
            } else {
                (
                    Status::Completed,
                    format!(
                        "no automatic fix: {} {}",
                        diagnosis.summary,
                        plan.advice.join(" ")
                    ),
                )
            };
            self.finish(id, status, outcome.trim().to_string()).await?;
            return Ok(false);
        }
        let now = unix_now();
        let expires_at = now + self.config.approval_ttl.as_secs() as i64;
        let approvals: Vec<ApprovalRecord> = plan
            .steps
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let action = WriteAction::parse(&s.action)?;
                let claims = ApprovalClaims {
                    version: CLAIMS_VERSION,
                    approval_id: format!("apr-{}", uuid::Uuid::new_v4().simple()),
                    request_id: id.clone(),
                    action,
                    container_id: s.target.container_id.clone(),
                    container_name: s.target.container_name.clone(),
                    plan_digest: plan.digest.clone(),
                    issued_at: now,
                    expires_at,
                    nonce: ApprovalClaims::new_nonce(),
                };
                Some(ApprovalRecord {
                    id: claims.approval_id.clone(),
                    request_id: id.clone(),
                    step: i,
                    status: ApprovalStatus::Pending,
                    claims: B64.encode(claims.encode()),
                    expires_at,
                    key_id: None,
                    signature: None,
                    decided_at: None,
                })
            })
            .collect();
        for a in &approvals {
            let a = a.clone();
            self.update(
                id,
                "approval_requested",
                json!({"approval": a, "step": plan.steps.get(a.step)}),
                |r| r.approvals.push(a.clone()),
            )
            .await?;
        }
        self.set_status(id, Status::WaitingApproval, "waiting for approval")
            .await?;
        Ok(true)
    }

    fn tried(req: &Request) -> String {
        let done: Vec<String> = req
            .execution
            .iter()
            .map(|e| format!("{} ({})", e.action, if e.ok { "done" } else { "failed" }))
            .collect();
        if done.is_empty() {
            "no action".into()
        } else {
            done.join(", ")
        }
    }

    /// Approvals of the current plan (the newest round of them).
    fn current_approvals(req: &Request) -> Vec<ApprovalRecord> {
        let n = req.plan.as_ref().map(|p| p.steps.len()).unwrap_or(0);
        let start = req.approvals.len().saturating_sub(n);
        req.approvals[start..].to_vec()
    }

    async fn wait_for_approval(&self, req: &Request) -> Result<bool, Stop> {
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
                self.update(id, "approval_expired", json!({"approvals": expired}), |r| {
                    for a in r.approvals.iter_mut().filter(|a| expired.contains(&a.id)) {
                        a.status = ApprovalStatus::Expired;
                    }
                })
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

    async fn execute(&self, req: &Request) -> Result<bool, Stop> {
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
            let record = ExecutionRecord {
                step: approval.step,
                action: step.action.clone(),
                container_id: step.target.container_id.clone(),
                approval_id: approval.id.clone(),
                ok: result.is_ok(),
                message: match &result {
                    Ok(()) => format!("{} {}: done", step.action, step.target.container_name),
                    Err(e) => e.to_string(),
                },
                at: now_rfc3339(),
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

    /// When the fault involves a dependency, find the container behind the
    /// name the logs (or the runbook) give, inspect it, and say what state
    /// it is in, as evidence and as a cause.
    async fn examine_dependency(
        &self,
        req: &Request,
        finding: &rules::Finding,
        c: &ContainerView,
        logs_ev: &str,
    ) -> Result<Option<Cause>, Stop> {
        let id = &req.id;
        if !finding
            .diagnosis
            .causes
            .iter()
            .any(|c| c.class == FaultClass::DependencyUnavailable)
        {
            return Ok(None);
        }
        let runbook_dep = Self::latest_of::<RunbookEvidence>(req, "runbook")
            .and_then(|r| r.depends_on.first().cloned());
        let named = finding
            .detail
            .as_deref()
            .and_then(|d| dependency::parse(d, "log"))
            .or_else(|| {
                finding
                    .matched_line
                    .as_deref()
                    .and_then(dependency::from_line)
            })
            .or_else(|| {
                runbook_dep
                    .as_deref()
                    .and_then(|d| dependency::parse(d, "runbook"))
            });
        let Some(named) = named else { return Ok(None) };
        let containers: Vec<ContainerSummaryView> =
            Self::latest_of(req, "container_list").unwrap_or_default();
        let project = c.labels.get(COMPOSE_PROJECT_LABEL).map(String::as_str);
        let found = dependency::find(&named, project, &containers)
            .filter(|d| d.id != c.id)
            .cloned();
        let container = match &found {
            Some(summary) => match self.executor.inspect(id, &summary.id).await {
                Ok(view) => Some(view),
                Err(e) => {
                    tracing::warn!(request_id = %id, error = %e, "cannot inspect the dependency");
                    None
                }
            },
            None => {
                self.find_by_network_alias(id, &named.host, c, &containers)
                    .await
            }
        };
        let state = planner::DependencyState {
            named: named.display(),
            source: named.source.into(),
            container: container.clone(),
        };
        let (summary, reason) = match &container {
            Some(d) => (
                format!("{} is container {}: state={} health={}", named.display(), d.name, d.status, d.health_status),
                format!("{} cannot reach {}; that is container {}, which is {}{}", c.name, named.display(), d.name, d.status, if d.health_status != "none" { format!(" and {}", d.health_status) } else { String::new() }),
            ),
            None => (
                format!("no container behind {}", named.display()),
                format!("{} cannot reach {}, and no container by that name, compose service or address exists", c.name, named.display()),
            ),
        };
        let ev = self
            .add_evidence(
                id,
                "dependency",
                "InspectContainer",
                serde_json::to_value(&state).unwrap_or_default(),
                summary,
            )
            .await?;
        Ok(Some(Cause {
            class: FaultClass::DependencyUnavailable,
            reason,
            confidence: 0.8,
            evidence_ids: vec![ev, logs_ev.to_string()],
        }))
    }

    /// Network aliases (`--network-alias db`, compose service aliases) are
    /// only visible in inspect output: look at the containers sharing a
    /// network with the target, a bounded number of them.
    async fn find_by_network_alias(
        &self,
        id: &str,
        host: &str,
        target: &ContainerView,
        containers: &[ContainerSummaryView],
    ) -> Option<ContainerView> {
        const MAX_INSPECTED: usize = 30;
        for summary in containers
            .iter()
            .filter(|s| s.id != target.id)
            .take(MAX_INSPECTED)
        {
            let Ok(view) = self.executor.inspect(id, &summary.id).await else {
                continue;
            };
            let shares_network = view.networks.iter().any(|n| target.networks.contains(n));
            if shares_network && view.aliases.iter().any(|a| a.eq_ignore_ascii_case(host)) {
                return Some(view);
            }
        }
        None
    }

    /// The newest evidence of one kind, decoded.
    fn latest_of<T: serde::de::DeserializeOwned>(req: &Request, kind: &str) -> Option<T> {
        let ev = req.evidence.iter().rev().find(|e| e.kind == kind)?;
        serde_json::from_value(ev.data.clone()).ok()
    }

    /// What the planner needs beyond the target's own state, all taken from
    /// this request's evidence.
    fn context(req: &Request, finding: &rules::Finding, c: &ContainerView) -> planner::Context {
        let containers: Vec<ContainerSummaryView> =
            Self::latest_of(req, "container_list").unwrap_or_default();
        let port = c.requested_host_ports.first().copied().or_else(|| {
            let text = finding
                .detail
                .clone()
                .or(finding.matched_line.clone())
                .unwrap_or_default();
            port_in(&text)
        });
        let port_holder = port.and_then(|p| {
            containers
                .iter()
                .find(|o| o.id != c.id && o.public_ports.contains(&p))
                .map(|o| o.name.clone())
        });
        let memory_usage_bytes =
            Self::latest_of::<StatsView>(req, "stats").map(|s| s.memory_usage_bytes);
        let notes = Self::latest_of::<RunbookEvidence>(req, "runbook").and_then(|r| r.notes);
        planner::Context {
            dependency: Self::latest_of(req, "dependency"),
            port_holder,
            port,
            memory_usage_bytes,
            notes,
        }
    }

    /// Poll one container until it is running (and healthy, when it has a
    /// healthcheck, waiting out its probe schedule; stable for a few seconds
    /// when it has none), or until the deadline. Returns the last checks
    /// and the last inspect.
    async fn wait_ready(
        &self,
        id: &str,
        container_id: &str,
    ) -> Result<(Vec<VerificationCheck>, Option<ContainerView>), Stop> {
        let started = Instant::now();
        let mut deadline = self.config.verify_max_wait;
        let mut last: Option<ContainerView> = None;
        // Every check must hold for a while, not at one lucky moment: a
        // process that wedges again a second after a restart is not fixed.
        let mut ok_since: Option<Instant> = None;
        let mut hold = STABLE_FOR;
        loop {
            self.check_canceled(id)?;
            let mut checks = Vec::new();
            match self.executor.inspect(id, container_id).await {
                Ok(c) => {
                    if let Some(hc) = &c.healthcheck {
                        hold = STABLE_FOR
                            .max(Duration::from_millis(
                                hc.interval_ms * u64::from(hc.retries.max(1)),
                            ))
                            .min(Duration::from_secs(30));
                        let needed = Duration::from_millis(
                            hc.start_period_ms
                                + (hc.interval_ms + hc.timeout_ms) * (hc.retries as u64 + 2),
                        ) + Duration::from_secs(5);
                        deadline =
                            needed.clamp(Duration::from_secs(10), self.config.verify_max_wait);
                    } else {
                        deadline = deadline.min(Duration::from_secs(15));
                    }
                    let running = c.running && !c.restarting;
                    checks.push(VerificationCheck {
                        level: "running".into(),
                        ok: running,
                        detail: format!("{}: state={} exit={}", c.name, c.status, c.exit_code),
                    });
                    if c.healthcheck.is_some() {
                        checks.push(VerificationCheck {
                            level: "healthy".into(),
                            ok: c.health_status == "healthy",
                            detail: format!("{}: health={}", c.name, c.health_status),
                        });
                    }
                    last = Some(c);
                }
                Err(e) => checks.push(VerificationCheck {
                    level: "running".into(),
                    ok: false,
                    detail: e.to_string(),
                }),
            }
            let all_ok = checks.iter().all(|c| c.ok);
            if all_ok {
                ok_since.get_or_insert_with(Instant::now);
            } else {
                ok_since = None;
            }
            let held = ok_since.is_some_and(|t| t.elapsed() >= hold);
            if let Some(t) = ok_since {
                checks.push(VerificationCheck {
                    level: "stable".into(),
                    ok: held,
                    detail: format!("held for {}s of {}s", t.elapsed().as_secs(), hold.as_secs()),
                });
            }
            if held || started.elapsed() >= deadline + hold {
                return Ok((checks, last));
            }
            tokio::time::sleep(self.config.verify_poll).await;
        }
    }

    /// Success of the Docker call is not success: the container must be
    /// running, then healthy when it has a healthcheck (waiting out its
    /// interval), and must stay up; then the HTTP check, if one is set.
    async fn verify(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let Some(target) = req.target.clone() else {
            return Ok(false);
        };
        let started = Instant::now();
        let (mut checks, last) = self.wait_ready(id, &target.container_id).await?;
        let mut evidence_ids = Vec::new();
        // Level 3: the operator-configured HTTP check, once the container is
        // running (and healthy); polled until it answers 2xx or time is up.
        let runbook_check =
            Self::latest_of::<RunbookEvidence>(req, "runbook").and_then(|r| r.http_check);
        let http_service = Self::latest_policy(req).and_then(|p| {
            [
                runbook_check.clone(),
                target.service.clone(),
                Some(target.container_name.clone()),
            ]
            .into_iter()
            .flatten()
            .find(|s| p.http_checks.contains(s))
        });
        if let (Some(service), true) = (http_service, checks.iter().all(|c| c.ok)) {
            let http_deadline = started.elapsed() + Duration::from_secs(20);
            let last_check = loop {
                self.check_canceled(id)?;
                let result = self.executor.check_http(id, &service).await;
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
                            "http_check",
                            "CheckHttp",
                            serde_json::to_value(&r).unwrap_or_default(),
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
        let ok = checks.iter().all(|c| c.ok);
        if let Some(c) = &last {
            let summary = format!(
                "after the action: state={} health={}",
                c.status, c.health_status
            );
            evidence_ids.push(
                self.add_evidence(
                    id,
                    "verification",
                    "InspectContainer",
                    serde_json::to_value(c).unwrap_or_default(),
                    summary,
                )
                .await?,
            );
        }
        let verification = Verification {
            ok,
            checks: checks.clone(),
            evidence_ids,
        };
        self.update(
            id,
            "verification",
            json!({"verification": verification}),
            |r| r.verification = Some(verification.clone()),
        )
        .await?;
        if ok {
            let levels: Vec<&str> = checks.iter().map(|c| c.level.as_str()).collect();
            self.finish(
                id,
                Status::Completed,
                format!(
                    "{} recovered: verified {}",
                    target.container_name,
                    levels.join(", ")
                ),
            )
            .await?;
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
            self.update(id, "iteration", json!({"iterations": iterations}), |r| {
                r.iterations = iterations
            })
            .await?;
            self.finish(id, Status::Failed, outcome).await?;
            return Ok(false);
        }
        self.update(id, "iteration", json!({"iterations": iterations, "message": "verification failed; diagnosing again with new evidence"}), |r| {
            r.iterations = iterations;
            r.status = Status::Observing;
        })
        .await?;
        Ok(true)
    }

    // ---- Called by the API. ----

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

    fn find_approval(&self, approval_id: &str) -> Result<(Request, ApprovalRecord), EngineError> {
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
        if signature.len() != 64 {
            return Err(EngineError::InvalidApproval(
                "signature must be 64 bytes (Ed25519)".into(),
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

    async fn decide(
        &self,
        approval_id: &str,
        status: ApprovalStatus,
        signed: Option<(String, String)>,
    ) -> Result<Request, EngineError> {
        let (req, _) = self.find_approval(approval_id)?;
        let kind = if status == ApprovalStatus::Approved {
            "approved"
        } else {
            "rejected"
        };
        let updated = self
            .try_update(&req.id, "approval_decided", json!({"approval_id": approval_id, "decision": kind, "key_id": signed.as_ref().map(|s| &s.0)}), |r| {
                let waiting = r.status == Status::WaitingApproval;
                let Some(rec) = r.approvals.iter_mut().find(|x| x.id == approval_id) else {
                    return Err(EngineError::ApprovalNotFound(approval_id.into()));
                };
                if rec.status != ApprovalStatus::Pending || !waiting {
                    return Err(EngineError::ApprovalNotPending { id: approval_id.into(), status: format!("{:?}", rec.status).to_lowercase() });
                }
                if rec.expires_at <= unix_now() {
                    return Err(EngineError::ApprovalNotPending { id: approval_id.into(), status: "expired".into() });
                }
                rec.status = status;
                rec.decided_at = Some(now_rfc3339());
                if let Some((key_id, sig)) = &signed {
                    rec.key_id = Some(key_id.clone());
                    rec.signature = Some(sig.clone());
                }
                Ok(())
            })
            .await?;
        self.control(&req.id).notify.notify_one();
        Ok(updated)
    }

    pub async fn cancel(&self, id: &str) -> Result<Request, EngineError> {
        let req = self
            .store
            .get(id)?
            .ok_or_else(|| EngineError::RequestNotFound(id.into()))?;
        if req.status.is_terminal() {
            return Err(EngineError::AlreadyFinished {
                id: id.into(),
                status: req.status.as_str().into(),
            });
        }
        let control = self.control(id);
        control.canceled.store(true, Ordering::SeqCst);
        control.cancel.send_replace(true);
        control.notify.notify_one();
        let note = if req.status == Status::Executing {
            "canceled; an action already sent to the executor may still complete"
        } else {
            "canceled by the operator"
        };
        Ok(self.finish(id, Status::Canceled, note.into()).await?)
    }
}

/// A port number in text like `listen tcp :8080`, `0.0.0.0:8080 failed`.
fn port_in(text: &str) -> Option<u32> {
    text.split(|c: char| !(c.is_ascii_digit() || c == ':'))
        .filter_map(|t| t.rsplit_once(':').map(|(_, p)| p))
        .find_map(|p| p.parse::<u32>().ok().filter(|n| (1..=65535).contains(n)))
}

/// The runbook entry for the target, as recorded in evidence.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
struct RunbookEvidence {
    service: String,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    http_check: Option<String>,
    #[serde(default)]
    notes: Option<String>,
}

/// The engine's side of an investigation's trace: evidence and events go to
/// the request's store and stream like every other step's.
struct EngineJournal<'a> {
    engine: &'a Engine,
    id: &'a str,
}

impl Journal for EngineJournal<'_> {
    async fn evidence(&self, evidence: Evidence, summary: String) {
        let data = json!({"id": evidence.id, "type": evidence.kind, "source": evidence.source, "summary": summary});
        if let Err(e) = self
            .engine
            .update(self.id, "evidence", data, move |r| {
                r.evidence.push(evidence)
            })
            .await
        {
            tracing::error!(request_id = %self.id, error = %e, "cannot save evidence");
        }
    }

    async fn event(&self, kind: &'static str, data: serde_json::Value) {
        if let Err(e) = self.engine.update(self.id, kind, data, |_| {}).await {
            tracing::error!(request_id = %self.id, error = %e, "cannot save event");
        }
    }
}
