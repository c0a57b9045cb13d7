//! Domain values become wire values here, and nothing leaves without
//! passing the redactor: labels, environment, health output.

use super::*;

/// Label values of secret-looking keys are withheld, others redacted.
pub(super) fn shape_labels(labels: BTreeMap<String, String>) -> (HashMap<String, String>, u32) {
    let mut redactions = 0;
    let shaped = labels
        .into_iter()
        .map(|(k, v)| {
            let (v, n) = if redact::is_secret_name(&k) && !v.is_empty() {
                (redact::REDACTED.to_string(), 1)
            } else {
                redact::redact_text(&redact::neutralise_controls(&v))
            };
            redactions += n;
            (redact::neutralise_controls(&k), v)
        })
        .collect();
    (shaped, redactions)
}

pub(super) fn shape_health(h: Health) -> (pb::HealthState, u32) {
    let mut redactions = 0;
    let log = h
        .log
        .into_iter()
        .map(|p| {
            let (output, n) = redact::shape_multiline(&p.output);
            redactions += n;
            pb::HealthLogEntry {
                exit_code: p.exit_code,
                output,
                start: p.start,
                end: p.end,
            }
        })
        .collect();
    (
        pb::HealthState {
            status: h.status.to_string(),
            failing_streak: h.failing_streak,
            log,
        },
        redactions,
    )
}

pub(super) fn shape_healthcheck(h: HealthcheckSpec) -> pb::HealthcheckConfig {
    pb::HealthcheckConfig {
        // Each argument with the ones before it as context:
        // `["redis-cli", "-a", "pw"]` withholds `pw`.
        test: redact::redact_argv(&h.test).0,
        interval_ms: h.interval.as_millis() as u64,
        timeout_ms: h.timeout.as_millis() as u64,
        retries: h.retries,
        start_period_ms: h.start_period.as_millis() as u64,
    }
}

/// Step 6 for inspect: nothing secret or terminal-hostile leaves.
pub(super) fn shape_inspect(
    d: ContainerDetails,
    env_policy: &redact::EnvPolicy,
) -> pb::InspectContainerResponse {
    let mut redactions = 0;
    let env = d
        .env
        .iter()
        .map(|e| {
            let (line, n) = redact::redact_env_with(e, env_policy);
            redactions += n;
            line
        })
        .collect();
    let (labels, n) = shape_labels(d.labels);
    redactions += n;
    let (health, n) = shape_health(d.health);
    redactions += n;
    let (error, n) = redact::redact_text(&redact::neutralise_controls(&d.state.error));
    redactions += n;
    // Entrypoint and command as one argument list, so that `-p` in one and
    // its value in the other are seen together, then split back.
    let argv: Vec<String> = d.entrypoint.iter().chain(&d.command).cloned().collect();
    let (argv, n) = redact::redact_argv(&argv);
    redactions += n;
    let (entrypoint, command) = argv.split_at(d.entrypoint.len().min(argv.len()));
    let mut text = |t: &str| {
        let (t, n) = redact::redact_text(&redact::neutralise_controls(t));
        redactions += n;
        t
    };
    let mounts = d
        .mounts
        .iter()
        .map(|m| pb::Mount {
            r#type: redact::neutralise_controls(&m.kind),
            source: text(&m.source),
            destination: text(&m.destination),
            rw: m.rw,
        })
        .collect();
    let user = text(&d.user);
    let working_dir = text(&d.working_dir);
    pb::InspectContainerResponse {
        mounts,
        entrypoint: entrypoint.to_vec(),
        command: command.to_vec(),
        user,
        working_dir,
        image_id: redact::neutralise_controls(&d.image_id),
        network_mode: redact::neutralise_controls(&d.network_mode),
        // Asked apart (docker.rs `image_present`), by the service.
        image_missing: false,
        // Keyed by the service (`env_hashes`), which holds the key.
        env_hashes: Vec::new(),
        id: d.id,
        name: redact::neutralise_controls(&d.name),
        image: redact::neutralise_controls(&d.image),
        state: Some(pb::ContainerState {
            status: d.state.status.to_string(),
            running: d.state.running,
            restarting: d.state.restarting,
            oom_killed: d.state.oom_killed,
            dead: d.state.dead,
            exit_code: d.state.exit_code,
            error,
            started_at: d.state.started_at,
            finished_at: d.state.finished_at,
        }),
        health: Some(health),
        healthcheck: d.healthcheck.map(shape_healthcheck),
        labels,
        env,
        restart_count: d.restart_count,
        restart_policy: d.restart_policy,
        restart_max_retries: d.restart_max_retries,
        read_only_rootfs: d.read_only_rootfs,
        networks: d.networks,
        aliases: d.aliases,
        created: d.created,
        memory_limit_bytes: d.memory_limit,
        stop_timeout_secs: d.stop_timeout_secs.unwrap_or(0),
        requested_host_ports: d.requested_host_ports,
        ip_addresses: d.ip_addresses,
        redactions,
    }
}

/// Log lines through the redactor, as one window (a secret split over two
/// lines is still seen), with the counts in the audit row.
pub(super) fn shape_log_lines(
    call: &mut Call,
    raw: Vec<crate::docker::RawLogLine>,
    truncated: bool,
) -> pb::LogsResponse {
    let mut shaper = redact::LogShaper::for_window(raw.iter().map(|l| l.bytes.as_slice()));
    let cut_redactions: u32 = raw.iter().map(|l| l.redactions).sum();
    let lines: Vec<pb::LogLine> = raw
        .into_iter()
        .map(|l| pb::LogLine {
            stream: if l.stream == LogStream::Stderr {
                "stderr"
            } else {
                "stdout"
            }
            .into(),
            text: shaper.line(&l.bytes),
            time_unix_nanos: l.time_nanos,
        })
        .collect();
    let redactions = shaper.redactions().saturating_add(cut_redactions);
    call.entry.result = format!(
        "lines={} truncated={truncated} redactions={redactions}",
        lines.len()
    );
    pb::LogsResponse {
        lines,
        truncated,
        redactions,
    }
}

/// Each environment variable's name with an HMAC-SHA256 of its value under
/// the executor's own key (the first 16 bytes, hex): equal values hash
/// equal, and without the key no guess can be checked against a hash. The
/// key's inner and outer states are computed once (`ring::hmac::Key`), so
/// a value costs two SHA-256 blocks, not four.
pub(super) fn env_hashes(env: &[String], key: &ring::hmac::Key) -> Vec<pb::EnvHash> {
    env.iter()
        .map(|e| {
            let (name, value) = e.split_once('=').unwrap_or((e.as_str(), ""));
            let mac = ring::hmac::sign(key, value.as_bytes());
            pb::EnvHash {
                name: truncate_for_audit(&redact::neutralise_controls(name)),
                hash: crate::audit::hex_string(&mac.as_ref()[..16]),
            }
        })
        .collect()
}

#[cfg(test)]
mod env_hash_tests {
    use super::*;

    fn key(bytes: &[u8]) -> ring::hmac::Key {
        ring::hmac::Key::new(ring::hmac::HMAC_SHA256, bytes)
    }

    #[test]
    fn equal_values_hash_equal_and_the_key_matters() {
        let k = [7u8; 32];
        let env = [
            "A=secret".to_string(),
            "B=secret".to_string(),
            "C=other".to_string(),
            "D".to_string(),
        ];
        let h = env_hashes(&env, &key(&k));
        assert_eq!(
            h.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["A", "B", "C", "D"]
        );
        assert_eq!(h[0].hash, h[1].hash);
        assert_ne!(h[0].hash, h[2].hash);
        assert_eq!(h[0].hash.len(), 32);
        assert!(!h[0].hash.contains("secret"));
        let other = env_hashes(&env, &key(&[8u8; 32]));
        assert_ne!(h[0].hash, other[0].hash);
        // An HMAC, not a plain hash of key and value.
        let plain = {
            use sha2::{Digest as _, Sha256};
            let mut d = Sha256::new();
            d.update(k);
            d.update(b"secret");
            hex::encode(&d.finalize()[..16])
        };
        assert_ne!(h[0].hash, plain);
    }

    /// The hashes stored in earlier evidence stay comparable: the value is
    /// RFC 4231's HMAC-SHA256 (test case 2; a key shorter than a block is
    /// zero-padded, so the 32-byte key stored here gives the same MAC).
    #[test]
    fn the_mac_is_rfc_4231_hmac_sha256() {
        let mut k = [0u8; 32];
        k[..4].copy_from_slice(b"Jefe");
        let h = env_hashes(&["Q=what do ya want for nothing?".to_string()], &key(&k));
        assert_eq!(h[0].hash, "5bdcc146bf60754e6a042426089575c7");
    }
}
