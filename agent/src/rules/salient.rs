//! The salient line: what a person reading the logs of a dead container
//! looks at first. Not the line a known message matches, but the newest
//! line of the highest severity in the run that died, with stack frames,
//! runtime trailers and "exiting" lines passed over, read together with
//! the line after it (an exception's message, a panic's cause).

use std::sync::LazyLock;

use regex::Regex;

use super::words::{self, FamilyMatch};

/// How bad a line says it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Info,
    Warn,
    Error,
    Fatal,
}

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

/// An explicit level: a log framework's own word for it.
static LEVEL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r#"(?x)
        \b(?P<upper>TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|CRITICAL|CRIT|PANIC|EMERG|ALERT|SEVERE)\b
        | level=(?P<kv>\w+)
        | "(?:level|severity|lvl)"\s*:\s*"(?P<json>\w+)"
        | \[(?P<bracket>(?i:debug|info|note|notice|warn|warning|error|crit|alert|emerg|fatal|system))\]
        | ^(?P<glog>[IWEF])(?:\d{4})?\d{4}\s
        | ^(?P<dotnet>info|warn|fail|crit|dbug|trce):\s
        | ^(?P<lead>(?i:warning|error|fatal)):\s
    "#)
});
/// No level given: the words of a failure.
static FAILURE_WORDS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"(?i)\berror\b|\bexception\b|\bfailed\b|\bfailure\b|\bcannot\b|\bcan't\b|\bunable to\b|\bcould not\b|\w+(?:Error|Exception)\b|\brefused\b|\brefus(?:e|es|ing) to\b|\bdenied\b|\babort(?:ed|ing)?\b|^Traceback"#,
    )
});
static FATAL_WORDS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r#"(?i)^panic:|\bpanicked\b|\bfatal\b|segmentation fault|core dumped|Unhandled exception"#)
});
/// Stack frames and runtime trailers: never the salient line.
static FRAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r#"(?x)
        ^\s*$
        | ^\s+at\s | ^\s*at\s+[\w.$<>]+\(
        | ^\s+File\s".*",\s+line\s\d+
        | ^\s*goroutine\s\d+ | ^\s*[\w./-]+\.go:\d+ | ^\s*created\sby\s
        | ^\s*\.\.\.\s\d+\smore | ^Node\.js\sv\d+ | ^note:\srun\swith
        | ^\s+\^+\s*$ | ^\s{4,}\S | ^\t
        | ^\s*\{\s*$ | ^\s*\}\s*$ | ^\s*(?:errno|code|syscall|path|address|port):\s
        | ^Traceback\s\(most\srecent\scall\slast\)
    "#)
});
/// A line that says the program went on despite what it names ("cannot
/// create /x (Read-only file system); treating this as a first boot",
/// "… not found, using defaults"): what it names is no cause of a
/// failure.
static CARRIED_ON: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r"(?i)\btreating (?:this|it) as\b|\busing (?:the )?defaults?\b|\bfall(?:ing)? ?back\b|\bignor(?:e|ed|ing)\b|\bskipp(?:ed|ing)\b|\bcontinuing (?:without|anyway)\b|\bproceeding without\b",
    )
});

pub(super) fn carried_on(line: &str) -> bool {
    CARRIED_ON.as_ref().is_some_and(|r| r.is_match(line))
}

/// A line that only says it is stopping.
static EXITING: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"(?i)^\W*(?:\S+\s+){0,4}(?:exiting|exit(?:ed)?(?: with)?(?: status| code)? ?-?\d*|shutting down|stopping|stopped|terminating|goodbye|bye|aborting)\W*$|exit status \d+\s*$|^Killed$"#,
    )
});

fn level_of(line: &str) -> Option<Severity> {
    let caps = LEVEL.as_ref()?.captures(line)?;
    let word = ["upper", "kv", "json", "bracket", "glog", "dotnet", "lead"]
        .iter()
        .find_map(|n| caps.name(n))?
        .as_str()
        .to_ascii_lowercase();
    Some(match word.as_str() {
        "trace" | "debug" | "dbug" | "trce" | "info" | "note" | "notice" | "system" | "i" => {
            Severity::Info
        }
        "warn" | "warning" | "w" => Severity::Warn,
        "error" | "err" | "e" | "fail" | "severe" => Severity::Error,
        "fatal" | "critical" | "crit" | "panic" | "emerg" | "alert" | "f" => Severity::Fatal,
        _ => return None,
    })
}

/// The severity `line` states, or its words imply when it states none.
pub fn severity(line: &str) -> Severity {
    let matches = |r: &LazyLock<Option<Regex>>| r.as_ref().is_some_and(|r| r.is_match(line));
    if let Some(level) = level_of(line) {
        // `INFO ... panic:` is still a panic.
        return if matches(&FATAL_WORDS) && level < Severity::Error {
            Severity::Error
        } else {
            level
        };
    }
    if matches(&FATAL_WORDS) {
        Severity::Fatal
    } else if matches(&FAILURE_WORDS) {
        Severity::Error
    } else {
        Severity::Info
    }
}

/// An indented line that is a stack frame by its shape (`at …`,
/// `File "…", line N`, `main.go:12`), not a wrapped message.
static STACK_FRAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r#"(?x)
        ^\s+at\s | ^\s*at\s+[\w.$<>]+\( | ^\s+File\s".*",\s+line\s\d+
        | ^\s*goroutine\s\d+ | ^\s*[\w./-]+\.go:\d+ | ^\s*created\sby\s
        | ^\s*\.\.\.\s\d+\smore | ^\s*\#\d+\s | ^\s*\(\S+\s[\d.]+\)\s | \w\.\w+\(.*\)\s*$
        | ^\s*[\w./-]+:\d+:
    "#)
});
/// An indented line that starts with its own level (`    Error: …`):
/// a message, however far it is indented.
static LEVELLED: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"^\s+(?i:error|fatal|warning|warn|critical|exception|panic)\b[:!]"));

fn is_frame(line: &str) -> bool {
    FRAME.as_ref().is_some_and(|r| r.is_match(line))
        && !LEVELLED.as_ref().is_some_and(|r| r.is_match(line))
}

/// An indented line after a message that carries on its words (a message
/// wrapped to a width, a box of advice), not a stack frame.
fn carries_on(line: &str) -> bool {
    line.starts_with(char::is_whitespace)
        && !line.trim().is_empty()
        && !STACK_FRAME.as_ref().is_some_and(|r| r.is_match(line))
}

fn is_exiting(line: &str) -> bool {
    EXITING.as_ref().is_some_and(|r| r.is_match(line.trim()))
}

/// The salient line of a run, with the family its words (and the line
/// after it) belong to.
#[derive(Debug, Clone, PartialEq)]
pub struct Salient {
    pub line: String,
    /// What it says: the line, and the lines after it when the line itself
    /// is only a header (`[error] <0.235.0>` with the message below).
    pub message: String,
    /// Where it is in the lines given.
    pub index: usize,
    pub severity: Severity,
    pub family: Option<FamilyMatch>,
}

/// Words of a line that say something: not its time, level, process id
/// or logger.
fn content_words(line: &str) -> usize {
    line.split(|c: char| !c.is_ascii_alphabetic())
        .filter(|w| w.len() >= 3)
        .filter(|w| {
            !matches!(
                w.to_ascii_lowercase().as_str(),
                "error"
                    | "err"
                    | "fatal"
                    | "warn"
                    | "warning"
                    | "info"
                    | "crit"
                    | "critical"
                    | "notice"
                    | "debug"
            )
        })
        .count()
}

/// The line at `i`, with the lines after it when it is only a header.
fn message_at(lines: &[&str], i: usize) -> String {
    let line = lines[i].trim();
    // "Syntax error on line 267 of httpd.conf:" says where; the line
    // after it says what.
    if line.ends_with(':') {
        if let Some(next) = lines
            .get(i + 1)
            .filter(|n| !n.trim().is_empty() && !is_frame(n))
        {
            return format!("{line} {}", next.trim());
        }
    }
    // A message wrapped onto indented lines is read whole.
    let wrapped: Vec<&str> = lines
        .iter()
        .skip(i + 1)
        .take_while(|l| carries_on(l))
        .take(6)
        .map(|l| l.trim())
        .collect();
    if !wrapped.is_empty() && content_words(line) >= 3 {
        return std::iter::once(line)
            .chain(wrapped)
            .collect::<Vec<_>>()
            .join(" ");
    }
    if content_words(line) >= 3 {
        return line.to_string();
    }
    let below: Vec<&str> = lines
        .iter()
        .skip(i + 1)
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
        .take(4)
        .collect();
    std::iter::once(line)
        .chain(below)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The line after `i` that continues it (an exception's message on the
/// next line), if any.
fn continuation(lines: &[&str], i: usize) -> Option<String> {
    let next = lines.get(i + 1)?;
    (!is_frame(next) && !next.trim().is_empty() && severity(next) >= Severity::Warn)
        .then(|| next.to_string())
}
/// Whether two lines name the same path (a warning and the error it
/// led to: PHP's `require(/app/x.php)` warning and its fatal error).
fn same_object(a: &str, b: &str) -> bool {
    let a = super::objects::extract(a).paths;
    let b = super::objects::extract(b).paths;
    a.iter().any(|p| b.contains(p))
}

/// A line's index, severity and family.
type Candidate = (usize, Severity, Option<FamilyMatch>);

/// The salient line of `lines` (the run that died, oldest first).
///
/// A program that fails usually logs a burst of errors at its end: the
/// first one that names a failure is the cause, the rest its consequences
/// (MariaDB's permission error, then the lock it could not take, then
/// "Aborting"). So within that final burst (the last lines that are all
/// warnings or worse, with frames and "exiting" lines passed over), the
/// earliest error whose words belong to a family is salient. Without one,
/// the newest fatal line, else the newest error, else the newest warning
/// of a family, else a bare warning of the final burst, else the newest
/// line of a family, else the last line that says anything.
pub fn salient(lines: &[&str]) -> Option<Salient> {
    let candidates: Vec<Candidate> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| !is_frame(l))
        .map(|(i, l)| (i, severity(l), words::family(l).filter(|_| !carried_on(l))))
        .collect();
    // A line that only says it is stopping, or says nothing but its time
    // and level, is passed over while anything else is there.
    let meaningful =
        |(i, _, _): &&Candidate| !is_exiting(lines[*i]) && content_words(lines[*i]) >= 2;
    let newest = |pred: &dyn Fn(&Candidate) -> bool| {
        candidates
            .iter()
            .filter(meaningful)
            .rev()
            .find(|c| pred(c))
            .copied()
    };
    let burst: Vec<&Candidate> = candidates
        .iter()
        .rev()
        .take_while(|c| {
            c.1 >= Severity::Warn || is_exiting(lines[c.0]) || content_words(lines[c.0]) < 2
        })
        .filter(meaningful)
        .collect();
    // Said as an error first; else a warning of the burst that names a
    // failure the error after it does not (PHP's "Warning: require(…):
    // No such file or directory" before its "Fatal error: require()").
    let newest_error = newest(&|c| c.1 >= Severity::Error);
    let first_named = burst
        .iter()
        .rev()
        .find(|c| c.1 >= Severity::Error && c.2.is_some())
        .or_else(|| {
            burst.iter().rev().find(|c| {
                c.1 == Severity::Warn
                    && c.2.is_some()
                    && newest_error.is_none_or(|e| same_object(lines[c.0], lines[e.0]))
            })
        })
        .map(|c| **c);
    let chosen = first_named
        .or_else(|| newest(&|c| c.1 == Severity::Fatal))
        .or_else(|| newest(&|c| c.1 == Severity::Error))
        // A warning that names a failure outranks one that does not.
        .or_else(|| newest(&|c| c.1 == Severity::Warn && c.2.is_some()))
        // A bare warning only where nothing but warnings came after it: one
        // the program went on from is not what it died of.
        .or_else(|| burst.first().filter(|c| c.1 == Severity::Warn).map(|c| **c))
        .or_else(|| newest(&|c| c.2.is_some()))
        .or_else(|| {
            candidates
                .iter()
                .rev()
                .find(|c| !lines[c.0].trim().is_empty())
                .copied()
        })?;
    let (index, sev, family) = chosen;
    let message = message_at(lines, index);
    let family = family
        .or_else(|| words::family(&message))
        .or_else(|| continuation(lines, index).and_then(|n| words::family(&n)))
        .filter(|_| !carried_on(&message));
    Some(Salient {
        line: lines[index].to_string(),
        message,
        index,
        severity: sev,
        family,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::words::Family;

    #[test]
    fn levels_are_read_in_each_framework_s_words() {
        let table = [
            ("2024-01-02T10:00:00Z INFO starting", Severity::Info),
            ("time=\"x\" level=error msg=\"boom\"", Severity::Error),
            ("{\"level\":\"fatal\",\"msg\":\"x\"}", Severity::Fatal),
            (
                "2024/01/02 10:00:00 [emerg] 1#1: bind() failed",
                Severity::Fatal,
            ),
            (
                "E1206 10:00:00.000000       1 main.go:10] boom",
                Severity::Error,
            ),
            (
                "fail: Microsoft.AspNetCore.Server.Kestrel[0]",
                Severity::Error,
            ),
            (
                "crit: Microsoft.AspNetCore.Hosting.Diagnostics[6]",
                Severity::Fatal,
            ),
            ("WARNING: no config file, using defaults", Severity::Warn),
            ("panic: runtime error: index out of range", Severity::Fatal),
            ("KeyError: 'SECRET'", Severity::Error),
            ("Listening on :8080", Severity::Info),
            ("INFO connecting to db failed, retrying", Severity::Info),
        ];
        for (line, want) in table {
            assert_eq!(severity(line), want, "{line}");
        }
    }

    #[test]
    fn the_newest_worst_line_of_the_run_is_salient_not_its_trailers() {
        let lines = [
            "INFO starting worker v2.3.1",
            "ERROR old: cache miss storm (recovered)",
            "WARN config key `foo` is deprecated",
            "FATAL could not open /data/queue.db: Read-only file system",
            "INFO shutting down",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.index, 3);
        assert_eq!(s.family.map(|f| f.family), Some(Family::ReadOnly));
        // A traceback: its last line, not its frames.
        let tb = [
            "Traceback (most recent call last):",
            "  File \"/app/main.py\", line 3, in <module>",
            "    open('/data/x', 'w')",
            "PermissionError: [Errno 13] Permission denied: '/data/x'",
        ];
        assert_eq!(salient(&tb).unwrap().index, 3);
        // A Java exception whose cause comes last.
        let java = [
            "Exception in thread \"main\" java.lang.IllegalStateException: boot failed",
            "\tat com.example.Main.main(Main.java:10)",
            "Caused by: java.net.UnknownHostException: kafka",
            "\tat java.base/java.net.InetAddress.getAllByName0(InetAddress.java:1)",
            "\t... 3 more",
        ];
        let s = salient(&java).unwrap();
        assert_eq!(s.index, 2);
        assert_eq!(s.family.map(|f| f.family), Some(Family::NameUnresolved));
        // Go: the panic, with its message's family from the line itself.
        let go = [
            "panic: open /etc/app/config.yaml: no such file or directory",
            "",
            "goroutine 1 [running]:",
            "main.main()",
            "\t/src/main.go:12 +0x1d",
        ];
        let s = salient(&go).unwrap();
        assert_eq!(s.index, 0);
        assert_eq!(s.family.map(|f| f.family), Some(Family::FileMissing));
        // An Erlang report: the header line, its message below it.
        let erl = [
            "2024-04-24 15:26:47.817125+00:00 [error] <0.235.0>",
            "2024-04-24 15:26:47.817125+00:00 [error] <0.235.0> Feature flags: `stream_single_active_consumer`: required feature flag not enabled! It must be enabled before upgrading RabbitMQ.",
        ];
        let s = salient(&erl).unwrap();
        assert!(
            s.message.contains("required feature flag not enabled"),
            "{s:?}"
        );
        // Nothing but a bare exit: the last line that says anything.
        assert_eq!(salient(&["starting", "Killed"]).unwrap().line, "Killed");
        assert!(salient(&[]).is_none());
    }

    #[test]
    fn in_the_final_burst_the_first_named_error_is_the_cause() {
        // MariaDB: denied, then the lock it could not take, then Aborting.
        let lines = [
            "2024-01-10 09:00:00 0 [Note] Starting MariaDB",
            "2024-01-10 09:00:00 0 [Warning] Can't create test file '/var/lib/mysql/x.lower-test' (Errcode: 13 \"Permission denied\")",
            "mariadbd: Can't create/write to file '/var/lib/mysql/aria_log_control' (Errcode: 13 \"Permission denied\")",
            "2024-01-10 09:00:00 0 [ERROR] mariadbd: Got error 'Could not get an exclusive lock; file is probably in use by another process'",
            "2024-01-10 09:00:00 0 [ERROR] Aborting",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.index, 2, "{s:?}");
        assert_eq!(s.family.map(|f| f.family), Some(Family::AccessDenied));
        // An old error before ordinary lines is not part of the burst.
        let lines = [
            "ERROR connection refused to metrics:9100 (will retry)",
            "INFO loaded 12 plugins",
            "INFO migrating schema",
            "FATAL unsupported data format version 3, this build reads 2",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.index, 3);
        assert_eq!(s.family.map(|f| f.family), Some(Family::Incompatible));
    }

    #[test]
    fn an_exception_message_on_the_next_line_gives_the_family() {
        let lines = [
            "Unhandled exception. System.IO.IOException:",
            "ERROR Read-only file system : '/app/data/keys'",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.family.map(|f| f.family), Some(Family::ReadOnly));
    }

    #[test]
    fn a_warning_of_the_final_burst_that_names_the_failure_is_its_cause() {
        let lines = [
            "",
            "Warning: require(/app/vendor/autoload.php): failed to open stream: No such file or directory in /app/artisan on line 18",
            "",
            "Fatal error: require(): Failed opening required '/app/vendor/autoload.php' in /app/artisan on line 18",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.index, 1, "{s:?}");
        assert_eq!(s.family.map(|f| f.family), Some(Family::FileMissing));
        // A warning that says the program went on names no cause.
        let lines = [
            "INFO listening on :8080",
            "WARN cannot create /boot-marker (Read-only file system); treating this as a first boot",
        ];
        assert_eq!(salient(&lines).unwrap().family, None);
        // A warning about something else does not explain an error.
        let lines = [
            "WARN config /etc/app/local.yml not found, using defaults",
            "ERROR worker pool exhausted: all 8 workers blocked",
        ];
        assert_eq!(salient(&lines).unwrap().index, 1);
        // An error that names a failure still comes first.
        let lines = [
            "WARN connection refused, retrying",
            "ERROR invalid configuration: unknown key `listen`",
        ];
        assert_eq!(salient(&lines).unwrap().index, 1);
    }

    #[test]
    fn wrapped_messages_are_read_whole_and_a_named_warning_outranks_a_bare_one() {
        // A message indented and wrapped to a width: its own level makes
        // it a message, and its wrapped lines are part of it.
        let lines = [
            "User settings loaded from: /home/app/config",
            "    Error: Failed to start worker because of missing encryption key. Please ",
            "    set the `APP_ENCRYPTION_KEY` env var when starting the worker.",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.index, 1, "{s:?}");
        assert!(s.message.contains("APP_ENCRYPTION_KEY"), "{s:?}");
        assert_eq!(s.family.map(|f| f.family), Some(Family::MissingSetting));
        // A box of advice under its header.
        let lines = [
            "ERROR: the server will no longer run without an admin",
            "       account. You *MUST* specify an admin user and",
            "       password with -e DB_USER and -e DB_PASSWORD.",
        ];
        let s = salient(&lines).unwrap();
        assert!(s.message.contains("DB_PASSWORD"), "{s:?}");
        // Stack frames are never part of a message.
        let lines = [
            "java.lang.IllegalStateException: no route",
            "\tat com.example.App.main(App.java:12)",
        ];
        assert_eq!(
            salient(&lines).unwrap().message,
            "java.lang.IllegalStateException: no route"
        );
        // glog with a year; a warning that names a failure outranks the
        // newer one that does not.
        let lines = [
            "I20230419 17:35:24.041591   601 raft.h:60] Peer refresh succeeded!",
            "W20230419 17:35:34.088055   590 store.h:349] snapshot failed: Corruption: block checksum mismatch",
            "W20230419 17:35:44.087615   454 node.cpp:866] node is in state ERROR, can't reset_peer",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.severity, Severity::Warn);
        assert_eq!(s.family.map(|f| f.family), Some(Family::Corrupt), "{s:?}");
    }

    #[test]
    fn a_bare_warning_the_program_went_on_from_is_not_its_last_word() {
        let lines = [
            r#"level=info msg="starting" version=3.4.1"#,
            r#"level=warn msg="GOMAXPROCS not set, using all 2 CPUs""#,
            "Processing configuration file '/etc/clickhouse-server/config.xml'.",
            "Logging errors to /var/log/clickhouse-server/clickhouse-server.err.log",
        ];
        let s = salient(&lines).unwrap();
        assert_eq!(s.index, 3, "{s:?}");
        // At the end, a bare warning is what it said last.
        let s = salient(&lines[..2]).unwrap();
        assert_eq!(s.index, 1, "{s:?}");
    }
}
