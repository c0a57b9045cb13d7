//! A Swarm service through the engine's phases, with a scripted manager:
//! the finding, the plan (force update, rollback, advice), the claims a
//! person signs, the write and the verification that waits for every
//! task.

use super::*;
use crate::test_util::SwarmScript;

pub const API_ID: &str = "n3urbn38u90m4jz0gvcm4t7ha";

fn now_rfc3339_offset(secs: i64) -> String {
    let t = std::time::SystemTime::now() + Duration::from_secs(secs.unsigned_abs());
    let t = if secs < 0 {
        std::time::SystemTime::now() - Duration::from_secs(secs.unsigned_abs())
    } else {
        t
    };
    humantime::format_rfc3339_seconds(t).to_string()
}

fn service(running: u64, image: &str, previous: &str, update: &str) -> ServiceView {
    ServiceView {
        summary: ServiceSummaryView {
            id: API_ID.into(),
            name: "shop_api".into(),
            stack: "shop".into(),
            image: image.into(),
            mode: "replicated".into(),
            desired: 2,
            running,
            update_state: update.into(),
            version: 73,
            labels: [(STACK_NAMESPACE_LABEL.to_string(), "shop".to_string())].into(),
        },
        previous_image: previous.into(),
        update_started_at: if previous.is_empty() {
            String::new()
        } else {
            now_rfc3339_offset(-120)
        },
        update_message: if update == "paused" {
            "update paused due to failure or early termination of task x".into()
        } else {
            String::new()
        },
        ..Default::default()
    }
}

fn task(id: &str, state: &str, image: &str, error: &str, secs_ago: i64) -> TaskView {
    TaskView {
        id: id.into(),
        slot: 1,
        state: state.into(),
        desired_state: if state == "running" || state == "pending" {
            "running".into()
        } else {
            "shutdown".into()
        },
        error: error.into(),
        timestamp: now_rfc3339_offset(-secs_ago),
        exit_code: error.contains("non-zero exit").then_some(1),
        image: image.into(),
        ..Default::default()
    }
}

fn manager() -> NodeView {
    NodeView {
        id: "x12eazsl8svb8kg2edq4ra693".into(),
        hostname: "vm".into(),
        role: "manager".into(),
        state: "ready".into(),
        availability: "active".into(),
        ..Default::default()
    }
}

fn swarm_policy() -> PolicyView {
    let mut p = PolicyView {
        services_in_scope: true,
        host: "host-b".into(),
        ..policy()
    };
    p.actions.set_enabled(WriteAction::ForceUpdate, true);
    p.actions.set_enabled(WriteAction::ServiceRollback, true);
    p
}

/// A world whose executor is a Swarm manager with `script`; no container.
fn swarm_world(script: SwarmScript, policy: PolicyView) -> World {
    swarm_world_with(script, policy, 0, config(WatchMode::Notify))
}

/// The same, with an executor that does not answer `down` reads after
/// the write.
fn swarm_world_with(
    script: SwarmScript,
    policy: PolicyView,
    down: u32,
    config: EngineConfig,
) -> World {
    let mut executor = Scripted::new(web("healthy"), recovers());
    executor.policy = policy;
    *executor.swarm.lock().unwrap() = Some(script);
    *executor.down_after_write.lock().unwrap() = down;
    world_with(executor, config)
}

/// A service whose two tasks failed unhealthy, healthy again after a
/// force update.
fn failing_api() -> SwarmScript {
    let unhealthy = "task: non-zero exit (137): dockerexec: unhealthy container";
    SwarmScript {
        service: service(0, "shop/api:2", "", ""),
        tasks: vec![
            task("t1", "failed", "shop/api:2", unhealthy, 20),
            task("t2", "failed", "shop/api:2", unhealthy, 30),
        ],
        nodes: vec![manager()],
        logs: LogsView::default(),
        after: Some((
            service(2, "shop/api:2", "", ""),
            vec![
                task("t3", "running", "shop/api:2", "", 1),
                task("t4", "running", "shop/api:2", "", 1),
            ],
        )),
    }
}

#[tokio::test]
async fn an_executor_that_stops_answering_after_a_service_write_is_waited_for() {
    let w = swarm_world_with(
        failing_api(),
        swarm_policy(),
        5,
        EngineConfig {
            verify_max_wait: Duration::from_secs(10),
            ..config(WatchMode::Notify)
        },
    );
    let id = ask_api(&w).await;
    let req = w.waiting(&id).await;
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    w.waited_out_one_outage(&id);
}

#[tokio::test]
async fn a_service_outage_past_the_verification_deadline_ends_failed_with_that_reason() {
    let w = swarm_world_with(
        failing_api(),
        swarm_policy(),
        u32::MAX,
        config(WatchMode::Notify),
    );
    let id = ask_api(&w).await;
    let req = w.waiting(&id).await;
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Failed);
    let outcome = req.outcome.clone().unwrap_or_default();
    assert!(
        outcome.contains("did not answer within the verification deadline"),
        "{outcome}"
    );
    assert!(req.verification.is_none(), "nothing was verified: {req:#?}");
    assert_eq!(w.executor.writes(), 1);
}

async fn ask_api(w: &World) -> String {
    w.engine
        .create("the api is down".into(), RequestOptions::default())
        .await
        .unwrap()
        .id
}

#[tokio::test]
async fn failing_tasks_of_a_transient_cause_get_a_force_update_bound_to_the_spec() {
    let w = swarm_world(failing_api(), swarm_policy());
    let id = ask_api(&w).await;
    let req = w.waiting(&id).await;
    let target = req.target.clone().expect("a target");
    assert_eq!(target.kind(), TargetKind::Service, "{target:?}");
    assert_eq!(target.name(), "shop_api");
    assert_eq!(target.stack(), Some("shop"));
    let d = req.diagnosis.clone().expect("a diagnosis");
    assert_eq!(d.causes[0].class, FaultClass::Unhealthy, "{d:?}");
    let plan = req.plan.clone().expect("a plan");
    assert_eq!(plan.steps.len(), 1, "{plan:?}");
    assert_eq!(plan.steps[0].action(), WriteAction::ForceUpdate);
    assert_eq!(plan.steps[0].risk, Tier::Change);
    // The claims name the service and its spec version, and no container.
    let pending = req.pending_approvals().next().unwrap();
    let claims = approval::ApprovalClaims::decode(&B64.decode(&pending.claims).unwrap()).unwrap();
    let signed = claims.service.clone().expect("the service in the claims");
    assert_eq!((signed.id.as_str(), signed.version), (API_ID, 73));
    assert!(claims.container_id.is_empty() && claims.container_name.is_empty());
    // Made for the executor's host, as its policy names it: every other
    // executor refuses it.
    assert_eq!(claims.host.as_deref(), Some("host-b"));
    assert_eq!(claims.version, approval::CLAIMS_VERSION);
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{req:#?}");
    let v = req.verification.clone().unwrap();
    let levels: Vec<&str> = v.checks.iter().map(|c| c.level.as_str()).collect();
    assert!(
        ["running", "updated", "healthy", "stable"]
            .iter()
            .all(|l| levels.contains(l)),
        "{levels:?}"
    );
    assert_eq!(req.execution[0].service_version, Some(73));
    assert!(w
        .executor
        .calls
        .lock()
        .unwrap()
        .iter()
        .any(|c| c == "write force_update by approval"));
}

/// The claims of a request's first pending approval.
fn first_claims(req: &Request) -> approval::ApprovalClaims {
    let pending = req.pending_approvals().next().expect("a pending approval");
    approval::ApprovalClaims::decode(&B64.decode(&pending.claims).unwrap()).unwrap()
}

#[tokio::test]
async fn an_update_the_engine_is_finishing_settles_before_the_claims_are_made() {
    let w = swarm_world(failing_api(), swarm_policy());
    // The first reads show the engine finishing an update, one spec
    // version behind the one it settles at.
    *w.executor.settling.lock().unwrap() = 3;
    let id = ask_api(&w).await;
    let req = w.waiting(&id).await;
    assert_eq!(req.status, Status::WaitingApproval, "{:?}", req.outcome);
    let signed = first_claims(&req).service.expect("the service");
    assert_eq!(signed.version, 73, "bound to the settled spec");
    let said = w
        .engine
        .store()
        .events_after(&id, 0)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.payload {
            EventPayload::Evidence(e) if e.source == "InspectService" => Some(e.summary),
            _ => None,
        })
        .unwrap_or_default();
    assert!(said.contains("after the engine's update settled"), "{said}");
}

#[tokio::test]
async fn an_update_that_does_not_settle_gets_advice_not_a_write() {
    let w = swarm_world(failing_api(), swarm_policy());
    *w.executor.settling.lock().unwrap() = u32::MAX;
    let id = ask_api(&w).await;
    let req = w.finished(&id).await;
    let plan = req.plan.clone().expect("a plan");
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert!(
        plan.advice
            .iter()
            .any(|a| a.contains("still updating shop_api")),
        "{plan:?}"
    );
    assert_eq!(w.executor.writes(), 0);
}

#[tokio::test]
async fn a_failure_that_began_with_the_update_gets_a_rollback_to_the_previous_image() {
    let crash = "task: non-zero exit (1)";
    let mut rolled_back = service(2, "shop/api:1", "shop/api:2", "rollback_completed");
    rolled_back.summary.version = 75;
    let w = swarm_world(
        SwarmScript {
            service: service(1, "shop/api:2", "shop/api:1", "paused"),
            tasks: vec![
                task("t3", "failed", "shop/api:2", crash, 10),
                task("t1", "running", "shop/api:1", "", 100),
                task("t0", "shutdown", "shop/api:1", "", 60),
            ],
            nodes: vec![manager()],
            logs: LogsView::default(),
            after: Some((
                rolled_back,
                vec![
                    task("t5", "running", "shop/api:1", "", 1),
                    task("t6", "running", "shop/api:1", "", 1),
                ],
            )),
        },
        swarm_policy(),
    );
    let id = ask_api(&w).await;
    let req = w.waiting(&id).await;
    let d = req.diagnosis.clone().unwrap();
    assert!(
        d.causes[0]
            .reason
            .contains("updated from image shop/api:1 to shop/api:2"),
        "{d:?}"
    );
    let plan = req.plan.clone().unwrap();
    assert_eq!(
        plan.steps[0].action(),
        WriteAction::ServiceRollback,
        "{plan:?}"
    );
    assert_eq!(plan.steps[0].risk, Tier::Disruptive);
    let pending = req.pending_approvals().next().unwrap();
    let claims = approval::ApprovalClaims::decode(&B64.decode(&pending.claims).unwrap()).unwrap();
    let signed = claims.service.unwrap();
    assert_eq!(signed.image, "shop/api:2");
    assert_eq!(signed.to_image.as_deref(), Some("shop/api:1"));
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{req:#?}");
    let image_check = req
        .verification
        .unwrap()
        .checks
        .into_iter()
        .find(|c| c.level == "image")
        .expect("a rollback checks the image");
    assert!(image_check.ok, "{image_check:?}");
}

#[tokio::test]
async fn a_config_error_and_a_task_no_node_takes_get_advice_and_no_write() {
    let config_error = SwarmScript {
        service: service(0, "shop/api:2", "", ""),
        tasks: vec![task(
            "t1",
            "failed",
            "shop/api:2",
            "task: non-zero exit (1)",
            5,
        )],
        nodes: vec![manager()],
        logs: LogsView {
            lines: vec![LogLineView {
                stream: "stderr".into(),
                text: "ERROR missing required environment variable DATABASE_URL".into(),
                time_unix_nanos: 0,
            }],
            ..Default::default()
        },
        after: None,
    };
    let w = swarm_world(config_error, swarm_policy());
    let id = ask_api(&w).await;
    let req = w.finished(&id).await;
    assert_eq!(
        req.diagnosis.unwrap().causes[0].class,
        FaultClass::ConfigError
    );
    let plan = req.plan.unwrap();
    assert!(
        plan.steps.is_empty()
            && plan
                .advice
                .iter()
                .any(|a| a.contains("configuration error")),
        "{plan:?}"
    );
    assert_eq!(w.executor.writes(), 0);

    let mut greedy = service(0, "shop/api:2", "", "");
    greedy.reserve_memory_bytes = 100 << 40;
    let mut pending = task("t1", "pending", "shop/api:2", "", 5);
    pending.error = "no suitable node (insufficient resources on 1 node)".into();
    let w = swarm_world(
        SwarmScript {
            service: greedy,
            tasks: vec![pending],
            nodes: vec![manager()],
            logs: LogsView::default(),
            after: None,
        },
        swarm_policy(),
    );
    let id = ask_api(&w).await;
    let req = w.finished(&id).await;
    let d = req.diagnosis.unwrap();
    assert_eq!(d.causes[0].class, FaultClass::Unschedulable);
    assert!(d.causes[0].reason.contains("reserves 100.0 TiB"), "{d:?}");
    let plan = req.plan.unwrap();
    assert!(
        plan.steps.is_empty() && plan.advice[0].contains("No node can run"),
        "{plan:?}"
    );
    assert_eq!(w.executor.writes(), 0);
}

#[tokio::test]
async fn a_rollback_the_policy_forbids_is_advice_and_an_engine_without_swarm_finds_containers() {
    let mut policy = swarm_policy();
    policy
        .actions
        .set_enabled(WriteAction::ServiceRollback, false);
    let w = swarm_world(
        SwarmScript {
            service: service(1, "shop/api:2", "shop/api:1", "paused"),
            tasks: vec![
                task("t3", "failed", "shop/api:2", "task: non-zero exit (1)", 10),
                task("t0", "shutdown", "shop/api:1", "", 60),
            ],
            nodes: vec![manager()],
            logs: LogsView::default(),
            after: None,
        },
        policy,
    );
    let id = ask_api(&w).await;
    let req = w.finished(&id).await;
    let plan = req.plan.unwrap();
    assert!(
        plan.steps
            .iter()
            .all(|s| s.action() != WriteAction::ServiceRollback)
            && plan
                .advice
                .iter()
                .any(|a| a.contains("actions.service_rollback.enabled")),
        "{plan:?}"
    );

    // Services in scope, but the engine is no manager: the container is
    // still found and diagnosed.
    let mut executor = Scripted::new(web("unhealthy"), recovers());
    executor.policy = swarm_policy();
    let w = world(executor, WatchMode::Notify);
    let id = w.ask("web is unhealthy").await;
    let req = w.waiting(&id).await;
    assert_eq!(req.target.unwrap().kind(), TargetKind::Container);
    assert_eq!(req.plan.unwrap().steps[0].action(), WriteAction::Restart);
}

/// A grant for a stack covers a force update of its service: the grant's
/// scope is matched against the service's labels, read from its inspect.
#[tokio::test]
async fn a_grant_for_a_stack_covers_a_force_update_of_its_service_with_no_person_asked() {
    let key = approval::generate_signing_key();
    let mut policy = swarm_policy();
    policy.automation_enabled = true;
    policy.approvers = vec![ApproverView {
        id: "ops".into(),
        public_key: approval::format_public_key(&key.verifying_key()),
    }];
    let w = swarm_world_with(failing_api(), policy, 0, config(WatchMode::Repair));
    let now = unix_now();
    let claims = GrantClaims {
        version: GRANT_VERSION_NO_HOST,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions: vec![WriteAction::ForceUpdate],
        scope: GrantScope {
            stacks: vec!["shop".into()],
            ..Default::default()
        },
        classes: vec![],
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
    let id = w
        .engine
        .open(
            "watch: shop_api is short of tasks".into(),
            RequestOptions {
                container: Some("shop_api".into()),
                ..Default::default()
            },
            RequestSource::Watch,
        )
        .await
        .unwrap()
        .id;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert_eq!(
        req.approvals[0].grant_id.as_deref(),
        Some(claims.grant_id.as_str()),
        "{:?}",
        req.approvals
    );
    assert_eq!(w.executor.writes(), 1);
}
