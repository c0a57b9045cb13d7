//! The agent's REST/SSE API, as the CLI uses it.

use std::time::Duration;

use anyhow::{bail, Context as _};
use futures::StreamExt as _;
use serde_json::{json, Value};

/// An id as the agent makes them (`req-…`, `apr-…`): safe in a path.
pub fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
}

/// A request state as a query value (`waiting_approval`): lowercase and
/// `_` only; the agent itself says whether the state exists.
pub fn is_state_word(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

/// The longest a single call to the agent may take (event streams excepted).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest answer the CLI accepts from the agent.
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

#[derive(Clone)]
pub struct AgentClient {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseFrame {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
}

/// Incremental SSE parser: feed bytes, get complete frames.
#[derive(Default)]
pub struct SseParser {
    buf: String,
}

impl SseParser {
    pub fn push(&mut self, chunk: &str) -> Vec<SseFrame> {
        self.buf.push_str(&chunk.replace("\r\n", "\n"));
        let mut frames = Vec::new();
        while let Some(end) = self.buf.find("\n\n") {
            let block: String = self.buf.drain(..end + 2).collect();
            let mut frame = SseFrame {
                id: None,
                event: "message".into(),
                data: String::new(),
            };
            let mut has_data = false;
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    frame.id = Some(v.trim_start().to_string());
                } else if let Some(v) = line.strip_prefix("event:") {
                    frame.event = v.trim_start().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    if has_data {
                        frame.data.push('\n');
                    }
                    frame.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                    has_data = true;
                }
            }
            if has_data {
                frames.push(frame);
            }
        }
        frames
    }
}

impl AgentClient {
    /// The agent `cli.yaml` names, with its token and (for https) the CA
    /// the agent's certificate is pinned to.
    pub fn from_config(cfg: &crate::home::CliConfig) -> anyhow::Result<AgentClient> {
        let ca = match &cfg.agent_ca {
            Some(path) => Some(
                std::fs::read(path)
                    .with_context(|| format!("agent_ca: cannot read {}", path.display()))?,
            ),
            None => None,
        };
        Self::connect(&cfg.agent_url, cfg.token()?, ca.as_deref())
    }

    /// `base` is `unix:/path/to/agent.sock` (the local layout) or an
    /// `http://` URL (an agent that listens on TCP by explicit choice).
    pub fn new(base: &str, token: String) -> anyhow::Result<AgentClient> {
        Self::connect(base, token, None)
    }

    /// As `new`; an `https://` base needs `ca_pem`, the only CA its
    /// certificate may chain to (drydock's own), so no other CA's
    /// certificate for that name is accepted.
    pub fn connect(
        base: &str,
        token: String,
        ca_pem: Option<&[u8]>,
    ) -> anyhow::Result<AgentClient> {
        drydock_daemon::tls::install_crypto_provider();
        let mut builder = reqwest::Client::builder().connect_timeout(Duration::from_secs(5));
        if base.starts_with("https://") {
            let ca = ca_pem.context(
                "agent_url is https: set agent_ca in cli.yaml to drydock's CA (pki/ca.crt) to pin the agent's certificate",
            )?;
            let cert =
                reqwest::Certificate::from_pem(ca).context("agent_ca is not a PEM certificate")?;
            builder = builder.tls_certs_only([cert]).https_only(true);
        }
        let base = match base.strip_prefix("unix:") {
            Some(socket) => {
                builder = builder.unix_socket(std::path::PathBuf::from(socket));
                // The host is not used on a unix socket; it names the peer.
                "http://drydock-agent".to_string()
            }
            None => base.trim_end_matches('/').to_string(),
        };
        Ok(AgentClient {
            base,
            token,
            http: builder.build()?,
        })
    }

    async fn check(mut resp: reqwest::Response) -> anyhow::Result<Value> {
        let status = resp.status();
        let mut bytes = Vec::new();
        while let Some(chunk) = resp.chunk().await.context("the agent's answer broke off")? {
            if bytes.len() + chunk.len() > MAX_ANSWER_BYTES {
                bail!("the agent's answer is larger than {MAX_ANSWER_BYTES} bytes; refusing it");
            }
            bytes.extend_from_slice(&chunk);
        }
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if !status.is_success() {
            let detail = body
                .get("detail")
                .and_then(Value::as_str)
                .unwrap_or("no detail");
            bail!("agent answered {status}: {detail}");
        }
        Ok(body)
    }

    fn unreachable(&self, e: reqwest::Error) -> anyhow::Error {
        anyhow::anyhow!(
            "cannot reach the agent at {}: {e}. Is it running? Start it with `drydock up`.",
            self.base
        )
    }

    /// One call to the agent, bounded in time (`CALL_TIMEOUT`) and size
    /// (`MAX_ANSWER_BYTES`): a stalled or hostile agent cannot hang the CLI
    /// or fill its memory.
    async fn call(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let resp = req
            .bearer_auth(&self.token)
            .timeout(CALL_TIMEOUT)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        Self::check(resp).await
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(self.http.get(format!("{}{path}", self.base)))
            .await
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.call(self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.call(self.http.delete(format!("{}{path}", self.base)))
            .await
    }

    /// The agent's clock, from the `Date` header of its health answer.
    pub async fn server_time(&self) -> Option<std::time::SystemTime> {
        let resp = self
            .http
            .get(format!("{}/healthz", self.base))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()?;
        let date = resp.headers().get(reqwest::header::DATE)?.to_str().ok()?;
        humantime::parse_rfc3339_weak(date)
            .ok()
            .or_else(|| httpdate(date))
    }

    pub async fn healthy(&self) -> bool {
        matches!(self.http.get(format!("{}/healthz", self.base)).timeout(Duration::from_secs(2)).send().await, Ok(r) if r.status().is_success())
    }

    pub async fn create(
        &self,
        message: &str,
        container: Option<&str>,
        diagnose_only: bool,
    ) -> anyhow::Result<Value> {
        self.post(
            "/api/v1/requests",
            json!({
                "message": message,
                "container": container,
                "diagnose_only": diagnose_only,
                "utc_offset_minutes": local_utc_offset_minutes(),
            }),
        )
        .await
    }

    /// Follow a request's event stream until its `final` event, calling
    /// `on_event` for each. Reconnects with `Last-Event-ID` if the connection
    /// drops, so no event is missed or shown twice.
    /// A request's event stream as the agent sends it, from after
    /// `last_event_id` when given (the console passes its browser's
    /// `Last-Event-ID` through).
    pub async fn event_stream(
        &self,
        request_id: &str,
        last_event_id: Option<&str>,
    ) -> anyhow::Result<reqwest::Response> {
        let mut req = self
            .http
            .get(format!("{}/api/v1/requests/{request_id}/events", self.base))
            .bearer_auth(&self.token);
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        let resp = req.send().await.map_err(|e| self.unreachable(e))?;
        if !resp.status().is_success() {
            bail!("agent answered {} for the event stream", resp.status());
        }
        Ok(resp)
    }

    pub async fn follow<F, Fut>(&self, request_id: &str, mut on_event: F) -> anyhow::Result<()>
    where
        F: FnMut(Value) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<bool>>,
    {
        let mut last_id: Option<String> = None;
        let mut failures = 0;
        loop {
            let mut req = self
                .http
                .get(format!("{}/api/v1/requests/{request_id}/events", self.base))
                .bearer_auth(&self.token);
            if let Some(id) = &last_id {
                req = req.header("Last-Event-ID", id.as_str());
            }
            let resp = match req.send().await {
                Ok(r) if r.status().is_success() => r,
                Ok(r) => bail!("agent answered {} for the event stream", r.status()),
                Err(e) if failures < 5 => {
                    failures += 1;
                    eprintln!("event stream interrupted ({e}); reconnecting");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                Err(e) => return Err(self.unreachable(e)),
            };
            let mut parser = SseParser::default();
            let mut body = resp.bytes_stream();
            while let Some(chunk) = body.next().await {
                let chunk = match chunk {
                    Ok(c) => c,
                    Err(_) => break,
                };
                for frame in parser.push(&String::from_utf8_lossy(&chunk)) {
                    if frame.id.is_some() {
                        last_id = frame.id.clone();
                    }
                    let value: Value = serde_json::from_str(&frame.data)
                        .context("agent sent an event that is not JSON")?;
                    if !on_event(value).await? || frame.event == "final" {
                        return Ok(());
                    }
                }
            }
            failures += 1;
            if failures > 5 {
                bail!("the event stream kept closing before the request finished");
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
}

/// This machine's offset from UTC now, in minutes (`TZ`, else
/// `/etc/localtime`): a time in a question is the operator's.
pub fn local_utc_offset_minutes() -> i32 {
    use chrono::Offset as _;
    chrono::Local::now().offset().fix().local_minus_utc() / 60
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_frames_split_across_chunks() {
        let mut p = SseParser::default();
        assert!(p.push("id: 1\nevent: status\ndata: {\"a\"").is_empty());
        let frames = p.push(":1}\n\n: keep-alive\n\nid: 2\r\nevent: final\r\ndata: x\r\n\r\n");
        assert_eq!(frames.len(), 2);
        assert_eq!(
            frames[0],
            SseFrame {
                id: Some("1".into()),
                event: "status".into(),
                data: "{\"a\":1}".into()
            }
        );
        assert_eq!(frames[1].event, "final");
    }
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP servers
/// send in `Date`.
fn httpdate(text: &str) -> Option<std::time::SystemTime> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, clock, "GMT"] = parts.as_slice() else {
        return None;
    };
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| m == month)? + 1;
    let iso = format!("{year}-{month:02}-{day:0>2}T{clock}Z");
    humantime::parse_rfc3339(&iso).ok()
}

#[cfg(test)]
mod date_tests {
    #[test]
    fn http_dates_parse() {
        let t = super::httpdate("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs(),
            784_111_777
        );
        assert!(super::httpdate("yesterday").is_none());
    }
}
