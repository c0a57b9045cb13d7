//! `hosts:`: the Docker hosts besides the one `executor:` reaches, each
//! with an executor of its own. The agent presents the same identity
//! (`executor.ca`, `cert`, `key`) to each; each executor's certificate must
//! name its `server_name`, so an executor presenting another host's
//! certificate is refused at the handshake.

use serde::Deserialize;

use super::{invalid, ConfigError, ExecutorConfig};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// How requests, approvals and the console name the host.
    pub name: String,
    /// `https://ADDRESS:PORT` of its executor.
    pub endpoint: String,
    /// The name its executor's certificate carries; the host's name when
    /// absent (`drydock host add NAME` issues it so).
    #[serde(default)]
    pub server_name: Option<String>,
}

impl HostConfig {
    pub fn server_name(&self) -> &str {
        self.server_name.as_deref().unwrap_or(&self.name)
    }
}

/// One executor as the agent reaches it: the first is `executor:`'s.
#[derive(Debug, Clone, PartialEq)]
pub struct Reach {
    /// `None` for a lone, unnamed executor: nothing shows a host then.
    pub name: Option<String>,
    pub endpoint: String,
    pub server_name: String,
}

/// Every executor the agent uses, `executor:` first.
pub fn reaches(executor: &ExecutorConfig, hosts: &[HostConfig]) -> Vec<Reach> {
    let first = Reach {
        name: executor.host.clone(),
        endpoint: executor.endpoint.clone(),
        server_name: executor.server_name.clone(),
    };
    std::iter::once(first)
        .chain(hosts.iter().map(|h| Reach {
            name: Some(h.name.clone()),
            endpoint: h.endpoint.clone(),
            server_name: h.server_name().to_string(),
        }))
        .collect()
}

fn https(key: &'static str, at: &str, endpoint: &str) -> Result<(), ConfigError> {
    if endpoint.starts_with("https://") {
        return Ok(());
    }
    Err(invalid(
        key,
        format!("{at}`{endpoint}` must be an https:// URL (the executor requires mTLS)"),
    ))
}

/// The name of `executor:`'s host when `executor.host` does not give one.
pub const DEFAULT_HOST_NAME: &str = "local";

/// Names well formed and distinct (`executor:`'s host is `local` unless
/// `executor.host` names it), every endpoint https.
pub fn validate(executor: &ExecutorConfig, hosts: &[HostConfig]) -> Result<(), ConfigError> {
    https("executor.endpoint", "", &executor.endpoint)?;
    let name_rule = "a host name is 1 to 63 lowercase letters, digits, `-` and `.`, as `drydock host add` takes it";
    if let Some(h) = &executor.host {
        if !drydock_proto::approval::is_host_name(h) {
            return Err(invalid("executor.host", format!("`{h}`: {name_rule}")));
        }
    }
    let mut seen: Vec<&str> = vec![executor.host.as_deref().unwrap_or(DEFAULT_HOST_NAME)];
    for (i, h) in hosts.iter().enumerate() {
        let at = format!("hosts[{i}]");
        if !drydock_proto::approval::is_host_name(&h.name) {
            return Err(invalid("hosts", format!("{at}: `{}`: {name_rule}", h.name)));
        }
        if seen.contains(&h.name.as_str()) {
            return Err(invalid(
                "hosts",
                format!(
                    "{at}: host `{}` is named twice (`executor:`'s host is `{}` unless `executor.host` names it); each host needs its own name",
                    h.name, seen[0]
                ),
            ));
        }
        seen.push(&h.name);
        https("hosts", &format!("{at}.endpoint: "), &h.endpoint)?;
        if h.server_name().is_empty() {
            return Err(invalid(
                "hosts",
                format!("{at}.server_name must not be empty"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn executor(host: Option<&str>) -> ExecutorConfig {
        ExecutorConfig {
            endpoint: "https://127.0.0.1:7443".into(),
            server_name: "drydock-executor".into(),
            host: host.map(str::to_string),
            ca: PathBuf::from("ca.pem"),
            cert: PathBuf::from("agent.pem"),
            key: PathBuf::from("agent.key"),
        }
    }

    fn host(name: &str, endpoint: &str) -> HostConfig {
        HostConfig {
            name: name.into(),
            endpoint: endpoint.into(),
            server_name: None,
        }
    }

    #[test]
    fn a_lone_executor_needs_no_name_and_shows_none() {
        validate(&executor(None), &[]).unwrap();
        let r = reaches(&executor(None), &[]);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, None);
    }

    #[test]
    fn other_hosts_are_reached_by_their_own_certificate_name() {
        let hosts = [host("host-b", "https://10.0.0.2:7443")];
        validate(&executor(Some("host-a")), &hosts).unwrap();
        let r = reaches(&executor(Some("host-a")), &hosts);
        assert_eq!(r[0].name.as_deref(), Some("host-a"));
        assert_eq!(r[0].server_name, "drydock-executor");
        assert_eq!(r[1].name.as_deref(), Some("host-b"));
        assert_eq!(r[1].server_name, "host-b", "defaults to the host's name");
    }

    #[test]
    fn bad_host_lists_are_refused_with_the_key_that_is_wrong() {
        let b = host("host-b", "https://10.0.0.2:7443");
        validate(&executor(None), std::slice::from_ref(&b)).unwrap();
        let cases: Vec<(ExecutorConfig, Vec<HostConfig>, &str)> = vec![
            (
                executor(None),
                vec![host("local", "https://x:1")],
                "hosts[0]",
            ),
            (executor(Some("Host A")), vec![], "executor.host"),
            (
                executor(Some("host-a")),
                vec![host("host-a", "https://x:1")],
                "hosts[0]",
            ),
            (executor(Some("a")), vec![b.clone(), b.clone()], "hosts[1]"),
            (
                executor(Some("a")),
                vec![host("host-b", "http://10.0.0.2:7443")],
                "hosts[0].endpoint",
            ),
            (
                executor(Some("a")),
                vec![host("", "https://x:1")],
                "hosts[0]",
            ),
        ];
        for (e, hosts, key) in cases {
            let err = validate(&e, &hosts).unwrap_err().to_string();
            assert!(err.contains(key), "{key}: {err}");
        }
    }
}
