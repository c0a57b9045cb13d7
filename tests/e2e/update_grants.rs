//! Updates under a grant, on the real daemons and Debian's registry: the
//! executor honours an update grant only inside its hours (the executor
//! host's local time), only where `actions.update.grants` allows it, and
//! spends its cap once under concurrent triggers; and the agent, finding an
//! update a grant covers, updates with no person asked.

use std::time::Duration;

use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

use crate::update::{inspect, wait, with_registry, Project, Registry, SERVE};

/// `HH:MM-HH:MM` from `from` to `to` minutes after `minute` (either may be
/// negative), across midnight as needed.
fn hours_around(minute: u16, from: i32, to: i32) -> String {
    let at = |d: i32| {
        let m = (i32::from(minute) + d).rem_euclid(1440);
        format!("{:02}:{:02}", m / 60, m % 60)
    };
    format!("{}-{}", at(from), at(to))
}

/// The executor host's minute of the day now, by its own offset.
async fn executor_minute(
    client: &mut pb::executor_client::ExecutorClient<tonic::transport::Channel>,
) -> u16 {
    let policy = client
        .get_policy(pb::GetPolicyRequest {
            request_id: "req-upgrant-policy".into(),
        })
        .await
        .expect("policy")
        .into_inner();
    let offset = policy.automation.map_or(0, |a| a.utc_offset_secs);
    let local = approvals::unix_now() + i64::from(offset);
    u16::try_from(local.rem_euclid(86_400) / 60).expect("a minute of the day")
}

fn update_grant(dd: &Drydock, names: &str, hours: &str, max_total: u32) -> pb::Grant {
    crate::automation::signed_grant(dd, |g| {
        g.actions = vec![WriteAction::Update];
        g.scope.names = vec![names.into()];
        g.max_total = max_total;
        g.hours = Some(hours.into());
    })
}

fn granted(request_id: &str, container: &str, digest: &str, grant: pb::Grant) -> pb::UpdateRequest {
    pb::UpdateRequest {
        request_id: request_id.into(),
        container: container.into(),
        digest: digest.into(),
        approval: None,
        grant: Some(grant),
        to_tag: String::new(),
        built_commit: String::new(),
    }
}

/// The executor's config: updates and update grants on, automation on.
fn granting(yaml: String, host: &str, prefix: &str, creds: &str, grants: bool) -> String {
    with_registry(yaml, host, prefix, creds)
        .replace(
            "\n  update: {enabled: true}",
            &format!("\n  update: {{enabled: true, grants: {grants}}}"),
        )
        .replace(
            "automation:\n  enabled: false",
            "automation:\n  enabled: true",
        )
}

fn denied_row(dd: &Drydock, request_id: &str) -> Value {
    let row = dd
        .audit_rows()
        .into_iter()
        .rev()
        .find(|r| r["request_id"] == request_id)
        .unwrap_or_else(|| panic!("{request_id}: no audit row"));
    assert_eq!(row["action"], "update", "{row}");
    assert_eq!(row["decision"], "denied", "{row}");
    row
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_grant_holds_its_hours_its_switch_and_its_cap_under_concurrent_triggers() {
    let registry = Registry::start();
    let mut a = Project::new("upgrant", &registry);
    let mut b = Project::new("upgrant", &registry);
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-upgrant-*".into()]);
    let creds = dd.home.path("registry.json");
    drydock_daemon::files::write_new(&creds, br#"{"username": "ci", "password": "pw"}"#, true)
        .expect("write credentials");
    let creds = creds.display().to_string();
    let (a_v1, _, a_old) = a.v1_running_with_data();
    let (b_v1, _, b_old) = b.v1_running_with_data();
    let (a_v2, a_digest) = a.push("2", SERVE);
    let (b_v2, b_digest) = b.push("2", SERVE);
    a.only_in_registry(&a_v2, &a_v1);
    b.only_in_registry(&b_v2, &b_v1);
    let host = registry.host();

    // The whole registry is allowed: both projects' repositories.
    let whole = |y: String, grants: bool| {
        granting(y, &host, "all-of-it", &creds, grants).replace("    prefix: all-of-it\n", "")
    };
    // Updates may not be granted here: refused, audited, nothing pulled.
    let exec = ExecutorProcess::start(&dd, |y| whole(y, false));
    let mut c = exec.agent_client(&dd).await;
    let now = executor_minute(&mut c).await;
    let err = c
        .update_container(granted(
            "req-upgrant-off",
            &a_old,
            &a_digest,
            update_grant(&dd, "dd-upgrant-*", &hours_around(now, -60, 60), 5),
        ))
        .await
        .expect_err("update grants are off");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains("actions.update.grants is false"),
        "{err:?}"
    );
    denied_row(&dd, "req-upgrant-off");
    drop(c);
    drop(exec);

    let exec = ExecutorProcess::start(&dd, |y| whole(y, true));
    let mut c = exec.agent_client(&dd).await;
    let now = executor_minute(&mut c).await;
    // Outside its hours: refused, audited, and the use is not spent.
    let later = hours_around(now, 120, 180);
    let err = c
        .update_container(granted(
            "req-upgrant-hours",
            &a_old,
            &a_digest,
            update_grant(&dd, "dd-upgrant-*", &later, 5),
        ))
        .await
        .expect_err("outside its hours");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(
        err.message().contains(&format!("may be used {later}")),
        "{err:?}"
    );
    let row = denied_row(&dd, "req-upgrant-hours");
    assert!(
        row["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("local time"),
        "{row}"
    );
    assert_eq!(inspect(&a_old, "{{.Image}}"), a_v1, "nothing changed");

    // In its hours, one use in all, triggered for both containers at once:
    // exactly one is updated, the other refused at the cap.
    let grant = update_grant(&dd, "dd-upgrant-*", &hours_around(now, -60, 60), 1);
    let (mut c1, mut c2) = (c.clone(), c.clone());
    let (ra, rb) = tokio::join!(
        c1.update_container(granted("req-upgrant-a", &a_old, &a_digest, grant.clone())),
        c2.update_container(granted("req-upgrant-b", &b_old, &b_digest, grant.clone())),
    );
    let (won, lost, project, v2) = match (ra, rb) {
        (Ok(w), Err(l)) => (w.into_inner(), l, &a, &a_v2),
        (Err(l), Ok(w)) => (w.into_inner(), l, &b, &b_v2),
        other => panic!("exactly one update under a one-use grant: {other:?}"),
    };
    assert_eq!(lost.code(), Code::FailedPrecondition, "{lost:?}");
    assert!(lost.message().contains("they are spent"), "{lost:?}");
    assert!(!won.grant_id.is_empty(), "{won:?}");
    assert_eq!(won.new_image_id, *v2);
    assert_eq!(project.api_id(), won.new_container_id);
    assert_eq!(inspect(&won.new_container_id, "{{.Image}}"), *v2);
    let unchanged = if std::ptr::eq(project, &a) {
        (&b_old, &b_v1)
    } else {
        (&a_old, &a_v1)
    };
    assert_eq!(inspect(unchanged.0, "{{.Image}}"), *unchanged.1);
    let rows = dd.audit_rows();
    let allowed: Vec<&Value> = rows
        .iter()
        .filter(|r| r["action"] == "update" && r["decision"] == "allowed")
        .collect();
    assert_eq!(allowed.len(), 1, "one update ran: {allowed:#?}");
    assert!(
        allowed[0]["approval_id"]
            .as_str()
            .unwrap_or_default()
            .starts_with("grt-"),
        "the use is named in the audit: {}",
        allowed[0]
    );

    // Once per container per window, although an update gives the
    // container a new id: counted by its name.
    let a_won = std::ptr::eq(project, &a);
    let current = won.new_container_id.clone();
    let (from, winner) = if a_won {
        (a_v2, &mut a)
    } else {
        (b_v2, &mut b)
    };
    let (v3, v3_digest) = winner.push("3", SERVE);
    winner.only_in_registry(&v3, &from);
    let daily = update_grant(&dd, "dd-upgrant-*", &hours_around(now, -60, 60), 5);
    let third = c
        .update_container(granted(
            "req-upgrant-v3",
            &current,
            &v3_digest,
            daily.clone(),
        ))
        .await
        .expect("a new grant's first use")
        .into_inner();
    assert_eq!(third.new_image_id, v3);
    let (v4, v4_digest) = winner.push("4", SERVE);
    winner.only_in_registry(&v4, &v3);
    let again = c
        .update_container(granted(
            "req-upgrant-v4",
            &third.new_container_id,
            &v4_digest,
            daily,
        ))
        .await
        .expect_err("the same container again within the window");
    assert!(again.message().contains("uses per container"), "{again:?}");
    denied_row(&dd, "req-upgrant-v4");
    assert_eq!(inspect(&third.new_container_id, "{{.Image}}"), v3);
    dd.assert_audit_intact();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_update_found_inside_a_grant_s_hours_is_made_with_no_person_asked() {
    let registry = Registry::start();
    let mut project = Project::new("upgrant-flow", &registry);
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{}_*", project.name)]);
    drydock_e2e::registry::allow_registry(&dd, "pw", |y, creds| {
        granting(y, &registry.host(), &project.name, creds, true)
    });
    let agent = std::fs::read_to_string(dd.home.agent_config()).expect("agent config");
    std::fs::write(
        dd.home.agent_config(),
        format!("{agent}updates:\n  check_every: 0s\n"),
    )
    .expect("write agent config");
    let (v1, _, old) = project.v1_running_with_data();
    let (v2, v2_digest) = project.push("2", SERVE);
    project.only_in_registry(&v2, &v1);
    dd.up();

    // Without a grant the check finds it and opens nothing.
    let out = dd.cli(&["updates", "--check", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let requests = || -> Vec<Value> {
        let out = dd.cli(&["requests", "--json"]);
        serde_json::from_slice(&out.stdout).unwrap_or_default()
    };
    assert!(requests().is_empty(), "{:#?}", requests());

    // A grant whose hours hold now (the executor host's clock), made as
    // an operator makes it.
    let now = executor_minute(&mut dd.executor_as_agent().await).await;
    let window = hours_around(now, -60, 60);
    let made = dd.cli(&[
        "grant",
        "create",
        "--action",
        "update",
        "--window",
        &window,
        "--name",
        &format!("{}_*", project.name),
        "--max",
        "1/1h",
        "--expires",
        "2h",
        "--yes",
    ]);
    assert!(made.status.success(), "{made:?}");
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(
        said.contains(&format!("only between {window}")),
        "the person sees the hours: {said}"
    );

    let out = dd.cli(&["updates", "--check", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let mut done = None;
    wait(
        "the granted update to complete",
        Duration::from_secs(120),
        || {
            done = requests()
                .into_iter()
                .find(|r| r["source"] == "update" && r["status"] == "completed");
            done.is_some()
        },
    );
    let id = done.expect("request")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let out = dd.cli(&["show", &id, "--json"]);
    let req: Value = serde_json::from_slice(&out.stdout).expect("request");
    assert_eq!(req["plan"]["steps"][0]["action"], "update", "{req:#}");
    assert_eq!(
        req["plan"]["steps"][0]["update"]["digest"],
        v2_digest.as_str()
    );
    let approvals = req["approvals"].as_array().expect("approvals");
    assert!(
        !approvals.is_empty()
            && approvals.iter().all(|a| a["grant_id"]
                .as_str()
                .is_some_and(|g| g.starts_with("grt-"))),
        "authorised by the grant, no person: {req:#}"
    );
    let new = project.api_id();
    assert_ne!(new, old);
    assert_eq!(inspect(&new, "{{.Image}}"), v2);
    assert_eq!(inspect(&new, "{{.State.Health.Status}}"), "healthy");
    // Once per digest: another check opens nothing more.
    let out = dd.cli(&["updates", "--check", "--json"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        requests()
            .iter()
            .filter(|r| r["source"] == "update")
            .count(),
        1
    );
    dd.assert_audit_intact();
}
