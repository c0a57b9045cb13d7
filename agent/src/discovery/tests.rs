use super::*;

fn c(name: &str, service: Option<&str>, image: &str) -> ContainerSummaryView {
    let mut labels = std::collections::BTreeMap::new();
    if let Some(s) = service {
        labels.insert(COMPOSE_SERVICE_LABEL.to_string(), s.to_string());
    }
    ContainerSummaryView {
        id: format!("{:0<64}", name.len()),
        name: name.into(),
        image: image.into(),
        state: "running".into(),
        status: String::new(),
        labels,
        ..Default::default()
    }
}

#[test]
fn discovery_table() {
    let fleet = vec![
        c("shop-prod-backend-1", Some("backend"), "shop/backend:1"),
        c("shop-prod-db-1", Some("db"), "postgres:16"),
        c("shop-staging-backend-1", Some("backend"), "shop/backend:1"),
        c("cache", None, "redis:7"),
    ];
    let found = |msg: &str, fleet: &[ContainerSummaryView]| match discover(msg, fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    assert_eq!(found("db is down", &fleet), "shop-prod-db-1");
    assert_eq!(found("why is the cache broken?", &fleet), "cache");
    assert_eq!(found("redis keeps restarting", &fleet), "cache");
    assert_eq!(found("postgres is slow", &fleet), "shop-prod-db-1");
    // Of two that fit equally, neither broken, the staging copy is not
    // what "the backend" means.
    assert_eq!(found("backend is down", &fleet), "shop-prod-backend-1");
    assert!(
        matches!(discover("backend is down", &[fleet[0].clone(), c("shop-prod2-backend-1", Some("backend"), "shop/backend:1")]), Discovery::Ambiguous(v) if v.len() == 2)
    );
    assert_eq!(
        found("shop-prod-backend-1 is down", &fleet),
        "shop-prod-backend-1"
    );
    assert_eq!(found("backend is down", &fleet[..2]), "shop-prod-backend-1");
    assert!(matches!(discover("frontend is down", &fleet), Discovery::NoMatch(v) if v.len() == 4));
    assert!(matches!(exact("cache", &fleet), Discovery::Found(c) if c.container_name == "cache"));
    assert!(matches!(exact("nope", &fleet), Discovery::NoMatch(_)));
}

fn broken(mut c: ContainerSummaryView, id: char) -> ContainerSummaryView {
    c.state = "exited".into();
    c.id = id.to_string().repeat(64);
    c
}

#[test]
fn roles_typos_joined_words_and_other_languages() {
    let fleet = vec![
        c("shop-orders-1", Some("orders"), "shop/orders:3"),
        c("shop-db-1", Some("db"), "docker.io/library/postgres:16"),
        c("shop-redis-1", Some("redis"), "redis:7"),
        c("shop-mq-1", Some("mq"), "rabbitmq:3-management"),
        c("edge", None, "traefik:v3"),
        c("shop-payments-1", Some("payments"), "shop/payments:1"),
        c("shop-search-1", None, "elasticsearch:8"),
    ];
    let found = |msg: &str| match discover(msg, &fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    assert_eq!(found("the database is down"), "shop-db-1");
    assert_eq!(found("cache is slow"), "shop-redis-1");
    assert_eq!(found("the queue is not consuming"), "shop-mq-1");
    assert_eq!(found("the proxy returns 502"), "edge");
    assert_eq!(found("order service is down"), "shop-orders-1");
    assert_eq!(found("paymnets keeps failing"), "shop-payments-1");
    assert_eq!(found("ordres are stuck"), "shop-orders-1");
    assert_eq!(found("payments 挂了"), "shop-payments-1");
    assert_eq!(
        found("la base de datos (database) no responde"),
        "shop-db-1"
    );
    assert_eq!(found("search is broken"), "shop-search-1");
    // Short words are never typos of something else.
    assert!(matches!(
        discover("db2 is down", &fleet),
        Discovery::NoMatch(_)
    ));
}

#[test]
fn among_equals_the_broken_one_is_meant() {
    let primary = c("pg-primary", None, "postgres:16");
    let replica = broken(c("pg-replica", None, "postgres:16"), 'b');
    let fleet = vec![primary.clone(), replica];
    match discover("the database is down", &fleet) {
        Discovery::Found(c) => {
            assert_eq!(c.container_name, "pg-replica");
            assert!(c.why.contains("only one"), "{}", c.why);
        }
        other => panic!("{other:?}"),
    }
    // Both broken, or none: still a question.
    let both = vec![
        broken(primary.clone(), 'a'),
        broken(c("pg-replica", None, "postgres:16"), 'b'),
    ];
    assert!(
        matches!(discover("the database is down", &both), Discovery::Ambiguous(v) if v.len() == 2)
    );
    let none = vec![primary, c("pg-replica", None, "postgres:16")];
    assert!(matches!(
        discover("the database is down", &none),
        Discovery::Ambiguous(_)
    ));
}

fn in_state(name: &str, project: &str, state: &str, status: &str) -> ContainerSummaryView {
    let mut v = c(
        name,
        Some(name.split('-').nth(1).unwrap_or(name)),
        "shop/app:1",
    );
    v.labels
        .insert(COMPOSE_PROJECT_LABEL.to_string(), project.to_string());
    v.id = format!("{name:0<64}");
    v.state = state.into();
    v.status = status.into();
    v
}

#[test]
fn the_state_a_message_describes_picks_among_equals() {
    let fleet = vec![
        in_state("shop-web-1", "shop", "running", "Up 3 minutes (unhealthy)"),
        in_state("shop-db-1", "shop", "exited", "Exited (0) 5 minutes ago"),
        in_state(
            "shop-worker-1",
            "shop",
            "restarting",
            "Restarting (1) 2 seconds ago",
        ),
        in_state("shop-api-1", "shop", "exited", "Exited (1) 1 minute ago"),
        in_state("shop-cache-1", "shop", "running", "Up 1 hour"),
    ];
    let found = |msg: &str| match discover(msg, &fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    assert_eq!(found("the shop is unhealthy"), "shop-web-1");
    assert_eq!(found("shop is slow"), "shop-web-1");
    assert_eq!(found("something in shop keeps restarting"), "shop-worker-1");
    assert_eq!(
        found("shop crashed"),
        "shop-api-1",
        "exit 1, not the exit-0 db"
    );
    assert!(
        matches!(discover("shop won't start", &fleet), Discovery::Ambiguous(v) if v.len() == 5),
        "the api (exit 1) and the worker (restarting) both fit: a question"
    );
    // No state word, several broken: a question, as before.
    assert!(matches!(
        discover("shop is down", &fleet),
        Discovery::Ambiguous(_)
    ));
    // A name still outranks the state: the db is meant, whatever it is.
    assert_eq!(found("shop db is unhealthy"), "shop-db-1");
    // The project's label counts when no name carries it.
    let mut odd = in_state("payments", "billing", "running", "Up 2 minutes (unhealthy)");
    odd.labels.remove(COMPOSE_SERVICE_LABEL);
    let fleet = [
        odd,
        in_state("ledger", "billing", "running", "Up 2 minutes"),
    ];
    match discover("billing is unhealthy", &fleet) {
        Discovery::Found(c) => {
            assert_eq!(c.container_name, "payments");
            assert!(
                c.why.contains("unhealthy, as the message says"),
                "{}",
                c.why
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_inspect_tells_a_crash_loop_between_restarts_from_a_healthy_one() {
    let fleet = vec![
        in_state("market-api-1", "market", "running", "Up 2 minutes"),
        in_state(
            "market-indexer-1",
            "market",
            "running",
            "Up Less than a second",
        ),
    ];
    let Discovery::Ambiguous(tied) = discover("something in market keeps restarting", &fleet)
    else {
        panic!("the list alone cannot tell them apart")
    };
    let view = |c: &ContainerSummaryView, restarts: i64| ContainerView {
        id: c.id.clone(),
        name: c.name.clone(),
        running: true,
        restart_count: restarts,
        restart_policy: "always".into(),
        ..Default::default()
    };
    let views = [view(&fleet[0], 0), view(&fleet[1], 7)];
    let one = the_one_inspected("something in market keeps restarting", &tied, &views)
        .expect("the indexer restarts");
    assert_eq!(one.container_name, "market-indexer-1");
    assert!(one.why.contains("from its inspect"), "{}", one.why);
    assert!(the_one_inspected("market is down", &tied, &views).is_none());
    let both = [view(&fleet[0], 5), view(&fleet[1], 7)];
    assert!(the_one_inspected("market keeps restarting", &tied, &both).is_none());
}

#[test]
fn edits_count_transpositions_once() {
    assert_eq!(edits("orders", "ordres"), 1);
    assert_eq!(edits("payments", "paymnets"), 1);
    assert_eq!(edits("backend", "backend"), 0);
    assert_eq!(edits("api", "web"), 3);
}

#[test]
fn services_are_found_by_their_short_name_and_by_a_task_container_name() {
    let svc = |id: &str, name: &str, running| ServiceSummaryView {
        id: id.into(),
        name: name.into(),
        stack: "shop".into(),
        desired: 1,
        running,
        ..Default::default()
    };
    let services = [svc("svcapi", "shop_api", 0), svc("svcweb", "shop_web", 1)];
    let containers = [c("web-1", None, "nginx")];
    let rows = rows_with_services(&containers, &services);
    let found = |text: &str| match as_services(discover(text, &rows), &services) {
        Discovery::Found(c) => (c.container_name, c.kind),
        other => panic!("{text}: {other:?}"),
    };
    assert_eq!(
        found("the api is down"),
        ("shop_api".into(), TargetKind::Service)
    );
    let task = "shop_api.1.k3j5x0q7w2e9r4t6y8u1i3o5p";
    assert_eq!(found(&format!("is {task} ok?")).0, "shop_api");
    match exact_with_services(task, &containers, &services) {
        Discovery::Found(c) => assert_eq!(c.container_name, "shop_api"),
        other => panic!("{other:?}"),
    }
    assert_eq!(task_service("my.app"), None, "a dotted name is not a task");
    assert_eq!(task_service("shop_api.1.short"), None);
}

/// How a person names what is broken when the words name no container,
/// or name a healthy one beside the broken one.
#[test]
fn the_broken_one_is_meant_when_the_words_do_not_say() {
    let fleet = vec![
        c(
            "saffron-wordpress-1",
            Some("wordpress"),
            "wordpress:6.4-apache",
        ),
        c("saffron-db-1", Some("db"), "mariadb:11"),
        broken(
            c(
                "vellum-vaultwarden-1",
                Some("vaultwarden"),
                "vaultwarden/server:1.32",
            ),
            'v',
        ),
        broken(
            c(
                "vellum-vaultwarden-db-1",
                Some("vaultwarden-db"),
                "postgres:16",
            ),
            'w',
        ),
        c(
            "parsec-keycloak-1",
            Some("keycloak"),
            "quay.io/keycloak/keycloak:24",
        ),
        c("quokka-gitea-1", Some("gitea"), "gitea/gitea:1.21"),
    ];
    let found = |msg: &str, fleet: &[ContainerSummaryView]| match discover(msg, fleet) {
        Discovery::Found(c) => (c.container_name, c.why),
        other => (format!("{other:?}"), String::new()),
    };
    // Roles people say: the password manager, sso, git, the blog.
    assert_eq!(
        found("the password manager is down", &fleet).0,
        "vellum-vaultwarden-1"
    );
    assert_eq!(
        found("sso is down, nobody can log in", &fleet).0,
        "parsec-keycloak-1"
    );
    assert_eq!(
        found("git.quokka keeps restarting", &fleet).0,
        "quokka-gitea-1"
    );
    assert_eq!(
        found("the blog is down", &fleet[..2]).0,
        "saffron-wordpress-1"
    );
    // No word names a container, and one is broken: that one.
    let blog = [
        broken(
            c(
                "saffron-wordpress-1",
                Some("wordpress"),
                "wordpress:6.4-apache",
            ),
            'a',
        ),
        c("saffron-db-1", Some("db"), "mariadb:11"),
    ];
    let (name, why) = found("nothing loads since this morning", &blog);
    assert_eq!(name, "saffron-wordpress-1");
    assert!(why.contains("only broken one in scope"), "{why}");
    // A name no container has: not guessed, even with one broken.
    assert!(matches!(
        discover("zzqx-nonexistent is down", &blog),
        Discovery::NoMatch(_)
    ));
    // Two broken and nothing named: still a question.
    assert!(matches!(
        discover("nothing loads since this morning", &fleet[2..4]),
        Discovery::NoMatch(_)
    ));
    // A healthy container named first, a broken one named too: the broken.
    let pair = [
        c("hazel-telegraf-1", Some("telegraf"), "telegraf:1.29"),
        broken(c("hazel-influxdb-1", Some("influxdb"), "influxdb:2.7"), 'i'),
    ];
    let (name, why) = found(
        "influx keeps restarting, telegraf can't write metrics",
        &pair,
    );
    assert_eq!(name, "hazel-influxdb-1");
    assert!(why.contains("the only broken one"), "{why}");
}

#[test]
fn a_named_part_of_a_system_is_not_another_part_of_it() {
    let fleet = vec![
        c("walk-db", Some("db"), "postgres:16"),
        c("shop-backend", Some("backend"), "shop/backend:2"),
        c("shop-frontend", Some("frontend"), "nginx:1.27"),
    ];
    match discover("walk api is down", &fleet) {
        Discovery::NoMatch(seen) => {
            assert_eq!(seen[0].container_name, "walk-db", "{seen:?}");
            assert!(
                seen[0].why.contains("it is the db, not the api"),
                "{}",
                seen[0].why
            );
        }
        other => panic!("walk api is not walk-db: {other:?}"),
    }
    let found = |msg: &str| match discover(msg, &fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    // The same part, said another way, or no part said at all.
    assert_eq!(found("walk is down"), "walk-db");
    assert_eq!(found("the walk database is slow"), "walk-db");
    assert_eq!(found("the shop api is down"), "shop-backend");
    assert_eq!(found("nginx keeps restarting"), "shop-frontend");
    // Both words, in order, in one name, beat one word in another.
    let mut two = fleet.clone();
    two.push(c("walk-api-1", None, "walk/api:1"));
    two.push(c("orders-api-1", None, "orders/api:1"));
    assert!(
        matches!(discover("walk api is down", &two), Discovery::Found(c) if c.container_name == "walk-api-1"),
        "{:?}",
        discover("walk api is down", &two)
    );
    // An exact name is never second-guessed.
    assert_eq!(found("walk-db api errors"), "walk-db");
}

#[test]
fn an_error_s_name_is_no_part_and_docker_names_nothing() {
    let fleet = vec![
        c("fir-db-1", Some("db"), "postgres:10"),
        c("fir-web-1", Some("web"), "odoo:12.0"),
    ];
    let found = |msg: &str, fleet: &[ContainerSummaryView]| match discover(msg, fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    // "Server" in the name of an HTTP error names no server.
    assert_eq!(
        found(
            "odoo only shows \"Internal Server Error\" since this morning",
            &fleet
        ),
        "fir-web-1"
    );
    // A part followed by other words is still the part asked for.
    let parts = vec![
        c("fir-db-1", Some("db"), "postgres:10"),
        c("fir-api-1", Some("api"), "fir/api:1"),
    ];
    assert!(matches!(
        discover("the fir api is failing with errors", &parts),
        Discovery::Found(c) if c.container_name == "fir-api-1"
    ));
    // But the server asked for is still not the database.
    assert!(matches!(
        discover("the postgres server is down", &fleet),
        Discovery::Found(c) if c.container_name == "fir-db-1"
    ));
    // "docker" is where everything runs, not a name.
    let runners = vec![
        c(
            "fir-runner-docker-1",
            Some("runner-docker"),
            "gitlab/gitlab-runner:v13",
        ),
        c(
            "fir-runner-shell-1",
            Some("runner-shell"),
            "gitlab/gitlab-runner:v13",
        ),
    ];
    assert_eq!(
        found(
            "jobs tagged shell are stuck, the docker ones run fine",
            &runners
        ),
        "fir-runner-shell-1"
    );
}

#[test]
fn a_name_written_as_one_word_is_found() {
    let fleet = vec![
        c("jay-loki-1", Some("loki"), "grafana/loki:2.6"),
        c(
            "jay-fluent-bit-node-1",
            Some("fluent-bit-node"),
            "fluent/fluent-bit:1.9",
        ),
        broken(
            c(
                "jay-fluent-bit-1",
                Some("fluent-bit"),
                "fluent/fluent-bit:1.9",
            ),
            'f',
        ),
    ];
    assert!(
        matches!(
            discover("logs stopped arriving in loki after I changed fluentbit", &fleet),
            Discovery::Found(c) if c.container_name == "jay-fluent-bit-1"
        ),
        "{:?}",
        discover(
            "logs stopped arriving in loki after I changed fluentbit",
            &fleet
        )
    );
    // Spelled so, it is the service, not its neighbour.
    assert!(matches!(
        discover("is fluentbit ok?", &fleet),
        Discovery::Found(c) if c.container_name == "jay-fluent-bit-1"
    ));
    // Adjacent parts of a name, without a service to say so.
    let plain = vec![c("jay-node-exporter-1", None, "prom/node-exporter:1")];
    assert!(matches!(
        discover("nodeexporter is down", &plain),
        Discovery::Found(c) if c.container_name == "jay-node-exporter-1"
    ));
    // What it runs, by a part of its image's name, typos and all.
    let docs = vec![
        c("wren-broker-1", Some("broker"), "redis:7"),
        broken(
            c(
                "wren-webserver-1",
                Some("webserver"),
                "ghcr.io/paperless-ngx/paperless-ngx:2.11",
            ),
            'p',
        ),
    ];
    for msg in ["paperless is down", "paperles is down since the reboot"] {
        assert!(
            matches!(
                discover(msg, &docs),
                Discovery::Found(c) if c.container_name == "wren-webserver-1"
            ),
            "{msg}: {:?}",
            discover(msg, &docs)
        );
    }
    // A search engine is found as the search.
    let search = vec![
        c("owl-morty-1", Some("morty"), "dalf/morty:latest"),
        c("owl-searx-1", Some("searx"), "searx/searx:1.0.0"),
    ];
    assert!(matches!(
        discover("the search page is blank", &search),
        Discovery::Found(c) if c.container_name == "owl-searx-1"
    ));
}

#[test]
fn a_healthy_twin_in_a_neighbouring_project_is_not_the_one_that_wont_start() {
    let image = "drydock-bench/s8f614d/docker.elastic.co/elasticsearch/elasticsearch:8.11.0";
    let mut down = c("search-es-1", Some("es"), image);
    down = broken(down, 'a');
    down.status = "Exited (78) 5 seconds ago".into();
    let twin = c("search-staging-es-1", Some("es"), image);
    let fleet = vec![down, twin];
    match discover("elasticsearch won't start", &fleet) {
        Discovery::Found(c) => assert_eq!(c.container_name, "search-es-1", "{c:?}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn of_equals_none_broken_the_one_not_marked_for_another_environment_is_meant() {
    let with_project = |name: &str, project: &str| {
        let mut c = c(name, Some("searx"), "searx/searx:1.1");
        c.labels
            .insert(COMPOSE_PROJECT_LABEL.to_string(), project.to_string());
        c.id = format!("{:0<64}", name);
        c
    };
    let fleet = vec![
        with_project("nightjar-searx-1", "nightjar"),
        with_project("nightjar-staging-searx-1", "nightjar-staging"),
    ];
    match discover("searx shows an error page", &fleet) {
        Discovery::Found(c) => {
            assert_eq!(c.container_name, "nightjar-searx-1");
            assert!(c.why.contains("another environment"), "{}", c.why);
        }
        other => panic!("{other:?}"),
    }
    // Saying the environment names it.
    assert!(matches!(
        discover("searx on staging shows an error page", &fleet),
        Discovery::Found(c) if c.container_name == "nightjar-staging-searx-1"
    ));
    // Two production copies are still a question.
    let two = vec![
        with_project("a-searx-1", "a"),
        with_project("b-searx-1", "b"),
    ];
    assert!(matches!(discover("searx is slow", &two), Discovery::Ambiguous(v) if v.len() == 2));
}

#[test]
fn a_named_container_that_runs_well_points_to_its_project_s_failed_one() {
    let fleet = vec![
        in_state(
            "ermine-element-1",
            "ermine",
            "running",
            "Up 2 minutes (healthy)",
        ),
        in_state(
            "ermine-synapse-1",
            "ermine",
            "exited",
            "Exited (2) 1 minute ago",
        ),
        in_state("ermine-db-1", "ermine", "running", "Up 2 minutes"),
        in_state("other-api-1", "other", "exited", "Exited (1) 1 minute ago"),
    ];
    let found = |msg: &str, fleet: &[ContainerSummaryView]| match discover(msg, fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    // Element is named, but it runs well, and the message reports a
    // failure: the project's one failed container is meant.
    assert_eq!(
        found(
            "the server quits and element says it can't reach it",
            &fleet
        ),
        "ermine-synapse-1"
    );
    // A question that reports nothing wrong stays with the one named.
    assert_eq!(
        found("element prints a warning at start, is that ok?", &fleet),
        "ermine-element-1"
    );
    // A sibling a person stopped (SIGKILL's 137) failed of nothing.
    let mut stopped = fleet.clone();
    stopped[1].status = "Exited (137) 1 minute ago".into();
    assert_eq!(found("element is down", &stopped), "ermine-element-1");
    // A question, a restart the person reports, what a container that
    // runs well can do (be slow, answer 502), a failure days old, or a
    // neighbour on another host: the named one stands.
    assert_eq!(found("element is slow", &fleet), "ermine-element-1");
    assert_eq!(found("element is down", &fleet), "ermine-element-1");
    assert_eq!(found("element returns 502", &fleet), "ermine-element-1");
    assert_eq!(found("is element down?", &fleet), "ermine-element-1");
    assert_eq!(
        found("element keeps restarting", &fleet),
        "ermine-element-1"
    );
    let mut old = fleet.clone();
    old[1].status = "Exited (2) 3 days ago".into();
    assert_eq!(found("element is down", &old), "ermine-element-1");
    let mut elsewhere = fleet.clone();
    elsewhere[1].host = Some("host-b".into());
    assert_eq!(found("element is down", &elsewhere), "ermine-element-1");
    // A failure reported while the named one is said to be fine: the
    // project's failed one is meant, however far on the words say it.
    assert_eq!(
        found(
            "logins fail everywhere since the upgrade, element itself seems to be fine",
            &fleet
        ),
        "ermine-synapse-1"
    );
    assert_eq!(
        found("element is fine but nothing else works", &fleet),
        "ermine-synapse-1"
    );
    // Said fine, and nothing reported wrong: the named one stands.
    assert_eq!(
        found("element seems fine after the upgrade", &fleet),
        "ermine-element-1"
    );
    // Two failed siblings: the words decide nothing more, the named one stands.
    let mut two = fleet.clone();
    two[2] = in_state("ermine-db-1", "ermine", "exited", "Exited (1) 1 minute ago");
    assert_eq!(found("element is down", &two), "ermine-element-1");
}

#[test]
fn of_several_down_and_none_named_the_one_that_failed_of_itself_is_meant() {
    let fleet = vec![
        in_state(
            "lemur-umami-1",
            "lemur",
            "exited",
            "Exited (1) 1 minute ago",
        ),
        in_state("lemur-db-1", "lemur", "exited", "Exited (137) 2 hours ago"),
        in_state("lemur-web-1", "lemur", "running", "Up 2 hours"),
    ];
    assert!(matches!(
        discover("the dashboard has been down since yesterday", &fleet),
        Discovery::Found(c) if c.container_name == "lemur-umami-1"
    ));
    let mut both = fleet.clone();
    both[1].status = "Exited (1) 2 hours ago".into();
    assert!(matches!(
        discover("the dashboard has been down since yesterday", &both),
        Discovery::NoMatch(_)
    ));
}

#[test]
fn what_well_known_software_does_names_it() {
    let fleet = vec![
        c("vole-app-1", Some("app"), "jc5/firefly-iii:release-4.8.0"),
        c("vole-db-1", Some("db"), "mariadb:10.3"),
        c(
            "lemur-umami-1",
            Some("umami"),
            "ghcr.io/umami-software/umami:postgresql-latest",
        ),
        c(
            "yak-sonarr-1",
            Some("sonarr"),
            "linuxserver/sonarr:2.0.0.4645",
        ),
        c(
            "jackal-postgrest-1",
            Some("postgrest"),
            "postgrest/postgrest:v9.0.0",
        ),
    ];
    let found = |msg: &str| match discover(msg, &fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    assert_eq!(found("the budget thing shows a white page"), "vole-app-1");
    assert_eq!(found("website analytics are gone"), "lemur-umami-1");
    assert_eq!(found("no new tv episodes get fetched"), "yak-sonarr-1");
    assert_eq!(found("the api answers 503"), "jackal-postgrest-1");
}

#[test]
fn of_two_that_fit_the_one_said_to_be_fine_is_not_meant() {
    let mut fleet = vec![
        c(
            "yak-sonarr-1",
            Some("sonarr"),
            "linuxserver/sonarr:2.0.0.4645",
        ),
        c(
            "yak-radarr-1",
            Some("radarr"),
            "linuxserver/radarr:0.2.0.995",
        ),
    ];
    fleet[0].id = "s".repeat(64);
    fleet[1].id = "r".repeat(64);
    let found = |msg: &str| match discover(msg, &fleet) {
        Discovery::Found(c) => c.container_name,
        other => format!("{other:?}"),
    };
    assert_eq!(
        found("the tv app won't load anymore, the movies one is fine"),
        "yak-sonarr-1"
    );
    // "not working" is no "working".
    assert!(matches!(
        discover("tv and movies are not working", &fleet),
        Discovery::Ambiguous(v) if v.len() == 2
    ));
}

mod linked;
