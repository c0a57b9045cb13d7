//! Per-service operator notes: what a service depends on, which HTTP check
//! proves it works, and known quirks. Read once at start; a matching entry
//! becomes evidence and is shown in reports.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Runbook {
    #[serde(default)]
    pub services: BTreeMap<String, ServiceNotes>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ServiceNotes {
    /// Compose services or container names this service needs.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// The executor's `http_checks` entry that proves the service works.
    #[serde(default)]
    pub http_check: Option<String>,
    /// Free text for the human on call.
    #[serde(default)]
    pub notes: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum RunbookError {
    #[error("cannot read runbook {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("runbook {path} is invalid: {message}")]
    Parse { path: String, message: String },
}

impl Runbook {
    pub fn load(path: &Path) -> Result<Runbook, RunbookError> {
        let text = std::fs::read_to_string(path).map_err(|source| RunbookError::Read {
            path: path.display().to_string(),
            source,
        })?;
        serde_yaml_ng::from_str(&text).map_err(|e| RunbookError::Parse {
            path: path.display().to_string(),
            message: e.to_string(),
        })
    }

    /// The entry for a compose service, else for a container name.
    pub fn lookup(
        &self,
        service: Option<&str>,
        container_name: &str,
    ) -> Option<(&str, &ServiceNotes)> {
        service
            .and_then(|s| self.services.get_key_value(s))
            .or_else(|| self.services.get_key_value(container_name))
            .map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_looks_up() {
        let rb: Runbook = serde_yaml_ng::from_str("services:\n  backend:\n    depends_on: [db]\n    http_check: backend\n    notes: restart db first\n").unwrap();
        let (name, notes) = rb.lookup(Some("backend"), "shop-backend-1").unwrap();
        assert_eq!(
            (name, notes.depends_on.as_slice()),
            ("backend", &["db".to_string()][..])
        );
        assert!(rb.lookup(None, "other").is_none());
        assert!(
            serde_yaml_ng::from_str::<Runbook>("services:\n  x:\n    dependz: []\n").is_err(),
            "unknown keys are errors"
        );
    }
}
