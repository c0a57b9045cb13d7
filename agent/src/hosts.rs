//! The Docker hosts the agent serves, one executor each. The hosts stay
//! independent: each has its own connection (reconnected lazily by its
//! channel), its own health, probed with its own backoff, and its own watch
//! stream; losing one never blocks a request on another.
//!
//! With a single unnamed executor (`hosts:` empty and no `executor.host`)
//! nothing names a host, and requests look exactly as they did before hosts
//! existed.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::executor_client::{Executor, ExecutorError};
use crate::model::{now_rfc3339, HostView};

/// How long a probe waits for a host's answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a host that answers is asked again.
const PROBE_EVERY: Duration = Duration::from_secs(10);
/// The longest wait between probes of a host that does not answer.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Default)]
struct Health {
    /// `None` until the first probe answers or fails.
    reachable: Option<bool>,
    latency_ms: Option<u64>,
    error: Option<String>,
    checked_at: Option<String>,
    down_since: Option<String>,
}

/// One host: its name (absent for a lone unnamed executor), where it is
/// reached, and its executor.
pub struct Host {
    pub name: Option<String>,
    pub endpoint: String,
    pub executor: Arc<dyn Executor>,
    health: Mutex<Health>,
}

impl Host {
    pub fn new(name: Option<String>, endpoint: String, executor: Arc<dyn Executor>) -> Host {
        Host {
            name,
            endpoint,
            executor,
            health: Mutex::new(Health::default()),
        }
    }

    /// The name a person sees (`local` for a lone unnamed executor).
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or("local")
    }

    fn health(&self) -> Health {
        self.health.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// Whether the last probe failed (a host never probed is not down).
    pub fn is_down(&self) -> bool {
        self.health().reachable == Some(false)
    }

    pub fn view(&self) -> HostView {
        let h = self.health();
        HostView {
            name: self.label().to_string(),
            endpoint: self.endpoint.clone(),
            reachable: h.reachable == Some(true),
            latency_ms: h.latency_ms,
            error: h.error,
            checked_at: h.checked_at,
            down_since: h.down_since,
        }
    }

    fn record(&self, outcome: Result<u64, String>) {
        let Ok(mut h) = self.health.lock() else {
            return;
        };
        let now = now_rfc3339();
        match outcome {
            Ok(ms) => {
                if h.reachable == Some(false) {
                    tracing::info!(host = %self.label(), "the host's executor answers again");
                }
                h.reachable = Some(true);
                h.latency_ms = Some(ms);
                h.error = None;
                h.down_since = None;
            }
            Err(e) => {
                if h.reachable != Some(false) {
                    tracing::warn!(host = %self.label(), error = %e, "the host's executor does not answer");
                    h.down_since = Some(now.clone());
                }
                h.reachable = Some(false);
                h.latency_ms = None;
                h.error = Some(e);
            }
        }
        h.checked_at = Some(now);
    }

    /// Ask the executor whether it serves (its health service) and record
    /// the outcome. When it comes up, its policy is read once as well: an
    /// executor that names another host than the agent calls it is recorded
    /// as down, for it is not the host the agent thinks it reaches.
    pub async fn probe(&self) -> bool {
        let started = Instant::now();
        let was_up = self.health().reachable == Some(true);
        let outcome = match tokio::time::timeout(PROBE_TIMEOUT, self.executor.ping()).await {
            Err(_) => Err(format!("no answer within {}s", PROBE_TIMEOUT.as_secs())),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(())) => Ok(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)),
        };
        let outcome = match outcome {
            Ok(ms) if !was_up => self.check_identity().await.map(|()| ms),
            other => other,
        };
        let up = outcome.is_ok();
        self.record(outcome);
        up
    }

    async fn check_identity(&self) -> Result<(), String> {
        let policy = tokio::time::timeout(PROBE_TIMEOUT, self.executor.policy("req-doctor"))
            .await
            .map_err(|_| format!("no answer within {}s", PROBE_TIMEOUT.as_secs()))?
            .map_err(|e| e.to_string())?;
        match (&self.name, policy.host.as_str()) {
            (Some(ours), theirs) if !theirs.is_empty() && ours != theirs => Err(format!(
                "the executor at {} says it is host `{theirs}`, not `{ours}`: check the agent's `hosts:` against each executor's `host.name`",
                self.endpoint
            )),
            _ => Ok(()),
        }
    }
}

/// Every host, `executor:`'s first.
pub struct Hosts {
    list: Vec<Arc<Host>>,
}

impl Hosts {
    /// `list` must not be empty; the config always has `executor:`.
    pub fn new(list: Vec<Host>) -> Hosts {
        Hosts {
            list: list.into_iter().map(Arc::new).collect(),
        }
    }

    /// A lone unnamed executor.
    pub fn single(executor: Arc<dyn Executor>) -> Hosts {
        Hosts::new(vec![Host::new(None, String::new(), executor)])
    }

    pub fn all(&self) -> &[Arc<Host>] {
        &self.list
    }

    /// Whether requests name their host: more than one, or one named.
    pub fn named(&self) -> bool {
        self.list.len() > 1 || self.list.iter().any(|h| h.name.is_some())
    }

    pub fn first(&self) -> &Arc<Host> {
        &self.list[0]
    }

    /// The host of this name; `None` (no name) is the first.
    pub fn get(&self, name: Option<&str>) -> Option<&Arc<Host>> {
        match name {
            None => self.list.first(),
            Some(n) => self.list.iter().find(|h| h.label() == n),
        }
    }

    /// The configured names, for messages.
    pub fn names(&self) -> Vec<String> {
        self.list.iter().map(|h| h.label().to_string()).collect()
    }

    /// The host a name refers to, or an error a person can act on.
    pub fn require(&self, name: &str) -> Result<&Arc<Host>, ExecutorError> {
        self.get(Some(name)).ok_or_else(|| {
            ExecutorError::new(
                tonic::Code::NotFound,
                format!(
                    "no host `{name}` is configured; the agent serves {}",
                    self.names().join(", ")
                ),
            )
        })
    }

    pub fn views(&self) -> Vec<HostView> {
        self.list.iter().map(|h| h.view()).collect()
    }

    /// Probe each host on its own schedule, for as long as the agent runs:
    /// every `PROBE_EVERY` while it answers, with a backoff doubling up to
    /// `MAX_BACKOFF` while it does not.
    pub fn spawn_probes(&self) {
        for host in &self.list {
            let host = host.clone();
            tokio::spawn(async move {
                let mut backoff = Duration::from_secs(1);
                loop {
                    let wait = if host.probe().await {
                        backoff = Duration::from_secs(1);
                        PROBE_EVERY
                    } else {
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                        backoff
                    };
                    tokio::time::sleep(wait).await;
                }
            });
        }
    }
}
