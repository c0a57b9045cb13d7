//! Several hosts, each a scripted executor: a request finds its target
//! across them, acts on its own host only, and goes on without a host that
//! does not answer.

use super::*;
use crate::hosts::{Host, Hosts};

const API_ON_B: &str = "bbbbbbbbbbbb0000000000000000000000000000000000000000000000000000";

/// A container of another name and id, on host B.
fn on_b(name: &str, health: &str) -> ContainerView {
    ContainerView {
        id: API_ON_B.into(),
        name: name.into(),
        ..web(health)
    }
}

fn named(mut s: Scripted, host: &str) -> Scripted {
    s.policy.host = host.into();
    s
}

struct TwoHosts {
    world: World,
    a: Arc<Scripted>,
    b: Arc<Scripted>,
}

fn two_hosts(a: Scripted, b: Scripted) -> TwoHosts {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(&dir.path().join("agent.db")).unwrap());
    let (a, b) = (Arc::new(a), Arc::new(b));
    let hosts = Hosts::new(vec![
        Host::new(Some("host-a".into()), "https://a:7443".into(), a.clone()),
        Host::new(Some("host-b".into()), "https://b:7443".into(), b.clone()),
    ]);
    TwoHosts {
        world: World {
            engine: Engine::with_hosts(store, Arc::new(hosts), config(WatchMode::Notify)),
            executor: a.clone(),
            _dir: dir,
        },
        a,
        b,
    }
}

impl TwoHosts {
    async fn ask(&self, message: &str, options: RequestOptions) -> String {
        self.world
            .engine
            .create(message.into(), options)
            .await
            .unwrap()
            .id
    }
}

#[tokio::test]
async fn a_plain_question_finds_the_fault_on_its_host_and_repairs_it_there_only() {
    let t = two_hosts(
        named(Scripted::new(web("healthy"), recovers()), "host-a"),
        named(
            Scripted::new(
                on_b("api", "unhealthy"),
                WriteScript {
                    answer: Ok(()),
                    after: on_b("api", "healthy"),
                },
            ),
            "host-b",
        ),
    );
    let id = t
        .ask("the api is unhealthy", RequestOptions::default())
        .await;
    let req = t.world.waiting(&id).await;
    let target = req.target.clone().expect("a target");
    assert_eq!(target.host.as_deref(), Some("host-b"), "{target:?}");
    assert_eq!(target.id(), API_ON_B);
    let pending = req.pending_approvals().next().expect("an approval");
    let claims: approval::ApprovalClaims =
        serde_json::from_slice(&B64.decode(&pending.claims).expect("claims are base64"))
            .expect("claims decode");
    assert_eq!(
        claims.host.as_deref(),
        Some("host-b"),
        "bound to B's executor"
    );
    t.world.approve(&req).await;
    let req = t.world.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert_eq!(t.b.writes(), 1, "repaired on B");
    assert_eq!(t.a.writes(), 0, "nothing written on A");
    let a_calls = t.a.calls.lock().unwrap().clone();
    assert!(
        a_calls.iter().all(|c| c == "list" || c == "policy"),
        "A was only searched: {a_calls:?}"
    );
}

#[tokio::test]
async fn the_same_name_on_two_hosts_asks_which_one_naming_the_hosts() {
    let t = two_hosts(
        Scripted::new(web("unhealthy"), recovers()),
        Scripted::new(on_b("web", "unhealthy"), recovers()),
    );
    let id = t.ask("web is unhealthy", RequestOptions::default()).await;
    let req = t.world.finished(&id).await;
    assert_eq!(req.status, Status::NeedsClarification);
    let outcome = req.outcome.clone().unwrap_or_default();
    assert!(
        outcome.contains("web on host host-a") && outcome.contains("web on host host-b"),
        "{outcome}"
    );
    assert!(outcome.contains("--host"), "says how to pick: {outcome}");
    let mut hosts: Vec<_> = req
        .candidates
        .iter()
        .filter_map(|c| c.host.clone())
        .collect();
    hosts.sort();
    assert_eq!(hosts, ["host-a", "host-b"]);
    assert_eq!(t.a.writes() + t.b.writes(), 0);
}

#[tokio::test]
async fn a_broken_container_still_wins_over_a_healthy_one_of_the_same_name() {
    let t = two_hosts(
        Scripted::new(web("healthy"), recovers()),
        Scripted::new(on_b("web", "unhealthy"), recovers()),
    );
    let id = t.ask("web is down", RequestOptions::default()).await;
    let req = t.world.waiting(&id).await;
    let target = req.target.expect("a target");
    assert_eq!(target.host.as_deref(), Some("host-b"));
}

#[tokio::test]
async fn a_named_host_is_the_only_one_read() {
    let t = two_hosts(
        Scripted::new(web("unhealthy"), recovers()),
        Scripted::new(on_b("web", "unhealthy"), recovers()),
    );
    for options in [
        RequestOptions {
            host: Some("host-a".into()),
            ..Default::default()
        },
        RequestOptions::default(),
    ] {
        let message = match options.host {
            Some(_) => "web is unhealthy",
            None => "web@host-a is unhealthy",
        };
        let id = t.ask(message, options).await;
        let req = t.world.waiting(&id).await;
        assert_eq!(req.status, Status::WaitingApproval, "{:?}", req.outcome);
        assert_eq!(
            req.target.expect("a target").host.as_deref(),
            Some("host-a")
        );
        t.world.engine.cancel(&id).await.unwrap();
    }
    assert!(t.b.calls.lock().unwrap().is_empty(), "B was never asked");
}

#[tokio::test]
async fn a_host_that_does_not_answer_does_not_stop_a_request_on_another() {
    let t = two_hosts(
        Scripted::new(web("healthy"), recovers()).failing("list", Code::Unavailable),
        Scripted::new(
            on_b("api", "unhealthy"),
            WriteScript {
                answer: Ok(()),
                after: on_b("api", "healthy"),
            },
        ),
    );
    let id = t
        .ask("the api is unhealthy", RequestOptions::default())
        .await;
    let req = t.world.waiting(&id).await;
    assert_eq!(req.status, Status::WaitingApproval, "{:?}", req.outcome);
    let unreachable = req
        .latest::<kind::HostsUnreachable>()
        .expect("the host not searched is evidence");
    assert_eq!(unreachable[0].host, "host-a");
    t.world.approve(&req).await;
    let req = t.world.finished(&id).await;
    assert_eq!(req.status, Status::Completed, "{:?}", req.outcome);
    assert_eq!(t.b.writes(), 1);
}

#[tokio::test]
async fn no_host_answering_fails_the_request_saying_so() {
    let t = two_hosts(
        Scripted::new(web("unhealthy"), recovers()).failing("list", Code::Unavailable),
        Scripted::new(on_b("api", "unhealthy"), recovers()).failing("list", Code::Unavailable),
    );
    let id = t
        .ask("the api is unhealthy", RequestOptions::default())
        .await;
    let req = t.world.finished(&id).await;
    assert_eq!(req.status, Status::Failed);
    assert!(req
        .outcome
        .unwrap_or_default()
        .starts_with("could not list containers"),);
}

#[tokio::test]
async fn a_request_on_a_host_no_longer_configured_fails_at_start_and_no_host_stands_in() {
    let t = two_hosts(
        Scripted::new(web("unhealthy"), recovers()),
        Scripted::new(on_b("web", "unhealthy"), recovers()),
    );
    let options = RequestOptions {
        container: Some("web".into()),
        host: Some("host-c".into()),
        ..Default::default()
    };
    let req = Request::new(
        "req-gone".into(),
        "web is down".into(),
        options.clone(),
        RequestSource::Ask,
        now_rfc3339(),
    );
    let created = EventPayload::Created(Created {
        message: req.message.clone(),
        options,
        source: req.source,
    });
    t.world.engine.store().save(&req, created).unwrap();
    t.world.engine.recover().await.unwrap();
    let req = t.world.finished("req-gone").await;
    assert_eq!(req.status, Status::Failed);
    let outcome = req.outcome.unwrap_or_default();
    assert!(
        outcome.contains("host host-c is no longer") && outcome.contains("host-a, host-b"),
        "{outcome}"
    );
    assert!(t.a.calls.lock().unwrap().is_empty() && t.b.calls.lock().unwrap().is_empty());
}
