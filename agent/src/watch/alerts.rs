//! Alerts from a monitoring system (the Alertmanager webhook format) become
//! requests (`source: alert`), and the deduplication both kinds of
//! automatic request share.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use super::Opener;
use crate::config::WatchConfig;
use crate::model::{RequestOptions, RequestSource};
use crate::store::{RequestHead, Store};

/// Why no new automatic request should be opened for a container, if so:
/// an unfinished request already covers it, or an automatic one for it
/// ended within the cooldown. With `host`, only requests on that host
/// count: the same name on another host is another container.
pub fn busy(
    store: &Store,
    name: &str,
    id: &str,
    host: Option<&str>,
    cooldown: Duration,
) -> Option<String> {
    // An alert naming a compose service opens its request without a
    // container; its message names the target (`alert X for NAME...`).
    let named_by_alert = format!(" for {name}");
    let covers = |r: &RequestHead| {
        host.is_none_or(|h| r.host() == Some(h)) && covers_name(r, name, id, &named_by_alert)
    };
    fn covers_name(r: &RequestHead, name: &str, id: &str, named_by_alert: &str) -> bool {
        r.options.container.as_deref() == Some(name)
            || r.target.as_ref().is_some_and(|t| {
                (!id.is_empty() && t.id() == id)
                    || t.name() == name
                    || t.compose_service() == Some(name)
            })
            || (r.source == RequestSource::Alert
                && (r.message.contains(&format!("{named_by_alert}:"))
                    || r.message.ends_with(named_by_alert)))
    }
    match store.unfinished_as::<RequestHead>() {
        Ok(open) => {
            if let Some(r) = open.iter().find(|r| covers(r)) {
                return Some(format!("request {} is still open for {name}", r.id));
            }
        }
        Err(e) => return Some(format!("cannot read the requests ({e})")),
    }
    let now = SystemTime::now();
    let recent = store.heads(200).unwrap_or_default();
    recent
        .iter()
        .filter(|r| r.source != RequestSource::Ask && covers(r))
        .find(|r| {
            humantime::parse_rfc3339_weak(&r.updated_at)
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age < cooldown)
        })
        .map(|r| {
            format!(
                "automatic request {} for {name} ended less than {} ago (watch.cooldown)",
                r.id,
                humantime::format_duration(cooldown)
            )
        })
}

/// The Alertmanager webhook body (version 4); unknown fields are ignored,
/// as Alertmanager adds them over time.
#[derive(Debug, Deserialize)]
pub struct AlertBatch {
    pub alerts: Vec<Alert>,
}

#[derive(Debug, Deserialize)]
pub struct Alert {
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// What became of one alert.
#[derive(Debug, serde::Serialize)]
pub struct AlertOutcome {
    pub alert: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    pub detail: String,
}

fn clean(s: &str, max: usize) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(max)
        .collect::<String>()
}

/// Open a request for each firing alert whose labels name a target.
pub async fn open_from_alerts(
    opener: &dyn Opener,
    store: &Store,
    config: &WatchConfig,
    batch: AlertBatch,
) -> Vec<AlertOutcome> {
    let mut out = Vec::new();
    for alert in batch.alerts.into_iter().take(100) {
        let name = clean(
            alert
                .labels
                .get("alertname")
                .map_or("alert", String::as_str),
            128,
        );
        if alert.status != "firing" {
            out.push(AlertOutcome {
                alert: name,
                request_id: None,
                detail: format!(
                    "status `{}`: only firing alerts open requests",
                    clean(&alert.status, 32)
                ),
            });
            continue;
        }
        let target = config.alert_target_labels.iter().find_map(|l| {
            alert
                .labels
                .get(l)
                .filter(|v| !v.is_empty())
                .map(|v| (l.clone(), v.clone()))
        });
        let Some((label, value)) = target else {
            out.push(AlertOutcome {
                alert: name,
                request_id: None,
                detail: format!(
                    "no target: none of the labels {} is set (watch.alert_target_labels)",
                    config.alert_target_labels.join(", ")
                ),
            });
            continue;
        };
        let value = clean(value.trim_start_matches('/'), 128);
        let is_container_ref = !value.is_empty()
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !is_container_ref {
            out.push(AlertOutcome {
                alert: name,
                request_id: None,
                detail: format!("label {label} is not a container or service name"),
            });
            continue;
        }
        if let Some(why) = busy(store, &value, "", None, config.cooldown) {
            out.push(AlertOutcome {
                alert: name,
                request_id: None,
                detail: why,
            });
            continue;
        }
        let summary = alert
            .annotations
            .get("summary")
            .or_else(|| alert.annotations.get("description"))
            .map(|s| format!(": {}", clean(s, 300)))
            .unwrap_or_default();
        let message = crate::text::redact(&format!("alert {name} for {value}{summary}"));
        // A container label names the container; a service label is left to
        // discovery, which maps compose services to their containers.
        let container = matches!(label.as_str(), "container" | "container_name" | "name")
            .then(|| value.clone());
        let options = RequestOptions {
            container,
            diagnose_only: false,
            utc_offset_minutes: None,
            host: None,
            update: false,
            build: None,
        };
        match opener.open(message, options, RequestSource::Alert).await {
            Ok(req) => out.push(AlertOutcome {
                alert: name,
                request_id: Some(req.id),
                detail: format!("opened for {value}"),
            }),
            Err(e) => out.push(AlertOutcome {
                alert: name,
                request_id: None,
                detail: format!("cannot open a request: {e}"),
            }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{now_rfc3339, Request, RequestOptions};

    #[test]
    fn a_request_on_one_host_does_not_hold_back_the_same_name_on_another() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("agent.db")).unwrap();
        let open = Request::new(
            "req-a".into(),
            "watch: web turned unhealthy on host host-a".into(),
            RequestOptions {
                container: Some("web".into()),
                host: Some("host-a".into()),
                ..Default::default()
            },
            RequestSource::Watch,
            now_rfc3339(),
        );
        let created = crate::model::EventPayload::Created(crate::model::Created {
            message: open.message.clone(),
            options: open.options.clone(),
            source: open.source,
        });
        store.save(&open, created).unwrap();
        let cooldown = Duration::from_secs(300);
        assert!(busy(&store, "web", "", Some("host-a"), cooldown).is_some());
        assert!(
            busy(&store, "web", "", None, cooldown).is_some(),
            "no host: any"
        );
        assert_eq!(busy(&store, "web", "", Some("host-b"), cooldown), None);
    }
}
