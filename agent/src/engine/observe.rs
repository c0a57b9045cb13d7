//! Observe: find the target among the containers the executor shows, then
//! read what a person on call would look at first — its state, the
//! executor's policy, its logs and (when it runs) its resource use — each as
//! evidence.

use super::{Engine, Gathered, RunbookEvidence, Stop};
use crate::discovery::{self, Discovery};
use crate::model::*;

/// How far back `ContainerEvents` may look (the executor's bound), less a
/// minute for the clocks.
const EVENTS_LOOKBACK_SECS: i64 = 7 * 86_400 - 60;
/// What a container logged in the hour before a death is what explains it.
const DEATH_LOGS_WINDOW_SECS: i64 = 3600;

impl Engine {
    /// Observe: find the target, then gather its state and logs.
    pub(super) async fn observe(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        // Reads that do not depend on each other go out together: the
        // policy with the list, then the state, logs and usage together.
        let mut policy_read = None;
        // Whether the list says the target runs (its usage is then read
        // along with its state).
        let mut listed_running = false;
        if req.target.is_none() {
            let (listed, policy) =
                tokio::join!(self.executor.list(id, true), self.executor.policy(id));
            policy_read = Some(policy);
            let Some(containers) = self.required(id, "list containers", listed).await? else {
                return Ok(false);
            };
            let summary = format!("{} containers visible", containers.len());
            self.add_evidence(
                id,
                "container_list",
                "ListContainers",
                serde_json::to_value(&containers).unwrap_or_default(),
                summary,
            )
            .await?;
            let found = match &req.options.container {
                Some(name) => discovery::exact(name, &containers),
                None => discovery::discover(&req.message, &containers),
            };
            match found {
                Discovery::Found(c) => {
                    listed_running = containers
                        .iter()
                        .any(|x| x.id == c.container_id && x.state == "running");
                    let target = Target {
                        kind: "container".into(),
                        container_id: c.container_id.clone(),
                        container_name: c.container_name.clone(),
                        service: c.service.clone(),
                    };
                    self.update(
                        id,
                        EventPayload::Target(TargetChosen {
                            target: target.clone(),
                            why: c.why.clone(),
                        }),
                        |r| r.target = Some(target.clone()),
                    )
                    .await?;
                }
                Discovery::Ambiguous(cands) | Discovery::NoMatch(cands) => {
                    let outcome = Self::clarification(&req.message, &cands);
                    self.update(
                        id,
                        EventPayload::Candidates(CandidatesFound {
                            candidates: cands.clone(),
                        }),
                        |r| r.candidates = cands.clone(),
                    )
                    .await?;
                    if self.config.llm.is_some() && req.options.container.is_none() {
                        // A question ("which containers use the most
                        // memory?") names no container: the model may
                        // answer it from evidence, or ask its own question.
                        let policy = match policy_read.take() {
                            Some(read) => read,
                            None => self.executor.policy(id).await,
                        };
                        if self.policy_evidence(id, policy).await?.is_none() {
                            return Ok(false);
                        }
                        self.set_status(
                            id,
                            Status::Diagnosing,
                            "no single target; the model investigates",
                        )
                        .await?;
                        return Ok(true);
                    }
                    self.finish(id, Status::NeedsClarification, outcome).await?;
                    return Ok(false);
                }
            }
        }
        let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
        let Some(target) = req.target.clone() else {
            return Ok(false);
        };
        let mut gathered = Vec::new();
        if !req.evidence.iter().any(|e| e.kind == "runbook") {
            if let Some(entry) = self.runbook_evidence(&target) {
                gathered.push(entry);
            }
        }
        let policy = match policy_read {
            Some(read) => read,
            None => self.executor.policy(id).await,
        };
        let Some(policy) = self
            .required(id, "read the executor's policy", policy)
            .await?
        else {
            return Ok(false);
        };
        // Never ask for more than the executor allows: it refuses, not clamps.
        let tail = match policy.logs_max_lines {
            0 => self.config.logs_tail,
            max => self.config.logs_tail.min(max),
        };
        let cid = &target.container_id;
        // A question looks further back than the hour a report needs: to
        // the time it names, or a day.
        let now = unix_now();
        let asked =
            crate::rules::question::asked_in(&req.message, req.options.utc_offset_minutes, now);
        let (events_since, events_limit) = match asked {
            Some(a) => ((a.unix - 3600).clamp(now - EVENTS_LOOKBACK_SECS, now), 256),
            None if crate::rules::is_question(&req.message) => (now - 86_400, 256),
            None => (now - 3600, 100),
        };
        let stats_now = async {
            if listed_running {
                Some(self.executor.stats(id, cid).await)
            } else {
                None
            }
        };
        let (inspected, logs, stats, engine_events) = tokio::join!(
            self.executor.inspect(id, cid),
            self.executor.logs(id, cid, tail),
            stats_now,
            self.executor
                .container_events(id, cid, events_since, events_limit)
        );
        let call = format!("inspect {}", target.container_name);
        let Some(container) = self.required(id, &call, inspected).await? else {
            return Ok(false);
        };
        let call = format!("read logs of {}", target.container_name);
        let Some(logs) = self.required(id, &call, logs).await? else {
            return Ok(false);
        };
        // Resource usage backs memory and CPU advice; read only for a
        // running container, and a failure is not worth failing over.
        let stats = match stats {
            Some(read) if container.running => Some(read),
            Some(_) => None,
            None if container.running => Some(self.executor.stats(id, cid).await),
            None => None,
        };
        gathered.push(Gathered::new(
            "inspect",
            "InspectContainer",
            serde_json::to_value(&container).unwrap_or_default(),
            format!(
                "state={} exit={} health={} oom_killed={} restarts={}",
                container.status,
                container.exit_code,
                container.health_status,
                container.oom_killed,
                container.restart_count
            ),
        ));
        // What the engine recorded of it (an OOM kill a restart hid, who
        // stopped it, how often it died), and before the engine's own
        // record (it keeps 256 events) the watcher's journal.
        let journaled = crate::store::journal::for_container(
            &self.store,
            &container.id,
            events_since.saturating_mul(1_000_000_000),
            events_limit,
        )?;
        let (events, source) = match engine_events {
            Ok(engine) => {
                let oldest = engine.first().map_or(i64::MAX, |e| e.time_nanos);
                let mut events: Vec<_> = journaled
                    .into_iter()
                    .filter(|e| e.time_nanos < oldest)
                    .collect();
                let source = if events.is_empty() {
                    "ContainerEvents"
                } else {
                    "WatchEvents (journal), ContainerEvents"
                };
                events.extend(engine);
                (events, source)
            }
            Err(e) => {
                tracing::warn!(request_id = %id, error = %e, "container events unavailable");
                (journaled, "WatchEvents (journal)")
            }
        };
        if !events.is_empty() {
            gathered.push(Gathered::new(
                "events",
                source,
                serde_json::to_value(&events).unwrap_or_default(),
                format!(
                    "since {}: {}",
                    crate::rules::events::clock_of(events_since),
                    crate::rules::events::timeline(&events)
                ),
            ));
        }
        // A death it has moved on from (started again since, or the one a
        // question names): what it logged up to that moment. Docker's
        // logs run on across restarts, so its newest lines are of the run
        // after it.
        if let Some(die) =
            crate::rules::events::past_death(&events, container.running, asked.map(|a| a.unix))
        {
            let died = die.time_nanos.div_euclid(1_000_000_000);
            match self
                .executor
                .logs_window(id, cid, tail, died - DEATH_LOGS_WINDOW_SECS, died)
                .await
            {
                Ok(mut logs) => {
                    logs.lines.retain(|l| l.time_unix_nanos <= die.time_nanos);
                    let summary = format!(
                        "{} lines before it died at {}{}",
                        logs.lines.len(),
                        crate::rules::events::clock(die),
                        die.exit_code
                            .map(|c| format!(" (exit {c})"))
                            .unwrap_or_default()
                    );
                    let death = DeathLogs {
                        died_at_unix_nanos: die.time_nanos,
                        exit_code: die.exit_code,
                        logs,
                    };
                    gathered.push(Gathered::new(
                        "death_logs",
                        "ContainerLogs",
                        serde_json::to_value(&death).unwrap_or_default(),
                        summary,
                    ));
                }
                Err(e) => {
                    tracing::warn!(request_id = %id, error = %e, "logs before the death unavailable")
                }
            }
        }
        gathered.push(Self::policy_gathered(&policy));
        gathered.push(Gathered::new(
            "logs",
            "ContainerLogs",
            serde_json::to_value(&logs).unwrap_or_default(),
            format!(
                "{} lines{}{}",
                logs.lines.len(),
                if logs.truncated { ", truncated" } else { "" },
                if logs.redactions > 0 {
                    format!(", {} secrets redacted", logs.redactions)
                } else {
                    String::new()
                }
            ),
        ));
        match stats {
            Some(Ok(stats)) => gathered.push(Gathered::new(
                "stats",
                "ContainerStats",
                serde_json::to_value(&stats).unwrap_or_default(),
                format!(
                    "cpu {:.1}%, memory {} of {} ({:.0}%)",
                    stats.cpu_percent,
                    crate::text::human_bytes(stats.memory_usage_bytes),
                    crate::text::human_bytes(stats.memory_limit_bytes),
                    stats.memory_percent
                ),
            )),
            Some(Err(e)) => tracing::warn!(request_id = %id, error = %e, "stats unavailable"),
            None => {}
        }
        // The phase's evidence and its end, in one transaction.
        self.record(
            id,
            gathered,
            Some((Status::Diagnosing, "evidence gathered")),
        )
        .await?;
        Ok(true)
    }

    /// The runbook's entry for the target, if it has one.
    fn runbook_evidence(&self, target: &Target) -> Option<Gathered> {
        let (service, notes) = self
            .config
            .runbook
            .lookup(target.service.as_deref(), &target.container_name)?;
        let entry = RunbookEvidence {
            service: service.to_string(),
            depends_on: notes.depends_on.clone(),
            http_check: notes.http_check.clone(),
            notes: notes.notes.clone(),
        };
        let summary = format!(
            "runbook entry `{service}`: depends on [{}]{}",
            entry.depends_on.join(", "),
            entry
                .notes
                .as_ref()
                .map(|n| format!("; notes: {n}"))
                .unwrap_or_default()
        );
        Some(Gathered::new(
            "runbook",
            "runbook",
            serde_json::to_value(&entry).unwrap_or_default(),
            summary,
        ))
    }

    fn policy_gathered(policy: &PolicyView) -> Gathered {
        Gathered::new(
            "policy",
            "GetPolicy",
            serde_json::to_value(policy).unwrap_or_default(),
            format!(
                "start={} restart={} stop={} http_checks=[{}]",
                policy.start_enabled,
                policy.restart_enabled,
                policy.stop_enabled,
                policy.http_checks.join(", ")
            ),
        )
    }

    /// The executor's policy, recorded as evidence; `None` when the request
    /// was failed because it could not be read.
    pub(super) async fn policy_evidence(
        &self,
        id: &str,
        read: Result<PolicyView, crate::executor_client::ExecutorError>,
    ) -> Result<Option<PolicyView>, Stop> {
        let Some(policy) = self
            .required(id, "read the executor's policy", read)
            .await?
        else {
            return Ok(None);
        };
        self.record(id, vec![Self::policy_gathered(&policy)], None)
            .await?;
        Ok(Some(policy))
    }

    /// What to ask the operator when no single container fits.
    pub(super) fn clarification(message: &str, cands: &[Candidate]) -> String {
        let ambiguous = cands.iter().all(|c| c.score > 0) && !cands.is_empty();
        let names: Vec<String> = cands.iter().map(|c| c.container_name.clone()).collect();
        if ambiguous {
            format!(
                "more than one container fits: {}. Ask again with --container NAME.",
                names.join(", ")
            )
        } else if names.is_empty() {
            "no container matches and none is visible to the executor".to_string()
        } else {
            format!("no container matches \"{}\". Visible containers: {}. Ask again with --container NAME.", message, names.join(", "))
        }
    }
}
