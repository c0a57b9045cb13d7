use super::*;
use std::process::Command;

/// A repository with two commits, as a person would make it.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let repo = Repo {
            dir: tempfile::tempdir().expect("temp dir"),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .arg("-C")
            .arg(self.dir.path())
            .args(["-c", "user.name=Ann", "-c", "user.email=ann@example.com"])
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn write(&self, path: &str, text: &str) {
        let p = self.dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn commit(&self, subject: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", subject]);
        self.git(&["rev-parse", "HEAD"])
    }

    fn checkout(&self) -> Checkout {
        Checkout::new(self.dir.path())
    }
}

fn extract(tar: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("context.tar");
    std::fs::write(&file, tar).unwrap();
    let out = Command::new("tar")
        .arg("-xf")
        .arg(&file)
        .arg("-C")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::remove_file(&file).unwrap();
    dir
}

#[tokio::test]
async fn a_revision_names_a_commit_with_its_tree_and_author() {
    let repo = Repo::new();
    repo.write("Dockerfile", "FROM scratch\n");
    let first = repo.commit("first");
    repo.write("app.txt", "v2\n");
    let second = repo.commit("second: the app");
    repo.git(&["tag", "v2"]);
    let c = repo.checkout();
    assert_eq!(c.resolve("").await.unwrap().as_str(), second);
    assert_eq!(c.resolve("v2").await.unwrap().as_str(), second);
    assert_eq!(c.resolve(&first[..9]).await.unwrap().as_str(), first);
    assert_eq!(c.resolve("main").await.unwrap().as_str(), second);
    let commit = c.commit(&c.resolve("v2").await.unwrap()).await.unwrap();
    assert_eq!(commit.tree, repo.git(&["rev-parse", "HEAD^{tree}"]));
    assert_eq!(commit.subject, "second: the app");
    assert_eq!(commit.author, "Ann <ann@example.com>");
    assert!(commit.time > 1_600_000_000);
    for bad in ["--output=/tmp/x", "HEAD@{1}", "a..b", "x y", ""] {
        if bad.is_empty() {
            continue;
        }
        assert!(
            matches!(c.resolve(bad).await, Err(GitError::BadRevision(_))),
            "{bad}"
        );
    }
    assert!(matches!(
        c.resolve("nosuchbranch").await,
        Err(GitError::UnknownRevision { .. })
    ));
    let (changed, more) = c
        .changed_files(
            &CommitId::parse(&first).unwrap(),
            &CommitId::parse(&second).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!((changed, more), (vec!["app.txt".to_string()], 0));
}

/// The archive holds the commit's files, not the checkout's, and no
/// filter the repository names runs.
#[tokio::test]
async fn the_archive_is_the_commits_files_raw() {
    let repo = Repo::new();
    let marker = repo.dir.path().join("filter-ran");
    repo.write("Dockerfile", "FROM scratch\nCOPY app.txt /\n");
    repo.write("app.txt", "committed\n");
    repo.write("bin/run", "#!/bin/sh\n");
    repo.write(".gitattributes", "* filter=evil\n");
    let first = repo.commit("first");
    repo.git(&[
        "config",
        "filter.evil.smudge",
        &format!("touch {} && cat", marker.display()),
    ]);
    repo.git(&[
        "config",
        "filter.evil.clean",
        &format!("touch {} && cat", marker.display()),
    ]);
    repo.write("app.txt", "dirty in the checkout\n");
    let c = repo.checkout();
    let commit = c.commit(&CommitId::parse(&first).unwrap()).await.unwrap();
    let (tar, text) = c.archive(&commit, "Dockerfile", 1 << 20).await.unwrap();
    assert_eq!(text, "FROM scratch\nCOPY app.txt /\n");
    let out = extract(&tar);
    assert_eq!(
        std::fs::read_to_string(out.path().join("app.txt")).unwrap(),
        "committed\n"
    );
    assert!(out.path().join("bin/run").is_file());
    assert!(c.dirty().await.unwrap(), "a changed tracked file is dirty");
    assert!(!marker.exists(), "a filter of the repository ran");
    assert_eq!(
        std::fs::read_to_string(repo.dir.path().join("app.txt")).unwrap(),
        "dirty in the checkout\n",
        "the checkout is untouched"
    );
    assert_eq!(
        c.archive(&commit, "deploy/Dockerfile", 1 << 20).await,
        Err(GitError::NoDockerfile("deploy/Dockerfile".into()))
    );
    assert_eq!(
        c.archive(&commit, "Dockerfile", 10).await,
        Err(GitError::TooLarge { max: 10 })
    );
}

#[tokio::test]
async fn a_checkout_is_clean_until_a_tracked_file_changes() {
    let repo = Repo::new();
    repo.write("Dockerfile", "FROM scratch\n");
    repo.commit("first");
    let c = repo.checkout();
    assert!(!c.dirty().await.unwrap());
    repo.write("untracked.txt", "new\n");
    assert!(
        !c.dirty().await.unwrap(),
        "an untracked file is not the commit's"
    );
    repo.write("Dockerfile", "FROM scratch\nLABEL x=y\n");
    assert!(c.dirty().await.unwrap());
    repo.git(&["add", "Dockerfile"]);
    assert!(c.dirty().await.unwrap(), "staged is dirty too");
    repo.git(&["checkout", "-q", "--", "."]);
    repo.git(&["reset", "-q", "--hard"]);
    std::fs::remove_file(repo.dir.path().join("Dockerfile")).unwrap();
    assert!(c.dirty().await.unwrap(), "a deleted file is dirty");
}

/// git does not hash an object again when it reads it; the archive does:
/// a file's content changed under its id in the object store is refused.
#[tokio::test]
async fn an_object_changed_under_its_id_is_refused() {
    let repo = Repo::new();
    repo.write("Dockerfile", "FROM scratch\n");
    repo.write("app.txt", "signed\n");
    let first = repo.commit("first");
    let blob = repo.git(&["rev-parse", "HEAD:app.txt"]);
    // Another content's object, stored under the signed blob's name.
    std::fs::write(repo.dir.path().join("other.txt"), "swapped\n").unwrap();
    let other = repo.git(&["hash-object", "-w", "other.txt"]);
    let objects = repo.dir.path().join(".git/objects");
    let at = |id: &str| objects.join(&id[..2]).join(&id[2..]);
    let swapped = std::fs::read(at(&other)).unwrap();
    let mut perms = std::fs::metadata(at(&blob)).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(at(&blob), perms).unwrap();
    std::fs::write(at(&blob), swapped).unwrap();
    let c = repo.checkout();
    let commit = c.commit(&CommitId::parse(&first).unwrap()).await.unwrap();
    let e = c.archive(&commit, "Dockerfile", 1 << 20).await.unwrap_err();
    assert!(e.to_string().contains("does not hash to its id"), "{e}");
}

/// A Dockerfile that is a link is not read: what it names is not what the
/// executor checks.
#[tokio::test]
async fn a_dockerfile_that_is_a_link_is_refused() {
    let repo = Repo::new();
    repo.write("real.Dockerfile", "FROM evil.example/x\n");
    std::os::unix::fs::symlink("real.Dockerfile", repo.dir.path().join("Dockerfile")).unwrap();
    let first = repo.commit("a link");
    let c = repo.checkout();
    let commit = c.commit(&CommitId::parse(&first).unwrap()).await.unwrap();
    assert_eq!(
        c.archive(&commit, "Dockerfile", 1 << 20).await,
        Err(GitError::NoDockerfile("Dockerfile".into()))
    );
    // What .dockerignore excludes stays out; the Dockerfile never does.
    repo.write("Dockerfile2", "FROM scratch\n");
    repo.write(".dockerignore", "*.log\nDockerfile2\n");
    repo.write("debug.log", "noise\n");
    let second = repo.commit("ignore logs");
    let commit = c.commit(&CommitId::parse(&second).unwrap()).await.unwrap();
    let out = extract(&c.archive(&commit, "Dockerfile2", 1 << 20).await.unwrap().0);
    assert!(out.path().join("Dockerfile2").is_file());
    assert!(!out.path().join("debug.log").exists());
}

/// A name with a control character is a name like any other; one that is
/// not UTF-8 cannot be carried, and counts as a change of the checkout.
#[tokio::test]
async fn odd_file_names_are_carried_or_refused_by_name() {
    use std::os::unix::ffi::OsStrExt as _;
    let repo = Repo::new();
    repo.write("Dockerfile", "FROM scratch\n");
    repo.write("Icon\r", "");
    let first = repo.commit("an icon");
    let c = repo.checkout();
    let commit = c.commit(&CommitId::parse(&first).unwrap()).await.unwrap();
    let (tar, _) = c.archive(&commit, "Dockerfile", 1 << 20).await.unwrap();
    assert!(extract(&tar).path().join("Icon\r").exists());
    assert!(!c.dirty().await.unwrap());
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(repo.dir.path().join(odd), "latin-1\n").unwrap();
    let second = repo.commit("a latin-1 name");
    let commit = c.commit(&CommitId::parse(&second).unwrap()).await.unwrap();
    assert!(matches!(
        c.archive(&commit, "Dockerfile", 1 << 20).await,
        Err(GitError::NotUtf8(_))
    ));
    assert!(c.dirty().await.unwrap(), "not hashed: counted as changed");
}
