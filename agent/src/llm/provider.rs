//! The two wire APIs, both streamed: OpenAI Chat Completions (and the many
//! servers that speak it) and Anthropic Messages. One call here is one model
//! answer; retries and their notices live in `agent_loop`, which can report
//! them on the request's event stream.

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{json, Value};
use tokio::sync::watch;

use super::sse::{SseDecoder, SseEvent};
use super::{Completion, FinishReason, LlmError, Message, ToolCall, ToolSpec, Usage};
use crate::config::{LlmConfig, LlmProvider};

/// Longest error body kept (for the request's error message).
const MAX_ERROR_BODY: usize = 500;
const ANTHROPIC_VERSION: &str = "2023-06-01";
const ANTHROPIC_MAX_TOKENS: u32 = 4096;

/// The API key. Its Debug never shows it, so neither can a log line.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: String) -> ApiKey {
        ApiKey(key)
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

#[derive(Debug, Clone)]
pub struct Provider {
    kind: LlmProvider,
    http: reqwest::Client,
    base_url: String,
    pub model: String,
    key: ApiKey,
    timeout: Duration,
}

impl Provider {
    pub fn new(config: &LlmConfig, key: ApiKey) -> Result<Provider, LlmError> {
        // https to a model API uses the same ring provider as the executor
        // client.
        drydock_daemon::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| LlmError::Transport(e.to_string()))?;
        Ok(Provider {
            kind: config.provider,
            http,
            base_url: config.base_url(),
            model: config.model.clone(),
            key,
            timeout: config.timeout,
        })
    }

    /// One streamed answer. Returns `Canceled` as soon as `cancel` turns
    /// true, dropping the connection; a stream that ends before the model
    /// said why it stopped is `Truncated`, never a partial answer.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        cancel: &mut watch::Receiver<bool>,
    ) -> Result<Completion, LlmError> {
        if *cancel.borrow() {
            return Err(LlmError::Canceled);
        }
        let call = self.complete_inner(messages, tools);
        tokio::select! {
            r = tokio::time::timeout(self.timeout, call) => r.unwrap_or(Err(LlmError::Timeout(self.timeout))),
            _ = cancel.wait_for(|c| *c) => Err(LlmError::Canceled),
        }
    }

    async fn complete_inner(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<Completion, LlmError> {
        let request = match self.kind {
            LlmProvider::Openai => self
                .http
                .post(format!("{}/chat/completions", self.base_url))
                .bearer_auth(&self.key.0)
                .json(&openai_body(&self.model, messages, tools)),
            LlmProvider::Anthropic => self
                .http
                .post(format!("{}/messages", self.base_url))
                .header("x-api-key", &self.key.0)
                .header("anthropic-version", ANTHROPIC_VERSION)
                .json(&anthropic_body(&self.model, messages, tools)),
        };
        let response = request
            .send()
            .await
            .map_err(|e| LlmError::Transport(e.without_url().to_string()))?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(Duration::from_secs);
            let body = response.text().await.unwrap_or_default();
            // Some gateways echo the credential they refused; it must not
            // reach an event or a log through this message.
            let body = if self.key.0.is_empty() {
                body
            } else {
                body.replace(&self.key.0, "[api key]")
            };
            return Err(LlmError::Http {
                status: status.as_u16(),
                body: body.chars().take(MAX_ERROR_BODY).collect(),
                retry_after,
            });
        }
        let mut stream = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        let mut state = StreamState::default();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|e| LlmError::Truncated(format!("stream broke: {}", e.without_url())))?;
            for event in decoder.push(&chunk).map_err(LlmError::Protocol)? {
                if self.apply(&mut state, &event)? {
                    return state.finish();
                }
            }
        }
        if let Some(event) = decoder.finish() {
            if self.apply(&mut state, &event)? {
                return state.finish();
            }
        }
        state.finish()
    }

    /// Feed one event; true when the stream is complete.
    fn apply(&self, state: &mut StreamState, event: &SseEvent) -> Result<bool, LlmError> {
        match self.kind {
            LlmProvider::Openai => state.apply_openai(event),
            LlmProvider::Anthropic => state.apply_anthropic(event),
        }
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// What a stream has said so far. Tool calls are keyed by their index (the
/// API's, not arrival order), so interleaved fragments land in the right call.
#[derive(Debug, Default)]
struct StreamState {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    finish: Option<FinishReason>,
    usage: Usage,
    done: bool,
}

impl StreamState {
    fn apply_openai(&mut self, event: &SseEvent) -> Result<bool, LlmError> {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let v: Value = serde_json::from_str(&event.data)
            .map_err(|e| LlmError::Protocol(format!("a stream chunk is not JSON: {e}")))?;
        if let Some(err) = v.get("error") {
            return Err(LlmError::Protocol(format!("error in stream: {err}")));
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage.prompt_tokens = u["prompt_tokens"].as_u64().unwrap_or(0);
            self.usage.completion_tokens = u["completion_tokens"].as_u64().unwrap_or(0);
        }
        let Some(choice) = v["choices"].get(0) else {
            return Ok(false);
        };
        let delta = &choice["delta"];
        if let Some(t) = delta["content"].as_str() {
            self.text.push_str(t);
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (pos, c) in calls.iter().enumerate() {
                let index = c["index"].as_u64().unwrap_or(pos as u64);
                let entry = self.calls.entry(index).or_default();
                if let Some(id) = c["id"].as_str() {
                    entry.id = id.to_string();
                }
                if let Some(name) = c["function"]["name"].as_str() {
                    entry.name.push_str(name);
                }
                if let Some(args) = c["function"]["arguments"].as_str() {
                    entry.arguments.push_str(args);
                }
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish = Some(match reason {
                "tool_calls" | "function_call" => FinishReason::ToolCalls,
                "stop" => FinishReason::Stop,
                "length" => FinishReason::Length,
                other => FinishReason::Other(other.to_string()),
            });
        }
        Ok(false)
    }

    fn apply_anthropic(&mut self, event: &SseEvent) -> Result<bool, LlmError> {
        let v: Value = serde_json::from_str(&event.data)
            .map_err(|e| LlmError::Protocol(format!("a stream event is not JSON: {e}")))?;
        let kind = v["type"].as_str().or(event.event.as_deref()).unwrap_or("");
        match kind {
            "message_start" => {
                let u = &v["message"]["usage"];
                self.usage.prompt_tokens = u["input_tokens"].as_u64().unwrap_or(0)
                    + u["cache_read_input_tokens"].as_u64().unwrap_or(0)
                    + u["cache_creation_input_tokens"].as_u64().unwrap_or(0);
                self.usage.completion_tokens = u["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let index = v["index"].as_u64().unwrap_or(0);
                let block = &v["content_block"];
                if block["type"] == "tool_use" {
                    let entry = self.calls.entry(index).or_default();
                    entry.id = block["id"].as_str().unwrap_or_default().to_string();
                    entry.name = block["name"].as_str().unwrap_or_default().to_string();
                }
            }
            "content_block_delta" => {
                let index = v["index"].as_u64().unwrap_or(0);
                let delta = &v["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => self.text.push_str(delta["text"].as_str().unwrap_or("")),
                    Some("input_json_delta") => self
                        .calls
                        .entry(index)
                        .or_default()
                        .arguments
                        .push_str(delta["partial_json"].as_str().unwrap_or("")),
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(n) = v["usage"]["output_tokens"].as_u64() {
                    self.usage.completion_tokens = n;
                }
                if let Some(reason) = v["delta"]["stop_reason"].as_str() {
                    self.finish = Some(match reason {
                        "tool_use" => FinishReason::ToolCalls,
                        "end_turn" | "stop_sequence" => FinishReason::Stop,
                        "max_tokens" => FinishReason::Length,
                        other => FinishReason::Other(other.to_string()),
                    });
                }
            }
            "message_stop" => {
                self.done = true;
                return Ok(true);
            }
            "error" => {
                return Err(LlmError::Protocol(format!(
                    "error in stream: {}",
                    v["error"]
                )));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finish(self) -> Result<Completion, LlmError> {
        let Some(finish) = self.finish else {
            return Err(LlmError::Truncated(
                "the stream ended before the model said why it stopped".into(),
            ));
        };
        let tool_calls = self
            .calls
            .into_values()
            .enumerate()
            .map(|(i, c)| ToolCall {
                id: if c.id.is_empty() {
                    format!("call_{i}")
                } else {
                    c.id
                },
                name: c.name,
                arguments: c.arguments,
            })
            .collect();
        Ok(Completion {
            text: self.text,
            tool_calls,
            finish,
            usage: self.usage,
        })
    }
}

fn openai_body(model: &str, messages: &[Message], tools: &[ToolSpec]) -> Value {
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| match m {
            Message::System(t) => json!({"role": "system", "content": t}),
            Message::User(t) => json!({"role": "user", "content": t}),
            Message::Assistant { text, tool_calls } => {
                let mut v = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { json!(text) }});
                if !tool_calls.is_empty() {
                    v["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                v
            }
            Message::Tool { call_id, content, .. } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        })
        .collect();
    let tools: Vec<Value> = tools
        .iter()
        .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters, "strict": true}}))
        .collect();
    json!({
        "model": model,
        "messages": messages,
        "tools": tools,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

fn anthropic_body(model: &str, messages: &[Message], tools: &[ToolSpec]) -> Value {
    let mut system = Vec::new();
    let mut out: Vec<Value> = Vec::new();
    for m in messages {
        match m {
            Message::System(t) => system.push(t.clone()),
            Message::User(t) => out.push(json!({"role": "user", "content": t})),
            Message::Assistant { text, tool_calls } => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for c in tool_calls {
                    // The API wants an object; an unparseable argument
                    // string was never executed, so `{}` records it honestly
                    // enough for the history.
                    let input: Value = serde_json::from_str(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| json!({}));
                    blocks.push(
                        json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}),
                    );
                }
                if blocks.is_empty() {
                    blocks.push(json!({"type": "text", "text": "(no text)"}));
                }
                out.push(json!({"role": "assistant", "content": blocks}));
            }
            Message::Tool {
                call_id, content, ..
            } => {
                let block =
                    json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                // Consecutive tool results travel in one user message.
                match out.last_mut() {
                    Some(last)
                        if last["role"] == "user"
                            && last["content"]
                                .as_array()
                                .is_some_and(|a| a.iter().all(|b| b["type"] == "tool_result")) =>
                    {
                        if let Some(a) = last["content"].as_array_mut() {
                            a.push(block);
                        }
                    }
                    _ => out.push(json!({"role": "user", "content": [block]})),
                }
            }
        }
    }
    let tools: Vec<Value> = tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    json!({
        "model": model,
        "max_tokens": ANTHROPIC_MAX_TOKENS,
        "system": system.join("\n\n"),
        "messages": out,
        "tools": tools,
        "stream": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_key_never_prints() {
        let p = format!("{:?}", ApiKey::new("sk-secret".into()));
        assert!(!p.contains("sk-secret"));
    }

    #[test]
    fn anthropic_tool_results_share_one_user_message() {
        let msgs = vec![
            Message::System("s".into()),
            Message::User("u".into()),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![
                    ToolCall {
                        id: "a".into(),
                        name: "x".into(),
                        arguments: "{}".into(),
                    },
                    ToolCall {
                        id: "b".into(),
                        name: "y".into(),
                        arguments: "{bad".into(),
                    },
                ],
            },
            Message::Tool {
                call_id: "a".into(),
                name: "x".into(),
                content: "1".into(),
            },
            Message::Tool {
                call_id: "b".into(),
                name: "y".into(),
                content: "2".into(),
            },
        ];
        let body = anthropic_body("m", &msgs, &[]);
        assert_eq!(body["system"], "s");
        assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
        assert_eq!(
            body["messages"][2]["content"].as_array().map(Vec::len),
            Some(2)
        );
    }
}
