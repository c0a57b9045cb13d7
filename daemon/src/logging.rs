//! Log set-up: structured `tracing`, text for people or JSON for
//! collectors, filtered by `DRYDOCK_LOG` (default `info`).
//!
//! Logs go to stderr (for a service manager or container runtime to
//! collect), or, when `DRYDOCK_LOG_FILE` is set (`drydock up` sets it), to
//! that file, bounded: past `DRYDOCK_LOG_MAX_BYTES` (default 10 MiB) the
//! file becomes `<file>.1` (replacing the previous one) and a new file
//! starts, so a flood of log lines cannot fill the disk.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Deserialize;

pub const DEFAULT_LOG_MAX_BYTES: u64 = 10 * 1024 * 1024;

#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Install the global subscriber. A second call (tests that start a daemon
/// in-process twice) is ignored rather than a panic.
pub fn init(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DRYDOCK_LOG")
        .unwrap_or_else(|_| "info".into());
    let file = std::env::var_os("DRYDOCK_LOG_FILE").map(PathBuf::from);
    let max = std::env::var("DRYDOCK_LOG_MAX_BYTES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|n| *n >= 1024)
        .unwrap_or(DEFAULT_LOG_MAX_BYTES);
    let bounded = file.and_then(|path| match BoundedFile::open(&path, max) {
        Ok(f) => Some(Arc::new(f)),
        Err(e) => {
            eprintln!(
                "cannot open DRYDOCK_LOG_FILE {}: {e}; logging to stderr",
                path.display()
            );
            None
        }
    });
    let _ = match (bounded, format) {
        (Some(f), LogFormat::Json) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || BoundedHandle(f.clone()))
            .json()
            .try_init(),
        (Some(f), LogFormat::Text) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || BoundedHandle(f.clone()))
            .with_ansi(false)
            .try_init(),
        (None, LogFormat::Json) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .json()
            .try_init(),
        (None, LogFormat::Text) => tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .try_init(),
    };
}

/// A log file that rotates once it reaches `max` bytes.
pub struct BoundedFile {
    path: PathBuf,
    max: u64,
    state: Mutex<(std::fs::File, u64)>,
}

impl BoundedFile {
    pub fn open(path: &Path, max: u64) -> std::io::Result<BoundedFile> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        let len = file.metadata()?.len();
        Ok(BoundedFile {
            path: path.to_path_buf(),
            max,
            state: Mutex::new((file, len)),
        })
    }

    fn write_line(&self, buf: &[u8]) -> std::io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.1 > 0 && state.1 + buf.len() as u64 > self.max {
            let mut old = self.path.as_os_str().to_os_string();
            old.push(".1");
            std::fs::rename(&self.path, &old)?;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.path)?;
            *state = (file, 0);
        }
        state.0.write_all(buf)?;
        state.1 += buf.len() as u64;
        Ok(())
    }
}

struct BoundedHandle(Arc<BoundedFile>);

impl std::io::Write for BoundedHandle {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_line(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_rotates_at_its_bound_and_keeps_one_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.log");
        let f = BoundedFile::open(&path, 1024).unwrap();
        let line = [b'x'; 100];
        for _ in 0..50 {
            f.write_line(&line).unwrap();
        }
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
        assert!(size(&path) <= 1024, "{}", size(&path));
        let old = dir.path().join("d.log.1");
        assert!(size(&old) > 0 && size(&old) <= 1024);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "at most two files"
        );
    }
}
