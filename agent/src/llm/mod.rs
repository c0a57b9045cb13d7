//! Model-backed investigation. The model is untrusted: everything it says is
//! data that `validate` checks before the engine acts on it, and it can only
//! reach the executor through the read-only tools in `tools`.
//!
//! Layout: `provider` speaks the two wire APIs (OpenAI Chat Completions and
//! Anthropic Messages, both streamed over SSE); `agent_loop` is the generic
//! conversation/tool loop with its guards; `untrusted` and `compact` shape
//! evidence before the model sees it; `tools` and `investigate` are
//! drydock's use of all of that.
//!
//! Architecture invariant: no tool here writes. The only way a model's idea
//! becomes an action is a validated plan step, which the engine turns into an
//! approval that a human signs and the executor checks again.

pub mod agent_loop;
pub mod compact;
pub mod investigate;
pub mod provider;
pub mod sse;
pub mod tools;
pub mod untrusted;
pub mod validate;

use serde_json::Value;

/// One message of a conversation, provider-neutral.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    System(String),
    User(String),
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        call_id: String,
        name: String,
        content: String,
    },
}

/// A tool call as the model streamed it. `arguments` is the raw JSON text:
/// it is parsed (and may be refused) only when the call is dispatched.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// A tool offered to the model, with a strict JSON schema.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    ToolCalls,
    Stop,
    /// The answer was cut by the token limit; any tool call in it is partial.
    Length,
    Other(String),
}

/// Token counts from the API's own usage fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// One complete model answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub finish: FinishReason,
    pub usage: Usage,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum LlmError {
    #[error("canceled")]
    Canceled,
    #[error("the model did not answer within {0:?}")]
    Timeout(std::time::Duration),
    /// `retry_after` is the server's Retry-After, when it sent one.
    #[error("the model API answered HTTP {status}: {body}")]
    Http {
        status: u16,
        body: String,
        retry_after: Option<std::time::Duration>,
    },
    #[error("cannot reach the model API: {0}")]
    Transport(String),
    #[error("the model's answer was cut off: {0}")]
    Truncated(String),
    #[error("the model API sent something unexpected: {0}")]
    Protocol(String),
}

impl LlmError {
    /// Worth another attempt: rate limits, server errors, network trouble,
    /// a stream cut mid-answer.
    pub fn is_transient(&self) -> bool {
        match self {
            LlmError::Http { status, .. } => *status == 429 || *status >= 500,
            LlmError::Transport(_) | LlmError::Timeout(_) | LlmError::Truncated(_) => true,
            _ => false,
        }
    }
}

/// chars/4: a rough, provider-independent token estimate (used by the
/// benchmark and for budgeting, never for accounting: accounting uses the
/// API's usage fields).
pub fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}
