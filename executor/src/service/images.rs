//! `InspectImage`: whether an image, named by its content id only, is on
//! the engine, and where it came from (its OCI labels). Its tags are
//! answered only where a visible container uses that name, so the call
//! cannot list the engine's images.

use std::collections::BTreeSet;

use super::*;

impl ExecutorService {
    pub(super) async fn inspect_image(
        &self,
        call: &mut Call,
        req: pb::ImageRequest,
    ) -> Result<pb::ImageResponse, ExecError> {
        call.record(&req.request_id, "");
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        if !drydock_proto::approval::is_image_id(&req.image_id) {
            return Err(ExecError::InvalidArgument(format!(
                "image_id `{}` is not an image's content id (sha256: and 64 hex digits)",
                truncate_for_audit(&redact::neutralise_controls(&req.image_id))
            )));
        }
        call.entry.input = format!("image_id={}", req.image_id);
        let Some(image) = self.docker.image(&req.image_id).await? else {
            call.entry.result = "not on the engine".into();
            return Ok(pb::ImageResponse {
                present: false,
                id: req.image_id,
                ..Default::default()
            });
        };
        let visible_names: BTreeSet<String> = self
            .docker
            .list(true)
            .await?
            .into_iter()
            .filter(|c| self.policy.target_allowed(&c.name, &c.labels))
            .map(|c| c.image)
            .collect();
        let text = |t: &str| redact::redact_text(&redact::neutralise_controls(t)).0;
        call.entry.result = "present".into();
        Ok(pb::ImageResponse {
            present: true,
            id: image.id,
            repo_tags: image
                .repo_tags
                .into_iter()
                .filter(|t| visible_names.contains(t))
                .collect(),
            created: text(&image.created),
            oci_labels: image
                .oci_labels
                .into_iter()
                .map(|(k, v)| (k, text(&v)))
                .collect(),
        })
    }
}
