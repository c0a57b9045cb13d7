//! The REST/SSE API the CLI talks to. Bearer-token auth on every endpoint
//! except `/healthz`; errors are RFC 7807 problem details.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, Request as HttpRequest, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::Stream;
use serde::Deserialize;
use serde_json::json;

use crate::engine::{Engine, EngineError};
use crate::model::{ExecutorReach, PendingApproval, RequestOptions, Status, MAX_MESSAGE_LEN};

mod automation;
mod containers;
mod document;
mod memory;
#[cfg(test)]
mod openapi;
mod services;
mod updates;

#[derive(Clone)]
pub struct AppState {
    pub engine: Arc<Engine>,
    pub token: Arc<String>,
    pub watch: Arc<crate::config::WatchConfig>,
    pub updates: Arc<crate::updates::UpdateChecker>,
}

/// A problem-details error.
pub struct Problem {
    status: StatusCode,
    title: &'static str,
    detail: String,
}

impl Problem {
    fn new(status: StatusCode, title: &'static str, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            title,
            detail: detail.into(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = json!({"type": "about:blank", "title": self.title, "status": self.status.as_u16(), "detail": self.detail});
        (
            self.status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body.to_string(),
        )
            .into_response()
    }
}

impl From<EngineError> for Problem {
    fn from(e: EngineError) -> Problem {
        match &e {
            EngineError::RequestNotFound(_) | EngineError::ApprovalNotFound(_) => {
                Problem::new(StatusCode::NOT_FOUND, "not found", e.to_string())
            }
            EngineError::ApprovalNotPending { .. } | EngineError::AlreadyFinished { .. } => {
                Problem::new(StatusCode::CONFLICT, "conflict", e.to_string())
            }
            EngineError::InvalidApproval(_) => {
                Problem::new(StatusCode::BAD_REQUEST, "invalid approval", e.to_string())
            }
            EngineError::InvalidFollowUp(_) => {
                Problem::new(StatusCode::BAD_REQUEST, "invalid follow-up", e.to_string())
            }
            EngineError::Store(_) => {
                tracing::error!(error = %e, "store error");
                Problem::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error",
                    "the agent's store failed; see the agent log",
                )
            }
        }
    }
}

/// `Query`, whose refusal is a problem like every other error (axum's own
/// is plain text).
pub(crate) struct Q<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for Q<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Problem;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Problem> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| Q(q))
            .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, "invalid query", e.body_text()))
    }
}

/// Constant-time comparison so the token cannot be guessed byte by byte.
fn token_matches(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn auth(
    State(state): State<AppState>,
    headers: HeaderMap,
    request: HttpRequest,
    next: Next,
) -> Response {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !token_matches(given, &state.token) {
        return Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong bearer token (see agent.token in DRYDOCK_HOME)",
        )
        .into_response();
    }
    next.run(request).await
}

pub fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/api/v1/requests", post(create_request).get(list_requests))
        .route("/api/v1/requests/{id}", get(get_request))
        .route("/api/v1/requests/{id}/events", get(events))
        .route("/api/v1/requests/{id}/timeline", get(timeline))
        .route("/api/v1/executor", get(executor_status))
        .route("/api/v1/hosts", get(hosts_status))
        .route("/api/v1/containers", get(containers::containers))
        .route("/api/v1/services", get(services::services))
        .route("/api/v1/services/{service}/tasks", get(services::tasks))
        .route("/api/v1/requests/{id}/cancel", post(cancel))
        .route("/api/v1/requests/{id}/followups", post(follow_up))
        .route("/api/v1/approvals", get(list_approvals))
        .route("/api/v1/approvals/{id}/approve", post(approve))
        .route("/api/v1/approvals/{id}/reject", post(reject))
        .route(
            "/api/v1/grants",
            post(automation::add_grant).get(automation::list_grants),
        )
        .route(
            "/api/v1/grants/{id}",
            axum::routing::delete(automation::revoke_grant),
        )
        .route(
            "/api/v1/notes",
            post(memory::add_note).get(memory::list_notes),
        )
        .route(
            "/api/v1/notes/{id}",
            axum::routing::delete(memory::remove_note),
        )
        .route(
            "/api/v1/schedules",
            post(memory::add_schedule).get(memory::list_schedules),
        )
        .route(
            "/api/v1/schedules/{id}",
            axum::routing::delete(memory::remove_schedule),
        )
        .route("/api/v1/updates", get(updates::list))
        .route("/api/v1/updates/check", post(updates::check))
        .route("/api/v1/alerts", post(automation::alerts))
        .route("/api/v1/deliveries", get(automation::deliveries))
        .route("/api/v1/openapi.json", get(openapi_document))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/healthz", get(healthz))
        .merge(protected)
        .with_state(state)
}

/// The agent answers; with several hosts, which of them do not (from each
/// host's own probe, so this never waits on a host). A host down does not
/// make the agent unhealthy: the others are still served.
async fn healthz(State(s): State<AppState>) -> Response {
    let hosts = s.engine.hosts();
    if !hosts.named() {
        return Json(json!({"status": "ok"})).into_response();
    }
    let down: Vec<String> = hosts
        .all()
        .iter()
        .filter(|h| h.is_down())
        .map(|h| h.label().to_string())
        .collect();
    let status = if down.is_empty() { "ok" } else { "degraded" };
    Json(json!({"status": status, "hosts_down": down})).into_response()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    message: String,
    #[serde(default)]
    container: Option<String>,
    #[serde(default)]
    diagnose_only: bool,
    /// The asker's offset from UTC in minutes, for a time in a question.
    #[serde(default)]
    utc_offset_minutes: Option<i32>,
    /// Look on this host only (a name from the agent's `hosts:`); a
    /// `container` of `NAME@HOST` says the same.
    #[serde(default)]
    host: Option<String>,
    /// Update the target to the image its tag names now in its registry.
    #[serde(default)]
    update: bool,
    /// Build the target from its build context (at `at`, else the
    /// checkout's HEAD) and run what was built.
    #[serde(default)]
    build: Option<drydock_vocab::BuildOptions>,
}

/// The host a request is asked about: `host`, or the `@HOST` of
/// `container`, which must be a host the agent serves; the container's name
/// without its host.
fn asked_host(
    hosts: &crate::hosts::Hosts,
    container: Option<String>,
    host: Option<String>,
) -> Result<(Option<String>, Option<String>), Problem> {
    let (container, at) = match container {
        Some(c) => match c.rsplit_once('@') {
            Some((name, h)) if !name.is_empty() => (Some(name.to_string()), Some(h.to_string())),
            _ => (Some(c), None),
        },
        None => (None, None),
    };
    let host = match (host, at) {
        (Some(a), Some(b)) if a != b => {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid host",
                format!("host `{a}` and container `@{b}` name different hosts; name one"),
            ))
        }
        (h, at) => h.or(at),
    };
    if let Some(h) = &host {
        if hosts.get(Some(h)).is_none() || !hosts.named() {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "unknown host",
                format!(
                    "no host `{h}`: the agent serves {} (its `hosts:` config)",
                    hosts.names().join(", ")
                ),
            ));
        }
    }
    Ok((container, host))
}

async fn create_request(
    State(s): State<AppState>,
    body: Result<Json<CreateBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body.map_err(|e| Problem::new(StatusCode::BAD_REQUEST, "invalid body", format!("{e}; expected {{\"message\": \"...\", \"container\"?: \"...\", \"diagnose_only\"?: bool, \"update\"?: bool, \"build\"?: {{\"at\"?: \"...\"}}, \"utc_offset_minutes\"?: int, \"host\"?: \"...\"}}")))?;
    let message = body.message.trim().to_string();
    if message.is_empty() || message.len() > MAX_MESSAGE_LEN {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid message",
            format!("message must be 1 to {MAX_MESSAGE_LEN} characters"),
        ));
    }
    let (container, host) = asked_host(s.engine.hosts(), body.container, body.host)?;
    if let Some(c) = &container {
        if c.is_empty()
            || c.len() > 128
            || !c
                .trim_start_matches('/')
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
        {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid container",
                "container must be a container name or id (`NAME@HOST` on one of several hosts)",
            ));
        }
    }
    let max = crate::rules::question::MAX_UTC_OFFSET_MINUTES;
    if let Some(off) = body
        .utc_offset_minutes
        .filter(|o| !(-max..=max).contains(o))
    {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid utc_offset_minutes",
            format!("utc_offset_minutes {off} must be between -{max} and {max} (UTC+01:00 is 60)"),
        ));
    }
    // "rebuild the api at 9c2d1e0" asks for a build as `build` does;
    // "update the api" for an update as `update: true` does.
    let build = body
        .build
        .or_else(|| crate::rules::asks_for_build(&message));
    if let Some(at) = build
        .as_ref()
        .map(|b| b.at.as_str())
        .filter(|a| !a.is_empty())
    {
        if !crate::rules::is_revision(at) {
            return Err(Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid build",
                format!("build.at `{}` is not a revision: a commit id, a branch or a tag of letters, digits, `.`, `_`, `-` and `/`", at.chars().take(80).collect::<String>()),
            ));
        }
    }
    let update = build.is_none() && (body.update || crate::rules::asks_for_update(&message));
    if (update || build.is_some()) && body.diagnose_only {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid request",
            "an update or a build changes the container and diagnose_only forbids any change; ask for one or the other",
        ));
    }
    if body.update && build.is_some() {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid request",
            "an update runs what the registry names and a build what the checkout holds; ask for one or the other",
        ));
    }
    let req = s
        .engine
        .create(
            message,
            RequestOptions {
                utc_offset_minutes: body.utc_offset_minutes,
                container,
                host,
                // A question ("why did search restart at 3 am?") gets an
                // answer from the evidence, not a plan.
                diagnose_only: body.diagnose_only || crate::rules::is_question(&body.message),
                update,
                build,
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Json(req.for_api())).into_response())
}

#[derive(Deserialize)]
struct ListQuery {
    status: Option<String>,
    limit: Option<u32>,
    /// Only the requests on this host.
    host: Option<String>,
}

async fn list_requests(State(s): State<AppState>, Q(q): Q<ListQuery>) -> Result<Response, Problem> {
    let status = match &q.status {
        Some(st) => Some(Status::parse(st).ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "invalid status",
                format!("unknown status `{st}`"),
            )
        })?),
        None => None,
    };
    // Written one request at a time: the answer, not every document as well.
    let mut body = Vec::with_capacity(4096);
    body.push(b'[');
    s.engine
        .store()
        .each_on(
            status,
            q.host.as_deref(),
            q.limit.unwrap_or(50).min(500),
            |r: crate::model::Request| {
                if body.len() > 1 {
                    body.push(b',');
                }
                serde_json::to_writer(&mut body, &r.for_api())?;
                Ok(())
            },
        )
        .map_err(EngineError::from)?;
    body.push(b']');
    Ok(([(header::CONTENT_TYPE, "application/json")], body).into_response())
}

async fn get_request(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let req = s
        .engine
        .store()
        .get(&id)
        .map_err(EngineError::from)?
        .ok_or(EngineError::RequestNotFound(id))?;
    Ok(Json(req.for_api()).into_response())
}

/// The request's stored events as one JSON array (what the SSE stream would
/// replay), for `drydock show` and scripts that do not want a stream.
async fn timeline(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, Problem> {
    let store = s.engine.store();
    store
        .get(&id)
        .map_err(EngineError::from)?
        .ok_or_else(|| EngineError::RequestNotFound(id.clone()))?;
    let events = store.events_after(&id, 0).map_err(EngineError::from)?;
    Ok(Json(events).into_response())
}

/// Whether the agent reaches the executor over mTLS right now, and the
/// executor's policy as it answered (actions, trusted approvers' public keys,
/// scope). `drydock doctor` relies on it.
async fn executor_status(State(s): State<AppState>, Q(q): Q<HostQuery>) -> Response {
    let started = std::time::Instant::now();
    let hosts = s.engine.hosts();
    match s.engine.executor_policy(q.host.as_deref()).await {
        Ok(policy) => Json(ExecutorReach {
            reachable: true,
            latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            policy,
            host: hosts.named().then(|| {
                q.host
                    .clone()
                    .unwrap_or_else(|| hosts.first().label().to_string())
            }),
            hosts: if hosts.named() {
                hosts.views()
            } else {
                Vec::new()
            },
        })
        .into_response(),
        Err(e) if e.is_not_found() => {
            Problem::new(StatusCode::NOT_FOUND, "unknown host", e.message).into_response()
        }
        Err(e) => Problem::new(
            StatusCode::BAD_GATEWAY,
            "executor unreachable",
            format!("the agent cannot use the executor: {e}"),
        )
        .into_response(),
    }
}

/// Every host as the agent last probed it, without asking any now: what
/// `doctor` and the console show when the first host does not answer.
async fn hosts_status(State(s): State<AppState>) -> Response {
    Json(json!({"hosts": s.engine.hosts().views()})).into_response()
}

#[derive(Deserialize)]
pub(crate) struct HostQuery {
    host: Option<String>,
}

#[derive(Deserialize)]
struct EventsQuery {
    after: Option<i64>,
}

/// Durable SSE: replay from the store after `Last-Event-ID` (or `?after=`),
/// then follow live events; the stream closes after the request's `final`
/// event. Subscribing before replaying means no event falls between the two.
async fn events(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Q(q): Q<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>, Problem> {
    let req = s
        .engine
        .store()
        .get(&id)
        .map_err(EngineError::from)?
        .ok_or_else(|| EngineError::RequestNotFound(id.clone()))?;
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok())
        .or(q.after)
        .unwrap_or(0);
    let mut live = s.engine.subscribe();
    let replay = s
        .engine
        .store()
        .events_after(&id, after)
        .map_err(EngineError::from)?;
    let engine = s.engine.clone();
    let terminal_at_start = req.status.is_terminal();
    let stream = async_stream::stream! {
        let mut last = after;
        let to_sse = |e: &crate::model::Event| SseEvent::default().id(e.seq.to_string()).event(e.kind().as_str()).data(serde_json::to_string(e).unwrap_or_default());
        for e in &replay {
            last = e.seq;
            yield Ok(to_sse(e));
            if e.kind().is_final() {
                return;
            }
        }
        if terminal_at_start {
            return;
        }
        loop {
            match live.recv().await {
                Ok(e) if e.request_id == id && e.seq > last => {
                    last = e.seq;
                    let done = e.kind().is_final();
                    yield Ok(to_sse(&e));
                    if done {
                        return;
                    }
                }
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    // Fell behind: catch up from the store, exactly once each.
                    if let Ok(missed) = engine.store().events_after(&id, last) {
                        for e in missed {
                            last = e.seq;
                            let done = e.kind().is_final();
                            yield Ok(to_sse(&e));
                            if done {
                                return;
                            }
                        }
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    };
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FollowUpBody {
    message: String,
}

async fn follow_up(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<FollowUpBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body.map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid body",
            format!("{e}; expected {{\"message\": \"...\"}}"),
        )
    })?;
    let added = s.engine.follow_up(&id, &body.message).await?;
    Ok((StatusCode::CREATED, Json(added)).into_response())
}

async fn cancel(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, Problem> {
    Ok(Json(s.engine.cancel(&id).await?.for_api()).into_response())
}

async fn list_approvals(State(s): State<AppState>) -> Result<Response, Problem> {
    let pending: Vec<PendingApproval> = s
        .engine
        .pending_approvals()?
        .into_iter()
        .map(|(req, mut a)| {
            a.forget_signatures();
            PendingApproval {
                step: req.plan.as_ref().and_then(|p| p.steps.get(a.step)).cloned(),
                approval: a,
                request_id: req.id,
                message: req.message,
            }
        })
        .collect();
    Ok(Json(pending).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    key_id: String,
    signature: String,
}

async fn approve(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Result<Json<ApproveBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body.map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid body",
            format!("{e}; expected {{\"key_id\": \"...\", \"signature\": \"<base64>\"}}"),
        )
    })?;
    Ok(Json(
        s.engine
            .approve(&id, &body.key_id, &body.signature)
            .await?
            .for_api(),
    )
    .into_response())
}

async fn reject(State(s): State<AppState>, Path(id): Path<String>) -> Result<Response, Problem> {
    Ok(Json(s.engine.reject(&id).await?.for_api()).into_response())
}

/// The OpenAPI 3.1 document of this API, as kept in the repository
/// (`docs/openapi.json`, minified and compressed by `build.rs`): the
/// generator (`api/openapi.rs`, from the vocabulary's types) runs in a unit
/// test that keeps the file equal to it, so the daemon carries the bytes
/// and not the schema code. Sent compressed (`Content-Encoding: deflate`)
/// to a client that accepts it, else inflated once and sent as it is.
async fn openapi_document(headers: HeaderMap) -> Response {
    let accept = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let (body, encoding) = document::document_for(accept);
    let mut response = ([(header::CONTENT_TYPE, "application/json")], body).into_response();
    let h = response.headers_mut();
    h.insert(
        header::VARY,
        header::HeaderValue::from_static("accept-encoding"),
    );
    if let Some(e) = encoding {
        h.insert(
            header::CONTENT_ENCODING,
            header::HeaderValue::from_static(e),
        );
    }
    response
}

async fn metrics(State(s): State<AppState>) -> Result<Response, Problem> {
    let counts = s
        .engine
        .store()
        .count_by_status()
        .map_err(EngineError::from)?;
    let mut out = String::from(
        "# HELP drydock_requests Requests by status.\n# TYPE drydock_requests gauge\n",
    );
    for (status, n) in counts {
        out.push_str(&format!("drydock_requests{{status=\"{status}\"}} {n}\n"));
    }
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response())
}

#[cfg(test)]
mod tests {
    use super::token_matches;

    #[test]
    fn token_comparison() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abd", "abc"));
        assert!(!token_matches("", "abc"));
        assert!(!token_matches("abcd", "abc"));
    }
}
