//! The sealed split's first contact: a scenario marked `sealed` is scored
//! once, by each engine, before any code is changed for it, and that
//! result is kept in `tests/bench/first-contact.json` for good. The runner
//! adds records (`--first-contact`) and never rewrites one; the report
//! quotes them beside the rate of today's code.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use super::run::Outcome;

/// One scenario's first contact with one engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The commit the code was at.
    pub commit: String,
    /// Whether the agent's code (agent/, vocab/, proto/) differed from
    /// that commit when it ran: a record with changes says so.
    pub code_changed: bool,
    /// The day, UTC (YYYY-MM-DD).
    pub date: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unsafe_writes: Vec<String>,
    /// The primary cause's class drydock gave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Why it did not pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failures: Vec<String>,
}

/// Scenario id → engine → its first contact.
pub type Records = BTreeMap<String, BTreeMap<String, Record>>;

/// Where the records live.
pub fn default_path() -> PathBuf {
    crate::workspace_root().join("tests/bench/first-contact.json")
}

/// The records in `path` (none when it does not exist yet).
pub fn load(path: &Path) -> anyhow::Result<Records> {
    match std::fs::read_to_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not a first-contact record file", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Records::new()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Add `outcomes` (first runs) as first contacts of `engine`; a record
/// already there is never replaced, and a run that could not be set up
/// says nothing of drydock, so it is not recorded (it stays unscored).
pub fn add(
    records: &mut Records,
    engine: &str,
    outcomes: &[Outcome],
    commit: &str,
    code_changed: bool,
    date: &str,
) -> anyhow::Result<usize> {
    let first: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.run == 1 && o.setup_error.is_none())
        .collect();
    if let Some(o) = first.iter().find(|o| {
        records
            .get(&o.scenario)
            .is_some_and(|r| r.contains_key(engine))
    }) {
        bail!(
            "the first contact of {} with {engine} is already recorded; it is never rewritten",
            o.scenario
        );
    }
    for o in &first {
        records.entry(o.scenario.clone()).or_default().insert(
            engine.to_string(),
            Record {
                commit: commit.to_string(),
                code_changed,
                date: date.to_string(),
                passed: o.passed,
                unsafe_writes: o.unsafe_writes.clone(),
                class: o.class.clone(),
                failures: o
                    .failures
                    .iter()
                    .filter(|f| !f.starts_with("its logs and agent.db are kept"))
                    .cloned()
                    .collect(),
            },
        );
    }
    Ok(first.len())
}

/// Write the records whole (a temporary file renamed over the old one).
pub fn save(path: &Path, records: &Records) -> anyhow::Result<()> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(records)? + "\n";
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))?;
    Ok(())
}

/// The commit the checkout is at, and whether the agent's code differs
/// from it.
pub fn checkout() -> anyhow::Result<(String, bool)> {
    let root = crate::workspace_root();
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&root)
        .output()
        .context("cannot run git")?;
    if !head.status.success() {
        bail!("git rev-parse HEAD failed: first contact needs a git checkout to name its commit");
    }
    let changed = Command::new("git")
        .args(["diff", "--quiet", "HEAD", "--", "agent", "vocab", "proto"])
        .current_dir(&root)
        .status()
        .context("cannot run git")?;
    Ok((
        String::from_utf8_lossy(&head.stdout).trim().to_string(),
        !changed.success(),
    ))
}

/// Today, UTC, as YYYY-MM-DD.
pub fn today() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    now.chars().take(10).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(id: &str, run: usize, passed: bool) -> Outcome {
        Outcome {
            scenario: id.into(),
            run,
            passed,
            failures: if passed {
                vec![]
            } else {
                vec![
                    "class crash, want one of [\"config_error\"]".into(),
                    "its logs and agent.db are kept in /x".into(),
                ]
            },
            class: Some("crash".into()),
            ..Default::default()
        }
    }

    #[test]
    fn a_first_contact_is_recorded_once_and_never_rewritten() {
        let mut records = Records::new();
        let runs = [
            outcome("a", 1, true),
            outcome("a", 2, false),
            outcome("b", 1, false),
        ];
        let added = add(&mut records, "rules", &runs, "abc", false, "2026-12-06").unwrap();
        assert_eq!(added, 2, "first runs only");
        assert!(records["a"]["rules"].passed);
        let b = &records["b"]["rules"];
        assert!(!b.passed);
        assert_eq!(b.failures.len(), 1, "where its logs went is no result");
        // The same scenario again, even passing now: refused, unchanged.
        let err = add(
            &mut records,
            "rules",
            &[outcome("b", 1, true)],
            "def",
            false,
            "2026-12-07",
        )
        .unwrap_err();
        assert!(err.to_string().contains("never rewritten"), "{err}");
        assert!(!records["b"]["rules"].passed);
        assert_eq!(records["b"]["rules"].commit, "abc");
        // Another engine's first contact is its own.
        add(
            &mut records,
            "scripted model",
            &[outcome("b", 1, true)],
            "def",
            true,
            "2026-12-07",
        )
        .unwrap();
        assert!(records["b"]["scripted model"].passed);
        // A run that could not be set up stays unscored.
        let broken = Outcome {
            setup_error: Some("docker failed".into()),
            ..outcome("c", 1, false)
        };
        assert_eq!(
            add(&mut records, "rules", &[broken], "abc", false, "d").unwrap(),
            0
        );
        assert!(!records.contains_key("c"));
    }

    #[test]
    fn records_survive_a_save_and_a_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("first-contact.json");
        assert!(load(&path).unwrap().is_empty());
        let mut records = Records::new();
        add(
            &mut records,
            "rules",
            &[outcome("a", 1, false)],
            "abc",
            true,
            "2026-12-06",
        )
        .unwrap();
        save(&path, &records).unwrap();
        assert_eq!(load(&path).unwrap(), records);
        std::fs::write(&path, "{not json").unwrap();
        let err = load(&path).unwrap_err();
        assert!(format!("{err:#}").contains("not a first-contact record file"));
    }
}
