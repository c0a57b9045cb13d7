//! Follow-ups: a person's words added to a request after it was opened
//! (`drydock ask --to REQ "..."`, the console, the MCP server).
//!
//! A running request reads them at its next phase: discovery and diagnosis
//! read `Request::question()` (the message and every follow-up), so a
//! follow-up that names a container, a time or a dependency counts like the
//! first words, and a model gets each one as a user message between turns.
//! A finished request is reopened: its round is closed into
//! `earlier_rounds` and the next one starts from `observing` with fresh
//! evidence.
//!
//! A follow-up is words, never authority: it approves nothing, and a
//! request that has one never runs under an automation grant (what a grant
//! may repair is what the watcher saw, not what someone typed later).

use std::sync::Arc;

use super::{Engine, EngineError};
use crate::model::*;

/// Follow-ups one request takes; past that, ask anew.
pub const MAX_FOLLOWUPS: usize = 10;
/// The longest follow-up, in bytes (a request's message has the same cap).
pub const MAX_FOLLOWUP_LEN: usize = crate::model::MAX_MESSAGE_LEN;

impl Engine {
    /// Add a person's words to request `id`; a finished request is reopened
    /// as its next round.
    pub async fn follow_up(
        self: &Arc<Self>,
        id: &str,
        message: &str,
    ) -> Result<FollowUpAdded, EngineError> {
        let message = message.trim();
        if message.is_empty() || message.len() > MAX_FOLLOWUP_LEN {
            return Err(EngineError::InvalidFollowUp(format!(
                "a follow-up must be 1 to {MAX_FOLLOWUP_LEN} bytes of text"
            )));
        }
        let guard = self.doc_lock.lock().await;
        let mut req = self
            .store
            .get(id)?
            .ok_or_else(|| EngineError::RequestNotFound(id.into()))?;
        if req.followups.len() >= MAX_FOLLOWUPS {
            return Err(EngineError::InvalidFollowUp(format!(
                "request {id} has {MAX_FOLLOWUPS} follow-ups, the most one request takes: ask anew with `drydock ask`"
            )));
        }
        let reopened = req.status.is_terminal();
        if reopened {
            req.reopen();
        }
        let round = req.round();
        req.followups.push(FollowUp {
            message: message.into(),
            at: now_rfc3339(),
            round,
        });
        req.updated_at = now_rfc3339();
        let mut events = vec![EventPayload::Followup(FollowedUp {
            message: message.into(),
            round,
            reopened,
        })];
        if reopened {
            events.push(EventPayload::Status(StatusChanged {
                status: Status::Observing,
                message: format!("reopened by a follow-up: round {round}, from fresh evidence"),
            }));
        }
        let saved = self.store.save_events(&req, events)?;
        let seq = saved.first().map_or(0, |e| e.seq);
        for event in saved {
            let _ = self.events.send(event);
        }
        drop(guard);
        tracing::info!(request_id = id, round, reopened, "follow-up added");
        if reopened {
            self.spawn(id.to_string());
        }
        Ok(FollowUpAdded {
            seq,
            round,
            reopened,
            request: req.for_api(),
        })
    }
}
