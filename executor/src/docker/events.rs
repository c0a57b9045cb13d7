//! Container events: the engine's stream, reduced to the actions drydock
//! watches, delivered through a channel that closes the engine's stream as
//! soon as the caller goes away.

use drydock_proto::docker::EventAction;
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
    pub action: EventAction,
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
        action: EventAction::parse(&verb),
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
    /// channel, until the receiver is dropped. The engine going away (a
    /// restart of dockerd, its socket gone) does not end it: the task
    /// reconnects with backoff and resumes from the newest event it
    /// delivered. A resume (a `since_nanos`, or a reconnect) first catches
    /// up from the containers' state: a death the engine has no event for
    /// (its event buffer is in memory and a restarted engine starts empty)
    /// is delivered as the `die` (and `oom`) it was, at its `FinishedAt`.
    pub fn events(
        &self,
        since_nanos: i64,
    ) -> tokio::sync::mpsc::Receiver<Result<RawEvent, DockerError>> {
        let (tx, rx) = tokio::sync::mpsc::channel(256);
        let adapter = self.clone();
        tokio::spawn(async move { adapter.follow_events(since_nanos, tx).await });
        rx
    }

    async fn follow_events(
        self,
        since_nanos: i64,
        tx: tokio::sync::mpsc::Sender<Result<RawEvent, DockerError>>,
    ) {
        // The newest event time the engine delivered: where a reconnect
        // resumes (a death caught up from state does not move it, so no
        // event of the engine's in between is skipped).
        let mut last = since_nanos.max(0);
        let mut catch_up = last > 0;
        let mut pause = RECONNECT_FIRST;
        // Deaths delivered from state, by container: the engine's own event
        // for one of them, if it still has it, is not delivered twice.
        let mut caught: BTreeMap<String, i64> = BTreeMap::new();
        loop {
            if catch_up {
                match self.deaths_since(last).await {
                    Ok(deaths) => {
                        for e in deaths {
                            if e.action == EventAction::Die {
                                caught.insert(e.id.clone(), e.time_nanos);
                            }
                            if tx.send(Ok(e)).await.is_err() {
                                return;
                            }
                        }
                        catch_up = false;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot catch up from the containers' state yet")
                    }
                }
            }
            let mut stream = self.client().events(Some(stream_options(last)));
            let ended = loop {
                // A caller that went away ends the engine's stream now, not
                // at the next event (a quiet host may have none for hours).
                let next = tokio::select! {
                    _ = tx.closed() => return,
                    next = stream.next() => next,
                };
                match next {
                    Some(Ok(m)) => {
                        pause = RECONNECT_FIRST;
                        let Some(e) = raw_event(m) else { continue };
                        last = last.max(e.time_nanos);
                        if already_caught(&mut caught, &e) {
                            continue;
                        }
                        if tx.send(Ok(e)).await.is_err() {
                            return;
                        }
                    }
                    Some(Err(e)) => break classify("events", "", e).to_string(),
                    None => break "the engine ended the events stream".to_string(),
                }
            };
            if catch_up {
                // The engine is still away; try again.
            } else {
                tracing::warn!(error = %ended, "the engine's events stream ended; reconnecting");
                catch_up = true;
                if last == 0 {
                    // A live-only stream resumes from when it was lost.
                    last = now_nanos();
                }
            }
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            pause = (pause * 2).min(RECONNECT_MAX);
        }
    }

    /// Containers that died after `since_nanos` (by their `FinishedAt`), as
    /// the events their deaths were, oldest first; a bounded number.
    async fn deaths_since(&self, since_nanos: i64) -> Result<Vec<RawEvent>, DockerError> {
        let mut out = Vec::new();
        let stopped = self
            .list(true)
            .await?
            .into_iter()
            .filter(|c| matches!(c.state.as_str(), "exited" | "dead"))
            .take(MAX_CAUGHT_UP);
        for c in stopped {
            let Ok(d) = self.inspect_raw(&c.id).await else {
                continue;
            };
            let Some(at) = super::logs::parse_rfc3339_nanos(&d.state.finished_at) else {
                continue;
            };
            if at <= since_nanos {
                continue;
            }
            let mut attributes = d.labels.clone();
            attributes.insert("name".into(), d.name.clone());
            attributes.insert("image".into(), d.image.clone());
            let event =
                |action: &str, time_nanos: i64, attributes: BTreeMap<String, String>| RawEvent {
                    time_nanos,
                    id: d.id.clone(),
                    action: action.into(),
                    health_status: String::new(),
                    attributes,
                    scope: "",
                };
            if d.state.oom_killed {
                out.push(event("oom", at - 1, attributes.clone()));
            }
            attributes.insert("exitCode".into(), d.state.exit_code.to_string());
            out.push(event("die", at, attributes));
        }
        out.sort_by_key(|e| e.time_nanos);
        Ok(out)
    }
}

/// How far apart a death's `FinishedAt` and the engine's `die` event for it
/// may be stamped.
const SAME_DEATH_NANOS: i64 = 2_000_000_000;

/// Whether `e` is the engine's own event for a death already delivered from
/// the container's state (its `die`, or the `oom` just before it).
fn already_caught(caught: &mut BTreeMap<String, i64>, e: &RawEvent) -> bool {
    let Some(at) = caught.get(&e.id).copied() else {
        return false;
    };
    let same = (e.time_nanos - at).abs() < SAME_DEATH_NANOS;
    match e.action {
        EventAction::Die if same => {
            caught.remove(&e.id);
            true
        }
        EventAction::Oom => same,
        _ => false,
    }
}

/// The first pause before reconnecting to the engine's events, doubled up
/// to `RECONNECT_MAX`.
const RECONNECT_FIRST: std::time::Duration = std::time::Duration::from_millis(500);
const RECONNECT_MAX: std::time::Duration = std::time::Duration::from_secs(8);
/// The most stopped containers one catch-up inspects.
const MAX_CAUGHT_UP: usize = 500;

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// The live stream's query: every kind drydock watches, from just after
/// `after_nanos` (0: live only).
fn stream_options(after_nanos: i64) -> EventsOptions {
    let since = (after_nanos > 0).then(|| {
        let from = after_nanos + 1;
        format!("{}.{:09}", from / 1_000_000_000, from % 1_000_000_000)
    });
    EventsOptions {
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: &str, action: &str, t: i64) -> RawEvent {
        RawEvent {
            time_nanos: t,
            id: id.into(),
            action: action.into(),
            ..Default::default()
        }
    }

    #[test]
    fn the_engines_own_event_of_a_death_caught_up_from_state_is_not_sent_twice() {
        let at = 1_000_000_000_000;
        let mut caught = BTreeMap::from([("a".to_string(), at)]);
        assert!(!already_caught(
            &mut caught,
            &ev("a", "start", at - 5_000_000_000)
        ));
        assert!(
            !already_caught(&mut caught, &ev("b", "die", at)),
            "another container"
        );
        assert!(already_caught(&mut caught, &ev("a", "oom", at - 1_000)));
        assert!(already_caught(&mut caught, &ev("a", "die", at + 3_000_000)));
        // Its next death is a new one.
        assert!(!already_caught(
            &mut caught,
            &ev("a", "die", at + 60_000_000_000)
        ));
    }

    #[test]
    fn a_resume_starts_just_after_the_last_event() {
        assert_eq!(stream_options(0).since, None);
        assert_eq!(
            stream_options(1_700_000_000_999_999_999).since.as_deref(),
            Some("1700000001.000000000")
        );
    }
}
