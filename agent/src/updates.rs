//! Updates found: every container in scope whose tag is in a registry the
//! executor allows is asked about (`RegistryDigest`), on a cadence
//! (`updates.check_every`) and on demand. A container whose tag names
//! another image than it runs has an update available: it is kept in the
//! store, listed (`GET /api/v1/updates`, `drydock updates`, the console,
//! MCP), and notified once per digest (`update_available`). A container
//! labelled `drydock.update=none` is never asked about. Swarm services in
//! scope are asked about the same way (`ServiceRegistryDigest`: the tag of
//! their spec against the digest the engine pinned it to); their update is
//! always a person's (no grant covers one).
//!
//! An update found that an update grant covers now (its scope, its hours
//! in the executor host's local time, the executor allowing update grants)
//! opens a request (`source: update`) whose plan the grant authorises: no
//! person is asked, the executor checks the grant and its caps again and
//! restores the old container when the new one fails its health window.
//! Each digest is tried once per container (the store keeps the requests,
//! so a restart does not try it again), never within a minute of the
//! hours' edges (the executor's clock decides there); the grants are looked
//! at every minute, so a window of an hour is met whatever `check_every`
//! is.

use std::sync::Arc;
use std::time::Duration;

use tonic::Code;

use crate::engine::Engine;
use crate::model::{
    now_rfc3339, unix_now, NotChecked, RequestOptions, RequestSource, UpdateFound, UpdateList,
    UPDATE_LABEL,
};
use crate::notify::Notifier;
use crate::store::updates;
use drydock_proto::approval::WriteAction;

/// The request id the checker's executor calls carry.
const CHECK_ID: &str = "updates-check";
/// How often the update grants are looked at.
const GRANT_TICK: Duration = Duration::from_secs(60);

pub struct UpdateChecker {
    engine: Arc<Engine>,
    notifier: Option<Arc<Notifier>>,
    /// One check at a time.
    checking: tokio::sync::Mutex<()>,
    /// The last check's time and the containers it could not ask about.
    last: std::sync::Mutex<(Option<String>, Vec<NotChecked>)>,
}

impl UpdateChecker {
    pub fn new(engine: Arc<Engine>, notifier: Option<Arc<Notifier>>) -> Arc<UpdateChecker> {
        Arc::new(UpdateChecker {
            engine,
            notifier,
            checking: tokio::sync::Mutex::new(()),
            last: std::sync::Mutex::new((None, Vec::new())),
        })
    }

    /// Check every `every` (none when zero), the first a minute after
    /// start, so a restarting agent does not ask every registry at once.
    pub fn spawn(self: &Arc<Self>, every: Duration) {
        let granted = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(GRANT_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let _one = granted.checking.lock().await;
                if let Err(e) = granted.apply_grants().await {
                    tracing::error!(error = %e, "the update grants were not looked at");
                }
            }
        });
        if every.is_zero() {
            return;
        }
        let checker = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(60)).await;
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if let Err(e) = checker.check().await {
                    tracing::error!(error = %e, "the update check failed");
                }
            }
        });
    }

    /// What the checks found, as stored.
    pub async fn list(&self) -> Result<UpdateList, crate::store::StoreError> {
        let (checked_at, not_checked) = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone();
        Ok(UpdateList {
            updates: updates::list(self.engine.store())?,
            checked_at,
            not_checked,
        })
    }

    /// Ask about every container now; the list afterwards.
    pub async fn check(&self) -> Result<UpdateList, crate::store::StoreError> {
        let _one = self.checking.lock().await;
        let now = now_rfc3339();
        let mut not_checked = Vec::new();
        for host in self.engine.hosts().all() {
            let label = host.label().to_string();
            let containers = match host.executor.list(CHECK_ID, true).await {
                Ok(c) => c,
                Err(e) => {
                    not_checked.push(NotChecked {
                        host: label.clone(),
                        container: "*".into(),
                        why: format!("the executor did not list its containers: {e}"),
                    });
                    continue;
                }
            };
            let mut checked = Vec::new();
            let mut found = Vec::new();
            for c in containers {
                if c.labels.get(UPDATE_LABEL).is_some_and(|v| v == "none") {
                    continue;
                }
                match host.executor.registry_digest(CHECK_ID, &c.id).await {
                    Ok(r) => {
                        checked.push(c.name.clone());
                        if r.update_available {
                            let service = compose_service(&c.labels);
                            found.push(update_found(&label, &c.name, &r, service, &now));
                        }
                    }
                    // Not a tag of an allowed registry (an image built
                    // here, a registry not listed): nothing to ask.
                    Err(e) if e.code == Code::PermissionDenied || e.code == Code::NotFound => {}
                    Err(e) => not_checked.push(NotChecked {
                        host: label.clone(),
                        container: c.name.clone(),
                        why: e.to_string(),
                    }),
                }
            }
            // Swarm services: none on an engine that is no Swarm manager.
            let services = host.executor.services(CHECK_ID).await.unwrap_or_default();
            for s in services {
                if s.labels.get(UPDATE_LABEL).is_some_and(|v| v == "none") {
                    continue;
                }
                match host.executor.service_registry_digest(CHECK_ID, &s.id).await {
                    Ok(r) => {
                        checked.push(s.name.clone());
                        if r.update_available {
                            found.push(update_found(&label, &s.name, &r, None, &now));
                        }
                    }
                    Err(e) if e.code == Code::PermissionDenied || e.code == Code::NotFound => {}
                    Err(e) => not_checked.push(NotChecked {
                        host: label.clone(),
                        container: s.name.clone(),
                        why: e.to_string(),
                    }),
                }
            }
            let news = updates::record(self.engine.store(), &label, &checked, &found)?;
            if let Some(notifier) = &self.notifier {
                for u in &news {
                    notifier.update_available(u);
                }
            }
        }
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = (Some(now), not_checked);
        self.apply_grants().await?;
        self.list().await
    }

    /// Open a request for each update found that an update grant covers
    /// now; the engine has the grant authorise its plan.
    async fn apply_grants(&self) -> Result<(), crate::store::StoreError> {
        let store = self.engine.store();
        let grants = crate::grants::list(store)?;
        if !grants
            .iter()
            .any(|g| g.claims.actions.contains(&WriteAction::Update))
        {
            return Ok(());
        }
        let found = updates::list(store)?;
        let now = unix_now();
        for host in self.engine.hosts().all() {
            let label = host.label();
            let mine: Vec<&UpdateFound> = found.iter().filter(|u| u.host == label).collect();
            if mine.is_empty() {
                continue;
            }
            let Ok(policy) = host.executor.policy(CHECK_ID).await else {
                continue;
            };
            if !policy.automation_enabled || !policy.update_grants {
                continue;
            }
            let Ok(containers) = host.executor.list(CHECK_ID, true).await else {
                continue;
            };
            for u in mine {
                let Some(c) = containers.iter().find(|c| c.id == u.container_id) else {
                    continue;
                };
                // Inside the hours a minute either side of now, on the
                // executor's clock as it was when asked.
                let covering = |at: i64| {
                    crate::grants::covering(
                        &grants,
                        WriteAction::Update,
                        &c.name,
                        &c.labels,
                        "",
                        at,
                        &policy,
                    )
                };
                let Some(grant) = covering(now).filter(|g| {
                    [now - 60, now + 60]
                        .iter()
                        .all(|at| covering(*at).is_some_and(|h| h.id == g.id))
                }) else {
                    continue;
                };
                if store.update_opened(&u.container_id, &u.registry_digest)? {
                    continue;
                }
                let options = RequestOptions {
                    container: Some(u.container_id.clone()),
                    host: host.name.clone(),
                    update: true,
                    ..Default::default()
                };
                let message = format!(
                    "update {} to {}: an update was found, and grant {} allows it now",
                    u.command_name(),
                    u.registry_digest,
                    grant.id
                );
                match self
                    .engine
                    .open(message, options, RequestSource::Update)
                    .await
                {
                    Ok(req) => tracing::info!(
                        request_id = %req.id, container = %u.container, grant = %grant.id,
                        "opened an update under a grant"
                    ),
                    Err(e) => tracing::error!(
                        error = %e, container = %u.container,
                        "cannot open an update under a grant"
                    ),
                }
            }
        }
        Ok(())
    }
}

/// An update found of a container or a Swarm service (whose `image_id` is
/// empty: its spec names a pinned digest, which `RegistryDigest` says).
fn update_found(
    host: &str,
    name: &str,
    r: &crate::model::RegistryView,
    service: Option<String>,
    now: &str,
) -> UpdateFound {
    UpdateFound {
        host: host.to_string(),
        container: name.to_string(),
        container_id: r.container_id.clone(),
        reference: r.reference.clone(),
        image_id: r.image_id.clone(),
        version: r.version().map(str::to_string),
        revision: r.revision().map(str::to_string),
        registry_digest: r.registry_digest.clone(),
        new_version: r.new_version().map(str::to_string),
        new_revision: r.new_revision().map(str::to_string),
        labels_unread: Some(r.new_labels_unread.clone()).filter(|w| !w.is_empty()),
        service,
        new_tag: r.to_tag().map(str::to_string),
        found_at: now.to_string(),
        checked_at: now.to_string(),
    }
}

/// `project/service` of a compose container, or its service alone.
fn compose_service(labels: &std::collections::BTreeMap<String, String>) -> Option<String> {
    let service = labels.get(crate::model::COMPOSE_SERVICE_LABEL)?;
    Some(match labels.get(crate::model::COMPOSE_PROJECT_LABEL) {
        Some(project) => format!("{project}/{service}"),
        None => service.clone(),
    })
}
