//! `drydock build` end to end, on the real daemons, a real engine and a
//! real git repository made here: a compose service with `build:` runs the
//! second of three commits (the third breaks the start); `drydock build
//! --at <second>` builds it from the commit's own files (the operator's
//! checkout, with a change in it, is untouched) and deploys it healthy.
//! Then, as a compromised agent would, the boundary is tried: an approval
//! for one commit presented for another, a container no context builds
//! for, the checkout's dirty HEAD, a grant, a build that reaches the
//! network, a build that outlives its time limit: each refused (or
//! stopped) and audited.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use drydock_e2e::*;
use drydock_proto::approval::{build_tag, BuildClaims, CommitId, WriteAction};
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

use crate::update_flow::Removed;

/// The serving image every commit builds on (on the engine: builds never
/// pull).
pub(crate) const BASE: &str = drydock::fixture::FIXTURE_WEB_IMAGE;

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn git(&self, args: &[&str]) -> String {
        git(self.dir.path(), args)
    }

    /// A commit with this Dockerfile and `app.txt`; its full id.
    fn commit(&self, subject: &str, dockerfile: &str, app: &str) -> String {
        std::fs::write(self.dir.path().join("Dockerfile"), dockerfile).expect("Dockerfile");
        std::fs::write(self.dir.path().join("app.txt"), app).expect("app.txt");
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", subject]);
        self.git(&["rev-parse", "HEAD"])
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

pub(crate) fn dockerfile(version: &str, cmd: &str) -> String {
    format!("FROM {BASE}\nLABEL drydock.test.version={version}\nCOPY app.txt /app.txt\nCMD {cmd}\n")
}

pub(crate) const SERVE: &str = "[\"serve\", \"--port\", \"8080\"]";
const BROKEN: &str = "[\"crash\", \"--code\", \"3\", \"--line\", \"FATAL: config v3 is invalid\"]";

fn compose(project: &str, file: &Path, args: &[&str]) -> std::process::Output {
    Command::new("docker-compose")
        .arg("-p")
        .arg(project)
        .arg("-f")
        .arg(file)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run docker-compose: {e}"))
}

fn wait(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The source of `commit` as the executor reads it and an approval binds
/// it.
fn source(repo: &Repo, context: &str, commit: &str) -> BuildClaims {
    let commit = CommitId::parse(commit).expect("a full commit id");
    BuildClaims {
        context: context.into(),
        tag: build_tag(context, &commit),
        tree: repo.git(&["rev-parse", &format!("{commit}^{{tree}}")]),
        commit,
        dockerfile: "Dockerfile".into(),
        subject: None,
        author: None,
    }
}

pub(crate) fn build_approval(
    dd: &Drydock,
    request: &str,
    container: &str,
    signed: BuildClaims,
) -> pb::Approval {
    let mut claims = approvals::claims(request, WriteAction::Build, container);
    claims.build = Some(signed);
    approvals::sign(&claims, &dd.approver_key(), "local-operator")
}

/// `drydock build ARGS --yes --json`: the request it ended with.
pub(crate) fn build_cli(dd: &Drydock, args: &[&str]) -> Value {
    let mut all = vec!["build", "--yes", "--json"];
    all.extend_from_slice(args);
    let out = dd.cli(&all);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}\nagent log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            dd.agent_log()
        )
    })
}

pub(crate) fn build_request(
    request: &str,
    container: &str,
    commit: &str,
    a: pb::Approval,
) -> pb::BuildRequest {
    pb::BuildRequest {
        request_id: request.into(),
        container: container.into(),
        commit: commit.into(),
        approval: Some(a),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_service_is_rebuilt_from_a_signed_commit_and_the_boundary_holds() {
    drydock_daemon::tls::install_crypto_provider();
    let project = unique("build");
    let context = "api";
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{project}_*")]);
    let repo = Repo {
        dir: tempfile::tempdir().expect("temp dir"),
    };
    repo.git(&["init", "-q", "-b", "main"]);
    let first = repo.commit("the first page", &dockerfile("1", SERVE), "one\n");
    let second = repo.commit("serve page two", &dockerfile("2", SERVE), "two\n");
    let third = repo.commit("read config v3", &dockerfile("3", BROKEN), "three\n");
    // A branch whose build reaches the network, and one that never ends.
    repo.git(&["checkout", "-q", "-b", "net", &second]);
    // A web server on the host, which a build's `RUN` probes.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").expect("listen");
    let port = listener.local_addr().expect("port").port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = std::io::Read::read(&mut conn, &mut buf);
            let _ = std::io::Write::write_all(
                &mut conn,
                b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
            );
        }
    });
    // The host as a container on the default bridge reaches it.
    let subnet = docker_ok(&[
        "network",
        "inspect",
        "bridge",
        "-f",
        "{{(index .IPAM.Config 0).Subnet}}",
    ]);
    let gateway = subnet
        .split('/')
        .next()
        .and_then(|net| net.rsplit_once('.'))
        .map(|(head, _)| format!("{head}.1"))
        .expect("the bridge's subnet");
    let net = repo.commit(
        "fetch at build time",
        &format!(
            "FROM {BASE}\nRUN [\"/drydock-fixture\", \"probe\", \"http://{gateway}:{port}/\"]\nCMD {SERVE}\n"
        ),
        "net\n",
    );
    repo.git(&["checkout", "-q", "-b", "slow", &second]);
    let slow = repo.commit(
        "a build that never ends",
        &format!("FROM {BASE}\nRUN [\"/drydock-fixture\", \"sleep\"]\nCMD {SERVE}\n"),
        "slow\n",
    );
    // The running container is the second commit's, built by compose.
    repo.git(&["checkout", "-q", &second]);
    let compose_dir = tempfile::tempdir().expect("temp dir");
    let file = compose_dir.path().join("docker-compose.yml");
    std::fs::write(
        &file,
        format!(
            "version: \"2.4\"\nservices:\n  api:\n    build: {}\n",
            repo.path().display()
        ),
    )
    .expect("compose file");
    // Removed last: after the service that runs them is down.
    let _images = RemovedImages::new(
        [&first, &second, &third, &net, &slow]
            .iter()
            .map(|c| format!("drydock/{context}:{}", &c[..12]))
            .collect(),
    );
    let up = compose(&project, &file, &["up", "-d", "--build"]);
    assert!(up.status.success(), "{up:?}");
    let _down = ComposeDown(project.clone(), file.clone());
    let api = format!("{project}_api_1");
    wait("the second commit serving", Duration::from_secs(60), || {
        docker_ok(&["inspect", "-f", "{{.State.Health.Status}}", &api]) == "healthy"
    });
    let running = docker_ok(&["inspect", "-f", "{{.Image}}", &api]);
    // The operator's checkout: on main (the broken third) with a change.
    repo.git(&["checkout", "-q", "main"]);
    std::fs::write(repo.path().join("app.txt"), "a local edit\n").expect("edit");
    let other = Removed(format!("{project}_other"));
    docker_ok(&[
        "run", "-d", "--name", &other.0, BASE, "serve", "--port", "8080",
    ]);

    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
    std::fs::write(
        dd.home.executor_config(),
        format!(
            // No `services`: the context is the folder compose builds the
            // service from.
            "{}update:\n  health_window: 3s\nbuild:\n  timeout: 15s\n  contexts:\n    - name: {context}\n      path: {}\n",
            config
                .replace("update: {enabled: false}", "update: {enabled: true}")
                .replace("build: {enabled: false}", "build: {enabled: true}"),
            repo.path().display()
        ),
    )
    .expect("write executor config");
    dd.up();

    // 1. `drydock build --at <second>`: built from the commit, deployed.
    let req = build_cli(&dd, &[&api, "--at", &second[..9]]);
    assert_eq!(req["status"], "completed", "{req:#}\n{}", dd.agent_log());
    let steps: Vec<&str> = req["plan"]["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| s["action"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(steps, vec!["build", "update"], "{req:#}");
    let tag = format!("drydock/{context}:{}", &second[..12]);
    let built = docker_ok(&["image", "inspect", "-f", "{{.Id}}", &tag]);
    assert_eq!(
        docker_ok(&[
            "image",
            "inspect",
            "-f",
            "{{index .Config.Labels \"org.opencontainers.image.revision\"}} {{index .Config.Labels \"drydock.test.version\"}}",
            &tag
        ]),
        format!("{second} 2"),
        "the image names its revision and is the second commit's"
    );
    assert_ne!(built, running, "a new build, not compose's image");
    assert_eq!(docker_ok(&["inspect", "-f", "{{.Image}}", &api]), built);
    assert_eq!(
        docker_ok(&["inspect", "-f", "{{.State.Health.Status}}", &api]),
        "healthy"
    );
    assert_eq!(
        std::fs::read_to_string(repo.path().join("app.txt")).expect("app.txt"),
        "a local edit\n",
        "the operator's change stays"
    );
    assert_eq!(
        repo.git(&["rev-parse", "HEAD"]),
        third,
        "the checkout stays on its HEAD"
    );
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    let rows = dd.audit_rows();
    let build_row = rows
        .iter()
        .find(|r| r["action"] == "build" && r["decision"] == "allowed")
        .unwrap_or_else(|| panic!("an allowed build row: {rows:#?}"));
    assert!(
        build_row["result"]
            .as_str()
            .unwrap_or_default()
            .contains(&built)
            && build_row["input"]
                .as_str()
                .unwrap_or_default()
                .contains(&second),
        "{build_row:#}"
    );
    assert!(
        rows.iter().any(|r| r["action"] == "update"
            && r["decision"] == "allowed"
            && r["input"].as_str().unwrap_or_default().contains(&tag)),
        "{rows:#?}"
    );

    // 2. The boundary, as a compromised agent would try it.
    let mut exec = dd.executor_as_agent().await;
    let api_id = docker_ok(&["inspect", "-f", "{{.Id}}", &api]);
    let denied = |before: usize, code: Code, status: &tonic::Status, needle: &str| {
        assert_eq!(status.code(), code, "{status:?}");
        assert!(status.message().contains(needle), "{needle}: {status:?}");
        let rows = dd.audit_rows();
        assert!(
            rows[before..]
                .iter()
                .any(|r| r["reason"].as_str().unwrap_or_default().contains(needle)),
            "{needle} audited: {:#?}",
            &rows[before..]
        );
    };
    let count = || dd.audit_rows().len();
    // An approval for the first commit presented for the third.
    let before = count();
    let e = exec
        .build_image(build_request(
            "req-build-other",
            &api_id,
            &third,
            build_approval(
                &dd,
                "req-build-other",
                &api_id,
                source(&repo, context, &first),
            ),
        ))
        .await
        .expect_err("another commit's approval");
    denied(
        before,
        Code::FailedPrecondition,
        &e,
        "approval is for a build of commit",
    );
    // A tree other than the commit's.
    let mut wrong_tree = source(&repo, context, &first);
    wrong_tree.tree = source(&repo, context, &second).tree;
    let before = count();
    let e = exec
        .build_image(build_request(
            "req-build-tree",
            &api_id,
            &first,
            build_approval(&dd, "req-build-tree", &api_id, wrong_tree),
        ))
        .await
        .expect_err("another tree");
    denied(before, Code::FailedPrecondition, &e, "build's tree");
    // A container no context builds for.
    let other_id = docker_ok(&["inspect", "-f", "{{.Id}}", &other.0]);
    let before = count();
    let e = exec
        .build_image(build_request(
            "req-build-ctx",
            &other_id,
            &second,
            build_approval(
                &dd,
                "req-build-ctx",
                &other_id,
                source(&repo, context, &second),
            ),
        ))
        .await
        .expect_err("no context");
    denied(
        before,
        Code::FailedPrecondition,
        &e,
        "is built from no context",
    );
    // The checkout's HEAD while it has a change.
    let before = count();
    let e = exec
        .build_image(build_request(
            "req-build-dirty",
            &api_id,
            &third,
            build_approval(
                &dd,
                "req-build-dirty",
                &api_id,
                source(&repo, context, &third),
            ),
        ))
        .await
        .expect_err("a dirty HEAD");
    denied(before, Code::FailedPrecondition, &e, "uncommitted changes");
    // A grant for the update to a built image.
    let grant = crate::automation::signed_grant(&dd, |g| {
        g.actions = vec![WriteAction::Update];
        g.scope.names = vec![format!("{project}_*")];
        g.hours = Some("00:00-23:59".into());
    });
    let before = count();
    let e = exec
        .update_container(pb::UpdateRequest {
            request_id: "req-build-grant".into(),
            container: api_id.clone(),
            built_commit: second.clone(),
            grant: Some(grant),
            ..Default::default()
        })
        .await
        .expect_err("a grant");
    denied(
        before,
        Code::FailedPrecondition,
        &e,
        "never covered by a grant",
    );
    // A build whose RUN reaches the network: none by default.
    let before = count();
    let e = exec
        .build_image(build_request(
            "req-build-net",
            &api_id,
            &net,
            build_approval(&dd, "req-build-net", &api_id, source(&repo, context, &net)),
        ))
        .await
        .expect_err("no network during a build");
    denied(before, Code::FailedPrecondition, &e, "the build failed");
    // A build past its time limit is stopped, and what it ran removed.
    let before = count();
    let e = exec
        .build_image(build_request(
            "req-build-slow",
            &api_id,
            &slow,
            build_approval(
                &dd,
                "req-build-slow",
                &api_id,
                source(&repo, context, &slow),
            ),
        ))
        .await
        .expect_err("a build past its limit");
    denied(
        before,
        Code::FailedPrecondition,
        &e,
        "longer than build.timeout",
    );
    wait(
        "the slow build's container removed",
        Duration::from_secs(60),
        || {
            !docker_ok(&["ps", "-a", "--no-trunc", "--format", "{{.Command}}"])
                .contains("drydock-fixture sleep")
        },
    );
    for commit in [&net, &slow, &third] {
        let tag = format!("drydock/{context}:{}", &commit[..12]);
        assert!(
            !docker(&["image", "inspect", &tag]).status.success(),
            "{tag} was not built"
        );
    }
    // Nothing the refusals did touched the service.
    assert_eq!(docker_ok(&["inspect", "-f", "{{.Image}}", &api]), built);
    dd.assert_audit_intact();

    // The same network build with `build.network: default`: it was the
    // network the first one lacked.
    let down = dd.cli(&["down"]);
    assert!(down.status.success(), "drydock down: {down:?}");
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
    std::fs::write(
        dd.home.executor_config(),
        config.replace(
            "build:\n  timeout: 15s\n",
            "build:\n  timeout: 15s\n  network: default\n",
        ),
    )
    .expect("write executor config");
    dd.up();
    let mut exec = dd.executor_as_agent().await;
    let done = exec
        .build_image(build_request(
            "req-build-net-on",
            &api_id,
            &net,
            build_approval(
                &dd,
                "req-build-net-on",
                &api_id,
                source(&repo, context, &net),
            ),
        ))
        .await
        .unwrap_or_else(|e| panic!("a build with the network it needs: {e:?}"))
        .into_inner();
    assert!(done.new_image_id.starts_with("sha256:"), "{done:?}");
}

/// A container of compose service `web` of `project`, as compose labels
/// it (made here: nothing is built for it), removed when dropped.
pub(crate) fn compose_web(project: &str) -> Removed {
    let web = Removed(format!("{project}_web_1"));
    docker_ok(&[
        "run",
        "-d",
        "--name",
        &web.0,
        "--label",
        &format!("com.docker.compose.project={project}"),
        "--label",
        "com.docker.compose.service=web",
        BASE,
        "serve",
        "--port",
        "8080",
    ]);
    web
}

/// executor.yaml with updates and builds on, and `extra` appended.
pub(crate) fn builds_on(dd: &Drydock, extra: &str) {
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
    std::fs::write(
        dd.home.executor_config(),
        format!(
            "{}{extra}",
            config
                .replace("update: {enabled: false}", "update: {enabled: true}")
                .replace("build: {enabled: false}", "build: {enabled: true}")
        ),
    )
    .expect("write executor config");
}

/// The claims of a plain folder's build as `BuildSource` read it.
pub(crate) fn folder_claims(context: &str, source: &pb::BuildSourceResponse) -> BuildClaims {
    BuildClaims {
        context: context.into(),
        commit: CommitId::parse(&source.commit).expect("a hash"),
        tree: source.tree.clone(),
        dockerfile: "Dockerfile".into(),
        tag: source.tag.clone(),
        subject: None,
        author: None,
    }
}

/// Images removed when the test ends, however it ends (declared before
/// the containers that run them, so dropped after them).
pub(crate) struct RemovedImages(std::cell::RefCell<Vec<String>>);

impl RemovedImages {
    pub(crate) fn new(images: Vec<String>) -> RemovedImages {
        RemovedImages(std::cell::RefCell::new(images))
    }

    pub(crate) fn add(&self, image: &str) {
        self.0.borrow_mut().push(image.to_string());
    }
}

impl Drop for RemovedImages {
    fn drop(&mut self) {
        for image in self.0.borrow().iter() {
            let _ = docker(&["rmi", "-f", image]);
        }
    }
}

/// `docker-compose down` when the test ends, however it ends.
struct ComposeDown(String, std::path::PathBuf);

impl Drop for ComposeDown {
    fn drop(&mut self) {
        let _ = compose(&self.0, &self.1, &["down", "--rmi", "local", "-t", "1"]);
    }
}

/// A context that is a plain folder: what is built is its files as they
/// are (less `.dockerignore`), bound by their sha256; a change to a file
/// the build reads refuses an approval made before it, a change to an
/// ignored one does not.
#[tokio::test(flavor = "multi_thread")]
async fn a_folder_is_built_as_its_files_are_and_bound_by_their_hash() {
    drydock_daemon::tls::install_crypto_provider();
    let project = unique("buildfolder");
    let context = "web";
    let dd = Drydock::init_options(|o| o.targets = vec![format!("{project}_*")]);
    let folder = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, text: &str| {
        std::fs::write(folder.path().join(name), text).expect("write");
    };
    write("Dockerfile", &dockerfile("f", SERVE));
    write("app.txt", "folder\n");
    write("debug.log", "noise\n");
    write(".dockerignore", "*.log\n");
    let images = RemovedImages::new(Vec::new());
    let web = compose_web(&project);
    builds_on(
        &dd,
        &format!(
            "update:\n  health_window: 3s\nbuild:\n  contexts:\n    - name: {context}\n      path: {}\n      services: [\"{project}/web\"]\n",
            folder.path().display()
        ),
    );
    dd.up();
    let mut exec = dd.executor_as_agent().await;
    let read = |exec: &mut pb::executor_client::ExecutorClient<tonic::transport::Channel>| {
        let mut exec = exec.clone();
        let name = web.0.clone();
        async move {
            exec.build_source(pb::BuildSourceRequest {
                request_id: "req-folder-source".into(),
                container: name,
                revision: String::new(),
            })
            .await
            .expect("the folder's source")
            .into_inner()
        }
    };
    let first = read(&mut exec).await;
    assert_eq!(first.commit.len(), 64, "{first:?}");
    assert_eq!(first.commit, first.tree);
    write("debug.log", "more noise\n");
    assert_eq!(
        read(&mut exec).await.commit,
        first.commit,
        "an ignored file is not read"
    );
    images.add(&first.tag);

    // The approval of the files as they were; then one the build reads
    // changes: refused, audited.
    let web_id = docker_ok(&["inspect", "-f", "{{.Id}}", &web.0]);
    let signed = folder_claims(context, &first);
    write("app.txt", "changed after the approval\n");
    let before = dd.audit_rows().len();
    let e = exec
        .build_image(build_request(
            "req-folder-moved",
            &web_id,
            &first.commit,
            build_approval(&dd, "req-folder-moved", &web_id, signed),
        ))
        .await
        .expect_err("the files changed");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("files (their sha256)"), "{e:?}");
    assert!(dd.audit_rows()[before..]
        .iter()
        .any(|r| r["decision"] == "denied" && r["action"] == "build"));

    // `drydock build` of the folder as it is now: built and run.
    let req = build_cli(&dd, &[&web.0]);
    assert_eq!(req["status"], "completed", "{req:#}\n{}", dd.agent_log());
    let now = read(&mut exec).await;
    assert_ne!(now.commit, first.commit);
    images.add(&now.tag);
    assert_eq!(
        docker_ok(&["image", "inspect", "-f", "{{.Id}}", &now.tag]),
        docker_ok(&["inspect", "-f", "{{.Image}}", &web.0]),
        "the container runs what was built from the files as they are"
    );
    assert_eq!(
        docker_ok(&[
            "image",
            "inspect",
            "-f",
            "{{index .Config.Labels \"drydock.build.tree\"}}",
            &now.tag
        ]),
        now.tree
    );

    // An image past `build.max_image_bytes`: built, removed again, refused.
    let down = dd.cli(&["down"]);
    assert!(down.status.success(), "drydock down: {down:?}");
    let config = std::fs::read_to_string(dd.home.executor_config()).expect("executor config");
    std::fs::write(
        dd.home.executor_config(),
        config.replace("build:\n", "build:\n  max_image_bytes: 1000\n"),
    )
    .expect("write executor config");
    dd.up();
    let mut exec = dd.executor_as_agent().await;
    write("app.txt", "a third version\n");
    let big = read(&mut exec).await;
    images.add(&big.tag);
    let signed = folder_claims(context, &big);
    let web_id = docker_ok(&["inspect", "-f", "{{.Id}}", &web.0]);
    let e = exec
        .build_image(build_request(
            "req-folder-big",
            &web_id,
            &big.commit,
            build_approval(&dd, "req-folder-big", &web_id, signed),
        ))
        .await
        .expect_err("an image past the limit");
    assert_eq!(e.code(), Code::FailedPrecondition, "{e:?}");
    assert!(e.message().contains("build.max_image_bytes"), "{e:?}");
    assert!(
        !docker(&["image", "inspect", &big.tag]).status.success(),
        "the image past the limit was removed"
    );
    dd.assert_audit_intact();
}
