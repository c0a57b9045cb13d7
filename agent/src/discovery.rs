//! Target discovery: the user says "backend", the container is
//! `shop-prod-backend-1`. Candidates are ranked by compose service label,
//! exact and segment name matches, the role a container plays ("the
//! database" is whatever runs postgres, mysql, mongo…), plurals and joined
//! words ("order service" → `shop-orders-1`), substrings, image, and typos
//! (one or two edits away). A tie between different containers is a
//! question for the user, not a guess, unless exactly one of them is broken:
//! that is the one people mean. Words in other scripts ("backend 挂了") are
//! separators, so the names among them still count.

use crate::model::{
    Candidate, ContainerSummaryView, ContainerView, ServiceSummaryView, TargetKind,
    COMPOSE_PROJECT_LABEL, COMPOSE_SERVICE_LABEL, SWARM_SERVICE_ID_LABEL,
};

const STOPWORDS: &[&str] = &[
    "the",
    "is",
    "are",
    "was",
    "down",
    "broken",
    "not",
    "working",
    "why",
    "what",
    "my",
    "our",
    "container",
    "service",
    "app",
    "please",
    "fix",
    "check",
    "and",
    "with",
    "failing",
    "fails",
    "failed",
    "dead",
    "crashed",
    "crashing",
    "unhealthy",
    "again",
    "it",
    "its",
    "this",
    "that",
    "does",
    "doesn",
    "won",
    "start",
    "can",
    "cannot",
    "keeps",
    "restarting",
    "help",
    "look",
    "at",
    "on",
    "in",
    "of",
    "for",
    "to",
    "a",
    "an",
    "up",
    // Words that describe a state, not a container (`described` reads them).
    "slow",
    "stuck",
    "hangs",
    "hanging",
    "died",
    "dies",
    "dying",
    "exited",
    "crashes",
    "responding",
    "unresponsive",
    "loop",
    "timing",
    "times",
    "out",
    "healthy",
    "health",
    "healthcheck",
    "come",
    "boot",
    "never",
    "will",
    "wont",
    "doesnt",
    "starting",
    "restart",
    "flapping",
];

/// Role words people use, and what containers playing that role run
/// (image or compose service names).
const ROLES: &[(&[&str], &[&str])] = &[
    (
        &["database", "databases", "db", "sql", "datastore"],
        &[
            "postgres",
            "postgresql",
            "mysql",
            "mariadb",
            "mongo",
            "mongodb",
            "cockroach",
            "timescaledb",
            "percona",
            "mssql",
            "oracle",
        ],
    ),
    (
        &["cache", "caches", "kv"],
        &["redis", "memcached", "valkey", "keydb", "dragonfly"],
    ),
    (
        &["queue", "queues", "broker", "mq", "messaging", "bus"],
        &[
            "rabbitmq",
            "kafka",
            "nats",
            "activemq",
            "redpanda",
            "pulsar",
            "mosquitto",
        ],
    ),
    (
        &[
            "proxy",
            "gateway",
            "ingress",
            "lb",
            "balancer",
            "loadbalancer",
            "router",
        ],
        &["nginx", "traefik", "haproxy", "caddy", "envoy"],
    ),
    (
        &["webserver", "web-server", "httpd"],
        &["nginx", "httpd", "apache", "caddy", "lighttpd"],
    ),
    (
        &["search", "index"],
        &[
            "elasticsearch",
            "opensearch",
            "meilisearch",
            "solr",
            "typesense",
        ],
    ),
    (&["storage", "s3", "objectstore"], &["minio", "seaweedfs"]),
];

/// The outcome of discovery.
#[derive(Debug, Clone, PartialEq)]
pub enum Discovery {
    Found(Candidate),
    /// Several containers fit equally well; the user must pick.
    Ambiguous(Vec<Candidate>),
    /// Nothing fits; these are what exists.
    NoMatch(Vec<Candidate>),
}

fn candidate(c: &ContainerSummaryView, score: u32, why: impl Into<String>) -> Candidate {
    Candidate {
        kind: TargetKind::Container,
        container_id: c.id.clone(),
        container_name: c.name.clone(),
        image: c.image.clone(),
        state: c.state.clone(),
        service: c.labels.get(COMPOSE_SERVICE_LABEL).cloned(),
        score,
        why: why.into(),
        host: c.host.clone(),
    }
}

/// The words of a message that can name a container, and each adjacent
/// pair joined (`web server` → `web-server`, `webserver`). Anything that is
/// not ASCII letters, digits, `-`, `_` or `.` separates words.
fn words(message: &str) -> Vec<String> {
    let plain: Vec<String> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .map(|w| {
            w.trim_matches(|c: char| c == '.' || c == '-')
                .to_ascii_lowercase()
        })
        .filter(|w| w.len() >= 2)
        .collect();
    let mut out: Vec<String> = plain
        .iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .cloned()
        .collect();
    for pair in plain.windows(2) {
        if pair.iter().all(|w| w.len() >= 2)
            && pair.iter().any(|w| !STOPWORDS.contains(&w.as_str()))
        {
            out.push(format!("{}-{}", pair[0], pair[1]));
            out.push(format!("{}{}", pair[0], pair[1]));
        }
    }
    out
}

/// Damerau-Levenshtein distance (adjacent transpositions), for typos.
fn edits(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            d[i][j] = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
            }
        }
    }
    d[a.len()][b.len()]
}

/// Edits a word of this length may be away from a name and still be a typo.
fn typo_budget(len: usize) -> usize {
    match len {
        0..=3 => 0,
        4..=6 => 1,
        _ => 2,
    }
}

/// The image's base name: `docker.io/library/postgres:16` → `postgres`.
fn image_base(image: &str) -> String {
    let image = image.to_ascii_lowercase();
    image
        .rsplit('/')
        .next()
        .unwrap_or(&image)
        .split(['@', ':'])
        .next()
        .unwrap_or("")
        .to_string()
}

/// The service a Swarm task container's name belongs to: names are
/// `SERVICE.SLOT.TASK` (replicated) or `SERVICE.NODE.TASK` (global). Task
/// containers are rarely in the executor's container scope; the name alone
/// leads to the service.
fn task_service(name: &str) -> Option<&str> {
    let (rest, task) = name.rsplit_once('.')?;
    let (service, slot) = rest.rsplit_once('.')?;
    let plain = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric());
    (plain(task) && task.len() >= 20 && plain(slot) && !service.is_empty()).then_some(service)
}

/// Score one container against one word of the request.
fn score(c: &ContainerSummaryView, word: &str) -> Option<(u32, String)> {
    let name = c.name.to_ascii_lowercase();
    let service = c
        .labels
        .get(COMPOSE_SERVICE_LABEL)
        .map(|s| s.to_ascii_lowercase());
    if name == word {
        return Some((100, format!("name is `{}`", c.name)));
    }
    if service.as_deref() == Some(word) {
        return Some((95, format!("compose service `{word}`")));
    }
    if c.id.starts_with(word) && word.len() >= 6 {
        return Some((100, "container id".into()));
    }
    if task_service(word) == Some(name.as_str()) {
        return Some((100, format!("`{word}` is a task of service `{}`", c.name)));
    }
    if name.split(['-', '_', '.']).any(|seg| seg == word) {
        return Some((80, format!("name `{}` contains `{word}`", c.name)));
    }
    let segments: Vec<&str> = name.split(['-', '_', '.']).collect();
    let plural = |a: &str, b: &str| a.len() >= 3 && (format!("{a}s") == b || format!("{b}s") == a);
    if segments.iter().any(|seg| plural(seg, word))
        || service.as_deref().is_some_and(|s| plural(s, word))
    {
        return Some((
            75,
            format!("name `{}` has `{word}` (singular or plural)", c.name),
        ));
    }
    let image_base = image_base(&c.image);
    if let Some((_, runs)) = ROLES.iter().find(|(said, _)| said.contains(&word)) {
        let plays = |what: &str| {
            runs.iter()
                .any(|r| what == *r || what.starts_with(&format!("{r}-")))
        };
        if plays(&image_base)
            || service.as_deref().is_some_and(plays)
            || segments.iter().any(|s| plays(s))
        {
            return Some((70, format!("the {word}: it runs `{}`", c.image)));
        }
    }
    if image_base == word {
        return Some((60, format!("image `{}`", c.image)));
    }
    if word.len() >= 3 && name.contains(word) {
        return Some((50, format!("name `{}` contains `{word}`", c.name)));
    }
    if word.len() >= 4 && service.as_deref().is_some_and(|s| s.contains(word)) {
        return Some((45, format!("compose service contains `{word}`")));
    }
    if c.labels
        .get(COMPOSE_PROJECT_LABEL)
        .is_some_and(|p| p.eq_ignore_ascii_case(word))
    {
        return Some((55, format!("compose project `{word}`")));
    }
    let budget = typo_budget(word.len());
    if budget > 0 {
        let close = segments
            .iter()
            .copied()
            .chain(service.as_deref())
            .chain(std::iter::once(name.as_str()))
            .filter(|s| s.len() >= 4)
            .find(|s| edits(s, word) <= budget);
        if let Some(close) = close {
            return Some((40, format!("`{word}` looks like a typo of `{close}`")));
        }
    }
    None
}

/// A state a message describes: "web is unhealthy", "the api won't
/// start", "redis keeps restarting". Among containers that fit the words
/// equally, the one in that state is the one meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Described {
    Unhealthy,
    WontStart,
    Restarting,
    Crashed,
    Slow,
}

impl Described {
    fn said(self) -> &'static str {
        match self {
            Described::Unhealthy => "unhealthy",
            Described::WontStart => "not starting",
            Described::Restarting => "restarting",
            Described::Crashed => "crashed",
            Described::Slow => "running but unhealthy",
        }
    }
}

/// The states a message describes, by its words (English; other words
/// simply describe none).
fn described(message: &str) -> Vec<Described> {
    let m = message.to_lowercase().replace(['\u{2019}', '`'], "'");
    let any = |phrases: &[&str]| phrases.iter().any(|p| m.contains(p));
    let mut out = Vec::new();
    if any(&[
        "unhealthy",
        "health check fail",
        "healthcheck fail",
        "not healthy",
        "health is failing",
    ]) {
        out.push(Described::Unhealthy);
    }
    if any(&[
        "won't start",
        "wont start",
        "will not start",
        "doesn't start",
        "does not start",
        "can't start",
        "cannot start",
        "fails to start",
        "failed to start",
        "not starting",
        "won't come up",
        "doesn't come up",
        "won't boot",
        "never starts",
    ]) {
        out.push(Described::WontStart);
    }
    if any(&[
        "restarting",
        "restart loop",
        "crash loop",
        "crashloop",
        "boot loop",
        "flapping",
        "keeps crashing",
        "keeps dying",
    ]) {
        out.push(Described::Restarting);
    }
    if any(&[
        "crashed",
        "crashes",
        "crashing",
        "died",
        "keeps dying",
        "exited",
    ]) {
        out.push(Described::Crashed);
    }
    if any(&[
        "slow",
        "sluggish",
        "timing out",
        "times out",
        "hangs",
        "hanging",
        "unresponsive",
        "not responding",
        "stuck",
    ]) {
        out.push(Described::Slow);
    }
    out
}

/// The exit code `docker ps` shows: `Exited (1) 2 minutes ago`.
fn exit_code_of(c: &ContainerSummaryView) -> Option<i64> {
    let rest = c.status.strip_prefix("Exited (")?;
    rest.split(')').next()?.trim().parse().ok()
}

fn in_state(c: &ContainerSummaryView, state: Described) -> bool {
    let unhealthy = c.state == "running" && c.status.contains("(unhealthy)");
    let restarting = c.state == "restarting" || c.status.starts_with("Restarting");
    let failed_exit = matches!(c.state.as_str(), "exited" | "dead") && exit_code_of(c) != Some(0);
    match state {
        Described::Unhealthy | Described::Slow => unhealthy,
        Described::WontStart => c.state == "created" || failed_exit || restarting,
        Described::Restarting => restarting,
        Described::Crashed => failed_exit,
    }
}

/// Among equals, the only one in a state the message describes.
fn the_one_described<'c>(
    message: &str,
    tied: &'c [Candidate],
    containers: &[ContainerSummaryView],
) -> Option<(&'c Candidate, Described)> {
    described(message).into_iter().find_map(|state| {
        let matching: Vec<&Candidate> = tied
            .iter()
            .filter(|t| {
                containers
                    .iter()
                    .find(|c| c.id == t.container_id)
                    .is_some_and(|c| in_state(c, state))
            })
            .collect();
        match matching.as_slice() {
            [only] => Some((*only, state)),
            _ => None,
        }
    })
}

/// Whether the message describes a state at all (then an inspect of the
/// tied candidates can tell them apart where the list cannot: a container
/// between two restarts of a loop shows as running).
pub fn describes_a_state(message: &str) -> bool {
    !described(message).is_empty()
}

/// The state as its inspect shows it: restarts counted, health read.
fn view_in_state(v: &ContainerView, state: Described) -> bool {
    let looping =
        v.restarting || (v.restart_count >= 3 && !matches!(v.restart_policy.as_str(), "" | "no"));
    let failed_exit = !v.running && v.exit_code != 0;
    match state {
        Described::Unhealthy | Described::Slow => v.running && v.health_status == "unhealthy",
        Described::WontStart => failed_exit || looping || v.status == "created",
        Described::Restarting => looping,
        Described::Crashed => failed_exit || looping,
    }
}

/// Among tied candidates, the only one whose inspect (`views`) is in a
/// state the message describes; its `why` says so.
pub fn the_one_inspected(
    message: &str,
    tied: &[Candidate],
    views: &[ContainerView],
) -> Option<Candidate> {
    described(message).into_iter().find_map(|state| {
        let matching: Vec<&Candidate> = tied
            .iter()
            .filter(|t| {
                views
                    .iter()
                    .find(|v| v.id == t.container_id)
                    .is_some_and(|v| view_in_state(v, state))
            })
            .collect();
        match matching.as_slice() {
            [only] => {
                let mut found = (*only).clone();
                found.why = format!(
                    "{}; the only one of {} that is {}, as the message says (from its inspect)",
                    found.why,
                    tied.len(),
                    state.said()
                );
                Some(found)
            }
            _ => None,
        }
    })
}

/// Rank containers for a free-text request.
pub fn discover(message: &str, containers: &[ContainerSummaryView]) -> Discovery {
    let words = words(message);
    let mut ranked: Vec<Candidate> = containers
        .iter()
        .filter_map(|c| {
            words
                .iter()
                .filter_map(|w| score(c, w))
                .max_by_key(|(s, _)| *s)
                .map(|(s, why)| candidate(c, s, why))
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then_with(|| a.container_name.cmp(&b.container_name))
    });
    match ranked.as_slice() {
        [] => Discovery::NoMatch(
            containers
                .iter()
                .take(20)
                .map(|c| candidate(c, 0, "exists"))
                .collect(),
        ),
        [only] => Discovery::Found(only.clone()),
        [first, second, ..] if first.score > second.score => Discovery::Found(first.clone()),
        _ => {
            let top = ranked[0].score;
            let tied: Vec<Candidate> = ranked.into_iter().filter(|c| c.score == top).collect();
            // Several fit equally: the one in the state the message
            // describes is meant ("the shop is unhealthy").
            if let Some((one, state)) = the_one_described(message, &tied, containers) {
                let mut found = one.clone();
                found.why = format!(
                    "{}; the only one of {} that is {}, as the message says",
                    found.why,
                    tied.len(),
                    state.said()
                );
                return Discovery::Found(found);
            }
            // Else, if exactly one of them is broken, that is the one the
            // person means.
            let broken: Vec<&Candidate> = tied
                .iter()
                .filter(|t| {
                    containers
                        .iter()
                        .find(|c| c.id == t.container_id)
                        .is_some_and(ContainerSummaryView::is_broken)
                })
                .collect();
            match broken.as_slice() {
                [only] => {
                    let mut found = (*only).clone();
                    found.why = format!(
                        "{}; the only one of {} that is broken",
                        found.why,
                        tied.len()
                    );
                    Discovery::Found(found)
                }
                _ => Discovery::Ambiguous(tied),
            }
        }
    }
}

/// Swarm services beside the containers, in one ranking. A service is a
/// row like a container's: its name without its stack's prefix plays the
/// compose service (`shop_api` of stack `shop` is "api"), and it is broken
/// when it runs fewer tasks than it wants. A task container of a visible
/// service is not a row of its own: the service stands for it, so "the
/// api" is the service, not one of its tasks.
pub fn rows_with_services(
    containers: &[ContainerSummaryView],
    services: &[ServiceSummaryView],
) -> Vec<ContainerSummaryView> {
    let mut rows: Vec<ContainerSummaryView> = containers
        .iter()
        .filter(|c| {
            c.labels
                .get(SWARM_SERVICE_ID_LABEL)
                .is_none_or(|id| !services.iter().any(|s| &s.id == id))
        })
        .cloned()
        .collect();
    rows.extend(services.iter().map(|s| {
        let short = s
            .name
            .strip_prefix(&format!("{}_", s.stack))
            .filter(|_| !s.stack.is_empty())
            .unwrap_or(&s.name);
        let mut labels = s.labels.clone();
        labels.insert(COMPOSE_SERVICE_LABEL.into(), short.to_string());
        let healthy = s.desired > 0 && s.running >= s.desired;
        ContainerSummaryView {
            id: s.id.clone(),
            name: s.name.clone(),
            image: s.image.clone(),
            state: if healthy { "running" } else { "degraded" }.into(),
            status: format!("{}/{} tasks", s.running, s.desired),
            labels,
            ..Default::default()
        }
    }));
    rows
}

/// Mark the candidates that are services (by id), after a ranking over
/// `rows_with_services`; a task container chosen by name (`--container
/// shop_api.1.x`) leads to its service.
pub fn as_services(found: Discovery, services: &[ServiceSummaryView]) -> Discovery {
    let mark = |mut c: Candidate| {
        if let Some(s) = services.iter().find(|s| s.id == c.container_id) {
            c.kind = TargetKind::Service;
            c.service = None;
            c.why = format!("{} (Swarm service)", c.why);
            c.container_name = s.name.clone();
        }
        c
    };
    match found {
        Discovery::Found(c) => Discovery::Found(mark(c)),
        Discovery::Ambiguous(cs) => Discovery::Ambiguous(cs.into_iter().map(mark).collect()),
        Discovery::NoMatch(cs) => Discovery::NoMatch(cs.into_iter().map(mark).collect()),
    }
}

/// `--container NAME` among containers and services: a task container's
/// name or id leads to its service when that service is visible.
pub fn exact_with_services(
    name: &str,
    containers: &[ContainerSummaryView],
    services: &[ServiceSummaryView],
) -> Discovery {
    let wanted = name.trim_start_matches('/');
    let task_of = containers
        .iter()
        .find(|c| {
            c.name == wanted || c.id == wanted || (wanted.len() >= 6 && c.id.starts_with(wanted))
        })
        .and_then(|c| c.labels.get(SWARM_SERVICE_ID_LABEL))
        .and_then(|id| services.iter().find(|s| &s.id == id));
    let task_of = task_of
        .or_else(|| task_service(wanted).and_then(|svc| services.iter().find(|s| s.name == svc)));
    let rows = rows_with_services(containers, services);
    let found = match task_of {
        Some(s) => exact(&s.id, &rows),
        None => exact(name, &rows),
    };
    as_services(found, services)
}

/// `--container NAME`: an exact name or id (prefix) the user chose.
pub fn exact(name: &str, containers: &[ContainerSummaryView]) -> Discovery {
    let wanted = name.trim_start_matches('/');
    let hits: Vec<Candidate> = containers
        .iter()
        .filter(|c| {
            c.name == wanted || c.id == wanted || (wanted.len() >= 6 && c.id.starts_with(wanted))
        })
        .map(|c| candidate(c, 100, "chosen with --container"))
        .collect();
    match hits.len() {
        1 => Discovery::Found(hits[0].clone()),
        0 => Discovery::NoMatch(
            containers
                .iter()
                .take(20)
                .map(|c| candidate(c, 0, "exists"))
                .collect(),
        ),
        _ => Discovery::Ambiguous(hits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, service: Option<&str>, image: &str) -> ContainerSummaryView {
        let mut labels = std::collections::BTreeMap::new();
        if let Some(s) = service {
            labels.insert(COMPOSE_SERVICE_LABEL.to_string(), s.to_string());
        }
        ContainerSummaryView {
            id: format!("{:0<64}", name.len()),
            name: name.into(),
            image: image.into(),
            state: "running".into(),
            status: String::new(),
            labels,
            ..Default::default()
        }
    }

    #[test]
    fn discovery_table() {
        let fleet = vec![
            c("shop-prod-backend-1", Some("backend"), "shop/backend:1"),
            c("shop-prod-db-1", Some("db"), "postgres:16"),
            c("shop-staging-backend-1", Some("backend"), "shop/backend:1"),
            c("cache", None, "redis:7"),
        ];
        let found = |msg: &str, fleet: &[ContainerSummaryView]| match discover(msg, fleet) {
            Discovery::Found(c) => c.container_name,
            other => format!("{other:?}"),
        };
        assert_eq!(found("db is down", &fleet), "shop-prod-db-1");
        assert_eq!(found("why is the cache broken?", &fleet), "cache");
        assert_eq!(found("redis keeps restarting", &fleet), "cache");
        assert_eq!(found("postgres is slow", &fleet), "shop-prod-db-1");
        assert!(
            matches!(discover("backend is down", &fleet), Discovery::Ambiguous(v) if v.len() == 2)
        );
        assert_eq!(
            found("shop-prod-backend-1 is down", &fleet),
            "shop-prod-backend-1"
        );
        assert_eq!(found("backend is down", &fleet[..2]), "shop-prod-backend-1");
        assert!(
            matches!(discover("frontend is down", &fleet), Discovery::NoMatch(v) if v.len() == 4)
        );
        assert!(
            matches!(exact("cache", &fleet), Discovery::Found(c) if c.container_name == "cache")
        );
        assert!(matches!(exact("nope", &fleet), Discovery::NoMatch(_)));
    }

    fn broken(mut c: ContainerSummaryView, id: char) -> ContainerSummaryView {
        c.state = "exited".into();
        c.id = id.to_string().repeat(64);
        c
    }

    #[test]
    fn roles_typos_joined_words_and_other_languages() {
        let fleet = vec![
            c("shop-orders-1", Some("orders"), "shop/orders:3"),
            c("shop-db-1", Some("db"), "docker.io/library/postgres:16"),
            c("shop-redis-1", Some("redis"), "redis:7"),
            c("shop-mq-1", Some("mq"), "rabbitmq:3-management"),
            c("edge", None, "traefik:v3"),
            c("shop-payments-1", Some("payments"), "shop/payments:1"),
            c("shop-search-1", None, "elasticsearch:8"),
        ];
        let found = |msg: &str| match discover(msg, &fleet) {
            Discovery::Found(c) => c.container_name,
            other => format!("{other:?}"),
        };
        assert_eq!(found("the database is down"), "shop-db-1");
        assert_eq!(found("cache is slow"), "shop-redis-1");
        assert_eq!(found("the queue is not consuming"), "shop-mq-1");
        assert_eq!(found("the proxy returns 502"), "edge");
        assert_eq!(found("order service is down"), "shop-orders-1");
        assert_eq!(found("paymnets keeps failing"), "shop-payments-1");
        assert_eq!(found("ordres are stuck"), "shop-orders-1");
        assert_eq!(found("payments 挂了"), "shop-payments-1");
        assert_eq!(
            found("la base de datos (database) no responde"),
            "shop-db-1"
        );
        assert_eq!(found("search is broken"), "shop-search-1");
        // Short words are never typos of something else.
        assert!(matches!(
            discover("db2 is down", &fleet),
            Discovery::NoMatch(_)
        ));
    }

    #[test]
    fn among_equals_the_broken_one_is_meant() {
        let primary = c("pg-primary", None, "postgres:16");
        let replica = broken(c("pg-replica", None, "postgres:16"), 'b');
        let fleet = vec![primary.clone(), replica];
        match discover("the database is down", &fleet) {
            Discovery::Found(c) => {
                assert_eq!(c.container_name, "pg-replica");
                assert!(c.why.contains("only one"), "{}", c.why);
            }
            other => panic!("{other:?}"),
        }
        // Both broken, or none: still a question.
        let both = vec![
            broken(primary.clone(), 'a'),
            broken(c("pg-replica", None, "postgres:16"), 'b'),
        ];
        assert!(
            matches!(discover("the database is down", &both), Discovery::Ambiguous(v) if v.len() == 2)
        );
        let none = vec![primary, c("pg-replica", None, "postgres:16")];
        assert!(matches!(
            discover("the database is down", &none),
            Discovery::Ambiguous(_)
        ));
    }

    fn in_state(name: &str, project: &str, state: &str, status: &str) -> ContainerSummaryView {
        let mut v = c(
            name,
            Some(name.split('-').nth(1).unwrap_or(name)),
            "shop/app:1",
        );
        v.labels
            .insert(COMPOSE_PROJECT_LABEL.to_string(), project.to_string());
        v.id = format!("{name:0<64}");
        v.state = state.into();
        v.status = status.into();
        v
    }

    #[test]
    fn the_state_a_message_describes_picks_among_equals() {
        let fleet = vec![
            in_state("shop-web-1", "shop", "running", "Up 3 minutes (unhealthy)"),
            in_state("shop-db-1", "shop", "exited", "Exited (0) 5 minutes ago"),
            in_state(
                "shop-worker-1",
                "shop",
                "restarting",
                "Restarting (1) 2 seconds ago",
            ),
            in_state("shop-api-1", "shop", "exited", "Exited (1) 1 minute ago"),
            in_state("shop-cache-1", "shop", "running", "Up 1 hour"),
        ];
        let found = |msg: &str| match discover(msg, &fleet) {
            Discovery::Found(c) => c.container_name,
            other => format!("{other:?}"),
        };
        assert_eq!(found("the shop is unhealthy"), "shop-web-1");
        assert_eq!(found("shop is slow"), "shop-web-1");
        assert_eq!(found("something in shop keeps restarting"), "shop-worker-1");
        assert_eq!(
            found("shop crashed"),
            "shop-api-1",
            "exit 1, not the exit-0 db"
        );
        assert!(
            matches!(discover("shop won't start", &fleet), Discovery::Ambiguous(v) if v.len() == 5),
            "the api (exit 1) and the worker (restarting) both fit: a question"
        );
        // No state word, several broken: a question, as before.
        assert!(matches!(
            discover("shop is down", &fleet),
            Discovery::Ambiguous(_)
        ));
        // A name still outranks the state: the db is meant, whatever it is.
        assert_eq!(found("shop db is unhealthy"), "shop-db-1");
        // The project's label counts when no name carries it.
        let mut odd = in_state("payments", "billing", "running", "Up 2 minutes (unhealthy)");
        odd.labels.remove(COMPOSE_SERVICE_LABEL);
        let fleet = [
            odd,
            in_state("ledger", "billing", "running", "Up 2 minutes"),
        ];
        match discover("billing is unhealthy", &fleet) {
            Discovery::Found(c) => {
                assert_eq!(c.container_name, "payments");
                assert!(
                    c.why.contains("unhealthy, as the message says"),
                    "{}",
                    c.why
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_inspect_tells_a_crash_loop_between_restarts_from_a_healthy_one() {
        let fleet = vec![
            in_state("market-api-1", "market", "running", "Up 2 minutes"),
            in_state(
                "market-indexer-1",
                "market",
                "running",
                "Up Less than a second",
            ),
        ];
        let Discovery::Ambiguous(tied) = discover("something in market keeps restarting", &fleet)
        else {
            panic!("the list alone cannot tell them apart")
        };
        let view = |c: &ContainerSummaryView, restarts: i64| ContainerView {
            id: c.id.clone(),
            name: c.name.clone(),
            running: true,
            restart_count: restarts,
            restart_policy: "always".into(),
            ..Default::default()
        };
        let views = [view(&fleet[0], 0), view(&fleet[1], 7)];
        let one = the_one_inspected("something in market keeps restarting", &tied, &views)
            .expect("the indexer restarts");
        assert_eq!(one.container_name, "market-indexer-1");
        assert!(one.why.contains("from its inspect"), "{}", one.why);
        assert!(the_one_inspected("market is down", &tied, &views).is_none());
        let both = [view(&fleet[0], 5), view(&fleet[1], 7)];
        assert!(the_one_inspected("market keeps restarting", &tied, &both).is_none());
    }

    #[test]
    fn edits_count_transpositions_once() {
        assert_eq!(edits("orders", "ordres"), 1);
        assert_eq!(edits("payments", "paymnets"), 1);
        assert_eq!(edits("backend", "backend"), 0);
        assert_eq!(edits("api", "web"), 3);
    }

    #[test]
    fn services_are_found_by_their_short_name_and_by_a_task_container_name() {
        let svc = |id: &str, name: &str, running| ServiceSummaryView {
            id: id.into(),
            name: name.into(),
            stack: "shop".into(),
            desired: 1,
            running,
            ..Default::default()
        };
        let services = [svc("svcapi", "shop_api", 0), svc("svcweb", "shop_web", 1)];
        let containers = [c("web-1", None, "nginx")];
        let rows = rows_with_services(&containers, &services);
        let found = |text: &str| match as_services(discover(text, &rows), &services) {
            Discovery::Found(c) => (c.container_name, c.kind),
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            found("the api is down"),
            ("shop_api".into(), TargetKind::Service)
        );
        let task = "shop_api.1.k3j5x0q7w2e9r4t6y8u1i3o5p";
        assert_eq!(found(&format!("is {task} ok?")).0, "shop_api");
        match exact_with_services(task, &containers, &services) {
            Discovery::Found(c) => assert_eq!(c.container_name, "shop_api"),
            other => panic!("{other:?}"),
        }
        assert_eq!(task_service("my.app"), None, "a dotted name is not a task");
        assert_eq!(task_service("shop_api.1.short"), None);
    }
}
