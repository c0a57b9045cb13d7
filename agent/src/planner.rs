//! From a diagnosis to an ActionPlan. Steps are only actions the executor's
//! policy enables, on targets seen in this request's evidence; faults a
//! restart cannot fix get no write step and concrete advice instead. An
//! action already tried in this request is never proposed again.

use sha2::{Digest as _, Sha256};

use crate::model::{
    ContainerView, ExecutionRecord, FaultClass, Plan, PlanStep, PolicyView, Target,
};
use crate::rules::Finding;

fn step(action: &str, target: &Target, reason: String, expected: &str) -> PlanStep {
    PlanStep {
        action: action.into(),
        target: target.clone(),
        reason,
        risk: "T1".into(),
        expected_effect: expected.into(),
        rollback: format!("{action} is not reversible as such; if the container gets worse, inspect it with `docker logs {}` and stop it by hand", target.container_name),
    }
}

/// sha256 of the steps; an approval binds to exactly this plan.
pub fn digest(steps: &[PlanStep]) -> String {
    let bytes = serde_json::to_vec(steps).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

fn advice_for(class: FaultClass, finding: &Finding, c: &ContainerView) -> Vec<String> {
    let name = &c.name;
    let detail = finding.detail.clone().unwrap_or_default();
    match class {
        FaultClass::ConfigError if !detail.is_empty() && detail.chars().all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_') => vec![format!(
            "Set the environment variable {detail} for {name} (for example under `environment:` in its compose file) and recreate the container; a restart alone keeps the same configuration and fails the same way."
        )],
        FaultClass::ConfigError if !detail.is_empty() => vec![format!(
            "Provide `{detail}` to {name} (configuration value, file or module), then recreate the container; a restart alone cannot fix it."
        )],
        FaultClass::ConfigError => vec![format!(
            "Fix the configuration of {name} (log: \"{}\") and recreate the container; a restart alone cannot fix it.",
            finding.matched_line.clone().unwrap_or_default()
        )],
        FaultClass::OomKilled => vec![format!(
            "{name} ran out of memory. Raise its memory limit (`mem_limit` / `deploy.resources.limits.memory`) or reduce its usage, then recreate it; restarting alone will hit the same limit."
        )],
        FaultClass::PortConflict => vec![format!(
            "Another process or container holds the port {name} needs ({}). Stop the holder (`docker ps --filter publish=PORT`, `ss -ltnp`) or change the published port, then start {name}.",
            if detail.is_empty() { finding.matched_line.clone().unwrap_or_default() } else { detail }
        )],
        FaultClass::PermissionDenied => vec![format!(
            "{name} was denied access (\"{}\"). Fix the ownership or mode of the path or volume, or the user the container runs as; a restart cannot change permissions.",
            finding.matched_line.clone().unwrap_or_default()
        )],
        FaultClass::DiskFull => vec![format!(
            "The disk behind {name} is full. Free space (`docker system df`, old volumes and logs) or grow the volume, then restart it."
        )],
        FaultClass::HealthcheckBroken => vec![format!(
            "The healthcheck of {name} cannot run ({detail}). Fix the healthcheck command in the image or compose file; the service itself may be fine."
        )],
        FaultClass::CrashLoop => vec![format!(
            "{name} is crash-looping ({} restarts). Another restart will not help: read its logs for the first error, fix the cause, then recreate it.",
            c.restart_count
        )],
        FaultClass::DependencyUnavailable => vec![format!(
            "{name} cannot reach a dependency{}. Check that the dependency is running and reachable on the same network.",
            if detail.is_empty() { String::new() } else { format!(" ({detail})") }
        )],
        _ => vec![],
    }
}

/// Build the plan for one container's finding.
pub fn plan(
    finding: &Finding,
    container: &ContainerView,
    target: &Target,
    policy: &PolicyView,
    done: &[ExecutionRecord],
) -> Plan {
    let primary = finding
        .diagnosis
        .causes
        .first()
        .map(|c| c.class)
        .unwrap_or(FaultClass::Unknown);
    let mut steps = Vec::new();
    let mut advice = advice_for(primary, finding, container);
    let already = |action: &str| {
        done.iter()
            .any(|d| d.action == action && d.container_id == target.container_id)
    };

    let wanted: Option<(&str, bool, String, &str)> = match primary {
        FaultClass::Unhealthy => Some((
            "restart",
            policy.restart_enabled,
            format!(
                "{} is running but unhealthy; a restart clears a wedged process",
                target.container_name
            ),
            "the container restarts and its healthcheck passes",
        )),
        FaultClass::Stopped
        | FaultClass::Crash
        | FaultClass::DependencyUnavailable
        | FaultClass::Unknown
            if !container.running =>
        {
            Some((
                "start",
                policy.start_enabled,
                format!(
                    "{} is not running (exit code {})",
                    target.container_name, container.exit_code
                ),
                "the container starts and stays running",
            ))
        }
        _ => None,
    };
    if let Some((action, enabled, reason, expected)) = wanted {
        if primary.restart_cannot_fix() {
            // Defensive: the match above never yields these.
        } else if already(action) {
            advice.push(format!(
                "A {action} of {} was already tried in this request and did not fix it; not repeating it. Look at the evidence above for the underlying cause.",
                target.container_name
            ));
        } else if !enabled {
            advice.push(format!("The executor's policy does not allow {action}; {action} {} by hand if appropriate.", target.container_name));
        } else {
            steps.push(step(action, target, reason, expected));
        }
    }
    Plan {
        digest: digest(&steps),
        steps,
        advice,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Cause, Diagnosis};

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
            },
            matched_line: None,
            detail: detail.map(String::from),
        }
    }

    fn target() -> Target {
        Target {
            kind: "container".into(),
            container_id: "c".repeat(64),
            container_name: "web".into(),
            service: None,
        }
    }

    const ALL: PolicyView = PolicyView {
        start_enabled: true,
        restart_enabled: true,
        stop_enabled: false,
        approver_ids: vec![],
        logs_max_lines: 500,
        http_checks: vec![],
    };

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
            (FaultClass::Healthy, &running, None),
        ];
        for (class, c, want) in rows {
            let p = plan(&finding(*class, None), c, &target(), &ALL, &[]);
            assert_eq!(
                p.steps.first().map(|s| s.action.as_str()),
                *want,
                "{class:?}"
            );
            if class.restart_cannot_fix() {
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
            &ALL,
            &[],
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
        let no_restart = PolicyView {
            restart_enabled: false,
            ..ALL
        };
        let p = plan(
            &finding(FaultClass::Unhealthy, None),
            &running,
            &target(),
            &no_restart,
            &[],
        );
        assert!(
            p.steps.is_empty()
                && p.advice
                    .iter()
                    .any(|a| a.contains("does not allow restart"))
        );
        let done = ExecutionRecord {
            step: 0,
            action: "restart".into(),
            container_id: "c".repeat(64),
            approval_id: "a".into(),
            ok: true,
            message: String::new(),
            at: String::new(),
        };
        let p = plan(
            &finding(FaultClass::Unhealthy, None),
            &running,
            &target(),
            &ALL,
            &[done],
        );
        assert!(p.steps.is_empty() && p.advice.iter().any(|a| a.contains("already tried")));
    }
}
