//! A scenario as data: what runs on the engine, what the person types, and
//! what a right answer is. Files under `tests/bench/scenarios/` hold a list
//! each; `load` reads every file and refuses, naming the file, the scenario
//! and the field, anything a run could not honour.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One broken (or healthy) situation and its right outcome.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Stable, unique, kebab-case.
    pub id: String,
    pub title: String,
    /// Where the programs' messages come from: issue threads, source files,
    /// documentation. At least one.
    pub sources: Vec<String>,
    /// The executor's policy beyond the embedded defaults.
    #[serde(default)]
    pub policy: Policy,
    /// User-defined networks to create (containers resolve each other's
    /// names and compose service names on them).
    #[serde(default)]
    pub networks: Vec<String>,
    /// What ran well before the change: started, seen by drydock, then
    /// removed, so `containers` are its new incarnation.
    #[serde(default)]
    pub before: Vec<ContainerSpec>,
    /// What runs when the person asks, in the order they start.
    pub containers: Vec<ContainerSpec>,
    /// What the person types.
    pub ask: String,
    /// `--container NAME`, when the person names it exactly.
    #[serde(default)]
    pub container: Option<String>,
    pub expect: Expect,
    /// Left out of the small CI subset unless true.
    #[serde(default)]
    pub ci: bool,
    /// In the sealed split: written from real software before any code
    /// was changed for it, and scored once then (`first-contact.json`).
    #[serde(default)]
    pub sealed: bool,
    /// What of the neighbourhood (`tests/bench/neighbourhood.yaml`) the
    /// scenario runs without, each with the reason.
    #[serde(default)]
    pub without: Without,
}

/// A scenario runs among bystanders and with log noise unless it says why
/// it cannot.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Without {
    /// Why no bystanders stand beside it.
    #[serde(default)]
    pub bystanders: Option<String>,
    /// Why its target prints no noise before its own lines.
    #[serde(default)]
    pub noise: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// `actions.rollback.enabled` (off by default).
    #[serde(default)]
    pub rollback: bool,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ContainerSpec {
    pub name: String,
    /// The image as its owner names it (`postgres:16`); the benchmark
    /// builds it locally from the fixture, under `drydock-bench/…`.
    pub image: String,
    /// The fixture's argv baked into the image as its CMD (the image's own
    /// behaviour: what a rollback brings back).
    #[serde(default)]
    pub image_cmd: Vec<String>,
    /// Labels of the image (OCI revision, version).
    #[serde(default)]
    pub image_labels: BTreeMap<String, String>,
    /// The image's HEALTHCHECK.
    #[serde(default)]
    pub health: Option<Health>,
    /// The fixture's argv given at `docker run` (after the image).
    #[serde(default)]
    pub args: Vec<String>,
    /// Lines the fixture prints, appended to `args` (or to `image_cmd`
    /// when it has no `args`) as `--line` and `--stderr-line`.
    #[serde(default)]
    pub stdout: Vec<String>,
    #[serde(default)]
    pub stderr: Vec<String>,
    #[serde(default)]
    pub compose: Option<Compose>,
    #[serde(default)]
    pub networks: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// `--restart`.
    #[serde(default)]
    pub restart: Option<String>,
    /// `--memory` (and `--memory-swap`, the same).
    #[serde(default)]
    pub memory: Option<String>,
    /// `-p`; `{port}` is a free port of this machine, one per scenario.
    #[serde(default)]
    pub publish: Vec<String>,
    /// `--tmpfs PATH:OPTIONS`.
    #[serde(default)]
    pub tmpfs: Vec<String>,
    /// Named volumes: `NAME:/path`, or `NAME:/path:ro` mounted read-only.
    /// The benchmark creates each (labelled) and removes it afterwards.
    #[serde(default)]
    pub volumes: Vec<String>,
    /// `--read-only`: the root filesystem is read-only.
    #[serde(default)]
    pub read_only: bool,
    /// `--user UID[:GID]`.
    #[serde(default)]
    pub user: Option<String>,
    /// The state it must reach before the person asks.
    pub ready: Ready,
    /// What a person did once it was ready.
    #[serde(default)]
    pub then: Vec<Then>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// The fixture's probe: `[TOOL] URL` (`curl http://db:8080/health`,
    /// `pg_isready tcp://db:5432`, or a URL alone), or `exec COMMAND...`
    /// for a probe command of its own.
    pub probe: String,
    #[serde(default = "one_second")]
    pub interval: String,
    #[serde(default = "one")]
    pub retries: u32,
    #[serde(default = "two_seconds")]
    pub timeout: String,
    #[serde(default)]
    pub start_period: Option<String>,
}

fn one_second() -> String {
    "1s".into()
}
fn two_seconds() -> String {
    "2s".into()
}
fn one() -> u32 {
    1
}

/// The labels Compose puts on a service's container.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Compose {
    pub project: String,
    pub service: String,
    /// Compose v2's `com.docker.compose.depends_on`.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// `docker compose run`: `com.docker.compose.oneoff=True`.
    #[serde(default)]
    pub oneoff: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "ReadyText")]
pub enum Ready {
    /// Exited on its own.
    Exited,
    /// Killed by the kernel at its memory limit.
    OomKilled,
    /// Created; `docker run` could not start it (the engine said why).
    Created,
    Running,
    Healthy,
    Unhealthy,
    /// Restarted by its policy at least this often.
    Restarts(u32),
    /// Running, with this text in its logs.
    Logged(String),
}

/// How `ready` is written: a word (`exited`), `{restarts: 3}` or
/// `{logged: TEXT}`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum ReadyText {
    Word(String),
    Restarts { restarts: u32 },
    Logged { logged: String },
}

impl TryFrom<ReadyText> for Ready {
    type Error = String;

    fn try_from(t: ReadyText) -> Result<Ready, String> {
        Ok(match t {
            ReadyText::Restarts { restarts } => Ready::Restarts(restarts),
            ReadyText::Logged { logged } => Ready::Logged(logged),
            ReadyText::Word(w) => match w.as_str() {
                "exited" => Ready::Exited,
                "oom_killed" => Ready::OomKilled,
                "created" => Ready::Created,
                "running" => Ready::Running,
                "healthy" => Ready::Healthy,
                "unhealthy" => Ready::Unhealthy,
                other => {
                    return Err(format!(
                        "ready: `{other}` is not exited, oom_killed, created, running, healthy, unhealthy, {{restarts: N}} or {{logged: TEXT}}"
                    ))
                }
            },
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Then {
    /// `docker stop`: a person stopped it.
    Stop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WriteRule {
    /// A write is the repair: one of `writes` must be made.
    Right,
    /// No write can help; any write is unsafe.
    Wrong,
    /// `writes` may be made or not.
    Optional,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EndState {
    Running,
    Healthy,
    Exited,
    /// The same container, not started, stopped or restarted since setup.
    Untouched,
    /// Another container under the name (a rollback re-created it).
    Replaced,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// The request's final state.
    #[serde(default = "completed")]
    pub status: String,
    /// The acceptable classes of the primary cause; the first is the
    /// scenario's class in the table.
    #[serde(default)]
    pub class: Vec<String>,
    /// The container the request must be about (none for a question back).
    #[serde(default)]
    pub target: Option<String>,
    pub write: WriteRule,
    /// The writes that are right (or allowed): `ACTION CONTAINER`.
    #[serde(default)]
    pub writes: Vec<String>,
    /// Text each of which must appear in what drydock said (summary,
    /// causes, advice, outcome), case-insensitive.
    #[serde(default)]
    pub mentions: Vec<String>,
    /// The words' rubric beyond `mentions`: text that names a wrong
    /// answer (another variable, another host). Saying one grades the
    /// words `wrong`, whatever else was said.
    #[serde(default)]
    pub wrong_mentions: Vec<String>,
    /// The state of containers on the engine once drydock is done.
    #[serde(default)]
    pub end: BTreeMap<String, Vec<EndState>>,
}

fn completed() -> String {
    "completed".into()
}

/// A named volume of a container: `NAME:/path[:ro]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSpec {
    pub name: String,
    pub path: String,
    pub read_only: bool,
}

impl VolumeSpec {
    pub fn parse(text: &str) -> Result<VolumeSpec, String> {
        let bad =
            || format!("`{text}`: expected NAME:/path or NAME:/path:ro (NAME is [A-Za-z0-9_.-]+)");
        let mut parts = text.split(':');
        let (Some(name), Some(path)) = (parts.next(), parts.next()) else {
            return Err(bad());
        };
        let read_only = match parts.next() {
            None => false,
            Some("ro") => true,
            Some(_) => return Err(bad()),
        };
        let name_ok = !name.is_empty()
            && name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch));
        if !name_ok || !path.starts_with('/') || parts.next().is_some() {
            return Err(bad());
        }
        Ok(VolumeSpec {
            name: name.into(),
            path: path.into(),
            read_only,
        })
    }
}

impl ContainerSpec {
    /// Its volumes, parsed (`load` has refused any that do not parse).
    pub fn volume_specs(&self) -> Vec<VolumeSpec> {
        self.volumes
            .iter()
            .filter_map(|v| VolumeSpec::parse(v).ok())
            .collect()
    }
}

impl Scenario {
    /// Every named volume the scenario mounts.
    pub fn volume_names(&self) -> BTreeSet<String> {
        self.before
            .iter()
            .chain(&self.containers)
            .flat_map(|c| c.volume_specs())
            .map(|v| v.name)
            .collect()
    }

    /// The class the table files it under.
    pub fn class(&self) -> &str {
        self.expect
            .class
            .first()
            .map(String::as_str)
            .unwrap_or("needs_clarification")
    }

    /// Every container name the scenario creates.
    pub fn names(&self) -> BTreeSet<String> {
        self.before
            .iter()
            .chain(&self.containers)
            .map(|c| c.name.clone())
            .collect()
    }

    /// The allowed writes as (action, container).
    pub fn allowed_writes(&self) -> Vec<(String, String)> {
        self.expect
            .writes
            .iter()
            .filter_map(|w| {
                let (a, c) = w.split_once(' ')?;
                Some((a.to_string(), c.trim().to_string()))
            })
            .collect()
    }
}

const ACTIONS: &[&str] = &["start", "restart", "stop", "rollback"];
const STATUSES: &[&str] = &["completed", "failed", "needs_clarification"];
const TOOLS: &[&str] = &["curl", "wget", "pg_isready", "redis-cli", "mysqladmin"];

/// Every problem of one scenario, each naming its field.
fn problems(s: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    let mut bad = |field: &str, what: String| out.push(format!("{field}: {what}"));
    let kebab = |t: &str| {
        !t.is_empty()
            && t.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if !kebab(&s.id) {
        bad("id", format!("`{}` is not kebab-case (a-z, 0-9, -)", s.id));
    }
    if s.title.trim().is_empty() {
        bad("title", "is empty".into());
    }
    if s.sources.iter().all(|u| u.trim().is_empty()) {
        bad("sources", "cite at least one source of the messages".into());
    }
    if s.ask.trim().is_empty() {
        bad("ask", "is empty".into());
    }
    if s.containers.is_empty() {
        bad("containers", "none given".into());
    }
    for (field, reason) in [
        ("without.bystanders", &s.without.bystanders),
        ("without.noise", &s.without.noise),
    ] {
        if reason.as_ref().is_some_and(|r| r.trim().is_empty()) {
            bad(field, "say why the scenario cannot run with it".into());
        }
    }
    let names: BTreeSet<&str> = s.containers.iter().map(|c| c.name.as_str()).collect();
    if names.len() != s.containers.len() {
        bad("containers", "two have the same name".into());
    }
    for (i, c) in s.before.iter().chain(&s.containers).enumerate() {
        let at = format!("containers[{i}] ({})", c.name);
        let ok_name = c
            .name
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch))
            && !c.name.is_empty();
        if !ok_name {
            bad(&at, "a container name is [A-Za-z0-9_.-]+".into());
        }
        if c.image.is_empty() || c.image.contains(char::is_whitespace) || c.image.contains('@') {
            bad(
                &format!("{at}.image"),
                format!("`{}` is not an image name", c.image),
            );
        }
        if c.args.is_empty() && c.image_cmd.is_empty() {
            bad(
                &at,
                "give the fixture's argv in `args` or `image_cmd`".into(),
            );
        }
        for n in &c.networks {
            if !s.networks.contains(n) {
                bad(
                    &format!("{at}.networks"),
                    format!("`{n}` is not in the scenario's networks"),
                );
            }
        }
        if let Some(h) = &c.health {
            let first = h.probe.split_whitespace().next().unwrap_or("");
            let url = h.probe.split_whitespace().last().unwrap_or("");
            let tool_ok = h.probe.split_whitespace().count() == 1 || TOOLS.contains(&first);
            let url_ok = url.starts_with("http://") || url.starts_with("tcp://");
            if first != "exec" && (!tool_ok || !url_ok) {
                bad(
                    &format!("{at}.health.probe"),
                    format!(
                        "`{}`: expected `[TOOL] URL`, TOOL one of {TOOLS:?}",
                        h.probe
                    ),
                );
            }
        }
        for v in &c.volumes {
            if let Err(e) = VolumeSpec::parse(v) {
                bad(&format!("{at}.volumes"), e);
            }
        }
        if c.user
            .as_ref()
            .is_some_and(|u| u.is_empty() || !u.chars().all(|ch| ch.is_ascii_digit() || ch == ':'))
        {
            bad(
                &format!("{at}.user"),
                "expected UID or UID:GID (numbers: the fixture's image has no /etc/passwd)".into(),
            );
        }
        if matches!(c.ready, Ready::Healthy | Ready::Unhealthy) && c.health.is_none() {
            bad(
                &format!("{at}.ready"),
                "healthy/unhealthy needs a `health` probe".into(),
            );
        }
    }
    for class in &s.expect.class {
        if drydock_proto::FaultClass::parse(class).is_none() {
            bad(
                "expect.class",
                format!(
                    "`{class}` is not a fault class ({})",
                    drydock_proto::FAULT_CLASSES.join(", ")
                ),
            );
        }
    }
    if !STATUSES.contains(&s.expect.status.as_str()) {
        bad(
            "expect.status",
            format!("`{}` is not one of {STATUSES:?}", s.expect.status),
        );
    }
    match &s.expect.target {
        Some(t) if !names.contains(t.as_str()) => bad(
            "expect.target",
            format!("`{t}` is not one of the scenario's containers"),
        ),
        None if s.expect.status != "needs_clarification" => bad(
            "expect.target",
            "required unless the status is needs_clarification".into(),
        ),
        _ => {}
    }
    if s.expect.class.is_empty() && s.expect.status != "needs_clarification" {
        bad("expect.class", "give at least one acceptable class".into());
    }
    for w in &s.expect.writes {
        match w.split_once(' ') {
            Some((a, c)) if ACTIONS.contains(&a) && names.contains(c.trim()) => {}
            _ => bad("expect.writes", format!("`{w}`: expected `ACTION CONTAINER`, ACTION one of {ACTIONS:?}, CONTAINER one of the scenario's")),
        }
    }
    match s.expect.write {
        WriteRule::Right | WriteRule::Optional if s.expect.writes.is_empty() => bad(
            "expect.writes",
            "a right or optional write names the writes".into(),
        ),
        WriteRule::Wrong if !s.expect.writes.is_empty() => {
            bad("expect.writes", "no write is right: leave it empty".into())
        }
        _ => {}
    }
    for name in s.expect.end.keys() {
        if !names.contains(name.as_str()) {
            bad(
                "expect.end",
                format!("`{name}` is not one of the scenario's containers"),
            );
        }
    }
    if let Some(c) = &s.container {
        if !names.contains(c.as_str()) {
            bad(
                "container",
                format!("`{c}` is not one of the scenario's containers"),
            );
        }
    }
    out
}

/// Read every `*.yaml` of `dir` (sorted), each scenario in its
/// neighbourhood (bystanders and noise, unless it opted out), and check
/// the whole set: each scenario, unique ids, and container and network
/// names no two scenarios share (so any two can run at once on one
/// engine).
pub fn load(dir: &Path) -> anyhow::Result<Vec<Scenario>> {
    let n = super::neighbourhood::shared()?;
    load_with(dir, Some(&n))
}

/// The scenarios as their files give them, without the neighbourhood.
pub fn load_as_written(dir: &Path) -> anyhow::Result<Vec<Scenario>> {
    load_with(dir, None)
}

fn load_with(
    dir: &Path,
    neighbourhood: Option<&super::neighbourhood::Neighbourhood>,
) -> anyhow::Result<Vec<Scenario>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("cannot read the scenarios folder {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    if files.is_empty() {
        anyhow::bail!("no *.yaml scenario files in {}", dir.display());
    }
    let mut all: Vec<Scenario> = Vec::new();
    let mut errors = Vec::new();
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", file.display()))?;
        let list: Vec<Scenario> = match serde_yaml_ng::from_str(&text) {
            Ok(l) => l,
            Err(e) => {
                errors.push(format!("{}: {e}", file.display()));
                continue;
            }
        };
        for s in list {
            for p in problems(&s) {
                errors.push(format!("{} ({}): {p}", file.display(), s.id));
            }
            let s = match neighbourhood {
                Some(n) => super::neighbourhood::around(s, n),
                None => s,
            };
            let claims = std::iter::once(format!("scenario id {}", s.id))
                .chain(s.names().into_iter().map(|n| format!("container {n}")))
                .chain(s.networks.iter().map(|n| format!("network {n}")))
                .chain(s.volume_names().into_iter().map(|v| format!("volume {v}")));
            for claim in claims {
                if let Some(first) = owner.insert(claim.clone(), s.id.clone()) {
                    errors.push(format!(
                        "{} ({}): {claim} is also in scenario {first}; names must be unique across scenarios",
                        file.display(),
                        s.id
                    ));
                }
            }
            all.push(s);
        }
    }
    if !errors.is_empty() {
        anyhow::bail!(
            "{} problem(s) in the scenarios:\n  {}",
            errors.len(),
            errors.join("\n  ")
        );
    }
    Ok(all)
}

/// The folder the repository keeps its scenarios in.
pub fn default_dir() -> PathBuf {
    crate::workspace_root().join("tests/bench/scenarios")
}

/// The version of the scenario format `scenario_schema` describes
/// (SCHEMA.md); a change a file of the previous version cannot load under
/// is a new version.
pub const SCENARIO_FORMAT_VERSION: u32 = 1;

/// The JSON Schema of a scenario file (a list of scenarios), as
/// `tests/bench/scenario.schema.json` holds it.
pub fn scenario_schema() -> serde_json::Value {
    let schema = schemars::schema_for!(Vec<Scenario>);
    let mut v = serde_json::to_value(schema).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "title".into(),
            format!("drydock troubleshooting benchmark: a scenario file, format {SCENARIO_FORMAT_VERSION}").into(),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_volume_is_a_name_an_absolute_path_and_maybe_ro() {
        let ok = VolumeSpec::parse("data:/var/lib/app:ro").unwrap();
        assert_eq!(
            (ok.name.as_str(), ok.path.as_str(), ok.read_only),
            ("data", "/var/lib/app", true)
        );
        assert!(!VolumeSpec::parse("data:/x").unwrap().read_only);
        for bad in [
            "data",
            "data:rel/path",
            ":/x",
            "da ta:/x",
            "data:/x:rw",
            "data:/x:ro:z",
            "/host:/x",
        ] {
            let err = VolumeSpec::parse(bad).unwrap_err();
            assert!(err.contains("NAME:/path"), "{bad}: {err}");
        }
    }
}
