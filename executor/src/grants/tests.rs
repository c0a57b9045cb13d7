use super::*;
use crate::docker::{Health, StateInfo};

fn container(status: &str, running: bool, health: &str, exit_code: i64) -> ContainerDetails {
    ContainerDetails {
        name: "shop-web-1".into(),
        state: StateInfo {
            status: status.into(),
            running,
            exit_code,
            ..Default::default()
        },
        health: Health {
            status: health.into(),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[test]
fn only_a_broken_container_may_be_repaired_under_a_grant() {
    use ContainerAction::*;
    let ok = |a, c: &ContainerDetails| precondition(a, c).is_ok();
    assert!(ok(Restart, &container("running", true, "unhealthy", 0)));
    assert!(ok(Restart, &container("exited", false, "", 1)));
    let healthy = precondition(Restart, &container("running", true, "healthy", 0));
    assert!(
        matches!(&healthy, Err(GrantRefusal::Precondition(m)) if m.contains("running and healthy")),
        "{healthy:?}"
    );
    assert!(!ok(Restart, &container("running", true, "none", 0)));
    // A pause, a clean exit, or a stop by signal is someone's decision.
    assert!(!ok(Restart, &container("paused", true, "unhealthy", 0)));
    assert!(!ok(Restart, &container("exited", false, "", 0)));
    for signal_exit in [130, 137, 143] {
        assert!(!ok(Restart, &container("exited", false, "", signal_exit)));
        assert!(!ok(Start, &container("exited", false, "", signal_exit)));
    }
    let mut oom = container("exited", false, "", 137);
    oom.state.oom_killed = true;
    assert!(ok(Restart, &oom), "an OOM kill is a crash");
    assert!(ok(Start, &container("exited", false, "", 1)));
    assert!(!ok(Start, &container("exited", false, "", 0)));
    assert!(!ok(Start, &container("running", true, "unhealthy", 0)));
    let mut restarting = container("restarting", false, "", 1);
    restarting.state.restarting = true;
    assert!(!ok(Restart, &restarting));
    assert!(!ok(Stop, &container("running", true, "unhealthy", 0)));
}

#[test]
fn classes_the_state_can_confirm_are_checked_against_it() {
    let unhealthy = container("running", true, "unhealthy", 0);
    assert!(class_consistent("unhealthy", &unhealthy).is_ok());
    assert!(
        class_consistent("oom_killed", &unhealthy).is_err(),
        "no OOM flag"
    );
    assert!(class_consistent("crash", &unhealthy).is_err());
    assert!(class_consistent("healthy", &unhealthy).is_err());
    assert!(
        class_consistent("dependency_unavailable", &unhealthy).is_ok(),
        "not checkable"
    );
    let crashed = container("exited", false, "", 2);
    assert!(class_consistent("crash", &crashed).is_ok());
    assert!(class_consistent("unhealthy", &crashed).is_err());
}

#[test]
fn a_revocation_list_that_cannot_be_read_refuses_every_grant() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("revoked");
    let v = GrantVerifier::new(
        &[],
        &AutomationConfig {
            enabled: true,
            max_grant_ttl: Duration::from_secs(3600),
            revocations: Some(list.clone()),
        },
    );
    assert!(matches!(
        v.revoked(),
        Err(GrantRefusal::RevocationsUnreadable { .. })
    ));
    std::fs::write(
        &list,
        "\u{feff}# revoked grants\ngrt-aa  # leaked\n\ngrt-bb grt-cc,grt-dd\n",
    )
    .unwrap();
    let revoked = v.revoked().unwrap();
    for id in ["grt-aa", "grt-bb", "grt-cc", "grt-dd"] {
        assert!(revoked.contains(id), "{id}: {revoked:?}");
    }
    assert_eq!(revoked.len(), 4);
    // A token that is not an id refuses every grant (fail closed).
    std::fs::write(&list, "grt-aa\n\"grt-bb\"\n").unwrap();
    let err = v.revoked().unwrap_err().to_string();
    assert!(err.contains("line 2"), "{err}");
}

#[test]
fn a_grant_forces_an_update_only_of_a_service_whose_tasks_failed() {
    let now = 1_800_000_000;
    let at = |secs_ago: i64| {
        humantime::format_rfc3339(
            std::time::UNIX_EPOCH + std::time::Duration::from_secs((now - secs_ago) as u64),
        )
        .to_string()
    };
    let service = |mode: &str, desired, running, update: &str| ServiceInfo {
        name: "shop_api".into(),
        mode: mode.into(),
        desired,
        running,
        update_state: update.into(),
        ..Default::default()
    };
    let task = |state: &str, secs_ago| TaskInfo {
        state: state.into(),
        timestamp: at(secs_ago),
        ..Default::default()
    };
    let failed = [task("failed", 30)];
    let old_failure = [task("failed", 3600)];
    let rows: &[(ServiceInfo, &[TaskInfo], Option<&str>)] = &[
        (service("replicated", 2, 1, ""), &failed, None),
        (service("replicated", 1, 1, ""), &failed, None),
        (service("replicated", 2, 1, ""), &[], Some("none failed")),
        (
            service("replicated", 2, 1, ""),
            &old_failure,
            Some("none failed"),
        ),
        (
            service("replicated", 0, 0, ""),
            &failed,
            Some("scaled to zero"),
        ),
        (
            service("replicated", 2, 1, "paused"),
            &failed,
            Some("paused"),
        ),
        (
            service("replicated", 2, 1, "updating"),
            &failed,
            Some("updating"),
        ),
        (service("replicated-job", 1, 0, ""), &failed, Some("job")),
        (service("global-job", 1, 0, ""), &failed, Some("job")),
    ];
    for (s, tasks, refused) in rows {
        let got = service_precondition(ServiceAction::ForceUpdate, s, tasks, now);
        match (refused, got) {
            (None, Ok(())) => {}
            (Some(says), Err(e)) => assert!(e.to_string().contains(says), "{s:?}: {e}"),
            (want, got) => panic!("{s:?} {tasks:?}: wanted {want:?}, got {got:?}"),
        }
    }
    assert!(service_precondition(
        ServiceAction::Rollback,
        &service("replicated", 2, 1, ""),
        &failed,
        now
    )
    .is_err());
}

#[test]
fn an_update_grant_is_honoured_only_when_updates_may_be_granted_and_in_its_hours() {
    use drydock_proto::approval::{format_public_key, generate_signing_key};
    use drydock_proto::grant::{GrantScope, GRANT_KIND, GRANT_VERSION_NO_HOST};
    let key = generate_signing_key();
    let approvers = [ApproverConfig {
        id: "ops".into(),
        public_key: format_public_key(&key.verifying_key()),
    }];
    let automation = AutomationConfig {
        enabled: true,
        max_grant_ttl: Duration::from_secs(86_400),
        revocations: None,
    };
    // 03:30 UTC.
    let now = 1_800_070_200 - 1_800_070_200 % 86_400 + 3 * 3600 + 1800;
    let claims = |hours: &str| {
        drydock_proto::grant::GrantClaims {
            version: GRANT_VERSION_NO_HOST,
            kind: GRANT_KIND.into(),
            grant_id: "grt-night".into(),
            actions: vec![WriteAction::Update],
            scope: GrantScope {
                projects: vec!["shop".into()],
                ..Default::default()
            },
            classes: vec![],
            max_per_container: 1,
            window_secs: 3600,
            max_total: 1,
            issued_at: now - 60,
            expires_at: now + 3600,
            host: None,
            hours: Some(hours.into()),
        }
        .encode()
    };
    let labels: BTreeMap<String, String> =
        [(grant::COMPOSE_PROJECT_LABEL.to_string(), "shop".to_string())].into();
    let check = |v: &GrantVerifier, hours: &str| {
        let bytes = claims(hours);
        let signature = grant::sign(&bytes, &key);
        let input = GrantInput {
            claims: &bytes,
            signature: &signature,
            key_id: "ops",
            fault_class: "",
        };
        v.verify(&input, WriteAction::Update, "shop-api-1", &labels, now)
            .map(|g| g.claims.grant_id)
    };
    let utc = || GrantVerifier::new(&approvers, &automation).with_zone(jiff::tz::TimeZone::UTC);
    assert_eq!(utc().local_time(now), (3 * 60 + 30, 0));
    assert_eq!(
        check(&utc(), "02:00-05:00"),
        Err(GrantRefusal::UpdateGrantsOff("grt-night".into()))
    );
    let allowed = utc().with_update_grants(true);
    assert_eq!(check(&allowed, "02:00-05:00").unwrap(), "grt-night");
    let late = check(&allowed, "22:00-03:30").unwrap_err().to_string();
    assert!(
        late.contains("22:00-03:30") && late.contains("it is 03:30 here"),
        "{late}"
    );
    // The same instant is 04:30 an hour east: the zone decides.
    let east = GrantVerifier::new(&approvers, &automation)
        .with_update_grants(true)
        .with_zone(jiff::tz::TimeZone::fixed(jiff::tz::offset(1)));
    assert_eq!(east.local_time(now), (4 * 60 + 30, 3600));
    assert!(check(&east, "03:00-04:00").is_err());
    assert!(check(&east, "04:00-05:00").is_ok());
}

#[test]
fn a_new_store_knows_when_it_was_created_and_refuses_older_grants() {
    let dir = tempfile::tempdir().unwrap();
    let log = crate::audit::AuditLog::create(&dir.path().join("audit.db")).unwrap();
    let created = log.created_at().unwrap().expect("created_at");
    let mut claims = drydock_proto::grant::GrantClaims {
        version: drydock_proto::grant::GRANT_VERSION_NO_HOST,
        kind: drydock_proto::grant::GRANT_KIND.into(),
        grant_id: "grt-1".into(),
        actions: vec![drydock_proto::approval::WriteAction::Restart],
        scope: Default::default(),
        classes: vec![],
        max_per_container: 1,
        window_secs: 60,
        max_total: 1,
        issued_at: created - 3600,
        expires_at: created + 3600,
        host: None,
        hours: None,
    };
    let refused = check_store_age(&claims, Some(crate::audit::CountsSince::Created(created)));
    assert!(
        matches!(refused, Err(GrantRefusal::OlderThanStore { .. })),
        "{refused:?}"
    );
    claims.issued_at = created;
    assert!(check_store_age(&claims, Some(crate::audit::CountsSince::Created(created))).is_ok());
    // A store from before this check says nothing: no refusal.
    claims.issued_at = 0;
    assert!(check_store_age(&claims, None).is_ok());
    // A restored store: nothing dated up to the restore plus the skew
    // (it may have been used in the store the restore replaced).
    let restored = Some(crate::audit::CountsSince::Restored(created));
    for (issued_at, refused) in [
        (created - 3600, true),
        (created, true),
        (created + CLOCK_SKEW_SECS, true),
        (created + CLOCK_SKEW_SECS + 1, false),
    ] {
        claims.issued_at = issued_at;
        assert_eq!(
            matches!(
                check_store_age(&claims, restored),
                Err(GrantRefusal::BeforeRestore { .. })
            ),
            refused,
            "issued {issued_at}, restored {created}"
        );
    }
}

#[test]
fn a_grant_never_stands_for_more_than_one_approver() {
    let automation = AutomationConfig {
        enabled: true,
        max_grant_ttl: Duration::from_secs(3600),
        revocations: None,
    };
    let quorum = crate::approval::Quorum::new(&[("restart".to_string(), 2)].into_iter().collect());
    let v = GrantVerifier::new(&[], &automation).with_quorum(quorum);
    let input = GrantInput {
        claims: b"{}",
        signature: &[0; 64],
        key_id: "ops",
        fault_class: "unhealthy",
    };
    let e = v
        .verify(&input, WriteAction::Restart, "web", &BTreeMap::new(), 0)
        .expect_err("restart needs two");
    assert!(matches!(e, GrantRefusal::Quorum { required: 2, .. }), "{e}");
    let e = v
        .verify(&input, WriteAction::Start, "web", &BTreeMap::new(), 0)
        .expect_err("a start is refused for its bad signature, not the quorum");
    assert!(!matches!(e, GrantRefusal::Quorum { .. }), "{e}");
}
