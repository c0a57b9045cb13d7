//! The deterministic rules engine: the embedded default diagnosis, needing no
//! model. It reads typed evidence (inspect, logs) and names causes from the
//! fault vocabulary, each citing the evidence it rests on. Log patterns are
//! one data table so they can be reviewed and tested row by row.

use regex::Regex;

use crate::model::ContainerEvent;
use crate::model::{Cause, Change, ContainerView, Diagnosis, FaultClass, LogsView};

pub mod events;
mod logs;
pub mod past;
pub mod question;
pub mod swarm;

use crate::model::{EventAction, HealthStatus};
use logs::LOG_WINDOW;

/// Whether `text` matches the constant `pattern`, compiled once at each
/// place that asks, on first use (not once a line).
macro_rules! regex_is_match {
    ($pattern:expr, $text:expr $(,)?) => {{
        static RE: std::sync::LazyLock<Option<Regex>> =
            std::sync::LazyLock::new(|| Regex::new($pattern).ok());
        RE.as_ref().is_some_and(|r| r.is_match($text))
    }};
}

pub use logs::{match_logs, LogMatch};
pub use past::PastDeath;
pub use question::{asks_about_usage, is_question, AskedTime};

/// The facts diagnosis rests on, with the ids of their evidence records.
pub struct Observation<'a> {
    pub container: &'a ContainerView,
    pub container_evidence: &'a str,
    pub logs: &'a LogsView,
    pub logs_evidence: &'a str,
    /// The container's recent engine events, oldest first (empty when none
    /// were read), and their evidence id.
    pub events: &'a [ContainerEvent],
    pub events_evidence: &'a str,
    /// A death it has moved on from (started again since, or asked about),
    /// with what it logged before it.
    pub past_death: Option<PastDeath<'a>>,
    /// The time a question named, if any.
    pub asked: Option<AskedTime>,
    /// Now, in unix seconds: "recent" is measured from here.
    pub now_unix: i64,
    /// What changed since the last incarnation of its service ran well,
    /// with its evidence id.
    pub change: Option<(&'a Change, &'a str)>,
}

/// What the engine found, plus details the planner turns into advice.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub diagnosis: Diagnosis,
    /// The log line that decided a log-based class.
    pub matched_line: Option<String>,
    /// A missing variable, a `host:port`, a path: whatever the pattern captured.
    pub detail: Option<String>,
    /// The change the failure is blamed on, if it is.
    pub change: Option<Change>,
    /// It is a one-off job that ran to completion: nothing to start.
    pub finished_job: bool,
}

fn cause(class: FaultClass, reason: String, confidence: f32, evidence: &[&str]) -> Cause {
    Cause {
        class,
        reason,
        confidence,
        evidence_ids: evidence.iter().map(|s| s.to_string()).collect(),
    }
}

const BROKEN_PROBE: &str = r#"(?i)executable file not found|command not found|no such file or directory|OCI runtime exec failed|exec format error"#;

/// The facts the state rules read, gathered once.
struct Facts<'o, 'a> {
    obs: &'o Observation<'a>,
    c: &'a ContainerView,
    name: &'a str,
    ins: &'a str,
    logs_ev: &'a str,
    /// The log lines, oldest first.
    lines: &'o [String],
    /// What the log patterns found, if anything.
    log_match: &'o Option<LogMatch>,
    /// Deaths by failure within the last hour.
    deaths: &'o [&'a ContainerEvent],
}

impl<'a> Facts<'_, 'a> {
    /// `ids`, plus the events' evidence when there are events.
    fn with_events(&self, ids: &[&'a str]) -> Vec<&'a str> {
        let mut v = ids.to_vec();
        if !self.obs.events_evidence.is_empty() {
            v.push(self.obs.events_evidence);
        }
        v
    }
}

/// What a state rule concludes: the primary cause, and the log line or
/// detail (a variable, a path, the engine's error) it rests on.
struct Primary {
    cause: Cause,
    matched_line: Option<String>,
    detail: Option<String>,
}

impl From<Cause> for Primary {
    fn from(cause: Cause) -> Primary {
        Primary {
            cause,
            matched_line: None,
            detail: None,
        }
    }
}

type StateRule = fn(&Facts<'_, '_>) -> Option<Primary>;

/// The state checks, in order: the first that fires names the primary
/// cause. Facts Docker records (an OOM kill, the engine's own error, a
/// restart loop, health) come before what the logs say, and the last rule
/// always fires.
const STATE_RULES: &[(&str, StateRule)] = &[
    ("oom_flag", oom_flag),
    ("oom_event", oom_event),
    ("restarted_from_outside", restarted_from_outside),
    ("engine_error", engine_could_not_start),
    ("published_port", published_port_taken),
    ("restart_loop", restart_loop),
    ("unhealthy", unhealthy),
    ("running", running),
    ("log_pattern", log_pattern),
    ("unrequested_signal", unrequested_signal),
    ("stopped", stopped),
    ("unexplained_exit", unexplained_exit),
];

fn oom_flag(f: &Facts<'_, '_>) -> Option<Primary> {
    f.c.oom_killed.then(|| {
        cause(
            FaultClass::OomKilled,
            format!(
                "{} was killed by the kernel for exceeding its memory limit (State.OOMKilled=true, exit {})",
                f.name, f.c.exit_code
            ),
            0.95,
            &[f.ins],
        )
        .into()
    })
}

fn oom_event(f: &Facts<'_, '_>) -> Option<Primary> {
    let oom = events::oom(f.obs.events).filter(|_| !f.c.running)?;
    Some(
        cause(
            FaultClass::OomKilled,
            format!(
                "{} was killed for exceeding its memory limit: the engine recorded an oom event at {} (exit {}; State.OOMKilled is not set, which a restart clears and Docker 20.10 can lose)",
                f.name,
                events::clock(oom),
                f.c.exit_code
            ),
            0.9,
            &f.with_events(&[f.ins]),
        )
        .into(),
    )
}

/// Three deaths in an hour with no restart policy: something outside Docker
/// keeps starting it.
fn restarted_from_outside(f: &Facts<'_, '_>) -> Option<Primary> {
    let no_policy = f.c.restart_policy.is_empty() || f.c.restart_policy == "no";
    (f.deaths.len() >= 3 && no_policy).then(|| {
        cause(
            FaultClass::CrashLoop,
            format!(
                "{} died {} times in the last hour (exit codes {}) and was started again each time, with no restart policy: something outside Docker keeps restarting it",
                f.name,
                f.deaths.len(),
                f.deaths
                    .iter()
                    .filter_map(|d| d.exit_code)
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            0.85,
            &f.with_events(&[f.ins]),
        )
        .into()
    })
}

/// The engine itself said why it could not start the container.
fn engine_could_not_start(f: &Facts<'_, '_>) -> Option<Primary> {
    let (class, what) = (!f.c.running).then(|| engine_error(&f.c.error)).flatten()?;
    Some(Primary {
        cause: cause(
            class,
            format!("{} could not start: {what} (Docker: {})", f.name, f.c.error),
            0.95,
            &[f.ins],
        ),
        matched_line: None,
        detail: Some(f.c.error.clone()),
    })
}

fn published_port_taken(f: &Facts<'_, '_>) -> Option<Primary> {
    (!f.c.running && docker_port_error(&f.c.error)).then(|| Primary {
        cause: cause(
            FaultClass::PortConflict,
            format!(
                "{} could not start: Docker could not bind its published port ({})",
                f.name, f.c.error
            ),
            0.95,
            &[f.ins],
        ),
        matched_line: None,
        detail: Some(f.c.error.clone()),
    })
}

fn restart_loop(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    let policy_restarts = c.restart_policy != "no" && !c.restart_policy.is_empty();
    (c.restarting || (c.restart_count >= 3 && policy_restarts)).then(|| {
        cause(
            FaultClass::CrashLoop,
            format!(
                "{} is restarting repeatedly ({} restarts, last exit code {})",
                f.name, c.restart_count, c.exit_code
            ),
            0.9,
            &[f.ins],
        )
        .into()
    })
}

/// Running, its healthcheck failing: the probe cannot run at all, or it
/// runs and fails (with the newest error line the process logged).
fn unhealthy(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    if !(c.running && c.health_status == HealthStatus::Unhealthy) {
        return None;
    }
    let last_probe = c
        .health_log
        .last()
        .map(|p| p.output.trim().to_string())
        .unwrap_or_default();
    if regex_is_match!(BROKEN_PROBE, &last_probe) {
        return Some(Primary {
            cause: cause(
                FaultClass::HealthcheckBroken,
                format!("the healthcheck of {} cannot run: {last_probe}", f.name),
                0.9,
                &[f.ins],
            ),
            matched_line: None,
            detail: Some(last_probe),
        });
    }
    // The newest error line says what the process itself thinks is wrong,
    // even when no rule names a class for it.
    let error_line = f.lines.iter().rev().take(LOG_WINDOW).find(|l| {
        l.contains("ERROR")
            || l.contains("FATAL")
            || l.contains("level=error")
            || l.contains("\"level\":\"error\"")
    });
    let (logs_say, evidence): (String, Vec<&str>) = match error_line {
        Some(l) => (
            format!("; its latest error log line: \"{l}\""),
            vec![f.ins, f.logs_ev],
        ),
        None => (String::new(), vec![f.ins]),
    };
    Some(
        cause(
            FaultClass::Unhealthy,
            format!(
                "{} is running but its healthcheck fails ({} failures in a row; last probe: {}){logs_say}",
                f.name,
                c.failing_streak,
                if last_probe.is_empty() { "no output".into() } else { last_probe }
            ),
            0.85,
            &evidence,
        )
        .into(),
    )
}

fn running(f: &Facts<'_, '_>) -> Option<Primary> {
    f.c.running.then(|| {
        cause(
            FaultClass::Healthy,
            format!(
                "{} is running{}",
                f.name,
                if f.c.health_status == HealthStatus::Healthy {
                    " and its healthcheck passes"
                } else {
                    ""
                }
            ),
            0.8,
            &[f.ins],
        )
        .into()
    })
}

/// Exited, and its logs say why (a crash signature counts only for a
/// non-zero exit).
fn log_pattern(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    let m = f
        .log_match
        .clone()
        .filter(|m| m.class != FaultClass::Crash || c.exit_code != 0)?;
    // Permissions depend on who runs and what is mounted: say both.
    let context = if m.class == FaultClass::PermissionDenied {
        format!(" It runs as {}{}.", c.run_as(), c.mounts_said())
    } else {
        String::new()
    };
    Some(Primary {
        cause: cause(
            m.class,
            format!(
                "{} exited with code {}: {} (log: \"{}\").{context}",
                f.name, c.exit_code, m.what, m.line
            ),
            0.85,
            &[f.ins, f.logs_ev],
        ),
        matched_line: Some(m.line),
        detail: m.detail,
    })
}

/// Killed by a signal (137, 143) that no `docker stop` or `kill` sent.
fn unrequested_signal(f: &Facts<'_, '_>) -> Option<Primary> {
    let by_signal = f.c.exit_code == 137 || f.c.exit_code == 143;
    (by_signal && events::death(f.obs.events) == events::Death::Unrequested).then(|| {
        cause(
            FaultClass::Crash,
            format!(
                "{} was killed by a signal (exit {}) that no `docker stop` or `docker kill` sent: the engine recorded no stop or kill before it died, and it was not an OOM kill",
                f.name, f.c.exit_code
            ),
            0.75,
            &f.with_events(&[f.ins]),
        )
        .into()
    })
}

/// Exited 0, or stopped by a signal someone sent.
fn stopped(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    if !(c.exit_code == 0 || ((c.exit_code == 137 || c.exit_code == 143) && !c.oom_killed)) {
        return None;
    }
    let how = match events::death(f.obs.events) {
        events::Death::Requested(stop) if c.exit_code != 0 => format!(
            "was stopped at {} ({}{}; exit {}, not an OOM kill)",
            events::clock(stop),
            if stop.action == EventAction::Kill {
                "`docker kill`/`stop` sent signal "
            } else {
                "`docker stop`"
            },
            stop.signal,
            c.exit_code
        ),
        _ if finished_job(f) => format!(
            "is a one-off job that ran to completion: it exited 0 on its own (restart policy {}){}; nothing is wrong with it",
            if c.restart_policy.is_empty() { "no" } else { &c.restart_policy },
            f.lines
                .iter()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| format!(", its last log line: \"{l}\""))
                .unwrap_or_default()
        ),
        _ if c.exit_code == 0 => "exited cleanly (code 0)".to_string(),
        _ => format!(
            "was stopped by a signal (exit {}, not an OOM kill)",
            c.exit_code
        ),
    };
    Some(
        cause(
            FaultClass::Stopped,
            format!("{} is not running: it {how}", f.name),
            0.8,
            &[f.ins],
        )
        .into(),
    )
}

/// Words of a name or compose service that mark a one-off job.
const JOB_WORDS: &[&str] = &[
    "job",
    "jobs",
    "migrate",
    "migration",
    "migrations",
    "migrator",
    "init",
    "setup",
    "seed",
    "seeder",
    "backup",
    "restore",
    "cron",
    "export",
    "import",
    "batch",
    "oneshot",
    "bootstrap",
    "provision",
    "loader",
    "dump",
];

/// What a job prints when it is done.
const DONE_LINE: &str = r"(?i)\b(?:finished|completed|complete|done|succeeded|successfully|exiting normally|no migrations to apply|nothing to migrate|migrations? applied)\b";

/// Exited 0 on its own, under no restart policy that would run it again,
/// and it looks like a job: Compose's one-off label, a job-like name, or a
/// last line that says it is done. Starting it again would run the job
/// again, which is not a repair.
fn finished_job(f: &Facts<'_, '_>) -> bool {
    let c = f.c;
    if c.running || c.exit_code != 0 || c.oom_killed {
        return false;
    }
    if matches!(events::death(f.obs.events), events::Death::Requested(_)) {
        return false;
    }
    if !matches!(c.restart_policy.as_str(), "" | "no" | "on-failure") {
        return false;
    }
    let oneoff = c
        .labels
        .get("com.docker.compose.oneoff")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let named_like_a_job = std::iter::once(c.name.as_str())
        .chain(
            c.labels
                .get(crate::model::COMPOSE_SERVICE_LABEL)
                .map(String::as_str),
        )
        .flat_map(|n| n.split(['-', '_', '.']))
        .any(|w| JOB_WORDS.contains(&w.to_ascii_lowercase().as_str()));
    let says_done = f
        .lines
        .iter()
        .rev()
        .filter(|l| !l.trim().is_empty())
        .take(3)
        .any(|l| regex_is_match!(DONE_LINE, l));
    oneoff || named_like_a_job || says_done
}

/// Hosts a healthcheck reaches that are the container itself.
fn is_self(host: &str, c: &ContainerView) -> bool {
    let host = host.trim_matches(['[', ']']);
    matches!(host, "localhost" | "127.0.0.1" | "::1" | "0.0.0.0" | "::")
        || host.eq_ignore_ascii_case(&c.name)
        || c.aliases.iter().any(|a| a.eq_ignore_ascii_case(host))
        || (host.len() >= 12 && c.id.starts_with(host))
}

/// A failing healthcheck whose output says it cannot reach another
/// service (curl, wget, pg_isready, redis-cli, mysqladmin, a Go or Node
/// client): that service is a dependency.
pub fn probe_dependency(c: &ContainerView) -> Option<LogMatch> {
    let probe = c.health_log.last()?;
    if probe.exit_code == 0 {
        return None;
    }
    let lines: Vec<String> = probe.output.lines().map(str::to_string).collect();
    let m = match_logs(&lines).filter(|m| m.class == FaultClass::DependencyUnavailable)?;
    let named = m
        .detail
        .as_deref()
        .and_then(|d| crate::dependency::parse(d, "log"))
        .or_else(|| crate::dependency::from_line(&m.line))?;
    (!is_self(&named.host, c)).then_some(m)
}

fn unexplained_exit(f: &Facts<'_, '_>) -> Option<Primary> {
    Some(
        cause(
            FaultClass::Crash,
            format!(
                "{} exited with code {} and its logs name no known cause",
                f.name, f.c.exit_code
            ),
            0.6,
            &[f.ins, f.logs_ev],
        )
        .into(),
    )
}

/// Diagnose one container: the first state rule that fires names the
/// primary cause; what the logs, a past death and the engine's events add
/// follows it.
pub fn diagnose<'a>(obs: &Observation<'a>) -> Finding {
    let c = obs.container;
    let ins = obs.container_evidence;
    let logs_ev = obs.logs_evidence;
    let lines: Vec<String> = obs.logs.lines.iter().map(|l| l.text.clone()).collect();
    let log_match = match_logs(&lines);
    let name = &c.name;
    let ev = obs.events_evidence;
    let with_events = |ids: &[&'a str]| -> Vec<&'a str> {
        let mut v = ids.to_vec();
        if !ev.is_empty() {
            v.push(ev);
        }
        v
    };
    let deaths = events::failed_deaths(obs.events, obs.now_unix - 3600);
    let facts = Facts {
        obs,
        c,
        name,
        ins,
        logs_ev,
        lines: &lines,
        log_match: &log_match,
        deaths: &deaths,
    };
    let first = STATE_RULES
        .iter()
        .find_map(|(_, rule)| rule(&facts))
        .unwrap_or_else(|| cause(FaultClass::Unknown, "no evidence".into(), 0.1, &[ins]).into());
    let is_finished_job = first.cause.class == FaultClass::Stopped && finished_job(&facts);
    let mut causes = vec![first.cause];
    let mut matched_line = first.matched_line;
    let mut detail = first.detail;

    // An unhealthy container whose healthcheck cannot reach another
    // service: that service is followed as a dependency (the engine looks
    // at its container, and puts it first when it is down).
    let probe_dep = probe_dependency(c).filter(|_| {
        causes
            .first()
            .is_some_and(|p| p.class == FaultClass::Unhealthy)
    });
    if let Some(m) = probe_dep {
        causes.push(cause(
            FaultClass::DependencyUnavailable,
            format!(
                "its healthcheck cannot reach {}: \"{}\"",
                m.detail.as_deref().unwrap_or("a dependency"),
                m.line
            ),
            0.7,
            &[ins],
        ));
        matched_line = Some(m.line);
        detail = m.detail;
    }

    // A running-but-unhealthy or crash-looping container often says why in
    // its logs: report that as a secondary cause.
    if let (Some(first), Some(m)) = (causes.first(), &log_match) {
        if matches!(first.class, FaultClass::Unhealthy | FaultClass::CrashLoop)
            && !causes.iter().any(|k| k.class == m.class)
        {
            causes.push(cause(
                m.class,
                format!("its logs show {}: \"{}\"", m.what, m.line),
                0.6,
                &[logs_ev],
            ));
            if matched_line.is_none() {
                matched_line = Some(m.line.clone());
            }
            detail = detail.or(m.detail.clone());
        }
    }

    // A death it has moved on from: when and why, from the events and what
    // it logged up to that moment (the answer to "why did it restart?").
    let past = obs
        .past_death
        .as_ref()
        .and_then(|d| past::cause_of(c, obs.events, ev, d, obs.asked.as_ref()));
    let past_said = past.as_ref().map(|p| p.reason.clone());
    let past_oom = past
        .as_ref()
        .is_some_and(|p| p.class == FaultClass::OomKilled);
    causes.extend(past);

    // Running now, but the engine saw it OOM-killed within the window: that
    // is why it restarted, whatever it looks like now.
    if let (Some(first), Some(oom)) = (causes.first(), events::oom(obs.events)) {
        if c.running && first.class != FaultClass::OomKilled && !past_oom {
            causes.push(cause(
                FaultClass::OomKilled,
                format!(
                    "{name} was OOM-killed at {} (the engine's oom event) and has run since",
                    events::clock(oom)
                ),
                0.7,
                &with_events(&[ins]),
            ));
        }
    }

    // A change that can explain the failure is named in its cause, with
    // its evidence (the planner may undo it).
    let blamed = obs.change.filter(|(c, _)| {
        causes
            .first()
            .is_some_and(|p| crate::change::blamed(c, p.class))
    });
    if let (Some((change, ev)), Some(first)) = (blamed, causes.first_mut()) {
        first.reason = format!(
            "{}; the failure {}",
            first.reason.trim_end_matches('.'),
            change.said
        );
        first.evidence_ids.push(ev.to_string());
    }

    let primary = causes
        .first()
        .cloned()
        .unwrap_or_else(|| cause(FaultClass::Unknown, "no evidence".into(), 0.1, &[ins]));
    let timeline = events::timeline(obs.events);
    let mut summary = sentence(&primary.reason);
    if let Some(past) = past_said.filter(|p| *p != primary.reason) {
        summary = format!("{summary} {}", sentence(&past));
    }
    if !timeline.is_empty() {
        summary = format!("{summary} Recent events: {timeline}.");
    }
    let diagnosis = Diagnosis {
        summary,
        confidence: primary.confidence,
        causes,
        engine: "rules".into(),
    };
    Finding {
        diagnosis,
        matched_line,
        detail,
        change: blamed.map(|(c, _)| c.clone()),
        finished_job: is_finished_job,
    }
}

/// A reason as a sentence of a summary: ends with a full stop.
pub(crate) fn sentence(reason: &str) -> String {
    let reason = reason.trim_end();
    if reason.ends_with(['.', '!', '?']) {
        reason.to_string()
    } else {
        format!("{reason}.")
    }
}

/// Why the engine could not start a container, from `State.Error`: its own
/// disk is full, the image's binary is for another CPU, the image is gone.
fn engine_error(text: &str) -> Option<(FaultClass, &'static str)> {
    if text.is_empty() {
        return None;
    }
    if regex_is_match!(r"(?i)no space left on device", text) {
        return Some((
            FaultClass::DiskFull,
            "the engine found no space left to set up its filesystem",
        ));
    }
    if regex_is_match!(r"(?i)exec format error", text) {
        return Some((
            FaultClass::ConfigError,
            "the image is built for another CPU architecture",
        ));
    }
    if regex_is_match!(
        r"(?i)No such image|pull access denied|manifest unknown|repository does not exist",
        text,
    ) {
        return Some((FaultClass::ConfigError, "its image is missing"));
    }
    None
}

/// Docker's own wording (State.Error) when it cannot bind a published port.
fn docker_port_error(text: &str) -> bool {
    regex_is_match!(
        r"(?i)port is already allocated|address already in use|failed programming external connectivity",
        text,
    )
}

#[cfg(test)]
mod tests;
