//! A Swarm service updated from a registry: a real registry inside the
//! second engine's network namespace (so the engine pushes to and pulls
//! from its own loopback), the real daemons, and `drydock update` as a
//! person runs it. The engine carries the update out itself (a rolling
//! update with `failure_action: rollback`, bound to the spec version the
//! person approved) and rolls a failing image back by itself; the request
//! says so. Refusals of the executor's new write are made as a
//! compromised agent would, each audited.

use std::time::Duration;

use drydock_e2e::approvals::{claims_named, unix_now};
use drydock_e2e::registry::{allow_registry, with_registry, Registry};
use drydock_e2e::second_engine::SecondEngine;
use drydock_e2e::*;
use drydock_proto::approval::{ServiceClaims, UpdateClaims, WriteAction};
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

use crate::swarm::swarm_config;

const WEB: &str = drydock::fixture::FIXTURE_WEB_IMAGE;

/// Version `version` of the web fixture, built on the main engine.
fn build_version(name: &str, version: &str, cmd: &str) {
    build_image(
        name,
        &format!(
            "FROM {WEB}\nLABEL org.opencontainers.image.version={version} org.opencontainers.image.revision=rev-{version} drydock.test={name}\nCMD {cmd}\n"
        ),
    );
}

/// Tag `image` as `reference` on the engine, push it, and return the
/// manifest digest the registry gave it.
fn push(engine: &SecondEngine, image: &str, reference: &str) -> String {
    engine.ok(&["tag", image, reference]);
    engine.ok(&["push", reference]);
    let digests = engine.ok(&[
        "image",
        "inspect",
        "-f",
        "{{range .RepoDigests}}{{println .}}{{end}}",
        reference,
    ]);
    let repo = reference.rsplit_once(':').map_or(reference, |(r, _)| r);
    digests
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{repo}@")).map(str::to_string))
        .unwrap_or_else(|| panic!("no digest of {reference} in {digests}"))
}

fn spec_image(engine: &SecondEngine) -> String {
    engine.ok(&[
        "service",
        "inspect",
        "shop_web",
        "--format",
        "{{.Spec.TaskTemplate.ContainerSpec.Image}}",
    ])
}

fn update_state(engine: &SecondEngine) -> String {
    engine.ok(&[
        "service",
        "inspect",
        "shop_web",
        "--format",
        "{{if .UpdateStatus}}{{.UpdateStatus.State}}{{end}}",
    ])
}

/// The newest request the agent holds that was asked as an update.
fn newest_update(dd: &Drydock) -> Value {
    let out = dd.cli(&["requests", "--json"]);
    let all: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    let id = all
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["options"]["update"] == true)
        .and_then(|r| r["id"].as_str())
        .unwrap_or_else(|| panic!("no update request in {all:#}"))
        .to_string();
    let out = dd.cli(&["show", &id, "--json"]);
    serde_json::from_slice(&out.stdout).expect("show --json")
}

/// `drydock updates --check --json`: the entry of shop_web, if any.
fn listed(dd: &Drydock) -> Option<Value> {
    let out = dd.cli(&["updates", "--check", "--json"]);
    assert!(out.status.success(), "{}", stdout_and_stderr(&out));
    let all: Value = serde_json::from_slice(&out.stdout).expect("updates --json");
    all["updates"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|u| u["container"] == "shop_web")
        .cloned()
}

fn stdout_and_stderr(out: &std::process::Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_is_updated_by_the_engine_and_rolled_back_by_it_when_the_image_fails() {
    prepare();
    let images: Vec<String> = ["v1", "v2", "v3"]
        .iter()
        .map(|v| unique(&format!("dd-swarm-upd-{v}")))
        .collect();
    let serve = "[\"serve\", \"--port\", \"8080\"]";
    build_version(&images[0], "1", serve);
    build_version(&images[1], "2", serve);
    build_version(
        &images[2],
        "3",
        "[\"crash\", \"--code\", \"3\", \"--line\", \"panic: v3 cannot read its settings\"]",
    );
    let loaded: Vec<&str> = images.iter().map(String::as_str).collect();
    let engine = SecondEngine::start_swarm(&loaded);
    for image in &images {
        let _ = docker(&["rmi", "-f", image]);
    }
    let registry = Registry::start_in(&engine);
    let reference = format!("{}/shop/web:stable", registry.host());
    let v1 = push(&engine, &images[0], &reference);
    engine.ok(&[
        "service",
        "create",
        "-d",
        "--name",
        "shop_web",
        "--label",
        "com.docker.stack.namespace=shop",
        &reference,
    ]);
    engine.wait_for("shop_web to run v1", Duration::from_secs(60), |e| {
        e.replicas("shop_web") == "1/1"
    });
    assert_eq!(
        spec_image(&engine),
        format!("{reference}@{v1}"),
        "the engine pinned the tag's digest"
    );
    let v2 = push(&engine, &images[1], &reference);

    let dd = Drydock::init_options(|o| o.docker_endpoint = engine.endpoint());
    let secret = "swarm-update-registry-secret";
    allow_registry(&dd, secret, |yaml, creds| {
        with_registry(
            swarm_config(yaml, &["shop"]),
            &registry.host(),
            "shop",
            creds,
        )
    });
    dd.up();
    let found = listed(&dd).expect("the service's update is listed");
    assert_eq!(found["registry_digest"], v2.as_str(), "{found:#}");
    assert_eq!(found["reference"], reference.as_str(), "{found:#}");

    // Refused as a compromised agent would try, each audited, nothing done.
    let mut client = dd.executor_as_agent().await;
    let key = dd.approver_key();
    let (id, version) = {
        let line = engine.ok(&[
            "service",
            "inspect",
            "shop_web",
            "--format",
            "{{.ID}} {{.Version.Index}}",
        ]);
        let (id, version) = line.split_once(' ').expect("id and version");
        (id.to_string(), version.parse::<u64>().expect("version"))
    };
    let approval = |request_id: &str, digest: &str, followed: &str| {
        let mut c = claims_named(request_id, WriteAction::ServiceUpdate, "", "");
        c.service = Some(ServiceClaims {
            id: id.clone(),
            name: "shop_web".into(),
            version,
            image: format!("{reference}@{v1}"),
            to_image: None,
        });
        c.update = Some(UpdateClaims {
            reference: followed.into(),
            digest: digest.into(),
            from_version: None,
            to_version: None,
            to_tag: None,
        });
        drydock_e2e::approvals::sign(&c, &key, drydock::home::DEFAULT_APPROVER_ID)
    };
    let cases = [
        // The approval names v2, the call asks for v1.
        (
            "req-su-digest",
            v1.clone(),
            approval("req-su-digest", &v2, &reference),
            "approval is for an update to",
        ),
        // Bound to another tag than the one the spec follows.
        (
            "req-su-tag",
            v2.clone(),
            approval(
                "req-su-tag",
                &v2,
                &format!("{}/shop/web:canary", registry.host()),
            ),
            "approval updates the tag",
        ),
        // What the tag no longer names: v1 was approved and asked for.
        (
            "req-su-moved",
            v1.clone(),
            approval("req-su-moved", &v1, &reference),
            "names sha256:",
        ),
    ];
    for (request_id, digest, approval, says) in cases {
        let err = client
            .update_service(pb::ServiceUpdateRequest {
                request_id: request_id.into(),
                service: "shop_web".into(),
                digest,
                approval: Some(approval),
            })
            .await
            .unwrap_err();
        assert!(err.message().contains(says), "{request_id}: {err:?}");
        let row = dd
            .audit_rows()
            .into_iter()
            .rev()
            .find(|r| r["request_id"] == request_id)
            .unwrap_or_else(|| panic!("no audit row for {request_id}"));
        assert_eq!(row["action"], "service_update", "{row}");
        assert_eq!(row["decision"], "denied", "{row}");
    }
    let err = client
        .update_service(pb::ServiceUpdateRequest {
            request_id: "req-su-name".into(),
            service: "shop_web".into(),
            digest: "stable".into(),
            approval: Some(approval("req-su-name", &v2, &reference)),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(
        err.message().contains("by content, never by tag"),
        "{err:?}"
    );
    assert_eq!(
        spec_image(&engine),
        format!("{reference}@{v1}"),
        "nothing done"
    );

    // v2 through `drydock update`: the engine's rolling update, verified
    // once its task runs the new digest.
    let out = dd.cli(&["update", "shop_web", "--yes"]);
    assert!(out.status.success(), "{}", stdout_and_stderr(&out));
    assert_eq!(spec_image(&engine), format!("{reference}@{v2}"));
    assert_eq!(update_state(&engine), "completed");
    assert_eq!(engine.replicas("shop_web"), "1/1");
    let req = newest_update(&dd);
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(req["target"]["kind"], "service", "{req:#}");
    let step = &req["plan"]["steps"][0];
    assert_eq!(step["action"], "service_update", "{req:#}");
    assert_eq!(step["update"]["digest"], v2.as_str(), "{req:#}");
    // The executor's own reads of the image configs cannot reach a
    // registry on the engine's loopback (the engine pulls, the executor
    // does not): the plan says so instead of naming versions.
    assert!(
        step["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("its labels unread"),
        "{req:#}"
    );
    let failure_action = engine.ok(&[
        "service",
        "inspect",
        "shop_web",
        "--format",
        "{{.Spec.UpdateConfig.FailureAction}} {{.Spec.UpdateConfig.Monitor}}",
    ]);
    assert_eq!(failure_action, "rollback 6s", "the executor's window");
    let allowed = dd
        .audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["action"] == "service_update" && r["decision"] == "allowed")
        .expect("the update's audit row");
    assert!(
        allowed["input"].as_str().unwrap_or_default().contains(&v2),
        "{allowed}"
    );

    assert_eq!(listed(&dd), None, "up to date after the update");

    // v3 dies at start: the engine rolls it back by itself, and the
    // request says so.
    let v3 = push(&engine, &images[2], &reference);
    let started = unix_now();
    let out = dd.cli(&["update", "shop_web", "--yes"]);
    assert!(!out.status.success(), "{}", stdout_and_stderr(&out));
    assert_eq!(
        spec_image(&engine),
        format!("{reference}@{v2}"),
        "the engine put v2 back"
    );
    assert_eq!(update_state(&engine), "rollback_completed");
    engine.wait_for("v2 to run again", Duration::from_secs(60), |e| {
        e.replicas("shop_web") == "1/1"
    });
    let req = newest_update(&dd);
    assert_eq!(req["status"], "failed", "{req:#}");
    assert_eq!(req["plan"]["steps"][0]["update"]["digest"], v3.as_str());
    let said = req["outcome"].as_str().unwrap_or_default();
    assert!(
        said.contains("rolled the update of shop_web back"),
        "{said}"
    );
    assert!(said.contains("rollback_completed"), "{said}");
    assert!(
        unix_now() - started < 180,
        "the engine's rollback was reported when it happened, not at the verification deadline"
    );

    // The registry's credentials are nowhere a person or the agent reads.
    for text in [
        dd.agent_log(),
        dd.executor_log(),
        serde_json::to_string(&dd.audit_rows()).unwrap_or_default(),
        serde_json::to_string(&req).unwrap_or_default(),
    ] {
        assert!(!text.contains(secret), "a credential leaked");
    }
    dd.assert_audit_intact();
}
