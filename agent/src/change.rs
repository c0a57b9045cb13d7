//! What changed before it broke: a container's definition as the agent
//! remembers it (`fingerprint`), what differs between two incarnations of
//! one service (`compare`), and whether that difference can explain a
//! failure (`blamed`). Pure functions; the engine reads and remembers.

use std::collections::BTreeSet;

use crate::model::span;
use crate::model::HealthStatus;
use crate::model::{
    Change, ContainerView, FaultClass, Fingerprint, Incarnation, COMPOSE_CONFIG_HASH_LABEL,
    COMPOSE_PROJECT_LABEL, COMPOSE_SERVICE_LABEL, OCI_REVISION, OCI_SOURCE, OCI_VERSION,
};

/// A failure this long after a change is not blamed on it.
pub const MAX_BLAME_SECS: i64 = 24 * 3600;
/// A failure with a cause outside the container (a dependency, the disk, a
/// port, memory) is blamed on a change only if it came this soon after it.
pub const OUTSIDE_CAUSE_BLAME_SECS: i64 = 15 * 60;

/// How the previous incarnation fared, from the agent's memory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Remembered {
    pub fingerprint: Fingerprint,
    /// When it was first seen failing (unix seconds), if ever.
    pub failed_at: Option<i64>,
}

/// What the agent keeps of a container's definition.
pub fn fingerprint(c: &ContainerView) -> Fingerprint {
    let label = |k: &str| c.labels.get(k).filter(|v| !v.is_empty()).cloned();
    let mut mounts: Vec<String> = c
        .mounts
        .iter()
        .map(|m| {
            format!(
                "{} {}:{}{}",
                m.kind,
                m.source,
                m.destination,
                if m.rw { "" } else { ":ro" }
            )
        })
        .collect();
    mounts.sort();
    let mut ports = c.requested_host_ports.clone();
    ports.sort_unstable();
    Fingerprint {
        container_id: c.id.clone(),
        name: c.name.trim_start_matches('/').to_string(),
        image: c.image.clone(),
        image_id: c.image_id.clone(),
        project: label(COMPOSE_PROJECT_LABEL),
        service: label(COMPOSE_SERVICE_LABEL),
        config_hash: label(COMPOSE_CONFIG_HASH_LABEL),
        // `affinity:container==<id>` and its kind are scheduling hints
        // docker-compose 1.x adds on a recreate, not the program's
        // environment: a name with `:` is no variable.
        env: c
            .env_hashes
            .iter()
            .filter(|(name, _)| !name.contains(':'))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        command: c.command.clone(),
        entrypoint: c.entrypoint.clone(),
        mounts,
        ports,
        labels: c.labels.clone(),
        created: c.created.clone(),
        started_at: c.started_at.clone(),
        revision: label(OCI_REVISION),
        source: label(OCI_SOURCE),
        version: label(OCI_VERSION),
    }
}

/// Since when (unix seconds) the container is failing, if it is: it exited
/// with an error, keeps restarting, was OOM-killed, or runs unhealthy.
pub fn failing_since(c: &ContainerView, now: i64) -> Option<i64> {
    let exited_badly = !c.running && (c.exit_code != 0 || c.oom_killed);
    if exited_badly || c.restarting {
        return Some(unix_of(&c.finished_at).unwrap_or(now));
    }
    (c.running && c.health_status == HealthStatus::Unhealthy).then_some(now)
}

/// The service two containers are incarnations of: the compose project and
/// service when both have them, else the name.
pub fn service_of(f: &Fingerprint) -> String {
    match (&f.project, &f.service) {
        (Some(p), Some(s)) => format!("{p}/{s}"),
        _ => f.name.clone(),
    }
}

/// Unix seconds of an engine time (`2026-12-02T01:02:03.123456789Z`).
pub fn unix_of(rfc3339: &str) -> Option<i64> {
    let t = humantime::parse_rfc3339_weak(rfc3339.trim()).ok()?;
    let secs = t.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok().filter(|s| *s > 0)
}

fn incarnation(f: &Fingerprint) -> Incarnation {
    Incarnation {
        container_id: f.container_id.clone(),
        name: f.name.clone(),
        image: f.image.clone(),
        image_id: f.image_id.clone(),
        revision: f.revision.clone(),
        created: f.created.clone(),
    }
}

/// `sha256:4f1e…`: an image id short enough to read.
pub fn short_image(id: &str) -> String {
    let hex = id.strip_prefix("sha256:").unwrap_or(id);
    format!("sha256:{}…", hex.chars().take(12).collect::<String>())
}

/// What differs between `previous` and `current`, two incarnations of one
/// service, with when; `None` when nothing of their definitions does (a
/// container re-created as it was is no change). `failed_at` is when the
/// current one began to fail.
pub fn compare(
    previous: &Remembered,
    current: &Fingerprint,
    failed_at: Option<i64>,
    previous_image_present: Option<bool>,
) -> Option<Change> {
    let old = &previous.fingerprint;
    let names = |f: &Fingerprint| f.env.keys().cloned().collect::<BTreeSet<_>>();
    let (old_names, new_names) = (names(old), names(current));
    let env_added: Vec<String> = new_names.difference(&old_names).cloned().collect();
    let env_removed: Vec<String> = old_names.difference(&new_names).cloned().collect();
    let env_changed: Vec<String> = old_names
        .intersection(&new_names)
        .filter(|n| old.env.get(*n) != current.env.get(*n))
        .cloned()
        .collect();
    let diff = |a: &[String], b: &[String]| -> Vec<String> {
        b.iter().filter(|x| !a.contains(x)).cloned().collect()
    };
    let port_diff = |a: &[u32], b: &[u32]| -> Vec<u32> {
        b.iter().filter(|x| !a.contains(x)).copied().collect()
    };
    let image_changed = old.image_id != current.image_id && !current.image_id.is_empty();
    let mut change = Change {
        service: service_of(current),
        previous: incarnation(old),
        current: incarnation(current),
        image_changed,
        tag_moved: image_changed && old.image == current.image,
        config_hash_changed: old.config_hash.is_some() && old.config_hash != current.config_hash,
        env_added,
        env_removed,
        env_changed,
        command_changed: old.command != current.command,
        entrypoint_changed: old.entrypoint != current.entrypoint,
        mounts_added: diff(&old.mounts, &current.mounts),
        mounts_removed: diff(&current.mounts, &old.mounts),
        ports_added: port_diff(&old.ports, &current.ports),
        ports_removed: port_diff(&current.ports, &old.ports),
        previous_ran_secs: None,
        failed_after_secs: None,
        previous_image_present,
        said: String::new(),
        made_by: None,
    };
    let material = change.image_changed
        || change.config_hash_changed
        || !change.env_added.is_empty()
        || !change.env_removed.is_empty()
        || !change.env_changed.is_empty()
        || change.command_changed
        || change.entrypoint_changed
        || !change.mounts_added.is_empty()
        || !change.mounts_removed.is_empty()
        || !change.ports_added.is_empty()
        || !change.ports_removed.is_empty();
    if !material {
        return None;
    }
    let changed_at = unix_of(&current.created);
    // The previous one ran from its last start until it was replaced,
    // unless it failed before that.
    let replaced_ok = match (previous.failed_at, changed_at) {
        (Some(failed), Some(at)) => failed > at,
        (Some(_), None) => false,
        (None, _) => true,
    };
    if replaced_ok {
        if let (Some(started), Some(at)) = (unix_of(&old.started_at), changed_at) {
            change.previous_ran_secs = Some((at - started).max(0));
        }
    }
    if let (Some(failed), Some(at)) = (failed_at, changed_at) {
        change.failed_after_secs = Some((failed - at).max(0));
    }
    change.said = say(&change);
    Some(change)
}

/// The change in words: "began 40 s after shop/api was recreated from image
/// sha256:4f1e… (tag shop/api:latest moved; built from commit 9c2d1e0); the
/// previous image sha256:7ab0… ran 6 days without a failure".
fn say(c: &Change) -> String {
    let began = match c.failed_after_secs {
        Some(s) => format!("began {} after", span(s)),
        None => "follows".to_string(),
    };
    let mut what = Vec::new();
    if c.image_changed {
        let mut about = Vec::new();
        if c.tag_moved {
            about.push(format!("tag {} moved", c.current.image));
        }
        if let Some(rev) = &c.current.revision {
            about.push(format!("built from commit {}", short_rev(rev)));
        }
        let about = if about.is_empty() {
            String::new()
        } else {
            format!(" ({})", about.join("; "))
        };
        what.push(format!(
            "from image {}{about}",
            short_image(&c.current.image_id)
        ));
    }
    let env: Vec<String> = c
        .env_changed
        .iter()
        .map(|n| format!("{n} changed"))
        .chain(c.env_added.iter().map(|n| format!("{n} added")))
        .chain(c.env_removed.iter().map(|n| format!("{n} removed")))
        .collect();
    if !env.is_empty() {
        what.push(format!("with environment {}", env.join(", ")));
    }
    if c.command_changed || c.entrypoint_changed {
        what.push("with another command".into());
    }
    if !c.mounts_added.is_empty() || !c.mounts_removed.is_empty() {
        what.push("with other mounts".into());
    }
    if !c.ports_added.is_empty() || !c.ports_removed.is_empty() {
        what.push("with other ports".into());
    }
    if what.is_empty() && c.config_hash_changed {
        what.push("from a changed compose definition".into());
    }
    let mut said = format!("{began} {} was recreated {}", c.service, what.join(" and "));
    if let Some(ran) = c.previous_ran_secs {
        let previous = if c.image_changed {
            format!("the previous image {}", short_image(&c.previous.image_id))
        } else {
            "the previous container".to_string()
        };
        said.push_str(&format!("; {previous} ran {} without a failure", span(ran)));
    }
    said
}

/// The first 7 characters of a commit id, whole otherwise.
fn short_rev(rev: &str) -> String {
    if rev.len() >= 12 && rev.chars().all(|c| c.is_ascii_hexdigit()) {
        rev.chars().take(7).collect()
    } else {
        rev.to_string()
    }
}

/// Whether `change` can explain a failure of class `primary`: something
/// failed, the previous incarnation ran without failing until it was
/// replaced, and the failure came soon enough after the change (sooner
/// still when the cause lies outside the container).
pub fn blamed(change: &Change, primary: FaultClass) -> bool {
    if matches!(
        primary,
        FaultClass::Healthy | FaultClass::Stopped | FaultClass::Unknown
    ) {
        return false;
    }
    if change.previous_ran_secs.is_none() {
        // The previous one failed too (or was never seen running).
        return false;
    }
    let after = change.failed_after_secs.unwrap_or(0);
    if after > MAX_BLAME_SECS {
        return false;
    }
    let outside = matches!(
        primary,
        FaultClass::DependencyUnavailable
            | FaultClass::DiskFull
            | FaultClass::PortConflict
            | FaultClass::OomKilled
    );
    !(outside && after > OUTSIDE_CAUSE_BLAME_SECS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "sha256:7ab0000000000000000000000000000000000000000000000000000000000000";
    const V2: &str = "sha256:4f1e000000000000000000000000000000000000000000000000000000000000";

    fn api(id: &str, image_id: &str, created: &str) -> Fingerprint {
        Fingerprint {
            container_id: id.into(),
            name: "shop-api-1".into(),
            image: "shop/api:latest".into(),
            image_id: image_id.into(),
            project: Some("shop".into()),
            service: Some("api".into()),
            config_hash: Some("h1".into()),
            env: [("DATABASE_URL".to_string(), "aa".to_string())].into(),
            created: created.into(),
            started_at: created.into(),
            ..Default::default()
        }
    }

    fn previous() -> Remembered {
        Remembered {
            fingerprint: api("old", V1, "2026-11-26T10:00:00Z"),
            failed_at: None,
        }
    }

    /// 2026-12-02T10:00:00Z.
    const RECREATED: i64 = 1_796_205_600;

    #[test]
    fn an_image_that_moved_under_its_tag_is_named_with_its_commit() {
        let mut now = api("new", V2, "2026-12-02T10:00:00Z");
        now.revision = Some("9c2d1e0aa11bb22cc33dd44ee55ff66778899aab".into());
        let c = compare(&previous(), &now, Some(RECREATED + 40), Some(true)).unwrap();
        assert!(c.image_changed && c.tag_moved);
        assert_eq!(c.failed_after_secs, Some(40));
        assert_eq!(c.previous_ran_secs, Some(6 * 86_400));
        assert_eq!(
            c.said,
            "began 40 s after shop/api was recreated from image sha256:4f1e00000000… (tag shop/api:latest moved; built from commit 9c2d1e0); the previous image sha256:7ab000000000… ran 6 days without a failure"
        );
        assert!(blamed(&c, FaultClass::ConfigError));
        assert!(c.image_rollback_possible());
    }

    #[test]
    fn an_environment_change_is_named_by_variable_never_by_value() {
        let mut now = api("new", V1, "2026-12-02T10:00:00Z");
        now.env.insert("DATABASE_URL".into(), "bb".into());
        now.env.insert("FEATURE_X".into(), "cc".into());
        let c = compare(&previous(), &now, Some(RECREATED + 5), None).unwrap();
        assert_eq!(c.env_changed, ["DATABASE_URL"]);
        assert_eq!(c.env_added, ["FEATURE_X"]);
        assert!(!c.image_changed && !c.image_rollback_possible());
        assert!(c
            .said
            .contains("with environment DATABASE_URL changed, FEATURE_X added"));
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("bb") && !json.contains("cc"), "{json}");
    }

    #[test]
    fn a_container_recreated_as_it_was_is_no_change() {
        let now = api("new", V1, "2026-12-02T10:00:00Z");
        assert!(compare(&previous(), &now, Some(RECREATED + 5), None).is_none());
        // docker-compose 1.x's scheduling hint on a recreate is not a
        // variable of the program.
        let view = ContainerView {
            env_hashes: [
                ("DATABASE_URL".to_string(), "aa".to_string()),
                ("affinity:container".to_string(), "zz".to_string()),
            ]
            .into(),
            ..Default::default()
        };
        assert_eq!(
            fingerprint(&view).env.keys().collect::<Vec<_>>(),
            ["DATABASE_URL"]
        );
    }

    #[test]
    fn a_change_that_cannot_explain_the_failure_is_not_blamed() {
        let now = api("new", V2, "2026-12-02T10:00:00Z");
        let soon = compare(&previous(), &now, Some(RECREATED + 60), Some(true)).unwrap();
        let late = compare(&previous(), &now, Some(RECREATED + 3 * 3600), Some(true)).unwrap();
        // Nothing failed.
        assert!(!blamed(&soon, FaultClass::Healthy));
        assert!(!blamed(&soon, FaultClass::Stopped));
        // An outside cause hours after the change.
        assert!(blamed(&soon, FaultClass::DependencyUnavailable));
        assert!(!blamed(&late, FaultClass::DependencyUnavailable));
        assert!(blamed(&late, FaultClass::Crash));
        // A day later, nothing is blamed on it.
        let days = compare(&previous(), &now, Some(RECREATED + 2 * 86_400), Some(true)).unwrap();
        assert!(!blamed(&days, FaultClass::Crash));
        // The previous one was failing before it was replaced.
        let failing = Remembered {
            failed_at: Some(RECREATED - 600),
            ..previous()
        };
        let c = compare(&failing, &now, Some(RECREATED + 60), Some(true)).unwrap();
        assert!(!blamed(&c, FaultClass::Crash));
    }

    #[test]
    fn times_of_the_engine_are_read_with_their_fraction() {
        assert_eq!(unix_of("2026-12-02T10:00:00.123456789Z"), Some(RECREATED));
        assert_eq!(unix_of("0001-01-01T00:00:00Z"), None);
        assert_eq!(unix_of(""), None);
    }
}
