//! A cause that points at a dependency ("connection refused to db:5432")
//! is followed to the container behind the name — compose service, name,
//! address, then network alias — and that container's state becomes
//! evidence and a cause of its own, so the plan can start it first.

use super::{Engine, Stop};
use crate::dependency;
use crate::model::HealthStatus;
use crate::model::*;
use crate::rules;

impl Engine {
    /// When the fault involves a dependency, find the container behind the
    /// name the logs (or the runbook) give, inspect it, and say what state
    /// it is in, as evidence and as a cause.
    pub(super) async fn examine_dependency(
        &self,
        req: &Request,
        finding: &rules::Finding,
        c: &ContainerView,
        logs_ev: &str,
    ) -> Result<Option<(Cause, crate::model::DependencyState)>, Stop> {
        let id = &req.id;
        if !finding
            .diagnosis
            .causes
            .iter()
            .any(|c| c.class == FaultClass::DependencyUnavailable)
        {
            return Ok(None);
        }
        let runbook_dep = req
            .latest::<kind::Runbook>()
            .and_then(|r| r.depends_on.first().cloned());
        let containers = Self::containers_on_host(req);
        // The compose file's own graph first: a dependency it names that is
        // down; then what the logs name (the detail, every host the line
        // names, names before addresses); then the hosts its settings point
        // at; then the runbook. The first that
        // is a container is the one; with none, the first named is said.
        let line = finding.matched_line.as_deref();
        let named_in_line = line.map(all_in_line).unwrap_or_default();
        let candidates: Vec<dependency::DependencyRef> =
            dependency::broken_compose_dependency(&c.labels, &containers)
                .into_iter()
                .chain(
                    finding
                        .detail
                        .as_deref()
                        .and_then(|d| dependency::parse(d, "log")),
                )
                .chain(named_in_line)
                .chain(line.and_then(dependency::from_line))
                .chain(dependency::from_env(&c.env))
                .chain(
                    runbook_dep
                        .as_deref()
                        .and_then(|d| dependency::parse(d, "runbook")),
                )
                .collect();
        let project = c.labels.get(COMPOSE_PROJECT_LABEL).map(String::as_str);
        let resolved = candidates.iter().find_map(|named| {
            dependency::find(named, project, &containers)
                .filter(|d| d.id != c.id)
                .map(|d| (named.clone(), d.clone()))
        });
        let (named, found) = match resolved {
            Some((named, d)) => (named, Some(d)),
            None => match candidates.into_iter().next() {
                Some(named) => (named, None),
                None => return Ok(None),
            },
        };
        let container = match &found {
            Some(summary) => match self.exec(id).inspect(id, &summary.id).await {
                Ok(view) => Some(view),
                Err(e) => {
                    tracing::warn!(request_id = %id, error = %e, "cannot inspect the dependency");
                    None
                }
            },
            None => {
                self.find_by_network_alias(id, &named.host, c, &containers)
                    .await
            }
        };
        let state = crate::model::DependencyState {
            named: named.display(),
            source: named.source.into(),
            container: container.clone(),
        };
        let (summary, reason) = match &container {
            Some(d) => (
                format!("{} is container {}: state={} health={}", named.display(), d.name, d.status, d.health_status),
                format!(
                    "{} cannot reach {}; that is container {}, which is {}{}{}",
                    c.name,
                    named.display(),
                    d.name,
                    d.status,
                    if d.health_status != HealthStatus::None { format!(" and {}", d.health_status) } else { String::new() },
                    if crate::planner::share_no_network(c, d) {
                        format!(
                            ", on the network {} while {} is on {}: they share no network, so the name does not reach it",
                            d.networks.join(", "),
                            c.name,
                            c.networks.join(", ")
                        )
                    } else {
                        String::new()
                    }
                ),
            ),
            None => (
                format!("no container behind {}", named.display()),
                format!("{} cannot reach {}, and no container by that name, compose service or address exists", c.name, named.display()),
            ),
        };
        let ev = self
            .add_evidence(
                id,
                "InspectContainer",
                EvidencePayload::Dependency(state.clone()),
                summary,
            )
            .await?;
        Ok(Some((
            Cause {
                class: FaultClass::DependencyUnavailable,
                reason,
                confidence: 0.8,
                evidence_ids: vec![ev, logs_ev.to_string()],
            },
            state,
        )))
    }

    /// Network aliases (`--network-alias db`, compose service aliases) are
    /// only visible in inspect output: look at the containers sharing a
    /// network with the target, a bounded number of them.
    pub(super) async fn find_by_network_alias(
        &self,
        id: &str,
        host: &str,
        target: &ContainerView,
        containers: &[ContainerSummaryView],
    ) -> Option<ContainerView> {
        const MAX_INSPECTED: usize = 30;
        for summary in containers
            .iter()
            .filter(|s| s.id != target.id)
            .take(MAX_INSPECTED)
        {
            let Ok(view) = self.exec(id).inspect(id, &summary.id).await else {
                continue;
            };
            let shares_network = view.networks.iter().any(|n| target.networks.contains(n));
            if shares_network && view.aliases.iter().any(|a| a.eq_ignore_ascii_case(host)) {
                return Some(view);
            }
        }
        None
    }
}

/// Every host a line names (a URL's, `host:port`, `server "db"`), names
/// before addresses: `Get "http://keycloak:8080/…": dial tcp
/// 172.22.0.2:8080` is keycloak first.
fn all_in_line(line: &str) -> Vec<dependency::DependencyRef> {
    let mut endpoints = crate::rules::objects::extract(line).endpoints;
    endpoints.sort_by_key(|(h, _)| h.parse::<std::net::IpAddr>().is_ok());
    endpoints
        .into_iter()
        .filter_map(|(host, port)| {
            let text = match port {
                Some(p) => format!("{host}:{p}"),
                None => host,
            };
            dependency::parse(&text, "log")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_host_a_line_names_comes_names_first_and_no_date_is_one() {
        let hosts = |line: &str| -> Vec<String> {
            all_in_line(line)
                .iter()
                .map(dependency::DependencyRef::display)
                .collect()
        };
        assert_eq!(
            hosts(
                r#"error performing request: Get "http://keycloak:8080/realms/x/.well-known/openid-configuration": dial tcp 172.22.0.2:8080: connect: connection refused"#
            ),
            ["keycloak:8080", "172.22.0.2:8080"]
        );
        let libpq = r#"{"detail":{"internal":"connection to server at \"postgres\" (172.27.0.7), port 5432 failed: FATAL:  the database system is starting up\n"},"timestamp":"2023-08-03T16:57:36.983+0000"}"#;
        let found = hosts(libpq);
        assert!(found.iter().all(|h| !h.starts_with("2023-")), "{found:?}");
        assert!(found.iter().any(|h| h.starts_with("postgres")), "{found:?}");
    }
}
