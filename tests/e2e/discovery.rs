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
