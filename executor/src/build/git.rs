//! The git reads a build needs, through the `git` program, in a checkout
//! the operator named, as plumbing commands that run nothing of the
//! repository's own: no hooks, no filters (a commit's files are copied
//! out of the object store raw, as `cat-file` gives them, never through a
//! smudge or clean filter a repository's config or attributes could name),
//! no fsmonitor, no pager, no user or system config. Nothing is written to
//! the checkout or its repository.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::tar::{Kind, TarWriter};
pub use drydock_proto::approval::is_revision;
use drydock_proto::approval::{is_commit_id, CommitId};

/// How long one git command may run.
const GIT_TIMEOUT: Duration = Duration::from_secs(60);
/// The most a metadata command's output may be (a listing of files).
const MAX_LISTING: usize = 64 << 20;
/// The most changed files named.
pub const MAX_CHANGED: usize = 50;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GitError {
    #[error("the git program could not be run ({0}); builds from a checkout need git on the executor's PATH")]
    NoGit(String),
    #[error("`{revision}` names no commit in {checkout}")]
    UnknownRevision { revision: String, checkout: String },
    #[error("`{0}` is not a revision drydock reads: a commit id, a branch or a tag of letters, digits, `.`, `_`, `-` and `/`")]
    BadRevision(String),
    #[error("git {what} in {checkout} failed: {message}")]
    Failed {
        what: &'static str,
        checkout: String,
        message: String,
    },
    #[error("git {what} in {checkout} took longer than {}s", GIT_TIMEOUT.as_secs())]
    Timeout {
        what: &'static str,
        checkout: String,
    },
    #[error("the commit's files are more than build.max_context_bytes ({max} bytes)")]
    TooLarge { max: u64 },
    #[error(
        "the commit has a submodule at `{0}`, whose files a build from the commit cannot include"
    )]
    Submodule(String),
    #[error("the commit has no `{0}`")]
    NoDockerfile(String),
    #[error("a file name in {0} is not UTF-8, which a build context cannot carry")]
    NotUtf8(String),
}

/// A commit as a build's approval shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    pub id: CommitId,
    pub tree: String,
    pub subject: String,
    pub author: String,
    /// RFC 3339, and Unix seconds (the context's file times).
    pub date: String,
    pub time: u64,
}

/// One checkout.
#[derive(Debug, Clone)]
pub struct Checkout {
    path: PathBuf,
}

impl Checkout {
    pub fn new(path: &Path) -> Checkout {
        Checkout {
            path: path.to_path_buf(),
        }
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    /// Run `git args` with `input` on its stdin; its stdout, at most `max`
    /// bytes (more is an error).
    async fn run(
        &self,
        what: &'static str,
        args: &[&str],
        input: Option<Vec<u8>>,
        max: usize,
    ) -> Result<Vec<u8>, GitError> {
        let dir = self.path.to_string_lossy().to_string();
        let mut cmd = tokio::process::Command::new("git");
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", "/nonexistent")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_OPTIONAL_LOCKS", "0")
            // Never a fetch: a partial clone's missing object is an
            // error, not a transport the repository's config names.
            .env("GIT_NO_LAZY_FETCH", "1")
            .env("GIT_PROTOCOL_FROM_USER", "0")
            .env("LC_ALL", "C")
            .arg("-C")
            .arg(&self.path)
            .args([
                "-c",
                "core.fsmonitor=false",
                "-c",
                &format!("safe.directory={dir}"),
                "-c",
                "core.attributesFile=/dev/null",
                "-c",
                "protocol.allow=never",
                // A repository's own `protocol.<name>.allow` would win
                // over the default above; these win over it.
                "-c",
                "protocol.ext.allow=never",
                "-c",
                "protocol.file.allow=never",
                "-c",
                "protocol.ssh.allow=never",
                "-c",
                "protocol.git.allow=never",
                "-c",
                "protocol.http.allow=never",
                "-c",
                "protocol.https.allow=never",
                "--no-pager",
            ])
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| GitError::NoGit(e.to_string()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let work = async {
            let feed = async {
                if let (Some(mut w), Some(bytes)) = (stdin, input) {
                    // A git that exits early closes its end: its status says why.
                    let _ = w.write_all(&bytes).await;
                }
            };
            // Dropped at its limit: git then stops on a closed pipe
            // instead of waiting for a reader.
            let read = async move {
                let mut out = Vec::new();
                if let Some(r) = stdout {
                    let mut limited = r.take(max as u64 + 1);
                    let _ = limited.read_to_end(&mut out).await;
                }
                out
            };
            let errors = async {
                let mut err = Vec::new();
                if let Some(r) = stderr.as_mut() {
                    let _ = r.take(4096).read_to_end(&mut err).await;
                }
                err
            };
            let ((), out, err) = tokio::join!(feed, read, errors);
            (out, err)
        };
        let (out, err) =
            tokio::time::timeout(GIT_TIMEOUT, work)
                .await
                .map_err(|_| GitError::Timeout {
                    what,
                    checkout: self.shown(),
                })?;
        if out.len() > max {
            return Err(GitError::TooLarge { max: max as u64 });
        }
        let status = tokio::time::timeout(GIT_TIMEOUT, child.wait())
            .await
            .map_err(|_| GitError::Timeout {
                what,
                checkout: self.shown(),
            })?
            .map_err(|e| GitError::NoGit(e.to_string()))?;
        if !status.success() {
            let message = String::from_utf8_lossy(&err)
                .lines()
                .next()
                .unwrap_or("no message")
                .chars()
                .filter(|c| !c.is_control())
                .take(300)
                .collect();
            return Err(GitError::Failed {
                what,
                checkout: self.shown(),
                message,
            });
        }
        Ok(out)
    }

    /// The commit `revision` names (HEAD when empty).
    pub async fn resolve(&self, revision: &str) -> Result<CommitId, GitError> {
        let revision = if revision.is_empty() {
            "HEAD"
        } else {
            revision
        };
        if !is_revision(revision) {
            return Err(GitError::BadRevision(
                revision
                    .chars()
                    .take(80)
                    .filter(|c| !c.is_control())
                    .collect(),
            ));
        }
        let spec = format!("{revision}^{{commit}}");
        let out = self
            .run(
                "rev-parse",
                &[
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    "--end-of-options",
                    &spec,
                ],
                None,
                4096,
            )
            .await;
        let unknown = || GitError::UnknownRevision {
            revision: revision.to_string(),
            checkout: self.shown(),
        };
        match out {
            Ok(o) => CommitId::parse(String::from_utf8_lossy(&o).trim()).ok_or_else(unknown),
            Err(GitError::Failed { .. }) => Err(unknown()),
            Err(e) => Err(e),
        }
    }

    /// A commit's tree, subject, author and date.
    pub async fn commit(&self, id: &CommitId) -> Result<Commit, GitError> {
        let out = self
            .run(
                "log",
                &[
                    "log",
                    "-1",
                    "--no-show-signature",
                    "--no-decorate",
                    "--format=%T%x00%s%x00%an <%ae>%x00%cI%x00%ct",
                    id.as_str(),
                    "--",
                ],
                None,
                16 << 10,
            )
            .await?;
        let text = String::from_utf8_lossy(&out);
        let parts: Vec<&str> = text.trim_end_matches('\n').split('\0').collect();
        if parts.len() != 5 {
            return Err(GitError::Failed {
                what: "log",
                checkout: self.shown(),
                message: "its answer is not the five fields asked for (a NUL in the commit?)"
                    .into(),
            });
        }
        let field = |i: usize| parts.get(i).copied().unwrap_or_default();
        let clean = |s: &str, n: usize| -> String {
            s.chars().filter(|c| !c.is_control()).take(n).collect()
        };
        if !is_commit_id(field(0)) {
            return Err(GitError::Failed {
                what: "log",
                checkout: self.shown(),
                message: "no tree id in its answer".into(),
            });
        }
        Ok(Commit {
            id: id.clone(),
            tree: field(0).to_string(),
            subject: clean(field(1), 200),
            author: clean(field(2), 200),
            date: clean(field(3), 40),
            time: field(4).trim().parse().unwrap_or(0),
        })
    }

    /// The files of a tree-ish: `(mode, type, id, path)`, with the
    /// subtrees too when `trees`. A name that is not UTF-8, or that would
    /// leave the tree, is refused.
    async fn files(
        &self,
        tree_ish: &str,
        trees: bool,
    ) -> Result<Vec<(String, String, String, String)>, GitError> {
        let mut args = vec!["ls-tree", "-r", "-z", "--full-tree"];
        if trees {
            args.push("-t");
        }
        args.push(tree_ish);
        let out = self.run("ls-tree", &args, None, MAX_LISTING).await?;
        let mut files = Vec::new();
        for e in out.split(|&b| b == 0).filter(|e| !e.is_empty()) {
            let e = std::str::from_utf8(e).map_err(|_| GitError::NotUtf8(self.shown()))?;
            let (meta, path) = e
                .split_once('\t')
                .ok_or_else(|| self.broken("ls-tree answered an entry without a name"))?;
            let inside = !path.starts_with('/')
                && path
                    .split('/')
                    .all(|p| !p.is_empty() && p != "." && p != "..");
            if !inside {
                return Err(self.broken("a file name in the tree leaves it"));
            }
            let m: Vec<&str> = meta.split(' ').collect();
            let [mode, kind, id] = m[..] else {
                return Err(self.broken("ls-tree answered an entry it did not describe"));
            };
            files.push((mode.into(), kind.into(), id.into(), path.into()));
        }
        Ok(files)
    }

    /// Objects by id and kind, read raw from the object store in one
    /// `cat-file --batch`, each hashed again against its id (git does not
    /// when it reads one); at most `max` bytes in all.
    async fn objects(&self, wanted: &[(&str, &str)], max: u64) -> Result<Vec<Vec<u8>>, GitError> {
        let mut input = String::new();
        for (id, _) in wanted {
            input.push_str(id);
            input.push('\n');
        }
        let limit = usize::try_from(max)
            .unwrap_or(usize::MAX)
            .saturating_add(wanted.len() * 200);
        let out = self
            .run(
                "cat-file",
                &["cat-file", "--batch"],
                Some(input.into_bytes()),
                limit,
            )
            .await
            .map_err(|e| match e {
                GitError::TooLarge { .. } => GitError::TooLarge { max },
                other => other,
            })?;
        let mut rest = &out[..];
        let mut bodies = Vec::with_capacity(wanted.len());
        for (id, kind) in wanted {
            let nl = rest
                .iter()
                .position(|&b| b == b'\n')
                .ok_or_else(|| self.broken("cat-file answered short"))?;
            let head = String::from_utf8_lossy(&rest[..nl]).to_string();
            let size: usize = match head.split(' ').collect::<Vec<_>>()[..] {
                [got, k, size] if got == *id && k == *kind => {
                    size.parse().map_err(|_| self.broken(&head))?
                }
                _ => return Err(self.broken(&head)),
            };
            let body = rest
                .get(nl + 1..nl + 1 + size)
                .ok_or_else(|| self.broken("cat-file answered short"))?;
            if object_id(kind, body, id.len()) != *id {
                return Err(self.broken(&format!(
                    "object {id} does not hash to its id: the repository is corrupt or was changed under it"
                )));
            }
            rest = rest.get(nl + 2 + size..).unwrap_or_default();
            bodies.push(body.to_vec());
        }
        Ok(bodies)
    }

    /// The commit's files as a tar, and the Dockerfile's text from it:
    /// every object checked against its id (`objects`: the tree, its
    /// subtrees and `.dockerignore` first, then the files kept); what the
    /// commit's `.dockerignore` excludes left out (never the Dockerfile)
    /// and not read; at most `max` bytes of files. Refused when
    /// `dockerfile` is not a file of it (a link is not) or it has a
    /// submodule.
    pub async fn archive(
        &self,
        commit: &Commit,
        dockerfile: &str,
        max: u64,
    ) -> Result<(Vec<u8>, String), GitError> {
        let files = self.files(&commit.tree, true).await?;
        if let Some((_, _, _, path)) = files.iter().find(|(_, kind, _, _)| kind == "commit") {
            return Err(GitError::Submodule(path.chars().take(200).collect()));
        }
        let is_file = |mode: &str| mode == "100644" || mode == "100755";
        if !files
            .iter()
            .any(|(mode, kind, _, p)| kind == "blob" && is_file(mode) && p == dockerfile)
        {
            return Err(GitError::NoDockerfile(dockerfile.to_string()));
        }
        let ignore_file = files
            .iter()
            .find(|(mode, kind, _, p)| kind == "blob" && is_file(mode) && p == ".dockerignore");
        let mut structure: Vec<(&str, &str)> = vec![(commit.tree.as_str(), "tree")];
        structure.extend(
            files
                .iter()
                .filter(|(_, kind, _, _)| kind == "tree")
                .map(|(_, _, id, _)| (id.as_str(), "tree")),
        );
        structure.extend(ignore_file.map(|(_, _, id, _)| (id.as_str(), "blob")));
        let read = self.objects(&structure, MAX_LISTING as u64).await?;
        let ignore = match (ignore_file, read.last()) {
            (Some(_), Some(body)) => super::folder::Patterns::parse(&String::from_utf8_lossy(body)),
            _ => super::folder::Patterns::default(),
        };
        let kept: Vec<&(String, String, String, String)> = files
            .iter()
            .filter(|(_, kind, _, path)| {
                kind == "blob" && (path == dockerfile || !ignore.excludes(path))
            })
            .collect();
        let wanted: Vec<(&str, &str)> = kept
            .iter()
            .map(|(_, _, id, _)| (id.as_str(), "blob"))
            .collect();
        let bodies = self.objects(&wanted, max).await?;
        let mut tar = TarWriter::new();
        let mut text = String::new();
        for ((mode, _, _, path), body) in kept.iter().zip(&bodies) {
            let kind = match mode.as_str() {
                "120000" => Kind::Symlink,
                "100755" => Kind::File { executable: true },
                _ => Kind::File { executable: false },
            };
            if path == dockerfile {
                text = String::from_utf8_lossy(body).to_string();
            }
            tar.append(path, kind, body, commit.time);
            if tar.len() as u64 > max {
                return Err(GitError::TooLarge { max });
            }
        }
        Ok((tar.finish(), text))
    }

    fn broken(&self, what: &str) -> GitError {
        GitError::Failed {
            what: "cat-file",
            checkout: self.shown(),
            message: what.chars().take(120).collect(),
        }
    }

    /// Whether the checkout's tracked files differ from its HEAD commit,
    /// staged or not: each file hashed raw (no filter) by the executor, as
    /// the commit holds it. A symbolic link is compared by its target.
    pub async fn dirty(&self) -> Result<bool, GitError> {
        let listed = match self.files("HEAD", false).await {
            // Not hashed here: the checkout counts as changed.
            Err(GitError::NotUtf8(_)) => return Ok(true),
            other => other?,
        };
        let head: BTreeMap<String, (String, String)> = listed
            .into_iter()
            .map(|(mode, _, id, path)| (path, (mode, id)))
            .collect();
        let index = self
            .run("ls-files", &["ls-files", "-s", "-z"], None, MAX_LISTING)
            .await?;
        let mut staged = BTreeMap::new();
        for e in index.split(|&b| b == 0).filter(|e| !e.is_empty()) {
            let e = String::from_utf8_lossy(e);
            let Some((meta, path)) = e.split_once('\t') else {
                continue;
            };
            let m: Vec<&str> = meta.split(' ').collect();
            if let [mode, id, _stage] = m[..] {
                staged.insert(path.to_string(), (mode.to_string(), id.to_string()));
            }
        }
        if staged != head {
            return Ok(true);
        }
        // Each tracked file hashed here as git would store it (raw, no
        // filter): a link by its target, a file by its content, read in
        // pieces, never through a link.
        let top = self.path.clone();
        let changed = tokio::task::spawn_blocking(move || {
            head.iter().any(|(path, (mode, id))| {
                let full = top.join(path);
                match mode.as_str() {
                    "120000" => std::fs::read_link(&full).map_or(true, |t| {
                        object_id("blob", t.as_os_str().as_encoded_bytes(), id.len()) != *id
                    }),
                    m if m.starts_with("100") => {
                        file_object_id(&full, id.len()).map_or(true, |got| got != *id)
                    }
                    _ => false,
                }
            })
        })
        .await
        .map_err(|e| self.broken(&e.to_string()))?;
        Ok(changed)
    }

    /// The files that differ between two commits: at most `MAX_CHANGED`,
    /// and how many more.
    pub async fn changed_files(
        &self,
        from: &CommitId,
        to: &CommitId,
    ) -> Result<(Vec<String>, usize), GitError> {
        let out = self
            .run(
                "diff-tree",
                &[
                    "diff-tree",
                    "-r",
                    "-z",
                    "--name-only",
                    "--no-renames",
                    from.as_str(),
                    to.as_str(),
                    "--",
                ],
                None,
                MAX_LISTING,
            )
            .await?;
        let all: Vec<String> = out
            .split(|&b| b == 0)
            .filter(|e| !e.is_empty())
            .map(|e| {
                String::from_utf8_lossy(e)
                    .chars()
                    .filter(|c| !c.is_control())
                    .take(200)
                    .collect()
            })
            .collect();
        let more = all.len().saturating_sub(MAX_CHANGED);
        Ok((all.into_iter().take(MAX_CHANGED).collect(), more))
    }
}

/// The hash of a repository whose ids are `id_len` hex digits: SHA-256
/// for 64, SHA-1 otherwise.
fn hasher(id_len: usize) -> ring::digest::Context {
    ring::digest::Context::new(if id_len == 64 {
        &ring::digest::SHA256
    } else {
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY
    })
}

/// A regular file's blob id, its content streamed into the hash (opened
/// without following a link).
fn file_object_id(path: &Path, id_len: usize) -> std::io::Result<String> {
    use std::io::Read as _;
    let (mut file, meta) = super::folder::open_regular(path)?;
    let mut ctx = hasher(id_len);
    ctx.update(format!("blob {}\0", meta.len()).as_bytes());
    let mut buf = vec![0u8; 64 << 10];
    let mut read = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        read += n as u64;
        ctx.update(&buf[..n]);
    }
    if read != meta.len() {
        return Err(std::io::Error::other("the file changed while it was read"));
    }
    Ok(hex::encode(ctx.finish().as_ref()))
}

/// A git object's id: the hash of its kind, size and content (SHA-1, or
/// SHA-256 in a repository whose ids are 64 digits).
fn object_id(kind: &str, body: &[u8], id_len: usize) -> String {
    let mut ctx = hasher(id_len);
    ctx.update(format!("{kind} {}\0", body.len()).as_bytes());
    ctx.update(body);
    hex::encode(ctx.finish().as_ref())
}

#[cfg(test)]
mod tests;
