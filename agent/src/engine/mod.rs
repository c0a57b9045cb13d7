//! The request engine: one worker per request walks it through the
//! lifecycle (`lifecycle.rs` holds the table), one module per phase:
//!
//! - `observe`: find the target, read its state, logs, stats and the
//!   executor's policy as evidence;
//! - `diagnose`: the rules engine (and the model, when configured) name the
//!   cause; `dependency` examines a dependency the cause points at, `disk`
//!   follows a full disk to the filesystem that is full;
//! - `plan`: steps the executor's policy allows, or advice instead of a write;
//! - `approve`: exact claims for each write, then waiting for a human's
//!   signature (and the API side of approving and rejecting);
//! - `execute`: send each approved write once, never again;
//! - `verify`: running, healthy, stable, then the HTTP check.
//!
//! The engine reaches the executor only through the `Executor` trait, so
//! each phase is tested with a scripted executor (`tests.rs`).
//!
//! Each transition is saved with its event before the next step starts, so a
//! restarted agent resumes from the store: waiting approvals keep waiting,
//! and a request caught mid-execution is re-verified, never re-executed.

mod approve;
mod build;
mod dependency;
mod diagnose;
mod disk;
mod execute;
mod find;
mod followup;
mod hosts;
pub mod lifecycle;
mod memory;
mod observe;
mod outage;
mod plan;
mod stable;
mod swarm;
#[cfg(test)]
mod tests;
mod update;
mod verify;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, watch, Notify};

use crate::executor_client::{Executor, ExecutorError};
use crate::hosts::Hosts;
use crate::llm::investigate;
use crate::llm::tools::Journal;
use crate::model::*;
use crate::runbook::Runbook;
use crate::store::{Store, StoreError};

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub approval_ttl: Duration,
    pub max_iterations: u32,
    pub verify_max_wait: Duration,
    pub verify_poll: Duration,
    /// How long every verification check must hold after an action
    /// (`verify.stable_for`; longer for a healthcheck's own schedule): a
    /// process that wedges again a second after a restart is not fixed.
    pub stable_for: Duration,
    /// How long a run must last to count as having run well
    /// (`diagnosis.ran_well_after`).
    pub ran_well_after: Duration,
    pub logs_tail: u32,
    pub runbook: Arc<Runbook>,
    /// Model-backed investigation; `None` (the default) is rules only.
    pub llm: Option<Arc<investigate::Setup>>,
    /// `repair`: a watch or alert request whose first plan an active grant
    /// covers runs without asking a person.
    pub watch_mode: crate::config::WatchMode,
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
    #[error("invalid follow-up: {0}")]
    InvalidFollowUp(String),
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
    /// The executors, one per Docker host; a request acts on its own
    /// host's only (`exec`).
    hosts: Arc<Hosts>,
    config: EngineConfig,
    events: broadcast::Sender<Event>,
    controls: Mutex<HashMap<String, Arc<Control>>>,
    /// Serializes read-modify-write of one request's document between its
    /// worker and API calls (approve, reject, cancel).
    doc_lock: tokio::sync::Mutex<()>,
    /// Validated model plans between diagnosis and planning. In memory on
    /// purpose: a restarted agent observes again from scratch.
    llm_plans: Mutex<HashMap<String, Plan>>,
    /// What finding a request's target read (the policy, whether it was
    /// listed running), for the observation right after. In memory: a
    /// restarted agent reads them again.
    found: Mutex<HashMap<String, FoundRead>>,
    /// Usage samples still on their way when observation had what it
    /// needed: attached at the next phase once they arrive
    /// (`attach_arrived_stats`), dropped when the request ends.
    pending_stats: Mutex<HashMap<String, PendingStats>>,
}

type PendingStats = tokio::task::JoinHandle<Result<StatsView, ExecutorError>>;
type FoundRead = (Option<Box<Result<PolicyView, ExecutorError>>>, bool);

/// A piece of evidence read but not yet recorded, with its one-line summary.
struct Gathered {
    evidence: Evidence,
    summary: String,
}

impl Gathered {
    /// The `evidence` event that says it was added.
    fn announced(&self) -> EvidenceAdded {
        EvidenceAdded {
            id: self.evidence.id.clone(),
            kind: self.evidence.kind_name().to_string(),
            source: self.evidence.source.clone(),
            summary: self.summary.clone(),
        }
    }

    fn new(source: &str, payload: EvidencePayload, summary: String) -> Gathered {
        Gathered {
            evidence: crate::model::new_evidence(source, payload),
            summary,
        }
    }
}

/// The newest evidence of kind `K`, owned, with its id.
fn cited<K: kind::Kind>(req: &Request) -> Option<(K::Payload, String)>
where
    K::Payload: Clone,
{
    req.latest_cited::<K>()
        .map(|(p, id)| (p.clone(), id.to_string()))
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
    /// An engine in front of a lone, unnamed executor.
    pub fn new(
        store: Arc<Store>,
        executor: Arc<dyn Executor>,
        config: EngineConfig,
    ) -> Arc<Engine> {
        Engine::with_hosts(store, Arc::new(Hosts::single(executor)), config)
    }

    pub fn with_hosts(store: Arc<Store>, hosts: Arc<Hosts>, config: EngineConfig) -> Arc<Engine> {
        let (events, _) = broadcast::channel(1024);
        Arc::new(Engine {
            store,
            hosts,
            config,
            events,
            controls: Mutex::new(HashMap::new()),
            doc_lock: tokio::sync::Mutex::new(()),
            llm_plans: Mutex::new(HashMap::new()),
            found: Mutex::new(HashMap::new()),
            pending_stats: Mutex::new(HashMap::new()),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn hosts(&self) -> &Hosts {
        &self.hosts
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
        payload: EventPayload,
        change: impl FnOnce(&mut Request),
    ) -> Result<Request, StoreError> {
        let result = self
            .try_update(id, payload, |r| {
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
        payload: EventPayload,
        change: impl FnOnce(&mut Request) -> Result<(), E>,
    ) -> Result<Request, E> {
        self.update_with_events(id, vec![payload], change).await
    }

    /// Change one request and append several events in one transaction
    /// (a phase's evidence and its status together).
    async fn update_with_events<E: From<StoreError>>(
        &self,
        id: &str,
        events: Vec<EventPayload>,
        change: impl FnOnce(&mut Request) -> Result<(), E>,
    ) -> Result<Request, E> {
        self.update_saying(id, |r| change(r).map(|()| events)).await
    }

    /// Change one request, and append the events the change says (read
    /// from the request as it is under the lock, not from an older copy).
    async fn update_saying<E: From<StoreError>>(
        &self,
        id: &str,
        change: impl FnOnce(&mut Request) -> Result<Vec<EventPayload>, E>,
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
        let from = req.status;
        let events = change(&mut req)?;
        if !lifecycle::allowed(from, req.status) {
            // A bug, not an input: say so loudly in tests, and never save it.
            debug_assert!(false, "illegal transition {from:?} -> {:?}", req.status);
            tracing::error!(
                request_id = id,
                from = from.as_str(),
                to = req.status.as_str(),
                "illegal transition refused"
            );
            req.status = from;
        }
        req.updated_at = now_rfc3339();
        for event in self.store.save_events(&req, events)? {
            let _ = self.events.send(event);
        }
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
            EventPayload::Status(StatusChanged {
                status,
                message: message.into(),
            }),
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
                EventPayload::Final(Finished {
                    status,
                    outcome: outcome.clone(),
                }),
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
        if let Some(stats) = self
            .pending_stats
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
        {
            stats.abort();
        }
        Ok(req)
    }

    pub async fn create(
        self: &Arc<Self>,
        message: String,
        options: RequestOptions,
    ) -> Result<Request, EngineError> {
        self.open(message, options, RequestSource::Ask).await
    }

    /// Open a request from any source (`create` is a person's `ask`).
    pub async fn open(
        self: &Arc<Self>,
        message: String,
        options: RequestOptions,
        source: RequestSource,
    ) -> Result<Request, EngineError> {
        let req = Request::new(
            format!("req-{}", uuid::Uuid::new_v4().simple()),
            message,
            options,
            source,
            now_rfc3339(),
        );
        let event = self.store.save(
            &req,
            EventPayload::Created(Created {
                message: req.message.clone(),
                options: req.options.clone(),
                source: req.source,
            }),
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
            // A host taken out of `hosts:` since: nothing of it can be
            // reached or verified, and no other host may stand in for it.
            if let Some(host) = req.host().filter(|h| self.hosts.get(Some(h)).is_none()) {
                let why = format!(
                    "host {host} is no longer in the agent's hosts ({}); nothing more was done",
                    self.hosts.names().join(", ")
                );
                self.finish(&req.id, Status::Failed, why).await?;
                continue;
            }
            if let Some((status, why)) = lifecycle::resume(req.status) {
                self.update(
                    &req.id,
                    EventPayload::Interrupted(StatusChanged {
                        status,
                        message: why.into(),
                    }),
                    |r| r.status = status,
                )
                .await?;
            }
            self.spawn(req.id.clone());
        }
        Ok(unfinished.len())
    }

    fn check_canceled(&self, id: &str) -> Result<(), Stop> {
        let finished = self.store.status(id)?.is_none_or(|s| s.is_terminal());
        if finished || self.control(id).canceled.load(Ordering::SeqCst) {
            Err(Stop::Canceled)
        } else {
            Ok(())
        }
    }

    /// The one place where a failed executor call ends a request: the call
    /// is named in the outcome. `None` means the request was failed and the
    /// phase must stop.
    async fn required<T>(
        &self,
        id: &str,
        call: &str,
        result: Result<T, ExecutorError>,
    ) -> Result<Option<T>, Stop> {
        let e = match result {
            Ok(value) => return Ok(Some(value)),
            Err(e) => e,
        };
        let outcome = format!("could not {call}: {e}");
        self.update(id, EventPayload::Error(Message::new(&outcome)), |r| {
            r.error = Some(outcome.clone())
        })
        .await?;
        self.finish(id, Status::Failed, outcome).await?;
        Ok(None)
    }

    async fn add_evidence(
        &self,
        id: &str,
        source: &str,
        payload: EvidencePayload,
        summary: String,
    ) -> Result<String, Stop> {
        let ev = Gathered::new(source, payload, summary);
        let ev_id = ev.evidence.id.clone();
        self.record(id, vec![ev], None).await?;
        Ok(ev_id)
    }

    /// Record a phase's evidence, and optionally its next status, in one
    /// transaction; each piece is still streamed as its own event.
    async fn record(
        &self,
        id: &str,
        gathered: Vec<Gathered>,
        status: Option<(Status, &str)>,
    ) -> Result<(), Stop> {
        let mut events: Vec<EventPayload> = gathered
            .iter()
            .map(|g| EventPayload::Evidence(g.announced()))
            .collect();
        if let Some((status, message)) = status {
            tracing::info!(
                request_id = id,
                status = status.as_str(),
                message,
                "transition"
            );
            events.push(EventPayload::Status(StatusChanged {
                status,
                message: message.into(),
            }));
        }
        self.update_with_events(id, events, |r| {
            r.evidence.extend(gathered.into_iter().map(|g| g.evidence));
            if let Some((status, _)) = status {
                r.status = status;
            }
            Ok::<(), StoreError>(())
        })
        .await?;
        Ok(())
    }

    fn latest_policy(req: &Request) -> Option<PolicyView> {
        req.latest::<kind::Policy>().cloned()
    }

    /// The newest evidence of the target that diagnosis reads: inspect and
    /// logs (none without both), its engine events (from `ContainerEvents`,
    /// or the watcher's journal) and what it logged before a past death.
    fn observed(req: &Request) -> Option<Observed> {
        let (container, container_ev) = cited::<kind::Inspect>(req)?;
        let (logs, logs_ev) = cited::<kind::Logs>(req)?;
        let (events, events_ev) = cited::<kind::Events>(req).unwrap_or_default();
        let now_unix = unix_now();
        Some(Observed {
            container,
            container_ev,
            logs,
            logs_ev,
            events,
            events_ev,
            death: cited::<kind::DeathLogs>(req),
            change: cited::<kind::Change>(req),
            asked: Self::asked(req, now_unix),
            now_unix,
        })
    }

    /// Whether the request, or a follow-up to it, asks a question about
    /// what happened.
    fn asks(req: &Request) -> bool {
        crate::rules::is_question(&req.message)
            || req
                .followups
                .iter()
                .any(|f| crate::rules::is_question(&f.message))
    }

    /// The moment the request asks about: the newest follow-up's that
    /// names a time, else the message's; only a question names one.
    fn asked(req: &Request, now_unix: i64) -> Option<crate::rules::AskedTime> {
        if !Self::asks(req) {
            return None;
        }
        let offset = req.options.utc_offset_minutes.unwrap_or(0);
        req.followups
            .iter()
            .rev()
            .map(|f| f.message.as_str())
            .chain([req.message.as_str()])
            .find_map(|text| crate::rules::question::asked_time(text, now_unix, offset))
    }

    // ---- Called by the API. ----

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

/// The watcher and the alert intake open requests through the engine
/// without knowing it.
impl crate::watch::Opener for Arc<Engine> {
    fn open(
        &self,
        message: String,
        options: RequestOptions,
        source: RequestSource,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<Request, String>> + Send + '_>>
    {
        Box::pin(async move {
            Engine::open(self, message, options, source)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The engine's side of an investigation's trace: evidence and events go to
/// the request's store and stream like every other step's.
struct EngineJournal<'a> {
    engine: &'a Engine,
    id: &'a str,
}

impl Journal for EngineJournal<'_> {
    async fn evidence(&self, evidence: Evidence, summary: String) {
        let announced = EventPayload::Evidence(EvidenceAdded {
            id: evidence.id.clone(),
            kind: evidence.kind_name().to_string(),
            source: evidence.source.clone(),
            summary,
        });
        if let Err(e) = self
            .engine
            .update(self.id, announced, move |r| r.evidence.push(evidence))
            .await
        {
            tracing::error!(request_id = %self.id, error = %e, "cannot save evidence");
        }
    }

    async fn event(&self, payload: EventPayload) {
        if let Err(e) = self.engine.update(self.id, payload, |_| {}).await {
            tracing::error!(request_id = %self.id, error = %e, "cannot save event");
        }
    }

    fn followups(&self) -> Vec<String> {
        match self.engine.store.get(self.id) {
            Ok(Some(r)) => r.followups.into_iter().map(|f| f.message).collect(),
            Ok(None) => Vec::new(),
            Err(e) => {
                tracing::error!(request_id = %self.id, error = %e, "cannot read follow-ups");
                Vec::new()
            }
        }
    }
}

/// The evidence diagnosis reads, decoded (`Engine::observed`).
struct Observed {
    container: ContainerView,
    container_ev: String,
    logs: LogsView,
    logs_ev: String,
    events: Vec<crate::model::ContainerEvent>,
    events_ev: String,
    death: Option<(DeathLogs, String)>,
    asked: Option<crate::rules::AskedTime>,
    now_unix: i64,
    change: Option<(Change, String)>,
}

impl Observed {
    fn observation(&self, ran_well_after: Duration) -> crate::rules::Observation<'_> {
        crate::rules::Observation {
            container: &self.container,
            container_evidence: &self.container_ev,
            logs: &self.logs,
            logs_evidence: &self.logs_ev,
            events: &self.events,
            events_evidence: &self.events_ev,
            past_death: self
                .death
                .as_ref()
                .map(|(logs, evidence)| crate::rules::PastDeath { logs, evidence }),
            asked: self.asked,
            now_unix: self.now_unix,
            change: self.change.as_ref().map(|(c, ev)| (c, ev.as_str())),
            ran_well_after: i64::try_from(ran_well_after.as_secs()).unwrap_or(i64::MAX),
        }
    }
}
