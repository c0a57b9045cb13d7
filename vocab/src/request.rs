//! A request and what it accumulates: target, evidence, diagnosis, plan,
//! approvals, execution and verification. This is the JSON document of
//! `GET /api/v1/requests/{id}`.

use serde::{Deserialize, Serialize};

use crate::{Evidence, FaultClass, WriteAction};

/// Where a request stands. The lifecycle (which state follows which) is the
/// agent's (`engine::lifecycle`); the words are here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Observing,
    Diagnosing,
    Planning,
    WaitingApproval,
    Executing,
    Verifying,
    Completed,
    Failed,
    NeedsClarification,
    Rejected,
    Canceled,
}

impl Status {
    /// Every state, in lifecycle order.
    pub const ALL: [Status; 11] = [
        Status::Observing,
        Status::Diagnosing,
        Status::Planning,
        Status::WaitingApproval,
        Status::Executing,
        Status::Verifying,
        Status::Completed,
        Status::Failed,
        Status::NeedsClarification,
        Status::Rejected,
        Status::Canceled,
    ];

    /// A finished request is never changed again.
    pub const fn is_terminal(self) -> bool {
        match self {
            Status::Completed
            | Status::Failed
            | Status::NeedsClarification
            | Status::Rejected
            | Status::Canceled => true,
            Status::Observing
            | Status::Diagnosing
            | Status::Planning
            | Status::WaitingApproval
            | Status::Executing
            | Status::Verifying => false,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Status::Observing => "observing",
            Status::Diagnosing => "diagnosing",
            Status::Planning => "planning",
            Status::WaitingApproval => "waiting_approval",
            Status::Executing => "executing",
            Status::Verifying => "verifying",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::NeedsClarification => "needs_clarification",
            Status::Rejected => "rejected",
            Status::Canceled => "canceled",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// The finished states.
    pub fn terminal() -> impl Iterator<Item = Status> {
        Status::ALL.into_iter().filter(|s| s.is_terminal())
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who opened a request.
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum RequestSource {
    /// A person: `drydock ask`, the console, an MCP client.
    #[default]
    Ask,
    /// The agent's watcher, on a container event.
    Watch,
    /// An Alertmanager webhook.
    Alert,
    /// A schedule (`drydock schedule add`): a diagnose-only look.
    Schedule,
    /// The update checker: an update found, inside an update grant's hours.
    Update,
}

impl RequestSource {
    pub const fn as_str(self) -> &'static str {
        match self {
            RequestSource::Ask => "ask",
            RequestSource::Watch => "watch",
            RequestSource::Alert => "alert",
            RequestSource::Schedule => "schedule",
            RequestSource::Update => "update",
        }
    }
}

/// What a request is about: one container, or one Swarm service.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum TargetKind {
    #[default]
    Container,
    Service,
}

impl TargetKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            TargetKind::Container => "container",
            TargetKind::Service => "service",
        }
    }
}

impl std::fmt::Display for TargetKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A container a request is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerSubject {
    pub id: String,
    pub name: String,
    /// Its compose service, when compose made it.
    pub compose_service: Option<String>,
}

/// A Swarm service a request is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSubject {
    pub id: String,
    pub name: String,
    /// Its stack, when `docker stack deploy` made it.
    pub stack: Option<String>,
}

/// What a request is about, chosen once: each kind with what belongs to
/// it, so a phase is picked by matching on it, never by a flag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Container(ContainerSubject),
    Service(ServiceSubject),
}

/// A request's target: its subject, on one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "TargetWire", into = "TargetWire")]
pub struct Target {
    pub subject: Subject,
    /// The host whose executor it is on, when the agent serves several
    /// (`hosts:` in its config); `None` with a single executor.
    pub host: Option<String>,
}

/// A target on the wire and in stored requests, as it always was: a
/// service's id and name in the `container_*` fields (the names are kept
/// from when only containers were targets), `service` a container's
/// compose service, `stack` a service's.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
#[schemars(rename = "Target")]
pub struct TargetWire {
    #[serde(default)]
    pub kind: TargetKind,
    /// The target's id and name: a container's, or for `kind: service` the
    /// Swarm service's.
    pub container_id: String,
    pub container_name: String,
    /// A container's compose service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    /// A Swarm service's stack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    /// The host whose executor it is on, when the agent serves several
    /// (`hosts:` in its config); absent with a single executor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl From<TargetWire> for Target {
    fn from(w: TargetWire) -> Target {
        let subject = match w.kind {
            TargetKind::Container => Subject::Container(ContainerSubject {
                id: w.container_id,
                name: w.container_name,
                compose_service: w.service,
            }),
            TargetKind::Service => Subject::Service(ServiceSubject {
                id: w.container_id,
                name: w.container_name,
                stack: w.stack,
            }),
        };
        Target {
            subject,
            host: w.host,
        }
    }
}

impl From<Target> for TargetWire {
    fn from(t: Target) -> TargetWire {
        let kind = t.kind();
        let (container_id, container_name, service, stack) = match t.subject {
            Subject::Container(c) => (c.id, c.name, c.compose_service, None),
            Subject::Service(s) => (s.id, s.name, None, s.stack),
        };
        TargetWire {
            kind,
            container_id,
            container_name,
            service,
            stack,
            host: t.host,
        }
    }
}

impl schemars::JsonSchema for Target {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        TargetWire::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        TargetWire::json_schema(generator)
    }
}

impl Target {
    /// A container target.
    pub fn container(
        id: impl Into<String>,
        name: impl Into<String>,
        compose_service: Option<String>,
        host: Option<String>,
    ) -> Target {
        Target {
            subject: Subject::Container(ContainerSubject {
                id: id.into(),
                name: name.into(),
                compose_service,
            }),
            host,
        }
    }

    /// A Swarm service target.
    pub fn service(
        id: impl Into<String>,
        name: impl Into<String>,
        stack: Option<String>,
        host: Option<String>,
    ) -> Target {
        Target {
            subject: Subject::Service(ServiceSubject {
                id: id.into(),
                name: name.into(),
                stack,
            }),
            host,
        }
    }

    pub fn kind(&self) -> TargetKind {
        match self.subject {
            Subject::Container(_) => TargetKind::Container,
            Subject::Service(_) => TargetKind::Service,
        }
    }

    /// The container's or the service's id.
    pub fn id(&self) -> &str {
        match &self.subject {
            Subject::Container(c) => &c.id,
            Subject::Service(s) => &s.id,
        }
    }

    /// The container's or the service's name.
    pub fn name(&self) -> &str {
        match &self.subject {
            Subject::Container(c) => &c.name,
            Subject::Service(s) => &s.name,
        }
    }

    /// Whether `other` is the same container or service on the same host
    /// (by id, or by name: a recreated container keeps its name).
    pub fn same_as(&self, other: &Target) -> bool {
        self.kind() == other.kind()
            && self.host == other.host
            && (self.id() == other.id() || self.name() == other.name())
    }

    /// A container's compose service.
    pub fn compose_service(&self) -> Option<&str> {
        match &self.subject {
            Subject::Container(c) => c.compose_service.as_deref(),
            Subject::Service(_) => None,
        }
    }

    /// A service's stack.
    pub fn stack(&self) -> Option<&str> {
        match &self.subject {
            Subject::Container(_) => None,
            Subject::Service(s) => s.stack.as_deref(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Candidate {
    /// A container or a Swarm service (whose id and name the two fields
    /// below then hold).
    #[serde(default)]
    pub kind: TargetKind,
    pub container_id: String,
    pub container_name: String,
    pub image: String,
    /// A container's state; a service's is `running` or, short of tasks,
    /// `degraded`.
    pub state: drydock_proto::docker::ContainerState,
    /// Its healthcheck's verdict when it has one (`healthy`, `unhealthy`,
    /// `starting`), as the engine listed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<drydock_proto::docker::HealthStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service: Option<String>,
    pub score: u32,
    pub why: String,
    /// The host it is on (several executors only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Cause {
    pub class: FaultClass,
    pub reason: String,
    pub confidence: f32,
    pub evidence_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct Diagnosis {
    pub summary: String,
    pub confidence: f32,
    pub causes: Vec<Cause>,
    /// `rules` or the model's name.
    pub engine: String,
    /// The failure's signature: its exit code and its salient log line
    /// with the numbers taken out. Two deaths with one signature are the
    /// same failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// The model's part, when a model investigated: its turns, tokens and
    /// time, and whether it was an open investigation (the rules were not
    /// sure and gave it no answer to confirm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelRun>,
}

/// What a model's investigation took.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct ModelRun {
    pub turns: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub elapsed_ms: u64,
    /// The rules engine was not sure (below the confidence a write needs,
    /// or `unknown`): the model got no rules answer to confirm.
    pub open: bool,
}

mod approval;
mod plan;
pub use approval::*;
pub use plan::*;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct ExecutionRecord {
    pub step: usize,
    pub action: WriteAction,
    pub container_id: String,
    pub approval_id: String,
    pub ok: bool,
    pub message: String,
    pub at: String,
    /// The executor's answer was lost (it stopped, or the connection did):
    /// the write may or may not have happened. It is never sent again; the
    /// container's state decides.
    #[serde(default)]
    pub in_doubt: bool,
    /// The automation grant that authorised it, when no person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// A rollback's new container (it took the old one's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_container_id: Option<String>,
    /// A Swarm service's spec version after the write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_version: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct VerificationCheck {
    /// `running`, `healthy`, `stable`, `http`.
    pub level: String,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Verification {
    pub ok: bool,
    pub checks: Vec<VerificationCheck>,
    pub evidence_ids: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default, schemars::JsonSchema)]
pub struct RequestOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<String>,
    #[serde(default)]
    pub diagnose_only: bool,
    /// The asker's offset from UTC, in minutes, so a time in a question
    /// ("at 3 am") is read as their clock says; UTC when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utc_offset_minutes: Option<i32>,
    /// Look on this host only (`--host`, or `web@host-b`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// A person asked to update the target to the image its tag names now
    /// in its registry (`drydock update`, "update the api").
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub update: bool,
    /// A person asked to build the target from its build context and run
    /// what was built (`drydock build`, "rebuild the api at 9c2d1e0").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::BuildOptions>,
}

/// Token accounting from the model API's own usage fields, summed over the
/// request's model calls.
#[derive(
    Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default, schemars::JsonSchema,
)]
pub struct LlmUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub model_calls: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct Request {
    pub id: String,
    pub message: String,
    /// Who opened it: a person (`ask`), the watcher, or an alert.
    #[serde(default)]
    pub source: RequestSource,
    pub status: Status,
    pub created_at: String,
    pub updated_at: String,
    pub options: RequestOptions,
    pub target: Option<Target>,
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    pub diagnosis: Option<Diagnosis>,
    /// With a model configured: what the rules engine concluded on its own.
    /// Writes on the target are bounded by it whatever the model says, and
    /// the rules planner plans from it when the model's plan is refused.
    #[serde(default)]
    pub rules_diagnosis: Option<Diagnosis>,
    pub plan: Option<Plan>,
    #[serde(default)]
    pub approvals: Vec<ApprovalRecord>,
    #[serde(default)]
    pub execution: Vec<ExecutionRecord>,
    pub verification: Option<Verification>,
    #[serde(default)]
    pub iterations: u32,
    /// Final words for the human: what happened and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Tokens the model API reported for this request (absent without a
    /// model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_usage: Option<LlmUsage>,
    /// What people added after asking (`drydock ask --to`), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub followups: Vec<FollowUp>,
    /// The rounds a follow-up closed by reopening the finished request,
    /// oldest first; the fields above are the current round's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_rounds: Vec<EarlierRound>,
}

/// A person's words added to a request after it was opened.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct FollowUp {
    pub message: String,
    pub at: String,
    /// The round it was added in (1 is the first); a follow-up on a
    /// finished request opens the next round.
    pub round: u32,
}

/// A finished round of a request, kept when a follow-up reopened it: what
/// it found and did, exactly as it stood when it ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, schemars::JsonSchema)]
pub struct EarlierRound {
    pub round: u32,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    pub target: Option<Target>,
    #[serde(default)]
    pub candidates: Vec<Candidate>,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    pub diagnosis: Option<Diagnosis>,
    pub plan: Option<Plan>,
    #[serde(default)]
    pub execution: Vec<ExecutionRecord>,
    pub verification: Option<Verification>,
}

/// The host a request is on: its target's, else the one it was asked
/// about (`options.host`); `None` with a lone executor.
pub fn request_host<'a>(
    target: Option<&'a Target>,
    options: &'a RequestOptions,
) -> Option<&'a str> {
    target
        .and_then(|t| t.host.as_deref())
        .or(options.host.as_deref())
}

impl Request {
    /// The host it is on: its target's, else the one it was asked about.
    pub fn host(&self) -> Option<&str> {
        request_host(self.target.as_ref(), &self.options)
    }

    /// A new request, `observing`, with nothing gathered yet.
    pub fn new(
        id: String,
        message: String,
        options: RequestOptions,
        source: RequestSource,
        now: String,
    ) -> Request {
        Request {
            id,
            message,
            source,
            status: Status::Observing,
            created_at: now.clone(),
            updated_at: now,
            options,
            target: None,
            candidates: vec![],
            evidence: vec![],
            diagnosis: None,
            rules_diagnosis: None,
            plan: None,
            approvals: vec![],
            execution: vec![],
            verification: None,
            iterations: 0,
            outcome: None,
            error: None,
            llm_usage: None,
            followups: vec![],
            earlier_rounds: vec![],
        }
    }

    /// The round under way: 1, and one more for each reopening.
    pub fn round(&self) -> u32 {
        self.earlier_rounds.len() as u32 + 1
    }

    /// Everything the people asked: the message, then each follow-up on
    /// its own line. Discovery and diagnosis read this, so a follow-up
    /// that names a container or a time counts like the first words.
    pub fn question(&self) -> std::borrow::Cow<'_, str> {
        if self.followups.is_empty() {
            return std::borrow::Cow::Borrowed(&self.message);
        }
        let mut all = self.message.clone();
        for f in &self.followups {
            all.push('\n');
            all.push_str(&f.message);
        }
        std::borrow::Cow::Owned(all)
    }

    /// Close the finished round into `earlier_rounds` and start the next
    /// one from `observing`, with nothing gathered: a follow-up on a
    /// finished request is diagnosed again from fresh evidence. Approvals
    /// stay (they are history, and none is pending on a finished request).
    pub fn reopen(&mut self) {
        let earlier = EarlierRound {
            round: self.round(),
            status: self.status,
            outcome: self.outcome.take(),
            target: self.target.take(),
            candidates: std::mem::take(&mut self.candidates),
            evidence: std::mem::take(&mut self.evidence),
            diagnosis: self.diagnosis.take(),
            plan: self.plan.take(),
            execution: std::mem::take(&mut self.execution),
            verification: self.verification.take(),
        };
        self.earlier_rounds.push(earlier);
        self.rules_diagnosis = None;
        self.error = None;
        self.iterations = 0;
        self.status = Status::Observing;
    }

    /// The request as the API shows it: signatures stay inside the agent.
    pub fn for_api(mut self) -> Request {
        for a in &mut self.approvals {
            a.forget_signatures();
        }
        self
    }

    /// The newest evidence of kind `K`, and its id (which a cause cites).
    pub fn latest_cited<K: crate::evidence::kind::Kind>(&self) -> Option<(&K::Payload, &str)> {
        self.evidence
            .iter()
            .rev()
            .find_map(|e| Some((e.get::<K>()?, e.id.as_str())))
    }

    /// The newest evidence of kind `K`.
    pub fn latest<K: crate::evidence::kind::Kind>(&self) -> Option<&K::Payload> {
        self.latest_cited::<K>().map(|(p, _)| p)
    }

    /// Approvals of the current plan (the newest round of them).
    pub fn current_approvals(&self) -> &[ApprovalRecord] {
        let n = self.plan.as_ref().map_or(0, |p| p.steps.len());
        let start = self.approvals.len().saturating_sub(n);
        &self.approvals[start..]
    }

    /// The change the diagnosis blames the failure on: `change` evidence
    /// its primary cause cites.
    pub fn blamed_change(&self) -> Option<crate::Change> {
        let cited = &self.diagnosis.as_ref()?.causes.first()?.evidence_ids;
        self.evidence
            .iter()
            .filter(|e| cited.contains(&e.id))
            .find_map(|e| e.get::<crate::evidence::kind::Change>())
            .cloned()
    }

    /// The pending approvals a person still has to decide.
    pub fn pending_approvals(&self) -> impl Iterator<Item = &ApprovalRecord> {
        self.approvals
            .iter()
            .filter(|a| a.status == ApprovalStatus::Pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_words_round_trip_and_terminal_ones_are_five() {
        for s in Status::ALL {
            let json = serde_json::to_value(s).unwrap();
            assert_eq!(json, serde_json::json!(s.as_str()));
            assert_eq!(Status::parse(s.as_str()), Some(s));
        }
        assert_eq!(
            Status::terminal().map(Status::as_str).collect::<Vec<_>>(),
            [
                "completed",
                "failed",
                "needs_clarification",
                "rejected",
                "canceled"
            ]
        );
        assert_eq!(Status::parse("done"), None);
    }

    /// A step reads back to the same bytes (the plan digest, which every
    /// approval binds, is over them), and a step whose write does not act
    /// on its target's kind, or a rollback without its images, is refused.
    #[test]
    fn plan_steps_keep_their_bytes_and_refuse_a_mismatch() {
        let image = |d: char| format!("sha256:{}", d.to_string().repeat(64));
        let (one, two) = (image('1'), image('2'));
        let steps = [
            r#"{"action":"restart","target":{"kind":"container","container_id":"c1","container_name":"web","service":"web"},"reason":"r","risk":"T1","expected_effect":"e","rollback":"b"}"#.to_string(),
            format!(r#"{{"action":"rollback","target":{{"kind":"container","container_id":"c1","container_name":"web","host":"a"}},"image_id":"{one}","from_image_id":"{two}","reason":"r","risk":"T2","expected_effect":"e","rollback":"b"}}"#),
            r#"{"action":"service_rollback","target":{"kind":"service","container_id":"s1","container_name":"shop_api","stack":"shop"},"service":{"id":"s1","name":"shop_api","version":7,"image":"api:2","to_image":"api:1"},"reason":"r","risk":"T2","expected_effect":"e","rollback":"b"}"#.to_string(),
        ];
        for text in steps {
            let step: PlanStep = serde_json::from_str(&text).unwrap();
            assert_eq!(serde_json::to_string(&step).unwrap(), text);
        }
        let refused = [
            serde_json::json!({"action": "force_update", "target": {"kind": "container", "container_id": "c1", "container_name": "web"}, "service": {"id": "c1", "name": "web", "version": 1, "image": "i"}, "reason": "r", "risk": "T1", "expected_effect": "e", "rollback": "b"}),
            serde_json::json!({"action": "restart", "target": {"kind": "service", "container_id": "s1", "container_name": "shop_api"}, "reason": "r", "risk": "T1", "expected_effect": "e", "rollback": "b"}),
            serde_json::json!({"action": "rollback", "target": {"kind": "container", "container_id": "c1", "container_name": "web"}, "image_id": "web:1", "reason": "r", "risk": "T2", "expected_effect": "e", "rollback": "b"}),
        ];
        for wire in refused {
            assert!(
                serde_json::from_value::<PlanStep>(wire.clone()).is_err(),
                "{wire}"
            );
        }
    }
}
