//! What a line names, followed into the container's definition: a path
//! no mount holds, a device node, the command the log itself gives, the
//! settings that hold refused credentials.

use super::*;

#[test]
fn what_a_line_names_is_followed_to_a_missing_mount_a_device_and_the_log_s_advice() {
    let mut c = view();
    c.running = false;
    c.status = "exited".into();
    c.exit_code = 1;
    // A header ending in a colon is read with the line that says what.
    let f = run(
        &c,
        &[
            "AH00526: Syntax error on line 12 of /etc/httpd/httpd.conf:",
            "DocumentRoot '/srv/site/public' is not a directory, or is not readable",
        ],
    );
    let primary = &f.diagnosis.causes[0];
    assert_eq!(primary.class, FaultClass::ConfigError, "{primary:?}");
    assert!(
        primary
            .reason
            .contains("No mount of the container holds /srv/site/public"),
        "{}",
        primary.reason
    );
    assert_eq!(f.detail.as_deref(), Some("/srv/site/public"));
    // A device node: the container was not given it.
    let f = run(
        &c,
        &["ERROR: CreateTUN(\"tun0\") failed; /dev/net/tun does not exist"],
    );
    assert!(
        f.diagnosis.causes[0]
            .reason
            .contains("--device /dev/net/tun"),
        "{:?}",
        f.diagnosis.causes[0]
    );
    // A database to prepare, and the command its own log names.
    let f = run(
        &c,
        &[
            "Error: the database needs bootstrapping.",
            "To start a new installation from scratch, run 'app migrations bootstrap'.",
            "Error: init failed: database needs bootstrapping",
        ],
    );
    let primary = &f.diagnosis.causes[0];
    assert_eq!(primary.class, FaultClass::ConfigError, "{primary:?}");
    assert!(
        primary.reason.contains("run `app migrations bootstrap`"),
        "{}",
        primary.reason
    );
    // A line the shell prints for a command it could not run names no
    // missing mount.
    let f = run(&c, &["/bin/sh: 1: ./start.sh: not found"]);
    assert!(
        !f.diagnosis.causes[0].reason.contains("mount"),
        "{:?}",
        f.diagnosis.causes[0]
    );
    // A launcher's "Warning:" lines do not hide the permission before them.
    let f = run(
        &c,
        &[
            "mkdir: cannot create directory '../work/log': Permission denied",
            "Warning:  Cannot open log file: ../work/log/jvm.log",
            "Warning:  Forcing option -XX:LogFile=/tmp/jvm.log",
            "VM warning: Cannot open file ../work/log/jvm.log due to No such file or directory",
            "",
            "java.io.FileNotFoundException: ../work/tmp/a.lock (Permission denied)",
            "        at java.io.RandomAccessFile.open0(Native Method)",
        ],
    );
    assert_eq!(
        f.diagnosis.causes[0].class,
        FaultClass::PermissionDenied,
        "{:?}",
        f.diagnosis.causes[0]
    );
}

#[test]
fn a_login_refused_at_every_try_names_the_settings_that_hold_the_credentials() {
    let c = ContainerView {
        health_status: "unhealthy".into(),
        failing_streak: 30,
        env: vec![
            "VPN_SERVICE_PROVIDER=protonvpn".into(),
            "OPENVPN_USER=[REDACTED]".into(),
            "OPENVPN_PASSWORD=[REDACTED]".into(),
            "TZ=Europe/Amsterdam".into(),
        ],
        ..view()
    };
    let f = run(
        &c,
        &[
            "2025-10-22T15:06:21Z ERROR [openvpn] AUTH: Received control message: AUTH_FAILED",
            "Your credentials might be wrong",
            "2025-10-22T15:06:21Z INFO [openvpn] SIGUSR1[soft,auth-failure] received, process restarting",
            "2025-10-22T15:06:33Z INFO [openvpn] Peer Connection Initiated with [AF_INET]190.2.131.156:1194",
            "2025-10-22T15:06:38Z ERROR [openvpn] AUTH: Received control message: AUTH_FAILED",
            "Your credentials might be wrong",
            "2025-10-22T15:06:38Z INFO [openvpn] SIGUSR1[soft,auth-failure] received, process restarting",
        ],
    );
    let named = f
        .diagnosis
        .causes
        .iter()
        .find(|k| k.class == FaultClass::ConfigError)
        .unwrap_or_else(|| panic!("no config_error: {:#?}", f.diagnosis.causes));
    assert!(
        named
            .reason
            .contains("its credentials are set in OPENVPN_PASSWORD, OPENVPN_USER"),
        "{}",
        named.reason
    );
    assert!(
        !named.reason.contains("AUTH_FAILED is not set"),
        "{}",
        named.reason
    );
}
