use super::*;
use tonic::Code;

#[test]
fn a_lost_answer_is_in_doubt_and_a_refusal_is_not() {
    for code in [
        Code::Unavailable,
        Code::DeadlineExceeded,
        Code::Cancelled,
        Code::Internal,
    ] {
        let e = ExecutorError::new(code, "x");
        assert!(e.outcome_in_doubt() && !e.is_refusal(), "{code:?}");
    }
    for code in [
        Code::FailedPrecondition,
        Code::PermissionDenied,
        Code::NotFound,
    ] {
        let e = ExecutorError::new(code, "x");
        assert!(!e.outcome_in_doubt() && e.is_refusal(), "{code:?}");
    }
    assert_eq!(
        ExecutorError::from(tonic::Status::unavailable("executor down")).to_string(),
        "executor Unavailable: executor down"
    );
}
