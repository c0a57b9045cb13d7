//! Builds (`build:` in executor.yaml): the contexts the executor may build
//! images from, their limits, and which container each builds for.
//!
//! A context is a git checkout the operator names. What a build reads is a
//! commit's tree, copied out of the repository's object store by the
//! executor (`git`), never the checkout's files: what is built is what was
//! signed, and the operator's checkout is never written to.

pub mod compose;
pub mod folder;
pub mod git;
pub mod source;
pub mod tar;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use drydock_daemon::{invalid, ConfigError};
use drydock_proto::approval::is_context_name;

/// How long a build may run unless `build.timeout` says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// The largest context (the commit's files, as a tar) sent to the engine.
pub const DEFAULT_MAX_CONTEXT_BYTES: u64 = 256 << 20;
/// The compose labels that name a container's project and service.
const PROJECT_LABEL: &str = "com.docker.compose.project";
const SERVICE_LABEL: &str = "com.docker.compose.service";

/// `build:`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuildConfig {
    /// The longest a build may run; it is then stopped and what it left
    /// removed.
    #[serde(default = "default_timeout", with = "drydock_daemon::duration")]
    pub timeout: Duration,
    #[serde(default = "default_max_context_bytes")]
    pub max_context_bytes: u64,
    /// The largest image a build may make; a bigger one is removed again
    /// and the build refused.
    #[serde(default = "default_max_image_bytes")]
    pub max_image_bytes: u64,
    /// The network a build's `RUN` steps get: `none` (the default) or
    /// `default` (the engine's bridge). The build itself never pulls.
    #[serde(default)]
    pub network: BuildNetwork,
    /// The registries (hosts of `registries:`) a base image missing from
    /// the engine is pulled from, by digest, before the build; none by
    /// default (a base image must then be on the engine).
    #[serde(default)]
    pub base_registries: Vec<String>,
    #[serde(default)]
    pub contexts: Vec<ContextConfig>,
}

impl Default for BuildConfig {
    fn default() -> Self {
        BuildConfig {
            timeout: DEFAULT_TIMEOUT,
            max_context_bytes: DEFAULT_MAX_CONTEXT_BYTES,
            max_image_bytes: crate::registry::DEFAULT_MAX_IMAGE_BYTES,
            network: BuildNetwork::None,
            base_registries: Vec::new(),
            contexts: Vec::new(),
        }
    }
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

fn default_max_context_bytes() -> u64 {
    DEFAULT_MAX_CONTEXT_BYTES
}

fn default_max_image_bytes() -> u64 {
    crate::registry::DEFAULT_MAX_IMAGE_BYTES
}

/// `build.network`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum BuildNetwork {
    #[default]
    None,
    Default,
}

impl BuildNetwork {
    /// The engine's `networkmode` for the build.
    pub fn mode(self) -> &'static str {
        match self {
            BuildNetwork::None => "none",
            BuildNetwork::Default => "default",
        }
    }
}

/// One entry of `build.contexts`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextConfig {
    /// The name approvals carry, and the repository of its images
    /// (`drydock/<name>:<short commit>`).
    pub name: String,
    /// The checkout's top folder (absolute).
    pub path: PathBuf,
    /// The Dockerfile's path in the commit's tree.
    #[serde(default = "default_dockerfile")]
    pub dockerfile: String,
    /// The compose services it builds for, as `project/service`: a
    /// container of one of them may be rebuilt from this context, and run
    /// its images. Without them, it builds for every compose service whose
    /// compose files name this folder as its build context.
    #[serde(default)]
    pub services: Vec<String>,
}

fn default_dockerfile() -> String {
    "Dockerfile".into()
}

impl BuildConfig {
    /// The context that builds for a container with these labels: the
    /// one naming its compose service, else one naming no service whose
    /// folder the service's compose files name as its build context.
    /// Reads those files: call it off the runtime's threads.
    pub fn context_for(&self, labels: &BTreeMap<String, String>) -> Option<&ContextConfig> {
        let service = compose_service(labels)?;
        if let Some(c) = self.contexts.iter().find(|c| c.services.contains(&service)) {
            return Some(c);
        }
        let folder = compose::build_context(labels)?;
        self.contexts.iter().find(|c| {
            c.services.is_empty() && std::fs::canonicalize(&c.path).is_ok_and(|p| p == folder)
        })
    }
}

/// A container's compose service as `project/service`.
pub fn compose_service(labels: &BTreeMap<String, String>) -> Option<String> {
    Some(format!(
        "{}/{}",
        labels.get(PROJECT_LABEL)?,
        labels.get(SERVICE_LABEL)?
    ))
}

/// A path inside a commit's tree: relative, no `..`, no empty part.
pub fn is_tree_path(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 255
        && !p.starts_with('/')
        && p.split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
        && !p.chars().any(char::is_control)
}

/// `build` and `actions.build`; `registries` are the hosts of
/// `registries:`.
pub fn check(build: &BuildConfig, enabled: bool, registries: &[&str]) -> Result<(), ConfigError> {
    if let Some(h) = build
        .base_registries
        .iter()
        .find(|h| !registries.iter().any(|r| r.eq_ignore_ascii_case(h)))
    {
        return Err(invalid(
            "build.base_registries",
            format!("`{h}` is not the host of an entry in registries: add it there (its credentials and limits apply to a base image's pull)"),
        ));
    }
    if build.timeout.is_zero() || build.timeout > Duration::from_secs(4 * 3600) {
        return Err(invalid("build.timeout", "must be in (0, 4h]"));
    }
    if build.max_context_bytes == 0 || build.max_context_bytes > 4 << 30 {
        return Err(invalid("build.max_context_bytes", "must be in (0, 4 GiB]"));
    }
    if build.max_image_bytes == 0 {
        return Err(invalid("build.max_image_bytes", "must be more than 0"));
    }
    if enabled && build.contexts.is_empty() {
        return Err(invalid(
            "actions.build.enabled",
            "turns builds on, but build.contexts names no context to build from: add one, or leave builds off",
        ));
    }
    let mut services: BTreeMap<&str, &str> = BTreeMap::new();
    for (i, c) in build.contexts.iter().enumerate() {
        let bad = |field: &str, m: String| invalid("build.contexts", format!("[{i}].{field}: {m}"));
        if !is_context_name(&c.name) {
            return Err(bad("name", "1 to 63 lowercase letters, digits, `-`, `_` and `.`, starting with a letter or digit".into()));
        }
        if build.contexts[..i].iter().any(|o| o.name == c.name) {
            return Err(bad("name", format!("`{}` names two contexts", c.name)));
        }
        if !c.path.is_absolute() {
            return Err(bad(
                "path",
                "must be an absolute path (the checkout's top folder)".into(),
            ));
        }
        if !is_tree_path(&c.dockerfile) {
            return Err(bad(
                "dockerfile",
                "a relative path inside the checkout, without `..`".into(),
            ));
        }
        for s in &c.services {
            let ok = s
                .split_once('/')
                .is_some_and(|(p, n)| !p.is_empty() && !n.is_empty() && !n.contains('/'));
            if !ok {
                return Err(bad("services", format!("`{s}` is not `project/service`")));
            }
            if let Some(other) = services.insert(s, &c.name) {
                return Err(bad(
                    "services",
                    format!("`{s}` is built by context `{other}` already"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(yaml: &str) -> BuildConfig {
        serde_yaml_ng::from_str(yaml).expect("build config")
    }

    #[test]
    fn a_container_builds_from_the_context_naming_its_service() {
        let b = config(
            "contexts: [{name: api, path: /srv/api, services: [shop/api]}, {name: web, path: /srv/web, dockerfile: deploy/Dockerfile, services: [shop/web, blog/web]}]",
        );
        check(&b, true, &[]).expect("valid");
        check(
            &config("base_registries: [\"127.0.0.1:5000\"]"),
            false,
            &["127.0.0.1:5000"],
        )
        .expect("a base registry that is in registries:");
        let labels = |p: &str, s: &str| {
            BTreeMap::from([
                (PROJECT_LABEL.to_string(), p.to_string()),
                (SERVICE_LABEL.to_string(), s.to_string()),
            ])
        };
        assert_eq!(
            b.context_for(&labels("shop", "api"))
                .map(|c| c.name.as_str()),
            Some("api")
        );
        assert_eq!(
            b.context_for(&labels("blog", "web"))
                .map(|c| c.dockerfile.as_str()),
            Some("deploy/Dockerfile")
        );
        assert!(b.context_for(&labels("shop", "db")).is_none());
        assert!(
            b.context_for(&BTreeMap::new()).is_none(),
            "no compose labels, no context"
        );
        assert_eq!(b.network, BuildNetwork::None, "no network by default");
    }

    #[test]
    fn a_context_without_services_builds_what_compose_builds_from_its_folder() {
        let dir = tempfile::tempdir().expect("temp dir");
        for d in ["api", "web", "other"] {
            std::fs::create_dir(dir.path().join(d)).expect("folder");
        }
        std::fs::write(
            dir.path().join("docker-compose.yml"),
            "services:\n  api:\n    build: ./api\n  web:\n    build: ./web\n  other:\n    build: ./other\n",
        )
        .expect("compose file");
        let root = dir.path().display();
        let b = config(&format!(
            "contexts: [{{name: api, path: {root}/api}}, {{name: web, path: {root}/web, services: [shop/front]}}]"
        ));
        check(&b, true, &[]).expect("valid");
        let labels = |s: &str| {
            BTreeMap::from([
                (PROJECT_LABEL.to_string(), "shop".to_string()),
                (SERVICE_LABEL.to_string(), s.to_string()),
                (
                    "com.docker.compose.project.working_dir".to_string(),
                    root.to_string(),
                ),
                (
                    "com.docker.compose.project.config_files".to_string(),
                    "docker-compose.yml".to_string(),
                ),
            ])
        };
        assert_eq!(
            b.context_for(&labels("api")).map(|c| c.name.as_str()),
            Some("api")
        );
        assert!(
            b.context_for(&labels("web")).is_none(),
            "a context that lists its services builds for those only"
        );
        assert!(b.context_for(&labels("other")).is_none());
    }

    #[test]
    fn bad_contexts_name_their_key() {
        for (yaml, enabled, key) in [
            ("{}", true, "actions.build.enabled"),
            ("contexts: [{name: Api, path: /a, services: [s/a]}]", false, "[0].name"),
            ("contexts: [{name: api, path: rel, services: [s/a]}]", false, "[0].path"),
            ("contexts: [{name: api, path: /a, dockerfile: ../D, services: [s/a]}]", false, "dockerfile"),
            ("contexts: [{name: api, path: /a, services: [api]}]", false, "services"),
            ("contexts: [{name: a, path: /a, services: [s/a]}, {name: b, path: /b, services: [s/a]}]", false, "[1].services"),
            ("contexts: [{name: a, path: /a, services: [s/a]}, {name: a, path: /b, services: [s/b]}]", false, "[1].name"),
            ("timeout: 0s", false, "build.timeout"),
            ("base_registries: [registry.example.com]", false, "build.base_registries"),
        ] {
            let e = check(&config(yaml), enabled, &["127.0.0.1:5000"])
                .expect_err(yaml)
                .to_string();
            assert!(e.contains(key), "{yaml}: {e}");
        }
    }

    #[test]
    fn tree_paths_stay_inside() {
        for ok in ["Dockerfile", "deploy/Dockerfile.prod", "a/b/c"] {
            assert!(is_tree_path(ok), "{ok}");
        }
        for bad in ["", "/Dockerfile", "../x", "a//b", "a/./b", "a/../b", "x\n"] {
            assert!(!is_tree_path(bad), "{bad:?}");
        }
    }
}
