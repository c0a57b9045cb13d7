//! A scenario put on the engine: its images (the fixture, under the names
//! the scenario gives, with their labels, HEALTHCHECK and, in a file the
//! fixture reads, what it is to do: never on its command line), its
//! networks and its containers, each waited for until it is in the state
//! the scenario needs. Everything carries the label `drydock.bench=1` and
//! is removed when the `Staged` value drops, also when a step failed.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use sha2::{Digest as _, Sha256};

use super::scenario::{ContainerSpec, Ready, Scenario, Then};

/// The label on everything the benchmark creates.
pub const LABEL: &str = "drydock.bench=1";
/// How long a container may take to reach its state (a loaded machine
/// starts several scenarios at once).
const READY_TIMEOUT: Duration = Duration::from_secs(120);

fn docker(args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("cannot run the docker CLI")?;
    if !out.status.success() {
        bail!(
            "docker {} failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn inspect(name: &str, format: &str) -> String {
    docker(&["inspect", "-f", format, name]).unwrap_or_default()
}

/// Where a benchmark image holds the fixture, as its entrypoint.
const ENTRYPOINT: &str = "/usr/local/bin/docker-entrypoint";

/// The file in a benchmark image that tells the fixture what to do
/// (`tests/fixture/src/behaviour.rs` reads it).
const BEHAVIOUR_PATH: &str = "/etc/app/run";

/// `docker build -t TAG DIR` of a context holding the Dockerfile and the
/// fixture's behaviour file.
fn build(tag: &str, dockerfile: &str, behaviour: &str) -> anyhow::Result<()> {
    // A round that ends meanwhile removes the benchmark's images, an
    // intermediate layer of this build among them: built again, it is
    // there.
    let mut tries = 0;
    loop {
        tries += 1;
        match build_once(tag, dockerfile, behaviour) {
            Err(e) if tries < 3 && format!("{e:#}").contains("No such image") => continue,
            other => return other,
        }
    }
}

fn build_once(tag: &str, dockerfile: &str, behaviour: &str) -> anyhow::Result<()> {
    let dir = tempfile::tempdir().context("cannot make a build context")?;
    std::fs::write(dir.path().join("Dockerfile"), dockerfile)?;
    std::fs::write(dir.path().join("run"), behaviour)?;
    // Readable by the user a scenario runs as, whatever the umask (the
    // builder keeps a file's mode).
    std::fs::set_permissions(
        dir.path().join("run"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )?;
    let out = Command::new("docker")
        .args(["build", "-q", "-t", tag])
        .arg(dir.path())
        .stdin(Stdio::null())
        .output()
        .context("cannot run docker build")?;
    if !out.status.success() {
        bail!(
            "docker build {tag} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// The local name of a scenario's image: under `drydock-bench/`, with a
/// short opaque key of the scenario (no scenario shares another's image,
/// and nothing in the name tells a model the answer), keeping the owner's
/// last path segment, which is what says what it runs (`postgres`).
pub fn image_tag(scenario: &str, image: &str) -> String {
    let key = hex::encode(&Sha256::digest(scenario.as_bytes())[..3]);
    let image = image.to_ascii_lowercase();
    let (repo, tag) = match image.rsplit_once(':') {
        Some((r, t)) if !t.contains('/') => (r.to_string(), t.to_string()),
        _ => (image.clone(), "latest".to_string()),
    };
    format!("drydock-bench/s{key}/{repo}:{tag}")
}

fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".into())
}

/// What the fixture is to do in `c`: its argv with the output lines.
fn behaviour_of(c: &ContainerSpec) -> Vec<String> {
    if c.args.is_empty() {
        with_lines(&c.image_cmd, c)
    } else {
        with_lines(&c.args, c)
    }
}

/// The containers of `s` that run `c`'s image as built (the same name and
/// the same image command): one image serves them all.
fn sharing_the_image<'s>(s: &'s Scenario, c: &ContainerSpec) -> Vec<&'s ContainerSpec> {
    s.before
        .iter()
        .chain(&s.containers)
        .filter(|o| image_tag(&s.id, &o.image) == image_tag(&s.id, &c.image))
        .filter(|o| o.image_cmd == c.image_cmd)
        .collect()
}

/// The hostname a container runs with when its image serves containers
/// that behave differently (a web and a worker of one image, a definition
/// before and after a change): twelve hex digits, as Docker's own, chosen
/// from its behaviour. `None` when its image behaves one way.
fn hostname_of(s: &Scenario, c: &ContainerSpec) -> Option<String> {
    let mine = behaviour_of(c);
    let differs = sharing_the_image(s, c)
        .iter()
        .any(|o| behaviour_of(o) != mine);
    differs.then(|| {
        let mut h = Sha256::new();
        h.update(s.id.as_bytes());
        for a in &mine {
            h.update(a.as_bytes());
            h.update([0]);
        }
        hex::encode(&h.finalize()[..6])
    })
}

/// The behaviour file of `c`'s image: a variant per behaviour of the
/// containers it serves, each for its hostname (`*` when there is one).
fn behaviour_file(s: &Scenario, c: &ContainerSpec) -> String {
    // One argument per line: a backslash, a line break and a carriage
    // return are escaped, and so is an argument that would read as a
    // variant's header (`== …`).
    let escape = |a: &str| {
        let e = a
            .replace('\\', "\\\\")
            .replace('\n', "\\n")
            .replace('\r', "\\r");
        if e.starts_with('=') {
            format!("\\{e}")
        } else {
            e
        }
    };
    let mut out = String::new();
    let mut seen: Vec<Vec<String>> = Vec::new();
    for o in sharing_the_image(s, c) {
        let argv = behaviour_of(o);
        if seen.contains(&argv) {
            continue;
        }
        out.push_str(&format!(
            "== {}\n",
            hostname_of(s, o).unwrap_or_else(|| "*".into())
        ));
        for a in &argv {
            out.push_str(&escape(a));
            out.push('\n');
        }
        seen.push(argv);
    }
    out
}

/// The fixture's argv with the scenario's output lines.
fn with_lines(argv: &[String], c: &ContainerSpec) -> Vec<String> {
    let mut out = argv.to_vec();
    for l in &c.stdout {
        out.extend(["--line".to_string(), l.clone()]);
    }
    for l in &c.stderr {
        out.extend(["--stderr-line".to_string(), l.clone()]);
    }
    out
}

fn dockerfile(scenario: &str, c: &ContainerSpec) -> String {
    // The fixture, under a program's name: nothing in the image's
    // definition says what it will do.
    let fixture = drydock::fixture::FIXTURE_IMAGE;
    let mut f = format!(
        "FROM scratch\nCOPY --from={fixture} /drydock-fixture {ENTRYPOINT}\nSTOPSIGNAL SIGKILL\nENTRYPOINT [\"{ENTRYPOINT}\"]\nLABEL drydock.bench=1 drydock.bench.scenario=s{}\n",
        hex::encode(&Sha256::digest(scenario.as_bytes())[..3])
    );
    for (k, v) in &c.image_labels {
        f.push_str(&format!(
            "LABEL {k}={}\n",
            serde_json::Value::from(v.as_str())
        ));
    }
    if let Some(h) = &c.health {
        let words: Vec<&str> = h.probe.split_whitespace().collect();
        let probe: Vec<String> = match words.as_slice() {
            // A probe command of its own (one the image may not even have).
            ["exec", command @ ..] => command.iter().map(|w| w.to_string()).collect(),
            // The tool's own name, installed as the fixture: it probes in
            // that tool's words.
            [tool, url] => {
                f.push_str(&format!(
                    "COPY --from={fixture} /drydock-fixture /usr/bin/{tool}\n"
                ));
                let flags: &[&str] = match *tool {
                    "curl" => &["-fsS"],
                    "wget" => &["-q", "-O", "-"],
                    _ => &[],
                };
                std::iter::once(*tool)
                    .chain(flags.iter().copied())
                    .chain([*url])
                    .map(str::to_string)
                    .collect()
            }
            _ => {
                f.push_str(&format!(
                    "COPY --from={fixture} /drydock-fixture /usr/bin/healthcheck\n"
                ));
                std::iter::once("healthcheck")
                    .chain(words.iter().copied())
                    .map(str::to_string)
                    .collect()
            }
        };
        f.push_str(&format!(
            "HEALTHCHECK --interval={} --timeout={} --retries={}{} CMD {}\n",
            h.interval,
            h.timeout,
            h.retries,
            h.start_period
                .as_ref()
                .map(|p| format!(" --start-period={p}"))
                .unwrap_or_default(),
            json_list(&probe)
        ));
    }
    f.push_str(&format!("COPY run {BEHAVIOUR_PATH}\n"));
    f
}

/// A container as it was when setup finished: what "untouched" compares.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub id: String,
    pub started_at: String,
    pub restarts: String,
    /// Its restart policy's name (`no`, `always`, `on-failure`, …).
    pub policy: String,
}

impl Snapshot {
    /// Whether `now` is this container left alone. Under a restart policy
    /// the engine starts it again by itself, so only its identity can be
    /// compared; a write by drydock is caught by the audit log's
    /// accounting of writes.
    pub fn untouched(&self, now: &Snapshot) -> bool {
        let restarts_itself = !matches!(self.policy.as_str(), "" | "no");
        if restarts_itself {
            self.id == now.id
        } else {
            self == now
        }
    }
}

pub fn snapshot(name: &str) -> Snapshot {
    Snapshot {
        id: inspect(name, "{{.Id}}"),
        started_at: inspect(name, "{{.State.StartedAt}}"),
        restarts: inspect(name, "{{.RestartCount}}"),
        policy: inspect(name, "{{.HostConfig.RestartPolicy.Name}}"),
    }
}

/// What a scenario put on the engine; removed on drop.
pub struct Staged {
    containers: Vec<String>,
    networks: Vec<String>,
    volumes: Vec<String>,
    /// Every container by name, as setup left it.
    pub snapshots: BTreeMap<String, Snapshot>,
    /// The free port `{port}` stood for.
    pub port: u16,
    /// What each image tag was last built from (its Dockerfile and
    /// behaviour file): the same build is not made twice, so a container
    /// started earlier keeps running the image its tag names (a tag moves
    /// only when the scenario changes the image).
    built: BTreeMap<String, (String, String)>,
}

impl Drop for Staged {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = docker(&["rm", "-f", c]);
        }
        for n in &self.networks {
            let _ = docker(&["network", "rm", n]);
        }
        for v in &self.volumes {
            let _ = docker(&["volume", "rm", "-f", v]);
        }
    }
}

/// Refuse to touch what is not ours: a container or network of the same
/// name that the benchmark did not create stops the run; one it left
/// behind (a run killed halfway) is removed.
fn claim(kind: &str, name: &str) -> anyhow::Result<()> {
    let label = match kind {
        "container" => inspect(name, "{{index .Config.Labels \"drydock.bench\"}}"),
        _ => docker(&[
            kind,
            "inspect",
            "-f",
            "{{index .Labels \"drydock.bench\"}}",
            name,
        ])
        .unwrap_or_default(),
    };
    let exists = match kind {
        "container" => !inspect(name, "{{.Id}}").is_empty(),
        _ => docker(&[kind, "inspect", name]).is_ok(),
    };
    if !exists {
        return Ok(());
    }
    if label != "1" {
        bail!("a {kind} named {name} exists and was not made by the benchmark; remove or rename it, or leave this scenario out with --skip");
    }
    match kind {
        "container" => docker(&["rm", "-f", name]).map(|_| ()),
        "volume" => docker(&["volume", "rm", "-f", name]).map(|_| ()),
        _ => docker(&["network", "rm", name]).map(|_| ()),
    }
}

impl Staged {
    /// Create the scenario's networks; containers come with `run`.
    pub fn new(s: &Scenario, port: u16) -> anyhow::Result<Staged> {
        for name in s.names() {
            claim("container", &name)?;
        }
        for n in &s.networks {
            claim("network", n)?;
        }
        for v in s.volume_names() {
            claim("volume", &v)?;
        }
        let mut staged = Staged {
            containers: Vec::new(),
            networks: Vec::new(),
            volumes: Vec::new(),
            snapshots: BTreeMap::new(),
            port,
            built: Default::default(),
        };
        for n in &s.networks {
            docker(&["network", "create", "--label", LABEL, n])?;
            staged.networks.push(n.clone());
        }
        for v in s.volume_names() {
            docker(&["volume", "create", "--label", LABEL, &v])?;
            staged.volumes.push(v);
        }
        Ok(staged)
    }

    /// Build the image, run the container and wait for its state.
    pub fn run(&mut self, s: &Scenario, c: &ContainerSpec) -> anyhow::Result<()> {
        let tag = image_tag(&s.id, &c.image);
        let from = (dockerfile(&s.id, c), behaviour_file(s, c));
        if self.built.get(&tag) != Some(&from) {
            build(&tag, &from.0, &from.1)?;
            self.built.insert(tag.clone(), from);
        }
        let hostname = hostname_of(s, c);
        let attempts = if c.ready == Ready::OomKilled { 3 } else { 1 };
        for attempt in 1..=attempts {
            self.start(&tag, c, hostname.as_deref())?;
            match self.wait(c) {
                Ok(()) => break,
                // Docker 20.10 can lose the OOM flag to the exit event on a
                // loaded machine (exit 137 without OOMKilled): not the
                // scenario under test, so it runs again.
                Err(_) if attempt < attempts => {
                    docker(&["rm", "-f", &c.name])?;
                }
                Err(e) => return Err(e),
            }
        }
        for then in &c.then {
            match then {
                Then::Stop => {
                    docker(&["stop", &c.name])?;
                    wait_until(&c.name, "stopped", || {
                        inspect(&c.name, "{{.State.Status}}") == "exited"
                    })?;
                }
            }
        }
        Ok(())
    }

    fn start(
        &mut self,
        tag: &str,
        c: &ContainerSpec,
        hostname: Option<&str>,
    ) -> anyhow::Result<()> {
        let mut args: Vec<String> = ["run", "-d", "--name", &c.name, "--label", LABEL]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if let Some(h) = hostname {
            args.extend(["--hostname".into(), h.to_string()]);
        }
        let mut label = |k: &str, v: &str| args.extend(["--label".into(), format!("{k}={v}")]);
        if let Some(compose) = &c.compose {
            label("com.docker.compose.project", &compose.project);
            label("com.docker.compose.service", &compose.service);
            label("com.docker.compose.container-number", "1");
            label(
                "com.docker.compose.oneoff",
                if compose.oneoff { "True" } else { "False" },
            );
            if !compose.depends_on.is_empty() {
                let deps: Vec<String> = compose
                    .depends_on
                    .iter()
                    .map(|d| format!("{d}:service_started:false"))
                    .collect();
                label("com.docker.compose.depends_on", &deps.join(","));
            }
        }
        for (k, v) in &c.labels {
            label(k, v);
        }
        let alias = c.compose.as_ref().map(|x| x.service.clone());
        if let Some(net) = c.networks.first() {
            args.extend(["--network".into(), net.clone()]);
            if let Some(a) = &alias {
                args.extend(["--network-alias".into(), a.clone()]);
            }
        }
        for (k, v) in &c.env {
            args.extend(["-e".into(), format!("{k}={v}")]);
        }
        if let Some(r) = &c.restart {
            args.extend(["--restart".into(), r.clone()]);
        }
        if let Some(m) = &c.memory {
            args.extend([
                "--memory".into(),
                m.clone(),
                "--memory-swap".into(),
                m.clone(),
            ]);
        }
        for p in &c.publish {
            args.extend(["-p".into(), p.replace("{port}", &self.port.to_string())]);
        }
        for t in &c.tmpfs {
            args.extend(["--tmpfs".into(), t.clone()]);
        }
        for v in c.volume_specs() {
            let ro = if v.read_only { ":ro" } else { "" };
            args.extend(["-v".into(), format!("{}:{}{ro}", v.name, v.path)]);
        }
        if c.read_only {
            args.push("--read-only".into());
        }
        if let Some(u) = &c.user {
            args.extend(["--user".into(), u.clone()]);
        }
        args.push(tag.to_string());
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = docker(&refs);
        // Whatever happened, a container under the name is ours to remove.
        if !self.containers.contains(&c.name) {
            self.containers.push(c.name.clone());
        }
        match ran {
            // The engine refusing to start it is the scenario (a published
            // port taken): the container stays `created`.
            Err(_) if c.ready == Ready::Created => {}
            Err(e) => return Err(e),
            Ok(_) => {}
        }
        for net in c.networks.iter().skip(1) {
            let mut connect = vec!["network", "connect"];
            if let Some(a) = &alias {
                connect.extend(["--alias", a]);
            }
            connect.extend([net.as_str(), c.name.as_str()]);
            docker(&connect)?;
        }
        Ok(())
    }

    fn wait(&self, c: &ContainerSpec) -> anyhow::Result<()> {
        let name = c.name.as_str();
        let status = || inspect(name, "{{.State.Status}}");
        let health = || inspect(name, "{{if .State.Health}}{{.State.Health.Status}}{{end}}");
        match &c.ready {
            Ready::Exited => wait_until(name, "exited", || status() == "exited"),
            Ready::Created => wait_until(name, "created", || status() == "created"),
            Ready::OomKilled => {
                wait_until(name, "exited", || status() == "exited")?;
                if inspect(name, "{{.State.OOMKilled}}") != "true" {
                    bail!("{name} exited without the OOM flag (Docker's event race)");
                }
                Ok(())
            }
            Ready::Running => wait_until(name, "running", || status() == "running"),
            Ready::Healthy => wait_until(name, "healthy", || {
                status() == "running" && health() == "healthy"
            }),
            Ready::Unhealthy => wait_until(name, "unhealthy", || {
                status() == "running" && health() == "unhealthy"
            }),
            Ready::Restarts(n) => wait_until(name, "restarting", || {
                inspect(name, "{{.RestartCount}}")
                    .parse::<u32>()
                    .unwrap_or(0)
                    >= *n
            }),
            Ready::Logged(text) => wait_until(name, text, || {
                status() == "running" && logs(name).contains(text.as_str())
            }),
        }
    }

    /// Setup is done: remember every container as it is now.
    pub fn settle(&mut self, s: &Scenario) {
        for c in &s.containers {
            self.snapshots.insert(c.name.clone(), snapshot(&c.name));
        }
    }

    /// Remove a container of the `before` phase (its service is re-created).
    pub fn remove(&mut self, name: &str) -> anyhow::Result<()> {
        docker(&["rm", "-f", name])?;
        self.containers.retain(|c| c != name);
        Ok(())
    }
}

pub fn logs(name: &str) -> String {
    Command::new("docker")
        .args(["logs", name])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).to_string() + &String::from_utf8_lossy(&o.stderr)
        })
        .unwrap_or_default()
}

fn wait_until(name: &str, what: &str, done: impl Fn() -> bool) -> anyhow::Result<()> {
    let started = Instant::now();
    while !done() {
        if started.elapsed() > READY_TIMEOUT {
            bail!(
                "{name} did not become {what} within {}s: {}",
                READY_TIMEOUT.as_secs(),
                inspect(name, "{{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}} restarts={{.RestartCount}} error={{.State.Error}}")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Remove the benchmark's images (containers first).
pub fn remove_images() {
    if let Ok(ids) = docker(&["image", "ls", "-q", "--filter", &format!("label={LABEL}")]) {
        let ids: Vec<&str> = ids.lines().filter(|l| !l.is_empty()).collect();
        if !ids.is_empty() {
            let mut args = vec!["rmi", "-f"];
            args.extend(ids);
            let _ = docker(&args);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_keep_what_they_run_and_hide_the_scenario() {
        let tag = image_tag(
            "es-vm-max-map-count",
            "docker.elastic.co/elasticsearch/elasticsearch:8.11.0",
        );
        assert!(tag.starts_with("drydock-bench/s"), "{tag}");
        assert!(
            tag.ends_with("/elasticsearch/elasticsearch:8.11.0"),
            "{tag}"
        );
        assert!(!tag.contains("max-map"), "{tag}");
        assert!(image_tag("x", "Redis").ends_with("/redis:latest"));
        assert_ne!(image_tag("a", "redis:7"), image_tag("b", "redis:7"));
    }
}
