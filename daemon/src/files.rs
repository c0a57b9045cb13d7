//! Files that hold secrets: private keys, tokens, the stores. A key readable
//! by another user lets that user impersonate the daemon, so it is refused,
//! not warned about.

use std::io::Write as _;
use std::path::Path;

use nix::sys::stat::{Mode, SFlag};

use crate::config::{invalid, ConfigError};

/// The permission bits of `path` (following links), or an error naming `key`.
pub fn mode_of(key: &'static str, path: &Path) -> Result<u32, ConfigError> {
    let st = nix::sys::stat::stat(path)
        .map_err(|e| invalid(key, format!("cannot stat {}: {e}", path.display())))?;
    Ok(st.st_mode & 0o7777)
}

/// Refuse a private file that is not a regular file or that its group or
/// others can read or write.
pub fn check_private(key: &'static str, path: &Path) -> Result<(), ConfigError> {
    let st = nix::sys::stat::stat(path)
        .map_err(|e| invalid(key, format!("cannot stat {}: {e}", path.display())))?;
    let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    if kind != SFlag::S_IFREG {
        return Err(invalid(
            key,
            format!("{} is not a regular file", path.display()),
        ));
    }
    let mode = st.st_mode & 0o777;
    if mode & 0o077 != 0 {
        return Err(invalid(
            key,
            format!(
                "{} has mode {mode:o}; private keys must not be readable by group or others (chmod 600 {})",
                path.display(),
                path.display()
            ),
        ));
    }
    Ok(())
}

/// A SQLite store and its WAL companions are for the daemon's user only.
/// Missing companions are fine (they appear on first write, created under the
/// daemon's umask, which `process::harden` sets to 077).
pub fn restrict_sqlite(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_os_string();
        p.push(suffix);
        let _ = nix::sys::stat::fchmodat(
            nix::fcntl::AT_FDCWD,
            Path::new(&p),
            Mode::from_bits_truncate(0o600),
            nix::sys::stat::FchmodatFlags::FollowSymlink,
        );
    }
}

/// Write `content` to a new file at `path`. A file being replaced is removed
/// first, so a private file is always created anew with mode 0600 and is
/// never readable by others, not even for a moment, whatever mode the old
/// file had.
pub fn write_new(path: &Path, content: &[u8], private: bool) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() {
            std::fs::create_dir_all(dir)?;
        }
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if private { 0o600 } else { 0o644 })
        .open(path)?;
    f.write_all(content)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn group_readable_keys_and_non_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("k.key");
        write_new(&key, b"secret", true).unwrap();
        assert_eq!(mode_of("k", &key).unwrap(), 0o600);
        check_private("tls.key", &key).unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = check_private("tls.key", &key).unwrap_err().to_string();
        assert!(
            err.contains("tls.key") && err.contains("chmod 600"),
            "{err}"
        );
        let err = check_private("tls.key", dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a regular file"), "{err}");
    }

    #[test]
    fn replacing_a_world_readable_file_yields_a_private_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, "old").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        write_new(&path, b"new", true).unwrap();
        assert_eq!(mode_of("t", &path).unwrap() & 0o777, 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    #[error(
        "{0} is not empty; a backup goes into a new or empty folder and never replaces a file"
    )]
    NotEmpty(String),
    #[error("cannot make the backup folder {0}: {1}")]
    Io(String, std::io::Error),
}

/// Make `dir` for a backup (mode 0700), or accept it when it exists and
/// is empty: a backup never mixes with, or replaces, older files.
pub fn new_backup_folder(dir: &Path) -> Result<(), FolderError> {
    use std::os::unix::fs::DirBuilderExt as _;
    let folder = |e| FolderError::Io(dir.display().to_string(), e);
    match std::fs::read_dir(dir) {
        Ok(mut entries) => match entries.next() {
            Some(_) => Err(FolderError::NotEmpty(dir.display().to_string())),
            None => Ok(()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(folder),
        Err(e) => Err(folder(e)),
    }
}

/// Move those of `files` that exist into a new folder `replaced-<unix
/// time>` in `dir` (a restore's way of never deleting what it replaces);
/// returns the folder when anything moved.
pub fn move_aside(
    files: &[std::path::PathBuf],
    dir: &Path,
) -> std::io::Result<Option<std::path::PathBuf>> {
    let present: Vec<&std::path::PathBuf> = files.iter().filter(|f| f.exists()).collect();
    if present.is_empty() {
        return Ok(None);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut folder = dir.join(format!("replaced-{now}"));
    let mut n = 1;
    while folder.exists() {
        folder = dir.join(format!("replaced-{now}-{n}"));
        n += 1;
    }
    std::fs::create_dir_all(&folder)?;
    for file in present {
        if let Some(name) = file.file_name() {
            std::fs::rename(file, folder.join(name))?;
        }
    }
    Ok(Some(folder))
}
