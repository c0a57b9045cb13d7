//! After an approved write, an executor that does not answer (killed,
//! restarting, cut off) or a Docker engine that does not answer behind it is
//! a wait, not a verdict: the write may well have worked, and only fresh
//! evidence can say. The wait backs off, is said in the timeline when it
//! begins and when the executor answers again, and is bounded by the
//! request's verification deadline (`verify.max_wait`); only that deadline
//! passing ends the request, as `failed` with that reason.

use std::future::Future;
use std::time::{Duration, Instant};

use super::{Engine, Stop};
use crate::executor_client::ExecutorError;
use crate::model::*;

/// The first pause between two tries, doubled up to `MAX_PAUSE`.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const MAX_PAUSE: Duration = Duration::from_secs(4);

/// What an outage looked like: how long the executor did not answer.
pub(super) struct Waited(pub Duration);

impl Engine {
    /// `read` until the executor answers with anything but an outage, or
    /// `until` passes (then the outage's error is returned). `what` names
    /// the read in the timeline.
    pub(super) async fn through_outage<T, F, Fut>(
        &self,
        id: &str,
        what: &str,
        until: Instant,
        mut read: F,
    ) -> Result<(Result<T, ExecutorError>, Waited), Stop>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ExecutorError>>,
    {
        let mut since: Option<Instant> = None;
        let mut pause = FIRST_PAUSE;
        loop {
            self.check_canceled(id)?;
            let answer = read().await;
            let now = Instant::now();
            match &answer {
                Err(e) if e.is_outage() && now < until => {
                    if since.is_none() {
                        since = Some(now);
                        let left = until.saturating_duration_since(now).as_secs();
                        self.say_waiting(
                            id,
                            format!(
                                "{}; waiting up to {left} s for it to answer ({what}): {}",
                                if is_engine(e) {
                                    "the Docker engine behind the executor is unreachable"
                                } else {
                                    "executor unreachable"
                                },
                                e.message
                            ),
                        )
                        .await?;
                    }
                    tokio::time::sleep(pause.min(until.saturating_duration_since(now))).await;
                    pause = (pause * 2).min(MAX_PAUSE);
                }
                _ => {
                    let waited = since.map(|s| now.duration_since(s)).unwrap_or_default();
                    if since.is_some() {
                        let back = match &answer {
                            Err(e) if e.is_outage() => format!(
                                "no answer after {} s; the verification deadline (verify.max_wait) has passed",
                                waited.as_secs()
                            ),
                            _ => format!(
                                "the executor answers again after {} s; deciding from fresh evidence",
                                waited.as_secs()
                            ),
                        };
                        self.say_waiting(id, back).await?;
                    }
                    return Ok((answer, Waited(waited)));
                }
            }
        }
    }

    async fn say_waiting(&self, id: &str, text: String) -> Result<(), Stop> {
        tracing::warn!(request_id = id, message = %text, "executor outage");
        self.update(
            id,
            EventPayload::ExecutorWaiting(Message::new(text)),
            |_| {},
        )
        .await?;
        Ok(())
    }

    /// The request ends: the executor did not come back in time.
    pub(super) async fn outage_outlasted(&self, id: &str, e: &ExecutorError) -> Result<(), Stop> {
        let outcome = format!(
            "{} did not answer within the verification deadline ({} s, verify.max_wait) after the write; its outcome is unknown: {e}",
            if is_engine(e) {
                "the Docker engine behind the executor"
            } else {
                "the executor"
            },
            self.config.verify_max_wait.as_secs()
        );
        self.update(id, EventPayload::Error(Message::new(&outcome)), |r| {
            r.error = Some(outcome.clone())
        })
        .await?;
        self.finish(id, Status::Failed, outcome).await?;
        Ok(())
    }
}

/// The executor answered, and said the engine behind it is down.
fn is_engine(e: &ExecutorError) -> bool {
    e.message.contains("docker is unavailable")
}
