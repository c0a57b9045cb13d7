//! Holding until stable: one loop for every kind of target. A probe reads
//! the target (through an executor outage, which does not count against
//! the wait), a judge turns what it read into checks and says how long
//! they must hold and how long to wait for them; every check must hold
//! for that long, not at one lucky moment, or the wait ends with the
//! checks as they are. A container's verification and a Swarm service's
//! are two probes and two judges over this loop (`verify.rs`, `swarm.rs`).

use std::future::Future;
use std::time::{Duration, Instant};

use super::{Engine, Stop};
use crate::executor_client::{ContainerEvents, ExecutorError};
use crate::model::VerificationCheck;

/// With the target's events to wake on, how often it is still looked at,
/// at least (a stream that stalls without ending must not stall
/// verification); `verify.poll_interval` when that is longer.
const EVENTS_FALLBACK_POLL: Duration = Duration::from_secs(1);

/// What one read says.
pub(super) struct Judged {
    pub checks: Vec<VerificationCheck>,
    /// How long every check must hold.
    pub hold: Duration,
    /// How long to wait for them at most (time the executor did not answer
    /// not counted).
    pub deadline: Duration,
}

impl Engine {
    /// Read with `read` and judge with `judge` until every check has held
    /// for the longest hold a judgement asked for, or the deadline passes.
    /// Returns the last checks and the last answer read; `None` when the
    /// executor did not answer before the verification deadline (the
    /// request has ended, `failed`). `events`, when given, wakes the loop
    /// as the target changes; otherwise it polls.
    pub(super) async fn hold_until_stable<T, R, Fut>(
        &self,
        id: &str,
        mut events: Option<ContainerEvents>,
        mut read: R,
        judge: impl Fn(&T) -> Judged,
    ) -> Result<Option<(Vec<VerificationCheck>, Option<T>)>, Stop>
    where
        R: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let started = Instant::now();
        let outage_deadline = started + self.config.verify_max_wait;
        let mut deadline = self.config.verify_max_wait;
        // Each judge says how long its checks must hold (`stable_for`
        // included; none for an update the executor held already).
        let mut hold = Duration::ZERO;
        let mut ok_since: Option<Instant> = None;
        let mut unanswered = Duration::ZERO;
        let mut last: Option<T> = None;
        loop {
            self.check_canceled(id)?;
            let (answer, waited) = self
                .through_outage(id, "verification", outage_deadline, &mut read)
                .await?;
            unanswered += waited.0;
            let mut checks = match answer {
                Err(e) if e.is_outage() => {
                    self.outage_outlasted(id, &e).await?;
                    return Ok(None);
                }
                Ok(seen) => {
                    let judged = judge(&seen);
                    hold = hold.max(judged.hold);
                    deadline = judged.deadline;
                    last = Some(seen);
                    judged.checks
                }
                Err(e) => vec![VerificationCheck {
                    level: "running".into(),
                    ok: false,
                    detail: e.to_string(),
                }],
            };
            if checks.iter().all(|c| c.ok) {
                ok_since.get_or_insert_with(Instant::now);
            } else {
                ok_since = None;
            }
            let held = ok_since.is_some_and(|t| t.elapsed() >= hold);
            if let Some(t) = ok_since {
                checks.push(VerificationCheck {
                    level: "stable".into(),
                    ok: held,
                    detail: format!("held for {}s of {}s", t.elapsed().as_secs(), hold.as_secs()),
                });
            }
            if held || started.elapsed().saturating_sub(unanswered) >= deadline + hold {
                return Ok(Some((checks, last)));
            }
            // While the checks hold, the next look is when the hold ends.
            let hold_left = ok_since.map(|t| hold.saturating_sub(t.elapsed()));
            match events.as_mut() {
                Some(stream) => {
                    let fallback = EVENTS_FALLBACK_POLL.max(self.config.verify_poll);
                    let wake = hold_left.map_or(fallback, |h| h.min(fallback));
                    tokio::select! {
                        next = futures::StreamExt::next(stream) => {
                            if next.is_none() {
                                events = None;
                            }
                        }
                        _ = tokio::time::sleep(wake) => {}
                    }
                }
                None => {
                    let poll = self.config.verify_poll;
                    tokio::time::sleep(hold_left.map_or(poll, |h| h.min(poll))).await
                }
            }
        }
    }
}
