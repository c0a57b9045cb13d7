//! HTTP checks of operator-configured endpoints only. The caller names a
//! service; the URL comes from the executor's config, so the agent cannot
//! turn the executor into a proxy for arbitrary requests (no SSRF).
//!
//! A deliberately small HTTP/1.1 client: one GET, bounded in time and size.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How much of the answer is read (status line, headers and a snippet).
const MAX_READ: usize = 8192;
const SNIPPET: usize = 512;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpTarget {
    pub host: String,
    pub port: u16,
    pub path: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{0}` is not an http:// URL with a host (https and credentials are not supported)")]
pub struct UrlError(pub String);

/// Parse `http://host[:port][/path]`.
pub fn parse_url(url: &str) -> Result<HttpTarget, UrlError> {
    let err = || UrlError(url.to_string());
    let rest = url.strip_prefix("http://").ok_or_else(err)?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty()
        || authority.contains('@')
        || path.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(err());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| err())?),
        None => (authority, 80),
    };
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._[]:".contains(&b))
    {
        return Err(err());
    }
    Ok(HttpTarget {
        host: host.to_string(),
        port,
        path: path.to_string(),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOutcome {
    pub ok: bool,
    pub status_code: u32,
    pub latency: Duration,
    pub error: String,
    pub body_snippet: String,
}

fn status_code(head: &str) -> Option<u32> {
    let line = head.lines().next()?;
    let mut parts = line.split_whitespace();
    let version = parts.next()?;
    if !version.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

/// GET the target; a 2xx answer within `timeout` is ok.
pub async fn check(target: &HttpTarget, timeout: Duration) -> HttpOutcome {
    let started = Instant::now();
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|e| format!("connect {}:{}: {e}", target.host, target.port))?;
        // One small request: send it now (the latency is measured).
        let _ = stream.set_nodelay(true);
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: drydock-executor\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            target.path, target.host
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("send: {e}"))?;
        let mut buf = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        loop {
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|e| format!("read: {e}"))?;
            if n == 0 || buf.len() >= MAX_READ {
                break;
            }
            buf.extend_from_slice(&chunk[..n.min(MAX_READ - buf.len())]);
        }
        Ok::<Vec<u8>, String>(buf)
    };
    let result = tokio::time::timeout(timeout, attempt).await;
    let latency = started.elapsed();
    let fail = |error: String| HttpOutcome {
        ok: false,
        status_code: 0,
        latency,
        error,
        body_snippet: String::new(),
    };
    let bytes = match result {
        Err(_) => return fail(format!("no answer within {timeout:?}")),
        Ok(Err(e)) => return fail(e),
        Ok(Ok(b)) => b,
    };
    let text = String::from_utf8_lossy(&bytes);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let Some(code) = status_code(head) else {
        return fail("the answer is not HTTP/1.x".into());
    };
    let snippet: String = body.chars().take(SNIPPET).collect();
    let (snippet, _) = crate::redact::shape_multiline(&snippet);
    HttpOutcome {
        ok: (200..300).contains(&code),
        status_code: code,
        latency,
        error: if (200..300).contains(&code) {
            String::new()
        } else {
            format!("HTTP {code}")
        },
        body_snippet: snippet,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_table() {
        assert_eq!(
            parse_url("http://backend:8080/health"),
            Ok(HttpTarget {
                host: "backend".into(),
                port: 8080,
                path: "/health".into()
            })
        );
        assert_eq!(
            parse_url("http://10.0.0.1").map(|t| (t.port, t.path)),
            Ok((80, "/".into()))
        );
        for bad in [
            "https://x/",
            "ftp://x",
            "http://",
            "http://u:p@x/",
            "http://x:99999/",
            "http://x/a b",
            "http://x\r\nHost: y/",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn status_lines() {
        assert_eq!(
            status_code("HTTP/1.1 503 Service Unavailable\r\nx: y"),
            Some(503)
        );
        assert_eq!(status_code("HTTP/1.0 200 OK"), Some(200));
        assert_eq!(status_code("SSH-2.0-OpenSSH"), None);
    }

    #[tokio::test]
    async fn checks_a_real_server() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            for answer in [
                "HTTP/1.1 200 OK\r\n\r\nall good token=abc",
                "HTTP/1.1 503 Nope\r\n\r\ndown",
            ] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                s.write_all(answer.as_bytes()).await.unwrap();
            }
        });
        let target = HttpTarget {
            host: "127.0.0.1".into(),
            port,
            path: "/health".into(),
        };
        let ok = check(&target, Duration::from_secs(2)).await;
        assert!(ok.ok, "{ok:?}");
        assert_eq!(ok.body_snippet, "all good token=[REDACTED]");
        let down = check(&target, Duration::from_secs(2)).await;
        assert_eq!((down.ok, down.status_code), (false, 503));
        let closed = check(
            &HttpTarget {
                host: "127.0.0.1".into(),
                port: 1,
                path: "/".into(),
            },
            Duration::from_secs(2),
        )
        .await;
        assert!(!closed.ok && closed.error.contains("connect"), "{closed:?}");
    }
}
