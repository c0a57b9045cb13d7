//! What the rules make of a container's history: engine events, past
//! deaths, questions about them, and changes.

use super::*;

fn run_with_past_death(
    c: &ContainerView,
    events: &[crate::model::ContainerEvent],
    asked: Option<AskedTime>,
    before: &[&str],
) -> Finding {
    let logs = logs_of(&["INFO listening on :8080", "WARN read ECONNRESET, retrying"]);
    let die = events::past_death(events, c.running, asked.map(|a| a.unix)).expect("a past death");
    let death = crate::model::DeathLogs {
        died_at_unix_nanos: die.time_nanos,
        exit_code: die.exit_code,
        logs: logs_of(before),
    };
    let past = PastDeath {
        logs: &death,
        evidence: "ev-4",
    };
    diagnose_with(c, &logs, events, Some(past), asked)
}

/// "Why did it restart?": the death it moved on from, explained from the
/// events and the lines before it, never from the run after it.
#[test]
fn a_past_death_is_explained_from_what_it_logged_before_it() {
    let t = 1_800_000_000 - 1_800_000_000 % 86_400 + 3 * 3600; // 03:00:00 UTC
    let always = ContainerView {
        restart_policy: "always".into(),
        ..view()
    };
    let crashed = [
        event(t, "start", None, ""),
        event(t + 5, "die", Some(1), ""),
        event(t + 6, "start", None, ""),
    ];
    let f = run_with_past_death(
        &always,
        &crashed,
        None,
        &[
            "INFO starting",
            "Error: connect ECONNREFUSED 10.0.0.5:5432",
            "Node.js v20.11.0",
        ],
    );
    let causes = &f.diagnosis.causes;
    assert_eq!(causes[0].class, FaultClass::Healthy, "{causes:#?}");
    assert_eq!(
        causes[1].class,
        FaultClass::DependencyUnavailable,
        "{causes:#?}"
    );
    let r = &causes[1].reason;
    assert!(r.contains("web died at 03:00:05 UTC (exit 1)"), "{r}");
    assert!(r.contains("ECONNREFUSED 10.0.0.5:5432"), "{r}");
    assert!(!r.contains("ECONNRESET"), "not the run after it: {r}");
    assert!(
        r.contains("restart policy (`always`) started it again at 03:00:06 UTC"),
        "{r}"
    );
    assert_eq!(causes[1].evidence_ids, ["ev-3", "ev-4"]);
    assert!(
        f.diagnosis
            .summary
            .starts_with("web is running. web died at 03:00:05"),
        "{}",
        f.diagnosis.summary
    );

    // `docker restart`: kill, die, stop, start, restart — someone's stop.
    let restarted = [
        event(t, "kill", None, "15"),
        event(t + 1, "die", Some(143), ""),
        event(t + 1, "stop", None, ""),
        event(t + 1, "start", None, ""),
        event(t + 1, "restart", None, ""),
    ];
    let f = run_with_past_death(&view(), &restarted, None, &["INFO shutting down"]);
    let r = &f.diagnosis.causes[1];
    assert_eq!(r.class, FaultClass::Stopped, "{}", r.reason);
    assert!(
        r.reason.contains("a kill at 03:00:00 UTC with signal 15"),
        "{}",
        r.reason
    );
    assert!(r.reason.contains("by `docker restart`"), "{}", r.reason);

    // An OOM kill is said once, as the past death.
    let oom = [
        event(t, "oom", None, ""),
        event(t, "die", Some(137), ""),
        event(t + 2, "start", None, ""),
    ];
    let f = run_with_past_death(&view(), &oom, None, &["INFO allocating"]);
    let classes: Vec<FaultClass> = f.diagnosis.causes.iter().map(|c| c.class).collect();
    assert_eq!(classes, [FaultClass::Healthy, FaultClass::OomKilled]);
    assert!(
        f.diagnosis.causes[1]
            .reason
            .contains("no restart policy: a person or a tool did"),
        "{}",
        f.diagnosis.causes[1].reason
    );

    // A reason quotes at most 200 characters of a line; the evidence
    // keeps it whole.
    let long = format!("fatal: {}", "y".repeat(5_000));
    let f = run_with_past_death(&always, &crashed, None, &[long.as_str()]);
    let r = &f.diagnosis.causes[1].reason;
    assert!(r.len() < 600 && r.contains("yyyy…"), "{}", r.len());

    // Two deaths; the question names the time of the first.
    let twice = [
        event(t, "die", Some(2), ""),
        event(t + 1, "start", None, ""),
        event(t + 5 * 3600, "die", Some(1), ""),
        event(t + 5 * 3600 + 1, "start", None, ""),
    ];
    let asked = question::asked_time("why did web restart at 3 am?", t + 6 * 3600, 0);
    let f = run_with_past_death(
        &always,
        &twice,
        asked,
        &["panic: runtime error: index out of range"],
    );
    let r = &f.diagnosis.causes[1].reason;
    assert!(r.starts_with("Of its deaths, the one nearest the time asked (03:00 UTC): web died at 03:00:00 UTC (exit 2)"), "{r}");
    assert_eq!(f.diagnosis.causes[1].class, FaultClass::Crash);
}

#[test]
fn only_a_death_it_moved_on_from_is_a_past_death() {
    let t = 1_800_000_000;
    let crashed = [
        event(t, "die", Some(1), ""),
        event(t + 1, "start", None, ""),
        event(t + 9, "die", Some(3), ""),
    ];
    // Exited now: its newest death is its state, told by its own logs.
    assert_eq!(events::past_death(&crashed, false, None), None);
    // Running now: the newest death is the one it was started again after.
    let running = &crashed[..2];
    assert_eq!(
        events::past_death(running, true, None).map(|e| e.time_nanos),
        Some(t * 1_000_000_000)
    );
    // A time asked picks the nearest death, unless that is its state now.
    assert_eq!(
        events::past_death(&crashed, false, Some(t - 100)).map(|e| e.exit_code),
        Some(Some(1))
    );
    assert_eq!(events::past_death(&crashed, false, Some(t + 100)), None);
    assert_eq!(events::past_death(&[], true, None), None);
}

/// What Docker forgets, read from the engine's events.
#[test]
fn events_tell_oom_kills_stops_crashes_and_loops_apart() {
    let exited = |code: i64| ContainerView {
        running: false,
        status: "exited".into(),
        exit_code: code,
        restart_policy: "no".into(),
        ..view()
    };
    let t = 1_800_000_000 - 1_800_000_000 % 86_400 + 3 * 3600; // 03:00:00 UTC
                                                               // OOMKilled lost: the oom event still says it.
    let f = run_with_events(
        &exited(137),
        &[event(t, "oom", None, ""), event(t, "die", Some(137), "")],
    );
    let cause = &f.diagnosis.causes[0];
    assert_eq!(cause.class, FaultClass::OomKilled, "{}", cause.reason);
    assert!(cause.reason.contains("03:00:00 UTC"), "{}", cause.reason);
    assert_eq!(cause.evidence_ids, ["ev-1", "ev-3"]);
    // `docker stop`: kill (SIGTERM) then die.
    let f = run_with_events(
        &exited(143),
        &[
            event(t, "kill", None, "15"),
            event(t + 1, "die", Some(143), ""),
            event(t + 1, "stop", None, ""),
        ],
    );
    assert_eq!(f.diagnosis.causes[0].class, FaultClass::Stopped);
    assert!(
        f.diagnosis.causes[0].reason.contains("stopped at 03:00:00"),
        "{}",
        f.diagnosis.causes[0].reason
    );
    // Killed, but nobody asked Docker to: a crash.
    let f = run_with_events(&exited(137), &[event(t, "die", Some(137), "")]);
    assert_eq!(
        f.diagnosis.causes[0].class,
        FaultClass::Crash,
        "{}",
        f.diagnosis.causes[0].reason
    );
    // Without events, exit 137 stays `stopped` as before.
    assert_eq!(
        run_with_events(&exited(137), &[]).diagnosis.causes[0].class,
        FaultClass::Stopped
    );
    // Died three times, started again each time, no restart policy.
    let loop_events: Vec<_> = (0..3)
        .flat_map(|i| {
            [
                event(t + i * 60, "start", None, ""),
                event(t + i * 60 + 5, "die", Some(1), ""),
            ]
        })
        .collect();
    let f = run_with_events(&exited(1), &loop_events);
    assert_eq!(
        f.diagnosis.causes[0].class,
        FaultClass::CrashLoop,
        "{}",
        f.diagnosis.causes[0].reason
    );
    // Running and healthy now, but OOM-killed an hour ago: that is said too,
    // and the summary carries the timeline.
    let f = run_with_events(
        &view(),
        &[
            event(t, "oom", None, ""),
            event(t, "die", Some(137), ""),
            event(t + 2, "start", None, ""),
        ],
    );
    assert_eq!(f.diagnosis.causes[0].class, FaultClass::Healthy);
    assert_eq!(f.diagnosis.causes[1].class, FaultClass::OomKilled);
    assert!(
        f.diagnosis
            .summary
            .contains("Recent events: 03:00:00 UTC hit its memory limit"),
        "{}",
        f.diagnosis.summary
    );
}

#[test]
fn questions_are_told_from_reports() {
    for q in [
        "why did search restart at 3 am?",
        "What happened to the db",
        "When did backend stop?",
        "how come api is slow",
    ] {
        assert!(is_question(q), "{q}");
    }
    for r in [
        "backend is down",
        "the database keeps crashing",
        "search 挂了",
        "restart web please",
    ] {
        assert!(!is_question(r), "{r}");
    }
}

#[test]
fn a_failure_that_began_with_a_change_names_it_and_a_healthy_container_does_not() {
    let change = crate::model::Change {
        service: "shop/api".into(),
        image_changed: true,
        previous_ran_secs: Some(6 * 86_400),
        failed_after_secs: Some(40),
        said: "began 40 s after shop/api was recreated from image sha256:4f1e…".into(),
        ..Default::default()
    };
    let crashed = ContainerView {
        name: "shop-api-1".into(),
        exit_code: 1,
        status: "exited".into(),
        ..Default::default()
    };
    let logs = logs_of(&["Error: missing required environment variable DATABASE_URL"]);
    let observe = |c: &ContainerView| {
        diagnose(&Observation {
            container: c,
            container_evidence: "ev-1",
            logs: &logs,
            logs_evidence: "ev-2",
            events: &[],
            events_evidence: "",
            past_death: None,
            asked: None,
            now_unix: 0,
            change: Some((&change, "ev-9")),
            ran_well_after: RAN_WELL_AFTER_SECS,
        })
    };
    let f = observe(&crashed);
    let cause = &f.diagnosis.causes[0];
    assert_eq!(cause.class, FaultClass::ConfigError);
    assert!(
        cause
            .reason
            .contains("; the failure began 40 s after shop/api was recreated"),
        "{}",
        cause.reason
    );
    assert!(cause.evidence_ids.contains(&"ev-9".to_string()));
    assert!(f.diagnosis.summary.contains("recreated from image"));
    assert_eq!(f.change.as_ref(), Some(&change));
    let healthy = ContainerView {
        running: true,
        status: "running".into(),
        health_status: "healthy".into(),
        ..crashed.clone()
    };
    let f = observe(&healthy);
    assert_eq!(f.diagnosis.causes[0].class, FaultClass::Healthy);
    assert!(f.change.is_none());
    assert!(!f.diagnosis.causes[0].reason.contains("recreated"));
}
