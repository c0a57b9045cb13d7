//! A full disk, produced for real and followed to the filesystem that is
//! full: the executor's `DiskUsage` read (the writable layer, volume sizes
//! the engine measures, tmpfs limits, log settings, the engine's images and
//! build cache)
//! with its refusals audited, and the agent naming the full mount, from a
//! log line and from the engine's own `State.Error`. Also the other engine
//! state produced for real: a binary the kernel cannot execute.

use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

use drydock::fixture::FIXTURE_IMAGE;
use drydock_e2e::*;
use drydock_proto::pb;
use serde_json::Value;
use tonic::Code;

const MIB: i64 = 1 << 20;

/// A named volume, removed when dropped (after the containers using it,
/// when declared before them).
struct Volume(String);

impl Volume {
    fn create(test: &str) -> Volume {
        let name = unique(test);
        docker_ok(&["volume", "create", &name]);
        Volume(name)
    }
}

impl Drop for Volume {
    fn drop(&mut self) {
        let _ = Command::new("docker")
            .args(["volume", "rm", "-f", &self.0])
            .output();
    }
}

fn req(request_id: &str, container: &str) -> pb::ContainerRequest {
    pb::ContainerRequest {
        request_id: request_id.into(),
        container: container.into(),
    }
}

/// Writes 6 MiB into its own layer and 4 MiB into a volume, then fills a
/// 1 MiB tmpfs until the kernel refuses: a real ENOSPC.
fn filler(volume: &Volume) -> Container {
    let c = Container::run(
        "disk-fill",
        &[
            "-v",
            &format!("{}:/vol", volume.0),
            "--tmpfs",
            "/small:size=1m",
            "--mount",
            "type=tmpfs,destination=/scratch,tmpfs-size=2097152",
            "--log-opt",
            "max-size=5m",
            FIXTURE_IMAGE,
            "fill",
            "--write",
            "/layer/blob=6",
            "--write",
            "/vol/data=4",
            "--write",
            "/small/x=100",
        ],
    );
    c.wait_for("exited", std::time::Duration::from_secs(60), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let logs = docker(&["logs", &c.name]);
    assert!(
        String::from_utf8_lossy(&logs.stderr).contains("write /small/x: No space left on device"),
        "the kernel refused the write: {}",
        String::from_utf8_lossy(&logs.stderr)
    );
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_usage_reads_layer_mounts_log_and_engine_and_refuses_the_rest() {
    let dd = Drydock::init();
    let volume = Volume::create("disk-vol");
    let c = filler(&volume);
    let hidden = Container::run(
        "disk-hidden",
        &["--label", "io.drydock.role=agent", FIXTURE_IMAGE, "sleep"],
    );
    let exec = ExecutorProcess::start(&dd, |y| y);
    let mut client = exec.agent_client(&dd).await;

    let u = client
        .disk_usage(req("req-disk-1", &c.name))
        .await
        .expect("disk usage")
        .into_inner();
    // Docker's own figure for the layer, byte for byte.
    let size_rw: i64 = docker_ok(&["inspect", "--size", "-f", "{{.SizeRw}}", &c.name])
        .parse()
        .expect("SizeRw");
    assert_eq!(u.writable_layer_bytes, size_rw);
    assert!(u.writable_layer_bytes >= 6 * MIB, "{u:?}");
    assert!(u.root_fs_bytes > u.writable_layer_bytes, "{u:?}");
    let mount = |dest: &str| {
        u.mounts
            .iter()
            .find(|m| m.destination == dest)
            .unwrap_or_else(|| panic!("no mount at {dest}: {:?}", u.mounts))
    };
    let vol = mount("/vol");
    assert_eq!(
        (vol.r#type.as_str(), vol.source.as_str()),
        ("volume", volume.0.as_str())
    );
    assert!(
        (4 * MIB..5 * MIB).contains(&vol.used_bytes),
        "the engine measured the volume: {vol:?}"
    );
    let small = mount("/small");
    assert_eq!((small.r#type.as_str(), small.limit_bytes), ("tmpfs", MIB));
    let scratch = mount("/scratch");
    assert_eq!(
        (scratch.r#type.as_str(), scratch.limit_bytes),
        ("tmpfs", 2 * MIB)
    );
    assert_eq!(
        (u.log_driver.as_str(), u.log_max_size.as_str()),
        ("json-file", "5m")
    );
    assert_eq!(u.container_id, c.id());
    let engine = u.engine.expect("the engine's totals");
    assert!(u.engine_error.is_empty(), "{}", u.engine_error);
    // Images and build cache only: no figure of another container or
    // volume (they may be outside the caller's scope) leaves the executor.
    assert!(engine.images >= 1 && engine.images_bytes > 0, "{engine:?}");
    assert!(
        engine.reclaimable_bytes <= engine.images_bytes + engine.build_cache_bytes,
        "{engine:?}"
    );

    let refusals = [
        (
            req("req disk 2", &c.name),
            Code::InvalidArgument,
            "request_id must be",
        ),
        (
            req("req-disk-3", "a;rm -rf /"),
            Code::InvalidArgument,
            "container must be",
        ),
        (
            req("req-disk-4", "dd-no-such-container"),
            Code::NotFound,
            "not found",
        ),
        (req("req-disk-5", &hidden.name), Code::NotFound, "not found"),
    ];
    for (r, code, needle) in refusals {
        let id = r.request_id.clone();
        let err = client.disk_usage(r).await.expect_err(&id);
        assert_eq!(err.code(), code, "{id}: {err:?}");
        assert!(err.message().contains(needle), "{id}: {}", err.message());
    }
    let rows: Vec<Value> = dd
        .audit_rows()
        .into_iter()
        .filter(|r| r["action"] == "disk_usage")
        .collect();
    assert_eq!(rows.len(), 5, "every call audited, refusals too: {rows:#?}");
    assert_eq!(
        rows.iter().filter(|r| r["decision"] == "allowed").count(),
        1,
        "{rows:#?}"
    );
    drop(exec);
}

fn cause_of(req: &Value, class: &str) -> Value {
    req["diagnosis"]["causes"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["class"] == class).cloned())
        .unwrap_or_else(|| panic!("no {class} cause: {req:#}"))
}

fn disk_evidence_id(req: &Value) -> String {
    req["evidence"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|e| e["type"] == "disk_usage" && e["source"] == "DiskUsage")
        })
        .and_then(|e| e["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no disk_usage evidence: {req:#}"))
}

#[test]
fn a_full_disk_is_followed_to_the_mount_that_is_full() {
    let dd = Drydock::init();
    let volume = Volume::create("disk-agent-vol");
    let fill = filler(&volume);
    // The engine itself cannot set the container up: the mountpoint of a
    // volume has to be made inside a tmpfs with no inode left.
    let engine_full = unique("disk-engine");
    docker_ok(&[
        "create",
        "--name",
        &engine_full,
        "--tmpfs",
        "/data:nr_inodes=1",
        "-v",
        &format!("{}:/data/sub", volume.0),
        FIXTURE_IMAGE,
        "sleep",
    ]);
    let engine_full = Container { name: engine_full };
    let start = docker(&["start", &engine_full.name]);
    assert!(!start.status.success(), "the engine could not start it");
    let error = engine_full.inspect("{{.State.Error}}");
    assert!(error.contains("no space left on device"), "{error}");
    dd.up();

    // From the log line: the 1 MiB tmpfs is full, not the host's disk.
    let (code, req) = dd.ask_json(&[&format!("{} is down", fill.name)]);
    assert_eq!(code, 0, "{req:#}");
    let cause = cause_of(&req, "disk_full");
    assert_eq!(
        req["diagnosis"]["causes"][0]["class"], "disk_full",
        "{req:#}"
    );
    let reason = cause["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("/small/x is on the tmpfs at /small (limited to 1.0 MiB)"),
        "{reason}"
    );
    let ev = disk_evidence_id(&req);
    assert!(
        cause["evidence_ids"]
            .as_array()
            .is_some_and(|ids| ids.iter().any(|i| i == &ev)),
        "the cause cites the disk evidence: {cause:#}"
    );
    let advice: Vec<&str> = req["plan"]["advice"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert!(
        advice.iter().any(|a| a.contains("--tmpfs /small:size=")),
        "the advice is about that tmpfs: {advice:?}"
    );
    assert!(
        !advice.iter().any(|a| a.contains("max-size")),
        "its log is bounded (max-size=5m): {advice:?}"
    );
    assert!(
        req["plan"]["steps"].as_array().is_none_or(|s| s.is_empty()),
        "a restart cannot free a full disk: {req:#}"
    );

    // From the engine's State.Error: the path inside the container is
    // found in the host path, and its parent, the tmpfs at /data, is full.
    let (code, req) = dd.ask_json(&[
        "--diagnose-only",
        &format!("{} won't start", engine_full.name),
    ]);
    assert_eq!(code, 0, "{req:#}");
    assert_eq!(
        req["diagnosis"]["causes"][0]["class"], "disk_full",
        "{req:#}"
    );
    let reason = cause_of(&req, "disk_full")["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(reason.contains("could not start"), "{reason}");
    assert!(
        reason.contains("/data/sub is on the tmpfs at /data"),
        "{reason}"
    );
    disk_evidence_id(&req);
}

#[test]
fn a_binary_for_another_architecture_is_named_as_such() {
    let dd = Drydock::init();
    // A file the kernel cannot execute (no ELF header, no #!): the same
    // ENOEXEC a binary for another CPU gets.
    let ctx = std::env::temp_dir().join(unique("dd-notelf"));
    std::fs::create_dir_all(&ctx).expect("context");
    let file = ctx.join("api");
    std::fs::write(&file, "not a program\n").expect("write");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::write(
        ctx.join("Dockerfile"),
        format!("FROM {FIXTURE_IMAGE}\nCOPY api /usr/local/bin/api\nENTRYPOINT [\"/usr/local/bin/api\"]\n"),
    )
    .expect("Dockerfile");
    let tag = "drydock-fixture-notelf:latest";
    docker_ok(&["build", "-q", "-t", tag, &ctx.to_string_lossy()]);
    let _ = std::fs::remove_dir_all(&ctx);
    let c = Container::run("notelf", &[tag]);
    c.wait_for("exited", std::time::Duration::from_secs(60), |c| {
        c.inspect("{{.State.Status}}") != "running"
    });
    dd.up();
    let (code, req) = dd.ask_json(&["--diagnose-only", &format!("{} is down", c.name)]);
    assert_eq!(code, 0, "{req:#}");
    let cause = &req["diagnosis"]["causes"][0];
    assert_eq!(cause["class"], "config_error", "{req:#}");
    assert!(
        cause["reason"]
            .as_str()
            .is_some_and(|r| r.contains("another CPU architecture")),
        "{cause:#}"
    );
}
