//! `drydock backup` while both daemons run, and `drydock restore` as
//! docs/deploy.md gives it: the restored audit store verifies, and the
//! restored executor refuses the approvals and grant uses it had spent, the
//! approvals spent after the backup (carried over from the store it
//! replaced, or, when that store is lost, refused by their dates, even one
//! dated ahead by the clock skew the executor accepts), and undoes no
//! revocation; a new approval works.

use std::time::Duration;

use drydock_e2e::approvals::{claims, sign, unix_now};
use drydock_e2e::{bin, Container, Drydock};
use drydock_proto::approval::WriteAction;
use drydock_proto::grant::{self, GrantClaims, GrantScope, GRANT_KIND, GRANT_VERSION_NO_HOST};
use drydock_proto::pb;
use tonic::Code;

const SCOPE: &str = "dd-backup-*";

fn key(dd: &Drydock) -> ed25519_dalek::SigningKey {
    dd.approver_key()
}

fn restart(request_id: &str, container: &str, approval: pb::Approval) -> pb::WriteRequest {
    pb::WriteRequest {
        request_id: request_id.into(),
        container: container.into(),
        approval: Some(approval),
        ..Default::default()
    }
}

fn granted(container: &str, grant: &pb::Grant) -> pb::WriteRequest {
    pb::WriteRequest {
        request_id: "req-backup-grant".into(),
        container: container.into(),
        grant: Some(grant.clone()),
        fault_class: "crash".into(),
        ..Default::default()
    }
}

fn a_grant(dd: &Drydock) -> (String, pb::Grant) {
    let now = unix_now();
    let claims = GrantClaims {
        version: GRANT_VERSION_NO_HOST,
        kind: GRANT_KIND.into(),
        grant_id: GrantClaims::new_id(),
        actions: vec![WriteAction::Restart],
        scope: GrantScope {
            names: vec![SCOPE.into()],
            ..Default::default()
        },
        classes: vec![],
        max_per_container: 1,
        window_secs: 3600,
        max_total: 5,
        issued_at: now - 10,
        expires_at: now + 3600,
        host: None,
        hours: None,
    };
    let bytes = claims.encode();
    (
        claims.grant_id.clone(),
        pb::Grant {
            signature: grant::sign(&bytes, &key(dd)),
            claims: bytes,
            key_id: drydock::home::DEFAULT_APPROVER_ID.into(),
        },
    )
}

fn crashed() -> Container {
    let c = Container::run(
        "backup",
        &[drydock::fixture::FIXTURE_IMAGE, "crash", "--code", "3"],
    );
    c.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    c
}

fn revoke(dd: &Drydock, id: &str) {
    let out = std::process::Command::new(bin("drydock-executor"))
        .args(["grant", "revoke", "--config"])
        .arg(dd.home.executor_config())
        .arg(id)
        .output()
        .expect("revoke");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ok(out: &std::process::Output, what: &str) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what}: {text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_executor_verifies_and_refuses_what_it_had_spent() {
    let dd = Drydock::init_options(|o| o.targets = vec![SCOPE.into()]);
    let config = dd.home.executor_config();
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text.replace(
            "automation:\n  enabled: false",
            "automation:\n  enabled: true",
        ),
    )
    .unwrap();
    dd.up();
    let mut c = dd.executor_as_agent().await;
    let web = Container::run("backup", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    let signer = key(&dd);

    // Before the backup: one approval spent, one signed and kept, one grant
    // use spent, one grant revoked.
    let spent = sign(
        &claims("req-spent", WriteAction::Restart, &web.id()),
        &signer,
        "local-operator",
    );
    c.restart_container(restart("req-spent", &web.name, spent.clone()))
        .await
        .expect("the approval is accepted");
    let kept = sign(
        &claims("req-kept", WriteAction::Restart, &web.id()),
        &signer,
        "local-operator",
    );
    let broken = crashed();
    let (grant_id, grant) = a_grant(&dd);
    c.restart_container(granted(&broken.name, &grant))
        .await
        .expect("the grant's first use");
    let (revoked_before, _) = a_grant(&dd);
    revoke(&dd, &revoked_before);

    // The backup, with both daemons running.
    let backup = dd.dir.path().join("backups/one");
    let said = ok(
        &dd.cli(&["backup", backup.to_str().unwrap()]),
        "drydock backup",
    );
    assert!(said.contains("the copy verifies"), "{said}");
    for file in [
        "executor/backup.json",
        "executor/audit.db",
        "agent/agent.db",
    ] {
        assert!(backup.join(file).is_file(), "{file} in the backup: {said}");
    }
    let again = dd.cli(&["backup", backup.to_str().unwrap()]);
    assert!(
        !again.status.success(),
        "a backup never writes over another"
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("not empty"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // After the backup: the kept approval is spent, and one whose claims
    // are dated 58 s ahead (inside the skew the executor accepts; the
    // agent, which may be compromised, writes the dates); another grant
    // revoked. The backup knows none of them.
    c.restart_container(restart("req-kept", &web.name, kept.clone()))
        .await
        .expect("the kept approval, spent after the backup");
    let mut dated_ahead = claims("req-ahead", WriteAction::Restart, &web.id());
    dated_ahead.issued_at += 58;
    dated_ahead.expires_at += 58;
    let ahead = sign(&dated_ahead, &signer, "local-operator");
    c.restart_container(restart("req-ahead", &web.name, ahead.clone()))
        .await
        .expect("an approval dated 58 s ahead, spent after the backup");
    let (revoked_after, _) = a_grant(&dd);
    revoke(&dd, &revoked_after);
    drop(c);

    // Restore as the docs say: refused while the daemons run; then down,
    // restore (the stores it replaces are moved aside), up.
    let running = dd.cli(&["restore", backup.to_str().unwrap()]);
    assert!(
        !running.status.success(),
        "no restore under running daemons"
    );
    assert!(
        String::from_utf8_lossy(&running.stderr).contains("drydock down"),
        "{}",
        String::from_utf8_lossy(&running.stderr)
    );
    ok(&dd.cli(&["down"]), "drydock down");
    let said = ok(
        &dd.cli(&["restore", backup.to_str().unwrap()]),
        "drydock restore",
    );
    let aside: Vec<_> = std::fs::read_dir(dd.home.path("state"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("replaced-"))
        .collect();
    for store in ["audit.db", "agent.db"] {
        assert!(
            aside.iter().any(|d| d.path().join(store).is_file()),
            "the replaced {store} is kept in a replaced-<time> folder: {said}"
        );
    }
    dd.up();

    // The restored chain verifies and records the restore.
    let verified = dd.audit_verify();
    assert!(
        verified.status.success() && String::from_utf8_lossy(&verified.stdout).contains("intact"),
        "{}",
        String::from_utf8_lossy(&verified.stdout)
    );
    let rows = dd.audit_rows();
    let restored: Vec<_> = rows
        .iter()
        .filter(|r| r["decision"] == "restored")
        .collect();
    assert_eq!(restored.len(), 1, "one row records the restore");
    let before = rows
        .iter()
        .filter(|r| r["seq"].as_i64() < restored[0]["seq"].as_i64())
        .filter(|r| r["request_id"] == "req-kept")
        .count();
    assert_eq!(
        before, 0,
        "what was spent after the backup is not in the restored chain"
    );
    let store = rusqlite::Connection::open(dd.audit_db()).unwrap();
    let nonces: i64 = store
        .query_row("SELECT count(*) FROM nonces", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        nonces, 3,
        "the nonce spent before the backup, and the two spent after it, carried over from the replaced store"
    );
    let uses: i64 = store
        .query_row(
            "SELECT count(*) FROM grant_uses WHERE grant_id = ?1",
            [&grant_id],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(uses, 1, "the grant use spent before the backup");
    drop(store);

    let mut c = dd.executor_as_agent().await;
    let refused = |r: Result<tonic::Response<pb::WriteResponse>, tonic::Status>, says: &str| {
        let s = r.expect_err(says);
        assert_eq!(s.code(), Code::FailedPrecondition, "{s:?}");
        assert!(s.message().contains(says), "{says}: {}", s.message());
    };
    let started = web.inspect("{{.State.StartedAt}}");
    refused(
        c.restart_container(restart("req-spent", &web.name, spent))
            .await,
        "already used",
    );
    for (request, approval) in [("req-kept", &kept), ("req-ahead", &ahead)] {
        refused(
            c.restart_container(restart(request, &web.name, approval.clone()))
                .await,
            "already used",
        );
    }
    assert_eq!(
        web.inspect("{{.State.StartedAt}}"),
        started,
        "no replay restarted it"
    );
    broken.wait_for("exited again", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    refused(
        c.restart_container(granted(&broken.name, &grant)).await,
        "restored from a backup",
    );
    assert_eq!(
        broken.inspect("{{.State.Status}}"),
        "exited",
        "no second grant use"
    );
    let list = std::fs::read_to_string(dd.home.path("state/revoked-grants")).unwrap();
    assert!(
        list.contains(&revoked_before) && list.contains(&revoked_after),
        "a restore adds the backup's revocations and undoes none: {list}"
    );

    // The replaced store lost (a disk gone): restored where no store is,
    // nothing can be carried over, and the dates alone refuse what the
    // replaced store had spent, the approval dated ahead included.
    drop(c);
    ok(&dd.cli(&["down"]), "drydock down");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", dd.audit_db().display()));
    }
    let said = ok(
        &std::process::Command::new(bin("drydock-executor"))
            .args(["audit", "restore", "--config"])
            .arg(dd.home.executor_config())
            .arg("--from")
            .arg(backup.join("executor"))
            .output()
            .expect("audit restore"),
        "drydock-executor audit restore",
    );
    assert!(said.contains("no store was replaced"), "{said}");
    dd.up();
    let restored_at: i64 = rusqlite::Connection::open(dd.audit_db())
        .unwrap()
        .query_row(
            "SELECT value FROM meta WHERE key = 'restored_at'",
            [],
            |r| r.get::<_, String>(0),
        )
        .unwrap()
        .parse()
        .unwrap();
    let mut c = dd.executor_as_agent().await;
    for (request, approval) in [("req-kept", &kept), ("req-ahead", &ahead)] {
        refused(
            c.restart_container(restart(request, &web.name, approval.clone()))
                .await,
            "restored from a backup",
        );
    }
    refused(
        c.restart_container(granted(&broken.name, &grant)).await,
        "restored from a backup",
    );
    assert_eq!(
        web.inspect("{{.State.StartedAt}}"),
        started,
        "no replay restarted it"
    );
    let rows = dd.audit_rows();
    let replays: Vec<_> = rows
        .iter()
        .filter(|r| r["request_id"] == "req-ahead" && r["decision"] != "allowed")
        .filter(|r| {
            r["reason"]
                .as_str()
                .unwrap_or("")
                .contains("restored from a backup")
        })
        .collect();
    assert_eq!(replays.len(), 1, "the refused replay is audited: {rows:?}");

    // Claims issued within the skew after the restore could, as far as
    // the executor can tell, have been used before it: refused, saying
    // from when approvals count again.
    let just_after = sign(
        &claims("req-just-after", WriteAction::Restart, &web.id()),
        &signer,
        "local-operator",
    );
    refused(
        c.restart_container(restart("req-just-after", &web.name, just_after))
            .await,
        &format!("issued after {}", restored_at + 60),
    );

    // An approval issued after that is honoured.
    while unix_now() <= restored_at {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let mut after = claims("req-fresh", WriteAction::Restart, &web.id());
    after.issued_at = restored_at + 61;
    after.expires_at = after.issued_at + 300;
    let fresh = sign(&after, &signer, "local-operator");
    c.restart_container(restart("req-fresh", &web.name, fresh))
        .await
        .expect("a new approval after the restore");
    assert_ne!(web.inspect("{{.State.StartedAt}}"), started);
    dd.assert_audit_intact();
}
