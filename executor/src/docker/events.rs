//! Container events: the engine's stream, reduced to the actions drydock
//! watches, delivered through a channel that closes the engine's stream as
//! soon as the caller goes away.

use std::collections::BTreeMap;

use bollard::query_parameters::EventsOptions;
use futures::StreamExt as _;

use super::{classify, DockerAdapter, DockerError};

/// One container event as the engine reported it. `attributes` are the
/// actor's: the container's name, image and labels, plus `exitCode` for
/// `die` and `signal` for `kill`. Raw here; the service filters and redacts.
#[derive(Debug, Clone, Default)]
pub struct RawEvent {
    pub time_nanos: i64,
    pub id: String,
    /// The engine's action, reduced to its verb (`health_status: unhealthy`
    /// becomes `health_status`, the status going to `health_status`).
    pub action: String,
    pub health_status: String,
    pub attributes: BTreeMap<String, String>,
    /// `""` for a container's or an image's event, `service` or `node` for
    /// a Swarm object's (whose `action` is then create, update or remove).
    pub scope: &'static str,
}

/// The container actions the events stream carries; the engine's others
/// (exec, attach, resize, …) are dropped at the source.
pub const EVENT_ACTIONS: [&str; 10] = [
    "create",
    "start",
    "die",
    "oom",
    "kill",
    "health_status",
    "restart",
    "rename",
    "destroy",
    "stop",
];

/// The image actions the stream carries (a tag that moves, an image that
/// goes), as `image_<action>`, for the containers that use the image.
pub const IMAGE_EVENT_ACTIONS: [&str; 4] = ["pull", "tag", "untag", "delete"];

/// The Swarm services' and nodes' actions the stream carries (a manager
/// emits them; another engine never does).
pub const SWARM_EVENT_ACTIONS: [&str; 3] = ["create", "update", "remove"];

/// Whether a raw event is of an image (`image_pull` …), not a container.
pub fn is_image_event(action: &str) -> bool {
    action.starts_with("image_")
}

fn raw_event(m: bollard::models::EventMessage) -> Option<RawEvent> {
    use bollard::models::EventMessageTypeEnum as Type;
    let image = m.typ == Some(Type::IMAGE);
    let scope = match m.typ {
        Some(Type::SERVICE) => "service",
        Some(Type::NODE) => "node",
        _ => "",
    };
    let full = m.action.unwrap_or_default();
    let (verb, status) = match full.split_once(':') {
        Some((v, s)) => (v.trim().to_string(), s.trim().to_string()),
        None => (full.trim().to_string(), String::new()),
    };
    let known = if image {
        IMAGE_EVENT_ACTIONS.contains(&verb.as_str())
    } else if !scope.is_empty() {
        SWARM_EVENT_ACTIONS.contains(&verb.as_str())
    } else {
        EVENT_ACTIONS.contains(&verb.as_str())
    };
    if !known {
        return None;
    }
    let verb = if image { format!("image_{verb}") } else { verb };
    let actor = m.actor.unwrap_or_default();
    let attributes: BTreeMap<String, String> =
        actor.attributes.unwrap_or_default().into_iter().collect();
    Some(RawEvent {
        time_nanos: m
            .time_nano
            .filter(|n| *n > 0)
            .or_else(|| m.time.map(|s| s.saturating_mul(1_000_000_000)))
            .unwrap_or(0),
        id: actor.id.unwrap_or_default(),
        action: verb,
        health_status: status,
        attributes,
        scope,
    })
}

/// The most events one `ContainerEvents` answer carries.
pub const MAX_CONTAINER_EVENTS: usize = 256;

impl DockerAdapter {
    /// One container's events between `since_unix` and now, oldest first,
    /// the newest `limit` kept: a bounded read (the engine ends the stream
    /// at `until`), under the read timeout.
    pub async fn container_events(
        &self,
        permit: &crate::policy::Permit<crate::policy::Read>,
        since_unix: i64,
        limit: usize,
    ) -> Result<(Vec<RawEvent>, bool), DockerError> {
        let id = permit.container_id();
        self.read("events", self.timeouts.read, || async move {
            // Now to the nanosecond: a whole-second `until` would leave out
            // the events of the current second (often the ones that matter).
            let until = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            let options = EventsOptions {
                since: Some(since_unix.to_string()),
                until: Some(format!("{}.{:09}", until.as_secs(), until.subsec_nanos())),
                filters: Some(
                    [
                        ("type".to_string(), vec!["container".to_string()]),
                        ("container".to_string(), vec![id.to_string()]),
                        (
                            "event".to_string(),
                            EVENT_ACTIONS.iter().map(|a| a.to_string()).collect(),
                        ),
                    ]
                    .into(),
                ),
            };
            let mut stream = self.client().events(Some(options));
            let mut kept = std::collections::VecDeque::new();
            let mut truncated = false;
            while let Some(item) = stream.next().await {
                let m = item.map_err(|e| classify("events", id, e))?;
                if let Some(e) = raw_event(m) {
                    kept.push_back(e);
                    if kept.len() > limit {
                        kept.pop_front();
                        truncated = true;
                    }
                }
            }
            Ok((kept.into(), truncated))
        })
        .await
    }

    /// Container events from `since_nanos` (0: from now), then live, into a
    /// channel; the task stops when the receiver is dropped or the engine
    /// ends the stream (a final `Err` says why).
    pub fn events(
        &self,
        since_nanos: i64,
    ) -> tokio::sync::mpsc::Receiver<Result<RawEvent, DockerError>> {
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        let docker = self.client();
        tokio::spawn(async move {
            let since = (since_nanos > 0).then(|| {
                format!(
                    "{}.{:09}",
                    since_nanos / 1_000_000_000,
                    since_nanos % 1_000_000_000
                )
            });
            let options = EventsOptions {
                since,
                until: None,
                filters: Some(
                    [
                        (
                            "type".to_string(),
                            ["container", "image", "service", "node"]
                                .map(String::from)
                                .to_vec(),
                        ),
                        (
                            "event".to_string(),
                            EVENT_ACTIONS
                                .iter()
                                .chain(IMAGE_EVENT_ACTIONS.iter())
                                .chain(SWARM_EVENT_ACTIONS.iter())
                                .map(|a| a.to_string())
                                .collect(),
                        ),
                    ]
                    .into(),
                ),
            };
            let mut stream = docker.events(Some(options));
            loop {
                // A caller that went away ends the engine's stream now, not
                // at the next event (a quiet host may have none for hours).
                let next = tokio::select! {
                    _ = tx.closed() => return,
                    next = stream.next() => match next {
                        Some(n) => n,
                        None => break,
                    },
                };
                let item = match next {
                    Ok(m) => match raw_event(m) {
                        Some(e) => Ok(e),
                        None => continue,
                    },
                    Err(e) => Err(classify("events", "", e)),
                };
                let stop = item.is_err();
                if tx.send(item).await.is_err() || stop {
                    return;
                }
            }
            let _ = tx
                .send(Err(DockerError::Unavailable(
                    "the engine ended the events stream".into(),
                )))
                .await;
        });
        rx
    }
}
