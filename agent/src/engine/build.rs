//! A person's build ("rebuild the api at 9c2d1e0", `drydock build api`):
//! the container's build context and the commit asked for, read by the
//! executor with the target's evidence, then a plan of a build and an
//! update to what it builds (or the reason there is none).

use super::{Engine, Gathered, Stop};
use crate::model::*;
use crate::planner::build::build_plan;

impl Engine {
    /// The target's build context and the commit `at` names in it; `None`
    /// when the read failed and ended the request (no context, an unknown
    /// revision, no git on the executor).
    pub(super) async fn build_gathered(
        &self,
        req: &Request,
        target: &Target,
        at: &str,
    ) -> Result<Option<Gathered>, Stop> {
        let id = &req.id;
        let read = self.exec(id).build_source(id, target.id(), at).await;
        let asked = if at.is_empty() { "HEAD" } else { at };
        let call = format!("read {asked} of {}'s build context", target.name());
        let Some(source) = self.required(id, &call, read).await? else {
            return Ok(None);
        };
        let summary = format!(
            "{} of context {} is commit {} (\"{}\", {}, {}){}{}",
            asked,
            source.context,
            source.short(),
            source.subject,
            source.author,
            source.date,
            if source.built_image_id.is_empty() {
                String::new()
            } else {
                format!("; {} is built already", source.tag)
            },
            if source.dirty {
                "; the checkout has uncommitted changes"
            } else {
                ""
            }
        );
        Ok(Some(Gathered::new(
            "BuildSource",
            EvidencePayload::BuildSource(source),
            summary,
        )))
    }

    /// Plan the build the person asked for, or finish saying why not.
    pub(super) async fn plan_build(&self, req: &Request) -> Result<bool, Stop> {
        let (Some(source), Some(c), Some(target), Some(policy)) = (
            req.latest::<kind::BuildSource>(),
            req.latest::<kind::Inspect>(),
            req.target.as_ref(),
            Self::latest_policy(req),
        ) else {
            self.finish(
                &req.id,
                Status::Failed,
                "no build source, inspect or policy to plan a build from".into(),
            )
            .await?;
            return Ok(false);
        };
        let planned = build_plan(source, c, target, &policy);
        self.propose_update(req, planned).await
    }
}
