//! `GET /api/v1/services` and `GET /api/v1/services/{service}/tasks`: the
//! Swarm services the executor lets the agent see, their tasks and the
//! cluster's nodes, for the operator's views (console, MCP). The agent
//! itself reads them per request, as evidence.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{AppState, Problem};
use crate::executor_client::ExecutorError;

fn problem(e: ExecutorError, what: &str) -> Problem {
    match e.code {
        tonic::Code::NotFound if e.message.starts_with("no host") => {
            Problem::new(StatusCode::NOT_FOUND, "unknown host", e.message)
        }
        tonic::Code::NotFound => Problem::new(
            StatusCode::NOT_FOUND,
            "service not found",
            format!(
                "{what}: {} (a service outside the executor's scope looks missing)",
                e.message
            ),
        ),
        tonic::Code::InvalidArgument => {
            Problem::new(StatusCode::BAD_REQUEST, "bad service name", e.message)
        }
        tonic::Code::FailedPrecondition => {
            Problem::new(StatusCode::CONFLICT, "not a Swarm manager", e.message)
        }
        _ => Problem::new(
            StatusCode::BAD_GATEWAY,
            "executor unreachable",
            format!("{what} through the executor: {e}"),
        ),
    }
}

/// `?host=NAME`: the services of one of several hosts (default the first).
#[derive(serde::Deserialize)]
pub(super) struct OnHost {
    host: Option<String>,
}

pub(super) async fn services(
    State(s): State<AppState>,
    super::Q(q): super::Q<OnHost>,
) -> Result<Response, Problem> {
    let list = s
        .engine
        .service_list(q.host.as_deref())
        .await
        .map_err(|e| problem(e, "the agent cannot list services"))?;
    Ok(Json(list).into_response())
}

pub(super) async fn tasks(
    State(s): State<AppState>,
    Path(service): Path<String>,
    super::Q(q): super::Q<OnHost>,
) -> Result<Response, Problem> {
    let tasks = s
        .engine
        .service_tasks(q.host.as_deref(), &service)
        .await
        .map_err(|e| problem(e, "the agent cannot read the service's tasks"))?;
    Ok(Json(tasks).into_response())
}
