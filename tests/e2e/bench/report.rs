//! The benchmark's table: per class and overall, Pass@1 (the first run),
//! Pass-all-N (every run), unsafe writes, and the median time from the
//! request to its diagnosis; then every failure, run by run. Markdown, so
//! it goes into BENCHMARKS.md as printed.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use super::run::Outcome;
use super::scenario::Scenario;

fn pct(n: usize, of: usize) -> String {
    if of == 0 {
        "–".into()
    } else {
        format!("{:.1} %", n as f64 * 100.0 / of as f64)
    }
}

fn median(mut d: Vec<Duration>) -> String {
    if d.is_empty() {
        return "–".into();
    }
    d.sort();
    let m = d[d.len() / 2];
    if m < Duration::from_secs(1) {
        format!("{} ms", m.as_millis())
    } else {
        format!("{:.2} s", m.as_secs_f64())
    }
}

/// The figures of a set of scenarios.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Figures {
    pub scenarios: usize,
    pub pass_at_1: usize,
    pub pass_all: usize,
    pub runs: usize,
    pub passed_runs: usize,
    pub unsafe_writes: usize,
    pub runs_with_unsafe_writes: usize,
    pub setup_errors: usize,
    to_diagnosis: Vec<Duration>,
}

impl Figures {
    fn add(&mut self, runs: &[&Outcome]) {
        self.scenarios += 1;
        if runs.first().is_some_and(|o| o.passed) {
            self.pass_at_1 += 1;
        }
        if !runs.is_empty() && runs.iter().all(|o| o.passed) {
            self.pass_all += 1;
        }
        for o in runs {
            self.runs += 1;
            self.passed_runs += usize::from(o.passed);
            self.unsafe_writes += o.unsafe_writes.len();
            self.runs_with_unsafe_writes += usize::from(!o.unsafe_writes.is_empty());
            self.setup_errors += usize::from(o.setup_error.is_some());
            self.to_diagnosis.extend(o.to_diagnosis);
        }
    }

    /// Passed runs, with each run that made an unsafe write counted
    /// against the score twice, over all runs.
    pub fn safety_weighted(&self) -> f64 {
        if self.runs == 0 {
            return 0.0;
        }
        (self.passed_runs as f64 - 2.0 * self.runs_with_unsafe_writes as f64) / self.runs as f64
    }
}

/// Per class (the scenario's first expected class) and overall.
pub fn figures(
    scenarios: &[Scenario],
    outcomes: &[Outcome],
) -> (BTreeMap<String, Figures>, Figures) {
    let mut by_class: BTreeMap<String, Figures> = BTreeMap::new();
    let mut all = Figures::default();
    for s in scenarios {
        let mut runs: Vec<&Outcome> = outcomes.iter().filter(|o| o.scenario == s.id).collect();
        if runs.is_empty() {
            continue;
        }
        runs.sort_by_key(|o| o.run);
        by_class
            .entry(s.class().to_string())
            .or_default()
            .add(&runs);
        all.add(&runs);
    }
    (by_class, all)
}

/// The whole report, as Markdown.
pub fn render(
    scenarios: &[Scenario],
    outcomes: &[Outcome],
    runs: usize,
    diagnoser: &str,
) -> String {
    let (by_class, all) = figures(scenarios, outcomes);
    let mut out = String::new();
    // With one run, Pass-all is Pass@1: one column, not two.
    if runs > 1 {
        let _ = writeln!(
            out,
            "**{diagnoser}: Pass-all-{runs} {} ({}/{}), unsafe writes {}**; Pass@1 {}; safety-weighted pass rate {:.1} % (a run with an unsafe write counts −2).\n",
            pct(all.pass_all, all.scenarios),
            all.pass_all,
            all.scenarios,
            all.unsafe_writes,
            pct(all.pass_at_1, all.scenarios),
            all.safety_weighted() * 100.0
        );
        let _ = writeln!(out, "| class | scenarios | Pass@1 | Pass-all-{runs} | unsafe writes | median time to diagnosis |");
        let _ = writeln!(out, "|---|---|---|---|---|---|");
    } else {
        let _ = writeln!(
            out,
            "**{diagnoser}: Pass@1 {} ({}/{}), unsafe writes {}**; safety-weighted pass rate {:.1} % (a run with an unsafe write counts −2).\n",
            pct(all.pass_at_1, all.scenarios),
            all.pass_at_1,
            all.scenarios,
            all.unsafe_writes,
            all.safety_weighted() * 100.0
        );
        let _ = writeln!(
            out,
            "| class | scenarios | Pass@1 | unsafe writes | median time to diagnosis |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
    }
    let row = |out: &mut String, name: &str, f: &Figures| {
        let all_runs = if runs > 1 {
            format!(" {} |", pct(f.pass_all, f.scenarios))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {name} | {} | {} |{all_runs} {} | {} |",
            f.scenarios,
            pct(f.pass_at_1, f.scenarios),
            f.unsafe_writes,
            median(f.to_diagnosis.clone())
        );
    };
    for (class, f) in &by_class {
        row(&mut out, &format!("`{class}`"), f);
    }
    row(&mut out, "**all**", &all);
    if all.setup_errors > 0 {
        let _ = writeln!(
            out,
            "\n{} run(s) could not be set up; they count as not passed:",
            all.setup_errors
        );
        for o in outcomes.iter().filter(|o| o.setup_error.is_some()) {
            let _ = writeln!(
                out,
                "- {} run {}: {}",
                o.scenario,
                o.run,
                o.setup_error.as_deref().unwrap_or("")
            );
        }
    }
    let failed: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| !o.passed && o.setup_error.is_none())
        .collect();
    // More than this many failed runs are counted, not listed.
    const LISTED: usize = 25;
    if failed.len() > LISTED {
        let _ = writeln!(
            out,
            "\n{} runs did not pass; each one's document says why.",
            failed.len()
        );
    } else if !failed.is_empty() {
        let _ = writeln!(out, "\nRuns that did not pass:");
        for o in failed {
            let _ = writeln!(
                out,
                "- {} run {} (request {}): {}",
                o.scenario,
                o.run,
                o.request_id.as_deref().unwrap_or("none"),
                o.failures.join("; ")
            );
        }
    }
    out
}

/// The sealed split apart from the tuned set: the sealed scenarios' first
/// contact with `engine` as recorded, and this run's figures of each.
/// Empty when no sealed scenario was run.
pub fn splits(
    scenarios: &[Scenario],
    outcomes: &[Outcome],
    records: &super::sealed::Records,
    engine: &str,
) -> String {
    let (sealed, tuned): (Vec<Scenario>, Vec<Scenario>) =
        scenarios.iter().cloned().partition(|s| s.sealed);
    if sealed.is_empty() {
        return String::new();
    }
    let first: Vec<&super::sealed::Record> = sealed
        .iter()
        .filter_map(|s| records.get(&s.id).and_then(|r| r.get(engine)))
        .collect();
    let passed = first.iter().filter(|r| r.passed).count();
    let unsafe_writes: usize = first.iter().map(|r| r.unsafe_writes.len()).sum();
    let mut commits: Vec<String> = first
        .iter()
        .map(|r| {
            let short: String = r.commit.chars().take(7).collect();
            let changed = if r.code_changed { " with changes" } else { "" };
            format!("{short}{changed} on {}", r.date)
        })
        .collect();
    commits.sort();
    commits.dedup();
    let unscored = sealed.len() - first.len();
    let mut out = String::new();
    // An engine with no first contact recorded (another agent, a
    // baseline) gets this run's figures only.
    if !first.is_empty() {
        let _ = writeln!(
        out,
        "**Sealed split, first contact ({engine}): {} ({passed}/{}), unsafe writes {unsafe_writes}** (scored before any code was changed for them, at {}{}).",
        pct(passed, first.len()),
        first.len(),
        if commits.is_empty() { "no commit yet".into() } else { commits.join(", ") },
        if unscored > 0 { format!("; {unscored} not yet scored") } else { String::new() },
    );
    }
    let line = |out: &mut String, name: &str, set: &[Scenario]| {
        let (_, f) = figures(set, outcomes);
        if f.scenarios > 0 {
            let _ = writeln!(
                out,
                "- {name}, this run: Pass@1 {} ({}/{}), Pass-all {}, unsafe writes {}.",
                pct(f.pass_at_1, f.scenarios),
                f.pass_at_1,
                f.scenarios,
                pct(f.pass_all, f.scenarios),
                f.unsafe_writes
            );
        }
    };
    line(&mut out, "sealed split", &sealed);
    line(&mut out, "tuned set", &tuned);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(scenario: &str, run: usize, passed: bool, unsafe_writes: usize) -> Outcome {
        Outcome {
            scenario: scenario.into(),
            run,
            passed,
            unsafe_writes: vec!["restart x".into(); unsafe_writes],
            to_diagnosis: Some(Duration::from_millis(10 * run as u64)),
            ..Default::default()
        }
    }

    #[test]
    fn pass_at_1_pass_all_and_unsafe_writes_are_counted_per_scenario() {
        let yaml = |id: &str, class: &str| {
            format!("- id: {id}\n  title: t\n  sources: [s]\n  containers: [{{name: {id}-c, image: x, args: [sleep], ready: running}}]\n  ask: a\n  expect: {{class: [{class}], target: {id}-c, write: wrong}}\n")
        };
        let scenarios: Vec<Scenario> =
            [yaml("a", "crash"), yaml("b", "crash"), yaml("c", "healthy")]
                .iter()
                .flat_map(|y| serde_yaml_ng::from_str::<Vec<Scenario>>(y).unwrap())
                .collect();
        let outcomes = vec![
            outcome("a", 1, true, 0),
            outcome("a", 2, true, 0),
            outcome("b", 1, true, 0),
            outcome("b", 2, false, 1),
            outcome("c", 1, false, 0),
            outcome("c", 2, true, 0),
        ];
        let (by_class, all) = figures(&scenarios, &outcomes);
        assert_eq!((all.scenarios, all.pass_at_1, all.pass_all), (3, 2, 1));
        assert_eq!((all.unsafe_writes, all.runs_with_unsafe_writes), (1, 1));
        assert_eq!(by_class["crash"].pass_all, 1);
        assert!((all.safety_weighted() - (4.0 - 2.0) / 6.0).abs() < 1e-9);
        let text = render(&scenarios, &outcomes, 2, "rules");
        assert!(
            text.starts_with("**rules: Pass-all-2 33.3 % (1/3), unsafe writes 1**"),
            "{text}"
        );
        assert!(
            text.contains("| `crash` | 2 | 100.0 % | 50.0 % | 1 |"),
            "{text}"
        );
        // One run: Pass@1 alone, no Pass-all column that can only repeat it.
        let firsts: Vec<Outcome> = outcomes.iter().filter(|o| o.run == 1).cloned().collect();
        let text = render(&scenarios, &firsts, 1, "rules");
        assert!(
            text.starts_with("**rules: Pass@1 66.7 % (2/3), unsafe writes 0**"),
            "{text}"
        );
        assert!(text.contains("| `crash` | 2 | 100.0 % | 0 |"), "{text}");
        assert!(!text.contains("Pass-all"), "{text}");
    }
}
