//! A context's source, whichever kind it is: a git checkout (a commit of
//! it, read from the object store) or a plain folder (its files as they
//! are, named by the sha256 of the tar they make).

use drydock_proto::approval::CommitId;

use super::folder::{self, Snapshot};
use super::git::{Checkout, Commit, GitError};
use super::ContextConfig;

/// Where the files come from.
enum Reader {
    Git(Checkout),
    Folder(Snapshot),
}

/// A context and the commit a revision names in it.
pub struct Source {
    reader: Reader,
    pub commit: Commit,
}

impl Source {
    /// The source `revision` names in `context` (HEAD, or the folder as it
    /// is, when empty). A folder has no revisions: only its files' hash
    /// names it, and another hash means they changed.
    pub async fn open(
        context: &ContextConfig,
        revision: &str,
        max: u64,
    ) -> Result<Source, GitError> {
        if folder::is_checkout(&context.path) {
            let checkout = Checkout::new(&context.path);
            let id = checkout.resolve(revision).await?;
            let commit = checkout.commit(&id).await?;
            return Ok(Source {
                reader: Reader::Git(checkout),
                commit,
            });
        }
        let (path, dockerfile) = (context.path.clone(), context.dockerfile.clone());
        let snapshot =
            tokio::task::spawn_blocking(move || folder::snapshot(&path, &dockerfile, max))
                .await
                .map_err(|e| GitError::Failed {
                    what: "read",
                    checkout: context.path.display().to_string(),
                    message: e.to_string(),
                })??;
        let unknown = || {
            GitError::UnknownRevision {
            revision: revision.to_string(),
            checkout: format!(
                "{} (a folder, not a git checkout: it has no revisions, only its files as they are, named by their sha256)",
                context.path.display()
            ),
        }
        };
        if !revision.is_empty() && !snapshot.hash.starts_with(revision) {
            return Err(unknown());
        }
        let id = CommitId::parse(&snapshot.hash).ok_or_else(unknown)?;
        let commit = Commit {
            id,
            tree: snapshot.hash.clone(),
            subject: format!(
                "the {} files of {} as they are",
                snapshot.files,
                context.path.display()
            ),
            author: String::new(),
            date: String::new(),
            time: 0,
        };
        Ok(Source {
            reader: Reader::Folder(snapshot),
            commit,
        })
    }

    /// Whether the source is a plain folder (no commits to compare).
    pub fn is_folder(&self) -> bool {
        matches!(self.reader, Reader::Folder(_))
    }

    /// The checkout's HEAD (a folder's: its files' hash).
    pub async fn head(&self) -> Option<CommitId> {
        match &self.reader {
            Reader::Git(c) => c.resolve("").await.ok(),
            Reader::Folder(_) => Some(self.commit.id.clone()),
        }
    }

    /// Whether the checkout's tracked files differ from its HEAD (a
    /// folder is what it is).
    pub async fn dirty(&self) -> Result<bool, GitError> {
        match &self.reader {
            Reader::Git(c) => c.dirty().await,
            Reader::Folder(_) => Ok(false),
        }
    }

    /// The commit a revision label names in the checkout, if it has it.
    pub async fn resolve(&self, revision: &str) -> Option<CommitId> {
        match &self.reader {
            Reader::Git(c) => c.resolve(revision).await.ok(),
            Reader::Folder(_) => None,
        }
    }

    /// The files changed from `from` to the source's commit.
    pub async fn changed_files(&self, from: &CommitId) -> (Vec<String>, usize) {
        match &self.reader {
            Reader::Git(c) => c
                .changed_files(from, &self.commit.id)
                .await
                .unwrap_or_default(),
            Reader::Folder(_) => (Vec::new(), 0),
        }
    }

    /// The context tar and the Dockerfile's text.
    pub async fn files(self, dockerfile: &str, max: u64) -> Result<(Vec<u8>, String), GitError> {
        match self.reader {
            Reader::Git(c) => c.archive(&self.commit, dockerfile, max).await,
            Reader::Folder(s) => Ok((s.tar, s.dockerfile)),
        }
    }
}
