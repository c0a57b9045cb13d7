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
