//! drydock's benchmark: figures from one run, each next to a baseline
//! measured in the same run on the same engine. Not a test: it asserts
//! nothing about speed, it prints.
//!
//! ```sh
//! DRYDOCK_E2E_PROFILE=release cargo run --release -p drydock-e2e --example bench
//! ```
//!
//! It builds the release daemons, starts an executor with the agent's
//! identity as the client, and measures:
//! - InspectContainer through the executor (gRPC over mTLS, audited) against
//!   the same inspect straight to the Docker API on its socket;
//! - throughput at 1, 16 and 64 calls in flight against the same direct;
//! - the executor's memory idle and after the load;
//! - time to recovery of an unhealthy container, `drydock ask --yes` against
//!   `docker restart` plus polling the health status;
//! - image sizes, when `deploy/build-images.sh` has built them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drydock_e2e::*;
use drydock_proto::pb;

const SEQUENTIAL: usize = 300;
const LOAD_FOR: Duration = Duration::from_secs(3);

struct Summary {
    n: usize,
    median: Duration,
    p99: Duration,
    min: Duration,
    max: Duration,
}

fn summarize(mut d: Vec<Duration>) -> Summary {
    d.sort();
    let at = |q: f64| d[((d.len() as f64 * q) as usize).min(d.len() - 1)];
    Summary {
        n: d.len(),
        median: at(0.5),
        p99: at(0.99),
        min: d[0],
        max: d[d.len() - 1],
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn row(name: &str, s: &Summary) {
    println!(
        "| {name} | {} | {} | {} | {} – {} |",
        s.n,
        ms(s.median),
        ms(s.p99),
        ms(s.min),
        ms(s.max)
    );
}

fn docker_http() -> reqwest::Client {
    drydock_daemon::tls::install_crypto_provider();
    reqwest::Client::builder()
        .unix_socket("/var/run/docker.sock")
        .build()
        .expect("docker client")
}

async fn direct_inspect(http: &reqwest::Client, id: &str) -> bool {
    http.get(format!("http://docker/containers/{id}/json"))
        .send()
        .await
        .is_ok_and(|r| r.status().is_success())
}

type Client = pb::executor_client::ExecutorClient<tonic::transport::Channel>;

async fn executor_inspect(c: &mut Client, id: &str) -> bool {
    c.inspect_container(pb::ContainerRequest {
        request_id: "req-bench".into(),
        container: id.into(),
    })
    .await
    .is_ok()
}

/// Calls per second at `in_flight` for `LOAD_FOR`, and the errors.
async fn throughput<F, Fut>(in_flight: usize, call: F) -> (f64, usize, usize)
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let call = Arc::new(call);
    let deadline = Instant::now() + LOAD_FOR;
    let mut tasks = Vec::new();
    for _ in 0..in_flight {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let (mut ok, mut err) = (0usize, 0usize);
            while Instant::now() < deadline {
                if call().await {
                    ok += 1;
                } else {
                    err += 1;
                }
            }
            (ok, err)
        }));
    }
    let (mut ok, mut err) = (0, 0);
    for t in tasks {
        let (o, e) = t.await.expect("task");
        ok += o;
        err += e;
    }
    (ok as f64 / LOAD_FOR.as_secs_f64(), ok, err)
}

fn wait_health(c: &Container, want: &str, timeout: Duration) -> Duration {
    let started = Instant::now();
    while c.health() != want {
        assert!(
            started.elapsed() < timeout,
            "{} never became {want}",
            c.name
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    started.elapsed()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    if profile() != "release" {
        eprintln!("note: DRYDOCK_E2E_PROFILE is not `release`: measuring debug daemons");
    }
    // Sections to run: all by default, or those named on the command line
    // (`-- inspect throughput recovery watch diagnosis scale images`).
    let only: Vec<String> = std::env::args().skip(1).collect();
    let want = |s: &str| only.is_empty() || only.iter().any(|o| o == s);
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-bench-*".into()]);
    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace(
            "limits:\n",
            "limits:\n  calls_per_second: 100000\n  burst: 100000\n",
        )
    });
    let target = Container::run("bench", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    let id = target.id();
    let http = docker_http();
    let mut client = exec.agent_client(&dd).await;
    // Warm both paths (connections, TLS, the engine's caches).
    for _ in 0..20 {
        direct_inspect(&http, &id).await;
        executor_inspect(&mut client, &id).await;
    }
    let rss_idle = rss_kib(exec.pid());

    if want("inspect") {
        println!("## InspectContainer, {SEQUENTIAL} sequential calls\n");
        println!("| path | n | median | p99 | min – max |\n|---|---|---|---|---|");
        let mut direct = Vec::new();
        let mut through = Vec::new();
        for _ in 0..SEQUENTIAL {
            let t = Instant::now();
            direct_inspect(&http, &id).await;
            direct.push(t.elapsed());
            let t = Instant::now();
            executor_inspect(&mut client, &id).await;
            through.push(t.elapsed());
        }
        let (d, e) = (summarize(direct), summarize(through));
        row("Docker API directly", &d);
        row("through the executor", &e);
        println!(
            "\nratio of medians (executor / direct): **{:.2}**\n",
            e.median.as_secs_f64() / d.median.as_secs_f64()
        );
    }

    if want("throughput") {
        println!("## Throughput, {}s per level\n", LOAD_FOR.as_secs());
        println!("| in flight | direct calls/s | executor calls/s | ratio | executor errors |\n|---|---|---|---|---|");
        let rows_before = dd.audit_rows().len();
        let mut executor_calls = 0;
        for in_flight in [1, 16, 64] {
            let (http2, id2) = (http.clone(), id.clone());
            let (direct_rate, _, _) = throughput(in_flight, move || {
                let (http, id) = (http2.clone(), id2.clone());
                async move { direct_inspect(&http, &id).await }
            })
            .await;
            let (c2, id2) = (client.clone(), id.clone());
            let (exec_rate, ok, err) = throughput(in_flight, move || {
                let (mut c, id) = (c2.clone(), id2.clone());
                async move { executor_inspect(&mut c, &id).await }
            })
            .await;
            executor_calls += ok + err;
            println!(
                "| {in_flight} | {direct_rate:.0} | {exec_rate:.0} | {:.2} | {err} |",
                exec_rate / direct_rate
            );
        }
        let rss_load = rss_kib(exec.pid());
        // The audit rows of the load are written; give the last ones a moment.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let audited = dd.audit_rows().len() - rows_before;
        println!(
            "\naudit rows written during the load: {audited} for {executor_calls} calls{}\n",
            if audited >= executor_calls {
                " (one per call, plus checkpoints)"
            } else {
                " (FEWER ROWS THAN CALLS)"
            }
        );
        println!("## Memory\n");
        println!(
        "| daemon | idle | after the load |\n|---|---|---|\n| drydock-executor | {:.1} MiB | {:.1} MiB |\n",
        rss_idle as f64 / 1024.0,
        rss_load as f64 / 1024.0
    );
    }
    drop(client);
    drop(exec);

    if want("recovery") {
        println!("## Time to recovery: unhealthy → verified healthy\n");
        dd.up();
        // drydock: the whole loop with --yes, through the CLI.
        let broken = Container::unhealthy_web("bench", &["--stop-timeout", "1"]);
        let t = Instant::now();
        let (code, request) = dd.ask_json(&["--yes", "--container", &broken.name, "web is down"]);
        let drydock_took = t.elapsed();
        let stable = request["verification"]["checks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["level"] == "stable")
            .map(|_| "includes the 3 s stability hold")
            .unwrap_or("");
        // Baseline: docker restart plus polling the health status.
        let baseline = Container::unhealthy_web("bench", &["--stop-timeout", "1"]);
        let t = Instant::now();
        docker_ok(&["restart", &baseline.name]);
        wait_health(&baseline, "healthy", Duration::from_secs(60));
        let baseline_took = t.elapsed();
        println!("| path | time | note |\n|---|---|---|");
        println!(
            "| `drydock ask --yes` (exit {code}) | {:.2} s | {stable} |",
            drydock_took.as_secs_f64()
        );
        println!(
            "| `docker restart` + polling health | {:.2} s | |",
            baseline_took.as_secs_f64()
        );
        println!(
            "\nratio: **{:.2}**; without the stability hold: **{:.2}**\n",
            drydock_took.as_secs_f64() / baseline_took.as_secs_f64(),
            (drydock_took.as_secs_f64() - 3.0).max(0.0) / baseline_took.as_secs_f64()
        );
    }
    drop(dd);

    if want("watch") {
        println!("## Watching: unhealthy → verified healthy under an automation grant\n");
        let watching = Drydock::init_options(|o| {
            o.targets = vec!["dd-benchwatch-*".into()];
            o.watch = true;
        });
        let edit = |file: &std::path::Path, from: &str, to: &str| {
            let text = std::fs::read_to_string(file).expect("config");
            std::fs::write(file, text.replace(from, to)).expect("config");
        };
        edit(
            &watching.home.executor_config(),
            "automation:\n  enabled: false",
            "automation:\n  enabled: true",
        );
        edit(
            &watching.home.path("agent.yaml"),
            "mode: notify\n",
            "mode: repair\n  debounce: 2s\n",
        );
        watching.up();
        let out = watching.cli(&[
            "grant",
            "create",
            "--action",
            "restart",
            "--name",
            "dd-benchwatch-*",
            "--max",
            "5/1h",
            "--expires",
            "1h",
            "--yes",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let watched = Container::unhealthy_web("benchwatch", &["--stop-timeout", "1"]);
        let became_unhealthy = Instant::now();
        let healed = loop {
            let list = watching.cli(&["requests", "--json"]);
            let done = serde_json::from_slice::<serde_json::Value>(&list.stdout)
                .ok()
                .and_then(|v| v.as_array().cloned())
                .unwrap_or_default()
                .into_iter()
                .any(|r| {
                    r["options"]["container"] == watched.name.as_str() && r["status"] == "completed"
                });
            if done {
                break became_unhealthy.elapsed();
            }
            assert!(
                became_unhealthy.elapsed() < Duration::from_secs(120),
                "not repaired"
            );
            std::thread::sleep(Duration::from_millis(100));
        };
        // Baseline: what docker-autoheal does, a loop that polls every 5 s and
        // restarts whatever is unhealthy.
        let looped = Container::unhealthy_web("benchwatch-loop", &["--stop-timeout", "1"]);
        let started = Instant::now();
        // Its first poll comes at the mean phase of a 5 s period: 2.5 s.
        let mut period = Duration::from_millis(2500);
        loop {
            std::thread::sleep(period);
            period = Duration::from_secs(5);
            if looped.health() == "unhealthy" {
                docker_ok(&["restart", &looped.name]);
                break;
            }
        }
        wait_health(&looped, "healthy", Duration::from_secs(60));
        let loop_took = started.elapsed();
        println!("| path | unhealthy → healthy | note |\n|---|---|---|");
        println!(
        "| drydock watching, `repair` mode, grant | {:.2} s | 2 s debounce; diagnosis, grant checks, verification with a 3 s stability hold |",
        healed.as_secs_f64()
    );
        println!(
        "| restart-on-unhealthy loop polling every 5 s | {:.2} s | first poll at the mean phase (2.5 s); no diagnosis, no cap, no audit |",
        loop_took.as_secs_f64()
    );
        println!(
            "\nratio: **{:.2}**\n",
            healed.as_secs_f64() / loop_took.as_secs_f64()
        );
    }

    if want("images") {
        println!("## Images\n");
        for image in ["drydock-executor", "drydock-agent"] {
            // `latest` from deploy/build-images.sh, or `e2e` from the deploy tests.
            let size = ["latest", "e2e"].iter().find_map(|tag| {
                let out = docker(&[
                    "image",
                    "inspect",
                    "-f",
                    "{{.Size}}",
                    &format!("{image}:{tag}"),
                ]);
                let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
                text.parse::<f64>().ok().map(|b| (tag, b))
            });
            match size {
                Some((tag, bytes)) => println!("- `{image}:{tag}`: {:.1} MB", bytes / 1e6),
                None => println!("- `{image}`: not built (run deploy/build-images.sh)"),
            }
        }
    }
}
