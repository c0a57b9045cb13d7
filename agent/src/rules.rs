//! The deterministic rules engine: the embedded default diagnosis, needing no
//! model. It reads typed evidence (inspect, logs) and names causes from the
//! fault vocabulary, each citing the evidence it rests on. Log patterns are
//! one data table so they can be reviewed and tested row by row.

use std::sync::OnceLock;

use regex::Regex;

use crate::model::{Cause, ContainerView, Diagnosis, FaultClass, LogsView};

/// How many of the newest log lines the patterns look at.
const LOG_WINDOW: usize = 200;

/// The facts diagnosis rests on, with the ids of their evidence records.
pub struct Observation<'a> {
    pub container: &'a ContainerView,
    pub container_evidence: &'a str,
    pub logs: &'a LogsView,
    pub logs_evidence: &'a str,
}

/// What the engine found, plus details the planner turns into advice.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub diagnosis: Diagnosis,
    /// The log line that decided a log-based class.
    pub matched_line: Option<String>,
    /// A missing variable, a `host:port`, a path: whatever the pattern captured.
    pub detail: Option<String>,
}

struct LogRule {
    class: FaultClass,
    pattern: &'static str,
    what: &'static str,
}

/// Real wording from several runtimes per class. Order matters: the first
/// class that matches any of the window's lines wins, so specific classes
/// (configuration) come before generic ones (crash signatures).
const LOG_RULES: &[LogRule] = &[
    // Configuration: a variable or file the program needs is missing.
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"(?i)(?:missing|required|not set|undefined|unset|no value)\b[^\n]*?\b(?:environment variable|env var|env)\b[\s:`'"]*(?P<detail>[A-Z][A-Z0-9_]{1,})"#,
        what: "a required environment variable is missing",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"(?i)(?:environment variable|env var)\s*[`'"]?(?P<detail>[A-Z][A-Z0-9_]{1,})[`'"]?\s*(?:is\s+)?(?:not set|missing|required|undefined|must be set|is empty)"#,
        what: "a required environment variable is missing",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"KeyError: '(?P<detail>[A-Z][A-Z0-9_]{1,})'"#,
        what: "a required environment variable is missing (Python KeyError)",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"Could not resolve placeholder '(?P<detail>[^']+)'"#,
        what: "a Spring placeholder has no value",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"(?i)(?:invalid|bad|malformed) (?:configuration|config)|config(?:uration)? (?:error|invalid)|failed to (?:load|parse|read) config"#,
        what: "the configuration is invalid",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"Cannot find module '(?P<detail>[^']+)'|ModuleNotFoundError: No module named '(?P<detail2>[^']+)'|Error: Could not find or load main class (?P<detail3>\S+)"#,
        what: "a module or file the program needs is missing",
    },
    // Ports.
    LogRule {
        class: FaultClass::PortConflict,
        pattern: r#"(?i)address already in use|EADDRINUSE|port is already allocated|bind\(\) to \S+ failed \(98"#,
        what: "the port it binds is already in use",
    },
    // Permissions and disk.
    LogRule {
        class: FaultClass::PermissionDenied,
        pattern: r#"(?i)permission denied|EACCES|operation not permitted|PermissionError: \[Errno 13\]"#,
        what: "the process was denied access",
    },
    LogRule {
        class: FaultClass::DiskFull,
        pattern: r#"(?i)no space left on device|ENOSPC|disk (?:is )?full|could not extend file"#,
        what: "the disk is full",
    },
    // The runtime's own out-of-memory errors (the kernel's OOM kill is the
    // OOMKilled flag, checked before logs).
    LogRule {
        class: FaultClass::OomKilled,
        pattern: r#"java\.lang\.OutOfMemoryError|JavaScript heap out of memory|fatal error: runtime: out of memory|\bMemoryError\b|Cannot allocate memory|out of memory"#,
        what: "the runtime ran out of memory",
    },
    // Dependencies: refused, unresolvable, timed out.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"(?i)(?:dial tcp |connect |connecting to |at |to )?(?P<detail>[A-Za-z0-9_.\-]+:\d{2,5})?[^\n]*?(?:connection refused|ECONNREFUSED|Connection refused)"#,
        what: "a dependency refused the connection",
    },
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"(?i)(?:no such host|ENOTFOUND|Name or service not known|could not translate host name|host not found in upstream|Temporary failure in name resolution|UnknownHostException)"#,
        what: "a dependency's name does not resolve",
    },
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"(?i)(?:i/o timeout|ETIMEDOUT|connection timed out|Connect timed out)"#,
        what: "a dependency did not answer in time",
    },
    // Crash signatures not covered above.
    LogRule {
        class: FaultClass::Crash,
        pattern: r#"^panic: |thread '[^']*' panicked|Segmentation fault|SIGSEGV|Traceback \(most recent call last\)|Uncaught \w*(?:Error|Exception)|Exception in thread|^\s*FATAL|fatal error:"#,
        what: "the program crashed",
    },
];

fn compiled() -> &'static [(Regex, &'static LogRule)] {
    static RULES: OnceLock<Vec<(Regex, &'static LogRule)>> = OnceLock::new();
    RULES.get_or_init(|| {
        LOG_RULES
            .iter()
            .filter_map(|r| match Regex::new(r.pattern) {
                Ok(re) => Some((re, r)),
                Err(e) => {
                    tracing::error!(pattern = r.pattern, error = %e, "log rule does not compile; skipped");
                    None
                }
            })
            .collect()
    })
}

/// A log-based match: class, description, the line, and captured detail.
#[derive(Debug, Clone, PartialEq)]
pub struct LogMatch {
    pub class: FaultClass,
    pub what: &'static str,
    pub line: String,
    pub detail: Option<String>,
}

/// The first rule (in table order) that matches any recent line; among that
/// rule's matches the newest line wins.
pub fn match_logs(lines: &[String]) -> Option<LogMatch> {
    let start = lines.len().saturating_sub(LOG_WINDOW);
    let window = &lines[start..];
    for (re, rule) in compiled() {
        for line in window.iter().rev() {
            if let Some(caps) = re.captures(line) {
                let detail = ["detail", "detail2", "detail3"]
                    .iter()
                    .find_map(|n| caps.name(n))
                    .map(|m| m.as_str().to_string());
                return Some(LogMatch {
                    class: rule.class,
                    what: rule.what,
                    line: line.clone(),
                    detail,
                });
            }
        }
    }
    None
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

/// Diagnose one container.
pub fn diagnose(obs: &Observation<'_>) -> Finding {
    let c = obs.container;
    let ins = obs.container_evidence;
    let logs_ev = obs.logs_evidence;
    let lines: Vec<String> = obs.logs.lines.iter().map(|l| l.text.clone()).collect();
    let log_match = match_logs(&lines);
    let mut causes = Vec::new();
    let mut matched_line = None;
    let mut detail = None;
    let name = &c.name;

    if c.oom_killed {
        causes.push(cause(FaultClass::OomKilled, format!("{name} was killed by the kernel for exceeding its memory limit (State.OOMKilled=true, exit {})", c.exit_code), 0.95, &[ins]));
    } else if !c.running && docker_port_error(&c.error) {
        causes.push(cause(
            FaultClass::PortConflict,
            format!(
                "{name} could not start: Docker could not bind its published port ({})",
                c.error
            ),
            0.95,
            &[ins],
        ));
        detail = Some(c.error.clone());
    } else if c.restarting
        || (c.restart_count >= 3 && c.restart_policy != "no" && !c.restart_policy.is_empty())
    {
        causes.push(cause(
            FaultClass::CrashLoop,
            format!(
                "{name} is restarting repeatedly ({} restarts, last exit code {})",
                c.restart_count, c.exit_code
            ),
            0.9,
            &[ins],
        ));
    } else if c.running && c.health_status == "unhealthy" {
        let last_probe = c
            .health_log
            .last()
            .map(|p| p.output.trim().to_string())
            .unwrap_or_default();
        if regex_is_match(BROKEN_PROBE, &last_probe) {
            causes.push(cause(
                FaultClass::HealthcheckBroken,
                format!("the healthcheck of {name} cannot run: {last_probe}"),
                0.9,
                &[ins],
            ));
            detail = Some(last_probe);
        } else {
            causes.push(cause(
                FaultClass::Unhealthy,
                format!("{name} is running but its healthcheck fails ({} failures in a row; last probe: {})", c.failing_streak, if last_probe.is_empty() { "no output".into() } else { last_probe }),
                0.85,
                &[ins],
            ));
        }
    } else if c.running {
        causes.push(cause(
            FaultClass::Healthy,
            format!(
                "{name} is running{}",
                if c.health_status == "healthy" {
                    " and its healthcheck passes"
                } else {
                    ""
                }
            ),
            0.8,
            &[ins],
        ));
    } else if let Some(m) = log_match
        .clone()
        .filter(|m| m.class != FaultClass::Crash || c.exit_code != 0)
    {
        causes.push(cause(
            m.class,
            format!(
                "{name} exited with code {}: {} (log: \"{}\")",
                c.exit_code, m.what, m.line
            ),
            0.85,
            &[ins, logs_ev],
        ));
        matched_line = Some(m.line);
        detail = m.detail;
    } else if c.exit_code == 0 || ((c.exit_code == 137 || c.exit_code == 143) && !c.oom_killed) {
        let how = if c.exit_code == 0 {
            "exited cleanly (code 0)".to_string()
        } else {
            format!(
                "was stopped by a signal (exit {}, not an OOM kill)",
                c.exit_code
            )
        };
        causes.push(cause(
            FaultClass::Stopped,
            format!("{name} is not running: it {how}"),
            0.8,
            &[ins],
        ));
    } else {
        causes.push(cause(
            FaultClass::Crash,
            format!(
                "{name} exited with code {} and its logs name no known cause",
                c.exit_code
            ),
            0.6,
            &[ins, logs_ev],
        ));
    }

    // A running-but-unhealthy or crash-looping container often says why in
    // its logs: report that as a secondary cause.
    if let (Some(first), Some(m)) = (causes.first(), &log_match) {
        if matches!(first.class, FaultClass::Unhealthy | FaultClass::CrashLoop)
            && m.class != first.class
        {
            causes.push(cause(
                m.class,
                format!("its logs show {}: \"{}\"", m.what, m.line),
                0.6,
                &[logs_ev],
            ));
            matched_line = Some(m.line.clone());
            detail = detail.or(m.detail.clone());
        }
    }

    let primary = causes
        .first()
        .cloned()
        .unwrap_or_else(|| cause(FaultClass::Unknown, "no evidence".into(), 0.1, &[ins]));
    let diagnosis = Diagnosis {
        summary: primary.reason.clone(),
        confidence: primary.confidence,
        causes,
        engine: "rules".into(),
    };
    Finding {
        diagnosis,
        matched_line,
        detail,
    }
}

fn regex_is_match(pattern: &str, text: &str) -> bool {
    Regex::new(pattern)
        .map(|r| r.is_match(text))
        .unwrap_or(false)
}

/// Docker's own wording (State.Error) when it cannot bind a published port.
fn docker_port_error(text: &str) -> bool {
    regex_is_match(
        r"(?i)port is already allocated|address already in use|failed programming external connectivity",
        text,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{HealthProbeView, LogLineView};

    #[test]
    fn log_pattern_table() {
        let rows: &[(&str, FaultClass, Option<&str>)] = &[
            ("Error: missing required environment variable DATABASE_URL", FaultClass::ConfigError, Some("DATABASE_URL")),
            ("panic: required env var REDIS_URL is not set", FaultClass::ConfigError, Some("REDIS_URL")),
            ("environment variable \"API_KEY\" is not set", FaultClass::ConfigError, Some("API_KEY")),
            ("KeyError: 'SECRET_KEY'", FaultClass::ConfigError, Some("SECRET_KEY")),
            ("Caused by: java.lang.IllegalArgumentException: Could not resolve placeholder 'db.url' in value \"${db.url}\"", FaultClass::ConfigError, Some("db.url")),
            ("Error: Cannot find module '/app/server.js'", FaultClass::ConfigError, Some("/app/server.js")),
            ("ModuleNotFoundError: No module named 'flask'", FaultClass::ConfigError, Some("flask")),
            ("listen tcp :8080: bind: address already in use", FaultClass::PortConflict, None),
            ("Error: listen EADDRINUSE: address already in use :::3000", FaultClass::PortConflict, None),
            ("nginx: [emerg] bind() to 0.0.0.0:80 failed (98: Address already in use)", FaultClass::PortConflict, None),
            ("open /data/app.db: permission denied", FaultClass::PermissionDenied, None),
            ("PermissionError: [Errno 13] Permission denied: '/var/log/app.log'", FaultClass::PermissionDenied, None),
            ("write /data/x: no space left on device", FaultClass::DiskFull, None),
            ("PANIC:  could not write to file \"pg_wal/xlogtemp.32\": No space left on device", FaultClass::DiskFull, None),
            ("Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space", FaultClass::OomKilled, None),
            ("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", FaultClass::OomKilled, None),
            ("dial tcp 172.18.0.2:5432: connect: connection refused", FaultClass::DependencyUnavailable, Some("172.18.0.2:5432")),
            ("Error: connect ECONNREFUSED 10.0.0.5:6379", FaultClass::DependencyUnavailable, None),
            ("psycopg2.OperationalError: could not translate host name \"db\" to address: Name or service not known", FaultClass::DependencyUnavailable, None),
            ("connect() failed (111: Connection refused) while connecting to upstream", FaultClass::DependencyUnavailable, None),
            ("dial tcp: lookup db on 127.0.0.11:53: no such host", FaultClass::DependencyUnavailable, None),
            ("java.net.ConnectException: Connection refused", FaultClass::DependencyUnavailable, None),
            ("thread 'main' panicked at src/main.rs:3:5", FaultClass::Crash, None),
            ("Traceback (most recent call last):", FaultClass::Crash, None),
            ("INFO server started", FaultClass::Unknown, None),
        ];
        for (line, class, detail) in rows {
            let got = match_logs(&[line.to_string()]);
            match got {
                None => assert_eq!(*class, FaultClass::Unknown, "{line}: no match"),
                Some(m) => {
                    assert_eq!(m.class, *class, "{line}");
                    if let Some(d) = detail {
                        assert_eq!(m.detail.as_deref(), Some(*d), "{line}");
                    }
                }
            }
        }
    }

    fn view() -> ContainerView {
        ContainerView {
            name: "web".into(),
            status: "running".into(),
            running: true,
            health_status: "none".into(),
            ..Default::default()
        }
    }

    fn run(c: &ContainerView, lines: &[&str]) -> Finding {
        let logs = LogsView {
            lines: lines
                .iter()
                .map(|l| LogLineView {
                    stream: "stderr".into(),
                    text: l.to_string(),
                })
                .collect(),
            ..Default::default()
        };
        diagnose(&Observation {
            container: c,
            container_evidence: "ev-1",
            logs: &logs,
            logs_evidence: "ev-2",
        })
    }

    #[test]
    fn state_rules_table() {
        let exited = |code: i64| ContainerView {
            running: false,
            status: "exited".into(),
            exit_code: code,
            ..view()
        };
        let rows: Vec<(ContainerView, Vec<&str>, FaultClass)> = vec![
            (view(), vec![], FaultClass::Healthy),
            (ContainerView { health_status: "unhealthy".into(), failing_streak: 3, health_log: vec![HealthProbeView { exit_code: 1, output: "HTTP 503".into() }], ..view() }, vec![], FaultClass::Unhealthy),
            (ContainerView { health_status: "unhealthy".into(), health_log: vec![HealthProbeView { exit_code: 127, output: "OCI runtime exec failed: exec: \"curl\": executable file not found in $PATH".into() }], ..view() }, vec![], FaultClass::HealthcheckBroken),
            (exited(0), vec![], FaultClass::Stopped),
            (exited(137), vec![], FaultClass::Stopped),
            (ContainerView { oom_killed: true, ..exited(137) }, vec![], FaultClass::OomKilled),
            (exited(1), vec!["Error: missing required environment variable DATABASE_URL"], FaultClass::ConfigError),
            (exited(2), vec!["something odd"], FaultClass::Crash),
            (ContainerView { restarting: true, restart_count: 5, ..exited(1) }, vec![], FaultClass::CrashLoop),
            (ContainerView { error: "driver failed programming external connectivity on endpoint x: Bind for 0.0.0.0:8080 failed: port is already allocated".into(), ..exited(128) }, vec![], FaultClass::PortConflict),
        ];
        for (c, lines, want) in rows {
            let f = run(&c, &lines);
            assert_eq!(f.diagnosis.causes[0].class, want, "{c:?}");
            assert!(!f.diagnosis.causes[0].evidence_ids.is_empty());
        }
        let f = run(
            &exited(1),
            &["Error: missing required environment variable DATABASE_URL"],
        );
        assert_eq!(f.detail.as_deref(), Some("DATABASE_URL"));
        assert_eq!(f.diagnosis.causes[0].evidence_ids, ["ev-1", "ev-2"]);
    }
}
