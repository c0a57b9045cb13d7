//! `GET /containers/{id}/json`, read raw and parsed into only the fields
//! diagnosis uses. bollard's model of the answer has hundreds of fields,
//! and decoding them all was a quarter of an `InspectContainer`'s cost;
//! serde skips what is not named here.
//!
//! Every field may be missing or `null` in some engine version, so each is
//! optional and defaults.

use std::collections::HashMap;

use serde::Deserialize;

use super::{
    ns, ContainerDetails, ContainerState, Health, HealthProbe, HealthStatus, HealthcheckSpec,
    MountInfo, StateInfo,
};

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Inspect {
    id: Option<String>,
    name: Option<String>,
    image: Option<String>,
    created: Option<String>,
    restart_count: Option<i64>,
    state: Option<State>,
    config: Option<Config>,
    host_config: Option<HostConfig>,
    network_settings: Option<NetworkSettings>,
    mounts: Option<Vec<Mount>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct State {
    status: Option<String>,
    running: Option<bool>,
    restarting: Option<bool>,
    #[serde(rename = "OOMKilled")]
    oom_killed: Option<bool>,
    dead: Option<bool>,
    exit_code: Option<i64>,
    error: Option<String>,
    started_at: Option<String>,
    finished_at: Option<String>,
    health: Option<HealthState>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct HealthState {
    status: Option<String>,
    failing_streak: Option<i64>,
    log: Option<Vec<Probe>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Probe {
    start: Option<String>,
    end: Option<String>,
    exit_code: Option<i64>,
    output: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Config {
    tty: Option<bool>,
    entrypoint: Option<Vec<String>>,
    cmd: Option<Vec<String>>,
    user: Option<String>,
    working_dir: Option<String>,
    image: Option<String>,
    healthcheck: Option<Healthcheck>,
    labels: Option<HashMap<String, String>>,
    env: Option<Vec<String>>,
    stop_timeout: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Healthcheck {
    test: Option<Vec<String>>,
    interval: Option<i64>,
    timeout: Option<i64>,
    retries: Option<i64>,
    start_period: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct HostConfig {
    port_bindings: Option<HashMap<String, Option<Vec<PortBinding>>>>,
    tmpfs: Option<HashMap<String, String>>,
    network_mode: Option<String>,
    memory: Option<i64>,
    restart_policy: Option<RestartPolicy>,
    readonly_rootfs: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct PortBinding {
    host_port: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct RestartPolicy {
    name: Option<String>,
    maximum_retry_count: Option<i64>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct NetworkSettings {
    networks: Option<HashMap<String, Endpoint>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Endpoint {
    aliases: Option<Vec<String>>,
    #[serde(rename = "IPAddress")]
    ip_address: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "PascalCase", default)]
struct Mount {
    #[serde(rename = "Type")]
    kind: Option<String>,
    name: Option<String>,
    source: Option<String>,
    destination: Option<String>,
    #[serde(rename = "RW")]
    rw: Option<bool>,
}

/// The engine's answer, reduced to `ContainerDetails`.
pub(super) fn parse(body: &[u8]) -> Result<ContainerDetails, String> {
    // Validated as UTF-8 once, whole: parsed from bytes, serde would check
    // each string it keeps on its own, a sixth of the decoding's cost.
    let body = std::str::from_utf8(body).map_err(|e| format!("unreadable inspect answer: {e}"))?;
    let r: Inspect =
        serde_json::from_str(body).map_err(|e| format!("unreadable inspect answer: {e}"))?;
    let config = r.config.unwrap_or_default();
    let state = r.state.unwrap_or_default();
    let health = state.health.unwrap_or_default();
    let healthcheck = config.healthcheck.and_then(|h| {
        let test = h.test.unwrap_or_default();
        // ["NONE"] disables an image's healthcheck.
        if test.is_empty() || test.first().map(String::as_str) == Some("NONE") {
            return None;
        }
        Some(HealthcheckSpec {
            test,
            interval: ns(h.interval),
            timeout: ns(h.timeout),
            retries: u32::try_from(h.retries.unwrap_or(0).max(0)).unwrap_or(u32::MAX),
            start_period: ns(h.start_period),
        })
    });
    let networks = r
        .network_settings
        .and_then(|n| n.networks)
        .unwrap_or_default();
    let mut aliases: Vec<String> = networks
        .values()
        .flat_map(|e| e.aliases.clone().unwrap_or_default())
        .collect();
    aliases.sort();
    aliases.dedup();
    let mut network_names: Vec<String> = networks.keys().cloned().collect();
    network_names.sort();
    let mut ip_addresses: Vec<String> = networks
        .into_values()
        .filter_map(|e| e.ip_address)
        .filter(|ip| !ip.is_empty())
        .collect();
    ip_addresses.sort();
    let host_config = r.host_config.unwrap_or_default();
    let mut requested_host_ports: Vec<u32> = host_config
        .port_bindings
        .unwrap_or_default()
        .into_values()
        .flatten()
        .flatten()
        .filter_map(|b| b.host_port.as_deref().and_then(|p| p.parse().ok()))
        .collect();
    requested_host_ports.sort_unstable();
    requested_host_ports.dedup();
    let mut mounts: Vec<MountInfo> = r
        .mounts
        .unwrap_or_default()
        .into_iter()
        .map(|m| MountInfo {
            kind: m.kind.unwrap_or_default(),
            source: m
                .name
                .filter(|n| !n.is_empty())
                .or(m.source)
                .unwrap_or_default(),
            destination: m.destination.unwrap_or_default(),
            rw: m.rw.unwrap_or(false),
        })
        .collect();
    // `--tmpfs` mounts are only in HostConfig, not in Mounts.
    let mut tmpfs: Vec<(String, String)> =
        host_config.tmpfs.unwrap_or_default().into_iter().collect();
    tmpfs.sort();
    mounts.extend(tmpfs.into_iter().map(|(destination, options)| MountInfo {
        kind: "tmpfs".into(),
        source: "tmpfs".into(),
        rw: !options.split(',').any(|o| o.trim() == "ro"),
        destination,
    }));
    Ok(ContainerDetails {
        mounts,
        tty: config.tty.unwrap_or(false),
        entrypoint: config.entrypoint.unwrap_or_default(),
        command: config.cmd.unwrap_or_default(),
        user: config.user.unwrap_or_default(),
        working_dir: config.working_dir.unwrap_or_default(),
        image_id: r.image.unwrap_or_default(),
        network_mode: host_config.network_mode.unwrap_or_default(),
        id: r.id.unwrap_or_default(),
        name: r
            .name
            .unwrap_or_default()
            .trim_start_matches('/')
            .to_string(),
        image: config.image.unwrap_or_default(),
        state: StateInfo {
            status: ContainerState::parse(&state.status.unwrap_or_default()),
            running: state.running.unwrap_or(false),
            restarting: state.restarting.unwrap_or(false),
            oom_killed: state.oom_killed.unwrap_or(false),
            dead: state.dead.unwrap_or(false),
            exit_code: state.exit_code.unwrap_or(0),
            error: state.error.unwrap_or_default(),
            started_at: state.started_at.unwrap_or_default(),
            finished_at: state.finished_at.unwrap_or_default(),
        },
        health: Health {
            status: health
                .status
                .filter(|s| !s.is_empty())
                .map_or(HealthStatus::None, |s| HealthStatus::parse(&s)),
            failing_streak: u32::try_from(health.failing_streak.unwrap_or(0).max(0))
                .unwrap_or(u32::MAX),
            log: health
                .log
                .unwrap_or_default()
                .into_iter()
                .map(|p| HealthProbe {
                    exit_code: p.exit_code.unwrap_or(0),
                    output: p.output.unwrap_or_default(),
                    start: p.start.unwrap_or_default(),
                    end: p.end.unwrap_or_default(),
                })
                .collect(),
        },
        healthcheck,
        labels: config.labels.unwrap_or_default().into_iter().collect(),
        env: config.env.unwrap_or_default(),
        restart_count: r.restart_count.unwrap_or(0),
        memory_limit: host_config.memory.unwrap_or(0),
        stop_timeout_secs: config.stop_timeout.and_then(|t| u32::try_from(t).ok()),
        requested_host_ports,
        ip_addresses,
        restart_max_retries: host_config
            .restart_policy
            .as_ref()
            .and_then(|p| p.maximum_retry_count)
            .unwrap_or(0),
        restart_policy: host_config
            .restart_policy
            .and_then(|p| p.name)
            .unwrap_or_default(),
        read_only_rootfs: host_config.readonly_rootfs.unwrap_or(false),
        networks: network_names,
        aliases,
        created: r.created.unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine's answer as 20.10 and later give it, nulls included.
    const ANSWER: &str = r#"{
      "Id": "4f1c0ffee", "Name": "/shop-web-1", "Image": "sha256:abc", "Created": "2026-12-01T09:00:00Z",
      "RestartCount": 2, "Driver": "overlay2", "GraphDriver": {"Data": {"x": "y"}},
      "State": {"Status": "running", "Running": true, "Paused": false, "Restarting": false,
        "OOMKilled": true, "Dead": false, "Pid": 42, "ExitCode": 137, "Error": "",
        "StartedAt": "2026-12-01T09:00:01Z", "FinishedAt": "0001-01-01T00:00:00Z",
        "Health": {"Status": "unhealthy", "FailingStreak": 3,
          "Log": [{"Start": "s", "End": "e", "ExitCode": 1, "Output": "curl: (7) refused"}]}},
      "Config": {"Tty": false, "Entrypoint": null, "Cmd": ["serve", "--port", "80"], "User": "app",
        "WorkingDir": "/srv", "Image": "shop/web:2", "Env": ["A=1"], "Labels": {"l": "v"},
        "StopTimeout": 5,
        "Healthcheck": {"Test": ["CMD", "curl", "-f", "localhost"], "Interval": 2000000000,
          "Timeout": 1000000000, "Retries": 3, "StartPeriod": 0}},
      "HostConfig": {"NetworkMode": "shop_default", "Memory": 67108864,
        "RestartPolicy": {"Name": "on-failure", "MaximumRetryCount": 5},
        "PortBindings": {"80/tcp": [{"HostIp": "", "HostPort": "8080"}], "443/tcp": null},
        "Tmpfs": {"/run": "ro,size=1m"}, "ReadonlyRootfs": true},
      "NetworkSettings": {"Networks": {"shop_default": {"Aliases": ["web", "shop-web-1"],
        "IPAddress": "172.18.0.3"}, "bridge": {"Aliases": null, "IPAddress": ""}}},
      "Mounts": [{"Type": "volume", "Name": "data", "Source": "/var/lib/docker/volumes/data/_data",
        "Destination": "/data", "RW": true}]
    }"#;

    #[test]
    fn the_fields_diagnosis_uses_are_read_and_the_rest_skipped() {
        let d = parse(ANSWER.as_bytes()).unwrap();
        assert_eq!(
            (d.id.as_str(), d.name.as_str()),
            ("4f1c0ffee", "shop-web-1")
        );
        assert_eq!(
            (d.image.as_str(), d.image_id.as_str()),
            ("shop/web:2", "sha256:abc")
        );
        assert!(d.state.running && d.state.oom_killed && !d.state.restarting);
        assert_eq!(
            (d.state.status.as_str(), d.state.exit_code),
            ("running", 137)
        );
        assert_eq!(
            (d.health.status.as_str(), d.health.failing_streak),
            ("unhealthy", 3)
        );
        assert_eq!(d.health.log[0].output, "curl: (7) refused");
        let hc = d.healthcheck.unwrap();
        assert_eq!((hc.interval.as_secs(), hc.retries), (2, 3));
        assert!(d.entrypoint.is_empty());
        assert_eq!(d.command, ["serve", "--port", "80"]);
        assert_eq!((d.user.as_str(), d.working_dir.as_str()), ("app", "/srv"));
        assert_eq!(d.env, ["A=1"]);
        assert_eq!(d.labels.get("l").map(String::as_str), Some("v"));
        assert_eq!(d.stop_timeout_secs, Some(5));
        assert_eq!((d.memory_limit, d.restart_count), (67_108_864, 2));
        assert_eq!(d.restart_policy, "on-failure");
        assert_eq!(d.restart_max_retries, 5);
        assert!(d.read_only_rootfs);
        assert_eq!(d.network_mode, "shop_default");
        assert_eq!(d.requested_host_ports, [8080]);
        assert_eq!(d.networks, ["bridge", "shop_default"]);
        assert_eq!(d.aliases, ["shop-web-1", "web"]);
        assert_eq!(d.ip_addresses, ["172.18.0.3"]);
        assert_eq!(d.mounts.len(), 2);
        assert_eq!(
            (
                d.mounts[0].kind.as_str(),
                d.mounts[0].source.as_str(),
                d.mounts[0].rw
            ),
            ("volume", "data", true)
        );
        assert_eq!(
            (
                d.mounts[1].kind.as_str(),
                d.mounts[1].destination.as_str(),
                d.mounts[1].rw
            ),
            ("tmpfs", "/run", false)
        );
    }

    #[test]
    fn missing_fields_default_and_a_disabled_healthcheck_is_none() {
        let d =
            parse(br#"{"Id": "x", "Config": {"Healthcheck": {"Test": ["NONE"]}}, "State": null}"#)
                .unwrap();
        assert_eq!(d.id, "x");
        assert!(d.healthcheck.is_none());
        assert_eq!(d.health.status, HealthStatus::None);
        assert!(!d.state.running);
        assert!(parse(b"not json")
            .unwrap_err()
            .contains("unreadable inspect answer"));
    }
}
