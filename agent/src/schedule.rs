//! Schedules' runs. Every few seconds each schedule whose time has come
//! opens a diagnose-only request (`source: schedule`); when that request
//! ends, its answer (healthy or broken) is kept with the schedule, and a
//! change from the answer before is notified (`schedule_changed`), not
//! every run.
//!
//! When a schedule last ran is kept in the store, so an agent that was down
//! runs each schedule that fell due once on start and then keeps the
//! cadence: missed runs are not replayed in a burst.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::engine::Engine;
use crate::model::{
    unix_now, FaultClass, Request, RequestOptions, RequestSource, Schedule, Status, Verdict,
};
use crate::model::{ContainerState, HealthStatus};
use crate::notify::Notifier;
use crate::store::schedules;

pub use crate::model::{MAX_SCHEDULE_SECS as MAX_EVERY_SECS, MIN_SCHEDULE_SECS as MIN_EVERY_SECS};
/// The runs of a schedule the store keeps (its newest): each change of
/// answer was notified with its run's words already.
pub const RUNS_KEPT: u32 = 20;
/// How often the schedules are looked at.
const TICK: Duration = Duration::from_secs(2);
/// How long a run is waited for; one still going by then has no answer.
const RUN_DEADLINE: Duration = Duration::from_secs(600);

/// Whether a schedule is due at `now` (unix seconds): it never ran, a
/// cadence has passed since it last did, or the clock went back by more
/// than a cadence (which would otherwise stall it).
pub fn is_due(s: &Schedule, now: i64) -> bool {
    let every = i64::try_from(s.every_secs).unwrap_or(i64::MAX);
    match s.last_run_unix {
        None => true,
        Some(last) => now >= last.saturating_add(every) || now.saturating_add(every) < last,
    }
}

/// What a finished run found; `None` when it could not tell (it failed,
/// was canceled, or no container fit the words).
pub fn verdict_of(req: &Request) -> Option<Verdict> {
    match req.status {
        Status::Completed => {
            let class = req
                .diagnosis
                .as_ref()
                .and_then(|d| d.causes.first())
                .map(|c| c.class)?;
            Some(match class {
                FaultClass::Healthy | FaultClass::Stopped => Verdict::Healthy,
                _ => Verdict::Broken,
            })
        }
        // Several fit the words: none broken is a healthy answer, any
        // broken a broken one ("is the shop healthy?" over its services).
        Status::NeedsClarification => {
            let fits: Vec<_> = req.candidates.iter().filter(|c| c.score > 0).collect();
            if fits.is_empty() {
                return None;
            }
            let fine = fits.iter().all(|c| {
                c.state == ContainerState::Running && c.health != Some(HealthStatus::Unhealthy)
            });
            Some(if fine {
                Verdict::Healthy
            } else {
                Verdict::Broken
            })
        }
        _ => None,
    }
}

pub struct Scheduler {
    engine: Arc<Engine>,
    notifier: Option<Arc<Notifier>>,
    /// Schedules with a run going: one at a time each.
    running: Mutex<HashSet<String>>,
}

impl Scheduler {
    pub fn spawn(engine: Arc<Engine>, notifier: Option<Arc<Notifier>>) {
        let scheduler = Arc::new(Scheduler {
            engine,
            notifier,
            running: Mutex::new(HashSet::new()),
        });
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                scheduler.run_due().await;
            }
        });
    }

    async fn run_due(self: &Arc<Self>) {
        let all = match schedules::list(self.engine.store()) {
            Ok(all) => all,
            Err(e) => {
                tracing::error!(error = %e, "cannot read the schedules");
                return;
            }
        };
        let now = unix_now();
        for s in all.into_iter().filter(|s| is_due(s, now)) {
            if !self.lock().insert(s.id.clone()) {
                continue;
            }
            let scheduler = self.clone();
            tokio::spawn(async move {
                let id = s.id.clone();
                scheduler.run(s, now).await;
                scheduler.lock().remove(&id);
            });
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn run(&self, s: Schedule, now: i64) {
        let options = RequestOptions {
            diagnose_only: true,
            host: s.host.clone(),
            ..Default::default()
        };
        let opened = self
            .engine
            .open(s.message.clone(), options, RequestSource::Schedule)
            .await;
        let req = match opened {
            Ok(req) => req,
            Err(e) => {
                tracing::error!(schedule = %s.id, error = %e, "a schedule's run could not start");
                return;
            }
        };
        if let Err(e) = schedules::started(self.engine.store(), &s.id, now, &req.id) {
            tracing::error!(schedule = %s.id, error = %e, "cannot record a schedule's run");
            return;
        }
        let Some(done) = self.finished(&req.id).await else {
            tracing::warn!(schedule = %s.id, request_id = %req.id, "a schedule's run did not end in time");
            return;
        };
        if let Err(e) = self.engine.store().prune_runs(&s.message, RUNS_KEPT) {
            tracing::warn!(schedule = %s.id, error = %e, "cannot forget a schedule's old runs");
        }
        let Some(verdict) = verdict_of(&done) else {
            return;
        };
        let was = match schedules::answered(self.engine.store(), &s.id, verdict) {
            Ok(was) => was,
            Err(e) => {
                tracing::error!(schedule = %s.id, error = %e, "cannot record a schedule's answer");
                return;
            }
        };
        // The first answer is where the schedule starts from; a change
        // after it is news.
        if let (Some(was), Some(notifier)) = (was, &self.notifier) {
            if was != verdict {
                notifier.schedule_changed(&s, &done, was, verdict);
            }
        }
    }

    /// The request once it has ended, within `RUN_DEADLINE`.
    async fn finished(&self, id: &str) -> Option<Request> {
        let deadline = tokio::time::Instant::now() + RUN_DEADLINE;
        while tokio::time::Instant::now() < deadline {
            match self.engine.store().status(id) {
                Ok(Some(status)) if status.is_terminal() => match self.engine.store().get(id) {
                    Ok(req) => return req,
                    Err(e) => {
                        tracing::warn!(request_id = %id, error = %e, "cannot read a schedule's run")
                    }
                },
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(e) => {
                    tracing::warn!(request_id = %id, error = %e, "cannot read a schedule's run")
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Candidate, Cause, Diagnosis};

    fn schedule(last: Option<i64>) -> Schedule {
        Schedule {
            id: "sch-1".into(),
            message: "is the shop healthy?".into(),
            every_secs: 3600,
            host: None,
            created_at: String::new(),
            last_run_unix: last,
            last_request_id: None,
            last_verdict: None,
        }
    }

    #[test]
    fn a_schedule_is_due_once_a_cadence_has_passed_and_never_twice_for_missed_runs() {
        assert!(is_due(&schedule(None), 1_000), "never ran");
        assert!(!is_due(&schedule(Some(1_000)), 1_000 + 3599));
        assert!(is_due(&schedule(Some(1_000)), 1_000 + 3600));
        // Down for a day: due, once; after that run the cadence restarts.
        let now = 1_000 + 24 * 3600;
        assert!(is_due(&schedule(Some(1_000)), now));
        assert!(!is_due(&schedule(Some(now)), now + 2));
        // The clock went back by more than a cadence.
        assert!(is_due(&schedule(Some(10_000)), 10_000 - 3601));
        assert!(!is_due(&schedule(Some(10_000)), 10_000 - 60));
    }

    fn finished(status: Status, class: Option<FaultClass>, candidates: Vec<Candidate>) -> Request {
        let mut req = Request::new(
            "req-1".into(),
            "is the shop healthy?".into(),
            RequestOptions::default(),
            RequestSource::Schedule,
            String::new(),
        );
        req.status = status;
        req.candidates = candidates;
        req.diagnosis = class.map(|class| Diagnosis {
            summary: String::new(),
            confidence: 0.9,
            causes: vec![Cause {
                class,
                reason: String::new(),
                confidence: 0.9,
                evidence_ids: vec![],
            }],
            engine: "rules".into(),
            ..Default::default()
        });
        req
    }

    fn fits(state: &str, health: Option<&str>, score: u32) -> Candidate {
        Candidate {
            kind: Default::default(),
            container_id: "c".into(),
            container_name: "shop-web-1".into(),
            image: "i".into(),
            state: state.into(),
            health: health.map(Into::into),
            service: None,
            score,
            why: String::new(),
            host: None,
        }
    }

    #[test]
    fn a_runs_answer_comes_from_its_diagnosis_or_the_containers_that_fit() {
        let done = |class| verdict_of(&finished(Status::Completed, Some(class), vec![]));
        assert_eq!(done(FaultClass::Healthy), Some(Verdict::Healthy));
        assert_eq!(done(FaultClass::Stopped), Some(Verdict::Healthy));
        assert_eq!(done(FaultClass::Unhealthy), Some(Verdict::Broken));
        assert_eq!(done(FaultClass::Unknown), Some(Verdict::Broken));
        assert_eq!(verdict_of(&finished(Status::Failed, None, vec![])), None);
        let unclear = |c| verdict_of(&finished(Status::NeedsClarification, None, c));
        assert_eq!(
            unclear(vec![
                fits("running", Some("healthy"), 60),
                fits("running", None, 60)
            ]),
            Some(Verdict::Healthy)
        );
        assert_eq!(
            unclear(vec![
                fits("running", Some("unhealthy"), 60),
                fits("exited", None, 60)
            ]),
            Some(Verdict::Broken)
        );
        assert_eq!(unclear(vec![fits("exited", None, 0)]), None, "nothing fit");
    }
}
