//! The plan for a person's update: one step, from the registry's digest
//! that drydock read itself, or why there is none.

use super::digest;
use crate::model::{
    ContainerStep, ContainerView, Plan, PlanStep, PolicyView, RegistryView, ServiceStep,
    ServiceView, StepWrite, Target, WriteAction,
};
use drydock_proto::approval::{followed_tag, ImageId};

/// Why an update is not planned; the words the request ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoUpdate {
    /// The container runs the image its tag names now.
    UpToDate(String),
    /// Something stands in the way, and what to do about it.
    Blocked(String),
}

/// The update of `target` to what its tag names in its registry now.
pub fn update_plan(
    registry: &RegistryView,
    c: &ContainerView,
    target: &Target,
    policy: &PolicyView,
) -> Result<Plan, NoUpdate> {
    let version = registry
        .version()
        .map(|v| format!(" (version {v})"))
        .unwrap_or_default();
    let unlisted = if registry.tags_unread.is_empty() {
        String::new()
    } else {
        format!(
            " (its registry's tags could not be listed for a newer version of its line: {})",
            registry.tags_unread
        )
    };
    if !registry.update_available {
        return Err(NoUpdate::UpToDate(format!(
            "{} is up to date: {} names {} in its registry, the image it runs{version}{unlisted}.",
            target.name(),
            registry.reference,
            short(&registry.registry_digest)
        )));
    }
    // What the registry names: the same tag, or a newer one of its line.
    let named = match registry.to_tag() {
        Some(tag) => format!(
            "{}:{tag}, the newest version of its line,",
            registry
                .reference
                .rsplit_once(':')
                .map_or(registry.reference.as_str(), |(name, _)| name)
        ),
        None => registry.reference.clone(),
    };
    if !policy.actions.enabled(WriteAction::Update) {
        return Err(NoUpdate::Blocked(format!(
            "{} names {} in its registry, newer than what {} runs{version}, but the executor's policy does not allow updates: set actions.update.enabled in executor.yaml, or pull and recreate it by hand.",
            registry.reference,
            short(&registry.registry_digest),
            target.name()
        )));
    }
    let (Some(from_image), Some(to)) = (
        ImageId::parse(&c.image_id),
        ImageId::parse(&registry.registry_digest),
    ) else {
        return Err(NoUpdate::Blocked(format!(
            "the executor named no content id for {}'s image or its registry's digest; nothing to bind an approval to",
            target.name()
        )));
    };
    if c.image != registry.reference {
        return Err(NoUpdate::Blocked(format!(
            "{} runs {} now, not {}: it changed while drydock read it; ask again",
            target.name(),
            c.image,
            registry.reference
        )));
    }
    let write = ContainerStep::Update {
        from_image,
        digest: to,
        reference: registry.reference.clone(),
        from_version: registry.version().map(str::to_string),
        to_version: registry.new_version().map(str::to_string),
        to_tag: registry.to_tag().map(str::to_string),
    };
    let new_version = match (registry.new_version(), registry.new_revision()) {
        (Some(v), _) => format!(" (version {v})"),
        (None, Some(r)) => format!(" (revision {})", short_revision(r)),
        (None, None) if !registry.new_labels_unread.is_empty() => {
            format!(" (its labels unread: {})", registry.new_labels_unread)
        }
        (None, None) => String::new(),
    };
    let step = PlanStep::new(
        target.clone(),
        StepWrite::Container(write),
        format!(
            "{named} names {}{new_version} in its registry; {} runs {}{version}",
            short(&registry.registry_digest),
            target.name(),
            short(&c.image_id)
        ),
        policy.actions.tier(WriteAction::Update),
        format!(
            "{} runs the image of {} under its name, on its networks, with its volumes, and stays running and healthy through the executor's health window",
            target.name(),
            short(&registry.registry_digest)
        ),
        format!(
            "the executor puts the old container back by itself if the new one stops or turns unhealthy in its window; after that, a rollback to {} (drydock proposes one when a failure began with the update)",
            short(&c.image_id)
        ),
    )
    .map_err(|e| NoUpdate::Blocked(e.to_string()))?;
    let steps = vec![step];
    Ok(Plan {
        digest: digest(&steps),
        steps,
        advice: Vec::new(),
    })
}

/// The update of a Swarm service to what the tag of its spec names in its
/// registry now: the engine's rolling update, rolled back by the engine
/// when a new task fails within the executor's health window.
pub fn service_update_plan(
    registry: &RegistryView,
    s: &ServiceView,
    target: &Target,
    policy: &PolicyView,
) -> Result<Plan, NoUpdate> {
    let sum = &s.summary;
    let version = registry
        .version()
        .map(|v| format!(" (version {v})"))
        .unwrap_or_default();
    if !registry.update_available {
        return Err(NoUpdate::UpToDate(format!(
            "{} is up to date: {} names {} in its registry, the image its spec runs{version}.",
            target.name(),
            registry.reference,
            short(&registry.registry_digest)
        )));
    }
    if !policy.actions.enabled(WriteAction::ServiceUpdate) {
        return Err(NoUpdate::Blocked(format!(
            "{} names {} in its registry, newer than what {} runs{version}, but the executor's policy does not allow updates: set actions.update.enabled in executor.yaml, or run `docker service update --image` by hand.",
            registry.reference,
            short(&registry.registry_digest),
            target.name()
        )));
    }
    let Some(to) = ImageId::parse(&registry.registry_digest) else {
        return Err(NoUpdate::Blocked(format!(
            "the executor named no manifest digest for {}'s tag; nothing to bind an approval to",
            target.name()
        )));
    };
    if followed_tag(&sum.image) != registry.reference {
        return Err(NoUpdate::Blocked(format!(
            "{}'s spec runs {} now, not {}: it changed while drydock read it; ask again",
            target.name(),
            sum.image,
            registry.reference
        )));
    }
    if sum.update_state.in_progress() || sum.update_state.paused() {
        return Err(NoUpdate::Blocked(format!(
            "{}'s update is {}: the engine or a person is changing it; ask again when it has settled",
            target.name(),
            sum.update_state
        )));
    }
    let new_version = match (registry.new_version(), registry.new_revision()) {
        (Some(v), _) => format!(" (version {v})"),
        (None, Some(r)) => format!(" (revision {})", short_revision(r)),
        (None, None) if !registry.new_labels_unread.is_empty() => {
            format!(" (its labels unread: {})", registry.new_labels_unread)
        }
        (None, None) => String::new(),
    };
    let write = ServiceStep::Update {
        version: sum.version,
        image: sum.image.clone(),
        reference: registry.reference.clone(),
        digest: to,
        from_version: registry.version().map(str::to_string),
        to_version: registry.new_version().map(str::to_string),
    };
    let step = PlanStep::new(
        target.clone(),
        StepWrite::Service(write),
        format!(
            "{} names {}{new_version} in its registry; {}'s spec runs {}{version}",
            registry.reference,
            short(&registry.registry_digest),
            target.name(),
            sum.image
        ),
        policy.actions.tier(WriteAction::ServiceUpdate),
        format!(
            "the engine replaces {}'s tasks one by one with the image of {}, and every task it wants runs",
            target.name(),
            short(&registry.registry_digest)
        ),
        "the engine rolls the spec back by itself when a new task fails within the executor's health window (failure_action: rollback); after that, a service rollback".into(),
    )
    .map_err(|e| NoUpdate::Blocked(e.to_string()))?;
    let steps = vec![step];
    Ok(Plan {
        digest: digest(&steps),
        steps,
        advice: Vec::new(),
    })
}

/// `sha256:0123456789ab`: enough of a digest to tell two apart.
fn short(digest: &str) -> String {
    digest.chars().take(19).collect()
}

/// A commit id as `git log --oneline` shows it.
fn short_revision(revision: &str) -> String {
    revision.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_of(c: char) -> String {
        format!("sha256:{}", c.to_string().repeat(64))
    }

    fn setup() -> (RegistryView, ContainerView, Target, PolicyView) {
        let c = ContainerView {
            id: "c".repeat(64),
            name: "shop-api-1".into(),
            image: "registry.example.com/shop/api:stable".into(),
            image_id: digest_of('1'),
            ..Default::default()
        };
        let registry = RegistryView {
            container_id: c.id.clone(),
            reference: c.image.clone(),
            registry_digest: digest_of('2'),
            image_id: c.image_id.clone(),
            running_digests: vec![format!("registry.example.com/shop/api@{}", digest_of('3'))],
            oci_labels: [(
                "org.opencontainers.image.version".to_string(),
                "1.4.2".to_string(),
            )]
            .into_iter()
            .collect(),
            update_available: true,
            new_oci_labels: [(
                "org.opencontainers.image.version".to_string(),
                "1.5.0".to_string(),
            )]
            .into_iter()
            .collect(),
            new_labels_unread: String::new(),
            ..Default::default()
        };
        let target = Target::container(c.id.clone(), c.name.clone(), None, None);
        let mut policy = PolicyView::default();
        policy.actions.set_enabled(WriteAction::Update, true);
        (registry, c, target, policy)
    }

    #[test]
    fn an_available_update_is_one_step_bound_to_the_digest_and_the_running_image() {
        let (registry, c, target, policy) = setup();
        let plan = update_plan(&registry, &c, &target, &policy).expect("a plan");
        assert_eq!(plan.steps.len(), 1);
        let (claims, from) = plan.steps[0].update().expect("an update step");
        assert_eq!(claims.digest, digest_of('2'));
        assert_eq!(claims.reference, c.image);
        assert_eq!(claims.from_version.as_deref(), Some("1.4.2"));
        assert_eq!(claims.to_version.as_deref(), Some("1.5.0"));
        assert_eq!(claims.to_tag, None, "the tag it runs is followed");
        assert!(plan.steps[0]
            .reason
            .contains("(version 1.5.0) in its registry"));
        assert_eq!(from.as_str(), c.image_id);
    }

    #[test]
    fn a_newer_tag_of_the_line_is_bound_in_the_claims() {
        let (mut registry, c, target, policy) = setup();
        registry.new_tag = "stable-2".into();
        let plan = update_plan(&registry, &c, &target, &policy).expect("a plan");
        let (claims, _) = plan.steps[0].update().expect("an update step");
        assert_eq!(claims.to_tag.as_deref(), Some("stable-2"));
        assert_eq!(claims.reference, c.image, "the tag it runs now");
        assert!(
            plan.steps[0].reason.starts_with(
                "registry.example.com/shop/api:stable-2, the newest version of its line,"
            ),
            "{}",
            plan.steps[0].reason
        );
    }

    #[test]
    fn no_update_when_up_to_date_disabled_or_the_tag_moved() {
        let (mut registry, c, target, mut policy) = setup();
        let mut moved = c.clone();
        moved.image = "registry.example.com/shop/api:canary".into();
        assert!(matches!(
            update_plan(&registry, &moved, &target, &policy),
            Err(NoUpdate::Blocked(m)) if m.contains("ask again")
        ));
        policy.actions.set_enabled(WriteAction::Update, false);
        assert!(matches!(
            update_plan(&registry, &c, &target, &policy),
            Err(NoUpdate::Blocked(m)) if m.contains("actions.update.enabled")
        ));
        registry.update_available = false;
        assert!(matches!(
            update_plan(&registry, &c, &target, &policy),
            Err(NoUpdate::UpToDate(m)) if m.contains("up to date")
        ));
    }

    fn service_setup() -> (RegistryView, ServiceView, Target, PolicyView) {
        let (mut registry, _, _, mut policy) = setup();
        registry.reference = "registry.example.com/shop/web:stable".into();
        registry.container_id = "a".repeat(25);
        let mut s = ServiceView::default();
        s.summary.id = "a".repeat(25);
        s.summary.name = "shop_web".into();
        s.summary.version = 12;
        s.summary.image = format!("{}@{}", registry.reference, digest_of('3'));
        let target = Target::service(s.summary.id.clone(), "shop_web", Some("shop".into()), None);
        policy.actions.set_enabled(WriteAction::ServiceUpdate, true);
        (registry, s, target, policy)
    }

    #[test]
    fn a_service_update_is_bound_to_its_spec_version_tag_and_digest() {
        let (registry, s, target, policy) = service_setup();
        let plan = service_update_plan(&registry, &s, &target, &policy).expect("a plan");
        assert_eq!(plan.steps.len(), 1);
        let step = &plan.steps[0];
        assert_eq!(step.action(), WriteAction::ServiceUpdate);
        let claims = step.service_claims().expect("service claims");
        assert_eq!(
            (claims.version, claims.image.as_str()),
            (12, s.summary.image.as_str())
        );
        assert_eq!(claims.to_image, None);
        let update = step.update_claims().expect("update claims");
        assert_eq!(update.digest, digest_of('2'));
        assert_eq!(update.reference, "registry.example.com/shop/web:stable");
        assert_eq!(update.to_version.as_deref(), Some("1.5.0"));
        assert_eq!(update.to_tag, None);
    }

    #[test]
    fn no_service_update_when_up_to_date_disabled_moved_or_under_way() {
        let (mut registry, s, target, mut policy) = service_setup();
        let mut moved = s.clone();
        moved.summary.image = "registry.example.com/shop/web:canary".into();
        assert!(matches!(
            service_update_plan(&registry, &moved, &target, &policy),
            Err(NoUpdate::Blocked(m)) if m.contains("ask again")
        ));
        let mut busy = s.clone();
        busy.summary.update_state = crate::model::UpdateState::Updating;
        assert!(matches!(
            service_update_plan(&registry, &busy, &target, &policy),
            Err(NoUpdate::Blocked(m)) if m.contains("update is updating")
        ));
        policy
            .actions
            .set_enabled(WriteAction::ServiceUpdate, false);
        assert!(matches!(
            service_update_plan(&registry, &s, &target, &policy),
            Err(NoUpdate::Blocked(m)) if m.contains("actions.update.enabled")
        ));
        registry.update_available = false;
        assert!(matches!(
            service_update_plan(&registry, &s, &target, &policy),
            Err(NoUpdate::UpToDate(m)) if m.contains("up to date")
        ));
    }
}
