//! `drydock backup DIR` and `drydock restore DIR` for the local layout: the
//! daemons' own `backup` and `restore` commands, run with this home's
//! configs. A backup is taken while both daemons run; a restore needs them
//! stopped, and moves the stores it replaces into a `replaced-<time>`
//! folder next to them (nothing is deleted).

use std::path::Path;
use std::process::Command;

use anyhow::Context as _;

use crate::daemons;
use crate::exit;
use crate::home::Home;

const EXECUTOR_PART: &str = "executor";
const AGENT_PART: &str = "agent";

fn run(binary: &str, args: &[&std::ffi::OsStr]) -> anyhow::Result<()> {
    let bin = daemons::find_binary(binary)
        .with_context(|| format!("{binary} not found (looked next to drydock and on PATH)"))?;
    let status = Command::new(&bin)
        .args(args)
        .status()
        .with_context(|| format!("cannot run {}", bin.display()))?;
    anyhow::ensure!(
        status.success(),
        "{binary} {} failed",
        args[0].to_string_lossy()
    );
    Ok(())
}

pub fn backup(home: &Home, dir: &Path) -> anyhow::Result<u8> {
    anyhow::ensure!(
        home.is_initialized(),
        "{} is not a drydock home: nothing to back up (run `drydock init` first)",
        home.root.display()
    );
    drydock_daemon::files::new_backup_folder(dir)?;
    let executor = dir.join(EXECUTOR_PART);
    let agent = dir.join(AGENT_PART);
    run(
        "drydock-executor",
        &[
            "audit".as_ref(),
            "backup".as_ref(),
            "--config".as_ref(),
            home.executor_config().as_os_str(),
            "--to".as_ref(),
            executor.as_os_str(),
        ],
    )?;
    run(
        "drydock-agent",
        &[
            "backup".as_ref(),
            "--config".as_ref(),
            home.agent_config().as_os_str(),
            "--to".as_ref(),
            agent.as_os_str(),
        ],
    )?;
    println!(
        "backup in {}; restore it with `drydock down && drydock restore {}`",
        dir.display(),
        dir.display()
    );
    Ok(exit::COMPLETED)
}

pub fn restore(home: &Home, dir: &Path) -> anyhow::Result<u8> {
    for part in [EXECUTOR_PART, AGENT_PART] {
        anyhow::ensure!(
            dir.join(part).is_dir(),
            "{} holds no {part}/ folder: give the folder `drydock backup` wrote",
            dir.display()
        );
    }
    for daemon in ["drydock-executor", "drydock-agent"] {
        if let Some(pid) = daemons::running_pid(home, daemon) {
            anyhow::bail!(
                "the {daemon} is running (pid {pid}); stop both with `drydock down`, then restore"
            );
        }
    }
    run(
        "drydock-executor",
        &[
            "audit".as_ref(),
            "restore".as_ref(),
            "--config".as_ref(),
            home.executor_config().as_os_str(),
            "--from".as_ref(),
            dir.join(EXECUTOR_PART).as_os_str(),
            "--move-aside".as_ref(),
        ],
    )?;
    run(
        "drydock-agent",
        &[
            "restore".as_ref(),
            "--config".as_ref(),
            home.agent_config().as_os_str(),
            "--from".as_ref(),
            dir.join(AGENT_PART).as_os_str(),
            "--move-aside".as_ref(),
        ],
    )?;
    println!("restored (the stores it replaced are in replaced-<time> folders next to them); start the daemons with `drydock up`");
    Ok(exit::COMPLETED)
}
