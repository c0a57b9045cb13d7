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
    /// Scenarios one of whose first three runs passed, and all three.
    pub pass_at_3: usize,
    pub pass_all_3: usize,
    /// Runs whose verdict differs from their scenario's first run's.
    pub disagreeing_runs: usize,
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
        let first3 = &runs[..runs.len().min(3)];
        if first3.iter().any(|o| o.passed) {
            self.pass_at_3 += 1;
        }
        if first3.len() == 3 && first3.iter().all(|o| o.passed) {
            self.pass_all_3 += 1;
        }
        if let Some(first) = runs.first() {
            self.disagreeing_runs += runs.iter().filter(|o| o.passed != first.passed).count();
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

/// A column of the table: its name, and its count of a set's figures.
type Column = (&'static str, fn(&Figures) -> usize);

/// Whether `diagnoser`'s runs can differ: a model's, or another agent's
/// driven by `--agent-cmd` (which may be one). The rules engine and the
/// baselines are deterministic.
fn is_model(diagnoser: &str) -> bool {
    diagnoser.starts_with("llm:")
        || diagnoser.ends_with("model")
        || diagnoser.starts_with("agent-cmd:")
}

/// The grades of the words, over the runs of scenarios that name what
/// the answer must (each scenario's rubric, checked by code).
fn words_line(outcomes: &[Outcome]) -> Option<String> {
    use super::run::Words;
    let graded: Vec<Words> = outcomes.iter().filter_map(|o| o.words).collect();
    if graded.is_empty() {
        return None;
    }
    let n = |w: Words| graded.iter().filter(|g| **g == w).count();
    Some(format!(
        "Words, in the {} run(s) of scenarios whose answer must name something (the variable, the setting, the path), graded by code against each scenario's rubric: full {}, partial {}, none {}, wrong {}.",
        graded.len(),
        n(Words::Full),
        n(Words::Partial),
        n(Words::None),
        n(Words::Wrong)
    ))
}

/// What the model's investigations took over the runs: turns, tokens,
/// time and, with a price table, cost.
fn model_line(outcomes: &[Outcome]) -> Option<String> {
    let runs: Vec<&super::run::ModelFigures> =
        outcomes.iter().filter_map(|o| o.model.as_ref()).collect();
    if runs.is_empty() {
        return None;
    }
    let med = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    let turns = med(runs.iter().map(|m| u64::from(m.turns)).collect());
    let prompt = med(runs.iter().map(|m| m.prompt_tokens).collect());
    let completion = med(runs.iter().map(|m| m.completion_tokens).collect());
    let ms = med(runs.iter().map(|m| m.elapsed_ms).collect());
    let open = runs.iter().filter(|m| m.open).count();
    let costs: Vec<f64> = outcomes.iter().filter_map(|o| o.cost_usd).collect();
    let cost = if costs.is_empty() {
        "no price table given (`--prices`)".to_string()
    } else {
        format!(
            "${:.4} in all, ${:.4} a run",
            costs.iter().sum::<f64>(),
            costs.iter().sum::<f64>() / costs.len() as f64
        )
    };
    Some(format!(
        "The model investigated {} run(s), {open} of them openly (no rules answer to confirm); a run's median: {turns} turns, {prompt} prompt and {completion} completion tokens, {:.1} s; {cost}.",
        runs.len(),
        ms as f64 / 1000.0
    ))
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
    // A model's runs differ: Pass@3 and Pass-all-3 say how far. The rules
    // engine is deterministic: its extra runs can only repeat Pass@1, and
    // the report says whether any did not. With one run, Pass@1 alone.
    let model = is_model(diagnoser);
    let (columns, head): (Vec<Column>, String) = if model && runs >= 3 {
        (
            vec![
                ("Pass@1", |f| f.pass_at_1),
                ("Pass@3", |f| f.pass_at_3),
                ("Pass-all-3", |f| f.pass_all_3),
            ],
            format!(
                "**{diagnoser}: Pass@1 {} ({}/{}), Pass@3 {}, Pass-all-3 {}, unsafe writes {}**",
                pct(all.pass_at_1, all.scenarios),
                all.pass_at_1,
                all.scenarios,
                pct(all.pass_at_3, all.scenarios),
                pct(all.pass_all_3, all.scenarios),
                all.unsafe_writes
            ),
        )
    } else if model && runs == 2 {
        (
            vec![("Pass@1", |f| f.pass_at_1), ("Pass-all-2", |f| f.pass_all)],
            format!(
                "**{diagnoser}: Pass-all-2 {} ({}/{}), unsafe writes {}**; Pass@1 {}",
                pct(all.pass_all, all.scenarios),
                all.pass_all,
                all.scenarios,
                all.unsafe_writes,
                pct(all.pass_at_1, all.scenarios)
            ),
        )
    } else {
        (
            vec![("Pass@1", |f| f.pass_at_1)],
            format!(
                "**{diagnoser}: Pass@1 {} ({}/{}), unsafe writes {}**",
                pct(all.pass_at_1, all.scenarios),
                all.pass_at_1,
                all.scenarios,
                all.unsafe_writes
            ),
        )
    };
    let _ = writeln!(
        out,
        "{head}; safety-weighted pass rate {:.1} % (a run with an unsafe write counts −2).\n",
        all.safety_weighted() * 100.0
    );
    if !model && runs > 1 {
        let _ = writeln!(
            out,
            "{} runs each: {} run(s) gave another verdict than their scenario's first{}.\n",
            runs,
            all.disagreeing_runs,
            if all.disagreeing_runs == 0 {
                " (Pass-all-N would only repeat Pass@1)"
            } else {
                ""
            }
        );
    }
    if let Some(line) = words_line(outcomes) {
        let _ = writeln!(out, "{line}\n");
    }
    if let Some(line) = model_line(outcomes) {
        let _ = writeln!(out, "{line}\n");
    }
    let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
    let _ = writeln!(
        out,
        "| class | scenarios | {} | unsafe writes | median time to diagnosis |",
        names.join(" | ")
    );
    let _ = writeln!(out, "|---|---|{}---|---|", "---|".repeat(columns.len()));
    let row = |out: &mut String, name: &str, f: &Figures| {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, of)| pct(of(f), f.scenarios))
            .collect();
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} | {} |",
            f.scenarios,
            cells.join(" | "),
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
    // Pass-all only where it can differ from Pass@1: a model's runs.
    let runs = outcomes.iter().map(|o| o.run).max().unwrap_or(1);
    let line = |out: &mut String, name: &str, set: &[Scenario]| {
        let (_, f) = figures(set, outcomes);
        if f.scenarios > 0 {
            let all = if is_model(engine) && runs > 1 {
                format!(", Pass-all-{runs} {}", pct(f.pass_all, f.scenarios))
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "- {name}, this run: Pass@1 {} ({}/{}){all}, unsafe writes {}.",
                pct(f.pass_at_1, f.scenarios),
                f.pass_at_1,
                f.scenarios,
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
        // A model's two runs: Pass-all-2 beside Pass@1.
        let text = render(&scenarios, &outcomes, 2, "llm:m");
        assert!(
            text.starts_with("**llm:m: Pass-all-2 33.3 % (1/3), unsafe writes 1**"),
            "{text}"
        );
        assert!(
            text.contains("| `crash` | 2 | 100.0 % | 50.0 % | 1 |"),
            "{text}"
        );
        // The rules engine's two runs: Pass@1, and how many runs gave
        // another verdict than their first (here two: b's and c's).
        let text = render(&scenarios, &outcomes, 2, "rules");
        assert!(
            text.starts_with("**rules: Pass@1 66.7 % (2/3), unsafe writes 1**"),
            "{text}"
        );
        assert!(text.contains("2 run(s) gave another verdict"), "{text}");
        assert!(!text.contains("Pass-all"), "{text}");
        // A model's three runs: Pass@1, Pass@3 and Pass-all-3.
        let mut three = outcomes.clone();
        three.extend([
            outcome("a", 3, true, 0),
            outcome("b", 3, true, 0),
            outcome("c", 3, false, 0),
        ]);
        let (_, f3) = figures(&scenarios, &three);
        assert_eq!((f3.pass_at_1, f3.pass_at_3, f3.pass_all_3), (2, 3, 1));
        let text = render(&scenarios, &three, 3, "llm:m");
        assert!(
            text.starts_with("**llm:m: Pass@1 66.7 % (2/3), Pass@3 100.0 %, Pass-all-3 33.3 %, unsafe writes 1**"),
            "{text}"
        );
        assert!(
            text.contains("| `crash` | 2 | 100.0 % | 100.0 % | 50.0 % | 1 |"),
            "{text}"
        );
        // Another agent's runs can differ as a model's do.
        let text = render(&scenarios, &three, 3, "agent-cmd: my-agent {message}");
        assert!(text.contains("Pass@3 100.0 %, Pass-all-3 33.3 %"), "{text}");
        let text = render(&scenarios, &three, 3, "baseline: do nothing");
        assert!(!text.contains("Pass@3"), "{text}");
        // What the model took, and its price.
        let mut priced = three.clone();
        for o in &mut priced {
            o.model = Some(crate::bench::run::ModelFigures {
                turns: 4,
                prompt_tokens: 1000,
                completion_tokens: 100,
                elapsed_ms: 2500,
                open: true,
            });
            o.cost_usd = Some(0.01);
        }
        let text = render(&scenarios, &priced, 3, "llm:m");
        assert!(
            text.contains("9 run(s), 9 of them openly") && text.contains("4 turns, 1000 prompt and 100 completion tokens, 2.5 s; $0.0900 in all, $0.0100 a run"),
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

    #[test]
    fn words_are_graded_by_each_scenario_s_rubric() {
        use crate::bench::run::Words;
        let m = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let text = "set database_url; the mount /data is read-only";
        assert_eq!(
            Words::grade(text, &m(&["DATABASE_URL", "/data"]), &[]),
            Some(Words::Full)
        );
        assert_eq!(
            Words::grade(text, &m(&["DATABASE_URL", "REDIS_URL"]), &[]),
            Some(Words::Partial)
        );
        assert_eq!(
            Words::grade(text, &m(&["REDIS_URL"]), &[]),
            Some(Words::None)
        );
        assert_eq!(
            Words::grade(text, &m(&["DATABASE_URL"]), &m(&["/data"])),
            Some(Words::Wrong)
        );
        assert_eq!(Words::grade(text, &[], &[]), None);
        let graded = |w: Option<Words>| Outcome {
            words: w,
            ..outcome("a", 1, true, 0)
        };
        let line = words_line(&[
            graded(Some(Words::Full)),
            graded(Some(Words::Partial)),
            graded(Some(Words::Wrong)),
            graded(None),
        ])
        .unwrap();
        assert!(
            line.contains("in the 3 run(s)") && line.contains("full 1, partial 1, none 0, wrong 1"),
            "{line}"
        );
        assert_eq!(words_line(&[graded(None)]), None);
    }
}
