//! Families of failure words. A senior engineer who has never seen a
//! message still knows `EROFS`, "Read-only file system" and
//! `ReadOnlyFileSystemException` are one fault: each family here is the
//! spellings of one fault across languages and runtimes (errno names and
//! their strerror text, the JVM's and .NET's exception names, Go's and
//! Python's wording), and the class it points to. The known-message table
//! (`logs.rs`) names details for messages it knows; these reach the rest.

use std::sync::OnceLock;

use regex::Regex;

use crate::model::FaultClass;

/// One fault, however a runtime spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    CommandNotFound,
    NotExecutable,
    ReadOnly,
    AuthFailed,
    TlsFailed,
    AccessDenied,
    AddressInUse,
    NoSpace,
    WriteRefused,
    TooLittleMemory,
    NoMemory,
    KernelLacks,
    NameUnresolved,
    Refused,
    Unreachable,
    NotReady,
    TimedOut,
    ConnectFailed,
    LockHeld,
    NeedsMigration,
    Incompatible,
    Corrupt,
    InsecureDefault,
    MissingSetting,
    InvalidSetting,
    FileMissing,
}

struct Row {
    family: Family,
    class: FaultClass,
    /// What the family means, in words a person reads after "it".
    what: &'static str,
    pattern: &'static str,
}

/// In order: where a line has words of several families, the first row
/// wins, so the narrower family (a read-only filesystem, a failed login)
/// comes before the wider one (access denied), and what the program
/// could not do (a missing file) after why (a read-only mount).
const ROWS: &[Row] = &[
    Row {
        family: Family::CommandNotFound,
        class: FaultClass::ConfigError,
        what: "could not run its command: the executable was not found",
        pattern: r#"(?i)executable file not found|exec: "?[^"\s]+"?: not found|: command not found|/bin/sh: \d*:? ?\S+: not found|not found in \$PATH|starting container process caused.*no such file or directory|exec [^:]+: no such file or directory"#,
    },
    Row {
        family: Family::NotExecutable,
        class: FaultClass::ConfigError,
        what: "could not run its command: the file is not executable",
        pattern: r#"(?i)exec [^:]+: permission denied|cannot execute(?: binary file)?|exec user process caused.*permission denied|^(?:/(?:usr/)?bin/)?(?:ba|da)?sh: (?:line )?(?:\d+: )?\S+: Permission denied$"#,
    },
    Row {
        family: Family::ReadOnly,
        class: FaultClass::PermissionDenied,
        what: "could not write: the filesystem is read-only",
        pattern: r#"(?i)\bEROFS\b|read-only file ?system|read only file ?system|ReadOnlyFileSystemException|filesystem is read-only"#,
    },
    Row {
        family: Family::AuthFailed,
        class: FaultClass::ConfigError,
        what: "was refused by a service it logs in to (credentials)",
        pattern: r#"(?i)authentication failed|auth(?:entication|orization)? (?:error|failure)|password authentication|invalid (?:credentials|username or password|password|api[ _-]?key|token)|wrong password|bad credentials|access denied for user|login failed|\bNOAUTH\b|\bWRONGPASS\b|ACCESS_REFUSED|\bSASL\b.*(?:fail|denied)|not authori[sz]ed|\b401 Unauthorized|AuthenticationException|authentication required|unauthenticated|credentials (?:are )?(?:invalid|rejected|expired)|credentials (?:might|may|could) be (?:wrong|invalid|incorrect)|\bAUTH_FAILED\b|auth(?:entication)?[- ]failure"#,
    },
    Row {
        family: Family::TlsFailed,
        class: FaultClass::ConfigError,
        what: "failed TLS: a certificate is expired, untrusted or for another name",
        pattern: r#"(?i)\bx509:|certificate (?:has expired|verify failed|is not valid|signed by unknown|is not trusted|rejected|expired)|CERTIFICATE_VERIFY_FAILED|\bCERT_[A-Z_]+|unable to (?:get local issuer|verify the first) certificate|self[- ]signed certificate|PKIX path|SSLHandshakeException|tls: (?:bad certificate|handshake failure|failed to verify|unknown certificate)|handshake failure|SSL routines|wrong version number"#,
    },
    Row {
        family: Family::AccessDenied,
        class: FaultClass::PermissionDenied,
        what: "was denied access to a file or resource",
        pattern: r#"(?i)\bEACCES\b|\bEPERM\b|permission denied|access (?:is )?denied|AccessDeniedException|UnauthorizedAccessException|operation not permitted|insufficient permissions?|not writable|cannot (?:write|create|open) .*(?:permission|denied)"#,
    },
    Row {
        family: Family::AddressInUse,
        class: FaultClass::PortConflict,
        what: "could not bind its port: another process holds it",
        pattern: r#"(?i)\bEADDRINUSE\b|address already in use|address in use|port is already allocated|only one usage of each socket address|failed to bind to address|(?:port|address) \S* ?(?:is )?already in use|\bport \d+ (?:\w+ ){0,3}in use\b|bind\(\) .*failed \(98"#,
    },
    Row {
        family: Family::NoSpace,
        class: FaultClass::DiskFull,
        what: "could not write: the disk is full",
        pattern: r#"(?i)\bENOSPC\b|no space left on device|\bdisk (?:is )?full|not enough (?:free )?(?:disk )?space|insufficient (?:disk )?space|out of disk space|DiskFull"#,
    },
    Row {
        family: Family::TooLittleMemory,
        class: FaultClass::ConfigError,
        what: "needs more memory than it was given (its heap setting or the container's memory limit)",
        pattern: r#"(?i)requires? (?:a minimum of |at least )?\d+ ?[KMGT]i?B? (?:of )?(?:RAM|memory|heap)|(?:RAM|memory|heap) (?:of )?(?:at least|a minimum of) \d+ ?[KMGT]i?B|minimum (?:of )?\d+ ?[KMGT]i?B (?:of )?(?:RAM|memory|heap)"#,
    },
    Row {
        family: Family::NoMemory,
        class: FaultClass::OomKilled,
        what: "ran out of memory",
        pattern: r#"(?i)\bENOMEM\b|cannot allocate memory|out of memory|OutOfMemory|\bMemoryError\b|std::bad_alloc|memory exhausted|allocation (?:of \d+ bytes )?failed|failed to allocate"#,
    },
    Row {
        family: Family::KernelLacks,
        class: FaultClass::HostConfig,
        what: "needs a kernel feature the host does not offer (a system call, a module or a setting of the host's kernel)",
        pattern: r#"(?i)\bENOSYS\b|function not implemented|(?:system call|syscall|io_?uring)\b[^\n]{0,40}?\b(?:is |are )?(?:not supported|unsupported|not implemented)|(?:not supported|unsupported|not available) (?:by|in|on) (?:the |this |your )?(?:host'?s? )?kernel|kernel (?:is )?too old|requires? (?:a )?(?:linux )?kernel (?:version )?\d"#,
    },
    Row {
        family: Family::NameUnresolved,
        class: FaultClass::DependencyUnavailable,
        what: "could not resolve the name of a service it needs",
        pattern: r#"(?i)\bENOTFOUND\b|\bEAI_AGAIN\b|\bEAI_NONAME\b|no such host|name or service not known|nodename nor servname|temporary failure in name resolution|name does not resolve|could not resolve (?:host|hostname|address)|could not translate host name|UnknownHostException|getaddrinfo (?:failed|ENOTFOUND|EAI_AGAIN)|unknown host|host not found|failed to lookup address|no address associated with hostname|server misbehaving|unable to resolve|\bnxdomain\b|non-existing domain|non-existent domain"#,
    },
    Row {
        family: Family::Refused,
        class: FaultClass::DependencyUnavailable,
        what: "could not connect: the service it needs refused the connection",
        pattern: r#"(?i)\bECONNREFUSED\b|connection refused|actively refused|ConnectException|\[Errno 111\]|error 111\b"#,
    },
    Row {
        family: Family::Unreachable,
        class: FaultClass::DependencyUnavailable,
        what: "could not reach the service it needs: no route to it",
        pattern: r#"(?i)\bEHOSTUNREACH\b|\bENETUNREACH\b|no route to host|network is unreachable|host is unreachable|no (?:servers?|brokers?|hosts?|nodes?|replicas?|endpoints?|upstreams?|seeds?) (?:are |is )?(?:available|reachable)|NoHostAvailable|all (?:servers|brokers|hosts|nodes) (?:are )?(?:down|unavailable)"#,
    },
    Row {
        family: Family::NotReady,
        class: FaultClass::DependencyUnavailable,
        what: "found the service it needs still starting (not ready to serve yet)",
        pattern: r#"(?i)(?:failed|connect(?:ion)?|pq):\s+(?:FATAL:\s+)?the database system is starting up|\b57P03\b|CannotConnectNow|\bLOADING\b \S+ is loading the dataset"#,
    },
    Row {
        family: Family::TimedOut,
        class: FaultClass::DependencyUnavailable,
        what: "gave up waiting for a service it needs (a timeout)",
        pattern: r#"(?i)\bETIMEDOUT\b|connection timed out|connect timed out|timed out (?:while |after |waiting|connecting)|timeout expired|i/o timeout|deadline exceeded|TimeoutException|connect(?:ion)? timeout"#,
    },
    // Last of the dependency families: a connection that failed with no
    // reason given.
    Row {
        family: Family::ConnectFailed,
        class: FaultClass::DependencyUnavailable,
        what: "could not connect to a service it needs",
        pattern: r#"(?i)(?:unable to|could not|couldn't|can't|cannot|failed to) (?:connect|establish (?:a )?connection) (?:to|with) (?:the |a |an )?(?:[a-z\[]|[1-9])"#,
    },
    Row {
        family: Family::LockHeld,
        class: FaultClass::ConfigError,
        what: "found its lock held by another process (another instance on the same data)",
        pattern: r#"(?i)(?:unable|failed|cannot|could not) (?:to )?(?:obtain|acquire|get|take) (?:a |the |an exclusive )?lock|lock(?:file)? (?:is )?(?:held|already (?:held|taken|in use))|already locked|locked by another|in use by another (?:process|instance)|another (?:instance|process) (?:is )?(?:already )?(?:running|using)|LockObtainFailedException|database is locked|resource temporarily unavailable.*\block|\b(?:f?lock)\b[^\n]*(?:resource temporarily unavailable|EAGAIN|EWOULDBLOCK|already held|in use)|\.lock\b.*(?:exists|held|in use)|(?:waiting|wait) (?:indefinitely )?(?:to obtain|for) (?:the |a )?\w+ lock"#,
    },
    Row {
        family: Family::NeedsMigration,
        class: FaultClass::ConfigError,
        what: "found its database not prepared for this version (its schema is to be initialised or migrated first)",
        pattern: r#"(?i)\bneeds? (?:bootstrapping|migrating|initiali[sz]ing|to be (?:bootstrapped|initiali[sz]ed|migrated|upgraded))|(?:unapplied|pending|outstanding) (?:database )?migrations?|migrations? (?:are |is )?(?:pending|required|needed|missing|have not been (?:run|applied))|(?:database|schema|db) (?:is |has )?(?:not (?:yet )?(?:been )?(?:initiali[sz]ed|bootstrapped|migrated|created|up[- ]to[- ]date)|uninitiali[sz]ed)|schema (?:is )?(?:out of date|outdated|too old)|need to (?:initiali[sz]e|migrate|upgrade) (?:the |your )?(?:database|schema|db)|(?:run|apply) (?:the |your )?(?:database )?migrations\b"#,
    },
    Row {
        family: Family::Incompatible,
        class: FaultClass::ConfigError,
        what: "found data or a peer of an incompatible version or format",
        pattern: r#"(?i)incompatible|unsupported (?:\w+ )?(?:version|format)|version mismatch|(?:created|written|initiali[sz]ed) (?:by|with) (?:a )?(?:newer|older|different|incompatible)|newer version|cannot be (?:opened|read) by this version|UnsupportedClassVersionError|not supported by this version|(?:requires|need(?:s)?) (?:at least )?version|minimum (?:supported )?version|upgrade (?:is )?required|downgrad(?:e|ing)|unknown (?:file )?format version|format version|version\b[^\n]*\bis (?:higher|newer|lower|older) than|(?:higher|newer|lower|older) than (?:the )?(?:\w+ )?version"#,
    },
    Row {
        family: Family::Corrupt,
        class: FaultClass::ConfigError,
        what: "found its data corrupt",
        pattern: r#"(?i)\bcorrupt(?:ed|ion)?\b|checksum (?:mismatch|failed|error|does not match)|bad magic|invalid magic|invalid page header|torn page|data (?:file|directory) (?:is )?damaged"#,
    },
    Row {
        family: Family::InsecureDefault,
        class: FaultClass::ConfigError,
        what: "refused a secret left at its insecure default (a setting to change)",
        pattern: r#"(?i)insecure (?:\w+ ){0,2}(?:secret|key|password|token)|(?:secret|key|password|token)\S* (?:is|was|has) (?:not (?:been )?changed|unchanged|still (?:set to )?the default)|default (?:secret|secret[_ ]key|key|password|token) (?:was |is )?(?:detected|used|in use|found)|(?:change|replace) the default (?:secret|key|password|token)"#,
    },
    Row {
        family: Family::MissingSetting,
        class: FaultClass::ConfigError,
        what: "was not given a setting it requires",
        pattern: r#"(?i)(?:please|must)\*? (?:specify|set|provide|configure|define)\b|\bno (?:\w+ ){0,2}(?:setting|value|option|configuration|parameter|variable|key)s? (?:was |were |is |has been )?(?:specified|configured|provided|set|given)\b|\bno (?:\w+ ){0,2}(?:was|were|is|has been) (?:specified|configured|provided|set|given)\b|(?:run (?:it )?again|re-?run|restart) with (?:the )?--[\w-]+|(?:missing|required|not set|not defined|undefined|unset|no value|not provided|must be (?:set|provided|specified|defined|enabled)|is empty|cannot be empty|must not be empty|mandatory)\b.*\b(?:environment|env|variable|setting|option|parameter|config|configuration|property|key|argument|secret|flag)|\b(?:required|mandatory) (?:\w+ )?(?:flag|option|setting|feature flag|plugin|extension) (?:is )?not (?:enabled|set|given|installed)|\b(?:environment variable|env var|setting|option|parameter|key)\b.*\b(?:missing|required|not set|not defined|undefined|must be (?:set|provided|specified|defined)|is empty|cannot be empty|not provided)|\b(?:addr(?:ess)?|url|uri|host ?name|ip|port|path|dir(?:ectory)?) (?:was |is |were )?not (?:provided|specified|given|configured)\b"#,
    },
    Row {
        family: Family::InvalidSetting,
        class: FaultClass::ConfigError,
        what: "refused its configuration as invalid",
        pattern: r#"(?i)invalid (?:value|configuration|config|setting|option|argument|parameter|syntax|directive)|unknown (?:option|directive|setting|field|key|parameter|flag|configuration)|unrecogni[sz]ed (?:option|argument|field|key|parameter)|bad (?:config|value|option|directive)|syntax error|parse error|failed to (?:parse|load|read) (?:config|configuration|settings)|(?:could not|cannot|unable to) (?:parse|load) (?:config|configuration|settings)|error (?:parsing|loading|reading) (?:config|configuration)|YAMLException|JSONDecodeError|ConfigurationException|(?:config|configuration) (?:error|is invalid|invalid)|(?:config|configuration) (?:file )?(?:contains|has) errors|error (?:initiali[sz]ing|loading|parsing|reading) (?:the )?(?:config|configuration)|invalid (?:path|file ?name)\b|validation (?:failed|error)|unknown (?:plugin|extension|input|output|filter)\b|(?:plugin|extension)\b[^\n]*(?:doesn't|don't|does not|do not) exists?|(?:plugin|extension) (?:\S+ )?not (?:found|available|installed)"#,
    },
    Row {
        family: Family::FileMissing,
        class: FaultClass::ConfigError,
        what: "could not find a file or directory it needs",
        pattern: r#"(?i)\bENOENT\b|no such file or directory|FileNotFoundException|FileNotFoundError|DirectoryNotFoundException|cannot find the (?:file|path)|could not find (?:file|a part of the path)|(?:file|directory|path) (?:\S+ )?(?:does not exist|not found)|could not open (?:file|configuration)|unable to open (?:file|configuration)|(?:^|[\s'"(])/[\w./-]+['"]? (?:does not|doesn't) exist|\bENOTDIR\b|\bnot a directory\b|NotADirectoryError"#,
    },
    // Last: a write to a path refused with no reason named (a full
    // disk, a read-only mount, a missing directory would have matched
    // above) is the owner or mode of the path.
    Row {
        family: Family::WriteRefused,
        class: FaultClass::PermissionDenied,
        what: "could not write where it keeps its files (the owner or mode of the path, for the user it runs as)",
        pattern: r#"(?i)(?:cannot|can't|could not|couldn't|unable to|failed to) (?:write|create (?:directory|dir|file))(?: to| into| in)? ['"]?/[^\s'"]*['"]?(?: as \S+)?\.?\s*$"#,
    },
];

/// A family a line belongs to, with what it points to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FamilyMatch {
    pub family: Family,
    pub class: FaultClass,
    pub what: &'static str,
}

fn compiled() -> &'static [(Regex, &'static Row)] {
    static ROWS_RE: OnceLock<Vec<(Regex, &'static Row)>> = OnceLock::new();
    ROWS_RE.get_or_init(|| {
        ROWS.iter()
            .filter_map(|r| match Regex::new(r.pattern) {
                Ok(re) => Some((re, r)),
                Err(e) => {
                    tracing::error!(pattern = r.pattern, error = %e, "word family does not compile; skipped");
                    None
                }
            })
            .collect()
    })
}

/// The family `family` as its row gives it.
pub fn of(family: Family) -> Option<FamilyMatch> {
    ROWS.iter()
        .find(|r| r.family == family)
        .map(|r| FamilyMatch {
            family: r.family,
            class: r.class,
            what: r.what,
        })
}

/// Whether the words at `start` of `line` are spoken of as a possibility
/// ("data can be corrupted", "may fail"), not as what happened.
fn hypothetical(line: &str, start: usize) -> bool {
    let before = line[..start].to_ascii_lowercase();
    let words: Vec<&str> = before.split_whitespace().collect();
    let modal = |w: &str| matches!(w, "can" | "may" | "might" | "could");
    match words.as_slice() {
        [.., m, "be" | "get" | "become"] => modal(m),
        [.., m] => modal(m),
        [] => false,
    }
}

/// The family of `line`, the first row (narrowest) that matches as what
/// happened (not as a possibility).
pub fn family(line: &str) -> Option<FamilyMatch> {
    compiled()
        .iter()
        .find(|(re, _)| re.find_iter(line).any(|m| !hypothetical(line, m.start())))
        .map(|(_, r)| FamilyMatch {
            family: r.family,
            class: r.class,
            what: r.what,
        })
}

#[cfg(test)]
mod tests {
    use super::Family::*;
    use super::*;

    /// One spelling per row and runtime; each must land in its family.
    #[test]
    fn spellings_across_runtimes_land_in_one_family() {
        let table: &[(&str, Family)] = &[
            // Read-only: libc, Go, the JVM, .NET, Python.
            ("mkdir /data/tmp: read-only file system", ReadOnly),
            ("OSError: [Errno 30] Read-only file system: '/var/lib/app'", ReadOnly),
            ("java.nio.file.ReadOnlyFileSystemException", ReadOnly),
            ("Error: EROFS: read-only file system, open '/app/cache/x'", ReadOnly),
            ("System.IO.IOException: Read-only file system : '/app/keys'", ReadOnly),
            // Access: errno, JVM, .NET, Node.
            ("Error: EACCES: permission denied, open '/data/db.sqlite'", AccessDenied),
            ("java.nio.file.AccessDeniedException: /opt/app/logs/app.log", AccessDenied),
            ("System.UnauthorizedAccessException: Access to the path '/app/data' is denied.", AccessDenied),
            ("chown: changing ownership of '/data': Operation not permitted", AccessDenied),
            // Logins, across servers.
            ("FATAL:  password authentication failed for user \"app\"", AuthFailed),
            ("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN", AuthFailed),
            ("NOAUTH Authentication required.", AuthFailed),
            ("Login failed for user 'sa'.", AuthFailed),
            // OpenVPN's refusal, and a program's own guess at it.
            ("ERROR [openvpn] AUTH: Received control message: AUTH_FAILED", AuthFailed),
            ("Your credentials might be wrong", AuthFailed),
            // TLS.
            ("x509: certificate signed by unknown authority", TlsFailed),
            ("javax.net.ssl.SSLHandshakeException: PKIX path building failed", TlsFailed),
            ("Error: unable to verify the first certificate", TlsFailed),
            // Names, refusals, routes, timeouts.
            ("dial tcp: lookup kafka on 127.0.0.11:53: no such host", NameUnresolved),
            ("getaddrinfo ENOTFOUND rabbitmq", NameUnresolved),
            ("socket.gaierror: [Errno -2] Name or service not known", NameUnresolved),
            ("System.Net.Http.HttpRequestException: Connection refused (api:80)", Refused),
            ("ConnectionRefusedError: [Errno 111] Connection refused", Refused),
            ("dial tcp 10.0.0.5:2379: connect: no route to host", Unreachable),
            ("context deadline exceeded", TimedOut),
            ("connect ETIMEDOUT 10.1.2.3:5672", TimedOut),
            // Ports, disks, memory.
            ("Error: listen EADDRINUSE: address already in use :::3000", AddressInUse),
            ("System.IO.IOException: Failed to bind to address http://[::]:80: address already in use.", AddressInUse),
            ("write /data/wal/000001: no space left on device", NoSpace),
            ("Error: ENOSPC: no space left on device, write", NoSpace),
            ("fatal error: runtime: out of memory", NoMemory),
            ("terminate called after throwing an instance of 'std::bad_alloc'", NoMemory),
            // Data.
            ("Cannot lock the data directory /var/lib/app: already locked by another process", LockHeld),
            ("org.apache.lucene.store.LockObtainFailedException: Lock held by another program", LockHeld),
            ("The data directory was initialized by a newer version; this version is incompatible", Incompatible),
            ("java.lang.UnsupportedClassVersionError: Main has been compiled by a more recent version", Incompatible),
            ("checksum mismatch in segment 000012", Corrupt),
            ("Port 8080 seems to be in use by another process. Quarkus may already be running", AddressInUse),
            ("ERROR: Strict hostname resolution configured but no hostname setting provided", MissingSetting),
            ("No value specified for KAFKA_ZOOKEEPER_CONNECT", MissingSetting),
            ("WiredTiger error: file is corrupt", Corrupt),
            // Settings and files.
            ("Error: required environment variable not set: API_TOKEN", MissingSetting),
            ("The setting 'ConnectionStrings:Default' is missing", MissingSetting),
            ("invalid value \"abc\" for flag -port", InvalidSetting),
            ("yaml: line 3: mapping values are not allowed; failed to parse config", InvalidSetting),
            ("FileNotFoundError: [Errno 2] No such file or directory: '/app/config.yml'", FileMissing),
            ("Could not find file '/app/appsettings.json'.", FileMissing),
            ("open /etc/app/app.toml: no such file or directory", FileMissing),
            ("stat /srv/www/html: not a directory", FileMissing),
            ("open device: /dev/fuse does not exist", FileMissing),
            ("NotADirectoryError: [Errno 20] Not a directory: '/app/static'", FileMissing),
            ("[error] [config] configuration file contains errors, aborting.", InvalidSetting),
            ("Error: Unknown plugin \"foo\" in the pipeline configuration", InvalidSetting),
            // A database to prepare: Django, Rails, Alembic-style tools, Kong-style.
            ("You have 18 unapplied migration(s). Your project may not work properly until you apply the migrations", NeedsMigration),
            ("ActiveRecord::PendingMigrationError: Migrations are pending. To resolve this issue, run: bin/rails db:migrate", NeedsMigration),
            ("ERROR: You need to initialize the database. Please run `tool db init`", NeedsMigration),
            ("Error: database needs bootstrapping; run 'app migrations bootstrap'", NeedsMigration),
            ("FATAL: the schema is out of date (version 41, expected 43)", NeedsMigration),
            // Secrets left at their defaults.
            ("Refusing to start due to insecure SECRET_KEY", InsecureDefault),
            ("ERROR: app.secret_key is not changed. Please use something else", InsecureDefault),
            ("WARNING: default secret key detected, set APP_SECRET", InsecureDefault),
            // Names in Erlang's and Elixir's words.
            ("** (DBConnection.ConnectionError) tcp connect (db:5432): non-existing domain - :nxdomain", NameUnresolved),
            ("ERROR: app requires a minimum of 4GB RAM (heap). Cannot continue.", TooLittleMemory),
            ("error initializing configuration '/etc/proxy.yaml': Invalid path: /etc/certs/a.pem", InvalidSetting),
            ("You MUST specify an admin user and password", MissingSetting),
            ("mode. You *MUST* specify an admin user and password", MissingSetting),
            // A write refused with no reason given: Solr's entrypoint,
            // Python, Go.
            ("Cannot write to /var/solr as 8983:8983", WriteRefused),
            ("ERROR: could not create directory '/data/cache'", WriteRefused),
            ("failed to write to /var/lib/app/state.json", WriteRefused),
            ("write /data/wal/000001: no space left on device; cannot write to /data", NoSpace),
            // The host's kernel: Dragonfly, Go runtimes, seccomp.
            ("E20220927 dfly_main.cc:239] iouring system call interface is not supported. Exiting...", KernelLacks),
            ("io_uring_setup: Function not implemented", KernelLacks),
            ("clone3: ENOSYS", KernelLacks),
            ("fatal: this feature is not supported by the host kernel", KernelLacks),
            // A dependency still starting: Postgres, Redis.
            ("connection to server at \"postgres\" (172.27.0.7), port 5432 failed: FATAL:  the database system is starting up", NotReady),
            ("LOADING Redis is loading the dataset in memory", NotReady),
            // A connection that failed, no reason given: Umami, JDBC.
            ("✗ Unable to connect to the database.", ConnectFailed),
            ("Could not connect to server db:5432", ConnectFailed),
            // A setting not given, in Go's clustering words.
            ("create memberlist: Failed to get final advertise address: No private IP address found, and explicit IP not provided", MissingSetting),
            // Commands.
            ("exec: \"gunicorn\": executable file not found in $PATH", CommandNotFound),
            ("/bin/sh: 1: ./start.sh: not found", CommandNotFound),
            ("exec /entrypoint.sh: permission denied", NotExecutable),
        ];
        // Not these: a server's own startup and fallbacks, a refused
        // request, a missing directory.
        for line in [
            "LOG:  the database system is starting up",
            "[2024-01-01][WARN ][o.e.b.JNANatives] unable to install syscall filter: seccomp unavailable",
            "INFO io_uring disabled, using epoll",
            "level=error msg=\"token not provided\" path=/api/v1/me",
        ] {
            assert_eq!(family(line).map(|m| m.family), None, "{line}");
        }
        assert_eq!(
            family("could not create directory \"/data/x\": No such file or directory")
                .map(|m| m.family),
            Some(FileMissing)
        );
        // A server's own bind, in gunicorn's words, is no dependency.
        assert_ne!(
            family("[ERROR] Can't connect to ('0.0.0.0', 8000)").map(|m| m.family),
            Some(ConnectFailed)
        );
        // A possibility is not what happened; a month is no modal verb.
        assert_eq!(
            family("1:M 12 May 2024 10:00:00.000 # Out Of Memory allocating 1024 bytes!")
                .map(|m| m.family),
            Some(NoMemory)
        );
        assert_eq!(
            family("Unhandled exception. System.OutOfMemoryException: Insufficient memory to continue the execution of the program.").map(|m| m.family),
            Some(NoMemory)
        );
        assert_eq!(
            family("WARNING: in this mode data can be corrupted if the host shuts down uncleanly"),
            None
        );
        for (line, want) in table {
            let got = family(line).map(|m| m.family);
            assert_eq!(got, Some(*want), "{line}");
        }
    }

    #[test]
    fn ordinary_lines_belong_to_no_family() {
        for line in [
            "INFO server started on :8080",
            "WARN slow query took 1200 ms",
            "Listening on http://0.0.0.0:3000",
            "GET /health 200 1.2ms",
            "connected to database in 35 ms",
        ] {
            assert_eq!(family(line), None, "{line}");
        }
    }

    #[test]
    fn every_row_compiles() {
        assert_eq!(compiled().len(), ROWS.len());
    }
}
