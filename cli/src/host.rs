//! `drydock host add NAME`: what another Docker host's executor needs, from
//! the same CA: a certificate that names the host (so an agent dialling
//! that name accepts no other host's executor), its keys, and an
//! `executor.yaml` with `host.name` (so it refuses approvals and grants
//! made for any other host). Written into one folder to copy to the host;
//! the CA key and the approver key never go in it.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _};

use crate::home::{write_file, Home, HostLayout, DEFAULT_EXECUTOR_PORT};
use crate::pki::{self, Authority, Usage};

/// What `host add` wrote, and where the agent reaches it.
#[derive(Debug)]
pub struct AddedHost {
    pub dir: PathBuf,
    pub files: Vec<PathBuf>,
    pub port: u16,
}

/// The executor's listen address: the first `--address` that is an IP (the
/// private address it serves on), else every interface; on the home's
/// executor port.
fn listen_on(addresses: &[String], port: u16) -> String {
    match addresses
        .iter()
        .find_map(|a| a.parse::<std::net::IpAddr>().ok())
    {
        Some(std::net::IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        Some(ip) => format!("{ip}:{port}"),
        None => format!("0.0.0.0:{port}"),
    }
}

/// The port of the home's executor (`listen: ADDR:PORT`).
fn home_port(home_yaml: &str) -> u16 {
    home_yaml
        .lines()
        .find_map(|l| l.strip_prefix("listen:"))
        .and_then(|l| l.trim().rsplit(':').next()?.parse().ok())
        .unwrap_or(DEFAULT_EXECUTOR_PORT)
}

/// The host's `executor.yaml`: this home's (its approvers, policy and
/// limits), listening on the host's address, with its host name required in
/// every approval and grant.
fn host_config(home_yaml: &str, name: &str, listen: &str) -> anyhow::Result<String> {
    if home_yaml.lines().any(|l| l.starts_with("host:")) {
        bail!("this home's executor.yaml already names a host; add hosts from a home whose executor.yaml has no `host:` section");
    }
    let mut replaced = false;
    let body: Vec<String> = home_yaml
        .lines()
        .map(|l| {
            if l.starts_with("listen:") {
                replaced = true;
                format!("listen: {listen}")
            } else {
                l.to_string()
            }
        })
        .collect();
    if !replaced {
        bail!("this home's executor.yaml has no `listen:` line to adapt");
    }
    Ok(format!(
        "{}\n# This executor's host: approvals and grants must name it (`drydock host add`).\nhost:\n  name: {name}\n  require: true\n",
        body.join("\n")
    ))
}

/// A production layout's redaction (`drydock init --layout compose` and
/// `systemd` write it): a home made for the local layout withholds only
/// secret-looking values, and a host deployed like compose or systemd
/// withholds every value but the allow list.
fn production_redaction(config: &str) -> String {
    let allow = crate::home::PRODUCTION_ENV_ALLOW.join(", ");
    config
        .lines()
        .map(|l| match l {
            "  env: secret-looking" => format!(
                "  # The production layouts' policy (drydock host add --layout compose|systemd).\n  env: all\n  env_allow: [{allow}]"
            ),
            other => other.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The config's paths as deploy/systemd/drydock-executor.service gives
/// them: certificates in /etc/drydock/pki, the key as the unit's
/// credential, the state in its StateDirectory. The unit hands over no
/// audit signing key, so checkpoints go unsigned there.
const SYSTEMD_PATHS: &[(&str, Option<&str>)] = &[
    (
        "  cert: pki/executor.crt",
        Some("  cert: /etc/drydock/pki/executor.crt"),
    ),
    (
        "  key: pki/executor.key",
        Some("  key: /run/credentials/drydock-executor.service/executor.key"),
    ),
    (
        "  client_ca: pki/ca.crt",
        Some("  client_ca: /etc/drydock/pki/ca.crt"),
    ),
    (
        "  path: state/audit.db",
        Some("  path: /var/lib/drydock-executor/audit.db"),
    ),
    ("  signing_key: pki/audit.key", None),
    (
        "  revocations: state/revoked-grants",
        Some("  revocations: /var/lib/drydock-executor/revoked-grants"),
    ),
];

/// `config` with the systemd unit's paths, every one of which it must have.
fn for_systemd(config: &str) -> anyhow::Result<String> {
    for (line, _) in SYSTEMD_PATHS {
        if !config.lines().any(|l| l == *line) {
            bail!(
                "this home's executor.yaml has no `{}` line (was it edited?): write the host's config from deploy/systemd/executor.yaml instead",
                line.trim()
            );
        }
    }
    Ok(config
        .lines()
        .filter_map(
            |l| match SYSTEMD_PATHS.iter().find(|(from, _)| *from == l) {
                Some((_, to)) => to.map(str::to_string),
                None => Some(l.to_string()),
            },
        )
        .collect::<Vec<_>>()
        .join("\n")
        + "\n")
}

/// Write `DIR/{executor.yaml, pki/…, state/…}` for host `name`, whose
/// executor runs as `layout` says (local and compose read the same files;
/// systemd gets the unit's paths).
pub fn add(
    home: &Home,
    name: &str,
    addresses: &[String],
    layout: HostLayout,
    out: Option<&Path>,
    force: bool,
) -> anyhow::Result<AddedHost> {
    if !drydock_proto::approval::is_host_name(name) {
        bail!("`{name}` is not a host name: 1 to 63 lowercase letters, digits, `-` and `.`, starting with a letter or digit");
    }
    let ca_key = home.path("pki/ca.key");
    let key_pem = std::fs::read_to_string(&ca_key).with_context(|| {
        format!(
            "cannot read the CA key {}: run `drydock host add` where `drydock init` made the CA",
            ca_key.display()
        )
    })?;
    let cert_pem = std::fs::read_to_string(home.path("pki/ca.crt"))
        .with_context(|| format!("cannot read {}", home.path("pki/ca.crt").display()))?;
    let ca = Authority::load(&cert_pem, &key_pem)
        .context("the home's CA certificate and key do not load")?;
    let home_yaml = std::fs::read_to_string(home.executor_config())
        .with_context(|| format!("cannot read {}", home.executor_config().display()))?;
    let dir = out.map_or_else(|| home.path(&format!("hosts/{name}")), Path::to_path_buf);
    if dir.join("executor.yaml").exists() && !force {
        bail!(
            "{} already holds a host's files; pass --force to issue new ones",
            dir.display()
        );
    }
    let port = home_port(&home_yaml);
    let config = host_config(&home_yaml, name, &listen_on(addresses, port))?;
    let config = match layout {
        HostLayout::Systemd => for_systemd(&production_redaction(&config))?,
        HostLayout::Compose => production_redaction(&config),
        HostLayout::Local => config,
    };
    // The host's name first: the agent dials it (`executor.server_name`).
    let mut sans = vec![name.to_string()];
    sans.extend(addresses.iter().cloned());
    let executor = ca.issue(pki::EXECUTOR_IDENTITY, &sans, Usage::Server, 0, 825)?;
    let health = ca.issue(pki::HEALTHCHECK_IDENTITY, &[], Usage::Client, 0, 825)?;
    let audit = drydock_proto::approval::generate_signing_key();
    let files: Vec<(&str, String, bool)> = vec![
        ("executor.yaml", config, false),
        ("pki/ca.crt", cert_pem, false),
        ("pki/executor.crt", executor.cert_pem, false),
        ("pki/executor.key", executor.key_pem, true),
        ("pki/healthcheck.crt", health.cert_pem, false),
        ("pki/healthcheck.key", health.key_pem, true),
        (
            "pki/audit.key",
            drydock_proto::approval::format_secret_key(&audit),
            true,
        ),
        (
            "pki/audit.pub",
            drydock_proto::approval::format_public_key(&audit.verifying_key()),
            false,
        ),
        ("state/revoked-grants", String::new(), false),
        // A new installation: the executor creates its audit store once.
        (
            "state/audit.db.init",
            "created by drydock host add\n".into(),
            false,
        ),
    ];
    // Under systemd the unit's StateDirectory holds the state, and no
    // signing key is handed over.
    let files = files.into_iter().filter(|(rel, _, _)| {
        layout != HostLayout::Systemd
            || !(rel.starts_with("state/") || rel.starts_with("pki/audit."))
    });
    let mut written = Vec::new();
    for (rel, content, private) in files {
        let path = dir.join(rel);
        write_file(&path, &content, private)?;
        written.push(path);
    }
    Ok(AddedHost {
        dir,
        files: written,
        port,
    })
}

/// Where the agent dials the host: the first `--address` that is an IP
/// (where the executor listens), else the first one given, else its name.
fn dial_address<'a>(name: &'a str, addresses: &'a [String]) -> &'a str {
    addresses
        .iter()
        .find(|a| a.parse::<std::net::IpAddr>().is_ok())
        .or(addresses.first())
        .map_or(name, String::as_str)
}

/// `drydock host add`, with what to do next.
pub fn add_and_say(
    home: &Home,
    name: &str,
    addresses: &[String],
    layout: HostLayout,
    out: Option<&Path>,
    force: bool,
) -> anyhow::Result<u8> {
    let added = add(home, name, addresses, layout, out, force)?;
    let dir = added.dir.display();
    println!("host {name}: written into {dir}:");
    for f in &added.files {
        println!("  {}", f.display());
    }
    let run = match layout {
        HostLayout::Compose => format!(
            "on {name}, from a drydock checkout with the images: `sudo deploy/stage-host.sh DIR /etc/drydock-host ADDRESS`, \
             then `docker-compose --env-file /etc/drydock-host/host.env -f deploy/host.yaml run --rm executor audit init` and `... up -d`"
        ),
        HostLayout::Systemd => format!(
            "on {name}: the files into /etc/drydock (keys root 0600) and deploy/systemd/drydock-executor.service, then `systemctl enable --now drydock-executor`"
        ),
        HostLayout::Local => format!(
            "on {name}: the folder to /etc/drydock (keys 0600, owned by the executor's user), then `drydock-executor serve --config /etc/drydock/executor.yaml`"
        ),
    };
    println!(
        "next: copy {dir} to {name} and run its executor ({run}; docs/deploy.md, \"A second host\"). \
         Then list it in the agent's agent.yaml and restart the agent:\n\
         hosts:\n  - name: {name}\n    endpoint: https://{dial}:{port}\n\
         (the agent checks that the certificate names `{name}`, whatever address it dials).",
        dial = dial_address(name, addresses),
        port = added.port
    );
    if layout != HostLayout::Systemd {
        println!("Its audit chain checks with the public key {dir}/pki/audit.pub.");
    }
    Ok(crate::exit::COMPLETED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::home::{init, InitOptions};

    #[test]
    fn a_production_host_withholds_every_value_but_the_allow_list() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            root: dir.path().to_path_buf(),
        };
        init(&home, &InitOptions::default()).unwrap();
        let local = std::fs::read_to_string(home.executor_config()).unwrap();
        assert!(local.contains("  env: secret-looking"), "{local}");
        for (layout, all) in [
            (HostLayout::Compose, true),
            (HostLayout::Systemd, true),
            (HostLayout::Local, false),
        ] {
            let out = dir.path().join(format!("{layout:?}"));
            add(&home, "host-b", &[], layout, Some(&out), false).unwrap();
            let yaml = std::fs::read_to_string(out.join("executor.yaml")).unwrap();
            assert_eq!(
                yaml.contains("  env: all\n  env_allow: [PORT"),
                all,
                "{layout:?}: {yaml}"
            );
            assert_eq!(!yaml.contains("env: secret-looking"), all, "{layout:?}");
        }
    }

    #[test]
    fn a_host_gets_a_certificate_naming_it_from_the_same_ca_and_its_name_in_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            root: dir.path().to_path_buf(),
        };
        init(&home, &InitOptions::default()).unwrap();
        let added = add(
            &home,
            "host-b",
            &["10.0.0.5".into()],
            HostLayout::Local,
            None,
            false,
        )
        .unwrap();
        let yaml = std::fs::read_to_string(added.dir.join("executor.yaml")).unwrap();
        assert!(
            yaml.contains("host:\n  name: host-b\n  require: true\n")
                && yaml.contains(&format!("listen: 10.0.0.5:{}", added.port)),
            "{yaml}"
        );
        let pem = std::fs::read(added.dir.join("pki/executor.crt")).unwrap();
        let (_, der) = x509_parser::pem::parse_x509_pem(&pem).unwrap();
        let cert = der.parse_x509().unwrap();
        let names = format!(
            "{:?}",
            cert.subject_alternative_name().unwrap().unwrap().value
        );
        assert!(
            names.contains("\"host-b\"") && names.contains("[10, 0, 0, 5]"),
            "{names}"
        );
        assert_eq!(
            std::fs::read_to_string(added.dir.join("pki/ca.crt")).unwrap(),
            std::fs::read_to_string(home.path("pki/ca.crt")).unwrap(),
            "the same CA"
        );
        use std::os::unix::fs::PermissionsExt as _;
        for key in ["executor.key", "healthcheck.key", "audit.key"] {
            let mode = std::fs::metadata(added.dir.join("pki").join(key))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "{key}");
        }
        assert!(!added.dir.join("pki/ca.key").exists());
        // The agent is told to dial the address given, not the bare name.
        assert_eq!(dial_address("host-b", &["10.0.0.5".into()]), "10.0.0.5");
        assert_eq!(
            dial_address("host-b", &["b.lan".into(), "10.0.0.5".into()]),
            "10.0.0.5"
        );
        assert_eq!(dial_address("host-b", &["b.lan".into()]), "b.lan");
        assert_eq!(dial_address("host-b", &[]), "host-b");
        assert!(!added.dir.join("approver.key").exists());
        // Once is enough; bad names and a second time are refused.
        let again = add(&home, "host-b", &[], HostLayout::Local, None, false).unwrap_err();
        assert!(format!("{again:#}").contains("--force"), "{again:#}");
        for bad in ["Host-B", "", "-b", "a/b"] {
            let err = add(&home, bad, &[], HostLayout::Local, None, false).unwrap_err();
            assert!(
                format!("{err:#}").contains("not a host name"),
                "{bad}: {err:#}"
            );
        }
    }
}
