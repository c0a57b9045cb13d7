//! `GET /api/v1/containers`: the containers the executor lets the agent
//! see, at a glance (state, health, compose project and service), each with
//! the newest request about it, the cause that request named and the
//! restart count its inspect saw. For the
//! operator's views (MCP, console); the agent itself reads containers per
//! request, as evidence.

use std::collections::HashMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::{AppState, Problem};
use crate::model::{
    kind, ContainerList, ContainerRow, ContainerSummaryView, HostDown, LastRequest, Request,
    Restarts, COMPOSE_PROJECT_LABEL, COMPOSE_SERVICE_LABEL,
};

/// Requests looked at for each container's newest one.
const RECENT_REQUESTS: u32 = 200;

fn last_request(req: &Request) -> LastRequest {
    LastRequest {
        id: req.id.clone(),
        status: req.status,
        created_at: req.created_at.clone(),
        class: req
            .diagnosis
            .as_ref()
            .and_then(|d| d.causes.first())
            .map(|c| c.class),
        summary: req.diagnosis.as_ref().map(|d| d.summary.clone()),
    }
}

/// Docker's list has no restart count: the newest inspect drydock made of
/// the container says it, with when.
fn restarts(newest: &Request) -> Option<Restarts> {
    let e = newest
        .evidence
        .iter()
        .rev()
        .find(|e| e.get::<kind::Inspect>().is_some())?;
    Some(Restarts {
        count: e.get::<kind::Inspect>()?.restart_count,
        as_of: e.timestamp.clone(),
    })
}

/// What a container's row shows of the newest request about it.
struct Newest {
    last: LastRequest,
    restarts: Option<Restarts>,
}

fn view(c: &ContainerSummaryView, newest: Option<&Newest>) -> ContainerRow {
    ContainerRow {
        restarts: newest.and_then(|n| n.restarts.clone()),
        id: c.id.clone(),
        name: c.name.trim_start_matches('/').to_string(),
        image: c.image.clone(),
        state: c.state.clone(),
        status: c.status.clone(),
        health: c.health(),
        project: c.labels.get(COMPOSE_PROJECT_LABEL).cloned(),
        service: c.labels.get(COMPOSE_SERVICE_LABEL).cloned(),
        last_request: newest.map(|n| n.last.clone()),
        host: c.host.clone(),
    }
}

pub(super) async fn containers(State(s): State<AppState>) -> Result<Response, Problem> {
    let (list, failed) = s.engine.containers().await.map_err(|e| {
        Problem::new(
            StatusCode::BAD_GATEWAY,
            "executor unreachable",
            format!("the agent cannot list containers through the executor: {e}"),
        )
    })?;
    // SQLite and JSON work off the async workers.
    let engine = s.engine.clone();
    // Newest first: the first request seen for a container id is its
    // newest. Each is read, summed up and dropped in turn.
    let newest = tokio::task::spawn_blocking(move || {
        let mut newest: HashMap<String, Newest> = HashMap::new();
        engine
            .store()
            .each_on(None, None, RECENT_REQUESTS, |r: Request| {
                if let Some(t) = &r.target {
                    if !newest.contains_key(t.id()) {
                        newest.insert(
                            t.id().to_string(),
                            Newest {
                                last: last_request(&r),
                                restarts: restarts(&r),
                            },
                        );
                    }
                }
                Ok(())
            })
            .map(|()| newest)
    })
    .await
    .map_err(|e| {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error",
            format!("the store read did not finish: {e}"),
        )
    })?
    .map_err(crate::engine::EngineError::from)?;
    let containers = list.iter().map(|c| view(c, newest.get(&c.id))).collect();
    let unreachable = failed
        .into_iter()
        .map(|(host, e)| HostDown {
            host,
            error: e.message,
        })
        .collect();
    Ok(Json(ContainerList {
        containers,
        unreachable,
    })
    .into_response())
}
