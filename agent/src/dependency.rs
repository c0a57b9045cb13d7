//! Dependency reasoning across containers: a service that cannot reach
//! `db:5432` is usually fine itself; the container behind `db` is not. This
//! module names the dependency from the evidence and finds its container.

use crate::model::{ContainerSummaryView, COMPOSE_PROJECT_LABEL, COMPOSE_SERVICE_LABEL};

/// A dependency named by a log line or the runbook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DependencyRef {
    pub host: String,
    pub port: Option<u16>,
    /// `log`, `setting` or `runbook`.
    pub source: &'static str,
}

impl DependencyRef {
    pub fn display(&self) -> String {
        match self.port {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.clone(),
        }
    }
}

/// `db:5432`, `db`, `172.18.0.2:5432`.
pub fn parse(text: &str, source: &'static str) -> Option<DependencyRef> {
    let text = text
        .trim()
        .trim_matches(|c| c == '"' || c == '\'' || c == '`');
    let (host, port) = match text.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            (h, p.parse().ok())
        }
        _ => (text, None),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ok = !host.is_empty()
        && host.len() <= 253
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    ok.then(|| DependencyRef {
        host: host.to_ascii_lowercase(),
        port,
        source,
    })
}

/// The hosts the container's settings point at: a variable named for a
/// host, an address or a URL (`DB_HOST=maria-db`,
/// `DATABASE_URL=postgres://app@db:5432/app`), as the environment holds it.
pub fn from_env(env: &[String]) -> Vec<DependencyRef> {
    const ENDINGS: &[&str] = &[
        "_HOST",
        "_HOSTNAME",
        "_ADDR",
        "_ADDRESS",
        "_SERVER",
        "_URL",
        "_URI",
        "_DSN",
    ];
    env.iter()
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| ENDINGS.iter().any(|e| k.to_ascii_uppercase().ends_with(e)))
        .filter_map(|(_, v)| {
            // `scheme://user:password@host:port/path?query`: the host and port.
            let rest = v.split_once("://").map_or(v, |(_, r)| r);
            let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
            let authority = rest.split(['/', '?', ',']).next().unwrap_or("");
            parse(authority, "setting")
        })
        .filter(|r| r.host != "localhost" && r.host.parse::<std::net::IpAddr>().is_err())
        .collect()
}

/// Find `host:port` or a quoted host name in a dependency error line.
pub fn from_line(line: &str) -> Option<DependencyRef> {
    // Go's resolver names the host before the DNS server it asked.
    if let Some(rest) = line.split("lookup ").nth(1) {
        if let Some(host) = rest.split_whitespace().next() {
            return parse(host.trim_end_matches(':'), "log");
        }
    }
    // host:port first (Go, Node, Python, Redis wording).
    for token in line.split(|c: char| {
        c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == '"' || c == '\''
    }) {
        let token = token.trim_end_matches(['.', ';', ':']);
        if let Some((h, p)) = token.rsplit_once(':') {
            if p.len() >= 2
                && p.len() <= 5
                && p.bytes().all(|b| b.is_ascii_digit())
                && !h.is_empty()
                && !h.contains('/')
                && h != "tcp"
            {
                if let Some(r) = parse(token, "log") {
                    return Some(r);
                }
            }
        }
    }
    // A quoted host: `could not translate host name "db"`, `host not found in upstream "backend"`.
    let quoted = line.split('"').nth(1)?;
    parse(quoted, "log").filter(|r| {
        !r.host.contains('.')
            || r.host
                .split('.')
                .all(|p| p.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The container behind a dependency name, preferring the target's own
/// compose project: compose service label, then name, then address.
/// The label Compose v2 puts on a service's containers:
/// `db:service_started:false,redis:service_healthy:true`.
pub const COMPOSE_DEPENDS_ON_LABEL: &str = "com.docker.compose.depends_on";

/// The services a container's compose `depends_on` label names, in order.
pub fn compose_depends_on(labels: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    labels
        .get(COMPOSE_DEPENDS_ON_LABEL)
        .map(|v| {
            v.split(',')
                .filter_map(|entry| entry.split(':').next())
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.len() <= 128)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

/// Among the services the target's compose file says it depends on, the
/// first whose container (same project) is not running or is unhealthy:
/// the dependency graph as written, before anything is inferred from logs.
pub fn broken_compose_dependency(
    target_labels: &std::collections::BTreeMap<String, String>,
    containers: &[ContainerSummaryView],
) -> Option<DependencyRef> {
    let project = target_labels.get(COMPOSE_PROJECT_LABEL)?;
    compose_depends_on(target_labels)
        .into_iter()
        .find_map(|service| {
            let down = containers
                .iter()
                .filter(|c| c.labels.get(COMPOSE_PROJECT_LABEL) == Some(project))
                .filter(|c| c.labels.get(COMPOSE_SERVICE_LABEL) == Some(&service))
                .any(ContainerSummaryView::is_broken);
            down.then_some(DependencyRef {
                host: service,
                port: None,
                source: "compose depends_on",
            })
        })
}

pub fn find<'a>(
    dep: &DependencyRef,
    target_project: Option<&str>,
    containers: &'a [ContainerSummaryView],
) -> Option<&'a ContainerSummaryView> {
    let same_project = |c: &ContainerSummaryView| {
        target_project.is_some()
            && c.labels.get(COMPOSE_PROJECT_LABEL).map(String::as_str) == target_project
    };
    let service = |c: &ContainerSummaryView| {
        c.labels
            .get(COMPOSE_SERVICE_LABEL)
            .is_some_and(|s| s.eq_ignore_ascii_case(&dep.host))
    };
    let name = |c: &ContainerSummaryView| c.name.eq_ignore_ascii_case(&dep.host);
    let address = |c: &ContainerSummaryView| c.ip_addresses.iter().any(|ip| ip == &dep.host);
    let ranked: [&dyn Fn(&ContainerSummaryView) -> bool; 4] = [
        &|c| service(c) && same_project(c),
        &|c| service(c),
        &|c| name(c),
        &|c| address(c),
    ];
    ranked
        .iter()
        .find_map(|pred| containers.iter().find(|c| pred(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_a_container_s_settings_point_at() {
        let env: Vec<String> = [
            "DB_HOST=maria-db",
            "DB_PORT=3306",
            "DATABASE_URL=postgres://app:secret@db:5432/app?sslmode=disable",
            "REDIS_URL=redis://cache",
            "LISTEN_ADDR=0.0.0.0:8080",
            "API_HOST=localhost",
            "PATH=/usr/bin",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let hosts: Vec<String> = from_env(&env).iter().map(DependencyRef::display).collect();
        assert_eq!(hosts, ["maria-db", "db:5432", "cache"]);
    }

    #[test]
    fn names_from_log_lines() {
        let cases = [
            ("dial tcp db:5432: connect: connection refused", Some("db:5432")),
            ("Error: connect ECONNREFUSED 172.18.0.3:6379", Some("172.18.0.3:6379")),
            ("Could not connect to Redis at redis:6379: Connection refused", Some("redis:6379")),
            ("psycopg2.OperationalError: could not translate host name \"db\" to address: Name or service not known", Some("db")),
            ("dial tcp: lookup db on 127.0.0.11:53: no such host", Some("db")),
            ("dial tcp: lookup db: no such host", Some("db")),
            ("connection refused", None),
        ];
        for (line, want) in cases {
            assert_eq!(
                from_line(line).map(|r| r.display()),
                want.map(String::from),
                "{line}"
            );
        }
    }

    fn c(name: &str, project: &str, service: &str, ip: &str) -> ContainerSummaryView {
        ContainerSummaryView {
            id: format!("id-{name}"),
            name: name.into(),
            labels: [
                (COMPOSE_PROJECT_LABEL.to_string(), project.to_string()),
                (COMPOSE_SERVICE_LABEL.to_string(), service.to_string()),
            ]
            .into(),
            ip_addresses: vec![ip.into()],
            ..Default::default()
        }
    }

    #[test]
    fn the_compose_graph_names_the_broken_dependency_first() {
        let mut db = c("shop-db-1", "shop", "db", "10.0.0.2");
        db.state = "exited".into();
        let mut redis = c("shop-redis-1", "shop", "redis", "10.0.0.3");
        redis.state = "running".into();
        let mut other_db = c("other-db-1", "other", "db", "10.0.9.2");
        other_db.state = "running".into();
        let target: std::collections::BTreeMap<String, String> = [
            (COMPOSE_PROJECT_LABEL.to_string(), "shop".to_string()),
            (
                COMPOSE_DEPENDS_ON_LABEL.to_string(),
                "redis:service_started:false,db:service_healthy:true".to_string(),
            ),
        ]
        .into();
        assert_eq!(compose_depends_on(&target), ["redis", "db"]);
        let found =
            broken_compose_dependency(&target, &[redis.clone(), db.clone(), other_db.clone()])
                .expect("db is down");
        assert_eq!(
            (found.host.as_str(), found.source),
            ("db", "compose depends_on")
        );
        // Every dependency up: nothing to say from the graph.
        db.state = "running".into();
        assert!(broken_compose_dependency(&target, &[redis, db, other_db]).is_none());
        // No label, no graph.
        assert!(compose_depends_on(&Default::default()).is_empty());
    }

    #[test]
    fn finds_the_container_behind_a_name() {
        let fleet = vec![
            c("staging-db-1", "staging", "db", "10.0.0.2"),
            c("prod-db-1", "prod", "db", "10.0.1.2"),
            c("cache", "", "", "10.0.1.3"),
        ];
        let db = parse("db:5432", "log").unwrap();
        assert_eq!(
            find(&db, Some("prod"), &fleet).map(|c| c.name.as_str()),
            Some("prod-db-1")
        );
        assert_eq!(
            find(&db, None, &fleet).map(|c| c.name.as_str()),
            Some("staging-db-1")
        );
        assert_eq!(
            find(&parse("cache", "runbook").unwrap(), None, &fleet).map(|c| c.name.as_str()),
            Some("cache")
        );
        assert_eq!(
            find(&parse("10.0.1.3:6379", "log").unwrap(), None, &fleet).map(|c| c.name.as_str()),
            Some("cache")
        );
        assert!(find(&parse("queue", "log").unwrap(), None, &fleet).is_none());
    }
}
