//! The model's answers are data: each is checked here before anything uses
//! it. A refusal's message goes back to the model, so it says exactly what
//! is wrong.
//!
//! - fault classes come from the vocabulary (`model::FaultClass`);
//! - evidence ids must exist in this request;
//! - plan steps must be actions the executor's policy enables, on the
//!   request's target or on the dependency the engine itself resolved from
//!   evidence (never a container the model merely looked at), never an
//!   action already tried. A refusal says what is refused, not how to get
//!   past the check.

use std::collections::{BTreeMap, HashSet};

use serde_json::Value;

use crate::model::{
    kind, ContainerStep, Evidence, ExecutionRecord, FaultClass, Plan, PlanStep, PolicyView,
    StepWrite, Target, WriteAction, COMPOSE_SERVICE_LABEL,
};
use crate::planner;

const MAX_TEXT: usize = 2000;
const MAX_CAUSES: usize = 5;
const MAX_STEPS: usize = 3;
const MAX_ADVICE: usize = 5;

fn text(v: &Value, key: &str) -> Result<String, String> {
    let t = v[key]
        .as_str()
        .ok_or_else(|| format!("`{key}` must be a string"))?
        .trim();
    if t.is_empty() {
        return Err(format!("`{key}` is empty"));
    }
    Ok(t.chars().take(MAX_TEXT).collect())
}

fn confidence(v: &Value, key: &str) -> Result<f32, String> {
    let c = v[key]
        .as_f64()
        .ok_or_else(|| format!("`{key}` must be a number"))?;
    if !(0.0..=1.0).contains(&c) {
        return Err(format!("`{key}` {c} is outside 0..1"));
    }
    Ok(c as f32)
}

fn evidence_ids(v: &Value, known: &HashSet<String>, at: &str) -> Result<Vec<String>, String> {
    let ids = v["evidence_ids"]
        .as_array()
        .ok_or_else(|| format!("{at}: `evidence_ids` must be an array"))?;
    let mut out = Vec::new();
    for id in ids {
        let id = id
            .as_str()
            .ok_or_else(|| format!("{at}: evidence ids are strings"))?;
        if !known.contains(id) {
            return Err(format!(
                "{at}: evidence id `{id}` does not exist in this request"
            ));
        }
        out.push(id.to_string());
    }
    if out.is_empty() {
        return Err(format!("{at}: cite at least one evidence id"));
    }
    Ok(out)
}

pub fn diagnosis(
    args: &Value,
    known: &HashSet<String>,
    engine: &str,
) -> Result<crate::model::Diagnosis, String> {
    let summary = text(args, "summary")?;
    let confidence_all = confidence(args, "confidence")?;
    let causes = args["causes"]
        .as_array()
        .ok_or("`causes` must be an array")?;
    if causes.is_empty() || causes.len() > MAX_CAUSES {
        return Err(format!(
            "give 1 to {MAX_CAUSES} causes (use class `healthy` when nothing is wrong)"
        ));
    }
    let mut out = Vec::new();
    for (i, c) in causes.iter().enumerate() {
        let at = format!("causes[{i}]");
        let class_name = c["class"].as_str().unwrap_or_default();
        let class: FaultClass =
            serde_json::from_value(Value::String(class_name.into())).map_err(|_| {
                format!(
                    "{at}: `{class_name}` is not a fault class; use one of {}",
                    super::tools::FAULT_CLASSES.join(", ")
                )
            })?;
        out.push(crate::model::Cause {
            class,
            reason: text(c, "reason").map_err(|e| format!("{at}: {e}"))?,
            confidence: confidence(c, "confidence").map_err(|e| format!("{at}: {e}"))?,
            evidence_ids: evidence_ids(c, known, &at)?,
        });
    }
    Ok(crate::model::Diagnosis {
        summary,
        confidence: confidence_all,
        causes: out,
        engine: engine.to_string(),
        ..Default::default()
    })
}

/// A container as a write target: its id, its name as Docker lists it
/// (without the leading `/`), its compose service.
fn as_target(
    id: &str,
    name: &str,
    labels: &std::collections::BTreeMap<String, String>,
    host: Option<String>,
) -> Target {
    Target::container(
        id,
        name.trim_start_matches('/'),
        labels.get(COMPOSE_SERVICE_LABEL).cloned(),
        host,
    )
}

/// The containers a model's plan may write to: the request's target, and
/// the dependency that the engine (not the model) found behind the cause,
/// recorded as `dependency` evidence.
pub fn write_targets(target: Option<&Target>, evidence: &[Evidence]) -> BTreeMap<String, Target> {
    let mut out = BTreeMap::new();
    if let Some(t) = target {
        out.insert(t.id().to_string(), t.clone());
    }
    for d in evidence.iter().filter_map(|e| e.get::<kind::Dependency>()) {
        if let Some(c) = d.container.as_ref().filter(|c| !c.id.is_empty()) {
            out.insert(c.id.clone(), as_target(&c.id, &c.name, &c.labels, None));
        }
    }
    out
}

/// Every container a list in this request's evidence showed, by id: in a
/// blind investigation, where a plan's step may point before drydock has
/// observed the target the model chose (the engine holds each step to that
/// evidence afterwards).
pub fn listed(evidence: &[Evidence]) -> BTreeMap<String, Target> {
    let mut out = BTreeMap::new();
    for list in evidence
        .iter()
        .filter_map(|e| e.get::<kind::ContainerList>())
    {
        for c in list {
            out.insert(
                c.id.clone(),
                as_target(&c.id, &c.name, &c.labels, c.host.clone()),
            );
        }
    }
    out
}

/// The container a blind investigation's diagnosis names as its target:
/// one the executor listed in this request.
pub fn chosen_target(args: &Value, evidence: &[Evidence]) -> Result<Target, String> {
    let name = args["target"].as_str().map(str::trim).unwrap_or_default();
    if name.is_empty() {
        return Err("drydock chose no target for this request: name the container your diagnosis is about as `target` (its name, as listed); if you cannot tell which one the operator means, call ask_clarification".into());
    }
    let listed = listed(evidence);
    resolve(name, &listed).cloned().ok_or_else(|| {
        format!("`target`: `{name}` is not a container the executor listed; call list_containers and name one of them")
    })
}

fn resolve<'a>(name: &str, targets: &'a BTreeMap<String, Target>) -> Option<&'a Target> {
    let name = name.trim().trim_start_matches('/');
    targets.values().find(|t| {
        t.id() == name || (name.len() >= 12 && t.id().starts_with(name)) || t.name() == name
    })
}

pub fn plan(
    args: &Value,
    targets: &BTreeMap<String, Target>,
    policy: &PolicyView,
    done: &[ExecutionRecord],
) -> Result<Plan, String> {
    let steps_in = args["steps"].as_array().ok_or("`steps` must be an array")?;
    if steps_in.len() > MAX_STEPS {
        return Err(format!("at most {MAX_STEPS} steps"));
    }
    let mut steps = Vec::new();
    for (i, s) in steps_in.iter().enumerate() {
        let at = format!("steps[{i}]");
        let named = s["action"].as_str().unwrap_or_default();
        let Some(action) = WriteAction::parse(named) else {
            return Err(format!(
                "{at}: `{named}` is not an executor action (start, restart, stop)"
            ));
        };
        let write = match action {
            WriteAction::Start => ContainerStep::Start,
            WriteAction::Restart => ContainerStep::Restart,
            WriteAction::Stop => ContainerStep::Stop,
            // Named by drydock's planner from the change evidence, with
            // both images; never by a model.
            WriteAction::Rollback => {
                return Err(format!(
                    "{at}: `rollback` is not an action you propose; drydock proposes it itself when the evidence shows an image change"
                ))
            }
            // A Swarm service's writes bind its spec version, which only
            // drydock's planner reads from the evidence.
            // An update follows a person's request, from the registry's
            // digest that drydock read itself.
            WriteAction::Update => {
                return Err(format!(
                    "{at}: `update` is not an action you propose; a person asks for an update (`drydock update`)"
                ))
            }
            WriteAction::ForceUpdate | WriteAction::ServiceRollback | WriteAction::ServiceUpdate => {
                return Err(format!(
                    "{at}: `{action}` is not an action you propose; drydock plans a Swarm service's writes itself"
                ))
            }
            // A build follows a person's request, from the commit drydock
            // read in the context itself.
            WriteAction::Build => {
                return Err(format!(
                    "{at}: `build` is not an action you propose; a person asks for a build (`drydock build`)"
                ))
            }
        };
        if !policy.actions.enabled(action) {
            return Err(format!(
                "{at}: the executor's policy does not enable `{action}`"
            ));
        }
        let name = s["container"].as_str().unwrap_or_default();
        let target = resolve(name, targets)
            .ok_or_else(|| format!("{at}: `{action}` of `{name}` is refused"))?;
        if done
            .iter()
            .any(|d| d.action == action && d.container_id == target.id())
        {
            return Err(format!(
                "{at}: `{action}` of {} was already tried in this request",
                target.name()
            ));
        }
        let step = PlanStep::new(
            target.clone(),
            StepWrite::Container(write),
            text(s, "reason").map_err(|e| format!("{at}: {e}"))?,
            policy.actions.tier(action),
            text(s, "expected_effect").map_err(|e| format!("{at}: {e}"))?,
            format!(
                "{action} is not reversible as such; if the container gets worse, inspect it with `docker logs {}` and act by hand",
                target.name()
            ),
        )
        .map_err(|e| format!("{at}: {e}"))?;
        steps.push(step);
    }
    let advice: Vec<String> = args["advice"]
        .as_array()
        .ok_or("`advice` must be an array")?
        .iter()
        .filter_map(Value::as_str)
        .map(|a| a.trim().chars().take(MAX_TEXT).collect::<String>())
        .filter(|a| !a.is_empty())
        .take(MAX_ADVICE)
        .collect();
    Ok(Plan {
        digest: planner::digest(&steps),
        steps,
        advice,
    })
}

pub fn answer(args: &Value, known: &HashSet<String>) -> Result<(String, Vec<String>), String> {
    Ok((text(args, "answer")?, evidence_ids(args, known, "answer")?))
}

pub fn question(args: &Value) -> Result<String, String> {
    text(args, "question")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ActionPolicy, ActionsView, ContainerView, EvidencePayload, Tier};
    use serde_json::json;

    fn evidence() -> Vec<Evidence> {
        let c = ContainerView {
            id: "aaaaaaaaaaaa1111".into(),
            name: "web".into(),
            ..Default::default()
        };
        vec![Evidence {
            id: "ev-1".into(),
            source: "InspectContainer".into(),
            timestamp: String::new(),
            payload: EvidencePayload::Inspect(c),
        }]
    }

    #[test]
    fn plans_are_checked_against_policy_evidence_and_history() {
        let policy = PolicyView {
            actions: ActionsView::enabling(&[WriteAction::Restart]),
            ..Default::default()
        };
        let step = |action: &str, container: &str| json!({"steps": [{"action": action, "container": container, "reason": "r", "expected_effect": "e"}], "advice": []});
        let ev = evidence();
        let web: ContainerView = ev[0].get::<kind::Inspect>().unwrap().clone();
        let target = Target::container(web.id.clone(), web.name.clone(), None, None);
        // A bystander the model inspected is no write target.
        let mut ev = ev;
        ev.push(Evidence {
            id: "ev-2".into(),
            source: "InspectContainer".into(),
            timestamp: String::new(),
            payload: EvidencePayload::RelatedInspect(ContainerView {
                id: "bbbbbbbbbbbb2222".into(),
                name: "db".into(),
                ..Default::default()
            }),
        });
        let targets = write_targets(Some(&target), &ev);
        let cases: [(&str, &str, Option<&str>); 5] = [
            ("restart", "web", None),
            ("restart", "aaaaaaaaaaaa", None),
            ("stop", "web", Some("does not enable `stop`")),
            ("restart", "db", Some("refused")),
            ("exec", "web", Some("not an executor action")),
        ];
        for (action, container, want) in cases {
            let r = plan(&step(action, container), &targets, &policy, &[]);
            if let Err(e) = &r {
                assert!(!e.contains("inspect"), "no hint on how to get past: {e}");
            }
            match want {
                None => assert!(r.is_ok(), "{action} {container}: {r:?}"),
                Some(w) => assert!(
                    r.as_ref().is_err_and(|e| e.contains(w)),
                    "{action} {container}: {r:?}"
                ),
            }
        }
        let done = [ExecutionRecord {
            step: 0,
            action: WriteAction::Restart,
            new_container_id: None,
            service_version: None,
            container_id: "aaaaaaaaaaaa1111".into(),
            approval_id: "a".into(),
            ok: true,
            message: String::new(),
            at: String::new(),
            in_doubt: false,
            grant_id: None,
        }];
        assert!(plan(&step("restart", "web"), &targets, &policy, &done).is_err());
        // The tier shown is the executor's.
        let stop_policy = PolicyView {
            actions: ActionsView::new([(
                WriteAction::Stop,
                ActionPolicy {
                    enabled: true,
                    tier: Tier::Disruptive,
                },
            )]),
            ..Default::default()
        };
        let p = plan(&step("stop", "web"), &targets, &stop_policy, &[]).unwrap();
        assert_eq!(p.steps[0].risk, Tier::Disruptive);
    }

    #[test]
    fn diagnoses_need_vocabulary_classes_and_real_evidence() {
        let known: HashSet<String> = ["ev-1".to_string()].into();
        let d = |class: &str, ids: Value| json!({"summary": "s", "confidence": 0.7, "causes": [{"class": class, "reason": "r", "confidence": 0.7, "evidence_ids": ids}]});
        assert!(diagnosis(&d("oom_killed", json!(["ev-1"])), &known, "m").is_ok());
        assert!(diagnosis(&d("cosmic_rays", json!(["ev-1"])), &known, "m")
            .is_err_and(|e| e.contains("not a fault class")));
        assert!(diagnosis(&d("crash", json!(["ev-404"])), &known, "m")
            .is_err_and(|e| e.contains("does not exist")));
        assert!(diagnosis(&d("crash", json!([])), &known, "m").is_err());
    }
}
