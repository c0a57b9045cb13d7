//! The executor called directly, as a compromised agent would: every refusal
//! path, through a real gRPC client over real mTLS, each checked for its
//! status code and its audit row.

use std::time::Duration;

use drydock::pki::{Authority, Usage};
use drydock_e2e::approvals::{claims, sign, unix_now};
use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use tonic::Code;

struct Pki {
    ca: Vec<u8>,
    agent_cert: Vec<u8>,
    agent_key: Vec<u8>,
}

fn pki(dd: &Drydock) -> Pki {
    Pki {
        ca: read(&dd.home.path("pki/ca.crt")),
        agent_cert: read(&dd.home.path("pki/agent.crt")),
        agent_key: read(&dd.home.path("pki/agent.key")),
    }
}

fn approver(dd: &Drydock) -> ed25519_dalek::SigningKey {
    dd.approver_key()
}

fn write(request_id: &str, container: &str, approval: Option<pb::Approval>) -> pb::WriteRequest {
    pb::WriteRequest {
        request_id: request_id.into(),
        container: container.into(),
        approval,
        ..Default::default()
    }
}

fn sleeper(test: &str) -> Container {
    Container::run(test, &[drydock::fixture::FIXTURE_IMAGE, "sleep"])
}

/// The audit row for a request id (each case uses its own).
fn audit_for(dd: &Drydock, request_id: &str) -> serde_json::Value {
    dd.audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["request_id"] == request_id)
        .unwrap_or_else(|| panic!("no audit row for {request_id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_refusal_matrix() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let p = pki(&dd);
    let key = approver(&dd);
    let a = sleeper("matrix-a");
    let b = sleeper("matrix-b");
    let (a_id, b_id) = (a.id(), b.id());
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("agent connects");
    let other_key = drydock_proto::approval::generate_signing_key();

    type Case = (&'static str, pb::WriteRequest, Code, &'static str);
    let mut cases: Vec<Case> = Vec::new();
    cases.push((
        "no-approval",
        write("req-no-approval", &a.name, None),
        Code::FailedPrecondition,
        "approval missing",
    ));
    let c = claims("req-other-container", WriteAction::Restart, &b_id);
    cases.push((
        "other-container",
        write(
            "req-other-container",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "is for container",
    ));
    let c = claims("req-other-action", WriteAction::Start, &a_id);
    cases.push((
        "other-action",
        write(
            "req-other-action",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "is for action start",
    ));
    // A compromised agent pairing a harmless name (shown to the human) with
    // another container's id.
    let c =
        drydock_e2e::approvals::claims_named("req-name-swap", WriteAction::Restart, &a_id, &b.name);
    cases.push((
        "name-swap",
        write(
            "req-name-swap",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "names container",
    ));
    let c = claims("req-signed-for", WriteAction::Restart, &a_id);
    cases.push((
        "other-request",
        write(
            "req-other-request",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "is for request req-signed-for",
    ));
    let c = claims("req-forged", WriteAction::Restart, &a_id);
    cases.push((
        "forged",
        write(
            "req-forged",
            &a.name,
            Some(sign(&c, &other_key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "signature does not verify",
    ));
    let c = claims("req-unknown-key", WriteAction::Restart, &a_id);
    cases.push((
        "unknown-key",
        write(
            "req-unknown-key",
            &a.name,
            Some(sign(&c, &other_key, "mallory")),
        ),
        Code::FailedPrecondition,
        "unknown key id `mallory`",
    ));
    let mut c = claims("req-expired", WriteAction::Restart, &a_id);
    c.issued_at = unix_now() - 600;
    c.expires_at = unix_now() - 1;
    cases.push((
        "expired",
        write(
            "req-expired",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "expired",
    ));
    let mut c = claims("req-too-long", WriteAction::Restart, &a_id);
    c.expires_at = unix_now() + 86_400;
    cases.push((
        "lifetime",
        write(
            "req-too-long",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "exceeds",
    ));
    // issued_at = expires_at − 2^63: `expires_at − issued_at` wraps to a
    // negative lifetime, which once passed the `lifetime > max` check.
    let mut c = claims("req-wrapped", WriteAction::Restart, &a_id);
    c.issued_at = c.expires_at.wrapping_sub(i64::MIN);
    cases.push((
        "wrapped-lifetime",
        write(
            "req-wrapped",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "exceeds",
    ));
    let mut c = claims("req-inverted", WriteAction::Restart, &a_id);
    c.issued_at = c.expires_at + 30;
    cases.push((
        "inverted-window",
        write(
            "req-inverted",
            &a.name,
            Some(sign(&c, &key, "local-operator")),
        ),
        Code::FailedPrecondition,
        "not after issued_at",
    ));
    let c = claims("req-tampered", WriteAction::Restart, &a_id);
    let mut tampered = sign(&c, &key, "local-operator");
    tampered.claims = String::from_utf8(tampered.claims)
        .unwrap()
        .replace(&a_id, &b_id)
        .into_bytes();
    cases.push((
        "tampered",
        write("req-tampered", &b.name, Some(tampered)),
        Code::FailedPrecondition,
        "signature does not verify",
    ));
    let mut garbage = sign(
        &claims("req-garbage", WriteAction::Restart, &a_id),
        &key,
        "local-operator",
    );
    garbage.signature = vec![1, 2, 3];
    cases.push((
        "short-signature",
        write("req-garbage", &a.name, Some(garbage)),
        Code::FailedPrecondition,
        "signature is not 64 bytes",
    ));
    let mut huge = sign(
        &claims("req-huge", WriteAction::Restart, &a_id),
        &key,
        "local-operator",
    );
    huge.claims = vec![b'{'; 10_000];
    cases.push((
        "oversized-claims",
        write("req-huge", &a.name, Some(huge)),
        Code::FailedPrecondition,
        "more than the 4096 allowed",
    ));
    cases.push((
        "malformed-name",
        write("req-bad-name", "a;rm -rf /", None),
        Code::InvalidArgument,
        "container must be",
    ));
    cases.push((
        "oversized-name",
        write("req-long-name", &"x".repeat(300), None),
        Code::InvalidArgument,
        "container must be",
    ));
    cases.push((
        "malformed-request-id",
        write("req id with spaces", &a.name, None),
        Code::InvalidArgument,
        "request_id must be",
    ));
    cases.push((
        "missing-container",
        write("req-missing", "dd-no-such-container", None),
        Code::NotFound,
        "not found",
    ));

    let started_a = a.inspect("{{.State.StartedAt}}");
    for (name, req, code, needle) in cases {
        let request_id = req.request_id.clone();
        let err = client.restart_container(req).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err:?}");
        assert!(err.message().contains(needle), "{name}: {}", err.message());
        let row = audit_for(&dd, &request_id);
        assert_eq!(row["action"], "restart", "{name}");
        let decision = if name == "missing-container" {
            "error"
        } else {
            "denied"
        };
        assert_eq!(row["decision"], decision, "{name}: {row}");
        assert!(
            row["reason"].as_str().unwrap_or("").contains(needle),
            "{name}: {row}"
        );
    }
    assert_eq!(
        a.inspect("{{.State.StartedAt}}"),
        started_a,
        "no refused call restarted the container"
    );

    // A valid approval works once; the same approval again is a replay.
    let c = claims("req-valid", WriteAction::Restart, &a_id);
    let approval = sign(&c, &key, "local-operator");
    client
        .restart_container(write("req-valid", &a.name, Some(approval.clone())))
        .await
        .expect("valid approval is accepted");
    assert_ne!(
        a.inspect("{{.State.StartedAt}}"),
        started_a,
        "the restart happened"
    );
    let err = client
        .restart_container(write("req-valid", &a.name, Some(approval.clone())))
        .await
        .expect_err("replay");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(err.message().contains("already used"), "{}", err.message());

    // ...also after an executor restart: nonces are persisted.
    drop(client);
    let status = exec.stop();
    assert!(status.success(), "graceful shutdown on SIGTERM: {status}");
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("reconnect");
    let err = client
        .restart_container(write("req-valid", &a.name, Some(approval)))
        .await
        .expect_err("replay after restart");
    assert!(err.message().contains("already used"), "{}", err.message());

    let rows = dd.audit_rows();
    let valid: Vec<_> = rows
        .iter()
        .filter(|r| r["request_id"] == "req-valid")
        .collect();
    assert_eq!(
        valid
            .iter()
            .map(|r| r["decision"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["intent", "allowed", "denied", "denied"],
        "the approval is spent (intent) once; replays are denied without a new intent"
    );
    assert_eq!(valid[0]["approval_id"], c.approval_id.as_str());
    assert_eq!(valid[1]["approval_id"], c.approval_id.as_str());
    dd.assert_audit_intact();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreated_container_does_not_match_an_old_approval() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let p = pki(&dd);
    let key = approver(&dd);
    let old = sleeper("recreated");
    let old_id = old.id();
    let name = old.name.clone();
    let c = claims("req-recreated", WriteAction::Restart, &old_id);
    docker_ok(&["rm", "-f", &name]);
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &name,
        drydock::fixture::FIXTURE_IMAGE,
        "sleep",
    ]);
    let new_id = old.id();
    assert_ne!(old_id, new_id);
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("connect");
    let err = client
        .restart_container(write(
            "req-recreated",
            &name,
            Some(sign(&c, &key, "local-operator")),
        ))
        .await
        .expect_err("recreated");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert!(
        err.message().contains("is for container"),
        "{}",
        err.message()
    );
    assert_eq!(audit_for(&dd, "req-recreated")["decision"], "denied");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_refuses_disabled_actions_and_hides_unselected_targets() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace("restart: {enabled: true}", "restart: {enabled: false}")
            .replace(
                "allow_names: [\"*\"]",
                "allow_names: [\"*\"]\n  allow_labels: {drydock.managed: \"true\"}",
            )
    });
    let p = pki(&dd);
    let key = approver(&dd);
    let managed = Container::run(
        "managed",
        &[
            "--label",
            "drydock.managed=true",
            drydock::fixture::FIXTURE_IMAGE,
            "sleep",
        ],
    );
    let unmanaged = sleeper("unmanaged");
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("connect");

    // Disabled action: refused whatever was signed.
    let c = claims("req-disabled", WriteAction::Restart, &managed.id());
    let err = client
        .restart_container(write(
            "req-disabled",
            &managed.name,
            Some(sign(&c, &key, "local-operator")),
        ))
        .await
        .expect_err("disabled");
    assert_eq!(err.code(), Code::PermissionDenied);
    assert!(err.message().contains("disabled"), "{}", err.message());
    assert!(audit_for(&dd, "req-disabled")["reason"]
        .as_str()
        .unwrap()
        .contains("disabled"));

    // Outside the selectors: refused for writes, as if it did not exist...
    let c = claims("req-unselected", WriteAction::Start, &unmanaged.id());
    let err = client
        .start_container(write(
            "req-unselected",
            &unmanaged.name,
            Some(sign(&c, &key, "local-operator")),
        ))
        .await
        .expect_err("unselected");
    assert_eq!(err.code(), Code::NotFound);
    assert!(!err.message().contains("selector"), "{}", err.message());
    let row = audit_for(&dd, "req-unselected");
    assert_eq!(row["decision"], "denied");
    assert!(
        row["reason"]
            .as_str()
            .unwrap()
            .contains("outside the executor's target selectors"),
        "{row}"
    );

    // A disabled action must not become a probe either: out-of-policy
    // containers look missing whatever is asked.
    let err = client
        .stop_container(write("req-probe", &unmanaged.name, None))
        .await
        .expect_err("probe");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    // ...and invisible to reads, exactly like a missing container.
    let err = client
        .inspect_container(pb::ContainerRequest {
            request_id: "req-hidden".into(),
            container: unmanaged.name.clone(),
        })
        .await
        .expect_err("hidden");
    assert_eq!(err.code(), Code::NotFound);
    assert!(
        !err.message().contains("selector"),
        "the refusal must not reveal the container exists: {}",
        err.message()
    );
    assert!(
        audit_for(&dd, "req-hidden")["reason"]
            .as_str()
            .unwrap()
            .contains("selectors"),
        "the audit keeps the real reason"
    );
    let list = client
        .list_containers(pb::ListContainersRequest {
            request_id: "req-list".into(),
            all: true,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    let names: Vec<&str> = list.containers.iter().map(|c| c.name.as_str()).collect();
    assert!(names.contains(&managed.name.as_str()), "{names:?}");
    assert!(!names.contains(&unmanaged.name.as_str()), "{names:?}");
    let ok = client
        .inspect_container(pb::ContainerRequest {
            request_id: "req-visible".into(),
            container: managed.name.clone(),
        })
        .await
        .expect("managed is visible");
    assert_eq!(ok.into_inner().name, managed.name);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_refuses_clients_without_an_allowed_certificate() {
    let dd = Drydock::init();
    // Clients are checked against a CA made here, with certificates made by
    // the product's own PKI code.
    let client_ca = Authority::new("test client CA").expect("ca");
    let other_ca = Authority::new("someone else's CA").expect("ca");
    std::fs::write(dd.home.path("pki/test-client-ca.crt"), client_ca.cert_pem()).expect("write");
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace("client_ca: pki/ca.crt", "client_ca: pki/test-client-ca.crt")
    });
    let ca = read(&dd.home.path("pki/ca.crt"));
    let good = client_ca
        .issue("drydock-agent", &[], Usage::Client, 0, 30)
        .expect("issue");
    let intruder = client_ca
        .issue("intruder", &[], Usage::Client, 0, 30)
        .expect("issue");
    let expired = client_ca
        .issue("drydock-agent", &[], Usage::Client, -30, 10)
        .expect("issue");
    let foreign = other_ca
        .issue("drydock-agent", &[], Usage::Client, 0, 30)
        .expect("issue");
    let probe = |id: &'static str| pb::ListContainersRequest {
        request_id: id.into(),
        all: false,
        ..Default::default()
    };

    let mut ok = grpc::connect(
        exec.port,
        &ca,
        Some((good.cert_pem.as_bytes(), good.key_pem.as_bytes())),
    )
    .await
    .expect("good cert connects");
    ok.list_containers(probe("req-good"))
        .await
        .expect("allowed identity is served");

    let mut c = grpc::connect(
        exec.port,
        &ca,
        Some((intruder.cert_pem.as_bytes(), intruder.key_pem.as_bytes())),
    )
    .await
    .expect("TLS itself succeeds");
    let err = c
        .list_containers(probe("req-intruder"))
        .await
        .expect_err("identity not allowed");
    assert_eq!(err.code(), Code::Unauthenticated);
    assert!(err.message().contains("intruder"), "{}", err.message());
    let row = audit_for(&dd, "req-intruder");
    assert_eq!(
        (row["decision"].as_str(), row["caller"].as_str()),
        (Some("denied"), Some("intruder"))
    );
    // The newer reads go through the same gate.
    let err = c
        .disk_usage(pb::ContainerRequest {
            request_id: "req-intruder-disk".into(),
            container: "anything".into(),
        })
        .await
        .expect_err("identity not allowed");
    assert_eq!(err.code(), Code::Unauthenticated);
    let err = c
        .container_events(pb::ContainerEventsRequest {
            request_id: "req-intruder-events".into(),
            container: "anything".into(),
            ..Default::default()
        })
        .await
        .expect_err("identity not allowed");
    assert_eq!(err.code(), Code::Unauthenticated);
    for (id, action) in [
        ("req-intruder-disk", "disk_usage"),
        ("req-intruder-events", "events"),
    ] {
        let row = audit_for(&dd, id);
        assert_eq!(
            (
                row["decision"].as_str(),
                row["caller"].as_str(),
                row["action"].as_str()
            ),
            (Some("denied"), Some("intruder"), Some(action)),
            "{row:#}"
        );
    }
    // The standard health service answers known identities only, and its
    // refusals are audited too.
    let health_channel =
        tonic::transport::Endpoint::from_shared(format!("https://127.0.0.1:{}", exec.port))
            .unwrap()
            .tls_config(
                tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(&ca))
                    .identity(tonic::transport::Identity::from_pem(
                        intruder.cert_pem.as_bytes(),
                        intruder.key_pem.as_bytes(),
                    ))
                    .domain_name("drydock-executor"),
            )
            .unwrap()
            .connect()
            .await
            .expect("TLS itself succeeds");
    let mut health = tonic_health::pb::health_client::HealthClient::new(health_channel);
    let refused_probes = |dd: &Drydock| {
        dd.audit_rows()
            .iter()
            .filter(|r| {
                r["action"] == "health" && r["caller"] == "intruder" && r["decision"] == "denied"
            })
            .count()
    };
    // Every probe is refused and the first is audited. A flood is written
    // only up to a count per window (the rest are counted for a summary
    // row): it cannot make the executor fsync once per probe.
    for n in 1..=41 {
        let err = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: String::new(),
            })
            .await
            .expect_err("intruder health check");
        assert_eq!(err.code(), Code::Unauthenticated);
        if n == 1 {
            assert_eq!(refused_probes(&dd), 1, "refused health checks are audited");
        }
    }
    assert_eq!(
        refused_probes(&dd),
        20,
        "rows for 41 refused probes in one window: the first 20"
    );

    let before = dd
        .audit_rows()
        .iter()
        .filter(|r| r["action"] == "connect")
        .count();
    for (name, ident) in [
        ("no certificate", None),
        ("expired", Some(&expired)),
        ("other CA", Some(&foreign)),
    ] {
        let result = match ident {
            None => grpc::connect(exec.port, &ca, None).await,
            Some(i) => {
                grpc::connect(
                    exec.port,
                    &ca,
                    Some((i.cert_pem.as_bytes(), i.key_pem.as_bytes())),
                )
                .await
            }
        };
        // TLS 1.3 may report a refused client certificate on the first call
        // rather than at connect; either way nothing is served.
        if let Ok(mut client) = result {
            let err = client
                .list_containers(probe("req-refused"))
                .await
                .expect_err(name);
            assert_ne!(err.code(), Code::Ok, "{name}");
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rows = dd.audit_rows();
    let refused: Vec<_> = rows.iter().filter(|r| r["action"] == "connect").collect();
    assert!(
        refused.len() >= before + 3,
        "each refused handshake is audited: {refused:?}"
    );
    assert!(refused
        .iter()
        .all(|r| r["decision"] == "denied" && r["code"] == "Unauthenticated"));
    assert!(
        !rows.iter().any(|r| r["request_id"] == "req-refused"),
        "no refused client reached the service"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_configured_approver_may_sign_and_is_named_in_the_audit() {
    let dd = Drydock::init();
    let second = drydock_proto::approval::generate_signing_key();
    let public = drydock_proto::approval::format_public_key(&second.verifying_key());
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace(
            "approvers:\n",
            &format!("approvers:\n  - id: ops-bob\n    public_key: \"{public}\"\n"),
        )
    });
    let p = pki(&dd);
    let target = sleeper("two-approvers");
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("connect");
    let policy = client
        .get_policy(pb::GetPolicyRequest {
            request_id: "req-policy".into(),
        })
        .await
        .expect("policy")
        .into_inner();
    assert_eq!(policy.approver_ids, ["local-operator", "ops-bob"]);
    let c = claims("req-bob", WriteAction::Restart, &target.id());
    client
        .restart_container(write(
            "req-bob",
            &target.name,
            Some(sign(&c, &second, "ops-bob")),
        ))
        .await
        .expect("bob's approval");
    // A valid signature under the wrong key id is still a forgery.
    let c = claims("req-bob-as-alice", WriteAction::Restart, &target.id());
    let err = client
        .restart_container(write(
            "req-bob-as-alice",
            &target.name,
            Some(sign(&c, &second, "local-operator")),
        ))
        .await
        .expect_err("wrong key id");
    assert_eq!(err.code(), Code::FailedPrecondition);
    let row = audit_for(&dd, "req-bob");
    assert_eq!(
        (row["decision"].as_str(), row["key_id"].as_str()),
        (Some("allowed"), Some("ops-bob"))
    );
    assert!(row["approval_id"]
        .as_str()
        .is_some_and(|a| a.starts_with("apr-test-")));
    assert_eq!(
        audit_for(&dd, "req-bob-as-alice")["key_id"],
        "local-operator"
    );
}

/// A stopped container (`docker create`), removed when the guard drops.
fn created(test: &str, args: &[&str]) -> Container {
    let name = unique(test);
    let mut all = vec!["create", "--name", name.as_str()];
    all.extend_from_slice(args);
    all.extend_from_slice(&[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    docker_ok(&all);
    Container { name }
}

/// Hidden containers must not change any answer: an id prefix shared with
/// a hidden container resolves among the visible ones, a hidden container
/// looks exactly like a missing one, and a list filter cannot confirm a
/// guessed value of a label the executor withholds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_containers_leave_no_trace_in_answers() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace(
            "allow_names: [\"*\"]",
            "allow_names: [\"*\"]\n  allow_labels: {drydock.oracle: \"visible\"}",
        )
    });
    let p = pki(&dd);
    let visible = created(
        "oracle-visible",
        &[
            "--label",
            "drydock.oracle=visible",
            "--label",
            "db_password=hunter2",
        ],
    );
    let visible_id = visible.id();
    // Hidden containers until one shares the visible one's first id digit
    // (1 in 16 each; 200 tries leave a one-in-400,000 chance of none).
    let mut hidden = Vec::new();
    let twin = loop {
        assert!(
            hidden.len() < 200,
            "no id prefix collision in 200 containers"
        );
        let h = created("oracle-hidden", &[]);
        let id = h.id();
        hidden.push(h);
        if id[..1] == visible_id[..1] {
            break id;
        }
    };
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("connect");
    let inspect = |container: &str| pb::ContainerRequest {
        request_id: "req-oracle".into(),
        container: container.into(),
    };

    // The engine finds the prefix ambiguous; among visible containers it is
    // unique, and that is the only answer the caller may get.
    let found = client
        .inspect_container(inspect(&visible_id[..1]))
        .await
        .expect("a prefix unique among visible containers resolves")
        .into_inner();
    assert_eq!(found.id, visible_id);

    // A hidden container and a missing one: the same code and message.
    let miss = |r: Result<tonic::Response<pb::InspectContainerResponse>, tonic::Status>,
                reference: &str| {
        let e = r.expect_err("must not be found");
        (e.code(), e.message().replace(reference, "REF"))
    };
    let hidden_ref = twin[..12].to_string();
    let hidden_answer = miss(
        client.inspect_container(inspect(&hidden_ref)).await,
        &hidden_ref,
    );
    let missing_ref = "0123456789ab0123".to_string();
    let missing_answer = miss(
        client.inspect_container(inspect(&missing_ref)).await,
        &missing_ref,
    );
    assert_eq!(hidden_answer.0, Code::NotFound, "{hidden_answer:?}");
    assert_eq!(hidden_answer, missing_answer);
    let by_name = hidden[0].name.clone();
    let name_answer = miss(client.inspect_container(inspect(&by_name)).await, &by_name);
    assert_eq!(name_answer, missing_answer);

    // List filters see only what the caller is shown.
    let list = |labels: &[(&str, &str)]| pb::ListContainersRequest {
        request_id: "req-oracle-list".into(),
        all: true,
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    let count = |r: pb::ListContainersResponse| r.containers.len();
    let mut answers = Vec::new();
    for guess in ["hunter2", "wrong-guess"] {
        let r = client
            .list_containers(list(&[("db_password", guess)]))
            .await
            .expect("list")
            .into_inner();
        answers.push(count(r));
    }
    assert_eq!(
        answers,
        vec![0, 0],
        "a guess of a withheld value is not confirmed"
    );
    let present = client
        .list_containers(list(&[("db_password", "")]))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(count(present), 1, "presence of the key stays filterable");
    let shown = client
        .list_containers(list(&[("drydock.oracle", "visible")]))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(shown.containers.len(), 1);
    assert_ne!(shown.containers[0].labels["db_password"], "hunter2");
}

/// drydock's own containers (labelled `io.drydock.role`, as its images
/// are) are out of scope whatever the selectors say, and a `*` name
/// selector is warned about at start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drydocks_own_containers_are_never_in_scope() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let log = std::fs::read_to_string(&exec.log).unwrap_or_default();
    assert!(
        log.contains("targets.allow_names includes"),
        "no scope warning in the log:\n{log}"
    );
    let p = pki(&dd);
    let key = approver(&dd);
    let own = Container::run(
        "own-agent",
        &[
            "--label",
            "io.drydock.role=agent",
            drydock::fixture::FIXTURE_IMAGE,
            "sleep",
        ],
    );
    let own_id = own.id();
    let started_at = own.inspect("{{.State.StartedAt}}");
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("connect");
    let listed = client
        .list_containers(pb::ListContainersRequest {
            request_id: "req-own-list".into(),
            all: true,
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert!(
        listed.containers.iter().all(|c| c.id != own_id),
        "drydock's own container is listed"
    );
    let err = client
        .inspect_container(pb::ContainerRequest {
            request_id: "req-own-inspect".into(),
            container: own.name.clone(),
        })
        .await
        .expect_err("own container hidden");
    assert_eq!(err.code(), Code::NotFound);
    let c = claims("req-own-restart", WriteAction::Restart, &own_id);
    let err = client
        .restart_container(write(
            "req-own-restart",
            &own.name,
            Some(sign(&c, &key, "local-operator")),
        ))
        .await
        .expect_err("own container never restarted");
    assert_eq!(err.code(), Code::NotFound);
    let row = audit_for(&dd, "req-own-restart");
    assert_eq!(row["decision"], "denied");
    assert!(
        row["reason"]
            .as_str()
            .unwrap_or("")
            .contains("drydock's own"),
        "{row}"
    );
    assert_eq!(own.inspect("{{.State.StartedAt}}"), started_at);
}

/// Calls tonic refuses before any handler runs (an unknown method, a message
/// that does not decode) leave an audit row too; a call the pipeline itself
/// refuses still leaves exactly one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_refused_before_a_handler_are_audited() {
    use tonic::codegen::http::uri::PathAndQuery;
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let p = pki(&dd);
    let channel = grpc::channel(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("connect");
    let mut raw = tonic::client::Grpc::new(channel.clone());

    raw.ready().await.expect("ready");
    let err = raw
        .unary::<_, pb::InspectContainerResponse, _>(
            tonic::Request::new(pb::ContainerRequest {
                request_id: "req-raw".into(),
                container: "x".into(),
            }),
            PathAndQuery::from_static("/drydock.executor.v1.Executor/ExecInContainer"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .expect_err("no such method");
    assert_eq!(err.code(), Code::Unimplemented);

    // A ListContainersRequest where an InspectContainer request is expected:
    // field 2 is a bool (varint) there and a string here, so it cannot decode.
    raw.ready().await.expect("ready");
    let err = raw
        .unary::<_, pb::InspectContainerResponse, _>(
            tonic::Request::new(pb::ListContainersRequest {
                request_id: "req-raw".into(),
                all: true,
                ..Default::default()
            }),
            PathAndQuery::from_static("/drydock.executor.v1.Executor/InspectContainer"),
            tonic_prost::ProstCodec::default(),
        )
        .await
        .expect_err("undecodable");
    assert_ne!(err.code(), Code::Ok);

    // Written off the async workers, so give the rows a moment.
    let before = |rows: &[serde_json::Value]| -> Vec<serde_json::Value> {
        rows.iter()
            .filter(|r| {
                r["reason"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("refused before any handler ran"))
            })
            .cloned()
            .collect()
    };
    let started = std::time::Instant::now();
    let mut rows = dd.audit_rows();
    while before(&rows).len() < 2 && started.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        rows = dd.audit_rows();
    }
    let before_handler = before(&rows);
    let actions: Vec<&str> = before_handler
        .iter()
        .filter_map(|r| r["action"].as_str())
        .collect();
    assert_eq!(
        actions,
        ["ExecInContainer", "InspectContainer"],
        "{rows:#?}"
    );
    assert_eq!(before_handler[0]["code"], "Unimplemented");
    assert!(before_handler
        .iter()
        .all(|r| r["caller"] == "drydock-agent" && r["decision"] == "denied"));

    // Refused by the pipeline: one row, not two.
    let mut client = grpc::connect(exec.port, &p.ca, Some((&p.agent_cert, &p.agent_key)))
        .await
        .expect("connect");
    let _ = client
        .inspect_container(pb::ContainerRequest {
            request_id: "req-once".into(),
            container: "no-such-container-x".into(),
        })
        .await
        .expect_err("missing");
    let once = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["request_id"] == "req-once")
        .count();
    assert_eq!(once, 1);
    assert!(dd.audit_verify().status.success());
}
