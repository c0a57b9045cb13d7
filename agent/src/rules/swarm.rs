//! The rules for a Swarm service: its tasks say what went wrong (no node
//! would take them, a node could not find the image, their health check
//! failed, they exited), the cluster's nodes say why a task waits, and
//! the logs of all its tasks go through the same log table as a
//! container's, so a config error in a service reads like one in a
//! container. An update Swarm paused (or rolled back) and a spec whose
//! previous version ran are what a rollback can undo.

use super::{cause, match_logs, sentence, Finding};
use crate::model::{Diagnosis, FaultClass, LogsView, NodeView, ServiceView, TaskView};
use crate::model::{ServiceMode, TaskState};

/// What diagnosis of one service rests on, with the ids of its evidence.
pub struct ServiceObservation<'a> {
    pub service: &'a ServiceView,
    pub service_ev: &'a str,
    /// Newest first.
    pub tasks: &'a [TaskView],
    pub tasks_ev: &'a str,
    pub nodes: &'a [NodeView],
    pub nodes_ev: &'a str,
    pub logs: &'a LogsView,
    pub logs_ev: &'a str,
}

/// A spec change the failure began with, which a rollback can undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecChange {
    /// The image the current spec runs, and the previous spec's.
    pub image: String,
    pub previous_image: String,
    /// When the update started (RFC 3339), as the engine said.
    pub started_at: String,
    /// Tasks of the previous spec ran (and were replaced, not failed).
    pub previous_ran: bool,
}

/// A service's finding: the cause, and the change it began with, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceFinding {
    pub finding: Finding,
    pub change: Option<SpecChange>,
}

/// The engine's words for a task no node would take.
const NO_NODE: &str = "no suitable node";

fn says(t: &TaskView, what: &str) -> bool {
    t.reason().to_ascii_lowercase().contains(what)
}

/// A task whose image no node can find or pull.
fn image_missing(t: &TaskView) -> bool {
    says(t, "no such image")
        || says(t, "pull access denied")
        || says(t, "manifest unknown")
        || (says(t, "image") && says(t, "not found"))
}

/// The update the failure began with, when the current spec's tasks fail
/// and the previous spec's ran and were replaced (not failed).
fn spec_change(s: &ServiceView, failed: &[&TaskView]) -> Option<SpecChange> {
    if s.previous_image.is_empty() || s.update_started_at.is_empty() {
        return None;
    }
    let current = &s.summary.image;
    let after_update = failed
        .iter()
        .any(|t| t.image == *current && t.timestamp.as_str() >= s.update_started_at.as_str());
    if !after_update {
        return None;
    }
    Some(SpecChange {
        image: current.clone(),
        previous_image: s.previous_image.clone(),
        started_at: s.update_started_at.clone(),
        previous_ran: false,
    })
}

/// The nodes that could take no task now, in words.
fn unavailable_nodes(nodes: &[NodeView]) -> Vec<String> {
    nodes
        .iter()
        .filter(|n| !n.schedulable())
        .map(|n| format!("{} is {} ({})", n.hostname, n.state, n.availability))
        .collect()
}

fn gib(bytes: i64) -> String {
    crate::text::human_bytes(bytes.max(0) as u64)
}

/// Diagnose one Swarm service.
pub fn diagnose_service(obs: &ServiceObservation<'_>) -> ServiceFinding {
    let s = obs.service;
    let sum = &s.summary;
    let name = &sum.name;
    let (sev, tev, nev, lev) = (obs.service_ev, obs.tasks_ev, obs.nodes_ev, obs.logs_ev);
    let failed: Vec<&TaskView> = obs.tasks.iter().filter(|t| t.failed()).collect();
    let pending: Vec<&TaskView> = obs
        .tasks
        .iter()
        .filter(|t| {
            t.desired_state == TaskState::Running
                && matches!(t.state, TaskState::Pending | TaskState::New)
        })
        .collect();
    let lines: Vec<String> = obs.logs.lines.iter().map(|l| l.text.clone()).collect();
    let log_match = match_logs(&lines);
    let counts = format!("{}/{} tasks run", sum.running, sum.desired);
    let mut change = spec_change(s, &failed);
    if let Some(c) = change.as_mut() {
        c.previous_ran = obs.tasks.iter().any(|t| {
            t.image == c.previous_image
                && !t.failed()
                && matches!(
                    t.state,
                    TaskState::Shutdown | TaskState::Running | TaskState::Complete
                )
        });
    }
    let (mut matched_line, mut detail) = (None, None);
    let primary = if sum.desired == 0 && sum.mode == ServiceMode::Replicated {
        cause(
            FaultClass::Stopped,
            format!("{name} is scaled to zero: it wants no task, so none runs"),
            0.8,
            &[sev],
        )
    } else if sum.desired == 0 && sum.mode == ServiceMode::Global {
        // A global service wants a task on every node that may take one:
        // none wanted means no node may.
        let down = unavailable_nodes(obs.nodes);
        let why = if down.is_empty() {
            format!(
                "no node meets its constraints ({})",
                if s.constraints.is_empty() {
                    "none set".to_string()
                } else {
                    s.constraints.join(", ")
                }
            )
        } else {
            down.join(", ")
        };
        cause(
            FaultClass::Unschedulable,
            format!("{name} is global but wants no task: {why}"),
            0.7,
            &[sev, nev],
        )
    } else if let Some(t) = pending.iter().find(|t| says(t, NO_NODE)) {
        let why = t.reason().to_string();
        detail = Some(why.clone());
        let mut reason = format!("{name}'s tasks wait for a node: the engine says \"{why}\"");
        if why.contains("insufficient resources")
            && (s.reserve_memory_bytes > 0 || s.reserve_nano_cpus > 0)
        {
            reason.push_str(&format!(
                "; each task reserves {} of memory and {:.2} CPUs",
                gib(s.reserve_memory_bytes),
                s.reserve_nano_cpus as f64 / 1e9
            ));
        }
        if why.contains("constraint") && !s.constraints.is_empty() {
            reason.push_str(&format!(
                "; its constraints are {}",
                s.constraints.join(", ")
            ));
        }
        let down = unavailable_nodes(obs.nodes);
        if !down.is_empty() {
            reason.push_str(&format!("; {}", down.join(", ")));
        }
        cause(FaultClass::Unschedulable, reason, 0.9, &[tev, sev, nev])
    } else if let Some(t) = failed.iter().find(|t| image_missing(t)) {
        detail = Some(t.image.clone());
        cause(
            FaultClass::ImageUnavailable,
            format!(
                "{name}'s tasks cannot start: the node cannot get image {} (\"{}\")",
                t.image,
                t.reason()
            ),
            0.9,
            &[tev, sev],
        )
    } else if let Some(t) = failed.iter().find(|t| says(t, "unhealthy")) {
        let n = failed.iter().filter(|t| says(t, "unhealthy")).count();
        let mut c = cause(
            FaultClass::Unhealthy,
            format!(
                "{name}'s tasks fail their health check: Swarm ended {n} of them as unhealthy (\"{}\"); {counts}",
                t.reason()
            ),
            0.85,
            &[tev, sev],
        );
        if let Some(m) = &log_match {
            c.reason
                .push_str(&format!("; its logs show {}: \"{}\"", m.what, m.line));
            c.evidence_ids.push(lev.to_string());
            matched_line = Some(m.line.clone());
            detail = m.detail.clone();
        }
        c
    } else if !failed.is_empty() {
        let t = failed[0];
        let exit = t
            .exit_code
            .map(|c| format!("exit code {c}"))
            .unwrap_or_else(|| t.reason().to_string());
        match &log_match {
            Some(m) => {
                matched_line = Some(m.line.clone());
                detail = m.detail.clone();
                cause(
                    m.class,
                    format!(
                        "{name}'s tasks exit ({exit}, {} failed so far) and their logs show {}: \"{}\"",
                        failed.len(),
                        m.what,
                        m.line
                    ),
                    0.85,
                    &[tev, lev, sev],
                )
            }
            None => cause(
                if failed.len() >= 3 {
                    FaultClass::CrashLoop
                } else {
                    FaultClass::Crash
                },
                format!(
                    "{name}'s tasks exit ({exit}, {} failed so far) and their logs name no known cause",
                    failed.len()
                ),
                0.6,
                &[tev, lev, sev],
            ),
        }
    } else if sum.running < sum.desired {
        let down = unavailable_nodes(obs.nodes);
        if down.is_empty() {
            cause(
                FaultClass::Unknown,
                format!("{name}: only {counts}, and no task says why"),
                0.3,
                &[tev, sev],
            )
        } else {
            cause(
                FaultClass::Unschedulable,
                format!("{name}: only {counts}; {}", down.join(", ")),
                0.7,
                &[tev, sev, nev],
            )
        }
    } else {
        change = None;
        cause(
            FaultClass::Healthy,
            format!("{name} runs all its tasks ({counts}) and none failed"),
            0.8,
            &[sev, tev],
        )
    };
    let mut causes = vec![primary];
    // An update that Swarm paused or rolled back is part of the story.
    if matches!(
        sum.update_state.as_str(),
        "paused" | "rollback_paused" | "rollback_completed"
    ) && !s.update_message.is_empty()
    {
        causes.push(cause(
            causes[0].class,
            format!(
                "Swarm's update of {name} is {}: \"{}\"",
                sum.update_state, s.update_message
            ),
            0.6,
            &[sev],
        ));
    }
    let blamed = change.filter(|c| c.previous_ran && causes[0].class != FaultClass::Healthy);
    if let Some(c) = &blamed {
        let first = &mut causes[0];
        let moved = if c.image == c.previous_image {
            format!("its spec was updated (image {} unchanged)", c.image)
        } else {
            format!(
                "it was updated from image {} to {}",
                c.previous_image, c.image
            )
        };
        first.reason = format!(
            "{}; the failure began after {moved} at {}; the previous spec's tasks ran",
            first.reason.trim_end_matches('.'),
            c.started_at
        );
    }
    let diagnosis = Diagnosis {
        summary: sentence(&causes[0].reason),
        confidence: causes[0].confidence,
        causes,
        engine: "rules".into(),
        ..Default::default()
    };
    ServiceFinding {
        finding: Finding {
            shape: Default::default(),
            salient: None,
            fixed_before: None,
            diagnosis,
            matched_line,
            detail,
            change: None,
            finished_job: false,
        },
        change: blamed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceSummaryView;

    #[test]
    fn a_global_service_no_node_may_take_is_unschedulable_not_healthy() {
        let service = ServiceView {
            summary: ServiceSummaryView {
                name: "ops_agent".into(),
                mode: "global".into(),
                ..Default::default()
            },
            constraints: vec!["node.labels.gpu==true".into()],
            ..Default::default()
        };
        let node = |availability: &str| NodeView {
            hostname: "n1".into(),
            state: "ready".into(),
            availability: availability.into(),
            ..Default::default()
        };
        let logs = LogsView::default();
        for (nodes, says) in [
            (vec![node("active")], "node.labels.gpu==true"),
            (vec![node("drain")], "n1 is ready (drain)"),
        ] {
            let found = diagnose_service(&ServiceObservation {
                service: &service,
                service_ev: "ev-s",
                tasks: &[],
                tasks_ev: "ev-t",
                nodes: &nodes,
                nodes_ev: "ev-n",
                logs: &logs,
                logs_ev: "ev-l",
            });
            let cause = &found.finding.diagnosis.causes[0];
            assert_eq!(cause.class, FaultClass::Unschedulable, "{cause:?}");
            assert!(cause.reason.contains(says), "{}", cause.reason);
        }
    }
}
