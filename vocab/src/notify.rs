//! The words of notifications: what a webhook is told about (the
//! `x-drydock-event` header and the body's `event`) and what became of a
//! delivery.

use serde::{Deserialize, Serialize};

/// What a webhook may be told about, as `notify.webhooks[].events` names it.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NotifyEvent {
    /// A request was opened (by a person, the watcher, an alert).
    Opened,
    /// A write waits for a person's signature.
    NeedsApproval,
    /// A write was sent to the executor.
    Executed,
    /// A repair was verified.
    Recovered,
    /// A request failed or was rejected.
    Failed,
    /// A schedule's answer changed (healthy ↔ broken).
    ScheduleChanged,
    /// A container's tag names a newer image in its registry.
    UpdateAvailable,
}

impl NotifyEvent {
    pub const ALL: [NotifyEvent; 7] = [
        NotifyEvent::Opened,
        NotifyEvent::NeedsApproval,
        NotifyEvent::Executed,
        NotifyEvent::Recovered,
        NotifyEvent::Failed,
        NotifyEvent::ScheduleChanged,
        NotifyEvent::UpdateAvailable,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            NotifyEvent::Opened => "opened",
            NotifyEvent::NeedsApproval => "needs_approval",
            NotifyEvent::Executed => "executed",
            NotifyEvent::Recovered => "recovered",
            NotifyEvent::Failed => "failed",
            NotifyEvent::ScheduleChanged => "schedule_changed",
            NotifyEvent::UpdateAvailable => "update_available",
        }
    }

    pub fn parse(word: &str) -> Option<NotifyEvent> {
        NotifyEvent::ALL.into_iter().find(|e| e.as_str() == word)
    }
}

impl std::fmt::Display for NotifyEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What became of one webhook delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Queued, or waiting to be retried.
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Given up on (out of attempts, or the webhook is no longer
    /// configured): a dead letter.
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 3] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }

    pub fn parse(word: &str) -> Option<DeliveryStatus> {
        DeliveryStatus::ALL.into_iter().find(|s| s.as_str() == word)
    }
}

impl std::fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_words_are_their_serde_names() {
        for e in NotifyEvent::ALL {
            assert_eq!(serde_json::to_value(e).unwrap(), e.as_str());
            assert_eq!(NotifyEvent::parse(e.as_str()), Some(e));
        }
        for s in DeliveryStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(DeliveryStatus::parse(s.as_str()), Some(s));
        }
    }
}
