use super::*;

#[test]
fn a_resolved_inspect_is_released_only_to_a_permit_for_its_id() {
    let policy = crate::policy::Policy::new(
        crate::config::TargetsConfig {
            allow_names: vec!["*".into()],
            ..Default::default()
        },
        crate::config::ActionsConfig::default(),
    );
    let resolved = |id: &str| Resolved {
        target: ResolvedTarget {
            id: id.into(),
            name: "web".into(),
            ..Default::default()
        },
        details: ContainerDetails {
            id: id.into(),
            ..Default::default()
        },
    };
    let a = resolved("a");
    let permit_a = policy.permit_read(&a.target).unwrap();
    let other = resolved("b");
    assert!(other.details(&permit_a).is_none());
    assert_eq!(a.details(&permit_a).map(|d| d.id), Some("a".to_string()));
}

#[test]
fn cpu_percent_matches_docker_formula() {
    assert_eq!(cpu_percent(200, 100, 2000, 1000, 2), 20.0);
    assert_eq!(cpu_percent(100, 100, 2000, 1000, 2), 0.0);
    assert_eq!(
        cpu_percent(100, 200, 2000, 1000, 2),
        0.0,
        "counter reset is not negative"
    );
}
