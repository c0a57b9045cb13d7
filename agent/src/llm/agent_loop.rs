//! A small reusable agent loop: ask the model, run the tools it calls, feed
//! the answers back, until a tool says the work is done, the model stops,
//! the turn budget runs out, or the request is canceled.
//!
//! Guards that hold whatever the handler does:
//! - a truncated answer (`finish_reason: length`, or a stream cut after the
//!   retries) never runs any of its tool calls: they may be partial;
//! - arguments that are not a JSON object never reach the handler;
//! - at most `max_turns` model calls; retries of one call do not count;
//! - cancellation is checked before every model call and tool call, and
//!   interrupts a streaming answer or a backoff sleep at once.

use std::future::Future;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::provider::Provider;
use super::{FinishReason, LlmError, Message, ToolCall, ToolSpec, Usage};

/// What a tool call did to the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolReply {
    /// The text goes back to the model as the tool's result.
    Continue(String),
    /// The work is done; the text is the tool's result.
    Done(String),
}

/// The tools and hooks of one loop.
pub trait Handler: Send {
    /// Run one tool with arguments already parsed as a JSON object.
    fn call(&mut self, call: &ToolCall, args: Value) -> impl Future<Output = ToolReply> + Send;

    /// A notice for the human (retries, backoff); the request's event stream.
    fn notice(&mut self, text: String) -> impl Future<Output = ()> + Send;

    /// Before every model call: compaction, redaction.
    fn before_model(&mut self, _messages: &mut Vec<Message>) {}

    /// Before a tool runs; `Err(reason)` refuses it, and the reason is its
    /// result.
    fn before_tool(&mut self, _call: &ToolCall) -> Result<(), String> {
        Ok(())
    }

    /// After a tool ran, on the text the model will see.
    fn after_tool(&mut self, _call: &ToolCall, _output: &mut String) {}

    /// The model answered in plain text with no tool call. `Some(reply)`
    /// sends the reply as a user message and continues; `None` ends the loop.
    fn on_text(&mut self, _text: &str) -> Option<String> {
        None
    }
}

#[derive(Debug, Clone)]
pub struct Limits {
    pub max_turns: u32,
    pub max_retries: u32,
    /// A server's Retry-After is honoured up to this.
    pub retry_after_cap: Duration,
    /// First backoff for a 5xx or a broken connection; doubles per retry.
    pub backoff: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_turns: crate::config::DEFAULT_LLM_MAX_TURNS,
            max_retries: crate::config::DEFAULT_LLM_MAX_RETRIES,
            retry_after_cap: Duration::from_secs(30),
            backoff: Duration::from_millis(500),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// A tool returned `Done`.
    Done,
    /// The model stopped with this text and the handler did not continue.
    Text(String),
    MaxTurns,
    Canceled,
    Failed(LlmError),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub end: End,
    pub usage: Usage,
    pub turns: u32,
}

pub const TRUNCATED_REPLY: &str = "Your previous answer was cut off by the length limit, so it was discarded and none of its tool calls ran. Answer again, more briefly.";

/// Run the loop on `messages` (which keeps the whole conversation).
pub async fn run<H: Handler>(
    provider: &Provider,
    messages: &mut Vec<Message>,
    tools: &[ToolSpec],
    handler: &mut H,
    limits: &Limits,
    cancel: &mut watch::Receiver<bool>,
) -> Outcome {
    let mut usage = Usage::default();
    let mut turns = 0;
    let end = loop {
        if turns >= limits.max_turns {
            break End::MaxTurns;
        }
        if *cancel.borrow() {
            break End::Canceled;
        }
        handler.before_model(messages);
        turns += 1;
        let completion =
            match call_with_retries(provider, messages, tools, handler, limits, cancel).await {
                Ok(c) => c,
                Err(LlmError::Canceled) => break End::Canceled,
                Err(e) => break End::Failed(e),
            };
        usage.prompt_tokens += completion.usage.prompt_tokens;
        usage.completion_tokens += completion.usage.completion_tokens;
        if completion.finish == FinishReason::Length {
            messages.push(Message::Assistant {
                text: completion.text,
                tool_calls: vec![],
            });
            messages.push(Message::User(TRUNCATED_REPLY.into()));
            continue;
        }
        if completion.tool_calls.is_empty() {
            let text = completion.text.clone();
            messages.push(Message::Assistant {
                text: completion.text,
                tool_calls: vec![],
            });
            match handler.on_text(&text) {
                Some(reply) => {
                    messages.push(Message::User(reply));
                    continue;
                }
                None => break End::Text(text),
            }
        }
        messages.push(Message::Assistant {
            text: completion.text.clone(),
            tool_calls: completion.tool_calls.clone(),
        });
        let mut done = false;
        for call in &completion.tool_calls {
            // Every call gets a result, even the ones not run: the APIs
            // refuse a history with an unanswered tool call.
            let content = if done {
                "not run: the investigation already ended".to_string()
            } else if *cancel.borrow() {
                "not run: the request was canceled".to_string()
            } else if !tools.iter().any(|t| t.name == call.name) {
                format!("error: there is no tool named `{}`", call.name)
            } else {
                match serde_json::from_str::<Value>(&call.arguments) {
                    Ok(args) if args.is_object() => match handler.before_tool(call) {
                        Err(reason) => format!("refused: {reason}"),
                        Ok(()) => {
                            let reply = handler.call(call, args).await;
                            let mut text = match reply {
                                ToolReply::Continue(t) => t,
                                ToolReply::Done(t) => {
                                    done = true;
                                    t
                                }
                            };
                            handler.after_tool(call, &mut text);
                            text
                        }
                    },
                    Ok(_) => "error: the arguments must be a JSON object".to_string(),
                    Err(e) => format!(
                        "error: the arguments are not valid JSON ({e}); the tool did not run. Call it again with valid JSON."
                    ),
                }
            };
            messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content,
            });
        }
        if done {
            break End::Done;
        }
        if *cancel.borrow() {
            break End::Canceled;
        }
    };
    Outcome { end, usage, turns }
}

/// One model answer, retrying what is worth retrying: 429 after the
/// server's Retry-After (capped), 5xx and broken connections after an
/// exponential backoff; each retry is announced through `handler.notice`.
async fn call_with_retries<H: Handler>(
    provider: &Provider,
    messages: &[Message],
    tools: &[ToolSpec],
    handler: &mut H,
    limits: &Limits,
    cancel: &mut watch::Receiver<bool>,
) -> Result<super::Completion, LlmError> {
    let mut attempt = 0;
    loop {
        match provider.complete(messages, tools, cancel).await {
            Ok(c) => return Ok(c),
            Err(e) if e.is_transient() && attempt < limits.max_retries => {
                attempt += 1;
                let backoff = limits
                    .backoff
                    .saturating_mul(1 << (attempt - 1).min(10))
                    .min(limits.retry_after_cap);
                let wait = match &e {
                    LlmError::Http {
                        retry_after: Some(d),
                        ..
                    } => (*d).min(limits.retry_after_cap),
                    _ => backoff,
                };
                handler
                    .notice(format!(
                        "{e}; retry {attempt} of {} in {} ms",
                        limits.max_retries,
                        wait.as_millis()
                    ))
                    .await;
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = cancel.wait_for(|c| *c) => return Err(LlmError::Canceled),
                }
            }
            Err(e) => return Err(e),
        }
    }
}
