use super::*;
use crate::model::{ActionsView, Cause, Diagnosis, Incarnation};

fn finding(class: FaultClass, detail: Option<&str>) -> Finding {
    Finding {
        diagnosis: Diagnosis {
            summary: String::new(),
            confidence: 0.9,
            causes: vec![Cause {
                class,
                reason: String::new(),
                confidence: 0.9,
                evidence_ids: vec!["ev".into()],
            }],
            engine: "rules".into(),
            ..Default::default()
        },
        matched_line: None,
        detail: detail.map(String::from),
        change: None,
        finished_job: false,
        shape: ran_an_hour(),
        salient: None,
        fixed_before: None,
    }
}

/// The shape of a container that ran an hour before it failed: what the
/// plan table assumes, so each class gets its class's plan.
fn ran_an_hour() -> crate::rules::Shape {
    crate::rules::Shape {
        uptime_secs: Some(3600),
        ran_well_after: 60,
        ..Default::default()
    }
}

fn target() -> Target {
    Target::container("c".repeat(64), "web", None, None)
}

fn all() -> PolicyView {
    PolicyView {
        actions: ActionsView::enabling(&[WriteAction::Start, WriteAction::Restart]),
        approver_ids: vec![],
        logs_max_lines: 500,
        http_checks: vec![],
        approvers: vec![],
        allow_names: vec![],
        automation_enabled: false,
        revoked_grants: vec![],
        max_grant_ttl_secs: 0,
        services_in_scope: false,
        allow_service_names: vec![],
        host: String::new(),
        host_required: false,
        approvers_required: Default::default(),
        update_grants: false,
        utc_offset_secs: 0,
    }
}

#[test]
fn a_restart_step_says_how_long_the_container_may_take_to_stop() {
    let mut c = ContainerView {
        id: target().id().to_string(),
        name: "web".into(),
        running: true,
        stop_timeout_secs: 90,
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::Unhealthy, None),
        &c,
        &target(),
        &all(),
        &[],
        &Context::default(),
    );
    assert!(
        p.steps[0].expected_effect.contains("up to 90 s to stop"),
        "{:?}",
        p.steps[0]
    );
    c.stop_timeout_secs = 0;
    let p = plan(
        &finding(FaultClass::Unhealthy, None),
        &c,
        &target(),
        &all(),
        &[],
        &Context::default(),
    );
    assert!(
        p.steps[0].expected_effect.contains("up to 10 s"),
        "{:?}",
        p.steps[0]
    );
}

#[test]
fn plan_table() {
    let running = ContainerView {
        name: "web".into(),
        running: true,
        ..Default::default()
    };
    let exited = ContainerView {
        name: "web".into(),
        running: false,
        exit_code: 1,
        ..Default::default()
    };
    let rows: &[(FaultClass, &ContainerView, Option<&str>)] = &[
        (FaultClass::Unhealthy, &running, Some("restart")),
        (FaultClass::Stopped, &exited, Some("start")),
        (FaultClass::Crash, &exited, Some("start")),
        (FaultClass::ConfigError, &exited, None),
        (FaultClass::OomKilled, &exited, None),
        (FaultClass::PortConflict, &exited, None),
        (FaultClass::CrashLoop, &exited, None),
        (FaultClass::HostConfig, &exited, None),
        (FaultClass::HostConfig, &running, None),
        (FaultClass::Healthy, &running, None),
    ];
    for (class, c, want) in rows {
        let p = plan(
            &finding(*class, None),
            c,
            &target(),
            &all(),
            &[],
            &Context::default(),
        );
        assert_eq!(
            p.steps.first().map(|s| s.action().as_str()),
            *want,
            "{class:?}"
        );
        if restart_cannot_fix(*class) {
            assert!(!p.advice.is_empty(), "{class:?} needs advice");
        }
    }
}

#[test]
fn config_error_advice_names_the_variable() {
    let exited = ContainerView {
        name: "web".into(),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::ConfigError, Some("DATABASE_URL")),
        &exited,
        &target(),
        &all(),
        &[],
        &Context::default(),
    );
    assert!(p.steps.is_empty());
    assert!(p.advice[0].contains("DATABASE_URL"), "{:?}", p.advice);
}

#[test]
fn disabled_or_repeated_actions_become_advice() {
    let running = ContainerView {
        name: "web".into(),
        running: true,
        ..Default::default()
    };
    let mut no_restart = all();
    no_restart.actions.set_enabled(WriteAction::Restart, false);
    let p = plan(
        &finding(FaultClass::Unhealthy, None),
        &running,
        &target(),
        &no_restart,
        &[],
        &Context::default(),
    );
    assert!(
        p.steps.is_empty()
            && p.advice
                .iter()
                .any(|a| a.contains("does not allow restart"))
    );
    let done = ExecutionRecord {
        step: 0,
        action: WriteAction::Restart,
        container_id: "c".repeat(64),
        approval_id: "a".into(),
        ok: true,
        message: String::new(),
        at: String::new(),
        in_doubt: false,
        grant_id: None,
        new_container_id: None,
        service_version: None,
    };
    let p = plan(
        &finding(FaultClass::Unhealthy, None),
        &running,
        &target(),
        &all(),
        &[done],
        &Context::default(),
    );
    assert!(p.steps.is_empty() && p.advice.iter().any(|a| a.contains("already tried")));
}

fn dependency(running: bool, health: &str) -> DependencyState {
    DependencyState {
        named: "db:5432".into(),
        source: "log".into(),
        container: Some(ContainerView {
            id: "d".repeat(64),
            name: "shop-db-1".into(),
            running,
            health_status: health.into(),
            exit_code: 0,
            ..Default::default()
        }),
    }
}

#[test]
fn a_stopped_dependency_is_started_before_the_dependent_service() {
    let exited = ContainerView {
        name: "web".into(),
        running: false,
        exit_code: 1,
        ..Default::default()
    };
    let ctx = Context {
        dependency: Some(dependency(false, "none")),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::DependencyUnavailable, Some("db:5432")),
        &exited,
        &target(),
        &all(),
        &[],
        &ctx,
    );
    let steps: Vec<(&str, &str)> = p
        .steps
        .iter()
        .map(|s| (s.action().as_str(), s.target().name()))
        .collect();
    assert_eq!(steps, [("start", "shop-db-1"), ("start", "web")]);

    let running_dep = Context {
        dependency: Some(dependency(true, "healthy")),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::DependencyUnavailable, Some("db:5432")),
        &exited,
        &target(),
        &all(),
        &[],
        &running_dep,
    );
    assert_eq!(
        p.steps
            .iter()
            .map(|s| s.target().name())
            .collect::<Vec<_>>(),
        ["web"],
        "only the dependent needs a start"
    );

    let sick_dep = Context {
        dependency: Some(dependency(true, "unhealthy")),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::DependencyUnavailable, None),
        &exited,
        &target(),
        &all(),
        &[],
        &sick_dep,
    );
    assert!(
        p.steps.is_empty() && p.advice.iter().any(|a| a.contains("shop-db-1")),
        "{p:?}"
    );

    let missing = Context {
        dependency: Some(DependencyState {
            named: "db:5432".into(),
            source: "log".into(),
            container: None,
        }),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::DependencyUnavailable, None),
        &exited,
        &target(),
        &all(),
        &[],
        &missing,
    );
    assert!(
        p.steps.is_empty() && p.advice.iter().any(|a| a.contains("no container")),
        "{p:?}"
    );
}

#[test]
fn port_and_memory_advice_use_the_context() {
    let exited = ContainerView {
        name: "web".into(),
        memory_limit_bytes: 16 * 1024 * 1024,
        ..Default::default()
    };
    let ctx = Context {
        port: Some(8080),
        port_holder: Some("legacy-web".into()),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::PortConflict, None),
        &exited,
        &target(),
        &all(),
        &[],
        &ctx,
    );
    assert!(
        p.advice[0].contains("legacy-web") && p.advice[0].contains("8080"),
        "{:?}",
        p.advice
    );
    let p = plan(
        &finding(FaultClass::OomKilled, None),
        &exited,
        &target(),
        &all(),
        &[],
        &Context {
            memory_usage_bytes: Some(15 * 1024 * 1024),
            ..Default::default()
        },
    );
    assert!(
        p.advice[0].contains("16.0 MiB") && p.advice[0].contains("15.0 MiB"),
        "{:?}",
        p.advice
    );
}

#[test]
fn host_settings_crash_loops_and_finished_jobs_get_advice_not_writes() {
    let exited = ContainerView {
        name: "search-es-1".into(),
        running: false,
        exit_code: 78,
        ..Default::default()
    };
    let line = "bootstrap check failure [1] of [1]: max virtual memory areas vm.max_map_count [65530] is too low, increase to at least [262144]";
    let mut f = finding(FaultClass::HostConfig, Some("vm.max_map_count"));
    f.matched_line = Some(line.into());
    let p = plan(&f, &exited, &target(), &all(), &[], &Context::default());
    assert!(p.steps.is_empty(), "{p:?}");
    assert!(
        p.advice[0].contains("sudo sysctl -w vm.max_map_count=262144"),
        "{p:?}"
    );

    // A crash loop whose logs say why gets the advice for the why.
    let mut f = finding(FaultClass::CrashLoop, Some("vm.max_map_count"));
    f.matched_line = Some(line.into());
    f.diagnosis.causes.push(Cause {
        class: FaultClass::HostConfig,
        reason: "its logs show ...".into(),
        confidence: 0.6,
        evidence_ids: vec!["ev".into()],
    });
    let looping = ContainerView {
        restart_count: 7,
        ..exited.clone()
    };
    let p = plan(&f, &looping, &target(), &all(), &[], &Context::default());
    assert!(p.steps.is_empty(), "{p:?}");
    assert!(p.advice[0].contains("its logs say why"), "{p:?}");
    assert!(
        p.advice
            .iter()
            .any(|a| a.contains("vm.max_map_count=262144")),
        "{p:?}"
    );

    // A job that ran to completion is not started again.
    let mut f = finding(FaultClass::Stopped, None);
    f.finished_job = true;
    let done = ContainerView {
        name: "shop-migrate-1".into(),
        exit_code: 0,
        ..Default::default()
    };
    let p = plan(&f, &done, &target(), &all(), &[], &Context::default());
    assert!(p.steps.is_empty(), "{p:?}");
    assert!(p.advice[0].starts_with("Nothing to repair"), "{p:?}");
}

#[test]
fn a_running_target_is_left_to_recover_once_its_dependency_is_started() {
    let running = ContainerView {
        id: target().id().to_string(),
        name: "web".into(),
        running: true,
        health_status: "unhealthy".into(),
        ..Default::default()
    };
    let ctx = Context {
        dependency: Some(dependency(false, "none")),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::DependencyUnavailable, Some("db")),
        &running,
        &target(),
        &all(),
        &[],
        &ctx,
    );
    let steps: Vec<(&str, &str)> = p
        .steps
        .iter()
        .map(|s| (s.action().as_str(), s.target().name()))
        .collect();
    assert_eq!(steps, [("start", "shop-db-1")], "{p:?}");
    assert!(
        p.advice.iter().any(|a| a.contains("recover by itself")),
        "{p:?}"
    );
    // Next round, the dependency up and the target still unhealthy: now
    // the target is restarted.
    let ctx = Context {
        dependency: Some(dependency(true, "healthy")),
        ..Default::default()
    };
    let p = plan(
        &finding(FaultClass::DependencyUnavailable, Some("db")),
        &running,
        &target(),
        &all(),
        &[],
        &ctx,
    );
    assert_eq!(p.steps.len(), 1);
    assert_eq!(
        (p.steps[0].action().as_str(), p.steps[0].target().name()),
        ("restart", "web")
    );
}

/// No write without evidence that it helps: the gate, case by case, and
/// the plan it leads to.
#[test]
fn a_write_needs_evidence_that_it_helps() {
    use crate::rules::shape::Exit;
    use crate::rules::Shape;
    let exited = ContainerView {
        name: "web".into(),
        exit_code: 1,
        networks: vec!["shop_default".into()],
        ..Default::default()
    };
    let startup = Shape {
        exit: Exit::ProgramSaid(1),
        uptime_secs: Some(1),
        startup_failure: true,
        ran_well_after: 60,
        ..Default::default()
    };
    let every_start = Shape {
        same_at_every_start: Some(3),
        ..startup.clone()
    };
    let with = |class: FaultClass, shape: &Shape, fixed: Option<&str>, confidence: f32| {
        let mut f = finding(class, None);
        f.shape = shape.clone();
        f.fixed_before = fixed.map(String::from);
        f.diagnosis.causes[0].confidence = confidence;
        f.salient = Some("panic: lost the broker".into());
        f
    };
    let ok = |f: &Finding, ctx: &Context| write_supported(f, &exited, ctx);
    let none = Context::default();
    // A crash that ran an hour: the run says so.
    let long = ok(&with(FaultClass::Crash, &ran_an_hour(), None, 0.8), &none);
    assert!(
        long.as_ref().is_ok_and(|w| w.contains("ran for 60 min")),
        "{long:?}"
    );
    // The same words seconds after the start: nothing says a start helps.
    let quick = ok(&with(FaultClass::Crash, &startup, None, 0.8), &none);
    assert!(
        quick
            .as_ref()
            .is_err_and(|w| w.contains("would go differently")),
        "{quick:?}"
    );
    // ... unless a start helped this very failure before.
    let helped = ok(
        &with(
            FaultClass::Crash,
            &startup,
            Some("it died the same way at 03:00:00 UTC"),
            0.8,
        ),
        &none,
    );
    assert!(
        helped
            .as_ref()
            .is_ok_and(|w| w.contains("helped the same failure before")),
        "{helped:?}"
    );
    // The same failure at every start: never, whatever the history.
    let again = ok(
        &with(FaultClass::Crash, &every_start, Some("x"), 0.9),
        &none,
    );
    assert!(
        again
            .as_ref()
            .is_err_and(|w| w.contains("each of its last 3 runs")),
        "{again:?}"
    );
    // Unknown, or a cause below the threshold: no write.
    assert!(ok(
        &with(FaultClass::Unknown, &ran_an_hour(), None, 0.25),
        &none
    )
    .is_err());
    let thin = ok(&with(FaultClass::Crash, &ran_an_hour(), None, 0.5), &none);
    assert!(thin.as_ref().is_err_and(|w| w.contains("thin")), "{thin:?}");
    // Stopped by a person: a start is the repair.
    assert!(ok(&with(FaultClass::Stopped, &startup, None, 0.8), &none).is_ok());
    // A dependency: down (started first), up again, or on another network.
    let dep = |running: bool, networks: &[&str]| {
        let mut d = dependency(running, "none");
        if let Some(c) = d.container.as_mut() {
            c.networks = networks.iter().map(|n| n.to_string()).collect();
        }
        Context {
            dependency: Some(d),
            ..Default::default()
        }
    };
    let f = with(FaultClass::DependencyUnavailable, &startup, None, 0.8);
    assert!(ok(&f, &dep(false, &["shop_default"])).is_ok_and(|w| w.contains("started first")));
    assert!(ok(&f, &dep(true, &["shop_default"])).is_ok_and(|w| w.contains("up now")));
    let split = ok(&f, &dep(true, &["billing_default"]));
    assert!(
        split
            .as_ref()
            .is_err_and(|w| w.contains("share no network")),
        "{split:?}"
    );
    // As Docker reports `--network NAME`: the mode is the network's name.
    let named = ContainerView {
        network_mode: "shop_default".into(),
        ..exited.clone()
    };
    let split = write_supported(&f, &named, &dep(true, &["billing_default"]));
    assert!(
        split
            .as_ref()
            .is_err_and(|w| w.contains("share no network")),
        "{split:?}"
    );
    // On the host's network, it reaches the other by a published port.
    let host = ContainerView {
        network_mode: "host".into(),
        networks: vec!["host".into()],
        ..exited.clone()
    };
    assert!(write_supported(&f, &host, &dep(true, &["billing_default"])).is_ok());
    // In the plan: the reason says why, or the advice says why not.
    let p = plan(
        &with(FaultClass::Crash, &ran_an_hour(), None, 0.8),
        &exited,
        &target(),
        &all(),
        &[],
        &none,
    );
    assert!(
        p.steps[0].reason.contains("ran for 60 min"),
        "{:?}",
        p.steps[0].reason
    );
    let p = plan(
        &with(FaultClass::Crash, &startup, None, 0.8),
        &exited,
        &target(),
        &all(),
        &[],
        &none,
    );
    assert!(p.steps.is_empty());
    assert!(
        p.advice
            .iter()
            .any(|a| a.starts_with("No start or restart of web is proposed")),
        "{:?}",
        p.advice
    );
    let p = plan(
        &f,
        &exited,
        &target(),
        &all(),
        &[],
        &dep(true, &["billing_default"]),
    );
    assert!(p.steps.is_empty(), "{:?}", p.steps);
}

#[test]
fn an_unhealthy_target_whose_logs_name_what_a_restart_cannot_change_gets_no_restart() {
    let running = ContainerView {
        name: "search".into(),
        running: true,
        ..Default::default()
    };
    // It ran an hour: a restart is worth proposing on that alone.
    let unhealthy = finding(FaultClass::Unhealthy, None);
    assert!(write_supported(&unhealthy, &running, &Context::default()).is_ok());
    // But its logs say its data is corrupt: it would come back the same.
    let mut corrupt = unhealthy.clone();
    corrupt.diagnosis.causes.push(Cause {
        class: FaultClass::ConfigError,
        reason: "its logs say: found its data corrupt".into(),
        confidence: 0.6,
        evidence_ids: vec!["ev".into()],
    });
    let refused = write_supported(&corrupt, &running, &Context::default());
    assert!(
        refused
            .as_ref()
            .is_err_and(|w| w.contains("a restart cannot change") && w.contains("corrupt")),
        "{refused:?}"
    );
    // A dependency the logs blame is no such cause: a restart after it
    // returns may help.
    let mut dep = unhealthy.clone();
    dep.diagnosis.causes.push(Cause {
        class: FaultClass::DependencyUnavailable,
        reason: "its logs say: could not connect".into(),
        confidence: 0.6,
        evidence_ids: vec!["ev".into()],
    });
    assert!(write_supported(&dep, &running, &Context::default()).is_ok());
}

#[test]
fn a_gone_image_of_a_known_commit_is_offered_as_a_rebuild_where_builds_are_on() {
    let change = Change {
        service: "shop/api".into(),
        previous: Incarnation {
            image: "shop_api".into(),
            image_id: format!("sha256:{}", "1".repeat(64)),
            revision: Some("9c2d1e0".into()),
            ..Default::default()
        },
        current: Incarnation {
            name: "shop-api-1".into(),
            image_id: format!("sha256:{}", "2".repeat(64)),
            ..Default::default()
        },
        image_changed: true,
        previous_image_present: Some(false),
        ..Default::default()
    };
    let mut policy = PolicyView::default();
    let advice = change_advice(&change, &policy).join(" ");
    assert!(advice.contains("pull or rebuild that version"), "{advice}");
    assert!(
        !advice.contains("drydock build"),
        "builds are off: {advice}"
    );
    policy.actions.set_enabled(WriteAction::Build, true);
    let advice = change_advice(&change, &policy).join(" ");
    assert!(
        advice.contains("`drydock build shop-api-1 --at 9c2d1e0`"),
        "{advice}"
    );
}
