//! `drydock up` / `drydock down`: run both daemons in the background from
//! `$DRYDOCK_HOME`, with logs and pid files there. The agent is started with
//! its own config only; nothing it is given names the approver's key.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use nix::sys::signal::Signal;

use crate::client::AgentClient;
use crate::home::Home;

const START_TIMEOUT: Duration = Duration::from_secs(20);
const STOP_TIMEOUT: Duration = Duration::from_secs(15);
pub const EXECUTOR_READY_LINE: &str = "drydock-executor listening";

/// A daemon binary: `$DRYDOCK_<NAME>_BIN`, else next to this executable,
/// else on `PATH`.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let env_key = format!("{}_BIN", name.to_ascii_uppercase().replace('-', "_"));
    if let Some(p) = std::env::var_os(&env_key)
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    {
        return Some(p);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
    {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Some(candidate);
        }
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn require_binary(name: &str) -> anyhow::Result<PathBuf> {
    find_binary(name).with_context(|| {
        format!(
            "{name} not found (looked at ${}_BIN, next to this drydock binary, and on PATH). Build it with `cargo build --release -p drydock-executor -p drydock-agent`.",
            name.to_ascii_uppercase().replace('-', "_")
        )
    })
}

fn signal(pid: u32, sig: Signal) -> nix::Result<()> {
    let pid = i32::try_from(pid).map_err(|_| nix::errno::Errno::ESRCH)?;
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig)
}

/// Alive and not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .map(|rest| !rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

pub fn read_pid(home: &Home, daemon: &str) -> Option<u32> {
    std::fs::read_to_string(home.pid(daemon))
        .ok()?
        .trim()
        .parse()
        .ok()
}

pub fn running_pid(home: &Home, daemon: &str) -> Option<u32> {
    read_pid(home, daemon).filter(|p| pid_alive(*p))
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a daemon printed outside its log (start-up errors, panics).
fn stderr_log(home: &Home, daemon: &str) -> PathBuf {
    home.path(&format!("logs/{daemon}.stderr"))
}

fn spawn(home: &Home, daemon: &str, config: &Path) -> anyhow::Result<std::process::Child> {
    let bin = require_binary(daemon)?;
    let log_path = home.log(daemon);
    std::fs::create_dir_all(home.path("logs"))?;
    std::fs::create_dir_all(home.path("run"))?;
    // The daemon writes its log itself, bounded (drydock-daemon rotates it
    // at DRYDOCK_LOG_MAX_BYTES); only what bypasses logging (a start-up
    // error, a panic) lands in the .stderr file.
    let stderr_path = stderr_log(home, daemon);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(&stderr_path)
        .with_context(|| format!("cannot open {}", stderr_path.display()))?;
    let mut cmd = Command::new(&bin);
    cmd.arg("serve")
        .arg("--config")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // Only what the daemon needs from our environment reaches it.
    // `DRYDOCK_*` overrides pass through; nothing else does.
    cmd.env_clear();
    for (key, value) in std::env::vars_os() {
        let name = key.to_string_lossy();
        let wanted = matches!(name.as_ref(), "PATH" | "HOME" | "DOCKER_HOST" | "TZ")
            || (name.starts_with("DRYDOCK_") && name != "DRYDOCK_HOME");
        if wanted {
            cmd.env(&key, value);
        }
    }
    cmd.env("DRYDOCK_LOG_FILE", &log_path);
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        // Own process group: Ctrl-C in the operator's terminal does not
        // take the daemons down with the CLI.
        cmd.process_group(0);
    }
    let child = cmd
        .spawn()
        .with_context(|| format!("cannot start {}", bin.display()))?;
    std::fs::write(home.pid(daemon), child.id().to_string())?;
    Ok(child)
}

fn failed_to_start(home: &Home, daemon: &str, why: &str) -> anyhow::Error {
    let log = home.log(daemon);
    let stderr = stderr_log(home, daemon);
    anyhow::anyhow!(
        "{daemon} {why}. Last lines of {}:\n{}\n{}:\n{}",
        log.display(),
        tail(&log, 15),
        stderr.display(),
        tail(&stderr, 15)
    )
}

/// Start whatever is not running; return once both answer.
pub async fn up(home: &Home) -> anyhow::Result<()> {
    let cli = home.load_cli_config()?;
    if running_pid(home, "drydock-executor").is_none() {
        let log_len = std::fs::metadata(home.log("drydock-executor"))
            .map(|m| m.len())
            .unwrap_or(0);
        let mut child = spawn(home, "drydock-executor", &home.executor_config())?;
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(failed_to_start(
                    home,
                    "drydock-executor",
                    &format!("exited during start-up ({status})"),
                ));
            }
            let log = std::fs::read(home.log("drydock-executor")).unwrap_or_default();
            if log.len() as u64 > log_len
                && String::from_utf8_lossy(&log[log_len as usize..]).contains(EXECUTOR_READY_LINE)
            {
                break;
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(failed_to_start(
                    home,
                    "drydock-executor",
                    "did not become ready in time",
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let agent = AgentClient::from_config(&cli)?;
    if running_pid(home, "drydock-agent").is_none() {
        let mut child = spawn(home, "drydock-agent", &home.agent_config())?;
        let started = Instant::now();
        loop {
            if let Some(status) = child.try_wait()? {
                return Err(failed_to_start(
                    home,
                    "drydock-agent",
                    &format!("exited during start-up ({status})"),
                ));
            }
            if agent.healthy().await {
                break;
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(failed_to_start(
                    home,
                    "drydock-agent",
                    "did not answer /healthz in time",
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    } else if !agent.healthy().await {
        bail!(
            "drydock-agent is running but does not answer at {}; see {}",
            cli.agent_url,
            home.log("drydock-agent").display()
        );
    }
    Ok(())
}

/// Stop both daemons (agent first: it is the executor's client).
pub async fn down(home: &Home) -> anyhow::Result<Vec<String>> {
    let mut stopped = Vec::new();
    for daemon in ["drydock-agent", "drydock-executor"] {
        let Some(pid) = running_pid(home, daemon) else {
            let _ = std::fs::remove_file(home.pid(daemon));
            continue;
        };
        signal(pid, Signal::SIGTERM)
            .with_context(|| format!("could not signal {daemon} (pid {pid})"))?;
        let started = Instant::now();
        while pid_alive(pid) {
            if started.elapsed() > STOP_TIMEOUT {
                let _ = signal(pid, Signal::SIGKILL);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = std::fs::remove_file(home.pid(daemon));
        stopped.push(daemon.to_string());
    }
    Ok(stopped)
}
