//! The engine's phases without Docker: a scripted executor answers (or
//! fails) each call, a real SQLite store keeps the request, and the tests
//! read the request and its events as the API would serve them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::{self, ContainerWrite, WriteAction};
use drydock_proto::grant::{self, GrantClaims, GrantScope, GRANT_KIND, GRANT_VERSION_NO_HOST};
use tonic::Code;

use super::{Engine, EngineConfig};
use crate::config::WatchMode;
use crate::executor_client::{Authority, Call, Executor, ExecutorError, Reads, WriteOp, Written};
use crate::model::*;
use crate::runbook::Runbook;
use crate::store::Store;

mod changes;
mod followups;
mod hosts;
mod speed;
mod swarm;

const WEB: &str = "aaaaaaaaaaaa0000000000000000000000000000000000000000000000000000";

/// A web container with a healthcheck, running, in the given health.
fn web(health: &str) -> ContainerView {
    ContainerView {
        id: WEB.into(),
        name: "web".into(),
        image: "shop/web:1".into(),
        status: "running".into(),
        running: true,
        health_status: health.into(),
        failing_streak: if health == "unhealthy" { 3 } else { 0 },
        health_log: vec![HealthProbeView {
            exit_code: 1,
            output: "curl: (7) Failed to connect to localhost port 8080".into(),
        }],
        healthcheck: Some(HealthcheckView {
            test: vec![
                "CMD".into(),
                "curl".into(),
                "-f".into(),
                "localhost:8080".into(),
            ],
            interval_ms: 10,
            timeout_ms: 10,
            retries: 1,
            start_period_ms: 0,
        }),
        ..Default::default()
    }
}

fn policy() -> PolicyView {
    PolicyView {
        actions: ActionsView::enabling(&[WriteAction::Start, WriteAction::Restart]),
        approver_ids: vec!["ops".into()],
        logs_max_lines: 500,
        allow_names: vec!["*".into()],
        ..Default::default()
    }
}

/// What a write does, as scripted.
#[derive(Clone)]
struct WriteScript {
    /// The executor's answer.
    answer: Result<(), ExecutorError>,
    /// The container after the call (whatever the answer said).
    after: ContainerView,
}

/// An executor that answers from a script and records every call.
struct Scripted {
    container: Mutex<ContainerView>,
    policy: PolicyView,
    logs: Vec<String>,
    failing: HashMap<&'static str, ExecutorError>,
    write: WriteScript,
    /// Images on the engine.
    images: Vec<String>,
    /// A Swarm manager's answers (none: not a manager).
    swarm: Mutex<Option<swarm::SwarmScript>>,
    calls: Mutex<Vec<String>>,
    /// How long `GetPolicy` takes (a busy executor).
    policy_delay: Duration,
    /// How long `ContainerStats` takes (the engine's collector cycle).
    stats_delay: Duration,
    /// The container's events, for `follow` (none: no stream, as an
    /// executor that refuses one).
    events: Option<tokio::sync::broadcast::Sender<ContainerEvent>>,
    /// After a write, this many inspects find the executor unreachable.
    down_after_write: Mutex<u32>,
}

impl Scripted {
    fn new(container: ContainerView, write: WriteScript) -> Scripted {
        Scripted {
            container: Mutex::new(container),
            policy: policy(),
            logs: vec!["ERROR upstream timed out".into()],
            failing: HashMap::new(),
            write,
            images: Vec::new(),
            swarm: Mutex::new(None),
            calls: Mutex::new(Vec::new()),
            policy_delay: Duration::ZERO,
            stats_delay: Duration::ZERO,
            events: None,
            down_after_write: Mutex::new(0),
        }
    }

    fn failing(mut self, rpc: &'static str, code: Code) -> Scripted {
        self.failing.insert(
            rpc,
            ExecutorError::new(code, format!("{rpc} scripted to fail")),
        );
        self
    }

    fn answer<T>(&self, rpc: &'static str, ok: impl FnOnce() -> T) -> Result<T, ExecutorError> {
        self.calls.lock().unwrap().push(rpc.to_string());
        match self.failing.get(rpc) {
            Some(e) => Err(e.clone()),
            None => Ok(ok()),
        }
    }

    fn writes(&self) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.starts_with("write"))
            .count()
    }

    fn current(&self) -> ContainerView {
        self.container.lock().unwrap().clone()
    }
}

impl Reads for Scripted {
    fn follow<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> Call<'a, crate::executor_client::ContainerEvents> {
        Box::pin(async move {
            let Some(events) = &self.events else {
                return Err(ExecutorError::new(
                    Code::ResourceExhausted,
                    "4 streams open",
                ));
            };
            let stream = futures::stream::unfold(events.subscribe(), |mut rx| async move {
                rx.recv().await.ok().map(|e| (e, rx))
            });
            Ok(Box::pin(stream) as crate::executor_client::ContainerEvents)
        })
    }
    fn list<'a>(&'a self, _: &'a str, _: bool) -> Call<'a, Vec<ContainerSummaryView>> {
        Box::pin(async move {
            self.answer("list", || {
                let c = self.current();
                vec![ContainerSummaryView {
                    id: c.id,
                    name: c.name,
                    image: c.image,
                    state: c.status,
                    status: format!("Up 5 minutes ({})", c.health_status),
                    ..Default::default()
                }]
            })
        })
    }
    fn inspect<'a>(&'a self, _: &'a str, _: &'a str) -> Call<'a, ContainerView> {
        Box::pin(async move {
            if self.writes() > 0 {
                let mut down = self.down_after_write.lock().unwrap();
                if *down > 0 {
                    *down -= 1;
                    self.calls
                        .lock()
                        .unwrap()
                        .push("inspect (unreachable)".into());
                    return Err(ExecutorError::new(
                        Code::Unavailable,
                        "tcp connect error: Connection refused (os error 111)",
                    ));
                }
            }
            self.answer("inspect", || self.current())
        })
    }
    fn logs_window<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: u32,
        _: i64,
        _: i64,
    ) -> Call<'a, LogsView> {
        Box::pin(async move {
            self.answer("logs", || LogsView {
                lines: self
                    .logs
                    .iter()
                    .map(|t| LogLineView {
                        stream: "stdout".into(),
                        text: t.clone(),
                        time_unix_nanos: 0,
                    })
                    .collect(),
                ..Default::default()
            })
        })
    }
    fn policy<'a>(&'a self, _: &'a str) -> Call<'a, PolicyView> {
        Box::pin(async move {
            tokio::time::sleep(self.policy_delay).await;
            self.answer("policy", || self.policy.clone())
        })
    }
    fn stats<'a>(&'a self, _: &'a str, _: &'a str) -> Call<'a, StatsView> {
        Box::pin(async move {
            tokio::time::sleep(self.stats_delay).await;
            self.answer("stats", StatsView::default)
        })
    }
    fn disk_usage<'a>(&'a self, _: &'a str, _: &'a str) -> Call<'a, DiskUsageView> {
        Box::pin(async move { self.answer("disk_usage", DiskUsageView::default) })
    }
    fn container_events<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: i64,
        _: u32,
    ) -> Call<'a, Vec<ContainerEvent>> {
        Box::pin(async move { self.answer("events", Vec::new) })
    }
    fn image<'a>(&'a self, _: &'a str, image_id: &'a str) -> Call<'a, ImageView> {
        Box::pin(async move {
            self.answer("image", || ImageView {
                present: self.images.contains(&image_id.to_string()),
                id: image_id.into(),
                ..Default::default()
            })
        })
    }
    fn services<'a>(&'a self, _: &'a str) -> Call<'a, Vec<ServiceSummaryView>> {
        Box::pin(async move { swarm::read(self, "services", |s| vec![s.service.summary.clone()]) })
    }
    fn service<'a>(&'a self, _: &'a str, _: &'a str) -> Call<'a, ServiceView> {
        Box::pin(async move { swarm::read(self, "service", |s| s.service.clone()) })
    }
    fn tasks<'a>(&'a self, _: &'a str, _: &'a str) -> Call<'a, Vec<TaskView>> {
        Box::pin(async move { swarm::read(self, "tasks", |s| s.tasks.clone()) })
    }
    fn service_logs<'a>(&'a self, _: &'a str, _: &'a str, _: u32) -> Call<'a, LogsView> {
        Box::pin(async move { swarm::read(self, "service_logs", |s| s.logs.clone()) })
    }
    fn nodes<'a>(&'a self, _: &'a str) -> Call<'a, Vec<NodeView>> {
        Box::pin(async move { swarm::read(self, "nodes", |s| s.nodes.clone()) })
    }
    fn check_http<'a>(&'a self, _: &'a str, service: &'a str) -> Call<'a, HttpCheckView> {
        Box::pin(async move {
            self.calls.lock().unwrap().push("check_http".into());
            Err(ExecutorError::new(
                Code::NotFound,
                format!("no http check {service}"),
            ))
        })
    }
}

impl Executor for Scripted {
    fn write<'a>(&'a self, _: &'a str, op: &'a WriteOp, authority: Authority) -> Call<'a, Written> {
        Box::pin(async move {
            let by = match authority {
                Authority::Approval { .. } => "approval",
                Authority::Grant { .. } => "grant",
            };
            let action = op.action();
            let to = match op {
                WriteOp::Container {
                    write: ContainerWrite::Rollback { to_image },
                    ..
                } => format!(" to {to_image}"),
                _ => String::new(),
            };
            self.calls
                .lock()
                .unwrap()
                .push(format!("write {action}{to} by {by}"));
            *self.container.lock().unwrap() = self.write.after.clone();
            if let WriteOp::Service { .. } = op {
                return swarm::write(self, action);
            }
            self.write.answer.clone().map(|()| Written {
                new_container_id: (action == WriteAction::Rollback)
                    .then(|| self.write.after.id.clone()),
                service_version: None,
            })
        })
    }
}

fn config(watch_mode: WatchMode) -> EngineConfig {
    EngineConfig {
        approval_ttl: Duration::from_secs(600),
        max_iterations: 2,
        verify_max_wait: Duration::from_millis(400),
        verify_poll: Duration::from_millis(10),
        stable_for: Duration::from_millis(50),
        logs_tail: 100,
        runbook: Arc::new(Runbook::default()),
        llm: None,
        watch_mode,
    }
}

struct World {
    engine: Arc<Engine>,
    executor: Arc<Scripted>,
    _dir: tempfile::TempDir,
}

fn world(executor: Scripted, watch_mode: WatchMode) -> World {
    world_with(executor, config(watch_mode))
}

fn world_with(executor: Scripted, config: EngineConfig) -> World {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("agent.db")).unwrap());
    let executor = Arc::new(executor);
    World {
        engine: Engine::new(store, executor.clone(), config),
        executor,
        _dir: dir,
    }
}

impl World {
    async fn ask(&self, message: &str) -> String {
        let options = RequestOptions {
            container: Some("web".into()),
            ..Default::default()
        };
        self.engine
            .create(message.into(), options)
            .await
            .unwrap()
            .id
    }

    /// The request once `until` holds (or a failed test after 10 s).
    async fn wait(&self, id: &str, until: impl Fn(&Request) -> bool) -> Request {
        let started = Instant::now();
        loop {
            let req = self.engine.store().get(id).unwrap().unwrap();
            if until(&req) {
                return req;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "request stuck in {}: {req:#?}",
                req.status
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    async fn finished(&self, id: &str) -> Request {
        self.wait(id, |r| r.status.is_terminal()).await
    }

    async fn waiting(&self, id: &str) -> Request {
        self.wait(id, |r| {
            r.status == Status::WaitingApproval || r.status.is_terminal()
        })
        .await
    }

    fn kinds(&self, id: &str) -> Vec<EventKind> {
        self.engine
            .store()
            .events_after(id, 0)
            .unwrap()
            .iter()
            .map(|e| e.kind())
            .collect()
    }

    /// Ask about web, approve the restart drydock proposes, and wait for the
    /// request to end.
    async fn approved_to_the_end(&self) -> Request {
        let id = self.ask("web is unhealthy").await;
        let req = self.waiting(&id).await;
        self.approve(&req).await;
        self.finished(&id).await
    }

    /// A person's approval of the request's pending step (the agent cannot
    /// check a signature; any 64 bytes pass to the scripted executor).
    /// The timeline said the executor was unreachable, then that it
    /// answered again, and the write was sent once.
    fn waited_out_one_outage(&self, id: &str) {
        let said: Vec<String> = self
            .engine
            .store()
            .events_after(id, 0)
            .unwrap()
            .into_iter()
            .filter_map(|e| match e.payload {
                EventPayload::ExecutorWaiting(m) => Some(m.message),
                _ => None,
            })
            .collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].starts_with("executor unreachable; waiting up to"),
            "{said:?}"
        );
        assert!(
            said[1].starts_with("the executor answers again after"),
            "{said:?}"
        );
        assert_eq!(self.executor.writes(), 1, "the write is not sent again");
    }

    async fn approve(&self, req: &Request) {
        let pending = req.pending_approvals().next().expect("a pending approval");
        self.engine
            .approve(&pending.id, "ops", &B64.encode([7u8; 64]))
            .await
            .unwrap();
    }
}

fn recovers() -> WriteScript {
    WriteScript {
        answer: Ok(()),
        after: web("healthy"),
    }
}

#[tokio::test]
async fn a_read_that_fails_ends_the_request_naming_the_call() {
    let w = world(
        Scripted::new(web("unhealthy"), recovers()).failing("list", Code::Unavailable),
        WatchMode::Notify,
    );
    let id = w.ask("web is down").await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Failed);
    let outcome = req.outcome.unwrap_or_default();
    assert!(
        outcome.starts_with("could not list containers: executor Unavailable"),
        "{outcome}"
    );
    assert!(w.kinds(&id).contains(&EventKind::Error));
    assert_eq!(w.executor.writes(), 0);
}

#[tokio::test]
async fn a_write_the_policy_does_not_enable_becomes_advice_not_a_step() {
    let mut executor = Scripted::new(web("unhealthy"), recovers());
    executor
        .policy
        .actions
        .set_enabled(WriteAction::Restart, false);
    let w = world(executor, WatchMode::Notify);
    let id = w.ask("web is unhealthy").await;
    let req = w.finished(&id).await;
    let plan = req.plan.clone().expect("a plan");
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert!(
        plan.advice
            .iter()
            .any(|a| a.contains("does not allow restart")),
        "{plan:?}"
    );
    assert_eq!(req.status, Status::Completed, "advice only");
    assert!(req.approvals.is_empty());
    assert_eq!(w.executor.writes(), 0);
}

#[tokio::test]
async fn a_person_who_rejects_leaves_the_container_untouched() {
    let w = world(
        Scripted::new(web("unhealthy"), recovers()),
        WatchMode::Notify,
    );
    let id = w.ask("web is unhealthy").await;
    let req = w.waiting(&id).await;
    assert_eq!(req.status, Status::WaitingApproval);
    assert_eq!(
        req.plan.as_ref().unwrap().steps[0].action(),
        WriteAction::Restart
    );
    let pending = req.pending_approvals().next().unwrap().id.clone();
    w.engine.reject(&pending).await.unwrap();
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Rejected);
    assert_eq!(w.executor.writes(), 0);
    // A second decision on the same approval is refused.
    assert!(w.engine.reject(&pending).await.is_err());
}

#[tokio::test]
async fn an_approval_signed_the_moment_it_is_announced_is_accepted() {
    // A CLI with --yes signs as soon as it sees `approval_requested`: the
    // request must already be waiting for it then, even when the agent
    // asks a slow executor whether a grant covers the write (this one does
    // not: it is for another container).
    let (w, id, _) = granted_world(recovers(), Duration::from_millis(300), "db").await;
    let mut events = w.engine.subscribe();
    let approval = loop {
        let e = tokio::time::timeout(Duration::from_secs(10), events.recv())
            .await
            .expect("an approval is requested")
            .unwrap();
        if let EventPayload::ApprovalRequested(a) = e.payload {
            break a.approval;
        }
    };
    w.engine
        .approve(&approval.id, "ops", &B64.encode([7u8; 64]))
        .await
        .expect("the request waits for the approval it announced");
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{req:#?}");
    assert_eq!(req.approvals[0].grant_id, None, "{:?}", req.approvals);
    assert!(!w.kinds(&id).contains(&EventKind::ApprovedByGrant));
}

#[tokio::test]
async fn a_grant_authorises_in_the_same_transaction_that_announces_the_approvals() {
    // No moment in which a covered approval looks like it needs a person
    // (a webhook would say "needs_approval").
    let (w, id, grant_id) = granted_world(recovers(), Duration::ZERO, "web").await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{req:#?}");
    assert_eq!(
        req.approvals[0].grant_id.as_deref(),
        Some(grant_id.as_str())
    );
    let events = w.engine.store().events_after(&id, 0).unwrap();
    let waiting = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Status(s) if s.status == Status::WaitingApproval => {
                Some(s.message.clone())
            }
            _ => None,
        })
        .expect("it waited");
    assert_eq!(waiting, "authorised by an automation grant");
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind()).collect();
    let granted = kinds
        .iter()
        .position(|k| *k == EventKind::ApprovedByGrant)
        .unwrap();
    let asked = kinds
        .iter()
        .position(|k| *k == EventKind::ApprovalRequested)
        .unwrap();
    assert!(asked < granted, "{kinds:?}");
}

#[tokio::test]
async fn an_approved_restart_is_verified_healthy_before_it_counts() {
    let w = world(
        Scripted::new(web("unhealthy"), recovers()),
        WatchMode::Notify,
    );
    let req = w.approved_to_the_end().await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    let checks: Vec<&str> = req
        .verification
        .as_ref()
        .unwrap()
        .checks
        .iter()
        .map(|c| c.level.as_str())
        .collect();
    assert_eq!(checks, ["running", "healthy", "stable"]);
    assert_eq!(w.executor.writes(), 1);
    assert!(w.kinds(&req.id).ends_with(&[
        EventKind::Evidence,
        EventKind::Verification,
        EventKind::Final
    ]));
}

#[tokio::test]
async fn an_executor_that_stops_answering_after_the_write_is_waited_for() {
    let executor = Scripted::new(web("unhealthy"), recovers());
    *executor.down_after_write.lock().unwrap() = 3;
    let w = world_with(
        executor,
        EngineConfig {
            verify_max_wait: Duration::from_secs(10),
            ..config(WatchMode::Notify)
        },
    );
    let req = w.approved_to_the_end().await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    w.waited_out_one_outage(&req.id);
}

#[tokio::test]
async fn only_the_verification_deadline_passing_ends_an_outage_as_failed() {
    let executor = Scripted::new(web("unhealthy"), recovers());
    *executor.down_after_write.lock().unwrap() = u32::MAX;
    let w = world(executor, WatchMode::Notify);
    let req = w.approved_to_the_end().await;
    assert_eq!(req.status, Status::Failed);
    let outcome = req.outcome.clone().unwrap_or_default();
    assert!(
        outcome.contains("did not answer within the verification deadline"),
        "{outcome}"
    );
    assert!(req.verification.is_none(), "nothing was verified: {req:#?}");
    assert_eq!(w.executor.writes(), 1);
}

#[tokio::test]
async fn a_write_in_doubt_is_never_sent_again_and_the_state_decides() {
    let w = world(
        Scripted::new(
            web("unhealthy"),
            WriteScript {
                answer: Err(ExecutorError::new(Code::Unavailable, "connection reset")),
                after: web("healthy"),
            },
        ),
        WatchMode::Notify,
    );
    let req = w.approved_to_the_end().await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert!(req.execution[0].in_doubt && !req.execution[0].ok);
    assert!(
        req.outcome.unwrap().contains("outcome was in doubt"),
        "says why it trusted the state"
    );
    assert_eq!(w.executor.writes(), 1, "never re-sent");
}

#[tokio::test]
async fn verification_that_never_holds_ends_failed_within_the_budget() {
    let w = world(
        Scripted::new(
            web("unhealthy"),
            WriteScript {
                answer: Ok(()),
                after: web("unhealthy"),
            },
        ),
        WatchMode::Notify,
    );
    let req = w.approved_to_the_end().await;
    assert_eq!(req.status, Status::Failed);
    let verification = req.verification.clone().unwrap();
    assert!(!verification.ok);
    assert!(verification
        .checks
        .iter()
        .any(|c| c.level == "healthy" && !c.ok));
    // The second round does not restart blindly again.
    assert_eq!(w.executor.writes(), 1);
    assert!(
        req.outcome
            .as_deref()
            .unwrap_or_default()
            .contains("not recovered after restart (done)"),
        "{:?}",
        req.outcome
    );
}

/// Repair mode with automation on and a grant for restarts of web; the
/// executor's writes answer `write`. Returns the world and a watch
/// request's id.
async fn granted_world(
    write: WriteScript,
    policy_delay: Duration,
    covered: &str,
) -> (World, String, String) {
    let key = approval::generate_signing_key();
    let mut executor = Scripted::new(web("unhealthy"), write);
    executor.policy_delay = policy_delay;
    executor.policy.automation_enabled = true;
    executor.policy.approvers = vec![ApproverView {
        id: "ops".into(),
        public_key: approval::format_public_key(&key.verifying_key()),
    }];
    let w = world(executor, WatchMode::Repair);
    let now = unix_now();
    let claims = GrantClaims {
        version: GRANT_VERSION_NO_HOST,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions: vec![WriteAction::Restart],
        scope: GrantScope {
            names: vec![covered.into()],
            ..Default::default()
        },
        classes: vec!["unhealthy".into()],
        max_per_container: 2,
        window_secs: 3600,
        max_total: 10,
        issued_at: now,
        expires_at: now + 3600,
        host: None,
    };
    let bytes = claims.encode();
    crate::grants::add(
        w.engine.store(),
        &w.executor.policy,
        &B64.encode(&bytes),
        &B64.encode(grant::sign(&bytes, &key)),
        "ops",
        now,
    )
    .unwrap();
    let options = RequestOptions {
        container: Some("web".into()),
        ..Default::default()
    };
    let id = w
        .engine
        .open(
            "watch: web turned unhealthy".into(),
            options,
            RequestSource::Watch,
        )
        .await
        .unwrap()
        .id;
    (w, id, claims.grant_id)
}

#[tokio::test]
async fn a_grant_the_executor_refuses_falls_back_to_a_person() {
    let (w, id, grant_id) = granted_world(
        WriteScript {
            answer: Err(ExecutorError::new(
                Code::FailedPrecondition,
                "grant grt-1 used 2 times in its window",
            )),
            after: web("unhealthy"),
        },
        Duration::ZERO,
        "web",
    )
    .await;
    let req = w
        .wait(&id, |r| {
            r.status == Status::WaitingApproval && r.pending_approvals().next().is_some()
        })
        .await;
    assert!(w.kinds(&id).contains(&EventKind::ApprovedByGrant));
    let calls = w.executor.calls.lock().unwrap().clone();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("write"))
            .collect::<Vec<_>>(),
        ["write restart by grant"]
    );
    assert_eq!(req.execution.len(), 1);
    assert_eq!(
        req.execution[0].grant_id.as_deref(),
        Some(grant_id.as_str())
    );
    let fresh = req.pending_approvals().next().unwrap();
    assert_eq!(fresh.grant_id, None, "a person decides now");
    assert!(req
        .approvals
        .iter()
        .any(|a| a.grant_id.as_deref() == Some(grant_id.as_str())));
}
