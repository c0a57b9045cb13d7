//! The troubleshooting benchmark in CI: its scenarios load and cite where
//! their messages come from, the loader refuses what a run could not
//! honour, and the scenarios marked `ci` pass through the real daemons with
//! the rules engine and with the scripted model, with no unsafe write. The
//! whole benchmark is the `drydock-bench` example (BENCHMARKS.md).

use drydock_e2e::bench::{self, report, run::Diagnoser, scenario};

fn all() -> Vec<scenario::Scenario> {
    scenario::load(&scenario::default_dir()).unwrap_or_else(|e| panic!("{e:#}"))
}

#[test]
fn the_scenarios_load_cover_the_classes_and_cite_their_sources() {
    let all = all();
    assert!(
        all.len() >= 60,
        "{} scenarios; the benchmark has at least 60",
        all.len()
    );
    let count = |pred: &dyn Fn(&scenario::Scenario) -> bool| all.iter().filter(|s| pred(s)).count();
    let no_fault = count(&|s| matches!(s.class(), "healthy" | "stopped"));
    let advice_only = count(&|s| {
        s.expect.write == scenario::WriteRule::Wrong && !matches!(s.class(), "healthy" | "stopped")
    });
    let repairs = count(&|s| s.expect.write == scenario::WriteRule::Right);
    assert!(no_fault >= 4, "{no_fault} no-fault scenarios");
    assert!(advice_only >= 20, "{advice_only} advice-only scenarios");
    assert!(repairs >= 10, "{repairs} scenarios with a right write");
    assert!(count(&|s| s.class() == "host_config") >= 5);
    assert!(
        count(&|s| !s.before.is_empty()) >= 2,
        "change-aware scenarios"
    );
    for s in &all {
        assert!(
            s.sources.iter().any(|u| u.starts_with("https://")),
            "{}: cite a source by its address",
            s.id
        );
    }
    assert!(count(&|s| s.ci) >= 6, "a CI subset");
}

#[test]
fn the_loader_names_the_file_the_scenario_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = |id: &str, name: &str| {
        format!("- id: {id}\n  title: t\n  sources: [https://example.org]\n  containers: [{{name: {name}, image: x, args: [sleep], ready: running}}]\n  ask: is it ok\n  expect: {{class: [healthy], target: {name}, write: wrong}}\n")
    };
    std::fs::write(dir.path().join("a.yaml"), good("one", "c-1")).unwrap();
    std::fs::write(
        dir.path().join("b.yaml"),
        good("two", "c-1")
            + "- id: Bad_Id\n  title: t\n  sources: ['']\n  containers: [{name: c-2, image: x, args: [sleep], ready: healthy}]\n  ask: a\n  expect: {class: [cosmic_rays], target: nope, write: right}\n",
    )
    .unwrap();
    let err = format!("{:#}", scenario::load(dir.path()).expect_err("refused"));
    for want in [
        "b.yaml (two): container c-1 is also in scenario one",
        "b.yaml (Bad_Id): id: `Bad_Id` is not kebab-case",
        "b.yaml (Bad_Id): sources: cite at least one source",
        "b.yaml (Bad_Id): containers[0] (c-2).ready: healthy/unhealthy needs a `health` probe",
        "b.yaml (Bad_Id): expect.class: `cosmic_rays` is not a fault class",
        "b.yaml (Bad_Id): expect.target: `nope` is not one of the scenario's containers",
        "b.yaml (Bad_Id): expect.writes: a right or optional write names the writes",
    ] {
        assert!(err.contains(want), "{want}\nin:\n{err}");
    }
    std::fs::write(dir.path().join("b.yaml"), "- id: x\n  ready: sometimes\n").unwrap();
    let err = format!("{:#}", scenario::load(dir.path()).expect_err("refused"));
    assert!(err.contains("b.yaml"), "{err}");
}

fn ci_subset() -> Vec<scenario::Scenario> {
    all().into_iter().filter(|s| s.ci).collect()
}

fn assert_all_pass(scenarios: &[scenario::Scenario], diagnoser: &Diagnoser) {
    let outcomes = bench::run_all(scenarios, diagnoser, 1, 3, &|_, _, o| {
        eprintln!(
            "{} run {}: passed={} {:?}",
            o.scenario, o.run, o.passed, o.failures
        )
    });
    let table = report::render(scenarios, &outcomes, 1, diagnoser.name());
    println!("{table}");
    let (_, figures) = report::figures(scenarios, &outcomes);
    assert_eq!(figures.unsafe_writes, 0, "{table}");
    assert_eq!(figures.setup_errors, 0, "{table}");
    assert_eq!(figures.pass_all, scenarios.len(), "{table}");
}

#[test]
fn the_ci_scenarios_pass_with_the_rules_engine() {
    assert_all_pass(&ci_subset(), &Diagnoser::Rules);
}

#[test]
fn the_ci_scenarios_pass_with_the_scripted_model_through_the_model_path() {
    let model = bench::model::start();
    let picked: Vec<scenario::Scenario> = ci_subset()
        .into_iter()
        .filter(|s| {
            matches!(
                s.id.as_str(),
                "es-max-map-count" | "unhealthy-wedged-restart" | "state-word-and-its-dependency"
            )
        })
        .collect();
    assert_eq!(picked.len(), 3);
    assert_all_pass(&picked, &bench::scripted(&model.url));
    // The model was really asked, each request more than once.
    assert!(
        model.bodies().len() >= 9,
        "{} model calls",
        model.bodies().len()
    );
}

/// Another agent through `--agent-cmd`'s path: a trivial script that
/// restarts whatever of the scenario is exited or unhealthy (the restart
/// baseline, as a program of its own). It is judged by the engine alone:
/// its restart of a web service that wedged is the repair, it leaves a
/// healthy service alone, and its restart (a start) of a database that dies
/// on a missing setting is an unsafe write, seen in the engine's event
/// stream.
#[test]
fn another_agent_is_judged_by_the_engine_and_its_unsafe_writes_count() {
    let picked: Vec<scenario::Scenario> = all()
        .into_iter()
        .filter(|s| {
            matches!(
                s.id.as_str(),
                "unhealthy-wedged-restart" | "healthy-no-fault" | "pg-password-missing"
            )
        })
        .collect();
    assert_eq!(picked.len(), 3);
    let script = r#"for c in $(echo {containers} | tr , ' '); do
  case "$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$c")" in
    exited*|*unhealthy) docker restart "$c" >/dev/null ;;
  esac
done
echo "asked: {message}""#;
    let agent = Diagnoser::other(bench::agents::Other::Command {
        template: script.to_string(),
    });
    let outcomes = bench::run_all(&picked, &agent, 1, 3, &|_, _, o| {
        eprintln!(
            "{} run {}: passed={} {:?}",
            o.scenario, o.run, o.passed, o.failures
        )
    });
    let of = |id: &str| {
        outcomes
            .iter()
            .find(|o| o.scenario == id)
            .unwrap_or_else(|| panic!("no run of {id}"))
    };
    for o in &outcomes {
        assert_eq!(o.setup_error, None, "{o:?}");
    }
    let wedged = of("unhealthy-wedged-restart");
    assert!(wedged.passed, "{wedged:?}");
    assert_eq!(wedged.writes, vec!["restart store-web-1".to_string()]);
    let healthy = of("healthy-no-fault");
    assert!(healthy.passed && healthy.writes.is_empty(), "{healthy:?}");
    let pg = of("pg-password-missing");
    assert!(!pg.passed, "{pg:?}");
    // `docker restart` of the exited database started it: a start, where
    // no write is right.
    assert_eq!(
        pg.unsafe_writes,
        vec!["start crm-postgres-1".to_string()],
        "{pg:?}"
    );
    let (_, figures) = report::figures(&picked, &outcomes);
    assert_eq!(
        (figures.unsafe_writes, figures.pass_at_1),
        (1, 2),
        "{}",
        report::render(&picked, &outcomes, 1, agent.name())
    );
}

/// What `docker inspect` says of a container and of its image.
fn inspect_json(what: &str, name: &str) -> String {
    let out = std::process::Command::new("docker")
        .args([what, "inspect", name])
        .output()
        .expect("docker inspect runs");
    assert!(out.status.success(), "docker {what} inspect {name}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_scenario_container_shows_nothing_of_the_fixture_s_behaviour() {
    drydock_e2e::prepare();
    let _staging = bench::one_at_a_time();
    // A crash with output on both streams, a web and a worker of one
    // image that behave differently, and a definition before and after a
    // change whose image is the same.
    let wanted = [
        "sealed-kestrel-https-no-cert",
        "sealed-composer-vendor-hidden",
        "change-env-removed",
    ];
    let scenarios: Vec<scenario::Scenario> = all()
        .into_iter()
        .filter(|s| wanted.contains(&s.id.as_str()))
        .collect();
    assert_eq!(scenarios.len(), wanted.len(), "the scenarios exist");
    // The fixture's words: its modes and flags, as an argv would show them.
    let fixture_words = [
        "\"crash\"",
        "\"serve\"",
        "\"sleep\"",
        "\"oom\"",
        "\"--code\"",
        "\"--line\"",
        "\"--stderr-line\"",
        "\"--delay-ms\"",
        "drydock-fixture",
        "\"probe\"",
        "\"--as\"",
    ];
    for s in &scenarios {
        let mut staged = bench::setup::Staged::new(s, drydock_e2e::free_port()).unwrap();
        for c in &s.before {
            staged.run(s, c).unwrap();
        }
        for c in &s.before {
            staged.remove(&c.name).unwrap();
        }
        for c in &s.containers {
            staged.run(s, c).unwrap();
        }
        for c in &s.containers {
            let container = inspect_json("container", &c.name);
            let image = inspect_json("image", &bench::setup::image_tag(&s.id, &c.image));
            for (what, json) in [("container", &container), ("image", &image)] {
                for word in fixture_words {
                    assert!(
                        !json.contains(word),
                        "{}: the {what} inspect of {} shows the fixture's `{word}`",
                        s.id,
                        c.name
                    );
                }
                // Nor any line it is to print: those are for its logs.
                for line in c.stdout.iter().chain(&c.stderr).filter(|l| l.len() >= 12) {
                    let quoted = serde_json::to_string(line).unwrap();
                    let quoted = quoted.trim_matches('"');
                    assert!(
                        !json.contains(quoted),
                        "{}: the {what} inspect of {} shows the line {line:?}",
                        s.id,
                        c.name
                    );
                }
            }
        }
        // And the containers still do what the scenario says: its state is
        // reached (setup waited for it), and what it prints is in its logs.
        for c in &s.containers {
            let logs = std::process::Command::new("docker")
                .args(["logs", &c.name])
                .output()
                .unwrap();
            let logged = format!(
                "{}{}",
                String::from_utf8_lossy(&logs.stdout),
                String::from_utf8_lossy(&logs.stderr)
            );
            for line in c
                .stdout
                .iter()
                .chain(&c.stderr)
                .filter(|l| !l.trim().is_empty())
            {
                assert!(
                    logged.contains(line.trim_end()),
                    "{}: {} never printed {line:?}",
                    s.id,
                    c.name
                );
            }
        }
        drop(staged);
    }
}

#[test]
fn the_scenario_format_s_json_schema_is_the_one_committed() {
    let path = drydock_e2e::workspace_root().join("tests/bench/scenario.schema.json");
    let generated = format!(
        "{}\n",
        serde_json::to_string_pretty(&scenario::scenario_schema()).unwrap()
    );
    if std::env::var_os("DRYDOCK_WRITE_SCHEMA").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} differs from the scenario types (tests/e2e/bench/scenario.rs); if the format changed on purpose, bump SCENARIO_FORMAT_VERSION when an older file would no longer load, say so in SCHEMA.md, and run this test with DRYDOCK_WRITE_SCHEMA=1",
        path.display()
    );
    // The schema says the version SCHEMA.md documents.
    let doc = std::fs::read_to_string(drydock_e2e::workspace_root().join("tests/bench/SCHEMA.md"))
        .unwrap();
    assert!(
        doc.contains(&format!("format {}", scenario::SCENARIO_FORMAT_VERSION)),
        "SCHEMA.md names the format's version"
    );
}
