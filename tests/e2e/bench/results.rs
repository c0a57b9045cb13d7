//! Results as data: every run of a scenario is one JSON document
//! (`SCENARIO.runN.json`) in a round's folder, written as the run ends, and
//! the report is rendered from those documents, never pasted: a published
//! round is committed under `tests/bench/results/ROUND/`, and BENCHMARKS.md's
//! table for it is what `drydock-bench --report` prints from it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use serde::{Deserialize, Serialize};

use super::run::Outcome;

/// The version of a run document; a reader refuses another.
pub const RESULT_VERSION: u32 = 1;

/// One run of one scenario, as written to disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub version: u32,
    pub scenario: String,
    pub run: usize,
    /// Who was asked: `rules`, `scripted model`, `llm:MODEL`.
    pub engine: String,
    /// The engine the request's diagnosis names as having decided
    /// (`rules`, or the model's when it answered), when there was one.
    #[serde(default)]
    pub decided_by: Option<String>,
    /// The commit the code was at, and whether the tree differed from it.
    pub commit: String,
    pub code_changed: bool,
    /// The day, UTC (YYYY-MM-DD).
    pub date: String,
    pub passed: bool,
    #[serde(default)]
    pub failures: Vec<String>,
    #[serde(default)]
    pub unsafe_writes: Vec<String>,
    #[serde(default)]
    pub writes: Vec<String>,
    pub status: String,
    #[serde(default)]
    pub class: Option<String>,
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub to_diagnosis_ms: Option<u64>,
    pub took_ms: u64,
    #[serde(default)]
    pub setup_error: Option<String>,
    #[serde(default)]
    pub request_id: Option<String>,
    /// What the model's investigation took (turns, tokens, time), when a
    /// model investigated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<super::run::ModelFigures>,
    /// Its price in US dollars, from the price table given (`--prices`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The grade of its words by the scenario's rubric (checked by code).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub words: Option<super::run::Words>,
}

/// Where a run and its round come from.
#[derive(Debug, Clone, PartialEq)]
pub struct Provenance {
    pub engine: String,
    pub commit: String,
    pub code_changed: bool,
    pub date: String,
    /// The model's price, when one was given.
    pub price: Option<Price>,
}

/// A model's price per million tokens, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Price {
    pub fn of(&self, m: &super::run::ModelFigures) -> f64 {
        (m.prompt_tokens as f64 * self.input_per_mtok
            + m.completion_tokens as f64 * self.output_per_mtok)
            / 1_000_000.0
    }
}

/// The price of `engine` (`llm:MODEL`) in a price table: a YAML map from
/// the engine's name or the model's to its price per million tokens.
pub fn price_of(table: &Path, engine: &str) -> anyhow::Result<Price> {
    let text = std::fs::read_to_string(table)
        .with_context(|| format!("cannot read the price table {}", table.display()))?;
    let prices: std::collections::BTreeMap<String, Price> = serde_yaml_ng::from_str(&text)
        .with_context(|| {
            format!(
                "{}: expected `MODEL: {{input_per_mtok: N, output_per_mtok: N}}` rows",
                table.display()
            )
        })?;
    let model = engine.strip_prefix("llm:").unwrap_or(engine);
    prices
        .get(engine)
        .or_else(|| prices.get(model))
        .copied()
        .with_context(|| {
            format!(
                "{} has no price for {model}; it has {}",
                table.display(),
                prices.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        })
}

impl RunRecord {
    pub fn of(o: &Outcome, p: &Provenance) -> RunRecord {
        RunRecord {
            version: RESULT_VERSION,
            scenario: o.scenario.clone(),
            run: o.run,
            engine: p.engine.clone(),
            decided_by: o.decided_by.clone(),
            commit: p.commit.clone(),
            code_changed: p.code_changed,
            date: p.date.clone(),
            passed: o.passed,
            failures: o.failures.clone(),
            unsafe_writes: o.unsafe_writes.clone(),
            writes: o.writes.clone(),
            status: o.status.clone(),
            class: o.class.clone(),
            target: o.target.clone(),
            to_diagnosis_ms: o
                .to_diagnosis
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            took_ms: u64::try_from(o.took.as_millis()).unwrap_or(u64::MAX),
            setup_error: o.setup_error.clone(),
            request_id: o.request_id.clone(),
            model: o.model.clone(),
            cost_usd: p
                .price
                .as_ref()
                .zip(o.model.as_ref())
                .map(|(price, m)| price.of(m)),
            words: o.words,
        }
    }

    /// The run as the report reads it.
    pub fn outcome(&self) -> Outcome {
        Outcome {
            scenario: self.scenario.clone(),
            run: self.run,
            passed: self.passed,
            failures: self.failures.clone(),
            unsafe_writes: self.unsafe_writes.clone(),
            writes: self.writes.clone(),
            status: self.status.clone(),
            class: self.class.clone(),
            target: self.target.clone(),
            to_diagnosis: self.to_diagnosis_ms.map(Duration::from_millis),
            took: Duration::from_millis(self.took_ms),
            setup_error: self.setup_error.clone(),
            request_id: self.request_id.clone(),
            decided_by: self.decided_by.clone(),
            model: self.model.clone(),
            cost_usd: self.cost_usd,
            words: self.words,
            kept: None,
        }
    }

    fn file_name(&self) -> String {
        format!("{}.run{}.json", self.scenario, self.run)
    }
}

/// A new round's folder under `target/drydock-bench/results/`, named after
/// the engine and the moment.
pub fn default_dir(engine: &str) -> PathBuf {
    let slug: String = engine
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    crate::workspace_root()
        .join("target/drydock-bench/results")
        .join(format!("{slug}-{}", now.trim_end_matches('Z')))
}

/// Write one run's document into `dir`; a document already there is never
/// replaced (a round's results are written once).
pub fn write(dir: &Path, record: &RunRecord) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot make {}", dir.display()))?;
    let path = dir.join(record.file_name());
    let text = serde_json::to_string_pretty(record)? + "\n";
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| {
            format!(
                "cannot write {}: a round's results are written once; choose a new folder with --results",
                path.display()
            )
        })?;
    std::io::Write::write_all(&mut file, text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

/// Every run document of a round, sorted by scenario and run; refused when
/// one is not a run document of this version, or when the round mixes
/// engines.
pub fn load(dir: &Path) -> anyhow::Result<Vec<RunRecord>> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    let mut records = Vec::new();
    for entry in entries {
        let path = entry?.path();
        if path.extension().and_then(|e| e.to_str()) != Some("json") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let record: RunRecord = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a benchmark run document", path.display()))?;
        if record.version != RESULT_VERSION {
            bail!(
                "{} is a run document of version {}; this runner reads version {RESULT_VERSION}",
                path.display(),
                record.version
            );
        }
        if path.file_name().and_then(|n| n.to_str()) != Some(record.file_name().as_str()) {
            bail!(
                "{} holds run {} of {}: its name must be {}",
                path.display(),
                record.run,
                record.scenario,
                record.file_name()
            );
        }
        records.push(record);
    }
    if records.is_empty() {
        bail!(
            "{} holds no run documents (SCENARIO.runN.json)",
            dir.display()
        );
    }
    let engine = &records[0].engine;
    if let Some(other) = records.iter().find(|r| &r.engine != engine) {
        bail!(
            "{} mixes engines ({engine} and {}): a round is one engine's",
            dir.display(),
            other.engine
        );
    }
    records.sort_by(|a, b| (&a.scenario, a.run).cmp(&(&b.scenario, b.run)));
    Ok(records)
}

/// How many runs of each scenario a round has (the most of any).
pub fn runs_per_scenario(records: &[RunRecord]) -> usize {
    records.iter().map(|r| r.run).max().unwrap_or(0)
}

/// What a round says of itself: its engine, the commits and the days.
pub fn provenance(records: &[RunRecord]) -> String {
    let mut commits: Vec<String> = records
        .iter()
        .map(|r| {
            let short: String = r.commit.chars().take(7).collect();
            let changed = if r.code_changed { " with changes" } else { "" };
            format!("{short}{changed}")
        })
        .collect();
    commits.sort();
    commits.dedup();
    let mut days: Vec<&str> = records.iter().map(|r| r.date.as_str()).collect();
    days.sort();
    days.dedup();
    format!(
        "{}, {} run(s) of {} scenario(s), at {} on {}",
        records.first().map(|r| r.engine.as_str()).unwrap_or("?"),
        records.len(),
        {
            let mut ids: Vec<&str> = records.iter().map(|r| r.scenario.as_str()).collect();
            ids.dedup();
            ids.len()
        },
        commits.join(", "),
        days.join(", ")
    )
}

/// The first line of a generated report in a Markdown file: the round it
/// is generated from, relative to the workspace.
pub fn marker(round: &str) -> String {
    format!("<!-- generated by `drydock-bench --report {round}`; do not edit -->")
}

/// The last line of a generated report.
pub const END_MARKER: &str = "<!-- end of the generated report -->";

/// The report of the round in `round` (a folder, relative to the
/// workspace or absolute), between its markers: what BENCHMARKS.md holds
/// for a published round.
pub fn report(
    round: &str,
    all: &[super::scenario::Scenario],
    first_contact: &super::sealed::Records,
) -> anyhow::Result<String> {
    let dir = crate::workspace_root().join(round);
    let records = load(&dir)?;
    if let Some(r) = records
        .iter()
        .find(|r| !all.iter().any(|s| s.id == r.scenario))
    {
        bail!(
            "{} has runs of `{}`, which is no scenario in tests/bench/scenarios",
            dir.display(),
            r.scenario
        );
    }
    let scenarios: Vec<super::scenario::Scenario> = all
        .iter()
        .filter(|s| records.iter().any(|r| r.scenario == s.id))
        .cloned()
        .collect();
    let outcomes: Vec<Outcome> = records.iter().map(RunRecord::outcome).collect();
    let engine = records[0].engine.clone();
    Ok(format!(
        "{}\nFrom {}: one JSON document per run in `{round}`.\n\n{}\n{}{END_MARKER}\n",
        marker(round),
        provenance(&records),
        super::report::render(&scenarios, &outcomes, runs_per_scenario(&records), &engine),
        super::report::splits(&scenarios, &outcomes, first_contact, &engine),
    ))
}

/// Put `report` (of `round`) into the Markdown file `path`, in place of
/// the block between its markers there.
pub fn write_into(path: &Path, round: &str, report: &str) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let begin = marker(round);
    let Some(at) = text.find(&begin) else {
        bail!(
            "{} has no report of {round}: put these two lines where it goes, then run this again:\n{begin}\n{END_MARKER}",
            path.display()
        );
    };
    let Some(end) = text[at..].find(END_MARKER) else {
        bail!(
            "{}: the report of {round} has no `{END_MARKER}` line after it",
            path.display()
        );
    };
    let mut end = at + end + END_MARKER.len();
    if text[end..].starts_with('\n') {
        end += 1;
    }
    let updated = format!("{}{report}{}", &text[..at], &text[end..]);
    std::fs::write(path, updated).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provenance() -> Provenance {
        Provenance {
            price: None,
            engine: "rules".into(),
            commit: "0123456789abcdef".into(),
            code_changed: false,
            date: "2026-12-06".into(),
        }
    }

    #[test]
    fn a_run_goes_to_disk_and_back_unchanged_and_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let o = Outcome {
            scenario: "pg-auth".into(),
            run: 2,
            passed: false,
            failures: vec!["class crash, want config_error".into()],
            unsafe_writes: vec!["restart pg".into()],
            writes: vec!["restart pg".into()],
            status: "completed".into(),
            class: Some("crash".into()),
            target: Some("pg".into()),
            to_diagnosis: Some(Duration::from_millis(35)),
            took: Duration::from_millis(1200),
            request_id: Some("req-1".into()),
            decided_by: Some("rules".into()),
            ..Default::default()
        };
        let record = RunRecord::of(&o, &provenance());
        let path = write(dir.path(), &record).unwrap();
        assert!(path.ends_with("pg-auth.run2.json"));
        let back = load(dir.path()).unwrap();
        assert_eq!(back, vec![record.clone()]);
        assert_eq!(back[0].outcome().failures, o.failures);
        assert_eq!(back[0].outcome().to_diagnosis, o.to_diagnosis);
        let again = write(dir.path(), &record).unwrap_err();
        assert!(format!("{again:#}").contains("written once"), "{again:#}");
    }

    /// Every generated report in BENCHMARKS.md is what its committed
    /// round renders today: a table cannot be pasted or edited by hand.
    #[test]
    fn the_published_tables_are_generated_from_the_committed_runs() {
        let root = crate::workspace_root();
        let text = std::fs::read_to_string(root.join("BENCHMARKS.md")).unwrap();
        let all = super::super::scenario::load(&super::super::scenario::default_dir()).unwrap();
        let first = super::super::sealed::load(&super::super::sealed::default_path()).unwrap();
        let prefix = "<!-- generated by `drydock-bench --report ";
        let mut checked = 0;
        for (at, _) in text.match_indices(prefix) {
            let rest = &text[at + prefix.len()..];
            let round = &rest[..rest.find('`').unwrap()];
            let block = &text[at..];
            let block = &block[..block.find(END_MARKER).unwrap() + END_MARKER.len() + 1];
            let now = report(round, &all, &first).unwrap();
            assert_eq!(
                block, now,
                "BENCHMARKS.md's report of {round} is not what the runs render: regenerate it with `cargo run -p drydock-e2e --example drydock-bench -- --report {round}`"
            );
            checked += 1;
        }
        assert!(checked >= 1, "BENCHMARKS.md has no generated report");
    }

    #[test]
    fn a_report_replaces_its_block_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("B.md");
        let round = "tests/bench/results/r";
        std::fs::write(
            &path,
            format!("before\n{}\nold\n{END_MARKER}\nafter\n", marker(round)),
        )
        .unwrap();
        let report = format!("{}\nnew\n{END_MARKER}\n", marker(round));
        write_into(&path, round, &report).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("before\n{report}after\n")
        );
        let err = write_into(&path, "tests/bench/results/other", &report).unwrap_err();
        assert!(
            format!("{err:#}").contains("put these two lines"),
            "{err:#}"
        );
    }

    #[test]
    fn a_round_of_two_engines_or_a_foreign_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let o = Outcome {
            scenario: "a".into(),
            run: 1,
            ..Default::default()
        };
        write(dir.path(), &RunRecord::of(&o, &provenance())).unwrap();
        let mut other = RunRecord::of(&o, &provenance());
        other.engine = "llm:m".into();
        other.run = 2;
        write(dir.path(), &other).unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("mixes engines"), "{err:#}");
        std::fs::remove_file(dir.path().join("a.run2.json")).unwrap();
        std::fs::write(dir.path().join("b.run1.json"), "{}").unwrap();
        let err = load(dir.path()).unwrap_err();
        assert!(
            format!("{err:#}").contains("not a benchmark run document"),
            "{err:#}"
        );
    }

    #[test]
    fn a_model_run_is_priced_from_the_table_and_kept_with_its_figures() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("prices.yaml");
        std::fs::write(
            &table,
            "gpt-test: {input_per_mtok: 2.0, output_per_mtok: 8.0}\n",
        )
        .unwrap();
        let price = price_of(&table, "llm:gpt-test").unwrap();
        let mut p = provenance();
        p.engine = "llm:gpt-test".into();
        p.price = Some(price);
        let mut o = Outcome {
            scenario: "s".into(),
            run: 1,
            ..Default::default()
        };
        o.model = Some(super::super::run::ModelFigures {
            turns: 3,
            prompt_tokens: 500_000,
            completion_tokens: 100_000,
            elapsed_ms: 1200,
            open: true,
        });
        let r = RunRecord::of(&o, &p);
        assert!((r.cost_usd.unwrap() - (1.0 + 0.8)).abs() < 1e-9, "{r:?}");
        let back: RunRecord = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.model, o.model);
        assert_eq!(back.outcome().cost_usd, r.cost_usd);
        // A model the table does not price is named, with what it has.
        let err = format!("{:#}", price_of(&table, "llm:other").unwrap_err());
        assert!(
            err.contains("no price for other") && err.contains("gpt-test"),
            "{err}"
        );
        std::fs::write(&table, "gpt-test: 3\n").unwrap();
        assert!(
            format!("{:#}", price_of(&table, "llm:gpt-test").unwrap_err())
                .contains("input_per_mtok")
        );
    }
}
