//! The deterministic rules engine: the embedded default diagnosis, needing no
//! model. It reads typed evidence (inspect, logs, events) and names causes
//! from the fault vocabulary, each citing the evidence it rests on, the way
//! a senior engineer reads a failure: Docker's own facts first, then the
//! shape of the failure (`shape`), the salient line of the run that died
//! (`salient`), the family its words belong to (`words`, with the known
//! messages of `logs` for details), and what the error names, followed into
//! the container's definition (`objects`, `follow`). A cause's confidence
//! is counted from how much independent evidence supports it, and when
//! nothing does, the answer is `unknown`, with what was ruled out.

use regex::Regex;

use crate::model::ContainerEvent;
use crate::model::{Cause, Change, ContainerView, Diagnosis, FaultClass, LogsView};

pub mod events;
pub mod follow;
mod logs;
pub mod objects;
pub mod past;
pub mod question;
pub mod salient;
pub mod shape;
pub mod swarm;
pub mod words;

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
pub use salient::Salient;
pub use shape::Shape;

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
    /// How long a run must last to count as having run well (seconds).
    pub ran_well_after: i64,
}

/// The seconds a run must last to count as having run well, unless
/// configured (`diagnosis.ran_well_after`).
pub const RAN_WELL_AFTER_SECS: i64 = crate::config::RAN_WELL_AFTER_SECS as i64;

/// Below this confidence no write is proposed: the evidence is too thin.
pub const WRITE_CONFIDENCE: f32 = 0.6;

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
    /// The shape of the failure (facts Docker gives).
    pub shape: Shape,
    /// The salient line of the run that died, if the logs said anything.
    pub salient: Option<String>,
    /// A start of the same failure helped before: when, and how long the
    /// run after it lasted.
    pub fixed_before: Option<String>,
}

impl Finding {
    /// The failure's shape as evidence a diagnosis cites. `None` for a
    /// container that did not fail (running, and not unhealthy).
    pub fn shape_evidence(&self) -> Option<crate::model::FailureShape> {
        let s = &self.shape;
        let failed = self.diagnosis.signature.is_some() || !matches!(s.exit, shape::Exit::Running);
        failed.then(|| crate::model::FailureShape {
            exit: s.exit.said(),
            uptime_secs: s.uptime_secs,
            startup_failure: s.startup_failure,
            ready_line: s.ready_line.clone(),
            was_healthy: s.was_healthy,
            starts: count(s.starts),
            deaths: count(s.deaths),
            quick_deaths: count(s.quick_deaths),
            same_at_every_start: s.same_at_every_start.map(count),
            policy_exhausted: s.policy_exhausted,
            ran_well_after_secs: s.ran_well_after,
            salient_line: self.salient.clone(),
            signature: self.diagnosis.signature.clone(),
            start_may_help: self.fixed_before.clone().or_else(|| s.ran_well()),
        })
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
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
    /// What the known-message table found, if anything.
    log_match: &'o Option<LogMatch>,
    /// The known-message table on the salient line alone.
    salient_match: &'o Option<LogMatch>,
    /// Deaths by failure within the last hour.
    deaths: &'o [&'a ContainerEvent],
    /// The salient line of the last run.
    salient: Option<&'o Salient>,
    shape: &'o Shape,
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
    ("running_with_errors", running_with_errors),
    ("running", running),
    ("salient_message", salient_message),
    ("word_family", word_family),
    ("known_message", known_message),
    ("command_failed", command_failed),
    ("crash_signature", crash_signature),
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

/// Restarting again and again. When its logs name a cause a restart
/// cannot change (a setting, a permission, a port), that is the cause and
/// the loop its shape; otherwise the loop is the finding.
fn restart_loop(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    let policy_restarts = c.restart_policy != "no" && !c.restart_policy.is_empty();
    if !(c.restarting || (c.restart_count >= 3 && policy_restarts)) {
        return None;
    }
    let looping = format!(
        "{} is restarting repeatedly ({} restarts, last exit code {}{})",
        f.name,
        c.restart_count,
        c.exit_code,
        if f.shape.policy_exhausted {
            "; its restart policy gave up"
        } else {
            ""
        }
    );
    if let Some(found) = named_by_logs(f).filter(|l| a_restart_cannot_fix(l.class)) {
        let mut p = from_logs(f, found);
        p.cause.reason = format!("{looping}: {}", p.cause.reason);
        return Some(p);
    }
    Some(cause(FaultClass::CrashLoop, looping, 0.9, &[f.ins]).into())
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

/// Died on its own with a non-zero exit (no stop or kill asked for it):
/// what the logs say is its cause.
fn failed_on_its_own(f: &Facts<'_, '_>) -> bool {
    !f.c.running
        && f.c.exit_code != 0
        && !matches!(events::death(f.obs.events), events::Death::Requested(_))
}

/// A cause read from the logs: the class, what it means, the line, and the
/// object it names; its reason says what following that object found, and
/// its confidence counts the independent evidence behind it.
fn from_logs(f: &Facts<'_, '_>, found: LogCause) -> Primary {
    let c = f.c;
    let followed = follow_objects(f, found.class, &found.line, found.detail.as_deref());
    let support = Support {
        words: found.words,
        salient: f
            .salient
            .is_some_and(|s| s.line == found.line || found.on_salient),
        shape: shape_agrees(found.class, f.shape),
        object: followed.confirms,
        repeated: f.shape.same_at_every_start.is_some(),
    };
    let mut reason = format!(
        "{} exited with code {}: {} (log: \"{}\").",
        f.name, c.exit_code, found.what, found.line
    );
    for fact in &followed.facts {
        reason.push_str(&format!(" {}.", upper_first(fact)));
    }
    if found.class == FaultClass::PermissionDenied && !followed.said_user {
        reason.push_str(&format!(" It runs as {}{}.", c.run_as(), c.mounts_said()));
    }
    logs_primary(f, found, reason, support, followed)
}

/// A cause read from the logs, with its reason and support: the line
/// decided it, and the object it or following named is the detail.
fn logs_primary(
    f: &Facts<'_, '_>,
    found: LogCause,
    reason: String,
    support: Support,
    followed: Followed,
) -> Primary {
    Primary {
        cause: cause(
            found.class,
            reason,
            support.confidence(),
            &[f.ins, f.logs_ev],
        ),
        matched_line: Some(found.line),
        detail: found.detail.or(followed.detail),
    }
}

/// What a log rule found.
struct LogCause {
    class: FaultClass,
    what: &'static str,
    line: String,
    detail: Option<String>,
    /// The words were recognised (a known message or a family), not only
    /// a level.
    words: bool,
    /// Found on the salient line (or the line continuing it).
    on_salient: bool,
}

/// The known-message table, on the salient line: the line a person would
/// read first says what it is, in words drydock knows.
fn salient_message(f: &Facts<'_, '_>) -> Option<Primary> {
    if !failed_on_its_own(f) {
        return None;
    }
    let m = f.salient_match.clone()?;
    // "failed to load configuration: open …: permission denied": the
    // errno at the end is the cause, the configuration its victim. A
    // permission outranks a known message that only says the
    // configuration failed (a known message about a specific resource,
    // such as shared memory's "No space left on device", keeps its word).
    if m.class == FaultClass::ConfigError
        && f.salient
            .and_then(|s| s.family.as_ref())
            .is_some_and(|fam| fam.class == FaultClass::PermissionDenied)
    {
        return None;
    }
    // A known message that names no detail (a summary line): the detail
    // another line of the same class names (the variable listed below it).
    let detail = m.detail.clone().or_else(|| {
        f.log_match
            .as_ref()
            .filter(|o| o.class == m.class)
            .and_then(|o| o.detail.clone())
    });
    Some(from_logs(
        f,
        LogCause {
            class: m.class,
            what: m.what,
            line: m.line,
            detail,
            words: true,
            on_salient: true,
        },
    ))
}

/// The salient line's words belong to a failure family.
fn word_family(f: &Facts<'_, '_>) -> Option<Primary> {
    if !failed_on_its_own(f) {
        return None;
    }
    named_by_family(f).map(|found| from_logs(f, found))
}

/// What the salient line's family says: its words, or a write to a path
/// that following shows read-only ("Unable to create the cache directory
/// (/var/www/var/cache)" on a read-only root).
fn named_by_family(f: &Facts<'_, '_>) -> Option<LogCause> {
    let s = f.salient?;
    let family = s
        .family
        .or_else(|| written_to_read_only(f.c, &s.message))
        .or_else(|| names_an_unset_variable(f.c, &s.message))?;
    Some(LogCause {
        class: family.class,
        what: family.what,
        line: s.message.clone(),
        detail: None,
        words: true,
        on_salient: true,
    })
}

/// A line about writing (creating, opening, saving) a path that is on a
/// read-only mount or root filesystem: the read-only family.
fn written_to_read_only(c: &ContainerView, line: &str) -> Option<words::FamilyMatch> {
    let writes = regex_is_match!(
        r"(?i)\b(?:creat|writ|mkdir|open|sav|renam|chmod|chown|touch|remov|delet|unlink|copy|mov|extract|lock)\w*\b",
        line
    );
    let read_only = objects::extract(line)
        .paths
        .iter()
        .any(|p| follow::path(p, c).read_only);
    (writes && read_only)
        .then(|| words::of(words::Family::ReadOnly))
        .flatten()
}

/// An error line that names a variable-shaped setting the environment does
/// not set ("KeyError: DATABASE_URL", "DATABASE_URL undefined"): the
/// missing-setting family, whatever the words around it.
fn names_an_unset_variable(c: &ContainerView, line: &str) -> Option<words::FamilyMatch> {
    if salient::severity(line) < salient::Severity::Error {
        return None;
    }
    // Said as a lookup that found nothing, not as an error code that
    // happens to be shaped like a variable (`SQLITE_ERROR: cannot
    // rollback`).
    if !regex_is_match!(
        r"(?i)\bKeyError\b|\benviron|\benv\b|\bvariable|\bundefined\b|\bnot (?:set|defined|found|provided|given)\b|\bunset\b|\bmissing\b|\brequired\b|\bmust be set\b|\bis empty\b|\bno value\b",
        line
    ) {
        return None;
    }
    objects::extract(line)
        .variables
        .iter()
        .any(|v| !follow::variable(v, c).set)
        .then(|| words::of(words::Family::MissingSetting))
        .flatten()
}

/// What the logs of the last run name, whatever the container's state:
/// a known message on the salient line, the salient line's family, or a
/// known message elsewhere (not a crash signature).
fn named_by_logs(f: &Facts<'_, '_>) -> Option<LogCause> {
    if let Some(m) = f.salient_match.clone() {
        return Some(LogCause {
            class: m.class,
            what: m.what,
            line: m.line,
            detail: m.detail,
            words: true,
            on_salient: true,
        });
    }
    named_by_family(f).or_else(|| {
        f.log_match
            .clone()
            .filter(|m| m.class != FaultClass::Crash)
            .map(|m| LogCause {
                class: m.class,
                what: m.what,
                line: m.line,
                detail: m.detail,
                words: true,
                on_salient: false,
            })
    })
}

/// Classes a start or restart cannot change: what the logs name of these
/// is the cause even of a restart loop (which is its shape).
fn a_restart_cannot_fix(class: FaultClass) -> bool {
    matches!(
        class,
        FaultClass::ConfigError
            | FaultClass::PermissionDenied
            | FaultClass::PortConflict
            | FaultClass::DiskFull
            | FaultClass::HostConfig
    )
}

/// Running with no healthcheck to say how it is, but its logs say it
/// cannot do its work: the salient line is an error that names a failure.
/// "Kibana is up" is not an answer when Kibana logs that it cannot find
/// Elasticsearch. (A passing healthcheck outweighs the logs.)
fn running_with_errors(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    if !c.running || c.restarting || c.health_status != HealthStatus::None {
        return None;
    }
    let s = f.salient?;
    if s.severity < salient::Severity::Error {
        return None;
    }
    let found = named_by_logs(f).filter(|l| l.on_salient)?;
    let followed = follow_objects(f, found.class, &found.line, found.detail.as_deref());
    let support = Support {
        words: true,
        salient: true,
        shape: false,
        object: followed.confirms,
        repeated: false,
    };
    let mut reason = format!(
        "{} is running, but its logs say it {} (log: \"{}\").",
        f.name, found.what, found.line
    );
    for fact in &followed.facts {
        reason.push_str(&format!(" {}.", upper_first(fact)));
    }
    Some(logs_primary(f, found, reason, support, followed))
}

/// A known message elsewhere in the run (not the salient line): the cause
/// nearest the exit that the table knows. Also for an exit Docker did not
/// record as a failure the logs may explain (a crash class needs a
/// non-zero exit).
fn known_message(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    if c.running {
        return None;
    }
    let m = f
        .log_match
        .clone()
        .filter(|m| m.class != FaultClass::Crash)
        .filter(|_| {
            c.exit_code != 0 || !matches!(events::death(f.obs.events), events::Death::Requested(_))
        })?;
    Some(from_logs(
        f,
        LogCause {
            class: m.class,
            what: m.what,
            line: m.line,
            detail: m.detail,
            words: true,
            on_salient: false,
        },
    ))
}

/// Exit 126 or 127: the shell could not run the command.
fn command_failed(f: &Facts<'_, '_>) -> Option<Primary> {
    if !failed_on_its_own(f) {
        return None;
    }
    let what = match f.shape.exit {
        shape::Exit::NotExecutable => {
            "its command could not be executed (exit 126: not executable, or a directory)"
        }
        shape::Exit::CommandNotFound => "its command was not found (exit 127)",
        _ => return None,
    };
    let line = f.salient.map(|s| s.line.clone()).unwrap_or_default();
    let command: Vec<&str> =
        f.c.entrypoint
            .iter()
            .chain(&f.c.command)
            .map(String::as_str)
            .take(4)
            .collect();
    let said = if line.is_empty() {
        String::new()
    } else {
        format!(" (log: \"{line}\")")
    };
    let support = Support {
        words: false,
        salient: !line.is_empty(),
        shape: true,
        object: true,
        repeated: f.shape.same_at_every_start.is_some(),
    };
    Some(Primary {
        cause: cause(
            FaultClass::ConfigError,
            format!(
                "{} exited with code {}: {what}{said}. Its command is `{}`: check that the file exists in the image and is executable, and that the entrypoint's interpreter is installed.",
                f.name,
                f.c.exit_code,
                command.join(" ")
            ),
            support.confidence(),
            &[f.ins, f.logs_ev],
        ),
        matched_line: (!line.is_empty()).then_some(line),
        detail: command.first().map(|c| c.to_string()),
    })
}

/// A crash: a panic, an uncaught exception, a traceback (the known crash
/// signatures), or a signal of the binary's own crash (SIGSEGV, SIGABRT,
/// SIGILL).
fn crash_signature(f: &Facts<'_, '_>) -> Option<Primary> {
    if !failed_on_its_own(f) {
        return None;
    }
    let signature = f
        .log_match
        .clone()
        .filter(|m| m.class == FaultClass::Crash)
        .or_else(|| {
            // The runtimes' own words for a crash, whatever follows them.
            let s = f.salient?;
            regex_is_match!(
                r"^panic: |\bpanicked at\b|^Traceback \(most recent call last\)|^Unhandled exception|\bUncaught \w*(?:Error|Exception)\b|^Exception in thread \x22|^fatal error: |^terminate called after throwing|\b(?:TypeError|ReferenceError|AttributeError|IndexError|ZeroDivisionError): |\bNullPointerException\b|\bnil pointer dereference\b|\bindex out of range\b",
                &s.line
            )
            .then(|| LogMatch {
                class: FaultClass::Crash,
                what: "the program crashed",
                line: s.line.clone(),
                detail: None,
            })
        });
    let signal = f.shape.exit.is_crash_signal();
    if signature.is_none() && !signal {
        return None;
    }
    let line = signature
        .as_ref()
        .map(|m| m.line.clone())
        .or_else(|| f.salient.map(|s| s.line.clone()));
    let support = Support {
        words: signature.is_some(),
        salient: signature
            .as_ref()
            .zip(f.salient)
            .is_some_and(|(m, s)| m.line == s.line),
        shape: signal || f.shape.ran_well().is_some(),
        object: false,
        repeated: f.shape.same_at_every_start.is_some(),
    };
    let log = line
        .as_ref()
        .map(|l| format!(" (log: \"{l}\")"))
        .unwrap_or_default();
    Some(Primary {
        cause: cause(
            FaultClass::Crash,
            format!(
                "{} exited with code {}: the program crashed{log}; {}",
                f.name,
                f.c.exit_code,
                f.shape.said()
            ),
            support.confidence(),
            &f.with_events(&[f.ins, f.logs_ev]),
        ),
        matched_line: line,
        detail: None,
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

/// Nothing supports a cause: `unknown`, with the salient lines, the
/// shape, what was ruled out and where a person should look next.
fn unexplained_exit(f: &Facts<'_, '_>) -> Option<Primary> {
    let c = f.c;
    let last_words = match f.salient {
        Some(s) => format!("its last words: \"{}\"", s.line),
        None => "it logged nothing".to_string(),
    };
    let mut ruled_out = vec![format!(
        "not an OOM kill (State.OOMKilled is false{})",
        if events::oom(f.obs.events).is_none() && !f.obs.events_evidence.is_empty() {
            ", and the engine recorded no oom event"
        } else {
            ""
        }
    )];
    if c.error.is_empty() {
        ruled_out.push("no error from the engine".into());
    }
    if events::death(f.obs.events) == events::Death::Unrequested {
        ruled_out.push("no `docker stop` or `kill` before it died".into());
    }
    ruled_out.push(format!(
        "no failure words drydock knows in its last {} lines",
        f.lines.len().min(logs::LOG_WINDOW)
    ));
    Some(Primary {
        cause: cause(
            FaultClass::Unknown,
            format!(
                "drydock cannot tell why {} exited: {}; {last_words}. Ruled out: {}. Look next at the lines before its last ones (`docker logs --tail 300 {}`), at log files it may write inside the container, and at what changed since it last ran well.",
                f.name,
                f.shape.said(),
                ruled_out.join(", "),
                f.name
            ),
            0.25,
            &f.with_events(&[f.ins, f.logs_ev]),
        ),
        matched_line: f.salient.map(|s| s.line.clone()),
        detail: None,
    })
}

/// What independently supports a cause read from the logs.
#[derive(Debug, Clone, Copy, Default)]
struct Support {
    /// Its words are recognised: a known message, a family, a crash
    /// signature.
    words: bool,
    /// It is the salient line: the newest of the worst severity.
    salient: bool,
    /// The failure's shape fits the class (a startup failure for a setting,
    /// a runtime death for a crash).
    shape: bool,
    /// What the error names was found and fits (the path on a read-only
    /// mount, the variable missing from the environment).
    object: bool,
    /// The same failure at each of its last starts.
    repeated: bool,
}

impl Support {
    /// A line alone is weak; each independent support adds to it.
    fn confidence(self) -> f32 {
        let mut c = 0.3;
        for (held, weight) in [
            (self.words, 0.25),
            (self.salient, 0.1),
            (self.shape, 0.15),
            (self.object, 0.15),
            (self.repeated, 0.05),
        ] {
            if held {
                c += weight;
            }
        }
        (c as f32).min(0.95)
    }
}

/// Whether the failure's shape fits `class`: a setting, a permission, a
/// port, a full disk or a host limit stop a program at its start (or at
/// every start); a dependency can fail it any time; a crash of a program
/// that ran well is a crash of its work.
fn shape_agrees(class: FaultClass, s: &Shape) -> bool {
    match class {
        FaultClass::ConfigError
        | FaultClass::PermissionDenied
        | FaultClass::PortConflict
        | FaultClass::HostConfig => s.startup_failure || s.same_at_every_start.is_some(),
        FaultClass::DiskFull | FaultClass::DependencyUnavailable | FaultClass::OomKilled => {
            !matches!(s.exit, shape::Exit::Running | shape::Exit::Clean)
        }
        FaultClass::Crash => s.exit.is_crash_signal() || s.ran_well().is_some(),
        _ => false,
    }
}

/// What following the objects of a line found.
#[derive(Debug, Default)]
struct Followed {
    facts: Vec<String>,
    /// A found object fits the class.
    confirms: bool,
    /// The object to name in advice, when the line's own rule named none.
    detail: Option<String>,
    said_user: bool,
}

/// Follow what `line` names into the container's definition.
fn follow_objects(
    f: &Facts<'_, '_>,
    class: FaultClass,
    line: &str,
    detail: Option<&str>,
) -> Followed {
    let c = f.c;
    let mut out = Followed::default();
    let o = objects::extract(line);
    let writes = matches!(class, FaultClass::PermissionDenied | FaultClass::DiskFull);
    let file = matches!(
        class,
        FaultClass::ConfigError | FaultClass::PermissionDenied
    );
    // A path: the mount that holds it, read-only or not.
    for path in o.paths.iter().take(2) {
        if !(writes || file) {
            break;
        }
        let p = follow::path(path, c);
        if p.mount.is_some() || p.read_only {
            out.confirms |= p.read_only || class == FaultClass::PermissionDenied;
            out.facts.push(p.said());
            out.detail.get_or_insert_with(|| path.clone());
        } else if class == FaultClass::PermissionDenied && p.path.len() > 1 {
            out.facts.push(p.said());
            out.detail.get_or_insert_with(|| path.clone());
        }
    }
    // A variable: set or not, by name; a near miss named.
    let variables: Vec<String> = detail
        .filter(|d| {
            d.chars()
                .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_')
        })
        .map(|d| vec![d.to_string()])
        .unwrap_or_else(|| o.variables.clone());
    if class == FaultClass::ConfigError {
        for v in variables.iter().take(2) {
            let fact = follow::variable(v, c);
            out.confirms |= !fact.set;
            out.facts.push(fact.said());
            out.detail.get_or_insert_with(|| v.clone());
        }
    }
    // A user: who it runs as, beside the path it was refused.
    if class == FaultClass::PermissionDenied {
        out.facts.push(format!("It runs as {}", c.run_as()));
        out.said_user = true;
        if !o.paths.is_empty() && c.mounts.is_empty() && !c.read_only_rootfs {
            out.facts.push("it has no mounts".into());
        }
    }
    // A host or port the line names is followed by the engine (other
    // containers); here it only becomes the detail.
    if out.detail.is_none() {
        out.detail = match class {
            FaultClass::DependencyUnavailable => o
                .endpoints
                .first()
                .map(|(h, p)| p.map_or(h.clone(), |p| format!("{h}:{p}"))),
            FaultClass::PortConflict => o.ports.first().map(|p| p.to_string()),
            _ => o
                .modules
                .first()
                .cloned()
                .or_else(|| o.paths.first().cloned()),
        };
    }
    out
}

fn upper_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
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
    // The run that died, its salient line, and the failure's shape.
    let last = shape::last_run(c, &obs.logs.lines, obs.events);
    let salient = salient::salient(&last);
    let shape = shape::shape(
        c,
        obs.events,
        &obs.logs.lines,
        salient.as_ref().map(|s| s.line.as_str()),
        obs.ran_well_after,
        obs.now_unix,
    );
    let salient_match = salient.as_ref().and_then(|s| {
        let next = last.get(s.index + 1).map(|l| l.to_string());
        let block: Vec<String> = std::iter::once(s.line.clone()).chain(next).collect();
        match_logs(&block).filter(|m| m.class != FaultClass::Crash)
    });
    let facts = Facts {
        obs,
        c,
        name,
        ins,
        logs_ev,
        lines: &lines,
        log_match: &log_match,
        salient_match: &salient_match,
        deaths: &deaths,
        salient: salient.as_ref(),
        shape: &shape,
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
    // its logs (a known message, else the salient line's family): report
    // that as a secondary cause.
    let said_by_logs = log_match
        .clone()
        .map(|m| (m.class, m.what, m.line, m.detail))
        .or_else(|| named_by_family(&facts).map(|l| (l.class, l.what, l.line, l.detail)));
    if let (Some(first), Some((class, what, line, said_detail))) = (causes.first(), said_by_logs) {
        if matches!(first.class, FaultClass::Unhealthy | FaultClass::CrashLoop)
            && !causes.iter().any(|k| k.class == class)
        {
            causes.push(cause(
                class,
                format!("its logs say: {what} (\"{line}\")"),
                0.6,
                &[logs_ev],
            ));
            if matched_line.is_none() {
                matched_line = Some(line);
            }
            detail = detail.or(said_detail);
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
    let signature = failure_signature(c, salient.as_ref());
    let fixed_before = signature.as_ref().and_then(|_| {
        shape::fixed_before(
            c,
            obs.events,
            &obs.logs.lines,
            salient.as_ref().map(|s| s.line.as_str()),
            obs.ran_well_after,
        )
    });
    let diagnosis = Diagnosis {
        summary,
        confidence: primary.confidence,
        causes,
        engine: "rules".into(),
        signature,
        model: None,
    };
    Finding {
        diagnosis,
        matched_line,
        detail,
        change: blamed.map(|(c, _)| c.clone()),
        finished_job: is_finished_job,
        shape,
        salient: salient.map(|s| s.line),
        fixed_before,
    }
}

/// The failure's signature: how it ended and its salient line without
/// its numbers. `None` for a container that did not fail.
fn failure_signature(c: &ContainerView, salient: Option<&Salient>) -> Option<String> {
    let line = salient
        .map(|s| shape::normalized(&s.line))
        .unwrap_or_default();
    if c.running {
        return (c.health_status == HealthStatus::Unhealthy).then(|| {
            let probe = c
                .health_log
                .last()
                .map(|p| shape::normalized(p.output.trim()))
                .unwrap_or_default();
            format!("unhealthy: {probe}")
        });
    }
    (c.exit_code != 0 || c.oom_killed).then(|| format!("exit {}: {line}", c.exit_code))
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
