//! The executor's build RPCs, as the agent uses them: the source a build
//! would read (`BuildSource`), the build itself and the update to what it
//! built (both approval only).

use drydock_proto::approval::CommitId;
use drydock_proto::pb;

use super::{BuiltImage, ExecutorClient, ExecutorError, Written};
use crate::model::BuildSourceView;

impl ExecutorClient {
    pub(super) async fn build_source(
        &self,
        request_id: &str,
        container: &str,
        revision: &str,
    ) -> Result<BuildSourceView, ExecutorError> {
        let r = self
            .inner
            .clone()
            .build_source(pb::BuildSourceRequest {
                request_id: request_id.into(),
                container: container.into(),
                revision: revision.into(),
            })
            .await?
            .into_inner();
        Ok(BuildSourceView {
            container_id: r.container_id,
            context: r.context,
            commit: r.commit,
            tree: r.tree,
            dockerfile: r.dockerfile,
            tag: r.tag,
            subject: r.subject,
            author: r.author,
            date: r.date,
            head: r.head,
            dirty: r.dirty,
            built_image_id: r.built_image_id,
            running_revision: r.running_revision,
            changed_files: r.changed_files,
            changed_files_more: r.changed_files_more,
        })
    }

    /// Build `commit` for the container; approval only.
    pub(super) async fn build_image(
        &self,
        req: pb::WriteRequest,
        commit: &CommitId,
    ) -> Result<Written, ExecutorError> {
        let Some(approval) = req.approval else {
            return Err(approval_needed("a build"));
        };
        let answer = self
            .writes
            .clone()
            .build_image(pb::BuildRequest {
                request_id: req.request_id,
                container: req.container,
                commit: commit.to_string(),
                approval: Some(approval),
            })
            .await?
            .into_inner();
        Ok(Written {
            new_container_id: None,
            service_version: None,
            built: Some(BuiltImage {
                image_id: answer.new_image_id,
                secs: answer.watched_secs,
                log: answer.build_log,
            }),
        })
    }

    /// Run the image built from `commit` in the container's place; approval
    /// only.
    pub(super) async fn update_built(
        &self,
        req: pb::WriteRequest,
        commit: &CommitId,
    ) -> Result<Written, ExecutorError> {
        let Some(approval) = req.approval else {
            return Err(approval_needed("an update to a built image"));
        };
        let answer = self
            .writes
            .clone()
            .update_container(pb::UpdateRequest {
                request_id: req.request_id,
                container: req.container,
                built_commit: commit.to_string(),
                approval: Some(approval),
                ..Default::default()
            })
            .await?
            .into_inner();
        Ok(Written {
            new_container_id: Some(answer.new_container_id).filter(|id| !id.is_empty()),
            service_version: None,
            built: None,
        })
    }
}

fn approval_needed(what: &str) -> ExecutorError {
    ExecutorError::new(
        tonic::Code::FailedPrecondition,
        format!("{what} needs a person's approval naming the commit; a grant never covers it"),
    )
}
