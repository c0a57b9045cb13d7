//! Inspect evidence a senior SRE would look at: mounts, user, working
//! directory, command, image id and network mode, through the real
//! executor and agent; `permission_denied` names the user and mounts, and a
//! container sharing another's network is told to be re-created, and one
//! whose image is gone is told what that breaks.

use drydock_e2e::*;

#[test]
fn inspect_evidence_has_mounts_user_command_image_and_network_mode() {
    let dd = Drydock::init();
    let web = Container::run(
        "evidence-web",
        &[
            drydock::fixture::FIXTURE_WEB_IMAGE,
            "serve",
            "--port",
            "8080",
        ],
    );
    let network = format!("container:{}", web.id());
    let denied = Container::run(
        "evidence-denied",
        &[
            "--user",
            "1000:1000",
            "--workdir",
            "/tmp",
            "--mount",
            "type=tmpfs,destination=/data",
            "--network",
            &network,
            drydock::fixture::FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "Error: EACCES: permission denied, open '/data/shop.sqlite'",
        ],
    );
    denied.wait_for("exited", std::time::Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    dd.up();
    let (code, req) = dd.ask_json(&["--container", &denied.name, "the shop is down"]);
    assert_eq!(code, 0, "{req:#}");
    let inspect = req["evidence"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["type"] == "inspect"))
        .map(|e| e["data"].clone())
        .unwrap_or_else(|| panic!("inspect evidence: {req:#}"));
    assert_eq!(inspect["user"], "1000:1000", "{inspect:#}");
    assert_eq!(inspect["working_dir"], "/tmp");
    assert_eq!(inspect["network_mode"], network.as_str());
    assert!(
        inspect["image_id"]
            .as_str()
            .is_some_and(|i| i.starts_with("sha256:")),
        "{inspect:#}"
    );
    assert!(
        inspect["mounts"].as_array().is_some_and(|m| m
            .iter()
            .any(|m| m["destination"] == "/data" && m["type"] == "tmpfs" && m["rw"] == true)),
        "{inspect:#}"
    );
    assert!(
        inspect.get("image_missing").is_none(),
        "its image is there: {inspect:#}"
    );
    let argv: Vec<String> = serde_json::from_value(inspect["command"].clone()).unwrap_or_default();
    assert!(
        argv.iter().any(|a| a == "crash"),
        "the command is evidence: {argv:?}"
    );
    let cause = &req["diagnosis"]["causes"][0];
    assert_eq!(cause["class"], "permission_denied", "{req:#}");
    let reason = cause["reason"].as_str().unwrap_or("");
    assert!(
        reason.contains("user `1000:1000`") && reason.contains("/data"),
        "{reason}"
    );
    let advice = serde_json::to_string(&req["plan"]["advice"]).expect("advice");
    assert!(
        advice.contains("shares the network of container"),
        "{advice}"
    );
}

/// The image a crashed container was made from is deleted (`docker rmi -f`
/// removes a stopped container's image): starting it still works, but
/// re-creating it will not, and the advice says so.
#[test]
fn a_container_whose_image_is_gone_is_told_what_that_breaks() {
    let dd = Drydock::init();
    let tag = format!("{}/api:2.1", unique("dd-e2e"));
    // Its own image (a label makes a new image id), so deleting it
    // leaves the fixture alone.
    build_image(
        &tag,
        &format!(
            "FROM {}\nLABEL drydock.e2e=\"{tag}\"\n",
            drydock::fixture::FIXTURE_IMAGE
        ),
    );
    let c = Container::run(
        "evidence-noimage",
        &[
            &tag,
            "crash",
            "--code",
            "1",
            // It got as far as serving before its panic: a start can help.
            "--line",
            "INFO api listening on :8080",
            "--stderr-line",
            "panic: runtime error: invalid memory address or nil pointer dereference",
        ],
    );
    c.wait_for("exited", std::time::Duration::from_secs(30), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
    let image_id = c.inspect("{{.Image}}");
    docker_ok(&["rmi", "-f", &tag]);
    assert!(
        !docker(&["image", "inspect", &image_id]).status.success(),
        "the image is gone"
    );
    dd.up();
    let (code, req) = dd.ask_json(&["--diagnose-only", "--container", &c.name, "api is down"]);
    assert_eq!(code, 0, "{req:#}");
    let inspect = req["evidence"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["type"] == "inspect"))
        .map(|e| e["data"].clone())
        .unwrap_or_else(|| panic!("inspect evidence: {req:#}"));
    assert_eq!(inspect["image_missing"], true, "{inspect:#}");
    assert_eq!(req["diagnosis"]["causes"][0]["class"], "crash", "{req:#}");

    // Suggest-only has no plan; the plan's advice is asked for by a report.
    let (code, req) = dd.ask_json(&["--container", &c.name, "api is down"]);
    assert_eq!(code, 3, "the start waits for its approval: {req:#}");
    let advice = serde_json::to_string(&req["plan"]["advice"]).expect("advice");
    assert!(
        advice.contains("is no longer on this engine")
            && advice.contains(&format!("docker pull {tag}")),
        "{advice}"
    );
    let steps = req["plan"]["steps"].as_array().cloned().unwrap_or_default();
    assert!(
        steps.iter().any(|s| s["action"] == "start"),
        "a start still works: {req:#}"
    );
}

/// What a restart erases (state, health log, the last log lines) is kept in
/// the request before the write.
#[test]
fn a_write_is_preceded_by_a_snapshot_of_what_it_erases() {
    let dd = Drydock::init();
    let c = Container::unhealthy_web("evidence-snapshot", &[]);
    dd.up();
    let (code, req) = dd.ask_json(&[
        "--yes",
        "--container",
        &c.name,
        "the web service is unhealthy",
    ]);
    assert_eq!(code, 0, "{req:#}");
    assert_eq!(req["status"], "completed", "{req:#}");
    let evidence = req["evidence"].as_array().cloned().unwrap_or_default();
    let snapshot = evidence
        .iter()
        .position(|e| e["type"] == "pre_write_snapshot")
        .unwrap_or_else(|| panic!("a snapshot: {req:#}"));
    let verification = evidence
        .iter()
        .position(|e| e["type"] == "verification")
        .unwrap_or(usize::MAX);
    assert!(snapshot < verification, "taken before the write");
    let data = &evidence[snapshot]["data"];
    assert_eq!(data["action"], "restart");
    assert_eq!(data["health_status"], "unhealthy", "{data:#}");
    assert!(
        data["health_log"].as_array().is_some_and(|l| !l.is_empty()),
        "{data:#}"
    );
    assert!(
        data["last_lines"].as_array().is_some_and(|l| !l.is_empty()),
        "{data:#}"
    );
    assert_eq!(c.health(), "healthy");
}
