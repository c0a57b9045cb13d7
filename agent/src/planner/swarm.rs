//! Plans for a Swarm service: a rollback to the previous spec when the
//! failure began with the last update and the previous spec ran; a force
//! update (the same spec, new tasks) when tasks fail for a cause new tasks
//! can outlive; advice otherwise (free resources, fix a constraint, bring a
//! node back, fix the configuration). Never a container write: Swarm
//! replaces a task container a restart would touch.

use super::digest;
use crate::model::{
    ExecutionRecord, FaultClass, Plan, PlanStep, PolicyView, ServiceStep, ServiceView, StepWrite,
    Target, WriteAction,
};
use crate::rules::swarm::{ServiceFinding, SpecChange};

/// A write of the service `target`, bound to the spec version and image
/// `s` shows; `None` when the target is no service.
fn step(
    write: ServiceStep,
    target: &Target,
    policy: &PolicyView,
    reason: String,
    expected: String,
    undo: String,
) -> Option<PlanStep> {
    let tier = policy.actions.tier(write.action());
    PlanStep::new(
        target.clone(),
        StepWrite::Service(write),
        reason,
        tier,
        expected,
        undo,
    )
    .ok()
}

fn rollback(
    target: &Target,
    s: &ServiceView,
    c: &SpecChange,
    policy: &PolicyView,
) -> Option<PlanStep> {
    let name = &s.summary.name;
    step(
        ServiceStep::Rollback {
            version: s.summary.version,
            image: s.summary.image.clone(),
            to_image: s.previous_image.clone(),
        },
        target,
        policy,
        format!(
            "{name} began failing after its last update; return it to its previous spec (image {}), whose tasks ran",
            c.previous_image
        ),
        format!(
            "{name} runs all its tasks on its previous spec (image {}) and they stay up",
            c.previous_image
        ),
        format!("to go forward again, update {name} once the new version is fixed (`docker service update --image …`, or deploy the stack again)"),
    )
}

fn force_update(
    target: &Target,
    s: &ServiceView,
    policy: &PolicyView,
    why: &str,
) -> Option<PlanStep> {
    let name = &s.summary.name;
    step(
        ServiceStep::ForceUpdate {
            version: s.summary.version,
            image: s.summary.image.clone(),
        },
        target,
        policy,
        format!("{why}; replace {name}'s tasks with new ones on the same spec (`docker service update --force`)"),
        format!("{name} runs all {} of its tasks and they stay up", s.summary.desired),
        format!("a force update changes no spec; if the new tasks fail too, look at `docker service ps {name}`"),
    )
}

/// The steps and advice for one service's finding.
pub fn plan(
    found: &ServiceFinding,
    s: &ServiceView,
    target: &Target,
    policy: &PolicyView,
    done: &[ExecutionRecord],
) -> Plan {
    let name = &s.summary.name;
    let class = found
        .finding
        .diagnosis
        .causes
        .first()
        .map(|c| c.class)
        .unwrap_or(FaultClass::Unknown);
    let tried = |action: WriteAction| done.iter().any(|d| d.action == action);
    let mut steps = Vec::new();
    let mut advice = Vec::new();
    if s.summary.update_state.in_progress() {
        // The update's end changes the spec version every approval binds.
        advice.push(format!(
            "The engine is still updating {name} (update {}): a write approved now would be refused once the update ends and changes the spec version. Ask again once `docker service inspect {name} --format '{{{{.UpdateStatus.State}}}}'` says completed (or rollback_completed).",
            s.summary.update_state
        ));
        return Plan {
            digest: digest(&steps),
            steps,
            advice,
        };
    }
    if let Some(change) = &found.change {
        if policy.actions.enabled(WriteAction::ServiceRollback)
            && !tried(WriteAction::ServiceRollback)
        {
            steps.extend(rollback(target, s, change, policy));
        } else {
            advice.push(format!(
                "{name} began failing after its update to image {}; roll it back with `docker service rollback {name}`{}, or fix the new version and update again.",
                change.image,
                if policy.actions.enabled(WriteAction::ServiceRollback) {
                    ""
                } else {
                    " (the executor's policy does not allow it: actions.service_rollback.enabled in executor.yaml)"
                }
            ));
        }
    }
    let detail = found.finding.detail.clone().unwrap_or_default();
    match class {
        FaultClass::Healthy | FaultClass::Stopped => {}
        FaultClass::Unschedulable => advice.push(format!(
            "No node can run {name}'s tasks ({}). Free resources on a node or lower the service's reservations (`docker service update --reserve-memory/--reserve-cpu`), fix a constraint no node meets, or bring a down or drained node back (`docker node update --availability active`); a force update places the same tasks the same way.",
            if detail.is_empty() { "the engine gives no reason" } else { &detail }
        )),
        FaultClass::ImageUnavailable if steps.is_empty() => advice.push(format!(
            "The nodes cannot get image {}: push it to a registry every node can reach (or load it on each node), or point the service at an image they have (`docker service update --image …`).",
            if detail.is_empty() { s.summary.image.as_str() } else { &detail }
        )),
        FaultClass::ConfigError if steps.is_empty() => advice.push(format!(
            "{name}'s tasks stop on a configuration error{}; fix the service's environment, secrets or configs (`docker service update --env-add …`, or the stack file) and update it. New tasks on the same spec fail the same way.",
            if detail.is_empty() { String::new() } else { format!(" ({detail})") }
        )),
        FaultClass::PermissionDenied | FaultClass::DiskFull | FaultClass::OomKilled
        | FaultClass::PortConflict | FaultClass::HealthcheckBroken
            if steps.is_empty() =>
        {
            advice.push(format!(
                "{name}'s tasks fail for a cause new tasks on the same spec meet again ({class}); fix it in the service's spec or on its nodes, then update the service."
            ))
        }
        // New tasks on the spec the failure began with fail the same way.
        _ if found.change.is_some() => {}
        _ if steps.is_empty() => {
            if !policy.actions.enabled(WriteAction::ForceUpdate) {
                advice.push(format!(
                    "Replace {name}'s tasks with `docker service update --force {name}` (the executor's policy does not allow it: actions.force_update.enabled)."
                ));
            } else if tried(WriteAction::ForceUpdate) {
                advice.push(format!(
                    "New tasks of {name} failed again after a force update: read `docker service logs {name}` for the first error and fix the cause."
                ));
            } else {
                let why = match class {
                    FaultClass::Unhealthy => "its tasks fail their health check".to_string(),
                    FaultClass::DependencyUnavailable => {
                        "its tasks lost a dependency and may not reconnect by themselves".to_string()
                    }
                    other => format!("its tasks fail ({other})"),
                };
                steps.extend(force_update(target, s, policy, &why));
            }
        }
        _ => {}
    }
    Plan {
        digest: digest(&steps),
        steps,
        advice,
    }
}
