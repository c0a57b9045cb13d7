//! Prompt size of one container's logs, compacted vs not, as the model
//! would see them (inside an untrusted-data block).
//!
//! `cargo run --release -p drydock-agent --example prompt_tokens [LINES]`
//!
//! Tokens are ESTIMATED as characters / 4 (`llm::estimate_tokens`); real
//! tokenizers differ by model, but the ratio is what matters here.

use std::time::Instant;

use drydock_agent::llm::investigate::render_evidence;
use drydock_agent::llm::untrusted::Boundary;
use drydock_agent::llm::{compact, estimate_tokens};
use drydock_agent::model::{Evidence, EvidencePayload, LogLineView, LogsView};

/// A web service's day: access logs with varying ids and latencies, a
/// periodic health line, occasional slow-query warnings, and a burst of
/// connection errors near the end.
fn synthetic_logs(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let ts = format!(
                "2026-11-29T{:02}:{:02}:{:02}.{:03}Z",
                (i / 3_600_000) % 24,
                (i / 60_000) % 60,
                (i / 1000) % 60,
                i % 1000
            );
            if i > n - 200 && i % 7 == 0 {
                format!(
                    "{ts} ERROR pool: connection to db:5432 refused (attempt {})",
                    i % 13
                )
            } else if i % 997 == 0 {
                format!(
                    "{ts} WARN slow query took {} ms: SELECT * FROM orders WHERE id = {}",
                    1000 + i % 500,
                    i
                )
            } else if i % 100 == 0 {
                format!("{ts} INFO health check ok ({} ms)", i % 9)
            } else {
                let path = [
                    "/api/orders/",
                    "/api/users/",
                    "/api/cart?item=",
                    "/static/app.js?v=",
                ][i % 4];
                let status = if i % 53 == 0 { 404 } else { 200 };
                format!(
                    "{ts} INFO GET {path}{} {status} {} ms user={}",
                    i * 31 % 100_000,
                    i % 250,
                    i % 977
                )
            }
        })
        .collect()
}

/// Worst case for deduplication: no two lines alike even with digits
/// masked, so only the error-window selection and the size cap help.
fn distinct_logs(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let word: String = format!("{i:x}")
                .chars()
                .map(|c| (b'g' + c.to_digit(16).unwrap_or(0) as u8) as char)
                .collect();
            format!("INFO processed batch {word}")
        })
        .collect()
}

fn measure(label: &str, lines: &[String]) {
    let n = lines.len();
    let boundary = Boundary::random();

    // Uncompacted: every line, in the same block.
    let started = Instant::now();
    let raw = boundary.wrap("container_logs", &lines.join("\n"));
    let raw_time = started.elapsed();

    // Compacted: exactly what the investigation sends for logs evidence.
    let evidence = Evidence {
        id: "ev-bench".into(),
        source: "ContainerLogs".into(),
        timestamp: String::new(),
        payload: EvidencePayload::Logs(LogsView {
            lines: lines
                .iter()
                .map(|t| LogLineView {
                    stream: "stdout".into(),
                    text: t.clone(),
                    ..Default::default()
                })
                .collect(),
            truncated: false,
            redactions: 0,
        }),
    };
    let started = Instant::now();
    let compacted = render_evidence(&boundary, &evidence);
    let compact_time = started.elapsed();

    let (rt, ct) = (estimate_tokens(&raw), estimate_tokens(&compacted));
    println!("== {label}: {n} log lines");
    println!(
        "uncompacted: {:>10} chars  {:>9} tokens  ({raw_time:?})",
        raw.len(),
        rt
    );
    println!(
        "compacted:   {:>10} chars  {:>9} tokens  ({compact_time:?})",
        compacted.len(),
        ct
    );
    println!("ratio:       {:.1}x smaller", rt as f64 / ct.max(1) as f64);
    if std::env::var_os("SHOW").is_some() {
        println!("\n{compacted}\n");
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100_000);
    println!(
        "tokens are estimated as chars/4 (not a real tokenizer); cap per tool answer: {} chars",
        compact::MAX_TOOL_CHARS
    );
    measure(
        "web service with a db outage at the end",
        &synthetic_logs(n),
    );
    measure("all-distinct lines (worst case)", &distinct_logs(n));
}
