//! Updating a container to the image its tag names now in its registry.
//!
//! The registry is asked through the engine (`/distribution/<name>/json`)
//! and the image pulled by the engine, by digest only (`name@sha256:…`),
//! with the registry's credentials in the call's `X-Registry-Auth`. The new
//! container is built as a rollback's is (`rollback::definition`: the
//! container's own settings, only the image changes) and swapped in the
//! same way; then it must stay running, and healthy when it has a
//! healthcheck, for the health window. Until then the old container stays,
//! stopped under another name; if the new one fails, or anything else does,
//! the old one is put back as it was, with its tag, by the executor alone:
//! the write runs in the executor's own task, whoever asked for it.

use std::time::{Duration, Instant};

use bollard::auth::DockerCredentials;
use bollard::models::HealthStatusEnum;
use bollard::query_parameters::{
    CreateImageOptions, InspectContainerOptions, LogsOptions, RemoveImageOptions, TagImageOptions,
};
use futures::StreamExt as _;

use super::rollback::{definition, keep_volumes, swap_suffix, Progress};
use super::{classify, DockerAdapter, DockerError};
use crate::policy::{Permit, Update};
use crate::registry::{Credentials, ImageRef};

/// How often the new container is looked at during the window.
const POLL: Duration = Duration::from_millis(500);
/// The longest wait for a first healthy check beyond the window.
const MAX_HEALTH_WAIT: Duration = Duration::from_secs(600);
/// Log lines of a failed new container kept in the reason.
const REASON_LINES: usize = 5;

/// What the executor pulls and how long it holds the new container.
#[derive(Debug, Clone)]
pub struct UpdatePlan<'a> {
    /// The tag the new container runs, and the one the old one ran: the
    /// same, unless the update moves to a newer tag of its line.
    pub reference: &'a ImageRef,
    pub from_reference: &'a ImageRef,
    pub digest: &'a str,
    pub credentials: Option<&'a Credentials>,
    pub pull_timeout: Duration,
    pub max_image_bytes: u64,
    pub window: Duration,
    /// An image the executor built (`reference` is its tag): run as it
    /// is, nothing pulled (`digest` and the registry's fields unused).
    pub built: Option<&'a str>,
}

/// A registry's credentials and limits, for one pull.
#[derive(Debug, Clone, Copy)]
pub struct PullSource<'a> {
    pub credentials: Option<&'a Credentials>,
    pub timeout: Duration,
    pub max_image_bytes: u64,
}

/// A finished update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Updated {
    pub new_container_id: String,
    pub image_id: String,
    pub pulled: bool,
    pub watched: Duration,
}

/// The registry's credentials as the engine takes them (bollard's pulls,
/// and a service update's `X-Registry-Auth`).
pub(super) fn engine_credentials(
    c: Option<&Credentials>,
    registry: &str,
) -> Option<DockerCredentials> {
    c.map(|c| DockerCredentials {
        username: c.username.clone(),
        password: c.password.clone(),
        identitytoken: c.identitytoken.clone(),
        serveraddress: Some(registry.to_string()),
        ..Default::default()
    })
}

fn rejected(message: String) -> DockerError {
    DockerError::Rejected {
        operation: "update",
        message,
    }
}

impl DockerAdapter {
    /// The manifest digest `reference`'s tag names in its registry now.
    pub async fn registry_digest(
        &self,
        reference: &ImageRef,
        credentials: Option<&Credentials>,
        timeout: Duration,
    ) -> Result<String, DockerError> {
        let Some(tagged) = reference.tagged() else {
            return Err(rejected("the reference names no tag".into()));
        };
        let creds = engine_credentials(credentials, &reference.registry);
        let answer = tokio::time::timeout(
            timeout,
            self.client().inspect_registry_image(&tagged, creds),
        )
        .await
        .map_err(|_| DockerError::Timeout {
            operation: "distribution_inspect",
            timeout,
        })?
        .map_err(|e| registry_error("ask the registry for", &tagged, e))?;
        let digest = answer.descriptor.digest.unwrap_or_default();
        if drydock_proto::approval::is_image_id(&digest) {
            Ok(digest)
        } else {
            Err(rejected(format!(
                "the registry answered no sha256 digest for {tagged}"
            )))
        }
    }

    /// The manifest digests the engine knows an image by (`name@sha256:…`).
    pub async fn repo_digests(&self, image_id: &str) -> Result<Vec<String>, DockerError> {
        let image = self
            .step("inspect_image", self.client().inspect_image(image_id))
            .await?;
        Ok(image.repo_digests.unwrap_or_default())
    }

    /// Pull (unless present), swap in a container of the new image, hold it
    /// for the window, and keep it or put the old one back.
    pub async fn update(
        &self,
        permit: &Permit<Update>,
        plan: UpdatePlan<'_>,
    ) -> Result<Updated, DockerError> {
        let client = self.client();
        let old_id = permit.container_id();
        let Some(tagged) = plan.reference.tagged() else {
            return Err(rejected("the reference names no tag".into()));
        };
        let (image_id, pulled) = match plan.built {
            Some(id) => (id.to_string(), false),
            None => self.pull(&plan).await?,
        };
        let old = self
            .step(
                "inspect",
                client.inspect_container(old_id, None::<InspectContainerOptions>),
            )
            .await?;
        let old_image_id = old.image.clone().unwrap_or_default();
        if old_image_id == image_id {
            return Err(rejected(format!(
                "the container already runs {image_id}; nothing to update"
            )));
        }
        let name = old
            .name
            .clone()
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string();
        let old_image = client
            .inspect_image(&old_image_id)
            .await
            .ok()
            .and_then(|i| i.config);
        let was_running = old.state.as_ref().and_then(|s| s.running).unwrap_or(false);
        // The tag moves to the new image, as `docker pull` would move it;
        // the new container is created from the tag, so it keeps running
        // a reference (a later update follows it), and is checked to run
        // exactly the pulled image.
        self.tag(&image_id, plan.reference).await?;
        let definition = definition(&old, old_image.as_ref(), &tagged);
        let suffix = swap_suffix();
        let mut done = Progress::default();
        let swapped = self
            // No settle: the window that follows watches it from its start.
            .swap(
                permit,
                &name,
                &suffix,
                was_running,
                definition,
                Duration::ZERO,
                &mut done,
            )
            .await
            .map_err(|(step, e)| format!("the swap failed at {step} ({e})"));
        let held = match swapped {
            Ok(new_id) => self
                .hold(&new_id, &image_id, plan.window)
                .await
                .map(|watched| (new_id, watched)),
            Err(e) => Err(e),
        };
        match held {
            Ok((new_id, watched)) => {
                if let Err(e) = client.remove_container(old_id, keep_volumes()).await {
                    tracing::warn!(container = %name, error = %e, "updated, but the old container could not be removed");
                }
                Ok(Updated {
                    new_container_id: new_id,
                    image_id,
                    pulled,
                    watched,
                })
            }
            Err(why) => {
                let restored = self.restore(old_id, &name, was_running, &done).await;
                // A tag that moved goes back; a newer tag of the line names
                // the new image in the registry too, and stays.
                let retagged = if plan.reference == plan.from_reference {
                    self.tag(&old_image_id, plan.reference).await
                } else {
                    Ok(())
                };
                let how = match (restored, retagged) {
                    (Ok(()), Ok(())) => format!(
                        "{name} was put back as it was ({}), and {} names its image again",
                        if was_running {
                            "running"
                        } else {
                            "not running"
                        },
                        plan.from_reference.tagged().unwrap_or_default()
                    ),
                    (Err(r), _) => format!("putting {name} back failed too: {r}"),
                    (Ok(()), Err(e)) => {
                        format!("{name} was put back, but {tagged} could not be moved back: {e}")
                    }
                };
                Err(rejected(format!("{why}; {how}")))
            }
        }
    }

    /// The image of `plan.digest`: present already, or pulled by digest
    /// under the registry's limits.
    async fn pull(&self, plan: &UpdatePlan<'_>) -> Result<(String, bool), DockerError> {
        let source = PullSource {
            credentials: plan.credentials,
            timeout: plan.pull_timeout,
            max_image_bytes: plan.max_image_bytes,
        };
        self.pull_pinned(plan.reference, plan.digest, source).await
    }

    /// `reference`'s image by `digest`: present already (`false`), or
    /// pulled under the time limit and then held to the size limit.
    pub async fn pull_pinned(
        &self,
        reference: &ImageRef,
        digest: &str,
        source: PullSource<'_>,
    ) -> Result<(String, bool), DockerError> {
        let client = self.client();
        let pinned = reference.at(digest);
        if let Ok(image) = client.inspect_image(&pinned).await {
            return Ok((image.id.unwrap_or_default(), false));
        }
        let creds = engine_credentials(source.credentials, &reference.registry);
        let options = CreateImageOptions {
            from_image: Some(pinned.clone()),
            ..Default::default()
        };
        let pulling = async {
            let mut stream = client.create_image(Some(options), None, creds);
            while let Some(item) = stream.next().await {
                let info = item.map_err(|e| registry_error("pull", &pinned, e))?;
                if let Some(err) = info.error_detail.and_then(|d| d.message) {
                    return Err(rejected(format!(
                        "the engine could not pull {pinned}: {}",
                        super::engine_message(&err)
                    )));
                }
            }
            Ok(())
        };
        tokio::time::timeout(source.timeout, pulling)
            .await
            .map_err(|_| DockerError::Timeout {
                operation: "pull",
                timeout: source.timeout,
            })??;
        let image = self
            .step("inspect_image", client.inspect_image(&pinned))
            .await?;
        let id = image.id.clone().unwrap_or_default();
        let size = image.size.unwrap_or(0).max(0) as u64;
        if size > source.max_image_bytes {
            let _ = client
                .remove_image(&pinned, None::<RemoveImageOptions>, None)
                .await;
            return Err(rejected(format!(
                "{pinned} is {size} bytes, more than the registry's max_image_bytes ({}); it was removed again",
                source.max_image_bytes
            )));
        }
        Ok((id, true))
    }

    /// Point `reference`'s tag at `image_id`.
    pub async fn tag(&self, image_id: &str, reference: &ImageRef) -> Result<(), DockerError> {
        let options = TagImageOptions {
            repo: Some(reference.name()),
            tag: reference.tag.clone(),
        };
        self.step("tag", self.client().tag_image(image_id, Some(options)))
            .await
    }

    /// Watch the new container until it has run (healthy, if it has a
    /// healthcheck) for `window`; how long that took, or why it did not.
    pub(super) async fn hold(
        &self,
        new_id: &str,
        image_id: &str,
        window: Duration,
    ) -> Result<Duration, String> {
        let client = self.client();
        let started = Instant::now();
        let mut healthy_since: Option<Instant> = None;
        let mut first_restarts: Option<i64> = None;
        loop {
            let now = self
                .step(
                    "inspect",
                    client.inspect_container(new_id, None::<InspectContainerOptions>),
                )
                .await
                .map_err(|e| format!("the new container could not be inspected ({e})"))?;
            if now.image.as_deref() != Some(image_id) {
                return Err(format!(
                    "the new container runs {} instead of the pulled {image_id} (the tag moved meanwhile)",
                    now.image.unwrap_or_default()
                ));
            }
            let state = now.state.clone().unwrap_or_default();
            let restarts = now.restart_count.unwrap_or(0);
            let first = *first_restarts.get_or_insert(restarts);
            if !state.running.unwrap_or(false)
                || state.restarting.unwrap_or(false)
                || restarts > first
            {
                let tail = self.last_lines(new_id).await;
                return Err(format!(
                    "the new image stopped after {}s (exit code {}){tail}",
                    started.elapsed().as_secs(),
                    state.exit_code.unwrap_or(0)
                ));
            }
            let check = now.config.as_ref().and_then(|c| c.healthcheck.clone());
            let has_check = check.as_ref().is_some_and(|h| {
                h.test
                    .as_ref()
                    .is_some_and(|t| !t.is_empty() && t[0] != "NONE")
            });
            let health = state.health.clone().unwrap_or_default();
            if has_check {
                match health.status {
                    Some(HealthStatusEnum::UNHEALTHY) => {
                        let output = health
                            .log
                            .unwrap_or_default()
                            .last()
                            .and_then(|l| l.output.clone())
                            .unwrap_or_default();
                        let (output, _) = crate::redact::redact_text(
                            &crate::redact::neutralise_controls(output.trim()),
                        );
                        return Err(format!(
                            "the new image turned unhealthy after {}s (last check: {})",
                            started.elapsed().as_secs(),
                            output.chars().take(300).collect::<String>()
                        ));
                    }
                    Some(HealthStatusEnum::HEALTHY) => {
                        healthy_since.get_or_insert_with(Instant::now);
                    }
                    _ => {
                        let allowed = window.saturating_add(health_grace(check.as_ref()));
                        if started.elapsed() > allowed {
                            return Err(format!(
                                "the new image was not healthy within {}s",
                                allowed.as_secs()
                            ));
                        }
                    }
                }
            } else {
                healthy_since.get_or_insert(started);
            }
            if healthy_since.is_some_and(|t| t.elapsed() >= window) {
                return Ok(started.elapsed());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The new container's last lines, shaped and redacted, for a reason.
    async fn last_lines(&self, id: &str) -> String {
        let options = LogsOptions {
            stdout: true,
            stderr: true,
            tail: REASON_LINES.to_string(),
            ..Default::default()
        };
        let mut stream = self.client().logs(id, Some(options));
        let mut lines = Vec::new();
        let reading = async {
            while let Some(Ok(chunk)) = stream.next().await {
                for line in chunk.into_bytes().split(|b| *b == b'\n') {
                    if !line.is_empty() {
                        lines.push(crate::redact::shape_log_line(line).0);
                    }
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(3), reading).await;
        let kept: Vec<String> = lines
            .iter()
            .rev()
            .take(REASON_LINES)
            .rev()
            .map(|l| l.chars().take(200).collect())
            .collect();
        if kept.is_empty() {
            String::new()
        } else {
            format!("; its last lines: {}", kept.join(" | "))
        }
    }
}

/// How long a healthcheck may take to report healthy beyond the window:
/// its start period and enough intervals for its retries, bounded.
fn health_grace(check: Option<&bollard::models::HealthConfig>) -> Duration {
    let ns = |v: Option<i64>, default: u64| {
        Duration::from_nanos(v.filter(|n| *n > 0).map_or(default, |n| n as u64))
    };
    let Some(c) = check else {
        return Duration::ZERO;
    };
    let interval = ns(c.interval, 30_000_000_000);
    let start = ns(c.start_period, 0);
    let retries = u32::try_from(c.retries.filter(|r| *r > 0).unwrap_or(3)).unwrap_or(u32::MAX);
    // An image's healthcheck is input: its numbers may be absurd.
    start
        .saturating_add(interval.saturating_mul(retries.saturating_add(1)))
        .min(MAX_HEALTH_WAIT)
}

/// A registry call's failure, without the engine's full chatter.
fn registry_error(what: &str, reference: &str, e: bollard::errors::Error) -> DockerError {
    match e {
        bollard::errors::Error::DockerResponseServerError {
            message,
            status_code,
        } => rejected(format!(
            "could not {what} {reference} (engine status {status_code}): {}",
            super::engine_message(&message)
        )),
        other => classify("pull", reference, other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::HealthConfig;

    #[test]
    fn a_healthcheck_gets_its_start_period_and_retries_beyond_the_window() {
        assert_eq!(health_grace(None), Duration::ZERO);
        let check = HealthConfig {
            interval: Some(1_000_000_000),
            retries: Some(3),
            start_period: Some(5_000_000_000),
            ..Default::default()
        };
        assert_eq!(health_grace(Some(&check)), Duration::from_secs(9));
        let slow = HealthConfig {
            interval: Some(3_600_000_000_000),
            ..Default::default()
        };
        assert_eq!(health_grace(Some(&slow)), MAX_HEALTH_WAIT);
        let absurd = HealthConfig {
            interval: Some(i64::MAX),
            retries: Some(i64::MAX),
            start_period: Some(i64::MAX),
            ..Default::default()
        };
        assert_eq!(health_grace(Some(&absurd)), MAX_HEALTH_WAIT);
    }
}
