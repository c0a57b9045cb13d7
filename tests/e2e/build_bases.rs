//! A build's base images from a registry: one missing from the engine is
//! pulled, by the digest its registry names, from a registry in
//! `build.base_registries` before the build (the build itself still has no
//! network and never pulls); one from any other registry is refused before
//! the approval is spent, and audited.

use drydock_e2e::registry::Registry;
use drydock_e2e::*;
use drydock_proto::pb;
use tonic::Code;

use crate::build::{
    build_approval, build_cli, build_request, builds_on, compose_web, folder_claims, RemovedImages,
    BASE, SERVE,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_base_is_pulled_only_from_an_allowed_registry() {
    drydock_daemon::tls::install_crypto_provider();
    let registry = Registry::start();
    let project = unique("buildbase");
    // (Also builds the fixture images the base is made from.)
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{project}_*")]);
    // The base only in the registry, as on a host that never pulled it.
    let base = format!("{}/{project}/base:1", registry.host());
    build_image(
        &base,
        &format!("FROM {BASE}\nLABEL drydock.test.base=pulled\n"),
    );
    docker_ok(&["push", &base]);
    let pushed = docker_ok(&[
        "image",
        "inspect",
        "-f",
        "{{range .RepoDigests}}{{println .}}{{end}}",
        &base,
    ]);
    let digest = pushed
        .lines()
        .find_map(|l| l.split_once('@').map(|(_, d)| d.to_string()))
        .expect("a pushed image has a repo digest");
    docker_ok(&["rmi", &base]);
    let images = RemovedImages::new(vec![base.clone()]);

    let folder = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        std::fs::write(folder.path().join(name), text).expect("write");
    };
    write("app.txt", "based\n");
    let web = compose_web(&project);
    builds_on(
        &dd,
        &format!(
            "registries:\n  - host: \"{host}\"\n    prefix: {project}\nupdate:\n  health_window: 3s\nbuild:\n  base_registries: [\"{host}\"]\n  contexts:\n    - name: web\n      path: {}\n      services: [\"{project}/web\"]\n",
            folder.path().display(),
            host = registry.host(),
        ),
    );
    dd.up();
    let mut exec = dd.executor_as_agent().await;
    let web_id = docker_ok(&["inspect", "-f", "{{.Id}}", &web.0]);

    // Bases the executor may not pull: another registry, and another
    // repository of the allowed one (outside its prefix).
    for (other, code, why) in [
        (
            format!("127.0.0.1:1/{project}/other:1"),
            Code::FailedPrecondition,
            "build.base_registries",
        ),
        (
            format!("{}/elsewhere/base:1", registry.host()),
            Code::PermissionDenied,
            "not in `registries`",
        ),
    ] {
        write("Dockerfile", &format!("FROM {other}\nCMD {SERVE}\n"));
        let source = exec
            .build_source(pb::BuildSourceRequest {
                request_id: "req-base-source".into(),
                container: web.0.clone(),
                revision: String::new(),
            })
            .await
            .expect("the folder's source")
            .into_inner();
        let signed = folder_claims("web", &source);
        let before = dd.audit_rows().len();
        let e = exec
            .build_image(build_request(
                "req-base-refused",
                &web_id,
                &source.commit,
                build_approval(&dd, "req-base-refused", &web_id, signed),
            ))
            .await
            .expect_err("a base from a registry not allowed");
        assert_eq!(e.code(), code, "{other}: {e:?}");
        assert!(e.message().contains(why), "{other}: {e:?}");
        let rows = dd.audit_rows();
        assert!(
            rows[before..]
                .iter()
                .any(|r| r["decision"] == "denied" && r["action"] == "build"),
            "{other}: {:#?}",
            &rows[before..]
        );
    }

    // The allowed base: pulled by its digest, and built on.
    write(
        "Dockerfile",
        &format!("FROM {base}\nCOPY app.txt /app.txt\nCMD {SERVE}\n"),
    );
    let req = build_cli(&dd, &[&web.0]);
    assert_eq!(req["status"], "completed", "{req:#}\n{}", dd.agent_log());
    let running = docker_ok(&["inspect", "-f", "{{.Image}}", &web.0]);
    let built_from = docker_ok(&[
        "image",
        "inspect",
        "-f",
        "{{index .Config.Labels \"drydock.test.base\"}}",
        &running,
    ]);
    assert_eq!(
        built_from, "pulled",
        "the container runs a build on the pulled base"
    );
    for tag in docker_ok(&[
        "image",
        "inspect",
        "-f",
        "{{join .RepoTags \" \"}}",
        &running,
    ])
    .split_whitespace()
    {
        images.add(tag);
    }
    assert!(
        docker_ok(&[
            "image",
            "inspect",
            "-f",
            "{{range .RepoDigests}}{{println .}}{{end}}",
            &base
        ])
        .contains(&digest),
        "the base is the registry's image, by its digest"
    );
    let rows = dd.audit_rows();
    let build_row = rows
        .iter()
        .rev()
        .find(|r| r["action"] == "build" && r["decision"] == "allowed")
        .unwrap_or_else(|| panic!("an allowed build row: {rows:#?}"));
    assert!(
        build_row["input"]
            .as_str()
            .unwrap_or_default()
            .contains(&format!("pull={}/{project}/base@{digest}", registry.host())),
        "{build_row:#}"
    );
    dd.assert_audit_intact();
}
