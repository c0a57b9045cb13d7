//! Which host a request is on, and reads across every host: the engine's
//! side of `crate::hosts`. A request acts on its own host's executor only;
//! finding its target, and the operator's views, read every host at once
//! and go on without the ones that do not answer.

use std::sync::Arc;

use super::Engine;
use crate::executor_client::{Executor, ExecutorError};
use crate::hosts::Host;
use crate::model::*;

/// How long a host the prober knows to be down is waited for.
const DOWN_HOST_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

impl Engine {
    /// The host request `id` is on: its target's, else the one it was
    /// asked about, else the first. A host no longer configured falls back
    /// to the first, where the request's container ids do not exist and an
    /// approval made for the other host is refused by the executor.
    fn host_of(&self, id: &str) -> Arc<Host> {
        let first = self.hosts.first().clone();
        if self.hosts.all().len() == 1 {
            return first;
        }
        let named = self
            .store
            .get(id)
            .ok()
            .flatten()
            .and_then(|r| r.host().map(str::to_string));
        match named {
            None => first,
            Some(name) => self.hosts.get(Some(&name)).cloned().unwrap_or_else(|| {
                tracing::warn!(request_id = %id, host = %name, "the request's host is no longer configured");
                first
            }),
        }
    }

    /// The containers the request listed on its own host: a dependency or
    /// a port's holder is looked for there, never on another host.
    pub(super) fn containers_on_host(req: &Request) -> Vec<ContainerSummaryView> {
        let host = req.host();
        req.latest::<kind::ContainerList>()
            .into_iter()
            .flatten()
            .filter(|c| host.is_none() || c.host.as_deref() == host)
            .cloned()
            .collect()
    }

    /// The executor of the host request `id` is on.
    pub(super) fn exec(&self, id: &str) -> Arc<dyn Executor> {
        self.host_of(id).executor.clone()
    }

    /// The executor's policy, asked now (not from a request's evidence):
    /// the named host's, or the first's.
    pub async fn executor_policy(&self, host: Option<&str>) -> Result<PolicyView, ExecutorError> {
        self.view_host(host)?.executor.policy("req-doctor").await
    }

    /// The host an operator's view asks about: the named one, or the first.
    pub(super) fn view_host(&self, host: Option<&str>) -> Result<Arc<Host>, ExecutorError> {
        match host {
            Some(name) => self.hosts.require(name).cloned(),
            None => Ok(self.hosts.first().clone()),
        }
    }

    /// Every container the executors' policies show, running or not, each
    /// with its host when there are several; the hosts that could not be
    /// listed, with why.
    pub async fn containers(
        &self,
    ) -> Result<(Vec<ContainerSummaryView>, Vec<(String, ExecutorError)>), ExecutorError> {
        let (listed, failed) = self.list_hosts("req-containers", None).await;
        if listed.is_empty() {
            if let Some((_, e)) = failed.into_iter().next() {
                return Err(e);
            }
            return Ok((Vec::new(), Vec::new()));
        }
        Ok((listed.into_iter().flat_map(|(_, c)| c).collect(), failed))
    }

    /// List the containers of every host (or only `only`) at once, each
    /// row stamped with its host when hosts are named. Among several, a
    /// host the prober knows to be down is still asked (it may be back), but
    /// not waited for long; one that answers is probed again at once.
    pub(super) async fn list_hosts(
        &self,
        id: &str,
        only: Option<&str>,
    ) -> (
        Vec<(Arc<Host>, Vec<ContainerSummaryView>)>,
        Vec<(String, ExecutorError)>,
    ) {
        let named = self.hosts.named();
        let wanted: Vec<Arc<Host>> = self
            .hosts
            .all()
            .iter()
            .filter(|h| only.is_none_or(|o| h.label() == o))
            .cloned()
            .collect();
        // Waiting briefly is for searching many hosts: a lone host, or the
        // one asked about, is waited for as any call is.
        let brief = wanted.len() > 1;
        let reads = wanted.iter().map(|h| async move {
            if !brief || !h.is_down() {
                return (h.clone(), h.executor.list(id, true).await);
            }
            match tokio::time::timeout(DOWN_HOST_WAIT, h.executor.list(id, true)).await {
                Ok(Ok(rows)) => {
                    let host = h.clone();
                    tokio::spawn(async move { host.probe().await });
                    (h.clone(), Ok(rows))
                }
                Ok(Err(e)) => (h.clone(), Err(e)),
                Err(_) => {
                    let why = h
                        .view()
                        .error
                        .unwrap_or_else(|| "it does not answer".into());
                    (
                        h.clone(),
                        Err(ExecutorError::new(tonic::Code::Unavailable, why)),
                    )
                }
            }
        });
        let mut listed = Vec::new();
        let mut failed = Vec::new();
        for (host, result) in futures::future::join_all(reads).await {
            match result {
                Ok(mut rows) => {
                    if named {
                        for r in rows.iter_mut() {
                            r.host = Some(host.label().to_string());
                        }
                    }
                    listed.push((host, rows));
                }
                Err(e) => failed.push((host.label().to_string(), e)),
            }
        }
        (listed, failed)
    }
}
