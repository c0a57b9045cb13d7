//! The commands operators use around `ask`: doctor, show, cancel, audit,
//! completions and man pages, run as the real `drydock` binary against real
//! daemons.

use std::os::unix::fs::PermissionsExt as _;

use drydock_e2e::*;
use serde_json::Value;

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The doctor's line for `check`, failing the test when there is none.
fn line<'a>(report: &'a str, verdict: &str, check: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.starts_with(verdict) && l[4..].trim_start().starts_with(check))
        .unwrap_or_else(|| panic!("no `{verdict} {check}` line in:\n{report}"))
}

#[test]
fn doctor_passes_on_a_fresh_setup_and_names_each_failure() {
    let dd = Drydock::init();
    dd.up();
    let out = dd.cli(&["doctor"]);
    let report = text(&out);
    assert!(out.status.success(), "healthy setup:\n{report}");
    for check in [
        "key modes",
        "certificates",
        "config",
        "docker",
        "executor",
        "agent",
        "clock",
        "mtls",
        "approver",
    ] {
        line(&report, "ok", check);
    }
    assert!(!report.contains("FAIL"), "{report}");
    assert!(line(&report, "ok", "certificates").contains("expires in"));

    // A group-readable approver key: its own failing line.
    let key = dd.home.path("approver.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
    let out = dd.cli(&["doctor"]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let l = line(&report, "FAIL", "key modes");
    assert!(l.contains("approver.key") && l.contains("chmod 600"), "{l}");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();

    // An approver key the executor does not trust.
    let original = std::fs::read(&key).unwrap();
    let stranger = drydock_proto::approval::generate_signing_key();
    std::fs::remove_file(&key).unwrap();
    drydock_daemon::files::write_new(
        &key,
        drydock_proto::approval::format_secret_key(&stranger).as_bytes(),
        true,
    )
    .unwrap();
    let out = dd.cli(&["doctor"]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    let l = line(&report, "FAIL", "approver");
    assert!(l.contains("does not trust your key"), "{l}");
    assert!(!report.contains("FAIL  key modes"), "{report}");
    std::fs::remove_file(&key).unwrap();
    drydock_daemon::files::write_new(&key, &original, true).unwrap();

    // Stopped daemons.
    let down = dd.cli(&["down"]);
    assert!(down.status.success(), "{}", text(&down));
    let out = dd.cli(&["doctor"]);
    let report = text(&out);
    assert_eq!(out.status.code(), Some(1), "{report}");
    line(&report, "FAIL", "executor");
    assert!(
        line(&report, "FAIL", "agent").contains("drydock up"),
        "{report}"
    );
}

#[test]
fn show_and_cancel_work_on_a_real_request() {
    let dd = Drydock::init();
    let c = Container::unhealthy_web("show-cancel", &[]);
    let started_at = c.inspect("{{.State.StartedAt}}");
    dd.up();
    // No terminal and no --yes: the request waits for approval.
    let (code, req) = dd.ask_json(&["--container", &c.name, "the service is unhealthy"]);
    assert_eq!(code, 3, "{req:#}");
    let id = req["id"].as_str().unwrap().to_string();

    let out = dd.cli(&["show", &id]);
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(3), "{shown}");
    assert!(shown.contains(&format!("request {id}")), "{shown}");
    assert!(shown.contains("Diagnosis ("), "{shown}");
    assert!(shown.contains("[unhealthy]"), "{shown}");
    assert!(
        shown.contains("Plan:") && shown.contains("restart"),
        "{shown}"
    );
    assert!(shown.contains("drydock approve apr-"), "{shown}");

    let out = dd.cli(&["show", "--json", &id]);
    let doc: Value = serde_json::from_slice(&out.stdout).expect("show --json prints JSON");
    assert_eq!(doc["status"], "waiting_approval");

    let out = dd.cli(&["cancel", &id]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("canceled"), "{}", text(&out));
    let out = dd.cli(&["show", "--json", &id]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["status"], "canceled", "{doc:#}");
    assert_eq!(dd.cli(&["show", &id]).status.code(), Some(6));

    // A finished request cannot be canceled again, and says why.
    let out = dd.cli(&["cancel", &id]);
    assert!(!out.status.success());
    assert!(text(&out).contains("already canceled"), "{}", text(&out));
    // An unknown id is a clear error.
    let out = dd.cli(&["show", "req-doesnotexist"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not found"), "{}", text(&out));

    // Nothing touched the container.
    assert_eq!(c.inspect("{{.State.StartedAt}}"), started_at);
}

#[test]
fn audit_commands_read_the_local_chain() {
    let dd = Drydock::init();
    dd.up();
    let mut asked = Vec::new();
    for _ in 0..2 {
        asked.push(dd.ask_json(&["--diagnose-only", "--container", "no-such-container-x", "x"]));
    }
    // Each ask read the list and the policy; an answered read's row is
    // committed by the executor's flusher just after the answer (group
    // commit), so give a loaded machine a moment to write them.
    let rows_now = || {
        String::from_utf8_lossy(&dd.cli(&["audit", "export"]).stdout)
            .lines()
            .count()
    };
    let started = std::time::Instant::now();
    while rows_now() < 5 && started.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(
        rows_now() >= 5,
        "the asks' reads were not audited: {asked:?}"
    );
    let out = dd.cli(&["audit", "verify"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("intact"), "{}", text(&out));
    let out = dd.cli(&["audit", "tail", "-n", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    let rows: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("tail prints JSON lines"))
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows[0]["seq"].as_i64() < rows[1]["seq"].as_i64());
    let all = dd.cli(&["audit", "export"]);
    let n = String::from_utf8_lossy(&all.stdout).lines().count();
    assert!(n >= 2, "export printed {n} rows");
    assert_eq!(
        rows[1]["seq"].as_i64(),
        Some(n as i64),
        "tail ends at the newest row"
    );
}

#[test]
fn completions_and_man_pages_are_generated() {
    let dir = tempfile::tempdir().unwrap();
    let dd = Drydock::init();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let out = dd.cli(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("doctor"),
            "{shell} completion lists the subcommands"
        );
        if shell == "bash" {
            let path = dir.path().join("drydock.bash");
            std::fs::write(&path, &out.stdout).unwrap();
            let check = std::process::Command::new("bash")
                .arg("-n")
                .arg(&path)
                .output()
                .expect("bash");
            assert!(check.status.success(), "bash -n: {}", text(&check));
        }
    }
    let out = dd.cli(&["completions", "tcsh"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("possible values"), "{}", text(&out));

    let man = dir.path().join("man");
    let out = dd.cli(&["man", "--out", man.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out));
    for page in ["drydock.1", "drydock-doctor.1", "drydock-ask.1"] {
        let body = std::fs::read_to_string(man.join(page)).unwrap_or_default();
        assert!(body.contains(".TH"), "{page} is a man page");
    }
    let out = dd.cli(&["man"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains(".SH NAME"));
}

/// `drydock up` has the daemons write their own logs, bounded: past
/// DRYDOCK_LOG_MAX_BYTES the file rotates to `.1`, so the logs cannot grow
/// without limit.
#[test]
fn daemon_logs_are_bounded() {
    let dd = Drydock::init();
    let up = dd.cli_with_env(
        &["up"],
        &[("DRYDOCK_LOG_MAX_BYTES", "4096"), ("DRYDOCK_LOG", "debug")],
    );
    assert!(up.status.success(), "{}", text(&up));
    for _ in 0..5 {
        dd.ask_json(&["--diagnose-only", "--container", "no-such-container-x", "x"]);
    }
    let log = dd.home.log("drydock-agent");
    let mut rotated = log.as_os_str().to_os_string();
    rotated.push(".1");
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    assert!(
        size(&log) <= 4096 + 4096,
        "the live log is bounded: {}",
        size(&log)
    );
    assert!(
        size(std::path::Path::new(&rotated)) > 0,
        "the log rotated at its bound"
    );
}

/// `drydock init --agent-tls NAME`: the agent serves HTTPS with a
/// certificate from drydock's CA, and the CLI pins that CA: plain HTTP gets
/// nothing, and a CLI told to trust another CA refuses the agent.
#[test]
fn an_agent_over_tls_is_pinned_to_drydocks_ca() {
    let dd = Drydock::init_options(|o| o.agent_tls = Some("localhost".into()));
    dd.up();
    let out = dd.cli(&["requests", "--json"]);
    assert!(out.status.success(), "over HTTPS: {}", text(&out));
    let cli_yaml = std::fs::read_to_string(dd.home.cli_config()).unwrap();
    assert!(
        cli_yaml.contains("https://localhost:") && cli_yaml.contains("agent_ca:"),
        "{cli_yaml}"
    );

    // Plain HTTP to the same port: no answer from the API.
    let mut tcp = std::net::TcpStream::connect(("127.0.0.1", dd.agent_port)).unwrap();
    use std::io::{Read as _, Write as _};
    tcp.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let _ = tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut answer = Vec::new();
    let _ = tcp.read_to_end(&mut answer);
    assert!(!String::from_utf8_lossy(&answer).contains("200 OK"));

    // Another CA: the CLI refuses the agent's certificate.
    let other = drydock::pki::Authority::new("not drydock").unwrap();
    let other_ca = dd.home.path("pki/other-ca.crt");
    std::fs::write(&other_ca, other.cert_pem()).unwrap();
    std::fs::write(
        dd.home.cli_config(),
        cli_yaml.replace("agent_ca: pki/ca.crt", "agent_ca: pki/other-ca.crt"),
    )
    .unwrap();
    let out = dd.cli(&["requests"]);
    assert!(!out.status.success(), "{}", text(&out));
}

/// Ctrl-C while `ask` follows a request, with no terminal to ask on: the
/// CLI stops following and says how to come back, exits 130, and the
/// request carries on in the agent.
#[test]
fn ctrl_c_without_a_terminal_stops_following_and_leaves_the_request_running() {
    let dd = Drydock::init();
    let c = Container::unhealthy_web("ctrl-c", &[]);
    dd.up();
    let ask = std::process::Command::new(bin("drydock"))
        .args([
            "ask",
            "--yes",
            "--container",
            &c.name,
            "the web service is unhealthy",
        ])
        .env("DRYDOCK_HOME", &dd.home.root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ask");
    // Wait until the restart is in flight (the fixture ignores SIGTERM, so
    // Docker waits out the stop grace), then interrupt.
    let started = std::time::Instant::now();
    while !dd
        .audit_rows()
        .iter()
        .any(|r| r["decision"] == "intent" && r["action"] == "restart")
    {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "no restart began"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let pid = nix::unistd::Pid::from_raw(ask.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let out = ask.wait_with_output().expect("ask ends");
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(130), "{shown}");
    assert!(
        shown.contains("stopped following") && shown.contains("drydock follow"),
        "{shown}"
    );
    // The request goes on without the CLI and completes.
    let id = shown
        .split_whitespace()
        .find(|w| w.starts_with("req-"))
        .map(|w| w.trim_end_matches([':', '.', ',', ';']).to_string())
        .expect("the request id is shown");
    let done = std::time::Instant::now();
    loop {
        let out = dd.cli(&["show", "--json", &id]);
        let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        if doc["status"] == "completed" {
            break;
        }
        assert!(
            done.elapsed() < std::time::Duration::from_secs(120),
            "{doc:#}"
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}
