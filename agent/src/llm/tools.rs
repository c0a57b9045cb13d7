//! The model's tools. Six read the world through the executor (each answer
//! recorded as Evidence so a diagnosis can cite it); four are how the model
//! answers. None writes: an investigation is handed the executor as
//! `executor_client::Reads`, which has no write method, so no tool could
//! call one.

use std::future::Future;

use serde_json::{json, Value};

use super::ToolSpec;
use crate::model::{EventPayload, Evidence};

/// Where an investigation leaves its trace: evidence records and events on
/// the request's stream. Production: the engine's store.
pub trait Journal: Send + Sync {
    fn evidence(&self, evidence: Evidence, summary: String) -> impl Future<Output = ()> + Send;
    fn event(&self, payload: EventPayload) -> impl Future<Output = ()> + Send;
    /// Every follow-up the request has now, oldest first: one added while
    /// the model works reaches it as a user message before its next turn.
    fn followups(&self) -> Vec<String> {
        Vec::new()
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

fn container_arg() -> Value {
    json!({"type": "string", "description": "container name or id, as listed"})
}

pub use drydock_proto::FAULT_CLASSES;

pub const ANSWER_TOOLS: [&str; 4] = [
    "submit_diagnosis",
    "propose_plan",
    "answer_question",
    "ask_clarification",
];

pub fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "list_containers",
            description: "List the containers the executor lets drydock see (id, name, image, state, labels).",
            parameters: object(json!({}), &[]),
        },
        ToolSpec {
            name: "inspect_container",
            description: "Inspect one container: state, exit code, OOM flag, restarts, health, limits, networks. Env values are redacted.",
            parameters: object(json!({"container": container_arg()}), &["container"]),
        },
        ToolSpec {
            name: "container_logs",
            description: "The last lines of a container's logs, compacted (repeated lines counted, errors kept with neighbours).",
            parameters: object(
                json!({"container": container_arg(), "tail": {"type": "integer", "description": "lines, at most 500"}}),
                &["container", "tail"],
            ),
        },
        ToolSpec {
            name: "container_stats",
            description: "CPU, memory, network and pids of a running container.",
            parameters: object(json!({"container": container_arg()}), &["container"]),
        },
        ToolSpec {
            name: "disk_usage",
            description: "Where a container's disk goes: its writable layer, each mount (volume sizes the engine measures, tmpfs limits), its log driver and max-size, and the engine's totals with what is reclaimable.",
            parameters: object(json!({"container": container_arg()}), &["container"]),
        },
        ToolSpec {
            name: "container_health",
            description: "Health status, failing streak, the healthcheck's command and its last probe outputs.",
            parameters: object(json!({"container": container_arg()}), &["container"]),
        },
        ToolSpec {
            name: "read_runbook",
            description: "The operator's runbook entry for a compose service: dependencies, HTTP check, notes.",
            parameters: object(json!({"service": {"type": "string"}}), &["service"]),
        },
        ToolSpec {
            name: "submit_diagnosis",
            description: "Your diagnosis. Every cause cites evidence ids from this request.",
            parameters: object(
                json!({
                    "target": {"type": "string", "description": "the container the diagnosis is about, as listed; required when drydock chose no target"},
                    "summary": {"type": "string"},
                    "confidence": {"type": "number", "description": "0 to 1"},
                    "causes": {"type": "array", "items": object(json!({
                        "class": {"type": "string", "enum": FAULT_CLASSES},
                        "reason": {"type": "string"},
                        "confidence": {"type": "number"},
                        "evidence_ids": {"type": "array", "items": {"type": "string"}},
                    }), &["class", "reason", "confidence", "evidence_ids"])},
                }),
                &["summary", "confidence", "causes"],
            ),
        },
        ToolSpec {
            name: "propose_plan",
            description: "After submit_diagnosis: the actions you recommend (each needs a human's signed approval) and advice for what no action can fix. Steps may be empty.",
            parameters: object(
                json!({
                    "steps": {"type": "array", "items": object(json!({
                        "action": {"type": "string", "enum": ["start", "restart", "stop"]},
                        "container": container_arg(),
                        "reason": {"type": "string"},
                        "expected_effect": {"type": "string"},
                    }), &["action", "container", "reason", "expected_effect"])},
                    "advice": {"type": "array", "items": {"type": "string"}},
                }),
                &["steps", "advice"],
            ),
        },
        ToolSpec {
            name: "answer_question",
            description: "When the operator asked a question rather than for a fix: the answer, from the evidence, citing it.",
            parameters: object(
                json!({"answer": {"type": "string"}, "evidence_ids": {"type": "array", "items": {"type": "string"}}}),
                &["answer", "evidence_ids"],
            ),
        },
        ToolSpec {
            name: "ask_clarification",
            description: "When the request is ambiguous (which container? what outcome?): one short question for the operator.",
            parameters: object(json!({"question": {"type": "string"}}), &["question"]),
        },
    ]
}
