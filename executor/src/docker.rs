//! The Docker adapter: the only code in drydock that talks to the engine.
//!
//! Every per-container method takes a `Permit` (built only by the policy
//! module) and acts on the permit's full container id, never on a name the
//! caller gave, so a container renamed or recreated between the policy check
//! and the call cannot be hit by mistake. Each call runs under a deadline;
//! reads are retried at most twice on transient errors; writes never are.

use std::collections::BTreeMap;
use std::time::Duration;

use bollard::query_parameters::{
    ListContainersOptions, RestartContainerOptions, StartContainerOptions, StopContainerOptions,
};
use bollard::Docker;
use std::sync::{Arc, RwLock};

pub use drydock_proto::docker::{
    ContainerState, HealthStatus, ServiceMode, TaskState, UpdateState,
};

use crate::policy::{Permit, Read, ResolvedTarget, Restart, Start, Stop};

/// Reads are tried this many times in all (the first try and two retries).
pub const READ_ATTEMPTS: u32 = 3;
const RETRY_BACKOFF: Duration = Duration::from_millis(200);
const NEGOTIATE_RETRY: Duration = Duration::from_secs(5);
/// Grace period Docker gives a container to stop before it kills it.
/// The longest stop timeout a write waits for. A container that asks for
/// more still gets it from the engine (drydock passes no `t`), but the
/// write's deadline ends first and its outcome is left to verification.
pub const MAX_STOP_WAIT_SECS: u32 = 300;
/// The least time between the two one-shot stats samples.
const CPU_WINDOW: Duration = Duration::from_millis(250);
/// Margin above the stop timeout for the engine to kill and start again.
const STOP_MARGIN: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    #[error("container {0} not found")]
    NotFound(String),
    #[error("docker did not answer {operation} within {timeout:?}")]
    Timeout {
        operation: &'static str,
        timeout: Duration,
    },
    #[error("docker is unavailable: {0}")]
    Unavailable(String),
    #[error("docker refused {operation}: {message}")]
    Rejected {
        operation: &'static str,
        message: String,
    },
    /// An id prefix that matches more than one container. Some of them may
    /// be outside the caller's policy, so this never reaches the caller as
    /// such: the service resolves the prefix among visible containers.
    #[error("`{0}` matches more than one container")]
    Ambiguous(String),
    /// A Swarm call on an engine that is not a Swarm manager.
    #[error(
        "the engine is not a Swarm manager, so it has no services, tasks or nodes to show: {0}"
    )]
    NotSwarmManager(String),
}

impl DockerError {
    fn is_transient(&self) -> bool {
        matches!(self, DockerError::Unavailable(_))
    }
}

/// The engine's own error text reaches the caller and the audit log: it
/// may quote a command line or an env value, so it is shaped like any
/// other output.
fn engine_message(message: &str) -> String {
    crate::redact::redact_text(&crate::redact::neutralise_controls(message)).0
}

fn classify(operation: &'static str, target: &str, err: bollard::errors::Error) -> DockerError {
    use bollard::errors::Error as E;
    match err {
        E::DockerResponseServerError {
            status_code: 404, ..
        } => DockerError::NotFound(target.to_string()),
        // Docker 20.10 answers an ambiguous prefix with a 500, later
        // engines with a 400; the wording is the same.
        E::DockerResponseServerError { message, .. }
            if message.contains("Multiple IDs found with provided prefix") =>
        {
            DockerError::Ambiguous(target.to_string())
        }
        E::DockerResponseServerError {
            status_code,
            message,
        } if status_code >= 500 => DockerError::Unavailable(format!(
            "{operation}: engine error {status_code}: {}",
            engine_message(&message)
        )),
        E::DockerResponseServerError { message, .. } => DockerError::Rejected {
            operation,
            message: engine_message(&message),
        },
        E::RequestTimeoutError => {
            DockerError::Unavailable(format!("{operation}: request timed out"))
        }
        other => DockerError::Unavailable(format!("{operation}: {other}")),
    }
}

/// The OCI labels an image may carry that say where it came from; the only
/// image labels `InspectImage` answers with.
pub const OCI_LABELS: [&str; 4] = [
    "org.opencontainers.image.revision",
    "org.opencontainers.image.source",
    "org.opencontainers.image.created",
    "org.opencontainers.image.version",
];

/// What `InspectImage` says of an image.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageInfo {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub created: String,
    pub oci_labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default)]
pub struct ContainerSummary {
    pub id: String,
    pub name: String,
    pub image: String,
    /// The image by content (`sha256:…`).
    pub image_id: String,
    pub state: String,
    pub status: String,
    pub labels: BTreeMap<String, String>,
    pub public_ports: Vec<u32>,
    pub ip_addresses: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HealthcheckSpec {
    pub test: Vec<String>,
    pub interval: Duration,
    pub timeout: Duration,
    pub retries: u32,
    pub start_period: Duration,
}

#[derive(Debug, Clone, Default)]
pub struct HealthProbe {
    pub exit_code: i64,
    pub output: String,
    pub start: String,
    pub end: String,
}

#[derive(Debug, Clone, Default)]
pub struct Health {
    pub status: HealthStatus,
    pub failing_streak: u32,
    pub log: Vec<HealthProbe>,
}

#[derive(Debug, Clone, Default)]
pub struct StateInfo {
    pub status: ContainerState,
    pub running: bool,
    pub restarting: bool,
    pub oom_killed: bool,
    pub dead: bool,
    pub exit_code: i64,
    pub error: String,
    pub started_at: String,
    pub finished_at: String,
}

/// `docker inspect`, reduced to what diagnosis needs. Env entries are raw
/// here; the service redacts them before they leave the executor.
#[derive(Debug, Clone, Default)]
pub struct ContainerDetails {
    pub id: String,
    pub name: String,
    pub image: String,
    pub state: StateInfo,
    pub health: Health,
    pub healthcheck: Option<HealthcheckSpec>,
    pub labels: BTreeMap<String, String>,
    pub env: Vec<String>,
    pub restart_count: i64,
    pub restart_policy: String,
    /// `on-failure:N`'s N (0: unbounded, or another policy).
    pub restart_max_retries: i64,
    /// `--read-only`: the root filesystem is read-only.
    pub read_only_rootfs: bool,
    pub networks: Vec<String>,
    pub aliases: Vec<String>,
    pub created: String,
    pub memory_limit: i64,
    /// `Config.StopTimeout`, when the container sets one.
    pub stop_timeout_secs: Option<u32>,
    pub requested_host_ports: Vec<u32>,
    pub ip_addresses: Vec<String>,
    pub mounts: Vec<MountInfo>,
    pub entrypoint: Vec<String>,
    pub command: Vec<String>,
    pub user: String,
    pub working_dir: String,
    pub image_id: String,
    pub network_mode: String,
    /// `Config.Tty`: its logs are one raw stream, not framed messages.
    pub tty: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct MountInfo {
    pub kind: String,
    pub source: String,
    pub destination: String,
    pub rw: bool,
}

#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub read: Duration,
    pub logs: Duration,
    pub write: Duration,
}

/// One resource snapshot.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatsSnapshot {
    pub cpu_percent: f64,
    pub online_cpus: u32,
    pub memory_usage: u64,
    pub memory_limit: u64,
    pub network_rx: u64,
    pub network_tx: u64,
    pub block_read: u64,
    pub block_write: u64,
    pub pids: u64,
}

/// Docker's own formula (as in `docker stats`): the container's share of
/// the host's CPU time between the two samples, times the CPUs it may use.
pub fn cpu_percent(cpu: u64, precpu: u64, system: u64, presystem: u64, cpus: u32) -> f64 {
    let cpu_delta = cpu.saturating_sub(precpu) as f64;
    let system_delta = system.saturating_sub(presystem) as f64;
    if cpu_delta <= 0.0 || system_delta <= 0.0 {
        return 0.0;
    }
    cpu_delta / system_delta * f64::from(cpus.max(1)) * 100.0
}

#[derive(Clone)]
pub struct DockerAdapter {
    /// Swapped once a delayed API version negotiation succeeds.
    docker: Arc<RwLock<Docker>>,
    /// Plain GETs on the same connection pool (docker/disk.rs).
    raw: transport::Raw,
    /// The last `/system/df` answer, shared by every caller.
    df_cache: disk::DfCache,
    timeouts: Timeouts,
}

fn addresses(
    networks: &std::collections::HashMap<String, bollard::models::EndpointSettings>,
) -> Vec<String> {
    let mut ips: Vec<String> = networks
        .values()
        .filter_map(|e| e.ip_address.clone())
        .filter(|ip| !ip.is_empty())
        .collect();
    ips.sort();
    ips
}

fn ns(v: Option<i64>) -> Duration {
    Duration::from_nanos(v.unwrap_or(0).max(0) as u64)
}

/// A container resolved by one inspect: what policy decides on, and the
/// whole inspect, which only a `Permit` for this very id unlocks. So an
/// `InspectContainer` or `ContainerHealth` costs one engine round trip, and
/// nothing of a container reaches a caller before policy allowed it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub target: ResolvedTarget,
    details: ContainerDetails,
}

impl Resolved {
    /// The inspect made while resolving, for the permitted container only.
    pub fn details(self, permit: &Permit<Read>) -> Option<ContainerDetails> {
        (permit.container_id() == self.details.id).then_some(self.details)
    }
}

impl DockerAdapter {
    /// Connect and negotiate the API version down to what the engine speaks
    /// (the engine here may be older than bollard's default).
    pub async fn connect(endpoint: &str, timeouts: Timeouts) -> Result<DockerAdapter, DockerError> {
        // bollard's own timeout is a backstop; our deadlines are shorter.
        const CLIENT_TIMEOUT_SECS: u64 = 120;
        // Pooled: idle engine connections are reused (transport.rs).
        let (docker, raw) =
            transport::connect(endpoint, CLIENT_TIMEOUT_SECS, bollard::API_DEFAULT_VERSION)
                .map_err(|e| {
                    DockerError::Unavailable(format!("cannot connect to {endpoint}: {e}"))
                })?;
        let adapter = DockerAdapter {
            docker: Arc::new(RwLock::new(docker.clone())),
            raw,
            df_cache: Default::default(),
            timeouts,
        };
        if let Err(e) = adapter.negotiate().await {
            // Docker may be down or hung right now. Serve anyway (calls fail
            // with UNAVAILABLE or DEADLINE_EXCEEDED, as they should) and keep
            // trying to negotiate in the background.
            tracing::warn!(endpoint, error = %e, "docker API version not negotiated yet; retrying in the background");
            let retry = adapter.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(NEGOTIATE_RETRY).await;
                    if retry.negotiate().await.is_ok() {
                        tracing::info!("docker API version negotiated");
                        break;
                    }
                }
            });
        }
        Ok(adapter)
    }

    async fn negotiate(&self) -> Result<(), DockerError> {
        let timeout = self.timeouts.read;
        let negotiated = tokio::time::timeout(timeout, self.client().negotiate_version())
            .await
            .map_err(|_| DockerError::Timeout {
                operation: "negotiate_version",
                timeout,
            })?
            .map_err(|e| {
                DockerError::Unavailable(format!("cannot negotiate the API version: {e}"))
            })?;
        *self.docker.write().unwrap_or_else(|p| p.into_inner()) = negotiated;
        Ok(())
    }

    fn client(&self) -> Docker {
        self.docker
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Run a read under one overall deadline, retrying transient failures.
    async fn read<T, F, Fut>(
        &self,
        operation: &'static str,
        timeout: Duration,
        f: F,
    ) -> Result<T, DockerError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, DockerError>>,
    {
        let attempts = async {
            let mut attempt = 1;
            loop {
                match f().await {
                    Err(e) if e.is_transient() && attempt < READ_ATTEMPTS => {
                        tracing::warn!(operation, attempt, error = %e, "transient docker error; retrying");
                        tokio::time::sleep(RETRY_BACKOFF * attempt).await;
                        attempt += 1;
                    }
                    other => return other,
                }
            }
        };
        tokio::time::timeout(timeout, attempts)
            .await
            .map_err(|_| DockerError::Timeout { operation, timeout })?
    }

    /// Resolve a name or id to the container as it is now. Used before the
    /// policy check, which needs the name and labels.
    pub async fn resolve(&self, name_or_id: &str) -> Result<Resolved, DockerError> {
        let details = self.inspect_raw(name_or_id).await?;
        Ok(Resolved {
            target: ResolvedTarget {
                id: details.id.clone(),
                name: details.name.clone(),
                labels: details.labels.clone(),
                stop_timeout_secs: details.stop_timeout_secs,
                image_id: details.image_id.clone(),
                image_ref: details.image.clone(),
            },
            details,
        })
    }

    pub async fn list(&self, all: bool) -> Result<Vec<ContainerSummary>, DockerError> {
        let containers = self
            .read("list", self.timeouts.read, || async {
                self.client()
                    .list_containers(Some(ListContainersOptions {
                        all,
                        ..Default::default()
                    }))
                    .await
                    .map_err(|e| classify("list", "", e))
            })
            .await?;
        Ok(containers
            .into_iter()
            .map(|c| ContainerSummary {
                id: c.id.unwrap_or_default(),
                name: c
                    .names
                    .and_then(|n| n.into_iter().next())
                    .unwrap_or_default()
                    .trim_start_matches('/')
                    .to_string(),
                image: c.image.unwrap_or_default(),
                image_id: c.image_id.unwrap_or_default(),
                state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                status: c.status.unwrap_or_default(),
                labels: c.labels.unwrap_or_default().into_iter().collect(),
                public_ports: {
                    let mut p: Vec<u32> = c
                        .ports
                        .unwrap_or_default()
                        .iter()
                        .filter_map(|p| p.public_port.map(u32::from))
                        .collect();
                    p.sort_unstable();
                    p.dedup();
                    p
                },
                ip_addresses: addresses(
                    &c.network_settings
                        .and_then(|n| n.networks)
                        .unwrap_or_default(),
                ),
            })
            .collect())
    }

    pub async fn inspect(&self, permit: &Permit<Read>) -> Result<ContainerDetails, DockerError> {
        self.inspect_raw(permit.container_id()).await
    }

    /// Does the engine still have the permitted container's image? Asked
    /// by content id (`sha256:…`, from the container's own inspect), so no
    /// name the caller gave reaches the engine; `None` when it cannot say.
    pub async fn image_present(&self, permit: &Permit<Read>, image_id: &str) -> Option<bool> {
        let valid = image_id
            .strip_prefix("sha256:")
            .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()));
        if !valid {
            return None;
        }
        let answer = self
            .read("inspect_image", self.timeouts.read, || async {
                self.client()
                    .inspect_image(image_id)
                    .await
                    .map_err(|e| classify("inspect_image", permit.container_id(), e))
            })
            .await;
        match answer {
            Ok(_) => Some(true),
            Err(DockerError::NotFound(_)) => Some(false),
            Err(e) => {
                tracing::warn!(container_id = %permit.container_id(), error = %e, "cannot tell whether the image is present");
                None
            }
        }
    }

    /// Whether the engine has the image with this content id (`sha256:…`,
    /// checked by the caller).
    pub async fn image_exists(&self, image_id: &str) -> Result<bool, DockerError> {
        Ok(self.image(image_id).await?.is_some())
    }

    /// An image by content id: its tags, creation time and OCI labels;
    /// `None` when the engine does not have it.
    pub async fn image(&self, image_id: &str) -> Result<Option<ImageInfo>, DockerError> {
        let answer = self
            .read("inspect_image", self.timeouts.read, || async {
                self.client()
                    .inspect_image(image_id)
                    .await
                    .map_err(|e| classify("inspect_image", image_id, e))
            })
            .await;
        let image = match answer {
            Ok(i) => i,
            Err(DockerError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let labels = image
            .config
            .and_then(|c| c.labels)
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| OCI_LABELS.contains(&k.as_str()))
            .collect();
        Ok(Some(ImageInfo {
            id: image.id.unwrap_or_default(),
            repo_tags: image.repo_tags.unwrap_or_default(),
            created: image.created.map(|c| c.to_string()).unwrap_or_default(),
            oci_labels: labels,
        }))
    }

    /// `GET /containers/{ref}/json`, raw (`inspect.rs` parses it). The
    /// reference is a name or id the service validated (`[a-zA-Z0-9_.-]`),
    /// checked again here: nothing else can reach the path.
    async fn inspect_raw(&self, name_or_id: &str) -> Result<ContainerDetails, DockerError> {
        let reference = name_or_id.strip_prefix('/').unwrap_or(name_or_id);
        let valid = !reference.is_empty()
            && reference != "."
            && reference != ".."
            && reference
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
        if !valid {
            return Err(DockerError::NotFound(name_or_id.to_string()));
        }
        let path = format!("/containers/{reference}/json");
        let body = self
            .read("inspect", self.timeouts.read, || async {
                let version = self.client().client_version();
                let (status, body) = self.raw.get(&version, &path).await.map_err(|e| match e {
                    transport::RawError::Connection(e) => {
                        DockerError::Unavailable(format!("inspect: {e}"))
                    }
                    transport::RawError::Answer(e) => DockerError::Rejected {
                        operation: "inspect",
                        message: e,
                    },
                })?;
                if status.is_success() {
                    return Ok(body);
                }
                // The engine's own error, classified as bollard's would be.
                let message = serde_json::from_slice::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["message"].as_str().map(str::to_string))
                    .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
                Err(classify(
                    "inspect",
                    name_or_id,
                    bollard::errors::Error::DockerResponseServerError {
                        status_code: status.as_u16(),
                        message,
                    },
                ))
            })
            .await?;
        inspect::parse(&body).map_err(|message| DockerError::Rejected {
            operation: "inspect",
            message,
        })
    }

    /// Writes are attempted once: a restart that timed out may still have
    /// happened, and repeating it blindly is how outages get longer.
    /// The deadline of a restart or stop: `timeouts.write`, or the
    /// container's own stop timeout plus a margin when that is longer (up
    /// to `MAX_STOP_WAIT_SECS`). Without one the engine gives 10 s, which
    /// `timeouts.write` (30 s by default) already covers.
    pub fn write_deadline(&self, stop_timeout_secs: Option<u32>) -> Duration {
        match stop_timeout_secs {
            Some(secs) => {
                let stop = Duration::from_secs(u64::from(secs.min(MAX_STOP_WAIT_SECS)));
                self.timeouts.write.max(stop + STOP_MARGIN)
            }
            None => self.timeouts.write,
        }
    }

    async fn write_once(
        &self,
        operation: &'static str,
        id: &str,
        deadline: Duration,
        call: impl std::future::Future<Output = Result<(), bollard::errors::Error>>,
    ) -> Result<(), DockerError> {
        use bollard::errors::Error as E;
        let result =
            tokio::time::timeout(deadline, call)
                .await
                .map_err(|_| DockerError::Timeout {
                    operation,
                    timeout: deadline,
                })?;
        match result {
            Ok(()) => Ok(()),
            // 304: already in the desired state (started / stopped).
            Err(E::DockerResponseServerError {
                status_code: 304, ..
            }) => Ok(()),
            Err(E::DockerResponseServerError {
                status_code: 404, ..
            }) => Err(DockerError::NotFound(id.to_string())),
            // The engine answered and refused (for example a port already
            // allocated on start): that is not "Docker is down".
            Err(E::DockerResponseServerError { message, .. }) => {
                Err(DockerError::Rejected { operation, message })
            }
            Err(e) => Err(classify(operation, id, e)),
        }
    }

    pub async fn restart(&self, permit: &Permit<Restart>) -> Result<(), DockerError> {
        let (client, id) = (self.client(), permit.container_id());
        // No `t`: the engine gives the container its own StopTimeout, as
        // `docker restart` does (a database flushing on shutdown is not
        // killed early, a container set to stop fast is not held up).
        self.write_once(
            "restart",
            id,
            self.write_deadline(permit.stop_timeout_secs()),
            client.restart_container(id, None::<RestartContainerOptions>),
        )
        .await
    }

    pub async fn start(&self, permit: &Permit<Start>) -> Result<(), DockerError> {
        let (client, id) = (self.client(), permit.container_id());
        self.write_once(
            "start",
            id,
            self.timeouts.write,
            client.start_container(id, None::<StartContainerOptions>),
        )
        .await
    }

    /// T2.
    pub async fn stop(&self, permit: &Permit<Stop>) -> Result<(), DockerError> {
        let (client, id) = (self.client(), permit.container_id());
        self.write_once(
            "stop",
            id,
            self.write_deadline(permit.stop_timeout_secs()),
            client.stop_container(id, None::<StopContainerOptions>),
        )
        .await
    }
}

mod build;
mod disk;
mod events;
#[cfg(test)]
pub(crate) mod fake_engine;
mod inspect;
mod logs;
mod resume;
mod rollback;
mod stats;
mod swarm;
mod transport;
mod update;
pub use build::{
    base_images, BuildPlan, Built, BuiltImage, CONTEXT_LABEL, LOG_TAIL, REVISION_LABEL,
    SOURCE_LABEL, TREE_LABEL,
};
pub use disk::{DiskUsage, EngineDisk, MountUsage};
pub use events::{
    is_image_event, RawEvent, EVENT_ACTIONS, IMAGE_EVENT_ACTIONS, MAX_CONTAINER_EVENTS,
};
pub use logs::{LogQuery, LogStream, RawLogLine};
pub use resume::Resumed;
pub use swarm::{NodeInfo, ServiceInfo, TaskInfo, UpdatePolicy, MAX_TASKS};
pub use update::{PullSource, UpdatePlan, Updated};

#[cfg(test)]
mod tests;
