//! How a request reads in the terminal: one line (or a few) per event, the
//! outcome, and the approvals a person still has to decide. `ask`, `follow`
//! and `show` all print through here, so a request reads the same live and
//! after the fact.
//!
//! `event` matches every kind of event by name, without a wildcard: a kind
//! added to the vocabulary does not compile here until it is given its line.

use drydock_vocab::{
    ContainerStep, Event, EventPayload, Request, ServiceStep, Status, StepWrite, Subject, Target,
};

use crate::term::{paint, Style};
use crate::text::{safe, short};

/// The lines one event prints (none for some kinds: `created` is the
/// request line itself, `final` is the outcome line).
pub fn event_lines(event: &Event) -> Vec<String> {
    let mut out = Vec::new();
    match &event.payload {
        EventPayload::Created(_) | EventPayload::Final(_) => {}
        EventPayload::Status(s) => out.push(format!(
            "→ {}: {}",
            paint(s.status.as_str(), Style::Bold),
            safe(&s.message)
        )),
        EventPayload::Followup(f) => out.push(format!(
            "  follow-up (round {}{}): {}",
            f.round,
            if f.reopened { ", reopened" } else { "" },
            safe(&f.message)
        )),
        EventPayload::Evidence(e) => out.push(format!(
            "  evidence {} [{} via {}]: {}",
            safe(&e.id),
            safe(&e.kind),
            safe(&e.source),
            safe(&e.summary)
        )),
        EventPayload::Target(t) => out.push(format!(
            "  target: {} ({}) — {}",
            target_name(&t.target),
            short(t.target.id()),
            safe(&t.why)
        )),
        EventPayload::Candidates(c) => {
            for c in &c.candidates {
                let on = c
                    .host
                    .as_ref()
                    .map(|h| format!(" on host {}", safe(h)))
                    .unwrap_or_default();
                out.push(format!(
                    "  candidate: {}{on} [{}] image {} — {}",
                    safe(&c.container_name),
                    safe(c.state.as_str()),
                    safe(&c.image),
                    safe(&c.why)
                ));
            }
        }
        EventPayload::Diagnosis(d) => {
            let d = &d.diagnosis;
            out.push(format!(
                "Diagnosis ({:.0}% confidence): {}",
                d.confidence * 100.0,
                safe(&d.summary)
            ));
            for c in &d.causes {
                out.push(format!(
                    "  - [{}] {} ({:.0}%; evidence {})",
                    c.class,
                    safe(&c.reason),
                    c.confidence * 100.0,
                    safe(&c.evidence_ids.join(", "))
                ));
            }
        }
        EventPayload::Plan(p) => {
            let p = &p.plan;
            out.push(if p.steps.is_empty() {
                "Plan: no change proposed".into()
            } else {
                "Plan:".into()
            });
            for (i, st) in p.steps.iter().enumerate() {
                let to = match st.write() {
                    StepWrite::Container(ContainerStep::Rollback { to_image, .. }) => {
                        format!(" to image {}", safe(to_image.as_str()))
                    }
                    StepWrite::Service(ServiceStep::Rollback { to_image, .. }) => {
                        format!(" to image {}", safe(to_image))
                    }
                    StepWrite::Container(_) | StepWrite::Service(_) => String::new(),
                };
                out.push(format!(
                    "  {}. {} {}{to} — {} (risk {}; expected: {})",
                    i + 1,
                    st.action(),
                    safe(st.target().name()),
                    safe(&st.reason),
                    st.risk,
                    safe(&st.expected_effect)
                ));
            }
            for a in &p.advice {
                out.push(format!("  advice: {}", safe(a)));
            }
        }
        // The follow loop asks about it (from its decoded claims).
        EventPayload::ApprovalRequested(_) => {}
        EventPayload::ApprovalDecided(d) => out.push(format!(
            "  approval {}: {}",
            safe(&d.approval_id),
            d.decision.as_str()
        )),
        EventPayload::ApprovalSigned(d) => out.push(format!(
            "  approval {}: signed by {}; {} more approver{} must sign",
            safe(&d.approval_id),
            safe(&d.key_id),
            d.missing,
            if d.missing == 1 { "" } else { "s" }
        )),
        EventPayload::ApprovalExpired(_) => out.push("  approval expired".into()),
        EventPayload::Superseded(s) => out.push(format!(
            "  withdrawn: {} repaired the same target first",
            safe(&s.by)
        )),
        EventPayload::ApprovedByGrant(g) => {
            for step in &g.steps {
                out.push(format!(
                    "  approved by grant {} for approval {} (fault class {})",
                    safe(&step.grant_id),
                    safe(&step.approval_id),
                    safe(&g.class)
                ));
            }
        }
        EventPayload::Execution(e) => {
            out.push(format!("  executed: {}", safe(&e.execution.message)))
        }
        EventPayload::Verification(v) => {
            for c in &v.verification.checks {
                out.push(format!(
                    "  verify {}: {} ({})",
                    safe(&c.level),
                    if c.ok {
                        paint("ok", Style::Good)
                    } else {
                        paint("FAILED", Style::Bad)
                    },
                    safe(&c.detail)
                ));
            }
        }
        EventPayload::Iteration(i) => {
            if let Some(m) = &i.message {
                out.push(format!("  {}", safe(m)));
            }
        }
        EventPayload::Interrupted(s) => out.push(format!("  {}", safe(&s.message))),
        EventPayload::DependencyReady(d) => out.push(format!("  {}", safe(&d.message))),
        EventPayload::Error(m)
        | EventPayload::LlmRetry(m)
        | EventPayload::LlmFallback(m)
        | EventPayload::ExecutorWaiting(m) => out.push(format!("  {}", safe(&m.message))),
        // The answer is the request's outcome, printed last.
        EventPayload::Answer(_) => {}
        EventPayload::LlmStarted(m) => {
            out.push(format!("  the model {} investigates", safe(&m.model)))
        }
        EventPayload::LlmTool(t) => out.push(format!("  the model reads: {}", safe(&t.tool))),
        EventPayload::LlmUsage(u) => out.push(format!(
            "  model usage: {} prompt and {} completion tokens in {} calls",
            u.prompt_tokens, u.completion_tokens, u.model_calls
        )),
    }
    out
}

/// Print one event for a person.
pub fn event(event: &Event) {
    for line in event_lines(event) {
        println!("{line}");
    }
}

/// The last line of a followed or shown request.
pub fn outcome(status: Status, outcome: &str) {
    let mark = if status == Status::Completed {
        paint("✔", Style::Good)
    } else {
        paint("✘", Style::Bad)
    };
    println!(
        "{mark} {}: {}",
        paint(status.as_str(), Style::Bold),
        safe(outcome)
    );
}

/// How to decide the request's pending approvals.
pub fn pending_approvals(request: &Request) {
    println!("… waiting for approval:");
    for a in request.pending_approvals() {
        let id = safe(&a.id);
        println!("  approve it with: drydock approve {id}   (or reject: drydock reject {id})");
    }
}

/// One request as `drydock requests` lists it.
pub fn request_line(r: &Request) -> String {
    let target = r.target.as_ref().map(target_name);
    format!(
        "{}  {:<20} {:<6} {}  {:<24} {}",
        safe(&r.id),
        r.status.as_str(),
        r.source.as_str(),
        safe(&r.created_at),
        target.as_deref().unwrap_or("-"),
        safe(&r.message)
    )
}

/// A target in words: a container's name, or `Swarm service NAME (stack
/// STACK)`, then `on host HOST` when the agent serves several hosts.
pub fn target_name(t: &Target) -> String {
    let name = target_alone(t);
    match &t.host {
        Some(h) => format!("{name} on host {}", safe(h)),
        None => name,
    }
}

fn target_alone(t: &Target) -> String {
    match &t.subject {
        Subject::Container(c) => safe(&c.name),
        Subject::Service(s) => match &s.stack {
            Some(stack) => format!("Swarm service {} (stack {})", safe(&s.name), safe(stack)),
            None => format!("Swarm service {}", safe(&s.name)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use drydock_vocab::EventKind;
    use serde_json::json;

    /// One event of each kind, from its wire form.
    fn one_of_each() -> Vec<Event> {
        let record = json!({"id": "apr-1", "request_id": "req-1", "step": 0, "status": "pending",
            "claims": "e30=", "expires_at": 1});
        let target =
            json!({"kind": "container", "container_id": "c".repeat(64), "container_name": "web"});
        let data = |kind: EventKind| match kind {
            EventKind::Created => json!({"message": "m", "options": {}, "source": "ask"}),
            EventKind::Status | EventKind::Interrupted => {
                json!({"status": "diagnosing", "message": "evidence gathered"})
            }
            EventKind::Target => json!({"target": target, "why": "named"}),
            EventKind::Candidates => {
                json!({"candidates": [{"container_id": "c", "container_name": "web", "image": "i", "state": "running", "score": 1, "why": "w"}]})
            }
            EventKind::Evidence => {
                json!({"id": "ev-1", "type": "inspect", "source": "InspectContainer", "summary": "state=running"})
            }
            EventKind::Diagnosis => {
                json!({"diagnosis": {"summary": "s", "confidence": 0.9, "engine": "rules",
                "causes": [{"class": "unhealthy", "reason": "r", "confidence": 0.9, "evidence_ids": ["ev-1"]}]}})
            }
            EventKind::Plan => {
                json!({"plan": {"digest": "d", "advice": ["a"], "steps": [{"action": "restart", "target": target,
                "reason": "r", "risk": "T1", "expected_effect": "e", "rollback": "b"}]}})
            }
            EventKind::ApprovalRequested => json!({"approval": record, "step": null}),
            EventKind::ApprovalDecided => {
                json!({"approval_id": "apr-1", "decision": "rejected", "key_id": null})
            }
            EventKind::ApprovalSigned => {
                json!({"approval_id": "apr-1", "key_id": "alice", "missing": 1})
            }
            EventKind::ApprovalExpired => json!({"approvals": ["apr-1"]}),
            EventKind::Superseded => json!({"by": "req-2", "approvals": ["apr-1"]}),
            EventKind::ApprovedByGrant => {
                json!({"steps": [{"approval_id": "apr-1", "grant_id": "grt-1"}], "class": "unhealthy"})
            }
            EventKind::Execution => {
                json!({"execution": {"step": 0, "action": "restart", "container_id": "c", "approval_id": "apr-1",
                "ok": true, "message": "restart web: done", "at": "t"}})
            }
            EventKind::DependencyReady => {
                json!({"container": "db", "ok": true, "message": "running ok"})
            }
            EventKind::Verification => {
                json!({"verification": {"ok": true, "evidence_ids": [], "checks": [{"level": "running", "ok": true, "detail": "d"}]}})
            }
            EventKind::Iteration => json!({"iterations": 1, "message": "again"}),
            EventKind::Error
            | EventKind::LlmRetry
            | EventKind::LlmFallback
            | EventKind::ExecutorWaiting => {
                json!({"message": "said"})
            }
            EventKind::Answer => json!({"answer": "a", "evidence_ids": []}),
            EventKind::LlmStarted => json!({"model": "m", "analyzer": null}),
            EventKind::LlmTool => json!({"tool": "inspect_container", "arguments": {}}),
            EventKind::LlmUsage => {
                json!({"prompt_tokens": 1, "completion_tokens": 2, "model_calls": 3})
            }
            EventKind::Final => json!({"status": "completed", "outcome": "o"}),
            EventKind::Followup => json!({"message": "it is the db", "round": 2, "reopened": true}),
        };
        EventKind::ALL
            .iter()
            .enumerate()
            .map(|(i, k)| {
                serde_json::from_value(json!({"seq": i, "request_id": "req-1", "ts": "t",
                    "kind": k.as_str(), "data": data(*k)}))
                .unwrap_or_else(|e| panic!("{k}: {e}"))
            })
            .collect()
    }

    #[test]
    fn the_grant_that_approved_a_step_is_shown() {
        let events = one_of_each();
        let grant = events
            .iter()
            .find(|e| e.kind() == EventKind::ApprovedByGrant)
            .unwrap();
        assert_eq!(
            event_lines(grant),
            ["  approved by grant grt-1 for approval apr-1 (fault class unhealthy)"]
        );
    }

    #[test]
    fn kinds_that_say_something_say_it() {
        // Kinds whose words are shown elsewhere: the request line, the
        // approval prompt, the outcome line.
        let quiet = [
            EventKind::Created,
            EventKind::ApprovalRequested,
            EventKind::Answer,
            EventKind::Final,
        ];
        for e in one_of_each() {
            let lines = event_lines(&e);
            assert_eq!(
                lines.is_empty(),
                quiet.contains(&e.kind()),
                "{}: {lines:?}",
                e.kind()
            );
        }
    }
}
