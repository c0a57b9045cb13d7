//! A plan and its steps: each step's write carries what belongs to it
//! (`StepWrite`), and the wire form every approval's plan digest covers.

use serde::{Deserialize, Serialize};

use super::{Target, TargetKind};
use crate::{ServiceClaims, WriteAction};
use drydock_proto::approval::{BuildClaims, ImageId, UpdateClaims};

/// A container's write as planned, with what belongs to it: a rollback
/// names both images by content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerStep {
    Start,
    Restart,
    Stop,
    /// Re-create the container with `to_image`; it runs `from_image` now.
    Rollback {
        to_image: ImageId,
        from_image: ImageId,
    },
    /// Re-create the container with the image its tag (`reference`) names
    /// now in its registry, the manifest `digest`; it runs `from_image`
    /// (labelled `from_version`) now; the new image is labelled
    /// `to_version` in the registry.
    Update {
        from_image: ImageId,
        digest: ImageId,
        reference: String,
        from_version: Option<String>,
        to_version: Option<String>,
        /// A newer tag of the same repository, when the update moves to
        /// one (`drydock.update=patch` or `minor`).
        to_tag: Option<String>,
    },
    /// Build an image for the container from its build context at the
    /// commit `source` names; the container is not touched.
    Build {
        source: BuildClaims,
    },
    /// Re-create the container with the image built from `source`; it
    /// runs `from_image` now.
    UpdateBuilt {
        from_image: ImageId,
        source: BuildClaims,
    },
}

/// A Swarm service's write as planned: bound to the spec version and the
/// image it was shown at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceStep {
    /// Replace its tasks, at spec `version` running `image`.
    ForceUpdate { version: u64, image: String },
    /// Return it from spec `version` (running `image`) to its previous
    /// spec, which runs `to_image`.
    Rollback {
        version: u64,
        image: String,
        to_image: String,
    },
    /// Move spec `version` (running `image`, pinned by the engine) to the
    /// manifest `digest` its tag (`reference`) names now in its registry,
    /// through the engine's rolling update that rolls back by itself.
    Update {
        version: u64,
        image: String,
        reference: String,
        digest: ImageId,
        from_version: Option<String>,
        to_version: Option<String>,
    },
}

/// What a plan step writes, by the kind of target it acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepWrite {
    Container(ContainerStep),
    Service(ServiceStep),
}

impl ContainerStep {
    pub fn action(&self) -> WriteAction {
        match self {
            ContainerStep::Start => WriteAction::Start,
            ContainerStep::Restart => WriteAction::Restart,
            ContainerStep::Stop => WriteAction::Stop,
            ContainerStep::Rollback { .. } => WriteAction::Rollback,
            ContainerStep::Update { .. } | ContainerStep::UpdateBuilt { .. } => WriteAction::Update,
            ContainerStep::Build { .. } => WriteAction::Build,
        }
    }
}

impl ServiceStep {
    pub fn action(&self) -> WriteAction {
        match self {
            ServiceStep::ForceUpdate { .. } => WriteAction::ForceUpdate,
            ServiceStep::Rollback { .. } => WriteAction::ServiceRollback,
            ServiceStep::Update { .. } => WriteAction::ServiceUpdate,
        }
    }
}

impl StepWrite {
    pub fn action(&self) -> WriteAction {
        match self {
            StepWrite::Container(w) => w.action(),
            StepWrite::Service(w) => w.action(),
        }
    }

    /// The kind of target the write acts on.
    pub fn acts_on(&self) -> TargetKind {
        match self {
            StepWrite::Container(_) => TargetKind::Container,
            StepWrite::Service(_) => TargetKind::Service,
        }
    }
}

/// One write of a plan. Made only with a write that acts on its target's
/// kind (`PlanStep::new`, and reading the wire form refuses the others).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "PlanStepWire", into = "PlanStepWire")]
pub struct PlanStep {
    target: Target,
    write: StepWrite,
    pub reason: String,
    /// The executor's tier for the action.
    pub risk: crate::container::Tier,
    pub expected_effect: String,
    pub rollback: String,
}

/// Why a step could not be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepMismatch(pub String);

impl std::fmt::Display for StepMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PlanStep {
    /// A step, if `write` acts on `target`'s kind.
    pub fn new(
        target: Target,
        write: StepWrite,
        reason: String,
        risk: crate::container::Tier,
        expected_effect: String,
        rollback: String,
    ) -> Result<PlanStep, StepMismatch> {
        if write.acts_on() != target.kind() {
            return Err(StepMismatch(format!(
                "{} acts on a {}, and {} is a {}",
                write.action(),
                write.acts_on(),
                target.name(),
                target.kind()
            )));
        }
        Ok(PlanStep {
            target,
            write,
            reason,
            risk,
            expected_effect,
            rollback,
        })
    }

    pub fn action(&self) -> WriteAction {
        self.write.action()
    }

    /// What the step acts on.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// What the step writes.
    pub fn write(&self) -> &StepWrite {
        &self.write
    }

    /// A Swarm service's write as its approval names it: the service, its
    /// spec version and image (and a rollback's image to return to).
    pub fn service_claims(&self) -> Option<ServiceClaims> {
        let (version, image, to_image) = match &self.write {
            StepWrite::Service(ServiceStep::ForceUpdate { version, image }) => {
                (*version, image.clone(), None)
            }
            StepWrite::Service(ServiceStep::Rollback {
                version,
                image,
                to_image,
            }) => (*version, image.clone(), Some(to_image.clone())),
            StepWrite::Service(ServiceStep::Update { version, image, .. }) => {
                (*version, image.clone(), None)
            }
            StepWrite::Container(_) => return None,
        };
        Some(ServiceClaims {
            id: self.target.id().to_string(),
            name: self.target.name().to_string(),
            version,
            image,
            to_image,
        })
    }

    /// A rollback's images: the one to run, and the one the container runs
    /// now.
    pub fn images(&self) -> Option<(&ImageId, &ImageId)> {
        match &self.write {
            StepWrite::Container(ContainerStep::Rollback {
                to_image,
                from_image,
            }) => Some((to_image, from_image)),
            _ => None,
        }
    }

    /// An update's claims (tag, digest, version shown), and the image the
    /// container runs now.
    pub fn update(&self) -> Option<(UpdateClaims, &ImageId)> {
        match &self.write {
            StepWrite::Container(ContainerStep::Update {
                from_image,
                digest,
                reference,
                from_version,
                to_version,
                to_tag,
            }) => Some((
                UpdateClaims {
                    reference: reference.clone(),
                    digest: digest.to_string(),
                    from_version: from_version.clone(),
                    to_version: to_version.clone(),
                    to_tag: to_tag.clone(),
                },
                from_image,
            )),
            _ => None,
        }
    }

    /// A build's source, or an update to a built image's.
    pub fn build_claims(&self) -> Option<BuildClaims> {
        match &self.write {
            StepWrite::Container(
                ContainerStep::Build { source } | ContainerStep::UpdateBuilt { source, .. },
            ) => Some(source.clone()),
            _ => None,
        }
    }

    /// The image the container runs now, for an update of either kind.
    pub fn from_image(&self) -> Option<&ImageId> {
        match &self.write {
            StepWrite::Container(ContainerStep::UpdateBuilt { from_image, .. }) => Some(from_image),
            _ => self.update().map(|(_, from)| from),
        }
    }

    /// What an update's approval binds besides its target: a container's
    /// (as `update`) or a service's (its tag and the digest).
    pub fn update_claims(&self) -> Option<UpdateClaims> {
        match &self.write {
            StepWrite::Service(ServiceStep::Update {
                reference,
                digest,
                from_version,
                to_version,
                ..
            }) => Some(UpdateClaims {
                reference: reference.clone(),
                digest: digest.to_string(),
                from_version: from_version.clone(),
                to_version: to_version.clone(),
                to_tag: None,
            }),
            _ => self.update().map(|(u, _)| u),
        }
    }
}

/// A plan step on the wire and in stored plans, as it always was (the
/// plan's digest, which every approval binds, covers these bytes).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[schemars(rename = "PlanStep")]
pub struct PlanStepWire {
    pub action: WriteAction,
    pub target: Target,
    /// A rollback's image to run (`sha256:…`), and the one the container
    /// runs now; absent for every other action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_image_id: Option<String>,
    /// A Swarm service's write: the service, its spec version and image
    /// (and for a rollback the image it returns to), exactly as the
    /// approval will name them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceClaims>,
    /// An update's tag and the manifest digest it pulls, exactly as the
    /// approval will name them (with `from_image_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateClaims>,
    /// A build's source (context, commit, tree, Dockerfile, tag), or the
    /// source of the built image an update runs (then with
    /// `from_image_id` and no `update`), exactly as the approval will name
    /// them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildClaims>,
    pub reason: String,
    /// The executor's tier for the action: `T1` (change), `T2` (disruptive).
    pub risk: crate::container::Tier,
    pub expected_effect: String,
    pub rollback: String,
}

impl TryFrom<PlanStepWire> for PlanStep {
    type Error = String;

    fn try_from(w: PlanStepWire) -> Result<PlanStep, String> {
        let image = |field: &str, value: Option<String>| {
            value
                .as_deref()
                .and_then(ImageId::parse)
                .ok_or_else(|| format!("a rollback step needs `{field}`, an image's content id"))
        };
        let service = |w: &PlanStepWire| {
            w.service
                .clone()
                .ok_or_else(|| format!("a {} step names its service", w.action))
        };
        let write = match w.action {
            WriteAction::Start => StepWrite::Container(ContainerStep::Start),
            WriteAction::Restart => StepWrite::Container(ContainerStep::Restart),
            WriteAction::Stop => StepWrite::Container(ContainerStep::Stop),
            WriteAction::Rollback => StepWrite::Container(ContainerStep::Rollback {
                to_image: image("image_id", w.image_id.clone())?,
                from_image: image("from_image_id", w.from_image_id.clone())?,
            }),
            WriteAction::Update if w.build.is_some() => {
                StepWrite::Container(ContainerStep::UpdateBuilt {
                    from_image: image("from_image_id", w.from_image_id.clone())?,
                    source: w.build.clone().ok_or("an update step names its source")?,
                })
            }
            WriteAction::Build => StepWrite::Container(ContainerStep::Build {
                source: w
                    .build
                    .clone()
                    .ok_or("a build step names its context and commit")?,
            }),
            WriteAction::Update => {
                let u = w
                    .update
                    .clone()
                    .ok_or("an update step names its reference and manifest digest")?;
                StepWrite::Container(ContainerStep::Update {
                    from_image: image("from_image_id", w.from_image_id.clone())?,
                    digest: ImageId::parse(&u.digest)
                        .ok_or("an update step's digest is sha256: and 64 hex digits")?,
                    reference: u.reference,
                    from_version: u.from_version,
                    to_version: u.to_version,
                    to_tag: u.to_tag,
                })
            }
            WriteAction::ForceUpdate => {
                let s = service(&w)?;
                StepWrite::Service(ServiceStep::ForceUpdate {
                    version: s.version,
                    image: s.image,
                })
            }
            WriteAction::ServiceRollback => {
                let s = service(&w)?;
                StepWrite::Service(ServiceStep::Rollback {
                    version: s.version,
                    image: s.image,
                    to_image: s
                        .to_image
                        .ok_or("a service rollback step names the image it returns to")?,
                })
            }
            WriteAction::ServiceUpdate => {
                let s = service(&w)?;
                let u = w
                    .update
                    .clone()
                    .ok_or("a service update step names its reference and manifest digest")?;
                StepWrite::Service(ServiceStep::Update {
                    version: s.version,
                    image: s.image,
                    digest: ImageId::parse(&u.digest)
                        .ok_or("a service update step's digest is sha256: and 64 hex digits")?,
                    reference: u.reference,
                    from_version: u.from_version,
                    to_version: u.to_version,
                })
            }
        };
        PlanStep::new(
            w.target,
            write,
            w.reason,
            w.risk,
            w.expected_effect,
            w.rollback,
        )
        .map_err(|e| e.to_string())
    }
}

impl From<PlanStep> for PlanStepWire {
    fn from(s: PlanStep) -> PlanStepWire {
        let service = s.service_claims();
        let (image_id, from_image_id) = match (s.images(), s.from_image()) {
            (Some((to, from)), _) => (Some(to.to_string()), Some(from.to_string())),
            (None, Some(from)) => (None, Some(from.to_string())),
            (None, None) => (None, None),
        };
        let update = s.update_claims();
        let build = s.build_claims();
        PlanStepWire {
            action: s.action(),
            target: s.target,
            image_id,
            from_image_id,
            service,
            update,
            build,
            reason: s.reason,
            risk: s.risk,
            expected_effect: s.expected_effect,
            rollback: s.rollback,
        }
    }
}

impl schemars::JsonSchema for PlanStep {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        PlanStepWire::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        PlanStepWire::json_schema(generator)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct Plan {
    /// sha256 over the steps; bound into every approval.
    pub digest: String,
    pub steps: Vec<PlanStep>,
    /// What a human must do; no executor action can.
    pub advice: Vec<String>,
}
