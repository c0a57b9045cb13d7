//! Automation grants: an operator's advance authorisation of a narrow class
//! of repairs, signed with an approver key.
//!
//! A grant is signed like an approval (exact bytes, verified before they are
//! decoded) but under its own signing context, and its claims carry a
//! `kind` tag and reject unknown fields: an approval's signature or bytes can
//! never pass as a grant, nor a grant's as an approval. What it covers is a
//! rule (actions × container selectors × fault classes, with caps and an
//! expiry), not one action on one container; the executor checks every use
//! against the rule, its own counters, its revocation list and the
//! container's state at call time.

use std::collections::BTreeMap;

use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::approval::{check_signature, signed_message, ApprovalFormatError, WriteAction};

/// Prefix mixed into every signed grant; distinct from approvals'.
pub const GRANT_SIGNING_CONTEXT: &[u8] = b"drydock-grant-v1\0";
/// A grant naming the executor's host (`host`); version 1 names none.
pub const GRANT_VERSION: u32 = 2;
pub const GRANT_VERSION_NO_HOST: u32 = 1;
pub const GRANT_KIND: &str = "automation_grant";
/// Upper bound on encoded grant claims.
pub const MAX_GRANT_BYTES: usize = 8192;
/// The compose project label a `projects` selector matches.
pub const COMPOSE_PROJECT_LABEL: &str = "com.docker.compose.project";
/// The Swarm stack label a `stacks` selector matches.
pub const STACK_NAMESPACE_LABEL: &str = "com.docker.stack.namespace";
/// The shortest cap window a grant may use.
pub const MIN_WINDOW_SECS: u64 = 60;
pub use crate::FAULT_CLASSES;

/// Which containers or Swarm services a grant covers. Every non-empty kind
/// must match (as in the executor's own selectors); a grant with all empty
/// is invalid. `projects` select only containers and `stacks` only
/// services, so a grant for one never reaches the other.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GrantScope {
    /// Container name globs (`shop-*`); any one matching is enough.
    #[serde(default)]
    pub names: Vec<String>,
    /// Labels that must all be present with these values.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Compose projects; any one matching is enough.
    #[serde(default)]
    pub projects: Vec<String>,
    /// Swarm stacks (`com.docker.stack.namespace`); any one matching is
    /// enough.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<String>,
}

impl GrantScope {
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
            && self.labels.is_empty()
            && self.projects.is_empty()
            && self.stacks.is_empty()
    }

    /// Whether a container (by name and labels) is in scope.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.is_empty() || !self.stacks.is_empty() {
            return false;
        }
        let name = name.trim_start_matches('/');
        let name_ok =
            self.names.is_empty() || self.names.iter().any(|g| glob_match::glob_match(g, name));
        let labels_ok = self.labels.iter().all(|(k, v)| labels.get(k) == Some(v));
        let project_ok = self.projects.is_empty()
            || labels
                .get(COMPOSE_PROJECT_LABEL)
                .is_some_and(|p| self.projects.iter().any(|a| a == p));
        name_ok && labels_ok && project_ok
    }

    /// Whether a Swarm service (by name and labels) is in scope.
    pub fn matches_service(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        if self.is_empty() || !self.projects.is_empty() {
            return false;
        }
        let name_ok =
            self.names.is_empty() || self.names.iter().any(|g| glob_match::glob_match(g, name));
        let labels_ok = self.labels.iter().all(|(k, v)| labels.get(k) == Some(v));
        let stack_ok = self.stacks.is_empty()
            || labels
                .get(STACK_NAMESPACE_LABEL)
                .is_some_and(|s| self.stacks.iter().any(|a| a == s));
        name_ok && labels_ok && stack_ok
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GrantClaims {
    pub version: u32,
    /// Always `automation_grant`.
    pub kind: String,
    pub grant_id: String,
    /// `start`, `restart` and `force_update`; or `update` alone, with
    /// `hours`. No other T2 action.
    pub actions: Vec<WriteAction>,
    pub scope: GrantScope,
    /// Fault classes the repair may be for; empty means any.
    #[serde(default)]
    pub classes: Vec<String>,
    /// Uses per container within `window_secs`.
    pub max_per_container: u32,
    pub window_secs: u64,
    /// Uses over the grant's whole life, all containers together.
    pub max_total: u32,
    /// Unix seconds.
    pub issued_at: i64,
    /// Unix seconds.
    pub expires_at: i64,
    /// The executor's host name: a grant made for one host is refused by
    /// every other. Present exactly in version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// The hours of the day it may be used in, the executor host's local
    /// time: `02:00-05:00`, or across midnight `22:00-04:00`. Required
    /// by an `update` grant; none: any hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hours: Option<String>,
}

/// A daily window, `HH:MM-HH:MM` in some zone's local time: from its start
/// (included) to its end (excluded), across midnight when the end comes
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DailyHours {
    /// Minutes after midnight.
    pub start: u16,
    pub end: u16,
}

impl DailyHours {
    pub fn parse(text: &str) -> Result<DailyHours, String> {
        let minute = |t: &str| -> Option<u16> {
            let (h, m) = t.trim().split_once(':')?;
            let all_digits = |x: &str| x.len() == 2 && x.bytes().all(|b| b.is_ascii_digit());
            if !all_digits(h) || !all_digits(m) {
                return None;
            }
            let (h, m) = (h.parse::<u16>().ok()?, m.parse::<u16>().ok()?);
            (h < 24 && m < 60).then_some(h * 60 + m)
        };
        let bad = || format!("hours `{text}` are not HH:MM-HH:MM (e.g. 02:00-05:00)");
        let (a, b) = text.split_once('-').ok_or_else(bad)?;
        let (start, end) = (minute(a).ok_or_else(bad)?, minute(b).ok_or_else(bad)?);
        if start == end {
            return Err(format!(
                "hours `{text}` start and end at the same minute: name a window (e.g. 02:00-05:00)"
            ));
        }
        Ok(DailyHours { start, end })
    }

    /// Whether `minute` (after midnight) falls in the window.
    pub fn contains(self, minute: u16) -> bool {
        if self.start < self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

impl std::fmt::Display for DailyHours {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:02}:{:02}-{:02}:{:02}",
            self.start / 60,
            self.start % 60,
            self.end / 60,
            self.end % 60
        )
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GrantError {
    #[error("{0}")]
    Format(#[from] ApprovalFormatError),
    #[error("grant is invalid: {0}")]
    Invalid(String),
}

impl GrantClaims {
    /// The hours it may be used in; `None`: any hour (or unreadable
    /// hours, which `check_shape` refuses).
    pub fn daily_hours(&self) -> Option<DailyHours> {
        self.hours
            .as_deref()
            .and_then(|h| DailyHours::parse(h).ok())
    }

    /// Why it may not be used at `minute` (after midnight, local time),
    /// or `None` when it may.
    pub fn outside_hours(&self, minute: u16) -> Option<String> {
        let hours = self.daily_hours()?;
        (!hours.contains(minute)).then(|| {
            format!(
                "grant {} may be used {hours} (this host's local time); it is {:02}:{:02} here",
                self.grant_id,
                minute / 60,
                minute % 60
            )
        })
    }

    pub fn new_id() -> String {
        format!("grt-{}", hex::encode(rand::random::<[u8; 8]>()))
    }

    /// Serialize once; these bytes are what gets signed and sent.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decode and check the shape (not the signature, not the clock).
    pub fn decode(bytes: &[u8]) -> Result<GrantClaims, GrantError> {
        if bytes.len() > MAX_GRANT_BYTES {
            return Err(ApprovalFormatError::TooLarge(bytes.len()).into());
        }
        let claims: GrantClaims = serde_json::from_slice(bytes)
            .map_err(|e| ApprovalFormatError::Malformed(e.to_string()))?;
        claims.check_shape()?;
        Ok(claims)
    }

    /// What makes a grant well formed, whoever made it.
    pub fn check_shape(&self) -> Result<(), GrantError> {
        let invalid = |m: String| Err(GrantError::Invalid(m));
        // The same rule as approvals': 1 names no host, 2 a well-formed one.
        crate::approval::check_host_version(self.version, self.host.as_deref())?;
        if self.kind != GRANT_KIND {
            return invalid(format!("kind is `{}`, not `{GRANT_KIND}`", self.kind));
        }
        if !is_grant_id(&self.grant_id) {
            return invalid(format!(
                "grant id `{}` is not grt-<letters or digits>",
                self.grant_id
            ));
        }
        if self.actions.is_empty() {
            return invalid("no action: name start, restart, force_update or update".into());
        }
        let hours = self
            .hours
            .as_deref()
            .map(DailyHours::parse)
            .transpose()
            .map_err(GrantError::Invalid)?;
        if self.actions.contains(&WriteAction::Update) {
            if self.actions.len() > 1 {
                return invalid(
                    "an update grant covers update alone: sign one grant for updates and one for repairs"
                        .into(),
                );
            }
            if hours.is_none() {
                return invalid(
                    "an update grant names the hours it may run in (e.g. 02:00-05:00)".into(),
                );
            }
            if !self.classes.is_empty() {
                return invalid(
                    "an update is not the repair of a fault: an update grant names no class".into(),
                );
            }
            if !self.scope.stacks.is_empty() {
                return invalid(
                    "an update grant covers containers: select them by project, name or label"
                        .into(),
                );
            }
        }
        if let Some(t2) = self.actions.iter().find(|a| {
            matches!(
                a,
                WriteAction::Stop
                    | WriteAction::Rollback
                    | WriteAction::ServiceRollback
                    | WriteAction::ServiceUpdate
                    | WriteAction::Build
            )
        }) {
            return invalid(format!(
                "{t2} is a T2 action; a grant covers start, restart, force_update and, alone with its hours, update"
            ));
        }
        if self.scope.is_empty() {
            return invalid(
                "no selector: name a compose project, a stack, a name glob or a label".into(),
            );
        }
        if !self.scope.projects.is_empty() && !self.scope.stacks.is_empty() {
            return invalid(
                "a grant selects compose projects or Swarm stacks, not both: sign one grant for each"
                    .into(),
            );
        }
        // `*`, `**`, `?*`, `[!x]*`…: a glob with no literal character
        // matches (nearly) every name.
        if let Some(g) = self.scope.names.iter().find(|g| {
            !g.chars()
                .any(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                || g.trim().is_empty()
        }) {
            return invalid(format!(
                "the name selector `{g}` would cover every container (like `*`); name the services, e.g. shop-*"
            ));
        }
        if let Some(bad) = self
            .classes
            .iter()
            .find(|c| !FAULT_CLASSES.contains(&c.as_str()))
        {
            return invalid(format!(
                "`{bad}` is not a fault class (one of {})",
                FAULT_CLASSES.join(", ")
            ));
        }
        if self.max_per_container == 0 {
            return invalid("max_per_container must be at least 1".into());
        }
        if self.window_secs < MIN_WINDOW_SECS {
            return invalid(format!(
                "window of {}s is shorter than {MIN_WINDOW_SECS}s",
                self.window_secs
            ));
        }
        if self.max_total == 0 {
            return invalid("max_total must be at least 1".into());
        }
        if self.expires_at <= self.issued_at {
            return invalid(format!(
                "expires_at {} is not after issued_at {}",
                self.expires_at, self.issued_at
            ));
        }
        Ok(())
    }

    /// Why this grant does not cover an action on a container for a class,
    /// or `None` when it does (caps, clock and state are checked apart).
    pub fn refuses(
        &self,
        action: WriteAction,
        name: &str,
        labels: &BTreeMap<String, String>,
        class: &str,
    ) -> Option<String> {
        if !self.actions.contains(&action) {
            return Some(format!("grant {} does not cover {action}", self.grant_id));
        }
        let (kind, in_scope) = if action.on_service() {
            ("service", self.scope.matches_service(name, labels))
        } else {
            ("container", self.scope.matches(name, labels))
        };
        if !in_scope {
            return Some(format!(
                "{kind} {} is outside grant {}'s scope",
                name.trim_start_matches('/'),
                self.grant_id
            ));
        }
        if action == WriteAction::Update {
            // An update is for no fault: the class is not asked.
            return None;
        }
        if !self.classes.is_empty() && !self.classes.iter().any(|c| c == class) {
            return Some(format!(
                "fault class `{class}` is not among grant {}'s classes",
                self.grant_id
            ));
        }
        None
    }
}

/// `grt-` and 1 to 60 letters, digits or `-`.
pub fn is_grant_id(id: &str) -> bool {
    id.len() <= 64
        && id.len() > 4
        && id.starts_with("grt-")
        && id[4..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// Sign encoded grant claims.
pub fn sign(claims_bytes: &[u8], key: &SigningKey) -> Vec<u8> {
    key.sign(&signed_message(GRANT_SIGNING_CONTEXT, claims_bytes))
        .to_bytes()
        .to_vec()
}

/// Verify the signature over exactly `claims_bytes`, then decode them.
pub fn verify(
    claims_bytes: &[u8],
    signature: &[u8],
    key: &VerifyingKey,
) -> Result<GrantClaims, GrantError> {
    check_signature(
        GRANT_SIGNING_CONTEXT,
        claims_bytes,
        MAX_GRANT_BYTES,
        signature,
        key,
    )?;
    GrantClaims::decode(claims_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::{self, ApprovalClaims, CLAIMS_VERSION};

    pub fn grant() -> GrantClaims {
        GrantClaims {
            version: GRANT_VERSION,
            kind: GRANT_KIND.into(),
            grant_id: "grt-0123abcd".into(),
            actions: vec![WriteAction::Restart],
            scope: GrantScope {
                projects: vec!["shop".into()],
                ..Default::default()
            },
            classes: vec!["unhealthy".into()],
            max_per_container: 2,
            window_secs: 3600,
            max_total: 10,
            issued_at: 1_000,
            expires_at: 90_000,
            host: Some("host-a".into()),
            hours: None,
        }
    }

    fn labels(project: &str) -> BTreeMap<String, String> {
        [(COMPOSE_PROJECT_LABEL.to_string(), project.to_string())].into()
    }

    type Change = Box<dyn Fn(&mut GrantClaims)>;

    #[test]
    fn signed_bytes_verify_and_anything_else_does_not() {
        let key = approval::generate_signing_key();
        let bytes = grant().encode();
        let sig = sign(&bytes, &key);
        assert_eq!(verify(&bytes, &sig, &key.verifying_key()).unwrap(), grant());
        // Widened after signing: the bytes differ, the signature fails.
        let mut wide = grant();
        wide.max_per_container = 100;
        assert!(matches!(
            verify(&wide.encode(), &sig, &key.verifying_key()),
            Err(GrantError::Format(ApprovalFormatError::BadSignature))
        ));
        // A grant signature is not an approval signature, and back.
        assert!(approval::verify(&bytes, &sig, &key.verifying_key()).is_err());
        let claims = ApprovalClaims {
            version: CLAIMS_VERSION,
            approval_id: "apr-1".into(),
            request_id: "req-1".into(),
            action: WriteAction::Restart,
            container_id: "a".repeat(64),
            container_name: "shop-web-1".into(),
            plan_digest: "d".into(),
            issued_at: 1,
            expires_at: 2,
            nonce: "n".into(),
            image_id: None,
            from_image_id: None,
            service: None,
            host: Some("host-a".into()),
            update: None,
            build: None,
        }
        .encode();
        let approval_sig = approval::sign(&claims, &key);
        assert!(verify(&claims, &approval_sig, &key.verifying_key()).is_err());
        // Even signed under the grant context, approval claims do not decode.
        let forged = sign(&claims, &key);
        assert!(matches!(
            verify(&claims, &forged, &key.verifying_key()),
            Err(GrantError::Format(ApprovalFormatError::Malformed(_)))
        ));
    }

    #[test]
    fn shape_rules_refuse_what_a_grant_must_never_be() {
        let cases: Vec<(Change, &str)> = vec![
            (Box::new(|g| g.actions = vec![WriteAction::Stop]), "T2"),
            (
                Box::new(|g| g.actions = vec![WriteAction::ServiceRollback]),
                "T2",
            ),
            (
                Box::new(|g| g.scope.stacks = vec!["shop".into()]),
                "not both",
            ),
            (Box::new(|g| g.actions.clear()), "no action"),
            (Box::new(|g| g.scope = GrantScope::default()), "no selector"),
            (Box::new(|g| g.scope.names = vec!["*".into()]), "`*`"),
            (Box::new(|g| g.scope.names = vec!["?*".into()]), "like `*`"),
            (Box::new(|g| g.scope.names = vec!["**".into()]), "like `*`"),
            (Box::new(|g| g.max_per_container = 0), "max_per_container"),
            (Box::new(|g| g.window_secs = 5), "shorter"),
            (Box::new(|g| g.max_total = 0), "max_total"),
            (Box::new(|g| g.expires_at = g.issued_at), "not after"),
            (Box::new(|g| g.kind = "approval".into()), "kind"),
            (Box::new(|g| g.grant_id = "apr-1".into()), "grant id"),
            (Box::new(|g| g.hours = Some("2-5".into())), "HH:MM-HH:MM"),
            (Box::new(|g| g.hours = Some("24:00-05:00".into())), "HH:MM"),
            (
                Box::new(|g| g.hours = Some("02:00-02:00".into())),
                "same minute",
            ),
            (Box::new(|g| g.actions = vec![WriteAction::Update]), "hours"),
            (
                Box::new(|g| {
                    g.actions = vec![WriteAction::Update, WriteAction::Restart];
                    g.hours = Some("02:00-05:00".into());
                }),
                "update alone",
            ),
            (
                Box::new(|g| {
                    g.actions = vec![WriteAction::Update];
                    g.hours = Some("02:00-05:00".into());
                }),
                "no class",
            ),
        ];
        for (change, says) in cases {
            let mut g = grant();
            change(&mut g);
            let err = GrantClaims::decode(&g.encode()).unwrap_err().to_string();
            assert!(err.contains(says), "{says}: {err}");
        }
    }

    #[test]
    fn daily_hours_hold_their_start_not_their_end_and_cross_midnight() {
        let night = DailyHours::parse("02:00-05:00").unwrap();
        assert_eq!(night.to_string(), "02:00-05:00");
        assert!(night.contains(120) && night.contains(299));
        assert!(!night.contains(119) && !night.contains(300));
        let late = DailyHours::parse("22:30-04:00").unwrap();
        assert!(late.contains(23 * 60) && late.contains(0) && late.contains(239));
        assert!(!late.contains(240) && !late.contains(22 * 60 + 29));
        let mut g = grant();
        g.actions = vec![WriteAction::Update];
        g.classes.clear();
        g.hours = Some("02:00-05:00".into());
        let g = GrantClaims::decode(&g.encode()).unwrap();
        assert_eq!(g.outside_hours(150), None);
        let why = g.outside_hours(14 * 60 + 2).unwrap();
        assert!(
            why.contains("02:00-05:00") && why.contains("14:02"),
            "{why}"
        );
        // An update is for no fault: any class passes, scope still holds.
        assert_eq!(
            g.refuses(WriteAction::Update, "shop-web-1", &labels("shop"), ""),
            None
        );
        assert!(g
            .refuses(WriteAction::Update, "shop-web-1", &labels("blog"), "")
            .is_some());
    }

    #[test]
    fn scope_action_and_class_decide_coverage() {
        let g = grant();
        assert_eq!(
            g.refuses(
                WriteAction::Restart,
                "/shop-web-1",
                &labels("shop"),
                "unhealthy"
            ),
            None
        );
        assert!(g
            .refuses(
                WriteAction::Start,
                "shop-web-1",
                &labels("shop"),
                "unhealthy"
            )
            .is_some());
        assert!(g
            .refuses(
                WriteAction::Restart,
                "bank-web-1",
                &labels("bank"),
                "unhealthy"
            )
            .is_some());
        assert!(g
            .refuses(
                WriteAction::Restart,
                "shop-web-1",
                &labels("shop"),
                "oom_killed"
            )
            .is_some());
        let mut named = grant();
        named.scope = GrantScope {
            names: vec!["shop-*".into()],
            labels: [("tier".to_string(), "web".to_string())].into(),
            projects: vec![],
            stacks: vec![],
        };
        let mut l = labels("x");
        assert!(
            named
                .refuses(WriteAction::Restart, "shop-web-1", &l, "unhealthy")
                .is_some(),
            "label missing"
        );
        l.insert("tier".into(), "web".into());
        assert_eq!(
            named.refuses(WriteAction::Restart, "shop-web-1", &l, "unhealthy"),
            None
        );
        assert!(named
            .refuses(WriteAction::Restart, "bank-web-1", &l, "unhealthy")
            .is_some());
    }

    #[test]
    fn stacks_select_services_and_projects_containers() {
        let mut g = grant();
        g.actions = vec![WriteAction::Restart, WriteAction::ForceUpdate];
        g.scope = GrantScope {
            stacks: vec!["shop".into()],
            ..Default::default()
        };
        let stack: BTreeMap<String, String> =
            [(STACK_NAMESPACE_LABEL.to_string(), "shop".to_string())].into();
        assert_eq!(
            g.refuses(WriteAction::ForceUpdate, "shop_api", &stack, "unhealthy"),
            None
        );
        // The same labels on a container (a task's) are not in a stack
        // grant's scope: it covers services only.
        assert!(g
            .refuses(WriteAction::Restart, "shop_api.1.x", &stack, "unhealthy")
            .unwrap()
            .contains("container"));
        let other: BTreeMap<String, String> =
            [(STACK_NAMESPACE_LABEL.to_string(), "bank".to_string())].into();
        assert!(g
            .refuses(WriteAction::ForceUpdate, "bank_api", &other, "unhealthy")
            .unwrap()
            .contains("service bank_api is outside"));
        // A project grant never covers a service.
        let mut project = grant();
        project.actions = vec![WriteAction::ForceUpdate];
        assert!(project
            .refuses(
                WriteAction::ForceUpdate,
                "shop_api",
                &labels("shop"),
                "unhealthy"
            )
            .is_some());
    }
}
