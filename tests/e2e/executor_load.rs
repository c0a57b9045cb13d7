//! A flood of refused calls from a certificate of the drydock CA that is not
//! allowed (the health-check identity), at 64 in flight, while the agent's
//! identity keeps making legitimate calls. The executor must keep answering
//! the agent, its memory must stay bounded, and the audit log must grow only
//! as the rate limit allows, not by a row per refused call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drydock_e2e::*;
use drydock_proto::pb;
use tonic::Code;

const FLOOD: usize = 10_000;
const IN_FLIGHT: usize = 64;
const RATE: u64 = 50;
const BURST: u64 = 50;
/// Rate-limit refusals written one by one per identity and 10 s window
/// (`REFUSAL_ROWS_PER_WINDOW` in executor/src/ratelimit.rs).
const REFUSAL_ROWS_PER_WINDOW: usize = 10;

type Codes = std::collections::BTreeMap<String, usize>;
type Client = pb::executor_client::ExecutorClient<tonic::transport::Channel>;

/// `total` GetPolicy calls from `client`, `IN_FLIGHT` at a time; each task
/// returns how many calls ended with which code.
fn flood(client: &Client, total: usize) -> Vec<tokio::task::JoinHandle<Codes>> {
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..IN_FLIGHT {
        let mut client = client.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            let mut codes = Codes::new();
            while next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total {
                let code = match client
                    .get_policy(pb::GetPolicyRequest {
                        request_id: "req-flood".into(),
                    })
                    .await
                {
                    Ok(_) => Code::Ok,
                    Err(s) => s.code(),
                };
                *codes.entry(format!("{code:?}")).or_default() += 1;
            }
            codes
        }));
    }
    tasks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_refused_calls_leaves_the_executor_answering() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace(
            "limits:\n",
            &format!("limits:\n  calls_per_second: {RATE}\n  burst: {BURST}\n"),
        )
    });
    let ca = read(&dd.home.path("pki/ca.crt"));
    let agent = exec.agent_client(&dd).await;
    let intruder = grpc::connect(
        exec.port,
        &ca,
        Some((
            &read(&dd.home.path("pki/healthcheck.crt")),
            &read(&dd.home.path("pki/healthcheck.key")),
        )),
    )
    .await
    .expect("intruder connects");
    let pid = exec.pid();
    let rows_before = dd.audit_rows().len();
    let rss_before = rss_kib(pid);
    let started = Instant::now();

    let flood = flood(&intruder, FLOOD);
    // Meanwhile the agent keeps asking, and is answered.
    let mut latencies = Vec::new();
    let mut agent_client = agent.clone();
    while !flood.iter().all(|h| h.is_finished()) {
        let t = Instant::now();
        let answer = agent_client
            .get_policy(pb::GetPolicyRequest {
                request_id: "req-legit".into(),
            })
            .await;
        assert!(
            answer.is_ok(),
            "the agent is answered during the flood: {answer:?}"
        );
        latencies.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut codes = Codes::new();
    for h in flood {
        for (k, v) in h.await.expect("flood task") {
            *codes.entry(k).or_default() += v;
        }
    }
    let elapsed = started.elapsed();
    assert_eq!(codes.values().sum::<usize>(), FLOOD, "{codes:?}");
    assert!(
        !codes.contains_key("Ok"),
        "no refused identity got an answer: {codes:?}"
    );
    assert!(
        codes.get("ResourceExhausted").copied().unwrap_or(0) > FLOOD / 2,
        "most of the flood was rate limited: {codes:?}"
    );

    // Every rate-limited refusal is in the chain, one by one or counted in
    // a summary row, without the intruder calling again: the executor
    // flushes the counts every window.
    let limited = codes.get("ResourceExhausted").copied().unwrap_or(0) as u64;
    let accounted = |rows: &[serde_json::Value]| -> (u64, u64) {
        let mut one_by_one = 0;
        let mut summarized = 0;
        for r in rows.iter().filter(|r| r["code"] == "ResourceExhausted") {
            if r["action"] == "rate_limit" {
                summarized += r["reason"]
                    .as_str()
                    .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                    .unwrap_or(0);
            } else if r["caller"] == "drydock-healthcheck" {
                one_by_one += 1;
            }
        }
        (one_by_one, summarized)
    };
    let flush_deadline = Instant::now() + Duration::from_secs(25);
    let rows = loop {
        let rows = dd.audit_rows();
        let (one_by_one, summarized) = accounted(&rows);
        if one_by_one + summarized >= limited || Instant::now() > flush_deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let (one_by_one, summarized) = accounted(&rows);
    assert_eq!(
        one_by_one + summarized,
        limited,
        "{limited} rate-limited refusals: {one_by_one} written one by one, {summarized} in summaries"
    );
    let grown = rows.len() - rows_before;
    let secs = elapsed.as_secs() + 1;
    // Admitted calls (refused later, each audited) are bounded by the rate,
    // rate-limit refusals by 10 rows per 10 s window, plus summaries.
    let bound = (BURST + RATE * secs) as usize
        + REFUSAL_ROWS_PER_WINDOW * (secs as usize / 10 + 2)
        + latencies.len()
        + 16;
    assert!(
        grown <= bound,
        "audit grew by {grown} rows for {FLOOD} refused calls in {elapsed:?} (bound {bound})"
    );
    assert!(
        summarized > 0,
        "counted refusals are summarized in the chain"
    );
    assert!(dd.audit_verify().status.success());
    let rss_after = rss_kib(pid);
    assert!(
        rss_after < rss_before + 64 * 1024,
        "executor memory grew from {rss_before} KiB to {rss_after} KiB"
    );
    latencies.sort();
    let p = |q: f64| latencies[((latencies.len() as f64 * q) as usize).min(latencies.len() - 1)];
    eprintln!(
        "load: {FLOOD} refused calls at {IN_FLIGHT} in flight in {elapsed:?} ({:.0}/s); {codes:?}; \
         legitimate GetPolicy during the flood: n={} median={:?} p99={:?} max={:?}; \
         audit +{grown} rows ({summarized} refusals summarized); RSS {rss_before} -> {rss_after} KiB",
        FLOOD as f64 / elapsed.as_secs_f64(),
        latencies.len(),
        p(0.5),
        p(0.99),
        latencies.last().copied().unwrap_or_default()
    );
}

/// With a small cap, a flood of audited refusals (no rate limit in the way:
/// every call is a row) rotates the store into segments, deletes the oldest
/// beyond `keep_segments`, keeps the files within the bound, and the chain
/// still verifies, signed checkpoints included, across what is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_store_rotates_within_its_cap_and_stays_verifiable() {
    const CAP: u64 = 64 << 10;
    const KEEP: u64 = 2;
    const CALLS: usize = 4_000;
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace(
            "audit:\n",
            &format!("audit:\n  max_size: {CAP}\n  keep_segments: {KEEP}\n"),
        )
        .replace(
            "limits:\n",
            "limits:\n  calls_per_second: 100000\n  burst: 100000\n",
        )
    });
    let ca = read(&dd.home.path("pki/ca.crt"));
    let intruder = grpc::connect(
        exec.port,
        &ca,
        Some((
            &read(&dd.home.path("pki/healthcheck.crt")),
            &read(&dd.home.path("pki/healthcheck.key")),
        )),
    )
    .await
    .expect("intruder connects");
    let mut codes = Codes::new();
    for h in flood(&intruder, CALLS) {
        for (k, v) in h.await.expect("flood task") {
            *codes.entry(k).or_default() += v;
        }
    }
    assert_eq!(
        codes.get("Unauthenticated").copied(),
        Some(CALLS),
        "every call was refused one by one (so each is a row): {codes:?}"
    );
    exec.agent_client(&dd)
        .await
        .get_policy(pb::GetPolicyRequest {
            request_id: "req-legit".into(),
        })
        .await
        .expect("the agent is answered");

    let state = dd.home.path("state");
    let files = || {
        let (mut total, mut segments) = (0, 0);
        for e in std::fs::read_dir(&state).expect("state folder").flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("audit.db") {
                total += e.metadata().map(|m| m.len()).unwrap_or(0);
                segments += u64::from(name.starts_with("audit.db.seg."));
            }
        }
        (total, segments)
    };
    // Reads' rows (these refusals are reads) are committed just after their
    // answers, and rotation follows the commit: let the flusher finish.
    let settle = std::time::Instant::now();
    let (mut total, mut segments) = files();
    while segments != KEEP && settle.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        (total, segments) = files();
    }
    assert_eq!(segments, KEEP, "segments kept");
    let bound = (KEEP + 2) * CAP + (32 << 10);
    assert!(
        total <= bound,
        "audit files take {total} bytes after {CALLS} audited refusals (bound {bound})"
    );
    let rows = dd.audit_rows();
    assert!(
        rows.iter().any(|r| r["decision"] == "retention"),
        "the chain records the deleted segments"
    );
    let verify = dd.cli(&["audit", "verify"]);
    let said = String::from_utf8_lossy(&verify.stdout);
    assert!(verify.status.success(), "{said}");
    assert!(
        said.contains("deleted by retention") && said.contains("signed checkpoints"),
        "{said}"
    );
    eprintln!(
        "rotation: {CALLS} audited refusals; {} rows kept from seq {}; {segments} segments; {total} bytes on disk (bound {bound})",
        rows.len(),
        rows[0]["seq"]
    );
}
