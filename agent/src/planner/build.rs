//! The plan for a person's build: build the container's image from its
//! build context at the commit asked for, then run it in the container's
//! place; each step with its own approval, shown together. Or why there is
//! none.

use super::digest;
use super::update::NoUpdate;
use crate::model::{
    BuildSourceView, ContainerStep, ContainerView, Plan, PlanStep, PolicyView, StepWrite, Target,
    WriteAction,
};
use drydock_proto::approval::{BuildClaims, CommitId, ImageId};

/// The build of `target` from `source`, and the update to what it builds.
pub fn build_plan(
    source: &BuildSourceView,
    c: &ContainerView,
    target: &Target,
    policy: &PolicyView,
) -> Result<Plan, NoUpdate> {
    let name = target.name();
    let short = source.short();
    let what = format!(
        "commit {short} of {} (\"{}\", {})",
        source.context, source.subject, source.author
    );
    if !source.built_image_id.is_empty() && c.image_id == source.built_image_id {
        return Err(NoUpdate::UpToDate(format!(
            "{name} runs the image built from {what} already ({})",
            source.tag
        )));
    }
    if source.dirty && source.head == source.commit {
        return Err(NoUpdate::Blocked(format!(
            "the checkout of {} has uncommitted changes to tracked files, and {short} is its HEAD: a build of it would not be what the checkout holds; commit or stash them, or name a commit with --at",
            source.context
        )));
    }
    let needs_build = source.built_image_id.is_empty();
    for (action, key, why) in [
        (WriteAction::Build, "actions.build.enabled", needs_build),
        (WriteAction::Update, "actions.update.enabled", true),
    ] {
        if why && !policy.actions.enabled(action) {
            return Err(NoUpdate::Blocked(format!(
                "the executor's policy does not allow {action}s, which running {what} in {name}'s place needs: set {key} in executor.yaml"
            )));
        }
    }
    let (Some(from_image), Some(commit)) =
        (ImageId::parse(&c.image_id), CommitId::parse(&source.commit))
    else {
        return Err(NoUpdate::Blocked(format!(
            "the executor named no content id for {name}'s image or no full commit; nothing to bind an approval to"
        )));
    };
    let claims = BuildClaims {
        context: source.context.clone(),
        commit,
        tree: source.tree.clone(),
        dockerfile: source.dockerfile.clone(),
        tag: source.tag.clone(),
        subject: Some(source.subject.clone()).filter(|s| !s.is_empty()),
        author: Some(source.author.clone()).filter(|s| !s.is_empty()),
    };
    let changed = changed_files(source);
    let mut steps = Vec::new();
    if needs_build {
        steps.push(
            PlanStep::new(
                target.clone(),
                StepWrite::Container(ContainerStep::Build {
                    source: claims.clone(),
                }),
                format!(
                    "build {} from {what}, {}{changed}",
                    source.tag, source.date
                ),
                policy.actions.tier(WriteAction::Build),
                format!(
                    "an image tagged {} built from the commit's own files ({} in tree {}), with no network and nothing pulled unless the executor allows it; {name} is not touched",
                    source.tag,
                    source.dockerfile,
                    source.tree.get(..12).unwrap_or(&source.tree)
                ),
                "nothing to undo: the image is only built; the next step runs it".into(),
            )
            .map_err(|e| NoUpdate::Blocked(e.to_string()))?,
        );
    }
    steps.push(
        PlanStep::new(
            target.clone(),
            StepWrite::Container(ContainerStep::UpdateBuilt {
                from_image,
                source: claims,
            }),
            format!(
                "run the image built from {what} in {name}'s place; it runs {} now",
                c.image_id.get(..19).unwrap_or(&c.image_id)
            ),
            policy.actions.tier(WriteAction::Update),
            format!(
                "{name} runs {} under its name, on its networks, with its volumes, and stays running and healthy through the executor's health window",
                source.tag
            ),
            format!(
                "the executor puts the old container back by itself if the new one stops or turns unhealthy in its window; after that, a rollback to {}",
                c.image_id.get(..19).unwrap_or(&c.image_id)
            ),
        )
        .map_err(|e| NoUpdate::Blocked(e.to_string()))?,
    );
    Ok(Plan {
        digest: digest(&steps),
        steps,
        advice: Vec::new(),
    })
}

/// "; files changed from the running a1b2c3d4e5f6: a, b (and 3 more)".
fn changed_files(source: &BuildSourceView) -> String {
    if source.running_revision.is_empty() {
        return String::new();
    }
    let from = source
        .running_revision
        .get(..12)
        .unwrap_or(&source.running_revision);
    if source.changed_files.is_empty() {
        return format!("; no file changed from the running {from}");
    }
    let more = match source.changed_files_more {
        0 => String::new(),
        n => format!(" (and {n} more)"),
    };
    format!(
        "; files changed from the running {from}: {}{more}",
        source.changed_files.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ActionsView;

    fn source() -> BuildSourceView {
        BuildSourceView {
            container_id: "c".repeat(64),
            context: "api".into(),
            commit: "9c2d1e0a".repeat(5),
            tree: "ab".repeat(20),
            dockerfile: "Dockerfile".into(),
            tag: "drydock/api:9c2d1e0a9c2d".into(),
            subject: "fix the port".into(),
            author: "Ann <ann@example.com>".into(),
            date: "2026-12-07T10:00:00+00:00".into(),
            head: "f".repeat(40),
            dirty: false,
            running_revision: "1".repeat(40),
            changed_files: vec!["src/main.rs".into()],
            ..Default::default()
        }
    }

    fn container() -> ContainerView {
        ContainerView {
            id: "c".repeat(64),
            name: "shop-api-1".into(),
            image_id: format!("sha256:{}", "d".repeat(64)),
            ..Default::default()
        }
    }

    fn target() -> Target {
        Target::container("c".repeat(64), "shop-api-1".to_string(), None, None)
    }

    fn policy(build: bool, update: bool) -> PolicyView {
        let mut actions = ActionsView::default();
        actions.set_enabled(WriteAction::Build, build);
        actions.set_enabled(WriteAction::Update, update);
        PolicyView {
            actions,
            ..Default::default()
        }
    }

    #[test]
    fn a_build_then_its_update_each_bound_to_the_source() {
        let plan = build_plan(&source(), &container(), &target(), &policy(true, true)).unwrap();
        let actions: Vec<WriteAction> = plan.steps.iter().map(|s| s.action()).collect();
        assert_eq!(actions, vec![WriteAction::Build, WriteAction::Update]);
        for s in &plan.steps {
            let b = s.build_claims().expect("bound to the source");
            assert_eq!(b.commit.as_str(), "9c2d1e0a".repeat(5));
            assert_eq!(b.tree, "ab".repeat(20));
        }
        assert!(
            plan.steps[0].reason.contains("src/main.rs"),
            "{}",
            plan.steps[0].reason
        );
        assert_eq!(
            plan.steps[1].from_image().map(|i| i.to_string()),
            Some(format!("sha256:{}", "d".repeat(64)))
        );
    }

    #[test]
    fn a_built_image_is_only_run_and_a_running_one_is_left() {
        let mut s = source();
        s.built_image_id = format!("sha256:{}", "e".repeat(64));
        let plan = build_plan(&s, &container(), &target(), &policy(false, true)).unwrap();
        assert_eq!(plan.steps.len(), 1, "built already: no build step");
        let mut c = container();
        c.image_id = s.built_image_id.clone();
        assert!(matches!(
            build_plan(&s, &c, &target(), &policy(true, true)),
            Err(NoUpdate::UpToDate(_))
        ));
    }

    #[test]
    fn a_dirty_head_or_a_disabled_action_plans_nothing() {
        let mut s = source();
        s.dirty = true;
        s.head = s.commit.clone();
        let Err(NoUpdate::Blocked(why)) =
            build_plan(&s, &container(), &target(), &policy(true, true))
        else {
            panic!("a dirty HEAD is not built");
        };
        assert!(why.contains("uncommitted"), "{why}");
        for (b, u, key) in [
            (false, true, "actions.build"),
            (true, false, "actions.update"),
        ] {
            let Err(NoUpdate::Blocked(why)) =
                build_plan(&source(), &container(), &target(), &policy(b, u))
            else {
                panic!("{key} off");
            };
            assert!(why.contains(key), "{why}");
        }
    }
}
