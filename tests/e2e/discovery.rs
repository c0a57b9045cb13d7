//! Discovery through the real daemons: people name a container by its role,
//! with a typo, in several words, or in another language, and drydock's
//! diagnosis lands on the right container.

use drydock_e2e::*;

/// The container a diagnose-only request about `message` lands on (a
/// request that lands on none fails here, with its candidates).
fn target_of(dd: &Drydock, message: &str) -> String {
    let (code, req) = dd.ask_json(&["--diagnose-only", message]);
    assert_eq!(code, 0, "{message}: {req:#}");
    req["target"]["container_name"]
        .as_str()
        .map(|n| n.trim_start_matches('/').to_string())
        .unwrap_or_else(|| panic!("{message}: no target; candidates {:#}", req["candidates"]))
}

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
        assert_eq!(target_of(&dd, message), expected.name, "{message}");
    }
    let _ = docker(&["rmi", &image]);
}

/// An image tag of the fixture, removed when dropped (after the containers
/// that use it, when declared before them).
struct Tag(String);

impl Tag {
    fn of_fixture(name: &str) -> Tag {
        docker_ok(&["tag", drydock::fixture::FIXTURE_IMAGE, name]);
        Tag(name.to_string())
    }
}

impl Drop for Tag {
    fn drop(&mut self) {
        let _ = docker(&["rmi", &self.0]);
    }
}

/// A compose project as people name its parts: by the role each plays
/// (what its image runs), in several words, with a typo, in another
/// language; of two databases, the one that is broken. The executor shows
/// only this project, so other tests' containers cannot tie.
#[test]
fn a_compose_project_is_found_by_roles_typos_words_and_the_broken_one() {
    let dd = Drydock::init();
    let project = unique("disc");
    let config = dd.home.executor_config();
    let yaml = std::fs::read_to_string(&config).expect("executor.yaml");
    let scoped = yaml.replace(
        "allow_names: [\"*\"]",
        &format!(
            "allow_names: [\"*\"]\n  allow_labels: {{com.docker.compose.project: \"{project}\"}}"
        ),
    );
    assert_ne!(scoped, yaml, "the scope was set");
    std::fs::write(&config, scoped).expect("write executor.yaml");
    let registry = unique("dd-e2e");
    let image = |name: &str| format!("{registry}/{name}");
    let tags: Vec<Tag> = [
        "postgres:16",
        "redis:7",
        "rabbitmq:3-management",
        "traefik:v3",
        "shop:1",
    ]
    .iter()
    .map(|i| Tag::of_fixture(&image(i)))
    .collect();
    let service = |name: &str, image: &str, args: &[&str]| {
        let labels = [
            format!("com.docker.compose.project={project}"),
            format!("com.docker.compose.service={name}"),
        ];
        let mut all = vec!["--label", &labels[0], "--label", &labels[1], image];
        all.extend_from_slice(args);
        let name = format!("{project}-{name}-1");
        docker_ok(&[&["run", "-d", "--name", &name][..], &all].concat());
        Container { name }
    };
    let sleep: &[&str] = &["sleep"];
    let fleet = [
        service("pg-primary", &image("postgres:16"), sleep),
        service(
            "pg-replica",
            &image("postgres:16"),
            &["crash", "--code", "1"],
        ),
        service("sessions", &image("redis:7"), sleep),
        service("events", &image("rabbitmq:3-management"), sleep),
        service("edge", &image("traefik:v3"), sleep),
        service("orders", &image("shop:1"), sleep),
        service("payments", &image("shop:1"), sleep),
        service("backend", &image("shop:1"), sleep),
    ];
    fleet[1].wait_for("exited", std::time::Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    dd.up();
    for (message, expected) in [
        ("the database is down", "pg-replica"),
        ("the cache is slow", "sessions"),
        ("the queue is not consuming", "events"),
        ("the proxy returns 502", "edge"),
        ("order service is down", "orders"),
        ("paymnets keeps failing", "payments"),
        ("backend 挂了", "backend"),
    ] {
        assert_eq!(
            target_of(&dd, message),
            format!("{project}-{expected}-1"),
            "{message}"
        );
    }
    drop(fleet);
    drop(tags);
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
