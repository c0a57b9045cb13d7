//! The neighbourhood a scenario runs in (`tests/bench/neighbourhood.yaml`):
//! healthy bystanders with neighbouring names and the same roles, and
//! ordinary log noise before the target's own lines. On by default; a
//! scenario opts out of either only with a reason (`without:`).

use std::collections::BTreeSet;

use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::scenario::{Compose, ContainerSpec, EndState, Health, Ready, Scenario};

/// How many bystanders from the shared set stand beside each scenario.
const FROM_THE_SHARED_SET: usize = 2;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Neighbourhood {
    pub bystanders: Vec<Bystander>,
    /// Sets of lines; each scenario's target prints one before its own.
    pub noise: Vec<Vec<String>>,
}

/// A healthy container of a common role.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Bystander {
    pub service: String,
    pub image: String,
    pub port: u16,
    /// `[TOOL] URL`, as a scenario's `health.probe`.
    #[serde(default)]
    pub health: Option<String>,
    #[serde(default)]
    pub stdout: Vec<String>,
}

/// The neighbourhood the repository keeps (embedded: it is part of the
/// benchmark's definition).
pub fn shared() -> anyhow::Result<Neighbourhood> {
    let text = include_str!("../../bench/neighbourhood.yaml");
    let n: Neighbourhood = serde_yaml_ng::from_str(text)
        .map_err(|e| anyhow::anyhow!("tests/bench/neighbourhood.yaml: {e}"))?;
    if n.noise.is_empty() || n.bystanders.len() < FROM_THE_SHARED_SET {
        anyhow::bail!("tests/bench/neighbourhood.yaml: give noise sets and at least {FROM_THE_SHARED_SET} bystanders");
    }
    Ok(n)
}

/// A few bytes of the scenario id's hash: the choices are the same on
/// every run and differ between scenarios.
fn pick(id: &str, salt: u8, n: usize) -> usize {
    let h = Sha256::new()
        .chain_update(id.as_bytes())
        .chain_update([salt])
        .finalize();
    usize::from(u16::from_be_bytes([h[0], h[1]])) % n.max(1)
}

/// The container whose failure the scenario is about (the first one when
/// the answer is a question back).
fn target(s: &Scenario) -> Option<&ContainerSpec> {
    let name = s
        .expect
        .target
        .as_deref()
        .or(s.containers.first().map(|c| c.name.as_str()))?;
    s.containers.iter().find(|c| c.name == name)
}

/// The port a probe checks when it checks the container itself
/// (`127.0.0.1` or `localhost`) on a path the fixture answers, `None`
/// when it probes another one or a path only the real program serves.
fn own_probe_port(probe: &str) -> Option<u16> {
    // A probe command of its own may be one the image does not have.
    if probe.split_whitespace().next() == Some("exec") {
        return None;
    }
    let url = probe.split_whitespace().last()?;
    let rest = url.split_once("://")?.1;
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    // The fixture answers its root and the health paths real programs
    // use (tests/fixture's `is_health_path`); any other is a 404.
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or("");
    if !matches!(
        last,
        "" | "health" | "healthz" | "healthy" | "ready" | "readyz" | "livez"
    ) {
        return None;
    }
    let (host, port) = authority.rsplit_once(':').unwrap_or((authority, "80"));
    matches!(host, "127.0.0.1" | "localhost")
        .then(|| port.parse().ok())
        .flatten()
}

/// The port the target's program listens on, for its twin to serve.
fn port_of(c: &ContainerSpec) -> u16 {
    let argv = if c.args.is_empty() {
        &c.image_cmd
    } else {
        &c.args
    };
    argv.windows(2)
        .find(|w| w[0] == "--port")
        .and_then(|w| w[1].parse().ok())
        .unwrap_or(8080)
}

/// A neighbour's name and compose labels: `PROJECT-SERVICE-1` in the
/// neighbouring project, or `FALLBACK` with no labels when the target has
/// no project.
fn placed(project: Option<&str>, service: &str, fallback: String) -> (String, Option<Compose>) {
    match project {
        Some(p) => (
            format!("{p}-{service}-1"),
            Some(Compose {
                project: p.to_string(),
                service: service.to_string(),
                depends_on: Vec::new(),
                oneoff: false,
            }),
        ),
        None => (fallback, None),
    }
}

/// A container that serves `port` and, with a probe, waits until healthy.
fn healthy_spec(
    (name, compose): (String, Option<Compose>),
    image: &str,
    port: u16,
    health: Option<Health>,
) -> ContainerSpec {
    ContainerSpec {
        name,
        image: image.to_string(),
        image_cmd: Vec::new(),
        image_labels: Default::default(),
        ready: if health.is_some() {
            Ready::Healthy
        } else {
            Ready::Running
        },
        health,
        args: vec!["serve".into(), "--port".into(), port.to_string()],
        stdout: Vec::new(),
        stderr: Vec::new(),
        compose,
        networks: Vec::new(),
        env: Default::default(),
        labels: Default::default(),
        restart: None,
        memory: None,
        publish: Vec::new(),
        tmpfs: Vec::new(),
        volumes: Vec::new(),
        read_only: false,
        user: None,
        then: Vec::new(),
    }
}

/// The target's twin: the same image and service, in the neighbouring
/// project, serving. `None` when its image's probe checks another
/// container (the twin could not pass it).
fn twin(t: &ContainerSpec, project: Option<&str>) -> Option<ContainerSpec> {
    let port = match &t.health {
        Some(h) => own_probe_port(&h.probe)?,
        None => port_of(t),
    };
    let service = t.compose.as_ref().map(|c| c.service.as_str());
    let place = placed(
        project.filter(|_| service.is_some()),
        service.unwrap_or(""),
        format!("{}-staging", t.name),
    );
    let mut spec = healthy_spec(place, &t.image, port, t.health.clone());
    // Built as the target's image is (one tag serves both).
    spec.image_cmd = t.image_cmd.clone();
    spec.image_labels = t.image_labels.clone();
    Some(spec)
}

fn bystander(b: &Bystander, t: &ContainerSpec, project: Option<&str>) -> ContainerSpec {
    let place = placed(
        project,
        &b.service,
        format!("{}-staging-{}", t.name, b.service),
    );
    let health = b.health.as_ref().map(|probe| Health {
        probe: probe.clone(),
        interval: "1s".into(),
        retries: 1,
        timeout: "2s".into(),
        start_period: None,
    });
    let mut spec = healthy_spec(place, &b.image, b.port, health);
    spec.stdout = b.stdout.clone();
    spec
}

/// `s` in its neighbourhood: the bystanders added to its containers (each
/// expected running, or healthy, and untouched) and the noise put before
/// the target's own lines, except where the scenario opted out.
pub fn around(mut s: Scenario, n: &Neighbourhood) -> Scenario {
    let Some(t) = target(&s).cloned() else {
        return s;
    };
    if s.without.bystanders.is_none() {
        let project = t.compose.as_ref().map(|c| format!("{}-staging", c.project));
        let mut taken: BTreeSet<String> = s.names();
        let images: BTreeSet<String> = s
            .before
            .iter()
            .chain(&s.containers)
            .map(|c| c.image.to_ascii_lowercase())
            .collect();
        let mut added: Vec<ContainerSpec> = Vec::new();
        if let Some(tw) = twin(&t, project.as_deref()) {
            if taken.insert(tw.name.clone()) {
                added.push(tw);
            }
        }
        let first = pick(&s.id, 1, n.bystanders.len());
        let mut chosen = 0;
        for i in 0..n.bystanders.len() {
            if chosen == FROM_THE_SHARED_SET {
                break;
            }
            let b = &n.bystanders[(first + i) % n.bystanders.len()];
            let same_role = t.compose.as_ref().is_some_and(|c| c.service == b.service);
            let spec = bystander(b, &t, project.as_deref());
            if same_role || images.contains(&b.image) || !taken.insert(spec.name.clone()) {
                continue;
            }
            added.push(spec);
            chosen += 1;
        }
        for b in added {
            let settled = if b.ready == Ready::Healthy {
                EndState::Healthy
            } else {
                EndState::Running
            };
            s.expect
                .end
                .insert(b.name.clone(), vec![settled, EndState::Untouched]);
            s.containers.push(b);
        }
    }
    if s.without.noise.is_none() {
        let lines = &n.noise[pick(&s.id, 0, n.noise.len())];
        if let Some(c) = s.containers.iter_mut().find(|c| c.name == t.name) {
            // On the stream its own lines begin on: Docker times the two
            // streams as it reads each pipe, so lines a program writes a
            // moment apart on two streams can be logged in either order,
            // and noise must not land after the failure it preceded.
            let stream = if c.stdout.is_empty() && !c.stderr.is_empty() {
                &mut c.stderr
            } else {
                &mut c.stdout
            };
            stream.splice(0..0, lines.iter().cloned());
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(yaml: &str) -> Scenario {
        let mut list: Vec<Scenario> = serde_yaml_ng::from_str(yaml).unwrap();
        list.remove(0)
    }

    const BROKEN_API: &str = "- id: api-dies\n  title: t\n  sources: [https://example.org]\n  containers:\n    - {name: shop-db-1, image: 'postgres:16', compose: {project: shop, service: db}, args: [serve, --port, '5432'], ready: running}\n    - {name: shop-api-1, image: 'shop/api:2', compose: {project: shop, service: api}, args: [crash, --code, '1'], stdout: ['FATAL: the cause'], ready: exited}\n  ask: the api is down\n  expect: {class: [crash], target: shop-api-1, write: wrong}\n";

    #[test]
    fn a_scenario_gets_a_twin_two_bystanders_and_noise_before_its_lines() {
        let n = shared().unwrap();
        let s = around(scenario(BROKEN_API), &n);
        let names: Vec<&str> = s.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names.len(), 5, "{names:?}");
        assert!(names.contains(&"shop-staging-api-1"), "{names:?}");
        let twin = s
            .containers
            .iter()
            .find(|c| c.name == "shop-staging-api-1")
            .unwrap();
        assert_eq!(twin.image, "shop/api:2");
        assert_eq!(twin.args, ["serve", "--port", "8080"]);
        assert_eq!(twin.compose.as_ref().unwrap().project, "shop-staging");
        for extra in &names[2..] {
            assert!(extra.starts_with("shop-staging-"), "{extra}");
            assert!(
                s.expect.end[*extra].contains(&EndState::Untouched),
                "{extra} must be left alone"
            );
        }
        let api = s
            .containers
            .iter()
            .find(|c| c.name == "shop-api-1")
            .unwrap();
        assert!(api.stdout.len() > 3, "{:?}", api.stdout);
        assert_eq!(api.stdout.last().unwrap(), "FATAL: the cause");
        let db = s.containers.iter().find(|c| c.name == "shop-db-1").unwrap();
        assert!(db.stdout.is_empty(), "only the target gets noise");
        // The same every time, and not the same for every scenario.
        let again = around(scenario(BROKEN_API), &n);
        assert_eq!(
            again.containers.iter().map(|c| &c.name).collect::<Vec<_>>(),
            s.containers.iter().map(|c| &c.name).collect::<Vec<_>>()
        );
    }

    #[test]
    fn noise_goes_on_the_stream_the_target_s_own_lines_begin_on() {
        let n = shared().unwrap();
        let yaml = BROKEN_API.replace(
            "stdout: ['FATAL: the cause']",
            "stderr: ['FATAL: the cause']",
        );
        let s = around(scenario(&yaml), &n);
        let api = s
            .containers
            .iter()
            .find(|c| c.name == "shop-api-1")
            .unwrap();
        assert!(api.stdout.is_empty(), "{:?}", api.stdout);
        assert!(api.stderr.len() > 3, "{:?}", api.stderr);
        assert_eq!(api.stderr.last().unwrap(), "FATAL: the cause");
    }

    #[test]
    fn a_scenario_that_opts_out_says_why_and_gets_nothing() {
        let n = shared().unwrap();
        let yaml = BROKEN_API.replace(
            "  ask:",
            "  without: {bystanders: one container alone is the point, noise: the empty log is the point}\n  ask:",
        );
        let s = around(scenario(&yaml), &n);
        assert_eq!(s.containers.len(), 2);
        let api = s
            .containers
            .iter()
            .find(|c| c.name == "shop-api-1")
            .unwrap();
        assert_eq!(api.stdout, ["FATAL: the cause"]);
    }

    #[test]
    fn no_twin_when_the_probe_checks_another_container() {
        assert_eq!(
            own_probe_port("curl http://127.0.0.1:9000/health"),
            Some(9000)
        );
        assert_eq!(
            own_probe_port("pg_isready tcp://localhost:5432"),
            Some(5432)
        );
        assert_eq!(own_probe_port("http://localhost/"), Some(80));
        assert_eq!(own_probe_port("curl http://db:8080/"), None);
        assert_eq!(own_probe_port("exec curl -f http://127.0.0.1:80/"), None);
        assert_eq!(own_probe_port("curl http://127.0.0.1:8161/console"), None);
        assert_eq!(
            own_probe_port("wget http://127.0.0.1:3000/api/health"),
            Some(3000)
        );
    }

    #[test]
    fn no_bystander_shares_an_image_or_a_role_with_the_scenario() {
        let n = shared().unwrap();
        for b in &n.bystanders {
            let yaml = BROKEN_API
                .replace("'postgres:16'", &format!("'{}'", b.image))
                .replace("service: api", &format!("service: {}", b.service));
            let s = around(scenario(&yaml), &n);
            let images: Vec<&str> = s.containers.iter().map(|c| c.image.as_str()).collect();
            assert_eq!(
                images.iter().filter(|i| **i == b.image).count(),
                1,
                "{images:?}"
            );
        }
    }
}
