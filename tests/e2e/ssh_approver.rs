//! An approver whose key never touches disk: a real `ssh-agent` holds an
//! Ed25519 key made by `ssh-keygen`; `drydock init --approver ssh` takes it
//! from the agent, and `drydock ask --yes` signs through the agent (an
//! SSHSIG in namespace `drydock-approval`), which the executor verifies.
//! OpenSSH's own `ssh-keygen -Y sign` makes the same signatures: one by a
//! registered P-256 key over real claims is honoured, one made for another
//! namespace is refused and audited, and without the agent nothing is
//! signed.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use drydock_e2e::approvals::claims;
use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use tonic::Code;

/// `ssh-agent -D` on a socket of its own, killed when dropped.
struct SshAgent {
    child: Child,
    socket: String,
}

impl SshAgent {
    fn start(dir: &Path) -> SshAgent {
        let socket = dir.join("agent.sock").display().to_string();
        let child = Command::new("ssh-agent")
            .args(["-D", "-a", &socket])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run ssh-agent ({e}); scripts/test-env.sh installs openssh-client")
            });
        let started = Instant::now();
        while !Path::new(&socket).exists() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "ssh-agent made no socket"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        SshAgent { child, socket }
    }
}

impl Drop for SshAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ssh-keygen -t KIND` with no passphrase: the private key's path.
fn keygen(dir: &Path, name: &str, kind: &str) -> String {
    let path = dir.join(name).display().to_string();
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", kind, "-N", "", "-C", name, "-f", &path])
        .output()
        .expect("ssh-keygen");
    assert!(out.status.success(), "{out:?}");
    path
}

/// `ssh-keygen -Y sign` of `message` in `namespace`: the SSHSIG blob (the
/// armour taken off).
fn ssh_keygen_sign(dir: &Path, key: &str, namespace: &str, message: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let file = dir.join("claims.json");
    std::fs::write(&file, message).expect("claims file");
    let _ = std::fs::remove_file(dir.join("claims.json.sig"));
    let out = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-f", key, "-n", namespace])
        .arg(&file)
        .output()
        .expect("ssh-keygen -Y sign");
    assert!(out.status.success(), "{out:?}");
    let armoured = std::fs::read_to_string(dir.join("claims.json.sig")).expect("signature");
    let body: String = armoured
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("armoured SSHSIG")
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approver_in_an_ssh_agent_signs_and_the_executor_verifies() {
    drydock_daemon::tls::install_crypto_provider();
    let keys = tempfile::tempdir().expect("temp dir");
    let agent = SshAgent::start(keys.path());
    let ed = keygen(keys.path(), "ops-ed25519", "ed25519");
    let p256 = keygen(keys.path(), "ops-p256", "ecdsa");
    let add = Command::new("ssh-add")
        .arg(&ed)
        .env("SSH_AUTH_SOCK", &agent.socket)
        .output()
        .expect("ssh-add");
    assert!(add.status.success(), "{add:?}");
    let with_agent = [("SSH_AUTH_SOCK", agent.socket.as_str())];

    let c = Container::unhealthy_web("sshapprove", &[]);
    let other = Container::unhealthy_web("sshapprove2", &[]);
    let dd = Drydock::uninitialized();
    let (executor_port, agent_port) = (dd.executor_port.to_string(), dd.agent_port.to_string());
    let init = dd.cli_with_env(
        &[
            "init",
            "--approver",
            "ssh",
            "--ssh-key",
            &format!("{ed}.pub"),
            "--no-watch",
            "--executor-port",
            &executor_port,
            "--agent-port",
            &agent_port,
            "--target",
            &c.name,
            "--target",
            &other.name,
        ],
        &with_agent,
    );
    assert!(init.status.success(), "{init:?}");
    assert!(
        !dd.home.path("approver.key").exists(),
        "no approver secret on disk"
    );
    let ed_pub = std::fs::read_to_string(format!("{ed}.pub")).expect("ed25519 .pub");
    let ed_line: String = ed_pub
        .split_whitespace()
        .take(2)
        .collect::<Vec<_>>()
        .join(" ");
    let cli_yaml = std::fs::read_to_string(dd.home.cli_config()).expect("cli.yaml");
    assert!(cli_yaml.contains(&ed_line), "{cli_yaml}");
    // A second approver, registered by its OpenSSH public key.
    let p256_pub = std::fs::read_to_string(format!("{p256}.pub")).expect("p256 .pub");
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor.yaml");
    let config = config.replace(
        "approvers:\n",
        &format!(
            "approvers:\n  - id: ops-p256\n    public_key: \"{}\"\n",
            p256_pub.trim()
        ),
    );
    std::fs::write(dd.home.executor_config(), config).expect("write executor.yaml");
    dd.up();
    let doctor = dd.cli_with_env(&["doctor"], &with_agent);
    let doctor_out = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        doctor_out.contains("the executor trusts your key"),
        "{doctor_out}"
    );

    // Without the agent nothing is signed, and the container is untouched.
    let started = c.inspect("{{.State.StartedAt}}");
    let ask = |socket: &str| {
        dd.cli_with_env(
            &[
                "ask",
                "--json",
                "--yes",
                "--container",
                &c.name,
                "it is unhealthy",
            ],
            &[("SSH_AUTH_SOCK", socket)],
        )
    };
    let out = ask("/nonexistent/agent.sock");
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("ssh-agent"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(c.inspect("{{.State.StartedAt}}"), started);

    // Through the agent: signed, verified, repaired.
    let out = ask(&agent.socket);
    let req: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {out:?}\nagent log:\n{}", dd.agent_log()));
    assert_eq!(req["status"], "completed", "{req:#}");
    let rows = dd.audit_rows();
    assert!(
        rows.iter().any(|r| r["action"] == "restart"
            && r["decision"] == "allowed"
            && r["key_id"] == "local-operator"),
        "{rows:#?}"
    );

    // OpenSSH's own signatures, straight to the executor: the P-256
    // approver's in the right namespace is honoured; one for `git` is not.
    let mut exec = dd.executor_as_agent().await;
    let other_id = other.id();
    for (request, namespace, refused) in [
        ("req-ssh-git", "git", true),
        ("req-ssh-p256", "drydock-approval", false),
    ] {
        let bytes = claims(request, WriteAction::Restart, &other_id).encode();
        let signature = ssh_keygen_sign(keys.path(), &p256, namespace, &bytes);
        let approval = pb::Approval {
            claims: bytes,
            signature,
            key_id: "ops-p256".into(),
            cosignatures: Vec::new(),
        };
        let sent = exec
            .restart_container(pb::WriteRequest {
                request_id: request.into(),
                container: other.name.clone(),
                approval: Some(approval),
                ..Default::default()
            })
            .await;
        let row = dd
            .audit_rows()
            .into_iter()
            .rev()
            .find(|r| r["request_id"] == request)
            .unwrap_or_else(|| panic!("{request}: no audit row"));
        match refused {
            true => {
                let e = sent.expect_err(namespace);
                assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
                assert!(e.message().contains("namespace `git`"), "{e:?}");
                assert_eq!(row["decision"], "denied", "{row:#}");
            }
            false => {
                sent.unwrap_or_else(|e| panic!("{namespace}: {e:?}"));
                assert_eq!(row["decision"], "allowed", "{row:#}");
                assert_eq!(row["key_id"], "ops-p256", "{row:#}");
            }
        }
    }
    dd.assert_audit_intact();
}
