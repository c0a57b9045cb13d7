//! Parts of a system: "walk api" names the api of walk, so a container
//! that is plainly another part (`walk-db`) is not what it means.

use super::image_base;
use crate::model::{ContainerSummaryView, COMPOSE_SERVICE_LABEL};

/// The part of a system a word names: a message that names one part
/// ("walk api") does not mean a container whose name, service or image
/// says it is another part (`walk-db`), however much of the rest fits.
/// Words of one row name the same part.
const PARTS: &[&[&str]] = &[
    &["api", "apis", "backend", "backends", "server"],
    &["web", "frontend", "front", "ui", "www"],
    &[
        "db",
        "database",
        "databases",
        "sql",
        "postgres",
        "postgresql",
        "pg",
        "mysql",
        "mariadb",
        "mongo",
        "mongodb",
    ],
    &["cache", "redis", "memcached", "valkey"],
    &["worker", "workers", "consumer", "celery", "sidekiq"],
    &[
        "proxy", "gateway", "ingress", "lb", "nginx", "traefik", "haproxy",
    ],
    &["scheduler", "cron", "beat"],
    &["queue", "broker", "rabbitmq", "kafka", "nats"],
];

/// Whether `word` is said as part of the name of an error in the
/// message ("Internal Server Error", "API error"), which names no part of
/// a system.
fn in_an_error_name(message: &str, word: &str) -> bool {
    let message = message.to_ascii_lowercase();
    ["error", "errors", "exception", "timeout"]
        .iter()
        .any(|e| message.contains(&format!("{word} {e}")))
}

/// The row of `PARTS` a word names.
fn part_of(word: &str) -> Option<usize> {
    PARTS.iter().position(|row| row.contains(&word))
}

/// When the message names a part of a system ("walk api") and the
/// container is plainly another part (its name, compose service or image
/// says `db`): which part it was asked for and which the container is.
pub(super) fn another_part(
    message: &str,
    message_words: &[String],
    c: &ContainerSummaryView,
) -> Option<(String, String)> {
    let asked: Vec<(usize, &String)> = message_words
        .iter()
        .filter(|w| !in_an_error_name(message, w))
        .filter_map(|w| part_of(w).map(|p| (p, w)))
        .collect();
    let (_, first_asked) = asked.first()?;
    let name = c.name.to_ascii_lowercase();
    let service = c
        .labels
        .get(COMPOSE_SERVICE_LABEL)
        .map(|s| s.to_ascii_lowercase());
    let image = image_base(&c.image);
    let is: Vec<(usize, String)> = name
        .split(['-', '_', '.'])
        .chain(service.iter().flat_map(|s| s.split(['-', '_', '.'])))
        .chain([image.as_str()])
        .filter_map(|w| part_of(w).map(|p| (p, w.to_string())))
        .collect();
    let (_, first_is) = is.first()?;
    let overlap = asked.iter().any(|(a, _)| is.iter().any(|(i, _)| a == i));
    (!overlap).then(|| (first_asked.to_string(), first_is.clone()))
}
