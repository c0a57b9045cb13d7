//! Swaps the executor stopped in the middle of: killed during an update's
//! health window, or between the steps of a rollback's or an update's swap.
//! A swap leaves its containers under names of its own (`NAME-drydock-new-
//! SUFFIX` until the new one takes the name, `NAME-drydock-old-SUFFIX` for
//! the old one until the write is kept), so at start they are found by
//! name, and each swap is finished as it promised: the new container that
//! already holds the name is held for the health window again, from now,
//! and kept only if it holds; otherwise, and whenever the new one never got
//! the name, the old container is put back under its name (started again
//! when the swap had stopped it) and, for an update, the tag names its
//! image again. Only containers whose name is in the executor's scope are
//! touched; each outcome is an audit row.

use std::collections::BTreeMap;
use std::time::Duration;

use bollard::query_parameters::{InspectContainerOptions, ListContainersOptions};

use super::rollback::{keep_volumes, Progress};
use super::DockerAdapter;
use crate::registry::ImageRef;

/// One swap found at start, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resumed {
    pub name: String,
    /// `update` or `rollback`.
    pub action: &'static str,
    /// The container under the name now.
    pub container_id: String,
    /// Whether the new container was kept.
    pub kept: bool,
    /// The container the write was for (the old one).
    pub old_id: String,
    pub what: String,
}

/// The parts of a swap's own name: (the container's name, `old` or `new`,
/// the swap's suffix).
pub fn swap_name(name: &str) -> Option<(&str, &str, &str)> {
    let name = name.trim_start_matches('/');
    let (rest, suffix) = name.rsplit_once('-')?;
    if suffix.len() != 8 || !suffix.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let (base, side) = rest.rsplit_once("-drydock-")?;
    matches!(side, "old" | "new")
        .then_some((base, side, suffix))
        .filter(|(base, _, _)| !base.is_empty())
}

#[derive(Default)]
struct Pair {
    old: Option<String>,
    new: Option<String>,
}

impl DockerAdapter {
    /// Find and finish the swaps an earlier run left of writes to the
    /// containers `interrupted` names (by the old container's id, with the
    /// write's action: `update` or `rollback`);
    /// `in_scope` says whether a container name (and labels) is the
    /// executor's to touch.
    pub async fn resume_swaps(
        &self,
        window: Duration,
        interrupted: impl Fn(&str) -> Option<&'static str>,
        in_scope: impl Fn(&str, &BTreeMap<String, String>) -> bool,
    ) -> Result<Vec<Resumed>, bollard::errors::Error> {
        let client = self.client();
        let listed = client
            .list_containers(Some(ListContainersOptions {
                all: true,
                ..Default::default()
            }))
            .await?;
        let mut pairs: BTreeMap<(String, String), Pair> = BTreeMap::new();
        for c in &listed {
            let (Some(id), Some(names)) = (&c.id, &c.names) else {
                continue;
            };
            let labels: BTreeMap<String, String> =
                c.labels.clone().unwrap_or_default().into_iter().collect();
            for n in names {
                let Some((base, side, suffix)) = swap_name(n) else {
                    continue;
                };
                if !in_scope(base, &labels) {
                    continue;
                }
                let pair = pairs
                    .entry((base.to_string(), suffix.to_string()))
                    .or_default();
                match side {
                    "old" => pair.old = Some(id.clone()),
                    _ => pair.new = Some(id.clone()),
                }
            }
        }
        let mut done = Vec::new();
        for ((name, _), pair) in pairs {
            // The write's container: the old one, set aside or (when the
            // swap stopped before) still under the name.
            let old_id = match &pair.old {
                Some(id) => Some(id.clone()),
                None => self.inspect_quietly(&name).await.and_then(|c| c.id),
            };
            // The action the store's intent names: never guessed.
            let Some(action) = old_id.as_deref().and_then(&interrupted) else {
                continue;
            };
            if let Some(r) = self.finish_swap(&name, pair, action, window).await {
                done.push(r);
            }
        }
        Ok(done)
    }

    async fn inspect_quietly(&self, id: &str) -> Option<bollard::models::ContainerInspectResponse> {
        self.client()
            .inspect_container(id, None::<InspectContainerOptions>)
            .await
            .ok()
    }

    async fn finish_swap(
        &self,
        name: &str,
        pair: Pair,
        action: &'static str,
        window: Duration,
    ) -> Option<Resumed> {
        let client = self.client();
        // The write's container: set aside, or (when the swap stopped
        // before that) still under the name.
        let old = match &pair.old {
            Some(id) => self.inspect_quietly(id).await,
            None => self.inspect_quietly(name).await,
        }?;
        let aside = pair.old.is_some();
        // The new container: still under its temporary name, or already
        // under the name (only once the old one is aside).
        let new = match &pair.new {
            Some(id) => self.inspect_quietly(id).await,
            None if aside => self.inspect_quietly(name).await,
            None => None,
        };
        let old_id = old.id.clone().unwrap_or_default();
        // The swap stopped the old container only if it ran: it then
        // finished after the new one was created.
        let was_running = match (&new, old.state.as_ref()) {
            (Some(n), Some(s)) => match (
                s.finished_at.as_deref().and_then(instant),
                n.created.as_deref().and_then(instant),
            ) {
                (Some(finished), Some(created)) => finished >= created,
                _ => false,
            },
            _ => false,
        };
        let named = aside && pair.new.is_none() && new.is_some();
        let progress = Progress {
            new_id: new.as_ref().and_then(|n| n.id.clone()),
            stopped_old: was_running,
            old_aside: aside.then(String::new),
            new_named: named,
        };
        let held = match (&new, named) {
            (Some(n), true) => {
                let (new_id, image) = (
                    n.id.clone().unwrap_or_default(),
                    n.image.clone().unwrap_or_default(),
                );
                self.hold(&new_id, &image, window).await
            }
            _ => Err("the executor stopped before the new container took the name".to_string()),
        };
        if let Ok(watched) = held {
            let new_id = progress.new_id.clone().unwrap_or_default();
            let removed = client.remove_container(&old_id, keep_volumes()).await;
            return Some(Resumed {
                name: name.to_string(),
                action,
                container_id: new_id,
                old_id: old_id.clone(),
                kept: true,
                what: format!(
                    "the executor had stopped during this {action}; the new container held again for {}s and was kept{}",
                    watched.as_secs(),
                    match removed {
                        Ok(()) => String::new(),
                        Err(e) => format!(", but the old one could not be removed: {e}"),
                    }
                ),
            });
        }
        let why = held.err().unwrap_or_default();
        let restored = self.restore(&old_id, name, was_running, &progress).await;
        // An update moved the tag to the new image before the swap: back to
        // the old one. An update to a newer tag of the line moved no tag
        // the old container runs (the new container runs another).
        let old_reference = old.config.as_ref().and_then(|c| c.image.clone());
        let new_reference = new
            .as_ref()
            .and_then(|n| n.config.as_ref())
            .and_then(|c| c.image.clone());
        let reference = old_reference.filter(|r| new_reference.as_ref().is_none_or(|n| n == r));
        let retagged = match (
            action,
            reference.as_deref().and_then(ImageRef::parse),
            &old.image,
        ) {
            ("update", Some(r), Some(image)) => {
                self.tag(image, &r).await.map_err(|e| e.to_string())
            }
            _ => Ok(()),
        };
        let how = match (restored, retagged) {
            (Ok(()), Ok(())) => format!("{name} was put back as it was"),
            (Err(e), _) => format!("putting {name} back failed: {e}"),
            (Ok(()), Err(e)) => {
                format!("{name} was put back, but its tag could not be moved back: {e}")
            }
        };
        Some(Resumed {
            name: name.to_string(),
            action,
            container_id: old_id.clone(),
            old_id,
            kept: false,
            what: format!("the executor had stopped during this {action}; {why}; {how}"),
        })
    }
}

/// An engine timestamp (RFC 3339 with up to nine fraction digits); `None`
/// for the engine's "never" (year 1) and anything unreadable.
fn instant(text: &str) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swap_s_names_are_told_from_others() {
        assert_eq!(
            swap_name("/shop_api_1-drydock-old-0a1b2c3d"),
            Some(("shop_api_1", "old", "0a1b2c3d"))
        );
        assert_eq!(
            swap_name("a-drydock-new-0a1b2c3d"),
            Some(("a", "new", "0a1b2c3d"))
        );
        for other in [
            "shop_api_1",
            "shop-drydock-old-xyz",
            "shop-drydock-old-0a1b2c3",
            "shop-drydock-gone-0a1b2c3d",
            "-drydock-old-0a1b2c3d",
            "drydock-old-0a1b2c3d",
        ] {
            assert_eq!(swap_name(other), None, "{other}");
        }
    }
}
