use super::*;
use crate::config::ActionToggle;

fn target(name: &str, labels: &[(&str, &str)]) -> ResolvedTarget {
    ResolvedTarget {
        id: "f".repeat(64),
        name: name.into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    }
}

#[test]
fn selector_table() {
    let managed: BTreeMap<String, String> =
        [("drydock.managed".to_string(), "true".to_string())].into();
    let rows: &[(TargetsConfig, ResolvedTarget, bool)] = &[
        (
            TargetsConfig {
                allow_names: vec!["*".into()],
                ..Default::default()
            },
            target("/anything", &[]),
            true,
        ),
        // drydock's own containers, whatever the selectors say.
        (
            TargetsConfig {
                allow_names: vec!["*".into()],
                ..Default::default()
            },
            target("/drydock-executor-1", &[(DRYDOCK_ROLE_LABEL, "executor")]),
            false,
        ),
        (
            TargetsConfig {
                allow_labels: [("a".to_string(), "b".to_string())].into(),
                ..Default::default()
            },
            target("/agent", &[("a", "b"), (DRYDOCK_ROLE_LABEL, "agent")]),
            false,
        ),
        // A Swarm task's container, whatever the selectors say: its
        // service (and that service's scope) decides.
        (
            TargetsConfig {
                allow_names: vec!["*".into()],
                ..Default::default()
            },
            target(
                "/bank_api.1.k3j5x0q7w2e9r4t6y8u1i3o5p",
                &[(SWARM_TASK_SERVICE_LABEL, "svc1")],
            ),
            false,
        ),
        (
            TargetsConfig {
                allow_names: vec!["shop-*".into()],
                ..Default::default()
            },
            target("/shop-db-1", &[]),
            true,
        ),
        (
            TargetsConfig {
                allow_names: vec!["shop-*".into()],
                ..Default::default()
            },
            target("/other", &[]),
            false,
        ),
        (
            TargetsConfig {
                allow_labels: managed.clone(),
                ..Default::default()
            },
            target("x", &[("drydock.managed", "true")]),
            true,
        ),
        (
            TargetsConfig {
                allow_labels: managed.clone(),
                ..Default::default()
            },
            target("x", &[("drydock.managed", "false")]),
            false,
        ),
        (
            TargetsConfig {
                allow_labels: managed,
                ..Default::default()
            },
            target("x", &[]),
            false,
        ),
        (
            TargetsConfig {
                allow_compose_projects: vec!["shop".into()],
                ..Default::default()
            },
            target("x", &[(COMPOSE_PROJECT_LABEL, "shop")]),
            true,
        ),
        (
            TargetsConfig {
                allow_compose_projects: vec!["shop".into()],
                ..Default::default()
            },
            target("x", &[(COMPOSE_PROJECT_LABEL, "other")]),
            false,
        ),
    ];
    for (targets, t, want) in rows {
        let policy = Policy::new(targets.clone(), ActionsConfig::default());
        assert_eq!(policy.permit_read(t).is_ok(), *want, "{targets:?} {t:?}");
        assert_eq!(
            policy.permit_write(&ContainerWrite::Restart, t).is_ok(),
            *want
        );
    }
}

#[test]
fn disabled_action_is_refused_even_for_allowed_targets() {
    let actions = ActionsConfig {
        restart: ActionToggle { enabled: false },
        start: ActionToggle { enabled: true },
        stop: ActionToggle { enabled: false },
        rollback: ActionToggle { enabled: false },
        force_update: ActionToggle { enabled: true },
        service_rollback: ActionToggle { enabled: false },
        update: Default::default(),
        build: ActionToggle { enabled: false },
    };
    let every = TargetsConfig {
        allow_names: vec!["*".into()],
        ..Default::default()
    };
    let policy = Policy::new(every, actions);
    assert_eq!(
        policy
            .permit_write(&ContainerWrite::Stop, &target("a", &[]))
            .unwrap_err(),
        PolicyError::ActionDisabled { action: "stop" }
    );
    assert_eq!(Policy::tier(WriteAction::Stop), Tier::Disruptive);
    assert_eq!(
        policy
            .permit_write(
                &ContainerWrite::Rollback {
                    to_image: ImageId::parse(&format!("sha256:{}", "1".repeat(64))).unwrap()
                },
                &target("a", &[])
            )
            .unwrap_err(),
        PolicyError::ActionDisabled { action: "rollback" }
    );
    assert_eq!(Policy::tier(WriteAction::Rollback), Tier::Disruptive);
    assert!(!ActionsConfig::default().rollback.enabled, "off by default");
    assert_eq!(
        policy
            .permit_write(&ContainerWrite::Restart, &target("a", &[]))
            .unwrap_err(),
        PolicyError::ActionDisabled { action: "restart" }
    );
    assert!(policy
        .permit_write(&ContainerWrite::Start, &target("a", &[]))
        .is_ok());
}

#[test]
fn services_fail_closed_and_are_selected_like_containers() {
    use crate::config::ServiceTargetsConfig;
    let service = |name: &str, stack: &str| ResolvedService {
        id: "n3urbn38u90m4jz0gvcm4t7ha".into(),
        name: name.into(),
        labels: [(STACK_NAMESPACE_LABEL.to_string(), stack.to_string())].into(),
        version: 3,
        ..Default::default()
    };
    // Container selectors alone show no service, even `*`.
    let containers_only = Policy::new(
        TargetsConfig {
            allow_names: vec!["*".into()],
            ..Default::default()
        },
        ActionsConfig::default(),
    );
    assert!(containers_only
        .permit_service_read(&service("shop_api", "shop"))
        .is_err());
    let rows: &[(ServiceTargetsConfig, ResolvedService, bool)] = &[
        (
            ServiceTargetsConfig {
                allow_stacks: vec!["shop".into()],
                ..Default::default()
            },
            service("shop_api", "shop"),
            true,
        ),
        (
            ServiceTargetsConfig {
                allow_stacks: vec!["shop".into()],
                ..Default::default()
            },
            service("bank_api", "bank"),
            false,
        ),
        (
            ServiceTargetsConfig {
                allow_names: vec!["shop_*".into()],
                ..Default::default()
            },
            service("shop_api", ""),
            true,
        ),
        (
            ServiceTargetsConfig {
                allow_names: vec!["shop_*".into()],
                allow_stacks: vec!["shop".into()],
                ..Default::default()
            },
            service("shop_api", "other"),
            false,
        ),
        // An empty services section selects nothing.
        (
            ServiceTargetsConfig::default(),
            service("shop_api", "shop"),
            false,
        ),
    ];
    for (services, s, want) in rows {
        let policy = Policy::new(
            TargetsConfig {
                services: Some(services.clone()),
                ..Default::default()
            },
            ActionsConfig::default(),
        );
        assert_eq!(
            policy.permit_service_read(s).is_ok(),
            *want,
            "{services:?} {s:?}"
        );
        assert_eq!(
            policy
                .permit_service_write(&ServiceWrite::ForceUpdate, s)
                .is_ok(),
            *want
        );
        // A Swarm-only config shows no container.
        assert!(policy.permit_read(&target("shop_api.1.x", &[])).is_err());
    }
    let policy = Policy::new(
        TargetsConfig {
            services: Some(ServiceTargetsConfig {
                allow_stacks: vec!["shop".into()],
                ..Default::default()
            }),
            ..Default::default()
        },
        ActionsConfig::default(),
    );
    let s = service("shop_api", "shop");
    // Off by default: the T2 rollback.
    assert_eq!(
        policy
            .permit_service_write(&ServiceWrite::Rollback, &s)
            .unwrap_err(),
        PolicyError::ActionDisabled {
            action: "service_rollback"
        }
    );
    // Off by default too: a service update (actions.update).
    let update = ServiceWrite::Update {
        digest: ImageId::parse(&format!("sha256:{}", "2".repeat(64))).unwrap(),
    };
    assert_eq!(
        policy.permit_service_write(&update, &s).unwrap_err(),
        PolicyError::ActionDisabled {
            action: "service_update"
        }
    );
    let mut own = s.clone();
    own.labels.insert(DRYDOCK_ROLE_LABEL.into(), "agent".into());
    assert!(matches!(
        policy.permit_service_read(&own),
        Err(PolicyError::Drydock { .. })
    ));
    assert_eq!(Policy::tier(WriteAction::ForceUpdate), Tier::Change);
    assert_eq!(Policy::tier(WriteAction::ServiceRollback), Tier::Disruptive);
}
