//! The executor's write RPCs, as the agent sends them: the write and the
//! authority for it (a person's signed approval, or a grant), which only
//! the operator's key can have made.

use drydock_proto::approval::{ContainerWrite, ServiceWrite};
use drydock_proto::pb;

use super::{Authority, ExecutorClient, ExecutorError, WriteOp};

impl Authority {
    /// The request's `approval`, `grant` and `fault_class` fields: one of
    /// the two authorities, and the class a grant is used for.
    pub(super) fn into_wire(self) -> (Option<pb::Approval>, Option<pb::Grant>, String) {
        match self {
            Authority::Approval {
                claims,
                signature,
                key_id,
                cosigners,
            } => (
                Some(pb::Approval {
                    claims,
                    signature,
                    key_id,
                    cosignatures: cosigners
                        .into_iter()
                        .map(|(key_id, signature)| pb::Cosignature { signature, key_id })
                        .collect(),
                }),
                None,
                String::new(),
            ),
            Authority::Grant {
                claims,
                signature,
                key_id,
                fault_class,
            } => (
                None,
                Some(pb::Grant {
                    claims,
                    signature,
                    key_id,
                }),
                fault_class,
            ),
        }
    }
}

impl ExecutorClient {
    /// Send a signed approval (or a grant) with the write it authorizes.
    /// The agent cannot make these bytes itself: only the operator's key
    /// can sign them. A rollback's approval must name the image it runs; a
    /// grant never covers one (the executor refuses it too). An update's
    /// grant is the executor's to judge (its hours, actions.update.grants).
    pub(super) async fn write(
        &self,
        request_id: &str,
        op: &WriteOp,
        authority: Authority,
    ) -> Result<Written, ExecutorError> {
        let (container_id, write) = match op {
            WriteOp::Service { id, write } => {
                return self.write_service(write, request_id, id, authority).await
            }
            WriteOp::Container { id, write } => (id, write),
        };
        let mut req = pb::WriteRequest {
            request_id: request_id.into(),
            container: container_id.clone(),
            ..Default::default()
        };
        (req.approval, req.grant, req.fault_class) = authority.into_wire();
        let mut client = self.writes.clone();
        let answer = match write {
            ContainerWrite::Restart => client.restart_container(req).await?,
            ContainerWrite::Start => client.start_container(req).await?,
            ContainerWrite::Stop => client.stop_container(req).await?,
            ContainerWrite::Rollback { to_image } => {
                let Some(approval) = req.approval else {
                    return Err(ExecutorError::new(
                        tonic::Code::FailedPrecondition,
                        "a rollback needs a person's approval naming the image; a grant never covers it",
                    ));
                };
                client
                    .rollback_container(pb::RollbackRequest {
                        request_id: req.request_id,
                        container: req.container,
                        image_id: to_image.to_string(),
                        approval: Some(approval),
                    })
                    .await?
            }
            ContainerWrite::Build { commit } => return self.build_image(req, commit).await,
            ContainerWrite::UpdateBuilt { commit } => return self.update_built(req, commit).await,
            ContainerWrite::Update { digest, to_tag } => {
                client
                    .update_container(pb::UpdateRequest {
                        request_id: req.request_id,
                        container: req.container,
                        digest: digest.to_string(),
                        approval: req.approval,
                        grant: req.grant,
                        to_tag: to_tag.clone().unwrap_or_default(),
                        built_commit: String::new(),
                    })
                    .await?
            }
        }
        .into_inner();
        Ok(Written {
            new_container_id: Some(answer.new_container_id).filter(|id| !id.is_empty()),
            service_version: None,
            built: None,
        })
    }
}

/// What a write left behind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// A rollback's new container (it took the old one's name).
    pub new_container_id: Option<String>,
    /// A Swarm service's spec version after the write.
    pub service_version: Option<u64>,
    /// A build's image, how long it took, and its output's last lines.
    pub built: Option<BuiltImage>,
}

/// What a build made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltImage {
    pub image_id: String,
    pub secs: u64,
    pub log: Vec<String>,
}

impl WriteOp {
    /// The call a plan step makes: its write, on its target's id. (A step
    /// pairs each write with a target of its kind: `PlanStep::new`.)
    pub fn of(step: &crate::model::PlanStep) -> WriteOp {
        use crate::model::{ContainerStep, ServiceStep, StepWrite};
        let id = step.target().id().to_string();
        match step.write() {
            StepWrite::Container(w) => WriteOp::Container {
                id,
                write: match w {
                    ContainerStep::Start => ContainerWrite::Start,
                    ContainerStep::Restart => ContainerWrite::Restart,
                    ContainerStep::Stop => ContainerWrite::Stop,
                    ContainerStep::Rollback { to_image, .. } => ContainerWrite::Rollback {
                        to_image: to_image.clone(),
                    },
                    // `PlanStep::new` and the wire check the digest; a step
                    // whose digest did not parse cannot exist.
                    ContainerStep::Update { digest, to_tag, .. } => ContainerWrite::Update {
                        digest: digest.clone(),
                        to_tag: to_tag.clone(),
                    },
                    ContainerStep::Build { source } => ContainerWrite::Build {
                        commit: source.commit.clone(),
                    },
                    ContainerStep::UpdateBuilt { source, .. } => ContainerWrite::UpdateBuilt {
                        commit: source.commit.clone(),
                    },
                },
            },
            StepWrite::Service(w) => WriteOp::Service {
                id,
                write: match w {
                    ServiceStep::ForceUpdate { .. } => ServiceWrite::ForceUpdate,
                    ServiceStep::Rollback { .. } => ServiceWrite::Rollback,
                    ServiceStep::Update { digest, .. } => ServiceWrite::Update {
                        digest: digest.clone(),
                    },
                },
            },
        }
    }
}
