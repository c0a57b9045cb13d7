//! The checks `Config::validate` runs, one per section; each names the key
//! that is wrong and what would be right.

use super::*;

/// One section's check.
type Check = fn(&Config) -> Result<(), ConfigError>;

/// The checks `Config::validate` runs, in order: one per section.
pub(super) const CHECKS: &[Check] = &[
    check_redact,
    check_listen,
    check_tls,
    check_docker,
    check_approvers,
    check_targets,
    check_limits,
    check_timeouts,
    check_audit,
    check_automation,
    check_http_checks,
    check_host,
    check_registries,
    check_build,
];

/// `build` and `actions.build`.
fn check_build(c: &Config) -> Result<(), ConfigError> {
    let registries: Vec<&str> = c.registries.iter().map(|r| r.host.as_str()).collect();
    crate::build::check(&c.build, c.actions.build.enabled, &registries)
}

/// `registries` and `update`.
fn check_registries(c: &Config) -> Result<(), ConfigError> {
    crate::registry::check(&c.registries)?;
    let window = c.update.health_window;
    if window.is_zero() || window > Duration::from_secs(3600) {
        return Err(invalid("update.health_window", "must be in (0, 1h]"));
    }
    let update = &c.actions.update;
    if update.grants && !update.enabled {
        return Err(invalid(
            "actions.update.grants",
            "lets a grant update, but actions.update.enabled is false: enable updates too, or leave grants off",
        ));
    }
    if update.grants && !c.automation.enabled {
        return Err(invalid(
            "actions.update.grants",
            "lets a grant update, but automation.enabled is false: no grant is honoured here",
        ));
    }
    Ok(())
}

/// `host.name`: a name approvals and grants can carry, and one the
/// executor's own certificate names (an agent dialling that name then
/// reaches this executor and no other host's).
fn check_host(c: &Config) -> Result<(), ConfigError> {
    let Some(h) = &c.host else {
        return Ok(());
    };
    if !drydock_proto::approval::is_host_name(&h.name) {
        return Err(invalid(
            "host.name",
            format!(
                "`{}` is not a host name: 1 to 63 lowercase letters, digits, `-` and `.`",
                h.name.chars().take(64).collect::<String>()
            ),
        ));
    }
    let names = certificate_names(&c.tls.cert).map_err(|why| invalid("tls.cert", why))?;
    if !names.iter().any(|n| n == &h.name) {
        return Err(invalid(
            "host.name",
            format!(
                "`{}` is not among the names of this executor's certificate ({}): issue it one with `drydock host add {}`",
                h.name,
                names.join(", "),
                h.name
            ),
        ));
    }
    Ok(())
}

/// The DNS names and IP addresses a PEM certificate's SAN lists.
fn certificate_names(path: &Path) -> Result<Vec<String>, String> {
    use x509_parser::extensions::GeneralName;
    let pem = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem)
        .map_err(|e| format!("{} is not a PEM certificate: {e}", path.display()))?;
    let cert = pem
        .parse_x509()
        .map_err(|e| format!("{} is not a certificate: {e}", path.display()))?;
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Ok(Vec::new());
    };
    Ok(san
        .value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some((*d).to_string()),
            GeneralName::IPAddress(ip) => match ip.len() {
                4 => <[u8; 4]>::try_from(*ip)
                    .ok()
                    .map(|b| std::net::IpAddr::from(b).to_string()),
                16 => <[u8; 16]>::try_from(*ip)
                    .ok()
                    .map(|b| std::net::IpAddr::from(b).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect())
}

/// `redact.env_allow`: names of environment variables.
fn check_redact(c: &Config) -> Result<(), ConfigError> {
    if let Some(bad) = c.redact.env_allow.iter().find(|n| {
        n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
    }) {
        return Err(invalid(
            "redact.env_allow",
            format!("`{bad}` is not an environment variable name (letters, digits, `_`, `.`, `-`)"),
        ));
    }
    Ok(())
}

/// `listen`: an address to bind.
fn check_listen(c: &Config) -> Result<(), ConfigError> {
    drydock_daemon::config::socket_addr("listen", &c.listen)?;
    Ok(())
}

/// `tls`: the files exist, the key is private, someone may connect.
fn check_tls(c: &Config) -> Result<(), ConfigError> {
    for (key, path) in [
        ("tls.cert", &c.tls.cert),
        ("tls.key", &c.tls.key),
        ("tls.client_ca", &c.tls.client_ca),
    ] {
        if !path.is_file() {
            return Err(invalid(
                key,
                format!("file {} does not exist", path.display()),
            ));
        }
    }
    drydock_daemon::files::check_private("tls.key", &c.tls.key)?;
    if c.tls.allowed_clients.is_empty() {
        return Err(invalid(
            "tls.allowed_clients",
            "must name at least one client identity (for example drydock-agent)",
        ));
    }
    Ok(())
}

/// `docker.endpoint`: a scheme the adapter speaks.
fn check_docker(c: &Config) -> Result<(), ConfigError> {
    if !c.docker.endpoint.starts_with("unix://")
        && !c.docker.endpoint.starts_with("tcp://")
        && !c.docker.endpoint.starts_with("http://")
    {
        return Err(invalid(
            "docker.endpoint",
            format!(
                "`{}` must start with unix://, tcp:// or http://",
                c.docker.endpoint
            ),
        ));
    }
    Ok(())
}

/// `approvers`: unique ids and well-formed public keys.
fn check_approvers(c: &Config) -> Result<(), ConfigError> {
    let mut seen = std::collections::HashSet::new();
    for approver in &c.approvers {
        if approver.id.is_empty() || approver.id.len() > 64 {
            return Err(invalid("approvers[].id", "must be 1 to 64 characters"));
        }
        // The audit row lists several signers separated by commas.
        if approver
            .id
            .chars()
            .any(|ch| ch == ',' || ch.is_control() || ch.is_whitespace())
        {
            return Err(invalid(
                "approvers[].id",
                format!(
                    "`{}` has a comma, a space or a control character",
                    approver.id.escape_debug()
                ),
            ));
        }
        if !seen.insert(approver.id.as_str()) {
            return Err(invalid(
                "approvers[].id",
                format!("`{}` is listed twice", approver.id),
            ));
        }
        drydock_proto::approval::ApproverKey::parse(&approver.public_key).map_err(|e| {
            invalid(
                "approvers[].public_key",
                format!("approver `{}`: {e}", approver.id),
            )
        })?;
    }
    check_quorum(c)
}

/// `approvals.required`: actions or tiers, each at most the number of
/// distinct approver keys (more could never be met).
fn check_quorum(c: &Config) -> Result<(), ConfigError> {
    let mut keys: Vec<Vec<u8>> = c
        .approvers
        .iter()
        .filter_map(|a| drydock_proto::approval::ApproverKey::parse(&a.public_key).ok())
        .map(|k| k.raw().to_vec())
        .collect();
    keys.sort();
    keys.dedup();
    for (what, n) in &c.approvals.required {
        let known = matches!(what.as_str(), "t1" | "t2")
            || drydock_proto::approval::WriteAction::parse(what).is_some();
        if !known {
            return Err(invalid(
                "approvals.required",
                format!("`{what}` is neither a write action (restart, rollback, update, ...) nor a tier (t1, t2)"),
            ));
        }
        if *n == 0 || *n as usize > keys.len() {
            return Err(invalid(
                "approvals.required",
                format!(
                    "`{what}: {n}` must be from 1 to the number of distinct approver keys in approvers ({})",
                    keys.len()
                ),
            ));
        }
    }
    Ok(())
}

/// `targets`: present, with at least one selector.
fn check_targets(c: &Config) -> Result<(), ConfigError> {
    let Some(targets) = &c.targets else {
        return Err(invalid(
            "targets",
            "is required: name the containers drydock may see and act on, for example `targets: {allow_names: [\"shop-*\"]}` or `{allow_compose_projects: [shop]}` (`drydock init` writes one)",
        ));
    };
    if let Some(services) = &targets.services {
        if services.is_empty() {
            return Err(invalid(
                "targets.services",
                "no selector set: set allow_names, allow_labels or allow_stacks (allow_names: [\"*\"] is every service of the cluster), or remove the section to see no service",
            ));
        }
        return Ok(());
    }
    if !targets.selects_containers() {
        return Err(invalid(
            "targets",
            "no selector set: set allow_names, allow_labels or allow_compose_projects (allow_names: [\"*\"] is every container on the host), or `services` for Swarm services",
        ));
    }
    Ok(())
}

/// `limits`: log caps and rate limits within their bounds.
fn check_limits(c: &Config) -> Result<(), ConfigError> {
    if c.limits.logs_max_lines == 0 || c.limits.logs_max_lines > 10_000 {
        return Err(invalid(
            "limits.logs_max_lines",
            format!("{} is outside 1..=10000", c.limits.logs_max_lines),
        ));
    }
    if c.limits.logs_max_bytes < 1024 || c.limits.logs_max_bytes > 16 * 1024 * 1024 {
        return Err(invalid(
            "limits.logs_max_bytes",
            format!("{} is outside 1024..=16777216", c.limits.logs_max_bytes),
        ));
    }
    if c.limits.logs_default_tail == 0 || c.limits.logs_default_tail > c.limits.logs_max_lines {
        return Err(invalid(
            "limits.logs_default_tail",
            "must be between 1 and limits.logs_max_lines",
        ));
    }
    for (key, n) in [
        ("limits.calls_per_second", c.limits.calls_per_second),
        ("limits.burst", c.limits.burst),
        (
            "limits.max_concurrent_calls_per_connection",
            c.limits.max_concurrent_calls_per_connection,
        ),
        (
            "limits.max_concurrent_streams",
            c.limits.max_concurrent_streams,
        ),
    ] {
        if n == 0 || n > 100_000 {
            return Err(invalid(key, format!("{n} is outside 1..=100000")));
        }
    }
    Ok(())
}

/// `timeouts`: none zero, approvals not longer than a day.
fn check_timeouts(c: &Config) -> Result<(), ConfigError> {
    for (key, d) in [
        ("timeouts.read", c.timeouts.read),
        ("timeouts.logs", c.timeouts.logs),
        ("timeouts.write", c.timeouts.write),
        ("timeouts.max_approval_ttl", c.timeouts.max_approval_ttl),
        ("timeouts.http", c.timeouts.http),
    ] {
        if d.is_zero() {
            return Err(invalid(key, "must be greater than zero"));
        }
    }
    if c.timeouts.max_approval_ttl > MAX_APPROVAL_TTL_BOUND {
        return Err(invalid(
            "timeouts.max_approval_ttl",
            format!(
                "{} is longer than the bound of 24h: an approval is a one-off signature, not a standing grant",
                humantime::format_duration(c.timeouts.max_approval_ttl)
            ),
        ));
    }
    Ok(())
}

/// `audit`: the signing key, checkpoints and rotation.
fn check_audit(c: &Config) -> Result<(), ConfigError> {
    if let Some(key) = &c.audit.signing_key {
        drydock_daemon::files::check_private("audit.signing_key", key)?;
        c.audit_signing_key()?;
    }
    if c.audit.checkpoint_every == 0 || c.audit.checkpoint_every > 1_000_000 {
        return Err(invalid(
            "audit.checkpoint_every",
            format!("{} is outside 1..=1000000", c.audit.checkpoint_every),
        ));
    }
    if c.audit.max_size < MIN_AUDIT_MAX_SIZE {
        return Err(invalid(
            "audit.max_size",
            format!(
                "{} bytes is below the minimum of 64KiB; write it like 64MiB",
                c.audit.max_size
            ),
        ));
    }
    if c.audit.keep_segments == 0 || c.audit.keep_segments > 100_000 {
        return Err(invalid(
            "audit.keep_segments",
            format!(
                "{} is outside 1..=100000 (at least one rotated segment is kept)",
                c.audit.keep_segments
            ),
        ));
    }
    Ok(())
}

/// `automation`: the grant lifetime bound, and a revocation list when it is on.
fn check_automation(c: &Config) -> Result<(), ConfigError> {
    if c.automation.max_grant_ttl.is_zero() || c.automation.max_grant_ttl > MAX_GRANT_TTL_BOUND {
        return Err(invalid(
            "automation.max_grant_ttl",
            format!(
                "{} is outside (0, 90d]",
                humantime::format_duration(c.automation.max_grant_ttl)
            ),
        ));
    }
    if c.automation.enabled && c.automation.revocations.is_none() {
        return Err(invalid(
            "automation.revocations",
            "is required when automation is enabled: without a revocation list a grant could not be withdrawn before it expires",
        ));
    }
    Ok(())
}

/// `http_checks`: service names and URLs.
fn check_http_checks(c: &Config) -> Result<(), ConfigError> {
    for (service, url) in &c.http_checks {
        if service.is_empty() || service.len() > 64 {
            return Err(invalid(
                "http_checks",
                format!("service name `{service}` must be 1 to 64 characters"),
            ));
        }
        crate::http_check::parse_url(url)
            .map_err(|e| invalid("http_checks", format!("{service}: {e}")))?;
    }
    Ok(())
}
