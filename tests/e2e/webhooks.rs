//! A local webhook receiver for the tests of notifications: every POST's
//! headers and body, in order.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// One received POST: its headers (lower-case names) and body.
pub type Received = (BTreeMap<String, String>, String);

/// A local webhook receiver: every POST's headers and body, in order.
pub struct Receiver {
    pub url: String,
    pub got: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub fn start() -> Receiver {
        Self::failing_first(0)
    }

    /// Answers 500 to the first `fail` POSTs (they are still recorded).
    pub fn failing_first(fail: usize) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        let got = Arc::new(Mutex::new(Vec::new()));
        let sink = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream);
                let mut headers = BTreeMap::new();
                let mut line = String::new();
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                loop {
                    line.clear();
                    if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                }
                let len: usize = headers
                    .get("content-length")
                    .and_then(|l| l.parse().ok())
                    .unwrap_or(0);
                let mut body = vec![0; len];
                let _ = reader.read_exact(&mut body);
                sink.lock()
                    .expect("sink")
                    .push((headers, String::from_utf8_lossy(&body).into_owned()));
                let n = sink.lock().expect("sink").len();
                // One request per connection, said so: a client that reused
                // the connection would fail an attempt this receiver never saw.
                let mut stream = reader.into_inner();
                let answer: &[u8] = if n <= fail {
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                } else {
                    b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                };
                let _ = stream.write_all(answer);
            }
        });
        Receiver { url, got }
    }

    pub fn events(&self) -> Vec<Value> {
        self.got
            .lock()
            .expect("got")
            .iter()
            .map(|(_, b)| serde_json::from_str(b).unwrap_or(Value::Null))
            .collect()
    }

    pub fn wait_for(&self, event: &str, request_id: &str, timeout: Duration) -> Value {
        let started = Instant::now();
        loop {
            if let Some(e) = self
                .events()
                .into_iter()
                .find(|e| e["event"] == event && e["request_id"] == request_id)
            {
                return e;
            }
            assert!(
                started.elapsed() < timeout,
                "no `{event}` webhook for {request_id} within {timeout:?}; got {:#?}",
                self.events()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
