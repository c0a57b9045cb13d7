//! Local images for the demo and the end-to-end tests. No registry can be
//! reached, so the fault fixture (`tests/fixture`) is built here as a static
//! binary and copied into a `FROM scratch` image with the `docker` CLI.
//!
//! This is set-up of a demo workload, not part of drydock's control path:
//! diagnosis and repair still go CLI → agent → executor → Docker.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context as _};

pub const FIXTURE_IMAGE: &str = "drydock-fixture:latest";
/// The fixture with an exec-form HEALTHCHECK probing its own `/health`
/// (a scratch image has no shell, so `docker run --health-cmd` cannot be used).
pub const FIXTURE_WEB_IMAGE: &str = "drydock-fixture-web:latest";
const FIXTURE_DOCKERFILE: &str = include_str!("../../tests/fixture/Dockerfile");
const WEB_DOCKERFILE: &str = "FROM drydock-fixture:latest\nHEALTHCHECK --interval=2s --timeout=2s --start-period=1s --retries=2 CMD [\"/drydock-fixture\", \"probe\", \"http://127.0.0.1:8080/health\"]\n";
/// The host's glibc target: with `+crt-static` it links a fully static
/// binary that runs in a `FROM scratch` image.
pub fn static_target() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// The workspace this binary was built from, when it still exists (the demo
/// builds the daemons and the fixture from it).
pub fn workspace_root() -> Option<PathBuf> {
    let manifest = option_env!("CARGO_MANIFEST_DIR")?;
    let root = Path::new(manifest).parent()?.to_path_buf();
    root.join("Cargo.toml").is_file().then_some(root)
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"))
}

pub fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run the `docker` CLI; is Docker installed?")?;
    if !out.status.success() {
        bail!(
            "docker {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

pub fn image_exists(image: &str) -> bool {
    Command::new("docker")
        .args(["image", "inspect", image])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Build release binaries of `packages` as fully static executables; returns
/// the folder they are in. Used for the fixture and for the daemon images.
pub fn build_static(root: &Path, packages: &[&str]) -> anyhow::Result<PathBuf> {
    let target = static_target();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root)
        .args(["build", "--release", "--target", &target]);
    for p in packages {
        cmd.args(["-p", p]);
    }
    // With --target, RUSTFLAGS apply to the target artifacts only, not to
    // build scripts and proc macros, so the host build is not disturbed.
    let status = cmd
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .status()
        .context("cannot run cargo to build static binaries")?;
    if !status.success() {
        bail!(
            "building {} failed (cargo exited with {status})",
            packages.join(", ")
        );
    }
    Ok(target_dir(root).join(&target).join("release"))
}

/// Build the static fixture binary with cargo; returns its path.
pub fn build_fixture_binary(root: &Path) -> anyhow::Result<PathBuf> {
    Ok(build_static(root, &["drydock-fixture"])?.join("drydock-fixture"))
}

/// Build both fixture images unless they exist (or `rebuild`).
pub fn ensure_images(root: &Path, rebuild: bool) -> anyhow::Result<()> {
    if rebuild || !image_exists(FIXTURE_IMAGE) {
        let binary = build_fixture_binary(root)?;
        let ctx = tempdir()?;
        std::fs::copy(&binary, ctx.join("drydock-fixture"))
            .with_context(|| format!("cannot copy {}", binary.display()))?;
        std::fs::write(ctx.join("Dockerfile"), FIXTURE_DOCKERFILE)?;
        let ctx_str = ctx.to_string_lossy().to_string();
        let result = docker(&["build", "-q", "-t", FIXTURE_IMAGE, &ctx_str]);
        let _ = std::fs::remove_dir_all(&ctx);
        result?;
    }
    if rebuild || !image_exists(FIXTURE_WEB_IMAGE) {
        let ctx = tempdir()?;
        std::fs::write(ctx.join("Dockerfile"), WEB_DOCKERFILE)?;
        let ctx_str = ctx.to_string_lossy().to_string();
        let result = docker(&["build", "-q", "-t", FIXTURE_WEB_IMAGE, &ctx_str]);
        let _ = std::fs::remove_dir_all(&ctx);
        result?;
    }
    Ok(())
}

fn tempdir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "drydock-build-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
