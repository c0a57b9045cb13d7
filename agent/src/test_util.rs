//! The agent's one test double of an executor: it answers from a script
//! (a target container and any others, their logs and events, a policy, a
//! Swarm manager's service) and records every call, so the engine's phase
//! tests, the model's investigation tests and the engine-with-a-model tests
//! all drive the same executor. Built for the crate's own tests and, with
//! the `test-util` feature, for its integration tests; never in a daemon.
// Test code: a failed unwrap is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use drydock_proto::approval::{ContainerWrite, WriteAction};
use tonic::Code;

use crate::executor_client::{Authority, Call, Executor, ExecutorError, Reads, WriteOp, Written};
use crate::model::*;

/// The policy a scripted executor reports unless told otherwise: start and
/// restart enabled, approver `ops`, every container in scope.
pub fn policy() -> PolicyView {
    PolicyView {
        actions: ActionsView::enabling(&[WriteAction::Start, WriteAction::Restart]),
        approver_ids: vec!["ops".into()],
        logs_max_lines: 500,
        allow_names: vec!["*".into()],
        ..Default::default()
    }
}

/// What a write does, as scripted.
#[derive(Clone)]
pub struct WriteScript {
    /// The executor's answer.
    pub answer: Result<(), ExecutorError>,
    /// The container after the call (whatever the answer said).
    pub after: ContainerView,
}

/// An executor that answers from a script and records every call.
pub struct Scripted {
    /// The target: what inspect shows of it (a write may change it).
    pub container: Mutex<ContainerView>,
    /// Other containers in scope, found by name or id. With none, every
    /// name is the target's.
    pub others: Vec<ContainerView>,
    pub policy: PolicyView,
    /// Every container's log lines, unless `logs_of` names it.
    pub logs: Vec<String>,
    /// A container's own log lines (with their times), by name.
    pub logs_of: HashMap<String, Vec<LogLineView>>,
    /// What a container logged up to a time (a read with `until`), by
    /// name; a read with `until` of a container not named here gets its
    /// usual lines.
    pub logs_until_of: HashMap<String, Vec<LogLineView>>,
    /// A container's engine events, by name (none: no record).
    pub events_of: HashMap<String, Vec<ContainerEvent>>,
    pub stats: StatsView,
    pub disk: DiskUsageView,
    /// Every call with its arguments (`inspect db`, `logs db 50`,
    /// `logs db until T`, `WRITE restart ID`), for tests that follow a
    /// model's reads.
    pub rpcs: Mutex<Vec<String>>,
    pub failing: HashMap<&'static str, ExecutorError>,
    pub write: WriteScript,
    /// Images on the engine.
    pub images: Vec<String>,
    /// What `RegistryDigest` answers (none: the registry is not allowed),
    /// and after a write, when set.
    pub registry: Option<RegistryView>,
    pub registry_after: Option<RegistryView>,
    /// A Swarm manager's answers (none: not a manager).
    pub swarm: Mutex<Option<SwarmScript>>,
    /// How many service reads still show an update the engine is
    /// finishing (one spec version behind the script's).
    pub settling: Mutex<u32>,
    pub calls: Mutex<Vec<String>>,
    /// How long `GetPolicy` takes (a busy executor).
    pub policy_delay: Duration,
    /// How long `ContainerStats` takes (the engine's collector cycle).
    pub stats_delay: Duration,
    /// The container's events, for `follow` (none: no stream, as an
    /// executor that refuses one).
    pub events: Option<tokio::sync::broadcast::Sender<ContainerEvent>>,
    /// After a write, this many inspects find the executor unreachable.
    pub down_after_write: Mutex<u32>,
}

impl Scripted {
    pub fn new(container: ContainerView, write: WriteScript) -> Scripted {
        Scripted {
            container: Mutex::new(container),
            others: Vec::new(),
            policy: policy(),
            logs: vec!["ERROR upstream timed out".into()],
            logs_of: HashMap::new(),
            logs_until_of: HashMap::new(),
            events_of: HashMap::new(),
            stats: StatsView::default(),
            disk: DiskUsageView::default(),
            rpcs: Mutex::new(Vec::new()),
            failing: HashMap::new(),
            write,
            images: Vec::new(),
            registry: None,
            registry_after: None,
            swarm: Mutex::new(None),
            settling: Mutex::new(0),
            calls: Mutex::new(Vec::new()),
            policy_delay: Duration::ZERO,
            stats_delay: Duration::ZERO,
            events: None,
            down_after_write: Mutex::new(0),
        }
    }

    pub fn failing(mut self, rpc: &'static str, code: Code) -> Scripted {
        self.failing.insert(
            rpc,
            ExecutorError::new(code, format!("{rpc} scripted to fail")),
        );
        self
    }

    fn answer<T>(&self, rpc: &'static str, ok: impl FnOnce() -> T) -> Result<T, ExecutorError> {
        self.calls.lock().unwrap().push(rpc.to_string());
        match self.failing.get(rpc) {
            Some(e) => Err(e.clone()),
            None => Ok(ok()),
        }
    }

    pub fn writes(&self) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| c.starts_with("write"))
            .count()
    }

    pub fn current(&self) -> ContainerView {
        self.container.lock().unwrap().clone()
    }

    /// The calls with their arguments, in order.
    pub fn rpcs(&self) -> Vec<String> {
        self.rpcs.lock().unwrap().clone()
    }

    /// Records a call to `name`, by the container's name when it is known
    /// (the engine calls by id once it has found one).
    fn note(&self, verb: &str, name: &str, rest: &str) {
        let who = self.find(name).map(|c| c.name);
        let who = who.as_deref().unwrap_or(name);
        let what = format!("{verb} {who}{rest}");
        self.rpcs.lock().unwrap().push(what);
    }

    /// The container `name` (a name or an id): the target, or one of the
    /// others; with no others scripted, the target answers to every name.
    fn find(&self, name: &str) -> Result<ContainerView, ExecutorError> {
        let current = self.current();
        let is = |c: &ContainerView| c.name == name || c.id == name;
        if is(&current) || self.others.is_empty() {
            return Ok(current);
        }
        self.others
            .iter()
            .find(|c| is(c))
            .cloned()
            .ok_or_else(|| ExecutorError::new(Code::NotFound, format!("no container {name}")))
    }
}

impl Reads for Scripted {
    fn follow<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> Call<'a, crate::executor_client::ContainerEvents> {
        Box::pin(async move {
            let Some(events) = &self.events else {
                return Err(ExecutorError::new(
                    Code::ResourceExhausted,
                    "4 streams open",
                ));
            };
            let stream = futures::stream::unfold(events.subscribe(), |mut rx| async move {
                rx.recv().await.ok().map(|e| (e, rx))
            });
            Ok(Box::pin(stream) as crate::executor_client::ContainerEvents)
        })
    }
    fn list<'a>(&'a self, _: &'a str, _: bool) -> Call<'a, Vec<ContainerSummaryView>> {
        Box::pin(async move {
            self.rpcs.lock().unwrap().push("list".into());
            self.answer("list", || {
                std::iter::once(self.current())
                    .chain(self.others.iter().cloned())
                    .map(|c| ContainerSummaryView {
                        status: if c.running {
                            format!("Up 5 minutes ({})", c.health_status)
                        } else {
                            format!("Exited ({}) 1 minute ago", c.exit_code)
                        },
                        id: c.id,
                        name: c.name,
                        image: c.image,
                        state: c.status,
                        ..Default::default()
                    })
                    .collect()
            })
        })
    }
    fn inspect<'a>(&'a self, _: &'a str, name: &'a str) -> Call<'a, ContainerView> {
        Box::pin(async move {
            self.note("inspect", name, "");
            if self.writes() > 0 {
                let mut down = self.down_after_write.lock().unwrap();
                if *down > 0 {
                    *down -= 1;
                    self.calls
                        .lock()
                        .unwrap()
                        .push("inspect (unreachable)".into());
                    return Err(ExecutorError::new(
                        Code::Unavailable,
                        "tcp connect error: Connection refused (os error 111)",
                    ));
                }
            }
            self.answer("inspect", || ())?;
            self.find(name)
        })
    }
    fn logs_window<'a>(
        &'a self,
        _: &'a str,
        name: &'a str,
        tail: u32,
        _since: i64,
        until: i64,
    ) -> Call<'a, LogsView> {
        Box::pin(async move {
            let rest = if until != 0 {
                format!(" until {until}")
            } else {
                format!(" {tail}")
            };
            self.note("logs", name, &rest);
            self.answer("logs", || ())?;
            let c = self.find(name)?;
            let scripted = match until {
                0 => self.logs_of.get(&c.name),
                _ => self
                    .logs_until_of
                    .get(&c.name)
                    .or_else(|| self.logs_of.get(&c.name)),
            };
            let lines = match scripted {
                Some(lines) => lines.clone(),
                None => self
                    .logs
                    .iter()
                    .map(|t| LogLineView {
                        stream: "stdout".into(),
                        text: t.clone(),
                        time_unix_nanos: 0,
                    })
                    .collect(),
            };
            Ok(LogsView {
                lines,
                ..Default::default()
            })
        })
    }
    fn policy<'a>(&'a self, _: &'a str) -> Call<'a, PolicyView> {
        Box::pin(async move {
            tokio::time::sleep(self.policy_delay).await;
            self.answer("policy", || self.policy.clone())
        })
    }
    fn stats<'a>(&'a self, _: &'a str, name: &'a str) -> Call<'a, StatsView> {
        Box::pin(async move {
            self.note("stats", name, "");
            tokio::time::sleep(self.stats_delay).await;
            self.answer("stats", || ())?;
            self.find(name)?;
            Ok(self.stats.clone())
        })
    }
    fn disk_usage<'a>(&'a self, _: &'a str, name: &'a str) -> Call<'a, DiskUsageView> {
        Box::pin(async move {
            self.note("disk_usage", name, "");
            self.answer("disk_usage", || ())?;
            let c = self.find(name)?;
            Ok(DiskUsageView {
                container_id: c.id,
                ..self.disk.clone()
            })
        })
    }
    fn container_events<'a>(
        &'a self,
        _: &'a str,
        name: &'a str,
        _: i64,
        _: u32,
    ) -> Call<'a, Vec<ContainerEvent>> {
        Box::pin(async move {
            self.note("events", name, "");
            self.answer("events", || ())?;
            let c = self.find(name)?;
            Ok(self.events_of.get(&c.name).cloned().unwrap_or_default())
        })
    }
    fn registry_digest<'a>(&'a self, _: &'a str, name: &'a str) -> Call<'a, RegistryView> {
        Box::pin(async move {
            self.note("registry_digest", name, "");
            self.answer("registry_digest", || ())?;
            let after = self.writes() > 0 && self.registry_after.is_some();
            let answer = if after {
                &self.registry_after
            } else {
                &self.registry
            };
            answer.clone().ok_or_else(|| {
                ExecutorError::new(
                    Code::PermissionDenied,
                    "registry docker.io (repository library/x) is not in `registries` of executor.yaml",
                )
            })
        })
    }
    fn build_source<'a>(
        &'a self,
        _: &'a str,
        name: &'a str,
        _: &'a str,
    ) -> Call<'a, BuildSourceView> {
        Box::pin(async move {
            self.note("build_source", name, "");
            self.answer("build_source", || ())?;
            Err(ExecutorError::new(
                Code::FailedPrecondition,
                "it is built from no context in build.contexts",
            ))
        })
    }
    fn image<'a>(&'a self, _: &'a str, image_id: &'a str) -> Call<'a, ImageView> {
        Box::pin(async move {
            self.answer("image", || ImageView {
                present: self.images.contains(&image_id.to_string()),
                id: image_id.into(),
                ..Default::default()
            })
        })
    }
    fn services<'a>(&'a self, _: &'a str) -> Call<'a, Vec<ServiceSummaryView>> {
        Box::pin(async move { swarm_read(self, "services", |s| vec![s.service.summary.clone()]) })
    }
    fn service<'a>(&'a self, _: &'a str, _: &'a str) -> Call<'a, ServiceView> {
        Box::pin(async move {
            let mut read = swarm_read(self, "service", |s| s.service.clone())?;
            let mut settling = self.settling.lock().unwrap();
            if *settling > 0 {
                *settling -= 1;
                read.summary.update_state = UpdateState::Updating;
                read.summary.version -= 1;
            }
            Ok(read)
        })
    }
    fn tasks<'a>(&'a self, _: &'a str, _: &'a str) -> Call<'a, Vec<TaskView>> {
        Box::pin(async move { swarm_read(self, "tasks", |s| s.tasks.clone()) })
    }
    fn service_logs<'a>(&'a self, _: &'a str, _: &'a str, _: u32) -> Call<'a, LogsView> {
        Box::pin(async move { swarm_read(self, "service_logs", |s| s.logs.clone()) })
    }
    fn nodes<'a>(&'a self, _: &'a str) -> Call<'a, Vec<NodeView>> {
        Box::pin(async move { swarm_read(self, "nodes", |s| s.nodes.clone()) })
    }
    fn service_registry_digest<'a>(&'a self, r: &'a str, name: &'a str) -> Call<'a, RegistryView> {
        self.registry_digest(r, name)
    }
    fn check_http<'a>(&'a self, _: &'a str, service: &'a str) -> Call<'a, HttpCheckView> {
        Box::pin(async move {
            self.calls.lock().unwrap().push("check_http".into());
            Err(ExecutorError::new(
                Code::NotFound,
                format!("no http check {service}"),
            ))
        })
    }
}

impl Executor for Scripted {
    fn write<'a>(&'a self, _: &'a str, op: &'a WriteOp, authority: Authority) -> Call<'a, Written> {
        Box::pin(async move {
            let by = match authority {
                // With more than one approver: who signed.
                Authority::Approval {
                    key_id, cosigners, ..
                } if !cosigners.is_empty() => format!(
                    "approval of {}",
                    std::iter::once(key_id)
                        .chain(cosigners.into_iter().map(|(id, _)| id))
                        .collect::<Vec<_>>()
                        .join("+")
                ),
                Authority::Approval { .. } => "approval".to_string(),
                Authority::Grant { .. } => "grant".to_string(),
            };
            let action = op.action();
            let to = match op {
                WriteOp::Container {
                    write: ContainerWrite::Rollback { to_image },
                    ..
                } => format!(" to {to_image}"),
                _ => String::new(),
            };
            self.calls
                .lock()
                .unwrap()
                .push(format!("write {action}{to} by {by}"));
            self.rpcs
                .lock()
                .unwrap()
                .push(format!("WRITE {action} {}", op.id()));
            *self.container.lock().unwrap() = self.write.after.clone();
            if let WriteOp::Service { .. } = op {
                return swarm_write(self, action);
            }
            self.write.answer.clone().map(|()| Written {
                new_container_id: matches!(action, WriteAction::Rollback | WriteAction::Update)
                    .then(|| self.write.after.id.clone()),
                service_version: None,
                built: None,
            })
        })
    }
}

/// What a scripted Swarm manager answers, before and after a write.
#[derive(Clone)]
pub struct SwarmScript {
    pub service: ServiceView,
    pub tasks: Vec<TaskView>,
    pub nodes: Vec<NodeView>,
    pub logs: LogsView,
    /// The service and its tasks once a write is done.
    pub after: Option<(ServiceView, Vec<TaskView>)>,
}

pub fn swarm_read<T>(
    s: &Scripted,
    rpc: &'static str,
    f: impl FnOnce(&SwarmScript) -> T,
) -> Result<T, ExecutorError> {
    if s.writes() > 0 {
        let mut down = s.down_after_write.lock().unwrap();
        if *down > 0 {
            *down -= 1;
            s.calls.lock().unwrap().push(format!("{rpc} (unreachable)"));
            return Err(ExecutorError::new(
                Code::Unavailable,
                "tcp connect error: Connection refused (os error 111)",
            ));
        }
    }
    s.calls.lock().unwrap().push(rpc.to_string());
    match s.swarm.lock().unwrap().as_ref() {
        Some(script) => Ok(f(script)),
        None => Err(ExecutorError::new(
            Code::FailedPrecondition,
            "the engine is not a Swarm manager",
        )),
    }
}

pub fn swarm_write(s: &Scripted, action: WriteAction) -> Result<Written, ExecutorError> {
    let mut swarm = s.swarm.lock().unwrap();
    let script = swarm.as_mut().expect("a Swarm script");
    if let Some((service, tasks)) = script.after.take() {
        script.service = service;
        script.tasks = tasks;
    }
    s.write.answer.clone()?;
    let _ = action;
    Ok(Written {
        new_container_id: None,
        service_version: Some(script.service.summary.version),
        built: None,
    })
}
