//! The log half of the rules: one table of real wording per fault class,
//! and the rule that picks which line of a window decides.

use std::sync::OnceLock;

use regex::Regex;

use crate::model::FaultClass;

/// How many of the newest log lines the patterns look at.
pub(super) const LOG_WINDOW: usize = 200;

pub(super) struct LogRule {
    class: FaultClass,
    pattern: &'static str,
    what: &'static str,
}

/// Real wording from several runtimes per class. Which line decides is
/// `match_logs`' rule: the newest line any row matches (crash signatures only
/// when nothing else matched). Row order matters within one line: where a
/// line matches several rows, the first row wins, so specific rows (those
/// that name a variable, a host, a path) come before generic ones.
pub(super) const LOG_RULES: &[LogRule] = &[
    // ---- The host: a kernel setting, a limit or a module outside the
    // container and outside Docker. First, because their wording overlaps
    // later rows (inotify's ENOSPC is not a full disk, a thread limit is not
    // the JVM's heap), and the detail is the setting the advice names. ----
    // Elasticsearch's (and OpenSearch's, SonarQube's) bootstrap checks,
    // BootstrapChecks.java; MongoDB 5+ warns in the same words.
    LogRule {
        class: FaultClass::HostConfig,
        pattern: r#"max virtual memory areas (?P<detail>vm\.max_map_count) \[\d+\] is too low|(?P<detail2>vm\.max_map_count) is too low"#,
        what: "the host's vm.max_map_count kernel setting is below what the program needs",
    },
    // inotify: Node/chokidar's ENOSPC (libuv), Java's WatchService, .NET's
    // FileSystemWatcher, coreutils' tail.
    LogRule {
        class: FaultClass::HostConfig,
        pattern: r#"ENOSPC: System limit for number of file watchers reached|User limit of inotify watches reached|inotify resources exhausted|upper limit on inotify watches reached"#,
        what: "the host's inotify watch limit (fs.inotify.max_user_watches) is exhausted",
    },
    LogRule {
        class: FaultClass::HostConfig,
        pattern: r#"(?i)user limit \(\d+\) on the number of inotify instances has been reached|failed to create fsnotify watcher: too many open files|inotify_init(?:1)?(?:\(\))?: too many open files"#,
        what: "the host's inotify instance limit (fs.inotify.max_user_instances) is exhausted",
    },
    // Elasticsearch's limit checks, then the kernel's EMFILE as Go, the JVM,
    // nginx, PostgreSQL and Node print it.
    LogRule {
        class: FaultClass::HostConfig,
        pattern: r#"max file descriptors \[\d+\] for \S+ process is too low|max number of threads \[\d+\] for user \[\S+\] is too low|memory locking requested for \S+ process but memory is not locked|(?i:failed to lock memory|unable to lock memory|mlock(?:all)?(?:\(\))?:? [^\n]*(?:failed|cannot allocate|not permitted|denied))"#,
        what: "a resource limit (ulimit) of the container is below what the program checks for at start",
    },
    LogRule {
        class: FaultClass::HostConfig,
        pattern: r#"(?i)too many open files|EMFILE|worker_connections exceed open file resource limit|out of file descriptors"#,
        what: "the process ran out of file descriptors (its nofile limit)",
    },
    // Threads and processes: the JVM (8: "unable to create new native
    // thread"; 11+: "unable to create native thread"), glibc's pthread_create
    // (EAGAIN) as Go's cgo and Python print it. The container's pids limit
    // or the host's thread limits.
    LogRule {
        class: FaultClass::HostConfig,
        pattern: r#"unable to create (?:new )?native thread|pthread_create failed(?: \(EAGAIN\))?|can't start new thread|fork: Resource temporarily unavailable|fork: retry: Resource temporarily unavailable"#,
        what: "the process could not start a thread or process (a pids or process limit)",
    },
    // Kernel modules: modprobe (kmod, BusyBox), iptables, FUSE.
    LogRule {
        class: FaultClass::HostConfig,
        pattern: r#"modprobe: FATAL: Module (?P<detail>[\w-]+) not found|can't initialize (?:iptables|ip6tables) table `(?P<detail2>\w+)'.*(?:do you need to insmod|Table does not exist)|fuse: device not found, try 'modprobe (?P<detail3>fuse)' first"#,
        what: "a kernel module the program needs is not loaded on the host",
    },
    // PostgreSQL's dynamic shared memory in /dev/shm: the container's
    // shm_size (64 MB by default), not the disk.
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"could not resize shared memory segment "[^"]+" to \d+ bytes: No space left on device"#,
        what: "its shared memory (/dev/shm, the container's shm_size) is too small",
    },
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
    // Rust's `env::var("X").expect("X must be set")` (std's VarError:
    // NotPresent), and Rails' missing secret_key_base (the executor
    // redacts the word after `secret_key_base':`, so it is not matched).
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"\b(?P<detail>[A-Z][A-Z0-9_]{2,}) must be set\b|`(?P<detail2>secret_key_base)` for '\w+' environment"#,
        what: "a required setting is missing",
    },
    LogRule {
        class: FaultClass::ConfigError,
        pattern: r#"KeyError: ['"]?(?P<detail>[A-Z][A-Z0-9_]{1,})\b"#,
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
        // Not a bare ENOSPC: Node repeats an error's code on a line of its
        // own (`code: 'ENOSPC'`), and inotify's limit is ENOSPC too; a full
        // disk's message always says "no space left on device".
        pattern: r#"(?i)no space left on device|disk (?:is )?full|could not extend file|Check free disk space"#,
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
        pattern: r#"Redis connection to (?P<detail>\S+) failed|Error -?\d+ connecting to (?P<detail2>\S+?)\.(?:\s|$)|Error connecting to Redis on (?P<detail3>\S+)"#,
        what: "the Redis dependency cannot be reached",
    },
    // Healthcheck tools, in their own words: curl, BusyBox wget,
    // pg_isready, redis-cli (mysqladmin's lines are the MySQL rows below).
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"curl: \(6\) Could not resolve host: (?P<detail>[^\s:]+)|curl: \((?:7|28)\) Failed to connect to (?P<detail2>\S+) port \d+|wget: bad address '(?P<detail3>[^']+)'"#,
        what: "a dependency cannot be reached (the probe's own words)",
    },
    LogRule {
        class: FaultClass::DependencyUnavailable,
        pattern: r#"wget: can't connect to remote host \((?P<detail>[^)]+)\)|^(?P<detail2>[\w.-]+:\d+) - no response$|Could not connect to Redis at (?P<detail3>[^\s:]+:\d+)"#,
        what: "a dependency cannot be reached (the probe's own words)",
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
        pattern: r#"^panic: |thread '[^']*' panicked|^(?:[A-Za-z_][\w$]*\.)*[A-Za-z_][\w$]*(?:Error|Exception)(?::\s|$)|Exception in thread|\bUncaught\b|(?i:\bUnhandled (?:exception|rejection|error)\b|unhandledRejection)|Application run failed"#,
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

pub(super) fn compiled() -> &'static [(Regex, &'static LogRule)] {
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
    // A line that says the program went on names no cause.
    let newest_cause = window
        .iter()
        .rev()
        .filter(|l| !super::salient::carried_on(l))
        .find_map(|line| {
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
