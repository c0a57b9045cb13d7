//! Watching: the agent follows the executor's event stream, keeps its own
//! journal, and opens a request by itself (`source: watch`) when a visible
//! container turns unhealthy, dies with a non-zero exit that no person
//! caused, or is OOM-killed.
//!
//! - **At once, unless it flaps:** Docker's health retries already
//!   debounced an `unhealthy`, so it opens its request at once; a crash or
//!   OOM kill waits `watch.restart_grace` (a second) for Docker's restart
//!   policy. A container that triggered already within
//!   `watch.crash_loop_window` flaps: its trigger waits `watch.debounce`,
//!   and more triggers of it meanwhile fold into it.
//! - **Deduplicated:** never a second open request for a container, and none
//!   within `watch.cooldown` after the last watch request for it ended, so
//!   a flapping container yields one request.
//! - **Docker first:** a container that Docker restarted by itself (its
//!   restart policy) after the trigger is left to Docker; a crash loop
//!   (`watch.crash_loop_restarts` exits within `watch.crash_loop_window`)
//!   gets a diagnose-only request: advice, never a restart.
//! - **Resumable:** the stream resumes from the journal's newest event after
//!   a reconnect or a restart; replayed events are recognised, and triggers
//!   that were being debounced are picked up again.
//! - **Swarm services** (`services.rs`): read every `watch.service_poll`;
//!   one that runs fewer tasks than it wants for longer than the debounce
//!   opens a request, under the same deduplication.

pub mod alerts;
mod services;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::config::WatchConfig;
use crate::executor_client::ExecutorClient;
use crate::executor_client::Reads as _;
use crate::model::{ContainerEvent, Request, RequestOptions, RequestSource};
use crate::model::{EventAction, HealthStatus};
use crate::store::{fingerprints, journal, Store};

/// How the watcher and the alert intake open a request: the engine, as seen
/// from below it (the engine implements this; nothing here knows it).
pub trait Opener: Send + Sync {
    fn open(
        &self,
        message: String,
        options: RequestOptions,
        source: RequestSource,
    ) -> Pin<Box<dyn Future<Output = Result<Request, String>> + Send + '_>>;
}

/// Why a container was flagged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    Unhealthy,
    OomKilled,
    Crashed { exit_code: i64 },
}

impl Trigger {
    fn describe(&self) -> String {
        match self {
            Trigger::Unhealthy => "turned unhealthy".into(),
            Trigger::OomKilled => "was OOM-killed".into(),
            Trigger::Crashed { exit_code } => format!("exited with code {exit_code}"),
        }
    }
}

/// Whether a new event is a trigger. `recent` holds the container's
/// earlier events (for telling a person's stop or kill from a crash).
pub fn trigger_of(e: &ContainerEvent, recent: &[ContainerEvent]) -> Option<Trigger> {
    match e.action {
        EventAction::HealthStatus if e.health == Some(HealthStatus::Unhealthy) => {
            Some(Trigger::Unhealthy)
        }
        EventAction::Oom => Some(Trigger::OomKilled),
        EventAction::Die => {
            let code = e.exit_code.unwrap_or(0);
            if code == 0 {
                return None;
            }
            // `docker stop` and `docker kill` send a kill event first; an
            // OOM kill has its own event. A die with neither is a crash.
            let caused = recent.iter().any(|r| {
                r.time_nanos <= e.time_nanos
                    && e.time_nanos - r.time_nanos <= 30_000_000_000
                    && matches!(
                        r.action,
                        EventAction::Kill | EventAction::Stop | EventAction::Oom
                    )
            });
            (!caused).then_some(Trigger::Crashed { exit_code: code })
        }
        _ => None,
    }
}

/// How long a new trigger waits before its request opens: nothing for an
/// `unhealthy` (Docker's retries debounced it), `watch.restart_grace` for a
/// crash or OOM kill (Docker's restart policy may restart it), and
/// `watch.debounce` when the container flaps: an earlier trigger of it
/// within `watch.crash_loop_window`, in `recent` (its journaled events).
pub fn wait_before_opening(
    config: &WatchConfig,
    trigger: &Trigger,
    e: &ContainerEvent,
    recent: &[ContainerEvent],
) -> Duration {
    let window = config.crash_loop_window.as_nanos() as i64;
    let flaps = recent.iter().any(|r| {
        r.time_nanos < e.time_nanos
            && e.time_nanos - r.time_nanos <= window
            && trigger_of(r, recent).is_some()
    });
    if flaps {
        config.debounce
    } else if *trigger == Trigger::Unhealthy {
        Duration::ZERO
    } else {
        config.restart_grace
    }
}

/// Less than the restart manager's first delay (100 ms): a `start` this
/// soon after a death is not a restart by Docker.
const RESTART_MIN_DELAY_NANOS: i64 = 50_000_000;

/// The longest wait between attempts to reopen a host's event stream.
const MAX_RECONNECT_BACKOFF: Duration = Duration::from_secs(10);

struct Pending {
    event: ContainerEvent,
    trigger: Trigger,
    due: Instant,
    folded: u32,
}

pub struct Watcher {
    store: Arc<Store>,
    opener: Arc<dyn Opener>,
    executor: ExecutorClient,
    /// The host it watches (`None` for a lone unnamed executor): its
    /// events are journaled under it, its stream resumes from its own
    /// newest event, and the requests it opens are on it.
    host: Option<String>,
    config: WatchConfig,
    pending: HashMap<String, Pending>,
    /// Swarm services running fewer tasks than they want, since when.
    short: HashMap<String, Instant>,
}

fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Watcher {
    /// Watch one host's executor, for as long as the agent runs.
    pub fn spawn(
        store: Arc<Store>,
        opener: Arc<dyn Opener>,
        executor: ExecutorClient,
        host: Option<String>,
        config: WatchConfig,
    ) {
        let mut watcher = Watcher {
            store,
            opener,
            executor,
            host,
            config,
            pending: HashMap::new(),
            short: HashMap::new(),
        };
        tokio::spawn(async move { watcher.run().await });
    }

    async fn run(&mut self) {
        match journal::pending(&self.store, self.host_key()) {
            Ok(left) => {
                for e in left {
                    let recent = self.recent(&e);
                    if let Some(t) = trigger_of(&e, &recent) {
                        self.hold(e, t);
                    }
                }
            }
            Err(e) => tracing::error!(error = %e, "cannot read pending watch triggers"),
        }
        let mut backoff = Duration::from_secs(1);
        // When the stream was last lost: where a host that journaled
        // nothing yet resumes, so what happened while it was away is seen.
        let mut lost_at: Option<i64> = None;
        loop {
            let since = match journal::last_time(&self.store, self.host_key()) {
                Ok(Some(t)) => t,
                _ => lost_at.unwrap_or(0),
            };
            match self.executor.watch_events(since).await {
                Ok(mut stream) => {
                    tracing::info!(since, host = self.host_key(), "watching container events");
                    backoff = Duration::from_secs(1);
                    let mut tick = tokio::time::interval(Duration::from_millis(500));
                    let mut prune = tokio::time::interval(Duration::from_secs(600));
                    let mut services = tokio::time::interval(self.config.service_poll);
                    loop {
                        tokio::select! {
                            next = stream.message() => match next {
                                Ok(Some(event)) => {
                                    let mut e = crate::executor_client::container_event(event);
                                    e.host = self.host_key().to_string();
                                    self.on_event(e);
                                    // A trigger due at once opens now, not at the next tick.
                                    self.fire_due().await;
                                }
                                Ok(None) => { tracing::warn!("the event stream ended; reconnecting"); break; }
                                Err(e) => { tracing::warn!(error = %e, "the event stream failed; reconnecting"); break; }
                            },
                            _ = tick.tick() => self.fire_due().await,
                            _ = prune.tick() => self.prune(),
                            _ = services.tick() => self.check_services().await,
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "cannot open the event stream; retrying"),
            }
            lost_at.get_or_insert_with(now_nanos);
            self.fire_due().await;
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_RECONNECT_BACKOFF);
        }
    }

    /// The host's key in the journal (`""` for a lone executor).
    fn host_key(&self) -> &str {
        self.host.as_deref().unwrap_or("")
    }

    fn prune(&self) {
        let keep = self.config.journal_retention.as_nanos() as i64;
        if let Err(e) = journal::prune(
            &self.store,
            now_nanos() - keep,
            self.config.journal_max_rows,
        ) {
            tracing::error!(error = %e, "cannot prune the event journal");
        }
        // Definitions are kept as long as the events, and as many.
        let before = (now_nanos() - keep).div_euclid(1_000_000_000);
        if let Err(e) = fingerprints::prune(&self.store, before, self.config.journal_max_rows) {
            tracing::error!(error = %e, "cannot prune the remembered definitions");
        }
    }

    fn recent(&self, e: &ContainerEvent) -> Vec<ContainerEvent> {
        let window = self.config.crash_loop_window.as_nanos() as i64;
        journal::for_container(
            &self.store,
            &e.container_id,
            e.time_nanos - window.max(30_000_000_000),
            500,
        )
        .unwrap_or_default()
    }

    fn on_event(&mut self, e: ContainerEvent) {
        match journal::record(&self.store, &e) {
            Ok(true) => {}
            // A replay after a reconnect: it was handled the first time.
            Ok(false) => return,
            Err(err) => {
                tracing::error!(error = %err, "cannot journal an event");
                return;
            }
        }
        // What it is, remembered as it comes to be: a later failure of
        // another incarnation is compared with it.
        if matches!(
            e.action,
            EventAction::Create | EventAction::Start | EventAction::Rename
        ) {
            let (store, executor, id, host) = (
                self.store.clone(),
                self.executor.clone(),
                e.container_id.clone(),
                self.host_key().to_string(),
            );
            tokio::spawn(async move { remember(&store, &executor, &host, &id).await });
        }
        let recent = self.recent(&e);
        if let Some(trigger) = trigger_of(&e, &recent) {
            let at = e.time_nanos.div_euclid(1_000_000_000);
            if let Err(err) = fingerprints::failed(&self.store, &e.container_id, at) {
                tracing::error!(error = %err, "cannot record a failure");
            }
            if let Err(err) = journal::set_trigger(&self.store, &e, "pending") {
                tracing::error!(error = %err, "cannot record a watch trigger");
            }
            self.hold(e, trigger);
        }
    }

    fn hold(&mut self, e: ContainerEvent, trigger: Trigger) {
        let recent = self.recent(&e);
        let wait = wait_before_opening(&self.config, &trigger, &e, &recent);
        match self.pending.get_mut(&e.container_id) {
            Some(p) => {
                p.folded += 1;
                // The folded event is settled with the first one.
                let _ = journal::set_trigger(&self.store, &e, "folded");
            }
            None => {
                tracing::info!(container = %e.name, trigger = ?trigger, "watch trigger; waiting {wait:?} before opening a request");
                self.pending.insert(
                    e.container_id.clone(),
                    Pending {
                        event: e,
                        trigger,
                        due: Instant::now() + wait,
                        folded: 0,
                    },
                );
            }
        }
    }

    async fn fire_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .pending
            .iter()
            .filter(|(_, p)| p.due <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for id in due {
            if let Some(p) = self.pending.remove(&id) {
                let state = self.fire(&p).await;
                if let Err(e) = journal::set_trigger(&self.store, &p.event, state) {
                    tracing::error!(error = %e, "cannot settle a watch trigger");
                }
            }
        }
    }

    /// Open the request, or say why not. Returns the trigger's final state.
    async fn fire(&self, p: &Pending) -> &'static str {
        let e = &p.event;
        let recent = self.recent(e);
        let window_start = e.time_nanos - self.config.crash_loop_window.as_nanos() as i64;
        let exits = recent
            .iter()
            .filter(|r| r.action == EventAction::Die && r.time_nanos >= window_start)
            .count() as u32;
        let crash_loop = exits >= self.config.crash_loop_restarts;
        // A restart policy starts it again 100 ms after the death at the
        // earliest; a `start` stamped closer is the engine announcing the
        // first start of a process that died at once (the event can come
        // after the death's `FinishedAt`), not Docker restarting it.
        let restarted_by_docker = recent.iter().any(|r| {
            r.action == EventAction::Start && r.time_nanos > e.time_nanos + RESTART_MIN_DELAY_NANOS
        });
        if !crash_loop && restarted_by_docker && matches!(p.trigger, Trigger::Crashed { .. }) {
            tracing::info!(container = %e.name, "Docker restarted it by itself; observing, not acting");
            return "skipped";
        }
        let healthy_again = recent.iter().any(|r| {
            r.time_nanos > e.time_nanos
                && r.action == EventAction::HealthStatus
                && r.health == Some(HealthStatus::Healthy)
        });
        if healthy_again && p.trigger == Trigger::Unhealthy {
            tracing::info!(container = %e.name, "healthy again before the debounce ended; no request");
            return "skipped";
        }
        if let Some(why) = alerts::busy(
            &self.store,
            &e.name,
            &e.container_id,
            self.host.as_deref(),
            self.config.cooldown,
        ) {
            tracing::info!(container = %e.name, "{why}; no new request");
            return "skipped";
        }
        let on = self
            .host
            .as_ref()
            .map(|h| format!(" on host {h}"))
            .unwrap_or_default();
        let (message, diagnose_only) = if crash_loop {
            (
                format!(
                    "watch: {}{on} is crash-looping ({exits} exits within {}); Docker keeps restarting it",
                    e.name,
                    humantime::format_duration(self.config.crash_loop_window)
                ),
                true,
            )
        } else {
            (
                format!("watch: {}{on} {}", e.name, p.trigger.describe()),
                false,
            )
        };
        let options = RequestOptions {
            container: Some(e.name.clone()),
            diagnose_only,
            utc_offset_minutes: None,
            host: self.host.clone(),
            update: false,
            build: None,
        };
        match self
            .opener
            .open(message, options, RequestSource::Watch)
            .await
        {
            Ok(req) => {
                tracing::info!(request_id = %req.id, container = %e.name, folded = p.folded, "opened a watch request");
                "opened"
            }
            Err(err) => {
                tracing::error!(error = %err, container = %e.name, "cannot open a watch request");
                "failed"
            }
        }
    }
}

/// Inspect a container through its host's executor and remember its
/// definition.
async fn remember(store: &Store, executor: &ExecutorClient, host: &str, container_id: &str) {
    match executor.inspect("watch", container_id).await {
        Ok(c) => {
            let f = crate::change::fingerprint(&c);
            if let Err(e) = fingerprints::record(store, &f, host, crate::model::unix_now()) {
                tracing::error!(error = %e, "cannot remember a container's definition");
            }
        }
        // Gone already (a short-lived container), or hidden: nothing to keep.
        Err(e) => tracing::debug!(container_id, error = %e, "not remembered"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t: i64, action: &str, code: Option<i64>) -> ContainerEvent {
        ContainerEvent {
            time_nanos: t * 1_000_000_000,
            container_id: "c1".into(),
            name: "shop-web-1".into(),
            action: action.into(),
            exit_code: code,
            ..Default::default()
        }
    }

    #[test]
    fn only_a_flapping_container_waits_out_the_debounce() {
        let config = WatchConfig {
            debounce: Duration::from_secs(10),
            restart_grace: Duration::from_secs(1),
            ..WatchConfig::default()
        };
        let unhealthy = |t| ContainerEvent {
            health: Some("unhealthy".into()),
            ..ev(t, "health_status", None)
        };
        // A first verdict of Docker's: at once.
        let now = unhealthy(1000);
        let wait = wait_before_opening(
            &config,
            &Trigger::Unhealthy,
            &now,
            std::slice::from_ref(&now),
        );
        assert_eq!(wait, Duration::ZERO);
        // A first crash: a second for Docker's restart policy.
        let die = ev(1000, "die", Some(1));
        let crashed = Trigger::Crashed { exit_code: 1 };
        assert_eq!(
            wait_before_opening(&config, &crashed, &die, std::slice::from_ref(&die)),
            Duration::from_secs(1)
        );
        // It crashed a minute ago too: it flaps, and waits the debounce.
        let before = ev(940, "die", Some(1));
        assert_eq!(
            wait_before_opening(&config, &crashed, &die, &[before.clone(), die.clone()]),
            Duration::from_secs(10)
        );
        let was_unhealthy = unhealthy(900);
        assert_eq!(
            wait_before_opening(
                &config,
                &Trigger::Unhealthy,
                &now,
                &[was_unhealthy, now.clone()]
            ),
            Duration::from_secs(10)
        );
        // A clean exit or a healthy verdict before is no trigger: no flap.
        let calm = [ev(900, "die", Some(0)), ev(950, "start", None), now.clone()];
        assert_eq!(
            wait_before_opening(&config, &Trigger::Unhealthy, &now, &calm),
            Duration::ZERO
        );
        // Outside the crash-loop window (10 min) it does not count.
        let long_ago = ev(1000 - 700, "die", Some(1));
        assert_eq!(
            wait_before_opening(&config, &crashed, &die, &[long_ago, die.clone()]),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn a_crash_triggers_and_a_persons_stop_or_kill_does_not() {
        let die = ev(100, "die", Some(1));
        assert_eq!(
            trigger_of(&die, &[]),
            Some(Trigger::Crashed { exit_code: 1 })
        );
        assert_eq!(
            trigger_of(&ev(100, "die", Some(0)), &[]),
            None,
            "a clean exit"
        );
        let killed = [ev(99, "kill", None)];
        assert_eq!(
            trigger_of(&ev(100, "die", Some(137)), &killed),
            None,
            "docker kill/stop"
        );
        let long_ago = [ev(10, "kill", None)];
        assert!(
            trigger_of(&die, &long_ago).is_some(),
            "an old kill does not excuse a new crash"
        );
        assert_eq!(
            trigger_of(&ev(100, "oom", None), &[]),
            Some(Trigger::OomKilled)
        );
        let mut unhealthy = ev(100, "health_status", None);
        unhealthy.health = Some("unhealthy".into());
        assert_eq!(trigger_of(&unhealthy, &[]), Some(Trigger::Unhealthy));
        unhealthy.health = Some("healthy".into());
        assert_eq!(trigger_of(&unhealthy, &[]), None);
        assert_eq!(trigger_of(&ev(100, "start", None), &[]), None);
    }
}
