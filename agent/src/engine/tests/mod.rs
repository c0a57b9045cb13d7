//! The engine's phases without Docker: a scripted executor answers (or
//! fails) each call, a real SQLite store keeps the request, and the tests
//! read the request and its events as the API would serve them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::{self, WriteAction};
use drydock_proto::grant::{self, GrantClaims, GrantScope, GRANT_KIND, GRANT_VERSION_NO_HOST};
use tonic::Code;

use super::{Engine, EngineConfig};
use crate::config::WatchMode;
use crate::executor_client::ExecutorError;
use crate::model::*;
use crate::runbook::Runbook;
use crate::store::Store;
use crate::test_util::{policy, Scripted, WriteScript};

mod changes;
mod followups;
mod hosts;
mod speed;
mod swarm;
mod updates;

const WEB: &str = "aaaaaaaaaaaa0000000000000000000000000000000000000000000000000000";

/// A web container with a healthcheck, running, in the given health; an
/// unhealthy one passed its probe before it began failing (a wedge).
fn web(health: &str) -> ContainerView {
    let failing = HealthProbeView {
        exit_code: 1,
        output: "curl: (7) Failed to connect to localhost port 8080".into(),
    };
    let health_log = if health == "unhealthy" {
        let passed = HealthProbeView {
            exit_code: 0,
            output: String::new(),
        };
        vec![passed, failing.clone(), failing.clone(), failing]
    } else {
        vec![failing]
    };
    ContainerView {
        id: WEB.into(),
        name: "web".into(),
        image: "shop/web:1".into(),
        status: "running".into(),
        running: true,
        health_status: health.into(),
        failing_streak: if health == "unhealthy" { 3 } else { 0 },
        health_log,
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

fn config(watch_mode: WatchMode) -> EngineConfig {
    EngineConfig {
        approval_ttl: Duration::from_secs(600),
        max_iterations: 2,
        verify_max_wait: Duration::from_millis(400),
        verify_poll: Duration::from_millis(10),
        stable_for: Duration::from_millis(50),
        ran_well_after: std::time::Duration::from_secs(60),
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
async fn a_plan_waiting_for_approval_is_withdrawn_once_another_request_repairs_its_target() {
    let w = world(
        Scripted::new(web("unhealthy"), recovers()),
        WatchMode::Notify,
    );
    // The watch's request waits for a person ...
    let options = RequestOptions {
        container: Some("web".into()),
        ..Default::default()
    };
    let first = w
        .engine
        .open("web turned unhealthy".into(), options, RequestSource::Watch)
        .await
        .unwrap()
        .id;
    let waiting = w.waiting(&first).await;
    assert_eq!(waiting.status, Status::WaitingApproval);
    let its_approval = waiting.pending_approvals().next().unwrap().id.clone();
    // ... while another request about the same container is approved,
    // executed and verified.
    let req = w.approved_to_the_end().await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    let first = w.finished(&first).await;
    assert_eq!(first.status, Status::Canceled, "{:?}", first.outcome);
    let outcome = first.outcome.clone().unwrap_or_default();
    assert!(
        outcome.contains(&format!("withdrawn: {} repaired web", req.id)),
        "{outcome}"
    );
    assert_eq!(first.approvals[0].status, ApprovalStatus::Withdrawn);
    let superseded = w
        .engine
        .store()
        .events_after(&first.id, 0)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.payload {
            EventPayload::Superseded(s) => Some(s),
            _ => None,
        })
        .expect("a superseded event");
    assert_eq!(superseded.by, req.id);
    assert_eq!(superseded.approvals, vec![its_approval.clone()]);
    // Its approval can no longer be used, and one write was made in all.
    assert!(w
        .engine
        .approve(&its_approval, "ops", &B64.encode([7u8; 64]))
        .await
        .is_err());
    assert_eq!(w.executor.writes(), 1);
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
        hours: None,
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

/// The executor asks for two approvers of a restart: the first signature
/// leaves the approval pending (an `approval_signed` event, nothing sent),
/// the same approver again is refused, and the second sends the write with
/// both signatures.
#[tokio::test]
async fn a_restart_that_needs_two_approvers_is_sent_with_both_signatures() {
    let mut executor = Scripted::new(web("unhealthy"), recovers());
    executor.policy.approvers_required = [(WriteAction::Restart, 2)].into();
    let w = world(executor, WatchMode::Notify);
    let id = w.ask("web is unhealthy").await;
    let req = w.waiting(&id).await;
    let pending = req.pending_approvals().next().expect("a pending approval");
    assert_eq!(pending.required, 2);
    let approval = pending.id.clone();
    let signed = w
        .engine
        .approve(&approval, "ops", &B64.encode([7u8; 64]))
        .await
        .unwrap();
    let still = signed.pending_approvals().next().expect("still pending");
    assert_eq!(still.signers(), ["ops"]);
    assert_eq!(still.missing(), 1);
    assert!(w.kinds(&id).contains(&EventKind::ApprovalSigned));
    let again = w
        .engine
        .approve(&approval, "ops", &B64.encode([8u8; 64]))
        .await
        .expect_err("the same approver twice");
    assert!(
        again.to_string().contains("signed this approval already"),
        "{again}"
    );
    assert_eq!(w.executor.writes(), 0, "nothing sent on one signature");
    w.engine
        .approve(&approval, "bob", &B64.encode([9u8; 64]))
        .await
        .unwrap();
    let done = w.finished(&id).await;
    assert_eq!(done.status, Status::Completed, "{done:#?}");
    let calls = w.executor.calls.lock().unwrap().clone();
    assert!(
        calls
            .iter()
            .any(|c| c == "write restart by approval of ops+bob"),
        "{calls:?}"
    );
    assert!(
        done.approvals[0].signature.is_none()
            && done.approvals[0]
                .cosignatures
                .iter()
                .all(|c| c.signature.is_none())
    );
}
