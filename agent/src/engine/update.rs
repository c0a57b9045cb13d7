//! A person's update ("update the api", `drydock update api`): the
//! registry's digest read with the target's evidence, then a plan of one
//! update step (or the reason there is none). The diagnosis is the rules'
//! as for any request, so the person also sees the state it is in now.

use super::{Engine, Gathered, Stop};
use crate::model::*;
use crate::planner::update::{service_update_plan, update_plan, NoUpdate};

impl Engine {
    /// The target's tag and its registry's digest; `None` when the read
    /// failed and ended the request (the registry not allowed, unreachable).
    pub(super) async fn registry_gathered(
        &self,
        req: &Request,
        target: &Target,
    ) -> Result<Option<Gathered>, Stop> {
        let id = &req.id;
        let ex = self.exec(id);
        let read = match target.kind() {
            TargetKind::Container => ex.registry_digest(id, target.id()).await,
            TargetKind::Service => ex.service_registry_digest(id, target.id()).await,
        };
        let call = format!("read the registry's digest for {}'s tag", target.name());
        let Some(registry) = self.required(id, &call, read).await? else {
            return Ok(None);
        };
        // A service runs what its spec is pinned to; a container an image.
        let running = match target.kind() {
            TargetKind::Container => registry.image_id.clone(),
            TargetKind::Service => registry
                .running_digests
                .first()
                .cloned()
                .unwrap_or_else(|| "an unpinned image".into()),
        };
        let summary = format!(
            "{} names {} in its registry; {} runs {}{} ({})",
            registry.reference,
            registry.registry_digest,
            target.name(),
            running,
            registry
                .version()
                .map(|v| format!(", version {v}"))
                .unwrap_or_default(),
            if registry.update_available {
                "an update is available"
            } else {
                "up to date"
            }
        );
        Ok(Some(Gathered::new(
            "RegistryDigest",
            EvidencePayload::Registry(registry),
            summary,
        )))
    }

    /// Before verifying an update: whether the container under the
    /// target's name runs the approved digest now. It may under a new id
    /// (the swap), which becomes the target, or it may run the old image
    /// again (the executor put it back, perhaps while this agent was
    /// down, so no answer said so): then the request fails, saying so.
    /// `None` when the request ended.
    pub(super) async fn updated_target(
        &self,
        req: &Request,
        target: Target,
    ) -> Result<Option<Target>, Stop> {
        let id = &req.id;
        let Some((claims, from)) = req
            .plan
            .as_ref()
            .and_then(|p| p.steps.iter().find_map(|s| s.update()))
        else {
            return Ok(Some(target));
        };
        let now = match self.exec(id).registry_digest(id, target.name()).await {
            Ok(now) => now,
            // The usual verification decides (by the target's id).
            Err(_) => return Ok(Some(target)),
        };
        let pinned = format!("@{}", claims.digest);
        if now.running_digests.iter().any(|d| d.ends_with(&pinned)) {
            let mut moved = target.clone();
            if let Subject::Container(c) = &mut moved.subject {
                c.id = now.container_id.clone();
            }
            // Both versions, now that the new image's labels can be read.
            let version = |v: Option<&str>| {
                v.map_or("no version label".to_string(), |v| format!("version {v}"))
            };
            let revision = now
                .oci_labels
                .get("org.opencontainers.image.revision")
                .map(|r| format!(", revision {r}"))
                .unwrap_or_default();
            let chosen = moved.clone();
            self.update(
                id,
                EventPayload::Target(TargetChosen {
                    target: moved.clone(),
                    why: format!(
                        "the update replaced {}'s container: it runs {}{revision} now ({} before)",
                        target.name(),
                        version(now.version()),
                        version(claims.from_version.as_deref())
                    ),
                }),
                move |r| r.target = Some(chosen),
            )
            .await?;
            return Ok(Some(moved));
        }
        let said = req
            .execution
            .iter()
            .rev()
            .find(|e| e.action == WriteAction::Update && !e.ok && !e.in_doubt)
            .map(|e| format!(" The executor said: {}", e.message))
            .unwrap_or_default();
        let back = if now.image_id == from.as_str() {
            "the image it ran before"
        } else {
            "another image"
        };
        self.finish(
            id,
            Status::Failed,
            format!(
                "the update of {} to {} was not kept: it runs {} ({back}) now; the executor puts the old container back when the new one stops or turns unhealthy within its health window, and its audit log says why.{said}",
                target.name(),
                claims.digest,
                now.image_id
            ),
        )
        .await?;
        Ok(None)
    }

    /// Plan the update the person asked for, or finish saying why not.
    pub(super) async fn plan_update(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let (Some(registry), Some(c), Some(target), Some(policy)) = (
            req.latest::<kind::Registry>(),
            req.latest::<kind::Inspect>(),
            req.target.as_ref(),
            Self::latest_policy(req),
        ) else {
            self.finish(
                id,
                Status::Failed,
                "no registry digest, inspect or policy to plan an update from".into(),
            )
            .await?;
            return Ok(false);
        };
        let planned = update_plan(registry, c, target, &policy);
        self.propose_update(req, planned).await
    }

    /// Plan the update of a Swarm service the person asked for, or finish
    /// saying why not.
    pub(super) async fn plan_service_update(
        &self,
        req: &Request,
        service: &ServiceView,
    ) -> Result<bool, Stop> {
        let (Some(registry), Some(target), Some(policy)) = (
            req.latest::<kind::Registry>(),
            req.target.as_ref(),
            Self::latest_policy(req),
        ) else {
            self.finish(
                &req.id,
                Status::Failed,
                "no registry digest or policy to plan an update from".into(),
            )
            .await?;
            return Ok(false);
        };
        let planned = service_update_plan(registry, service, target, &policy);
        self.propose_update(req, planned).await
    }

    /// Propose an update's plan, or finish with why there is none.
    pub(super) async fn propose_update(
        &self,
        req: &Request,
        planned: Result<Plan, NoUpdate>,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        match planned {
            Ok(plan) => {
                let diagnosis = req.diagnosis.clone().unwrap_or_default();
                self.propose(req, plan, &diagnosis).await
            }
            Err(NoUpdate::UpToDate(why)) => {
                self.finish(id, Status::Completed, why).await?;
                Ok(false)
            }
            Err(NoUpdate::Blocked(why)) => {
                let what = match req.options.build {
                    Some(_) => "no build",
                    None => "no update",
                };
                self.finish(id, Status::Completed, format!("{what}: {why}"))
                    .await?;
                Ok(false)
            }
        }
    }
}
