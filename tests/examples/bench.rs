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
//! - time to an update, `drydock update --yes` against `docker-compose pull
//!   && up -d` plus polling the health status (`bench/update.rs`);
//! - image sizes, when `deploy/build-images.sh` has built them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use drydock_e2e::*;
use drydock_proto::pb;

#[path = "bench/update.rs"]
mod update;

const SEQUENTIAL: usize = 300;
const LOAD_FOR: Duration = Duration::from_secs(2);
/// Rounds of each throughput level, direct and through the executor in turn.
const ROUNDS: usize = 5;
/// The stability hold (`verify.stable_for`, default): verification's own
/// choice, reported apart.
const HOLD: Duration = Duration::from_secs(3);

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

/// CPU time (user + system) of a process so far, in µs.
fn cpu_us(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (11 and 12 after the name), in
    // clock ticks of 10 ms.
    (ticks(11) + ticks(12)) * 10_000.0
}

fn dockerd_pid() -> u32 {
    let out = std::process::Command::new("pidof").arg("dockerd").output();
    out.ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// CPU used by the engine, the executor and this client since `now`.
struct Cpu {
    pids: (u32, u32),
    at: (f64, f64, f64),
}

impl Cpu {
    fn now(dockerd: u32, executor: u32) -> Cpu {
        Cpu {
            pids: (dockerd, executor),
            at: (
                cpu_us(dockerd),
                cpu_us(executor),
                cpu_us(std::process::id()),
            ),
        }
    }

    /// µs spent since by each: (engine, executor, client).
    fn total(&self) -> (f64, f64, f64) {
        (
            cpu_us(self.pids.0) - self.at.0,
            cpu_us(self.pids.1) - self.at.1,
            cpu_us(std::process::id()) - self.at.2,
        )
    }
}

fn sum3(a: (f64, f64, f64), b: (f64, f64, f64)) -> (f64, f64, f64) {
    (a.0 + b.0, a.1 + b.1, a.2 + b.2)
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
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
    // (`-- inspect throughput recovery update watch diagnosis scale images`).
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
        let mut floor = Vec::new();
        // The transport alone: a gRPC health check over a mutual-TLS
        // connection of the agent's identity, which the executor answers
        // without policy, engine or audit row.
        let mut health = dd.executor_health_as_agent().await;
        let mut transport = Vec::new();
        for _ in 0..20 {
            grpc::health_check(&mut health).await;
        }
        for _ in 0..SEQUENTIAL {
            let t = Instant::now();
            direct_inspect(&http, &id).await;
            direct.push(t.elapsed());
            let t = Instant::now();
            executor_inspect(&mut client, &id).await;
            through.push(t.elapsed());
            // The same path with no engine call: GetPolicy.
            let t = Instant::now();
            let _ = client
                .get_policy(pb::GetPolicyRequest {
                    request_id: "req-bench".into(),
                })
                .await;
            floor.push(t.elapsed());
            let t = Instant::now();
            grpc::health_check(&mut health).await;
            transport.push(t.elapsed());
        }
        let (d, e, f) = (summarize(direct), summarize(through), summarize(floor));
        let h = summarize(transport);
        row("Docker API directly", &d);
        row("through the executor", &e);
        row("GetPolicy through the executor (no engine call)", &f);
        row(
            "gRPC health check through the executor (mTLS and HTTP/2 only)",
            &h,
        );
        println!(
            "\nratio of medians (executor / direct): **{:.2}**; the executor's floor (a GetPolicy round trip) plus the direct inspect: {} (ratio {:.2})\n",
            e.median.as_secs_f64() / d.median.as_secs_f64(),
            ms(f.median + d.median),
            (f.median + d.median).as_secs_f64() / d.median.as_secs_f64()
        );
        println!(
            "the transport alone (a health check) plus the direct inspect: {} (ratio {:.2})\n",
            ms(h.median + d.median),
            (h.median + d.median).as_secs_f64() / d.median.as_secs_f64()
        );
    }

    if want("throughput") {
        println!(
            "## Throughput, {ROUNDS} alternating rounds of {}s per path and level (medians)\n",
            LOAD_FOR.as_secs()
        );
        println!("| in flight | direct calls/s | executor calls/s | ratio (median of the rounds' ratios) | rounds' ratios | executor errors |\n|---|---|---|---|---|---|");
        let rows_before = dd.audit_rows().len();
        let mut executor_calls = 0;
        let dockerd = dockerd_pid();
        let mut cpu_rows = Vec::new();
        for in_flight in [1, 16, 64] {
            // Direct and through the executor in turn, so a drift of the
            // engine (its Go collector, the machine's other load) falls on
            // both paths alike; each round's ratio is its own pair's.
            let (mut direct_rates, mut exec_rates, mut ratios) = (vec![], vec![], vec![]);
            let (mut direct_cpu, mut exec_cpu) = ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0));
            let (mut direct_calls, mut exec_ok, mut errors) = (0, 0, 0);
            for _ in 0..ROUNDS {
                let (http2, id2) = (http.clone(), id.clone());
                let cpu = Cpu::now(dockerd, exec.pid());
                let (direct_rate, direct_ok, _) = throughput(in_flight, move || {
                    let (http, id) = (http2.clone(), id2.clone());
                    async move { direct_inspect(&http, &id).await }
                })
                .await;
                direct_cpu = sum3(direct_cpu, cpu.total());
                direct_calls += direct_ok;
                let (c2, id2) = (client.clone(), id.clone());
                let cpu = Cpu::now(dockerd, exec.pid());
                let (exec_rate, ok, err) = throughput(in_flight, move || {
                    let (mut c, id) = (c2.clone(), id2.clone());
                    async move { executor_inspect(&mut c, &id).await }
                })
                .await;
                exec_cpu = sum3(exec_cpu, cpu.total());
                exec_ok += ok;
                errors += err;
                executor_calls += ok + err;
                ratios.push(exec_rate / direct_rate);
                direct_rates.push(direct_rate);
                exec_rates.push(exec_rate);
            }
            let per = |t: (f64, f64, f64), n: usize| {
                let n = n.max(1) as f64;
                (t.0 / n, t.1 / n, t.2 / n)
            };
            cpu_rows.push((
                in_flight,
                per(direct_cpu, direct_calls),
                per(exec_cpu, exec_ok),
            ));
            let shown: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
            println!(
                "| {in_flight} | {:.0} | {:.0} | {:.2} | {} | {errors} |",
                median_f64(direct_rates),
                median_f64(exec_rates),
                median_f64(ratios),
                shown.join(", ")
            );
        }
        println!("\nCPU time per call (µs; user + system, from /proc, over every round) — the two cores are shared by all three:\n");
        println!("| in flight | direct: dockerd | direct: client | executor path: dockerd | executor path: executor | executor path: client |\n|---|---|---|---|---|---|");
        for (n, d, e) in cpu_rows {
            println!(
                "| {n} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                d.0, d.2, e.0, e.1, e.2
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
            .map(|_| "includes the stability hold")
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
            drydock_took.saturating_sub(HOLD).as_secs_f64() / baseline_took.as_secs_f64()
        );
    }
    drop(dd);

    if want("update") {
        update::section();
    }

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
            "mode: repair\n",
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
        // Outside drydock's targets (`dd-benchwatch-*`): the loop alone
        // repairs it.
        let looped = Container::unhealthy_web("benchloop", &["--stop-timeout", "1"]);
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
        "| drydock watching, `repair` mode, grant | {:.2} s | the request opens on the `unhealthy` event; diagnosis, grant checks, the restart, verification with the {} s stability hold |",
        healed.as_secs_f64(),
        HOLD.as_secs()
    );
        println!(
        "| restart-on-unhealthy loop polling every 5 s | {:.2} s | first poll at the mean phase (2.5 s); no diagnosis, no cap, no audit |",
        loop_took.as_secs_f64()
    );
        println!(
            "\nratio: **{:.2}**; without the stability hold: **{:.2}**\n",
            healed.as_secs_f64() / loop_took.as_secs_f64(),
            healed.saturating_sub(HOLD).as_secs_f64() / loop_took.as_secs_f64()
        );
    }

    if want("diagnosis") {
        diagnosis_section();
    }
    if want("scale") {
        scale_section();
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

/// `curl` on the engine's socket, one process per read, as a person on call
/// would make it.
fn curl(path: &str) {
    let out = std::process::Command::new("curl")
        .args([
            "-sf",
            "-o",
            "/dev/null",
            "--unix-socket",
            "/var/run/docker.sock",
            &format!("http://docker{path}"),
        ])
        .output()
        .expect("run curl");
    assert!(out.status.success(), "curl {path} failed");
}

/// The reads a diagnosis needs, made directly: the list (to find the
/// container), its inspect, its last 200 log lines and, when it runs, the
/// two one-shot stats samples a CPU share needs.
fn direct_reads(id: &str, running: bool) -> Duration {
    let t = Instant::now();
    curl("/containers/json?all=1");
    curl(&format!("/containers/{id}/json"));
    curl(&format!("/containers/{id}/logs?stdout=1&stderr=1&tail=200"));
    if running {
        // What the executor does for a CPU share: two one-shot samples.
        curl(&format!(
            "/containers/{id}/stats?stream=false&one-shot=true"
        ));
        std::thread::sleep(Duration::from_millis(250));
        curl(&format!(
            "/containers/{id}/stats?stream=false&one-shot=true"
        ));
    }
    t.elapsed()
}

/// The same reads from this process on one reused connection (no process
/// start per read): the strictest baseline.
fn direct_reads_in_process(http: &reqwest::Client, id: &str, running: bool) -> Duration {
    let get = |path: String| {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("http://docker{path}"))
                .send()
                .await
                .expect("docker answers");
            assert!(r.status().is_success(), "{path}: {}", r.status());
            r.bytes().await.expect("body");
        }
    };
    tokio::task::block_in_place(|| {
        tokio::runtime::Handle::current().block_on(async {
            let t = Instant::now();
            get("/containers/json?all=1".into()).await;
            get(format!("/containers/{id}/json")).await;
            get(format!("/containers/{id}/logs?stdout=1&stderr=1&tail=200")).await;
            if running {
                get(format!("/containers/{id}/stats?stream=false&one-shot=true")).await;
                tokio::time::sleep(Duration::from_millis(250)).await;
                get(format!("/containers/{id}/stats?stream=false&one-shot=true")).await;
            }
            t.elapsed()
        })
    })
}

/// `drydock ask --diagnose-only`, timed; the class it named.
fn diagnose(dd: &Drydock, args: &[&str]) -> (Duration, String) {
    let mut all = vec!["--diagnose-only"];
    all.extend_from_slice(args);
    let t = Instant::now();
    let (_, request) = dd.ask_json(&all);
    let took = t.elapsed();
    let class = request["diagnosis"]["causes"][0]["class"]
        .as_str()
        .unwrap_or("(none)")
        .to_string();
    (took, class)
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn agent_rss(dd: &Drydock) -> f64 {
    drydock::daemons::read_pid(&dd.home, "drydock-agent")
        .map_or(0.0, |pid| rss_kib(pid) as f64 / 1024.0)
}

fn executor_rss(dd: &Drydock) -> f64 {
    drydock::daemons::read_pid(&dd.home, "drydock-executor")
        .map_or(0.0, |pid| rss_kib(pid) as f64 / 1024.0)
}

const DIAGNOSIS_RUNS: usize = 5;

/// Diagnosis latency per fault class, and the agent's memory idle and after
/// a burst of concurrent requests.
fn diagnosis_section() {
    use drydock::fixture::FIXTURE_IMAGE;
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-bench-*".into()]);
    // 64 diagnoses at once make about 400 calls in a second: the
    // per-identity limits are raised for the run.
    let config = dd.home.executor_config();
    let yaml = std::fs::read_to_string(&config).expect("executor config");
    let yaml = yaml.replace(
        "limits:\n",
        "limits:\n  calls_per_second: 100000\n  burst: 100000\n",
    );
    std::fs::write(&config, yaml).expect("executor config");
    dd.up();
    let agent_idle = agent_rss(&dd);
    let executor_idle = executor_rss(&dd);
    let exited = |c: &Container| c.inspect("{{.State.Status}}") == "exited";
    let crash = Container::run(
        "bench-crash",
        &[
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "panic: runtime error: index out of range [3] with length 3",
        ],
    );
    let config = Container::run(
        "bench-config",
        &[
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "Error: Missing SUPABASE_KEY environment variable",
        ],
    );
    let oom = Container::run(
        "bench-oom",
        &[
            "--memory",
            "32m",
            "--memory-swap",
            "32m",
            FIXTURE_IMAGE,
            "oom",
            "--mb",
            "256",
        ],
    );
    let stopped = Container::run("bench-stopped", &[FIXTURE_IMAGE, "sleep"]);
    docker_ok(&["stop", "-t", "1", &stopped.name]);
    for c in [&crash, &config, &oom, &stopped] {
        c.wait_for("exited", Duration::from_secs(60), exited);
    }
    let unhealthy = Container::unhealthy_web("bench-unhealthy", &[]);
    let cases = [
        ("crash", &crash, false),
        ("config_error", &config, false),
        ("oom_killed", &oom, false),
        ("stopped", &stopped, false),
        ("unhealthy (running: stats read too)", &unhealthy, true),
    ];
    println!("## Diagnosis latency per fault class, median of {DIAGNOSIS_RUNS}\n");
    println!("| class | class named | `drydock ask --diagnose-only` | the same reads with curl | ratio | the same reads in process | ratio |\n|---|---|---|---|---|---|---|");
    let http = docker_http();
    for (label, c, running) in cases {
        let id = c.id();
        let (mut ours, mut direct, mut named) = (Vec::new(), Vec::new(), String::new());
        let mut in_process = Vec::new();
        // After a stats read the engine keeps collecting for a few seconds,
        // and a one-shot sample then waits for its next cycle (up to 1 s):
        // let it go idle before each measured path, so none pays for the
        // one before it.
        let idle = || {
            if running {
                std::thread::sleep(Duration::from_secs(4));
            }
        };
        for _ in 0..DIAGNOSIS_RUNS {
            idle();
            direct.push(direct_reads(&id, running));
            idle();
            in_process.push(direct_reads_in_process(&http, &id, running));
            idle();
            let (took, class) = diagnose(&dd, &["--container", &c.name, "is it down?"]);
            ours.push(took);
            named = class;
        }
        let (o, d, p) = (median(ours), median(direct), median(in_process));
        println!(
            "| {label} | {named} | {} | {} | {:.2} | {} | {:.2} |",
            ms(o),
            ms(d),
            o.as_secs_f64() / d.as_secs_f64(),
            ms(p),
            o.as_secs_f64() / p.as_secs_f64()
        );
    }
    // Load on the agent: 64 requests at once, through the CLI.
    let mut answered = 0;
    {
        let handles: Vec<_> = (0..64)
            .map(|i| {
                let target = if i % 2 == 0 {
                    &crash.name
                } else {
                    &unhealthy.name
                };
                let mut cmd = std::process::Command::new(bin("drydock"));
                cmd.args([
                    "ask",
                    "--json",
                    "--diagnose-only",
                    "--container",
                    target,
                    "is it down?",
                ])
                .env("DRYDOCK_HOME", &dd.home.root);
                std::thread::spawn(move || {
                    cmd.output().is_ok_and(|o| {
                        serde_json::from_slice::<serde_json::Value>(&o.stdout).is_ok()
                    })
                })
            })
            .collect();
        for h in handles {
            if h.join().unwrap_or(false) {
                answered += 1;
            }
        }
    }
    // What it keeps once they are done (an allocator gives memory back
    // within moments, or never).
    std::thread::sleep(Duration::from_secs(2));
    println!(
        "\n| daemon | idle | after 64 concurrent diagnoses ({answered} answered) |\n|---|---|---|"
    );
    println!(
        "| drydock-agent | {agent_idle:.1} MiB | {:.1} MiB |",
        agent_rss(&dd)
    );
    println!(
        "| drydock-executor | {executor_idle:.1} MiB | {:.1} MiB |\n",
        executor_rss(&dd)
    );
}

/// `docker rm -f` in chunks (hundreds of containers).
fn remove_all(names: &[String]) {
    for chunk in names.chunks(100) {
        let mut args = vec!["rm", "-f"];
        args.extend(chunk.iter().map(String::as_str));
        let _ = docker(&args);
    }
}

/// Discovery and diagnosis with 10, 100 and 500 containers on the engine,
/// and a container that wrote 1,000,000 log lines.
fn scale_section() {
    use drydock::fixture::FIXTURE_IMAGE;
    let dd = Drydock::init_options(|o| o.targets = vec!["dd-bench-*".into()]);
    dd.up();
    // The one that is down; found by its service name among the others.
    let orders = Container::run(
        "bench-orders",
        &[
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "panic: orders table is locked",
        ],
    );
    orders.wait_for("exited", Duration::from_secs(60), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let id = orders.id();
    let mut others: Vec<String> = Vec::new();
    println!("## Scale\n");
    println!("Each row: `drydock ask --diagnose-only \"orders is down\"` (the container is found by name among all the others, which are created but not started), median of 3, against the same reads with curl.\n");
    println!("| containers on the engine | drydock | curl: list, inspect, logs | ratio | agent RSS | executor RSS |\n|---|---|---|---|---|---|");
    for total in [10usize, 100, 500] {
        // Created, not started: each costs the engine a record, not a process.
        let names: Vec<String> = (others.len() + 1..total)
            .map(|i| format!("dd-bench-scale-{}-{i}", std::process::id()))
            .collect();
        std::thread::scope(|s| {
            for chunk in names.chunks(names.len().div_ceil(4).max(1)) {
                s.spawn(move || {
                    for name in chunk {
                        docker_ok(&["create", "--name", name, FIXTURE_IMAGE, "sleep"]);
                    }
                });
            }
        });
        others.extend(names);
        let (mut ours, mut direct, mut named) = (Vec::new(), Vec::new(), String::new());
        for _ in 0..3 {
            direct.push(direct_reads(&id, false));
            let (took, class) = diagnose(&dd, &["orders is down"]);
            ours.push(took);
            named = class;
        }
        let (o, d) = (median(ours), median(direct));
        println!(
            "| {total} | {} ({named}) | {} | {:.2} | {:.1} MiB | {:.1} MiB |",
            ms(o),
            ms(d),
            o.as_secs_f64() / d.as_secs_f64(),
            agent_rss(&dd),
            executor_rss(&dd)
        );
    }
    remove_all(&others);

    // A container that wrote a million lines before it crashed.
    let chatty = Container::run(
        "bench-chatty",
        &[
            // Keep the whole log (this engine's default rotates at 10 MB).
            "--log-opt",
            "max-size=1g",
            "--log-opt",
            "max-file=1",
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--line",
            "2026-12-01T04:00:00Z INFO GET /api/orders 200 3ms",
            "--repeat",
            "1000000",
        ],
    );
    chatty.wait_for("exited", Duration::from_secs(300), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let log_path = chatty.inspect("{{.LogPath}}");
    let log_bytes = std::fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
    let before = (agent_rss(&dd), executor_rss(&dd));
    let id = chatty.id();
    let (mut ours, mut direct) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        direct.push(direct_reads(&id, false));
        ours.push(diagnose(&dd, &["--container", &chatty.name, "is it down?"]).0);
    }
    let (o, d) = (median(ours), median(direct));
    println!(
        "\n1,000,000 log lines ({:.0} MB of json-file log): `drydock ask --diagnose-only` {} against {} with curl (ratio {:.2}); agent RSS {:.1} → {:.1} MiB, executor RSS {:.1} → {:.1} MiB.\n",
        log_bytes as f64 / 1e6,
        ms(o),
        ms(d),
        o.as_secs_f64() / d.as_secs_f64(),
        before.0,
        agent_rss(&dd),
        before.1,
        executor_rss(&dd)
    );
}
