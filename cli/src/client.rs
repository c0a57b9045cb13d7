//! The agent's REST/SSE API, as the CLI uses it.

use std::time::Duration;

use anyhow::{bail, Context as _};
use drydock_vocab::{
    ContainerList, Event, FollowUpAdded, GrantList, Note, NoteList, PendingApproval, Request,
    RequestOptions, Schedule, ScheduleList, ServiceList, ServiceTaskList, Status, UpdateList,
};
use futures::StreamExt as _;
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

pub use crate::text::{is_plain_id, parse_status};

/// The longest a single call to the agent may take (event streams excepted).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// The largest answer the CLI accepts from the agent.
const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

#[derive(Clone)]
pub struct AgentClient {
    base: String,
    token: String,
    http: reqwest::Client,
    /// The unix socket, when `agent_url` names one.
    socket: Option<std::path::PathBuf>,
    /// How the daemons start in the layout `cli.yaml` names.
    layout: crate::home::Layout,
}

/// What the agent's health answer says of this CLI's access to it.
#[derive(Debug, Clone, PartialEq)]
pub enum Health {
    Serving,
    /// The agent, or its socket's permissions, refused this user: why,
    /// and what to do.
    Refused(String),
    /// No answer: why, and what to do.
    Unreachable(String),
}

/// Who may open a unix socket (its owner, group and mode, and root), and
/// who this process is.
fn who_may_open(socket: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let me = format!(
        "you are uid {} gid {}",
        nix::unistd::getuid(),
        nix::unistd::getgid()
    );
    let folder = socket.parent().unwrap_or(socket);
    match (std::fs::metadata(folder), std::fs::metadata(socket)) {
        (Ok(dir), Ok(file)) => format!(
            "its folder is uid {} gid {} mode {:o} and the socket uid {} gid {} mode {:o}, so it admits root and that group; {me}. Run the CLI as root, or as a member of gid {} with it as the primary group (`sg {} -c 'drydock …'`)",
            dir.uid(),
            dir.gid(),
            dir.mode() & 0o777,
            file.uid(),
            file.gid(),
            file.mode() & 0o777,
            file.gid(),
            file.gid()
        ),
        (Ok(dir), Err(_)) => format!(
            "its folder is uid {} gid {} mode {:o}; {me}. Run the CLI as root or as a member of gid {}",
            dir.uid(),
            dir.gid(),
            dir.mode() & 0o777,
            dir.gid()
        ),
        _ => format!("{me}. Run the CLI as root or as the agent's group"),
    }
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub struct SseFrame {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
}

/// Incremental SSE parser: feed bytes, get complete frames. It buffers
/// bytes, not text: a chunk may end inside a multi-byte character, and
/// only a whole frame is decoded.
#[derive(Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseFrame> {
        // CRLF and LF line ends alike (a CR alone never ends a line here).
        self.buf.extend(chunk.iter().filter(|b| **b != b'\r'));
        let mut frames = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let bytes: Vec<u8> = self.buf.drain(..end + 2).collect();
            let block = String::from_utf8_lossy(&bytes);
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
        let mut client = Self::connect(&cfg.agent_url, cfg.token()?, ca.as_deref())?;
        client.layout = cfg.layout;
        Ok(client)
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
        let socket = base.strip_prefix("unix:").map(std::path::PathBuf::from);
        let base = match &socket {
            Some(socket) => {
                builder = builder.unix_socket(socket.clone());
                // The host is not used on a unix socket; it names the peer.
                "http://drydock-agent".to_string()
            }
            None => base.trim_end_matches('/').to_string(),
        };
        Ok(AgentClient {
            base,
            token,
            http: builder.build()?,
            socket,
            layout: crate::home::Layout::default(),
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
        anyhow::anyhow!(self.why_unreachable(&e))
    }

    /// Why no answer came, and what to do: a socket this user may not
    /// open is said as such (with who may), not as an agent to start.
    fn why_unreachable(&self, e: &reqwest::Error) -> String {
        if let Some(closed) = self.closed_to_me() {
            return closed;
        }
        format!(
            "cannot reach the agent at {}: {e}. Is it running? Start it with {}.",
            self.socket
                .as_ref()
                .map(|s| format!("unix:{}", s.display()))
                .unwrap_or_else(|| self.base.clone()),
            self.layout.start_command()
        )
    }

    /// When the agent's unix socket is there but this user may not open
    /// it: who may, and who this is.
    fn closed_to_me(&self) -> Option<String> {
        let socket = self.socket.as_ref()?;
        match std::os::unix::net::UnixStream::connect(socket) {
            Err(io) if io.kind() == std::io::ErrorKind::PermissionDenied => Some(format!(
                "the agent's socket {} is not open to you (permission denied): {}",
                socket.display(),
                who_may_open(socket)
            )),
            _ => None,
        }
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
        self.health().await == Health::Serving
    }

    /// The agent's health answer, and when there is none or it refuses
    /// this user, why.
    pub async fn health(&self) -> Health {
        let sent = self
            .http
            .get(format!("{}/healthz", self.base))
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => Health::Serving,
            Ok(r) if r.status() == reqwest::StatusCode::FORBIDDEN => {
                let body: Value = r.json().await.unwrap_or(Value::Null);
                Health::Refused(format!(
                    "the agent answers but refuses this user: {}",
                    body.get("detail")
                        .and_then(Value::as_str)
                        .unwrap_or("no detail")
                ))
            }
            Ok(r) => Health::Unreachable(format!("the agent answered {}", r.status())),
            Err(e) => match self.closed_to_me() {
                Some(closed) => Health::Refused(closed),
                None => Health::Unreachable(e.to_string()),
            },
        }
    }

    /// An answer of the agent as a vocabulary type. An answer of another
    /// shape means the CLI and the agent are of different releases.
    fn read<T: DeserializeOwned>(path: &str, answer: Value) -> anyhow::Result<T> {
        serde_json::from_value(answer).with_context(|| {
            format!(
                "the agent's answer to {path} is not what this drydock reads; are the CLI and the agent the same release?"
            )
        })
    }

    pub async fn get_as<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        Self::read(path, self.get(path).await?)
    }

    pub async fn post_as<T: DeserializeOwned>(&self, path: &str, body: Value) -> anyhow::Result<T> {
        Self::read(path, self.post(path, body).await?)
    }

    /// Open a request; the asker's clock is this machine's.
    pub async fn create(&self, message: &str, options: RequestOptions) -> anyhow::Result<Request> {
        self.post_as(
            "/api/v1/requests",
            json!({
                "message": message,
                "container": options.container,
                "diagnose_only": options.diagnose_only,
                "update": options.update,
                "utc_offset_minutes": Some(local_utc_offset_minutes()),
                "host": options.host,
            }),
        )
        .await
    }

    /// The updates found (`check`: ask every registry first).
    pub async fn updates(&self, check: bool) -> anyhow::Result<UpdateList> {
        if check {
            self.post_as("/api/v1/updates/check", json!({})).await
        } else {
            self.get_as("/api/v1/updates").await
        }
    }

    /// One request. `id` must be a plain id (`is_plain_id`).
    pub async fn request(&self, id: &str) -> anyhow::Result<Request> {
        self.get_as(&format!("/api/v1/requests/{id}")).await
    }

    /// The newest requests, optionally only those in one state.
    pub async fn requests(
        &self,
        status: Option<Status>,
        limit: Option<u32>,
    ) -> anyhow::Result<Vec<Request>> {
        self.requests_on(status, None, limit).await
    }

    /// The newest requests on one host (`None`: every host).
    pub async fn requests_on(
        &self,
        status: Option<Status>,
        host: Option<&str>,
        limit: Option<u32>,
    ) -> anyhow::Result<Vec<Request>> {
        let mut query = Vec::new();
        if let Some(s) = status {
            query.push(format!("status={}", s.as_str()));
        }
        if let Some(h) = host {
            if !drydock_proto::approval::is_host_name(h) {
                anyhow::bail!(
                    "`{}` is not a host name (lowercase letters, digits, `-` and `.`); `drydock doctor` lists the agent's hosts",
                    crate::text::safe(h)
                );
            }
            query.push(format!("host={h}"));
        }
        if let Some(n) = limit {
            query.push(format!("limit={n}"));
        }
        let path = match query.is_empty() {
            true => "/api/v1/requests".to_string(),
            false => format!("/api/v1/requests?{}", query.join("&")),
        };
        self.get_as(&path).await
    }

    /// A request's stored events, oldest first.
    pub async fn timeline(&self, id: &str) -> anyhow::Result<Vec<Event>> {
        self.get_as(&format!("/api/v1/requests/{id}/timeline"))
            .await
    }

    /// Add a follow-up to request `id` (a plain id); a finished request is
    /// reopened as its next round.
    pub async fn follow_up(&self, id: &str, message: &str) -> anyhow::Result<FollowUpAdded> {
        self.post_as(
            &format!("/api/v1/requests/{id}/followups"),
            json!({ "message": message }),
        )
        .await
    }

    pub async fn cancel(&self, id: &str) -> anyhow::Result<Request> {
        self.post_as(&format!("/api/v1/requests/{id}/cancel"), json!({}))
            .await
    }

    /// The pending approvals of every request.
    pub async fn approvals(&self) -> anyhow::Result<Vec<PendingApproval>> {
        self.get_as("/api/v1/approvals").await
    }

    /// Hand the agent a person's signature over an approval's claims.
    pub async fn approve(
        &self,
        approval_id: &str,
        key_id: &str,
        signature_b64: &str,
    ) -> anyhow::Result<Request> {
        self.post_as(
            &format!("/api/v1/approvals/{approval_id}/approve"),
            json!({"key_id": key_id, "signature": signature_b64}),
        )
        .await
    }

    pub async fn reject(&self, approval_id: &str) -> anyhow::Result<Request> {
        self.post_as(
            &format!("/api/v1/approvals/{approval_id}/reject"),
            json!({}),
        )
        .await
    }

    /// The notes on `target`, or every note.
    pub async fn notes(&self, target: Option<&str>) -> anyhow::Result<NoteList> {
        let query = target
            .map(|t| format!("?target={}", query_value(t)))
            .unwrap_or_default();
        self.get_as(&format!("/api/v1/notes{query}")).await
    }

    pub async fn add_note(&self, target: &str, text: &str) -> anyhow::Result<Note> {
        self.post_as("/api/v1/notes", json!({"target": target, "text": text}))
            .await
    }

    pub async fn remove_note(&self, id: &str) -> anyhow::Result<()> {
        self.delete(&format!("/api/v1/notes/{id}")).await.map(drop)
    }

    pub async fn schedules(&self) -> anyhow::Result<ScheduleList> {
        self.get_as("/api/v1/schedules").await
    }

    pub async fn add_schedule(
        &self,
        message: &str,
        every_secs: u64,
        host: Option<&str>,
    ) -> anyhow::Result<Schedule> {
        self.post_as(
            "/api/v1/schedules",
            json!({"message": message, "every_secs": every_secs, "host": host}),
        )
        .await
    }

    pub async fn remove_schedule(&self, id: &str) -> anyhow::Result<()> {
        self.delete(&format!("/api/v1/schedules/{id}"))
            .await
            .map(drop)
    }

    pub async fn grants(&self) -> anyhow::Result<GrantList> {
        self.get_as("/api/v1/grants").await
    }

    pub async fn containers(&self) -> anyhow::Result<ContainerList> {
        self.get_as("/api/v1/containers").await
    }

    /// The Swarm services in scope and the nodes (or why there are none).
    pub async fn services(&self) -> anyhow::Result<ServiceList> {
        self.get_as("/api/v1/services").await
    }

    /// One Swarm service (name or id) and its tasks.
    pub async fn service_tasks(&self, service: &str) -> anyhow::Result<ServiceTaskList> {
        if !crate::text::is_service_ref(service) {
            bail!(
                "`{}` is not a Swarm service name or id (letters, digits, `_`, `.` and `-`; at most 63)",
                crate::text::safe(&service.chars().take(64).collect::<String>())
            );
        }
        self.get_as(&format!("/api/v1/services/{service}/tasks"))
            .await
    }

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

    /// Follow a request's event stream until its `final` event, calling
    /// `on_event` for each (it returns whether to go on). Reconnects with
    /// `Last-Event-ID` if the connection drops, so no event is missed or
    /// shown twice.
    pub async fn follow<F, Fut>(
        &self,
        request_id: &str,
        after: Option<i64>,
        mut on_event: F,
    ) -> anyhow::Result<()>
    where
        F: FnMut(Event) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<bool>>,
    {
        let mut last_id: Option<String> = after.map(|seq| seq.to_string());
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
                for frame in parser.push(&chunk) {
                    if frame.id.is_some() {
                        last_id = frame.id.clone();
                    }
                    let event: Event = serde_json::from_str(&frame.data).with_context(|| {
                        format!("the agent sent an event this drydock cannot read ({}); are the CLI and the agent the same release?", frame.event)
                    })?;
                    let last = event.kind().is_final();
                    if !on_event(event).await? || last {
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
        assert!(p.push(b"id: 1\nevent: status\ndata: {\"a\"").is_empty());
        let frames = p.push(b":1}\n\n: keep-alive\n\nid: 2\r\nevent: final\r\ndata: x\r\n\r\n");
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

    #[test]
    fn a_character_split_between_chunks_arrives_whole() {
        let text = "data: {\"summary\":\"web \u{2014} db 挂了\"}\n\n".as_bytes();
        let cut = text.iter().position(|b| *b == 0xe2).unwrap() + 1;
        let mut p = SseParser::default();
        assert!(p.push(&text[..cut]).is_empty());
        let frames = p.push(&text[cut..]);
        assert_eq!(frames[0].data, "{\"summary\":\"web \u{2014} db 挂了\"}");
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

/// A query string value, percent-encoded (RFC 3986: all but unreserved
/// characters).
fn query_value(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
