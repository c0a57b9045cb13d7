//! What the agent keeps for people between requests: operators' notes on a
//! target (shown as evidence, never read as instructions) and schedules
//! (a diagnose-only look on a cadence).

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::automation::store_problem;
use super::{AppState, Problem, Q};
use crate::model::{now_rfc3339, unix_now, NoteList, Schedule, ScheduleList, MAX_MESSAGE_LEN};
use crate::schedule::{MAX_EVERY_SECS, MIN_EVERY_SECS};
use crate::store::notes::{self, NoteError};
use crate::store::schedules;

fn invalid_body(e: JsonRejection, expected: &str) -> Problem {
    Problem::new(
        StatusCode::BAD_REQUEST,
        "invalid body",
        format!("{e}; expected {expected}"),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoteBody {
    target: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NoteQuery {
    target: Option<String>,
}

pub(super) async fn add_note(
    State(s): State<AppState>,
    body: Result<Json<NoteBody>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body.map_err(|e| {
        invalid_body(
            e,
            r#"{"target": "CONTAINER or PROJECT/SERVICE", "text": "..."}"#,
        )
    })?;
    let note = notes::add(
        s.engine.store(),
        &body.target,
        &body.text,
        &now_rfc3339(),
        unix_now(),
    )
    .map_err(|e| match e {
        NoteError::Invalid(m) => Problem::new(StatusCode::BAD_REQUEST, "invalid note", m),
        NoteError::Store(e) => store_problem(e),
    })?;
    Ok((StatusCode::CREATED, Json(note)).into_response())
}

pub(super) async fn list_notes(
    State(s): State<AppState>,
    Q(q): Q<NoteQuery>,
) -> Result<Response, Problem> {
    let notes = notes::list(s.engine.store(), q.target.as_deref()).map_err(store_problem)?;
    Ok(Json(NoteList { notes }).into_response())
}

pub(super) async fn remove_note(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    match notes::remove(s.engine.store(), &id) {
        Ok(true) => Ok(Json(json!({"note_id": id, "removed": true})).into_response()),
        Ok(false) => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "not found",
            format!("no note {id} in the agent (`drydock note list` shows them)"),
        )),
        Err(e) => Err(store_problem(e)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ScheduleBody {
    message: String,
    every_secs: u64,
    #[serde(default)]
    host: Option<String>,
}

pub(super) async fn add_schedule(
    State(s): State<AppState>,
    body: Result<Json<ScheduleBody>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(body) = body
        .map_err(|e| invalid_body(e, r#"{"message": "...", "every_secs": 3600, "host": null}"#))?;
    let bad = |m: String| Problem::new(StatusCode::BAD_REQUEST, "invalid schedule", m);
    let message = body.message.trim();
    if message.is_empty() || message.len() > MAX_MESSAGE_LEN {
        return Err(bad(format!(
            "the message must be 1 to {MAX_MESSAGE_LEN} bytes: what to look at, as you would ask it"
        )));
    }
    if !(MIN_EVERY_SECS..=MAX_EVERY_SECS).contains(&body.every_secs) {
        return Err(bad(format!(
            "every_secs must be from {MIN_EVERY_SECS} (10 s) to {MAX_EVERY_SECS} (30 days), not {}",
            body.every_secs
        )));
    }
    if let Some(h) = &body.host {
        if s.engine.hosts().get(Some(h)).is_none() {
            let known: Vec<String> = s
                .engine
                .hosts()
                .all()
                .iter()
                .map(|h| h.label().to_string())
                .collect();
            return Err(bad(format!(
                "no host `{h}` in the agent's `hosts:` (it serves: {})",
                known.join(", ")
            )));
        }
    }
    let schedule = Schedule {
        id: format!("sch-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        message: message.to_string(),
        every_secs: body.every_secs,
        host: body.host,
        created_at: now_rfc3339(),
        last_run_unix: None,
        last_request_id: None,
        last_verdict: None,
    };
    if !schedules::add(s.engine.store(), &schedule).map_err(store_problem)? {
        return Err(bad(format!(
            "the agent keeps {} schedules, the most it keeps: remove one first (`drydock schedule list`)",
            schedules::MAX_SCHEDULES
        )));
    }
    Ok((StatusCode::CREATED, Json(schedule)).into_response())
}

pub(super) async fn list_schedules(State(s): State<AppState>) -> Result<Response, Problem> {
    let schedules = schedules::list(s.engine.store()).map_err(store_problem)?;
    Ok(Json(ScheduleList { schedules }).into_response())
}

pub(super) async fn remove_schedule(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    match schedules::remove(s.engine.store(), &id) {
        Ok(true) => Ok(Json(json!({"schedule_id": id, "removed": true})).into_response()),
        Ok(false) => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "not found",
            format!("no schedule {id} in the agent (`drydock schedule list` shows them)"),
        )),
        Err(e) => Err(store_problem(e)),
    }
}
