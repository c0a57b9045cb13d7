//! What a person means beyond the words that name a container: a
//! failure reported, a death reported of something else, a container said
//! to be fine, one that failed of itself rather than being stopped.

use super::words::words;
use super::{candidate, described, exit_code_of, score, Described};
use crate::model::{
    Candidate, ContainerState, ContainerSummaryView, HealthStatus, COMPOSE_PROJECT_LABEL,
    COMPOSE_SERVICE_LABEL,
};

/// Compose v2's label naming the services a container depends on
/// (`db:service_started:false,redis:service_healthy:true`).
const DEPENDS_ON_LABEL: &str = "com.docker.compose.depends_on";

/// Failed of itself: restarting, unhealthy, or exited with a code of its
/// own (not 0, and not the SIGKILL or SIGTERM of a stop).
pub(super) fn failed_of_itself(c: &ContainerSummaryView) -> bool {
    let unhealthy = c.state == ContainerState::Running && c.health() == HealthStatus::Unhealthy;
    let own_exit = c.state.is_down() && !matches!(exit_code_of(c), None | Some(0 | 137 | 143));
    c.restarting() || unhealthy || own_exit
}

/// Words of a person reporting that something is wrong, as whole words
/// (not asking whether it might be: a message that opens as a question
/// reports nothing).
pub(super) fn reports_a_failure(message: &str) -> bool {
    let m = message.to_lowercase().replace(['\u{2019}', '`'], "'");
    let words: Vec<&str> = m
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    const ASKING: &[&str] = &[
        "is", "are", "does", "do", "did", "can", "could", "should", "will", "would", "why", "when",
        "what", "how", "who", "was", "were", "has", "have",
    ];
    if words.first().is_some_and(|w| ASKING.contains(w)) {
        return false;
    }
    const WORDS: &[&str] = &[
        "down",
        "broken",
        "quits",
        "quit",
        "dies",
        "died",
        "dead",
        "crash",
        "crashed",
        "crashes",
        "crashing",
        "fail",
        "fails",
        "failing",
        "failed",
        "error",
        "errors",
        "500",
        "502",
        "503",
        "504",
        "unreachable",
    ];
    const PHRASES: &[&str] = &[
        "can't reach",
        "cannot reach",
        "can't connect",
        "cannot connect",
        "won't load",
        "not working",
        "nothing works",
        "nothing else works",
        "doesn't work",
        "stopped working",
        "white page",
        "blank page",
    ];
    // "notes stopped syncing", "nothing on the lan resolves".
    let stopped_doing = words
        .windows(2)
        .any(|w| w[0] == "stopped" && w[1].len() > 4 && w[1].ends_with("ing"));
    let nothing_does = words.iter().position(|w| *w == "nothing").is_some_and(|i| {
        words[i + 1..]
            .iter()
            .any(|w| w.len() > 3 && w.ends_with('s') && !w.ends_with("ss"))
    });
    !described(message).is_empty()
        || words.iter().any(|w| WORDS.contains(w))
        || PHRASES.iter().any(|p| m.contains(p))
        || stopped_doing
        || nothing_does
}

/// Whether the message says what `word` names is fine ("the movies one is
/// fine", "db works"), in the words after it up to the clause's end.
pub(super) fn said_fine(lower: &str, word: &str) -> bool {
    lower.match_indices(word).any(|(i, _)| {
        let whole_before = lower[..i]
            .chars()
            .last()
            .is_none_or(|c| !c.is_alphanumeric());
        let rest = &lower[i + word.len()..];
        let whole_after = rest.chars().next().is_none_or(|c| !c.is_alphanumeric());
        // "the web container itself looks fine": a few words on.
        let clause: String = rest
            .chars()
            .take_while(|c| !matches!(c, ',' | '.' | ';' | '!' | '?'))
            .take(40)
            .collect();
        let negated = clause.contains("not ") || clause.contains("n't") || clause.contains(" no ");
        whole_before
            && whole_after
            && !negated
            && [
                " fine", " ok", " okay", " works", " working", " healthy", " is up", " are up",
            ]
            .iter()
            .any(|f| clause.contains(f))
    })
}

/// Whether the message reports that something died or will not run (not
/// that it is slow or answers with an error, which a container that runs
/// well can be) in a clause that does not name the container `naming`
/// words match: "the server quits and element says it can't reach it"
/// reports a death of something other than element; "orders is down"
/// reports one of orders itself.
fn reports_a_death_elsewhere(message: &str, naming: &[String]) -> bool {
    if !reports_a_failure(message) {
        return false;
    }
    const WORDS: &[&str] = &[
        "down", "quits", "quit", "dies", "died", "dead", "crash", "crashed", "crashes", "crashing",
        "exited", "exits",
    ];
    clauses(message).any(|clause| {
        let words: Vec<&str> = clause
            .split(|c: char| !(c.is_alphanumeric() || c == '\''))
            .filter(|w| !w.is_empty())
            .collect();
        let death = words.iter().any(|w| WORDS.contains(w))
            || described(&clause).iter().any(|d| {
                matches!(
                    d,
                    Described::Crashed | Described::WontStart | Described::Restarting
                )
            });
        death && !words.iter().any(|w| naming.iter().any(|n| n == w))
    })
}

/// Whether `a` depends on `b` by compose's `depends_on` (v2's label).
fn depends_on(a: &ContainerSummaryView, b: &ContainerSummaryView) -> bool {
    let Some(service) = b.labels.get(COMPOSE_SERVICE_LABEL) else {
        return false;
    };
    a.labels.get(DEPENDS_ON_LABEL).is_some_and(|deps| {
        deps.split(',')
            .filter_map(|d| d.split(':').next())
            .any(|d| d.trim() == service)
    })
}

/// The message's clauses, lower case: split at punctuation and at "and",
/// "but" and "while".
fn clauses(message: &str) -> impl Iterator<Item = String> {
    let m = message.to_lowercase().replace(['\u{2019}', '`'], "'");
    let all: Vec<String> = m
        .split([',', ';', '.', '!', '?'])
        .flat_map(|c| c.split(" and "))
        .flat_map(|c| c.split(" but "))
        .flat_map(|c| c.split(" while "))
        .map(str::to_string)
        .collect();
    all.into_iter()
}

/// Failed within the last hours as `docker ps` words it (a failure days
/// old is no news a person reports now).
fn failed_lately(c: &ContainerSummaryView) -> bool {
    !["days ago", "weeks ago", "months ago", "years ago"]
        .iter()
        .any(|old| c.status.contains(old))
}

/// The container the message names, unless it runs well while the
/// message reports a death elsewhere, or a failure while it says the
/// named one is fine, and exactly one other container of its compose
/// project failed of itself: then that one is what the person's words
/// describe ("element says it can't reach the homeserver": element is
/// fine, the homeserver exited; "the shop errors, the web container looks
/// fine": the web is the comparison, not the complaint).
pub(super) fn or_failed_neighbour(
    message: &str,
    named: &Candidate,
    containers: &[ContainerSummaryView],
) -> Candidate {
    let Some(c) = containers.iter().find(|c| c.id == named.container_id) else {
        return named.clone();
    };
    let project = c.labels.get(COMPOSE_PROJECT_LABEL);
    let runs_well = c.state == ContainerState::Running
        && c.health() != HealthStatus::Unhealthy
        && !c.restarting();
    let naming: Vec<String> = words(message)
        .into_iter()
        .filter(|w| score(c, w).is_some())
        .collect();
    // A person who says it restarts knows better than a list that shows
    // it up between two restarts (said of it, not of another: "the broker
    // keeps restarting, the gateway can't publish").
    let says_restarting = clauses(message).any(|clause| {
        described(&clause).contains(&Described::Restarting)
            && (naming.is_empty() || naming.iter().any(|n| clause.contains(n.as_str())))
    });
    let lower = message.to_lowercase();
    let said_fine_of_it = reports_a_failure(message) && naming.iter().any(|w| said_fine(&lower, w));
    if !runs_well
        || says_restarting
        || project.is_none()
        || !(said_fine_of_it || reports_a_death_elsewhere(message, &naming))
    {
        return named.clone();
    }
    let mates: Vec<&ContainerSummaryView> = containers
        .iter()
        .filter(|o| o.id != c.id && o.host == c.host)
        .filter(|o| o.labels.get(COMPOSE_PROJECT_LABEL) == project)
        .collect();
    let failed: Vec<&ContainerSummaryView> = mates
        .iter()
        .copied()
        .filter(|o| failed_of_itself(o) && failed_lately(o))
        .collect();
    // Said to be fine, and none failed that a list can show: what depends
    // on it, or what it depends on, when that is one container ("postgres
    // is up and I can psql into it": what uses postgres).
    if failed.is_empty() && said_fine_of_it {
        let linked: Vec<&&ContainerSummaryView> = mates
            .iter()
            .filter(|o| depends_on(o, c) || depends_on(c, o))
            .collect();
        if let [only] = linked.as_slice() {
            return candidate(
                only,
                named.score.min(85),
                format!(
                    "{}, but the message says it is fine while it reports a failure; {} is the one container of its compose project linked to it (depends_on)",
                    named.why, only.name
                ),
            );
        }
    }
    match failed.as_slice() {
        // Below the score of a name, id or service given exactly: a
        // neighbour is never taken for what a person named outright.
        [only] => candidate(
            only,
            named.score.min(90),
            format!(
                "{}, but it runs well{}; {} of the same compose project failed, and the message reports a failure",
                named.why,
                if said_fine_of_it {
                    " and the message says so"
                } else {
                    ""
                },
                only.name
            ),
        ),
        _ => named.clone(),
    }
}
