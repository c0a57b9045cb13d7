//! Updates from a real registry (Debian's `docker-registry`, the CNCF
//! distribution registry, on loopback, which the engine speaks plain HTTP
//! to): images v1, v2 and v3 (v3 fails its healthcheck) are built here and
//! pushed under one tag. A compose service runs v1 with data in a named and
//! an anonymous volume; the executor, called as the agent would call it,
//! reads the registry's digest, pulls v2 by digest and swaps it in, then
//! puts v2 back by itself when v3 turns unhealthy, even though its caller
//! hung up. Every refusal is audited, and the registry's credentials appear
//! nowhere.

use std::time::{Duration, Instant};

use drydock_e2e::approvals::update_approval;
pub(crate) use drydock_e2e::registry::{with_registry, Project, Registry, SERVE, UNHEALTHY};
use drydock_e2e::*;
use drydock_proto::pb;
use tonic::Code;

/// What the credentials file holds; it must appear nowhere.
const PASSWORD: &str = "registry-pa55word-never-shown";

pub(crate) fn inspect(container: &str, format: &str) -> String {
    docker_ok(&["inspect", "-f", format, container])
}

pub(crate) fn wait(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

pub(crate) fn file_size(container: &str, path: &str) -> usize {
    let out = docker(&["cp", &format!("{container}:{path}"), "-"]);
    assert!(out.status.success(), "docker cp {path}: {out:?}");
    out.stdout.len()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_is_pulled_by_digest_held_for_its_window_and_restored_on_failure() {
    let registry = Registry::start();
    let mut project = Project::new("update", &registry);
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{}_*", project.name)]);
    let credentials = dd.home.path("registry.json");
    drydock_daemon::files::write_new(
        &credentials,
        format!("{{\"username\": \"ci\", \"password\": \"{PASSWORD}\"}}").as_bytes(),
        true,
    )
    .expect("write credentials");
    let (v1, v1_digest, old) = project.v1_running_with_data();
    let (v2, v2_digest) = project.push("2", SERVE);
    project.only_in_registry(&v2, &v1);

    let key = dd.approver_key();
    let update_claims =
        |request: &str, container: &str, reference: &str, digest: &str, from: &str| {
            update_approval(&key, request, container, reference, digest, from, Some("1"))
        };
    let update =
        |request_id: &str, container: &str, digest: &str, approval: Option<pb::Approval>| {
            pb::UpdateRequest {
                request_id: request_id.into(),
                container: container.into(),
                digest: digest.into(),
                approval,
                grant: None,
                to_tag: String::new(),
                built_commit: String::new(),
            }
        };
    let ca = read(&dd.home.path("pki/ca.crt"));
    let (cert, pkey) = (
        read(&dd.home.path("pki/agent.crt")),
        read(&dd.home.path("pki/agent.key")),
    );
    let prefix = project.name.clone();
    let host = registry.host();
    let creds = credentials.display().to_string();
    let exec = ExecutorProcess::start(&dd, |y| with_registry(y, &host, &prefix, &creds));
    let mut client = grpc::connect(exec.port, &ca, Some((&cert, &pkey)))
        .await
        .expect("connect");

    // The registry's digest for the tag is v2's; the container runs v1.
    let seen = client
        .registry_digest(pb::ContainerRequest {
            request_id: "req-up-read".into(),
            container: project.api_name(),
        })
        .await
        .expect("registry digest")
        .into_inner();
    assert!(seen.update_available, "{seen:?}");
    assert_eq!(seen.registry_digest, v2_digest);
    assert_eq!(seen.image_id, v1);
    assert_eq!(seen.reference, project.tag);
    assert_eq!(
        seen.oci_labels
            .get("org.opencontainers.image.version")
            .map(String::as_str),
        Some("1")
    );

    // Approved: pulled by digest, swapped in, held, kept.
    let done = client
        .update_container(update(
            "req-up-v2",
            &old,
            &v2_digest,
            Some(update_claims(
                "req-up-v2",
                &old,
                &project.tag,
                &v2_digest,
                &v1,
            )),
        ))
        .await
        .expect("update to v2")
        .into_inner();
    let new = done.new_container_id.clone();
    assert_ne!(new, old);
    assert_eq!(done.new_image_id, v2);
    assert!(done.watched_secs >= 6, "{done:?}");
    assert_eq!(
        project.api_id(),
        new,
        "docker-compose ps shows the new container"
    );
    assert_eq!(
        inspect(&new, "{{.Name}}"),
        format!("/{}", project.api_name())
    );
    assert_eq!(
        inspect(&new, "{{.Config.Image}}"),
        project.tag,
        "it still follows the tag"
    );
    assert_eq!(inspect(&new, "{{.Image}}"), v2);
    assert_eq!(inspect(&new, "{{.State.Health.Status}}"), "healthy");
    assert!(
        inspect(&new, "{{json .NetworkSettings.Networks}}").contains("\"api\""),
        "the compose alias stays"
    );
    assert!(
        file_size(&new, "/named/marker") > 1_000_000,
        "named volume data"
    );
    assert!(
        file_size(&new, "/anon/marker") > 1_000_000,
        "anonymous volume data"
    );
    assert!(
        !docker(&["inspect", &old]).status.success(),
        "the old container is gone"
    );
    assert_eq!(
        docker_ok(&["image", "inspect", "-f", "{{.Id}}", &project.tag]),
        v2
    );

    // v3 turns unhealthy: the executor puts v2 back by itself, although
    // its caller hangs up long before the window ends.
    let (v3, v3_digest) = project.push("3", UNHEALTHY);
    project.only_in_registry(&v3, &v2);
    let mut hung_up = client.clone();
    let call = hung_up.update_container(update(
        "req-up-v3",
        &new,
        &v3_digest,
        Some(update_claims(
            "req-up-v3",
            &new,
            &project.tag,
            &v3_digest,
            &v2,
        )),
    ));
    if let Ok(answer) = tokio::time::timeout(Duration::from_secs(3), call).await {
        panic!("the update should still be in its window after 3 s: {answer:?}");
    }
    drop(hung_up);
    let restored_row = || {
        dd.audit_rows()
            .into_iter()
            .rev()
            .find(|r| r["request_id"] == "req-up-v3" && r["decision"].as_str() != Some("intent"))
    };
    wait(
        "the executor's own restore",
        Duration::from_secs(90),
        || restored_row().is_some(),
    );
    let row = restored_row().expect("outcome row");
    let reason = row["reason"].as_str().unwrap_or_default().to_string();
    assert!(reason.contains("unhealthy"), "{row}");
    assert!(reason.contains("put back as it was"), "{row}");
    assert_eq!(
        project.api_id(),
        new,
        "v2's container is back under its name"
    );
    assert_eq!(inspect(&new, "{{.State.Running}}"), "true");
    assert_eq!(inspect(&new, "{{.Image}}"), v2);
    assert_eq!(
        docker_ok(&["image", "inspect", "-f", "{{.Id}}", &project.tag]),
        v2
    );
    assert!(
        file_size(&new, "/named/marker") > 1_000_000,
        "named volume data"
    );
    assert!(
        file_size(&new, "/anon/marker") > 1_000_000,
        "anonymous volume data"
    );
    let leftovers = docker_ok(&[
        "ps",
        "-a",
        "--filter",
        &format!("name={}_api_1-drydock", project.name),
        "-q",
    ]);
    assert!(leftovers.is_empty(), "no swap container left: {leftovers}");
    wait("v2 healthy again", Duration::from_secs(30), || {
        inspect(&new, "{{.State.Health.Status}}") == "healthy"
    });

    // Refusals, each audited, and nothing changes.
    let other = Container::run(
        "update-refused-other",
        &[drydock::fixture::FIXTURE_IMAGE, "sleep"],
    );
    let absent = format!("sha256:{}", "e".repeat(64));
    type Case = (&'static str, pb::UpdateRequest, Code, &'static str);
    let cases: Vec<Case> = vec![
        (
            "tag-not-digest",
            update(
                "req-up-tag",
                &new,
                "stable",
                Some(update_claims(
                    "req-up-tag",
                    &new,
                    &project.tag,
                    &v3_digest,
                    &v2,
                )),
            ),
            Code::InvalidArgument,
            "not a manifest digest",
        ),
        (
            "no-approval",
            update("req-up-none", &new, &v3_digest, None),
            Code::FailedPrecondition,
            "approval missing",
        ),
        (
            "not-what-the-tag-names",
            update(
                "req-up-older",
                &new,
                &v1_digest,
                Some(update_claims(
                    "req-up-older",
                    &new,
                    &project.tag,
                    &v1_digest,
                    &v2,
                )),
            ),
            Code::FailedPrecondition,
            "in its registry now, not the approved",
        ),
        (
            "other-digest",
            update(
                "req-up-other",
                &new,
                &absent,
                Some(update_claims(
                    "req-up-other",
                    &new,
                    &project.tag,
                    &v3_digest,
                    &v2,
                )),
            ),
            Code::FailedPrecondition,
            "approval is for an update to",
        ),
        (
            "other-tag",
            update(
                "req-up-ref",
                &new,
                &v3_digest,
                Some(update_claims(
                    "req-up-ref",
                    &new,
                    "nginx:latest",
                    &v3_digest,
                    &v2,
                )),
            ),
            Code::FailedPrecondition,
            "approval updates the tag",
        ),
        (
            "image-moved",
            update(
                "req-up-moved",
                &new,
                &v3_digest,
                Some(update_claims(
                    "req-up-moved",
                    &new,
                    &project.tag,
                    &v3_digest,
                    &v1,
                )),
            ),
            Code::FailedPrecondition,
            "it runs",
        ),
        (
            "other-container",
            update(
                "req-up-ctr",
                &new,
                &v3_digest,
                Some(update_claims(
                    "req-up-ctr",
                    &other.id(),
                    &project.tag,
                    &v3_digest,
                    &v2,
                )),
            ),
            Code::FailedPrecondition,
            "is for container",
        ),
    ];
    for (name, req, code, needle) in cases {
        let request_id = req.request_id.clone();
        let err = client.update_container(req).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err:?}");
        assert!(err.message().contains(needle), "{name}: {err:?}");
        let row = dd
            .audit_rows()
            .into_iter()
            .rev()
            .find(|r| r["request_id"] == request_id.as_str())
            .unwrap_or_else(|| panic!("{name}: no audit row"));
        assert_eq!(row["action"], "update", "{name}");
        assert_eq!(row["tier"], 2, "{name}");
        assert_eq!(row["decision"], "denied", "{name}: {row}");
    }
    let mut logs = vec![exec.log.clone()];
    drop(exec);

    // A registry (or a prefix) not allowed, and updates off.
    let elsewhere =
        ExecutorProcess::start(&dd, |y| with_registry(y, &host, "someone-else/", &creds));
    let mut client = grpc::connect(elsewhere.port, &ca, Some((&cert, &pkey)))
        .await
        .expect("connect");
    let err = client
        .update_container(update(
            "req-up-registry",
            &new,
            &v3_digest,
            Some(update_claims(
                "req-up-registry",
                &new,
                &project.tag,
                &v3_digest,
                &v2,
            )),
        ))
        .await
        .expect_err("registry not allowed");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("is not in `registries`"), "{err:?}");
    let row = dd
        .audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["request_id"] == "req-up-registry")
        .expect("the refusal's audit row");
    assert_eq!(row["decision"], "denied", "{row}");
    let err = client
        .registry_digest(pb::ContainerRequest {
            request_id: "req-up-read-refused".into(),
            container: new.clone(),
        })
        .await
        .expect_err("registry not allowed for reads either");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    logs.push(elsewhere.log.clone());
    drop(elsewhere);
    let off = ExecutorProcess::start(&dd, |y| {
        with_registry(y, &host, &prefix, &creds)
            .replace("update: {enabled: true}", "update: {enabled: false}")
    });
    let mut client = grpc::connect(off.port, &ca, Some((&cert, &pkey)))
        .await
        .expect("connect");
    let err = client
        .update_container(update(
            "req-up-off",
            &new,
            &v3_digest,
            Some(update_claims(
                "req-up-off",
                &new,
                &project.tag,
                &v3_digest,
                &v2,
            )),
        ))
        .await
        .expect_err("updates are off");
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("update is disabled"), "{err:?}");
    assert_eq!(project.api_id(), new);
    assert_eq!(inspect(&new, "{{.Image}}"), v2);

    // The registry's password is nowhere: not in the audit export, not in
    // the executor's logs.
    let rows = serde_json::to_string(&dd.audit_rows()).expect("rows");
    assert!(!rows.contains(PASSWORD), "the audit log holds the password");
    logs.push(off.log.clone());
    for log in &logs {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        assert!(
            !text.contains(PASSWORD),
            "{} holds the password",
            log.display()
        );
    }
    drop(other);
}
