//! The registries the executor may pull from (`registries:` in
//! executor.yaml), their credentials, and image references parsed well
//! enough to say which registry and repository a container's tag is in.
//!
//! The engine asks a registry for a tag's digest and pulls, with its own
//! TLS settings (`/etc/docker/certs.d`, `insecure-registries`, loopback as
//! plain HTTP), the credentials in the `X-Registry-Auth` header of the one
//! call that needs them. What the engine cannot say before a pull (the new
//! image's labels, a repository's tags) the executor reads itself
//! (`reader`), from the same entries only. The credentials never reach the
//! agent, an answer, a log line or the audit log.

pub mod line;
pub mod reader;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use drydock_daemon::{invalid, ConfigError};

/// How long one pull may take unless a registry says otherwise.
pub const DEFAULT_PULL_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a new container must run (and be healthy, with a healthcheck)
/// before the old one is removed.
pub const DEFAULT_HEALTH_WINDOW: Duration = Duration::from_secs(30);
/// The largest image an update pulls unless a registry says otherwise.
pub const DEFAULT_MAX_IMAGE_BYTES: u64 = 4 << 30;

/// One entry of `registries:`.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegistryConfig {
    /// The registry's host as references name it (`registry.example.com`,
    /// `127.0.0.1:5000`; `docker.io` for Docker Hub).
    pub host: String,
    /// Only repositories under this path (`shop/`); every one when absent.
    #[serde(default)]
    pub prefix: Option<String>,
    /// A JSON file with `username` and `password`, or `identitytoken`;
    /// read once at start, mode 0600.
    #[serde(default)]
    pub credentials: Option<PathBuf>,
    #[serde(default = "default_pull_timeout", with = "drydock_daemon::duration")]
    pub pull_timeout: Duration,
    /// The largest image (bytes on the engine) an update keeps; a bigger
    /// one is removed again and the update refused.
    #[serde(default = "default_max_image_bytes")]
    pub max_image_bytes: u64,
    /// A PEM file of the CA the registry's certificate chains to, beside
    /// the system's roots, for the executor's own reads (the engine's pull
    /// uses `/etc/docker/certs.d`).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

impl std::fmt::Debug for RegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryConfig")
            .field("host", &self.host)
            .field("prefix", &self.prefix)
            .field("credentials", &self.credentials.as_ref().map(|_| "<file>"))
            .finish_non_exhaustive()
    }
}

fn default_pull_timeout() -> Duration {
    DEFAULT_PULL_TIMEOUT
}

fn default_max_image_bytes() -> u64 {
    DEFAULT_MAX_IMAGE_BYTES
}

/// `update:`: how an update is held before the old container goes.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateConfig {
    #[serde(default = "default_health_window", with = "drydock_daemon::duration")]
    pub health_window: Duration,
}

impl Default for UpdateConfig {
    fn default() -> Self {
        UpdateConfig {
            health_window: DEFAULT_HEALTH_WINDOW,
        }
    }
}

fn default_health_window() -> Duration {
    DEFAULT_HEALTH_WINDOW
}

/// A registry's credentials as the engine takes them. Never printed.
#[derive(Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub identitytoken: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credentials(<redacted>)")
    }
}

impl Credentials {
    /// The values the redactor must never let out.
    pub fn secrets(&self) -> impl Iterator<Item = &str> {
        [&self.password, &self.identitytoken]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .filter(|s| s.len() >= 4)
    }
}

/// An image reference split into what a registry and a policy need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// `docker.io` when the reference names no registry.
    pub registry: String,
    /// `library/nginx`, `shop/api`.
    pub repository: String,
    /// `None` for a reference pinned to a digest only.
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parse a reference as the engine writes a container's `Config.Image`.
    /// `None` for an image id or anything that is not a reference.
    pub fn parse(reference: &str) -> Option<ImageRef> {
        if reference.is_empty()
            || reference.len() > 255
            || reference.starts_with("sha256:")
            || !reference
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-/:@".contains(&b))
        {
            return None;
        }
        let (name, digest) = match reference.split_once('@') {
            Some((n, d)) if drydock_proto::approval::is_image_id(d) => (n, Some(d.to_string())),
            Some(_) => return None,
            None => (reference, None),
        };
        // A tag follows the last `:` after the last `/`.
        let slash = name.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match name[slash..].rfind(':') {
            Some(i) => (&name[..slash + i], Some(name[slash + i + 1..].to_string())),
            None => (name, None),
        };
        let tag = match (tag, &digest) {
            (None, None) => Some("latest".to_string()),
            (t, _) => t,
        };
        if tag
            .as_deref()
            .is_some_and(|t| t.is_empty() || t.len() > 128)
            || path.is_empty()
        {
            return None;
        }
        let (registry, repository) = match path.split_once('/') {
            Some((first, rest))
                if first.contains('.') || first.contains(':') || first == "localhost" =>
            {
                (first.to_string(), rest.to_string())
            }
            _ => ("docker.io".to_string(), path.to_string()),
        };
        let repository = if registry == "docker.io" && !repository.contains('/') {
            format!("library/{repository}")
        } else {
            repository
        };
        // Each path component as the distribution grammar has it: lower
        // case letters and digits, separated by `.`, `_` or `-`, never at
        // an end (so never `..`).
        let component_ok = |c: &str| {
            let b = c.as_bytes();
            !b.is_empty()
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && !c.contains("..")
                && b.iter()
                    .all(|&x| x.is_ascii_lowercase() || x.is_ascii_digit() || b"._-".contains(&x))
        };
        if repository.is_empty() || !repository.split('/').all(component_ok) {
            return None;
        }
        Some(ImageRef {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The name the engine pulls and tags: `registry/repository`, with
    /// Docker Hub's short form kept as the engine writes it.
    pub fn name(&self) -> String {
        if self.registry == "docker.io" {
            self.repository
                .strip_prefix("library/")
                .unwrap_or(&self.repository)
                .to_string()
        } else {
            format!("{}/{}", self.registry, self.repository)
        }
    }

    /// `name@digest`: what is pulled.
    pub fn at(&self, digest: &str) -> String {
        format!("{}@{digest}", self.name())
    }

    /// The same repository under another tag.
    pub fn with_tag(&self, tag: &str) -> ImageRef {
        ImageRef {
            tag: Some(tag.to_string()),
            digest: None,
            ..self.clone()
        }
    }

    /// The move from this reference's tag to `to_tag` of the same
    /// repository, as the container's `drydock.update` label allows it.
    pub fn moved_to(
        &self,
        to_tag: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Result<ImageRef, RegistryRefusal> {
        let follow = line::Follow::of(labels);
        let current = self.tag.as_deref().unwrap_or_default();
        if !line::newer_in_line(current, to_tag, follow) {
            return Err(RegistryRefusal::NotInLine {
                current: shown(current),
                to: shown(to_tag),
                follow: follow.as_str(),
            });
        }
        Ok(self.with_tag(to_tag))
    }

    /// `name:tag`, the reference a tag names.
    pub fn tagged(&self) -> Option<String> {
        self.tag.as_ref().map(|t| format!("{}:{t}", self.name()))
    }
}

/// The allowed registries, with their credentials read and the TLS
/// settings of the executor's reads.
#[derive(Clone, Default)]
pub struct Registries {
    entries: Vec<Entry>,
}

#[derive(Clone)]
struct Entry {
    config: RegistryConfig,
    credentials: Option<Credentials>,
    tls: Arc<rustls::ClientConfig>,
}

impl std::fmt::Debug for Registries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.config))
            .finish()
    }
}

/// An allowed reference with its registry entry.
pub struct Allowed<'a> {
    pub reference: ImageRef,
    pub config: &'a RegistryConfig,
    pub credentials: Option<&'a Credentials>,
    tls: &'a Arc<rustls::ClientConfig>,
}

impl Allowed<'_> {
    /// A read session with the reference's repository.
    pub fn reader(&self) -> Result<reader::Session<'_>, reader::ReadError> {
        reader::Session::new(self.tls.clone(), &self.reference, self.credentials)
    }
}

/// Why a reference may not be pulled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryRefusal {
    #[error("the container runs `{0}`, which is not a tag in a registry (an image id, or built here); an update follows a tag")]
    NotATag(String),
    #[error("registry {registry} (repository {repository}) is not in `registries` of executor.yaml; add it (host, and prefix if only some repositories) to let drydock pull from it")]
    NotAllowed {
        registry: String,
        repository: String,
    },
    #[error("the container runs tag `{current}` and is labelled drydock.update={follow}: `{to}` is not a newer version of that line; an update moves only to one (or follows the tag it runs)")]
    NotInLine {
        current: String,
        to: String,
        follow: &'static str,
    },
}

impl Registries {
    /// Read each entry's credentials file; an unreadable or malformed file
    /// stops the executor at start, naming the key.
    pub fn load(configs: &[RegistryConfig]) -> Result<Registries, ConfigError> {
        let mut entries = Vec::new();
        for c in configs {
            let credentials = match &c.credentials {
                Some(path) => Some(read_credentials(path)?),
                None => None,
            };
            let tls = reader::tls_config(c.ca_file.as_deref())
                .map_err(|e| invalid("registries.ca_file", e))?;
            entries.push(Entry {
                config: c.clone(),
                credentials,
                tls: Arc::new(tls),
            });
        }
        Ok(Registries { entries })
    }

    /// The registry entry a container's reference falls under, with the
    /// parsed reference: a tag, in an allowed registry and prefix.
    pub fn allowed(&self, reference: &str) -> Result<Allowed<'_>, RegistryRefusal> {
        // A tag pinned to a digest (`shop/api:2@sha256:…`) is not followed:
        // the pin is the operator's choice.
        let parsed = ImageRef::parse(reference)
            .filter(|r| r.tag.is_some() && r.digest.is_none())
            .ok_or_else(|| RegistryRefusal::NotATag(shown(reference)))?;
        self.entry_for(parsed)
    }

    /// The registry entry a parsed reference (a tag or a digest) falls
    /// under: an allowed registry and prefix.
    pub fn entry_for(&self, parsed: ImageRef) -> Result<Allowed<'_>, RegistryRefusal> {
        let found = self.entries.iter().find(|e| {
            e.config.host.eq_ignore_ascii_case(&parsed.registry)
                && e.config
                    .prefix
                    .as_deref()
                    .is_none_or(|p| under_prefix(&parsed.repository, p))
        });
        match found {
            Some(e) => Ok(Allowed {
                reference: parsed,
                config: &e.config,
                credentials: e.credentials.as_ref(),
                tls: &e.tls,
            }),
            None => Err(RegistryRefusal::NotAllowed {
                registry: shown(&parsed.registry),
                repository: shown(&parsed.repository),
            }),
        }
    }

    /// Every credential value, for the redactor.
    pub fn secrets(&self) -> Vec<String> {
        self.entries
            .iter()
            .filter_map(|e| e.credentials.as_ref())
            .flat_map(|c| c.secrets().map(str::to_string).collect::<Vec<_>>())
            .collect()
    }
}

/// `shop/` matches `shop/api`, `shop` matches `shop/api` and `shop`, never
/// `shopping/api`.
fn under_prefix(repository: &str, prefix: &str) -> bool {
    let prefix = prefix.trim_end_matches('/');
    repository == prefix
        || repository
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn shown(s: &str) -> String {
    s.chars().take(128).collect()
}

fn read_credentials(path: &Path) -> Result<Credentials, ConfigError> {
    drydock_daemon::files::check_private("registries.credentials", path)?;
    let text = std::fs::read_to_string(path).map_err(|e| {
        invalid(
            "registries.credentials",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let creds: Credentials = serde_json::from_str(&text).map_err(|_| {
        // serde's message could quote the file: say only what is wrong.
        invalid(
            "registries.credentials",
            format!(
                "{} is not a JSON object with `username` and `password`, or `identitytoken`",
                path.display()
            ),
        )
    })?;
    let pair = creds.username.is_some() && creds.password.is_some();
    if !pair && creds.identitytoken.is_none() {
        return Err(invalid(
            "registries.credentials",
            format!(
                "{} names neither `username` and `password` nor `identitytoken`",
                path.display()
            ),
        ));
    }
    Ok(creds)
}

/// `registries`: hosts and prefixes a reference can name.
pub fn check(configs: &[RegistryConfig]) -> Result<(), ConfigError> {
    for c in configs {
        let host_ok = !c.host.is_empty()
            && c.host.len() <= 255
            && c.host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
            && !c.host.contains("://");
        if !host_ok {
            return Err(invalid(
                "registries.host",
                format!(
                    "`{}` is not a registry host as an image reference names it (`registry.example.com`, `127.0.0.1:5000`, `docker.io`); no scheme, no path",
                    shown(&c.host)
                ),
            ));
        }
        if let Some(p) = &c.prefix {
            if p.trim_matches('/').is_empty() || p.contains("..") || p.starts_with('/') {
                return Err(invalid(
                    "registries.prefix",
                    format!("`{}` is not a repository path such as `shop/`", shown(p)),
                ));
            }
        }
        if c.pull_timeout.is_zero() || c.pull_timeout > Duration::from_secs(3600) {
            return Err(invalid("registries.pull_timeout", "must be in (0, 1h]"));
        }
        if c.max_image_bytes == 0 {
            return Err(invalid("registries.max_image_bytes", "must be above 0"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_as_the_engine_reads_them() {
        type Split<'a> = Option<(&'a str, &'a str, Option<&'a str>)>;
        let cases: &[(&str, Split<'_>)] = &[
            (
                "nginx",
                Some(("docker.io", "library/nginx", Some("latest"))),
            ),
            (
                "nginx:1.27",
                Some(("docker.io", "library/nginx", Some("1.27"))),
            ),
            ("shop/api:2", Some(("docker.io", "shop/api", Some("2")))),
            (
                "127.0.0.1:5000/shop/api:stable",
                Some(("127.0.0.1:5000", "shop/api", Some("stable"))),
            ),
            ("localhost/api", Some(("localhost", "api", Some("latest")))),
            (
                "registry.example.com:443/a/b/c:v1.2",
                Some(("registry.example.com:443", "a/b/c", Some("v1.2"))),
            ),
            ("sha256:0123", None),
            ("", None),
            ("Shop/API:1", None),
            ("shop/api:", None),
            ("shop/api@latest", None),
            ("shop api", None),
            ("r.example.com/shop/../admin/x:1", None),
            ("r.example.com/shop/-x:1", None),
        ];
        for (input, want) in cases {
            let got = ImageRef::parse(input).map(|r| (r.registry, r.repository, r.tag));
            let want = want.map(|(r, p, t)| (r.to_string(), p.to_string(), t.map(str::to_string)));
            assert_eq!(got, want, "{input}");
        }
        let pinned = ImageRef::parse(&format!("shop/api@sha256:{}", "a".repeat(64))).unwrap();
        assert_eq!(pinned.tag, None);
        assert_eq!(ImageRef::parse("nginx").unwrap().name(), "nginx");
        assert_eq!(
            ImageRef::parse("127.0.0.1:5000/shop/api:2")
                .unwrap()
                .at("sha256:x"),
            "127.0.0.1:5000/shop/api@sha256:x"
        );
    }

    fn registries(yaml: &str) -> Registries {
        let configs: Vec<RegistryConfig> = serde_yaml_ng::from_str(yaml).unwrap();
        check(&configs).unwrap();
        Registries::load(&configs).unwrap()
    }

    #[test]
    fn only_a_tag_in_an_allowed_registry_and_prefix_may_be_pulled() {
        let r = registries(
            "- {host: '127.0.0.1:5000', prefix: shop/}\n- {host: docker.io, prefix: library}\n",
        );
        assert!(r.allowed("127.0.0.1:5000/shop/api:2").is_ok());
        assert!(r.allowed("nginx:1.27").is_ok());
        for refused in [
            "127.0.0.1:5000/shopping/api:2",
            "127.0.0.1:5001/shop/api:2",
            "ghcr.io/shop/api:2",
            "bitnami/redis:7",
        ] {
            assert!(
                matches!(r.allowed(refused), Err(RegistryRefusal::NotAllowed { .. })),
                "{refused}"
            );
        }
        assert!(matches!(
            r.allowed(&format!("sha256:{}", "a".repeat(64))),
            Err(RegistryRefusal::NotATag(_))
        ));
        for pinned in [
            format!("127.0.0.1:5000/shop/api@sha256:{}", "a".repeat(64)),
            format!("127.0.0.1:5000/shop/api:2@sha256:{}", "a".repeat(64)),
        ] {
            assert!(
                matches!(r.allowed(&pinned), Err(RegistryRefusal::NotATag(_))),
                "{pinned}"
            );
        }
    }

    #[test]
    fn bad_entries_name_their_key() {
        for (yaml, key) in [
            ("- {host: 'https://r.example.com'}\n", "registries.host"),
            ("- {host: r.example.com/shop}\n", "registries.host"),
            ("- {host: r.example.com, prefix: /}\n", "registries.prefix"),
            (
                "- {host: r.example.com, pull_timeout: 0s}\n",
                "registries.pull_timeout",
            ),
        ] {
            let configs: Vec<RegistryConfig> = serde_yaml_ng::from_str(yaml).unwrap();
            let err = check(&configs).unwrap_err().to_string();
            assert!(err.contains(key), "{yaml}: {err}");
        }
    }

    #[test]
    fn credentials_are_read_checked_and_never_printed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("creds.json");
        drydock_daemon::files::write_new(
            &path,
            br#"{"username": "ci", "password": "hunter2-registry"}"#,
            true,
        )
        .unwrap();
        let config = RegistryConfig {
            host: "r.example.com".into(),
            prefix: None,
            credentials: Some(path.clone()),
            pull_timeout: DEFAULT_PULL_TIMEOUT,
            max_image_bytes: DEFAULT_MAX_IMAGE_BYTES,
            ca_file: None,
        };
        let r = Registries::load(std::slice::from_ref(&config)).unwrap();
        assert_eq!(r.secrets(), vec!["hunter2-registry".to_string()]);
        assert!(!format!("{r:?}").contains("hunter2"));
        std::fs::remove_file(&path).unwrap();
        drydock_daemon::files::write_new(&path, br#"{"user": "ci", "pass": "hunter2"}"#, true)
            .unwrap();
        let err = Registries::load(std::slice::from_ref(&config))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("registries.credentials") && !err.contains("hunter2"),
            "{err}"
        );
    }
}
