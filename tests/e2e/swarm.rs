//! Swarm services on a real Swarm: a second engine in a network namespace
//! of its own (`second_engine.rs`), a real executor pointed at it, and the
//! executor's Swarm calls made as the agent (and a compromised agent)
//! would. The agent's side (diagnosis, plans, approvals, grants,
//! verification) is in `swarm_repairs.rs`.

use std::time::Duration;

use drydock_e2e::approvals::{claims_named, unix_now};
use drydock_e2e::second_engine::SecondEngine;
use drydock_e2e::*;
use drydock_proto::approval::{self, ServiceClaims, WriteAction};
use drydock_proto::grant::{self, GrantClaims, GrantScope, GRANT_KIND, GRANT_VERSION_NO_HOST};
use drydock_proto::pb;
use tonic::Code;

const FIXTURE: &str = drydock::fixture::FIXTURE_IMAGE;

/// The executor's config with Swarm services of `stacks` in scope (and no
/// container), service rollbacks and automation grants allowed.
pub fn swarm_config(yaml: String, stacks: &[&str]) -> String {
    let stacks = stacks
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect::<Vec<_>>()
        .join(", ");
    yaml.lines()
        .map(|l| {
            if l.starts_with("  allow_names: [") {
                format!(
                    "  allow_names: [\"no-container-*\"]\n  services: {{allow_stacks: [{stacks}]}}"
                )
            } else if l.trim() == "service_rollback: {enabled: false}" {
                "  service_rollback: {enabled: true}".into()
            } else if l.trim() == "enabled: false" && l.starts_with("  enabled") {
                "  enabled: true".into()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// A home whose executor talks to `engine`.
pub fn home_on(engine: &SecondEngine) -> Drydock {
    Drydock::init_options(|o| o.docker_endpoint = engine.endpoint())
}

fn approver(dd: &Drydock) -> ed25519_dalek::SigningKey {
    dd.approver_key()
}

/// A service's id, spec version and image, as the engine says now.
fn spec(engine: &SecondEngine, name: &str) -> (String, u64, String) {
    let line = engine.ok(&[
        "service",
        "inspect",
        name,
        "--format",
        "{{.ID}} {{.Version.Index}} {{.Spec.TaskTemplate.ContainerSpec.Image}}",
    ]);
    let mut parts = line.split_whitespace();
    (
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().parse().unwrap_or(0),
        parts.next().unwrap_or_default().to_string(),
    )
}

/// Approval claims for a service's write, as the agent makes them.
fn service_claims(
    request_id: &str,
    action: WriteAction,
    (id, version, image): &(String, u64, String),
    name: &str,
    to_image: Option<&str>,
) -> approval::ApprovalClaims {
    let mut c = claims_named(request_id, action, "", "");
    c.service = Some(ServiceClaims {
        id: id.clone(),
        name: name.into(),
        version: *version,
        image: image.clone(),
        to_image: to_image.map(str::to_string),
    });
    c
}

fn signed(c: &approval::ApprovalClaims, key: &ed25519_dalek::SigningKey) -> pb::Approval {
    drydock_e2e::approvals::sign(c, key, drydock::home::DEFAULT_APPROVER_ID)
}

fn service_write(
    request_id: &str,
    service: &str,
    approval: pb::Approval,
) -> pb::ServiceWriteRequest {
    pb::ServiceWriteRequest {
        request_id: request_id.into(),
        service: service.into(),
        approval: Some(approval),
        ..Default::default()
    }
}

/// The audit row of a request id.
fn audit_for(dd: &Drydock, request_id: &str) -> serde_json::Value {
    dd.audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["request_id"] == request_id)
        .unwrap_or_else(|| panic!("no audit row for {request_id}"))
}

fn grant_for(
    key: &ed25519_dalek::SigningKey,
    actions: Vec<WriteAction>,
    scope: GrantScope,
) -> pb::Grant {
    let now = unix_now();
    let claims = GrantClaims {
        version: GRANT_VERSION_NO_HOST,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions,
        scope,
        classes: vec![],
        max_per_container: 2,
        window_secs: 3600,
        max_total: 10,
        issued_at: now,
        expires_at: now + 3600,
        host: None,
        hours: None,
    }
    .encode();
    pb::Grant {
        signature: grant::sign(&claims, key),
        claims,
        key_id: drydock::home::DEFAULT_APPROVER_ID.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn swarm_calls_are_scoped_redacted_bound_to_the_spec_and_audited() {
    prepare();
    let engine = SecondEngine::start_swarm(&[FIXTURE]);
    engine.ok(&[
        "service",
        "create",
        "-d",
        "--name",
        "shop_api",
        "--label",
        "com.docker.stack.namespace=shop",
        "--env",
        "DATABASE_URL=postgres://app:hunter2@db/shop",
        "--replicas",
        "2",
        FIXTURE,
        "serve",
        "--port",
        "8080",
    ]);
    engine.ok(&[
        "service",
        "create",
        "-d",
        "--name",
        "bank_api",
        "--label",
        "com.docker.stack.namespace=bank",
        FIXTURE,
        "sleep",
    ]);
    engine.wait_for("shop_api to run 2/2", Duration::from_secs(60), |e| {
        e.replicas("shop_api") == "2/2"
    });
    let dd = home_on(&engine);
    let exec = ExecutorProcess::start(&dd, |y| swarm_config(y, &["shop"]));
    let mut client = exec.agent_client(&dd).await;
    let key = approver(&dd);

    // Reads: only the stack in scope, redacted, with the spec version.
    let listed = client
        .list_services(pb::ListServicesRequest {
            request_id: "req-sw-list".into(),
        })
        .await
        .expect("list services")
        .into_inner();
    let names: Vec<&str> = listed.services.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["shop_api"], "only the stack in scope");
    let api = &listed.services[0];
    assert_eq!(
        (api.stack.as_str(), api.running, api.desired),
        ("shop", 2, 2)
    );
    let inspected = client
        .inspect_service(pb::ServiceRequest {
            request_id: "req-sw-inspect".into(),
            service: "shop_api".into(),
        })
        .await
        .expect("inspect")
        .into_inner();
    let text = format!("{inspected:?}");
    assert!(!text.contains("hunter2"), "the secret leaked: {text}");
    assert!(inspected.redactions > 0);
    assert_eq!(inspected.env_hashes.len(), 1);
    let tasks = client
        .service_tasks(pb::ServiceRequest {
            request_id: "req-sw-tasks".into(),
            service: api.id.clone(),
        })
        .await
        .expect("tasks")
        .into_inner();
    assert!(
        tasks.tasks.iter().filter(|t| t.state == "running").count() >= 2,
        "{tasks:?}"
    );
    let logs = client
        .service_logs(pb::ServiceLogsRequest {
            request_id: "req-sw-logs".into(),
            service: "shop_api".into(),
            tail: 50,
            ..Default::default()
        })
        .await
        .expect("service logs")
        .into_inner();
    assert!(
        logs.lines.iter().any(|l| l.text.contains("listening on")),
        "{logs:?}"
    );
    let nodes = client
        .list_nodes(pb::ListNodesRequest {
            request_id: "req-sw-nodes".into(),
        })
        .await
        .expect("nodes")
        .into_inner();
    assert_eq!(nodes.nodes.len(), 1);
    assert!(nodes.nodes[0].leader && nodes.nodes[0].labels.is_empty());

    // Out of scope looks missing, for reads and writes alike; the audit
    // keeps why.
    for (req_id, service) in [
        ("req-sw-hidden", "bank_api"),
        ("req-sw-missing", "nope_api"),
    ] {
        let err = client
            .inspect_service(pb::ServiceRequest {
                request_id: req_id.into(),
                service: service.into(),
            })
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::NotFound, "{err:?}");
        assert_eq!(err.message(), format!("service {service} not found"));
    }
    assert!(audit_for(&dd, "req-sw-hidden")["reason"]
        .as_str()
        .unwrap()
        .contains("hidden from the caller"),);
    // Its tasks and logs too.
    let err = client
        .service_tasks(pb::ServiceRequest {
            request_id: "req-sw-hidden-tasks".into(),
            service: "bank_api".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    let err = client
        .service_logs(pb::ServiceLogsRequest {
            request_id: "req-sw-hidden-logs".into(),
            service: "bank_api".into(),
            tail: 10,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
    // A hidden service named like a visible one's id prefix does not
    // shadow it: the name of what is hidden never shows through.
    let prefix = &api.id[..8];
    engine.ok(&[
        "service",
        "create",
        "-d",
        "--name",
        prefix,
        "--label",
        "com.docker.stack.namespace=bank",
        FIXTURE,
        "sleep",
    ]);
    let by_prefix = client
        .inspect_service(pb::ServiceRequest {
            request_id: "req-sw-prefix".into(),
            service: prefix.into(),
        })
        .await
        .expect("the visible service by its id prefix")
        .into_inner();
    assert_eq!(by_prefix.summary.map(|s| s.name), Some("shop_api".into()));
    let bank = spec(&engine, "bank_api");
    let c = service_claims(
        "req-sw-hidden-write",
        WriteAction::ForceUpdate,
        &bank,
        "bank_api",
        None,
    );
    let err = client
        .force_update_service(service_write(
            "req-sw-hidden-write",
            "bank_api",
            signed(&c, &key),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);

    // A force update with a person's approval bound to the spec version.
    let before = spec(&engine, "shop_api");
    let c = service_claims(
        "req-sw-force",
        WriteAction::ForceUpdate,
        &before,
        "shop_api",
        None,
    );
    let done = client
        .force_update_service(service_write("req-sw-force", "shop_api", signed(&c, &key)))
        .await
        .expect("force update")
        .into_inner();
    assert!(done.version > before.1, "{done:?}");
    assert_eq!(
        decisions(
            &dd.audit_rows()
                .iter()
                .filter(|r| r["request_id"] == "req-sw-force")
                .cloned()
                .collect::<Vec<_>>()
        ),
        ["intent", "allowed"]
    );
    // The same approval again: refused (the write moved the spec on, and
    // its nonce is spent).
    let err = client
        .force_update_service(service_write("req-sw-force", "shop_api", signed(&c, &key)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert_eq!(
        decisions(
            &dd.audit_rows()
                .iter()
                .filter(|r| r["request_id"] == "req-sw-force")
                .cloned()
                .collect::<Vec<_>>()
        ),
        ["intent", "allowed", "denied"],
        "the replay is audited"
    );

    // Someone changes the spec after an approval was made: refused.
    engine.wait_for("the force update to settle", Duration::from_secs(60), |e| {
        e.replicas("shop_api") == "2/2"
    });
    let shown = spec(&engine, "shop_api");
    let stale = service_claims(
        "req-sw-stale",
        WriteAction::ForceUpdate,
        &shown,
        "shop_api",
        None,
    );
    engine.ok(&[
        "service",
        "update",
        "-d",
        "--env-add",
        "FEATURE=1",
        "shop_api",
    ]);
    let err = client
        .force_update_service(service_write(
            "req-sw-stale",
            "shop_api",
            signed(&stale, &key),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("spec version"), "{err:?}");
    assert_eq!(audit_for(&dd, "req-sw-stale")["decision"], "denied");

    // A harmless name over another service's id; a force update's approval
    // used for a rollback: both refused.
    let now_spec = spec(&engine, "shop_api");
    let mut lying = service_claims(
        "req-sw-name",
        WriteAction::ForceUpdate,
        &now_spec,
        "shop_docs",
        None,
    );
    lying.approval_id = "apr-test-lying".into();
    let err = client
        .force_update_service(service_write(
            "req-sw-name",
            "shop_api",
            signed(&lying, &key),
        ))
        .await
        .unwrap_err();
    assert!(
        err.message().contains("names service `shop_docs`"),
        "{err:?}"
    );
    let tier = service_claims(
        "req-sw-tier",
        WriteAction::ForceUpdate,
        &now_spec,
        "shop_api",
        None,
    );
    let err = client
        .rollback_service(service_write(
            "req-sw-tier",
            "shop_api",
            signed(&tier, &key),
        ))
        .await
        .unwrap_err();
    assert!(err.message().contains("for action force_update"), "{err:?}");

    // Grants: never a rollback; a force update only of a failing service,
    // only within the grant's stacks.
    engine.wait_for("the env update to settle", Duration::from_secs(60), |e| {
        e.replicas("shop_api") == "2/2"
            && e.ok(&[
                "service",
                "inspect",
                "shop_api",
                "--format",
                "{{.UpdateStatus.State}}",
            ]) == "completed"
    });
    let stack = GrantScope {
        stacks: vec!["shop".into()],
        ..Default::default()
    };
    let cases: Vec<(&str, WriteAction, pb::Grant, &str)> = vec![
        (
            "req-sw-grant-rollback",
            WriteAction::ServiceRollback,
            grant_for(&key, vec![WriteAction::ForceUpdate], stack.clone()),
            "does not cover service_rollback",
        ),
        (
            "req-sw-grant-healthy",
            WriteAction::ForceUpdate,
            grant_for(&key, vec![WriteAction::ForceUpdate], stack.clone()),
            "none failed",
        ),
        (
            "req-sw-grant-project",
            WriteAction::ForceUpdate,
            grant_for(
                &key,
                vec![WriteAction::ForceUpdate],
                GrantScope {
                    projects: vec!["shop".into()],
                    ..Default::default()
                },
            ),
            "outside grant",
        ),
    ];
    for (req_id, action, g, says) in cases {
        let req = pb::ServiceWriteRequest {
            request_id: req_id.into(),
            service: "shop_api".into(),
            grant: Some(g),
            fault_class: "unhealthy".into(),
            ..Default::default()
        };
        let err = match action {
            WriteAction::ServiceRollback => client.rollback_service(req).await,
            _ => client.force_update_service(req).await,
        }
        .unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{req_id}: {err:?}");
        assert!(err.message().contains(says), "{req_id}: {err:?}");
        assert_eq!(audit_for(&dd, req_id)["decision"], "denied", "{req_id}");
    }

    // Service rollback off: refused by policy, before any approval.
    drop(client);
    drop(exec);
    let off = ExecutorProcess::start(&dd, |y| {
        swarm_config(y, &["shop"]).replace(
            "service_rollback: {enabled: true}",
            "service_rollback: {enabled: false}",
        )
    });
    let mut client = off.agent_client(&dd).await;
    let now_spec = spec(&engine, "shop_api");
    let c = service_claims(
        "req-sw-off",
        WriteAction::ServiceRollback,
        &now_spec,
        "shop_api",
        Some("x"),
    );
    let err = client
        .rollback_service(service_write("req-sw-off", "shop_api", signed(&c, &key)))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    assert!(err.message().contains("disabled"), "{err:?}");
    drop(client);
    drop(off);

    // An engine that is no Swarm manager says so.
    let plain = Drydock::init();
    let exec = ExecutorProcess::start(&plain, |y| swarm_config(y, &["shop"]));
    let mut client = exec.agent_client(&plain).await;
    let err = client
        .list_services(pb::ListServicesRequest {
            request_id: "req-sw-plain".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("not a Swarm manager"), "{err:?}");

    assert!(dd.audit_verify().status.success(), "the audit chain holds");
}
