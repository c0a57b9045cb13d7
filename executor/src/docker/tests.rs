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

#[test]
fn a_long_line_is_redacted_whole_before_it_is_cut() {
    // The key straddles the 16 KiB cut: cutting first would leave
    // `AKIAIOSFOD`, which no pattern recognises.
    let mut raw = vec![b'x'; MAX_LINE_BYTES - 10];
    raw.extend_from_slice(b" AKIAIOSFODNN7EXAMPLE and more");
    let mut truncated = false;
    let (line, redactions) = cut_long_line(raw, &mut truncated);
    let line = String::from_utf8(line).expect("utf-8");
    assert!(truncated);
    assert_eq!(
        redactions, 1,
        "the redaction made before the cut is counted"
    );
    assert!(!line.contains("AKIAIOSF"), "{}", &line[line.len() - 60..]);
    assert!(line.ends_with(" [line truncated]"));
    assert!(line.len() <= MAX_LINE_BYTES + " [line truncated]".len());
    // Short lines pass untouched (they are shaped later, with the window).
    let mut truncated = false;
    assert_eq!(
        cut_long_line(b"ok\n".to_vec(), &mut truncated),
        (b"ok\n".to_vec(), 0)
    );
    assert!(!truncated);
}
