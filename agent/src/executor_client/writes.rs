//! The executor's write RPCs, as the agent sends them: the write and the
//! authority for it (a person's signed approval, or a grant), which only
//! the operator's key can have made.

use drydock_proto::approval::WriteAction;
use drydock_proto::pb;

use super::{Authority, ExecutorClient, ExecutorError, Written};

impl Authority {
    /// The request's `approval`, `grant` and `fault_class` fields: one of
    /// the two authorities, and the class a grant is used for.
    pub(super) fn into_wire(self) -> (Option<pb::Approval>, Option<pb::Grant>, String) {
        match self {
            Authority::Approval {
                claims,
                signature,
                key_id,
            } => (
                Some(pb::Approval {
                    claims,
                    signature,
                    key_id,
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
    /// can sign them. A rollback names the image to run (`image`), which
    /// its approval must name too; a grant never covers one.
    pub(super) async fn write(
        &self,
        action: WriteAction,
        request_id: &str,
        container_id: &str,
        authority: Authority,
        image: Option<&str>,
    ) -> Result<Written, ExecutorError> {
        if action.on_service() {
            return self
                .write_service(action, request_id, container_id, authority)
                .await;
        }
        let mut req = pb::WriteRequest {
            request_id: request_id.into(),
            container: container_id.into(),
            ..Default::default()
        };
        (req.approval, req.grant, req.fault_class) = authority.into_wire();
        let mut client = self.writes.clone();
        let answer = match action {
            WriteAction::Restart => client.restart_container(req).await?,
            WriteAction::Start => client.start_container(req).await?,
            WriteAction::Stop => client.stop_container(req).await?,
            // Sent by `write_service` above.
            WriteAction::ForceUpdate | WriteAction::ServiceRollback => {
                return Err(ExecutorError::new(
                    tonic::Code::InvalidArgument,
                    format!("{action} acts on a service, not a container"),
                ))
            }
            WriteAction::Rollback => {
                let (Some(approval), Some(image)) = (req.approval, image) else {
                    return Err(ExecutorError::new(
                        tonic::Code::FailedPrecondition,
                        "a rollback needs a person's approval naming the image; a grant never covers it",
                    ));
                };
                client
                    .rollback_container(pb::RollbackRequest {
                        request_id: req.request_id,
                        container: req.container,
                        image_id: image.to_string(),
                        approval: Some(approval),
                    })
                    .await?
            }
        }
        .into_inner();
        Ok(Written {
            new_container_id: Some(answer.new_container_id).filter(|id| !id.is_empty()),
            service_version: None,
        })
    }
}
