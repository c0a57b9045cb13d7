//! A scripted model server for the agent's tests: real HTTP and SSE on
//! 127.0.0.1, answering each call with the next scripted reply and
//! recording what it was sent. Speaks OpenAI Chat Completions and the
//! Anthropic Messages path alike (the script decides the wire format).
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};

// ---- The scripted model server. ----

pub enum Reply {
    /// 200 with these SSE chunks, each sent separately, then the body ends.
    Sse(Vec<String>),
    /// 200, these chunks, then the stream stays open forever.
    Hang(Vec<String>),
    Status(u16, Option<u64>),
    /// An error status whose body echoes the Authorization header.
    Echo(u16),
    /// Decided from the request body (to cite evidence ids the agent made up).
    With(fn(&Value) -> Reply),
}

#[derive(Default)]
pub struct Script {
    pub replies: Mutex<VecDeque<Reply>>,
    pub bodies: Mutex<Vec<Value>>,
    pub headers: Mutex<Vec<HeaderMap>>,
}

impl Script {
    pub fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }
    /// Every message text the model was sent in call `n`.
    pub fn sent(&self, n: usize) -> String {
        self.bodies()[n]["messages"].to_string()
    }
}

async fn answer(
    State(s): State<Arc<Script>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    s.bodies.lock().unwrap().push(body);
    s.headers.lock().unwrap().push(headers);
    let mut reply = s.replies.lock().unwrap().pop_front();
    if let Some(Reply::With(f)) = reply {
        reply = Some(f(&s
            .bodies
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()));
    }
    if let Some(Reply::Echo(code)) = reply {
        let auth = s
            .headers
            .lock()
            .unwrap()
            .last()
            .and_then(|h| h.get("authorization").cloned());
        let body = format!("invalid credential {:?}", auth);
        return (StatusCode::from_u16(code).unwrap(), body).into_response();
    }
    let (chunks, hang) = match reply {
        None => return (StatusCode::INTERNAL_SERVER_ERROR, "script exhausted").into_response(),
        Some(Reply::Status(code, retry_after)) => {
            let mut r = (
                StatusCode::from_u16(code).unwrap(),
                "{\"error\":{\"message\":\"scripted\"}}",
            )
                .into_response();
            if let Some(s) = retry_after {
                r.headers_mut()
                    .insert("retry-after", s.to_string().parse().unwrap());
            }
            return r;
        }
        Some(Reply::Sse(c)) => (c, false),
        Some(Reply::Hang(c)) => (c, true),
        Some(Reply::With(_)) | Some(Reply::Echo(_)) => unreachable!("handled above"),
    };
    let stream = async_stream::stream! {
        for c in chunks {
            yield Ok::<String, Infallible>(c);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if hang {
            futures::future::pending::<()>().await;
        }
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

pub async fn serve(replies: Vec<Reply>) -> (String, Arc<Script>) {
    let script = Arc::new(Script {
        replies: Mutex::new(replies.into()),
        ..Default::default()
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(answer))
        .route("/v1/messages", post(answer))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), script)
}

// ---- OpenAI stream chunks. ----

pub fn data(v: Value) -> String {
    format!("data: {v}\n\n")
}
pub fn usage(prompt: u64, completion: u64) -> String {
    data(
        json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}),
    )
}
pub const DONE: &str = "data: [DONE]\n\n";

/// One turn of tool calls, their argument strings cut into 6-character
/// fragments and interleaved across calls, as real streams do.
pub fn tool_turn(calls: &[(&str, &str, String)], finish: &str, u: (u64, u64)) -> Reply {
    let mut out = Vec::new();
    for (i, (id, name, _)) in calls.iter().enumerate() {
        out.push(data(json!({"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": i, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}}]})));
    }
    let frags: Vec<Vec<String>> = calls
        .iter()
        .map(|(_, _, a)| {
            a.chars()
                .collect::<Vec<_>>()
                .chunks(6)
                .map(|c| c.iter().collect())
                .collect()
        })
        .collect();
    let longest = frags.iter().map(Vec::len).max().unwrap_or(0);
    for k in 0..longest {
        for (i, f) in frags.iter().enumerate() {
            if let Some(piece) = f.get(k) {
                out.push(data(json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": piece}}]}}]})));
            }
        }
    }
    out.push(data(
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    ));
    out.push(usage(u.0, u.1));
    out.push(DONE.into());
    Reply::Sse(out)
}

pub fn call(id: &str, name: &str, args: Value) -> Reply {
    tool_turn(&[(id, name, args.to_string())], "tool_calls", (100, 10))
}

pub fn diagnosis_call(class: &str) -> Reply {
    call(
        "d1",
        "submit_diagnosis",
        json!({"summary": "web lost its database", "confidence": 0.8, "causes": [{"class": class, "reason": "connection refused to db:5432", "confidence": 0.8, "evidence_ids": ["ev-logs", "ev-ins"]}]}),
    )
}

pub fn plan_call(action: &str, container: &str) -> Reply {
    call(
        "p1",
        "propose_plan",
        json!({"steps": [{"action": action, "container": container, "reason": "r", "expected_effect": "e"}], "advice": []}),
    )
}

/// The evidence ids the agent showed the model in this request body.
pub fn evidence_ids(body: &Value) -> Vec<String> {
    let text = body["messages"].to_string();
    text.match_indices("evidence ev-")
        .map(|(i, _)| text[i + 9..i + 9 + 15].to_string())
        .collect()
}
