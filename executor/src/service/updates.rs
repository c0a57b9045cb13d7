//! `RegistryDigest` and what an `UpdateContainer` needs beyond the write
//! path: the container's tag must be in an allowed registry (checked
//! before the approval is spent), and the job carries the registry's
//! limits and credentials into the write's own task.

use super::*;
use crate::docker::ServiceInfo;
use crate::docker::UpdatePlan;
use crate::policy::{ServicePermit, ServiceUpdate, Update};
use crate::registry::{self, Credentials, ImageRef};

/// How long the registry may take to name a tag's digest (it is further
/// away than the engine).
pub(super) const REGISTRY_READ: Duration = Duration::from_secs(30);

/// An update's registry side, decided before the approval is spent.
pub(super) struct UpdateJob {
    /// What the new container runs, and what the old one ran (the same
    /// tag, unless the update moves to a newer one of its line).
    reference: ImageRef,
    from_reference: ImageRef,
    credentials: Option<Credentials>,
    pull_timeout: Duration,
    max_image_bytes: u64,
    window: Duration,
    /// An image the executor built (`reference` is its tag): nothing is
    /// pulled.
    built: Option<String>,
}

impl UpdateJob {
    /// An update to the image the executor built and tagged `reference`.
    pub(super) fn built(
        reference: ImageRef,
        from_reference: ImageRef,
        image_id: String,
        window: Duration,
    ) -> UpdateJob {
        UpdateJob {
            reference,
            from_reference,
            credentials: None,
            pull_timeout: Duration::ZERO,
            max_image_bytes: u64::MAX,
            window,
            built: Some(image_id),
        }
    }

    /// Pull (unless built here), swap, hold; the answer's new container
    /// and image. `digest` is the manifest pulled (empty for a built one).
    pub(super) async fn run(
        &self,
        docker: &DockerAdapter,
        permit: &Permit<Update>,
        digest: &str,
        response: &mut pb::WriteResponse,
    ) -> Result<Option<String>, DockerError> {
        let plan = UpdatePlan {
            reference: &self.reference,
            from_reference: &self.from_reference,
            digest,
            credentials: self.credentials.as_ref(),
            pull_timeout: self.pull_timeout,
            max_image_bytes: self.max_image_bytes,
            window: self.window,
            built: self.built.as_deref(),
        };
        let done = docker.update(permit, plan).await?;
        response.new_image_id = done.image_id;
        response.watched_secs = done.watched.as_secs();
        response.pulled = done.pulled;
        Ok(Some(done.new_container_id))
    }
}

/// A reader's error as an answer and an audit row may hold it.
fn text_of(error: &str) -> String {
    redact::redact_text(&redact::neutralise_controls(
        &redact::withhold_known(error).0,
    ))
    .0
}

/// How long each of the executor's own reads (the tags, the new image's
/// labels) may take: with the digest's read they stay within the caller's
/// deadline.
const OWN_READ: Duration = Duration::from_secs(10);

/// The longest label value an answer carries (whoever publishes an image
/// chooses its labels).
const MAX_LABEL: usize = 256;

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
        to_tag: Option<&str>,
    ) -> Result<UpdateJob, ExecError> {
        call.entry.input.push_str(&format!(
            " reference={} digest={digest} from_image_id={}{}",
            truncate_for_audit(&redact::neutralise_controls(&target.image_ref)),
            target.image_id,
            to_tag
                .map(|t| format!(
                    " to_tag={}",
                    truncate_for_audit(&redact::neutralise_controls(t))
                ))
                .unwrap_or_default()
        ));
        let allowed = self.registries.allowed(&target.image_ref)?;
        let (from_reference, registry, credentials) =
            (allowed.reference, allowed.config, allowed.credentials);
        let reference = match to_tag {
            Some(tag) => from_reference.moved_to(tag, &target.labels)?,
            None => from_reference.clone(),
        };
        let now = self
            .docker
            .registry_digest(
                &reference,
                credentials,
                registry.pull_timeout.min(REGISTRY_READ),
            )
            .await?;
        if now != digest.as_str() {
            let tagged = reference.tagged().unwrap_or_default();
            return Err(ExecError::Approval(ApprovalError::TagMoved {
                reference: truncate_for_audit(&redact::neutralise_controls(&tagged)),
                approved: digest.to_string(),
                now,
            }));
        }
        Ok(UpdateJob {
            reference,
            from_reference,
            credentials: credentials.cloned(),
            pull_timeout: registry.pull_timeout,
            max_image_bytes: registry.max_image_bytes,
            window: self.update.health_window,
            built: None,
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
        // A container that follows its tag's line asks for the newest newer
        // tag of it; without one (or when the tags cannot be listed) the
        // tag it runs is followed.
        let follow = registry::line::Follow::of(&details.labels);
        let current_tag = allowed.reference.tag.clone().unwrap_or_default();
        let (new_tag, tags_unread) = if registry::line::has_line(&current_tag, follow) {
            let read = async {
                let mut session = allowed.reader()?;
                session.tags().await
            };
            match registry::reader::within(read_limit.min(OWN_READ), read).await {
                Ok(tags) => (
                    registry::line::newest(&current_tag, &tags, follow).map(str::to_string),
                    String::new(),
                ),
                Err(e) => (None, text_of(&e.0)),
            }
        } else {
            (None, String::new())
        };
        let followed = match &new_tag {
            Some(tag) => allowed.reference.with_tag(tag),
            None => allowed.reference.clone(),
        };
        let reference = &followed;
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
            registry_labels(&allowed, &digest, read_limit).await
        } else {
            (BTreeMap::new(), String::new())
        };
        call.entry.result = format!(
            "digest={digest}{} {}{}",
            new_tag
                .as_deref()
                .map(|t| format!(" of newer tag {}", truncate_for_audit(&text(t))))
                .unwrap_or_default(),
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
            new_tag: new_tag.map(|t| text(&t)).unwrap_or_default(),
            tags_unread,
        })
    }

    /// `UpdateContainer`: the write path with the digest the approval must
    /// name, or the tag must name now under an update grant; or, with
    /// `built_commit`, the image built from that commit (approval only).
    pub(super) async fn update_rpc(
        &self,
        request: Request<pb::UpdateRequest>,
    ) -> Result<Response<pb::WriteResponse>, Status> {
        if !request.get_ref().built_commit.is_empty() {
            let r = request.get_ref();
            let write = match (r.digest.is_empty(), r.to_tag.is_empty()) {
                (true, true) => commit_argument(&r.built_commit)
                    .map(|commit| ContainerWrite::UpdateBuilt { commit }),
                _ => Err(ExecError::InvalidArgument(
                    "an update names a digest (and a tag) or a built commit, not both".into(),
                )),
            };
            let request = request.map(as_write);
            return self
                .write_rpc(request, ContainerAction::Update, write)
                .await;
        }
        let digest = content_id(
            &request.get_ref().digest,
            "digest",
            "a manifest digest",
            "an update names what it pulls by content, never by tag",
        );
        let to_tag = tag_argument(&request.get_ref().to_tag);
        let request = request.map(as_write);
        let write = digest.and_then(|digest| {
            Ok(ContainerWrite::Update {
                digest,
                to_tag: to_tag?,
            })
        });
        self.write_rpc(request, ContainerAction::Update, write)
            .await
    }
}

/// An update's call as the write path takes it (an update is for no
/// fault: no class).
fn as_write(req: pb::UpdateRequest) -> pb::WriteRequest {
    pb::WriteRequest {
        request_id: req.request_id,
        container: req.container,
        approval: req.approval,
        grant: req.grant,
        fault_class: String::new(),
    }
}

/// An image's OCI labels (and its creation time), read from its config in
/// the registry by its manifest `digest`; empty with why, when unread.
async fn registry_labels(
    allowed: &registry::Allowed<'_>,
    digest: &str,
    limit: Duration,
) -> (BTreeMap<String, String>, String) {
    let read = async {
        let mut session = allowed.reader()?;
        session.image_config(digest).await
    };
    match registry::reader::within(limit.min(OWN_READ), read).await {
        Ok(config) => {
            let bounded = |v: String| v.chars().take(MAX_LABEL).collect::<String>();
            let mut labels: BTreeMap<String, String> = config
                .labels
                .into_iter()
                .filter(|(k, _)| crate::docker::OCI_LABELS.contains(&k.as_str()))
                .map(|(k, v)| (k, bounded(v)))
                .collect();
            if let Some(created) = config.created {
                labels
                    .entry("org.opencontainers.image.created".into())
                    .or_insert(bounded(created));
            }
            (labels, String::new())
        }
        Err(e) => (BTreeMap::new(), text_of(&e.0)),
    }
}

/// A service update's registry side, decided before the approval is
/// spent: the spec's new image (its tag pinned to the approved digest),
/// the engine's monitor and the registry's credentials for the nodes.
pub(super) struct ServiceUpdateJob {
    image: String,
    registry: String,
    credentials: Option<Credentials>,
    monitor: Duration,
}

impl ServiceUpdateJob {
    /// Hand the new spec to the engine's rolling update; the spec version
    /// after it.
    pub(super) async fn run(
        &self,
        docker: &DockerAdapter,
        permit: &ServicePermit<ServiceUpdate>,
    ) -> Result<u64, DockerError> {
        docker
            .update_service_image(
                permit,
                &self.image,
                self.monitor,
                self.credentials.as_ref(),
                &self.registry,
            )
            .await
    }
}

impl ExecutorService {
    /// The registry entry for a service's tag (its spec's image without
    /// the engine's digest pin), and the approved digest checked against
    /// what the tag names now. Recorded in the call's input either way.
    pub(super) async fn service_update_job(
        &self,
        call: &mut Call,
        service: &ServiceInfo,
        digest: &ImageId,
    ) -> Result<ServiceUpdateJob, ExecError> {
        let followed = drydock_proto::approval::followed_tag(&service.image);
        call.entry.input.push_str(&format!(" digest={digest}"));
        let allowed = self.registries.allowed(followed)?;
        let now = self
            .docker
            .registry_digest(
                &allowed.reference,
                allowed.credentials,
                allowed.config.pull_timeout.min(REGISTRY_READ),
            )
            .await?;
        if now != digest.as_str() {
            return Err(ExecError::Approval(ApprovalError::TagMoved {
                reference: truncate_for_audit(&redact::neutralise_controls(followed)),
                approved: digest.to_string(),
                now,
            }));
        }
        Ok(ServiceUpdateJob {
            image: format!("{followed}@{digest}"),
            registry: allowed.reference.registry.clone(),
            credentials: allowed.credentials.cloned(),
            monitor: self.update.health_window,
        })
    }

    /// `ServiceRegistryDigest`: a visible service's tag, the digest its
    /// registry names for it now, and the digest its spec is pinned to.
    pub(super) async fn service_registry_digest(
        &self,
        call: &mut Call,
        req: pb::ServiceRequest,
    ) -> Result<pb::RegistryDigestResponse, ExecError> {
        call.record(&req.request_id, &req.service);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let (_permit, service) = self.permit_service_read(call, &req.service).await?;
        let followed = drydock_proto::approval::followed_tag(&service.image);
        call.entry.input = format!(
            "reference={}",
            truncate_for_audit(&redact::neutralise_controls(followed))
        );
        let allowed = self.registries.allowed(followed)?;
        let read_limit = allowed.config.pull_timeout.min(REGISTRY_READ);
        let digest = self
            .docker
            .registry_digest(&allowed.reference, allowed.credentials, read_limit)
            .await?;
        // The engine pins the spec to the digest it resolved at deploy.
        let pinned = service
            .image
            .split_once('@')
            .map(|(_, d)| d.to_string())
            .filter(|d| drydock_proto::approval::is_image_id(d));
        let update_available = pinned.as_deref() != Some(digest.as_str());
        let (labels, _) = match &pinned {
            Some(pin) => registry_labels(&allowed, pin, read_limit).await,
            None => (BTreeMap::new(), String::new()),
        };
        let (new_labels, new_labels_unread) = if update_available {
            registry_labels(&allowed, &digest, read_limit).await
        } else {
            (BTreeMap::new(), String::new())
        };
        call.entry.result = format!(
            "digest={digest} {}",
            if update_available {
                "update available"
            } else {
                "up to date"
            }
        );
        let text = |t: &str| redact::redact_text(&redact::neutralise_controls(t)).0;
        let name = allowed.reference.name();
        Ok(pb::RegistryDigestResponse {
            container_id: service.id.clone(),
            reference: text(followed),
            registry_digest: digest,
            image_id: String::new(),
            running_digests: pinned
                .map(|p| text(&format!("{name}@{p}")))
                .into_iter()
                .collect(),
            oci_labels: labels.into_iter().map(|(k, v)| (k, text(&v))).collect(),
            update_available,
            new_oci_labels: new_labels.into_iter().map(|(k, v)| (k, text(&v))).collect(),
            new_labels_unread,
            new_tag: String::new(),
            tags_unread: String::new(),
        })
    }

    /// `UpdateService`: the service write path with the digest the
    /// approval must name. Approval only: a grant never covers it.
    pub(super) async fn update_service_rpc(
        &self,
        request: Request<pb::ServiceUpdateRequest>,
    ) -> Result<Response<pb::ServiceWriteResponse>, Status> {
        let digest = content_id(
            &request.get_ref().digest,
            "digest",
            "a manifest digest",
            "an update names what it runs by content, never by tag",
        );
        let request = request.map(|req| pb::ServiceWriteRequest {
            request_id: req.request_id,
            service: req.service,
            approval: req.approval,
            grant: None,
            fault_class: String::new(),
        });
        let write = digest.map(|digest| ServiceWrite::Update { digest });
        self.service_write_rpc(request, ServiceAction::Update, write)
            .await
    }
}

/// `to_tag` as a tag (empty: none), or why it is not one.
fn tag_argument(text: &str) -> Result<Option<String>, ExecError> {
    if text.is_empty() {
        return Ok(None);
    }
    let ok = text.len() <= 128
        && text
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
    if ok {
        Ok(Some(text.to_string()))
    } else {
        Err(ExecError::InvalidArgument(format!(
            "to_tag `{}` is not an image tag (letters, digits, `_`, `.`, `-`; at most 128)",
            truncate_for_audit(&redact::neutralise_controls(text))
        )))
    }
}
