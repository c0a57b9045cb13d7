//! Any agent on the benchmark: another tool, driven by a command template
//! (`--agent-cmd 'my-agent "{message}"'`), and the two baselines every
//! table needs ("do nothing", and "restart whatever is unhealthy or
//! exited", what a restart loop does). Such a run is judged by what the
//! engine shows: the end state of each container, and the writes in the
//! engine's own event stream (`docker events`), never drydock's audit log,
//! so another tool's unsafe writes count the way drydock's do. What it
//! said is not graded: there is no request to read.

use std::collections::BTreeMap;
use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::run::{bounded, end_state, judge_writes, Outcome};
use super::scenario::{EndState, Scenario};
use super::setup::{Snapshot, Staged};

/// How long another agent may take.
const AGENT_TIMEOUT: Duration = Duration::from_secs(300);
/// After the agent ends, how long the end states may take to hold (a
/// restarted service needs its healthcheck to pass again).
const SETTLE: Duration = Duration::from_secs(30);

/// An agent that is not drydock.
#[derive(Debug, Clone, PartialEq)]
pub enum Other {
    /// A command run with `sh -c`, `{message}` replaced by the person's
    /// words and `{containers}` by the scenario's container names (comma
    /// separated), each shell-quoted.
    Command { template: String },
    /// Changes nothing.
    DoNothing,
    /// `docker restart` of every container of the scenario that is exited,
    /// dead, restarting or unhealthy.
    RestartBroken,
}

impl Other {
    pub fn name(&self) -> String {
        match self {
            Other::Command { template } => format!("agent-cmd: {template}"),
            Other::DoNothing => "baseline: do nothing".into(),
            Other::RestartBroken => "baseline: restart whatever is unhealthy or exited".into(),
        }
    }
}

/// `'text'` for sh.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The command line a template makes for one scenario.
pub fn command_line(template: &str, message: &str, containers: &[String]) -> String {
    template
        .replace("{message}", &quoted(message))
        .replace("{containers}", &quoted(&containers.join(",")))
}

/// The engine's container events while an agent runs: `docker events`,
/// read line by line in a thread of its own.
struct EventWatch {
    child: Child,
    seen: Arc<Mutex<Vec<Value>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl EventWatch {
    fn start() -> anyhow::Result<EventWatch> {
        let mut child = Command::new("docker")
            .args([
                "events",
                "--format",
                "{{json .}}",
                "--filter",
                "type=container",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("docker events has no stdout"))?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    if let Ok(mut all) = into.lock() {
                        all.push(v);
                    }
                }
            }
        });
        // `docker events` subscribes before it prints anything; give it a
        // moment so the first write is not missed.
        std::thread::sleep(Duration::from_millis(300));
        Ok(EventWatch {
            child,
            seen,
            reader: Some(reader),
        })
    }

    fn stop(mut self) -> Vec<Value> {
        // Events of the last moment still in flight.
        std::thread::sleep(Duration::from_millis(300));
        let _ = self.child.kill();
        let _ = self.child.wait();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.seen.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// The writes an event stream shows, as `(action, container name)` in
/// the words of the scenarios (`restart`, `start`, `stop`, `rollback`),
/// for the containers setup made (by id, so a re-created one is told
/// apart). A `restart` event stands for the stop and start it is made of;
/// under a restart policy, a `start` after a `die`, or the first `start` of
/// a container that was `restarting` when the watch began, is the engine's
/// own; a container destroyed and created again under its name was
/// re-created (`rollback`); anything else that changes a container is
/// named by its action. `states` is each container's state when the watch
/// began.
pub fn writes_from_events(
    events: &[Value],
    snapshots: &BTreeMap<String, Snapshot>,
    states: &BTreeMap<String, String>,
) -> Vec<(String, String)> {
    let by_id: BTreeMap<&str, (&str, &str)> = snapshots
        .iter()
        .map(|(name, s)| (s.id.as_str(), (name.as_str(), s.policy.as_str())))
        .collect();
    let mut per: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut recreated: Vec<String> = Vec::new();
    for e in events {
        let action = e["Action"].as_str().or(e["status"].as_str()).unwrap_or("");
        let id = e["Actor"]["ID"].as_str().or(e["id"].as_str()).unwrap_or("");
        let name = e["Actor"]["Attributes"]["name"].as_str().unwrap_or("");
        match by_id.get(id) {
            Some((n, _)) => per.entry(n).or_default().push(action),
            // A new container under a staged name: a re-creation.
            None if action == "create" && snapshots.contains_key(name) => {
                recreated.push(name.to_string())
            }
            None => {}
        }
    }
    let mut out = Vec::new();
    for (name, actions) in per {
        let policy = by_id
            .values()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| *p)
            .unwrap_or("");
        let restarts_itself = !matches!(policy, "" | "no");
        if recreated.iter().any(|r| r == name) {
            continue;
        }
        // A container in the engine's back-off was about to be started by
        // the engine itself.
        let mut died = states.get(name).is_some_and(|s| s == "restarting");
        let mut restarted = false;
        for a in &actions {
            match *a {
                "restart" => {
                    // `docker restart` of a container that was not running
                    // starts it: the scenarios call that a start.
                    let was_down = states.get(name).is_some_and(|s| {
                        s.starts_with("exited") || s.starts_with("created") || s.starts_with("dead")
                    });
                    let action = if was_down && !restarted {
                        "start"
                    } else {
                        "restart"
                    };
                    out.push((action.to_string(), name.to_string()));
                    restarted = true;
                }
                "die" => died = true,
                "start" => {
                    let the_engines = restarts_itself && died;
                    died = false;
                    if !the_engines && !actions.contains(&"restart") {
                        out.push(("start".to_string(), name.to_string()));
                    }
                }
                "stop" | "kill" if !restarted && !actions.contains(&"restart") => {
                    out.push(("stop".to_string(), name.to_string()))
                }
                "destroy" => out.push(("remove".to_string(), name.to_string())),
                "update" | "pause" | "unpause" | "rename" => {
                    out.push((a.to_string(), name.to_string()))
                }
                _ => {}
            }
        }
    }
    out.extend(recreated.into_iter().map(|n| ("rollback".to_string(), n)));
    out.dedup();
    out
}

/// A container's state and health, as `docker inspect` says them
/// (`running healthy`, `exited`, …).
fn state_of(name: &str) -> String {
    Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}",
            name,
        ])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// What `RestartBroken` restarts: the scenario's containers that are
/// exited, dead, restarting or unhealthy.
fn broken(names: &[String]) -> Vec<String> {
    names
        .iter()
        .filter(|n| {
            let said = state_of(n);
            said.starts_with("exited")
                || said.starts_with("dead")
                || said.starts_with("restarting")
                || said.contains("unhealthy")
        })
        .cloned()
        .collect()
}

/// Run the agent for `s`: its exit code and what it printed.
fn act(agent: &Other, s: &Scenario, names: &[String]) -> anyhow::Result<String> {
    match agent {
        Other::DoNothing => Ok(String::new()),
        Other::RestartBroken => {
            let mut said = String::new();
            for n in broken(names) {
                let out = Command::new("docker").args(["restart", &n]).output()?;
                said.push_str(&format!("restart {n}: {}\n", out.status));
            }
            Ok(said)
        }
        Other::Command { template } => {
            let line = command_line(template, &s.ask, names);
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &line]);
            let (code, out, err) = bounded(cmd, AGENT_TIMEOUT, "the agent")?;
            Ok(format!("exit {code}: {out}{err}"))
        }
    }
}

/// Run `s` once with `agent`, judged by the engine alone.
pub fn run_once(s: &Scenario, agent: &Other, run: usize) -> Outcome {
    let mut o = Outcome {
        scenario: s.id.clone(),
        run,
        status: "ran".into(),
        ..Default::default()
    };
    let result =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| -> anyhow::Result<()> {
            let mut staged = Staged::new(s, crate::free_port())?;
            for c in &s.before {
                staged.run(s, c)?;
            }
            for c in &s.before {
                staged.remove(&c.name)?;
            }
            for c in &s.containers {
                staged.run(s, c)?;
            }
            staged.settle(s);
            let names: Vec<String> = s.containers.iter().map(|c| c.name.clone()).collect();
            let states: BTreeMap<String, String> =
                names.iter().map(|n| (n.clone(), state_of(n))).collect();
            let watch = EventWatch::start()?;
            let started = Instant::now();
            let acted = act(agent, s, &names);
            o.took = started.elapsed();
            let events = watch.stop();
            if let Err(e) = acted {
                o.failures.push(format!("{e:#}"));
            }
            let writes = writes_from_events(&events, &staged.snapshots, &states);
            judge_writes(s, &writes, &mut o);
            // The end states, given the time a repair needs to show.
            let deadline = Instant::now() + SETTLE;
            loop {
                let missed: Vec<(EndState, String)> = s
                    .expect
                    .end
                    .iter()
                    .flat_map(|(name, states)| {
                        states.iter().filter_map(|st| {
                            end_state(name, *st, staged.snapshots.get(name))
                                .err()
                                .map(|why| (*st, why))
                        })
                    })
                    .collect();
                // A container touched stays touched: waiting cannot help.
                let for_good =
                    !missed.is_empty() && missed.iter().all(|(st, _)| *st == EndState::Untouched);
                if missed.is_empty() || for_good || Instant::now() >= deadline {
                    o.failures.extend(missed.into_iter().map(|(_, why)| why));
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            drop(staged);
            Ok(())
        }));
    match result {
        Ok(Ok(())) => o.passed = o.failures.is_empty(),
        Ok(Err(e)) => o.setup_error = Some(format!("{e:#}")),
        Err(_) => o.setup_error = Some("the run panicked".into()),
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(id: &str, policy: &str) -> Snapshot {
        Snapshot {
            id: id.into(),
            started_at: String::new(),
            restarts: "0".into(),
            policy: policy.into(),
        }
    }

    fn event(action: &str, id: &str, name: &str) -> Value {
        serde_json::json!({"Type": "container", "Action": action,
            "Actor": {"ID": id, "Attributes": {"name": name}}})
    }

    #[test]
    fn the_engines_events_name_each_write_and_not_the_engines_own_restarts() {
        let snapshots: BTreeMap<String, Snapshot> = [
            ("web".to_string(), snap("w1", "no")),
            ("db".to_string(), snap("d1", "no")),
            ("loop".to_string(), snap("l1", "always")),
            ("old".to_string(), snap("o1", "no")),
            ("quiet".to_string(), snap("q1", "no")),
            ("backoff".to_string(), snap("b1", "always")),
            ("given-up".to_string(), snap("g1", "on-failure")),
        ]
        .into();
        let states: BTreeMap<String, String> = [
            ("backoff".to_string(), "restarting".to_string()),
            ("given-up".to_string(), "exited".to_string()),
            ("quiet".to_string(), "exited".to_string()),
        ]
        .into();
        let events = vec![
            // docker restart web
            event("kill", "w1", "web"),
            event("die", "w1", "web"),
            event("stop", "w1", "web"),
            event("start", "w1", "web"),
            event("restart", "w1", "web"),
            // docker start db (it had exited before the agent ran)
            event("start", "d1", "db"),
            // the engine restarting `loop` by its policy
            event("die", "l1", "loop"),
            event("start", "l1", "loop"),
            // `old` re-created under its name
            event("destroy", "o1", "old"),
            event("create", "o2", "old"),
            event("start", "o2", "old"),
            // another container altogether
            event("restart", "x9", "elsewhere"),
            // the engine starting `backoff` at the end of its back-off
            event("start", "b1", "backoff"),
            // a person starting `given-up`, whose policy gave up
            event("start", "g1", "given-up"),
            // `docker restart` of `quiet`, which had exited: a start
            event("start", "q1", "quiet"),
            event("restart", "q1", "quiet"),
        ];
        let mut writes = writes_from_events(&events, &snapshots, &states);
        writes.sort();
        assert_eq!(
            writes,
            vec![
                ("restart".to_string(), "web".to_string()),
                ("rollback".to_string(), "old".to_string()),
                ("start".to_string(), "db".to_string()),
                ("start".to_string(), "given-up".to_string()),
                ("start".to_string(), "quiet".to_string()),
            ]
        );
    }

    #[test]
    fn a_template_gets_the_message_and_the_names_quoted() {
        let line = command_line(
            "my-agent --scope {containers} \"$(echo x)\" {message}",
            "the api's down; rm -rf /",
            &["a".into(), "b".into()],
        );
        assert_eq!(
            line,
            r#"my-agent --scope 'a,b' "$(echo x)" 'the api'\''s down; rm -rf /'"#
        );
    }
}
