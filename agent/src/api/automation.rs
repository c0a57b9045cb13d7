//! The automation side of the API: grants (stored by the agent, enforced by
//! the executor), the Alertmanager-compatible alert intake, and the
//! notification delivery log.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::{AppState, Problem};
use crate::grants::GrantStoreError;
use crate::model::{unix_now, GrantAdded, GrantList, GrantRow, GrantStatus};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GrantBody {
    claims: String,
    signature: String,
    key_id: String,
}

pub(super) fn store_problem(e: impl std::fmt::Display) -> Problem {
    tracing::error!(error = %e, "store error");
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error",
        "the agent's store failed; see the agent log",
    )
}

/// The host a grant's claims name, read leniently (the signature is
/// checked after, against that host's approvers).
fn granted_host(claims_b64: &str) -> Option<String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(claims_b64)
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    v.get("host")?.as_str().map(str::to_string)
}

pub(super) async fn add_grant(
    State(s): State<AppState>,
    body: Result<Json<GrantBody>, axum::extract::rejection::JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body.map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid body",
            format!("{e}; expected {{\"claims\": \"<base64>\", \"signature\": \"<base64>\", \"key_id\": \"...\"}}"),
        )
    })?;
    // A grant is checked against the approvers of the host it names (the
    // executor's own `host.name`, which is the agent's name for it on
    // every host but possibly the first).
    let host = granted_host(&body.claims).filter(|h| s.engine.hosts().get(Some(h)).is_some());
    let policy = s.engine.executor_policy(host.as_deref()).await.map_err(|e| {
        Problem::new(
            StatusCode::BAD_GATEWAY,
            "executor unreachable",
            format!("a grant is checked against the executor's approvers, and the executor cannot be reached: {e}"),
        )
    })?;
    let stored = crate::grants::add(
        s.engine.store(),
        &policy,
        &body.claims,
        &body.signature,
        &body.key_id,
        unix_now(),
    )
    .map_err(|e| match e {
        GrantStoreError::Invalid(m) => Problem::new(StatusCode::BAD_REQUEST, "invalid grant", m),
        GrantStoreError::Store(e) => store_problem(e),
    })?;
    let warning = (!policy.automation_enabled).then_some(
        "the executor has automation off (automation.enabled): this grant authorises nothing until its operator turns it on",
    );
    let added = GrantAdded {
        grant: stored.record(),
        status: GrantStatus::Active,
        warning: warning.map(str::to_string),
    };
    Ok((StatusCode::CREATED, Json(added)).into_response())
}

pub(super) async fn list_grants(State(s): State<AppState>) -> Result<Response, Problem> {
    let grants = crate::grants::list(s.engine.store()).map_err(store_problem)?;
    // The executor's revocation list is what counts; without the executor,
    // show the agent's own record.
    // Every host's revocations count: asked at once, a host known to be
    // down not waited for.
    let policies = futures::future::join_all(s.engine.hosts().all().iter().map(|h| async move {
        if h.is_down() {
            return None;
        }
        h.executor.policy("req-doctor").await.ok()
    }))
    .await;
    let automation = policies
        .first()
        .and_then(|p| p.as_ref().map(|p| p.automation_enabled));
    let revoked: Vec<String> = policies
        .into_iter()
        .flatten()
        .flat_map(|p| p.revoked_grants)
        .collect();
    let now = unix_now();
    let list = GrantList {
        grants: grants
            .iter()
            .map(|g| GrantRow {
                grant: g.record(),
                status: g.status(now, &revoked),
            })
            .collect(),
        executor_automation_enabled: automation,
    };
    Ok(Json(list).into_response())
}

pub(super) async fn revoke_grant(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    match crate::grants::revoke(s.engine.store(), &id) {
        Ok(true) => Ok(Json(json!({"grant_id": id, "revoked": true})).into_response()),
        Ok(false) => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "not found",
            format!("no grant {id} in the agent"),
        )),
        Err(e) => Err(store_problem(e)),
    }
}

pub(super) async fn alerts(
    State(s): State<AppState>,
    body: axum::body::Bytes,
) -> Result<Response, Problem> {
    let batch: crate::watch::alerts::AlertBatch = serde_json::from_slice(&body).map_err(|e| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "invalid alerts",
            format!("the body is not an Alertmanager webhook message ({{\"alerts\": [...]}}): {e}"),
        )
    })?;
    let outcomes =
        crate::watch::alerts::open_from_alerts(&s.engine, s.engine.store(), &s.watch, batch).await;
    Ok(Json(json!({"alerts": outcomes})).into_response())
}

pub(super) async fn deliveries(State(s): State<AppState>) -> Result<Response, Problem> {
    let rows = crate::store::deliveries::newest(s.engine.store(), 200).map_err(store_problem)?;
    Ok(Json(json!({"deliveries": rows})).into_response())
}
