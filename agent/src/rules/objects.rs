//! The objects an error names, found by their shape rather than by the
//! message around them: a path, a host and port, a port, a variable-shaped
//! name, a user, a module or class, a version. Following them (which
//! mount holds the path, which container answers to the host) is how a
//! diagnosis gets from "permission denied" to "/data is a read-only
//! volume".

use std::sync::LazyLock;

use regex::Regex;

/// What one line names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Objects {
    pub paths: Vec<String>,
    /// Hosts with the port beside them, where the line gives one.
    pub endpoints: Vec<(String, Option<u16>)>,
    pub ports: Vec<u16>,
    pub variables: Vec<String>,
    pub users: Vec<String>,
    pub modules: Vec<String>,
    pub versions: Vec<String>,
}

impl Objects {
    pub fn is_empty(&self) -> bool {
        *self == Objects::default()
    }
}

fn re(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

static PATH: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r#"(?:^|[\s'"`(=\[,]|: ?)(/[A-Za-z0-9._@+-]+(?:/[A-Za-z0-9._@+-]*)*)"#));
static URL: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"\b[a-z][a-z0-9+.-]*://(?:[^@/\s"']+@)?(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9][A-Za-z0-9._-]*)(?::(\d{1,5}))?(?:/[^\s"'`]*)?"#,
    )
});
static HOST_PORT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(r#"(?:^|[\s'"`(=\[,@>])(\[[0-9A-Fa-f:]+\]|[A-Za-z0-9][A-Za-z0-9._-]*):(\d{2,5})\b"#)
});
static NAMED_HOST: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"(?i)\b(?:host(?:name)?|server|upstream|address|lookup|resolve|ENOTFOUND|EAI_AGAIN|UnknownHostException:?)(?:\s+at)?\s*[=:]?\s*\\?["'`]?([A-Za-z][A-Za-z0-9._-]*[A-Za-z0-9])\\?["'`]?"#,
    )
});
static PORT_WORD: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r#"(?i)\bport[ =:]+["']?(\d{1,5})\b"#));
static VARIABLE: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b"));
static USER: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"(?i)\b(?:for user|as user|user|uid|owner|running as)[ =:]+["'`]?([A-Za-z0-9_][A-Za-z0-9_.-]*)["'`]?"#,
    )
});
static MODULE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    re(
        r#"(?:No module named|Cannot find module|Could not find or load main class|Class ["']?|ClassNotFoundException:|NoClassDefFoundError:|could not load file or assembly|Unable to load|class) ["']?([A-Za-z_$][\w.$/\\-]*)"#,
    )
});
static VERSION: LazyLock<Option<Regex>> =
    LazyLock::new(|| re(r"\b[vV]?(\d+\.\d+(?:\.\d+)?(?:[-+][0-9A-Za-z.]+)?)\b"));

/// Words shaped like a variable that are codes, not settings.
const NOT_VARIABLES: &[&str] = &[
    "ERR_",
    "CERT_",
    "SSL_",
    "EAI_",
    "ACCESS_",
    "SIG",
    "HTTP_1",
    "TLS_",
    "X509_",
    "UNABLE_TO_",
    "SELF_SIGNED",
    "DEPTH_ZERO",
    "ECONN",
    "ERROR_",
];

/// Host words that are not a service's name.
const NOT_HOSTS: &[&str] = &[
    "localhost",
    "the",
    "a",
    "an",
    "is",
    "not",
    "found",
    "failed",
    "error",
    "unknown",
    "http",
    "https",
    "tcp",
    "udp",
    "port",
    "for",
    "to",
    "on",
    "at",
    "from",
    "with",
    "name",
    "via",
    "address",
    "server",
    "host",
    "hostname",
    "upstream",
    "lookup",
    "resolve",
    "it",
    "this",
];

fn push<T: PartialEq>(v: &mut Vec<T>, x: T) {
    if !v.contains(&x) {
        v.push(x);
    }
}

/// Endings of a source or configuration file: `main.go:12` is a line.
const FILE_ENDINGS: &[&str] = &[
    ".go",
    ".rs",
    ".py",
    ".rb",
    ".js",
    ".ts",
    ".java",
    ".kt",
    ".scala",
    ".cs",
    ".php",
    ".ex",
    ".exs",
    ".erl",
    ".c",
    ".cc",
    ".cpp",
    ".h",
    ".cfg",
    ".conf",
    ".yaml",
    ".yml",
    ".toml",
    ".ini",
    ".json",
    ".xml",
    ".properties",
    ".lua",
    ".sh",
    ".sql",
];

fn host_ok(host: &str) -> bool {
    let h = host.trim_matches(['[', ']']);
    let lower = h.to_ascii_lowercase();
    if FILE_ENDINGS.iter().any(|e| lower.ends_with(e)) {
        return false;
    }
    !h.is_empty()
        && h.len() <= 253
        && !NOT_HOSTS.contains(&h.to_ascii_lowercase().as_str())
        && !h.chars().all(|c| c.is_ascii_digit())
        // A version (`1.2`) or a time is not a host.
        && !h.split('.').all(|p| p.chars().all(|c| c.is_ascii_digit()) && p.len() <= 2)
        // Nor is a date (`2023-08-03T16:57:36`).
        && !is_date(h)
}

/// `2023-08-03`, `2023-08-03t16`: a date, with or without its hour.
fn is_date(h: &str) -> bool {
    let b = h.as_bytes();
    b.len() >= 10
        && b[..4].iter().all(u8::is_ascii_digit)
        && b[4] == b'-'
        && b[5..7].iter().all(u8::is_ascii_digit)
        && b[7] == b'-'
        && b[8..10].iter().all(u8::is_ascii_digit)
}

/// The objects `line` names.
pub fn extract(line: &str) -> Objects {
    let mut o = Objects::default();
    if let Some(url) = URL.as_ref() {
        for c in url.captures_iter(line) {
            let host = c[1].to_string();
            let port = c.get(2).and_then(|p| p.as_str().parse().ok());
            if host_ok(&host) {
                push(&mut o.endpoints, (host.to_ascii_lowercase(), port));
            }
            if let Some(p) = port {
                push(&mut o.ports, p);
            }
        }
    }
    let without_urls = URL
        .as_ref()
        .map(|u| u.replace_all(line, " ").into_owned())
        .unwrap_or_else(|| line.to_string());
    if let Some(hp) = HOST_PORT.as_ref() {
        for c in hp.captures_iter(&without_urls) {
            let host = c[1].to_string();
            let Ok(port) = c[2].parse::<u16>() else {
                continue;
            };
            // `12:30:01` is a time, `::1` an address family.
            if host.chars().all(|ch| ch.is_ascii_digit()) && host.len() <= 2 {
                continue;
            }
            if host_ok(&host) {
                push(&mut o.endpoints, (host.to_ascii_lowercase(), Some(port)));
            }
            push(&mut o.ports, port);
        }
    }
    if let Some(named) = NAMED_HOST.as_ref() {
        for c in named.captures_iter(&without_urls) {
            let host = c[1].to_ascii_lowercase();
            let known = o.endpoints.iter().any(|(h, _)| *h == host);
            if host_ok(&host) && !known && !host.contains('/') {
                push(&mut o.endpoints, (host, None));
            }
        }
    }
    if let Some(pw) = PORT_WORD.as_ref() {
        for c in pw.captures_iter(line) {
            if let Ok(p) = c[1].parse::<u16>() {
                push(&mut o.ports, p);
            }
        }
    }
    if let Some(path) = PATH.as_ref() {
        for c in path.captures_iter(&without_urls) {
            let p = c[1].trim_end_matches(['.', ',', ':', ';']).to_string();
            if p.len() > 1 && !p.starts_with("//") {
                push(&mut o.paths, p);
            }
        }
    }
    if let Some(var) = VARIABLE.as_ref() {
        for c in var.captures_iter(line) {
            let v = c[1].to_string();
            if !NOT_VARIABLES.iter().any(|n| v.starts_with(n)) {
                push(&mut o.variables, v);
            }
        }
    }
    if let Some(user) = USER.as_ref() {
        for c in user.captures_iter(line) {
            let u = c[1].to_string();
            if !NOT_HOSTS.contains(&u.to_ascii_lowercase().as_str()) {
                push(&mut o.users, u);
            }
        }
    }
    if let Some(m) = MODULE.as_ref() {
        for c in m.captures_iter(line) {
            push(
                &mut o.modules,
                c[1].trim_end_matches(['.', ',']).to_string(),
            );
        }
    }
    if let Some(v) = VERSION.as_ref() {
        for c in v.captures_iter(&without_urls) {
            let whole = c.get(0).map(|m| m.as_str()).unwrap_or("");
            // An address's octets are not a version.
            let after = &without_urls[c.get(0).map_or(0, |m| m.end())..];
            if after.starts_with('.') || after.starts_with(':') {
                continue;
            }
            push(
                &mut o.versions,
                whole.trim_start_matches(['v', 'V']).to_string(),
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_object_is_found_by_its_shape() {
        let o = extract("OSError: [Errno 30] Read-only file system: '/var/lib/grafana/plugins'");
        assert_eq!(o.paths, vec!["/var/lib/grafana/plugins"]);
        let o = extract("dial tcp 172.18.0.4:5672: connect: connection refused");
        assert_eq!(o.endpoints, vec![("172.18.0.4".to_string(), Some(5672))]);
        assert_eq!(o.ports, vec![5672]);
        let o = extract("Error: getaddrinfo ENOTFOUND billing-rabbitmq");
        assert_eq!(o.endpoints, vec![("billing-rabbitmq".to_string(), None)]);
        let o = extract("could not connect to amqp://guest@broker:5672/vhost");
        assert_eq!(o.endpoints, vec![("broker".to_string(), Some(5672))]);
        assert!(o.paths.is_empty(), "{o:?}");
        let o = extract("KeyError: 'DATABASE_URL'");
        assert_eq!(o.variables, vec!["DATABASE_URL"]);
        let o = extract("x509: CERT_HAS_EXPIRED for api.example.com");
        assert!(o.variables.is_empty(), "{o:?}");
        let o = extract(r#"FATAL: password authentication failed for user "grafana""#);
        assert_eq!(o.users, vec!["grafana"]);
        let o = extract("ModuleNotFoundError: No module named 'psycopg2'");
        assert_eq!(o.modules, vec!["psycopg2"]);
        let o = extract("this data directory was written by 16.2, this server is 15.4");
        assert_eq!(o.versions, vec!["16.2", "15.4"]);
        let o = extract("listen tcp 0.0.0.0:8080: bind: address already in use");
        assert_eq!(o.ports, vec![8080]);
        let o = extract("2024-01-02 12:30:01 INFO started");
        assert!(o.endpoints.is_empty() && o.ports.is_empty(), "{o:?}");
        let o = extract("[ALERT] config : [/usr/local/etc/haproxy/haproxy.cfg:72] : 'server inventory/inventory' : could not resolve address 'inventory'.");
        assert_eq!(o.endpoints, vec![("inventory".to_string(), None)], "{o:?}");
        let o = extract("lookup kafka on 127.0.0.11:53: no such host");
        assert!(o.endpoints.iter().any(|(h, _)| h == "kafka"), "{o:?}");
    }
}
