//! `drydock demo`: the whole loop on a local, deliberately broken service,
//! with no API key and no manual configuration.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};

use crate::ask::{self, AskOptions};
use crate::exit;
use crate::fixture::{self, docker};
use crate::home::{self, Home};
use crate::{daemons, fixture::FIXTURE_WEB_IMAGE};

pub const DEMO_CONTAINER: &str = "drydock-demo-backend-1";

pub struct DemoOptions {
    pub yes: bool,
    pub keep: bool,
}

/// Build the daemons from the workspace if they are not next to us.
/// Run from a source checkout (`cargo run`), the daemons are always brought
/// up to date with the CLI (a no-op when nothing changed), so the demo never
/// runs a stale executor or agent. Installed binaries are used as they are.
fn ensure_daemons() -> anyhow::Result<()> {
    let from_checkout = fixture::workspace_root().is_some_and(|root| {
        std::env::current_exe().is_ok_and(|exe| {
            exe.starts_with(root.join("target"))
                || std::env::var_os("CARGO_TARGET_DIR").is_some_and(|t| exe.starts_with(t))
        })
    });
    let installed = daemons::find_binary("drydock-executor").is_some()
        && daemons::find_binary("drydock-agent").is_some();
    if installed && !from_checkout {
        return Ok(());
    }
    let root = fixture::workspace_root().context("drydock-executor and drydock-agent are not installed next to drydock and no source workspace was found to build them")?;
    let release = std::env::current_exe()
        .map(|p| p.to_string_lossy().contains("/release/"))
        .unwrap_or(true);
    println!("building drydock-executor and drydock-agent…");
    let mut cmd =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(&root)
        .args(["build", "-p", "drydock-executor", "-p", "drydock-agent"]);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().context("cannot run cargo")?;
    if !status.success() {
        bail!("building the daemons failed");
    }
    Ok(())
}

fn health_status(name: &str) -> String {
    docker(&[
        "inspect",
        "-f",
        "{{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}}",
        name,
    ])
    .unwrap_or_default()
}

pub async fn run(opts: &DemoOptions) -> anyhow::Result<u8> {
    let home = Home::locate()?;
    println!("drydock demo — home {}", home.root.display());
    if !home.is_initialized() {
        home::init(&home, &home::InitOptions::default())?;
        println!("initialized: CA, executor and agent certificates, approver key, agent token");
    }
    ensure_daemons()?;
    let root = fixture::workspace_root();
    match &root {
        Some(r) => {
            if !fixture::image_exists(fixture::FIXTURE_WEB_IMAGE) {
                println!("building the demo image locally (no registry needed)…");
            }
            fixture::ensure_images(r, false)?;
        }
        None if fixture::image_exists(FIXTURE_WEB_IMAGE) => {}
        None => bail!("the demo image {FIXTURE_WEB_IMAGE} is missing and no source workspace was found to build it"),
    }
    let started_daemons = daemons::read_pid(&home, "drydock-agent")
        .filter(|p| daemons::pid_alive(*p))
        .is_none();
    daemons::up(&home).await?;
    println!(
        "executor and agent are up (two separate processes; only the executor talks to Docker)"
    );

    let _ = docker(&["rm", "-f", DEMO_CONTAINER]);
    docker(&[
        "run",
        "-d",
        "--name",
        DEMO_CONTAINER,
        "--label",
        "com.docker.compose.project=drydock-demo",
        "--label",
        "com.docker.compose.service=backend",
        "--health-interval",
        "1s",
        "--health-retries",
        "2",
        "--health-timeout",
        "2s",
        FIXTURE_WEB_IMAGE,
        "serve",
        "--port",
        "8080",
        "--wedge-after-secs",
        "2",
        "--line",
        "INFO shop backend v1.4.2 starting",
    ])?;
    println!("started demo service {DEMO_CONTAINER}; waiting for it to break…");
    let started = Instant::now();
    while health_status(DEMO_CONTAINER) != "unhealthy" {
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "the demo service did not become unhealthy within 60s (health: {})",
                health_status(DEMO_CONTAINER)
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("{DEMO_CONTAINER} is unhealthy. Asking drydock: \"backend is down\"\n");

    let cfg = home.load_cli_config()?;
    let result = ask::ask(
        &cfg,
        &AskOptions {
            message: "backend is down".into(),
            yes: opts.yes,
            ..Default::default()
        },
    )
    .await?;
    println!();
    let status = result.request.status;
    match result.exit_code {
        exit::APPROVAL_PENDING => {
            println!("The daemons and {DEMO_CONTAINER} are left running so you can approve; `drydock down` stops the daemons.");
            return Ok(result.exit_code);
        }
        exit::COMPLETED if health_status(DEMO_CONTAINER) == "healthy" => {
            println!("The demo service recovered: {DEMO_CONTAINER} is running and healthy.");
        }
        exit::REJECTED => println!(
            "{DEMO_CONTAINER} was left untouched (still {}).",
            health_status(DEMO_CONTAINER)
        ),
        _ => println!("The demo service did not recover (request {status})."),
    }
    if !opts.keep {
        let _ = docker(&["rm", "-f", DEMO_CONTAINER]);
        if started_daemons {
            daemons::down(&home).await?;
        }
        println!("cleaned up (use --keep to keep the demo container and daemons running)");
    }
    Ok(result.exit_code)
}
