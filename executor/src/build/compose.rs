//! A compose service's build context as its compose files name it: the
//! way a container of a service with `build:` finds its entry of
//! `build.contexts` by the context's path, without the operator listing
//! the service.
//!
//! Compose writes the project's folder and its files into every
//! container's labels; the files are read again here (bounded, each at
//! most [`MAX_COMPOSE_BYTES`]), the service's `build` (a path, or a
//! mapping with `context`) taken from the last file that sets it, as
//! compose merges them, and resolved against the project's folder. A
//! context that names a variable, a URL or a git repository names no
//! folder here.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

/// The labels compose puts on a container of a project.
const WORKING_DIR_LABEL: &str = "com.docker.compose.project.working_dir";
const CONFIG_FILES_LABEL: &str = "com.docker.compose.project.config_files";
const SERVICE_LABEL: &str = "com.docker.compose.service";
/// The largest compose file read.
pub const MAX_COMPOSE_BYTES: u64 = 1 << 20;

/// The folder a container's compose service builds from, as it is on
/// this host (links resolved); `None` when the labels, the files or the
/// service say none.
pub fn build_context(labels: &BTreeMap<String, String>) -> Option<PathBuf> {
    let dir = Path::new(labels.get(WORKING_DIR_LABEL)?);
    let service = labels.get(SERVICE_LABEL)?;
    if !dir.is_absolute() {
        return None;
    }
    // Every file must be read and understood: one skipped could be the
    // one whose `build:` compose uses.
    let mut context = None;
    for file in labels.get(CONFIG_FILES_LABEL)?.split(',') {
        let file = file.trim();
        if file.is_empty() {
            continue;
        }
        let text = read_bounded(&dir.join(file))?;
        if let Some(c) = service_context(&text, service)? {
            context = Some(c);
        }
    }
    let context = context?;
    let context = Path::new(&context);
    std::fs::canonicalize(dir.join(context)).ok()
}

/// A regular file's text (no link, FIFO or device), when it is at most
/// [`MAX_COMPOSE_BYTES`].
fn read_bounded(path: &Path) -> Option<String> {
    let (file, _) = super::folder::open_regular(path).ok()?;
    let mut text = String::new();
    file.take(MAX_COMPOSE_BYTES + 1)
        .read_to_string(&mut text)
        .ok()?;
    (text.len() as u64 <= MAX_COMPOSE_BYTES).then_some(text)
}

/// What a compose file says of its services' builds; the rest of it is
/// skipped unread (typed, not a YAML `Value`: that parser cost the
/// executor's image 330 KB).
#[derive(serde::Deserialize)]
struct ComposeFile {
    #[serde(default)]
    services: BTreeMap<String, Option<Service>>,
}

#[derive(serde::Deserialize)]
struct Service {
    #[serde(default)]
    build: Option<Build>,
}

/// `build: PATH`, or `build: {context: PATH, ...}`.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum Build {
    Path(String),
    Spec {
        #[serde(default)]
        context: Option<String>,
    },
}

/// The build context one compose file gives `service`: `build: PATH`, or
/// `build: {context: PATH}` (`.` when a mapping names none); `Some(None)`
/// when the file sets none, `None` when it cannot be read as a compose
/// file or names a context that is no folder here.
// Not inlined: inlining the YAML parser here once took the executor's
// image 315 KB past its size.
#[inline(never)]
fn service_context(text: &str, service: &str) -> Option<Option<String>> {
    let mut file: ComposeFile = serde_yaml_ng::from_str(text).ok()?;
    let Some(build) = file
        .services
        .remove(service)
        .flatten()
        .and_then(|s| s.build)
    else {
        return Some(None);
    };
    let context = match build {
        Build::Path(p) => p,
        Build::Spec { context } => context.unwrap_or_else(|| ".".into()),
    };
    let remote = context.contains("://") || context.starts_with("git@");
    (!context.is_empty() && !context.contains('$') && !remote).then_some(Some(context))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_context_is_read_as_compose_writes_it() {
        let file = "services:\n  api:\n    build: ./api\n  web:\n    build:\n      context: /srv/web\n      dockerfile: deploy/Dockerfile\n  dot:\n    build: {dockerfile: D}\n  db:\n    image: postgres\n  env:\n    build: ${SRC}/x\n  remote:\n    build: https://example.com/r.git\n";
        let of = |s: &str| service_context(file, s);
        assert_eq!(of("api"), Some(Some("./api".into())));
        assert_eq!(of("web"), Some(Some("/srv/web".into())));
        assert_eq!(of("dot"), Some(Some(".".into())));
        for unset in ["db", "missing"] {
            assert_eq!(of(unset), Some(None), "{unset}");
        }
        for no_folder in ["env", "remote"] {
            assert_eq!(of(no_folder), None, "{no_folder}");
        }
        assert_eq!(service_context("not: [yaml", "api"), None);
    }

    #[test]
    fn the_last_file_that_sets_it_wins_and_the_path_is_the_hosts() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("api")).expect("api");
        std::fs::create_dir(dir.path().join("api2")).expect("api2");
        std::fs::write(
            dir.path().join("a.yml"),
            "services:\n  api:\n    build: ./api\n",
        )
        .expect("a");
        std::fs::write(
            dir.path().join("b.yml"),
            "services:\n  api:\n    build: {context: api2}\n",
        )
        .expect("b");
        std::fs::write(
            dir.path().join("c.yml"),
            "services:\n  api:\n    ports: []\n",
        )
        .expect("c");
        let labels = |files: &str| {
            BTreeMap::from([
                (
                    WORKING_DIR_LABEL.to_string(),
                    dir.path().display().to_string(),
                ),
                (CONFIG_FILES_LABEL.to_string(), files.to_string()),
                (SERVICE_LABEL.to_string(), "api".to_string()),
            ])
        };
        let real = |p: &str| std::fs::canonicalize(dir.path().join(p)).ok();
        assert_eq!(build_context(&labels("a.yml")), real("api"));
        assert_eq!(build_context(&labels("a.yml,b.yml,c.yml")), real("api2"));
        assert_eq!(
            build_context(&labels(&dir.path().join("a.yml").display().to_string())),
            real("api"),
            "compose v2 writes absolute paths"
        );
        assert_eq!(build_context(&labels("c.yml")), None);
        assert_eq!(
            build_context(&labels("a.yml,missing.yml")),
            None,
            "a file that cannot be read could be the one that counts"
        );
        std::fs::write(dir.path().join("bad.yml"), "services: [").expect("bad");
        assert_eq!(build_context(&labels("a.yml,bad.yml")), None);
        std::os::unix::fs::symlink(dir.path().join("a.yml"), dir.path().join("link.yml"))
            .expect("link");
        assert_eq!(
            build_context(&labels("link.yml")),
            None,
            "no link is followed"
        );
        let mut relative = labels("a.yml");
        relative.insert(WORKING_DIR_LABEL.into(), "srv".into());
        assert_eq!(build_context(&relative), None);
        std::fs::write(
            dir.path().join("big.yml"),
            vec![b'#'; MAX_COMPOSE_BYTES as usize + 1],
        )
        .expect("big");
        assert_eq!(build_context(&labels("big.yml")), None);
    }
}
