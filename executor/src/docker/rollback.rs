//! Rolling a container back to another image that is already on the engine.
//!
//! The new container's definition is built here, from what the engine says
//! of the current container and of the image it was created from: the
//! container's own settings (those its image did not give it) are kept, and
//! only the image changes. Nothing of the definition comes from the caller,
//! and nothing is pulled.
//!
//! The swap keeps a way back at every step: the new container is created
//! under a temporary name (with the old one's anonymous volumes, as Compose
//! does on a recreate), then the old one is stopped (with its own stop
//! timeout), the names are swapped, the new one is started and must still
//! run a moment later; only then is the old container removed (never its
//! volumes). A failure at any step removes the new container and puts the
//! old one back under its name and in the state it was in, and the error
//! says what happened.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use bollard::models::{
    ContainerConfig, ContainerCreateBody, ContainerInspectResponse, EndpointSettings, HostConfig,
    ImageConfig, Mount, MountType, NetworkConnectRequest, NetworkingConfig,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, RemoveContainerOptions,
    RenameContainerOptions, StartContainerOptions, StopContainerOptions,
};

use super::{classify, DockerAdapter, DockerError};
use crate::policy::{Allows, Permit, Rollback};

/// Removing a container during a rollback never removes a volume: the
/// container that stays uses them.
pub(super) fn keep_volumes() -> Option<RemoveContainerOptions> {
    Some(RemoveContainerOptions {
        v: false,
        force: true,
        link: false,
    })
}

/// How long the new container must still be running after its start before
/// the old one is removed (a program that exits at once is caught here;
/// health is the agent's verification).
pub const SETTLE: Duration = Duration::from_secs(2);

/// Network modes that are not a user-defined network (no aliases there).
fn is_builtin_network(mode: &str) -> bool {
    matches!(mode, "" | "default" | "bridge" | "host" | "none") || mode.starts_with("container:")
}

/// The new container's definition and the networks to connect it to after
/// it is created (an engine before API 1.44 takes one network at create).
#[derive(Debug, Clone, PartialEq)]
pub struct Definition {
    pub body: ContainerCreateBody,
    pub more_networks: Vec<(String, EndpointSettings)>,
}

/// What the container set itself, beside what its image gave it: a value
/// equal to the old image's is left for the new image to give.
fn own<T: PartialEq>(container: Option<T>, image: Option<&T>) -> Option<T> {
    match (container, image) {
        (Some(c), Some(i)) if &c == i => None,
        (c, _) => c,
    }
}

/// Build the definition of `old` running `image_id`. `old_image` is the
/// configuration of the image `old` was created from (`None` when the engine
/// no longer has it: then every setting counts as the container's own).
pub fn definition(
    old: &ContainerInspectResponse,
    old_image: Option<&ImageConfig>,
    image_id: &str,
) -> Definition {
    let config: ContainerConfig = old.config.clone().unwrap_or_default();
    let from = old_image.cloned().unwrap_or_default();
    let image_env: BTreeSet<String> = from.env.clone().unwrap_or_default().into_iter().collect();
    let env: Vec<String> = config
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| !image_env.contains(e))
        .collect();
    let image_labels = from.labels.clone().unwrap_or_default();
    let labels: HashMap<String, String> = config
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, v)| image_labels.get(k) != Some(v))
        .collect();
    let minus = |mine: Option<Vec<String>>, theirs: Option<Vec<String>>| {
        let theirs: BTreeSet<String> = theirs.unwrap_or_default().into_iter().collect();
        let left: Vec<String> = mine
            .unwrap_or_default()
            .into_iter()
            .filter(|p| !theirs.contains(p))
            .collect();
        (!left.is_empty()).then_some(left)
    };
    let id = old.id.clone().unwrap_or_default();
    // The engine names a container's host after its short id unless told
    // otherwise; the new container gets its own.
    let hostname = config
        .hostname
        .clone()
        .filter(|h| !h.is_empty() && !id.starts_with(h.as_str()));
    let mut host: HostConfig = old.host_config.clone().unwrap_or_default();
    // Anonymous volumes (an image's VOLUME, compose's `- /path`) are not in
    // the host config: mount each where it was, so its data stays.
    let mut taken: BTreeSet<String> = host
        .binds
        .iter()
        .flatten()
        .filter_map(|b| b.split(':').nth(1).map(str::to_string))
        .collect();
    taken.extend(
        host.mounts
            .iter()
            .flatten()
            .filter_map(|m| m.target.clone()),
    );
    let carried: Vec<Mount> = old
        .mounts
        .iter()
        .flatten()
        .filter(|m| m.typ.as_deref() == Some("volume"))
        .filter_map(|m| {
            let (name, dest) = (m.name.clone()?, m.destination.clone()?);
            (!taken.contains(&dest)).then(|| Mount {
                target: Some(dest),
                source: Some(name),
                typ: Some(MountType::VOLUME),
                read_only: Some(!m.rw.unwrap_or(true)),
                ..Default::default()
            })
        })
        .collect();
    if !carried.is_empty() {
        host.mounts.get_or_insert_with(Vec::new).extend(carried);
    }
    // Networks: the primary one at create, the others right after; each
    // with its aliases, less the old container's short id (the engine adds
    // the new one's).
    let short = id.chars().take(12).collect::<String>();
    let endpoint = |e: &EndpointSettings| {
        let aliases: Vec<String> = e
            .aliases
            .iter()
            .flatten()
            .filter(|a| **a != short && !id.starts_with(a.as_str()))
            .cloned()
            .collect();
        EndpointSettings {
            aliases: (!aliases.is_empty()).then_some(aliases),
            links: e.links.clone(),
            ipam_config: e.ipam_config.clone(),
            driver_opts: e.driver_opts.clone(),
            ..Default::default()
        }
    };
    let mode = host.network_mode.clone().unwrap_or_default();
    let networks: Vec<(String, EndpointSettings)> = old
        .network_settings
        .as_ref()
        .and_then(|n| n.networks.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _)| !is_builtin_network(name))
        .map(|(name, e)| (name, endpoint(&e)))
        .collect();
    let (primary, more_networks): (Vec<_>, Vec<_>) =
        networks.into_iter().partition(|(name, _)| *name == mode);
    let body = ContainerCreateBody {
        hostname,
        domainname: config.domainname.clone().filter(|d| !d.is_empty()),
        user: own(config.user.clone(), from.user.as_ref()).filter(|u| !u.is_empty()),
        attach_stdin: config.attach_stdin,
        attach_stdout: config.attach_stdout,
        attach_stderr: config.attach_stderr,
        exposed_ports: minus(config.exposed_ports.clone(), from.exposed_ports.clone()),
        tty: config.tty,
        open_stdin: config.open_stdin,
        stdin_once: config.stdin_once,
        env: (!env.is_empty()).then_some(env),
        cmd: own(config.cmd.clone(), from.cmd.as_ref()),
        healthcheck: own(config.healthcheck.clone(), from.healthcheck.as_ref()),
        args_escaped: None,
        image: Some(image_id.to_string()),
        volumes: minus(config.volumes.clone(), from.volumes.clone()),
        working_dir: own(config.working_dir.clone(), from.working_dir.as_ref())
            .filter(|w| !w.is_empty()),
        entrypoint: own(config.entrypoint.clone(), from.entrypoint.as_ref()),
        network_disabled: config.network_disabled,
        on_build: None,
        labels: (!labels.is_empty()).then_some(labels),
        stop_signal: own(config.stop_signal.clone(), from.stop_signal.as_ref()),
        stop_timeout: config.stop_timeout,
        shell: own(config.shell.clone(), from.shell.as_ref()),
        host_config: Some(host),
        networking_config: (!primary.is_empty()).then(|| NetworkingConfig {
            endpoints_config: Some(primary.into_iter().collect()),
        }),
    };
    Definition {
        body,
        more_networks,
    }
}

/// Unique enough for the two names of one swap.
pub(super) fn swap_suffix() -> String {
    format!(
        "{:08x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
            .unwrap_or(0)
    )
}

/// What has been done so far, so a failure can be undone.
#[derive(Default)]
pub(super) struct Progress {
    pub(super) new_id: Option<String>,
    pub(super) stopped_old: bool,
    pub(super) old_aside: Option<String>,
    pub(super) new_named: bool,
}

impl DockerAdapter {
    /// Re-create the permitted container from its own definition with
    /// `image_id`; the new container's id. The caller has checked that the
    /// image is on the engine and that the approval names both images.
    pub async fn rollback(
        &self,
        permit: &Permit<Rollback>,
        image_id: &str,
    ) -> Result<String, DockerError> {
        let client = self.client();
        let old_id = permit.container_id();
        let old = self
            .step(
                "inspect",
                client.inspect_container(old_id, None::<InspectContainerOptions>),
            )
            .await?;
        let name = old
            .name
            .clone()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string();
        let old_image = match old.image.as_deref() {
            Some(id) => client.inspect_image(id).await.ok().and_then(|i| i.config),
            None => None,
        };
        let was_running = old.state.as_ref().and_then(|s| s.running).unwrap_or(false);
        let definition = definition(&old, old_image.as_ref(), image_id);
        let suffix = swap_suffix();
        let mut done = Progress::default();
        let result = self
            .swap(
                permit,
                &name,
                &suffix,
                was_running,
                definition,
                SETTLE,
                &mut done,
            )
            .await;
        match result {
            Ok(new_id) => {
                // The new container runs under the name: the old one goes,
                // its volumes stay (the new one uses them).
                let removed = client.remove_container(old_id, keep_volumes()).await;
                if let Err(e) = removed {
                    tracing::warn!(container = %name, error = %e, "rolled back, but the old container could not be removed");
                }
                Ok(new_id)
            }
            Err((step, e)) => {
                let restored = self.restore(old_id, &name, was_running, &done).await;
                let how = match restored {
                    Ok(()) => format!(
                        "{name} was put back as it was ({})",
                        if was_running {
                            "running"
                        } else {
                            "not running"
                        }
                    ),
                    Err(r) => format!("putting {name} back failed too: {r}"),
                };
                Err(DockerError::Rejected {
                    operation: "rollback",
                    message: format!("failed at {step} ({e}); {how}"),
                })
            }
        }
    }

    /// One engine call under the write timeout.
    pub(super) async fn step<T>(
        &self,
        operation: &'static str,
        call: impl std::future::Future<Output = Result<T, bollard::errors::Error>>,
    ) -> Result<T, DockerError> {
        match tokio::time::timeout(self.timeouts.write, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404,
                message,
            })) => Err(DockerError::NotFound(message)),
            Ok(Err(bollard::errors::Error::DockerResponseServerError { message, .. })) => {
                Err(DockerError::Rejected {
                    operation,
                    message: super::engine_message(&message),
                })
            }
            Ok(Err(e)) => Err(classify(operation, "", e)),
            Err(_) => Err(DockerError::Timeout {
                operation,
                timeout: self.timeouts.write,
            }),
        }
    }

    /// Create, stop, swap the names, start, and check it still runs
    /// `settle` later. The error names the step.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn swap<A: Allows>(
        &self,
        permit: &Permit<A>,
        name: &str,
        suffix: &str,
        was_running: bool,
        definition: Definition,
        settle: Duration,
        done: &mut Progress,
    ) -> Result<String, (&'static str, DockerError)> {
        let client = self.client();
        let old_id = permit.container_id();
        let temporary = format!("{name}-drydock-new-{suffix}");
        let created = self
            .step(
                "create",
                client.create_container(
                    Some(CreateContainerOptions {
                        name: Some(temporary),
                        platform: String::new(),
                    }),
                    definition.body,
                ),
            )
            .await
            .map_err(|e| ("create", e))?;
        let new_id = created.id;
        done.new_id = Some(new_id.clone());
        for (network, endpoint) in definition.more_networks {
            self.step(
                "connect",
                client.connect_network(
                    &network,
                    NetworkConnectRequest {
                        container: new_id.clone(),
                        endpoint_config: Some(endpoint),
                    },
                ),
            )
            .await
            .map_err(|e| ("connect", e))?;
        }
        if was_running {
            // No `t`: the engine gives the container its own stop timeout.
            let stop = client.stop_container(old_id, None::<StopContainerOptions>);
            match tokio::time::timeout(self.write_deadline(permit.stop_timeout_secs()), stop).await
            {
                Ok(Ok(())) => {}
                Ok(Err(bollard::errors::Error::DockerResponseServerError {
                    status_code: 304,
                    ..
                })) => {}
                Ok(Err(e)) => return Err(("stop", classify("stop", old_id, e))),
                Err(_) => {
                    return Err((
                        "stop",
                        DockerError::Timeout {
                            operation: "stop",
                            timeout: self.write_deadline(permit.stop_timeout_secs()),
                        },
                    ))
                }
            }
            done.stopped_old = true;
        }
        let aside = format!("{name}-drydock-old-{suffix}");
        self.step(
            "rename",
            client.rename_container(
                old_id,
                RenameContainerOptions {
                    name: aside.clone(),
                },
            ),
        )
        .await
        .map_err(|e| ("rename", e))?;
        done.old_aside = Some(aside);
        self.step(
            "rename",
            client.rename_container(
                &new_id,
                RenameContainerOptions {
                    name: name.to_string(),
                },
            ),
        )
        .await
        .map_err(|e| ("rename", e))?;
        done.new_named = true;
        self.step(
            "start",
            client.start_container(&new_id, None::<StartContainerOptions>),
        )
        .await
        .map_err(|e| ("start", e))?;
        tokio::time::sleep(settle).await;
        let now = self
            .step(
                "inspect",
                client.inspect_container(&new_id, None::<InspectContainerOptions>),
            )
            .await
            .map_err(|e| ("check", e))?;
        let state = now.state.unwrap_or_default();
        if !state.running.unwrap_or(false) || state.restarting.unwrap_or(false) {
            return Err((
                "check",
                DockerError::Rejected {
                    operation: "rollback",
                    message: format!(
                        "the new container stopped right after it started (exit code {})",
                        state.exit_code.unwrap_or(0)
                    ),
                },
            ));
        }
        Ok(new_id)
    }

    /// Undo what `swap` did, in reverse: the new container goes (its
    /// volumes are the old one's and stay), the old one gets its name back
    /// and is started again if it was running.
    pub(super) async fn restore(
        &self,
        old_id: &str,
        name: &str,
        was_running: bool,
        done: &Progress,
    ) -> Result<(), String> {
        let client = self.client();
        let mut failures = Vec::new();
        if let Some(new_id) = &done.new_id {
            let removed = self
                .step("remove", client.remove_container(new_id, keep_volumes()))
                .await;
            if let Err(e) = removed {
                failures.push(format!("removing the new container: {e}"));
            }
        }
        if done.old_aside.is_some() {
            let renamed = self
                .step(
                    "rename",
                    client.rename_container(
                        old_id,
                        RenameContainerOptions {
                            name: name.to_string(),
                        },
                    ),
                )
                .await;
            if let Err(e) = renamed {
                failures.push(format!("renaming it back to {name}: {e}"));
            }
        }
        if done.stopped_old && was_running {
            let started = self
                .step(
                    "start",
                    client.start_container(old_id, None::<StartContainerOptions>),
                )
                .await;
            if let Err(e) = started {
                failures.push(format!("starting it again: {e}"));
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerState, MountPoint, NetworkSettings};

    const OLD_ID: &str = "0123456789ab0000000000000000000000000000000000000000000000000000";
    const NEW_IMAGE: &str =
        "sha256:1111111111111111111111111111111111111111111111111111111111111111";

    fn strings(v: &[&str]) -> Option<Vec<String>> {
        Some(v.iter().map(|s| s.to_string()).collect())
    }

    fn old() -> ContainerInspectResponse {
        ContainerInspectResponse {
            id: Some(OLD_ID.into()),
            name: Some("/shop-api-1".into()),
            image: Some("sha256:2222".into()),
            config: Some(ContainerConfig {
                hostname: Some("0123456789ab".into()),
                env: strings(&["PATH=/bin", "APP_VERSION=2", "DATABASE_URL=postgres://db"]),
                cmd: strings(&["serve"]),
                entrypoint: strings(&["/app"]),
                labels: Some(
                    [
                        ("org.opencontainers.image.revision", "v2rev"),
                        ("com.docker.compose.service", "api"),
                    ]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ),
                volumes: strings(&["/anon"]),
                ..Default::default()
            }),
            host_config: Some(HostConfig {
                binds: strings(&["shop_data:/named:rw"]),
                network_mode: Some("shop_default".into()),
                ..Default::default()
            }),
            mounts: Some(vec![
                MountPoint {
                    typ: Some("volume".into()),
                    name: Some("shop_data".into()),
                    destination: Some("/named".into()),
                    rw: Some(true),
                    ..Default::default()
                },
                MountPoint {
                    typ: Some("volume".into()),
                    name: Some("a".repeat(64)),
                    destination: Some("/anon".into()),
                    rw: Some(true),
                    ..Default::default()
                },
            ]),
            network_settings: Some(NetworkSettings {
                networks: Some(
                    [
                        (
                            "shop_default".to_string(),
                            EndpointSettings {
                                aliases: strings(&["api", "0123456789ab"]),
                                ip_address: Some("172.20.0.5".into()),
                                ..Default::default()
                            },
                        ),
                        (
                            "shop_back".to_string(),
                            EndpointSettings {
                                aliases: strings(&["api-internal"]),
                                ..Default::default()
                            },
                        ),
                    ]
                    .into(),
                ),
                ..Default::default()
            }),
            state: Some(ContainerState {
                running: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn old_image() -> ImageConfig {
        ImageConfig {
            env: strings(&["PATH=/bin", "APP_VERSION=2"]),
            cmd: strings(&["serve"]),
            entrypoint: strings(&["/app"]),
            labels: Some(
                [("org.opencontainers.image.revision", "v2rev")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            volumes: strings(&["/anon"]),
            ..Default::default()
        }
    }

    #[test]
    fn the_new_definition_keeps_what_the_container_set_and_swaps_the_image() {
        let d = definition(&old(), Some(&old_image()), NEW_IMAGE);
        let b = &d.body;
        assert_eq!(b.image.as_deref(), Some(NEW_IMAGE));
        // The image's own env, command and labels come from the new image.
        assert_eq!(b.env, strings(&["DATABASE_URL=postgres://db"]));
        assert_eq!((b.cmd.clone(), b.entrypoint.clone()), (None, None));
        let labels = b.labels.clone().unwrap();
        assert_eq!(
            labels.get("com.docker.compose.service").map(String::as_str),
            Some("api")
        );
        assert!(!labels.contains_key("org.opencontainers.image.revision"));
        // The engine-made hostname (the old short id) is not carried.
        assert_eq!(b.hostname, None);
        // The named volume stays a bind; the anonymous one is mounted where
        // it was, by its name.
        let host = b.host_config.clone().unwrap();
        assert_eq!(host.binds, strings(&["shop_data:/named:rw"]));
        let mounts = host.mounts.unwrap();
        assert_eq!(mounts.len(), 1);
        assert_eq!(mounts[0].source.as_deref(), Some("a".repeat(64).as_str()));
        assert_eq!(mounts[0].target.as_deref(), Some("/anon"));
        // The primary network at create, the other after; the old short id
        // is not an alias of the new container.
        let primary = b
            .networking_config
            .clone()
            .unwrap()
            .endpoints_config
            .unwrap();
        assert_eq!(primary["shop_default"].aliases, strings(&["api"]));
        assert_eq!(primary["shop_default"].ip_address, None);
        assert_eq!(d.more_networks.len(), 1);
        assert_eq!(d.more_networks[0].0, "shop_back");
    }

    #[test]
    fn without_the_old_image_every_setting_is_the_containers() {
        let d = definition(&old(), None, NEW_IMAGE);
        assert_eq!(
            d.body.env,
            strings(&["PATH=/bin", "APP_VERSION=2", "DATABASE_URL=postgres://db"])
        );
        assert_eq!(d.body.cmd, strings(&["serve"]));
    }
}
