//! Finding the target: list what every host's executor shows (each with
//! its policy, read alongside), pick the container or service the person
//! means, or ask which one. A host that does not answer is said so in the
//! timeline and the search goes on without it; the request fails only when
//! no host could be listed.

use std::collections::HashMap;
use std::sync::Arc;

use super::observe::Found;
use super::{Engine, Stop};
use crate::discovery::{self, Discovery};
use crate::executor_client::{Executor, ExecutorError};
use crate::hosts::Host;
use crate::model::ContainerState;
use crate::model::*;

/// What one host showed.
struct HostSeen {
    host: Arc<Host>,
    containers: Vec<ContainerSummaryView>,
    services: Vec<ServiceSummaryView>,
    policy: Result<PolicyView, ExecutorError>,
}

/// The host a question names as `NAME@HOST` or `on HOST`, among the
/// configured ones.
fn host_in_message(message: &str, hosts: &[String]) -> Option<String> {
    let words: Vec<&str> = message
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '?' | '!' | '"' | '\''))
        .map(|w| w.trim_end_matches('.'))
        .collect();
    let known = |w: &str| hosts.iter().find(|h| h.as_str() == w.to_ascii_lowercase());
    for (i, w) in words.iter().enumerate() {
        if let Some((_, host)) = w.rsplit_once('@') {
            if let Some(h) = known(host) {
                return Some(h.clone());
            }
        }
        if i > 0 && matches!(words[i - 1].to_ascii_lowercase().as_str(), "on" | "host") {
            if let Some(h) = known(w) {
                return Some(h.clone());
            }
        }
    }
    None
}

impl Engine {
    /// Find the target among every host's containers and services (or the
    /// one host the person named).
    pub(super) async fn find_target(&self, req: &Request) -> Result<Found, Stop> {
        let id = &req.id;
        let only = match &req.options.host {
            Some(h) => Some(h.clone()),
            None if self.hosts.named() => host_in_message(&req.question(), &self.hosts.names()),
            None => None,
        };
        if let Some(h) = &only {
            if let Err(e) = self.hosts.require(h) {
                self.required::<()>(id, "find the host", Err(e)).await?;
                return Ok(Found::Ended);
            }
        }
        let (seen, unreachable) = self.look_on_hosts(id, only.as_deref()).await?;
        if seen.is_empty() {
            let e = unreachable
                .into_iter()
                .next()
                .map(|(_, e)| e)
                .unwrap_or_else(|| ExecutorError::new(tonic::Code::Unavailable, "no host"));
            self.required::<()>(id, "list containers", Err(e)).await?;
            return Ok(Found::Ended);
        }
        if !unreachable.is_empty() {
            let said: Vec<String> = unreachable
                .iter()
                .map(|(h, e)| format!("{h} ({})", e.message))
                .collect();
            let data: Vec<HostUnreachable> = unreachable
                .iter()
                .map(|(h, e)| HostUnreachable {
                    host: h.to_string(),
                    error: e.message.clone(),
                })
                .collect();
            self.add_evidence(
                id,
                "ListContainers",
                EvidencePayload::HostsUnreachable(data),
                format!(
                    "not searched, the executor does not answer: {}",
                    said.join("; ")
                ),
            )
            .await?;
        }
        let containers: Vec<ContainerSummaryView> =
            seen.iter().flat_map(|s| s.containers.clone()).collect();
        let services: Vec<ServiceSummaryView> =
            seen.iter().flat_map(|s| s.services.clone()).collect();
        // Which host each row is on, containers and services alike.
        let mut host_of: HashMap<String, String> = HashMap::new();
        if self.hosts.named() {
            for s in &seen {
                let label = s.host.label().to_string();
                for id in s.containers.iter().map(|c| &c.id) {
                    host_of.insert(id.clone(), label.clone());
                }
                for id in s.services.iter().map(|c| &c.id) {
                    host_of.insert(id.clone(), label.clone());
                }
            }
        }
        let summary = match seen.len() {
            1 if !self.hosts.named() => format!("{} containers visible", containers.len()),
            _ => format!(
                "{} containers visible on {}",
                containers.len(),
                seen.iter()
                    .map(|s| format!("{} ({})", s.host.label(), s.containers.len()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.add_evidence(
            id,
            "ListContainers",
            EvidencePayload::ContainerList(containers.clone()),
            summary,
        )
        .await?;
        // A blind investigation: discovery does not choose; the model
        // finds the target among the containers just listed. What
        // discovery would have found is kept for the person (never shown
        // to the model), for the rules should the model give no answer.
        if self.blind(req) {
            let rows = discovery::rows_with_services(&containers, &[]);
            let cands = match discovery::discover(&req.question(), &rows) {
                Discovery::Found(c) => vec![c],
                Discovery::Ambiguous(c) | Discovery::NoMatch(c) => c,
            };
            self.candidates(id, cands).await?;
            return self
                .to_the_model(id, seen, "no target chosen; the model finds it")
                .await;
        }
        let rows: Vec<ContainerSummaryView> = seen
            .iter()
            .flat_map(|s| {
                let mut rows = discovery::rows_with_services(&s.containers, &s.services);
                for r in rows.iter_mut() {
                    r.host = host_of.get(&r.id).cloned();
                }
                rows
            })
            .collect();
        let found = match &req.options.container {
            Some(name) => discovery::exact_with_services(name, &containers, &services),
            None => discovery::as_services(discovery::discover(&req.question(), &rows), &services),
        };
        let found = with_hosts(found, &host_of);
        let found = match found {
            Discovery::Ambiguous(tied) if req.options.container.is_none() => {
                self.tell_apart_by_inspect(id, &req.question(), tied).await
            }
            other => other,
        };
        let away: Vec<String> = unreachable.iter().map(|(h, _)| h.to_string()).collect();
        // A partial match must not win while a host that may hold a
        // better one did not answer: say so, and how to choose.
        let found = match found {
            Discovery::Found(c)
                if !away.is_empty() && req.options.container.is_none() && c.score < 95 =>
            {
                let outcome = partial_while_away(&c, &unreachable);
                self.candidates(id, vec![c]).await?;
                self.finish(id, Status::NeedsClarification, outcome).await?;
                return Ok(Found::Ended);
            }
            other => other,
        };
        let cands = match found {
            Discovery::Found(c) => {
                let running = containers
                    .iter()
                    .any(|x| x.id == c.container_id && x.state == ContainerState::Running);
                let target = match c.kind {
                    TargetKind::Container => Target::container(
                        c.container_id.clone(),
                        c.container_name.clone(),
                        c.service.clone(),
                        c.host.clone(),
                    ),
                    TargetKind::Service => Target::service(
                        c.container_id.clone(),
                        c.container_name.clone(),
                        services
                            .iter()
                            .find(|s| s.id == c.container_id && !s.stack.is_empty())
                            .map(|s| s.stack.clone()),
                        c.host.clone(),
                    ),
                };
                let chosen = TargetChosen {
                    target: target.clone(),
                    why: c.why.clone(),
                };
                self.update(id, EventPayload::Target(chosen), |r| {
                    r.target = Some(target)
                })
                .await?;
                let policy = seen
                    .into_iter()
                    .find(|s| s.host.label() == c.host.as_deref().unwrap_or(s.host.label()))
                    .map(|s| Box::new(s.policy));
                return Ok(Found::Target { policy, running });
            }
            Discovery::Ambiguous(cands) | Discovery::NoMatch(cands) => cands,
        };
        let mut outcome = Self::clarification(req, &cands);
        if !away.is_empty() {
            outcome = format!(
                "{outcome} Not searched: {}, whose executor does not answer; what you mean may be there.",
                away.join(", ")
            );
        }
        self.candidates(id, cands).await?;
        if self.config.llm.is_some() && req.options.container.is_none() {
            // A question ("which containers use the most memory?") names
            // no container: the model may answer it from evidence, or ask
            // its own question.
            return self
                .to_the_model(id, seen, "no single target; the model investigates")
                .await;
        }
        self.finish(id, Status::NeedsClarification, outcome).await?;
        Ok(Found::Ended)
    }

    /// A request with no target goes to the model: the first host's
    /// policy recorded (or the request ended when it cannot be read), and
    /// diagnosis begins, saying `why`.
    async fn to_the_model(&self, id: &str, seen: Vec<HostSeen>, why: &str) -> Result<Found, Stop> {
        let policy = seen
            .into_iter()
            .next()
            .map(|s| s.policy)
            .unwrap_or_else(|| Err(ExecutorError::new(tonic::Code::Unavailable, "no host")));
        if self.policy_evidence(id, policy).await?.is_none() {
            return Ok(Found::Ended);
        }
        self.set_status(id, Status::Diagnosing, why).await?;
        Ok(Found::ModelInvestigates)
    }

    /// Record the candidates a person is asked to choose from.
    async fn candidates(&self, id: &str, cands: Vec<Candidate>) -> Result<(), Stop> {
        self.update(
            id,
            EventPayload::Candidates(CandidatesFound {
                candidates: cands.clone(),
            }),
            |r| r.candidates = cands,
        )
        .await?;
        Ok(())
    }

    /// Containers that tie on the words of a message that describes a
    /// state ("keeps restarting") may differ in what only an inspect shows:
    /// a crash loop between two restarts lists as running. A few are
    /// inspected (each on its own host) and the only one in that state is
    /// the target; otherwise the question stands.
    async fn tell_apart_by_inspect(
        &self,
        id: &str,
        message: &str,
        tied: Vec<Candidate>,
    ) -> Discovery {
        const MAX_INSPECTED: usize = 8;
        let containers = tied.iter().all(|c| c.kind == TargetKind::Container);
        if !containers || tied.len() > MAX_INSPECTED || !discovery::describes_a_state(message) {
            return Discovery::Ambiguous(tied);
        }
        let views = futures::future::join_all(tied.iter().map(|c| async move {
            let host = self.hosts.get(c.host.as_deref())?;
            host.executor.inspect(id, &c.container_id).await.ok()
        }))
        .await;
        let views: Vec<ContainerView> = views.into_iter().flatten().collect();
        match discovery::the_one_inspected(message, &tied, &views) {
            Some(one) => Discovery::Found(one),
            None => Discovery::Ambiguous(tied),
        }
    }

    /// Each host's containers, policy and (when in scope) services, read
    /// at once; the hosts that could not be listed, with why.
    async fn look_on_hosts(
        &self,
        id: &str,
        only: Option<&str>,
    ) -> Result<(Vec<HostSeen>, Vec<(String, ExecutorError)>), Stop> {
        let (listed, unreachable) = self.list_hosts(id, only).await;
        let policies = futures::future::join_all(
            listed
                .iter()
                .map(|(host, _)| async move { host.executor.policy(id).await }),
        )
        .await;
        let mut seen = Vec::new();
        for ((host, containers), policy) in listed.into_iter().zip(policies) {
            let services = self
                .visible_services(id, host.executor.as_ref(), &policy)
                .await?;
            seen.push(HostSeen {
                host,
                containers,
                services,
                policy,
            });
        }
        Ok((seen, unreachable))
    }

    /// The Swarm services an executor shows, when its policy has any in
    /// scope, recorded as evidence; none on an engine that is not a Swarm
    /// manager (or when they cannot be read: containers are still found).
    async fn visible_services(
        &self,
        id: &str,
        executor: &dyn Executor,
        policy: &Result<PolicyView, ExecutorError>,
    ) -> Result<Vec<ServiceSummaryView>, Stop> {
        if !policy.as_ref().is_ok_and(|p| p.services_in_scope) {
            return Ok(Vec::new());
        }
        match executor.services(id).await {
            Ok(services) => {
                self.add_evidence(
                    id,
                    "ListServices",
                    EvidencePayload::ServiceList(services.clone()),
                    format!("{} Swarm services visible", services.len()),
                )
                .await?;
                Ok(services)
            }
            Err(e) => {
                tracing::warn!(request_id = %id, error = %e, "services not listed");
                Ok(Vec::new())
            }
        }
    }

    /// What to ask the operator when no single container fits. With
    /// several hosts each candidate says where it is, and how to pick it.
    pub(super) fn clarification(req: &Request, cands: &[Candidate]) -> String {
        let ambiguous = cands.iter().all(|c| c.score > 0) && !cands.is_empty();
        let names: Vec<String> = cands
            .iter()
            .map(|c| match &c.host {
                Some(h) => format!("{} on host {h}", c.container_name),
                None => c.container_name.clone(),
            })
            .collect();
        let how = if cands.iter().any(|c| c.host.is_some()) {
            "Ask again with --container NAME --host HOST (or NAME@HOST)."
        } else {
            "Ask again with --container NAME."
        };
        if ambiguous {
            format!("more than one container fits: {}. {how}", names.join(", "))
        } else if names.is_empty() {
            "no container matches and none is visible to the executor".to_string()
        } else {
            let asked = match (&req.options.container, &req.options.host) {
                (Some(name), Some(host)) => format!("is named \"{name}\" on host {host}"),
                (Some(name), None) => format!("is named \"{name}\""),
                (None, _) => format!("matches \"{}\"", req.question()),
            };
            let seen: Vec<String> = cands
                .iter()
                .filter(|c| c.why != "exists")
                .map(|c| format!("{} ({})", c.container_name, c.why))
                .collect();
            let seen = if seen.is_empty() {
                String::new()
            } else {
                format!(" Close, but not it: {}.", seen.join("; "))
            };
            format!(
                "no container {asked}.{seen} Visible containers: {}. {how}",
                names.join(", ")
            )
        }
    }
}

/// What to say when the best match is a partial one and some hosts were
/// not searched.
fn partial_while_away(c: &Candidate, away: &[(String, ExecutorError)]) -> String {
    let hosts: Vec<String> = away
        .iter()
        .map(|(h, e)| format!("{h} ({})", e.message))
        .collect();
    let first = away
        .first()
        .map(|(h, _)| h.as_str())
        .unwrap_or("the other host");
    let here = c.host.as_deref().unwrap_or("local");
    format!(
        "not searched: {}, whose executor does not answer. The best match on the hosts that answered, {} on host {here}, fits only in part ({}), and the container you mean may be on {first}. Ask again once {first} answers, or choose this one with --container {}@{here}.",
        hosts.join("; "),
        c.container_name,
        c.why,
        c.container_name
    )
}

/// Each candidate with the host it is on: the host of the row it came from,
/// or for a row made without one (a service found by name), its id's.
fn with_hosts(found: Discovery, host_of: &HashMap<String, String>) -> Discovery {
    let stamp = |mut c: Candidate| {
        if c.host.is_none() {
            c.host = host_of.get(&c.container_id).cloned();
        }
        c
    };
    match found {
        Discovery::Found(c) => Discovery::Found(stamp(c)),
        Discovery::Ambiguous(cs) => Discovery::Ambiguous(cs.into_iter().map(stamp).collect()),
        Discovery::NoMatch(cs) => Discovery::NoMatch(cs.into_iter().map(stamp).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_names_its_host_by_at_or_on() {
        let hosts = vec!["host-a".to_string(), "host-b".to_string()];
        for (message, want) in [
            ("web@host-b is down", Some("host-b")),
            ("is web on host-b down?", Some("host-b")),
            ("the api on HOST-A keeps crashing", Some("host-a")),
            ("web is down", None),
            ("web@host-c is down", None),
            ("host-b is a word here", None),
        ] {
            assert_eq!(
                host_in_message(message, &hosts).as_deref(),
                want,
                "{message}"
            );
        }
    }
}
