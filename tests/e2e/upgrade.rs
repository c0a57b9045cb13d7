//! Upgrades: stores that the previous release wrote (checked-in fixtures,
//! `tests/fixtures/stores/release-0`) are migrated in place by this one, a
//! copy taken first; the audit chain still verifies across the migration,
//! with its signed checkpoints; and a store from a newer release is
//! refused with a message that says so, and left as it is.

use std::path::Path;
use std::process::Command;

use drydock_e2e::*;
use serde_json::Value;

fn fixture(name: &str) -> std::path::PathBuf {
    workspace_root()
        .join("tests/fixtures/stores/release-0")
        .join(name)
}

fn user_version(path: &Path) -> u32 {
    rusqlite::Connection::open(path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap()
}

/// A home whose stores are the previous release's.
fn home_of_the_previous_release() -> Drydock {
    let dd = Drydock::init();
    for db in ["agent.db", "audit.db"] {
        let to = dd.home.path(&format!("state/{db}"));
        let _ = std::fs::remove_file(&to);
        std::fs::copy(fixture(db), &to).expect("copy the fixture");
    }
    // The fixture store exists: no init marker is needed (or wanted).
    let _ = std::fs::remove_file(dd.home.path("state/audit.db.init"));
    dd
}

#[test]
fn stores_of_the_previous_release_are_backed_up_migrated_and_still_verify() {
    let dd = home_of_the_previous_release();
    let audit = dd.home.path("state/audit.db");
    assert_eq!(user_version(&audit), 0, "the fixture predates versions");
    let count = |db: &Path| -> i64 {
        rusqlite::Connection::open(db)
            .unwrap()
            .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
            .unwrap()
    };
    let before = count(&audit);
    assert!(before > 10, "the fixture has a history: {before} rows");

    // The chain and every checkpoint the previous release signed verify
    // after this release has migrated the store.
    let out = Command::new(bin("drydock-executor"))
        .args(["audit", "verify", "--config"])
        .arg(dd.home.executor_config())
        .arg("--public-key")
        .arg(fixture("audit.pub"))
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("audit log intact: {before} rows")),
        "{said}"
    );
    assert!(said.contains("1 signed checkpoint"), "{said}");
    assert_eq!(user_version(&audit), 1);
    let copy = dd.home.path("state/audit.db.v0.bak");
    assert_eq!(user_version(&copy), 0, "the copy is the store as it was");
    assert_eq!(count(&copy), before);

    // The fixture's approval has long expired by now, so the executor
    // forgets its nonce at start (nothing could replay it). Make it a live
    // one, and add one expired past the grace, to see both kept and pruned
    // whatever the date the test runs on.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let db = rusqlite::Connection::open(&audit).unwrap();
    db.execute("UPDATE nonces SET expires_at = ?1", [now + 3600])
        .unwrap();
    db.execute(
        "INSERT INTO nonces (nonce, approval_id, expires_at, used_at, request_id, action, container_id, caller, key_id) VALUES ('long-gone', 'apr-old', ?1, 'then', '', '', '', '', '')",
        [now - 30 * 86_400],
    )
    .unwrap();
    drop(db);

    // The daemons serve from the migrated stores: the old requests are
    // there, the spent nonce is still spent, and the chain goes on.
    dd.up();
    let out = dd.cli(&["requests", "--json"]);
    let requests: Value = serde_json::from_slice(&out.stdout).expect("requests --json");
    let messages: Vec<&str> = requests
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["message"].as_str())
        .collect();
    assert!(
        messages.contains(&"fixture-web is unhealthy"),
        "{requests:#}"
    );
    assert!(
        messages.contains(&"why did fixture-job stop?"),
        "{requests:#}"
    );
    let nonces: i64 = rusqlite::Connection::open(&audit)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM nonces WHERE nonce != 'long-gone'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(nonces, 1, "the live approval's nonce is still spent");
    let gone: i64 = rusqlite::Connection::open(&audit)
        .unwrap()
        .query_row(
            "SELECT count(*) FROM nonces WHERE nonce = 'long-gone'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(gone, 0, "a nonce expired past the grace is forgotten");
    let c = Container::run("upgrade", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    let (_, req) = dd.ask_json(&["--diagnose-only", "--container", &c.name, "is it ok?"]);
    assert_eq!(req["status"], "completed", "{req:#}");
    drop(dd.cli(&["down"]));
    dd.assert_audit_intact();
    assert_eq!(
        user_version(&dd.home.path("state/agent.db")) as usize,
        drydock_agent::store::schema::MIGRATIONS.len(),
        "migrated to this release's schema"
    );
}

#[test]
fn stores_of_a_newer_release_are_refused_and_left_alone() {
    let dd = home_of_the_previous_release();
    let audit = dd.home.path("state/audit.db");
    let agent = dd.home.path("state/agent.db");
    for db in [&audit, &agent] {
        rusqlite::Connection::open(db)
            .unwrap()
            .pragma_update(None, "user_version", 99)
            .unwrap();
    }
    let out = Command::new(bin("drydock-executor"))
        .args(["audit", "verify", "--config"])
        .arg(dd.home.executor_config())
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        said.contains("newer drydock-executor (schema version 99"),
        "{said}"
    );
    let out = Command::new(bin("drydock-agent"))
        .args(["serve", "--config"])
        .arg(dd.home.agent_config())
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("newer drydock-agent (store version 99"),
        "{said}"
    );
    for db in [&audit, &agent] {
        assert_eq!(user_version(db), 99, "{} untouched", db.display());
    }
    assert!(!dd.home.path("state/audit.db.v99.bak").exists());
}
