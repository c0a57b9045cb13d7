//! The agent's domain words: the vocabulary crate, which the API serializes
//! and the CLI reads back, seen from inside the agent.

pub use drydock_vocab::*;

/// A piece of evidence read now, with a fresh id.
pub fn new_evidence(source: &str, payload: EvidencePayload) -> Evidence {
    Evidence {
        id: format!("ev-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]),
        source: source.into(),
        timestamp: now_rfc3339(),
        payload,
    }
}
