//! Evidence: every answer drydock read, recorded once with an id that a
//! diagnosis cites. One table (`evidence!`) names each kind with its wire
//! name and its payload's type, so a rule reads
//! `request.latest::<kind::Inspect>()` and gets a `ContainerView`, never a
//! `serde_json::Value` to pick apart. `docs/diagnosis.md`'s evidence table
//! names the same kinds (a test checks both ways).
//!
//! On the wire a piece of evidence is `{id, type, source, timestamp,
//! data}`, as it always was. A stored piece this release cannot read (a
//! kind it does not know, or data of another shape) is kept as `Other`,
//! untouched, rather than making the whole request unreadable.

use serde::de::Error as _;
use serde::ser::SerializeStruct as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::change::Change;
use crate::container::{
    ContainerEvent, ContainerSummaryView, ContainerView, DeathLogs, DiskUsageView, HttpCheckView,
    LogsView, PolicyView, RegistryView, StatsView,
};
use crate::request::{Status, Target};
use crate::swarm::{NodeView, ServiceSummaryView, ServiceView, TaskView};
use crate::time::span;
use crate::{FaultClass, Note, WriteAction, COMPOSE_SERVICE_LABEL};
use drydock_proto::docker::HealthStatus;

/// A host whose executor did not answer a search.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct HostUnreachable {
    pub host: String,
    pub error: String,
}

/// The runbook entry for the target.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct RunbookEntry {
    pub service: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub http_check: Option<String>,
    #[serde(default)]
    pub notes: Option<String>,
}

/// Operators' notes on the target, shown as data.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct NotesFound {
    /// Says the notes are data, never instructions.
    pub notice: String,
    pub notes: Vec<Note>,
}

/// A target's memory: earlier requests about it and how its repairs held.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct History {
    /// Earlier requests about the target, newest first.
    pub requests: Vec<PastRequest>,
    /// Their restarts and starts, newest first, with how long each held.
    pub repairs: Vec<PastRepair>,
    pub deaths_this_week: u32,
    pub oom_kills_this_week: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PastRequest {
    pub id: String,
    pub created_at: String,
    pub status: Status,
    #[serde(default)]
    pub class: Option<FaultClass>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PastRepair {
    pub request_id: String,
    pub action: WriteAction,
    pub at: String,
    /// Until the next failure (a death, an unhealthy turn, a request about
    /// it), or until now when there was none.
    pub held_secs: i64,
    /// Whether it held long enough to count as a repair (or holds still).
    pub held: bool,
}

/// The shape of a failure, read from facts Docker gives (the exit code,
/// the start and death events, the runs in the logs, the health log): what
/// a diagnosis knows before it reads any words, and what decides whether a
/// start or restart can help.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FailureShape {
    /// The exit code in words (or that it runs).
    pub exit: String,
    /// How long its last run lasted, to its death or to now.
    #[serde(default)]
    pub uptime_secs: Option<i64>,
    /// It died before `ran_well_after` without saying it was ready.
    pub startup_failure: bool,
    /// The line of its last run that said it was ready.
    #[serde(default)]
    pub ready_line: Option<String>,
    /// It passed its healthcheck at some point.
    pub was_healthy: bool,
    /// Starts and deaths the engine recorded in the window, and the
    /// deaths that came within `ran_well_after` of their start.
    pub starts: u32,
    pub deaths: u32,
    pub quick_deaths: u32,
    /// The salient line was logged in each of this many runs.
    #[serde(default)]
    pub same_at_every_start: Option<u32>,
    /// Its `on-failure:N` restart policy gave up.
    pub policy_exhausted: bool,
    /// The seconds a run must last to count as having run well.
    pub ran_well_after_secs: i64,
    /// The salient line of the run that died (found by severity and
    /// position, not by a known message).
    #[serde(default)]
    pub salient_line: Option<String>,
    /// The failure's signature: how it ended and its salient line without
    /// numbers.
    #[serde(default)]
    pub signature: Option<String>,
    /// Why a start may help, from this evidence: it ran well, or the same
    /// failure was fixed by a start before. `None`: nothing says so.
    #[serde(default)]
    pub start_may_help: Option<String>,
}

/// A repair held when the target did not fail again within this long.
pub const HELD_FOR_SECS: i64 = 24 * 3600;
/// Restarts that did not hold, in a row, after which another is not
/// proposed without saying so.
pub const RESTARTS_BEFORE_TELLING: usize = 2;

impl History {
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty() && self.deaths_this_week == 0 && self.oom_kills_this_week == 0
    }

    /// The newest restarts and starts that did not hold, in a row.
    pub fn restarts_that_did_not_hold(&self) -> Vec<&PastRepair> {
        self.repairs.iter().take_while(|r| !r.held).collect()
    }

    /// Whether another restart should be a person's decision, told why.
    pub fn restart_does_not_hold(&self) -> bool {
        self.restarts_that_did_not_hold().len() >= RESTARTS_BEFORE_TELLING
    }

    /// "held 9 h and 2 h".
    pub fn held_words(&self) -> String {
        let spans: Vec<String> = self
            .restarts_that_did_not_hold()
            .iter()
            .map(|r| span(r.held_secs))
            .collect();
        match spans.split_last() {
            Some((last, [])) => format!("held {last}"),
            Some((last, rest)) => format!("held {} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// One line for a person.
    pub fn summary(&self, name: &str) -> String {
        let mut parts = Vec::new();
        if !self.requests.is_empty() {
            let mut classes: Vec<(String, usize)> = Vec::new();
            for c in self.requests.iter().filter_map(|r| r.class) {
                match classes.iter_mut().find(|(n, _)| n == c.as_str()) {
                    Some((_, k)) => *k += 1,
                    None => classes.push((c.as_str().to_string(), 1)),
                }
            }
            let said: Vec<String> = classes
                .iter()
                .map(|(c, k)| {
                    if *k > 1 {
                        format!("{c} ×{k}")
                    } else {
                        c.clone()
                    }
                })
                .collect();
            parts.push(format!(
                "{} earlier request{} about {name}{}",
                self.requests.len(),
                if self.requests.len() == 1 { "" } else { "s" },
                if said.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", said.join(", "))
                }
            ));
        }
        let failed = self.restarts_that_did_not_hold();
        if !failed.is_empty() {
            parts.push(format!(
                "the last {} restart{} did not hold ({})",
                failed.len(),
                if failed.len() == 1 { "" } else { "s" },
                self.held_words()
            ));
        } else if let Some(r) = self.repairs.first() {
            parts.push(format!(
                "the last {} has held {}",
                r.action,
                span(r.held_secs)
            ));
        }
        if self.oom_kills_this_week > 0 {
            parts.push(format!(
                "{} OOM kill{} this week",
                self.oom_kills_this_week,
                if self.oom_kills_this_week == 1 {
                    ""
                } else {
                    "s"
                }
            ));
        }
        if self.deaths_this_week > 0 {
            parts.push(format!(
                "{} death{} in the journal this week",
                self.deaths_this_week,
                if self.deaths_this_week == 1 { "" } else { "s" }
            ));
        }
        parts.join("; ")
    }
}

/// A dependency named by the evidence, and what became of looking for it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct DependencyState {
    /// As the logs or the runbook named it: `db:5432`.
    pub named: String,
    /// `log` or `runbook`.
    pub source: String,
    /// The container behind the name; `None` when none exists.
    pub container: Option<ContainerView>,
}

impl DependencyState {
    /// The container behind the name, as a target on the request's host
    /// (it was read there).
    pub fn target(&self) -> Option<Target> {
        self.container.as_ref().map(|c| {
            Target::container(
                c.id.clone(),
                c.name.clone(),
                c.labels.get(COMPOSE_SERVICE_LABEL).cloned(),
                None,
            )
        })
    }

    /// Running, and healthy if it has a healthcheck.
    pub fn ready(&self) -> bool {
        self.container.as_ref().is_some_and(|c| {
            c.running
                && !c.restarting
                && c.health_status != HealthStatus::Unhealthy
                && c.health_status != HealthStatus::Starting
        })
    }
}

/// What a container was just before a write, so verification can tell a
/// recovery from a state it was already in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ContainerSnapshot {
    pub action: WriteAction,
    #[serde(default)]
    pub status: drydock_proto::docker::ContainerState,
    #[serde(default)]
    pub exit_code: i64,
    #[serde(default)]
    pub oom_killed: bool,
    #[serde(default)]
    pub error: String,
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub finished_at: String,
    #[serde(default)]
    pub restart_count: i64,
    #[serde(default)]
    pub health_status: HealthStatus,
    #[serde(default)]
    pub failing_streak: u32,
    #[serde(default)]
    pub health_log: Vec<crate::container::HealthProbeView>,
    /// Its last log lines.
    #[serde(default)]
    pub last_lines: Vec<String>,
}

/// A Swarm service and its tasks just before a write: verification tells
/// the tasks the write replaces from new ones.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ServiceSnapshot {
    pub action: WriteAction,
    pub service: ServiceSummaryView,
    pub tasks: Vec<TaskView>,
}

/// The state before a write, of a container or of a service.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(untagged)]
// One snapshot is read at a time.
#[allow(clippy::large_enum_variant)]
pub enum PreWriteSnapshot {
    Service(ServiceSnapshot),
    Container(ContainerSnapshot),
}

/// What verification read after a write: a container's inspect or a
/// service's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[serde(untagged)]
#[allow(clippy::large_enum_variant)]
pub enum AfterWrite {
    Container(ContainerView),
    Service(ServiceView),
}

macro_rules! evidence {
    ($(
        $(#[$doc:meta])*
        $variant:ident($payload:ty) = $name:literal,
    )*) => {
        /// The kinds of evidence, by the name the wire and the docs give
        /// them (`type`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum EvidenceKind {
            $($(#[$doc])* $variant,)*
        }

        impl EvidenceKind {
            /// Every kind, in the order of the table.
            pub const ALL: &'static [EvidenceKind] = &[$(EvidenceKind::$variant,)*];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $(EvidenceKind::$variant => $name,)*
                }
            }

            pub fn parse(name: &str) -> Option<EvidenceKind> {
                match name {
                    $($name => Some(EvidenceKind::$variant),)*
                    _ => None,
                }
            }
        }

        /// What a piece of evidence holds, by kind.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum EvidencePayload {
            $($(#[$doc])* $variant($payload),)*
            /// Stored by another release in a form this one cannot read;
            /// kept as it was.
            Other { kind: String, data: Value },
        }

        impl EvidencePayload {
            /// The kind's wire name.
            pub fn kind_name(&self) -> &str {
                match self {
                    $(EvidencePayload::$variant(_) => $name,)*
                    EvidencePayload::Other { kind, .. } => kind,
                }
            }

            /// The kind, unless it is one this release does not know.
            pub fn kind(&self) -> Option<EvidenceKind> {
                match self {
                    $(EvidencePayload::$variant(_) => Some(EvidenceKind::$variant),)*
                    EvidencePayload::Other { .. } => None,
                }
            }

            /// The `data` of the wire form.
            pub fn data(&self) -> Result<Value, serde_json::Error> {
                match self {
                    $(EvidencePayload::$variant(p) => serde_json::to_value(p),)*
                    EvidencePayload::Other { data, .. } => Ok(data.clone()),
                }
            }

            /// The payload of a `kind` and its `data`; what cannot be read
            /// as its kind is kept as `Other`.
            pub fn from_parts(kind: &str, data: Value) -> EvidencePayload {
                let read = match kind {
                    $($name => serde_json::from_value(data.clone()).map(EvidencePayload::$variant),)*
                    _ => return EvidencePayload::Other { kind: kind.to_string(), data },
                };
                read.unwrap_or(EvidencePayload::Other { kind: kind.to_string(), data })
            }
        }

        /// One marker type per kind, for `Request::latest::<kind::X>()`.
        pub mod kind {
            /// A kind of evidence and the type its payload has.
            pub trait Kind {
                const KIND: super::EvidenceKind;
                type Payload;
                fn of(payload: &super::EvidencePayload) -> Option<&Self::Payload>;
            }

            $(
                $(#[$doc])*
                #[derive(Debug, Clone, Copy)]
                pub struct $variant;
            )*
        }

        $(
            impl kind::Kind for kind::$variant {
                const KIND: EvidenceKind = EvidenceKind::$variant;
                type Payload = $payload;
                fn of(payload: &EvidencePayload) -> Option<&$payload> {
                    match payload {
                        EvidencePayload::$variant(p) => Some(p),
                        _ => None,
                    }
                }
            }
        )*

        /// A piece of evidence's schema names each kind's payload.
        impl schemars::JsonSchema for Evidence {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                "Evidence".into()
            }

            fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
                let kinds: Vec<Value> = vec![$(
                    serde_json::json!({
                        "type": "object",
                        "properties": {
                            "type": {"const": $name},
                            "data": generator.subschema_for::<$payload>(),
                        },
                    }),
                )*];
                schemars::json_schema!({
                    "description": "One answer drydock read, with the id a diagnosis cites.",
                    "type": "object",
                    "required": ["id", "type", "source", "timestamp", "data"],
                    "properties": {
                        "id": {"type": "string"},
                        "type": {"type": "string", "enum": [$($name,)*]},
                        "source": {"type": "string", "description": "The executor RPC (or drydock's own store) that produced it."},
                        "timestamp": {"type": "string"},
                        "data": {},
                    },
                    "oneOf": kinds,
                })
            }
        }
    };
}

evidence! {
    /// The containers the executors list (discovery).
    ContainerList(Vec<ContainerSummaryView>) = "container_list",
    /// The Swarm services in scope (discovery).
    ServiceList(Vec<ServiceSummaryView>) = "service_list",
    /// Hosts whose executor did not answer a search.
    HostsUnreachable(Vec<HostUnreachable>) = "hosts_unreachable",
    /// The runbook's entry for the target.
    Runbook(RunbookEntry) = "runbook",
    /// Earlier requests about the target and how its repairs held.
    History(History) = "history",
    /// Operators' notes on the target.
    Notes(NotesFound) = "notes",
    /// The target's inspect.
    Inspect(ContainerView) = "inspect",
    /// The executor's policy: the actions it enables and their tiers.
    Policy(PolicyView) = "policy",
    /// The target's recent log lines.
    Logs(LogsView) = "logs",
    /// A usage sample of the target.
    Stats(StatsView) = "stats",
    /// The target's engine events.
    Events(Vec<ContainerEvent>) = "events",
    /// What the target logged before a past death.
    DeathLogs(DeathLogs) = "death_logs",
    /// The failure's shape, derived from the evidence above.
    Shape(FailureShape) = "shape",
    /// What changed since the last incarnation that ran well.
    Change(Change) = "change",
    /// A dependency the evidence names, and the container behind it.
    Dependency(DependencyState) = "dependency",
    /// Where the target's disk space goes.
    DiskUsage(DiskUsageView) = "disk_usage",
    /// The target's tag and the digest its registry names by it now.
    Registry(RegistryView) = "registry",
    /// The target's build context and the commit asked for.
    BuildSource(crate::BuildSourceView) = "build_source",
    /// A Swarm service's inspect.
    Service(ServiceView) = "service",
    /// A Swarm service's tasks.
    Tasks(Vec<TaskView>) = "tasks",
    /// The Swarm cluster's nodes.
    Nodes(Vec<NodeView>) = "nodes",
    /// The state right before a write.
    PreWriteSnapshot(PreWriteSnapshot) = "pre_write_snapshot",
    /// An operator-configured HTTP check's answer.
    HttpCheck(HttpCheckView) = "http_check",
    /// What verification read after a write.
    Verification(AfterWrite) = "verification",
    /// A model's inspect of a container other than the target.
    RelatedInspect(ContainerView) = "related_inspect",
    /// A model's read of another container's logs.
    RelatedLogs(LogsView) = "related_logs",
    /// A model's usage sample of another container.
    RelatedStats(StatsView) = "related_stats",
    /// A model's read of another container's disk usage.
    RelatedDiskUsage(DiskUsageView) = "related_disk_usage",
}

/// One answer drydock read, with the id a diagnosis cites.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    pub id: String,
    /// The executor RPC (or drydock's own store) that produced it.
    pub source: String,
    pub timestamp: String,
    pub payload: EvidencePayload,
}

impl Evidence {
    /// The kind's wire name.
    pub fn kind_name(&self) -> &str {
        self.payload.kind_name()
    }

    /// This piece's payload, if it is of kind `K`.
    pub fn get<K: kind::Kind>(&self) -> Option<&K::Payload> {
        K::of(&self.payload)
    }
}

impl std::fmt::Display for EvidenceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Evidence {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let data = self.payload.data().map_err(serde::ser::Error::custom)?;
        let mut out = s.serialize_struct("Evidence", 5)?;
        out.serialize_field("id", &self.id)?;
        out.serialize_field("type", self.kind_name())?;
        out.serialize_field("source", &self.source)?;
        out.serialize_field("timestamp", &self.timestamp)?;
        out.serialize_field("data", &data)?;
        out.end()
    }
}

impl<'de> Deserialize<'de> for Evidence {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Evidence, D::Error> {
        #[derive(Deserialize)]
        struct Wire {
            id: String,
            #[serde(rename = "type")]
            kind: String,
            #[serde(default)]
            source: String,
            #[serde(default)]
            timestamp: String,
            #[serde(default)]
            data: Value,
        }
        let w = Wire::deserialize(d).map_err(|e| D::Error::custom(format!("evidence: {e}")))?;
        Ok(Evidence {
            payload: EvidencePayload::from_parts(&w.kind, w.data),
            id: w.id,
            source: w.source,
            timestamp: w.timestamp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_one_name_and_reads_back_as_itself() {
        let mut names: Vec<&str> = EvidenceKind::ALL.iter().map(|k| k.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), EvidenceKind::ALL.len());
        for k in EvidenceKind::ALL {
            assert_eq!(EvidenceKind::parse(k.as_str()), Some(*k));
        }
        let ev = Evidence {
            id: "ev-1".into(),
            source: "InspectContainer".into(),
            timestamp: "t".into(),
            payload: EvidencePayload::Inspect(ContainerView {
                id: "c1".into(),
                ..Default::default()
            }),
        };
        let wire = serde_json::to_value(&ev).unwrap();
        assert_eq!(wire["type"], "inspect");
        assert_eq!(wire["data"]["id"], "c1");
        let back: Evidence = serde_json::from_value(wire).unwrap();
        assert_eq!(back, ev);
        assert_eq!(
            back.get::<kind::Inspect>().map(|c| c.id.as_str()),
            Some("c1")
        );
        assert!(back.get::<kind::Logs>().is_none());
    }

    #[test]
    fn what_this_release_cannot_read_is_kept_as_it_was() {
        for (kind, data) in [
            ("hunch", serde_json::json!({"x": 1})),
            ("inspect", serde_json::json!("not an inspect")),
        ] {
            let wire = serde_json::json!({"id": "ev-2", "type": kind, "source": "s", "timestamp": "t", "data": data});
            let ev: Evidence = serde_json::from_value(wire.clone()).unwrap();
            assert!(
                matches!(ev.payload, EvidencePayload::Other { .. }),
                "{kind}"
            );
            assert_eq!(serde_json::to_value(&ev).unwrap(), wire);
        }
    }

    #[test]
    fn a_snapshot_and_a_verification_read_back_as_their_shape() {
        let service = PreWriteSnapshot::Service(ServiceSnapshot {
            action: WriteAction::ForceUpdate,
            service: ServiceSummaryView::default(),
            tasks: vec![],
        });
        let container = PreWriteSnapshot::Container(ContainerSnapshot {
            action: WriteAction::Restart,
            status: "exited".into(),
            exit_code: 3,
            oom_killed: false,
            error: String::new(),
            started_at: String::new(),
            finished_at: String::new(),
            restart_count: 2,
            health_status: HealthStatus::None,
            failing_streak: 0,
            health_log: vec![],
            last_lines: vec!["boom".into()],
        });
        for s in [service, container] {
            let back: PreWriteSnapshot =
                serde_json::from_value(serde_json::to_value(&s).unwrap()).unwrap();
            assert_eq!(back, s);
        }
        for v in [
            AfterWrite::Container(ContainerView::default()),
            AfterWrite::Service(ServiceView::default()),
        ] {
            let back: AfterWrite =
                serde_json::from_value(serde_json::to_value(&v).unwrap()).unwrap();
            assert_eq!(back, v);
        }
    }
}
