//! Approval claims and their Ed25519 signatures.
//!
//! The signer serializes the claims once and signs those exact bytes (with a
//! domain-separation prefix, so a signature over claims can never be replayed
//! as a signature over anything else). The verifier checks the signature over
//! the bytes it received and only then decodes them: it never re-encodes, so
//! there is no canonicalization gap between what was signed and what is
//! enforced.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

/// Prefix mixed into every signed message.
pub const SIGNING_CONTEXT: &[u8] = b"drydock-approval-v1\0";
/// The claims format of an approval that names the executor's host
/// (`host`); what an agent makes for an executor with a host name.
pub const CLAIMS_VERSION: u32 = 2;
/// The format before hosts: no `host`. Still accepted by an executor that
/// does not require one (`host.require`).
pub const CLAIMS_VERSION_NO_HOST: u32 = 1;
/// How far a signer's clock (the agent's, which writes `issued_at`) may be
/// ahead of the verifier's: claims dated further ahead are refused by the
/// CLI before signing and by the executor. It also bounds how late a claim
/// can be dated and still have been usable at a given moment, which is what
/// makes a restore's cut-off exact (`issued_at <= restored_at + skew` may
/// have been spent before the restore).
pub const CLOCK_SKEW_SECS: i64 = 60;
/// Upper bound on the encoded claims a verifier will look at.
pub const MAX_CLAIMS_BYTES: usize = 4096;
const PUBLIC_PREFIX: &str = "ed25519:";
const SECRET_PREFIX: &str = "ed25519-secret:";

/// A host name as an executor's config and the claims carry it: 1 to 63
/// lowercase letters, digits, `-` and `.`, starting with a letter or digit.
pub fn is_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// Version 1 names no host; version 2 names a well-formed one; no other
/// version exists. Shared by approvals and grants.
pub fn check_host_version(version: u32, host: Option<&str>) -> Result<(), ApprovalFormatError> {
    match (version, host) {
        (CLAIMS_VERSION_NO_HOST, None) => Ok(()),
        (CLAIMS_VERSION, Some(h)) if is_host_name(h) => Ok(()),
        (CLAIMS_VERSION, Some(_)) => Err(ApprovalFormatError::Malformed(
            "a host name is 1 to 63 lowercase letters, digits, `-` and `.`".into(),
        )),
        (CLAIMS_VERSION, None) => Err(ApprovalFormatError::Malformed(
            "version 2 claims name the executor's host".into(),
        )),
        (CLAIMS_VERSION_NO_HOST, Some(_)) => Err(ApprovalFormatError::Malformed(
            "version 1 claims name no host; a host needs version 2".into(),
        )),
        (other, _) => Err(ApprovalFormatError::Version(other)),
    }
}

/// The write actions an approval can authorize.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WriteAction {
    Start,
    Restart,
    Stop,
    /// Re-create the container from its own definition with another image
    /// already on the engine (`image_id` in the claims).
    Rollback,
    /// Replace a Swarm service's tasks with the same spec
    /// (`docker service update --force`).
    ForceUpdate,
    /// Return a Swarm service to its previous spec
    /// (`docker service rollback`).
    ServiceRollback,
    /// Re-create the container from its own definition with the image its
    /// tag names now in an allowed registry, pulled by the manifest digest
    /// the claims name (`update`), and put the old one back unless the new
    /// one runs healthy for the executor's health window.
    Update,
    /// Move a Swarm service's spec to the manifest digest its tag names now
    /// in an allowed registry, through the engine's own rolling update with
    /// `failure_action: rollback` (`docker service update --image`).
    ServiceUpdate,
    /// Build an image for the container from an allowed build context at
    /// the commit the claims name (`build`), in a scratch copy of that
    /// commit's tree, tagged `drydock/<context>:<short commit>`. The
    /// container is not touched: deploying the image is an `update` of its
    /// own, with its own approval.
    Build,
}

impl WriteAction {
    pub const ALL: [WriteAction; 9] = [
        WriteAction::Start,
        WriteAction::Restart,
        WriteAction::Stop,
        WriteAction::Rollback,
        WriteAction::ForceUpdate,
        WriteAction::ServiceRollback,
        WriteAction::Update,
        WriteAction::ServiceUpdate,
        WriteAction::Build,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            WriteAction::Start => "start",
            WriteAction::Restart => "restart",
            WriteAction::Stop => "stop",
            WriteAction::Rollback => "rollback",
            WriteAction::ForceUpdate => "force_update",
            WriteAction::ServiceRollback => "service_rollback",
            WriteAction::Update => "update",
            WriteAction::ServiceUpdate => "service_update",
            WriteAction::Build => "build",
        }
    }

    pub fn parse(s: &str) -> Option<WriteAction> {
        WriteAction::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// Whether the action runs an image: its claims then name the image to
    /// run (`image_id`) and the one the container runs now
    /// (`from_image_id`).
    pub const fn names_images(self) -> bool {
        matches!(self, WriteAction::Rollback)
    }

    /// Whether the action acts on a Swarm service: its claims then name the
    /// service (`service`) and no container.
    pub const fn on_service(self) -> bool {
        matches!(
            self,
            WriteAction::ForceUpdate | WriteAction::ServiceRollback | WriteAction::ServiceUpdate
        )
    }
}

impl WriteAction {
    /// The action in the words of what it acts on: a container action and
    /// a service action are different types from here on, so a container
    /// write given a service (or the reverse) does not compile.
    pub const fn on(self) -> ActionOn {
        match self {
            WriteAction::Start => ActionOn::Container(ContainerAction::Start),
            WriteAction::Restart => ActionOn::Container(ContainerAction::Restart),
            WriteAction::Stop => ActionOn::Container(ContainerAction::Stop),
            WriteAction::Rollback => ActionOn::Container(ContainerAction::Rollback),
            WriteAction::ForceUpdate => ActionOn::Service(ServiceAction::ForceUpdate),
            WriteAction::ServiceRollback => ActionOn::Service(ServiceAction::Rollback),
            WriteAction::Update => ActionOn::Container(ContainerAction::Update),
            WriteAction::ServiceUpdate => ActionOn::Service(ServiceAction::Update),
            WriteAction::Build => ActionOn::Container(ContainerAction::Build),
        }
    }
}

/// A write action, by the kind of object it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ActionOn {
    Container(ContainerAction),
    Service(ServiceAction),
}

/// The writes on one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContainerAction {
    Start,
    Restart,
    Stop,
    Rollback,
    Update,
    /// An image built for the container (the container itself unchanged).
    Build,
}

/// The writes on one Swarm service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceAction {
    ForceUpdate,
    Rollback,
    Update,
}

impl From<ContainerAction> for WriteAction {
    fn from(a: ContainerAction) -> WriteAction {
        match a {
            ContainerAction::Start => WriteAction::Start,
            ContainerAction::Restart => WriteAction::Restart,
            ContainerAction::Stop => WriteAction::Stop,
            ContainerAction::Rollback => WriteAction::Rollback,
            ContainerAction::Update => WriteAction::Update,
            ContainerAction::Build => WriteAction::Build,
        }
    }
}

impl From<ServiceAction> for WriteAction {
    fn from(a: ServiceAction) -> WriteAction {
        match a {
            ServiceAction::ForceUpdate => WriteAction::ForceUpdate,
            ServiceAction::Rollback => WriteAction::ServiceRollback,
            ServiceAction::Update => WriteAction::ServiceUpdate,
        }
    }
}

impl ContainerAction {
    pub const fn as_str(self) -> &'static str {
        match self {
            ContainerAction::Start => "start",
            ContainerAction::Restart => "restart",
            ContainerAction::Stop => "stop",
            ContainerAction::Rollback => "rollback",
            ContainerAction::Update => "update",
            ContainerAction::Build => "build",
        }
    }
}

impl ServiceAction {
    pub const fn as_str(self) -> &'static str {
        match self {
            ServiceAction::ForceUpdate => "force_update",
            ServiceAction::Rollback => "service_rollback",
            ServiceAction::Update => "service_update",
        }
    }
}

/// An image's content id (`sha256:` and 64 lowercase hex digits), checked
/// when made: a write that runs an image names it by content, never by a
/// name or tag that can move.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(try_from = "String", into = "String")]
pub struct ImageId(String);

impl ImageId {
    pub fn parse(id: &str) -> Option<ImageId> {
        is_image_id(id).then(|| ImageId(id.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ImageId {
    type Error = String;
    fn try_from(id: String) -> Result<ImageId, String> {
        if is_image_id(&id) {
            Ok(ImageId(id))
        } else {
            Err(format!(
                "`{}` is not an image's content id (sha256: and 64 hex digits)",
                id.chars().take(80).collect::<String>()
            ))
        }
    }
}

impl From<ImageId> for String {
    fn from(id: ImageId) -> String {
        id.0
    }
}

impl std::fmt::Display for ImageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A write on one container, with what belongs to it: a rollback cannot be
/// asked for without the image it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContainerWrite {
    Start,
    Restart,
    Stop,
    /// Re-create the container from its own definition with `to_image`.
    Rollback {
        to_image: ImageId,
    },
    /// Re-create the container with the image of the manifest `digest`,
    /// pulled from the registry of the tag it runs; under `to_tag`, a newer
    /// tag of the same repository, when not the same tag.
    Update {
        digest: ImageId,
        to_tag: Option<String>,
    },
    /// Build the image of `commit` of the container's build context.
    Build {
        commit: CommitId,
    },
    /// Re-create the container with the image the executor built from
    /// `commit` of its build context (an update, with the same health
    /// window and restore, but nothing pulled).
    UpdateBuilt {
        commit: CommitId,
    },
}

impl ContainerWrite {
    pub fn action(&self) -> ContainerAction {
        match self {
            ContainerWrite::Start => ContainerAction::Start,
            ContainerWrite::Restart => ContainerAction::Restart,
            ContainerWrite::Stop => ContainerAction::Stop,
            ContainerWrite::Rollback { .. } => ContainerAction::Rollback,
            ContainerWrite::Update { .. } | ContainerWrite::UpdateBuilt { .. } => {
                ContainerAction::Update
            }
            ContainerWrite::Build { .. } => ContainerAction::Build,
        }
    }

    /// The commit a build builds, or whose built image an update runs.
    pub fn commit(&self) -> Option<&CommitId> {
        match self {
            ContainerWrite::Build { commit } | ContainerWrite::UpdateBuilt { commit } => {
                Some(commit)
            }
            _ => None,
        }
    }

    /// The manifest digest an update pulls.
    pub fn digest(&self) -> Option<&ImageId> {
        match self {
            ContainerWrite::Update { digest, .. } => Some(digest),
            _ => None,
        }
    }

    /// The newer tag an update moves to, when not the tag it runs.
    pub fn to_tag(&self) -> Option<&str> {
        match self {
            ContainerWrite::Update { to_tag, .. } => to_tag.as_deref(),
            _ => None,
        }
    }

    /// The image the write runs, for a rollback.
    pub fn to_image(&self) -> Option<&ImageId> {
        match self {
            ContainerWrite::Rollback { to_image } => Some(to_image),
            _ => None,
        }
    }
}

/// A write on one Swarm service, with what belongs to it: an update cannot
/// be asked for without the digest it moves to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceWrite {
    ForceUpdate,
    Rollback,
    /// Move the spec to the image of the manifest `digest`, which the tag
    /// of its spec names now in its registry.
    Update {
        digest: ImageId,
    },
}

impl ServiceWrite {
    pub fn action(&self) -> ServiceAction {
        match self {
            ServiceWrite::ForceUpdate => ServiceAction::ForceUpdate,
            ServiceWrite::Rollback => ServiceAction::Rollback,
            ServiceWrite::Update { .. } => ServiceAction::Update,
        }
    }

    /// The manifest digest an update moves to.
    pub fn digest(&self) -> Option<&ImageId> {
        match self {
            ServiceWrite::Update { digest } => Some(digest),
            _ => None,
        }
    }
}

/// The tag a service's spec follows: its image without the digest pin the
/// engine adds (`registry/repo:tag@sha256:…` → `registry/repo:tag`).
pub fn followed_tag(spec_image: &str) -> &str {
    spec_image
        .split_once('@')
        .map_or(spec_image, |(tagged, _)| tagged)
}

/// A Swarm object's id: 25 lowercase letters and digits.
pub fn is_swarm_id(id: &str) -> bool {
    id.len() == 25
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

/// The Swarm service an approval is for, as it was shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ServiceClaims {
    /// The service's id; the executor resolves the service at call time and
    /// refuses unless it is this one.
    pub id: String,
    /// Shown to the human, and checked: it must be the service's name.
    pub name: String,
    /// The spec version when the approval was made: an approval never acts
    /// on a spec that changed since it was shown.
    pub version: u64,
    /// The image reference its spec runs now.
    pub image: String,
    /// For a rollback: the previous spec's image, which it returns to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_image: Option<String>,
}

/// `sha256:` and 64 lowercase hex digits: an image named by its content,
/// never by a name or a tag that could move.
pub fn is_image_id(id: &str) -> bool {
    id.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

impl std::fmt::Display for WriteAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a human approves: one action on one container (by full id) within one
/// request and plan, until a deadline, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ApprovalClaims {
    pub version: u32,
    pub approval_id: String,
    pub request_id: String,
    pub action: WriteAction,
    /// Full 64-hex container id; the executor resolves the target at call
    /// time and refuses unless it equals this.
    pub container_id: String,
    /// Shown to the human; not trusted for enforcement.
    pub container_name: String,
    /// sha256 (hex) of the plan the step belongs to.
    pub plan_digest: String,
    /// Unix seconds.
    pub issued_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// 128 random bits, hex; single use.
    pub nonce: String,
    /// For a rollback: the image to run (`sha256:…`), present on the
    /// engine. Absent for every other action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// For a rollback: the image the container runs when the approval is
    /// made; the executor refuses if it runs another by then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_image_id: Option<String>,
    /// For a Swarm service's write: the service, and then `container_id`
    /// and `container_name` are empty. Absent for every container action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<ServiceClaims>,
    /// The executor's host name (`host.name` in its config): an approval
    /// made for one host is refused by every other. Present exactly in
    /// version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// For an update: the tag the container runs and the manifest digest
    /// it names in the registry now, which is what is pulled. Absent for
    /// every other action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateClaims>,
    /// For a build, and for an update to a built image (then instead of
    /// `update`): the context, the commit and its tree, the Dockerfile and
    /// the tag. Absent for every other action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildClaims>,
}

/// What an update's approval binds besides the container and the image it
/// runs now (`from_image_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct UpdateClaims {
    /// The image reference the container runs (`registry/repo:tag`); the
    /// executor refuses unless the container still runs this reference.
    pub reference: String,
    /// The manifest digest to pull and run (`sha256:` and 64 hex digits).
    pub digest: String,
    /// Shown to the human: the running image's version label, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_version: Option<String>,
    /// Shown to the human: the new image's version label, read from its
    /// config in the registry, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_version: Option<String>,
    /// The newer tag of the same repository the container moves to (a
    /// container labelled `drydock.update=patch` or `minor`); absent: it
    /// follows the tag it runs. The executor refuses unless the request
    /// names the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_tag: Option<String>,
}

/// The container label that says which updates count: `digest` (the
/// default: the same tag names another image), `patch` or `minor` (a newer
/// version tag of the running tag's line), or `none`.
pub const UPDATE_LABEL: &str = "drydock.update";

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ApprovalFormatError {
    #[error("claims are {0} bytes, more than the {MAX_CLAIMS_BYTES} allowed")]
    TooLarge(usize),
    #[error("claims are not valid approval claims: {0}")]
    Malformed(String),
    #[error("claims version {0} is not supported (expected {CLAIMS_VERSION_NO_HOST}, or {CLAIMS_VERSION} with a host)")]
    Version(u32),
    #[error("signature is not 64 bytes")]
    SignatureLength,
    #[error("signature does not verify")]
    BadSignature,
    #[error("key is not of the form {0}<base64 of 32 bytes>")]
    KeyFormat(&'static str),
    #[error("key is neither ed25519:<base64> nor an OpenSSH public key line: {0}")]
    SshKey(String),
    #[error("ssh signature refused: {0}")]
    SshSignature(String),
}

impl ApprovalClaims {
    /// Fresh random nonce for a new approval.
    pub fn new_nonce() -> String {
        hex::encode(rand::random::<[u8; 16]>())
    }

    /// Serialize once; these bytes are what gets signed and sent.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing a struct of strings and integers cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decode claims without checking any signature (the CLI uses this to
    /// show the human what they are about to sign).
    pub fn decode(bytes: &[u8]) -> Result<ApprovalClaims, ApprovalFormatError> {
        if bytes.len() > MAX_CLAIMS_BYTES {
            return Err(ApprovalFormatError::TooLarge(bytes.len()));
        }
        let claims: ApprovalClaims = serde_json::from_slice(bytes)
            .map_err(|e| ApprovalFormatError::Malformed(e.to_string()))?;
        check_host_version(claims.version, claims.host.as_deref())?;
        claims.check_images()?;
        claims.check_build()?;
        claims.check_update()?;
        claims.check_service()?;
        Ok(claims)
    }

    /// The claims version for an executor with (or without) a host name.
    pub fn version_for(host: Option<&str>) -> u32 {
        if host.is_some() {
            CLAIMS_VERSION
        } else {
            CLAIMS_VERSION_NO_HOST
        }
    }

    /// A service's write names the service and no container; a container's
    /// names no service.
    fn check_service(&self) -> Result<(), ApprovalFormatError> {
        let malformed = |m: String| Err(ApprovalFormatError::Malformed(m));
        match &self.service {
            None if self.action.on_service() => {
                malformed(format!("a {} names its service", self.action))
            }
            None => Ok(()),
            Some(_) if !self.action.on_service() => {
                malformed(format!("a {} names no service", self.action))
            }
            Some(s) => {
                if !self.container_id.is_empty() || !self.container_name.is_empty() {
                    return malformed(format!("a {} names no container", self.action));
                }
                if !is_swarm_id(&s.id) {
                    return malformed("a service id is 25 lowercase letters and digits".into());
                }
                match (self.action, &s.to_image) {
                    (WriteAction::ServiceRollback, None) => {
                        malformed("a service_rollback names the image it returns to".into())
                    }
                    (WriteAction::ForceUpdate | WriteAction::ServiceUpdate, Some(_)) => {
                        malformed(format!("a {} names no image to return to", self.action))
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    /// An update names the tag, the digest and the image it runs now; no
    /// other action names an update.
    fn check_update(&self) -> Result<(), ApprovalFormatError> {
        let malformed = |m: String| Err(ApprovalFormatError::Malformed(m));
        if self.action == WriteAction::Update && self.build.is_some() {
            // An update to a built image (`check_build`).
            return Ok(());
        }
        match (&self.update, self.action) {
            (Some(u), WriteAction::Update | WriteAction::ServiceUpdate) => {
                if !is_image_id(&u.digest) {
                    return malformed("an update's digest is sha256: and 64 hex digits".into());
                }
                if u.reference.is_empty() || u.reference.len() > 255 {
                    return malformed("an update names the image reference it follows".into());
                }
                if self.action == WriteAction::ServiceUpdate {
                    // The service's spec image is in `service`; a service
                    // follows the tag of its spec.
                    return match (&self.image_id, &self.from_image_id, &u.to_tag) {
                        (None, None, None) => Ok(()),
                        _ => malformed(
                            "a service_update names no image_id, from_image_id or to_tag".into(),
                        ),
                    };
                }
                match &self.from_image_id {
                    Some(from) if is_image_id(from) && self.image_id.is_none() => Ok(()),
                    _ => malformed(
                        "an update names from_image_id (sha256: and 64 hex digits) and no image_id"
                            .into(),
                    ),
                }
            }
            (None, WriteAction::Update | WriteAction::ServiceUpdate) => {
                malformed(format!("a {} names its reference and digest", self.action))
            }
            (Some(_), other) => malformed(format!("a {other} names no update")),
            (None, _) => Ok(()),
        }
    }

    /// A rollback names both images by content id; no other action but an
    /// update (`check_update`) names any.
    fn check_images(&self) -> Result<(), ApprovalFormatError> {
        let malformed = |m: String| Err(ApprovalFormatError::Malformed(m));
        if matches!(
            self.action,
            WriteAction::Update | WriteAction::ServiceUpdate | WriteAction::Build
        ) {
            return Ok(());
        }
        match (&self.image_id, &self.from_image_id) {
            (Some(to), Some(from)) if self.action.names_images() => {
                if !is_image_id(to) || !is_image_id(from) {
                    return malformed("image ids must be sha256: and 64 hex digits".into());
                }
                Ok(())
            }
            (None, None) if !self.action.names_images() => Ok(()),
            _ if self.action.names_images() => malformed(format!(
                "a {} names image_id and from_image_id",
                self.action
            )),
            _ => malformed(format!("a {} names no image", self.action)),
        }
    }
}

pub(crate) fn signed_message(context: &[u8], claims_bytes: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(context.len() + claims_bytes.len());
    msg.extend_from_slice(context);
    msg.extend_from_slice(claims_bytes);
    msg
}

/// Sign encoded claims.
pub fn sign(claims_bytes: &[u8], key: &SigningKey) -> Vec<u8> {
    key.sign(&signed_message(SIGNING_CONTEXT, claims_bytes))
        .to_bytes()
        .to_vec()
}

/// Check a signature over `context ‖ bytes`, bounding the size first.
pub(crate) fn check_signature(
    context: &[u8],
    bytes: &[u8],
    max: usize,
    signature: &[u8],
    key: &VerifyingKey,
) -> Result<(), ApprovalFormatError> {
    if bytes.len() > max {
        return Err(ApprovalFormatError::TooLarge(bytes.len()));
    }
    let sig: [u8; 64] = signature
        .try_into()
        .map_err(|_| ApprovalFormatError::SignatureLength)?;
    key.verify_strict(
        &signed_message(context, bytes),
        &Signature::from_bytes(&sig),
    )
    .map_err(|_| ApprovalFormatError::BadSignature)
}

/// Verify the signature over exactly `claims_bytes`, then decode those bytes.
pub fn verify(
    claims_bytes: &[u8],
    signature: &[u8],
    key: &VerifyingKey,
) -> Result<ApprovalClaims, ApprovalFormatError> {
    check_signature(
        SIGNING_CONTEXT,
        claims_bytes,
        MAX_CLAIMS_BYTES,
        signature,
        key,
    )?;
    ApprovalClaims::decode(claims_bytes)
}

/// `ed25519:<base64>` — the form used in configuration files.
pub fn format_public_key(key: &VerifyingKey) -> String {
    format!("{PUBLIC_PREFIX}{}", B64.encode(key.as_bytes()))
}

pub fn parse_public_key(text: &str) -> Result<VerifyingKey, ApprovalFormatError> {
    let raw = decode_prefixed(text.trim(), PUBLIC_PREFIX)?;
    VerifyingKey::from_bytes(&raw).map_err(|_| ApprovalFormatError::KeyFormat(PUBLIC_PREFIX))
}

/// `ed25519-secret:<base64 seed>` — the private key file's content.
pub fn format_secret_key(key: &SigningKey) -> String {
    format!("{SECRET_PREFIX}{}\n", B64.encode(key.to_bytes()))
}

pub fn parse_secret_key(text: &str) -> Result<SigningKey, ApprovalFormatError> {
    let raw = decode_prefixed(text.trim(), SECRET_PREFIX)?;
    Ok(SigningKey::from_bytes(&raw))
}

/// A new approver key. `rand`'s thread generator is a CSPRNG seeded (and
/// periodically reseeded) from the operating system.
pub fn generate_signing_key() -> SigningKey {
    SigningKey::from_bytes(&rand::random::<[u8; 32]>())
}

fn decode_prefixed(text: &str, prefix: &'static str) -> Result<[u8; 32], ApprovalFormatError> {
    let body = text
        .strip_prefix(prefix)
        .ok_or(ApprovalFormatError::KeyFormat(prefix))?;
    let raw = B64
        .decode(body)
        .map_err(|_| ApprovalFormatError::KeyFormat(prefix))?;
    raw.try_into()
        .map_err(|_| ApprovalFormatError::KeyFormat(prefix))
}

mod build;
pub use build::*;
mod keys;
pub use keys::*;
pub mod ssh;

#[cfg(test)]
mod tests;
