//! Updates along a version line (`drydock.update=patch` and `minor`), from
//! a real registry: 1.0.0 runs; 1.0.1, 1.1.0 and 2.0.0 are only in the
//! registry. The check names the newest tag of each container's line with
//! its labels; `drydock update --yes` moves the patch container to 1.0.1
//! (pulled by digest, its tag now 1.0.1); the executor refuses, and audits,
//! a tag outside the line, a tag the approval does not name, and a move
//! for a container that follows its tag.

use drydock_e2e::approvals::{claims, sign};
use drydock_e2e::*;
use drydock_proto::approval::{self, WriteAction};
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

use crate::update::{inspect, with_registry, Project, Registry, SERVE};
use crate::update_flow::Removed;
use drydock_e2e::registry::allow_registry;

/// Push `version` under its own tag; its image id and digest.
fn push_version(project: &mut Project, repo: &str, version: &str) -> (String, String) {
    project.tag = format!("{repo}:{version}");
    project.push(version, SERVE)
}

fn run(name: &str, follow: Option<&str>, image: &str) -> String {
    let label = follow.map(|f| format!("drydock.update={f}"));
    let mut args = vec!["run", "-d", "--name", name];
    if let Some(l) = &label {
        args.extend(["--label", l.as_str()]);
    }
    args.extend([image, "serve", "--port", "8080"]);
    docker_ok(&args)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_follows_its_version_line_and_no_further() {
    let registry = Registry::start();
    let mut project = Project::new("upline", &registry);
    let repo = format!("{}/{}/api", registry.host(), project.name);
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{}_*", project.name)]);
    allow_registry(&dd, "pw", |y, creds| {
        with_registry(y, &registry.host(), &project.name, creds)
    });
    let (v100, _) = push_version(&mut project, &repo, "1.0.0");
    let mut newer = Vec::new();
    for v in ["1.0.1", "1.1.0", "2.0.0"] {
        newer.push((v, push_version(&mut project, &repo, v)));
    }
    for (v, (id, _)) in &newer {
        docker_ok(&["rmi", "-f", &format!("{repo}:{v}")]);
        let _ = docker(&["rmi", "-f", id]);
    }
    let (v101_digest, v110_digest, v200_digest) = (
        newer[0].1 .1.clone(),
        newer[1].1 .1.clone(),
        newer[2].1 .1.clone(),
    );
    let running = format!("{repo}:1.0.0");
    let patch = Removed(format!("{}_patch_1", project.name));
    let minor = Removed(format!("{}_minor_1", project.name));
    let plain = Removed(format!("{}_plain_1", project.name));
    let patch_id = run(&patch.0, Some("patch"), &running);
    let minor_id = run(&minor.0, Some("minor"), &running);
    let plain_id = run(&plain.0, None, &running);

    // The executor, asked as the agent asks: each line's newest tag.
    let key = dd.approver_key();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut c = exec.agent_client(&dd).await;
    let read = |name: &str| pb::ContainerRequest {
        request_id: "req-upline-read".into(),
        container: name.into(),
    };
    let seen = c
        .registry_digest(read(&minor.0))
        .await
        .expect("read")
        .into_inner();
    assert_eq!(seen.new_tag, "1.1.0", "{seen:?}");
    assert_eq!(seen.registry_digest, v110_digest);
    assert!(seen.update_available);
    assert_eq!(
        seen.new_oci_labels.get("org.opencontainers.image.version"),
        Some(&"1.1.0".to_string())
    );
    let seen = c
        .registry_digest(read(&plain.0))
        .await
        .expect("read")
        .into_inner();
    assert_eq!(
        seen.new_tag, "",
        "a container without the label follows its tag"
    );
    assert!(!seen.update_available, "{seen:?}");

    // Refusals, each audited, nothing pulled.
    let approval = |request: &str, container: &str, digest: &str, to_tag: Option<&str>| {
        let mut claims = claims(request, WriteAction::Update, container);
        claims.from_image_id = Some(v100.clone());
        claims.update = Some(approval::UpdateClaims {
            reference: running.clone(),
            digest: digest.into(),
            from_version: Some("1.0.0".into()),
            to_version: None,
            to_tag: to_tag.map(str::to_string),
        });
        sign(&claims, &key, "local-operator")
    };
    let update = |request: &str, container: &str, digest: &str, to_tag: &str, a: pb::Approval| {
        pb::UpdateRequest {
            request_id: request.into(),
            container: container.into(),
            digest: digest.into(),
            approval: Some(a),
            grant: None,
            to_tag: to_tag.into(),
            built_commit: String::new(),
        }
    };
    let refusals = [
        // Another major version: not of a minor line.
        (
            "req-upline-major",
            &minor_id,
            &v200_digest,
            "2.0.0",
            Code::PermissionDenied,
            "not a newer version of that line",
        ),
        // A minor step for a container that follows patches only.
        (
            "req-upline-minor",
            &patch_id,
            &v110_digest,
            "1.1.0",
            Code::PermissionDenied,
            "drydock.update=patch",
        ),
        // A container that follows its tag moves to no other.
        (
            "req-upline-plain",
            &plain_id,
            &v101_digest,
            "1.0.1",
            Code::PermissionDenied,
            "drydock.update=digest",
        ),
    ];
    for (request, container, digest, tag, code, says) in refusals {
        let err = c
            .update_container(update(
                request,
                container,
                digest,
                tag,
                approval(request, container, digest, Some(tag)),
            ))
            .await
            .expect_err(request);
        assert_eq!(err.code(), code, "{request}: {err:?}");
        assert!(err.message().contains(says), "{request}: {err:?}");
    }
    // The request names a tag the approval does not.
    let err = c
        .update_container(update(
            "req-upline-unsigned",
            &patch_id,
            &v101_digest,
            "1.0.1",
            approval("req-upline-unsigned", &patch_id, &v101_digest, None),
        ))
        .await
        .expect_err("a tag the approval does not name");
    assert!(err.message().contains("update to tag"), "{err:?}");
    for request in [
        "req-upline-major",
        "req-upline-minor",
        "req-upline-plain",
        "req-upline-unsigned",
    ] {
        let row = dd
            .audit_rows()
            .into_iter()
            .rev()
            .find(|r| r["request_id"] == request)
            .unwrap_or_else(|| panic!("{request}: no audit row"));
        assert_eq!(row["decision"], "denied", "{row}");
    }
    assert!(
        !docker(&["image", "inspect", &format!("{repo}@{v110_digest}")])
            .status
            .success(),
        "a refused update pulls nothing"
    );
    drop(c);
    drop(exec);

    // Found by the agent's check and applied by a person.
    dd.up();
    let out = dd.cli(&["updates", "--check", "--json"]);
    let found: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let of = |name: &str| {
        found["updates"]
            .as_array()
            .and_then(|l| l.iter().find(|u| u["container"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} not listed: {found:#}"))
    };
    assert_eq!(of(&patch.0)["new_tag"], "1.0.1", "{found:#}");
    assert_eq!(of(&patch.0)["new_version"], "1.0.1", "{found:#}");
    assert_eq!(of(&minor.0)["new_tag"], "1.1.0", "{found:#}");
    let out = dd.cli(&["update", &patch.0, "--yes"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let new = docker_ok(&["inspect", "-f", "{{.Id}}", &patch.0]);
    assert_ne!(new, patch_id);
    assert_eq!(inspect(&new, "{{.Config.Image}}"), format!("{repo}:1.0.1"));
    assert!(
        inspect(&new, "{{.Config.Labels}}").contains("drydock.update:patch"),
        "the label stays"
    );
    assert_eq!(
        docker_ok(&["image", "inspect", "-f", "{{.Id}}", &running]),
        v100,
        "the tag it ran still names its image"
    );
    let row = dd
        .audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["action"] == "update" && r["decision"] == "allowed")
        .expect("the update's audit row");
    assert!(
        row["input"]
            .as_str()
            .unwrap_or_default()
            .contains("to_tag=1.0.1"),
        "{row}"
    );
    // Up to date along its line now.
    let out = dd.cli(&["updates", "--check", "--json"]);
    let found: Value = serde_json::from_slice(&out.stdout).expect("updates");
    assert!(
        !found["updates"]
            .as_array()
            .is_some_and(|l| l.iter().any(|u| u["container"] == patch.0.as_str())),
        "{found:#}"
    );
    for (v, _) in &newer {
        let _ = docker(&["rmi", "-f", &format!("{repo}:{v}")]);
    }
}
