//! Change-aware diagnosis and rollbacks through the engine.

use super::*;

const V1: &str = "sha256:7ab0000000000000000000000000000000000000000000000000000000000000";
const V2: &str = "sha256:4f1e000000000000000000000000000000000000000000000000000000000000";

fn rfc3339(unix: i64) -> String {
    humantime::format_rfc3339_seconds(
        std::time::UNIX_EPOCH + Duration::from_secs(unix.unsigned_abs()),
    )
    .to_string()
}

/// The api service as compose runs it: its labels, its image by name.
fn api(id: &str, image_id: &str, created: i64) -> ContainerView {
    ContainerView {
        id: id.into(),
        name: "web".into(),
        image: "shop/web:latest".into(),
        image_id: image_id.into(),
        created: rfc3339(created),
        started_at: rfc3339(created),
        labels: [
            (COMPOSE_PROJECT_LABEL.to_string(), "shop".to_string()),
            (COMPOSE_SERVICE_LABEL.to_string(), "web".to_string()),
        ]
        .into(),
        env_hashes: [("DATABASE_URL".to_string(), "aa".to_string())].into(),
        ..web("healthy")
    }
}

/// v1 ran for days; compose recreated the service from v2 40 s ago, and v2
/// exits at start with a configuration error.
fn recreated(rollback_enabled: bool) -> World {
    recreated_logging(
        rollback_enabled,
        "Error: missing required environment variable DATABASE_URL",
    )
}

/// `recreated`, with v2 logging `line` before it exits.
fn recreated_logging(rollback_enabled: bool, line: &str) -> World {
    let now = unix_now();
    let v2 = ContainerView {
        running: false,
        status: "exited".into(),
        exit_code: 1,
        health_status: "none".into(),
        finished_at: rfc3339(now - 38),
        ..api(&"b".repeat(64), V2, now - 40)
    };
    let back_on_v1 = api(&"c".repeat(64), V1, now);
    let mut executor = Scripted::new(
        v2,
        WriteScript {
            answer: Ok(()),
            after: back_on_v1,
        },
    );
    executor.logs = vec![line.into()];
    executor.images = vec![V1.into()];
    executor
        .policy
        .actions
        .set_enabled(WriteAction::Rollback, rollback_enabled);
    let w = world(executor, WatchMode::Notify);
    let v1 = api(&"a".repeat(64), V1, now - 6 * 86_400);
    crate::store::fingerprints::record(
        w.engine.store(),
        &crate::change::fingerprint(&v1),
        "",
        now - 60,
    )
    .unwrap();
    w
}

#[tokio::test]
async fn a_failure_after_an_image_change_is_rolled_back_to_the_previous_image() {
    let w = recreated(true);
    let id = w.ask("web is down").await;
    let req = w.waiting(&id).await;
    assert_eq!(req.status, Status::WaitingApproval, "{:?}", req.outcome);
    let cause = &req.diagnosis.as_ref().unwrap().causes[0];
    assert_eq!(cause.class, FaultClass::ConfigError);
    assert!(
        cause
            .reason
            .contains("the failure began 2 s after shop/web was recreated from image sha256:4f1e"),
        "{}",
        cause.reason
    );
    let (_, change_id) = req.latest_cited::<kind::Change>().expect("change evidence");
    assert!(cause.evidence_ids.iter().any(|e| e == change_id));
    let step = &req.plan.as_ref().unwrap().steps[0];
    assert_eq!(step.action(), WriteAction::Rollback);
    assert_eq!(
        step.images().map(|(to, from)| (to.as_str(), from.as_str())),
        Some((V1, V2))
    );
    assert_eq!(step.risk, Tier::Disruptive);
    // What a person signs names both images.
    let pending = req.pending_approvals().next().unwrap();
    let claims =
        drydock_proto::approval::ApprovalClaims::decode(&B64.decode(&pending.claims).unwrap())
            .unwrap();
    assert_eq!(
        (claims.image_id.as_deref(), claims.from_image_id.as_deref()),
        (Some(V1), Some(V2))
    );
    // An executor with no host name gets claims naming none (version 1).
    assert_eq!(
        (claims.host.as_deref(), claims.version),
        (None, drydock_proto::approval::CLAIMS_VERSION_NO_HOST)
    );
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert_eq!(
        req.target.as_ref().unwrap().id(),
        "c".repeat(64),
        "verified on the new container"
    );
    assert_eq!(
        req.execution[0].new_container_id.as_deref(),
        Some("c".repeat(64).as_str())
    );
    let calls = w.executor.calls.lock().unwrap().clone();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("write"))
            .collect::<Vec<_>>(),
        [&format!("write rollback to {V1} by approval")]
    );
}

#[tokio::test]
async fn without_rollbacks_allowed_a_change_is_advice_naming_the_setting() {
    let w = recreated(false);
    let id = w.ask("web is down").await;
    let req = w.finished(&id).await;
    let plan = req.plan.clone().unwrap();
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert!(
        plan.advice
            .iter()
            .any(|a| a.contains("actions.rollback.enabled") && a.contains("sha256:7ab0")),
        "{plan:?}"
    );
    assert_eq!(w.executor.writes(), 0);
}

#[tokio::test]
async fn a_crash_blamed_on_an_image_change_is_not_started_again_without_rollbacks() {
    // A start would run the new image again and crash the same way.
    let w = recreated_logging(
        false,
        "panic: runtime error: index out of range [3] with length 3",
    );
    let id = w.ask("web is down").await;
    let req = w.finished(&id).await;
    let d = req.diagnosis.clone().unwrap();
    assert_eq!(d.causes[0].class, FaultClass::Crash, "{d:?}");
    assert!(d.causes[0].reason.contains("recreated from image"), "{d:?}");
    let plan = req.plan.clone().unwrap();
    assert!(plan.steps.is_empty(), "{plan:?}");
    assert!(
        plan.advice
            .iter()
            .any(|a| a.contains("actions.rollback.enabled")),
        "{plan:?}"
    );
    assert_eq!(w.executor.writes(), 0);
}

#[tokio::test]
async fn a_container_re_created_unchanged_is_no_change() {
    let now = unix_now();
    let w = world(
        Scripted::new(
            ContainerView {
                running: false,
                status: "exited".into(),
                exit_code: 1,
                ..api(&"b".repeat(64), V1, now - 40)
            },
            recovers(),
        ),
        WatchMode::Notify,
    );
    crate::store::fingerprints::record(
        w.engine.store(),
        &crate::change::fingerprint(&api(&"a".repeat(64), V1, now - 86_400)),
        "",
        now - 60,
    )
    .unwrap();
    let id = w.ask("web is down").await;
    let req = w.waiting(&id).await;
    assert!(req.latest::<kind::Change>().is_none());
    let reason = &req.diagnosis.as_ref().unwrap().causes[0].reason;
    assert!(!reason.contains("recreated"), "{reason}");
}

#[tokio::test]
async fn a_failure_after_drydock_s_own_update_names_that_request_and_offers_the_rollback() {
    let w = recreated(true);
    // v2's container was made by an update drydock carried out.
    let mut earlier = Request::new(
        "req-earlier-update".into(),
        "update web".into(),
        RequestOptions::default(),
        RequestSource::Ask,
        now_rfc3339(),
    );
    earlier.execution.push(ExecutionRecord {
        step: 0,
        action: WriteAction::Update,
        container_id: "a".repeat(64),
        approval_id: "apr-1".into(),
        ok: true,
        message: "update done".into(),
        at: now_rfc3339(),
        in_doubt: false,
        grant_id: None,
        new_container_id: Some("b".repeat(64)),
        service_version: None,
    });
    w.engine
        .store()
        .save(
            &earlier,
            EventPayload::Created(Created {
                message: earlier.message.clone(),
                options: earlier.options.clone(),
                source: earlier.source,
            }),
        )
        .unwrap();
    let id = w.ask("web is down").await;
    let req = w.waiting(&id).await;
    let (change, _) = req.latest_cited::<kind::Change>().expect("change evidence");
    assert_eq!(
        change.made_by,
        Some(MadeBy {
            request_id: "req-earlier-update".into(),
            action: "update".into(),
        })
    );
    let cause = &req.diagnosis.as_ref().unwrap().causes[0];
    assert!(
        cause
            .reason
            .contains("drydock made this change: the update of request req-earlier-update"),
        "{}",
        cause.reason
    );
    assert_eq!(
        req.plan.as_ref().unwrap().steps[0].action(),
        WriteAction::Rollback
    );
}
