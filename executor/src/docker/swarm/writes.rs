//! The Swarm writes: a service's spec read raw and sent back whole at the
//! version the permit bound, forced, rolled back, or moved to another
//! image.

use std::time::Duration;

use super::*;

impl DockerAdapter {
    /// `docker service update --force`: the same spec, its `ForceUpdate`
    /// counter raised, sent with the permit's version. Once; never retried.
    pub async fn force_update(
        &self,
        permit: &ServicePermit<ForceUpdate>,
    ) -> Result<u64, DockerError> {
        self.update_service(
            "force_update",
            permit.service_id(),
            permit.version(),
            SpecChange::Force,
        )
        .await
    }

    /// `docker service rollback`: back to the previous spec, sent with the
    /// permit's version. Once; never retried.
    pub async fn rollback_service(
        &self,
        permit: &ServicePermit<ServiceRollback>,
    ) -> Result<u64, DockerError> {
        self.update_service(
            "service_rollback",
            permit.service_id(),
            permit.version(),
            SpecChange::Rollback,
        )
        .await
    }

    /// `docker service update --image REF@DIGEST --update-failure-action
    /// rollback`: the spec moved to `image` (the tag pinned to the approved
    /// digest), the engine told to roll it back by itself when a new task
    /// fails within `monitor`, with the registry's credentials for the
    /// nodes' pulls. Sent with the permit's version. Once; never retried.
    pub async fn update_service_image(
        &self,
        permit: &ServicePermit<ServiceUpdate>,
        image: &str,
        monitor: Duration,
        credentials: Option<&crate::registry::Credentials>,
        registry: &str,
    ) -> Result<u64, DockerError> {
        let auth = crate::docker::update::engine_credentials(credentials, registry)
            .and_then(|c| serde_json::to_vec(&c).ok())
            .map(|json| {
                use base64::Engine as _;
                base64::engine::general_purpose::URL_SAFE.encode(json)
            });
        self.update_service(
            "service_update",
            permit.service_id(),
            permit.version(),
            SpecChange::Image {
                image,
                monitor,
                auth,
            },
        )
        .await
    }

    /// The engine's own API version (from `/version`), or the negotiated
    /// one when the engine does not say.
    async fn engine_api_version(&self) -> bollard::ClientVersion {
        #[derive(serde::Deserialize)]
        struct Version {
            #[serde(rename = "ApiVersion", default)]
            api_version: String,
        }
        let negotiated = self.client().client_version();
        let Ok((status, body)) = self.raw.get(&negotiated, "/version").await else {
            return negotiated;
        };
        serde_json::from_slice::<Version>(&body)
            .ok()
            .filter(|_| status.is_success())
            .and_then(|v| parse_api_version(&v.api_version))
            .unwrap_or(negotiated)
    }

    /// One update of a service: its current spec read raw and sent back
    /// whole (forced, with `rollback=previous`, or with another image) at
    /// `version`. Returns the version after the write.
    async fn update_service(
        &self,
        operation: &'static str,
        id: &str,
        version: u64,
        change: SpecChange<'_>,
    ) -> Result<u64, DockerError> {
        let id = swarm_id(operation, id)?;
        let deadline = self.timeouts.write;
        let write = async {
            // The spec goes back as the engine gave it, untouched JSON, at
            // the engine's own API version: at an older one the engine
            // would clear the settings that version does not know.
            let client_version = self.engine_api_version().await;
            let raw_error = |e: crate::docker::transport::RawError| match e {
                crate::docker::transport::RawError::Connection(e) => {
                    DockerError::Unavailable(format!("{operation}: {e}"))
                }
                crate::docker::transport::RawError::Answer(e) => DockerError::Rejected {
                    operation,
                    message: e,
                },
            };
            let (status, body) = self
                .raw
                .get(&client_version, &format!("/services/{id}"))
                .await
                .map_err(raw_error)?;
            if !status.is_success() {
                return Err(swarm_error(operation, status, &body));
            }
            let mut service: serde_json::Value =
                serde_json::from_slice(&body).map_err(|e| DockerError::Rejected {
                    operation,
                    message: format!("the engine's service is not as expected: {e}"),
                })?;
            let current = service["Version"]["Index"].as_u64().unwrap_or(0);
            if current != version {
                return Err(DockerError::Rejected {
                    operation,
                    message: format!(
                        "the service's spec is at version {current}, not {version} as when it was checked; nothing was done"
                    ),
                });
            }
            let mut spec = service["Spec"].take();
            let no_template = || DockerError::Rejected {
                operation,
                message: "the service's spec has no task template".into(),
            };
            match &change {
                SpecChange::Force => {
                    let template = spec
                        .get_mut("TaskTemplate")
                        .and_then(|t| t.as_object_mut())
                        .ok_or_else(no_template)?;
                    let forced = template
                        .get("ForceUpdate")
                        .and_then(|f| f.as_u64())
                        .unwrap_or(0);
                    template.insert("ForceUpdate".into(), (forced.saturating_add(1)).into());
                }
                SpecChange::Rollback => {}
                SpecChange::Image { image, monitor, .. } => {
                    let container = spec
                        .get_mut("TaskTemplate")
                        .and_then(|t| t.get_mut("ContainerSpec"))
                        .and_then(|c| c.as_object_mut())
                        .ok_or_else(no_template)?;
                    container.insert("Image".into(), (*image).into());
                    let root = spec.as_object_mut().ok_or_else(no_template)?;
                    let update = root
                        .entry("UpdateConfig")
                        .or_insert_with(|| serde_json::json!({}));
                    if let Some(update) = update.as_object_mut() {
                        update.insert("FailureAction".into(), "rollback".into());
                        // The engine's monitor is the update's health window:
                        // a new task that fails within it rolls the spec back.
                        let set = update.get("Monitor").and_then(|m| m.as_u64()).unwrap_or(0);
                        if (set as u128) < monitor.as_nanos() {
                            let ns = u64::try_from(monitor.as_nanos()).unwrap_or(u64::MAX);
                            update.insert("Monitor".into(), ns.into());
                        }
                    }
                }
            }
            let query = match change {
                SpecChange::Rollback => {
                    format!("/services/{id}/update?version={version}&rollback=previous")
                }
                _ => format!("/services/{id}/update?version={version}"),
            };
            let auth = match &change {
                SpecChange::Image { auth, .. } => auth.clone(),
                _ => None,
            };
            let body = serde_json::to_vec(&spec).map_err(|e| DockerError::Rejected {
                operation,
                message: e.to_string(),
            })?;
            let (status, answer) = self
                .raw
                .post_json(&client_version, &query, body, auth)
                .await
                .map_err(raw_error)?;
            if !status.is_success() {
                return Err(swarm_error(operation, status, &answer));
            }
            Ok(self
                .service_by_id(id)
                .await
                .map(|s| s.version)
                .unwrap_or(version.saturating_add(1)))
        };
        tokio::time::timeout(deadline, write)
            .await
            .map_err(|_| DockerError::Timeout {
                operation,
                timeout: deadline,
            })?
    }
}

/// What a service write changes in the spec it sends back.
enum SpecChange<'a> {
    /// Raise `ForceUpdate`: the same spec, new tasks.
    Force,
    /// `rollback=previous`: the engine's previous spec.
    Rollback,
    /// Another image, rolled back by the engine on failure within
    /// `monitor`; `auth` is the `X-Registry-Auth` for the nodes' pulls.
    Image {
        image: &'a str,
        monitor: Duration,
        auth: Option<String>,
    },
}
