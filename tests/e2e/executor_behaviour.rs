//! What the executor does besides refusing: timeouts against a hanging
//! engine, retry counts, graceful shutdown, redaction, audit tamper
//! detection, the audit-before-write rule, and the remaining read RPCs.

use std::time::{Duration, Instant};

use drydock_e2e::approvals::{claims, claims_named, sign};
use drydock_e2e::fake_docker::{FakeDocker, Mode, FAKE_ID, FAKE_NAME};
use drydock_e2e::*;
use drydock_proto::approval::WriteAction;
use drydock_proto::pb;
use tonic::Code;

async fn client(
    dd: &Drydock,
    exec: &ExecutorProcess,
) -> pb::executor_client::ExecutorClient<tonic::transport::Channel> {
    exec.agent_client(dd).await
}

fn approver(dd: &Drydock) -> ed25519_dalek::SigningKey {
    dd.home
        .load_cli_config()
        .expect("cli config")
        .signing_key()
        .expect("key")
}

fn container_req(request_id: &str, container: &str) -> pb::ContainerRequest {
    pb::ContainerRequest {
        request_id: request_id.into(),
        container: container.into(),
    }
}

fn fast_reads(y: String, endpoint: &str) -> String {
    with_docker_endpoint(&y, endpoint)
        .replace("read: 5s", "read: 1s")
        .replace("write: 30s", "write: 2s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_docker_engine_yields_deadline_exceeded_on_time() {
    let dd = Drydock::init();
    let fake = FakeDocker::start(Mode::Hang);
    let endpoint = fake.endpoint();
    let exec = ExecutorProcess::start(&dd, |y| fast_reads(y, &endpoint));
    let mut c = client(&dd, &exec).await;
    let started = Instant::now();
    let err = c
        .inspect_container(container_req("req-hang", "anything"))
        .await
        .expect_err("hang");
    assert_eq!(err.code(), Code::DeadlineExceeded, "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered after {:?}, the read timeout is 1s",
        started.elapsed()
    );
    let key = approver(&dd);
    let approval = sign(
        &claims_named("req-hang-write", WriteAction::Restart, FAKE_ID, FAKE_NAME),
        &key,
        "local-operator",
    );
    let err = c
        .restart_container(pb::WriteRequest {
            request_id: "req-hang-write".into(),
            container: FAKE_NAME.into(),
            approval: Some(approval),
            ..Default::default()
        })
        .await
        .expect_err("hang");
    assert_eq!(err.code(), Code::DeadlineExceeded);
    let rows = dd.audit_rows();
    assert!(
        rows.iter()
            .any(|r| r["request_id"] == "req-hang" && r["code"] == "DeadlineExceeded"),
        "{rows:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_retried_twice_and_writes_never() {
    let dd = Drydock::init();
    let failing = FakeDocker::start(Mode::Fail);
    let endpoint = failing.endpoint();
    let exec = ExecutorProcess::start(&dd, |y| fast_reads(y, &endpoint));
    let mut c = client(&dd, &exec).await;
    let err = c
        .inspect_container(container_req("req-retry", FAKE_NAME))
        .await
        .expect_err("engine fails");
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert_eq!(failing.count("/containers/"), 3, "one try and two retries");
    drop(c);
    exec.stop();

    let refusing = FakeDocker::start(Mode::WritesFail);
    let endpoint = refusing.endpoint();
    let exec = ExecutorProcess::start(&dd, |y| fast_reads(y, &endpoint));
    let mut c = client(&dd, &exec).await;
    let key = approver(&dd);
    let approval = sign(
        &claims_named("req-write-once", WriteAction::Restart, FAKE_ID, FAKE_NAME),
        &key,
        "local-operator",
    );
    let err = c
        .restart_container(pb::WriteRequest {
            request_id: "req-write-once".into(),
            container: FAKE_NAME.into(),
            approval: Some(approval),
            ..Default::default()
        })
        .await
        .expect_err("engine refuses");
    assert_eq!(
        err.code(),
        Code::FailedPrecondition,
        "an engine that answered and refused is not 'unavailable': {err:?}"
    );
    assert_eq!(
        refusing.count("/restart"),
        1,
        "a write is attempted exactly once"
    );
    let decisions: Vec<String> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["request_id"] == "req-write-once")
        .map(|r| r["decision"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        decisions,
        ["intent", "error"],
        "intent before Docker, then the outcome"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_an_in_flight_call_finish() {
    let dd = Drydock::init();
    let slow = FakeDocker::start(Mode::Slow);
    let endpoint = slow.endpoint();
    let exec = ExecutorProcess::start(&dd, |y| with_docker_endpoint(&y, &endpoint));
    let mut c = client(&dd, &exec).await;
    let call = tokio::spawn(async move {
        c.inspect_container(container_req("req-in-flight", FAKE_NAME))
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = tokio::task::spawn_blocking(move || exec.stop())
        .await
        .expect("stop");
    let answer = call
        .await
        .expect("join")
        .expect("the in-flight call completes");
    assert_eq!(answer.into_inner().id, FAKE_ID);
    assert!(status.success(), "clean exit after SIGTERM: {status}");
    let rows = dd.audit_rows();
    assert!(
        rows.iter()
            .any(|r| r["request_id"] == "req-in-flight" && r["decision"] == "allowed"),
        "the finished call is audited"
    );
    assert!(dd.audit_verify().status.success(), "nothing half-written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_leave_the_executor() {
    let dd = Drydock::init();
    let secrets = [
        "hunter2-secret",
        "tok-1234567890",
        "s3cr3t-pw",
        "AKIAIOSFODNN7EXAMPLE",
        "abc.def.ghi-bearer",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    ];
    let container = Container::run(
        "secrets",
        &[
            "-e",
            "DB_PASSWORD=hunter2-secret",
            "-e",
            "API_TOKEN=tok-1234567890",
            "-e",
            "DATABASE_URL=postgres://app:s3cr3t-pw@db:5432/app",
            "-e",
            "PORT=8080",
            "--label",
            "vault.token=tok-1234567890",
            drydock::fixture::FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--line",
            "connecting with password=hunter2-secret",
            "--line",
            "using key AKIAIOSFODNN7EXAMPLE",
            "--stderr-line",
            "request failed: Authorization: Bearer abc.def.ghi-bearer",
            "--line",
            "-----BEGIN PRIVATE KEY-----",
            "--line",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
            "--line",
            "-----END PRIVATE KEY-----",
            "--line",
            "\u{1b}[31mred alert\u{1b}[0m",
        ],
    );
    container.wait_for("exited", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut c = client(&dd, &exec).await;
    let inspect = c
        .inspect_container(container_req("req-secrets", &container.name))
        .await
        .expect("inspect")
        .into_inner();
    let logs = c
        .container_logs(pb::LogsRequest {
            request_id: "req-secrets".into(),
            container: container.name.clone(),
            ..Default::default()
        })
        .await
        .expect("logs")
        .into_inner();
    let list = c
        .list_containers(pb::ListContainersRequest {
            request_id: "req-secrets".into(),
            all: true,
            name: container.name.clone(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    let everything = format!("{inspect:?}\n{logs:?}\n{list:?}");
    for secret in secrets {
        assert!(
            !everything.contains(secret),
            "secret {secret} leaked:\n{everything}"
        );
    }
    assert!(
        !everything.contains('\u{1b}'),
        "escape sequences are neutralised"
    );
    assert!(
        inspect.env.contains(&"PORT=8080".to_string()),
        "harmless values stay: {:?}",
        inspect.env
    );
    assert!(
        inspect.redactions >= 4,
        "inspect counts its redactions: {}",
        inspect.redactions
    );
    assert!(
        logs.redactions >= 4,
        "logs count their redactions: {}",
        logs.redactions
    );
    assert!(
        logs.lines.iter().any(|l| l.text == "red alert"),
        "{:?}",
        logs.lines
    );
    assert_eq!(list.containers.len(), 1);
    // Nor does anything secret reach the audit log.
    let audit = std::fs::read(dd.audit_db()).expect("audit db");
    for secret in secrets {
        assert!(
            !String::from_utf8_lossy(&audit).contains(secret),
            "{secret} in the audit log"
        );
    }
}

/// The shapes an outside review got back in the clear (issue: secrets
/// never leave the executor), planted in a real container: env names the
/// old key list missed, a connection string, a healthcheck command and its
/// output carrying credentials, JSON-escaped pairs, a URL with an empty
/// user, and a PGP key block that never ends, which must not hide the
/// evidence after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviewed_credential_shapes_never_leave_the_executor() {
    const IMAGE: &str = "drydock-fixture-leaky-probe:latest";
    let dockerfile = "FROM drydock-fixture:latest\nHEALTHCHECK --interval=1s --retries=1 CMD [\"/drydock-fixture\", \"healthcheck-fail\", \"--line\", \"curl -u admin:curlPw5 http://localhost/ failed\", \"--line\", \"redis-cli -a rcliPw3 ping: NOAUTH\"]\n";
    build_image(IMAGE, dockerfile);
    let secrets = [
        "rabbitPw2",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq",
        "curlPw5",
        "rcliPw3",
        "escPw77",
        "s3cr3tRedis",
        "lQOYBGF0aXoBCADK",
        "AKIAIOSF",
        "ODNN7EXAMPLE",
    ];
    let long_line = format!("{} AKIAIOSFODNN7EXAMPLE done", "x".repeat(16 * 1024 - 10));
    let dd = Drydock::init();
    let container = Container::run(
        "leaky",
        &[
            "-e",
            "RABBITMQ_DEFAULT_PASS=rabbitPw2",
            "-e",
            "STORAGE=DefaultEndpointsProtocol=https;AccountName=dev;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;EndpointSuffix=core.windows.net",
            "-e",
            "PASSWORD_FILE=/run/secrets/db",
            IMAGE,
            "serve",
            "--port",
            "8080",
            "--line",
            "msg=\"{\\\"user\\\":\\\"app\\\",\\\"password\\\":\\\"escPw77\\\"}\"",
            "--line",
            "connecting to redis://:s3cr3tRedis@redis:6379/0",
            // Longer than Docker's 16 KiB message: the key straddles the
            // split into partial messages.
            "--line",
            &long_line,
            "--line",
            "-----BEGIN PGP PRIVATE KEY BLOCK-----",
            "--line",
            "lQOYBGF0aXoBCADK",
        ],
    );
    container.wait_for("unhealthy", Duration::from_secs(60), |c| {
        c.health() == "unhealthy"
    });
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut c = client(&dd, &exec).await;
    let inspect = c
        .inspect_container(container_req("req-leaky", &container.name))
        .await
        .expect("inspect")
        .into_inner();
    let health = c
        .container_health(container_req("req-leaky", &container.name))
        .await
        .expect("health")
        .into_inner();
    let logs = c
        .container_logs(pb::LogsRequest {
            request_id: "req-leaky".into(),
            container: container.name.clone(),
            ..Default::default()
        })
        .await
        .expect("logs")
        .into_inner();
    let everything = format!("{inspect:?}\n{health:?}\n{logs:?}");
    for secret in secrets {
        assert!(
            !everything.contains(secret),
            "secret {secret} leaked:\n{everything}"
        );
    }
    assert!(
        inspect
            .env
            .contains(&"PASSWORD_FILE=/run/secrets/db".to_string()),
        "a path to a secret is evidence, not a secret: {:?}",
        inspect.env
    );
    assert!(
        logs.lines.iter().any(|l| l.text.contains("listening")),
        "the serve mode's own lines are still there: {:?}",
        logs.lines
    );
    let audit = std::fs::read(dd.audit_db()).expect("audit db");
    for secret in secrets {
        assert!(
            !String::from_utf8_lossy(&audit).contains(secret),
            "{secret} in the audit log"
        );
    }
}

/// `redact.env: all`: names stay, values are withheld except the allowed
/// ones, and an allowed name that looks secret is still withheld.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_values_are_all_withheld_but_the_allowed_under_redact_env_all() {
    let dd = Drydock::init();
    let container = Container::run(
        "envall",
        &[
            "-e",
            "PORT=8080",
            "-e",
            "NODE_ENV=production",
            "-e",
            "DB_PASSWORD=hunter2-envall",
            "-e",
            "CACHE_URL=redis://:urlPw6@redis:6379",
            drydock::fixture::FIXTURE_IMAGE,
            "sleep",
        ],
    );
    let exec = ExecutorProcess::start(&dd, |y| {
        // init writes `redact: {env: secret-looking}` for the local layout.
        assert!(y.contains("redact:\n  env: secret-looking\n"), "{y}");
        y.replace(
            "redact:\n  env: secret-looking\n",
            "redact:\n  env: all\n  env_allow: [PORT, DB_PASSWORD, CACHE_URL]\n",
        )
    });
    let mut c = client(&dd, &exec).await;
    let inspect = c
        .inspect_container(container_req("req-envall", &container.name))
        .await
        .expect("inspect")
        .into_inner();
    let env = &inspect.env;
    assert!(env.contains(&"PORT=8080".to_string()), "{env:?}");
    assert!(env.contains(&"NODE_ENV=[REDACTED]".to_string()), "{env:?}");
    assert!(
        env.contains(&"DB_PASSWORD=[REDACTED]".to_string()),
        "{env:?}"
    );
    assert!(
        env.contains(&"CACHE_URL=redis://:[REDACTED]@redis:6379".to_string()),
        "an allowed value is still redacted like any text: {env:?}"
    );
    // A bad allow-list entry is refused at start, naming the key.
    let bad = dd.home.path("executor-bad.yaml");
    let yaml = std::fs::read_to_string(dd.home.executor_config()).expect("config");
    assert!(yaml.contains("redact:\n  env: secret-looking\n"), "{yaml}");
    let yaml = yaml.replace(
        "redact:\n  env: secret-looking\n",
        "redact:\n  env_allow: [\"A B\"]\n",
    );
    std::fs::write(&bad, yaml).expect("write");
    let out = std::process::Command::new(bin("drydock-executor"))
        .args(["check-config", "--config"])
        .arg(&bad)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("redact.env_allow"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn audit_tampering_is_detected() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut c = client(&dd, &exec).await;
    for i in 0..4 {
        let _ = c
            .list_containers(pb::ListContainersRequest {
                request_id: format!("req-{i}"),
                ..Default::default()
            })
            .await;
    }
    drop(c);
    exec.stop();
    let out = dd.audit_verify();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let db = rusqlite::Connection::open(dd.audit_db()).expect("open");
    db.execute(
        "UPDATE audit SET result = 'containers=99' WHERE seq = 2",
        [],
    )
    .expect("tamper");
    let out = dd.audit_verify();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("row 2 was modified"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    db.execute("DELETE FROM audit WHERE seq = 2", [])
        .expect("delete");
    let out = dd.audit_verify();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("row 2 is missing"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_not_performed_when_the_audit_store_cannot_be_written() {
    let dd = Drydock::init();
    let target = Container::run("audit-locked", &[drydock::fixture::FIXTURE_IMAGE, "sleep"]);
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut c = client(&dd, &exec).await;
    let started_at = target.inspect("{{.State.StartedAt}}");
    let approval = sign(
        &claims("req-locked", WriteAction::Restart, &target.id()),
        &approver(&dd),
        "local-operator",
    );
    // Another writer holds the database: the executor's writes time out.
    let db = rusqlite::Connection::open(dd.audit_db()).expect("open");
    db.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    let err = c
        .restart_container(pb::WriteRequest {
            request_id: "req-locked".into(),
            container: target.name.clone(),
            approval: Some(approval),
            ..Default::default()
        })
        .await
        .expect_err("no audit, no write");
    assert_eq!(err.code(), Code::Unavailable, "{err:?}");
    assert!(err.message().contains("audit"), "{}", err.message());
    assert_eq!(
        target.inspect("{{.State.StartedAt}}"),
        started_at,
        "the container was not restarted"
    );
    db.execute_batch("ROLLBACK").expect("unlock");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_rpcs_stats_http_checks_filters_and_the_stop_tier() {
    let dd = Drydock::init();
    let web = Container::run(
        "reads-web",
        &[
            "--label",
            "drydock.test=reads",
            drydock::fixture::FIXTURE_IMAGE,
            "serve",
            "--port",
            "8080",
            "--line",
            "INFO out",
            "--line",
            "INFO more",
        ],
    );
    let ip = web.inspect("{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}");
    let exec = ExecutorProcess::start(&dd, |y| {
        y + &format!("http_checks:\n  web: \"http://{ip}:8080/health\"\n  nowhere: \"http://127.0.0.1:1/\"\n")
    });
    let mut c = client(&dd, &exec).await;

    let stats = c
        .container_stats(container_req("req-stats", &web.name))
        .await
        .expect("stats")
        .into_inner();
    assert_eq!(stats.container_id, web.id());
    assert!(
        stats.memory_usage_bytes > 0 && stats.memory_limit_bytes >= stats.memory_usage_bytes,
        "{stats:?}"
    );

    let ok = c
        .check_http(pb::CheckHttpRequest {
            request_id: "req-http".into(),
            service: "web".into(),
        })
        .await
        .expect("check")
        .into_inner();
    assert!(ok.ok && ok.status_code == 200, "{ok:?}");
    let down = c
        .check_http(pb::CheckHttpRequest {
            request_id: "req-http".into(),
            service: "nowhere".into(),
        })
        .await
        .expect("check")
        .into_inner();
    assert!(!down.ok && !down.error.is_empty(), "{down:?}");
    let err = c
        .check_http(pb::CheckHttpRequest {
            request_id: "req-http-any".into(),
            service: "http://evil.example/".into(),
        })
        .await
        .expect_err("only configured services");
    assert_eq!(err.code(), Code::NotFound);

    let filtered = c
        .list_containers(pb::ListContainersRequest {
            request_id: "req-filter".into(),
            all: true,
            labels: [("drydock.test".to_string(), "reads".to_string())].into(),
            status: "running".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert_eq!(
        filtered
            .containers
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        [web.name.as_str()]
    );
    let none = c
        .list_containers(pb::ListContainersRequest {
            request_id: "req-filter".into(),
            all: true,
            labels: [("drydock.test".to_string(), "reads".to_string())].into(),
            status: "exited".into(),
            ..Default::default()
        })
        .await
        .expect("list")
        .into_inner();
    assert!(none.containers.is_empty());
    let err = c
        .list_containers(pb::ListContainersRequest {
            request_id: "req-filter".into(),
            status: "sleeping".into(),
            ..Default::default()
        })
        .await
        .expect_err("bad status");
    assert_eq!(err.code(), Code::InvalidArgument);

    let stderr_only = c
        .container_logs(pb::LogsRequest {
            request_id: "req-logs".into(),
            container: web.name.clone(),
            streams: pb::LogStreams::Stderr as i32,
            ..Default::default()
        })
        .await
        .expect("logs")
        .into_inner();
    assert!(
        stderr_only.lines.iter().all(|l| l.stream == "stderr"),
        "{stderr_only:?}"
    );
    let future = c
        .container_logs(pb::LogsRequest {
            request_id: "req-logs".into(),
            container: web.name.clone(),
            since: approvals::unix_now() + 3600,
            ..Default::default()
        })
        .await
        .expect("logs")
        .into_inner();
    assert!(future.lines.is_empty(), "nothing since an hour from now");
    for (name, req) in [
        (
            "tail over the limit",
            pb::LogsRequest {
                request_id: "req-bad".into(),
                container: web.name.clone(),
                tail: 100_000,
                ..Default::default()
            },
        ),
        (
            "negative since",
            pb::LogsRequest {
                request_id: "req-bad".into(),
                container: web.name.clone(),
                since: -5,
                ..Default::default()
            },
        ),
        (
            "unknown stream",
            pb::LogsRequest {
                request_id: "req-bad".into(),
                container: web.name.clone(),
                streams: 9,
                ..Default::default()
            },
        ),
    ] {
        let err = c.container_logs(req).await.expect_err(name);
        assert_eq!(err.code(), Code::InvalidArgument, "{name}");
    }

    // Stop is T2: off by default, and even when on, it needs an approval.
    let key = approver(&dd);
    let approval = sign(
        &claims("req-stop", WriteAction::Stop, &web.id()),
        &key,
        "local-operator",
    );
    let err = c
        .stop_container(pb::WriteRequest {
            request_id: "req-stop".into(),
            container: web.name.clone(),
            approval: Some(approval.clone()),
            ..Default::default()
        })
        .await
        .expect_err("stop disabled");
    assert_eq!(err.code(), Code::PermissionDenied);
    let policy = c
        .get_policy(pb::GetPolicyRequest {
            request_id: "req-policy".into(),
        })
        .await
        .expect("policy")
        .into_inner();
    let stop = policy
        .actions
        .iter()
        .find(|a| a.action == "stop")
        .expect("stop listed");
    assert!(!stop.enabled && stop.tier == 2 && stop.approval_required);
    assert_eq!(policy.http_checks, ["nowhere", "web"]);
    drop(c);
    exec.stop();

    let exec = ExecutorProcess::start(&dd, |y| {
        y.replace("\n  stop: {enabled: false}", "\n  stop: {enabled: true}")
    });
    let mut c = client(&dd, &exec).await;
    let err = c
        .stop_container(pb::WriteRequest {
            request_id: "req-stop-bare".into(),
            container: web.name.clone(),
            approval: None,
            ..Default::default()
        })
        .await
        .expect_err("approval required");
    assert_eq!(err.code(), Code::FailedPrecondition);
    c.stop_container(pb::WriteRequest {
        request_id: "req-stop".into(),
        container: web.name.clone(),
        approval: Some(approval),
        ..Default::default()
    })
    .await
    .expect("approved stop");
    assert_eq!(web.inspect("{{.State.Running}}"), "false");
    let row = dd
        .audit_rows()
        .into_iter()
        .find(|r| r["request_id"] == "req-stop" && r["decision"] == "allowed")
        .expect("audited");
    assert_eq!(row["tier"], 2);
}

#[test]
fn an_invalid_config_stops_the_executor_and_names_the_key() {
    let dd = Drydock::init();
    let text = std::fs::read_to_string(dd.home.executor_config()).expect("config");
    for (edit, key) in [
        (format!("{text}exec_everything: true\n"), "exec_everything"),
        (text.replace("read: 5s", "read: soonish"), "soonish"),
        (
            text.replace("pki/executor.crt", "pki/missing.crt"),
            "tls.cert",
        ),
    ] {
        let path = dd.home.path("bad-executor.yaml");
        std::fs::write(&path, edit).expect("write");
        let out = std::process::Command::new(bin("drydock-executor"))
            .args(["serve", "--config"])
            .arg(&path)
            .output()
            .expect("run");
        assert!(!out.status.success(), "{key}: the executor must not start");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(key), "{key}: {stderr}");
    }
}

/// A missing audit store is never silently recreated: the used nonces would
/// vanish with it and unexpired approvals could be replayed. `drydock init`
/// leaves a one-time marker for the first start; after that, a missing store
/// stops the executor until an operator runs `audit init` deliberately.
#[test]
fn a_missing_audit_store_is_refused_not_recreated() {
    let dd = Drydock::init();
    let store = dd.audit_db();
    let marker = dd.home.path("state/audit.db.init");
    assert!(marker.is_file(), "drydock init leaves the marker");
    let exec = ExecutorProcess::start(&dd, |y| y);
    assert!(
        store.is_file() && !marker.exists(),
        "first start: created, marker used"
    );
    assert!(exec.stop().success());

    // The store goes missing (a restore, a volume mix-up).
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", store.display()));
    }
    let out = std::process::Command::new(bin("drydock-executor"))
        .args(["serve", "--config"])
        .arg(dd.home.executor_config())
        .output()
        .expect("run the executor");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "refuses to start: {stderr}");
    assert!(
        stderr.contains("no audit store") && stderr.contains("audit init"),
        "{stderr}"
    );
    assert!(!store.exists(), "nothing was recreated");

    // Deliberately initialised: it serves again, and init never replaces.
    let init = std::process::Command::new(bin("drydock-executor"))
        .args(["audit", "init", "--config"])
        .arg(dd.home.executor_config())
        .output()
        .expect("audit init");
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let again = std::process::Command::new(bin("drydock-executor"))
        .args(["audit", "init", "--config"])
        .arg(dd.home.executor_config())
        .output()
        .expect("audit init");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("never replaced"));
    let exec = ExecutorProcess::start(&dd, |y| y);
    assert!(exec.stop().success());
}

/// The executor signs its chain's head at shutdown (and every N rows) with
/// the audit key `drydock init` made; `drydock audit verify` checks the
/// signatures with pki/audit.pub and prints the last checkpoint, and a
/// store cut back to before a checkpoint an operator recorded fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_checkpoints_expose_a_truncated_audit_store() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut client = client(&dd, &exec).await;
    for _ in 0..3 {
        client
            .get_policy(drydock_proto::pb::GetPolicyRequest {
                request_id: "req-cp".into(),
            })
            .await
            .expect("policy");
    }
    drop(client);
    assert!(exec.stop().success());

    let out = dd.cli(&["audit", "verify"]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{text}");
    let checkpoint = text
        .lines()
        .find_map(|l| l.strip_prefix("last signed checkpoint: "))
        .unwrap_or_else(|| panic!("the shutdown checkpoint is reported: {text}"))
        .trim()
        .to_string();
    let rows = dd.audit_rows();
    assert_eq!(
        rows.last().unwrap()["decision"],
        "checkpoint",
        "signed at shutdown"
    );

    // Still there: the recorded checkpoint verifies.
    let out = dd.cli(&["audit", "verify", "--expect", &checkpoint]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Cut the store back to before it: the plain chain still verifies,
    // the recorded checkpoint exposes the truncation.
    let seq: i64 = checkpoint.split(':').next().unwrap().parse().unwrap();
    let conn = rusqlite::Connection::open(dd.audit_db()).unwrap();
    conn.execute("DELETE FROM audit WHERE seq >= ?1", [seq])
        .unwrap();
    drop(conn);
    assert!(
        dd.audit_verify().status.success(),
        "the unsigned chain cannot tell"
    );
    let out = dd.cli(&["audit", "verify", "--expect", &checkpoint]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("truncated"), "{text}");
}

/// A restart honours the container's own stop timeout, as `docker restart`
/// does: a container that asks for 1 s is not held for 10, and one that
/// asks for 14 s (a database flushing on shutdown) is not killed after 10.
/// With SIGTERM as its stop signal, the fixture's `sleep` ignores it (PID 1
/// without a handler), so each restart takes its full stop timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_honours_the_containers_stop_timeout() {
    let dd = Drydock::init();
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut c = client(&dd, &exec).await;
    let key = approver(&dd);
    let mut took = Vec::new();
    for (secs, within) in [(1u64, 0..7u64), (14, 13..40)] {
        let stop = secs.to_string();
        let container = Container::run(
            "stoptimeout",
            &[
                "--stop-timeout",
                &stop,
                "--stop-signal",
                "SIGTERM",
                drydock::fixture::FIXTURE_IMAGE,
                "sleep",
            ],
        );
        let id = container.id();
        let inspected = c
            .inspect_container(container_req("req-stop-timeout", &container.name))
            .await
            .expect("inspect")
            .into_inner();
        assert_eq!(u64::from(inspected.stop_timeout_secs), secs);
        let request = format!("req-stop-{secs}");
        let approval = sign(
            &claims(&request, WriteAction::Restart, &id),
            &key,
            "local-operator",
        );
        let started = Instant::now();
        c.restart_container(pb::WriteRequest {
            request_id: request,
            container: id.clone(),
            approval: Some(approval),
            ..Default::default()
        })
        .await
        .expect("restart");
        let elapsed = started.elapsed();
        assert!(
            within.contains(&elapsed.as_secs()),
            "stop timeout {secs} s: the restart took {elapsed:?}"
        );
        assert_eq!(container.inspect("{{.State.Status}}"), "running");
        took.push((secs, elapsed));
    }
    eprintln!("restart durations by stop timeout: {took:?}");
}
