//! `RegistryDigest` and what an `UpdateContainer` needs beyond the write
//! path: the container's tag must be in an allowed registry (checked
//! before the approval is spent), and the job carries the registry's
//! limits and credentials into the write's own task.

use super::*;
use crate::docker::UpdatePlan;
use crate::policy::Update;
use crate::registry::{self, Credentials, ImageRef};

/// How long the registry may take to name a tag's digest (it is further
/// away than the engine).
const REGISTRY_READ: Duration = Duration::from_secs(30);

/// An update's registry side, decided before the approval is spent.
pub(super) struct UpdateJob {
    reference: ImageRef,
    credentials: Option<Credentials>,
    pull_timeout: Duration,
    max_image_bytes: u64,
    window: Duration,
}

impl UpdateJob {
    /// Pull, swap, hold; the answer's new container and image.
    pub(super) async fn run(
        &self,
        docker: &DockerAdapter,
        permit: &Permit<Update>,
        digest: &ImageId,
        response: &mut pb::WriteResponse,
    ) -> Result<Option<String>, DockerError> {
        let plan = UpdatePlan {
            reference: &self.reference,
            digest: digest.as_str(),
            credentials: self.credentials.as_ref(),
            pull_timeout: self.pull_timeout,
            max_image_bytes: self.max_image_bytes,
            window: self.window,
        };
        let done = docker.update(permit, plan).await?;
        response.new_image_id = done.image_id;
        response.watched_secs = done.watched.as_secs();
        response.pulled = done.pulled;
        Ok(Some(done.new_container_id))
    }
}

impl ExecutorService {
    /// The registry entry for `target`'s tag, or why it has none, and the
    /// approved digest checked against what the tag names in the registry
    /// now: the person was shown "the manifest the tag names", so an older
    /// or another tag's manifest of the same repository is refused, before
    /// the approval is spent. Recorded in the call's input either way.
    pub(super) async fn update_job(
        &self,
        call: &mut Call,
        target: &ResolvedTarget,
        digest: &ImageId,
    ) -> Result<UpdateJob, ExecError> {
        call.entry.input.push_str(&format!(
            " reference={} digest={digest} from_image_id={}",
            truncate_for_audit(&redact::neutralise_controls(&target.image_ref)),
            target.image_id
        ));
        let allowed = self.registries.allowed(&target.image_ref)?;
        let (reference, registry, credentials) =
            (allowed.reference, allowed.config, allowed.credentials);
        let now = self
            .docker
            .registry_digest(
                &reference,
                credentials,
                registry.pull_timeout.min(REGISTRY_READ),
            )
            .await?;
        if now != digest.as_str() {
            return Err(ExecError::Approval(ApprovalError::TagMoved {
                reference: truncate_for_audit(&redact::neutralise_controls(&target.image_ref)),
                approved: digest.to_string(),
                now,
            }));
        }
        Ok(UpdateJob {
            reference,
            credentials: credentials.cloned(),
            pull_timeout: registry.pull_timeout,
            max_image_bytes: registry.max_image_bytes,
            window: self.update.health_window,
        })
    }

    /// `RegistryDigest`: a visible container's tag, its registry's digest
    /// for it now, and the digests of the image it runs.
    pub(super) async fn registry_digest(
        &self,
        call: &mut Call,
        req: pb::ContainerRequest,
    ) -> Result<pb::RegistryDigestResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let (permit, details) = self.permit_read_resolved(call, &req.container).await?;
        let details = match details {
            Some(d) => d,
            None => self.docker.inspect(&permit).await?,
        };
        let allowed = self.registries.allowed(&details.image)?;
        call.entry.input = format!(
            "reference={}",
            truncate_for_audit(&redact::neutralise_controls(&details.image))
        );
        let read_limit = allowed.config.pull_timeout.min(REGISTRY_READ);
        let reference = &allowed.reference;
        let digest = self
            .docker
            .registry_digest(reference, allowed.credentials, read_limit)
            .await?;
        let running = self.docker.repo_digests(&details.image_id).await?;
        let name = reference.name();
        let update_available = !running.iter().any(|d| {
            d.split_once('@')
                .is_some_and(|(n, d2)| n == name && d2 == digest)
        });
        let labels = self
            .docker
            .image(&details.image_id)
            .await?
            .map(|i| i.oci_labels)
            .unwrap_or_default();
        let text = |t: &str| redact::redact_text(&redact::neutralise_controls(t)).0;
        // The new image's labels, read from its config in the registry
        // (the engine cannot say them before a pull); a read that fails
        // says why and leaves the digest's answer standing.
        let (new_labels, new_labels_unread) = if update_available {
            let read = async {
                let mut session = allowed.reader()?;
                session.image_config(&digest).await
            };
            match registry::reader::within(read_limit, read).await {
                Ok(config) => {
                    let mut labels: BTreeMap<String, String> = config
                        .labels
                        .into_iter()
                        .filter(|(k, _)| crate::docker::OCI_LABELS.contains(&k.as_str()))
                        .collect();
                    if let Some(created) = config.created {
                        labels
                            .entry("org.opencontainers.image.created".into())
                            .or_insert(created);
                    }
                    (labels, String::new())
                }
                Err(e) => (BTreeMap::new(), text(&redact::withhold_known(&e.0).0)),
            }
        } else {
            (BTreeMap::new(), String::new())
        };
        call.entry.result = format!(
            "digest={digest} {}{}",
            if update_available {
                "update available"
            } else {
                "up to date"
            },
            if new_labels_unread.is_empty() {
                String::new()
            } else {
                format!(
                    "; its labels unread: {}",
                    truncate_for_audit(&new_labels_unread)
                )
            }
        );
        Ok(pb::RegistryDigestResponse {
            container_id: details.id,
            reference: text(&details.image),
            registry_digest: digest,
            image_id: details.image_id,
            running_digests: running.iter().map(|d| text(d)).collect(),
            oci_labels: labels.into_iter().map(|(k, v)| (k, text(&v))).collect(),
            update_available,
            new_oci_labels: new_labels.into_iter().map(|(k, v)| (k, text(&v))).collect(),
            new_labels_unread,
        })
    }

    /// `UpdateContainer`: the write path with the digest the approval must
    /// name, or the tag must name now under an update grant.
    pub(super) async fn update_rpc(
        &self,
        request: Request<pb::UpdateRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        let digest = content_id(
            &request.get_ref().digest,
            "digest",
            "a manifest digest",
            "an update names what it pulls by content, never by tag",
        );
        let request = request.map(|req| pb::WriteRequest {
            request_id: req.request_id,
            container: req.container,
            approval: req.approval,
            grant: req.grant,
            fault_class: String::new(),
        });
        let write = digest.map(|digest| ContainerWrite::Update { digest });
        self.write_rpc(request, ContainerAction::Update, write)
            .await
    }
}
