//! A request's durable event stream: each event is `{seq, request_id, ts,
//! kind, data}` on the wire, and here a kind with its typed payload.
//!
//! The list of kinds is written once, in the `events!` table below: it makes
//! the `EventKind` words, the `EventPayload` enum and the wire names
//! together, so a kind cannot exist without its payload type or its name,
//! and a consumer that matches on `EventPayload` without a wildcard fails
//! to compile when a kind is added.

use serde::de::Error as _;
use serde::ser::SerializeStruct as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::request::{
    ApprovalRecord, Candidate, Diagnosis, ExecutionRecord, LlmUsage, Plan, PlanStep,
    RequestOptions, RequestSource, Status, Target, Verification,
};

/// One entry of a request's event stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub request_id: String,
    pub ts: String,
    pub payload: EventPayload,
}

impl Event {
    pub fn kind(&self) -> EventKind {
        self.payload.kind()
    }
}

macro_rules! events {
    ($(
        $(#[$doc:meta])*
        $variant:ident($payload:ty) = $name:literal,
    )*) => {
        /// The kinds of event, by name: the SSE `event:` field and the
        /// `kind` of the JSON.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EventKind {
            $($(#[$doc])* $variant,)*
        }

        impl EventKind {
            /// Every kind, in the order of the table (and of `docs/api.md`).
            pub const ALL: &'static [EventKind] = &[$(EventKind::$variant,)*];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EventKind::$variant => $name,)*
                }
            }

            pub fn parse(name: &str) -> Option<EventKind> {
                match name {
                    $($name => Some(EventKind::$variant),)*
                    _ => None,
                }
            }
        }

        /// What an event says, by kind.
        // One event is handled at a time (saved, sent, rendered); the few
        // hundred bytes of the largest payload are not worth a box each.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum EventPayload {
            $($(#[$doc])* $variant($payload),)*
        }

        impl EventPayload {
            pub fn kind(&self) -> EventKind {
                match self {
                    $(EventPayload::$variant(_) => EventKind::$variant,)*
                }
            }

            /// The `data` of the wire form.
            pub fn data(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $(EventPayload::$variant(p) => serde_json::to_value(p),)*
                }
            }

            /// The payload of a `kind` and its `data`; an unknown kind is an
            /// error that names it.
            pub fn from_parts(kind: &str, data: Value) -> Result<EventPayload, serde_json::Error> {
                match kind {
                    $($name => serde_json::from_value(data).map(EventPayload::$variant),)*
                    other => Err(serde_json::Error::custom(format!(
                        "unknown event kind `{other}` (this build knows {})",
                        EventKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                    ))),
                }
            }
        }

        /// An event's schema names each kind's payload: the `data` of a
        /// `kind` is that kind's payload, and no other.
        impl schemars::JsonSchema for Event {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                "Event".into()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let kinds: Vec<Value> = vec![$(
                    serde_json::json!({
                        "type": "object",
                        "properties": {
                            "kind": {"const": $name},
                            "data": generator.subschema_for::<$payload>(),
                        },
                    }),
                )*];
                schemars::json_schema!({
                    "description": "One entry of a request's event stream.",
                    "type": "object",
                    "required": ["seq", "request_id", "ts", "kind", "data"],
                    "properties": {
                        "seq": {"type": "integer"},
                        "request_id": {"type": "string"},
                        "ts": {"type": "string"},
                        "kind": {"type": "string", "enum": [$($name,)*]},
                        "data": {},
                    },
                    "oneOf": kinds,
                })
            }
        }
    };
}

events! {
    /// The request was created.
    Created(Created) = "created",
    /// The state changed.
    Status(StatusChanged) = "status",
    /// The target (a container or a Swarm service) was chosen, with why.
    Target(TargetChosen) = "target",
    /// No single container matched; the candidates are listed.
    Candidates(CandidatesFound) = "candidates",
    /// An evidence record was added.
    Evidence(EvidenceAdded) = "evidence",
    /// The diagnosis.
    Diagnosis(DiagnosisMade) = "diagnosis",
    /// The plan: steps and advice.
    Plan(PlanMade) = "plan",
    /// An approval was created for a step; it carries the claims to sign.
    ApprovalRequested(ApprovalRequested) = "approval_requested",
    /// An approval was approved or rejected by a person.
    ApprovalDecided(ApprovalDecided) = "approval_decided",
    /// An approver signed an approval that needs more approvers.
    ApprovalSigned(ApprovalSigned) = "approval_signed",
    /// Approvals expired before anyone decided them.
    ApprovalExpired(ApprovalsExpired) = "approval_expired",
    /// Another request repaired the same target and verified it, so this
    /// one's unapproved plan was withdrawn.
    Superseded(Superseded) = "superseded",
    /// An automation grant authorised the plan's steps instead of a person.
    ApprovedByGrant(ApprovedByGrant) = "approved_by_grant",
    /// The executor answered a write.
    Execution(Executed) = "execution",
    /// A dependency started by the plan is ready, so the next step can run.
    DependencyReady(DependencyReady) = "dependency_ready",
    /// The verification checks and their result.
    Verification(Verified) = "verification",
    /// Verification failed; a new round begins, or the budget is used up.
    Iteration(Iteration) = "iteration",
    /// The agent restarted while the request was under way; where it resumes.
    Interrupted(StatusChanged) = "interrupted",
    /// An executor call failed and ended the request.
    Error(Message) = "error",
    /// With a model: the model answered a question; the answer is the outcome.
    Answer(Answer) = "answer",
    /// With a model: the investigation started.
    LlmStarted(LlmStarted) = "llm_started",
    /// With a model: one tool call.
    LlmTool(LlmTool) = "llm_tool",
    /// With a model: a model call was retried.
    LlmRetry(Message) = "llm_retry",
    /// With a model: the tokens the model API reported.
    LlmUsage(LlmUsage) = "llm_usage",
    /// With a model: the rules engine decides instead, and why.
    LlmFallback(Message) = "llm_fallback",
    /// A person added words to the request (`drydock ask --to`); on a
    /// finished request it opens the next round.
    Followup(FollowedUp) = "followup",
    /// After a write, the executor (or the engine behind it) did not
    /// answer: the agent waits for it, and says when it answers again.
    ExecutorWaiting(Message) = "executor_waiting",
    /// The request finished; the stream closes.
    Final(Finished) = "final",
}

impl EventKind {
    /// Whether this kind closes a request's stream.
    pub fn is_final(self) -> bool {
        self == EventKind::Final
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let data = self.payload.data().map_err(serde::ser::Error::custom)?;
        let mut out = s.serialize_struct("Event", 5)?;
        out.serialize_field("seq", &self.seq)?;
        out.serialize_field("request_id", &self.request_id)?;
        out.serialize_field("ts", &self.ts)?;
        out.serialize_field("kind", self.kind().as_str())?;
        out.serialize_field("data", &data)?;
        out.end()
    }
}

impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Event, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            seq: i64,
            request_id: String,
            ts: String,
            kind: String,
            #[serde(default)]
            data: Value,
        }
        let w = Wire::deserialize(d)?;
        let payload = EventPayload::from_parts(&w.kind, w.data)
            .map_err(|e| D::Error::custom(format!("event {} ({}): {e}", w.seq, w.kind)))?;
        Ok(Event {
            seq: w.seq,
            request_id: w.request_id,
            ts: w.ts,
            payload,
        })
    }
}

/// `created`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Created {
    pub message: String,
    pub options: RequestOptions,
    #[serde(default)]
    pub source: RequestSource,
}

/// `status` and `interrupted`: the state now, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StatusChanged {
    pub status: Status,
    pub message: String,
}

/// `target`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TargetChosen {
    pub target: Target,
    pub why: String,
}

/// `candidates`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CandidatesFound {
    pub candidates: Vec<Candidate>,
}

/// `evidence`: which record was added, with a one-line summary (the record
/// itself is in the request document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EvidenceAdded {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub source: String,
    pub summary: String,
}

/// `diagnosis`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiagnosisMade {
    pub diagnosis: Diagnosis,
}

/// `plan`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanMade {
    pub plan: Plan,
}

/// `approval_requested`: the approval (its `claims` are what a person
/// signs) and the step it is for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalRequested {
    pub approval: ApprovalRecord,
    #[serde(default)]
    pub step: Option<PlanStep>,
}

/// A person's decision on an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approved,
    Rejected,
}

impl Decision {
    pub const fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
        }
    }
}

/// `approval_decided`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalDecided {
    pub approval_id: String,
    pub decision: Decision,
    /// The approver's key id, for an approval.
    #[serde(default)]
    pub key_id: Option<String>,
}

/// `approval_signed`: one more approver signed; `missing` more are needed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalSigned {
    pub approval_id: String,
    pub key_id: String,
    pub missing: u32,
}

/// `approval_expired`: the ids of the approvals that expired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalsExpired {
    pub approvals: Vec<String>,
}

/// `superseded`: the request that repaired the target and verified it,
/// and this request's approvals it withdrew.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Superseded {
    pub by: String,
    pub approvals: Vec<String>,
}

/// `approved_by_grant`: which grant authorised which step, and the fault
/// class the grant was used for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovedByGrant {
    pub steps: Vec<GrantedStep>,
    pub class: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GrantedStep {
    pub approval_id: String,
    pub grant_id: String,
}

/// `execution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Executed {
    pub execution: ExecutionRecord,
}

/// `dependency_ready`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DependencyReady {
    pub container: String,
    pub ok: bool,
    pub message: String,
}

/// `verification`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Verified {
    pub verification: Verification,
}

/// `iteration`: rounds used so far; a message when another round begins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Iteration {
    pub iterations: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `error`, `llm_retry`, `llm_fallback`: words for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Message {
    pub message: String,
}

impl Message {
    pub fn new(message: impl Into<String>) -> Message {
        Message {
            message: message.into(),
        }
    }
}

/// `answer`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Answer {
    pub answer: String,
    pub evidence_ids: Vec<String>,
}

/// `llm_started`: the model, and the rules engine's summary it was shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LlmStarted {
    pub model: String,
    #[serde(default)]
    pub analyzer: Option<String>,
}

/// `llm_tool`: a tool the model called, with its (untrusted) arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LlmTool {
    pub tool: String,
    pub arguments: Value,
}

/// `followup`: the words, the round they count in, and whether they
/// reopened a finished request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FollowedUp {
    pub message: String,
    pub round: u32,
    pub reopened: bool,
}

/// `final`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Finished {
    pub status: Status,
    pub outcome: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_has_one_name_and_parses_back() {
        let mut names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(*k));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EventKind::ALL.len(), "a name is used twice");
    }

    #[test]
    fn the_wire_form_is_seq_request_ts_kind_data() {
        let wire = json!({
            "seq": 7, "request_id": "req-1", "ts": "2026-12-02T01:00:00.000Z",
            "kind": "approval_decided",
            "data": {"approval_id": "apr-1", "decision": "approved", "key_id": null}
        });
        let event: Event = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(event.kind(), EventKind::ApprovalDecided);
        assert_eq!(serde_json::to_value(&event).unwrap(), wire);
        let final_event: Event = serde_json::from_value(json!({
            "seq": 8, "request_id": "req-1", "ts": "t", "kind": "final",
            "data": {"status": "completed", "outcome": "web recovered"}
        }))
        .unwrap();
        assert!(final_event.kind().is_final());
    }

    #[test]
    fn an_unknown_kind_or_a_wrong_payload_is_an_error_that_says_so() {
        let err = serde_json::from_value::<Event>(
            json!({"seq": 1, "request_id": "r", "ts": "t", "kind": "teleported", "data": {}}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown event kind `teleported`"), "{err}");
        let err = serde_json::from_value::<Event>(
            json!({"seq": 2, "request_id": "r", "ts": "t", "kind": "status", "data": {"status": "asleep"}}),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("event 2 (status)"), "{err}");
    }
}
