//! `WatchEvents`: the engine's container events, typed, for visible
//! containers only, with nothing but names, image, compose project and
//! service, exit code, signal and health status (no labels, no env). One
//! audit row when the stream opens; the events themselves are reads of what
//! the caller may already see.

use std::pin::Pin;

use futures::Stream;

use super::*;
use crate::docker::{is_image_event, DockerAdapter, RawEvent};
use crate::grants::labels_from_attributes;
use crate::policy::COMPOSE_PROJECT_LABEL;

pub type EventStream = Pin<Box<dyn Stream<Item = Result<pb::ContainerEvent, Status>> + Send>>;

const COMPOSE_SERVICE_LABEL: &str = "com.docker.compose.service";
/// Event streams one identity may hold open at once (the agent needs one).
pub const MAX_STREAMS_PER_IDENTITY: usize = 4;
/// A stream ends after this long; the caller reconnects with the last
/// event's time and misses nothing.
pub const STREAM_LIFETIME: Duration = Duration::from_secs(3600);

/// One open stream of one identity; dropped with the stream.
struct StreamSlot {
    open: Arc<std::sync::Mutex<HashMap<String, usize>>>,
    identity: String,
}

impl StreamSlot {
    fn take(
        open: &Arc<std::sync::Mutex<HashMap<String, usize>>>,
        identity: &str,
    ) -> Result<StreamSlot, ExecError> {
        let mut map = open.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(identity.to_string()).or_default();
        if *n >= MAX_STREAMS_PER_IDENTITY {
            return Err(ExecError::TooManyStreams(format!(
                "{identity} already has {MAX_STREAMS_PER_IDENTITY} event streams open; close one first"
            )));
        }
        *n += 1;
        Ok(StreamSlot {
            open: open.clone(),
            identity: identity.to_string(),
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut map = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.identity) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.identity);
            }
        }
    }
}

impl ExecutorService {
    pub(super) fn watch_events(
        &self,
        call: &mut Call,
        req: pb::WatchEventsRequest,
    ) -> Result<EventStream, ExecError> {
        call.record(&req.request_id, "");
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let now_nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        if req.since_unix_nanos < 0 || req.since_unix_nanos > now_nanos + 60_000_000_000 {
            return Err(ExecError::InvalidArgument(format!(
                "since_unix_nanos {} is not a time between 1970 and now",
                req.since_unix_nanos
            )));
        }
        let slot = StreamSlot::take(&self.streams, &call.entry.caller)?;
        call.entry.input = format!("since_unix_nanos={}", req.since_unix_nanos);
        call.entry.result = "event stream opened".into();
        let policy = self.policy.clone();
        let docker = self.docker.clone();
        let raw =
            tokio_stream::wrappers::ReceiverStream::new(self.docker.events(req.since_unix_nanos));
        let typed = futures::StreamExt::then(raw, move |item| {
            // The slot lives as long as the stream.
            let _held = &slot;
            let (policy, docker) = (policy.clone(), docker.clone());
            async move {
                match item {
                    Ok(event) if event.scope == "service" => {
                        service_event(&policy, &docker, event).await
                    }
                    Ok(event) if event.scope == "node" => {
                        node_event(&policy, event).map(Ok).into_iter().collect()
                    }
                    Ok(event) if is_image_event(event.action.as_str()) => {
                        image_event(&policy, &docker, event).await
                    }
                    Ok(event) => visible_event(&policy, event).map(Ok).into_iter().collect(),
                    Err(e) => vec![Err(Status::unavailable(format!(
                        "the events stream ended: {e}; reconnect with since_unix_nanos set to the last event's time"
                    )))],
                }
            }
        });
        let stream = futures::StreamExt::flat_map(typed, futures::stream::iter);
        // Ends at shutdown (so the server can finish) or after its lifetime.
        let mut shutdown = self.shutdown.clone();
        let end = async move {
            tokio::select! {
                _ = shutdown.wait_for(|stop| *stop) => {}
                _ = tokio::time::sleep(STREAM_LIFETIME) => {}
            }
        };
        Ok(Box::pin(futures::StreamExt::take_until(stream, end)))
    }
}

/// How far back `ContainerEvents` may look.
const MAX_EVENTS_LOOKBACK_SECS: i64 = 7 * 86_400;

impl ExecutorService {
    /// `ContainerEvents`: one visible container's recent events, typed and
    /// redacted like `WatchEvents`'.
    pub(super) async fn container_events(
        &self,
        call: &mut Call,
        req: pb::ContainerEventsRequest,
    ) -> Result<pb::ContainerEventsResponse, ExecError> {
        call.record(&req.request_id, &req.container);
        call.authenticated()?;
        validate_request_id(&req.request_id)?;
        let now = unix_now();
        let since = match req.since_unix {
            0 => now - 3600,
            s if s > now => {
                return Err(ExecError::InvalidArgument(
                    "since_unix is in the future".into(),
                ))
            }
            s if s < now - MAX_EVENTS_LOOKBACK_SECS => {
                return Err(ExecError::InvalidArgument(format!(
                    "since_unix may be at most {} days back",
                    MAX_EVENTS_LOOKBACK_SECS / 86_400
                )))
            }
            s => s,
        };
        let limit = match req.limit {
            0 => 100,
            n if n as usize > crate::docker::MAX_CONTAINER_EVENTS => {
                return Err(ExecError::InvalidArgument(format!(
                    "limit may be at most {}",
                    crate::docker::MAX_CONTAINER_EVENTS
                )))
            }
            n => n as usize,
        };
        let permit = self.permit_read(call, &req.container).await?;
        let (raw, truncated) = self.docker.container_events(&permit, since, limit).await?;
        let events: Vec<pb::ContainerEvent> = raw
            .into_iter()
            .filter_map(|e| visible_event(&self.policy, e))
            .collect();
        call.entry.result = format!("events={} truncated={truncated}", events.len());
        Ok(pb::ContainerEventsResponse { events, truncated })
    }
}

/// An image event, once for each visible container that uses the image
/// (by content id, or by the name the event gives): a tag that moved under
/// a running service, an image that went. Nothing for an image no visible
/// container uses, so the stream tells nothing of the engine's other images.
async fn image_event(
    policy: &Policy,
    docker: &DockerAdapter,
    e: RawEvent,
) -> Vec<Result<pb::ContainerEvent, Status>> {
    let name = e.attributes.get("name").cloned().unwrap_or_default();
    let users = match docker.list(true).await {
        Ok(all) => all,
        Err(err) => {
            tracing::warn!(error = %err, "cannot tell which containers use an image; its event is dropped");
            return Vec::new();
        }
    };
    let clean = |s: &str| truncate_for_audit(&redact::neutralise_controls(s));
    users
        .into_iter()
        .filter(|c| policy.target_allowed(&c.name, &c.labels))
        .filter(|c| c.image_id == e.id || c.image == e.id || (!name.is_empty() && c.image == name))
        .map(|c| {
            Ok(pb::ContainerEvent {
                time_unix_nanos: e.time_nanos,
                container_id: clean(&c.id),
                name: clean(&c.name),
                action: e.action.to_string(),
                image: clean(if name.is_empty() { &e.id } else { &name }),
                compose_project: clean(
                    c.labels
                        .get(COMPOSE_PROJECT_LABEL)
                        .map_or("", String::as_str),
                ),
                compose_service: clean(
                    c.labels
                        .get(COMPOSE_SERVICE_LABEL)
                        .map_or("", String::as_str),
                ),
                ..Default::default()
            })
        })
        .collect()
}

/// A Swarm service's event (create, update, remove), for a visible
/// service only: its name and id, and for an update the image it moved
/// to. The engine's event carries no labels, so the service's own are
/// read to decide; a removed service (gone, so unreadable) is told only
/// when its name alone is within a name selector.
async fn service_event(
    policy: &Policy,
    docker: &DockerAdapter,
    e: RawEvent,
) -> Vec<Result<pb::ContainerEvent, Status>> {
    let name = e.attributes.get("name").cloned().unwrap_or_default();
    let labels = match docker.list_services().await {
        Ok(all) => all.into_iter().find(|s| s.id == e.id).map(|s| s.labels),
        Err(err) => {
            tracing::warn!(error = %err, "cannot read the service of an event; it is dropped");
            return Vec::new();
        }
    };
    if !policy.service_allowed(&name, &labels.unwrap_or_default()) {
        return Vec::new();
    }
    let clean = |s: &str| truncate_for_audit(&redact::neutralise_controls(s));
    vec![Ok(pb::ContainerEvent {
        time_unix_nanos: e.time_nanos,
        name: clean(&name),
        action: e.action.to_string(),
        image: clean(e.attributes.get("image.new").map_or("", String::as_str)),
        scope: "service".into(),
        service_id: clean(&e.id),
        ..Default::default()
    })]
}

/// A node's event, when any service is in scope (nodes are what services
/// run on); never its labels.
fn node_event(policy: &Policy, e: RawEvent) -> Option<pb::ContainerEvent> {
    policy.targets().services.as_ref()?;
    let clean = |s: &str| truncate_for_audit(&redact::neutralise_controls(s));
    let attr = |k: &str| clean(e.attributes.get(k).map_or("", String::as_str));
    Some(pb::ContainerEvent {
        time_unix_nanos: e.time_nanos,
        name: attr("name"),
        action: e.action.to_string(),
        scope: "node".into(),
        node_id: clean(&e.id),
        node_state: attr("state.new"),
        node_availability: attr("availability.new"),
        ..Default::default()
    })
}

/// The typed, redacted event, or `None` for a container the policy hides.
fn visible_event(policy: &Policy, e: RawEvent) -> Option<pb::ContainerEvent> {
    let name = e.attributes.get("name").cloned().unwrap_or_default();
    let labels = labels_from_attributes(&e.attributes);
    if !policy.target_allowed(&name, &labels) {
        return None;
    }
    let clean = |s: &str| truncate_for_audit(&redact::neutralise_controls(s));
    let exit_code = e
        .attributes
        .get("exitCode")
        .and_then(|c| c.parse::<i64>().ok());
    Some(pb::ContainerEvent {
        time_unix_nanos: e.time_nanos,
        container_id: clean(&e.id),
        name: clean(&name),
        action: e.action.to_string(),
        has_exit_code: exit_code.is_some(),
        exit_code: exit_code.unwrap_or(0),
        signal: clean(e.attributes.get("signal").map_or("", String::as_str)),
        health_status: clean(&e.health_status),
        image: clean(e.attributes.get("image").map_or("", String::as_str)),
        compose_project: clean(labels.get(COMPOSE_PROJECT_LABEL).map_or("", String::as_str)),
        compose_service: clean(labels.get(COMPOSE_SERVICE_LABEL).map_or("", String::as_str)),
        ..Default::default()
    })
}
