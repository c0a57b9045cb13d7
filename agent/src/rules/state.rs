//! The state rules, in the order `STATE_RULES` tries them: Docker's own
//! facts, then what the logs of the run that died say (a known message,
//! the salient line's family), a command that could not run, a crash,
//! a stop, and an honest `unknown` when nothing supports a cause.

use super::*;

pub(super) fn oom_flag(f: &Facts<'_, '_>) -> Option<Primary> {
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

pub(super) fn oom_event(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn restarted_from_outside(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn engine_could_not_start(f: &Facts<'_, '_>) -> Option<Primary> {
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

pub(super) fn published_port_taken(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn restart_loop(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn unhealthy(f: &Facts<'_, '_>) -> Option<Primary> {
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

pub(super) fn running(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn failed_on_its_own(f: &Facts<'_, '_>) -> bool {
    !f.c.running
        && f.c.exit_code != 0
        && !matches!(events::death(f.obs.events), events::Death::Requested(_))
}

/// A cause read from the logs: the class, what it means, the line, and the
/// object it names; its reason says what following that object found, and
/// its confidence counts the independent evidence behind it.
pub(super) fn from_logs(f: &Facts<'_, '_>, found: LogCause) -> Primary {
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
pub(super) fn logs_primary(
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
pub(super) struct LogCause {
    pub(super) class: FaultClass,
    pub(super) what: &'static str,
    pub(super) line: String,
    pub(super) detail: Option<String>,
    /// The words were recognised (a known message or a family), not only
    /// a level.
    pub(super) words: bool,
    /// Found on the salient line (or the line continuing it).
    pub(super) on_salient: bool,
}

/// The known-message table, on the salient line: the line a person would
/// read first says what it is, in words drydock knows.
pub(super) fn salient_message(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn word_family(f: &Facts<'_, '_>) -> Option<Primary> {
    if !failed_on_its_own(f) {
        return None;
    }
    named_by_family(f).map(|found| from_logs(f, found))
}

/// What the salient line's family says: its words, or a write to a path
/// that following shows read-only ("Unable to create the cache directory
/// (/var/www/var/cache)" on a read-only root).
pub(super) fn named_by_family(f: &Facts<'_, '_>) -> Option<LogCause> {
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
pub(super) fn written_to_read_only(c: &ContainerView, line: &str) -> Option<words::FamilyMatch> {
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
pub(super) fn names_an_unset_variable(c: &ContainerView, line: &str) -> Option<words::FamilyMatch> {
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
pub(super) fn named_by_logs(f: &Facts<'_, '_>) -> Option<LogCause> {
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
pub fn a_restart_cannot_fix(class: FaultClass) -> bool {
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
pub(super) fn running_with_errors(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn known_message(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn command_failed(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn crash_signature(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn unrequested_signal(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn stopped(f: &Facts<'_, '_>) -> Option<Primary> {
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
pub(super) fn finished_job(f: &Facts<'_, '_>) -> bool {
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
pub(super) fn is_self(host: &str, c: &ContainerView) -> bool {
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
pub(super) fn unexplained_exit(f: &Facts<'_, '_>) -> Option<Primary> {
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
