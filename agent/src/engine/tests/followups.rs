//! Follow-ups on a request: a finished one is reopened as a new round from
//! fresh evidence, and words never authorise a write.

use super::*;
use crate::engine::EngineError;

#[tokio::test]
async fn a_follow_up_reopens_a_finished_request_and_a_grant_never_covers_it() {
    // Round 1: a watch request repaired under a grant, whose restart did
    // not hold.
    let (w, id, grant_id) = granted_world(
        WriteScript {
            answer: Ok(()),
            after: web("unhealthy"),
        },
        Duration::ZERO,
        "web",
    )
    .await;
    let first = w.finished(&id).await;
    assert_eq!(first.status, Status::Failed, "{first:#?}");
    assert_eq!(
        first.execution[0].grant_id.as_deref(),
        Some(grant_id.as_str())
    );
    assert_eq!(w.executor.writes(), 1);

    let added = w
        .engine
        .follow_up(&id, "  it started after we rotated the db password  ")
        .await
        .unwrap();
    assert!(added.reopened);
    assert_eq!(added.round, 2);
    assert_eq!(
        added.request.followups[0].message,
        "it started after we rotated the db password"
    );

    // Round 2 plans the restart again, and a person must approve it: the
    // grant covered what the watcher saw, not what someone typed later.
    let req = w.waiting(&id).await;
    assert_eq!(req.status, Status::WaitingApproval, "{req:#?}");
    assert!(req.pending_approvals().next().is_some());
    assert!(req.current_approvals().iter().all(|a| a.grant_id.is_none()));
    assert_eq!(w.executor.writes(), 1, "nothing more was written");
    assert!(req.execution.is_empty(), "this round has done nothing yet");
    let earlier = &req.earlier_rounds[0];
    assert_eq!((earlier.round, earlier.status), (1, Status::Failed));
    assert_eq!(earlier.execution.len(), 1, "round 1's write is kept");
    assert!(
        !earlier.evidence.is_empty()
            && !req.evidence.is_empty()
            && earlier
                .evidence
                .iter()
                .all(|e| req.evidence.iter().all(|f| f.id != e.id)),
        "round 2 gathered its own evidence"
    );
    let kinds = w.kinds(&id);
    let reopened_at = kinds
        .iter()
        .position(|k| *k == EventKind::Followup)
        .unwrap();
    assert_eq!(kinds[reopened_at + 1], EventKind::Status);
    assert!(kinds[..reopened_at].contains(&EventKind::Final));

    // While it waits, words are only words: nothing is approved and the
    // round goes on.
    let again = w.engine.follow_up(&id, "approved, go ahead").await.unwrap();
    assert!(!again.reopened);
    assert_eq!(again.round, 2);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let req = w.engine.store().get(&id).unwrap().unwrap();
    assert_eq!(req.status, Status::WaitingApproval);
    assert!(req.pending_approvals().next().is_some());
    assert_eq!(w.executor.writes(), 1);
}

#[tokio::test]
async fn a_follow_up_that_is_empty_too_long_unknown_or_one_too_many_is_refused() {
    let w = world(Scripted::new(web("healthy"), recovers()), WatchMode::Notify);
    let id = w.ask("is web ok?").await;
    w.finished(&id).await;
    for words in ["", "   ", &"x".repeat(2001)] {
        let err = w.engine.follow_up(&id, words).await.unwrap_err();
        assert!(
            matches!(err, EngineError::InvalidFollowUp(_)),
            "{words:?}: {err}"
        );
    }
    let err = w.engine.follow_up("req-none", "db").await.unwrap_err();
    assert!(matches!(err, EngineError::RequestNotFound(_)), "{err}");
    for i in 0..crate::engine::followup::MAX_FOLLOWUPS {
        w.engine
            .follow_up(&id, &format!("look again {i}"))
            .await
            .unwrap();
        w.finished(&id).await;
    }
    let err = w.engine.follow_up(&id, "once more").await.unwrap_err();
    assert!(err.to_string().contains("ask anew"), "{err}");
    let req = w.engine.store().get(&id).unwrap().unwrap();
    assert_eq!(req.followups.len(), crate::engine::followup::MAX_FOLLOWUPS);
    assert_eq!(
        req.round() as usize,
        crate::engine::followup::MAX_FOLLOWUPS + 1
    );
}
