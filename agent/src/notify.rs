//! Outgoing webhooks on request events: `opened`, `needs_approval`,
//! `executed`, `recovered` and `failed`; and `schedule_changed` when a
//! schedule's answer changes (its runs notify nothing else).
//!
//! Each delivery is a row in the agent's store before it is sent (so a
//! restart does not lose it), retried with exponential backoff, and its
//! attempts are the delivery log. The JSON body is signed with HMAC-SHA256
//! (`X-Drydock-Signature: sha256=<hex>`) when the webhook has a secret; the
//! `slack` format sends `{"text": ...}`. Every text is passed through the
//! agent's redaction, and "needs approval" carries the exact command to run.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest as _, Sha256};

use crate::config::{WebhookConfig, WebhookFormat};
use crate::model::{
    now_rfc3339, unix_now, DeliveryStatus, Event, EventPayload, NotifyEvent, Request,
    RequestSource, Schedule, Status, UpdateFound, Verdict,
};
use crate::store::{deliveries, Store};

/// Attempts before a delivery is given up (about 17 minutes of backoff).
pub const MAX_ATTEMPTS: u32 = 10;
const TIMEOUT: Duration = Duration::from_secs(5);

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// The notification body (the `json` format).
#[derive(Debug, Clone, Serialize)]
pub struct Notification {
    pub event: NotifyEvent,
    /// The request it is about (none for `update_available`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub request_id: String,
    pub source: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    /// The host it is on, when the agent serves several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diagnosis: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    /// For `needs_approval`: the exact command that approves.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approve_command: Option<String>,
    /// For `needs_approval` where the executor asks for more than one
    /// approver: the signatures still missing, over all its approvals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals_missing: Option<u32>,
    /// For `executed`: who authorised it (`grant grt-…` or `approval apr-…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorised_by: Option<String>,
    /// The change the failure is blamed on, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<String>,
    /// For `schedule_changed`: the schedule, and its answer before and now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub was: Option<Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
    /// For `update_available`: the container, its tag, what it runs and
    /// the registry's digest; `approve_command` then says how to update.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub update: Option<UpdateFound>,
    pub at: String,
}

impl Notification {
    fn text(&self) -> String {
        let on = self
            .host
            .as_ref()
            .map(|h| format!(" on host {h}"))
            .unwrap_or_default();
        let id = if self.request_id.is_empty() {
            String::new()
        } else {
            format!(" [{}]", self.request_id)
        };
        let mut t = format!(
            "drydock {}: {}{on}{id} {}",
            self.event.as_str().replace('_', " "),
            self.container.as_deref().unwrap_or("?"),
            self.message
        );
        if let (Some(was), Some(now)) = (self.was, self.verdict) {
            t.push_str(&format!(" — was {}, now {}", was.as_str(), now.as_str()));
        }
        for extra in [
            &self.diagnosis,
            &self.change,
            &self.outcome,
            &self.authorised_by,
        ]
        .into_iter()
        .flatten()
        {
            t.push_str(" — ");
            t.push_str(extra);
        }
        if let Some(cmd) = &self.approve_command {
            t.push_str(&format!(" — approve with: {cmd}"));
        }
        t
    }
}

/// Which notification, if any, an engine event is. Every kind is named, so
/// a new kind is a decision about notifying, not a silent default.
pub fn notification_for(event: &Event, req: &Request) -> Option<Notification> {
    if req.source == RequestSource::Schedule {
        // A schedule's runs are notified only when the answer changes
        // (`Notifier::schedule_changed`), not at every step of every run.
        return None;
    }
    let (name, approve, authorised) = match &event.payload {
        EventPayload::Created(_) => (NotifyEvent::Opened, None, None),
        EventPayload::Status(s) if s.status == Status::WaitingApproval => {
            let pending: Vec<&str> = req.pending_approvals().map(|a| a.id.as_str()).collect();
            if pending.is_empty() {
                // Authorised by a grant: no person is needed.
                return None;
            }
            let cmd = pending
                .iter()
                .map(|id| format!("drydock approve {id}"))
                .collect::<Vec<_>>()
                .join(" && ");
            (NotifyEvent::NeedsApproval, Some(cmd), None)
        }
        EventPayload::Execution(e) if e.execution.ok => {
            let by = match &e.execution.grant_id {
                Some(g) => format!("grant {g}"),
                None => format!("approval {}", e.execution.approval_id),
            };
            (NotifyEvent::Executed, None, Some(by))
        }
        EventPayload::Final(f) => match f.status {
            Status::Completed if !req.execution.is_empty() => (NotifyEvent::Recovered, None, None),
            Status::Failed | Status::Rejected => (NotifyEvent::Failed, None, None),
            _ => return None,
        },
        EventPayload::Status(_)
        | EventPayload::Execution(_)
        | EventPayload::Target(_)
        | EventPayload::Candidates(_)
        | EventPayload::Evidence(_)
        | EventPayload::Diagnosis(_)
        | EventPayload::Plan(_)
        | EventPayload::ApprovalRequested(_)
        | EventPayload::ApprovalDecided(_)
        | EventPayload::ApprovalSigned(_)
        | EventPayload::ApprovalExpired(_)
        | EventPayload::Superseded(_)
        | EventPayload::ApprovedByGrant(_)
        | EventPayload::DependencyReady(_)
        | EventPayload::Verification(_)
        | EventPayload::Iteration(_)
        | EventPayload::Interrupted(_)
        | EventPayload::Error(_)
        | EventPayload::Answer(_)
        | EventPayload::LlmStarted(_)
        | EventPayload::LlmTool(_)
        | EventPayload::LlmRetry(_)
        | EventPayload::LlmUsage(_)
        | EventPayload::LlmFallback(_)
        | EventPayload::Followup(_)
        | EventPayload::ExecutorWaiting(_) => return None,
    };
    let mut n = about(name, req);
    if approve.is_some() && req.pending_approvals().any(|a| a.required > 1) {
        n.approvals_missing = Some(req.pending_approvals().map(|a| a.missing()).sum());
    }
    n.approve_command = approve;
    n.authorised_by = authorised;
    Some(n)
}

/// A notification named `event` about a request, with the words every kind
/// carries; each kind then adds its own.
fn about(event: NotifyEvent, req: &Request) -> Notification {
    let redact = crate::text::redact;
    Notification {
        event,
        request_id: req.id.clone(),
        source: req.source.as_str().into(),
        status: Some(req.status),
        message: redact(&req.message),
        container: req
            .target
            .as_ref()
            .map(|t| t.name().to_string())
            .or_else(|| req.options.container.clone()),
        host: req.host().map(str::to_string),
        diagnosis: req.diagnosis.as_ref().map(|d| redact(&d.summary)),
        outcome: req.outcome.as_ref().map(|o| redact(o)),
        approve_command: None,
        approvals_missing: None,
        authorised_by: None,
        change: req
            .blamed_change()
            .map(|c| redact(&format!("what changed: {}", c.said))),
        schedule_id: None,
        was: None,
        verdict: None,
        update: None,
        at: now_rfc3339(),
    }
}

fn body_for(hook: &WebhookConfig, n: &Notification) -> String {
    match hook.format {
        WebhookFormat::Json => serde_json::to_string(n).unwrap_or_default(),
        WebhookFormat::Slack => serde_json::json!({ "text": n.text() }).to_string(),
    }
}

/// Whether `hook` wants `event`: every event when it names none.
fn wants(hook: &WebhookConfig, event: NotifyEvent) -> bool {
    hook.events.is_empty() || hook.events.contains(&event)
}

pub struct Notifier {
    store: Arc<Store>,
    hooks: Vec<(WebhookConfig, Option<Vec<u8>>)>,
    client: reqwest::Client,
    wake: tokio::sync::Notify,
}

impl Notifier {
    /// Start queueing (from the engine's `events`) and delivering; nothing
    /// runs without webhooks (and `None` is returned).
    pub fn spawn(
        store: Arc<Store>,
        mut events: tokio::sync::broadcast::Receiver<Event>,
        hooks: Vec<WebhookConfig>,
    ) -> anyhow::Result<Option<Arc<Notifier>>> {
        if hooks.is_empty() {
            return Ok(None);
        }
        let mut with_secrets = Vec::new();
        for h in hooks {
            let secret = match &h.secret_file {
                Some(p) => Some(
                    std::fs::read(p)
                        .map_err(|e| {
                            anyhow::anyhow!("webhook {}: secret_file {}: {e}", h.name, p.display())
                        })?
                        .trim_ascii()
                        .to_vec(),
                ),
                None => None,
            };
            with_secrets.push((h, secret));
        }
        drydock_daemon::tls::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let notifier = Arc::new(Notifier {
            store,
            hooks: with_secrets,
            client,
            wake: tokio::sync::Notify::new(),
        });
        let queue = notifier.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(event) => queue.enqueue(&event),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(
                            missed = n,
                            "notifications fell behind; some events were not notified"
                        );
                    }
                    Err(_) => return,
                }
            }
        });
        let delivering = notifier.clone();
        tokio::spawn(async move { delivering.deliver_loop().await });
        Ok(Some(notifier))
    }

    fn enqueue(&self, event: &Event) {
        let Ok(Some(req)) = self.store.get(&event.request_id) else {
            return;
        };
        if let Some(n) = notification_for(event, &req) {
            self.queue(&n);
        }
    }

    /// A schedule's answer changed: `req` is the run that found `now`.
    pub fn schedule_changed(&self, schedule: &Schedule, req: &Request, was: Verdict, now: Verdict) {
        let mut n = about(NotifyEvent::ScheduleChanged, req);
        n.schedule_id = Some(schedule.id.clone());
        n.was = Some(was);
        n.verdict = Some(now);
        self.queue(&n);
    }

    /// A container's tag names a newer image than it runs (a digest not
    /// notified before).
    pub fn update_available(&self, u: &UpdateFound) {
        let redact = crate::text::redact;
        let version = u
            .version
            .as_ref()
            .map(|v| format!(" (version {v})"))
            .unwrap_or_default();
        let n = Notification {
            event: NotifyEvent::UpdateAvailable,
            request_id: String::new(),
            source: "updates".into(),
            status: None,
            message: redact(&format!(
                "{} names {} in its registry; {} runs {}{version}",
                u.reference, u.registry_digest, u.container, u.image_id
            )),
            container: Some(u.container.clone()),
            host: (u.host != "local").then(|| u.host.clone()),
            diagnosis: None,
            outcome: None,
            approve_command: Some(format!("drydock update {}", u.command_name())),
            approvals_missing: None,
            authorised_by: None,
            change: None,
            schedule_id: None,
            was: None,
            verdict: None,
            update: Some(u.clone()),
            at: now_rfc3339(),
        };
        self.queue(&n);
    }

    fn queue(&self, n: &Notification) {
        for (hook, _) in self.hooks.iter().filter(|(h, _)| wants(h, n.event)) {
            let queued = deliveries::queue(
                &self.store,
                &hook.name,
                n.event,
                &n.request_id,
                &body_for(hook, n),
                unix_now(),
                &now_rfc3339(),
            );
            if let Err(e) = queued {
                tracing::error!(error = %e, webhook = %hook.name, "cannot queue a notification");
            }
        }
        self.wake.notify_one();
    }

    async fn deliver_loop(&self) {
        loop {
            let due = match deliveries::due(&self.store, unix_now()) {
                Ok(d) => d,
                Err(e) => {
                    tracing::error!(error = %e, "cannot read the delivery queue");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    continue;
                }
            };
            for deliveries::Due {
                id,
                webhook,
                event,
                body,
                attempts,
            } in due
            {
                let Some((hook, secret)) = self.hooks.iter().find(|(h, _)| h.name == webhook)
                else {
                    self.settle(
                        id,
                        DeliveryStatus::Failed,
                        attempts,
                        "webhook no longer configured",
                        None,
                    );
                    continue;
                };
                let mut request = self
                    .client
                    .post(&hook.url)
                    .header("content-type", "application/json")
                    .header("x-drydock-event", event.as_str())
                    .header("x-drydock-delivery", id.to_string());
                if let Some(secret) = secret {
                    let mac = hmac_sha256(secret, body.as_bytes());
                    request = request.header(
                        "x-drydock-signature",
                        format!("sha256={}", hex::encode(mac)),
                    );
                }
                let attempts = attempts + 1;
                match request.body(body.clone()).send().await {
                    Ok(r) if r.status().is_success() => self.settle(
                        id,
                        DeliveryStatus::Delivered,
                        attempts,
                        "",
                        Some(now_rfc3339()),
                    ),
                    Ok(r) => self.retry(id, attempts, &format!("HTTP {}", r.status().as_u16())),
                    // Without the URL: a Slack-style webhook URL is itself
                    // the secret.
                    Err(e) => self.retry(
                        id,
                        attempts,
                        &crate::text::redact(&e.without_url().to_string()),
                    ),
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(1), self.wake.notified()).await;
        }
    }

    fn retry(&self, id: i64, attempts: u32, error: &str) {
        if attempts >= MAX_ATTEMPTS {
            self.settle(id, DeliveryStatus::Failed, attempts, error, None);
            return;
        }
        let backoff = 1i64 << attempts.min(10);
        let result = deliveries::retry_at(&self.store, id, attempts, unix_now() + backoff, error);
        if let Err(e) = result {
            tracing::error!(error = %e, "cannot record a delivery attempt");
        }
    }

    fn settle(
        &self,
        id: i64,
        status: DeliveryStatus,
        attempts: u32,
        error: &str,
        at: Option<String>,
    ) {
        let result = deliveries::settle(&self.store, id, status, attempts, error, at.as_deref());
        if let Err(e) = result {
            tracing::error!(error = %e, "cannot record a delivery");
        }
        if status == DeliveryStatus::Failed {
            tracing::warn!(
                delivery = id,
                error,
                "a notification could not be delivered"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        Cause, Change, Diagnosis, Evidence, EvidencePayload, FaultClass, Finished, RequestOptions,
        RequestSource,
    };

    #[test]
    fn a_failure_blamed_on_a_change_says_what_changed() {
        let mut req = Request::new(
            "req-1".into(),
            "api is down".into(),
            RequestOptions::default(),
            RequestSource::Watch,
            now_rfc3339(),
        );
        let change = Change {
            said:
                "began 40 s after shop/api was recreated from image sha256:4f1e… (password=hunter2)"
                    .into(),
            ..Default::default()
        };
        req.evidence.push(Evidence {
            id: "ev-change".into(),
            source: "test".into(),
            timestamp: now_rfc3339(),
            payload: EvidencePayload::Change(change.clone()),
        });
        req.diagnosis = Some(Diagnosis {
            summary: "api crashed".into(),
            confidence: 0.9,
            causes: vec![Cause {
                class: FaultClass::ConfigError,
                reason: "r".into(),
                confidence: 0.9,
                evidence_ids: vec!["ev-1".into(), "ev-change".into()],
            }],
            engine: "rules".into(),
            ..Default::default()
        });
        let event = Event {
            seq: 9,
            request_id: "req-1".into(),
            ts: now_rfc3339(),
            payload: EventPayload::Final(Finished {
                status: Status::Failed,
                outcome: "not recovered".into(),
            }),
        };
        let n = notification_for(&event, &req).expect("a failure is notified");
        let said = n.change.clone().unwrap();
        assert!(
            said.starts_with("what changed: began 40 s after shop/api"),
            "{said}"
        );
        assert!(!said.contains("hunter2"), "redacted: {said}");
        assert!(n.text().contains("what changed"));
        // Evidence the cause does not cite is not blamed.
        req.diagnosis.as_mut().unwrap().causes[0].evidence_ids = vec!["ev-1".into()];
        assert!(notification_for(&event, &req).unwrap().change.is_none());
    }

    #[test]
    fn a_notification_names_the_host_when_there_are_several() {
        let mut req = Request::new(
            "req-2".into(),
            "api is down".into(),
            RequestOptions {
                container: Some("api".into()),
                host: Some("host-b".into()),
                ..Default::default()
            },
            RequestSource::Watch,
            now_rfc3339(),
        );
        let event = Event {
            seq: 1,
            request_id: "req-2".into(),
            ts: now_rfc3339(),
            payload: EventPayload::Created(crate::model::Created {
                message: "api is down".into(),
                source: RequestSource::Watch,
                options: req.options.clone(),
            }),
        };
        let n = notification_for(&event, &req).expect("opened is notified");
        assert_eq!(n.host.as_deref(), Some("host-b"));
        assert!(n.text().contains("api on host host-b"), "{}", n.text());
        let body: serde_json::Value = serde_json::to_value(&n).unwrap();
        assert_eq!(body["host"], "host-b");
        req.options.host = None;
        let n = notification_for(&event, &req).unwrap();
        assert!(n.host.is_none() && !n.text().contains("on host"));
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex::encode(mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex::encode(mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }
}
