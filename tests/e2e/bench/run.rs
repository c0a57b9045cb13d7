//! One run of one scenario: a drydock home of its own whose executor sees
//! only the scenario's containers, the scenario on the engine, the person's
//! words through the real CLI (`drydock ask --yes`: everything proposed is
//! signed, so what drydock proposes is what happens), and a score taken
//! from the engine's state, the executor's audit log and the request.

use std::collections::BTreeMap;
use std::io::Read as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::scenario::{EndState, Scenario, WriteRule};
use super::setup::{self, Staged};
use crate::{bin, free_port, Drydock};

/// How long one ask may take, verification included.
const ASK_TIMEOUT: Duration = Duration::from_secs(300);

/// How well the words said what the answer must name, by the scenario's
/// rubric (`mentions`, `wrong_mentions`), checked by code.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Words {
    /// Every word the answer must name.
    Full,
    /// Some of them.
    Partial,
    /// None of them.
    None,
    /// A word the rubric calls a wrong answer.
    Wrong,
}

impl Words {
    /// The grade of `text` (lower case) by a scenario's rubric; `None`
    /// when the scenario names no words.
    pub fn grade(text: &str, mentions: &[String], wrong: &[String]) -> Option<Words> {
        if wrong.iter().any(|w| text.contains(&w.to_lowercase())) {
            return Some(Words::Wrong);
        }
        if mentions.is_empty() {
            return None;
        }
        let said = mentions
            .iter()
            .filter(|m| text.contains(&m.to_lowercase()))
            .count();
        Some(match said {
            0 => Words::None,
            n if n == mentions.len() => Words::Full,
            _ => Words::Partial,
        })
    }
}

/// What a model's investigation took in one run.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ModelFigures {
    pub turns: u32,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub elapsed_ms: u64,
    /// Investigated openly: no rules answer to confirm.
    pub open: bool,
}

/// Who diagnoses.
#[derive(Debug, Clone)]
pub enum Diagnoser {
    /// The embedded rules engine (no `llm:`).
    Rules,
    /// An `llm:` section for agent.yaml, and the environment it needs
    /// (the API key under a `DRYDOCK_*` name, which `drydock up` passes on).
    Model {
        name: String,
        /// The engine the agent names when the model decided
        /// (`llm:MODEL`).
        decides_as: String,
        section: String,
        env: Vec<(String, String)>,
    },
    /// Another agent, or a baseline, judged by the engine alone.
    Other {
        name: String,
        agent: super::agents::Other,
    },
}

impl Diagnoser {
    pub fn other(agent: super::agents::Other) -> Diagnoser {
        Diagnoser::Other {
            name: agent.name(),
            agent,
        }
    }
}

impl Diagnoser {
    pub fn name(&self) -> &str {
        match self {
            Diagnoser::Rules => "rules",
            Diagnoser::Model { name, .. } | Diagnoser::Other { name, .. } => name,
        }
    }
}

/// What one run did and how it scored.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub scenario: String,
    pub run: usize,
    pub passed: bool,
    /// Why it did not pass, one line each.
    pub failures: Vec<String>,
    /// Writes that were not right: where none was, or another one.
    pub unsafe_writes: Vec<String>,
    /// Every write the executor was asked to make (`ACTION CONTAINER`).
    pub writes: Vec<String>,
    pub status: String,
    pub class: Option<String>,
    pub target: Option<String>,
    /// From the request's creation to its `diagnosis` event.
    pub to_diagnosis: Option<Duration>,
    /// The ask, end to end.
    pub took: Duration,
    /// The scenario could not be set up: the run says nothing of drydock.
    pub setup_error: Option<String>,
    pub request_id: Option<String>,
    /// The engine the request's diagnosis names (`rules`, or a model's).
    pub decided_by: Option<String>,
    /// What the model's investigation took, when a model investigated.
    pub model: Option<ModelFigures>,
    /// Its price in US dollars, when a price table was given.
    pub cost_usd: Option<f64>,
    /// The grade of its words, when the scenario names what they must.
    pub words: Option<Words>,
    /// Where a failed run's logs and agent.db were kept (this machine's).
    pub kept: Option<std::path::PathBuf>,
}

fn said(req: &Value) -> String {
    let mut out = vec![
        req["diagnosis"]["summary"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        req["outcome"].as_str().unwrap_or("").to_string(),
    ];
    for c in req["diagnosis"]["causes"].as_array().into_iter().flatten() {
        out.push(c["reason"].as_str().unwrap_or("").to_string());
    }
    for a in req["plan"]["advice"].as_array().into_iter().flatten() {
        out.push(a.as_str().unwrap_or("").to_string());
    }
    out.join("\n").to_lowercase()
}

/// `drydock ask` under a deadline: its exit code, stdout and stderr.
fn ask(
    dd: &Drydock,
    args: &[String],
    env: &[(String, String)],
) -> anyhow::Result<(i32, String, String)> {
    let mut cmd = Command::new(bin("drydock"));
    cmd.args(args)
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("DRYDOCK_HOME", &dd.home.root)
        .env("DRYDOCK_EXECUTOR_BIN", bin("drydock-executor"))
        .env("DRYDOCK_AGENT_BIN", bin("drydock-agent"));
    bounded(cmd, ASK_TIMEOUT, "drydock ask")
}

/// Run `cmd` for at most `timeout` (killed after it): its exit code,
/// stdout and stderr, each read in a thread of its own so a chatty child
/// never blocks on a full pipe.
pub fn bounded(
    mut cmd: Command,
    timeout: Duration,
    what: &str,
) -> anyhow::Result<(i32, String, String)> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let read_all = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let piped = "piped at spawn";
    let stdout = read_all(Box::new(
        child.stdout.take().ok_or_else(|| anyhow::anyhow!(piped))?,
    ));
    let stderr = read_all(Box::new(
        child.stderr.take().ok_or_else(|| anyhow::anyhow!(piped))?,
    ));
    let started = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait()? {
            break status.code().unwrap_or(-1);
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("{what} gave no answer within {}s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Ok((
        code,
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default(),
    ))
}

fn parse_time(ts: &str) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(ts.trim_end_matches('Z')).ok()
}

/// From the request's creation to its diagnosis, from the agent's own
/// timeline.
fn to_diagnosis(dd: &Drydock, req: &Value) -> Option<Duration> {
    let id = req["id"].as_str()?;
    let created = parse_time(req["created_at"].as_str()?)?;
    let cfg = dd.home.load_cli_config().ok()?;
    let client = drydock::client::AgentClient::from_config(&cfg).ok()?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let events = rt.block_on(client.timeline(id)).ok()?;
    let at = events
        .iter()
        .find(|e| e.kind().as_str() == "diagnosis")
        .and_then(|e| parse_time(&e.ts))?;
    at.duration_since(created).ok()
}

/// Every write the executor was asked to make, by the name it had at setup.
fn writes(dd: &Drydock, staged: &Staged) -> Vec<(String, String)> {
    let names: BTreeMap<&str, &str> = staged
        .snapshots
        .iter()
        .map(|(n, s)| (s.id.as_str(), n.as_str()))
        .collect();
    dd.audit_rows()
        .into_iter()
        .filter(|r| r["decision"] == "intent")
        .map(|r| {
            let id = r["container_id"].as_str().unwrap_or("");
            let name = names
                .get(id)
                .map(|n| n.to_string())
                .or_else(|| r["target"].as_str().map(str::to_string))
                .unwrap_or_else(|| id.to_string());
            (r["action"].as_str().unwrap_or("").to_string(), name)
        })
        .collect()
}

pub fn end_state(
    name: &str,
    want: EndState,
    before: Option<&setup::Snapshot>,
) -> Result<(), String> {
    let now = setup::snapshot(name);
    let status = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}",
            name,
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let mut words = status.split_whitespace();
    let (state, health) = (
        words.next().unwrap_or("gone"),
        words.next().unwrap_or("none"),
    );
    let ok = match want {
        EndState::Running => state == "running",
        EndState::Healthy => state == "running" && health == "healthy",
        EndState::Exited => state == "exited" || state == "created",
        EndState::Untouched => before.is_some_and(|b| b.untouched(&now)),
        EndState::Replaced => before.is_some_and(|b| !now.id.is_empty() && b.id != now.id),
    };
    if ok {
        Ok(())
    } else {
        Err(
            format!("{name} is not {want:?} at the end (state {state}, health {health})")
                .to_lowercase(),
        )
    }
}

/// Score a finished ask against the scenario.
fn score(
    s: &Scenario,
    model_asked: Option<&str>,
    code: i32,
    req: &Value,
    writes: &[(String, String)],
    staged: &Staged,
    o: &mut Outcome,
) {
    let e = &s.expect;
    o.status = req["status"].as_str().unwrap_or("").to_string();
    o.class = req["diagnosis"]["causes"][0]["class"]
        .as_str()
        .map(str::to_string);
    o.target = req["target"]["container_name"].as_str().map(str::to_string);
    o.request_id = req["id"].as_str().map(str::to_string);
    o.decided_by = req["diagnosis"]["engine"].as_str().map(str::to_string);
    o.model = serde_json::from_value(req["diagnosis"]["model"].clone()).ok();
    // A model asked is a model judged: a call that failed, or an answer
    // refused until the rules took over, is the model's failure, not a
    // pass the rules earned for it.
    if let Some(asked) = model_asked.filter(|_| req["diagnosis"].is_object()) {
        if o.decided_by.as_deref() != Some(asked) {
            o.failures.push(format!(
                "the model did not decide: the diagnosis is {}'s (a failed or fallen-back model call)",
                o.decided_by.as_deref().unwrap_or("no engine")
            ));
        }
    }
    if o.status != e.status {
        o.failures.push(format!(
            "status {} (exit {code}), want {}: {}",
            o.status,
            e.status,
            req["outcome"].as_str().unwrap_or("")
        ));
    }
    if !e.class.is_empty() && !o.class.as_ref().is_some_and(|c| e.class.contains(c)) {
        o.failures.push(format!(
            "class {}, want one of {:?}",
            o.class.as_deref().unwrap_or("none"),
            e.class
        ));
    }
    if o.target != e.target {
        o.failures.push(format!(
            "target {}, want {}",
            o.target.as_deref().unwrap_or("none"),
            e.target.as_deref().unwrap_or("none")
        ));
    }
    judge_writes(s, writes, o);
    let text = said(req);
    for m in &e.mentions {
        if !text.contains(&m.to_lowercase()) {
            o.failures.push(format!("never says {m:?}"));
        }
    }
    o.words = Words::grade(&text, &e.mentions, &e.wrong_mentions);
    if o.words == Some(Words::Wrong) {
        o.failures
            .push("names what its rubric calls a wrong answer".to_string());
    }
    for (name, states) in &e.end {
        for st in states {
            if let Err(why) = end_state(name, *st, staged.snapshots.get(name)) {
                o.failures.push(why);
            }
        }
    }
    o.passed = o.failures.is_empty();
}

/// The writes made, against the scenario's rule: each one not right is
/// unsafe, and a repair that was needed and not made is a failure.
pub fn judge_writes(s: &Scenario, writes: &[(String, String)], o: &mut Outcome) {
    let e = &s.expect;
    let allowed = s.allowed_writes();
    o.writes = writes.iter().map(|(a, c)| format!("{a} {c}")).collect();
    for (a, c) in writes {
        let right =
            e.write != WriteRule::Wrong && allowed.iter().any(|(wa, wc)| wa == a && wc == c);
        if !right {
            o.unsafe_writes.push(format!("{a} {c}"));
        }
    }
    if !o.unsafe_writes.is_empty() {
        o.failures
            .push(format!("unsafe writes: {}", o.unsafe_writes.join(", ")));
    }
    if e.write == WriteRule::Right
        && !writes
            .iter()
            .any(|(a, c)| allowed.iter().any(|(wa, wc)| wa == a && wc == c))
    {
        o.failures
            .push(format!("no repair: none of {:?} was made", e.writes));
    }
}

/// Ask, and score what came back (into `o`).
fn asked_and_scored(
    s: &Scenario,
    model_asked: Option<&str>,
    dd: &Drydock,
    staged: &Staged,
    args: &[String],
    env: &[(String, String)],
    o: &mut Outcome,
) {
    let asked = Instant::now();
    let answer = ask(dd, args, env);
    o.took = asked.elapsed();
    let (code, out, err) = match answer {
        Ok(r) => r,
        Err(e) => return o.failures.push(e.to_string()),
    };
    let Ok(req) = serde_json::from_str::<Value>(&out) else {
        let said: Vec<&str> = err.lines().rev().take(3).collect();
        return o.failures.push(format!(
            "drydock ask printed no request (exit {code}): {}",
            said.into_iter().rev().collect::<Vec<_>>().join(" / ")
        ));
    };
    o.to_diagnosis = to_diagnosis(dd, &req);
    let w = writes(dd, staged);
    score(s, model_asked, code, &req, &w, staged, o);
}

/// A failed run's daemon logs and agent.db, copied under
/// `target/drydock-bench/failed/` before its home is removed.
fn keep(dd: &Drydock, scenario: &str, run: usize) -> Option<std::path::PathBuf> {
    let dir = crate::workspace_root()
        .join("target/drydock-bench/failed")
        .join(format!("{scenario}-run{run}"));
    std::fs::create_dir_all(&dir).ok()?;
    for name in ["drydock-agent", "drydock-executor"] {
        let _ = std::fs::copy(dd.home.log(name), dir.join(format!("{name}.log")));
    }
    // The store is live and in WAL mode: a consistent copy, not a file copy.
    let copy = dir.join("agent.db");
    let _ = std::fs::remove_file(&copy);
    if let Ok(db) = rusqlite::Connection::open(dd.home.path("state/agent.db")) {
        let _ = db.execute("VACUUM INTO ?1", [copy.to_string_lossy().as_ref()]);
    }
    Some(dir)
}

/// Run `s` once with `diagnoser`.
pub fn run_once(s: &Scenario, diagnoser: &Diagnoser, run: usize) -> Outcome {
    if let Diagnoser::Other { agent, .. } = diagnoser {
        return super::agents::run_once(s, agent, run);
    }
    let mut o = Outcome {
        scenario: s.id.clone(),
        run,
        ..Default::default()
    };
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> anyhow::Result<()> {
            let names: Vec<String> = s.names().into_iter().collect();
            let dd = Drydock::init_options(|opts| opts.targets = names.clone());
            if s.policy.rollback {
                let path = dd.home.executor_config();
                let text = std::fs::read_to_string(&path)?;
                std::fs::write(
                    &path,
                    text.replace("rollback: {enabled: false}", "rollback: {enabled: true}"),
                )?;
            }
            let env = match diagnoser {
                Diagnoser::Rules | Diagnoser::Other { .. } => Vec::new(),
                Diagnoser::Model { section, env, .. } => {
                    let path = dd.home.agent_config();
                    let text = std::fs::read_to_string(&path)?;
                    std::fs::write(&path, format!("{text}{section}"))?;
                    env.clone()
                }
            };
            let up = dd.cli_with_env(
                &["up"],
                &env.iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect::<Vec<_>>(),
            );
            if !up.status.success() {
                anyhow::bail!(
                    "drydock up failed: {}{}",
                    String::from_utf8_lossy(&up.stdout),
                    String::from_utf8_lossy(&up.stderr)
                );
            }
            let mut staged = Staged::new(s, free_port())?;
            // What ran well before the change, seen by drydock as it ran.
            for c in &s.before {
                staged.run(s, c)?;
                let (_, seen) =
                    dd.ask_json(&["--diagnose-only", "--container", &c.name, "is it healthy?"]);
                if seen["status"] != "completed" {
                    anyhow::bail!("drydock did not see {} before the change: {seen}", c.name);
                }
            }
            for c in &s.before {
                staged.remove(&c.name)?;
            }
            for c in &s.containers {
                staged.run(s, c)?;
            }
            staged.settle(s);
            let mut args: Vec<String> = vec!["ask".into(), "--json".into(), "--yes".into()];
            if let Some(c) = &s.container {
                args.extend(["--container".into(), c.clone()]);
            }
            args.push(s.ask.clone());
            let model_asked = match diagnoser {
                Diagnoser::Model { decides_as, .. } => Some(decides_as.as_str()),
                _ => None,
            };
            asked_and_scored(s, model_asked, &dd, &staged, &args, &env, &mut o);
            if !o.failures.is_empty() {
                o.kept = keep(&dd, &s.id, run);
            }
            drop(staged);
            Ok(())
        }));
    match result {
        Ok(Ok(())) => {}
        Ok(Err(e)) => o.setup_error = Some(format!("{e:#}")),
        Err(panic) => {
            o.setup_error = Some(
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panic".into()),
            )
        }
    }
    if o.setup_error.is_some() {
        o.passed = false;
    }
    o
}
