//! From a diagnosis to an ActionPlan. Steps are only actions the executor's
//! policy enables, on targets seen in this request's evidence; faults a
//! restart cannot fix get no write step and concrete advice instead. An
//! action already tried in this request is never proposed again.

use sha2::{Digest as _, Sha256};

use crate::disk;
use crate::model::{
    Change, ContainerStep, ContainerView, DependencyState, DiskUsageView, ExecutionRecord,
    FaultClass, ImageId, Plan, PlanStep, PolicyView, StepWrite, Target, WriteAction,
};
use crate::rules::Finding;
use crate::text::human_bytes;

/// Facts beyond the target's own state that shape the plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub dependency: Option<DependencyState>,
    /// Who publishes the port this container needs.
    pub port_holder: Option<String>,
    pub port: Option<u32>,
    /// Observed memory use (stats), when the container was running.
    pub memory_usage_bytes: Option<u64>,
    /// Operator notes from the runbook.
    pub notes: Option<String>,
    /// Where the target's disk goes (`DiskUsage`), for a full disk.
    pub disk: Option<DiskUsageView>,
}

/// A start or restart of `target`; `None` when it is no container.
fn step(
    write: ContainerStep,
    target: &Target,
    policy: &PolicyView,
    reason: String,
    expected: &str,
) -> Option<PlanStep> {
    let action = write.action();
    PlanStep::new(
        target.clone(),
        StepWrite::Container(write),
        reason,
        policy.actions.tier(action),
        expected.into(),
        format!("{action} is not reversible as such; if the container gets worse, inspect it with `docker logs {}` and stop it by hand", target.name()),
    )
    .ok()
}

/// How long a restart may take to stop the container: the engine honours
/// its own StopTimeout (10 s when it sets none).
pub fn stop_note(stop_timeout_secs: u32) -> String {
    if stop_timeout_secs == 0 {
        "; Docker gives it up to 10 s to stop (the engine's default)".into()
    } else {
        format!("; Docker gives it up to {stop_timeout_secs} s to stop (its StopTimeout)")
    }
}

/// Faults a restart cannot fix: the plan for them has no write step, only
/// advice for a person.
pub fn restart_cannot_fix(class: FaultClass) -> bool {
    matches!(
        class,
        FaultClass::ConfigError
            | FaultClass::OomKilled
            | FaultClass::PortConflict
            | FaultClass::PermissionDenied
            | FaultClass::DiskFull
            | FaultClass::HealthcheckBroken
            | FaultClass::CrashLoop
            | FaultClass::HostConfig
    )
}

/// A rollback of `target` to the image that ran before `change`, when the
/// change was of the image, that image is on the engine, and the executor
/// allows rollbacks.
fn rollback_step(change: &Change, target: &Target, policy: &PolicyView) -> Option<PlanStep> {
    if !change.image_rollback_possible() || !policy.actions.enabled(WriteAction::Rollback) {
        return None;
    }
    let previous = &change.previous;
    let ran = change
        .previous_ran_secs
        .map(|s| format!(", which ran {} without a failure", crate::model::span(s)))
        .unwrap_or_default();
    let write = ContainerStep::Rollback {
        to_image: ImageId::parse(&previous.image_id)?,
        from_image: ImageId::parse(&change.current.image_id)?,
    };
    PlanStep::new(
        target.clone(),
        StepWrite::Container(write),
        format!(
            "{} began failing after it was recreated from image {}; roll it back to image {}{ran}",
            target.name(),
            crate::change::short_image(&change.current.image_id),
            crate::change::short_image(&previous.image_id),
        ),
        policy.actions.tier(WriteAction::Rollback),
        format!(
            "{} runs image {} again, under its name, on its networks, with its volumes, and passes its healthcheck",
            target.name(),
            crate::change::short_image(&previous.image_id)
        ),
        format!(
            "to go forward again, recreate {} from its image name (docker compose up -d, or docker run) once the new version is fixed",
            target.name()
        ),
    )
    .ok()
}

/// What a person can do about a change drydock will not undo itself.
fn change_advice(change: &Change, policy: &PolicyView) -> Vec<String> {
    let mut advice = Vec::new();
    let previous = crate::change::short_image(&change.previous.image_id);
    if change.image_changed {
        let revision = change
            .previous
            .revision
            .as_ref()
            .map(|r| format!(" (built from commit {r})"))
            .unwrap_or_default();
        // A gone image whose commit is known can be built again, where
        // the executor builds (its context permitting).
        let rebuild = change
            .previous
            .revision
            .as_deref()
            .filter(|r| drydock_proto::approval::is_revision(r))
            .filter(|_| policy.actions.enabled(WriteAction::Build));
        advice.push(match (change.previous_image_present, rebuild) {
            (Some(false), Some(rev)) => format!(
                "The image {} ran before{revision} is no longer on the engine: rebuild it from that commit and run it (`drydock build {} --at {rev}`, where the executor has a build context for {}), or pull that version and recreate {} with it.",
                previous, change.current.name, change.service, change.service
            ),
            (Some(false), None) => format!(
                "The image {} ran before{revision} is no longer on the engine: pull or rebuild that version, then recreate {} with it.",
                previous, change.service
            ),
            (_, _) if !policy.actions.enabled(WriteAction::Rollback) => format!(
                "Roll {} back to image {previous}{revision}, which ran before the change: the executor's policy does not allow rollbacks (actions.rollback.enabled in executor.yaml); by hand, tag that image as {} again and recreate the service.",
                change.service, change.previous.image
            ),
            _ => format!(
                "Roll {} back to image {previous}{revision}, which ran before the change, or fix the new version.",
                change.service
            ),
        });
    }
    let env: Vec<&String> = change
        .env_changed
        .iter()
        .chain(&change.env_added)
        .chain(&change.env_removed)
        .collect();
    if !env.is_empty() {
        advice.push(format!(
            "The environment of {} changed ({}): revert that change or fix the new values, then recreate it.",
            change.service,
            env.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    advice
}

/// sha256 of the steps; an approval binds to exactly this plan.
pub fn digest(steps: &[PlanStep]) -> String {
    let bytes = serde_json::to_vec(steps).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

fn advice_for(
    class: FaultClass,
    finding: &Finding,
    c: &ContainerView,
    ctx: &Context,
) -> Vec<String> {
    let name = &c.name;
    let detail = finding.detail.clone().unwrap_or_default();
    let line = finding.matched_line.clone().unwrap_or_default();
    match class {
        FaultClass::ConfigError if line.contains("shared memory segment") => vec![format!(
            "{name} ran out of shared memory (/dev/shm, 64 MB in a container unless set): raise it with `shm_size: 256mb` in its compose file (or `docker run --shm-size=256m`) and recreate it; a restart keeps the same size."
        )],
        FaultClass::ConfigError if !detail.is_empty() && detail.chars().all(|ch| ch.is_ascii_uppercase() || ch.is_ascii_digit() || ch == '_') => vec![format!(
            "Set the environment variable {detail} for {name} (for example under `environment:` in its compose file) and recreate the container; a restart alone keeps the same configuration and fails the same way."
        )],
        FaultClass::ConfigError if !detail.is_empty() => vec![format!(
            "Provide `{detail}` to {name} (configuration value, file or module), then recreate the container; a restart alone cannot fix it."
        )],
        FaultClass::ConfigError => vec![format!("Fix the configuration of {name} (log: \"{line}\") and recreate the container; a restart alone cannot fix it.")],
        FaultClass::OomKilled => {
            let limit = if c.memory_limit_bytes > 0 { format!("its limit is {}", human_bytes(c.memory_limit_bytes as u64)) } else { "it has no memory limit, so the host ran out".to_string() };
            let usage = ctx.memory_usage_bytes.map(|u| format!(", observed use {}", human_bytes(u))).unwrap_or_default();
            vec![format!(
                "{name} ran out of memory ({limit}{usage}). Raise the limit (`mem_limit` / `deploy.resources.limits.memory`, `docker update --memory`) or reduce its usage, then recreate it; restarting alone will hit the same limit."
            )]
        }
        FaultClass::PortConflict => {
            let port = ctx.port.map(|p| format!("port {p}")).unwrap_or_else(|| "its port".to_string());
            let holder = match &ctx.port_holder {
                Some(h) => format!("container {h} publishes {port}"),
                None => format!("{port} is held by a process outside Docker's view (find it with `ss -ltnp`)"),
            };
            vec![format!("{name} cannot bind {port}: {holder}. Stop the holder or change the published port, then start {name}.")]
        }
        FaultClass::PermissionDenied => vec![format!(
            "{name} was denied access (\"{line}\"). It runs as {}{}. Fix the ownership or mode of the path or volume, or the user the container runs as; a restart cannot change permissions.",
            c.run_as(),
            c.mounts_said()
        )],
        FaultClass::DiskFull => {
            let usage = ctx.disk.clone().unwrap_or_default();
            let (line, engine_error) = disk::failed_line(finding.matched_line.as_deref(), c);
            let location = match &ctx.disk {
                Some(_) => disk::locate(&line, engine_error, &usage),
                None => disk::Location::Unknown,
            };
            disk::advice(name, &location, &usage)
        }
        FaultClass::HealthcheckBroken => vec![format!(
            "The healthcheck of {name} cannot run ({detail}). Fix the healthcheck command in the image or compose file; the service itself may be fine."
        )],
        FaultClass::HostConfig => vec![host::advice(name, &line, finding.detail.as_deref())],
        FaultClass::CrashLoop => {
            // Its logs may already say why it keeps dying: then the advice
            // for that cause is what a person needs, not just "read the
            // logs".
            let why = finding
                .diagnosis
                .causes
                .iter()
                .skip(1)
                .map(|c| c.class)
                .find(|k| *k != FaultClass::CrashLoop && restart_cannot_fix(*k));
            let mut advice = vec![format!(
                "{name} is crash-looping ({} restarts). Another restart will not help: {}",
                c.restart_count,
                if why.is_some() {
                    "its logs say why (below); fix that, then recreate it."
                } else {
                    "read its logs for the first error, fix the cause, then recreate it."
                }
            )];
            if let Some(k) = why {
                advice.extend(advice_for(k, finding, c, ctx));
            }
            advice
        }
        _ => vec![],
    }
}

/// A container that shares another's network (`network_mode: service:X`)
/// loses it when X restarts: it has to be re-created, not restarted.
fn shared_network_advice(c: &ContainerView) -> Option<String> {
    let other = c.network_mode.strip_prefix("container:")?;
    let short: String = other.chars().take(12).collect();
    Some(format!(
        "{} shares the network of container {short} (network_mode: service:…). When that container restarts or is re-created, {} keeps a dead network namespace: re-create it (`docker compose up -d --force-recreate <service>`); a restart is not enough.",
        c.name, c.name
    ))
}

/// The image it was created from is gone from the engine: what works now
/// (start, restart) and what will not (re-creating it).
fn missing_image_advice(c: &ContainerView) -> Option<String> {
    if !c.image_missing {
        return None;
    }
    let id: String = c
        .image_id
        .trim_start_matches("sha256:")
        .chars()
        .take(12)
        .collect();
    Some(format!(
        "The image {} (sha256:{id}) that {} was created from is no longer on this engine: it was removed or pruned. A start or restart still works, since the container keeps its layers, but re-creating it (`docker compose up` after any change, `docker run`) fails until the image is back: pull it (`docker pull {}`) or rebuild it first.",
        c.image, c.name, c.image
    ))
}

/// Whether the evidence says a start or restart of the target can help,
/// and which evidence (`Ok`), or why nothing does (`Err`). The class alone
/// never does: a container that dies seconds after every start dies the
/// same way after one more, whatever its words. A start is worth proposing
/// when it was stopped rather than failing, when it ran well before it
/// failed (a while, or as far as serving, or through its healthcheck),
/// when a start helped the same failure before, or when the dependency it
/// failed on was down and is started first, or is up now.
pub fn write_supported(
    finding: &Finding,
    c: &ContainerView,
    ctx: &Context,
) -> Result<String, String> {
    let primary = finding.diagnosis.causes.first();
    let class = primary.map(|p| p.class).unwrap_or(FaultClass::Unknown);
    let confidence = primary.map_or(0.0, |p| p.confidence);
    let shape = &finding.shape;
    let dependency_down = ctx
        .dependency
        .as_ref()
        .and_then(|d| d.container.as_ref())
        .is_some_and(|d| !d.running);
    if finding.finished_job {
        return Err("it is a one-off job that ran to completion".into());
    }
    if let Some(n) = shape.same_at_every_start.filter(|_| !dependency_down) {
        return Err(format!(
            "it failed the same way in each of its last {n} runs (\"{}\"): another start would too",
            finding.salient.as_deref().unwrap_or("")
        ));
    }
    match class {
        FaultClass::Stopped => Ok("it was stopped, not failing".into()),
        // Unhealthy, and its logs name what a restart cannot change (its
        // data corrupt, a setting, a full disk): it would come back the
        // same, whatever it did before.
        FaultClass::Unhealthy => match finding
            .diagnosis
            .causes
            .iter()
            .skip(1)
            .find(|k| crate::rules::a_restart_cannot_fix(k.class))
        {
            Some(k) => Err(format!(
                "its logs name a cause a restart cannot change ({}: {})",
                k.class, k.reason
            )),
            None => match shape.ran_well() {
                Some(why) => Ok(why),
                None => Err("it has failed its healthcheck since it started, so a restart would start it the same way".into()),
            },
        },
        FaultClass::DependencyUnavailable => dependency_support(finding, c, ctx),
        FaultClass::Unknown => Err("drydock cannot tell why it failed, and a write needs a cause".into()),
        _ if confidence < crate::rules::WRITE_CONFIDENCE => Err(format!(
            "the evidence for the cause is thin (confidence {:.0} %, below the {:.0} % a write needs)",
            confidence * 100.0,
            crate::rules::WRITE_CONFIDENCE * 100.0
        )),
        _ if c.running => Ok("it is running".into()),
        _ => {
            if let Some(why) = &finding.fixed_before {
                return Ok(format!("a start helped the same failure before: {why}"));
            }
            match shape.ran_well() {
                Some(why) => Ok(why),
                None => Err(format!(
                    "nothing shows that a start would go differently ({})",
                    shape.said()
                )),
            }
        }
    }
}

/// A failed dependency is evidence for a start when it is the dependency
/// that is down (started first) or back, and the two can reach each other.
fn dependency_support(
    finding: &Finding,
    c: &ContainerView,
    ctx: &Context,
) -> Result<String, String> {
    let Some(dep) = &ctx.dependency else {
        return match finding
            .fixed_before
            .as_ref()
            .or(finding.shape.ran_well().as_ref())
        {
            Some(why) => Ok(why.clone()),
            None => Err("the service it could not reach was not found among the containers".into()),
        };
    };
    let Some(dc) = &dep.container else {
        return match &finding.fixed_before {
            Some(why) => Ok(format!("a start helped the same failure before: {why}")),
            None => Err(format!("no container answers to `{}`", dep.named)),
        };
    };
    if !dc.running {
        return Ok(format!(
            "its dependency {} ({}) is not running: it is started first",
            dc.name, dep.named
        ));
    }
    if share_no_network(c, dc) {
        return Err(format!(
            "{} runs, but on {} while {} is on {}: they share no network, so `{}` does not reach it",
            dc.name,
            dc.networks.join(", "),
            c.name,
            c.networks.join(", "),
            dep.named
        ));
    }
    let since = crate::change::unix_of(&dc.started_at);
    let died = crate::change::unix_of(&c.finished_at);
    match (since, died) {
        (Some(up), Some(down)) if up > down => Ok(format!(
            "{} was started again after {} failed on it",
            dc.name, c.name
        )),
        _ => Ok(format!("its dependency {} is up now", dc.name)),
    }
}

/// Whether `a` and `b` are each on networks of their own and share none,
/// so that neither resolves the other's name. A container on the host's
/// network, or sharing another's, reaches by other means.
pub fn share_no_network(a: &ContainerView, b: &ContainerView) -> bool {
    let own = |v: &ContainerView| {
        !(v.networks.is_empty()
            || v.network_mode == "host"
            || v.network_mode.starts_with("container:"))
    };
    own(a) && own(b) && !b.networks.iter().any(|n| a.networks.contains(n))
}

/// Advice when the evidence does not support a write on the target.
fn no_write_advice(target: &Target, why: &str) -> String {
    format!(
        "No start or restart of {} is proposed: {why}. Fix the cause the evidence names, then start it; or, if you know a start will help, `docker start {}`.",
        target.name(),
        target.name()
    )
}

/// The write drydock would like to make on the target itself.
fn target_step(
    primary: FaultClass,
    c: &ContainerView,
    target: &Target,
) -> Option<(ContainerStep, String, &'static str)> {
    match primary {
        FaultClass::Unhealthy => Some((
            ContainerStep::Restart,
            format!(
                "{} is running but unhealthy; a restart clears a wedged process",
                target.name()
            ),
            "the container restarts and its healthcheck passes",
        )),
        FaultClass::Stopped
        | FaultClass::Crash
        | FaultClass::DependencyUnavailable
        | FaultClass::Unknown
            if !c.running =>
        {
            Some((
                ContainerStep::Start,
                format!(
                    "{} is not running (exit code {})",
                    target.name(),
                    c.exit_code
                ),
                "the container starts and stays running",
            ))
        }
        FaultClass::DependencyUnavailable if c.running => Some((
            ContainerStep::Restart,
            format!(
                "{} lost its dependency and may not reconnect by itself",
                target.name()
            ),
            "the container reconnects to its dependency",
        )),
        _ => None,
    }
}

/// Build the plan for one container's finding.
pub fn plan(
    finding: &Finding,
    container: &ContainerView,
    target: &Target,
    policy: &PolicyView,
    done: &[ExecutionRecord],
    ctx: &Context,
) -> Plan {
    let mut plan = steps_and_advice(finding, container, target, policy, done, ctx);
    if let Some(notes) = &ctx.notes {
        plan.advice
            .push(format!("Operator notes for {}: {notes}", target.name()));
    }
    plan
}

fn steps_and_advice(
    finding: &Finding,
    container: &ContainerView,
    target: &Target,
    policy: &PolicyView,
    done: &[ExecutionRecord],
    ctx: &Context,
) -> Plan {
    let primary = finding
        .diagnosis
        .causes
        .first()
        .map(|c| c.class)
        .unwrap_or(FaultClass::Unknown);
    let mut steps = Vec::new();
    let mut advice = advice_for(primary, finding, container, ctx);
    advice.extend(shared_network_advice(container));
    // A failure that began with a change is undone where it can be: the
    // previous image, with a person's signature over both images; the rest
    // is advice. A restart of the changed container would change nothing.
    if let Some(change) = &finding.change {
        let rolled_back = done
            .iter()
            .any(|d| d.action == WriteAction::Rollback && d.container_id == target.id());
        match rollback_step(change, target, policy) {
            Some(step) if !rolled_back => {
                steps.push(step);
                return Plan {
                    digest: digest(&steps),
                    steps,
                    advice,
                };
            }
            _ => {
                advice.extend(change_advice(change, policy));
                // The change explains the failure: a start or restart runs
                // the same definition and fails the same way. Only a
                // dependency that is down is still worth a step.
                if primary != FaultClass::DependencyUnavailable {
                    advice.extend(missing_image_advice(container));
                    return Plan {
                        digest: digest(&steps),
                        steps,
                        advice,
                    };
                }
            }
        }
    }
    advice.extend(missing_image_advice(container));
    // A job that ran to completion is not broken: starting it would run
    // the job again, which is a person's decision, not a repair.
    if finding.finished_job {
        advice.push(format!(
            "Nothing to repair: {} is a one-off job that finished (exit 0). Run it again only if you mean to (`docker start {}`, or `docker compose run` for a compose job).",
            target.name(), target.name()
        ));
        return Plan {
            digest: digest(&steps),
            steps,
            advice,
        };
    }
    let already = |action: WriteAction, id: &str| {
        done.iter()
            .any(|d| d.action == action && d.container_id == id)
    };
    let propose = |steps: &mut Vec<PlanStep>,
                   advice: &mut Vec<String>,
                   write: ContainerStep,
                   t: &Target,
                   reason: String,
                   expected: &str| {
        let action = write.action();
        if already(action, t.id()) {
            advice.push(format!(
                "A {action} of {} was already tried in this request and did not fix it; not repeating it. Look at the evidence above for the underlying cause.",
                t.name()
            ));
            false
        } else if !policy.actions.enabled(action) {
            advice.push(format!("The executor's policy does not allow {action}; {action} {} by hand if appropriate.", t.name()));
            false
        } else if let Some(mut s) = step(write, t, policy, reason, expected) {
            if action == WriteAction::Restart && t.id() == container.id {
                s.expected_effect
                    .push_str(&stop_note(container.stop_timeout_secs));
            }
            steps.push(s);
            true
        } else {
            false
        }
    };
    // A step on the target where the evidence supports it, else advice
    // that says why not.
    let step_if_supported = |steps: &mut Vec<PlanStep>,
                             advice: &mut Vec<String>,
                             (write, reason, expected): (ContainerStep, String, &'static str),
                             supported: Result<String, String>| {
        match supported {
            Ok(why) => {
                propose(
                    steps,
                    advice,
                    write,
                    target,
                    format!("{reason}; {why}"),
                    expected,
                );
            }
            Err(why) => advice.push(no_write_advice(target, &why)),
        }
    };

    // A dependency that is down is fixed first; then the dependent service.
    let dependency_involved = primary == FaultClass::DependencyUnavailable
        || finding
            .diagnosis
            .causes
            .iter()
            .any(|c| c.class == FaultClass::DependencyUnavailable);
    let mut dependency_started = false;
    if let (true, Some(dep)) = (dependency_involved, &ctx.dependency) {
        match (&dep.container, dep.target()) {
            (None, _) | (_, None) => {
                advice.push(format!(
                    "{} needs `{}` ({} names it), but no container by that name, compose service or address exists. Start it, or fix the address {} is configured with.",
                    target.name(), dep.named, dep.source, target.name()
                ));
                return Plan {
                    digest: digest(&steps),
                    steps,
                    advice,
                };
            }
            (Some(dc), Some(dt)) if !dc.running => {
                dependency_started = true;
                let started = propose(
                    &mut steps,
                    &mut advice,
                    ContainerStep::Start,
                    &dt,
                    format!(
                        "{} needs {} ({}), which is not running (exit code {})",
                        target.name(),
                        dt.name(),
                        dep.named,
                        dc.exit_code
                    ),
                    "the dependency starts and becomes healthy",
                );
                if !started {
                    return Plan {
                        digest: digest(&steps),
                        steps,
                        advice,
                    };
                }
            }
            (Some(dc), Some(dt)) if !dep.ready() => {
                advice.push(format!(
                    "{}'s dependency {} is running but {}; diagnose it first: `drydock ask --container {} \"why is it {}\"`.",
                    target.name(), dt.name(), dc.health_status, dt.name(), dc.health_status
                ));
                return Plan {
                    digest: digest(&steps),
                    steps,
                    advice,
                };
            }
            _ => {}
        }
        if primary == FaultClass::CrashLoop {
            advice.push(format!(
                "{} restarts by its restart policy and will reconnect once its dependency is up.",
                target.name()
            ));
        } else if dependency_started && container.running {
            // The least disruptive repair first: a running service usually
            // reconnects by itself. Verification waits for it, and only if
            // it does not recover does the next round restart it.
            advice.push(format!(
                "{} is still running: once its dependency is up it should recover by itself (its healthcheck is watched), and it is restarted in a next round only if it does not.",
                target.name()
            ));
        } else if let Some((write, reason, expected)) = target_step(primary, container, target) {
            let supported = if dependency_started {
                Ok("its dependency is started first".to_string())
            } else {
                write_supported(finding, container, ctx)
            };
            step_if_supported(
                &mut steps,
                &mut advice,
                (write, reason, expected),
                supported,
            );
        }
    } else if !restart_cannot_fix(primary) {
        if let Some(step) = target_step(primary, container, target) {
            let supported = write_supported(finding, container, ctx);
            step_if_supported(&mut steps, &mut advice, step, supported);
        }
    }
    Plan {
        digest: digest(&steps),
        steps,
        advice,
    }
}

pub mod build;
pub mod host;
pub mod swarm;
#[cfg(test)]
mod tests;
pub mod update;
