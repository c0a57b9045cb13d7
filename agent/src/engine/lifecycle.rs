//! The lifecycle of a request, as a table. Every phase lives in its own
//! module and returns whether the worker goes on; this file says which phase
//! runs in which state and which state changes are legal.
//!
//! | from               | to                                                         |
//! |--------------------|------------------------------------------------------------|
//! | `observing`        | `diagnosing`, `needs_clarification`, `failed`              |
//! | `diagnosing`       | `planning`, `completed`, `needs_clarification`, `observing`¹, `failed` |
//! | `planning`         | `waiting_approval`, `completed`, `observing`¹, `failed`    |
//! | `waiting_approval` | `executing`, `rejected`, `failed` (expired)                |
//! | `executing`        | `verifying`, `waiting_approval`², `failed`                 |
//! | `verifying`        | `completed`, `observing` (next round), `failed`            |
//! | any unfinished     | `canceled`, `failed`                                       |
//!
//! ¹ only when a restarted agent resumes: diagnosis and planning start over
//! from fresh evidence, while a request caught `executing` is re-verified,
//! never re-executed (the write may or may not have happened).
//!
//! ² only when the executor refused an automation grant's write: nothing
//! was done, and a person is asked to approve the same plan.
//!
//! `completed`, `failed`, `needs_clarification`, `rejected` and `canceled`
//! are final: no phase changes a finished request again. Only a person's
//! follow-up reopens one, as a new round from `observing`
//! (`followup.rs`, outside this table: the round before is kept whole).

use super::{Engine, Stop};
use crate::model::{Status, Target, TargetKind};

/// Whether `from → to` is a transition of the table above.
pub fn allowed(from: Status, to: Status) -> bool {
    use Status::*;
    if from == to {
        return true;
    }
    if from.is_terminal() {
        return false;
    }
    if matches!(to, Canceled | Failed) {
        return true;
    }
    matches!(
        (from, to),
        (Observing, Diagnosing | NeedsClarification)
            | (
                Diagnosing,
                Planning | Completed | NeedsClarification | Observing
            )
            | (Planning, WaitingApproval | Completed | Observing)
            | (WaitingApproval, Executing | Rejected)
            | (Executing, Verifying | WaitingApproval)
            | (Verifying, Completed | Observing)
    )
}

/// Where a request found unfinished at start-up resumes, and why.
pub fn resume(status: Status) -> Option<(Status, &'static str)> {
    match status {
        Status::Executing => Some((
            Status::Verifying,
            "agent restarted during execution; re-verifying instead of re-executing",
        )),
        Status::Diagnosing | Status::Planning => {
            Some((Status::Observing, "agent restarted; observing again"))
        }
        _ => None,
    }
}

impl Engine {
    /// One request's worker: run the phase of the current state until a
    /// phase says stop (a final state, or waiting on someone).
    pub(super) async fn run(&self, id: &str) -> Result<(), Stop> {
        loop {
            self.attach_arrived_stats(id).await?;
            let req = self.store.get(id)?.ok_or(Stop::Canceled)?;
            if req.status.is_terminal() {
                return Ok(());
            }
            self.check_canceled(id)?;
            // Each phase by what the request is about: chosen here once,
            // so no phase asks again. Before a target is found there is
            // none; a model may diagnose without one.
            let subject = req.target.as_ref().map(Target::kind);
            let go_on = match (req.status, subject) {
                (Status::Observing, None) => self.find(&req).await?,
                (Status::Observing, Some(TargetKind::Container)) => self.observe(&req).await?,
                (Status::Observing, Some(TargetKind::Service)) => {
                    self.observe_service(&req).await?
                }
                (Status::Diagnosing, Some(TargetKind::Service)) => {
                    self.diagnose_service(&req).await?
                }
                (Status::Diagnosing, _) => self.diagnose(&req).await?,
                (Status::Planning, Some(TargetKind::Service)) => self.plan_service(&req).await?,
                (Status::Planning, _) => self.plan(&req).await?,
                (Status::WaitingApproval, _) => self.wait_for_approval(&req).await?,
                (Status::Executing, _) => self.execute(&req).await?,
                (Status::Verifying, Some(TargetKind::Service)) => self.verify_service(&req).await?,
                (Status::Verifying, _) => self.verify(&req).await?,
                (
                    Status::Completed
                    | Status::Failed
                    | Status::NeedsClarification
                    | Status::Rejected
                    | Status::Canceled,
                    _,
                ) => return Ok(()),
            };
            if !go_on {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Status::*;

    const ALL: [Status; 11] = Status::ALL;

    #[test]
    fn final_states_are_final() {
        for from in ALL.into_iter().filter(|s| s.is_terminal()) {
            for to in ALL.into_iter().filter(|t| *t != from) {
                assert!(!allowed(from, to), "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn the_happy_path_and_its_exits_follow_the_table() {
        let path = [
            Observing,
            Diagnosing,
            Planning,
            WaitingApproval,
            Executing,
            Verifying,
            Completed,
        ];
        for w in path.windows(2) {
            assert!(allowed(w[0], w[1]), "{:?} -> {:?}", w[0], w[1]);
        }
        for from in ALL.into_iter().filter(|s| !s.is_terminal()) {
            assert!(allowed(from, Canceled) && allowed(from, Failed), "{from:?}");
        }
        // No shortcuts past the human: nothing executes without waiting for
        // approval, and nothing is verified that was not executed.
        for from in [Observing, Diagnosing, Planning, Verifying] {
            assert!(!allowed(from, Executing), "{from:?} -> executing");
        }
        assert!(!allowed(Planning, Verifying));
        assert!(!allowed(WaitingApproval, Completed));
    }

    #[test]
    fn resuming_never_re_executes() {
        assert_eq!(resume(Executing).map(|r| r.0), Some(Verifying));
        for s in [Diagnosing, Planning] {
            let (to, _) = resume(s).unwrap();
            assert!(allowed(s, to));
        }
        assert_eq!(resume(WaitingApproval), None);
    }
}
