//! The soak benchmark: drydock watching for a long time (an hour by
//! default) while containers crash, wedge, flap and finish, in notify mode
//! and in repair mode under a grant, with the executor's audit store
//! rotating. Not a test: it prints what it measured.
//!
//! ```sh
//! DRYDOCK_E2E_PROFILE=release cargo run --release -p drydock-e2e --example soak -- --minutes 60
//! ```
//!
//! Every fault is a new container with one fault episode, so what the
//! watcher should do is known: one request for a crash, a wedged
//! healthcheck or a crash loop, none for a job that finished. It reports
//! missed triggers (a fault with no request), duplicates (more than one
//! request for one episode), spurious requests (one for a finished job),
//! both daemons' resident memory each minute, and the stores' sizes
//! against their caps.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use drydock_e2e::*;
use serde_json::Value;

/// How long a fault's container lives before its requests are counted.
const SETTLE: Duration = Duration::from_secs(75);
/// A new fault every this often, on each site.
const EVERY: Duration = Duration::from_secs(15);
const AUDIT_MAX: &str = "128KiB";
const AUDIT_SEGMENTS: u32 = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Crash,
    Unhealthy,
    Flap,
    Finished,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Crash, Kind::Unhealthy, Kind::Flap, Kind::Finished];

    fn expected(self) -> usize {
        match self {
            Kind::Finished => 0,
            _ => 1,
        }
    }

    fn args(self) -> Vec<&'static str> {
        let fixture = drydock::fixture::FIXTURE_IMAGE;
        match self {
            Kind::Crash => vec![
                fixture,
                "crash",
                "--code",
                "1",
                "--line",
                "panic: connection pool exhausted",
                "--after-restart-line",
                "started",
            ],
            Kind::Unhealthy => WEDGING_WEB.to_vec(),
            Kind::Flap => vec![
                "--restart",
                "always",
                fixture,
                "crash",
                "--code",
                "3",
                "--delay-ms",
                "1500",
                "--line",
                "fatal: cannot bind",
            ],
            Kind::Finished => vec![fixture, "crash", "--code", "0", "--line", "done"],
        }
    }
}

struct Site {
    dd: Drydock,
    mode: &'static str,
    prefix: String,
    token: String,
}

/// `store.max_requests` of both agents.
const MAX_REQUESTS: u32 = 100;
/// `watch.journal_max_rows` of both agents (the default, 100,000, takes
/// days of faults at this rate to reach).
const JOURNAL_MAX_ROWS: u32 = 1000;

fn edit(path: &std::path::Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).expect("read config");
    assert!(text.contains(from), "{} has no `{from}`", path.display());
    std::fs::write(path, text.replace(from, to)).expect("write config");
}

fn site(mode: &'static str) -> Site {
    let prefix = format!("dd-soak-{mode}");
    let dd = Drydock::init_options(|o| {
        o.targets = vec![format!("{prefix}-*")];
        o.watch = true;
    });
    edit(
        &dd.home.executor_config(),
        "automation:\n  enabled: false",
        "automation:\n  enabled: true",
    );
    edit(
        &dd.home.executor_config(),
        "  signing_key: pki/audit.key\n",
        &format!(
            "  signing_key: pki/audit.key\n  max_size: {AUDIT_MAX}\n  keep_segments: {AUDIT_SEGMENTS}\n"
        ),
    );
    // Small caps on finished requests and on the journal, so an hour shows
    // the store bounded (the defaults, 10,000 requests and 100,000 events,
    // take weeks of faults to reach).
    edit(
        &dd.home.agent_config(),
        "store:\n  path: state/agent.db\n",
        &format!("store:\n  path: state/agent.db\n  max_requests: {MAX_REQUESTS}\n"),
    );
    edit(
        &dd.home.agent_config(),
        "watch:\n  enabled: true\n  mode: notify\n",
        &format!(
            "watch:\n  enabled: true\n  mode: {mode}\n  journal_max_rows: {JOURNAL_MAX_ROWS}\n"
        ),
    );
    dd.up();
    if mode == "repair" {
        let out = dd.cli(&[
            "grant",
            "create",
            "--action",
            "restart",
            "--name",
            &format!("{prefix}-*"),
            "--max",
            "2/1h",
            "--expires",
            "7d",
            "--yes",
        ]);
        assert!(
            out.status.success(),
            "grant create: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let token = dd
        .home
        .load_cli_config()
        .and_then(|c| c.token())
        .expect("token");
    Site {
        dd,
        mode,
        prefix,
        token,
    }
}

async fn watch_requests(site: &Site) -> Vec<Value> {
    let answer = site
        .dd
        .agent_http()
        .get("http://agent/api/v1/requests?limit=500")
        .bearer_auth(&site.token)
        .send()
        .await;
    match answer {
        Ok(a) => a.json::<Vec<Value>>().await.unwrap_or_default(),
        Err(_) => Vec::new(),
    }
    .into_iter()
    .filter(|r| r["source"] == "watch")
    .collect()
}

fn pid_of(site: &Site, daemon: &str) -> u32 {
    drydock::daemons::read_pid(&site.dd.home, daemon).unwrap_or(0)
}

/// Bytes of every file in `state/` whose name starts with `stem`.
fn size_of(site: &Site, stem: &str) -> u64 {
    std::fs::read_dir(site.dd.home.path("state"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(stem))
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[derive(Default)]
struct Tally {
    faults: usize,
    missed: usize,
    duplicates: usize,
    spurious: usize,
    statuses: BTreeMap<String, usize>,
}

struct Live {
    container: Container,
    kind: Kind,
    since: Instant,
}

#[tokio::main]
async fn main() {
    let minutes: u64 = std::env::args()
        .skip_while(|a| a != "--minutes")
        .nth(1)
        .and_then(|m| m.parse().ok())
        .unwrap_or(60);
    prepare();
    let sites = [site("notify"), site("repair")];
    let started = Instant::now();
    let until = started + Duration::from_secs(minutes * 60);
    let mut live: Vec<(usize, Live)> = Vec::new();
    let mut tallies: BTreeMap<(&str, Kind), Tally> = BTreeMap::new();
    let mut memory: Vec<String> = Vec::new();
    let mut next_fault = Instant::now();
    let mut next_sample = Instant::now();
    let mut round = 0usize;
    let mut faults_left = true;
    println!(
        "soak: {minutes} min, a fault every {}s on each site, counted after {}s",
        EVERY.as_secs(),
        SETTLE.as_secs()
    );
    while faults_left || !live.is_empty() {
        let now = Instant::now();
        faults_left = now < until;
        if faults_left && now >= next_fault {
            let kind = Kind::ALL[round % Kind::ALL.len()];
            for (i, site) in sites.iter().enumerate() {
                let container = Container::run(&format!("soak-{}", site.mode), &kind.args());
                live.push((
                    i,
                    Live {
                        container,
                        kind,
                        since: now,
                    },
                ));
            }
            round += 1;
            next_fault = now + EVERY;
        }
        if now >= next_sample {
            let mut line = format!("| {:>3} min |", started.elapsed().as_secs() / 60);
            for site in &sites {
                line += &format!(
                    " {} | {} | {} | {} |",
                    rss_kib(pid_of(site, "drydock-agent")) / 1024,
                    rss_kib(pid_of(site, "drydock-executor")) / 1024,
                    size_of(site, "agent.db") / 1024,
                    size_of(site, "audit.db") / 1024,
                );
            }
            println!("{line}");
            memory.push(line);
            next_sample = now + Duration::from_secs(60);
        }
        let mut settled = Vec::new();
        live.retain_mut(|(i, l)| {
            if l.since.elapsed() >= SETTLE {
                settled.push((*i, l.container.name.clone(), l.kind));
                false
            } else {
                true
            }
        });
        // Counted before the containers go (dropping one removes it).
        for (i, name, kind) in &settled {
            let site = &sites[*i];
            let mine: Vec<Value> = watch_requests(site)
                .await
                .into_iter()
                .filter(|r| r["options"]["container"] == name.as_str())
                .collect();
            let t = tallies.entry((site.mode, *kind)).or_default();
            t.faults += 1;
            match (kind.expected(), mine.len()) {
                (1, 0) => t.missed += 1,
                (1, n) if n > 1 => t.duplicates += n - 1,
                (0, n) => t.spurious += n,
                _ => {}
            }
            for r in &mine {
                *t.statuses
                    .entry(r["status"].as_str().unwrap_or("?").to_string())
                    .or_default() += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    println!("\n| minute | notify agent MiB | notify executor MiB | notify agent.db KiB | notify audit KiB | repair agent MiB | repair executor MiB | repair agent.db KiB | repair audit KiB |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for line in &memory {
        println!("{line}");
    }
    println!("\n| mode | fault | faults | missed | duplicates | spurious | request statuses |");
    println!("|---|---|---|---|---|---|---|");
    let mut totals = (0, 0, 0, 0);
    for ((mode, kind), t) in &tallies {
        println!(
            "| {mode} | {kind:?} | {} | {} | {} | {} | {:?} |",
            t.faults, t.missed, t.duplicates, t.spurious, t.statuses
        );
        totals.0 += t.faults;
        totals.1 += t.missed;
        totals.2 += t.duplicates;
        totals.3 += t.spurious;
    }
    println!(
        "\ntotal: {} faults, {} missed, {} duplicates, {} spurious",
        totals.0, totals.1, totals.2, totals.3
    );
    for site in &sites {
        let segments = std::fs::read_dir(site.dd.home.path("state"))
            .map(|e| {
                e.flatten()
                    .filter(|e| e.file_name().to_string_lossy().contains(".seg."))
                    .count()
            })
            .unwrap_or(0);
        let verify = site.dd.audit_verify();
        println!(
            "{}: {} audit segments kept (cap {AUDIT_SEGMENTS}); audit store {} KiB in all (cap about {} × {AUDIT_MAX}); verify: {}",
            site.mode,
            segments,
            size_of(site, "audit.db") / 1024,
            AUDIT_SEGMENTS + 2,
            String::from_utf8_lossy(&verify.stdout).lines().next().unwrap_or("?")
        );
        let _ = &site.prefix;
    }
}
