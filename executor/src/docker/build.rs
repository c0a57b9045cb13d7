//! Building an image from a context the executor made (`build::git`): the
//! engine's classic builder, the context sent whole as a tar, no pull (a
//! base image must be on the engine), the network the config allows, no
//! build arguments, within a time limit. A build that runs out of time is
//! cancelled by closing its connection (the engine then stops the step
//! and removes its container, `forcerm`).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use bollard::query_parameters::BuildImageOptions;
use futures::StreamExt as _;

use super::{classify, engine_message, DockerAdapter, DockerError};
use crate::policy::{Build, Permit};

/// The last lines of a build's output an answer and the audit carry.
pub const LOG_TAIL: usize = 20;
/// The longest line kept of a build's output.
const MAX_LINE: usize = 300;

/// The labels the executor puts on what it builds.
pub const CONTEXT_LABEL: &str = "drydock.build.context";
pub const TREE_LABEL: &str = "drydock.build.tree";
pub const REVISION_LABEL: &str = "org.opencontainers.image.revision";
pub const SOURCE_LABEL: &str = "org.opencontainers.image.source";

/// What to build.
#[derive(Debug)]
pub struct BuildPlan<'a> {
    pub tag: &'a str,
    pub dockerfile: &'a str,
    /// The context, as a tar.
    pub context: Vec<u8>,
    pub labels: BTreeMap<String, String>,
    pub network: &'a str,
    pub timeout: Duration,
    pub max_image_bytes: u64,
}

/// A finished build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Built {
    pub image_id: String,
    pub log: Vec<String>,
    pub took: Duration,
}

/// An image the executor built, as the engine has it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuiltImage {
    pub id: String,
    pub labels: BTreeMap<String, String>,
    /// Bytes on the engine.
    pub size: u64,
}

fn rejected(message: String) -> DockerError {
    DockerError::Rejected {
        operation: "build",
        message,
    }
}

/// A build output line, shaped like any other output.
fn shown(line: &str) -> String {
    engine_message(line.trim_end())
        .chars()
        .take(MAX_LINE)
        .collect()
}

impl DockerAdapter {
    /// Build `plan` for the container `permit` names (which the build does
    /// not touch); the image's id, the output's last lines, the time taken.
    pub async fn build(
        &self,
        permit: &Permit<Build>,
        plan: BuildPlan<'_>,
    ) -> Result<Built, DockerError> {
        let started = Instant::now();
        let options = BuildImageOptions {
            dockerfile: plan.dockerfile.to_string(),
            t: Some(plan.tag.to_string()),
            labels: Some(plan.labels.clone().into_iter().collect::<HashMap<_, _>>()),
            networkmode: Some(plan.network.to_string()),
            rm: true,
            forcerm: true,
            nocache: false,
            ..Default::default()
        };
        let body = bollard::body_full(plan.context.into());
        let mut tail: VecDeque<String> = VecDeque::new();
        let mut image_id = String::new();
        let client = self.client();
        let building = async {
            let mut stream = client.build_image(options, None, Some(body));
            while let Some(item) = stream.next().await {
                let info = match item {
                    Ok(info) => info,
                    // A step that failed: the engine's words, not a fault
                    // of the engine.
                    Err(bollard::errors::Error::DockerStreamError { error }) => {
                        return Err(rejected(format!("the build failed: {}", shown(&error))))
                    }
                    Err(e) => return Err(classify("build", permit.container_id(), e)),
                };
                if let Some(text) = info.stream.as_deref() {
                    for line in text.lines().filter(|l| !l.trim().is_empty()) {
                        if tail.len() == LOG_TAIL {
                            tail.pop_front();
                        }
                        tail.push_back(shown(line));
                    }
                }
                if let Some(err) = info.error_detail.and_then(|d| d.message) {
                    return Err(rejected(format!("the build failed: {}", shown(&err))));
                }
                if let Some(id) = info.aux.and_then(|a| a.id) {
                    image_id = id;
                }
            }
            Ok(())
        };
        let outcome = tokio::time::timeout(plan.timeout, building).await;
        let log: Vec<String> = tail.into_iter().collect();
        match outcome {
            Err(_) => {
                return Err(rejected(format!(
                    "the build ran longer than build.timeout ({}s) and was stopped{}",
                    plan.timeout.as_secs(),
                    last_line(&log)
                )))
            }
            Ok(Err(DockerError::Rejected { message, .. })) => {
                return Err(rejected(format!("{message}{}", last_line(&log))))
            }
            Ok(Err(e)) => return Err(e),
            Ok(Ok(())) => {}
        }
        // The tag names what was built: read it back, so the answer is the
        // engine's word and not the stream's.
        let built = self
            .built_image(plan.tag)
            .await?
            .ok_or_else(|| rejected(format!("the build ended, but {} names no image", plan.tag)))?;
        if !image_id.is_empty() && image_id != built.id {
            return Err(rejected(format!(
                "the build made {image_id}, but {} names {}",
                plan.tag, built.id
            )));
        }
        if built.size > plan.max_image_bytes {
            let _ = self
                .client()
                .remove_image(
                    plan.tag,
                    None::<bollard::query_parameters::RemoveImageOptions>,
                    None,
                )
                .await;
            return Err(rejected(format!(
                "the build made an image of {} bytes, more than build.max_image_bytes ({}); it was removed again",
                built.size, plan.max_image_bytes
            )));
        }
        Ok(Built {
            image_id: built.id,
            log,
            took: started.elapsed(),
        })
    }

    /// The image a tag of drydock's names, with all its labels; `None`
    /// when the engine has none.
    pub async fn built_image(&self, tag: &str) -> Result<Option<BuiltImage>, DockerError> {
        match self
            .step("inspect_image", self.client().inspect_image(tag))
            .await
        {
            Ok(image) => Ok(Some(BuiltImage {
                id: image.id.unwrap_or_default(),
                size: image.size.unwrap_or(0).max(0) as u64,
                labels: image
                    .config
                    .and_then(|c| c.labels)
                    .unwrap_or_default()
                    .into_iter()
                    .collect(),
            })),
            Err(DockerError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether the engine has an image by this reference (a build's base).
    pub async fn has_image(&self, reference: &str) -> Result<bool, DockerError> {
        Ok(self.built_image(reference).await?.is_some())
    }
}

fn last_line(log: &[String]) -> String {
    log.last()
        .map(|l| format!(" (last output: {l})"))
        .unwrap_or_default()
}

/// The base images a Dockerfile's `FROM` lines name, in order; an earlier
/// stage's name and `scratch` are not images. `Err` for a `FROM` the
/// executor cannot read (a build argument in it: none is passed, so it
/// cannot say which image that is).
pub fn base_images(dockerfile: &str) -> Result<Vec<String>, String> {
    let mut stages: Vec<String> = Vec::new();
    let mut bases = Vec::new();
    let dockerfile = dockerfile.strip_prefix('\u{feff}').unwrap_or(dockerfile);
    // Parser directives: `# key=value` lines at the very top; the first
    // other line ends them. Only the default escape character is read.
    for line in dockerfile.lines() {
        let Some((key, value)) = line
            .trim()
            .strip_prefix('#')
            .and_then(|d| d.split_once('='))
            .filter(|(k, _)| {
                let k = k.trim();
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric())
            })
        else {
            break;
        };
        if key.trim().eq_ignore_ascii_case("escape") && value.trim() != "\\" {
            return Err(
                "the Dockerfile sets another escape character, which drydock does not read".into(),
            );
        }
    }
    // Instructions as the engine reads them: a comment line is dropped
    // (a backslash ending it continues nothing), and a backslash ending a
    // line (spaces after it allowed) continues the instruction.
    let mut joined = String::new();
    for line in dockerfile.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let end = line.trim_end();
        match end.strip_suffix('\\') {
            Some(head) => {
                joined.push_str(head);
                joined.push(' ');
            }
            None => {
                joined.push_str(line);
                joined.push('\n');
            }
        }
    }
    for line in joined.lines() {
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        let instruction = first.to_ascii_lowercase();
        // What else makes the engine fetch: a `--from` image (not a
        // stage), a URL or a git repository added.
        if instruction == "copy" || instruction == "add" {
            for w in line.split_whitespace().skip(1) {
                let w_lower = w.to_ascii_lowercase();
                if let Some(from) = w_lower.strip_prefix("--from=") {
                    if !stages.contains(&from.to_string()) && from.parse::<usize>().is_err() {
                        return Err(format!(
                            "`{w}` names an image, which the engine would pull; a build copies only from its own stages"
                        ));
                    }
                }
                if instruction == "add" && (w_lower.contains("://") || w_lower.starts_with("git@"))
                {
                    return Err(format!(
                        "`ADD {w}` makes the engine fetch over its own network; commit the file instead"
                    ));
                }
            }
        }
        if instruction != "from" {
            continue;
        }
        let rest: Vec<&str> = words.filter(|w| !w.starts_with("--")).collect();
        let Some(image) = rest.first() else {
            return Err("a FROM line names no image".into());
        };
        if image.contains('$') {
            return Err(format!(
                "`FROM {image}` names a build argument; drydock passes none, so the base image is not known: name it in the Dockerfile"
            ));
        }
        let image = image.to_string();
        let lower = image.to_ascii_lowercase();
        if image != "scratch" && !stages.contains(&lower) && !bases.contains(&image) {
            bases.push(image);
        }
        if let [_, as_word, name] = rest[..] {
            if as_word.eq_ignore_ascii_case("as") {
                stages.push(name.to_ascii_lowercase());
            }
        }
    }
    Ok(bases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bases_are_the_from_images_but_stages_and_scratch() {
        let d = "# syntax\nFROM --platform=linux/amd64 golang:1.22 AS build\nRUN make\nfrom build as test\nFROM scratch\nCOPY --from=build /app /\nFROM \\\n  registry.example.com/base:1\n";
        assert_eq!(
            base_images(d).unwrap(),
            vec![
                "golang:1.22".to_string(),
                "registry.example.com/base:1".to_string()
            ]
        );
        assert!(base_images("ARG BASE=x\nFROM ${BASE}\n")
            .unwrap_err()
            .contains("build argument"));
        for (d, why) in [
            ("FROM a\nCOPY --from=evil.example/x /bin /bin\n", "pull"),
            ("FROM a\nADD https://example.com/x /x\n", "fetch"),
            ("# escape=`\nFROM a\nRUN x \\\nFROM evil/x\n", "escape"),
            ("FROM a\n# a note \\\nCOPY --from=evil/x /a /a\n", "pull"),
        ] {
            assert!(base_images(d).unwrap_err().contains(why), "{d}");
        }
        assert_eq!(
            base_images("# syntax=docker/dockerfile:1\n# Escaped paths below\nFROM a\n").unwrap(),
            vec!["a".to_string()],
            "a comment that is not a directive is read as one"
        );
        assert_eq!(
            base_images("\u{feff}FROM hidden:1\nFROM b AS s\nFROM c\nCOPY --from=s /a /a\nCOPY --from=0 /b /b\n").unwrap(),
            vec!["hidden:1".to_string(), "b".to_string(), "c".to_string()]
        );
    }
}
