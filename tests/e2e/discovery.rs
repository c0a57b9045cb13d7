//! Discovery through the real daemons: people name a container by its role,
//! with a typo, in several words, or in another language, and drydock's
//! diagnosis lands on the right container.

use drydock_e2e::*;

#[test]
fn roles_typos_several_words_and_other_languages_find_the_container() {
    let dd = Drydock::init();
    // A container playing the search role: the fixture under an image name
    // whose base is `meilisearch` (nothing is pulled).
    let image = format!("{}/meilisearch:1", unique("dd-e2e"));
    docker_ok(&["tag", drydock::fixture::FIXTURE_IMAGE, &image]);
    let index = Container::run("discovery-idx", &[&image, "sleep"]);
    let ledgers = Container::run(
        "discovery-ledgers",
        &[drydock::fixture::FIXTURE_IMAGE, "sleep"],
    );
    dd.up();
    for (message, expected) in [
        ("search is down", &index),
        ("ledger service is slow", &ledgers),
        ("ledgres keep failing", &ledgers),
        ("ledgers 挂了", &ledgers),
    ] {
        let (code, req) = dd.ask_json(&["--diagnose-only", message]);
        assert_eq!(code, 0, "{message}: {req:#}");
        assert_eq!(
            req["target"]["container_name"]
                .as_str()
                .map(|n| n.trim_start_matches('/')),
            Some(expected.name.as_str()),
            "{message}: {:#}",
            req["candidates"]
        );
    }
    let _ = docker(&["rmi", &image]);
}

/// Compose's `depends_on` label is the dependency graph as written: the
/// dependency it names that is down is the one examined, even when the log
/// names only an address that leads nowhere.
#[test]
fn the_compose_depends_on_label_names_the_dependency_before_the_logs() {
    let dd = Drydock::init();
    let project = unique("dep");
    let label = |k: &str, v: &str| format!("{k}={v}");
    let db = Container::run(
        "depends-db",
        &[
            "--label",
            &label("com.docker.compose.project", &project),
            "--label",
            &label("com.docker.compose.service", "db"),
            drydock::fixture::FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
        ],
    );
    let app = Container::run(
        "depends-app",
        &[
            "--label",
            &label("com.docker.compose.project", &project),
            "--label",
            &label("com.docker.compose.service", "app"),
            "--label",
            &label("com.docker.compose.depends_on", "db:service_started:false"),
            drydock::fixture::FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "Error: connect ECONNREFUSED 10.99.99.99:5432",
        ],
    );
    for c in [&db, &app] {
        c.wait_for("exited", std::time::Duration::from_secs(30), |c| {
            c.inspect("{{.State.Status}}") == "exited"
        });
    }
    dd.up();
    let (code, req) = dd.ask_json(&["--diagnose-only", "--container", &app.name, "app is down"]);
    assert_eq!(code, 0, "{req:#}");
    let causes = serde_json::to_string(&req["diagnosis"]["causes"]).expect("causes");
    assert!(
        causes.contains(&db.name),
        "the dependency the compose graph names is examined: {causes}"
    );
}
