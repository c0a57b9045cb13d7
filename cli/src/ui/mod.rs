//! `drydock ui`: the operator's web console, served by the CLI process on
//! 127.0.0.1, where the approver key is, never by the agent. The console
//! shows what the agent says, but the claims a person approves are decoded
//! here, and signed here over exactly the bytes that were shown (the page
//! sends back their sha256).
//!
//! The boundary of the page:
//! - a one-time login token in the printed URL becomes a session cookie
//!   (HttpOnly, SameSite=Strict); without it every page, asset and API
//!   answers 401;
//! - every state-changing request carries the session's CSRF token in
//!   `X-CSRF-Token`, and a cross-site one (Origin or Sec-Fetch-Site) is
//!   refused with 403;
//! - the Host header must name this listener (no DNS rebinding);
//! - a strict Content-Security-Policy: scripts and styles from this origin
//!   only, no inline script, no third-party origin; every asset is embedded
//!   in the binary.

mod routes;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use drydock_proto::grant::GrantClaims;

use crate::client::AgentClient;
use crate::home::{CliConfig, Home};

pub const SESSION_COOKIE: &str = "drydock_ui";
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

pub struct Session {
    pub csrf: String,
}

pub struct UiState {
    pub agent: AgentClient,
    pub cfg: CliConfig,
    pub home: Home,
    /// The login token of the printed URL; taken by its first use.
    login: Mutex<Option<String>>,
    sessions: Mutex<HashMap<String, Session>>,
    /// Grants shown for confirmation, by preview id: what is signed is
    /// exactly what was shown.
    pub grant_previews: Mutex<HashMap<String, GrantClaims>>,
    /// `127.0.0.1:PORT`, the only Host this console answers.
    host: String,
}

pub type Shared = Arc<UiState>;

fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

/// Equal-length, constant-time comparison of two secrets.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn cookie_session(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == SESSION_COOKIE)
        .map(|(_, v)| v.to_string())
}

impl UiState {
    /// Take the login token: valid once.
    pub fn redeem(&self, token: &str) -> Option<(String, String)> {
        let mut login = self.login.lock().ok()?;
        let ok = login.as_deref().is_some_and(|t| same_secret(t, token));
        if !ok {
            return None;
        }
        *login = None;
        let (sid, csrf) = (random_hex(), random_hex());
        self.sessions
            .lock()
            .ok()?
            .insert(sid.clone(), Session { csrf: csrf.clone() });
        Some((sid, csrf))
    }

    pub fn csrf_of(&self, headers: &HeaderMap) -> Option<String> {
        let sid = cookie_session(headers)?;
        let sessions = self.sessions.lock().ok()?;
        sessions
            .iter()
            .find(|(k, _)| same_secret(k, &sid))
            .map(|(_, s)| s.csrf.clone())
    }

    pub fn origin(&self) -> String {
        format!("http://{}", self.host)
    }
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message.to_string(),
    )
        .into_response()
}

/// Host check, session, CSRF, then the security headers on every answer.
async fn guard(State(s): State<Shared>, request: Request, next: Next) -> Response {
    let mut response = check(&s, request, next).await;
    let h = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        h.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn check(s: &UiState, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let port = s.host.rsplit_once(':').map(|(_, p)| p).unwrap_or("");
    if host != s.host && host != format!("localhost:{port}") {
        return refuse(
            StatusCode::FORBIDDEN,
            "this console answers only at the address `drydock ui` printed",
        );
    }
    if request.uri().path() == "/login" {
        return next.run(request).await;
    }
    let Some(csrf) = s.csrf_of(headers) else {
        return refuse(
            StatusCode::UNAUTHORIZED,
            "no session: open the URL with the one-time token that `drydock ui` printed (run it again for a new one)",
        );
    };
    let method = request.method();
    if method != Method::GET && method != Method::HEAD {
        let cross_site = headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|o| o != s.origin())
            || headers
                .get("sec-fetch-site")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v != "same-origin");
        let token_ok = headers
            .get("x-csrf-token")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| same_secret(t, &csrf));
        if cross_site || !token_ok {
            return refuse(
                StatusCode::FORBIDDEN,
                "refused: a change needs this console's CSRF token and must come from its own page",
            );
        }
    }
    next.run(request).await
}

/// Serve the console until Ctrl-C. `port` 0 picks a free one.
pub async fn serve(
    home: Home,
    agent: AgentClient,
    cfg: CliConfig,
    port: u16,
    open: bool,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .with_context(|| {
            format!(
                "cannot listen on 127.0.0.1:{port} (pass another --port, or none for a free one)"
            )
        })?;
    let addr = listener.local_addr()?;
    let token = random_hex();
    let state: Shared = Arc::new(UiState {
        agent,
        cfg,
        home,
        login: Mutex::new(Some(token.clone())),
        sessions: Mutex::new(HashMap::new()),
        grant_previews: Mutex::new(HashMap::new()),
        host: addr.to_string(),
    });
    let url = format!("http://{addr}/login?token={token}");
    println!("drydock console: {url}");
    println!("(the link works once; Ctrl-C stops the console)");
    if open && has_desktop() {
        let _ = std::process::Command::new("xdg-open")
            .arg(&url)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
    }
    let app =
        routes::router(state.clone()).layer(axum::middleware::from_fn_with_state(state, guard));
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("the console's server failed")?;
    Ok(())
}

fn has_desktop() -> bool {
    std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; drydock_ui=abc; b=2"),
        );
        assert_eq!(cookie_session(&h).as_deref(), Some("abc"));
        h.insert(header::COOKIE, HeaderValue::from_static("drydock_uix=abc"));
        assert_eq!(cookie_session(&h), None);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
    }
}
