//! Builds: `BuildSource` (T0), what a `BuildImage` needs beyond the write
//! path (the container's context, the commit resolved and checked against
//! what was signed, the commit's files copied out, the base images on the
//! engine: all before the approval is spent), and the image an update to
//! a built image runs.

use super::*;
use crate::build::git::{Commit, GitError};
use crate::build::source::Source;
use crate::build::ContextConfig;
use crate::docker::{
    BuildPlan, PullSource, CONTEXT_LABEL, REVISION_LABEL, SOURCE_LABEL, TREE_LABEL,
};
use crate::policy::Build;
use crate::registry::{Credentials, ImageRef};
use drydock_proto::approval::{build_tag, ApprovalClaims, BuildClaims, CommitId};

/// Why a build (or an update to a built image) cannot go ahead, though
/// nothing is wrong with the call itself.
#[derive(Debug, thiserror::Error)]
pub enum BuildRefusal {
    #[error("{container} is built from no context in build.contexts{}: name its compose service (`project/service`) in a context's `services` in executor.yaml, or make the context's path the folder its compose file builds it from", service.as_ref().map(|s| format!(" (its compose service is {s})")).unwrap_or_else(|| " (it is not a compose service)".into()))]
    NoContext {
        container: String,
        service: Option<String>,
    },
    #[error("the checkout {checkout} has uncommitted changes to tracked files, and {commit} is its HEAD: a build of it would not be what the checkout holds; commit or stash them, or name another commit")]
    Dirty { checkout: String, commit: String },
    #[error("the base image {0} is not on the engine, and its registry is not in build.base_registries: pull it (or build it), or allow its registry there and in registries:, then ask again")]
    BaseMissing(String),
    #[error("the Dockerfile cannot be built here: {0}")]
    Dockerfile(String),
    #[error("no image built from {commit} of context {context} is on the engine ({tag}): build it first (`drydock build <name> --at {commit}`)")]
    NotBuilt {
        context: String,
        commit: String,
        tag: String,
    },
    #[error("{tag} is not what this executor built from {commit} of context {context}: its labels say {labels}")]
    NotOurs {
        tag: String,
        context: String,
        commit: String,
        labels: String,
    },
    #[error("{0}")]
    NoPutBack(String),
    #[error(transparent)]
    Source(#[from] GitError),
}

impl BuildRefusal {
    pub(super) fn code(&self) -> tonic::Code {
        match self {
            BuildRefusal::Source(GitError::BadRevision(_)) => tonic::Code::InvalidArgument,
            BuildRefusal::Source(GitError::UnknownRevision { .. }) => tonic::Code::NotFound,
            BuildRefusal::Source(
                GitError::NoGit(_) | GitError::Failed { .. } | GitError::Timeout { .. },
            ) => tonic::Code::Unavailable,
            _ => tonic::Code::FailedPrecondition,
        }
    }

    /// A refusal by drydock's rules, or a failure to read the source.
    pub(super) fn is_failure(&self) -> bool {
        self.code() == tonic::Code::Unavailable
    }
}

/// A build, decided before the approval is spent.
pub(super) struct BuildJob {
    tag: String,
    dockerfile: String,
    context: Vec<u8>,
    labels: BTreeMap<String, String>,
    network: &'static str,
    timeout: Duration,
    max_image_bytes: u64,
    /// Base images missing from the engine, pulled before the build.
    pulls: Vec<BasePull>,
}

/// A base image to pull, by the digest its registry named before the
/// approval was spent, under that registry's credentials and limits.
struct BasePull {
    reference: ImageRef,
    digest: String,
    credentials: Option<Credentials>,
    timeout: Duration,
    max_image_bytes: u64,
}

impl BuildJob {
    /// Pull the missing bases, then build; the image's id, the output's
    /// tail and the time in `response`.
    pub(super) async fn run(
        self,
        docker: &DockerAdapter,
        permit: &Permit<Build>,
        response: &mut pb::WriteResponse,
    ) -> Result<Option<String>, DockerError> {
        let mut pulled = Vec::new();
        for p in &self.pulls {
            let source = PullSource {
                credentials: p.credentials.as_ref(),
                timeout: p.timeout,
                max_image_bytes: p.max_image_bytes,
            };
            let (id, _) = docker.pull_pinned(&p.reference, &p.digest, source).await?;
            // The Dockerfile names the tag: it must name what was pulled.
            if p.reference.digest.is_none() {
                docker.tag(&id, &p.reference).await?;
            }
            response.pulled = true;
            pulled.push(format!(
                "pulled the base image {} ({id})",
                p.reference.at(&p.digest)
            ));
        }
        let plan = BuildPlan {
            tag: &self.tag,
            dockerfile: &self.dockerfile,
            context: self.context,
            labels: self.labels,
            network: self.network,
            timeout: self.timeout,
            max_image_bytes: self.max_image_bytes,
        };
        let built = docker.build(permit, plan).await?;
        response.new_image_id = built.image_id;
        response.watched_secs = built.took.as_secs();
        pulled.extend(built.log);
        response.build_log = pulled;
        Ok(None)
    }
}

impl ExecutorService {
    /// The build context of a container, or why it has none.
    async fn context_of(&self, target: &ResolvedTarget) -> Result<&ContextConfig, BuildRefusal> {
        // Finding it may read the service's compose files.
        let (build, labels) = (self.build.clone(), target.labels.clone());
        let name =
            tokio::task::spawn_blocking(move || build.context_for(&labels).map(|c| c.name.clone()))
                .await
                .ok()
                .flatten();
        name.and_then(|n| self.build.contexts.iter().find(|c| c.name == n))
            .ok_or_else(|| BuildRefusal::NoContext {
                container: target.name.trim_start_matches('/').to_string(),
                service: crate::build::compose_service(&target.labels),
            })
    }

    /// `BuildSource`: a container's context and the commit a revision
    /// names in it, as a build's approval would bind it.
    pub(super) async fn build_source(
        &self,
        call: &mut Call,
        req: pb::BuildSourceRequest,
    ) -> Result<pb::BuildSourceResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let resolved = self.resolve(call, &req.container).await?;
        let target = resolved.target;
        self.policy
            .permit_read(&target)
            .map_err(|why| reads::invisible(&req.container, why))?;
        call.entry.input = format!(
            "revision={}",
            truncate_for_audit(&redact::neutralise_controls(&req.revision))
        );
        let context = self.context_of(&target).await?;
        // One source read at a time: each may hold a context in memory.
        let _one = self.build_gate.acquire().await;
        let source = Source::open(context, &req.revision, self.build.max_context_bytes).await?;
        let head = source.head().await;
        let dirty = source.dirty().await?;
        let tag = build_tag(&context.name, &source.commit.id);
        let built = self
            .docker
            .built_image(&tag)
            .await?
            .filter(|i| i.labels.get(REVISION_LABEL) == Some(&source.commit.id.to_string()));
        // What the container runs now, when it names a commit of the
        // checkout: the files changed from it.
        let running = self
            .docker
            .image(&target.image_id)
            .await?
            .and_then(|i| i.oci_labels.get(REVISION_LABEL).cloned())
            .unwrap_or_default();
        let from = match CommitId::parse(&running).filter(|_| !source.is_folder()) {
            Some(c) => Some(c),
            None if !source.is_folder()
                && !running.is_empty()
                && crate::build::git::is_revision(&running) =>
            {
                source.resolve(&running).await
            }
            None => None,
        };
        let (changed, more) = match &from {
            Some(from) => source.changed_files(from).await,
            None => (Vec::new(), 0),
        };
        call.entry.result = format!(
            "context={} commit={} tree={}{}",
            context.name,
            source.commit.id,
            source.commit.tree,
            if dirty { " (checkout dirty)" } else { "" }
        );
        let text = |t: &str| redact::redact_text(&redact::neutralise_controls(t)).0;
        Ok(pb::BuildSourceResponse {
            container_id: target.id,
            context: context.name.clone(),
            commit: source.commit.id.to_string(),
            tree: source.commit.tree.clone(),
            dockerfile: context.dockerfile.clone(),
            tag,
            subject: text(&source.commit.subject),
            author: text(&source.commit.author),
            date: source.commit.date.clone(),
            head: head.map(|h| h.to_string()).unwrap_or_default(),
            dirty,
            built_image_id: built.map(|b| b.id).unwrap_or_default(),
            running_revision: from.map(|f| f.to_string()).unwrap_or_default(),
            changed_files: changed.iter().map(|f| text(f)).collect(),
            changed_files_more: more as u32,
        })
    }

    /// A build's source, checked against what was signed, and its files
    /// copied out; the base images must be on the engine. Before the
    /// approval is spent, so a refusal does not burn it.
    pub(super) async fn build_job(
        &self,
        call: &mut Call,
        target: &ResolvedTarget,
        commit: &CommitId,
        claims: &ApprovalClaims,
    ) -> Result<BuildJob, ExecError> {
        call.entry.input.push_str(&format!(" commit={commit}"));
        let context = self.context_of(target).await?;
        // A folder's files that changed since the approval hash to another
        // id: opened as they are, they are refused below as moved.
        let folder = !crate::build::folder::is_checkout(&context.path);
        let asked = if folder { "" } else { commit.as_str() };
        let _one = self.build_gate.acquire().await;
        let source = Source::open(context, asked, self.build.max_context_bytes).await?;
        if &source.commit.id != commit {
            return Err(match folder {
                true => ExecError::Approval(ApprovalError::SourceMoved {
                    field: "files (their sha256)",
                    signed: commit.to_string(),
                    actual: source.commit.id.to_string(),
                }),
                false => BuildRefusal::Source(GitError::UnknownRevision {
                    revision: commit.to_string(),
                    checkout: context.path.display().to_string(),
                })
                .into(),
            });
        }
        let signed = claims.build.as_ref();
        check_source(signed, context, &source.commit)?;
        call.entry.input.push_str(&format!(
            " context={} tree={} dockerfile={}",
            context.name,
            source.commit.tree,
            truncate_for_audit(&context.dockerfile)
        ));
        if source.head().await.as_ref() == Some(commit) && source.dirty().await? {
            return Err(BuildRefusal::Dirty {
                checkout: context.path.display().to_string(),
                commit: commit.to_string(),
            }
            .into());
        }
        let tree = source.commit.tree.clone();
        let (tar, dockerfile) = source
            .files(&context.dockerfile, self.build.max_context_bytes)
            .await
            .map_err(BuildRefusal::from)?;
        let bases = crate::docker::base_images(&dockerfile).map_err(BuildRefusal::Dockerfile)?;
        let mut pulls = Vec::new();
        for base in bases {
            if !self.docker.has_image(&base).await? {
                let pull = self.base_pull(&base).await?;
                call.entry
                    .input
                    .push_str(&format!(" pull={}", pull.reference.at(&pull.digest)));
                pulls.push(pull);
            }
        }
        let tag = build_tag(&context.name, commit);
        let labels = BTreeMap::from([
            (CONTEXT_LABEL.to_string(), context.name.clone()),
            (TREE_LABEL.to_string(), tree),
            (REVISION_LABEL.to_string(), commit.to_string()),
            (SOURCE_LABEL.to_string(), context.path.display().to_string()),
        ]);
        Ok(BuildJob {
            tag,
            dockerfile: context.dockerfile.clone(),
            context: tar,
            labels,
            network: self.build.network.mode(),
            timeout: self.build.timeout,
            max_image_bytes: self.build.max_image_bytes,
            pulls,
        })
    }

    /// How a base image missing from the engine is pulled: from a registry
    /// in `build.base_registries` (and `registries:`), by the digest it
    /// names now.
    async fn base_pull(&self, base: &str) -> Result<BasePull, ExecError> {
        let missing = || BuildRefusal::BaseMissing(truncate_for_audit(base));
        let reference = ImageRef::parse(base).ok_or_else(missing)?;
        if !self
            .build
            .base_registries
            .iter()
            .any(|h| h.eq_ignore_ascii_case(&reference.registry))
        {
            return Err(missing().into());
        }
        let allowed = self.registries.entry_for(reference)?;
        let digest = match &allowed.reference.digest {
            Some(d) => d.clone(),
            None => {
                self.docker
                    .registry_digest(
                        &allowed.reference,
                        allowed.credentials,
                        allowed
                            .config
                            .pull_timeout
                            .min(super::updates::REGISTRY_READ),
                    )
                    .await?
            }
        };
        Ok(BasePull {
            reference: allowed.reference.clone(),
            digest,
            credentials: allowed.credentials.cloned(),
            timeout: allowed.config.pull_timeout,
            max_image_bytes: allowed.config.max_image_bytes,
        })
    }

    /// An update to the image this executor built from `commit` of the
    /// container's context: it must be on the engine under its tag, with
    /// the labels the build gave it and the tree the approval names.
    pub(super) async fn built_update_job(
        &self,
        call: &mut Call,
        target: &ResolvedTarget,
        commit: &CommitId,
        claims: &ApprovalClaims,
    ) -> Result<super::updates::UpdateJob, ExecError> {
        let context = self.context_of(target).await?;
        let tag = build_tag(&context.name, commit);
        call.entry.input.push_str(&format!(
            " built={tag} commit={commit} from_image_id={}",
            target.image_id
        ));
        let signed = claims.build.as_ref();
        let not_built = || BuildRefusal::NotBuilt {
            context: context.name.clone(),
            commit: commit.to_string(),
            tag: tag.clone(),
        };
        let image = self.docker.built_image(&tag).await?.ok_or_else(not_built)?;
        let label = |k: &str| image.labels.get(k).map(String::as_str).unwrap_or("");
        let tree = signed.map(|b| b.tree.as_str()).unwrap_or_default();
        if label(CONTEXT_LABEL) != context.name
            || label(REVISION_LABEL) != commit.as_str()
            || label(TREE_LABEL) != tree
        {
            return Err(BuildRefusal::NotOurs {
                tag: tag.clone(),
                context: context.name.clone(),
                commit: commit.to_string(),
                labels: truncate_for_audit(&format!(
                    "context={} revision={} tree={}",
                    label(CONTEXT_LABEL),
                    label(REVISION_LABEL),
                    label(TREE_LABEL)
                )),
            }
            .into());
        }
        if signed.map(|b| b.context.as_str()) != Some(context.name.as_str()) {
            return Err(ApprovalError::SourceMoved {
                field: "context",
                signed: signed.map(|b| b.context.clone()).unwrap_or_default(),
                actual: context.name.clone(),
            }
            .into());
        }
        let reference = ImageRef::parse(&tag).ok_or_else(not_built)?;
        // What a failed update puts back: the container's own reference,
        // never the build's tag (which must keep naming what was built).
        let from_reference = ImageRef::parse(&target.image_ref)
            .filter(|r| *r != reference)
            .ok_or_else(|| {
                BuildRefusal::NoPutBack(format!(
                    "{}'s image reference `{}` cannot be put back after a failed update",
                    target.name.trim_start_matches('/'),
                    truncate_for_audit(&redact::neutralise_controls(&target.image_ref))
                ))
            })?;
        Ok(super::updates::UpdateJob::built(
            reference,
            from_reference,
            image.id,
            self.update.health_window,
        ))
    }
}

/// The signed source against the one resolved now: the context, the tree,
/// the Dockerfile and the tag must be what the person was shown.
fn check_source(
    signed: Option<&BuildClaims>,
    context: &ContextConfig,
    commit: &Commit,
) -> Result<(), ApprovalError> {
    let Some(b) = signed else {
        return Err(ApprovalError::SourceMoved {
            field: "build",
            signed: String::new(),
            actual: "a build".into(),
        });
    };
    let tag = build_tag(&context.name, &commit.id);
    // What the person was shown of the commit is checked too: it is the
    // agent's to write, and the executor's to read.
    let text = |t: &str| redact::redact_text(&redact::neutralise_controls(t)).0;
    let (subject, author) = (text(&commit.subject), text(&commit.author));
    for (field, signed, actual) in [
        ("subject", &b.subject, &subject),
        ("author", &b.author, &author),
    ] {
        if let Some(signed) = signed.as_ref().filter(|s| *s != actual) {
            return Err(ApprovalError::SourceMoved {
                field,
                signed: signed.chars().take(128).collect(),
                actual: actual.chars().take(128).collect(),
            });
        }
    }
    for (field, s, a) in [
        ("context", b.context.as_str(), context.name.as_str()),
        ("tree", b.tree.as_str(), commit.tree.as_str()),
        (
            "dockerfile",
            b.dockerfile.as_str(),
            context.dockerfile.as_str(),
        ),
        ("tag", b.tag.as_str(), tag.as_str()),
    ] {
        if s != a {
            return Err(ApprovalError::SourceMoved {
                field,
                signed: s.chars().take(128).collect(),
                actual: a.chars().take(128).collect(),
            });
        }
    }
    Ok(())
}
