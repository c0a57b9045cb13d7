//! Plan: steps the executor's policy enables on containers seen in this
//! request's evidence, or advice when a restart cannot fix the fault.

use super::{Engine, Stop};
use crate::model::*;
use crate::planner;
use crate::rules;

impl Engine {
    pub(super) async fn plan(&self, req: &Request) -> Result<bool, Stop> {
        if req.options.update {
            return self.plan_update(req).await;
        }
        if req.options.build.is_some() {
            return self.plan_build(req).await;
        }
        let id = &req.id;
        let model_plan = self
            .llm_plans
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let (Some(mut plan), Some(diagnosis)) = (model_plan, req.diagnosis.clone()) {
            // The model's steps stand; what the rules planner would tell a
            // person (the variable to set, the host setting and its command)
            // is added to its advice, so no concrete advice is lost.
            if let Ok((rules, _)) = self.rules_plan(req) {
                for a in rules.advice {
                    if !plan.advice.contains(&a) {
                        plan.advice.push(a);
                    }
                }
            }
            // A write on the target the evidence does not support was
            // refused to the model: the request says so.
            if let Some(target) = &req.target {
                let open = diagnosis.model.as_ref().is_some_and(|m| m.open);
                let class = diagnosis.causes.first().map(|c| c.class);
                let on_target = plan.steps.iter().any(|s| s.target().id() == target.id());
                if let Some(why) = self
                    .write_gate(req, req.rules_diagnosis.as_ref())
                    .refusal(open, class)
                    .filter(|_| !on_target)
                {
                    let said = format!(
                        "drydock proposes no start or restart of {}: {why}.",
                        target.name()
                    );
                    if !plan.advice.contains(&said) {
                        plan.advice.push(said);
                    }
                }
            }
            return self.propose(req, plan, &diagnosis).await;
        }
        match self.rules_plan(req) {
            Ok((plan, diagnosis)) => self.propose(req, plan, &diagnosis).await,
            Err(why) => {
                self.finish(id, Status::Failed, why.into()).await?;
                Ok(false)
            }
        }
    }

    /// The rules planner's plan for a container target, and the diagnosis
    /// it plans from; why not, when the request lacks what it needs.
    fn rules_plan(&self, req: &Request) -> Result<(Plan, Diagnosis), &'static str> {
        let (Some(observed), Some(target)) = (Self::observed(req), req.target.clone()) else {
            return Err("no evidence to plan from");
        };
        let policy = Self::latest_policy(req).ok_or("the executor's policy was not observed")?;
        let mut finding = rules::diagnose(&observed.observation(self.config.ran_well_after));
        // The saved diagnosis includes what diagnosis learned beyond the
        // rules (the dependency's state). With a model configured, the rules
        // planner plans from the rules engine's own diagnosis, never from
        // the model's: a model that calls an OOM kill "unhealthy" must not
        // get a restart through the fallback either.
        if let Some(d) = req.rules_diagnosis.as_ref().or(req.diagnosis.as_ref()) {
            finding.diagnosis = d.clone();
        }
        let c = &observed.container;
        let context = Self::context(req, &finding, c);
        let plan = planner::plan(&finding, c, &target, &policy, &req.execution, &context);
        Ok((plan, finding.diagnosis))
    }

    /// Save the plan; finish when it has no step, else request approvals.
    pub(super) async fn propose(
        &self,
        req: &Request,
        plan: Plan,
        diagnosis: &Diagnosis,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        let plan = Self::mind_history(req, plan);
        self.update(
            id,
            EventPayload::Plan(PlanMade { plan: plan.clone() }),
            |r| r.plan = Some(plan.clone()),
        )
        .await?;
        let class = diagnosis
            .causes
            .first()
            .map(|c| c.class)
            .unwrap_or(FaultClass::Unknown);
        if plan.steps.is_empty() {
            let tried = Self::tried(req);
            let (status, outcome) = if !req.execution.is_empty() {
                (
                    Status::Failed,
                    format!("not recovered after {tried}. {}", plan.advice.join(" ")),
                )
            } else if class == FaultClass::Healthy {
                (
                    Status::Completed,
                    format!("nothing wrong found: {}", diagnosis.summary),
                )
            } else {
                (
                    Status::Completed,
                    format!(
                        "no automatic fix: {} {}",
                        diagnosis.summary,
                        plan.advice.join(" ")
                    ),
                )
            };
            self.finish(id, status, outcome.trim().to_string()).await?;
            return Ok(false);
        }
        self.request_approvals(id, &plan, true, "waiting for approval")
            .await?;
        Ok(true)
    }

    pub(super) fn tried(req: &Request) -> String {
        let done: Vec<String> = req
            .execution
            .iter()
            .map(|e| format!("{} ({})", e.action, if e.ok { "done" } else { "failed" }))
            .collect();
        if done.is_empty() {
            "no action".into()
        } else {
            done.join(", ")
        }
    }

    /// What the planner needs beyond the target's own state, all taken from
    /// this request's evidence.
    pub(super) fn context(
        req: &Request,
        finding: &rules::Finding,
        c: &ContainerView,
    ) -> planner::Context {
        let containers = Self::containers_on_host(req);
        let port = c.requested_host_ports.first().copied().or_else(|| {
            let text = finding
                .detail
                .clone()
                .or(finding.matched_line.clone())
                .unwrap_or_default();
            port_in(&text)
        });
        let port_holder = port.and_then(|p| {
            containers
                .iter()
                .find(|o| o.id != c.id && o.public_ports.contains(&p))
                .map(|o| o.name.clone())
        });
        let memory_usage_bytes = req.latest::<kind::Stats>().map(|s| s.memory_usage_bytes);
        let notes = req.latest::<kind::Runbook>().and_then(|r| r.notes.clone());
        planner::Context {
            dependency: req.latest::<kind::Dependency>().cloned(),
            port_holder,
            port,
            memory_usage_bytes,
            notes,
            disk: req.latest::<kind::DiskUsage>().cloned(),
        }
    }
}

/// A port number in text like `listen tcp :8080`, `0.0.0.0:8080 failed`.
fn port_in(text: &str) -> Option<u32> {
    // A detail that is the port itself ("8080").
    if let Some(p) = text
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=65535).contains(n))
    {
        return Some(p);
    }
    text.split(|c: char| !(c.is_ascii_digit() || c == ':'))
        .filter_map(|t| t.rsplit_once(':').map(|(_, p)| p))
        .find_map(|p| p.parse::<u32>().ok().filter(|n| (1..=65535).contains(n)))
}
