//! A person's update: planned from the registry's digest drydock read,
//! bound to it, verified by what the container runs afterwards.

use super::*;

const NEW_WEB: &str = "bbbbbbbbbbbb0000000000000000000000000000000000000000000000000000";

fn digest_of(c: char) -> String {
    format!("sha256:{}", c.to_string().repeat(64))
}

/// web on image 1 of `registry.example.com/shop/web:stable`; the registry
/// names image 2's manifest now.
fn on_image_one(health: &str) -> ContainerView {
    ContainerView {
        image: "registry.example.com/shop/web:stable".into(),
        image_id: digest_of('1'),
        ..web(health)
    }
}

fn registry(running: char, update_available: bool) -> RegistryView {
    RegistryView {
        container_id: WEB.into(),
        reference: "registry.example.com/shop/web:stable".into(),
        registry_digest: digest_of('b'),
        image_id: digest_of(running),
        running_digests: vec![format!(
            "registry.example.com/shop/web@{}",
            if running == '2' {
                digest_of('b')
            } else {
                digest_of('a')
            }
        )],
        oci_labels: [(
            "org.opencontainers.image.version".to_string(),
            "1.4".to_string(),
        )]
        .into_iter()
        .collect(),
        update_available,
        ..Default::default()
    }
}

fn updater(after: ContainerView, registry_after: RegistryView) -> Scripted {
    let mut executor = Scripted::new(
        on_image_one("healthy"),
        WriteScript {
            answer: Ok(()),
            after,
        },
    );
    executor
        .policy
        .actions
        .set_enabled(WriteAction::Update, true);
    executor.registry = Some(registry('1', true));
    executor.registry_after = Some(registry_after);
    executor
}

impl World {
    async fn ask_update(&self) -> String {
        let options = RequestOptions {
            container: Some("web".into()),
            update: true,
            ..Default::default()
        };
        self.engine
            .create("update web".into(), options)
            .await
            .unwrap()
            .id
    }
}

#[tokio::test]
async fn an_update_is_planned_from_the_registry_signed_for_its_digest_and_verified() {
    let after = ContainerView {
        id: NEW_WEB.into(),
        image_id: digest_of('2'),
        ..on_image_one("healthy")
    };
    let mut now = registry('2', false);
    now.container_id = NEW_WEB.into();
    now.oci_labels = [
        ("org.opencontainers.image.version", "1.5"),
        ("org.opencontainers.image.revision", "rev-b"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let w = world(updater(after, now), WatchMode::Notify);
    let id = w.ask_update().await;
    let req = w.waiting(&id).await;
    assert_eq!(req.status, Status::WaitingApproval, "{:?}", req.outcome);
    assert!(req.latest::<kind::Registry>().is_some());
    let plan = req.plan.clone().expect("a plan");
    assert_eq!(plan.steps.len(), 1);
    assert_eq!(plan.steps[0].action(), WriteAction::Update);
    let pending = req.pending_approvals().next().expect("an approval");
    let claims = approval::ApprovalClaims::decode(&B64.decode(&pending.claims).unwrap()).unwrap();
    let update = claims.update.clone().expect("update claims");
    assert_eq!(update.digest, digest_of('b'));
    assert_eq!(update.reference, "registry.example.com/shop/web:stable");
    assert_eq!(update.from_version.as_deref(), Some("1.4"));
    assert_eq!(
        claims.from_image_id.as_deref(),
        Some(digest_of('1').as_str())
    );
    assert_eq!(claims.image_id, None);
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert_eq!(req.target.as_ref().map(|t| t.id()), Some(NEW_WEB));
    assert_eq!(w.executor.writes(), 1);
    // Both versions are said once the new image's labels can be read.
    let events = w.engine.store().events_after(&id, 0).unwrap();
    let moved = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Target(t) if t.why.contains("the update replaced") => Some(t.why.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("the target moved to the new container: {events:#?}"));
    assert!(
        moved.contains("runs version 1.5, revision rev-b now (version 1.4 before)"),
        "{moved}"
    );
}

#[tokio::test]
async fn an_update_the_executor_did_not_keep_fails_saying_so() {
    // After the write, web runs image 1 again under its old id: the
    // executor put it back (its answer lost, as when the agent died).
    let w = world(
        updater(on_image_one("healthy"), registry('1', true)),
        WatchMode::Notify,
    );
    let id = w.ask_update().await;
    let req = w.waiting(&id).await;
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Failed);
    let outcome = req.outcome.unwrap_or_default();
    assert!(outcome.contains("was not kept"), "{outcome}");
    assert!(outcome.contains("the image it ran before"), "{outcome}");
}

#[tokio::test]
async fn no_update_without_a_newer_digest_an_allowed_registry_or_the_policy() {
    let mut up_to_date = updater(on_image_one("healthy"), registry('1', false));
    up_to_date.registry = Some(registry('2', false));
    let w = world(up_to_date, WatchMode::Notify);
    let req = w.finished(&w.ask_update().await).await;
    assert_eq!(req.status, Status::Completed);
    assert!(req.outcome.unwrap_or_default().contains("is up to date"));
    assert!(req.approvals.is_empty());

    let mut not_allowed = updater(on_image_one("healthy"), registry('1', false));
    not_allowed.registry = None;
    let w = world(not_allowed, WatchMode::Notify);
    let req = w.finished(&w.ask_update().await).await;
    assert_eq!(req.status, Status::Failed);
    let outcome = req.outcome.unwrap_or_default();
    assert!(
        outcome.contains("could not read the registry's digest"),
        "{outcome}"
    );
    assert!(outcome.contains("is not in `registries`"), "{outcome}");

    let mut off = updater(on_image_one("healthy"), registry('1', false));
    off.policy.actions.set_enabled(WriteAction::Update, false);
    let w = world(off, WatchMode::Notify);
    let req = w.finished(&w.ask_update().await).await;
    assert_eq!(req.status, Status::Completed);
    assert!(req
        .outcome
        .unwrap_or_default()
        .contains("actions.update.enabled"));
    assert_eq!(w.executor.writes(), 0);
}

#[tokio::test]
async fn a_granted_update_the_executor_put_back_fails_and_asks_no_person() {
    let key = approval::generate_signing_key();
    let mut executor = updater(on_image_one("healthy"), registry('1', true));
    executor.write.answer = Err(ExecutorError::new(
        Code::FailedPrecondition,
        "the new image turned unhealthy after 3s; web was put back as it was",
    ));
    executor.policy.automation_enabled = true;
    executor.policy.update_grants = true;
    executor.policy.approvers = vec![ApproverView {
        id: "ops".into(),
        public_key: approval::format_public_key(&key.verifying_key()),
    }];
    // Notify mode: an update grant is its own opt-in.
    let w = world(executor, WatchMode::Notify);
    // An update grant over web, in hours that hold now (UTC: the
    // scripted executor's offset is 0), as the update checker uses it.
    let now = unix_now();
    let minute = (now.rem_euclid(86_400) / 60) as i32;
    let at = |d: i32| {
        let m = (minute + d).rem_euclid(1440);
        format!("{:02}:{:02}", m / 60, m % 60)
    };
    let claims = GrantClaims {
        version: GRANT_VERSION_NO_HOST,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions: vec![WriteAction::Update],
        scope: GrantScope {
            names: vec!["web".into()],
            ..Default::default()
        },
        classes: vec![],
        max_per_container: 1,
        window_secs: 3600,
        max_total: 1,
        issued_at: now,
        expires_at: now + 3600,
        host: None,
        hours: Some(format!("{}-{}", at(-60), at(60))),
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
    let grant_id = claims.grant_id.clone();
    let options = RequestOptions {
        container: Some(WEB.into()),
        update: true,
        ..Default::default()
    };
    let id = w
        .engine
        .open(
            format!("update web to {}: an update was found", digest_of('b')),
            options,
            RequestSource::Update,
        )
        .await
        .unwrap()
        .id;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Failed, "{:?}", req.outcome);
    assert!(
        req.outcome
            .as_deref()
            .unwrap_or_default()
            .contains("put back as it was"),
        "{:?}",
        req.outcome
    );
    assert_eq!(req.execution.len(), 1);
    assert_eq!(
        req.execution[0].grant_id.as_deref(),
        Some(grant_id.as_str())
    );
    assert!(
        req.pending_approvals().next().is_none(),
        "no person is asked for an update the executor put back"
    );
    assert_eq!(w.executor.writes(), 1);
    // Tried once: the checker does not open it again for this digest.
    assert!(w
        .engine
        .store()
        .update_opened(WEB, &digest_of('b'))
        .unwrap());
    assert!(!w
        .engine
        .store()
        .update_opened(WEB, &digest_of('c'))
        .unwrap());
}
