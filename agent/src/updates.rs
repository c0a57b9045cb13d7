//! Updates found: every container in scope whose tag is in a registry the
//! executor allows is asked about (`RegistryDigest`), on a cadence
//! (`updates.check_every`) and on demand. A container whose tag names
//! another image than it runs has an update available: it is kept in the
//! store, listed (`GET /api/v1/updates`, `drydock updates`, the console,
//! MCP), and notified once per digest (`update_available`). A container
//! labelled `drydock.update=none` is never asked about.

use std::sync::Arc;
use std::time::Duration;

use tonic::Code;

use crate::engine::Engine;
use crate::model::{now_rfc3339, NotChecked, UpdateFound, UpdateList, UPDATE_LABEL};
use crate::notify::Notifier;
use crate::store::updates;

/// The request id the checker's executor calls carry.
const CHECK_ID: &str = "updates-check";

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
                            found.push(UpdateFound {
                                host: label.clone(),
                                container: c.name.clone(),
                                container_id: r.container_id.clone(),
                                reference: r.reference.clone(),
                                image_id: r.image_id.clone(),
                                version: r.version().map(str::to_string),
                                revision: r
                                    .oci_labels
                                    .get("org.opencontainers.image.revision")
                                    .cloned(),
                                registry_digest: r.registry_digest.clone(),
                                found_at: now.clone(),
                                checked_at: now.clone(),
                            });
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
            let news = updates::record(self.engine.store(), &label, &checked, &found)?;
            if let Some(notifier) = &self.notifier {
                for u in &news {
                    notifier.update_available(u);
                }
            }
        }
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = (Some(now), not_checked);
        self.list().await
    }
}
