//! The agent API's OpenAPI 3.1 document, served at `/api/v1/openapi.json`
//! and kept in the repository as `docs/openapi.json` (a unit test keeps
//! the two equal). The response schemas are generated from the vocabulary's
//! own types (`drydock-vocab`, what the handlers serialise), so a field
//! added to a view is in the document at once; the operations, their
//! parameters and status codes are written here, beside the router.

use schemars::generate::{Contract, SchemaSettings};
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{json, Value};

use crate::model::{
    ContainerList, Event, ExecutorReach, FollowUpAdded, GrantAdded, GrantList, HostView, Note,
    NoteList, PendingApproval, Request, Schedule, ScheduleList, ServiceList, ServiceTaskList,
    UpdateList,
};

/// What the document says about a response.
enum Body {
    Json(Value),
    Text(&'static str),
    /// Server-sent events: the schema of one event (its fields).
    Stream(Value),
}

struct Op {
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    params: Vec<Value>,
    body: Option<Value>,
    ok: (u16, Body),
    errors: &'static [u16],
    public: bool,
}

fn of<T: JsonSchema>(g: &mut SchemaGenerator) -> Value {
    serde_json::to_value(g.subschema_for::<T>()).unwrap_or(Value::Null)
}

fn path_param(name: &str, what: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": what, "schema": {"type": "string"}})
}

fn query_param(name: &str, what: &str, schema: Value) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": what, "schema": schema})
}

fn host_param() -> Value {
    query_param(
        "host",
        "A host the agent serves (its `hosts:`); without it, the first.",
        json!({"type": "string"}),
    )
}

fn error_text(status: u16) -> &'static str {
    match status {
        400 => "The input is wrong; `detail` says what to change.",
        401 => "Missing or wrong bearer token.",
        404 => "No such request, approval, grant, note, schedule, host or service.",
        409 => "The request or approval is past this step, or the host is no Swarm manager.",
        500 => "The agent's store failed; see the agent log.",
        502 => "The executor did not answer.",
        _ => "An error.",
    }
}

fn operations(g: &mut SchemaGenerator) -> Vec<Op> {
    let id = || path_param("id", "A request id (`req-…`)");
    let approval = || path_param("id", "An approval id (`apr-…`)");
    let create = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["message"],
        "properties": {
            "message": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What is wrong, in the asker's words."},
            "container": {"type": ["string", "null"], "description": "The exact container (name or id), `NAME@HOST` on one of several hosts."},
            "diagnose_only": {"type": "boolean", "description": "Never propose a change."},
            "update": {"type": "boolean", "description": "Update the container to the image its tag names now in its registry (a message starting with `update` or `upgrade` asks the same)."},
            "utc_offset_minutes": {"type": ["integer", "null"], "minimum": -1080, "maximum": 1080, "description": "The asker's offset from UTC, for a time in the message."},
            "host": {"type": ["string", "null"], "description": "Look on this host only."}
        }
    });
    let followup = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["message"],
        "properties": {
            "message": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What the person adds: a container, a time, a suspected cause."}
        }
    });
    let approve = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["key_id", "signature"],
        "properties": {
            "key_id": {"type": "string", "description": "The approver id the executor knows the key by."},
            "signature": {"type": "string", "description": "Base64 Ed25519 signature over the approval's claims, or an SSHSIG (namespace drydock-approval) by an ssh approver key."}
        }
    });
    let grant = json!({
        "type": "object",
        "required": ["claims", "signature", "key_id"],
        "properties": {
            "claims": {"type": "string", "description": "The grant's claims, as signed (base64)."},
            "signature": {"type": "string", "description": "Base64 Ed25519 signature over the claims."},
            "key_id": {"type": "string"}
        }
    });
    let alerts = json!({
        "type": "object",
        "required": ["alerts"],
        "description": "An Alertmanager webhook message (version 4); other fields are ignored.",
        "properties": {
            "alerts": {"type": "array", "items": {"type": "object", "properties": {
                "status": {"type": "string"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "annotations": {"type": "object", "additionalProperties": {"type": "string"}}
            }}}
        }
    });
    let note = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["target", "text"],
        "properties": {
            "target": {"type": "string", "description": "A container's name, a compose `project/service`, or a Swarm service's name."},
            "text": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "The note: shown as evidence and given to a model as data, never as instructions."}
        }
    });
    let schedule = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["message", "every_secs"],
        "properties": {
            "message": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "What to look at, as a person would ask it."},
            "every_secs": {"type": "integer", "minimum": crate::schedule::MIN_EVERY_SECS, "maximum": crate::schedule::MAX_EVERY_SECS, "description": "The cadence, in seconds."},
            "host": {"type": ["string", "null"], "description": "Look on this host only."}
        }
    });
    let removed = |what: &str| json!({"type": "object", "required": [format!("{what}_id"), "removed"], "properties": {format!("{what}_id"): {"type": "string"}, "removed": {"type": "boolean"}}});
    let requests = json!({"type": "array", "items": of::<Request>(g)});
    let events = json!({"type": "array", "items": of::<Event>(g)});
    let approvals = json!({"type": "array", "items": of::<PendingApproval>(g)});
    let hosts = json!({"type": "object", "required": ["hosts"], "properties": {"hosts": {"type": "array", "items": of::<HostView>(g)}}});
    let revoked = json!({"type": "object", "required": ["grant_id", "revoked"], "properties": {"grant_id": {"type": "string"}, "revoked": {"type": "boolean"}}});
    let alerted = json!({"type": "object", "required": ["alerts"], "properties": {"alerts": {"type": "array", "items": {
        "type": "object", "required": ["alert", "detail"],
        "properties": {"alert": {"type": "string"}, "request_id": {"type": "string"}, "detail": {"type": "string"}}
    }}}});
    let notify_events: Vec<&str> = crate::model::NotifyEvent::ALL
        .iter()
        .map(|e| e.as_str())
        .collect();
    let delivery_states: Vec<&str> = crate::model::DeliveryStatus::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    let deliveries = json!({"type": "object", "required": ["deliveries"], "properties": {"deliveries": {"type": "array", "items": {
        "type": "object",
        "required": ["id", "webhook", "event", "request_id", "status", "attempts", "last_error", "created_at"],
        "properties": {
            "id": {"type": "integer"}, "webhook": {"type": "string"}, "event": {"type": "string", "enum": notify_events},
            "request_id": {"type": "string"}, "status": {"type": "string", "enum": delivery_states}, "attempts": {"type": "integer", "minimum": 0},
            "last_error": {"type": "string"}, "created_at": {"type": "string"}, "delivered_at": {"type": "string"}
        }
    }}}});
    let health = json!({"type": "object", "required": ["status"], "properties": {
        "status": {"type": "string", "enum": ["ok", "degraded"]},
        "hosts_down": {"type": "array", "items": {"type": "string"}}
    }});
    let kinds: Vec<&str> = crate::model::EventKind::ALL
        .iter()
        .map(|k| k.as_str())
        .collect();
    let sse = json!({
        "type": "object",
        "description": "One server-sent event: `event` is the kind, `id` the seq, `data` the event as JSON.",
        "required": ["event", "id", "data"],
        "properties": {
            "event": {"type": "string", "enum": kinds},
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": of::<Event>(g)}
        }
    });
    let statuses: Vec<&str> = crate::model::Status::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    vec![
        Op { method: "post", path: "/api/v1/requests", summary: "Ask: open a request (diagnose, plan, approval, execute, verify)", params: vec![], body: Some(create), ok: (201, Body::Json(of::<Request>(g))), errors: &[400, 500], public: false },
        Op { method: "get", path: "/api/v1/requests", summary: "Recent requests, newest first", params: vec![
            query_param("status", "Only requests in this state.", json!({"type": "string", "enum": statuses})),
            query_param("limit", "At most this many (default 50, at most 500).", json!({"type": "integer", "minimum": 0, "maximum": 4294967295_u64})),
            host_param(),
        ], body: None, ok: (200, Body::Json(requests)), errors: &[400, 500], public: false },
        Op { method: "get", path: "/api/v1/requests/{id}", summary: "One request", params: vec![id()], body: None, ok: (200, Body::Json(of::<Request>(g))), errors: &[404, 500], public: false },
        Op { method: "get", path: "/api/v1/requests/{id}/events", summary: "The request's events as server-sent events: the stored ones after `after` (or `Last-Event-ID`), then live ones, until `final`", params: vec![
            id(),
            query_param("after", "Replay only events after this seq.", json!({"type": "integer"})),
        ], body: None, ok: (200, Body::Stream(sse)), errors: &[400, 404, 500], public: false },
        Op { method: "get", path: "/api/v1/requests/{id}/timeline", summary: "The request's stored events as one array", params: vec![id()], body: None, ok: (200, Body::Json(events)), errors: &[404, 500], public: false },
        Op { method: "post", path: "/api/v1/requests/{id}/cancel", summary: "Cancel an unfinished request", params: vec![id()], body: None, ok: (200, Body::Json(of::<Request>(g))), errors: &[404, 409, 500], public: false },
        Op { method: "post", path: "/api/v1/requests/{id}/followups", summary: "Add a follow-up: a running request reads it at its next phase, a finished one is reopened as a new round; it approves nothing", params: vec![id()], body: Some(followup), ok: (201, Body::Json(of::<FollowUpAdded>(g))), errors: &[400, 404, 500], public: false },
        Op { method: "get", path: "/api/v1/executor", summary: "Whether the agent reaches the executor, and its policy", params: vec![host_param()], body: None, ok: (200, Body::Json(of::<ExecutorReach>(g))), errors: &[400, 404, 502], public: false },
        Op { method: "get", path: "/api/v1/hosts", summary: "Every host as last probed", params: vec![], body: None, ok: (200, Body::Json(hosts)), errors: &[], public: false },
        Op { method: "get", path: "/api/v1/containers", summary: "Containers in scope, on every host", params: vec![], body: None, ok: (200, Body::Json(of::<ContainerList>(g))), errors: &[500, 502], public: false },
        Op { method: "get", path: "/api/v1/services", summary: "Swarm services in scope", params: vec![host_param()], body: None, ok: (200, Body::Json(of::<ServiceList>(g))), errors: &[400, 404, 409, 502], public: false },
        Op { method: "get", path: "/api/v1/services/{service}/tasks", summary: "A service's tasks and the nodes they run on", params: vec![path_param("service", "A service name or id"), host_param()], body: None, ok: (200, Body::Json(of::<ServiceTaskList>(g))), errors: &[400, 404, 409, 502], public: false },
        Op { method: "get", path: "/api/v1/approvals", summary: "Pending approvals, with the claims to sign", params: vec![], body: None, ok: (200, Body::Json(approvals)), errors: &[500], public: false },
        Op { method: "post", path: "/api/v1/approvals/{id}/approve", summary: "Approve with a signature over the claims", params: vec![approval()], body: Some(approve), ok: (200, Body::Json(of::<Request>(g))), errors: &[400, 404, 409, 500], public: false },
        Op { method: "post", path: "/api/v1/approvals/{id}/reject", summary: "Reject; nothing is changed", params: vec![approval()], body: None, ok: (200, Body::Json(of::<Request>(g))), errors: &[404, 409, 500], public: false },
        Op { method: "post", path: "/api/v1/grants", summary: "Add a signed automation grant", params: vec![], body: Some(grant), ok: (201, Body::Json(of::<GrantAdded>(g))), errors: &[400, 500, 502], public: false },
        Op { method: "get", path: "/api/v1/grants", summary: "Automation grants and their status", params: vec![], body: None, ok: (200, Body::Json(of::<GrantList>(g))), errors: &[500], public: false },
        Op { method: "delete", path: "/api/v1/grants/{id}", summary: "Stop offering a grant (the executor's revocation list is what refuses it)", params: vec![path_param("id", "A grant id (`grt-…`)")], body: None, ok: (200, Body::Json(revoked)), errors: &[404, 500], public: false },
        Op { method: "post", path: "/api/v1/notes", summary: "Add an operator's note on a container or service", params: vec![], body: Some(note), ok: (201, Body::Json(of::<Note>(g))), errors: &[400, 500], public: false },
        Op { method: "get", path: "/api/v1/notes", summary: "Operators' notes, on one target or all", params: vec![
            query_param("target", "Only the notes on this target.", json!({"type": "string"})),
        ], body: None, ok: (200, Body::Json(of::<NoteList>(g))), errors: &[400, 500], public: false },
        Op { method: "delete", path: "/api/v1/notes/{id}", summary: "Remove a note", params: vec![path_param("id", "A note id (`note-…`)")], body: None, ok: (200, Body::Json(removed("note"))), errors: &[404, 500], public: false },
        Op { method: "post", path: "/api/v1/schedules", summary: "Add a schedule: a diagnose-only request on a cadence, notified when its answer changes", params: vec![], body: Some(schedule), ok: (201, Body::Json(of::<Schedule>(g))), errors: &[400, 500], public: false },
        Op { method: "get", path: "/api/v1/schedules", summary: "Schedules, with each one's last run and answer", params: vec![], body: None, ok: (200, Body::Json(of::<ScheduleList>(g))), errors: &[500], public: false },
        Op { method: "delete", path: "/api/v1/schedules/{id}", summary: "Remove a schedule", params: vec![path_param("id", "A schedule id (`sch-…`)")], body: None, ok: (200, Body::Json(removed("schedule"))), errors: &[404, 500], public: false },
        Op { method: "post", path: "/api/v1/alerts", summary: "Alertmanager webhook: open a request per firing alert that names a container", params: vec![], body: Some(alerts), ok: (200, Body::Json(alerted)), errors: &[400], public: false },
        Op { method: "get", path: "/api/v1/updates", summary: "Containers whose tag names a newer image in its registry, as the last check found them", params: vec![], body: None, ok: (200, Body::Json(of::<UpdateList>(g))), errors: &[500], public: false },
        Op { method: "post", path: "/api/v1/updates/check", summary: "Ask every registry about every container now, then list the updates found", params: vec![], body: None, ok: (200, Body::Json(of::<UpdateList>(g))), errors: &[500], public: false },
        Op { method: "get", path: "/api/v1/deliveries", summary: "The newest webhook deliveries", params: vec![], body: None, ok: (200, Body::Json(deliveries)), errors: &[500], public: false },
        Op { method: "get", path: "/api/v1/openapi.json", summary: "This document", params: vec![], body: None, ok: (200, Body::Json(json!({"type": "object"}))), errors: &[], public: false },
        Op { method: "get", path: "/metrics", summary: "Request counts by state, in the Prometheus text format", params: vec![], body: None, ok: (200, Body::Text("text/plain")), errors: &[500], public: false },
        Op { method: "get", path: "/healthz", summary: "The agent answers (no token needed); with several hosts, which are down", params: vec![], body: None, ok: (200, Body::Json(health)), errors: &[], public: true },
    ]
}

fn problem_response(status: u16) -> Value {
    json!({
        "description": error_text(status),
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    })
}

/// The whole document.
pub fn document() -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.contract = Contract::Serialize;
    settings.meta_schema = None;
    let mut g = settings.into_generator();
    let ops = operations(&mut g);
    let mut paths = serde_json::Map::new();
    for op in ops {
        let mut responses = serde_json::Map::new();
        let (status, body) = op.ok;
        responses.insert(
            status.to_string(),
            match body {
                Body::Json(schema) => json!({"description": "OK", "content": {"application/json": {"schema": schema}}}),
                Body::Text(ctype) => json!({"description": "OK", "content": {ctype: {"schema": {"type": "string"}}}}),
                Body::Stream(event) => json!({"description": "OK", "content": {"text/event-stream": {"schema": event}}}),
            },
        );
        let mut errors = op.errors.to_vec();
        if !op.public {
            errors.push(401);
        }
        for e in errors {
            responses.insert(e.to_string(), problem_response(e));
        }
        let mut operation = json!({
            "summary": op.summary,
            "operationId": format!("{} {}", op.method, op.path),
            "responses": responses,
        });
        if !op.params.is_empty() {
            operation["parameters"] = Value::Array(op.params);
        }
        if let Some(body) = op.body {
            operation["requestBody"] =
                json!({"required": true, "content": {"application/json": {"schema": body}}});
        }
        if op.public {
            operation["security"] = json!([]);
        }
        let entry = paths
            .entry(op.path.to_string())
            .or_insert_with(|| json!({}));
        entry[op.method] = operation;
    }
    let mut schemas = g.take_definitions(true);
    schemas.insert(
        "Problem".into(),
        json!({
            "description": "An RFC 9457 problem: what went wrong, and what to do.",
            "type": "object",
            "required": ["type", "title", "status", "detail"],
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer"},
                "detail": {"type": "string"}
            }
        }),
    );
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "drydock-agent",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The drydock agent's REST and SSE API: ask about a broken service, follow the request, approve or reject its writes, manage automation grants. Every route but /healthz needs the bearer token (agent.token). Errors are problem details (application/problem+json). docs/api.md describes the behaviour behind each route."
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "servers": [{"url": "http://127.0.0.1:7420", "description": "the compose and systemd layouts' default; the local layout listens on a unix socket"}],
        "security": [{"bearer": []}],
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "The agent's token (agent.token)."}}
        }
    })
}

#[cfg(test)]
mod tests {
    /// `docs/openapi.json` is the document the agent serves. After changing
    /// the API or a view: `DRYDOCK_WRITE_OPENAPI=1 cargo test -p
    /// drydock-agent openapi` writes it.
    /// (What the daemon serves is that file: `api/document.rs`.)
    #[test]
    fn the_document_in_the_repository_is_the_one_served() {
        let served = serde_json::to_string_pretty(&super::document()).unwrap() + "\n";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
        if std::env::var_os("DRYDOCK_WRITE_OPENAPI").is_some() {
            std::fs::write(&path, &served).unwrap();
        }
        let kept = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            kept == served,
            "docs/openapi.json is not the document the agent serves: run `DRYDOCK_WRITE_OPENAPI=1 cargo test -p drydock-agent openapi` and commit it"
        );
    }
}
