//! "Why did search restart at 3 am?": a container that died and was
//! started again says nothing of it in its state, and its newest log lines
//! are of the run after it. The executor's log lines carry the engine's
//! times and `until` reads what came before a moment (every refusal
//! audited); the agent finds the death in the engine's events and explains
//! it from the lines before it, at the time the question names, on the
//! asker's clock.

use std::time::Duration;

use drydock::fixture::FIXTURE_IMAGE;
use drydock_e2e::*;
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

const BEFORE: &str = "Error: connect ECONNREFUSED 10.99.0.7:5432";
const AFTER: &str = "WARN read ECONNRESET while warming the cache, retrying";

/// Crashes on its first boot with `BEFORE`, is started again by its
/// restart policy and stays up saying `AFTER`.
fn restarted(test: &str) -> Container {
    let c = Container::run(
        test,
        &[
            "--restart",
            "on-failure",
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--line",
            "INFO connecting to the database",
            "--stderr-line",
            BEFORE,
            "--after-restart-line",
            AFTER,
        ],
    );
    c.wait_for("restarted and running", Duration::from_secs(60), |c| {
        c.inspect("{{.RestartCount}} {{.State.Status}}") == "1 running"
            && String::from_utf8_lossy(&docker(&["logs", &c.name]).stdout).contains(AFTER)
    });
    c
}

/// The `die` event's time, in unix nanoseconds, as the engine recorded it.
/// Asked again until it shows: the docker CLI turns `--until 0s` into a
/// whole second, so an event of the current second is left out at first.
fn died_at(c: &Container) -> i64 {
    let id = c.id();
    let started = std::time::Instant::now();
    loop {
        let out = docker(&[
            "events",
            "--since",
            "10m",
            "--until",
            "0s",
            "--filter",
            &format!("container={id}"),
            "--format",
            "{{.TimeNano}} {{.Action}}",
        ]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let die = text
            .lines()
            .filter_map(|l| l.strip_suffix(" die"))
            .next_back()
            .and_then(|t| t.trim().parse().ok());
        if let Some(t) = die {
            return t;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no die event of {id}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn logs_req(request_id: &str, container: &str, since: i64, until: i64) -> pb::LogsRequest {
    pb::LogsRequest {
        request_id: request_id.into(),
        container: container.into(),
        since,
        until,
        tail: 50,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_carry_their_times_and_until_reads_what_came_before_a_death() {
    let dd = Drydock::init();
    let c = restarted("past-logs");
    let died = died_at(&c);
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut client = exec.agent_client(&dd).await;

    let now = exec_now();
    let all = client
        .container_logs(logs_req("req-past-1", &c.name, 0, 0))
        .await
        .expect("logs")
        .into_inner();
    let texts: Vec<&str> = all.lines.iter().map(|l| l.text.trim_end()).collect();
    assert!(
        texts.contains(&BEFORE) && texts.contains(&AFTER),
        "{texts:?}"
    );
    for l in &all.lines {
        let secs = l.time_unix_nanos / 1_000_000_000;
        assert!(
            (now - 600..=now + 5).contains(&secs),
            "every line has the engine's time: {l:?}"
        );
        assert!(
            !l.text.starts_with("20"),
            "the timestamp is taken off: {l:?}"
        );
    }
    let before = all
        .lines
        .iter()
        .find(|l| l.text.trim_end() == BEFORE)
        .expect("before");
    let after = all
        .lines
        .iter()
        .find(|l| l.text.trim_end() == AFTER)
        .expect("after");
    assert!(
        before.time_unix_nanos <= died && died < after.time_unix_nanos,
        "{before:?} {died} {after:?}"
    );

    // Up to the death's second: the run before it, and at most what the
    // run after it said within that same second.
    let died_secs = died / 1_000_000_000;
    let until = client
        .container_logs(logs_req("req-past-2", &c.name, died_secs - 3600, died_secs))
        .await
        .expect("logs until")
        .into_inner();
    let texts: Vec<&str> = until.lines.iter().map(|l| l.text.trim_end()).collect();
    assert!(texts.contains(&BEFORE), "{texts:?}");
    assert!(
        until
            .lines
            .iter()
            .all(|l| l.time_unix_nanos < (died_secs + 1) * 1_000_000_000),
        "{until:?}"
    );
    // The tail is taken of the window, not of the whole log.
    let one = client
        .container_logs(pb::LogsRequest {
            tail: 1,
            ..logs_req("req-past-3", &c.name, died_secs - 7200, died_secs - 3600)
        })
        .await
        .expect("logs until an hour before")
        .into_inner();
    assert!(
        one.lines.is_empty(),
        "nothing was logged an hour before: {one:?}"
    );

    let refusals = [
        (
            logs_req("req-past-4", &c.name, 0, -1),
            "until -1 must be a unix time",
        ),
        (
            logs_req("req-past-5", &c.name, now, now - 60),
            "is before since",
        ),
        (
            logs_req("req-past-6", &c.name, 0, now + 2 * 86_400),
            "must be a unix time",
        ),
        // The engine sends the whole window: it must be bounded.
        (
            logs_req("req-past-7", &c.name, 0, died_secs),
            "needs a since at most 24 hours before it",
        ),
        (
            logs_req("req-past-8", &c.name, died_secs - 2 * 86_400, died_secs),
            "needs a since at most 24 hours before it",
        ),
    ];
    for (r, needle) in refusals {
        let id = r.request_id.clone();
        let err = client.container_logs(r).await.expect_err(&id);
        assert_eq!(err.code(), Code::InvalidArgument, "{id}: {err:?}");
        assert!(err.message().contains(needle), "{id}: {}", err.message());
    }
    let rows: Vec<Value> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| {
            r["action"] == "logs"
                && r["request_id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("req-past-"))
        })
        .collect();
    assert_eq!(rows.len(), 8, "every call audited, refusals too: {rows:#?}");
    assert_eq!(
        rows.iter().filter(|r| r["decision"] == "allowed").count(),
        3,
        "{rows:#?}"
    );
    assert!(
        rows.iter()
            .any(|r| r["input"].as_str().is_some_and(|i| i.contains("until=-1"))),
        "the bound asked for is in the audit: {rows:#?}"
    );
    drop(exec);
}

fn exec_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
}

fn cause_about_the_death(req: &Value) -> Value {
    req["diagnosis"]["causes"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|c| {
                    c["reason"]
                        .as_str()
                        .is_some_and(|r| r.contains(" died at "))
                })
                .cloned()
        })
        .unwrap_or_else(|| panic!("no cause about the death: {req:#}"))
}

#[test]
fn why_did_it_restart_is_answered_from_what_it_logged_before_it_died() {
    let dd = Drydock::init();
    let c = restarted("past-ask");
    let died_secs = died_at(&c) / 1_000_000_000;
    dd.up();

    let (code, req) = dd.ask_json(&[&format!("why did {} restart?", c.name)]);
    assert_eq!(code, 0, "{req:#}");
    assert_eq!(req["status"], "completed", "{req:#}");
    assert!(req["plan"].is_null(), "a question gets no plan: {req:#}");
    // Nothing is wrong now, and that is said first.
    assert_eq!(req["diagnosis"]["causes"][0]["class"], "healthy", "{req:#}");
    let past = cause_about_the_death(&req);
    assert_eq!(past["class"], "dependency_unavailable", "{past:#}");
    let reason = past["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains(BEFORE),
        "the line before the death: {reason}"
    );
    assert!(
        !reason.contains("ECONNRESET"),
        "not the run after it: {reason}"
    );
    assert!(reason.contains("(exit 1)"), "{reason}");
    assert!(
        reason.contains("its restart policy (`on-failure`) started it again"),
        "{reason}"
    );
    let death_ev = req["evidence"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["type"] == "death_logs"))
        .unwrap_or_else(|| panic!("no death_logs evidence: {req:#}"));
    assert!(
        past["evidence_ids"]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|i| *i == death_ev["id"])),
        "the cause cites the lines before the death: {past:#}"
    );
    let summary = req["diagnosis"]["summary"].as_str().unwrap_or("");
    assert!(summary.contains(" died at "), "{summary}");

    // The same question with the time it happened, on a clock three hours
    // east of UTC (TZ is the CLI's): that death, said on both clocks.
    let local = died_secs + 3 * 3600;
    let hm = format!(
        "{:02}:{:02}",
        local.rem_euclid(86_400) / 3600,
        local.rem_euclid(3600) / 60
    );
    let question = format!("why did {} restart at {hm}?", c.name);
    let out = dd.cli_with_env(&["ask", "--json", &question], &[("TZ", "UTC-3")]);
    let req: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let reason = cause_about_the_death(&req)["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let utc = format!(
        "{:02}:{:02}",
        died_secs.rem_euclid(86_400) / 3600,
        died_secs.rem_euclid(3600) / 60
    );
    assert!(
        reason.starts_with(&format!(
            "Of its deaths, the one nearest the time asked ({hm} at UTC+03:00 ({utc} UTC))"
        )),
        "{reason}"
    );
    assert!(reason.contains(BEFORE), "{reason}");

    // `docker restart` is someone's stop, not a crash, and is named.
    let restarted_by_hand = Container::run("past-restart", &[FIXTURE_IMAGE, "sleep"]);
    docker_ok(&["restart", "-t", "1", &restarted_by_hand.name]);
    let (code, req) = dd.ask_json(&[&format!("why did {} restart?", restarted_by_hand.name)]);
    assert_eq!(code, 0, "{req:#}");
    let past = cause_about_the_death(&req);
    assert_eq!(past["class"], "stopped", "{past:#}");
    let reason = past["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("someone stopped it") && reason.contains("by `docker restart`"),
        "{reason}"
    );
}

/// A TTY's log is one raw stream that the client cuts at newlines, not at
/// the engine's messages: a line longer than Docker's 16 KiB message comes
/// in two, and a timestamp of the second part would land inside the line,
/// splitting a key so that no pattern sees it. So a TTY's lines have no
/// time, the line comes whole, and the key is withheld, with `until` too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tty_line_split_by_the_engine_is_redacted_whole_and_has_no_time() {
    let dd = Drydock::init();
    let long_line = format!("{} AKIAIOSFODNN7EXAMPLE done", "x".repeat(16 * 1024 - 10));
    let c = Container::run(
        "past-tty",
        &[
            "-t",
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "0",
            "--line",
            &long_line,
        ],
    );
    c.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut client = exec.agent_client(&dd).await;
    let now = exec_now();
    for (id, since, until) in [("req-tty-1", 0, 0), ("req-tty-2", now - 600, now)] {
        let logs = client
            .container_logs(logs_req(id, &c.name, since, until))
            .await
            .expect("logs")
            .into_inner();
        let text = format!("{logs:?}");
        // Where a leak would be, not 16 KiB of x.
        let excerpt = |at: usize| {
            text.get(at.saturating_sub(80)..(at + 80).min(text.len()))
                .unwrap_or("")
        };
        for half in ["AKIAIOSF", "ODNN7EXAMPLE"] {
            if let Some(at) = text.find(half) {
                panic!("{id}: {half} leaked: …{}…", excerpt(at));
            }
        }
        assert!(
            logs.lines.iter().any(|l| l.text.starts_with("xxxx")),
            "{id}: the line is there: {} lines",
            logs.lines.len()
        );
        for l in &logs.lines {
            assert_eq!(l.time_unix_nanos, 0, "{id}: a TTY line has no time");
            if let Some(at) = l.text.find("Z ") {
                panic!(
                    "{id}: a timestamp inside a line: …{}…",
                    &l.text[at.saturating_sub(40)..]
                );
            }
        }
    }
    drop(exec);
}

/// A follow-up that names a time picks that death: the question alone is
/// answered about the newest death (a `docker restart` by hand), the
/// follow-up's time about the crash before it. The minute named is the
/// crash's, which is nearer the crash than any later death (the engine
/// keeps only its newest events, so the two deaths are not far apart).
#[test]
fn a_follow_up_with_a_time_picks_that_death() {
    let dd = Drydock::init();
    let c = restarted("past-followup");
    let crashed_at = died_at(&c);
    let crashed = crashed_at / 1_000_000_000;
    docker_ok(&["restart", "-t", "1", &c.name]);
    c.wait_for("died again", Duration::from_secs(20), |_| {
        died_at(&c) > crashed_at
    });
    dd.up();

    let (_, req) = dd.ask_json(&[&format!("why did {} restart?", c.name)]);
    let newest = cause_about_the_death(&req);
    assert_eq!(newest["class"], "stopped", "the newest death: {newest:#}");
    let id = req["id"].as_str().expect("id").to_string();

    let hm = format!(
        "{:02}:{:02}",
        crashed.rem_euclid(86_400) / 3600,
        crashed.rem_euclid(3600) / 60
    );
    let out = dd.cli_with_env(
        &[
            "ask",
            "--json",
            "--to",
            &id,
            &format!("no, the one at {hm}"),
        ],
        &[("TZ", "UTC")],
    );
    let again: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(again["id"], req["id"], "the same request, a new round");
    assert_eq!(again["status"], "completed", "{again:#}");
    let picked = cause_about_the_death(&again);
    assert_eq!(picked["class"], "dependency_unavailable", "{picked:#}");
    let reason = picked["reason"].as_str().unwrap_or("");
    assert!(
        reason.starts_with(&format!(
            "Of its deaths, the one nearest the time asked ({hm}"
        )),
        "{reason}"
    );
    assert!(reason.contains(BEFORE), "{reason}");
    assert_eq!(
        again["earlier_rounds"][0]["diagnosis"]["causes"], req["diagnosis"]["causes"],
        "the first round's answer is kept"
    );
}
