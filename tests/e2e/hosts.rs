//! Executors as named hosts: `drydock host add NAME` issues a host's
//! executor certificate (naming it) from the home's CA and writes its
//! config (requiring its name in claims); claims made for one host are
//! refused, and audited, by every other executor, whatever the agent does;
//! an executor whose certificate does not name its host does not start; an
//! agent dialling one host's name refuses another host's executor; and the
//! agent names the host of the executor it talks to in what a person signs.

use std::time::Duration;

use drydock_e2e::approvals::{claims, sign, unix_now};
use drydock_e2e::*;
use drydock_proto::approval::{ApprovalClaims, WriteAction, CLAIMS_VERSION};
use drydock_proto::grant::{self, GrantClaims, GrantScope, GRANT_KIND, GRANT_VERSION};
use drydock_proto::pb;
use tonic::Code;

const KEY_ID: &str = drydock::home::DEFAULT_APPROVER_ID;

/// `drydock host add NAME --address 127.0.0.1 [--out DIR --force]`, then
/// automation turned on in the config it wrote; returns that config.
fn host_add(dd: &Drydock, name: &str, out: Option<&std::path::Path>) -> std::path::PathBuf {
    let mut args = vec!["host", "add", name, "--address", "127.0.0.1"];
    let out_text = out.map(|o| o.display().to_string());
    if let Some(o) = &out_text {
        args.extend(["--out", o.as_str(), "--force"]);
    }
    let done = dd.cli(&args);
    let said = String::from_utf8_lossy(&done.stdout).to_string();
    assert!(
        done.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(said.contains(&format!("- name: {name}")), "{said}");
    let dir = out.map_or_else(
        || dd.home.path(&format!("hosts/{name}")),
        |o| o.to_path_buf(),
    );
    let config = dir.join("executor.yaml");
    let yaml = std::fs::read_to_string(&config).expect("the host's executor.yaml");
    assert!(
        yaml.contains(&format!("host:\n  name: {name}\n  require: true")),
        "{yaml}"
    );
    std::fs::write(
        &config,
        yaml.replace(
            "automation:\n  enabled: false",
            "automation:\n  enabled: true",
        ),
    )
    .expect("write the host's config");
    config
}

fn approver(dd: &Drydock) -> ed25519_dalek::SigningKey {
    dd.approver_key()
}

/// Restart claims for `container`, made for `host` (or none).
fn for_host(request_id: &str, container: &str, host: Option<&str>) -> ApprovalClaims {
    let mut c = claims(request_id, WriteAction::Restart, container);
    c.host = host.map(str::to_string);
    c.version = ApprovalClaims::version_for(host);
    c
}

fn restart(request_id: &str, container: &str) -> pb::WriteRequest {
    pb::WriteRequest {
        request_id: request_id.into(),
        container: container.into(),
        ..Default::default()
    }
}

/// The audit row of a request id, from the store of the executor run with
/// `config`.
fn audit_for(config: &std::path::Path, request_id: &str) -> serde_json::Value {
    audit_export(config)
        .into_iter()
        .rfind(|r| r["request_id"] == request_id)
        .unwrap_or_else(|| panic!("no audit row for {request_id}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_made_for_another_host_or_none_are_refused_and_audited() {
    let dd = Drydock::init();
    let config = host_add(&dd, "host-b", None);
    let exec = ExecutorProcess::start_with(&dd, config.clone());
    let mut client = exec.agent_client(&dd).await;
    // An agent dialling host B reaches B; dialling host C, it refuses B's
    // executor (its certificate names B, not C).
    let (ca, cert, key) = (
        read(&dd.home.path("pki/ca.crt")),
        read(&dd.home.path("pki/agent.crt")),
        read(&dd.home.path("pki/agent.key")),
    );
    assert!(
        grpc::channel_to("host-b", exec.port, &ca, Some((&cert, &key)))
            .await
            .is_ok()
    );
    assert!(
        grpc::channel_to("host-c", exec.port, &ca, Some((&cert, &key)))
            .await
            .is_err(),
        "another host's name"
    );
    let key = approver(&dd);
    let target = Container::run("host-bound", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);

    let policy = client
        .get_policy(pb::GetPolicyRequest {
            request_id: "req-host-policy".into(),
        })
        .await
        .expect("policy")
        .into_inner();
    assert_eq!(
        (policy.host.as_str(), policy.host_required),
        ("host-b", true)
    );

    // An approval made for host A, presented to B by a holder of the
    // agent's certificate: refused by B, and audited.
    for (request_id, host, says) in [
        ("req-host-a", Some("host-a"), "made for host `host-a`"),
        ("req-host-none", None, "names no host"),
    ] {
        let c = for_host(request_id, &target.id(), host);
        let mut req = restart(request_id, &target.name);
        req.approval = Some(sign(&c, &key, KEY_ID));
        let err = client.restart_container(req).await.unwrap_err();
        assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
        assert!(err.message().contains(says), "{}", err.message());
        let row = audit_for(&config, request_id);
        assert_eq!(row["decision"], "denied", "{row}");
        assert!(
            row["reason"].as_str().is_some_and(|r| r.contains(says)),
            "{row}"
        );
    }
    let started = target.inspect("{{.State.StartedAt}}");

    // A grant made for host A: refused the same way.
    let now = unix_now();
    let grant_claims = GrantClaims {
        version: GRANT_VERSION,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions: vec![WriteAction::Restart],
        scope: GrantScope {
            names: vec![target.name.clone()],
            ..Default::default()
        },
        classes: vec![],
        max_per_container: 1,
        window_secs: 3600,
        max_total: 1,
        issued_at: now - 10,
        expires_at: now + 3600,
        host: Some("host-a".into()),
        hours: None,
    }
    .encode();
    let mut req = restart("req-host-grant", &target.name);
    req.grant = Some(pb::Grant {
        signature: grant::sign(&grant_claims, &key),
        claims: grant_claims,
        key_id: KEY_ID.into(),
    });
    req.fault_class = "crash".into();
    let err = client.restart_container(req).await.unwrap_err();
    assert!(
        err.message().contains("not for this executor") && err.message().contains("host-a"),
        "{err:?}"
    );
    assert_eq!(audit_for(&config, "req-host-grant")["decision"], "denied");
    assert_eq!(
        target.inspect("{{.State.StartedAt}}"),
        started,
        "nothing was restarted"
    );

    // Made for B: B acts.
    let c = for_host("req-host-b", &target.id(), Some("host-b"));
    assert_eq!(c.version, CLAIMS_VERSION);
    let mut req = restart("req-host-b", &target.name);
    req.approval = Some(sign(&c, &key, KEY_ID));
    client
        .restart_container(req)
        .await
        .expect("an approval made for this host");
    assert_eq!(audit_for(&config, "req-host-b")["decision"], "allowed");
    let verify = std::process::Command::new(bin("drydock-executor"))
        .args(["audit", "verify", "--config"])
        .arg(&config)
        .arg("--public-key")
        .arg(
            std::fs::read_to_string(dd.home.path("hosts/host-b/pki/audit.pub"))
                .expect("audit.pub")
                .trim(),
        )
        .output()
        .expect("audit verify");
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    drop(client);
    exec.stop();

    // An executor whose certificate does not name its host does not start.
    let yaml = std::fs::read_to_string(&config).expect("the host's config");
    let wrong = config.with_file_name("wrong-host.yaml");
    std::fs::write(&wrong, yaml.replace("name: host-b", "name: host-z")).expect("write");
    let out = std::process::Command::new(bin("drydock-executor"))
        .args(["check-config", "--config"])
        .arg(&wrong)
        .output()
        .expect("run drydock-executor");
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("host.name") && said.contains("host-z") && said.contains("drydock host add"),
        "{said}"
    );
}

#[test]
fn the_agent_names_the_executors_host_in_what_a_person_signs() {
    let dd = Drydock::init();
    // This home's own executor becomes host A: the files `host add`
    // issues replace the home's.
    host_add(&dd, "host-a", Some(&dd.home.root));
    dd.up();
    let web = Container::unhealthy_web("host-named", &[]);
    web.wait_for("unhealthy", Duration::from_secs(60), |c| {
        c.health() == "unhealthy"
    });
    let out = dd.cli(&["ask", "--yes", "--container", &web.name, "web is unhealthy"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}\n{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        dd.agent_log()
    );
    assert!(
        said.contains(&format!(
            "approving (--yes): restart container {}",
            web.name
        )) && said.contains("on host host-a"),
        "{said}"
    );
    assert_eq!(web.health(), "healthy");
    let row = dd
        .write_rows()
        .into_iter()
        .rev()
        .find(|r| r["decision"] == "allowed")
        .expect("the restart, allowed");
    assert_eq!(row["action"], "restart");
    // A grant the CLI makes names the host too, and says so.
    let out = dd.cli(&[
        "grant",
        "create",
        "--action",
        "restart",
        "--name",
        &web.name,
        "--max",
        "1/1h",
        "--expires",
        "1h",
        "--yes",
    ]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{said}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        said.contains("may restart containers on host host-a"),
        "{said}"
    );
}
