//! Instructions per executor call, counted by callgrind: unlike times,
//! they come out the same on a busy machine, so a change to the call path
//! can be measured against the last one. Not a test: it prints.
//!
//! ```sh
//! DRYDOCK_E2E_PROFILE=release cargo run --release -p drydock-e2e --example callgrind -- [CALLS]
//! ```
//!
//! It starts the release executor under `valgrind --tool=callgrind` with
//! instrumentation off, warms each call up uninstrumented, then for each of
//! `InspectContainer`, `GetPolicy` and `ContainerLogs` turns it on, zeroes
//! the counters, makes CALLS calls (default 200), dumps and turns it off
//! again. A gRPC health check, which the executor answers with no policy,
//! engine call or audit row, counts what the transport (TLS, HTTP/2,
//! tonic) costs alone. Every thread of the executor counts (the audit flusher too).
//! The dumps stay in `target/callgrind/` for `callgrind_annotate`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use drydock_e2e::*;
use drydock_proto::pb;

type Client = pb::executor_client::ExecutorClient<tonic::transport::Channel>;
type Health = tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>;

fn callgrind_control(args: &[&str], pid: u32) {
    let out = Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .output()
        .expect("callgrind_control (Debian: apt-get install valgrind)");
    assert!(
        out.status.success(),
        "callgrind_control {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The newest dump's instruction total (`summary:` of its header).
fn dumped_instructions(dir: &Path, pid: u32, before: &[PathBuf]) -> u64 {
    let prefix = format!("callgrind.out.{pid}");
    for _ in 0..100 {
        let mut dumps: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("callgrind dir")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
                    && !before.contains(p)
            })
            .collect();
        dumps.sort();
        if let Some(dump) = dumps.last() {
            let text = std::fs::read_to_string(dump).unwrap_or_default();
            if let Some(total) = text
                .lines()
                .find_map(|l| l.strip_prefix("summary:"))
                .or_else(|| text.lines().find_map(|l| l.strip_prefix("totals:")))
            {
                return total
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("a count");
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no callgrind dump appeared in {}", dir.display());
}

fn files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

async fn call(c: &mut Client, health: &mut Health, rpc: &str, id: &str) {
    let ok = match rpc {
        "Health/Check" => grpc::health_check(health).await,
        "InspectContainer" => c
            .inspect_container(pb::ContainerRequest {
                request_id: "req-callgrind".into(),
                container: id.into(),
            })
            .await
            .is_ok(),
        "GetPolicy" => c
            .get_policy(pb::GetPolicyRequest {
                request_id: "req-callgrind".into(),
            })
            .await
            .is_ok(),
        _ => c
            .container_logs(pb::LogsRequest {
                request_id: "req-callgrind".into(),
                container: id.into(),
                tail: 100,
                ..Default::default()
            })
            .await
            .is_ok(),
    };
    assert!(ok, "{rpc} failed");
}

/// The container (removed when dropped) and its id.
fn running_keep(c: Container) -> (Container, String) {
    let id = c.id();
    (c, id)
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if profile() != "release" {
        eprintln!("note: DRYDOCK_E2E_PROFILE is not `release`: counting a debug executor");
    }
    let calls: u64 = std::env::args()
        .nth(1)
        .map(|n| n.parse().expect("CALLS must be a number"))
        .unwrap_or(200);
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-callgrind-*".into()]);
    let dir = workspace_root().join("target/callgrind");
    std::fs::create_dir_all(&dir).expect("target/callgrind");
    let out_file = format!("--callgrind-out-file={}/callgrind.out.%p", dir.display());
    let exec = ExecutorProcess::start_wrapped(
        &dd,
        |y| {
            y.replace(
                "limits:\n",
                "limits:\n  calls_per_second: 100000\n  burst: 100000\n",
            )
        },
        &[
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            &out_file,
        ],
        Duration::from_secs(180),
    );
    let pid = exec.pid();
    let mut lines = vec!["crash", "--code", "1"];
    for _ in 0..20 {
        lines.extend([
            "--line",
            "ERROR upstream timed out after 30000 ms (db:5432)",
        ]);
    }
    let mut args = vec![drydock::fixture::FIXTURE_IMAGE];
    args.extend(lines);
    let target = Container::run("callgrind", &args);
    target.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let logged = target.id();
    // Inspected: a running container (a stopped one costs an image lookup
    // more), as the benchmark's inspect.
    let running = Container::run("callgrind", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    let running = running_keep(running);
    let mut client = exec.agent_client(&dd).await;
    // The transport alone: a health check on a mutual-TLS connection of the
    // agent's identity, answered without policy, engine or audit row.
    let mut health = dd.executor_health_as_agent().await;
    println!("| call | instructions per call ({calls} calls, every executor thread) |\n|---|---|");
    for rpc in [
        "InspectContainer",
        "GetPolicy",
        "ContainerLogs",
        "Health/Check",
    ] {
        let id = if rpc == "ContainerLogs" {
            &logged
        } else {
            &running.1
        };
        for _ in 0..20 {
            call(&mut client, &mut health, rpc, id).await;
        }
        let before = files(&dir);
        callgrind_control(&["-i", "on"], pid);
        callgrind_control(&["-z"], pid);
        for _ in 0..calls {
            call(&mut client, &mut health, rpc, id).await;
        }
        // Let the audit flusher commit the last rows (within 5 ms).
        tokio::time::sleep(Duration::from_millis(200)).await;
        callgrind_control(&["-d", rpc], pid);
        let total = dumped_instructions(&dir, pid, &before);
        callgrind_control(&["-i", "off"], pid);
        println!("| `{rpc}` | {} |", total / calls);
    }
    println!("\ndumps: {} (callgrind_annotate FILE)", dir.display());
}
