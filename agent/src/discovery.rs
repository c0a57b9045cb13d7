//! Target discovery: the user says "backend", the container is
//! `shop-prod-backend-1`. Candidates are ranked by compose service label,
//! exact and segment name matches, fuzzy name, and image; a tie between
//! different containers is a question for the user, not a guess.

use crate::model::{Candidate, ContainerSummaryView, COMPOSE_SERVICE_LABEL};

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
        container_id: c.id.clone(),
        container_name: c.name.clone(),
        image: c.image.clone(),
        state: c.state.clone(),
        service: c.labels.get(COMPOSE_SERVICE_LABEL).cloned(),
        score,
        why: why.into(),
    }
}

fn words(message: &str) -> Vec<String> {
    message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.'))
        .map(|w| {
            w.trim_matches(|c: char| c == '.' || c == '-')
                .to_ascii_lowercase()
        })
        .filter(|w| w.len() >= 2 && !STOPWORDS.contains(&w.as_str()))
        .collect()
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
    if name.split(['-', '_', '.']).any(|seg| seg == word) {
        return Some((80, format!("name `{}` contains `{word}`", c.name)));
    }
    let image = c.image.to_ascii_lowercase();
    let image_base = image
        .rsplit('/')
        .next()
        .unwrap_or(&image)
        .split(':')
        .next()
        .unwrap_or("");
    if image_base == word {
        return Some((60, format!("image `{}`", c.image)));
    }
    if word.len() >= 3 && name.contains(word) {
        return Some((50, format!("name `{}` contains `{word}`", c.name)));
    }
    if word.len() >= 4 && service.as_deref().is_some_and(|s| s.contains(word)) {
        return Some((45, format!("compose service contains `{word}`")));
    }
    None
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
            Discovery::Ambiguous(ranked.into_iter().filter(|c| c.score == top).collect())
        }
    }
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
}
