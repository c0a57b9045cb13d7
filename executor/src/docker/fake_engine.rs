//! A stand-in Docker engine on a unix socket, for the adapter's unit tests
//! (the one engine double of this crate; everything else tests against a
//! real engine). It answers each HTTP request on a kept-alive connection
//! with what a test's `answer` gives for the request's head, and counts
//! the connections it accepted.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A reply: its content type and body.
pub(crate) type Reply = (&'static str, String);
/// What the engine answers to a request, given its head (request line and
/// headers).
pub(crate) type Answer =
    Arc<dyn Fn(String) -> Pin<Box<dyn Future<Output = Reply> + Send>> + Send + Sync>;

pub(crate) struct FakeEngine {
    /// The socket, as the adapter's endpoint names it: `unix://...`.
    pub endpoint: String,
    pub accepted: Arc<AtomicUsize>,
}

/// Start an engine on `dir/engine.sock` and wait until it listens.
pub(crate) async fn start(dir: &Path, answer: Answer) -> FakeEngine {
    let path: PathBuf = dir.join("engine.sock");
    let accepted = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::UnixListener::bind(&path).expect("bind the fake engine's socket");
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 1024];
                loop {
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_string();
                        buf.drain(..end + 4);
                        let (content_type, body) = answer(head).await;
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if conn.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    while !path.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    FakeEngine {
        endpoint: format!("unix://{}", path.display()),
        accepted,
    }
}
