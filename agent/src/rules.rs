//! The deterministic rules engine: the embedded default diagnosis, needing no
//! model. It reads typed evidence (inspect, logs) and names causes from the
//! fault vocabulary, each citing the evidence it rests on. Log patterns are
//! one data table so they can be reviewed and tested row by row.

use std::sync::OnceLock;

use regex::Regex;

use crate::model::ContainerEvent;
use crate::model::{Cause, Change, ContainerView, Diagnosis, FaultClass, LogsView};

pub mod events;
pub mod past;
pub mod question;

pub use past::PastDeath;
pub use question::{is_question, AskedTime};

/// How many of the newest log lines the patterns look at.
const LOG_WINDOW: usize = 200;

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
}

struct LogRule {
    class: FaultClass,
    pattern: &'static str,
    what: &'static str,
}

/// Real wording from several runtimes per class. Which line decides is
/// `match_logs`' rule: the newest line any row matches (crash signatures only
/// when nothing else matched). Row order matters within one line: where a
/// line matches several rows, the first row wins, so specific rows (those
/// that name a variable, a host, a path) come before generic ones.
const LOG_RULES: &[LogRule] = &[
    // ---- Configuration: something the program needs was not given. ----
    // Rows that name the missing variable come first, so the advice can name
    // it too. The official database images refuse to initialize without a
    // password: postgres "You must specify POSTGRES_PASSWORD to a non-empty
    // value", mysql <= 8.0.33 and mariadb "You need to specify one of
    // MYSQL_ROOT_PASSWORD, ...", mysql >= 8.0.34 a "- MYSQL_ROOT_PASSWORD"
    // list line (the root password is the one to set, not the list's last).
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"You must specify (?P<detail>[A-Z][A-Z0-9_]+) (?:to|for)\b|You need to specify one of (?P<detail2>[A-Z][A-Z0-9_]+)|^\s*- (?P<detail3>(?:MYSQL|MARIADB)_ROOT_PASSWORD)\s*$"#,
        what:
            "the image's entrypoint refuses to initialize without a required environment variable",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"(?i)(?:missing|required|not set|undefined|unset|no value)\b[^\n]*?\b(?:environment variable|env var|env)\b[\s:`'"]*(?P<detail>(?-i:[A-Z][A-Z0-9_]{1,}))"#,
        what: "a required environment variable is missing",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"(?i)(?:environment variable|env var)\s*[`'"]?(?P<detail>(?-i:[A-Z][A-Z0-9_]{1,}))[`'"]?\s*(?:is\s+)?(?:not set|missing|required|undefined|must be set|is empty)"#,
        what: "a required environment variable is missing",
    },
    // "Missing SUPABASE_KEY environment variable" (Node apps),
    // "Set the DATABASE_URL environment variable" (django-environ).
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"(?i:missing|required|set|provide|define)\s+(?i:or invalid\s+)?(?i:the\s+|your\s+)?(?P<detail>[A-Z][A-Z0-9_]{1,})\s+(?i:environment variable|env var)"#,
        what: "a required environment variable is missing",
    },
    // A shell entrypoint's `${VAR:?}`: bash "VAR: parameter null or not set",
    // dash "VAR: parameter not set or null".
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"\b(?P<detail>[A-Z][A-Z0-9_]{1,}): parameter (?:null or not set|not set or null|not set)"#,
        what: "a required environment variable is missing (the entrypoint script checks it)",
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
    // The entrypoints' summary line, for logs cut before the line that names
    // the variable.
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"Database is uninitialized and (?:superuser )?password (?:option )?is not specified"#,
        what: "the database image was started without a password variable",
    },
    // The server is up and answered: wrong credentials or names are a
    // configuration fault, not an outage (postgres and libpq clients,
    // mysql/mariadb).
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"password authentication failed for user|Access denied for user '[^']*'@|(?:database|role) "[^"]+" does not exist|Unknown database '[^']+'"#,
        what: "the server rejected the configured credentials or database name",
    },
    // Invalid configuration files: redis, nginx, Spring Boot's failure
    // analysis for a missing datasource, and generic wording.
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"(?i)(?:invalid|bad|malformed) (?:configuration|config)|config(?:uration)? (?:error|invalid)|failed to (?:load|parse|read) config|FATAL CONFIG FILE ERROR|Bad directive or wrong number of arguments|\[emerg\] unknown directive|directive is not allowed here|invalid number of arguments in "[^"]+" directive|Failed to configure a DataSource"#,
        what: "the configuration is invalid or incomplete",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"Cannot find module '(?P<detail>[^']+)'|ModuleNotFoundError: No module named '(?P<detail2>[^']+)'|Error: Could not find or load main class (?P<detail3>\S+)"#,
        what: "a module or file the program needs is missing",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"\[emerg\] open\(\) "(?P<detail>[^"]+)" failed \(2: No such file or directory\)|Unable to access jarfile (?P<detail2>\S+)"#,
        what: "a file the program needs is missing",
    },
    // A file read at start is missing: Node's ENOENT, Python's
    // FileNotFoundError, Go's os.Open error.
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"ENOENT: no such file or directory, (?:open|stat|scandir|lstat) '(?P<detail>[^']+)'|FileNotFoundError: \[Errno 2\] No such file or directory: '(?P<detail2>[^']+)'|open (?P<detail3>/\S+): no such file or directory"#,
        what: "a file the program reads at start is missing",
    },
    // TLS: Go's x509 errors, Node's, Python's ssl module, the JVM's PKIX.
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"x509: certificate has expired or is not yet valid|x509: certificate signed by unknown authority|CERT_HAS_EXPIRED|UNABLE_TO_VERIFY_LEAF_SIGNATURE|SELF_SIGNED_CERT_IN_CHAIN|self[- ]signed certificate in certificate chain|\[SSL: CERTIFICATE_VERIFY_FAILED\]|certificate verify failed|PKIX path building failed|CertificateExpiredException"#,
        what: "a TLS certificate is expired or not trusted",
    },
    // The image's binary is for another CPU: runc, as Docker logs it.
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"exec (?P<detail>\S+): exec format error|exec user process caused:? "?exec format error|exec format error"#,
        what: "the image is built for another CPU architecture (exec format error)",
    },
    // ---- Ports: the address it binds is taken. ----
    // Rows that name the port first: Go, Node, nginx; Spring Boot;
    // redis; the mysqld and postgres hints.
    LogRule {
        class: FaultClass::PortConflict,
        pattern: r#"listen tcp (?P<detail>\S*:\d+): bind: address already in use|EADDRINUSE: address already in use (?P<detail2>\S+)|bind\(\) to (?P<detail3>\S+) failed \(98"#,
        what: "the port it binds is already in use",
    },
    LogRule {
        class: FaultClass::PortConflict,
        pattern: r#"Port (?P<detail>\d+) was already in use|connector configured to listen on port (?P<detail2>\d+) failed to start|TCP listening socket (?P<detail3>\S+): bind: Address already in use"#,
        what: "the port it binds is already in use",
    },
    LogRule {
        class: FaultClass::PortConflict,
        pattern: r#"another (?:mysqld server|postmaster) (?:already )?running on port:? (?P<detail>\d+)|Connection in use: \('[^']*', (?P<detail2>\d+)\)"#,
        what: "the port it binds is already in use",
    },
    LogRule {
        class: FaultClass::PortConflict,
        pattern: r#"(?i)address already in use|EADDRINUSE|port is already allocated"#,
        what: "the port it binds is already in use",
    },
    // ---- Permissions and disk. ----
    // Also postgres' data directory checks and mysqld's writability check.
    LogRule {
        class: FaultClass::PermissionDenied,
        pattern: r#"(?i)permission denied|EACCES|operation not permitted|PermissionError: \[Errno 13\]|AccessDeniedException|has wrong ownership|has invalid permissions|data directory exists and is not writable"#,
        what: "the process was denied access",
    },
    LogRule {
        class: FaultClass::DiskFull,
        pattern: r#"(?i)no space left on device|ENOSPC|disk (?:is )?full|could not extend file|Check free disk space"#,
        what: "the disk is full",
    },
    // The runtime's own out-of-memory errors (the kernel's OOM kill is the
    // OOMKilled flag, checked before logs): JVM, V8, Go, Python and numpy,
    // postgres ("ERROR:  out of memory").
    LogRule {
        class: FaultClass::OomKilled,
        pattern: r#"java\.lang\.OutOfMemoryError|JavaScript heap out of memory|fatal error: runtime: out of memory|\bMemoryError\b|_ArrayMemoryError|Unable to allocate [\d.]+ [KMGTPE]?i?B for an array|Cannot allocate memory|(?i:out of memory)"#,
        what: "the runtime ran out of memory",
    },
    // ---- Dependencies: refused, unresolvable, timed out. ----
    // Client wording that names the dependency comes first: the host (and
    // port, where the message has both together) becomes the detail.
    // node-redis and redis-py name the configured host:port.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"Redis connection to (?P<detail>\S+) failed|Error -?\d+ connecting to (?P<detail2>\S+?)\.(?:\s|$)"#,
        what: "the Redis dependency cannot be reached",
    },
    // libpq (psycopg, node-pg's native binding, psql) before 14 put the host
    // on its own line; 14+ names it in the first.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"Is the server running on host "(?P<detail>[^"]+)"|connection to server at "(?P<detail2>[^"]+)" \([^)]*\), port \d+ failed: (?:Connection refused|Connection timed out|No route to host|timeout expired)"#,
        what: "the PostgreSQL dependency refused the connection or is not running",
    },
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"Can't connect to MySQL server on '(?P<detail>[^']+)'"#,
        what: "the MySQL dependency cannot be reached",
    },
    // Go net.Dial, Node net, PgJDBC.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"dial tcp (?P<detail>\S+): connect: connection refused|connect ECONNREFUSED (?P<detail2>\S+)|Connection to (?P<detail3>\S+) refused\. Check that the hostname and port are correct"#,
        what: "a dependency refused the connection",
    },
    // nginx names the upstream at the end of its error line.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"connect\(\) failed \(111: Connection refused\) while connecting to upstream.*?upstream: "[a-z]+://(?P<detail>[^/"]+)"#,
        what: "an upstream refused the connection",
    },
    // Go's resolver, Node's getaddrinfo, libpq.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"lookup (?P<detail>[^\s:]+)(?: on \S+)?: (?:no such host|server misbehaving|Temporary failure in name resolution)|getaddrinfo (?:ENOTFOUND|EAI_AGAIN) (?P<detail2>[^\s:]+)|could not translate host name "(?P<detail3>[^"]+)" to address"#,
        what: "a dependency's name does not resolve",
    },
    // nginx, the JVM, mysql clients, psycopg 3.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"host not found in upstream "(?P<detail>[^"]+)"|java\.net\.UnknownHostException: (?P<detail2>[^\s:]+)|Unknown MySQL server host '(?P<detail3>[^']+)'"#,
        what: "a dependency's name does not resolve",
    },
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"failed to resolve host '(?P<detail>[^']+)'"#,
        what: "a dependency's name does not resolve",
    },
    // A resolver that failed rather than said no: SERVFAIL, or the DNS
    // server timing out (Go names the server, Node says EAI_AGAIN).
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"lookup (?P<detail>[^\s:]+) on \S+: (?:read udp \S+: i/o timeout|dial udp \S+: i/o timeout)|(?i:SERVFAIL)|server failure in name resolution|status: SERVFAIL"#,
        what: "the DNS server failed to resolve a dependency (SERVFAIL or timeout)",
    },
    // The peer closed the connection mid-way: Go, Node, Python, the JVM.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"read tcp \S+->(?P<detail>\S+): read: connection reset by peer|(?:read )?ECONNRESET|ConnectionResetError: \[Errno 104\]|java\.net\.SocketException: Connection reset|(?i:connection reset by peer)"#,
        what: "a dependency reset the connection",
    },
    // Go and Node timeouts.
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"dial tcp (?P<detail>\S+): (?:i/o timeout|connect: connection timed out)|connect ETIMEDOUT (?P<detail2>\S+)"#,
        what: "a dependency did not answer in time",
    },
    // Generic wording that names nothing (java.net.ConnectException, ...).
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"(?i)connection refused|ECONNREFUSED"#,
        what: "a dependency refused the connection",
    },
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"(?i)(?:no such host|ENOTFOUND|Name or service not known|Name does not resolve|could not translate host name|host not found in upstream|Temporary failure in name resolution|UnknownHostException)"#,
        what: "a dependency's name does not resolve",
    },
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"(?i)(?:i/o timeout|ETIMEDOUT|connection timed out|Connect timed out|no route to host|EHOSTUNREACH)"#,
        what: "a dependency did not answer in time or cannot be routed to",
    },
    // ---- Crash signatures not covered above. The panic or exception line
    // itself first (Go and Rust panics; the last line of a Python
    // traceback; Node's and the JVM's uncaught errors; Spring Boot), so the
    // reason quotes it rather than a trailer. ----
    LogRule {
        class: FaultClass::Crash,
        pattern: r#"^panic: |thread '[^']*' panicked|^(?:[A-Za-z_][\w$]*\.)*[A-Za-z_][\w$]*(?:Error|Exception)(?::\s|$)|Exception in thread|Uncaught \w*(?:Error|Exception)|Application run failed"#,
        what: "the program crashed",
    },
    // Signals, redis' crash report, a traceback's first line, Node's
    // trailer ("Node.js vX" is printed last), FATAL lines.
    LogRule {
        class: FaultClass::Crash,
        pattern: r#"Segmentation fault|SIGSEGV|crashed by signal|Traceback \(most recent call last\)|triggerUncaughtException|^Node\.js v\d+\.\d+|^\s*FATAL|fatal error:"#,
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

fn log_match(line: &str, re: &Regex, rule: &'static LogRule) -> Option<LogMatch> {
    let caps = re.captures(line)?;
    let detail = ["detail", "detail2", "detail3"]
        .iter()
        .find_map(|n| caps.name(n))
        .map(|m| m.as_str().to_string());
    Some(LogMatch {
        class: rule.class,
        what: rule.what,
        line: line.to_string(),
        detail,
    })
}

/// The cause nearest the exit: the newest line of the window that a rule
/// matches decides the class (on one line, table order: specific rows
/// before generic ones). Crash signatures (panics, tracebacks, trailers)
/// count only when no other class matched, since they follow the line that
/// says why; among them table order wins (the panic or exception line
/// before a runtime's trailer). Within the chosen class, the newest line
/// whose row names a detail (a variable, a host, a path) is quoted, so
/// advice can name it.
pub fn match_logs(lines: &[String]) -> Option<LogMatch> {
    let start = lines.len().saturating_sub(LOG_WINDOW);
    let window = &lines[start..];
    let rules = compiled();
    let newest_cause = window.iter().rev().find_map(|line| {
        rules
            .iter()
            .filter(|(_, r)| r.class != FaultClass::Crash)
            .find_map(|(re, r)| log_match(line, re, r))
    });
    let crash = || {
        rules
            .iter()
            .filter(|(_, r)| r.class == FaultClass::Crash)
            .find_map(|(re, r)| window.iter().rev().find_map(|line| log_match(line, re, r)))
    };
    let found = newest_cause.or_else(crash)?;
    if found.detail.is_some() {
        return Some(found);
    }
    let with_detail = window.iter().rev().find_map(|line| {
        rules
            .iter()
            .filter(|(_, r)| r.class == found.class)
            .find_map(|(re, r)| log_match(line, re, r).filter(|m| m.detail.is_some()))
    });
    Some(with_detail.unwrap_or(found))
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
    if !(c.running && c.health_status == "unhealthy") {
        return None;
    }
    let last_probe = c
        .health_log
        .last()
        .map(|p| p.output.trim().to_string())
        .unwrap_or_default();
    if regex_is_match(BROKEN_PROBE, &last_probe) {
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
                if f.c.health_status == "healthy" {
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
            if stop.action == "kill" {
                "`docker kill`/`stop` sent signal "
            } else {
                "`docker stop`"
            },
            stop.signal,
            c.exit_code
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
    let mut causes = vec![first.cause];
    let mut matched_line = first.matched_line;
    let mut detail = first.detail;

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
    }
}

/// A reason as a sentence of a summary: ends with a full stop.
fn sentence(reason: &str) -> String {
    let reason = reason.trim_end();
    if reason.ends_with(['.', '!', '?']) {
        reason.to_string()
    } else {
        format!("{reason}.")
    }
}

fn regex_is_match(pattern: &str, text: &str) -> bool {
    Regex::new(pattern)
        .map(|r| r.is_match(text))
        .unwrap_or(false)
}

/// Why the engine could not start a container, from `State.Error`: its own
/// disk is full, the image's binary is for another CPU, the image is gone.
fn engine_error(text: &str) -> Option<(FaultClass, &'static str)> {
    if text.is_empty() {
        return None;
    }
    if regex_is_match(r"(?i)no space left on device", text) {
        return Some((
            FaultClass::DiskFull,
            "the engine found no space left to set up its filesystem",
        ));
    }
    if regex_is_match(r"(?i)exec format error", text) {
        return Some((
            FaultClass::ConfigError,
            "the image is built for another CPU architecture",
        ));
    }
    if regex_is_match(
        r"(?i)No such image|pull access denied|manifest unknown|repository does not exist",
        text,
    ) {
        return Some((FaultClass::ConfigError, "its image is missing"));
    }
    None
}

/// Docker's own wording (State.Error) when it cannot bind a published port.
fn docker_port_error(text: &str) -> bool {
    regex_is_match(
        r"(?i)port is already allocated|address already in use|failed programming external connectivity",
        text,
    )
}

#[cfg(test)]
mod tests;
