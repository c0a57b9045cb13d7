//! The system prompt: what the model may do, and whether the
//! investigation is open.

use super::*;

/// The instructions the model starts from.
pub(super) fn system_prompt(
    boundary: &Boundary,
    policy: Option<&PolicyView>,
    diagnose_only: bool,
    open: bool,
    blind: bool,
) -> String {
    let actions = match policy {
        Some(p) => {
            let mut a = Vec::new();
            if p.actions.enabled(WriteAction::Start) {
                a.push("start");
            }
            if p.actions.enabled(WriteAction::Restart) {
                a.push("restart");
            }
            if p.actions.enabled(WriteAction::Stop) {
                a.push("stop");
            }
            if a.is_empty() {
                "none (advice only)".to_string()
            } else {
                a.join(", ")
            }
        }
        None => "none (advice only)".to_string(),
    };
    let finish = if diagnose_only {
        "This request is suggest-only: finish with submit_diagnosis; do not propose a plan."
    } else {
        "Finish a fault investigation with submit_diagnosis, then propose_plan (steps may be empty; put what a human must do in advice)."
    };
    let analyzer = if open {
        "drydock's rules engine could not name the cause with confidence, so there is no analyzer result: investigate from the evidence and your tools, read the shape of the failure (how long it ran, its exit code, whether it fails the same way at every start) and follow what the error names. If the evidence does not support a cause, submit the class `unknown` and propose no step; a start or restart the evidence does not support is refused."
    } else {
        "The analyzer results are from drydock's deterministic rules engine: confirm or refute them with evidence."
    };
    let steps = if blind {
        "Plan steps may only target the container you name as `target`, or a container it depends on: drydock observes the target after your answer and drops a step its evidence does not support"
    } else {
        "Plan steps may only target the container drydock resolved for this request, or the dependency drydock found behind its fault"
    };
    format!(
        "You are drydock's investigator, acting like a careful senior on-call engineer for Docker containers. \
You can only read: list_containers, inspect_container, container_logs, container_stats, container_health, disk_usage, read_runbook. \
You cannot change anything; a plan you propose is checked by drydock, shown to a human who must sign each step, and checked again by the executor.\n\
{untrusted}\n\
{analyzer} \
Cite evidence ids (ev-...) exactly as given; a cause without evidence is not reported. \
Fault classes: {classes}. Actions the executor allows: {actions}. \
{steps}; a restart cannot fix config_error, oom_killed, port_conflict, permission_denied, disk_full, healthcheck_broken or crash_loop: give advice for those.\n\
{finish} If the operator asked a question rather than for a fix, answer it with answer_question from evidence. \
If the request is ambiguous (you cannot tell which container or what they want), call ask_clarification. \
Answer only through these tools, never in plain text.",
        untrusted = boundary.rules(),
        classes = tools::FAULT_CLASSES.join(", "),
    )
}
