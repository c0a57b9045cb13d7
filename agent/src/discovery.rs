//! Target discovery: the user says "backend", the container is
//! `shop-prod-backend-1`. Candidates are ranked by compose service label,
//! exact and segment name matches, the role a container plays ("the
//! database" is whatever runs postgres, mysql, mongo…), plurals and joined
//! words ("order service" → `shop-orders-1`), substrings, image, and typos
//! (one or two edits away). A tie between different containers is a
//! question for the user, not a guess, unless exactly one of them is broken:
//! that is the one people mean. Words in other scripts ("backend 挂了") are
//! separators, so the names among them still count.

use crate::model::ContainerState;
use crate::model::HealthStatus;
use crate::model::{
    Candidate, ContainerSummaryView, ContainerView, ServiceSummaryView, TargetKind,
    COMPOSE_PROJECT_LABEL, COMPOSE_SERVICE_LABEL, SWARM_SERVICE_ID_LABEL,
};

mod meant;
mod parts;
mod roles;
mod words;
use meant::{failed_of_itself, or_failed_neighbour, reports_a_failure, said_fine};
use parts::another_part;
use roles::ROLES;
use words::{edits, image_base, typo_budget, words};

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
        health: Some(c.health()).filter(|h| *h != HealthStatus::None),
        service: c.labels.get(COMPOSE_SERVICE_LABEL).cloned(),
        score,
        why: why.into(),
        host: c.host.clone(),
    }
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
    let segments: Vec<&str> = name.split(['-', '_', '.']).collect();
    // Two words of the message, in order, as whole parts of the name
    // ("walk api" → `shop-walk-api-1`): closer than either word alone.
    if word.contains('-')
        && format!("-{}-", segments.join("-")).contains(&format!("-{word}-"))
        && word.split('-').count() == 2
    {
        return Some((85, format!("name `{}` contains `{word}`", c.name)));
    }
    if segments.contains(&word) {
        return Some((80, format!("name `{}` contains `{word}`", c.name)));
    }
    // A name's parts written as one word ("fluentbit" for `fluent-bit`):
    // the compose service spelled so is the service; adjacent parts of
    // the name spelled so are those parts.
    let compact = |s: &str| s.replace(['-', '_', '.'], "");
    if word.len() >= 5 && !word.contains(['-', '_', '.']) {
        if service
            .as_deref()
            .is_some_and(|s| s.contains(['-', '_', '.']) && compact(s) == word)
        {
            return Some((
                90,
                format!(
                    "compose service `{}` written as `{word}`",
                    service.as_deref().unwrap_or("")
                ),
            ));
        }
        let joined = (2..=3).any(|n| segments.windows(n).any(|w| w.concat() == word));
        if joined {
            return Some((
                80,
                format!("name `{}` contains `{word}`, written as one word", c.name),
            ));
        }
    }
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
        // What it runs by its image or its own service name outranks a
        // neighbour named after it (`vaultwarden-db`).
        let exactly = |what: &str| runs.contains(&what);
        if exactly(&image_base) || service.as_deref().is_some_and(exactly) {
            return Some((72, format!("the {word}: it runs `{}`", c.image)));
        }
        if plays(&image_base)
            || service.as_deref().is_some_and(plays)
            || segments.iter().any(|s| plays(s))
        {
            return Some((70, format!("the {word}: it runs `{}`", c.image)));
        }
    }
    // What it runs, by its image's name or a part of it
    // (`paperless-ngx` runs paperless).
    let image_parts: Vec<&str> = image_base
        .split(['-', '_', '.'])
        .filter(|p| p.len() >= 4)
        .collect();
    if image_base == word || image_parts.contains(&word) {
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
            .chain(image_parts.iter().copied())
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
    let unhealthy = c.state == ContainerState::Running && c.health() == HealthStatus::Unhealthy;
    let restarting = c.restarting();
    let failed_exit = c.state.is_down() && exit_code_of(c) != Some(0);
    match state {
        Described::Unhealthy | Described::Slow => unhealthy,
        Described::WontStart => c.state == ContainerState::Created || failed_exit || restarting,
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
        Described::Unhealthy | Described::Slow => {
            v.running && v.health_status == HealthStatus::Unhealthy
        }
        Described::WontStart => failed_exit || looping || v.status == ContainerState::Created,
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
    // A partial match that is plainly another part of the system than
    // the one the message names is not meant: "walk api" is not
    // `walk-db`, though both say walk.
    let mut other_parts = Vec::new();
    ranked.retain(|cand| {
        let Some(c) = containers
            .iter()
            .find(|c| c.id == cand.container_id && c.name == cand.container_name)
        else {
            return true;
        };
        match another_part(message, &words, c).filter(|_| cand.score < 95) {
            Some((asked, is)) => {
                let mut seen = cand.clone();
                seen.score = 0;
                seen.why = format!("{}, but it is the {is}, not the {asked}", cand.why);
                other_parts.push(seen);
                false
            }
            None => true,
        }
    });
    if ranked.is_empty() && !other_parts.is_empty() {
        let rest: Vec<Candidate> = containers
            .iter()
            .filter(|c| !other_parts.iter().any(|o| o.container_id == c.id))
            .take(20usize.saturating_sub(other_parts.len()))
            .map(|c| candidate(c, 0, "exists"))
            .collect();
        other_parts.extend(rest);
        return Discovery::NoMatch(other_parts);
    }
    let broken = |id: &str| {
        containers
            .iter()
            .find(|c| c.id == id)
            .is_some_and(ContainerSummaryView::is_broken)
    };
    // A word shaped like a name (`zzqx-api`, `db_2`) that matched nothing
    // names a container drydock does not see: it is not to be guessed.
    let names_something_unseen = message.split_whitespace().any(|w| {
        let w = w.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        w.len() >= 3
            && w.chars()
                .any(|c| matches!(c, '-' | '_' | '.') || c.is_ascii_digit())
    });
    match ranked.as_slice() {
        // Nothing is named, but one container in scope is broken: a person
        // saying "the blog is down" means the one that is down.
        [] if names_something_unseen => nothing_matches(containers),
        [] => match containers
            .iter()
            .filter(|c| c.is_broken())
            .collect::<Vec<_>>()
            .as_slice()
        {
            [only] => Discovery::Found(candidate(
                only,
                30,
                "no container is named, and it is the only broken one in scope",
            )),
            // Several are down, but only one failed of itself: the others
            // were stopped (exit 0, or a stop's signal), and are what the
            // diagnosis of the one that failed may find behind it.
            broken => match broken
                .iter()
                .filter(|c| failed_of_itself(c) && reports_a_failure(message))
                .collect::<Vec<_>>()
                .as_slice()
            {
                [only] => Discovery::Found(candidate(
                    only,
                    30,
                    "no container is named; of those that are down, the only one that failed of itself (the others were stopped)",
                )),
                _ => nothing_matches(containers),
            },
        },
        [only] => Discovery::Found(or_failed_neighbour(message, only, containers)),
        // The best match is fine, and exactly one other container the
        // message names is broken: "influx keeps restarting, telegraf
        // can't write" is about influx.
        [first, second, ..]
            if first.score > second.score && !broken(&first.container_id) && {
                let named_broken = ranked
                    .iter()
                    .filter(|c| c.score >= 45 && broken(&c.container_id))
                    .count();
                named_broken == 1
            } =>
        {
            let mut found = ranked
                .iter()
                .find(|c| c.score >= 45 && broken(&c.container_id))
                .cloned()
                .unwrap_or_else(|| first.clone());
            found.why = format!(
                "{}; of the containers the message names, the only broken one",
                found.why
            );
            Discovery::Found(found)
        }
        [first, second, ..] if first.score > second.score => {
            Discovery::Found(or_failed_neighbour(message, first, containers))
        }
        _ => {
            let top = ranked[0].score;
            let tied: Vec<Candidate> = ranked.into_iter().filter(|c| c.score == top).collect();
            // One the message says is fine ("the movies one is fine") is
            // the comparison, not the complaint.
            let lower = message.to_lowercase();
            let (fine, tied): (Vec<Candidate>, Vec<Candidate>) = tied.into_iter().partition(|t| {
                containers
                    .iter()
                    .find(|c| c.id == t.container_id)
                    .is_some_and(|c| {
                        words
                            .iter()
                            .filter(|w| score(c, w).is_some_and(|(s, _)| s == top))
                            .any(|w| said_fine(&lower, w))
                    })
            });
            if let ([only], false) = (tied.as_slice(), fine.is_empty()) {
                let mut found = only.clone();
                found.why = format!(
                    "{}; the message says {} is fine",
                    found.why,
                    fine.iter()
                        .map(|f| f.container_name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
                return Discovery::Found(found);
            }
            let tied = if tied.is_empty() { fine } else { tied };
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
                // None is broken: a copy named for another environment
                // (`shop-staging-api-1`) is not what a person means by
                // "the api" when exactly one is not such a copy.
                [] => match the_only_production_one(message, &tied, containers) {
                    Some(found) => Discovery::Found(found),
                    None => Discovery::Ambiguous(tied),
                },
                _ => Discovery::Ambiguous(tied),
            }
        }
    }
}

/// No container matches: the first 20 that exist, for a person to choose.
fn nothing_matches(containers: &[ContainerSummaryView]) -> Discovery {
    Discovery::NoMatch(
        containers
            .iter()
            .take(20)
            .map(|c| candidate(c, 0, "exists"))
            .collect(),
    )
}

/// Words that mark a copy for another environment than production.
const OTHER_ENVIRONMENTS: &[&str] = &[
    "staging",
    "stage",
    "stg",
    "dev",
    "devel",
    "development",
    "test",
    "testing",
    "qa",
    "uat",
    "preview",
    "sandbox",
    "demo",
];

/// The environment words in a container's name or compose project.
fn environments_of(c: &ContainerSummaryView) -> Vec<String> {
    std::iter::once(c.name.as_str())
        .chain(c.labels.get(COMPOSE_PROJECT_LABEL).map(String::as_str))
        .flat_map(|s| {
            s.to_ascii_lowercase()
                .split(['-', '_', '.'])
                .filter(|part| OTHER_ENVIRONMENTS.contains(part))
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Among tied candidates none of which is broken, the environment the
/// message means: the only one marked with an environment it names
/// ("the api on staging"), or, when it names none, the only one not
/// marked as a copy for another environment.
fn the_only_production_one(
    message: &str,
    tied: &[Candidate],
    containers: &[ContainerSummaryView],
) -> Option<Candidate> {
    let lower = message.to_lowercase();
    let named: Vec<&str> = lower
        .split(|ch: char| !ch.is_alphanumeric())
        .filter(|w| OTHER_ENVIRONMENTS.contains(w))
        .collect();
    let fits = |t: &&Candidate| {
        containers
            .iter()
            .find(|c| c.id == t.container_id)
            .is_some_and(|c| {
                let envs = environments_of(c);
                if named.is_empty() {
                    envs.is_empty()
                } else {
                    envs.iter().any(|e| named.contains(&e.as_str()))
                }
            })
    };
    let meant: Vec<&Candidate> = tied.iter().filter(fits).collect();
    match meant.as_slice() {
        [only] => {
            let mut found = (*only).clone();
            found.why = if named.is_empty() {
                format!(
                    "{}; of {} that fit, the others are copies for another environment (staging, dev, test)",
                    found.why,
                    tied.len()
                )
            } else {
                format!(
                    "{}; of {} that fit, the only one for {}, as the message says",
                    found.why,
                    tied.len(),
                    named.join(", ")
                )
            };
            Some(found)
        }
        _ => None,
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
            state: if healthy {
                ContainerState::Running
            } else {
                ContainerState::Other("degraded".into())
            },
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
        0 => nothing_matches(containers),
        _ => Discovery::Ambiguous(hits),
    }
}

#[cfg(test)]
mod tests;
