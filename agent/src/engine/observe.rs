//! Observe: find the target among the containers the executor shows, then
//! read what a person on call would look at first — its state, the
//! executor's policy, its logs and (when it runs) its resource use — each as
//! evidence.

use super::{Engine, Gathered, Stop};

use crate::executor_client::ExecutorError;
use crate::model::*;

/// How far back `ContainerEvents` may look (the executor's bound), less a
/// minute for the clocks.
const EVENTS_LOOKBACK_SECS: i64 = 7 * 86_400 - 60;
/// What a container logged in the hour before a death is what explains it.
const DEATH_LOGS_WINDOW_SECS: i64 = 3600;
/// How long after a die event its run's last lines may be timed.
const LAST_LINES_SLACK_NANOS: i64 = 1_000_000_000;

/// What finding the target left for the reads that follow.
pub(super) enum Found {
    /// The request has its target; `policy` is the read made alongside
    /// the list, and `running` whether the list showed it running.
    Target {
        policy: Option<Box<Result<PolicyView, ExecutorError>>>,
        running: bool,
    },
    /// No single container: the model investigates (with the policy
    /// recorded), so diagnosis goes on without a target.
    ModelInvestigates,
    /// The request ended (asked for clarification, or a read failed).
    Ended,
}

impl Engine {
    /// Observe, in three steps: find the target (`find_target`), read it
    /// (`read_target`: state, logs, usage and engine events at once), and
    /// record what a past death left (`death_logs`); the phase's evidence
    /// and its end are saved in one transaction.
    /// Observing without a target: find it (`find_target`). What finding
    /// it read (the policy, whether the list showed it running) is kept
    /// for the observation that follows.
    pub(super) async fn find(&self, req: &Request) -> Result<bool, Stop> {
        match self.find_target(req).await? {
            Found::Target { policy, running } => {
                self.found
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(req.id.clone(), (policy, running));
                Ok(true)
            }
            Found::ModelInvestigates => Ok(true),
            Found::Ended => Ok(false),
        }
    }

    /// What `find` read, for the observation of the target it found (none
    /// on a later round, or after a restart).
    fn found_read(&self, id: &str) -> (Option<Box<Result<PolicyView, ExecutorError>>>, bool) {
        self.found
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
            .unwrap_or((None, false))
    }

    /// The executor's policy: what `find` read, or read now; `None` when
    /// the request was failed because it could not be read.
    async fn current_policy(
        &self,
        id: &str,
        read: Option<Box<Result<PolicyView, ExecutorError>>>,
    ) -> Result<Option<PolicyView>, Stop> {
        let policy = match read {
            Some(read) => *read,
            None => self.exec(id).policy(id).await,
        };
        self.required(id, "read the executor's policy", policy)
            .await
    }

    /// Observing a Swarm service: its policy, then its definition, tasks,
    /// nodes and logs (`swarm.rs`).
    pub(super) async fn observe_service(&self, req: &Request) -> Result<bool, Stop> {
        let (policy_read, _) = self.found_read(&req.id);
        let Some(target) = req.target.clone() else {
            return Ok(false);
        };
        let Some(policy) = self.current_policy(&req.id, policy_read).await? else {
            return Ok(false);
        };
        self.read_service(req, &target, &policy).await
    }

    /// Observing a container.
    pub(super) async fn observe(&self, req: &Request) -> Result<bool, Stop> {
        let id = &req.id;
        let (policy_read, listed_running) = self.found_read(id);
        let Some(target) = req.target.clone() else {
            return Ok(false);
        };
        // After a write (a new round), an executor that does not answer is
        // waited for, within the verification deadline, before reading.
        if !req.execution.is_empty() {
            let until = std::time::Instant::now() + self.config.verify_max_wait;
            let ex = self.exec(id);
            let (answer, _) = self
                .through_outage(id, "observing again", until, || ex.inspect(id, target.id()))
                .await?;
            if let Err(e) = answer.as_ref() {
                if e.is_outage() {
                    self.outage_outlasted(id, e).await?;
                    return Ok(false);
                }
            }
        }
        let Some(gathered) = self
            .gather(req, &target, policy_read, listed_running)
            .await?
        else {
            return Ok(false);
        };
        // The phase's evidence and its end, in one transaction.
        self.record(
            id,
            gathered,
            Some((Status::Diagnosing, "evidence gathered")),
        )
        .await?;
        Ok(true)
    }

    /// What a person on call reads of the target: the runbook's entry,
    /// its state, what changed, its events, a past death's last lines,
    /// history and notes, the policy, its logs and usage. `None` when a
    /// required read failed and ended the request.
    pub(super) async fn gather(
        &self,
        req: &Request,
        target: &Target,
        policy_read: Option<Box<Result<PolicyView, ExecutorError>>>,
        listed_running: bool,
    ) -> Result<Option<Vec<Gathered>>, Stop> {
        let id = &req.id;
        let mut gathered = Vec::new();
        if req.latest::<kind::Runbook>().is_none() {
            gathered.extend(self.runbook_evidence(target));
        }
        let Some(policy) = self.current_policy(id, policy_read).await? else {
            return Ok(None);
        };
        let Some(read) = self
            .read_target(req, target, &policy, listed_running)
            .await?
        else {
            return Ok(None);
        };
        gathered.push(Gathered::inspect(&read.container));
        if req.options.update {
            let Some(registry) = self.registry_gathered(req, target).await? else {
                return Ok(None);
            };
            gathered.push(registry);
        }
        if let Some(build) = &req.options.build {
            let Some(source) = self.build_gathered(req, target, &build.at).await? else {
                return Ok(None);
            };
            gathered.push(source);
        }
        gathered.extend(self.what_changed(req, &read).await?);
        if !read.events.is_empty() {
            gathered.push(Gathered::new(
                read.events_source,
                EvidencePayload::Events(read.events.clone()),
                format!(
                    "since {}: {}",
                    crate::rules::events::clock_of(read.events_since),
                    crate::rules::events::timeline(&read.events)
                ),
            ));
        }
        gathered.extend(self.death_logs(req, &read).await);
        if req.latest::<kind::History>().is_none() && req.latest::<kind::Notes>().is_none() {
            gathered.extend(self.remembered(req, target, &read.container));
        }
        gathered.push(Self::policy_gathered(&policy));
        gathered.push(Gathered::logs(&read.logs, "ContainerLogs"));
        gathered.extend(read.stats.as_ref().map(Gathered::stats));
        Ok(Some(gathered))
    }

    /// What a person on call looks at first, read together: the state, the
    /// logs, the usage (of a running container) and the engine's events,
    /// with the watcher's journal before the engine's own record. `None`
    /// when a required read failed and ended the request.
    async fn read_target(
        &self,
        req: &Request,
        target: &Target,
        policy: &PolicyView,
        listed_running: bool,
    ) -> Result<Option<TargetRead>, Stop> {
        let id = &req.id;
        // Never ask for more than the executor allows: it refuses, not clamps.
        let tail = match policy.logs_max_lines {
            0 => self.config.logs_tail,
            max => self.config.logs_tail.min(max),
        };
        let cid = &target.id();
        // A question looks further back than the hour a report needs: to
        // the time it names, or a day.
        let now = unix_now();
        let asked = Self::asked(req, now);
        let (events_since, events_limit) = match asked {
            Some(a) => ((a.unix - 3600).clamp(now - EVENTS_LOOKBACK_SECS, now), 256),
            None if Self::asks(req) => (now - 86_400, 256),
            None => (now - 3600, 100),
        };
        // The usage sample takes about a second (the engine's collector);
        // it starts with the other reads and is waited for only when it can
        // change the answer (`usage_matters`).
        let stats_read = listed_running.then(|| self.spawn_stats(id, cid));
        let ex = self.exec(id);
        let (inspected, logs, engine_events) = tokio::join!(
            ex.inspect(id, cid),
            ex.logs(id, cid, tail),
            ex.container_events(id, cid, events_since, events_limit)
        );
        let call = format!("inspect {}", target.name());
        let Some(container) = self.required(id, &call, inspected).await? else {
            return Ok(None);
        };
        let call = format!("read logs of {}", target.name());
        let Some(logs) = self.required(id, &call, logs).await? else {
            return Ok(None);
        };
        // Resource usage backs memory and CPU advice; read only for a
        // running container, and a failure is not worth failing over.
        let stats = match stats_read {
            Some(read) if !container.running => {
                read.abort();
                None
            }
            Some(read) => Some(read),
            None if container.running => Some(self.spawn_stats(id, cid)),
            None => None,
        };
        let stats = match stats {
            Some(read) if read.is_finished() || self.usage_matters(req, &container) => {
                match read.await {
                    Ok(Ok(stats)) => Some(stats),
                    Ok(Err(e)) => {
                        tracing::warn!(request_id = %id, error = %e, "stats unavailable");
                        None
                    }
                    Err(_) => None,
                }
            }
            Some(read) => {
                self.pending_stats
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(id.to_string(), read);
                None
            }
            None => None,
        };
        // What the engine recorded of it (an OOM kill a restart hid, who
        // stopped it, how often it died), and before the engine's own
        // record (it keeps 256 events) the watcher's journal.
        let journaled = crate::store::journal::for_container(
            &self.store,
            &container.id,
            events_since.saturating_mul(1_000_000_000),
            events_limit,
        )?;
        let (events, events_source) = match engine_events {
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
        Ok(Some(TargetRead {
            container,
            logs,
            stats,
            events,
            events_source,
            events_since,
            asked: asked.map(|a| a.unix),
            tail,
        }))
    }

    /// Read a running container's usage in a task of its own, so that
    /// nothing waits on it unless it must.
    fn spawn_stats(&self, id: &str, cid: &str) -> super::PendingStats {
        let (ex, id, cid) = (self.exec(id), id.to_string(), cid.to_string());
        tokio::spawn(async move { ex.stats(&id, &cid).await })
    }

    /// Whether a usage sample can change the answer: the OOM flag (the
    /// advice names the use), a question about resources, or a model
    /// (it reads all the evidence). Otherwise the cause is told by the
    /// state, the health log and the logs, and the sample is attached
    /// when it arrives (`attach_arrived_stats`).
    fn usage_matters(&self, req: &Request, container: &ContainerView) -> bool {
        container.oom_killed
            || self.config.llm.is_some()
            || crate::rules::asks_about_usage(&req.question())
    }

    /// A usage sample observation did not wait for, once it has arrived:
    /// recorded as evidence (called between phases; never waits).
    pub(super) async fn attach_arrived_stats(&self, id: &str) -> Result<(), Stop> {
        let arrived = {
            let mut pending = self.pending_stats.lock().unwrap_or_else(|p| p.into_inner());
            match pending.get(id) {
                Some(read) if read.is_finished() => pending.remove(id),
                _ => None,
            }
        };
        if let Some(read) = arrived {
            match read.await {
                Ok(Ok(stats)) => self.record(id, vec![Gathered::stats(&stats)], None).await?,
                Ok(Err(e)) => tracing::warn!(request_id = %id, error = %e, "stats unavailable"),
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Remember what the target is, and compare it with the last
    /// incarnation of its service the agent remembers: `change` evidence
    /// when something of its definition differs (whether the change is to
    /// blame is diagnosis' call).
    async fn what_changed(
        &self,
        req: &Request,
        read: &TargetRead,
    ) -> Result<Option<Gathered>, Stop> {
        use crate::change::{self, Remembered};
        use crate::store::fingerprints;
        let now = unix_now();
        let current = change::fingerprint(&read.container);
        let host = req.host().unwrap_or_default();
        fingerprints::record(&self.store, &current, host, now)?;
        let failing = change::failing_since(&read.container, now);
        if let Some(at) = failing {
            fingerprints::failed(&self.store, &current.container_id, at)?;
        }
        let created = change::unix_of(&current.created);
        let Some(previous) = fingerprints::predecessors(&self.store, &current, host, 8)?
            .into_iter()
            .find(
                |p| match (change::unix_of(&p.fingerprint.created), created) {
                    (Some(then), Some(now)) => then < now,
                    _ => true,
                },
            )
        else {
            return Ok(None);
        };
        let failed_at = fingerprints::get(&self.store, &current.container_id)?
            .and_then(|r| r.failed_at)
            .or(failing);
        let old_image = &previous.fingerprint.image_id;
        let present = if !old_image.is_empty() && *old_image != current.image_id {
            match self.exec(&req.id).image(&req.id, old_image).await {
                Ok(i) => Some(i.present),
                Err(e) => {
                    tracing::warn!(request_id = %req.id, error = %e, "cannot tell whether the previous image is on the engine");
                    None
                }
            }
        } else {
            None
        };
        let remembered = Remembered {
            fingerprint: previous.fingerprint,
            failed_at: previous.failed_at,
        };
        let made_by =
            self.store
                .made_container(&current.container_id)?
                .map(|(request_id, action)| crate::model::MadeBy {
                    request_id,
                    action: action.as_str().to_string(),
                });
        Ok(
            change::compare(&remembered, &current, failed_at, present).map(|mut c| {
                if let Some(by) = made_by {
                    c.said.push_str(&format!(
                        "; drydock made this change: the {} of request {}",
                        by.action, by.request_id
                    ));
                    c.made_by = Some(by);
                }
                Gathered::new(
                    "InspectContainer (remembered definitions), InspectImage",
                    EvidencePayload::Change(c.clone()),
                    format!("what changed: {}", c.said),
                )
            }),
        )
    }

    /// A death it has moved on from (started again since, or the one a
    /// question names): what it logged up to that moment. Docker's logs run
    /// on across restarts, so its newest lines are of the run after it.
    async fn death_logs(&self, req: &Request, read: &TargetRead) -> Option<Gathered> {
        let die =
            crate::rules::events::past_death(&read.events, read.container.running, read.asked)?;
        let died = die.time_nanos.div_euclid(1_000_000_000);
        // Docker times a line as it reads the pipe, which can be after the
        // die event for the last lines a program wrote: lines up to a
        // moment after it, never into the run that a start began.
        let next_start = read
            .events
            .iter()
            .filter(|e| e.action == EventAction::Start && e.time_nanos > die.time_nanos)
            .map(|e| e.time_nanos)
            .min();
        let until = next_start.map_or(die.time_nanos + LAST_LINES_SLACK_NANOS, |s| {
            s.min(die.time_nanos + LAST_LINES_SLACK_NANOS)
        });
        let cid = &read.container.id;
        let mut logs = match self
            .exec(&req.id)
            .logs_window(
                &req.id,
                cid,
                read.tail,
                died - DEATH_LOGS_WINDOW_SECS,
                until.div_euclid(1_000_000_000) + 1,
            )
            .await
        {
            Ok(logs) => logs,
            Err(e) => {
                tracing::warn!(request_id = %req.id, error = %e, "logs before the death unavailable");
                return None;
            }
        };
        logs.lines.retain(|l| l.time_unix_nanos < until);
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
        Some(Gathered::new(
            "ContainerLogs",
            EvidencePayload::DeathLogs(death.clone()),
            summary,
        ))
    }

    /// The runbook's entry for the target, if it has one.
    fn runbook_evidence(&self, target: &Target) -> Option<Gathered> {
        let (service, notes) = self
            .config
            .runbook
            .lookup(target.compose_service(), target.name())?;
        let entry = RunbookEntry {
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
            EvidencePayload::Runbook(entry),
            summary,
        ))
    }

    pub(super) fn policy_gathered(policy: &PolicyView) -> Gathered {
        Gathered::new(
            "GetPolicy",
            EvidencePayload::Policy(policy.clone()),
            format!(
                "start={} restart={} stop={} http_checks=[{}]",
                policy.actions.enabled(WriteAction::Start),
                policy.actions.enabled(WriteAction::Restart),
                policy.actions.enabled(WriteAction::Stop),
                policy.http_checks.join(", ")
            ),
        )
    }

    /// The executor's policy, recorded as evidence; `None` when the request
    /// was failed because it could not be read.
    pub(super) async fn policy_evidence(
        &self,
        id: &str,
        read: Result<PolicyView, ExecutorError>,
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
}

/// What `read_target` read of the target.
struct TargetRead {
    container: ContainerView,
    logs: LogsView,
    stats: Option<StatsView>,
    /// Its engine events, oldest first, and where they came from.
    events: Vec<ContainerEvent>,
    events_source: &'static str,
    events_since: i64,
    /// The time a question named, in unix seconds.
    asked: Option<i64>,
    /// Log lines asked for (within the executor's cap).
    tail: u32,
}

impl Gathered {
    fn inspect(c: &ContainerView) -> Gathered {
        Gathered::new(
            "InspectContainer",
            EvidencePayload::Inspect(c.clone()),
            format!(
                "state={} exit={} health={} oom_killed={} restarts={}",
                c.status, c.exit_code, c.health_status, c.oom_killed, c.restart_count
            ),
        )
    }

    /// Log lines as evidence; `source` is the RPC that read them.
    pub(super) fn logs(logs: &LogsView, source: &str) -> Gathered {
        Gathered::new(
            source,
            EvidencePayload::Logs(logs.clone()),
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
        )
    }

    fn stats(stats: &StatsView) -> Gathered {
        Gathered::new(
            "ContainerStats",
            EvidencePayload::Stats(stats.clone()),
            format!(
                "cpu {:.1}%, memory {} of {} ({:.0}%)",
                stats.cpu_percent,
                crate::text::human_bytes(stats.memory_usage_bytes),
                crate::text::human_bytes(stats.memory_limit_bytes),
                stats.memory_percent
            ),
        )
    }
}
