//! Nothing slow on the critical path: the usage sample is not waited for
//! when it cannot change the answer, and verification wakes on the
//! container's own events.

use super::*;

fn evidence_kinds(req: &Request) -> Vec<&str> {
    req.evidence.iter().map(|e| e.kind_name()).collect()
}

#[tokio::test]
async fn a_cause_the_health_log_tells_does_not_wait_for_the_usage_sample() {
    let mut executor = Scripted::new(web("unhealthy"), recovers());
    executor.stats_delay = Duration::from_millis(500);
    let w = world(executor, WatchMode::Notify);
    let id = w.ask("web is down").await;
    let req = w.waiting(&id).await;
    assert_eq!(req.status, Status::WaitingApproval, "{:?}", req.outcome);
    assert!(
        !evidence_kinds(&req).contains(&"stats"),
        "planned before the sample came: {:?}",
        evidence_kinds(&req)
    );
    // It was read all the same, and is attached once it has come.
    tokio::time::sleep(Duration::from_millis(700)).await;
    w.approve(&req).await;
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert!(
        evidence_kinds(&req).contains(&"stats"),
        "{:?}",
        evidence_kinds(&req)
    );
}

#[tokio::test]
async fn a_question_about_usage_waits_for_the_sample() {
    let mut executor = Scripted::new(web("unhealthy"), recovers());
    executor.stats_delay = Duration::from_millis(300);
    let w = world(executor, WatchMode::Notify);
    let id = w.ask("web is slow").await;
    let req = w.waiting(&id).await;
    assert!(
        evidence_kinds(&req).contains(&"stats"),
        "{:?}",
        evidence_kinds(&req)
    );
}

#[tokio::test]
async fn verification_wakes_on_the_containers_events_not_on_a_poll() {
    let mut executor = Scripted::new(
        web("unhealthy"),
        WriteScript {
            answer: Ok(()),
            after: web("starting"),
        },
    );
    let (events, _) = tokio::sync::broadcast::channel(16);
    executor.events = Some(events.clone());
    // A poll this slow would outlast the test: only the event can wake it.
    let w = world_with(
        executor,
        EngineConfig {
            verify_poll: Duration::from_secs(60),
            verify_max_wait: Duration::from_secs(30),
            ..config(WatchMode::Notify)
        },
    );
    let id = w.ask("web is down").await;
    let req = w.waiting(&id).await;
    w.approve(&req).await;
    let executor = w.executor.clone();
    tokio::spawn(async move {
        while executor.writes() == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        *executor.container.lock().unwrap() = web("healthy");
        let _ = events.send(ContainerEvent {
            container_id: WEB.into(),
            name: "web".into(),
            action: "health_status".into(),
            health: Some("healthy".into()),
            ..Default::default()
        });
    });
    let req = w.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert!(req.verification.unwrap().ok);
}
