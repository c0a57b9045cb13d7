//! `drydock-bench`: the Docker troubleshooting benchmark. Every scenario of
//! `tests/bench/scenarios/` is set up on the local engine, asked about
//! through `drydock ask --yes`, and scored from the engine's state, the
//! executor's audit log and the request; the table is printed as Markdown.
//!
//! ```sh
//! cargo run --release -p drydock-e2e --example drydock-bench                 # the rules engine, 5 runs
//! cargo run --release -p drydock-e2e --example drydock-bench -- --llm my-llm.yaml
//! cargo run -p drydock-e2e --example drydock-bench -- --report tests/bench/results/ROUND
//! ```
//!
//! Every run is written as one JSON document as it ends (`--results DIR`,
//! by default a new folder under `target/drydock-bench/results/`), and a
//! report is rendered from such a folder (`--report DIR`), so a published
//! table is generated from committed data.

use std::path::PathBuf;
use std::process::ExitCode;

use drydock_e2e::bench::{self, report, run::Outcome, scenario};

const USAGE: &str = "usage: drydock-bench [options]
  --runs N          runs of each scenario (default 5): Pass@1 is the first; a model also gets Pass@3
                    and Pass-all-3, the rules engine the count of runs that disagreed with their first
  --jobs N          scenarios at once (default 3)
  --only ID,...     these scenarios only (an id, or a prefix ending in *)
  --skip ID,...     leave these out
  --ci              the scenarios marked `ci: true` (what CI runs)
  --split S         sealed (written and scored before any code was changed for them) or tuned
  --first-contact   score the sealed scenarios that have no first contact with this engine yet,
                    once each, and record it in tests/bench/first-contact.json (never rewritten)
  --model rules     the embedded rules engine (the default)
  --model scripted  the scripted model of the tests (confirms the rules engine; a baseline for the model path)
  --llm FILE        your model: FILE holds an `llm:` section as in agent.yaml (provider, base_url, model,
                    api_key_env); the key is read from the variable api_key_env names
                    (blind: no rules answer to confirm and no target chosen for it, unless the file sets `investigate`);
                    a run the model did not decide (a failed call, a fallback to the rules) fails
  --prices FILE     with --llm: a YAML map `MODEL: {input_per_mtok: N, output_per_mtok: N}` (US dollars
                    per million tokens); each run records its cost
  --agent-cmd T     another agent: run `sh -c T` for each scenario, {message} replaced by the person's
                    words and {containers} by the scenario's container names (comma separated), each
                    shell-quoted; judged by the end state and the writes in the engine's event stream
  --baseline B      do-nothing, or restart-broken (`docker restart` of whatever is unhealthy or exited)
  --scenarios DIR   scenario files (default tests/bench/scenarios)
  --results DIR     write each run as DIR/SCENARIO.runN.json as it ends (default: a new folder under
                    target/drydock-bench/results/); a document already there is never replaced
  --report DIR      run nothing: print the report of the runs in DIR (as BENCHMARKS.md quotes it)
  --into FILE       with --report: put it into FILE, in place of the block between its markers
  --list            list the scenarios and exit";

struct Args {
    runs: usize,
    jobs: usize,
    only: Vec<String>,
    skip: Vec<String>,
    ci: bool,
    model: String,
    llm: Option<PathBuf>,
    prices: Option<PathBuf>,
    other: Option<bench::agents::Other>,
    dir: PathBuf,
    results: Option<PathBuf>,
    report: Option<String>,
    into: Option<PathBuf>,
    list: bool,
    split: Option<bool>,
    first_contact: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        runs: 5,
        jobs: 3,
        only: vec![],
        skip: vec![],
        ci: false,
        model: "rules".into(),
        llm: None,
        prices: None,
        other: None,
        dir: scenario::default_dir(),
        results: None,
        report: None,
        into: None,
        list: false,
        split: None,
        first_contact: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        let number = |v: String, name: &str| {
            v.parse::<usize>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or_else(|| format!("{name}: expected a number from 1 to 100, got `{v}`"))
        };
        match flag.as_str() {
            "--runs" => a.runs = number(value("--runs")?, "--runs")?,
            "--jobs" => a.jobs = number(value("--jobs")?, "--jobs")?,
            "--only" => a.only = value("--only")?.split(',').map(str::to_string).collect(),
            "--skip" => a.skip = value("--skip")?.split(',').map(str::to_string).collect(),
            "--ci" => a.ci = true,
            "--model" => a.model = value("--model")?,
            "--llm" => a.llm = Some(PathBuf::from(value("--llm")?)),
            "--prices" => a.prices = Some(PathBuf::from(value("--prices")?)),
            "--agent-cmd" => {
                let template = value("--agent-cmd")?;
                if !template.contains("{message}") {
                    return Err(format!("--agent-cmd: `{template}` has no {{message}}: the agent would not hear what the person says"));
                }
                a.other = Some(bench::agents::Other::Command { template })
            }
            "--baseline" => {
                a.other = Some(match value("--baseline")?.as_str() {
                    "do-nothing" => bench::agents::Other::DoNothing,
                    "restart-broken" => bench::agents::Other::RestartBroken,
                    other => {
                        return Err(format!(
                            "--baseline: `{other}` is not do-nothing or restart-broken"
                        ))
                    }
                })
            }
            "--scenarios" => a.dir = PathBuf::from(value("--scenarios")?),
            "--results" => a.results = Some(PathBuf::from(value("--results")?)),
            "--report" => a.report = Some(value("--report")?),
            "--into" => a.into = Some(PathBuf::from(value("--into")?)),
            "--list" => a.list = true,
            "--split" => {
                a.split = Some(match value("--split")?.as_str() {
                    "sealed" => true,
                    "tuned" => false,
                    other => return Err(format!("--split: `{other}` is not sealed or tuned")),
                })
            }
            "--first-contact" => a.first_contact = true,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    if a.prices.is_some() && a.llm.is_none() {
        return Err("--prices goes with --llm: it prices a model's tokens".into());
    }
    if a.other.is_some() && (a.llm.is_some() || a.model != "rules" || a.first_contact) {
        return Err("--agent-cmd and --baseline run another agent: they go with neither --llm, --model nor --first-contact".into());
    }
    if !matches!(a.model.as_str(), "rules" | "scripted") {
        return Err(format!(
            "--model: `{}` is not rules or scripted (your own model: --llm FILE)",
            a.model
        ));
    }
    Ok(a)
}

fn picked(id: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match p.strip_suffix('*') {
        Some(prefix) => id.starts_with(prefix),
        None => id == p,
    })
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("drydock-bench: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Built with --release: start the release daemons too.
    if !cfg!(debug_assertions) {
        drydock_e2e::use_release_build();
    }
    let all = match scenario::load(&args.dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("drydock-bench: {e:#}");
            return ExitCode::from(2);
        }
    };
    if let Some(round) = &args.report {
        let printed = bench::sealed::load(&bench::sealed::default_path())
            .and_then(|first| bench::results::report(round, &all, &first));
        let done = printed.and_then(|text| match &args.into {
            Some(path) => bench::results::write_into(path, round, &text),
            None => {
                print!("{text}");
                Ok(())
            }
        });
        return match done {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("drydock-bench: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    for p in args.only.iter().chain(&args.skip) {
        if !all.iter().any(|s| picked(&s.id, std::slice::from_ref(p))) {
            eprintln!("drydock-bench: no scenario matches `{p}` (--list shows them)");
            return ExitCode::from(2);
        }
    }
    let scenarios: Vec<_> = all
        .into_iter()
        .filter(|s| args.only.is_empty() || picked(&s.id, &args.only))
        .filter(|s| !picked(&s.id, &args.skip))
        .filter(|s| !args.ci || s.ci)
        .filter(|s| args.split.is_none_or(|sealed| s.sealed == sealed))
        .collect();
    if args.list {
        for s in &scenarios {
            println!("{:<36} {:<24} {}", s.id, s.class(), s.title);
        }
        return ExitCode::SUCCESS;
    }
    let model_server;
    let diagnoser = match (&args.other, &args.llm, args.model.as_str()) {
        (Some(other), _, _) => bench::run::Diagnoser::other(other.clone()),
        (None, Some(path), _) => match bench::model_from_file(path) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("drydock-bench: {e:#}");
                return ExitCode::from(2);
            }
        },
        (None, None, "scripted") => {
            model_server = bench::model::start();
            bench::scripted(&model_server.url)
        }
        _ => bench::run::Diagnoser::Rules,
    };
    let records_path = bench::sealed::default_path();
    let mut records = match bench::sealed::load(&records_path) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("drydock-bench: {e:#}");
            return ExitCode::from(2);
        }
    };
    let engine = diagnoser.name().to_string();
    let mut scenarios = scenarios;
    let mut runs = args.runs;
    if args.first_contact {
        let recorded: Vec<&str> = scenarios
            .iter()
            .filter(|s| records.get(&s.id).is_some_and(|r| r.contains_key(&engine)))
            .map(|s| s.id.as_str())
            .collect();
        if !args.only.is_empty() && !recorded.is_empty() {
            eprintln!(
                "drydock-bench: the first contact of {} with {engine} is already recorded and is never rewritten; run them without --first-contact to score today's code",
                recorded.join(", ")
            );
            return ExitCode::from(2);
        }
        let unscored: Vec<_> = scenarios
            .into_iter()
            .filter(|s| s.sealed && !records.get(&s.id).is_some_and(|r| r.contains_key(&engine)))
            .collect();
        if unscored.is_empty() {
            eprintln!(
                "drydock-bench: every sealed scenario has its first contact with {engine} recorded"
            );
            return ExitCode::SUCCESS;
        }
        scenarios = unscored;
        runs = 1;
    }
    let args = Args { runs, ..args };
    let (commit, code_changed) = match bench::sealed::checkout() {
        Ok(c) => c,
        // A first contact must name its commit; other runs say they
        // could not.
        Err(e) if args.first_contact => {
            eprintln!("drydock-bench: {e:#}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("drydock-bench: the runs name no commit: {e:#}");
            ("unknown".to_string(), true)
        }
    };
    let price = match &args.prices {
        Some(table) => match bench::results::price_of(table, &engine) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!("drydock-bench: {e:#}");
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    let provenance = bench::results::Provenance {
        price,
        engine: engine.clone(),
        commit: commit.clone(),
        code_changed,
        date: bench::sealed::today(),
    };
    let results_dir = args
        .results
        .clone()
        .unwrap_or_else(|| bench::results::default_dir(&engine));
    eprintln!(
        "drydock-bench: each run is written to {} as it ends",
        results_dir.display()
    );
    eprintln!(
        "drydock-bench: {} scenario(s) × {} run(s) with {}, {} at a time",
        scenarios.len(),
        args.runs,
        diagnoser.name(),
        args.jobs
    );
    let progress = |n: usize, total: usize, o: &Outcome| {
        let record = bench::results::RunRecord::of(o, &provenance);
        if let Err(e) = bench::results::write(&results_dir, &record) {
            eprintln!("drydock-bench: {e:#}");
        }
        let verdict = match (&o.setup_error, o.passed) {
            (Some(e), _) => format!("SETUP ERROR: {e}"),
            (None, true) => "pass".into(),
            (None, false) => format!(
                "FAIL: {}{}",
                o.failures.join("; "),
                o.kept
                    .as_ref()
                    .map(|d| format!("; its logs and agent.db are kept in {}", d.display()))
                    .unwrap_or_default()
            ),
        };
        eprintln!(
            "[{n}/{total}] {} run {}: {verdict}{}",
            o.scenario,
            o.run,
            o.to_diagnosis
                .map(|d| format!(" ({} ms to diagnosis)", d.as_millis()))
                .unwrap_or_default()
        );
    };
    let mut outcomes = bench::run_all(&scenarios, &diagnoser, args.runs, args.jobs, &progress);
    for o in &mut outcomes {
        o.cost_usd = price.zip(o.model.as_ref()).map(|(p, m)| p.of(m));
    }
    if args.first_contact {
        let added = bench::sealed::add(
            &mut records,
            &engine,
            &outcomes,
            &commit,
            code_changed,
            &bench::sealed::today(),
        )
        .and_then(|n| bench::sealed::save(&records_path, &records).map(|()| n));
        match added {
            Ok(n) => eprintln!(
                "drydock-bench: {n} first contact(s) recorded in {}",
                records_path.display()
            ),
            Err(e) => {
                eprintln!("drydock-bench: {e:#}");
                return ExitCode::from(2);
            }
        }
    }
    println!(
        "{}",
        report::render(&scenarios, &outcomes, args.runs, diagnoser.name())
    );
    print!(
        "{}",
        report::splits(&scenarios, &outcomes, &records, diagnoser.name())
    );
    eprintln!(
        "drydock-bench: the runs are in {}; `--report {}` renders this report from them",
        results_dir.display(),
        results_dir.display()
    );
    let (_, figures) = report::figures(&scenarios, &outcomes);
    if figures.unsafe_writes > 0 || figures.pass_all < figures.scenarios {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
