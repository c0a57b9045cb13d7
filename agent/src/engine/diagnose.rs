//! Diagnose: the rules engine names the cause from the evidence; with a
//! model configured, the model investigates with read-only tools and the
//! rules engine stands behind it for whatever it cannot deliver.

use super::{Engine, EngineJournal, Stop};
use crate::llm::investigate::{self, Verdict};
use crate::model::*;
use crate::rules;
use crate::store::StoreError;

impl Engine {
    /// The rules engine's reading of the target's newest evidence, with the
    /// state of a dependency it points at; `None` without evidence.
    async fn analyze(&self, req: &Request) -> Result<Option<Diagnosis>, Stop> {
        let Some(observed) = Self::observed(req) else {
            return Ok(None);
        };
        let finding = rules::diagnose(&observed.observation(self.config.ran_well_after));
        let (c, logs_ev) = (&observed.container, &observed.logs_ev);
        let mut diagnosis = finding.diagnosis.clone();
        // The failure's shape is evidence of its own, cited by the cause it
        // shaped (a startup failure, a run that went well, the same line at
        // every start).
        if let Some(shape) = finding.shape_evidence() {
            let said = finding.shape.said();
            let ev = self
                .add_evidence(
                    &req.id,
                    "agent (inspect, events, logs)",
                    EvidencePayload::Shape(shape),
                    said,
                )
                .await?;
            if let Some(first) = diagnosis.causes.first_mut() {
                first.evidence_ids.push(ev);
            }
        }
        if let Some((cause, state)) = self.examine_dependency(req, &finding, c, logs_ev).await? {
            // Unhealthy because a service it needs is down (not running, or
            // no container at all): that is the fault, and the dependency is
            // what gets repaired, not the target.
            let primary_unhealthy = diagnosis
                .causes
                .first()
                .is_some_and(|p| p.class == FaultClass::Unhealthy);
            let down = state.container.as_ref().is_none_or(|d| !d.running);
            if primary_unhealthy && down {
                diagnosis.summary =
                    format!("{} {}", rules::sentence(&cause.reason), diagnosis.summary);
                diagnosis.confidence = cause.confidence;
                diagnosis.causes.insert(0, cause);
            } else {
                diagnosis.causes.push(cause);
            }
        }
        self.examine_disk(req, &finding, c, &mut diagnosis).await?;
        Ok(Some(diagnosis))
    }

    /// Why no write on the target is supported by the evidence, whoever
    /// proposes it, for each reading of the failure: a job that ran to
    /// completion or a failure a change explains (a start runs the same
    /// definition again) whatever the cause; else what
    /// `planner::write_supported` says for the rules' diagnosis, for a
    /// failure of the target's own, and for a dependency.
    pub(super) fn write_gate(
        &self,
        req: &Request,
        analyzer: Option<&Diagnosis>,
    ) -> investigate::WriteGate {
        let Some(observed) = Self::observed(req) else {
            return investigate::WriteGate::default();
        };
        let c = &observed.container;
        let mut finding = rules::diagnose(&observed.observation(self.config.ran_well_after));
        let always = if finding.finished_job {
            Some("it is a one-off job that ran to completion".to_string())
        } else {
            finding.change.as_ref().map(|ch| {
                format!(
                    "the failure follows a change ({}), and a start or restart runs the same definition again",
                    ch.said
                )
            })
        };
        if let Some(d) = analyzer.or(req.rules_diagnosis.as_ref()) {
            finding.diagnosis = d.clone();
        }
        let context = Self::context(req, &finding, c);
        // Each reading stands alone: the rules' own causes do not come
        // with it (in an open investigation the rules' class vetoes
        // nothing; the shape and the history still decide).
        let as_class = |class: FaultClass| {
            let mut f = finding.clone();
            f.diagnosis.causes = vec![Cause {
                class,
                reason: String::new(),
                confidence: 1.0,
                evidence_ids: Vec::new(),
            }];
            crate::planner::write_supported(&f, c, &context).err()
        };
        investigate::WriteGate {
            always,
            own: as_class(if c.running {
                FaultClass::Unhealthy
            } else {
                FaultClass::Crash
            }),
            dependency: as_class(FaultClass::DependencyUnavailable),
            rules: crate::planner::write_supported(&finding, c, &context).err(),
        }
    }

    /// Whether the rules engine's diagnosis is too unsure for a model to
    /// confirm: no cause, `unknown`, or below the confidence a write needs.
    fn unsure(analyzer: Option<&Diagnosis>) -> bool {
        analyzer.and_then(|d| d.causes.first()).is_none_or(|c| {
            c.class == FaultClass::Unknown || c.confidence < rules::WRITE_CONFIDENCE
        })
    }

    /// Diagnosing a container (or, with a model, a request without one).
    pub(super) async fn diagnose(&self, req: &Request) -> Result<bool, Stop> {
        match self.config.llm.clone() {
            // An update is planned from the registry's digest, which only
            // drydock reads: the rules say what state the target is in.
            Some(setup) if !req.options.update && req.options.build.is_none() => {
                self.diagnose_with_model(req, &setup).await
            }
            _ => self.diagnose_with_rules(req, None, None).await,
        }
    }

    /// The model investigates; whatever it cannot deliver, the rules engine
    /// does, and the request says so (an `llm_fallback` event and a note in
    /// the diagnosis).
    pub(super) async fn diagnose_with_model(
        &self,
        req: &Request,
        setup: &investigate::Setup,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        // Without a target (`llm.investigate: blind`), the model finds it.
        let blind = self.blind(req);
        // The analyzer's view, as the rules path would have it, including
        // the dependency's state; none before there is a target.
        let analyzer = match blind {
            true => None,
            false => self.analyze(req).await?,
        };
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        let rules_view = analyzer.clone();
        self.update(
            id,
            EventPayload::LlmStarted(LlmStarted {
                model: setup.provider.model.clone(),
                analyzer: analyzer.as_ref().map(|d| d.summary.clone()),
            }),
            move |r| r.rules_diagnosis = rules_view,
        )
        .await?;
        let mut cancel = self.control(id).cancel.subscribe();
        let journal = EngineJournal { engine: self, id };
        // A target the rules are unsure of is investigated openly, and
        // every target when the configuration says so.
        let open = blind
            || req.target.is_some()
                && (setup.investigate.always_open() || Self::unsure(analyzer.as_ref()));
        let started = std::time::Instant::now();
        let report = investigate::investigate(
            setup,
            investigate::Input {
                request: &req,
                analyzer: analyzer.as_ref(),
                policy: Self::latest_policy(&req),
                gate: self.write_gate(&req, analyzer.as_ref()),
                open,
                blind,
            },
            self.exec(id).as_ref(),
            &journal,
            &mut cancel,
        )
        .await;
        let usage = report.usage;
        let turns = report.turns;
        let model_run = ModelRun {
            turns,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            open,
        };
        self.update(
            id,
            EventPayload::LlmUsage(LlmUsage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
                model_calls: turns,
            }),
            |r| {
                let u = r.llm_usage.get_or_insert_with(LlmUsage::default);
                u.prompt_tokens += usage.prompt_tokens;
                u.completion_tokens += usage.completion_tokens;
                u.model_calls += turns;
            },
        )
        .await?;
        match report.verdict {
            Verdict::Canceled => Err(Stop::Canceled),
            Verdict::Answer {
                answer,
                evidence_ids,
            } => {
                self.update(
                    id,
                    EventPayload::Answer(Answer {
                        answer: answer.clone(),
                        evidence_ids: evidence_ids.clone(),
                    }),
                    |_| {},
                )
                .await?;
                self.finish(id, Status::Completed, answer).await?;
                Ok(false)
            }
            Verdict::Clarify { question } => {
                self.finish(id, Status::NeedsClarification, question)
                    .await?;
                Ok(false)
            }
            Verdict::Fallback { reason } => {
                tracing::warn!(request_id = %id, reason = %reason, "falling back to the rules engine");
                self.update(
                    id,
                    EventPayload::LlmFallback(Message::new(format!(
                        "{reason}; the rules engine decides"
                    ))),
                    |_| {},
                )
                .await?;
                // A blind investigation that failed: discovery's one
                // candidate, if it found one, is diagnosed by the rules.
                let found = match req.candidates.as_slice() {
                    [one] if blind && one.score > 0 => Some(one.clone()),
                    _ => None,
                };
                if let Some(c) = found {
                    let target = Target::container(
                        c.container_id.clone(),
                        c.container_name.clone(),
                        c.service.clone(),
                        c.host.clone(),
                    );
                    let why = format!(
                        "{} (discovery's choice, as the model gave no answer)",
                        c.why
                    );
                    return match self.adopt_target(&req, target, why).await? {
                        Some(req) => self.diagnose_with_rules(&req, Some(reason), None).await,
                        None => Ok(false),
                    };
                }
                if req.target.is_none() {
                    let outcome = Self::clarification(&req, &req.candidates);
                    self.finish(id, Status::NeedsClarification, outcome).await?;
                    return Ok(false);
                }
                self.diagnose_with_rules(&req, Some(reason), analyzer).await
            }
            Verdict::Diagnosis {
                mut diagnosis,
                mut plan,
                note,
            } => {
                diagnosis.model = Some(model_run);
                // The target the model chose is observed as any target is,
                // and the model's steps held to what that evidence shows.
                let req = match report.chosen.filter(|_| req.target.is_none()) {
                    Some(chosen) => {
                        let class = diagnosis.causes.first().map(|c| c.class);
                        match self.take_chosen(&req, chosen, plan.as_mut(), class).await? {
                            Some(req) => req,
                            None => return Ok(false),
                        }
                    }
                    None => req,
                };
                if let Some(note) = &note {
                    self.update(
                        id,
                        EventPayload::LlmFallback(Message::new(format!(
                            "{note}; the rules planner plans from the model's diagnosis"
                        ))),
                        |_| {},
                    )
                    .await?;
                }
                if let Some(note) = &note {
                    diagnosis.summary = format!(
                        "{} (planned by the rules planner: {note})",
                        diagnosis.summary
                    );
                }
                self.update(
                    id,
                    EventPayload::Diagnosis(DiagnosisMade {
                        diagnosis: diagnosis.clone(),
                    }),
                    |r| r.diagnosis = Some(diagnosis.clone()),
                )
                .await?;
                if req.options.diagnose_only || req.target.is_none() {
                    let outcome = format!(
                        "diagnosis: {} (confidence {:.0}%). {}",
                        diagnosis.summary,
                        diagnosis.confidence * 100.0,
                        if Self::asks(&req) {
                            "This was a question, so no plan was proposed; say what to fix to get one."
                        } else if req.options.diagnose_only {
                            "Suggest-only mode: no plan was proposed."
                        } else {
                            "No single target container, so no plan."
                        }
                    );
                    self.finish(id, Status::Completed, outcome).await?;
                    return Ok(false);
                }
                if let Some(plan) = plan {
                    self.llm_plans
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id.clone(), plan);
                }
                self.set_status(id, Status::Planning, "planning").await?;
                Ok(true)
            }
        }
    }

    /// A blind investigation's target, as the model chose it: recorded,
    /// observed (with the shape and the dependency the evidence shows,
    /// which the gate reads), and each step of the model's plan held to
    /// that evidence; a step it does not support is dropped, and the
    /// plan's advice says why. `None` when a read ended the request.
    async fn take_chosen(
        &self,
        req: &Request,
        chosen: Target,
        plan: Option<&mut Plan>,
        class: Option<FaultClass>,
    ) -> Result<Option<Request>, Stop> {
        let why = "the model chose it among the containers listed".to_string();
        let Some(req) = self.adopt_target(req, chosen, why).await? else {
            return Ok(None);
        };
        let Some(target) = req.target.clone() else {
            return Ok(None);
        };
        let analyzer = req.rules_diagnosis.clone();
        if let Some(plan) = plan {
            let gate = self.write_gate(&req, analyzer.as_ref());
            // A container that runs well by drydock's own reading is no
            // target of a write, whatever the model made of it.
            let well = Self::observed(&req).is_some_and(|o| {
                o.container.running
                    && o.container.health_status != HealthStatus::Unhealthy
                    && !o.container.restarting
            }) && analyzer
                .as_ref()
                .and_then(|d| d.causes.first())
                .is_none_or(|c| c.class == FaultClass::Healthy);
            let allowed = crate::llm::validate::write_targets(Some(&target), &req.evidence);
            let mut kept = Vec::new();
            for step in std::mem::take(&mut plan.steps) {
                let on = step.target();
                if on.id() == target.id() {
                    // The planning phase says why a write on the target
                    // is not proposed.
                    if well {
                        plan.advice.push(format!(
                            "drydock dropped the model's step `{} {}`: by its own evidence it runs and is healthy.",
                            step.action(),
                            on.name()
                        ));
                    } else if gate.refusal(true, class).is_none() {
                        kept.push(step);
                    }
                } else if allowed.contains_key(on.id()) {
                    kept.push(step);
                } else {
                    plan.advice.push(format!(
                        "drydock dropped the model's step `{} {}`: nothing in {}'s evidence shows it depends on {}.",
                        step.action(),
                        on.name(),
                        target.name(),
                        on.name()
                    ));
                }
            }
            plan.steps = kept;
            plan.digest = crate::planner::digest(&plan.steps);
        }
        Ok(Some(req))
    }

    /// A target found without discovery's choice (a blind investigation's):
    /// recorded with `why`, observed as any target, and read by the rules
    /// (its shape, the dependency its logs name), their reading kept as
    /// `rules_diagnosis`. `None` when a read ended the request.
    async fn adopt_target(
        &self,
        req: &Request,
        target: Target,
        why: String,
    ) -> Result<Option<Request>, Stop> {
        let id = &req.id;
        let chosen = target.clone();
        self.update(
            id,
            EventPayload::Target(TargetChosen { target, why }),
            move |r| r.target = Some(chosen),
        )
        .await?;
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        let Some(target) = req.target.clone() else {
            return Ok(None);
        };
        let Some(gathered) = self.gather(&req, &target, None, false).await? else {
            return Ok(None);
        };
        self.record(id, gathered, None).await?;
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        let analyzer = self.analyze(&req).await?;
        self.update_with_events::<StoreError>(id, Vec::new(), |r| {
            r.rules_diagnosis = analyzer;
            Ok(())
        })
        .await?;
        Ok(Some(self.store.get(id)?.ok_or(Stop::Canceled)?))
    }

    /// A blind investigation (`llm.investigate: blind`): a person's
    /// request, naming no container, on one host; the model finds the
    /// target. Requests a watch, an alert or a schedule opened keep
    /// discovery's choice, so no grant ever acts on a model's.
    pub(super) fn blind(&self, req: &Request) -> bool {
        self.config
            .llm
            .as_ref()
            .is_some_and(|s| s.investigate == crate::config::Investigate::Blind)
            && req.target.is_none()
            && req.options.container.is_none()
            && req.source == RequestSource::Ask
            && !self.hosts.named()
    }

    /// The rules engine's diagnosis. `model_note` says why a configured model
    /// did not decide (it is appended to the summary).
    pub(super) async fn diagnose_with_rules(
        &self,
        req: &Request,
        model_note: Option<String>,
        analyzed: Option<Diagnosis>,
    ) -> Result<bool, Stop> {
        let id = &req.id;
        // The model path already ran the rules (and looked at the
        // dependency); do not look twice.
        let mut diagnosis = match analyzed {
            Some(d) => d,
            None => match self.analyze(req).await? {
                Some(d) => d,
                None => {
                    self.finish(id, Status::Failed, "no evidence to diagnose".into())
                        .await?;
                    return Ok(false);
                }
            },
        };
        if let Some(note) = model_note {
            diagnosis.summary = format!(
                "{} (diagnosed by the rules engine: {note})",
                diagnosis.summary
            );
        }
        self.update(
            id,
            EventPayload::Diagnosis(DiagnosisMade {
                diagnosis: diagnosis.clone(),
            }),
            |r| r.diagnosis = Some(diagnosis.clone()),
        )
        .await?;
        if req.options.diagnose_only {
            let outcome = format!(
                "diagnosis: {} (confidence {:.0}%). {}",
                diagnosis.summary,
                diagnosis.confidence * 100.0,
                if Self::asks(req) {
                    "This was a question, so no plan was proposed; say what to fix to get one."
                } else {
                    "Suggest-only mode: no plan was proposed."
                }
            );
            self.finish(id, Status::Completed, outcome).await?;
            return Ok(false);
        }
        self.set_status(id, Status::Planning, "planning").await?;
        Ok(true)
    }
}
