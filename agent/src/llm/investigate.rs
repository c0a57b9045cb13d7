//! drydock's investigation: the rules engine's findings and the evidence
//! observed so far go to the model (inside untrusted-data blocks, compacted);
//! the model may read more through read-only tools; its answer is validated
//! and becomes a diagnosis and plan, an answer to a question, or a
//! clarifying question. Anything else — an unreachable model, invalid
//! answers past the budget, the turn limit — ends in `Verdict::Fallback`,
//! and the engine carries on with the rules engine alone.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::watch;

use super::agent_loop::{self, End, Handler, Limits, ToolReply};
use super::provider::Provider;
use super::tools::{self, Journal};
use super::untrusted::Boundary;
use super::{compact, Message, ToolCall, Usage};
use crate::executor_client::Reads;
use crate::model::{
    kind, AfterWrite, ContainerSummaryView, ContainerView, Diagnosis, DiskUsageView, EventPayload,
    Evidence, EvidencePayload, ExecutionRecord, FaultClass, LlmTool, LogsView, Plan, PolicyView,
    Request, RunbookEntry, StatsView, Target, WriteAction,
};
use crate::runbook::Runbook;

/// Everything an investigation needs besides the request.
#[derive(Debug, Clone)]
pub struct Setup {
    pub provider: Provider,
    pub limits: Limits,
    pub max_invalid_answers: u32,
    /// When the model investigates openly, and whether it finds the
    /// target itself (`llm.investigate`).
    pub investigate: crate::config::Investigate,
    pub runbook: Arc<Runbook>,
    pub logs_tail: u32,
    /// Estimated tokens (chars/4) the conversation may hold before older
    /// tool answers are elided.
    pub context_budget: usize,
}

/// Default for `Setup::context_budget`: well inside every current model's
/// window, leaving room for the answer.
pub const DEFAULT_CONTEXT_BUDGET: usize = 60_000;

/// Tool answers kept whole when the conversation is over budget.
const KEEP_RECENT_TOOL_ANSWERS: usize = 4;

/// What the request holds when the investigation starts.
pub struct Input<'a> {
    pub request: &'a Request,
    /// The rules engine's diagnosis, for the model to confirm or refute.
    pub analyzer: Option<&'a Diagnosis>,
    pub policy: Option<PolicyView>,
    /// What the evidence says of a write on the target, whoever proposes
    /// it: a model's write on the target is refused for the same reasons
    /// as the rules planner's.
    pub gate: WriteGate,
    /// The rules engine was not sure (below the confidence a write needs,
    /// or `unknown`): the model investigates openly, with no rules answer
    /// to confirm (`analyzer` is not shown) and no veto by the rules'
    /// class; only the evidence's `gate` stands.
    pub open: bool,
    /// drydock chose no target (`llm.investigate: blind`): the model
    /// finds it among the containers listed and names it with its
    /// diagnosis; its steps may point at any listed container, and the
    /// engine holds them to the evidence of the target once observed.
    pub blind: bool,
}

/// Why a write on the target is not supported by the evidence, for each
/// reading of the failure; `None` where it is.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteGate {
    /// Whatever the cause: a job that ran to completion, a failure a
    /// change explains.
    pub always: Option<String>,
    /// For a failure of the target's own: nothing shows a start would go
    /// differently (a startup failure, the same failure at every start).
    pub own: Option<String>,
    /// For a dependency the target failed on: none was found, or it runs
    /// on a network the target is not on.
    pub dependency: Option<String>,
    /// By the rules engine's own diagnosis (its class and confidence).
    pub rules: Option<String>,
}

impl WriteGate {
    /// Why a write on the target is refused, for a diagnosis of class
    /// `class`: the rules' reading unless the investigation is open.
    pub fn refusal(&self, open: bool, class: Option<FaultClass>) -> Option<&String> {
        if let Some(why) = &self.always {
            return Some(why);
        }
        if !open {
            return self.rules.as_ref();
        }
        match class {
            Some(FaultClass::DependencyUnavailable) => self.dependency.as_ref(),
            _ => self.own.as_ref(),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// `plan: None` means the model gave no valid plan (or none was asked
    /// for): the engine plans from the diagnosis with the rules planner.
    Diagnosis {
        diagnosis: Diagnosis,
        plan: Option<Plan>,
        note: Option<String>,
    },
    Answer {
        answer: String,
        evidence_ids: Vec<String>,
    },
    Clarify {
        question: String,
    },
    Fallback {
        reason: String,
    },
    Canceled,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub verdict: Verdict,
    pub usage: Usage,
    pub turns: u32,
    /// In a blind investigation, the container the model's diagnosis is
    /// about.
    pub chosen: Option<Target>,
}

mod prompt;
mod render;
use prompt::system_prompt;
pub use render::render_evidence;
use render::{first_message, render_inspect, render_list, render_logs, FOLLOWUP_PREFIX};

const ELIDED: &str = "[earlier tool answer elided to fit the context budget]";

/// Secret-looking values in tool output, replaced before the model sees them.
use crate::text::redact;

struct Investigator<'a, E: ?Sized, J> {
    executor: &'a E,
    journal: &'a J,
    request_id: String,
    boundary: Boundary,
    evidence: Vec<Evidence>,
    known_ids: HashSet<String>,
    policy: Option<PolicyView>,
    target: Option<Target>,
    /// The rules engine's primary class, if it diagnosed the target.
    rules_class: Option<FaultClass>,
    /// `Input::gate`.
    gate: WriteGate,
    /// `Input::open`.
    open: bool,
    /// `Input::blind`.
    blind: bool,
    /// In a blind investigation, the target the model's diagnosis names.
    /// Kept apart from `target`: what the model reads stays related
    /// evidence until drydock has observed the container itself.
    chosen: Option<Target>,
    done: Vec<ExecutionRecord>,
    diagnose_only: bool,
    engine_name: String,
    runbook: Arc<Runbook>,
    logs_tail: u32,
    context_budget: usize,
    invalid: u32,
    /// Follow-ups the model has been given.
    followups_seen: usize,
    max_invalid: u32,
    diagnosis: Option<Diagnosis>,
    verdict: Option<Verdict>,
}

impl<E: Reads + ?Sized, J: Journal> Investigator<'_, E, J> {
    async fn record(&mut self, source: &str, payload: EvidencePayload, summary: String) -> String {
        let ev = crate::model::new_evidence(source, payload);
        let id = ev.id.clone();
        self.known_ids.insert(id.clone());
        self.evidence.push(ev.clone());
        self.journal.evidence(ev, summary).await;
        id
    }

    /// One more invalid answer; past the budget, the investigation ends.
    fn refuse(&mut self, what: &str, reason: String) -> ToolReply {
        self.invalid += 1;
        if self.invalid > self.max_invalid {
            let why = format!(
                "the model's {what} was invalid {} times; last: {reason}",
                self.invalid
            );
            if self.diagnosis.is_none() || what == "diagnosis" {
                self.verdict = Some(Verdict::Fallback { reason: why });
            } else if let Some(d) = self.diagnosis.clone() {
                self.verdict = Some(Verdict::Diagnosis {
                    diagnosis: d,
                    plan: None,
                    note: Some(why),
                });
            }
            return ToolReply::Done(format!("refused: {reason}. No attempts left."));
        }
        ToolReply::Continue(format!(
            "refused: {reason}. Fix it and call the tool again ({} attempt(s) left).",
            self.max_invalid + 1 - self.invalid
        ))
    }

    async fn read_tool(&mut self, name: &str, args: &Value) -> String {
        let container = args["container"].as_str().unwrap_or_default().to_string();
        let id = self.request_id.clone();
        let result: Result<(String, &str, String, EvidencePayload), String> = match name {
            "list_containers" => self
                .executor
                .list(&id, true)
                .await
                .map(|l| {
                    (
                        render_list(&l),
                        "ListContainers",
                        format!("{} containers visible", l.len()),
                        EvidencePayload::ContainerList(l),
                    )
                })
                .map_err(|e| e.to_string()),
            "inspect_container" | "container_health" => self
                .executor
                .inspect(&id, &container)
                .await
                .map(|c| {
                    let summary = format!(
                        "{}: state={} exit={} health={} oom_killed={}",
                        c.name, c.status, c.exit_code, c.health_status, c.oom_killed
                    );
                    if name == "container_health" {
                        let health = json!({"container": c.name, "id": c.id, "health_status": c.health_status, "failing_streak": c.failing_streak, "healthcheck": c.healthcheck, "health_log": c.health_log});
                        (
                            compact::cap(&health.to_string(), compact::MAX_TOOL_CHARS),
                            "ContainerHealth",
                            summary,
                            EvidencePayload::Inspect(c),
                        )
                    } else {
                        (
                            render_inspect(&c),
                            "InspectContainer",
                            summary,
                            EvidencePayload::Inspect(c),
                        )
                    }
                })
                .map_err(|e| e.to_string()),
            "container_logs" => {
                let max = self
                    .policy
                    .as_ref()
                    .map(|p| p.logs_max_lines)
                    .filter(|m| *m > 0)
                    .unwrap_or(500);
                let tail = args["tail"]
                    .as_u64()
                    .unwrap_or(u64::from(self.logs_tail))
                    .clamp(1, u64::from(max.min(500))) as u32;
                self.executor
                    .logs(&id, &container, tail)
                    .await
                    .map(|l| {
                        (
                            render_logs(&l),
                            "ContainerLogs",
                            format!("{container}: {} lines", l.lines.len()),
                            EvidencePayload::Logs(l),
                        )
                    })
                    .map_err(|e| e.to_string())
            }
            "container_stats" => self
                .executor
                .stats(&id, &container)
                .await
                .map(|s: StatsView| {
                    (
                        serde_json::to_string(&s).unwrap_or_default(),
                        "ContainerStats",
                        format!("{container}: cpu {:.1}%, memory {:.0}%", s.cpu_percent, s.memory_percent),
                        EvidencePayload::Stats(s),
                    )
                })
                .map_err(|e| e.to_string()),
            "disk_usage" => self
                .executor
                .disk_usage(&id, &container)
                .await
                .map(|u: DiskUsageView| {
                    (
                        compact::cap(&serde_json::to_string(&u).unwrap_or_default(), compact::MAX_TOOL_CHARS),
                        "DiskUsage",
                        format!("{container}: {}", crate::disk::summary(&u)),
                        EvidencePayload::DiskUsage(u),
                    )
                })
                .map_err(|e| e.to_string()),
            "read_runbook" => {
                let service = args["service"].as_str().unwrap_or_default();
                // The engine reads a runbook entry as the target's (its
                // dependencies, its HTTP check): only the target's own is
                // recorded; another service's is shown, not kept.
                let targets_entry = self.target.as_ref().and_then(|t| {
                    self.runbook
                        .lookup(t.compose_service(), t.name())
                        .map(|(svc, _)| svc.to_string())
                });
                let asked = self
                    .runbook
                    .lookup(Some(service), service)
                    .map(|(svc, _)| svc.to_string());
                if asked.is_some() && asked != targets_entry {
                    return match self.runbook.lookup(Some(service), service) {
                        Some((svc, notes)) => format!(
                            "runbook entry `{svc}` (not the target's, so not evidence to cite):\n{}",
                            self.boundary.wrap(
                                name,
                                &serde_json::json!({"depends_on": notes.depends_on, "http_check": notes.http_check, "notes": notes.notes}).to_string()
                            )
                        ),
                        None => format!(
                            "error: {}",
                            self.boundary
                                .wrap(name, &format!("the runbook has no entry for `{service}`"))
                        ),
                    };
                }
                match self.runbook.lookup(Some(service), service) {
                    Some((svc, notes)) => {
                        let entry = RunbookEntry {
                            service: svc.to_string(),
                            depends_on: notes.depends_on.clone(),
                            http_check: notes.http_check.clone(),
                            notes: notes.notes.clone(),
                        };
                        Ok((
                            serde_json::to_string(&entry).unwrap_or_default(),
                            "runbook",
                            format!("runbook entry `{svc}`"),
                            EvidencePayload::Runbook(entry),
                        ))
                    }
                    None => Err(format!("the runbook has no entry for `{service}`")),
                }
            }
            other => Err(format!("unknown tool `{other}`")),
        };
        match result {
            Ok((shown, source, summary, payload)) => {
                // The engine reads the newest inspect, logs, stats and disk
                // usage as the target's own; another container's answers
                // must not pass for it.
                let target = self.target.as_ref();
                let named = |t: &Target| container == t.id() || container == t.name();
                let payload = match payload {
                    EvidencePayload::Inspect(c) if target.is_none_or(|t| c.id != t.id()) => {
                        EvidencePayload::RelatedInspect(c)
                    }
                    EvidencePayload::DiskUsage(u)
                        if target.is_none_or(|t| u.container_id != t.id()) =>
                    {
                        EvidencePayload::RelatedDiskUsage(u)
                    }
                    EvidencePayload::Logs(l) if !target.is_some_and(named) => {
                        EvidencePayload::RelatedLogs(l)
                    }
                    EvidencePayload::Stats(s) if !target.is_some_and(named) => {
                        EvidencePayload::RelatedStats(s)
                    }
                    other => other,
                };
                let ev = self.record(source, payload, summary).await;
                format!("evidence {ev}:\n{}", self.boundary.wrap(name, &shown))
            }
            Err(e) => format!("error: {}", self.boundary.wrap(name, &e)),
        }
    }
}

impl<E: Reads + ?Sized, J: Journal> Handler for Investigator<'_, E, J> {
    async fn call(&mut self, call: &ToolCall, args: Value) -> ToolReply {
        self.journal
            .event(EventPayload::LlmTool(LlmTool {
                tool: call.name.clone(),
                arguments: args.clone(),
            }))
            .await;
        match call.name.as_str() {
            "submit_diagnosis" => {
                let checked = super::validate::diagnosis(&args, &self.known_ids, &self.engine_name)
                    .and_then(|d| {
                        if self.blind {
                            self.chosen =
                                Some(super::validate::chosen_target(&args, &self.evidence)?);
                        }
                        Ok(d)
                    });
                match checked {
                    Ok(d) => {
                        self.diagnosis = Some(d.clone());
                        if self.diagnose_only {
                            self.verdict = Some(Verdict::Diagnosis {
                                diagnosis: d,
                                plan: None,
                                note: None,
                            });
                            ToolReply::Done("accepted".into())
                        } else {
                            ToolReply::Continue(
                                "accepted. Now call propose_plan (steps may be empty).".into(),
                            )
                        }
                    }
                    Err(e) => self.refuse("diagnosis", e),
                }
            }
            "propose_plan" => {
                let Some(diagnosis) = self.diagnosis.clone() else {
                    return self.refuse("plan", "call submit_diagnosis first".into());
                };
                if self.diagnose_only {
                    return self.refuse("plan", "this request is suggest-only".into());
                }
                let Some(policy) = self.policy.clone() else {
                    return self.refuse("plan", "the executor's policy is unknown, so no step can be accepted; propose no steps".into());
                };
                let target = self.target.as_ref().or(self.chosen.as_ref());
                let mut targets = super::validate::write_targets(target, &self.evidence);
                if self.blind {
                    targets.extend(super::validate::listed(&self.evidence));
                }
                let has_steps = args["steps"].as_array().is_some_and(|s| !s.is_empty());
                let checked = if target.is_none() && has_steps {
                    Err("no target container was resolved for this request, so no step can be executed; ask_clarification or give advice only".into())
                } else {
                    super::validate::plan(&args, &targets, &policy, &self.done)
                };
                let checked = checked.and_then(|p| {
                    // The rules engine's class counts whatever the model
                    // concluded: a model that calls an OOM kill
                    // "unhealthy" does not get the target restarted.
                    let cannot_fix = diagnosis
                        .causes
                        .first()
                        .map(|c| c.class)
                        .into_iter()
                        .chain(self.rules_class)
                        .any(crate::planner::restart_cannot_fix);
                    let on_target = |s: &crate::model::PlanStep| {
                        target.is_some_and(|t| t.id() == s.target().id())
                    };
                    let model_class = diagnosis.causes.first().map(|c| c.class);
                    if cannot_fix && p.steps.iter().any(on_target) {
                        Err(
                            "a write on the target is refused for this fault; give advice instead"
                                .into(),
                        )
                    } else if let Some(why) = self
                        .gate
                        .refusal(self.open, model_class)
                        .filter(|_| p.steps.iter().any(on_target))
                    {
                        Err(format!(
                            "a write on the target is refused: {why}; give advice instead"
                        ))
                    } else {
                        Ok(p)
                    }
                });
                match checked {
                    Ok(plan) => {
                        self.verdict = Some(Verdict::Diagnosis {
                            diagnosis,
                            plan: Some(plan),
                            note: None,
                        });
                        ToolReply::Done("accepted".into())
                    }
                    Err(e) => self.refuse("plan", e),
                }
            }
            "answer_question" => match super::validate::answer(&args, &self.known_ids) {
                Ok((answer, evidence_ids)) => {
                    self.verdict = Some(Verdict::Answer {
                        answer,
                        evidence_ids,
                    });
                    ToolReply::Done("accepted".into())
                }
                Err(e) => self.refuse("answer", e),
            },
            "ask_clarification" => match super::validate::question(&args) {
                Ok(question) => {
                    self.verdict = Some(Verdict::Clarify { question });
                    ToolReply::Done("accepted".into())
                }
                Err(e) => self.refuse("question", e),
            },
            name => ToolReply::Continue(self.read_tool(name, &args).await),
        }
    }

    /// A follow-up added since the last turn goes in first, as the
    /// operator's words; then, over budget, the oldest tool answers are
    /// replaced by a pointer to their evidence (which the model can read
    /// again).
    fn before_model(&mut self, messages: &mut Vec<Message>) {
        let followups = self.journal.followups();
        for f in followups.iter().skip(self.followups_seen) {
            messages.push(Message::User(format!("{FOLLOWUP_PREFIX}\n{f}")));
        }
        self.followups_seen = self.followups_seen.max(followups.len());
        let size = |m: &Message| match m {
            Message::System(t) | Message::User(t) => super::estimate_tokens(t),
            Message::Assistant { text, tool_calls } => {
                super::estimate_tokens(text)
                    + tool_calls
                        .iter()
                        .map(|c| super::estimate_tokens(&c.arguments))
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => super::estimate_tokens(content),
        };
        let mut total: usize = messages.iter().map(size).sum();
        let tool_positions: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m, Message::Tool { .. }))
            .map(|(i, _)| i)
            .collect();
        let old = tool_positions
            .len()
            .saturating_sub(KEEP_RECENT_TOOL_ANSWERS);
        for &i in &tool_positions[..old] {
            if total <= self.context_budget {
                break;
            }
            if let Some(Message::Tool { content, .. }) = messages.get_mut(i) {
                if content.starts_with(ELIDED) {
                    continue;
                }
                let before = super::estimate_tokens(content);
                let evidence = content
                    .strip_prefix("evidence ")
                    .and_then(|r| r.split(':').next())
                    .unwrap_or("none");
                *content =
                    format!("{ELIDED} (evidence {evidence}); call the tool again if you need it");
                total = total.saturating_sub(before) + super::estimate_tokens(content);
            }
        }
    }

    /// Defence in depth: the executor redacts env values and known secret
    /// shapes; this catches credentials that slipped into logs in plain
    /// `key=value` or bearer form before the model sees them.
    fn after_tool(&mut self, _call: &ToolCall, output: &mut String) {
        let redacted = redact(output);
        if redacted != *output {
            *output = redacted;
        }
    }

    async fn notice(&mut self, text: String) {
        tracing::warn!(request_id = %self.request_id, notice = %text, "model API");
        self.journal
            .event(EventPayload::LlmRetry(crate::model::Message::new(text)))
            .await;
    }

    fn on_text(&mut self, _text: &str) -> Option<String> {
        self.invalid += 1;
        (self.invalid <= self.max_invalid).then(|| {
            "Answer only by calling a tool: submit_diagnosis and propose_plan, answer_question, or ask_clarification.".to_string()
        })
    }
}

/// Investigate one request. Never fails: every failure is a `Fallback`.
pub async fn investigate<E: Reads + ?Sized, J: Journal>(
    setup: &Setup,
    input: Input<'_>,
    executor: &E,
    journal: &J,
    cancel: &mut watch::Receiver<bool>,
) -> Report {
    let boundary = Boundary::random();
    let req = input.request;
    let mut messages = vec![
        Message::System(system_prompt(
            &boundary,
            input.policy.as_ref(),
            req.options.diagnose_only,
            input.open,
            input.blind,
        )),
        Message::User(first_message(&boundary, &input)),
    ];
    let mut investigator = Investigator {
        executor,
        journal,
        request_id: req.id.clone(),
        boundary,
        evidence: req.evidence.clone(),
        known_ids: req.evidence.iter().map(|e| e.id.clone()).collect(),
        policy: input.policy.clone(),
        target: req.target.clone(),
        gate: input.gate.clone(),
        open: input.open,
        blind: input.blind,
        chosen: None,
        // An open investigation is not vetoed by a class the rules were
        // not sure of.
        rules_class: input
            .analyzer
            .filter(|_| !input.open)
            .and_then(|d| d.causes.first())
            .map(|c| c.class),
        done: req.execution.clone(),
        diagnose_only: req.options.diagnose_only,
        engine_name: format!("llm:{}", setup.provider.model),
        runbook: setup.runbook.clone(),
        logs_tail: setup.logs_tail,
        context_budget: setup.context_budget,
        invalid: 0,
        followups_seen: req.followups.len(),
        max_invalid: setup.max_invalid_answers,
        diagnosis: None,
        verdict: None,
    };
    let tools = tools::specs();
    let outcome = agent_loop::run(
        &setup.provider,
        &mut messages,
        &tools,
        &mut investigator,
        &setup.limits,
        cancel,
    )
    .await;
    let partial = |why: String, inv: &Investigator<'_, E, J>| match &inv.diagnosis {
        Some(d) => Verdict::Diagnosis {
            diagnosis: d.clone(),
            plan: None,
            note: Some(why),
        },
        None => Verdict::Fallback { reason: why },
    };
    let verdict = match outcome.end {
        End::Done => investigator.verdict.clone().unwrap_or(Verdict::Fallback {
            reason: "the model ended without an answer".into(),
        }),
        End::Canceled => Verdict::Canceled,
        End::MaxTurns => partial(
            format!(
                "the model used all {} turns without a complete answer",
                setup.limits.max_turns
            ),
            &investigator,
        ),
        End::Text(_) => partial(
            "the model kept answering in plain text instead of through its tools".into(),
            &investigator,
        ),
        End::Failed(e) => partial(format!("model unavailable: {e}"), &investigator),
    };
    Report {
        verdict,
        usage: outcome.usage,
        turns: outcome.turns,
        chosen: investigator.chosen,
    }
}
