//! A build context that is a plain folder, not a git checkout: what a
//! build reads is the folder's files as they are, less what its
//! `.dockerignore` excludes, read once into the tar the engine gets. That
//! tar is made the same way every time (paths in order, one file time,
//! modes reduced to executable or not), so its sha256 names the files by
//! content: an approval binds it as both the commit and the tree, and a
//! build goes ahead only while the folder still hashes to it.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

use super::git::GitError;
use super::tar::{Kind, TarWriter};

/// The file time every member gets (2000-01-01): the hash names content,
/// not when it was written.
const FILE_TIME: u64 = 946_684_800;
/// The most files a folder context may hold.
const MAX_FILES: usize = 100_000;

/// A folder's files, read once.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// sha256 of `tar`, 64 hex digits.
    pub hash: String,
    pub tar: Vec<u8>,
    pub dockerfile: String,
    pub files: usize,
}

/// Whether `path` is the top of a git checkout (`.git` in it).
pub fn is_checkout(path: &Path) -> bool {
    path.join(".git").exists()
}

/// Read `path`'s files (less what `.dockerignore` excludes; the
/// Dockerfile always), at most `max` bytes of tar.
pub fn snapshot(path: &Path, dockerfile: &str, max: u64) -> Result<Snapshot, GitError> {
    let failed = |message: String| GitError::Failed {
        what: "read",
        checkout: path.display().to_string(),
        message,
    };
    let ignore = match std::fs::read_to_string(path.join(".dockerignore")) {
        Ok(text) => Patterns::parse(&text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Patterns::default(),
        Err(e) => return Err(failed(format!(".dockerignore: {e}"))),
    };
    let mut files = Vec::new();
    walk(path, PathBuf::new(), &mut files).map_err(|e| failed(e.to_string()))?;
    if files.len() > MAX_FILES {
        return Err(failed(format!("more than {MAX_FILES} files")));
    }
    files.sort();
    let top = path
        .canonicalize()
        .map_err(|e| failed(format!("{}: {e}", path.display())))?;
    let mut tar = TarWriter::new();
    let mut text = None;
    let mut count = 0;
    for rel in files {
        let name = rel.to_string_lossy().to_string();
        if name != dockerfile && ignore.excludes(&name) {
            continue;
        }
        let full = path.join(&rel);
        // Its folder must still be inside the context (not a folder
        // swapped for a link since the walk), and the file is opened
        // without following a link and read only as far as the limit.
        let parent = full.parent().unwrap_or(path);
        let inside = parent.canonicalize().is_ok_and(|p| p.starts_with(&top));
        if !inside {
            return Err(failed(format!(
                "{name}: its folder is no longer inside the context"
            )));
        }
        let meta = std::fs::symlink_metadata(&full).map_err(|e| failed(format!("{name}: {e}")))?;
        if meta.file_type().is_symlink() {
            if name == dockerfile {
                return Err(GitError::NoDockerfile(format!(
                    "{dockerfile} (it is a link)"
                )));
            }
            let target = std::fs::read_link(&full).map_err(|e| failed(format!("{name}: {e}")))?;
            tar.append(
                &name,
                Kind::Symlink,
                target.as_os_str().as_encoded_bytes(),
                FILE_TIME,
            );
        } else {
            let budget = max.saturating_sub(tar.len() as u64);
            let read = read_bounded(&full, budget).map_err(|e| failed(format!("{name}: {e}")))?;
            let Some((data, executable)) = read else {
                return Err(GitError::TooLarge { max });
            };
            if name == dockerfile {
                text = Some(String::from_utf8_lossy(&data).to_string());
            }
            tar.append(&name, Kind::File { executable }, &data, FILE_TIME);
        }
        count += 1;
        if tar.len() as u64 > max {
            return Err(GitError::TooLarge { max });
        }
    }
    let dockerfile = text.ok_or_else(|| GitError::NoDockerfile(dockerfile.to_string()))?;
    let tar = tar.finish();
    Ok(Snapshot {
        hash: hex::encode(Sha256::digest(&tar)),
        tar,
        dockerfile,
        files: count,
    })
}

/// A regular file's content and whether it is executable, opened without
/// following a link; `None` when it holds more than `budget` bytes.
fn read_bounded(path: &Path, budget: u64) -> std::io::Result<Option<(Vec<u8>, bool)>> {
    use std::io::Read as _;
    use std::os::unix::fs::PermissionsExt as _;
    let (file, meta) = open_regular(path)?;
    let mut data = Vec::new();
    file.take(budget.saturating_add(1)).read_to_end(&mut data)?;
    if data.len() as u64 > budget {
        return Ok(None);
    }
    Ok(Some((data, meta.permissions().mode() & 0o111 != 0)))
}

/// A regular file opened for reading without following a link (and
/// without blocking on a FIFO swapped in), with its metadata.
pub(super) fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok((file, meta))
}

/// Regular files and links under `dir`, relative to the top; `.git` and
/// anything else (sockets, devices) left out.
fn walk(top: &Path, rel: PathBuf, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(top.join(&rel))? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if entry.file_name() == ".git" {
            continue;
        }
        let name = rel.join(entry.file_name());
        if kind.is_dir() {
            walk(top, name, out)?;
        } else if kind.is_file() || kind.is_symlink() {
            out.push(name);
        }
        if out.len() > MAX_FILES {
            return Ok(());
        }
    }
    Ok(())
}

/// `.dockerignore` as the engine's client reads it: one pattern a line,
/// `#` comments, `!` to include again; the last pattern that matches a
/// path (or a folder above it) decides.
#[derive(Debug, Default)]
pub(super) struct Patterns(Vec<(bool, String)>);

impl Patterns {
    pub(super) fn parse(text: &str) -> Patterns {
        Patterns(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(|l| match l.strip_prefix('!') {
                    Some(p) => (false, clean(p)),
                    None => (true, clean(l)),
                })
                .filter(|(_, p)| !p.is_empty())
                .collect(),
        )
    }

    pub(super) fn excludes(&self, path: &str) -> bool {
        let mut excluded = false;
        for (exclude, pattern) in &self.0 {
            // A pattern names a path or any folder above it.
            let mut prefix = String::new();
            let hit = path.split('/').any(|part| {
                if !prefix.is_empty() {
                    prefix.push('/');
                }
                prefix.push_str(part);
                glob_match::glob_match(pattern, &prefix)
            });
            if hit {
                excluded = *exclude;
            }
        }
        excluded
    }
}

fn clean(p: &str) -> String {
    p.trim()
        .trim_start_matches("./")
        .trim_start_matches('/')
        .trim_end_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dockerignore_excludes_paths_and_folders_and_includes_again() {
        let p =
            Patterns::parse("# comment\nnode_modules\n*.log\n!keep.log\n/secrets/\ndocs/**/*.md\n");
        for (path, out) in [
            ("node_modules/a/b.js", true),
            ("app.log", true),
            ("keep.log", false),
            ("secrets/key", true),
            ("docs/a/b.md", true),
            ("docs/readme.txt", false),
            ("src/main.rs", false),
        ] {
            assert_eq!(p.excludes(path), out, "{path}");
        }
    }

    #[test]
    fn the_hash_names_the_files_not_when_they_were_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Dockerfile"), "FROM scratch\n").unwrap();
        std::fs::write(dir.path().join("app.txt"), "one\n").unwrap();
        std::fs::write(dir.path().join("debug.log"), "noise\n").unwrap();
        std::fs::write(dir.path().join(".dockerignore"), "*.log\n").unwrap();
        let a = snapshot(dir.path(), "Dockerfile", 1 << 20).unwrap();
        assert_eq!(a.files, 3, "Dockerfile, .dockerignore, app.txt");
        assert_eq!(a.hash.len(), 64);
        std::fs::write(dir.path().join("debug.log"), "more noise\n").unwrap();
        std::fs::write(dir.path().join("app.txt"), "one\n").unwrap();
        assert_eq!(
            snapshot(dir.path(), "Dockerfile", 1 << 20).unwrap().hash,
            a.hash
        );
        std::fs::write(dir.path().join("app.txt"), "two\n").unwrap();
        assert_ne!(
            snapshot(dir.path(), "Dockerfile", 1 << 20).unwrap().hash,
            a.hash
        );
        assert!(matches!(
            snapshot(dir.path(), "deploy/Dockerfile", 1 << 20),
            Err(GitError::NoDockerfile(_))
        ));
        assert!(matches!(
            snapshot(dir.path(), "Dockerfile", 10),
            Err(GitError::TooLarge { .. })
        ));
        assert!(!is_checkout(dir.path()));
    }
}
