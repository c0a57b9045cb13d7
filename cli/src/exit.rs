//! Exit codes, in one place: what a finished request, a pending approval or
//! an error means to a script that runs `drydock`.

use drydock_vocab::Status;

pub const COMPLETED: u8 = 0;
pub const FAILED: u8 = 1;
/// Bad usage, or any error before a request could be followed.
pub const USAGE: u8 = 2;
pub const APPROVAL_PENDING: u8 = 3;
pub const NEEDS_CLARIFICATION: u8 = 4;
pub const REJECTED: u8 = 5;
pub const CANCELED: u8 = 6;
/// Ctrl-C while following, and the request was left running.
pub const INTERRUPTED: u8 = 130;

/// The code for a request in `status`: its outcome once it finished,
/// `APPROVAL_PENDING` while it waits for a person, `COMPLETED` (nothing to
/// report yet) while it runs.
pub fn for_status(status: Status) -> u8 {
    match status {
        Status::Completed => COMPLETED,
        Status::Failed => FAILED,
        Status::NeedsClarification => NEEDS_CLARIFICATION,
        Status::Rejected => REJECTED,
        Status::Canceled => CANCELED,
        Status::WaitingApproval => APPROVAL_PENDING,
        Status::Observing
        | Status::Diagnosing
        | Status::Planning
        | Status::Executing
        | Status::Verifying => COMPLETED,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_finished_state_has_its_own_code() {
        let codes: Vec<u8> = Status::terminal().map(for_status).collect();
        assert_eq!(
            codes,
            [COMPLETED, FAILED, NEEDS_CLARIFICATION, REJECTED, CANCELED]
        );
        assert_eq!(for_status(Status::WaitingApproval), APPROVAL_PENDING);
    }
}
