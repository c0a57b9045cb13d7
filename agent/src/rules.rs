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
mod recovered;
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

mod state;
use state::*;

pub use drydock_proto::approval::is_revision;
pub use logs::{match_logs, LogMatch};
pub use past::PastDeath;
pub use question::{asks_about_usage, asks_for_build, asks_for_update, is_question, AskedTime};
pub use salient::Salient;
pub use shape::Shape;
pub use state::a_restart_cannot_fix;

/// The facts diagnosis rests on, with the ids of their evidence records.
#[derive(Clone, Copy)]
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
    // A path the line says is missing that no mount holds: a device not
    // given, or a mount meant to provide it that is not there.
    let command_failed = words::family(line).is_some_and(|m| {
        matches!(
            m.family,
            words::Family::CommandNotFound | words::Family::NotExecutable
        )
    });
    if class == FaultClass::ConfigError && !command_failed && follow::says_missing(line) {
        if let Some(path) = o
            .paths
            .iter()
            .rev()
            .find(|p| p.starts_with('/') && !follow::is_a_shell(p))
        {
            if let Some(fact) = follow::missing_path(path, c) {
                out.confirms = true;
                out.facts.push(fact);
                out.detail.get_or_insert_with(|| path.clone());
            }
        }
    }
    // A refused login's capitals are codes (`AUTH_FAILED`), not settings.
    let refused_login = words::family(line).is_some_and(|m| m.family == words::Family::AuthFailed);
    // A variable: set or not, by name; a near miss named.
    let variables: Vec<String> = detail
        .filter(|d| {
            d.chars()
                .all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_')
        })
        .map(|d| vec![d.to_string()])
        .unwrap_or_else(|| o.variables.clone());
    if class == FaultClass::ConfigError && !refused_login {
        let facts: Vec<follow::VariableFact> = variables
            .iter()
            .take(2)
            .map(|v| follow::variable(v, c))
            .collect();
        // The one the environment lacks is the one to name.
        if let Some(v) = facts.iter().find(|f| !f.set).or(facts.first()) {
            out.detail.get_or_insert_with(|| v.name.clone());
        }
        for fact in facts {
            out.confirms |= !fact.set;
            out.facts.push(fact.said());
        }
    }
    // Credentials refused: the settings that hold them, by name.
    if class == FaultClass::ConfigError && refused_login {
        let held = follow::credential_settings(c);
        if let Some(first) = held.first() {
            out.confirms = true;
            out.detail.get_or_insert_with(|| first.clone());
            out.facts
                .push(format!("its credentials are set in {}", held.join(", ")));
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
    // The program's own advice: the command its log says to run.
    if matches!(class, FaultClass::ConfigError | FaultClass::HostConfig) {
        let tail = f.lines.len().saturating_sub(40);
        if let Some(cmd) = follow::suggested_command(f.lines[tail..].iter().map(String::as_str)) {
            out.facts.push(format!("its own log says to run `{cmd}`"));
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
            // The innermost path: a wrapped error names the file that
            // failed last ("loading /etc/a.conf: open /etc/certs/b.pem").
            _ => o
                .modules
                .first()
                .cloned()
                .or_else(|| o.paths.last().cloned()),
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
pub fn diagnose(obs: &Observation<'_>) -> Finding {
    // What the program said it recovered from is read as past, not as a
    // cause.
    let settled = recovered::without_recovered(obs.logs);
    diagnose_settled(&Observation {
        logs: &settled,
        ..*obs
    })
}

fn diagnose_settled<'a>(obs: &Observation<'a>) -> Finding {
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
            let followed = follow_objects(&facts, class, &line, said_detail.as_deref());
            let mut reason = format!("its logs say: {what} (\"{line}\")");
            for fact in &followed.facts {
                reason.push_str(&format!("; {fact}"));
            }
            // Unhealthy since it started, and its logs name what a restart
            // cannot change: that is the cause, and the unhealthiness its
            // symptom.
            let leads = first.class == FaultClass::Unhealthy
                && facts.shape.unhealthy_since_start
                && state::a_restart_cannot_fix(class);
            let said = cause(class, reason, if leads { 0.75 } else { 0.6 }, &[logs_ev]);
            if leads {
                causes.insert(0, said);
            } else {
                causes.push(said);
            }
            if matched_line.is_none() {
                matched_line = Some(line);
            }
            detail = detail.or(said_detail).or(followed.detail);
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
