//! `GET /api/v1/updates` (what the checks found) and
//! `POST /api/v1/updates/check` (check every container now).

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{AppState, Problem};

fn store_failed(e: crate::store::StoreError) -> Problem {
    tracing::error!(error = %e, "store error");
    Problem::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error",
        "the agent's store failed; see the agent log",
    )
}

pub(super) async fn list(State(s): State<AppState>) -> Result<Response, Problem> {
    let found = s.updates.list().await.map_err(store_failed)?;
    Ok(Json(found).into_response())
}

pub(super) async fn check(State(s): State<AppState>) -> Result<Response, Problem> {
    let found = s.updates.check().await.map_err(store_failed)?;
    Ok(Json(found).into_response())
}
