use super::*;

#[test]
fn each_layout_writes_what_it_needs_and_says_what_comes_next() {
    for (layout, names_executor, tcp, env_all, next) in [
        (Layout::Local, false, false, false, "`drydock up`"),
        (Layout::Compose, true, true, true, "deploy/stage-compose.sh"),
        (Layout::Systemd, false, true, true, "deploy/systemd"),
        (Layout::Swarm, true, false, true, "deploy/swarm-deploy.sh"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let home = Home {
            root: dir.path().to_path_buf(),
        };
        let opts = InitOptions {
            layout,
            ..Default::default()
        }
        .for_layout();
        init(&home, &opts).unwrap();
        assert_eq!(
            opts.executor_names
                .iter()
                .any(|n| n == COMPOSE_EXECUTOR_NAME),
            names_executor,
            "{layout:?}"
        );
        let cli = home.load_cli_config().unwrap();
        assert_eq!(cli.layout, layout);
        assert_eq!(
            cli.agent_url.starts_with("http://127.0.0.1:"),
            tcp,
            "{layout:?}"
        );
        let executor = std::fs::read_to_string(home.executor_config()).unwrap();
        assert_eq!(
            executor.contains("redact:\n  env: all\n"),
            env_all,
            "{executor}"
        );
        assert!(opts.next_step(&home.root).contains(next), "{layout:?}");
        // On Swarm the CLI uses the agent's socket on the node, and the
        // executor sees services (by the same globs) as well.
        assert_eq!(
            cli.agent_url == format!("unix:{SWARM_AGENT_SOCKET}"),
            layout == Layout::Swarm,
            "{layout:?}: {}",
            cli.agent_url
        );
        assert_eq!(
            executor.contains("  services:\n    allow_names: [\"*\"]\n"),
            layout == Layout::Swarm,
            "{executor}"
        );
    }
    // A name given as well is not repeated.
    let opts = InitOptions {
        layout: Layout::Compose,
        executor_names: vec!["executor".into()],
        ..Default::default()
    }
    .for_layout();
    assert_eq!(opts.executor_names, ["executor"]);
}

#[test]
fn init_writes_private_files_0600_and_refuses_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().to_path_buf(),
    };
    init(&home, &InitOptions::default()).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    for f in [
        "approver.key",
        "agent.token",
        "pki/ca.key",
        "pki/agent.key",
        "pki/executor.key",
    ] {
        let mode = std::fs::metadata(home.path(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600, "{f}");
    }
    let agent_cfg = std::fs::read_to_string(home.agent_config()).unwrap();
    assert!(
        !agent_cfg.contains("approver.key") && !agent_cfg.contains("ed25519"),
        "the agent config must not name the approver key: {agent_cfg}"
    );
    let err = init(&home, &InitOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("--force"), "{err}");
    init(
        &home,
        &InitOptions {
            force: true,
            ..Default::default()
        },
    )
    .unwrap();
    let c = home.load_cli_config().unwrap();
    assert!(c.signing_key().is_ok());
}

#[test]
fn the_audit_init_marker_is_written_only_for_a_home_without_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().to_path_buf(),
    };
    init(&home, &InitOptions::default()).unwrap();
    assert!(home.path("state/audit.db.init").is_file());
    // The executor created its store and used the marker.
    std::fs::remove_file(home.path("state/audit.db.init")).unwrap();
    std::fs::write(home.path("state/audit.db"), b"a store").unwrap();
    init(
        &home,
        &InitOptions {
            force: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        !home.path("state/audit.db.init").exists(),
        "no marker next to an existing store"
    );
}

#[test]
fn init_writes_an_explicit_scope_and_refuses_bad_globs() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().to_path_buf(),
    };
    let opts = InitOptions {
        targets: vec!["shop-*".into(), "db".into()],
        ..Default::default()
    };
    init(&home, &opts).unwrap();
    let yaml = std::fs::read_to_string(home.executor_config()).unwrap();
    assert!(yaml.contains("allow_names: [\"shop-*\", \"db\"]"), "{yaml}");
    assert!(opts.scope_note().contains("shop-*, db"));
    let every = InitOptions::default();
    assert_eq!(every.allow_names(), vec!["*".to_string()]);
    assert!(every.scope_note().contains("every container"));
    assert!(!every.scope_note().contains("Swarm services"));
    let swarm = InitOptions {
        layout: Layout::Swarm,
        ..every.clone()
    };
    assert!(
        swarm.scope_note().contains("select Swarm services"),
        "{}",
        swarm.scope_note()
    );
    for bad in ["", "a\"b", "x: y", "a\nb"] {
        let err = init(
            &home,
            &InitOptions {
                force: true,
                targets: vec![bad.into()],
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(err.to_string().contains("--target"), "{err}");
    }
}

/// `--approver ssh`: no secret on disk, the ssh key in cli.yaml and in
/// executor.yaml's approvers; cli.yaml naming both kinds, or neither, is
/// refused with what to do.
#[test]
fn an_ssh_approver_leaves_no_secret_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home {
        root: dir.path().to_path_buf(),
    };
    let line = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ2YNDKwqfCZ0SYmnS4kyUYg0K6CtrVlbtTIFoGaLBiR";
    init(
        &home,
        &InitOptions {
            approver_ssh: Some(format!("{line} ops@laptop")),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(!home.path("approver.key").exists());
    let executor = std::fs::read_to_string(home.executor_config()).unwrap();
    assert!(
        executor.contains(&format!("public_key: \"{line}\"")),
        "{executor}"
    );
    let c = home.load_cli_config().unwrap();
    assert!(matches!(c.signer().unwrap(), Signer::Ssh(_)));
    assert_eq!(c.signer().unwrap().public(), line);
    let e = c.signing_key().unwrap_err().to_string();
    assert!(e.contains("grant is signed with a file key"), "{e}");
    let cli = std::fs::read_to_string(home.cli_config()).unwrap();
    for (edit, says) in [
        (
            cli.replace("  ssh: ", "  key: approver.key\n  ssh: "),
            "both",
        ),
        (
            cli.lines()
                .filter(|l| !l.trim_start().starts_with("ssh:"))
                .collect::<Vec<_>>()
                .join("\n"),
            "neither",
        ),
    ] {
        std::fs::write(home.cli_config(), edit).unwrap();
        let e = home.load_cli_config().unwrap().signer().err().unwrap();
        assert!(e.to_string().contains(says), "{e}");
    }
}
