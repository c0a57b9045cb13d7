//! The shape of a failure, from facts Docker already gives: how long the
//! container ran before it died (a startup failure or a runtime one), what
//! its exit code means, how often it died and whether it said the same
//! thing each time, whether it was ever ready or healthy, and whether its
//! restart policy gave up. A start can help a container that ran well and
//! died of something transient; one that dies the same way seconds after
//! every start needs a person, whatever its words.

use std::sync::LazyLock;

use regex::Regex;

use crate::change::unix_of;
use crate::model::{ContainerEvent, ContainerView, EventAction, HealthStatus, LogLineView};

use super::events;

/// What an exit code says, before any log line is read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Exit {
    #[default]
    Running,
    /// 0: it ended on its own.
    Clean,
    /// 1–125 other than a signal's: the program itself chose to exit.
    ProgramSaid(i64),
    /// 126: the command was found but could not be executed.
    NotExecutable,
    /// 127: the command was not found.
    CommandNotFound,
    /// 128 + N: killed by signal N.
    Signal { code: i64, name: &'static str },
}

impl Exit {
    pub fn of(c: &ContainerView) -> Exit {
        if c.running {
            return Exit::Running;
        }
        match c.exit_code {
            0 => Exit::Clean,
            126 => Exit::NotExecutable,
            127 => Exit::CommandNotFound,
            code @ 129..=159 => Exit::Signal {
                code,
                name: signal_name(code - 128),
            },
            code => Exit::ProgramSaid(code),
        }
    }

    /// The exit code in words.
    pub fn said(&self) -> String {
        match self {
            Exit::Running => "it is running".into(),
            Exit::Clean => "it exited 0: it ended on its own".into(),
            Exit::ProgramSaid(code) => format!("exit {code}: the program itself chose to exit (an error it reports, not a signal)"),
            Exit::NotExecutable => "exit 126: its command was found but could not be executed (not executable, or a directory)".into(),
            Exit::CommandNotFound => "exit 127: its command was not found in the image".into(),
            Exit::Signal { code, name } => format!("exit {code}: it was killed by {name}{}", signal_meaning(name)),
        }
    }

    /// Killed by the CPU or the program's own abort: a crash of the
    /// binary, not a decision of the program.
    pub fn is_crash_signal(&self) -> bool {
        matches!(self, Exit::Signal { name, .. } if matches!(*name, "SIGILL" | "SIGABRT" | "SIGBUS" | "SIGFPE" | "SIGSEGV" | "SIGTRAP"))
    }
}

fn signal_name(n: i64) -> &'static str {
    match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        5 => "SIGTRAP",
        6 => "SIGABRT",
        7 => "SIGBUS",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => "a signal",
    }
}

fn signal_meaning(name: &str) -> &'static str {
    match name {
        "SIGILL" => " (an illegal instruction: a binary built for a newer or another CPU than this host's, such as one that needs AVX or AVX2, or a corrupt binary)",
        "SIGABRT" => " (it aborted itself: a failed assertion, an uncaught C++ exception)",
        "SIGSEGV" => " (a segmentation fault)",
        "SIGBUS" | "SIGFPE" => " (a crash of the binary)",
        "SIGKILL" => " (the kernel's OOM killer, `docker kill`, or a stop that timed out)",
        "SIGTERM" => " (`docker stop` or an orchestrator asked it to end)",
        _ => "",
    }
}

/// A line that says the program got as far as serving.
static READY: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"(?i)\blistening (?:on|at)\b|\bnow listening\b|\bserver (?:is )?(?:running|started|listening)\b|\bstarted \S+ in [\d.]+ ?s|\bready (?:to accept|for connections|to serve|to handle|for requests)|\bstartup complete|\bapplication started\b|\bservice started\b|\bserving (?:on|at)\b|\bstarted (?:on|at) port\b|\bis (?:now )?ready\b|: ready$|\b(?:worker|consumer|server|service|application|app|api|node|broker) (?:is )?(?:started|ready|running)\b|\bwaiting for (?:jobs|messages|tasks|requests)\b|\bconsuming (?:from|queue|messages)\b|\baccepting connections\b|\bserver listen\b|\brequest (?:completed|finished|served)\b|\b(?:GET|POST|PUT|PATCH|DELETE|HEAD) /\S*(?: HTTP/[\d.]+)?"? \d{3}\b|\bmethod=(?:GET|POST|PUT|PATCH|DELETE)\b"#).ok()
});

/// Whether `line` says the program was ready to serve.
pub fn says_ready(line: &str) -> bool {
    READY.as_ref().is_some_and(|r| r.is_match(line))
}

/// A line with its numbers and times taken out, so that two deaths'
/// lines compare equal when only the numbers differ.
pub fn normalized(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_digits = false;
    for ch in line.chars() {
        if ch.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(ch);
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The shape of the target's failure.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Shape {
    pub exit: Exit,
    /// How long its last run lasted (to its death, or to now).
    pub uptime_secs: Option<i64>,
    /// Its last run died before `ran_well_after` without saying it was
    /// ready.
    pub startup_failure: bool,
    /// The line of its last run that said it was ready, if one did.
    pub ready_line: Option<String>,
    /// Running, unhealthy, never seen healthy, and its failing streak as
    /// long as the probes its run has had time for: it has failed its
    /// healthcheck since it started, however long it has run.
    pub unhealthy_since_start: bool,
    /// It passed its healthcheck at some point (the health log or an
    /// engine `health_status` event).
    pub was_healthy: bool,
    /// Starts the engine recorded in the window, and deaths.
    pub starts: usize,
    pub deaths: usize,
    /// Deaths that came within `ran_well_after` of their start.
    pub quick_deaths: usize,
    /// The salient line was logged in each of this many runs (two or
    /// more, none of which the engine saw last `ran_well_after`: the same
    /// failure at every start).
    pub same_at_every_start: Option<usize>,
    /// `on-failure:N` and it has been restarted N times: the policy gave up.
    pub policy_exhausted: bool,
    /// The seconds a run must last to count as having run well.
    pub ran_well_after: i64,
}

impl Shape {
    /// Why a start may help, from the shape alone: it ran well before it
    /// died. `None` when the shape says nothing of the kind.
    pub fn ran_well(&self) -> Option<String> {
        if self.same_at_every_start.is_some() {
            return None;
        }
        // Running that long while failing every probe since it started is
        // no run that went well.
        if let Some(up) = self
            .uptime_secs
            .filter(|u| *u >= self.ran_well_after && !self.unhealthy_since_start)
        {
            return Some(format!(
                "it ran for {} before it died",
                crate::model::span(up)
            ));
        }
        if let Some(l) = &self.ready_line {
            return Some(format!(
                "it got as far as serving before it failed (\"{l}\")"
            ));
        }
        if self.was_healthy {
            return Some("it passed its healthcheck before it began failing".into());
        }
        None
    }

    /// The shape in one sentence, for causes and for a person.
    pub fn said(&self) -> String {
        let mut parts = vec![self.exit.said()];
        match (self.uptime_secs, &self.exit) {
            (Some(up), Exit::Running) => {
                parts.push(format!("it has run for {}", crate::model::span(up)))
            }
            (Some(up), _) => parts.push(format!("its last run lasted {}", crate::model::span(up))),
            _ => {}
        }
        if self.startup_failure {
            parts.push("a startup failure: it died before it was ever ready".into());
        }
        if let Some(n) = self.same_at_every_start {
            parts.push(format!(
                "it logged the same failure in each of its last {n} runs"
            ));
        } else if self.quick_deaths >= 2 {
            parts.push(format!(
                "{} of its last {} runs died within {} s of their start",
                self.quick_deaths, self.deaths, self.ran_well_after
            ));
        }
        if self.policy_exhausted {
            parts.push("its restart policy gave up".into());
        }
        parts.join("; ")
    }
}

/// The runs the logs hold, split at each recorded death (oldest first):
/// Docker keeps one log across a container's restarts. A run's lines all
/// come before the engine's `die` event (its process has exited), while
/// the first lines of a run can be timed before its `start` event.
fn runs<'a>(lines: &'a [LogLineView], deaths: &[i64]) -> Vec<Vec<&'a str>> {
    let mut out: Vec<Vec<&str>> = vec![Vec::new()];
    let mut next = deaths.iter().copied().peekable();
    // Deaths before the first line close no run the logs hold.
    if let Some(first) = lines.first().filter(|l| l.time_unix_nanos > 0) {
        while next.peek().is_some_and(|d| *d < first.time_unix_nanos) {
            next.next();
        }
    }
    for l in lines {
        while l.time_unix_nanos > 0 && next.peek().is_some_and(|d| *d < l.time_unix_nanos) {
            next.next();
            if out.last().is_some_and(|r| !r.is_empty()) {
                out.push(Vec::new());
            }
        }
        if let Some(run) = out.last_mut() {
            run.push(l.text.as_str());
        }
    }
    out.retain(|r| !r.is_empty());
    out
}

/// The lines of the last run (all of them when times are missing).
pub fn last_run<'a>(
    c: &ContainerView,
    lines: &'a [LogLineView],
    events_seen: &[ContainerEvent],
) -> Vec<&'a str> {
    last_run_lines(c, lines, events_seen)
        .into_iter()
        .map(|l| l.text.as_str())
        .collect()
}

fn last_run_lines<'a>(
    c: &ContainerView,
    lines: &'a [LogLineView],
    events_seen: &[ContainerEvent],
) -> Vec<&'a LogLineView> {
    let started = unix_of(&c.started_at).map(|s| s.saturating_mul(1_000_000_000));
    // The death that ended the run before the last start: every line of
    // that run came before it (a restart policy starts it again within
    // the second).
    let last_start = events_seen
        .iter()
        .rev()
        .find(|e| e.action == EventAction::Start)
        .map(|e| e.time_nanos);
    let previous_death = last_start.and_then(|st| {
        events_seen
            .iter()
            .rev()
            .find(|e| e.action == EventAction::Die && e.time_nanos <= st)
            .map(|e| e.time_nanos + 1)
    });
    match started {
        Some(s) if lines.iter().any(|l| l.time_unix_nanos > 0) => {
            // The engine's StartedAt is a little after the first line can
            // be: a second of slack, but never back into the run before.
            let from = (s - 1_000_000_000).max(previous_death.unwrap_or(i64::MIN));
            let last: Vec<&LogLineView> = lines
                .iter()
                .filter(|l| l.time_unix_nanos == 0 || l.time_unix_nanos >= from)
                .collect();
            if last.is_empty() {
                lines.iter().collect()
            } else {
                last
            }
        }
        _ => lines.iter().collect(),
    }
}

/// A line of the last run that said it was ready, before the salient
/// line. Docker times stdout and stderr as it reads each pipe, so a line
/// of the other stream may carry a time a little after one written later:
/// "before" allows a second.
fn ready_before<'a>(last: &[&'a LogLineView], salient: Option<&str>) -> Option<&'a str> {
    let at = salient.and_then(|s| last.iter().position(|l| l.text == s));
    let salient_time = at.map(|i| last[i].time_unix_nanos).filter(|t| *t > 0);
    last.iter()
        .enumerate()
        .filter(|(i, l)| match (at, salient_time) {
            (_, Some(t)) if l.time_unix_nanos > 0 => l.time_unix_nanos <= t + 1_000_000_000,
            (Some(a), _) => *i < a,
            (None, _) => true,
        })
        .map(|(_, l)| l.text.as_str())
        .find(|l| Some(*l) != salient && says_ready(l))
}

/// The shape of `c`'s failure from its state, its engine events (oldest
/// first), its log lines and the salient line of its last run.
pub fn shape(
    c: &ContainerView,
    events_seen: &[ContainerEvent],
    lines: &[LogLineView],
    salient: Option<&str>,
    ran_well_after: i64,
    now_unix: i64,
) -> Shape {
    let started = unix_of(&c.started_at);
    let finished = unix_of(&c.finished_at);
    let uptime_secs = match (c.running, started, finished) {
        (true, Some(s), _) => Some((now_unix - s).max(0)),
        (false, Some(s), Some(f)) if f >= s => Some(f - s),
        _ => None,
    };
    let last = last_run_lines(c, lines, events_seen);
    let ready_line = ready_before(&last, salient).map(str::to_string);
    let was_healthy = c.health_log.iter().any(|p| p.exit_code == 0)
        || c.health_status == HealthStatus::Healthy
        || events_seen.iter().any(|e| {
            e.action == EventAction::HealthStatus && e.health == Some(HealthStatus::Healthy)
        });
    let unhealthy_since_start = c.running
        && c.health_status == HealthStatus::Unhealthy
        && !was_healthy
        && match (&c.healthcheck, uptime_secs) {
            (Some(hc), Some(up)) => {
                // Docker's defaults: a probe every 30 s; failures in the
                // start period do not count towards the streak.
                let interval = if hc.interval_ms == 0 {
                    30_000
                } else {
                    hc.interval_ms
                };
                let counted_ms = u64::try_from(up)
                    .unwrap_or(0)
                    .saturating_mul(1000)
                    .saturating_sub(hc.start_period_ms);
                let probes = counted_ms / interval.saturating_add(hc.timeout_ms.min(interval));
                // Some slack: probes take time, and the clock is the agent's.
                u64::from(c.failing_streak).saturating_mul(10) >= probes.saturating_mul(7)
            }
            _ => false,
        };
    // Each run the engine recorded: a start and the death after it.
    let mut starts = Vec::new();
    let mut died_at = Vec::new();
    let mut deaths = 0;
    let mut quick_deaths = 0;
    let mut long_lives = 0;
    let mut open: Option<i64> = None;
    for e in events_seen {
        match e.action {
            EventAction::Start => {
                starts.push(e.time_nanos);
                open = Some(e.time_nanos);
            }
            EventAction::Die => {
                deaths += 1;
                died_at.push(e.time_nanos);
                if let Some(s) = open.take() {
                    if (e.time_nanos - s) / 1_000_000_000 < ran_well_after {
                        quick_deaths += 1;
                    } else {
                        long_lives += 1;
                    }
                }
            }
            _ => {}
        }
    }
    let startup_failure = !c.running
        && ready_line.is_none()
        && uptime_secs.is_some_and(|u| u < ran_well_after)
        && !matches!(events::death(events_seen), events::Death::Requested(_));
    let same_at_every_start = salient.and_then(|s| {
        let wanted = normalized(s);
        let runs = runs(lines, &died_at);
        let with = runs
            .iter()
            .filter(|r| r.iter().any(|l| normalized(l) == wanted))
            .count();
        // A run in between that lasted says a start can get past it; a
        // container running now has not died of it at this start.
        (!c.running && runs.len() >= 2 && with == runs.len() && long_lives == 0).then_some(with)
    });
    let policy_exhausted = c.restart_policy == "on-failure"
        && c.restart_max_retries > 0
        && c.restart_count >= c.restart_max_retries
        && !c.running;
    Shape {
        exit: Exit::of(c),
        uptime_secs,
        startup_failure,
        ready_line,
        unhealthy_since_start,
        was_healthy,
        starts: starts.len(),
        deaths,
        quick_deaths,
        same_at_every_start,
        policy_exhausted,
        ran_well_after,
    }
}

/// A start of the same failure helped before: an earlier run of this
/// container ended with the same salient line (numbers aside), and the run
/// started after it lasted at least `ran_well_after` before its own end.
/// In words, for the plan's reason; `None` when the record shows no such
/// run.
pub fn fixed_before(
    c: &ContainerView,
    events_seen: &[ContainerEvent],
    lines: &[LogLineView],
    salient: Option<&str>,
    ran_well_after: i64,
) -> Option<String> {
    let wanted = normalized(salient?);
    if c.running {
        return None;
    }
    // Each recorded run: its start and the death that ended it.
    let mut lives: Vec<(i64, i64)> = Vec::new();
    let mut open: Option<i64> = None;
    for e in events_seen {
        match e.action {
            EventAction::Start => open = Some(e.time_nanos),
            EventAction::Die => {
                if let Some(s) = open.take() {
                    lives.push((s, e.time_nanos));
                }
            }
            _ => {}
        }
    }
    // The last life is the failure being diagnosed; an earlier one that
    // ended the same way, followed by one that lasted, is a start that
    // fixed it.
    let said_in = |(from, to): (i64, i64)| {
        lines.iter().any(|l| {
            l.time_unix_nanos >= from - 1_000_000_000
                && l.time_unix_nanos <= to
                && normalized(&l.text) == wanted
        })
    };
    lives
        .windows(2)
        .take(lives.len().saturating_sub(1))
        .rev()
        .find(|w| said_in(w[0]) && (w[1].1 - w[1].0) / 1_000_000_000 >= ran_well_after)
        .map(|w| {
            format!(
                "it died the same way at {}, and the start after it ran for {} before its next end",
                events::clock_of(w[0].1 / 1_000_000_000),
                crate::model::span((w[1].1 - w[1].0) / 1_000_000_000)
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ContainerState, HealthProbeView, HealthcheckView};

    const SEC: i64 = 1_000_000_000;
    const T0: i64 = 1_800_000_000;

    fn event(action: EventAction, at: i64, exit: Option<i64>) -> ContainerEvent {
        ContainerEvent {
            time_nanos: at * SEC,
            action,
            exit_code: exit,
            ..Default::default()
        }
    }

    fn line(at: i64, text: &str) -> LogLineView {
        LogLineView {
            stream: "stderr".into(),
            text: text.into(),
            time_unix_nanos: at * SEC,
        }
    }

    fn exited(code: i64, started: i64, finished: i64) -> ContainerView {
        let at = |t: i64| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64),
            )
            .to_string()
        };
        ContainerView {
            status: ContainerState::Exited,
            exit_code: code,
            started_at: at(started),
            finished_at: at(finished),
            ..Default::default()
        }
    }

    #[test]
    fn exit_codes_say_what_they_mean() {
        let table = [
            (0, "ended on its own"),
            (1, "the program itself chose to exit"),
            (126, "could not be executed"),
            (127, "not found"),
            (132, "SIGILL"),
            (134, "SIGABRT"),
            (137, "SIGKILL"),
            (139, "SIGSEGV"),
            (143, "SIGTERM"),
        ];
        for (code, words) in table {
            let said = Exit::of(&exited(code, T0, T0)).said();
            assert!(said.contains(words), "{code}: {said}");
        }
        assert!(Exit::of(&exited(139, T0, T0)).is_crash_signal());
        assert!(!Exit::of(&exited(137, T0, T0)).is_crash_signal());
        assert!(!Exit::of(&exited(1, T0, T0)).is_crash_signal());
    }

    #[test]
    fn a_death_seconds_after_start_is_a_startup_failure_and_a_long_run_ran_well() {
        let quick = shape(
            &exited(1, T0, T0 + 2),
            &[],
            &[line(T0, "ERROR boom")],
            Some("ERROR boom"),
            60,
            T0 + 100,
        );
        assert!(quick.startup_failure);
        assert_eq!(quick.ran_well(), None);
        let long = shape(
            &exited(1, T0, T0 + 3600),
            &[],
            &[line(T0 + 3600, "ERROR boom")],
            Some("ERROR boom"),
            60,
            T0 + 4000,
        );
        assert!(!long.startup_failure);
        assert!(
            long.ran_well().unwrap().contains("60 min"),
            "{:?}",
            long.ran_well()
        );
        // Ready before the failure: it got as far as serving.
        let lines = [
            line(T0, "INFO listening on :8080"),
            line(T0 + 1, "panic: boom"),
        ];
        let ready = shape(
            &exited(2, T0, T0 + 1),
            &[],
            &lines,
            Some("panic: boom"),
            60,
            T0 + 10,
        );
        assert!(!ready.startup_failure);
        assert!(ready.ran_well().unwrap().contains("listening"));
        // The ready line on the other stream, timed a little after the
        // panic that was written after it: still before.
        let racy = [
            LogLineView {
                time_unix_nanos: T0 * SEC + 300,
                ..line(T0, "panic: boom")
            },
            LogLineView {
                time_unix_nanos: T0 * SEC + 900,
                ..line(T0, "INFO listening on :8080")
            },
        ];
        let s = shape(
            &exited(2, T0, T0 + 2),
            &[],
            &racy,
            Some("panic: boom"),
            60,
            T0 + 10,
        );
        assert!(s.ready_line.is_some(), "{s:?}");
        // A request served is as good as a ready line.
        assert!(says_ready(
            "t=2021-06-10 lvl=info msg=\"Request Completed\" method=GET path=/api status=200"
        ));
        assert!(says_ready(
            "10.0.0.1 - - [x] \"GET /health HTTP/1.1\" 200 2"
        ));
        assert!(!says_ready("INFO starting worker"));
        // Healthy once: a pass in the health log.
        let mut c = exited(1, T0, T0 + 5);
        c.health_log = vec![HealthProbeView {
            exit_code: 0,
            output: String::new(),
        }];
        assert!(shape(&c, &[], &[], None, 60, T0 + 10).was_healthy);
    }

    #[test]
    fn a_long_run_unhealthy_since_its_start_did_not_run_well() {
        let at = |t: i64| {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64),
            )
            .to_string()
        };
        let mut c = ContainerView {
            status: ContainerState::Running,
            running: true,
            started_at: at(T0),
            health_status: HealthStatus::Unhealthy,
            healthcheck: Some(HealthcheckView {
                interval_ms: 1000,
                timeout_ms: 1000,
                retries: 1,
                ..Default::default()
            }),
            health_log: vec![
                HealthProbeView {
                    exit_code: 1,
                    output: String::new(),
                };
                5
            ],
            failing_streak: 118,
            ..Default::default()
        };
        // Two minutes up, every probe failed: no evidence a restart helps.
        let s = shape(&c, &[], &[], Some("AUTH_FAILED"), 60, T0 + 120);
        assert!(s.unhealthy_since_start, "{s:?}");
        assert_eq!(s.ran_well(), None);
        // Failing only for its last seconds of a long run: it ran well.
        c.failing_streak = 10;
        let s = shape(&c, &[], &[], Some("AUTH_FAILED"), 60, T0 + 3600);
        assert!(!s.unhealthy_since_start, "{s:?}");
        assert!(s.ran_well().is_some());
        // Seen healthy once: it ran well, whatever the streak.
        c.failing_streak = 118;
        c.health_log[0].exit_code = 0;
        let s = shape(&c, &[], &[], None, 60, T0 + 120);
        assert!(!s.unhealthy_since_start && s.ran_well().is_some(), "{s:?}");
    }

    #[test]
    fn the_same_lines_at_every_start_are_seen_across_runs() {
        let events = [
            event(EventAction::Start, T0, None),
            event(EventAction::Die, T0 + 1, Some(1)),
            event(EventAction::Start, T0 + 10, None),
            event(EventAction::Die, T0 + 11, Some(1)),
            event(EventAction::Start, T0 + 20, None),
            event(EventAction::Die, T0 + 21, Some(1)),
        ];
        let lines = [
            line(T0, "INFO boot"),
            line(T0, "FATAL bad config at line 3"),
            line(T0 + 10, "INFO boot"),
            line(T0 + 10, "FATAL bad config at line 3"),
            line(T0 + 20, "INFO boot"),
            line(T0 + 20, "FATAL bad config at line 3"),
        ];
        let s = shape(
            &exited(1, T0 + 20, T0 + 21),
            &events,
            &lines,
            Some("FATAL bad config at line 3"),
            60,
            T0 + 30,
        );
        assert_eq!(s.same_at_every_start, Some(3));
        assert_eq!((s.starts, s.deaths, s.quick_deaths), (3, 3, 3));
        assert!(s.ran_well().is_none());
        assert!(
            s.said().contains("same failure in each of its last 3 runs"),
            "{}",
            s.said()
        );
        // A run in between that said something else breaks the pattern.
        let mut other = lines.to_vec();
        other[3] = line(T0 + 10, "FATAL disk on fire");
        let s = shape(
            &exited(1, T0 + 20, T0 + 21),
            &events,
            &other,
            Some("FATAL bad config at line 3"),
            60,
            T0 + 30,
        );
        assert_eq!(s.same_at_every_start, None);
        // The same last words, but a run in between lasted: a start got
        // past it once, so it is not the same failure at every start.
        let mut lasted = events.to_vec();
        lasted[3] = event(EventAction::Die, T0 + 19, Some(1));
        let s = shape(
            &exited(1, T0 + 20, T0 + 21),
            &lasted,
            &lines,
            Some("FATAL bad config at line 3"),
            5,
            T0 + 30,
        );
        assert_eq!(s.same_at_every_start, None, "{s:?}");
        assert_eq!(s.quick_deaths, 2);
    }

    #[test]
    fn a_start_that_held_after_the_same_failure_is_found() {
        // Died, started by someone, ran 2 minutes, restarted, died the
        // same way at once.
        let events = [
            event(EventAction::Start, T0, None),
            event(EventAction::Die, T0 + 1, Some(3)),
            event(EventAction::Start, T0 + 30, None),
            event(EventAction::Die, T0 + 150, Some(0)),
            event(EventAction::Start, T0 + 151, None),
            event(EventAction::Die, T0 + 152, Some(3)),
        ];
        let lines = [
            line(T0, "ERROR lost the broker (attempt 1)"),
            line(T0 + 30, "INFO ready"),
            line(T0 + 151, "ERROR lost the broker (attempt 7)"),
        ];
        let c = exited(3, T0 + 151, T0 + 152);
        let said = fixed_before(
            &c,
            &events,
            &lines,
            Some("ERROR lost the broker (attempt 7)"),
            60,
        );
        assert!(
            said.as_deref().is_some_and(|s| s.contains("ran for 2 min")),
            "{said:?}"
        );
        // The run after it did not last: no evidence.
        assert_eq!(
            fixed_before(
                &c,
                &events,
                &lines,
                Some("ERROR lost the broker (attempt 7)"),
                600
            ),
            None
        );
        // Another failure before: no evidence.
        assert_eq!(
            fixed_before(&c, &events, &lines, Some("ERROR other"), 60),
            None
        );
    }

    #[test]
    fn a_policy_that_gave_up_is_seen() {
        let mut c = exited(1, T0, T0 + 1);
        c.restart_policy = "on-failure".into();
        c.restart_max_retries = 3;
        c.restart_count = 3;
        assert!(shape(&c, &[], &[], None, 60, T0 + 5).policy_exhausted);
        c.restart_count = 2;
        assert!(!shape(&c, &[], &[], None, 60, T0 + 5).policy_exhausted);
    }
}
