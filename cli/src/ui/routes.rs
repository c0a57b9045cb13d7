//! The console's pages and JSON API. Reads are the agent's answers passed
//! through; approvals are decoded here; approving and creating a grant sign
//! here, over exactly the bytes the page showed.

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};

use super::{Shared, SESSION_COOKIE};
use drydock_vocab::{EventKind, Status};

use crate::args::CreateArgs;
use crate::text::{describe_time, unix_now};
use crate::{approve, claims, grant};

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
/// Where the served script gets the vocabulary's words.
const VOCAB_SLOT: &str = "/*DRYDOCK_VOCAB*/{}";

/// The console's script with the vocabulary written in: every event kind
/// and request state, from the types the agent serializes.
fn app_js() -> &'static str {
    static SERVED: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SERVED.get_or_init(|| {
        let vocab = json!({
            "kinds": EventKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
            "states": Status::ALL.map(Status::as_str),
            "terminal": Status::terminal().map(Status::as_str).collect::<Vec<_>>(),
        });
        APP_JS.replacen(VOCAB_SLOT, &vocab.to_string(), 1)
    })
}

pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/login", get(login))
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", app_js()) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route("/api/session", get(session))
        .route("/api/containers", get(containers))
        .route("/api/services", get(services))
        .route("/api/services/{service}/tasks", get(service_tasks))
        .route("/api/requests", get(requests))
        .route("/api/requests/{id}", get(request))
        .route("/api/requests/{id}/events", get(events))
        .route("/api/requests/{id}/followups", post(follow_up))
        .route("/api/approvals", get(approvals))
        .route("/api/approvals/{id}/approve", post(approve))
        .route("/api/approvals/{id}/reject", post(reject))
        .route("/api/grants", get(grants).post(grant_confirm))
        .route("/api/grants/preview", post(grant_preview))
        .route("/api/grants/{id}/revoke", post(grant_revoke))
        .route("/api/schedules", get(schedules).post(schedule_add))
        .route("/api/schedules/{id}/remove", post(schedule_remove))
        .route("/api/updates", get(updates))
        .route("/api/updates/check", post(updates_check))
        .route("/api/updates/{container}/propose", post(update_propose))
        .with_state(state)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// An error for the page: a status and a sentence.
struct UiError(StatusCode, String);

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({"error": self.1}))).into_response()
    }
}

impl From<anyhow::Error> for UiError {
    fn from(e: anyhow::Error) -> UiError {
        UiError(StatusCode::BAD_GATEWAY, format!("{e:#}"))
    }
}

fn bad(message: impl Into<String>) -> UiError {
    UiError(StatusCode::BAD_REQUEST, message.into())
}

/// Ids go into the agent's paths: plain characters only.
fn plain_id(id: &str) -> Result<&str, UiError> {
    if crate::client::is_plain_id(id) {
        Ok(id)
    } else {
        Err(bad("not an id"))
    }
}

#[derive(Deserialize)]
struct LoginQuery {
    token: Option<String>,
}

async fn login(State(s): State<Shared>, Query(q): Query<LoginQuery>) -> Response {
    match q.token.as_deref().and_then(|t| s.redeem(t)) {
        Some((sid, _)) => {
            let cookie = format!("{SESSION_COOKIE}={sid}; HttpOnly; SameSite=Strict; Path=/");
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
        None => (
            StatusCode::UNAUTHORIZED,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "this login link is wrong or was already used: run `drydock ui` again for a new one",
        )
            .into_response(),
    }
}

async fn session(State(s): State<Shared>, headers: HeaderMap) -> Result<Json<Value>, UiError> {
    let csrf = s
        .csrf_of(&headers)
        .ok_or_else(|| UiError(StatusCode::UNAUTHORIZED, "no session".into()))?;
    // The hosts the agent serves, for the host column and filter (none
    // with a single executor, or while the agent cannot say).
    let hosts: Vec<Value> = match s.agent.get("/api/v1/hosts").await {
        Ok(list) => list["hosts"]
            .as_array()
            .filter(|h| h.len() > 1)
            .map(|h| h.iter().map(|h| h["name"].clone()).collect())
            .unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    Ok(Json(json!({
        "csrf": csrf,
        "approver_id": s.cfg.approver.id,
        "agent_url": s.cfg.agent_url,
        "now": unix_now(),
        "hosts": hosts,
    })))
}

async fn containers(State(s): State<Shared>) -> Result<Json<Value>, UiError> {
    Ok(Json(s.agent.get("/api/v1/containers").await?))
}

async fn services(State(s): State<Shared>) -> Result<Json<Value>, UiError> {
    Ok(Json(s.agent.get("/api/v1/services").await?))
}

async fn service_tasks(
    State(s): State<Shared>,
    Path(service): Path<String>,
) -> Result<Json<Value>, UiError> {
    if !crate::text::is_service_ref(&service) {
        return Err(bad("not a Swarm service name or id"));
    }
    Ok(Json(
        s.agent
            .get(&format!("/api/v1/services/{service}/tasks"))
            .await?,
    ))
}

#[derive(Deserialize)]
struct ListQuery {
    status: Option<String>,
    limit: Option<u32>,
    host: Option<String>,
}

async fn requests(
    State(s): State<Shared>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, UiError> {
    let mut path = format!(
        "/api/v1/requests?limit={}",
        q.limit.unwrap_or(50).clamp(1, 500)
    );
    if let Some(status) = q.status.filter(|st| !st.is_empty()) {
        let status = crate::text::parse_status(&status).map_err(|e| bad(format!("{e:#}")))?;
        path.push_str(&format!("&status={}", status.as_str()));
    }
    if let Some(host) = q.host.filter(|h| !h.is_empty()) {
        if !drydock_proto::approval::is_host_name(&host) {
            return Err(bad("not a host name"));
        }
        path.push_str(&format!("&host={host}"));
    }
    Ok(Json(s.agent.get(&path).await?))
}

async fn request(State(s): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, UiError> {
    let id = plain_id(&id)?;
    Ok(Json(s.agent.get(&format!("/api/v1/requests/{id}")).await?))
}

/// The agent's SSE, passed through; the browser's `Last-Event-ID` resumes it.
async fn events(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, UiError> {
    let id = plain_id(&id)?;
    let last = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| v.len() <= 20 && v.chars().all(|c| c.is_ascii_digit()));
    let upstream = s.agent.event_stream(id, last).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        Body::from_stream(upstream.bytes_stream()),
    )
        .into_response())
}

#[derive(Deserialize)]
struct FollowUpForm {
    message: String,
}

/// A person's follow-up, passed to the agent (which checks it); it
/// approves nothing.
async fn follow_up(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Json(form): Json<FollowUpForm>,
) -> Result<Json<Value>, UiError> {
    let id = plain_id(&id)?;
    let added = s.agent.follow_up(id, &form.message).await?;
    Ok(Json(
        json!({"request_id": id, "round": added.round, "reopened": added.reopened}),
    ))
}

/// The schedules with each one's last answer; the page adds and removes
/// them (a schedule only ever reads).
async fn schedules(State(s): State<Shared>) -> Result<Json<Value>, UiError> {
    let list = s.agent.schedules().await?;
    Ok(Json(
        serde_json::to_value(list).map_err(anyhow::Error::from)?,
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScheduleForm {
    message: String,
    every: String,
    #[serde(default)]
    host: Option<String>,
}

async fn schedule_add(
    State(s): State<Shared>,
    Json(form): Json<ScheduleForm>,
) -> Result<Json<Value>, UiError> {
    let every = crate::text::parse_every(form.every.trim())
        .map_err(|e| UiError(StatusCode::BAD_REQUEST, e.to_string()))?;
    let host = form.host.filter(|h| !h.is_empty());
    let added = s
        .agent
        .add_schedule(&form.message, every, host.as_deref())
        .await?;
    Ok(Json(json!({"schedule_id": added.id})))
}

async fn schedule_remove(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<Value>, UiError> {
    let id = plain_id(&id)?;
    s.agent.remove_schedule(id).await?;
    Ok(Json(json!({"removed": id})))
}

/// The updates the agent's last check found.
async fn updates(State(s): State<Shared>) -> Result<Json<Value>, UiError> {
    let list = s.agent.updates(false).await?;
    Ok(Json(
        serde_json::to_value(list).map_err(anyhow::Error::from)?,
    ))
}

/// Ask every registry now.
async fn updates_check(State(s): State<Shared>) -> Result<Json<Value>, UiError> {
    let list = s.agent.updates(true).await?;
    Ok(Json(
        serde_json::to_value(list).map_err(anyhow::Error::from)?,
    ))
}

/// Open an update request for one container; its approval is decided on
/// the approvals page, from its claims, like any other.
async fn update_propose(
    State(s): State<Shared>,
    Path(container): Path<String>,
) -> Result<Json<Value>, UiError> {
    let name_ok = !container.is_empty()
        && container.len() <= 128
        && container
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-@".contains(&b));
    if !name_ok {
        return Err(bad("not a container name"));
    }
    let req = s
        .agent
        .create(
            &format!("update {container}"),
            drydock_vocab::RequestOptions {
                container: Some(container.clone()),
                update: true,
                ..Default::default()
            },
        )
        .await?;
    Ok(Json(json!({"request_id": req.id})))
}

fn claims_digest(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Each pending approval, decoded by this process from the claims a person
/// would sign (never from the agent's prose).
async fn approvals(State(s): State<Shared>) -> Result<Json<Value>, UiError> {
    let now = unix_now();
    let pending = s.agent.approvals().await?;
    let out: Vec<Value> = pending
        .iter()
        .map(|p| match claims::decode(&p.approval, None) {
            Ok((c, bytes)) => json!({
                "approval_id": c.approval_id,
                "request_id": c.request_id,
                "action": c.action.as_str(),
                "container_name": c.container_name.trim_start_matches('/'),
                "container_id": c.container_id,
                // A rollback's images, from the claims themselves.
                "from_image_id": c.from_image_id,
                "image_id": c.image_id,
                // An update's tag, the digest it pulls and the version
                // it runs now.
                "update": c.update,
                // A Swarm service's write: the service, its spec version
                // and images.
                "service": c.service,
                // The executor's host the approval is for (none before hosts).
                "host": c.host,
                "issued_at": c.issued_at,
                "issued": describe_time(c.issued_at, now),
                "issued_ahead": c.issued_at > now,
                "expires_at": c.expires_at,
                "expires": describe_time(c.expires_at, now),
                "message": p.message,
                "claims_sha256": claims_digest(&bytes),
                // Who has signed, and how many more must, where the
                // executor asks for more than one approver.
                "signed_by": p.approval.signers(),
                "required": p.approval.required.max(1),
            }),
            Err(e) => json!({"error": format!("undecodable approval: {e:#}")}),
        })
        .collect();
    Ok(Json(json!({"approvals": out, "now": now})))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    /// sha256 of the claims the page showed.
    claims_sha256: String,
}

async fn approve(
    State(s): State<Shared>,
    Path(id): Path<String>,
    Json(body): Json<ApproveBody>,
) -> Result<Json<Value>, UiError> {
    let id = plain_id(&id)?;
    let pending = approve::pending(&s.agent, id)
        .await?
        .ok_or_else(|| UiError(StatusCode::NOT_FOUND, format!("no pending approval {id}")))?;
    let (claims, bytes) = claims::decode(&pending.approval, None)?;
    if claims_digest(&bytes) != body.claims_sha256 {
        return Err(UiError(
            StatusCode::CONFLICT,
            "the approval changed since the page showed it: reload and read it again".into(),
        ));
    }
    let signed = approve::sign(&s.agent, &s.cfg, &claims, &bytes).await?;
    let missing = approve::still_missing(&signed, id).unwrap_or(0);
    Ok(Json(
        json!({"approved": id, "request_id": claims.request_id, "missing": missing}),
    ))
}

async fn reject(State(s): State<Shared>, Path(id): Path<String>) -> Result<Json<Value>, UiError> {
    let id = plain_id(&id)?;
    s.agent.reject(id).await?;
    Ok(Json(json!({"rejected": id})))
}

async fn grants(State(s): State<Shared>) -> Result<Json<Value>, UiError> {
    let list = s.agent.grants().await?;
    let now = unix_now();
    let rows: Vec<Value> = list
        .grants
        .iter()
        .map(|row| {
            json!({
                "grant": row.grant,
                "status": row.status,
                "described": grant::describe(&row.grant.claims, now),
            })
        })
        .collect();
    Ok(Json(json!({
        "grants": rows,
        "executor_automation_enabled": list.executor_automation_enabled,
    })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantForm {
    actions: Vec<String>,
    #[serde(default)]
    projects: Vec<String>,
    #[serde(default)]
    stacks: Vec<String>,
    #[serde(default)]
    names: Vec<String>,
    #[serde(default)]
    classes: Vec<String>,
    max: String,
    expires: String,
    /// The hours it may be used, HH:MM-HH:MM (an update grant's).
    #[serde(default)]
    window: Option<String>,
    /// The host whose executor honours it (several hosts).
    #[serde(default)]
    host: Option<String>,
}

/// Build the grant as `drydock grant create` would, keep it, and show it
/// in words; nothing is signed yet.
async fn grant_preview(
    State(s): State<Shared>,
    Json(f): Json<GrantForm>,
) -> Result<Json<Value>, UiError> {
    let args = CreateArgs {
        actions: f.actions,
        projects: f.projects,
        stacks: f.stacks,
        names: f.names,
        labels: vec![],
        classes: f.classes,
        max: f.max,
        max_total: None,
        expires: f.expires,
        window: f.window.filter(|w| !w.is_empty()),
        host: f.host.filter(|h| !h.is_empty()),
        yes: true,
    };
    let now = unix_now();
    let claims = grant::checked(&s.agent, &args, now)
        .await
        .map_err(|e| bad(format!("{e:#}")))?;
    let described = grant::describe(&claims.0, now);
    let preview = claims.0.grant_id.clone();
    if let Ok(mut previews) = s.grant_previews.lock() {
        previews.insert(preview.clone(), claims.0);
    }
    Ok(Json(
        json!({"preview": preview, "described": described, "notes": claims.1}),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantConfirm {
    preview: String,
}

async fn grant_confirm(
    State(s): State<Shared>,
    Json(c): Json<GrantConfirm>,
) -> Result<Json<Value>, UiError> {
    let claims = s
        .grant_previews
        .lock()
        .ok()
        .and_then(|mut p| p.remove(&c.preview))
        .ok_or_else(|| bad("no such grant preview: fill the form again"))?;
    grant::sign_and_store(&s.agent, &s.cfg, &claims).await?;
    Ok(Json(json!({"grant_id": claims.grant_id})))
}

async fn grant_revoke(
    State(s): State<Shared>,
    Path(id): Path<String>,
) -> Result<Json<Value>, UiError> {
    let id = plain_id(&id)?;
    let note = grant::revoke_quietly(&s.home, &s.agent, id).await?;
    Ok(Json(json!({"revoked": id, "note": note})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_in_agent_paths_are_plain() {
        assert!(plain_id("apr-0123").is_ok());
        for bad in ["", "../x", "a/b", "a?b", "a b", "%2e%2e"] {
            assert!(plain_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_console_knows_every_event_kind_and_state_from_the_vocabulary() {
        assert_eq!(
            APP_JS.matches(VOCAB_SLOT).count(),
            1,
            "one slot for the words"
        );
        let served = app_js();
        assert!(!served.contains(VOCAB_SLOT));
        for kind in EventKind::ALL {
            assert!(served.contains(&format!("\"{kind}\"")), "{kind} missing");
            // The script keeps no list of its own that could fall behind
            // (the many-word kinds are named nowhere else in it).
            if kind.as_str().contains('_') {
                assert!(
                    !APP_JS.contains(kind.as_str()),
                    "app.js names {kind} itself"
                );
            }
        }
        for state in Status::ALL {
            assert!(served.contains(&format!("\"{state}\"")), "{state} missing");
        }
    }

    #[test]
    fn the_digest_binds_the_exact_bytes() {
        assert_eq!(claims_digest(b"{}").len(), 64);
        assert_ne!(claims_digest(b"{}"), claims_digest(b"{ }"));
    }
}
