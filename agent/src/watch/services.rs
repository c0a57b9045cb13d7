//! Watching Swarm services. Their tasks run on many nodes, so their deaths
//! are not all events this engine sees: the services in scope are read
//! every `watch.service_poll` instead (their service and node events are
//! journaled like a container's). A service that runs fewer tasks than it
//! wants for longer than the debounce opens a request under the same rules
//! as a container's: one open request per service, and none within the
//! cooldown (a service that stays short is asked about again after it).

use std::time::Instant;

use super::{alerts, Watcher};
use crate::executor_client::Reads as _;
use crate::model::{RequestOptions, RequestSource, ServiceSummaryView};

/// Whether a service is short of tasks: it wants some, runs fewer, and no
/// update of it is under way (Swarm replaces tasks then by design).
pub fn short_of_tasks(s: &ServiceSummaryView) -> bool {
    s.desired > 0 && s.running < s.desired && !s.update_state.in_progress()
}

impl Watcher {
    /// Read the services in scope; open a request for each that has been
    /// short of tasks for longer than the debounce.
    pub(super) async fn check_services(&mut self) {
        let in_scope = self
            .executor
            .policy("watch")
            .await
            .is_ok_and(|p| p.services_in_scope);
        if !in_scope {
            self.short.clear();
            return;
        }
        let services = match self.executor.services("watch").await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "services not read");
                return;
            }
        };
        let now = Instant::now();
        self.short
            .retain(|id, _| services.iter().any(|s| &s.id == id && short_of_tasks(s)));
        for s in services.iter().filter(|s| short_of_tasks(s)) {
            let since = *self.short.entry(s.id.clone()).or_insert(now);
            if now.duration_since(since) < self.config.debounce {
                continue;
            }
            // Fired (or skipped) once per shortage: it is forgotten when
            // the service runs all its tasks again.
            self.short.insert(s.id.clone(), now + self.config.cooldown);
            if let Some(why) = alerts::busy(
                &self.store,
                &s.name,
                &s.id,
                self.host.as_deref(),
                self.config.cooldown,
            ) {
                tracing::info!(service = %s.name, "{why}; no new request");
                continue;
            }
            let message = format!(
                "watch: Swarm service {} runs {} of the {} tasks it wants",
                s.name, s.running, s.desired
            );
            let options = RequestOptions {
                container: Some(s.name.clone()),
                host: self.host.clone(),
                ..Default::default()
            };
            match self
                .opener
                .open(message, options, RequestSource::Watch)
                .await
            {
                Ok(req) => {
                    tracing::info!(request_id = %req.id, service = %s.name, "opened a watch request")
                }
                Err(e) => {
                    tracing::error!(error = %e, service = %s.name, "cannot open a watch request")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_means_fewer_than_wanted_and_no_update_under_way() {
        let s = |running, desired, update: &str| ServiceSummaryView {
            running,
            desired,
            update_state: update.into(),
            ..Default::default()
        };
        assert!(short_of_tasks(&s(0, 1, "")));
        assert!(short_of_tasks(&s(1, 2, "paused")));
        assert!(!short_of_tasks(&s(2, 2, "")));
        assert!(!short_of_tasks(&s(0, 0, "")), "scaled to zero");
        assert!(!short_of_tasks(&s(1, 2, "updating")), "Swarm at work");
    }
}
