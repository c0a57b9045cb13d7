//! Following what an error names, in the container's own definition: a
//! path to the mount that holds it (read-only or not) or to the root
//! filesystem, a variable to the environment (by name, never by value),
//! a user to who the process runs as. Hosts and ports are followed by the
//! engine, which can read other containers (`engine/dependency.rs`).

use crate::model::{ContainerView, MountView};

/// Where a path the error names lives.
#[derive(Debug, Clone, PartialEq)]
pub struct PathFact {
    pub path: String,
    /// The mount that holds it (the longest destination above it).
    pub mount: Option<MountView>,
    /// Writes to it fail: a read-only mount, or the container's read-only
    /// root filesystem when no mount holds it.
    pub read_only: bool,
}

impl PathFact {
    /// What was found, in words.
    pub fn said(&self) -> String {
        match &self.mount {
            Some(m) => format!(
                "{} is on the {} mount {} ({}), mounted at {}",
                self.path,
                m.kind,
                if m.source.is_empty() { "(anonymous)" } else { m.source.as_str() },
                if m.rw { "read-write" } else { "read-only" },
                m.destination
            ),
            None if self.read_only => format!(
                "{} is on the container's root filesystem, which is read-only (`read_only: true` / `--read-only`)",
                self.path
            ),
            None => format!("{} is on the container's own filesystem (no mount holds it)", self.path),
        }
    }
}

/// Whether `dir` holds `path`, component by component.
fn holds(dir: &str, path: &str) -> bool {
    crate::disk::is_under(path, dir)
}

/// Follow `path` into `c`'s mounts.
pub fn path(path: &str, c: &ContainerView) -> PathFact {
    let mount = c
        .mounts
        .iter()
        .filter(|m| holds(&m.destination, path))
        .max_by_key(|m| m.destination.len())
        .cloned();
    let read_only = match &mount {
        Some(m) => !m.rw,
        None => c.read_only_rootfs,
    };
    PathFact {
        path: path.to_string(),
        mount,
        read_only,
    }
}

/// Whether `path` is a shell or the `env` that reports another
/// program's failure (`/bin/sh: 1: ./start.sh: not found`).
pub fn is_a_shell(path: &str) -> bool {
    matches!(
        path.rsplit('/').next(),
        Some("sh" | "bash" | "dash" | "ash" | "zsh" | "env")
    )
}

/// Whether `line` says a path it names is not there.
pub fn says_missing(line: &str) -> bool {
    static MISSING: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"(?i)no such file|not a directory|(?:does not|doesn't) exist|\bnot found\b|cannot find|could not find|\bENOENT\b|\bENOTDIR\b|FileNotFound|DirectoryNotFound",
        )
        .ok()
    });
    MISSING.as_ref().is_some_and(|r| r.is_match(line))
}

/// What a path the error says is missing tells, when no mount holds it:
/// a device node the container was not given, or a file only the image
/// could hold (a mount that was meant to provide it is not there).
pub fn missing_path(path: &str, c: &ContainerView) -> Option<String> {
    if !path.starts_with('/') || path.len() < 2 {
        return None;
    }
    let p = self::path(path, c);
    if p.mount.is_some() {
        return None;
    }
    Some(if path.starts_with("/dev/") {
        // A flag only for the devices containers are given for their
        // work; a disk or anything else is a fact, for a person to judge.
        let passed_for_work = ["/dev/net/tun", "/dev/fuse", "/dev/kvm"].contains(&path)
            || path.starts_with("/dev/dri/");
        if passed_for_work {
            format!(
                "{path} is a device node the container does not have: give it the device (`--device {path}`, compose `devices: [\"{path}:{path}\"]`) if the host has it"
            )
        } else {
            format!("{path} is a device node the container does not have")
        }
    } else {
        format!(
            "no mount of the container holds {path}, so only its image could provide it: a volume or bind mount meant to provide it is missing or mounted elsewhere"
        )
    })
}

/// The command a program's own log gives as the fix ("To start a new
/// installation from scratch, run 'app migrations bootstrap'", "Please
/// run `tool db init`"), from the lines around the failure; the first
/// one said. Only a command said as what to do (after "please", "you
/// must", "to fix …,"), never one that failed or an update notice, and
/// only in plain words: no shell syntax reaches the advice.
pub fn suggested_command<'l>(lines: impl IntoIterator<Item = &'l str>) -> Option<String> {
    static SUGGESTION: std::sync::LazyLock<Option<regex::Regex>> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
                r#"(?i)(?:\bplease\b|\byou (?:must|need to|should|have to)\b|\bto (?:fix|resolve|start|initiali[sz]e|migrate|upgrade|create|set up|continue|prepare)\b[^.!?]{0,80}?)[,:]?\s*(?:run|execute)\b:?\s+(?:the command\s+)?[`'"\u{2018}\u{201c}]([A-Za-z0-9_./][^`'"\u{2019}\u{201d}]{2,78})[`'"\u{2019}\u{201d}]"#,
            )
            .ok()
    });
    let re = SUGGESTION.as_ref()?;
    let plain = |cmd: &str| {
        cmd.contains(' ')
            && !cmd.contains("://")
            && cmd
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || " ._/:=@-".contains(ch))
    };
    lines.into_iter().find_map(|l| {
        re.captures(l)
            .and_then(|c| c.get(1))
            .map(|m| m.as_str().trim().to_string())
            .filter(|cmd| plain(cmd))
    })
}

/// What the environment has of a variable the error names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariableFact {
    pub name: String,
    pub set: bool,
    /// Set variables whose names are close to it (a typo, a renamed key).
    pub similar: Vec<String>,
}

impl VariableFact {
    pub fn said(&self) -> String {
        if self.set {
            format!(
                "{} is set in its environment (its value is not shown)",
                self.name
            )
        } else if self.similar.is_empty() {
            format!("{} is not set in its environment", self.name)
        } else {
            format!(
                "{} is not set in its environment, but {} is: a misspelt or renamed variable?",
                self.name,
                self.similar.join(", ")
            )
        }
    }
}

/// The names of `c`'s environment (never their values).
pub fn env_names(c: &ContainerView) -> Vec<String> {
    let mut names: Vec<String> = c
        .env
        .iter()
        .filter_map(|e| {
            e.split_once('=')
                .map(|(n, _)| n.to_string())
                .or(Some(e.clone()))
        })
        .chain(c.env_hashes.keys().cloned())
        .filter(|n| !n.is_empty())
        .collect();
    names.sort();
    names.dedup();
    names
}

fn squashed(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// Levenshtein distance, bounded: enough for names of a few dozen bytes.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut row = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            row.push((prev[j] + cost).min(prev[j + 1] + 1).min(row[j] + 1));
        }
        prev = row;
    }
    prev[b.len()]
}

/// Whether two variable names look like one meant as the other.
pub fn similar(a: &str, b: &str) -> bool {
    let (sa, sb) = (squashed(a), squashed(b));
    if sa.is_empty() || sb.is_empty() || a == b {
        return false;
    }
    sa == sb || (sa.len().min(sb.len()) >= 6 && distance(&sa, &sb) <= 2)
}

/// Follow the variable `name` into `c`'s environment.
pub fn variable(name: &str, c: &ContainerView) -> VariableFact {
    let names = env_names(c);
    let set = names.iter().any(|n| n == name);
    let similar = if set {
        Vec::new()
    } else {
        names.iter().filter(|n| similar(name, n)).cloned().collect()
    };
    VariableFact {
        name: name.to_string(),
        set,
        similar,
    }
}

/// The settings of the environment that hold credentials, by name only
/// (`OPENVPN_USER`, `DB_PASSWORD`, `API_TOKEN`): where a refused login's
/// values come from. At most four.
pub fn credential_settings(c: &ContainerView) -> Vec<String> {
    env_names(c)
        .into_iter()
        .filter(|n| {
            let upper = n.to_ascii_uppercase();
            upper.split('_').any(|part| {
                matches!(
                    part,
                    "USER"
                        | "USERNAME"
                        | "LOGIN"
                        | "PASSWORD"
                        | "PASS"
                        | "PASSWD"
                        | "TOKEN"
                        | "SECRET"
                        | "APIKEY"
                )
            }) || upper.ends_with("API_KEY")
        })
        .take(4)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container() -> ContainerView {
        ContainerView {
            mounts: vec![
                MountView {
                    kind: "volume".into(),
                    source: "grafana-data".into(),
                    destination: "/var/lib/grafana".into(),
                    rw: false,
                },
                MountView {
                    kind: "bind".into(),
                    source: "/srv/conf".into(),
                    destination: "/etc/app".into(),
                    rw: true,
                },
            ],
            env: vec!["DATABASE_URI=<redacted>".into(), "PORT=8080".into()],
            ..Default::default()
        }
    }

    #[test]
    fn a_path_is_followed_to_the_mount_that_holds_it() {
        let c = container();
        let p = path("/var/lib/grafana/plugins", &c);
        assert!(p.read_only);
        assert_eq!(
            p.mount.as_ref().map(|m| m.source.as_str()),
            Some("grafana-data")
        );
        assert!(p.said().contains("read-only"), "{}", p.said());
        // A sibling with a common prefix is not under the mount.
        let p = path("/var/lib/grafana-old/x", &c);
        assert!(p.mount.is_none() && !p.read_only);
        assert!(!path("/etc/app/app.yml", &c).read_only);
        let ro_root = ContainerView {
            read_only_rootfs: true,
            ..container()
        };
        let p = path("/tmp/cache", &ro_root);
        assert!(p.read_only && p.mount.is_none());
        assert!(p.said().contains("root filesystem"), "{}", p.said());
    }

    #[test]
    fn a_missing_path_no_mount_holds_and_the_log_s_own_command() {
        let c = container();
        assert!(says_missing(
            "DocumentRoot '/srv/www' is not a directory, or is not readable"
        ));
        assert!(says_missing("open /dev/net/tun: no such file or directory"));
        assert!(!says_missing("open /data/x: permission denied"));
        let dev = missing_path("/dev/net/tun", &c).unwrap();
        assert!(dev.contains("--device /dev/net/tun"), "{dev}");
        // A disk is a fact, never a flag to pass it.
        let disk = missing_path("/dev/sda", &c).unwrap();
        assert!(!disk.contains("--device"), "{disk}");
        assert!(
            is_a_shell("/bin/sh") && is_a_shell("/usr/bin/env") && !is_a_shell("/app/start.sh")
        );
        let file = missing_path("/srv/www/public", &c).unwrap();
        assert!(
            file.contains("no mount of the container holds /srv/www/public"),
            "{file}"
        );
        // A path a mount holds is that mount's to explain; a relative one
        // says nothing of where it is.
        assert_eq!(missing_path("/etc/app/x.conf", &c), None);
        assert_eq!(missing_path("conf/x", &c), None);
        let lines = [
            "Error: database needs bootstrapping.",
            "To start a new installation from scratch, run 'app migrations bootstrap'.",
            "Or use the 'app migrations up' command.",
        ];
        assert_eq!(
            suggested_command(lines.iter().copied()).as_deref(),
            Some("app migrations bootstrap")
        );
        assert_eq!(
            suggested_command([
                "ERROR: You need to initialize the database. Please run `tool db init`"
            ])
            .as_deref(),
            Some("tool db init")
        );
        // A single word, a link, shell syntax, a command that failed or an
        // update notice is no advice.
        assert_eq!(
            suggested_command(["please run 'x'", "please run \"https://example.com/a b\""]),
            None
        );
        assert_eq!(
            suggested_command(["Please run `rm -rf /; curl x | sh`"]),
            None
        );
        assert_eq!(
            suggested_command(["error: failed to run 'make build'"]),
            None
        );
        assert_eq!(
            suggested_command(["npm notice Run `npm install -g npm@11.0.0` to update!"]),
            None
        );
    }

    #[test]
    fn a_variable_is_followed_by_name_and_its_near_misses_named() {
        let c = container();
        let v = variable("DATABASE_URL", &c);
        assert!(!v.set);
        assert_eq!(v.similar, vec!["DATABASE_URI"]);
        assert!(v.said().contains("DATABASE_URI is"), "{}", v.said());
        assert!(variable("PORT", &c).set);
        assert!(variable("REDIS_HOST", &c).similar.is_empty());
        assert!(similar("ALLOW_ANONYMOUS_LOGIN", "ALLOW_ANONYMOUS_LOGINS"));
        assert!(!similar("PORT", "HOST"), "short names are not guessed at");
        // No value ever: only names.
        assert!(!v.said().contains("redacted"));
    }
}
