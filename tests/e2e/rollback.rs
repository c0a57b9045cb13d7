//! What changed before it broke, and the signed rollback, on the real
//! engine with Debian's docker-compose: a service runs image v1 and keeps
//! data in a named and an anonymous volume; v2, broken at start, is built
//! under the same tag and `docker-compose up -d` recreates the service.
//! drydock names the change, proposes the rollback to v1's image id, and
//! after a person's approval (shown both images) the service runs v1 again
//! under its name, on its network with its aliases, with its data.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use drydock_e2e::approvals::{claims, sign};
use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

/// A compose project of its own, taken down with its volumes afterwards.
struct Project {
    name: String,
    dir: tempfile::TempDir,
    images: Vec<String>,
}

impl Project {
    fn new(test: &str) -> Project {
        Project {
            name: unique(test),
            dir: tempfile::tempdir().expect("temp dir"),
            images: Vec::new(),
        }
    }

    /// The service's image, by name (v1 and v2 are built under it).
    fn tag(&self) -> String {
        format!("{}-api:latest", self.name)
    }

    /// Build the fixture web image under the project's tag: `cmd` as its
    /// command, `revision` as its OCI revision label, an anonymous volume
    /// at `/anon`, and the project's name as a label, so that no other
    /// test builds the same image id (and removes it with its own).
    /// Returns the image id.
    fn build(&mut self, revision: &str, cmd: &str) -> String {
        let tag = self.tag();
        build_image(
            &tag,
            &format!(
                "FROM {}\nLABEL org.opencontainers.image.revision={revision} drydock.test.project={}\nVOLUME /anon\nCMD {cmd}\n",
                drydock::fixture::FIXTURE_WEB_IMAGE,
                self.name
            ),
        );
        let id = docker_ok(&["image", "inspect", "-f", "{{.Id}}", &tag]);
        self.images.push(id.clone());
        id
    }

    fn write_compose(&self, extra: &str) {
        let yaml = format!(
            "version: \"2.4\"\nservices:\n  api:\n    image: {}\n    environment:\n      DATABASE_URL: postgres://db:5432/shop\n    volumes:\n      - data:/named\n      - /anon\n{extra}volumes:\n  data: {{}}\n",
            self.tag()
        );
        std::fs::write(self.file(), yaml).expect("write compose file");
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("docker-compose.yml")
    }

    fn compose(&self, args: &[&str]) -> Output {
        Command::new("docker-compose")
            .arg("-p")
            .arg(&self.name)
            .arg("-f")
            .arg(self.file())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run docker-compose (Debian: apt-get install docker-compose): {e}")
            })
    }

    fn compose_ok(&self, args: &[&str]) -> String {
        let out = self.compose(args);
        assert!(
            out.status.success(),
            "docker-compose {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// The api container's id now.
    fn api_id(&self) -> String {
        self.compose_ok(&["ps", "-q", "api"])
    }

    fn api_name(&self) -> String {
        format!("{}_api_1", self.name)
    }
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = self.compose(&["down", "-v", "--remove-orphans", "-t", "1"]);
        for image in &self.images {
            let _ = docker(&["rmi", "-f", image]);
        }
    }
}

fn inspect(container: &str, format: &str) -> String {
    docker_ok(&["inspect", "-f", format, container])
}

fn wait(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let started = std::time::Instant::now();
    while !done() {
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The bytes of a file in a container (a volume's too), through the
/// engine's archive API.
fn file_size(container: &str, path: &str) -> usize {
    let out = docker(&["cp", &format!("{container}:{path}"), "-"]);
    assert!(
        out.status.success(),
        "docker cp {path}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout.len()
}

/// A home scoped to the project, with rollbacks allowed.
fn drydock_for(project: &Project) -> Drydock {
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{}_*", project.name)]);
    let config = std::fs::read_to_string(dd.home.executor_config()).unwrap();
    std::fs::write(
        dd.home.executor_config(),
        config.replace("rollback: {enabled: false}", "rollback: {enabled: true}"),
    )
    .unwrap();
    dd
}

const V1_CMD: &str = "[\"serve\", \"--port\", \"8080\"]";
const V2_CMD: &str = "[\"crash\", \"--code\", \"1\", \"--line\", \"Error: missing required environment variable DATABASE_URL\"]";

/// v1 up and healthy, with a MiB in each volume, seen once by drydock; then
/// v2 built under the same tag and the service recreated from it. Returns
/// (v1 image, v2 image, v1 container).
fn v1_then_v2(project: &mut Project, dd: &Drydock, extra: &str) -> (String, String, String) {
    let v1 = project.build("v1rev", V1_CMD);
    project.write_compose(extra);
    project.compose_ok(&["up", "-d"]);
    let old = project.api_id();
    wait("v1 healthy", Duration::from_secs(60), || {
        inspect(&old, "{{.State.Health.Status}}") == "healthy"
    });
    docker_ok(&[
        "run",
        "--rm",
        "--volumes-from",
        &old,
        drydock::fixture::FIXTURE_IMAGE,
        "fill",
        "--write",
        "/named/marker=1",
        "--write",
        "/anon/marker=1",
    ]);
    // drydock sees v1 as it runs well (an inspect remembers it).
    let (_, seen) = dd.ask_json(&["--diagnose-only", "is the api healthy?"]);
    assert_eq!(
        seen["diagnosis"]["causes"][0]["class"], "healthy",
        "{seen:#}"
    );
    let v2 = project.build("v2rev", V2_CMD);
    assert_ne!(v1, v2);
    project.compose_ok(&["up", "-d"]);
    let new = project.api_id();
    assert_ne!(new, old, "docker-compose recreated the service from v2");
    wait("v2 to fail", Duration::from_secs(30), || {
        inspect(&new, "{{.State.Status}}") == "exited"
    });
    (v1, v2, old)
}

#[test]
fn a_bad_image_behind_a_moved_tag_is_named_and_rolled_back_with_its_data() {
    let mut project = Project::new("rollback");
    let dd = drydock_for(&project);
    dd.up();
    let (v1, v2, _) = v1_then_v2(&mut project, &dd, "");
    let broken = project.api_id();
    let anon = inspect(
        &broken,
        "{{range .Mounts}}{{if eq .Destination \"/anon\"}}{{.Name}}{{end}}{{end}}",
    );

    let out = dd.cli(&["ask", "--yes", "api is down"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{said}\n{}\nagent log:\n{}",
        String::from_utf8_lossy(&out.stderr),
        dd.agent_log()
    );
    // The change, named; the approval, with both images.
    assert!(said.contains("recreated from image sha256:"), "{said}");
    assert!(said.contains("tag ") && said.contains("moved"), "{said}");
    assert!(said.contains("built from commit v2rev"), "{said}");
    assert!(
        said.contains(&format!(
            "approving (--yes): rollback container {} (id {broken}) from image {v2} to image {v1}",
            project.api_name()
        )),
        "{said}"
    );
    let id = said
        .lines()
        .find_map(|l| l.strip_prefix("request ").and_then(|r| r.split(':').next()))
        .expect("the request id")
        .to_string();
    let (_, req) = dd.ask_json(&["--diagnose-only", "is the api healthy?"]);
    let out = dd.cli(&["show", "--json", &id]);
    let shown: Value = serde_json::from_slice(&out.stdout).expect("show --json");
    assert_eq!(shown["status"], "completed", "{shown:#}");
    assert_eq!(shown["plan"]["steps"][0]["action"], "rollback");
    assert_eq!(shown["plan"]["steps"][0]["image_id"], v1.as_str());
    let change = shown["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "change")
        .expect("change evidence");
    assert_eq!(change["data"]["previous"]["image_id"], v1.as_str());
    assert_eq!(change["data"]["previous_image_present"], true);
    assert_eq!(req["diagnosis"]["causes"][0]["class"], "healthy");

    // Back on v1, under its name, healthy, on its network with its alias,
    // with both volumes and their data, and compose knows it.
    let now = project.api_id();
    assert_ne!(now, broken);
    assert_eq!(inspect(&now, "{{.Image}}"), v1);
    assert_eq!(
        inspect(&now, "{{.Name}}"),
        format!("/{}", project.api_name())
    );
    wait("v1 healthy again", Duration::from_secs(60), || {
        inspect(&now, "{{.State.Health.Status}}") == "healthy"
    });
    let network = format!("{}_default", project.name);
    let aliases = inspect(
        &now,
        &format!("{{{{json (index .NetworkSettings.Networks \"{network}\").Aliases}}}}"),
    );
    assert!(aliases.contains("\"api\""), "{aliases}");
    assert_eq!(
        inspect(
            &now,
            "{{range .Mounts}}{{if eq .Destination \"/anon\"}}{{.Name}}{{end}}{{end}}"
        ),
        anon,
        "the anonymous volume moved with it"
    );
    assert!(file_size(&now, "/named/marker") > 1 << 20);
    assert!(file_size(&now, "/anon/marker") > 1 << 20);
    assert!(
        docker(&["inspect", &broken]).status.code() != Some(0),
        "the old container is gone"
    );
    assert!(project.compose_ok(&["ps"]).contains("Up"));
    // With the service's checkout named in cli.yaml, `show` lists the
    // commits between the two images.
    let _repo = dd.source_checkout(
        "api",
        &[
            ("the release that works", "v1rev"),
            ("read DATABASE_URL under a new name", "v2rev"),
        ],
    );
    let shown = dd.cli(&["show", &id]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("commits between the images (v1rev..v2rev")
            && shown.contains("read DATABASE_URL under a new name")
            && !shown.contains("the release that works"),
        "{shown}"
    );
    // The console shows what changed, from the same evidence.
    let console = crate::ui::Console::start(&dd);
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async {
            let mut browser = crate::ui::Browser::start().await;
            browser.goto(&console.url).await;
            browser
                .goto(&format!("{}/#/requests/{id}", console.origin))
                .await;
            for shown in [v1.as_str(), v2.as_str(), "v2rev", "recreated from image"] {
                browser
                    .wait_for("#change", shown, Duration::from_secs(20))
                    .await;
            }
            browser.quit().await;
        });
    // Intent and outcome in the audit chain.
    let rows: Vec<Value> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["action"] == "rollback")
        .collect();
    assert_eq!(decisions(&rows), ["intent", "allowed"], "{rows:#?}");
    dd.assert_audit_intact();
}

#[test]
fn a_rollback_whose_start_fails_puts_the_original_back() {
    let mut project = Project::new("rollback-fails");
    let dd = drydock_for(&project);
    dd.up();
    let port = free_port();
    let (v1, _, _) = v1_then_v2(
        &mut project,
        &dd,
        &format!("    ports:\n      - \"{port}:8080\"\n"),
    );
    let broken = project.api_id();
    // The port v1 needs is taken while v2 is down: the rollback's start
    // fails at the engine.
    let blocker = Container::run(
        "rollback-blocker",
        &[
            "-p",
            &format!("{port}:8080"),
            drydock::fixture::FIXTURE_IMAGE,
            "sleep",
        ],
    );
    let (code, req) = dd.ask_json(&["--yes", "api is down"]);
    assert_eq!(code, 1, "{req:#}");
    assert_eq!(req["plan"]["steps"][0]["image_id"], v1.as_str());
    let message = req["execution"][0]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("failed at start")
            && message.contains("was put back as it was (not running)"),
        "{message}"
    );
    // The original is back under its name, as it was; nothing is left over.
    assert_eq!(project.api_id(), broken);
    assert_eq!(
        inspect(&broken, "{{.Name}}"),
        format!("/{}", project.api_name())
    );
    assert_eq!(inspect(&broken, "{{.State.Status}}"), "exited");
    let leftovers = docker_ok(&[
        "ps",
        "-a",
        "--filter",
        &format!("name={}_api_1-drydock", project.name),
        "-q",
    ]);
    assert!(leftovers.is_empty(), "left over: {leftovers}");
    drop(blocker);
    let rows: Vec<Value> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["action"] == "rollback")
        .collect();
    assert_eq!(decisions(&rows), ["intent", "error"], "{rows:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_refusals_are_each_refused_and_audited() {
    let mut project = Project::new("rollback-refused");
    let dd = drydock_for(&project);
    let v1 = project.build("v1rev", V1_CMD);
    project.write_compose("");
    project.compose_ok(&["up", "-d"]);
    let target = project.api_id();
    let other = Container::run(
        "rollback-refused-other",
        &[drydock::fixture::FIXTURE_IMAGE, "sleep"],
    );
    let v2 = project.build("v2rev", V2_CMD);
    let key = dd.approver_key();
    let rollback_claims = |request: &str, container: &str, to: &str, from: &str| {
        let mut c = claims(request, WriteAction::Rollback, container);
        c.image_id = Some(to.into());
        c.from_image_id = Some(from.into());
        sign(&c, &key, "local-operator")
    };
    let absent = format!("sha256:{}", "e".repeat(64));
    let ca = read(&dd.home.path("pki/ca.crt"));
    let (cert, pkey) = (
        read(&dd.home.path("pki/agent.crt")),
        read(&dd.home.path("pki/agent.key")),
    );
    let request =
        |request_id: &str, image: &str, approval: Option<pb::Approval>| pb::RollbackRequest {
            request_id: request_id.into(),
            container: target.clone(),
            image_id: image.into(),
            approval,
        };
    type Case = (&'static str, pb::RollbackRequest, Code, String);
    let cases: Vec<Case> = vec![
        (
            "not-an-id",
            request(
                "req-rb-name",
                &project.tag(),
                Some(rollback_claims("req-rb-name", &target, &v1, &v1)),
            ),
            Code::InvalidArgument,
            "not an image's content id".into(),
        ),
        (
            "no-approval",
            request("req-rb-none", &v2, None),
            Code::FailedPrecondition,
            "approval missing".into(),
        ),
        (
            "other-image",
            request(
                "req-rb-other",
                &v2,
                Some(rollback_claims("req-rb-other", &target, &absent, &v1)),
            ),
            Code::FailedPrecondition,
            format!("approval is for image {absent}"),
        ),
        (
            "image-moved",
            request(
                "req-rb-moved",
                &v2,
                Some(rollback_claims("req-rb-moved", &target, &v2, &absent)),
            ),
            Code::FailedPrecondition,
            "it runs".into(),
        ),
        (
            "other-container",
            request(
                "req-rb-ctr",
                &v2,
                Some(rollback_claims("req-rb-ctr", &other.id(), &v2, &v1)),
            ),
            Code::FailedPrecondition,
            "is for container".into(),
        ),
        (
            "not-on-the-engine",
            request(
                "req-rb-absent",
                &absent,
                Some(rollback_claims("req-rb-absent", &target, &absent, &v1)),
            ),
            Code::FailedPrecondition,
            "is not on the engine; drydock never pulls".into(),
        ),
    ];
    // Disabled (the default): refused by policy before anything else.
    {
        let exec = ExecutorProcess::start(&dd, |y| {
            y.replace("rollback: {enabled: true}", "rollback: {enabled: false}")
        });
        let mut client = grpc::connect(exec.port, &ca, Some((&cert, &pkey)))
            .await
            .expect("connect");
        let err = client
            .rollback_container(request(
                "req-rb-off",
                &v2,
                Some(rollback_claims("req-rb-off", &target, &v2, &v1)),
            ))
            .await
            .expect_err("disabled");
        assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
        assert!(err.message().contains("rollback is disabled"), "{err:?}");
    }
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut client = grpc::connect(exec.port, &ca, Some((&cert, &pkey)))
        .await
        .expect("connect");
    for (name, req, code, needle) in cases {
        let request_id = req.request_id.clone();
        let err = client.rollback_container(req).await.expect_err(name);
        assert_eq!(err.code(), code, "{name}: {err:?}");
        assert!(err.message().contains(&needle), "{name}: {err:?}");
        let row = dd
            .audit_rows()
            .into_iter()
            .rev()
            .find(|r| r["request_id"] == request_id.as_str())
            .unwrap_or_else(|| panic!("{name}: no audit row"));
        assert_eq!(row["action"], "rollback", "{name}");
        assert_eq!(row["tier"], 2, "{name}");
        assert!(
            matches!(row["decision"].as_str(), Some("denied") | Some("error")),
            "{name}: {row}"
        );
    }
    // A grant can never name a rollback.
    let out = dd.cli(&[
        "grant",
        "create",
        "--action",
        "rollback",
        "--name",
        "x-*",
        "--max",
        "1/1h",
        "--expires",
        "1h",
        "--yes",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rollback is a T2 action"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nothing happened to the container.
    assert_eq!(project.api_id(), target);
    assert_eq!(inspect(&target, "{{.Image}}"), v1);
    drop(other);
}

#[test]
fn an_environment_change_is_named_by_variable_and_an_unchanged_recreate_is_not_blamed() {
    let mut project = Project::new("change-env");
    let dd = drydock_for(&project);
    dd.up();
    // A service that fails from the start, recreated exactly as it was:
    // no change to blame.
    project.build("v1rev", V2_CMD);
    project.write_compose("");
    project.compose_ok(&["up", "-d"]);
    let first = project.api_id();
    wait("the first to exit", Duration::from_secs(30), || {
        inspect(&first, "{{.State.Status}}") == "exited"
    });
    dd.ask_json(&["--diagnose-only", "api is down"]);
    project.compose_ok(&["up", "-d", "--force-recreate"]);
    let again = project.api_id();
    assert_ne!(first, again);
    wait(
        "the re-created one to exit",
        Duration::from_secs(30),
        || inspect(&again, "{{.State.Status}}") == "exited",
    );
    let (_, req) = dd.ask_json(&["--diagnose-only", "api is down"]);
    assert_eq!(
        req["diagnosis"]["causes"][0]["class"], "config_error",
        "{req:#}"
    );
    assert!(
        !req["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "change"),
        "{req:#}"
    );
    assert!(
        !req["diagnosis"]["summary"]
            .as_str()
            .unwrap_or("")
            .contains("recreated"),
        "{req:#}"
    );
    // It runs well for a while (seen so by drydock)...
    let serve = "    command: [\"serve\", \"--port\", \"8080\"]\n";
    project.write_compose(serve);
    project.compose_ok(&["up", "-d"]);
    let good = project.api_id();
    wait("it to run healthy", Duration::from_secs(60), || {
        inspect(&good, "{{.State.Health.Status}}") == "healthy"
    });
    let (_, seen) = dd.ask_json(&["--diagnose-only", "is the api healthy?"]);
    assert_eq!(
        seen["diagnosis"]["causes"][0]["class"], "healthy",
        "{seen:#}"
    );
    // ...until its environment and command change: the variable is named,
    // its value (which may be a secret) never is.
    project.write_compose("");
    let yaml = std::fs::read_to_string(project.file()).unwrap();
    std::fs::write(
        project.file(),
        yaml.replace(
            "postgres://db:5432/shop",
            "postgres://admin:hunter2@db:5432/shop",
        ),
    )
    .unwrap();
    project.compose_ok(&["up", "-d"]);
    let changed = project.api_id();
    assert_ne!(good, changed);
    wait("the changed one to exit", Duration::from_secs(30), || {
        inspect(&changed, "{{.State.Status}}") == "exited"
    });
    let (code, req) = dd.ask_json(&["api is down"]);
    assert_eq!(code, 0, "advice only: {req:#}");
    let cause = req["diagnosis"]["causes"][0]["reason"]
        .as_str()
        .unwrap_or("");
    let change = req["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "change")
        .unwrap_or_else(|| panic!("no change evidence: {req:#}"))
        .clone();
    assert_eq!(
        change["data"]["env_changed"],
        serde_json::json!(["DATABASE_URL"])
    );
    assert_eq!(change["data"]["image_changed"], false);
    assert!(
        cause.contains("with environment DATABASE_URL changed"),
        "{cause}"
    );
    let everything = req.to_string();
    assert!(
        !everything.contains("hunter2"),
        "a value leaked: {everything}"
    );
    assert!(
        req["plan"]["advice"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str().unwrap_or("").contains("environment of")),
        "{req:#}"
    );
}
