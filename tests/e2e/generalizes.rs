//! Diagnosis that generalizes, through the real daemons and real
//! containers: a start or restart only where the evidence says it helps
//! (the shape of the failure, a run that went well, a start that fixed the
//! same failure before), what an error names followed into the container's
//! definition (a path on a read-only volume, a host on another network, a
//! port another container publishes, a variable missing beside a near miss,
//! the user it runs as), an honest `unknown` with no write, and a model
//! that investigates openly where the rules cannot tell, whose unsupported
//! write is refused, and one that finds the target itself.

use std::time::Duration;

use drydock::fixture::FIXTURE_IMAGE;
use drydock_e2e::*;
use serde_json::{json, Value};

/// How long a run must last to count as having run well, in these tests.
const RAN_WELL_AFTER: &str = "2s";

/// A home whose agent counts a run of `RAN_WELL_AFTER` as one that went
/// well, so the tests need not wait a minute.
fn drydock() -> Drydock {
    let dd = Drydock::init();
    let config = std::fs::read_to_string(dd.home.agent_config()).expect("agent config");
    std::fs::write(
        dd.home.agent_config(),
        format!("{config}diagnosis:\n  ran_well_after: {RAN_WELL_AFTER}\n"),
    )
    .expect("agent config");
    dd
}

fn exited(c: &Container) {
    c.wait_for("exited", Duration::from_secs(60), |c| {
        c.inspect("{{.State.Status}}") == "exited"
    });
}

/// `docker start` it, and wait until it has died again.
fn start_and_let_die(c: &Container) {
    let before = c.inspect("{{.State.StartedAt}}");
    docker_ok(&["start", &c.name]);
    c.wait_for("started and exited again", Duration::from_secs(60), |c| {
        c.inspect("{{.State.StartedAt}}") != before && c.inspect("{{.State.Status}}") == "exited"
    });
}

fn steps(req: &Value) -> Vec<(String, String, String)> {
    req["plan"]["steps"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["action"].as_str().unwrap_or("").to_string(),
                s["target"]["container_name"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
                s["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn writes_on(dd: &Drydock, c: &Container) -> Vec<Value> {
    let id = c.id();
    dd.write_rows()
        .into_iter()
        .filter(|r| r["container_id"] == id.as_str())
        .collect()
}

fn class(req: &Value) -> &str {
    req["diagnosis"]["causes"][0]["class"]
        .as_str()
        .unwrap_or("")
}

fn reasons(req: &Value) -> String {
    req["diagnosis"]["causes"].to_string()
}

/// The `shape` evidence exists and the primary cause cites it.
fn shape_cited(req: &Value) -> Value {
    let shape = req["evidence"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["type"] == "shape")
        .unwrap_or_else(|| panic!("a shape evidence record: {req:#}"))
        .clone();
    let cited = req["diagnosis"]["causes"][0]["evidence_ids"].to_string();
    assert!(
        cited.contains(shape["id"].as_str().unwrap()),
        "the cause cites the shape: {req:#}"
    );
    shape["data"].clone()
}

/// Item 1 of diagnosis that generalizes: a container that dies the same
/// way seconds after every start gets advice, not a start, whatever its
/// words; one that ran longer than `ran_well_after` and died once gets a
/// start; one whose same failure a start fixed before gets a start. Each
/// start says which evidence made it worth proposing, and is verified.
#[test]
fn a_start_is_proposed_only_where_the_evidence_says_it_helps() {
    let dd = drydock();
    // Dies at once, the same way, at each of two starts.
    let every = Container::run(
        "every-start",
        &[
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--line",
            "INFO ledger 4.2.0 booting",
            "--stderr-line",
            "panic: ledger: schema check: table ledger_entries has 7 columns, want 9",
        ],
    );
    // Runs 3.5 s, then panics; the next start stays up.
    let long = Container::run(
        "ran-long",
        &[
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "2",
            "--delay-ms",
            "3500",
            "--line",
            "INFO processing batch 1",
            "--stderr-line",
            "panic: runtime error: index out of range [3] with length 3",
            "--up-on-boots",
            "2",
            "--after-restart-line",
            "INFO processing batch 2",
        ],
    );
    // Dies at once; a start kept it up (until someone killed it); dies
    // at once the same way again; the next start stays up.
    let fixed = Container::run(
        "fixed-before",
        &[
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "2",
            "--stderr-line",
            "panic: session store handshake failed (attempt 1)",
            "--up-on-boots",
            "2,4",
            "--after-restart-line",
            "INFO session store connected",
        ],
    );
    exited(&every);
    start_and_let_die(&every);
    exited(&long);
    exited(&fixed);
    docker_ok(&["start", &fixed.name]);
    std::thread::sleep(Duration::from_secs(4));
    docker_ok(&["kill", &fixed.name]);
    exited(&fixed);
    start_and_let_die(&fixed);
    dd.up();

    // Every start: no write, and the advice says why.
    let finished = every.inspect("{{.State.FinishedAt}}");
    let (code, req) = dd.ask_json(&["--yes", "--container", &every.name, "ledger is down"]);
    assert_eq!(code, 0, "{req:#}");
    assert!(
        steps(&req).is_empty(),
        "no start for a container that dies at every start: {req:#}"
    );
    let advice = req["plan"]["advice"].to_string();
    assert!(
        advice.contains("No start or restart") && advice.contains("the same way"),
        "the advice says why: {advice}"
    );
    let shape = shape_cited(&req);
    assert_eq!(shape["same_at_every_start"], 2, "{shape:#}");
    assert_eq!(shape["startup_failure"], true, "{shape:#}");
    assert!(shape["start_may_help"].is_null(), "{shape:#}");
    assert!(
        writes_on(&dd, &every).is_empty(),
        "no write reached the executor"
    );
    assert_eq!(
        every.inspect("{{.State.FinishedAt}}"),
        finished,
        "never started"
    );

    // Ran 3.5 s (longer than ran_well_after) and died once: a start.
    let (code, req) = dd.ask_json(&["--yes", "--container", &long.name, "the batch job is down"]);
    assert_eq!(code, 0, "{req:#}\n{}", dd.agent_log());
    assert_eq!(class(&req), "crash", "{req:#}");
    let planned = steps(&req);
    assert_eq!(planned.len(), 1, "{req:#}");
    assert_eq!(
        (planned[0].0.as_str(), planned[0].1.as_str()),
        ("start", long.name.as_str())
    );
    assert!(
        planned[0].2.contains("it ran for"),
        "the reason names the evidence: {}",
        planned[0].2
    );
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(req["verification"]["ok"], true, "{req:#}");
    assert_eq!(long.inspect("{{.State.Running}}"), "true");

    // The same failure was fixed by a start before: a start, saying so.
    let (code, req) = dd.ask_json(&["--yes", "--container", &fixed.name, "sessions are down"]);
    assert_eq!(code, 0, "{req:#}\n{}", dd.agent_log());
    let planned = steps(&req);
    assert_eq!(planned.len(), 1, "{req:#}");
    assert_eq!(planned[0].0, "start");
    assert!(
        planned[0]
            .2
            .contains("a start helped the same failure before"),
        "the reason names the history: {}",
        planned[0].2
    );
    assert!(
        req["diagnosis"]["signature"]
            .as_str()
            .is_some_and(|s| s.contains("session store handshake failed")),
        "{req:#}"
    );
    assert_eq!(req["verification"]["ok"], true, "{req:#}");
    assert_eq!(fixed.inspect("{{.State.Running}}"), "true");
    dd.assert_audit_intact();
}

/// Item 4: what an error names, followed into the container's definition,
/// each kind of object once; the cause or the advice says what was found,
/// and no write is made for any of them.
#[test]
fn what_an_error_names_is_followed() {
    let dd = drydock();
    // A path: a write to a volume mounted read-only, in words no rule knows.
    let volume = unique("dd-e2e-ro");
    docker_ok(&["volume", "create", &volume]);
    let ro = Container::run(
        "ro-volume",
        &[
            "-v",
            &format!("{volume}:/data:ro"),
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "ERROR indexer: could not create /data/cache/index.db",
        ],
    );
    // A host: the database runs, but on a network the target is not on.
    let net_db = Network::create("db-net");
    let net_app = Network::create("app-net");
    let db = Container::run(
        "ledger-db",
        &["--network", &net_db.name, FIXTURE_IMAGE, "sleep"],
    );
    let app = Container::run(
        "ledger-app",
        &[
            "--network",
            &net_app.name,
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            &format!("Error: getaddrinfo ENOTFOUND {}", db.name),
        ],
    );
    // A port: the host's port is published by another container, and the
    // target (on the host's network) cannot listen on it.
    let port = free_port();
    let holder = Container::run(
        "port-holder",
        &[
            "-p",
            &format!("127.0.0.1:{port}:8080"),
            FIXTURE_IMAGE,
            "serve",
            "--port",
            "8080",
        ],
    );
    holder.wait_for("running", Duration::from_secs(30), |c| {
        c.inspect("{{.State.Running}}") == "true"
    });
    let bind = Container::run(
        "port-taken",
        &[
            "--network",
            "host",
            FIXTURE_IMAGE,
            "serve",
            "--port",
            &port.to_string(),
        ],
    );
    // A variable: not set, and a near miss is.
    let var = Container::run(
        "var-missing",
        &[
            "-e",
            "DATABASE_URI=postgres://db/app",
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "Traceback (most recent call last):",
            "--stderr-line",
            "KeyError: DATABASE_URL",
        ],
    );
    // A user: who it runs as, beside the mount it was refused.
    let user = Container::run(
        "as-user",
        &[
            "--user",
            "4321:4321",
            "-v",
            &format!("{volume}:/srv/state"),
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "1",
            "--stderr-line",
            "Error: EACCES: permission denied, open '/srv/state/lock'",
        ],
    );
    for c in [&ro, &app, &bind, &var, &user] {
        exited(c);
    }
    dd.up();

    let ask = |c: &Container| {
        let (code, req) = dd.ask_json(&["--yes", "--container", &c.name, "it is down"]);
        assert_eq!(code, 0, "{req:#}\n{}", dd.agent_log());
        assert!(steps(&req).is_empty(), "no write for {}: {req:#}", c.name);
        assert!(
            writes_on(&dd, c).is_empty(),
            "no write reached the executor for {}",
            c.name
        );
        req
    };

    let req = ask(&ro);
    assert_eq!(class(&req), "permission_denied", "{req:#}");
    let said = reasons(&req);
    assert!(
        said.contains("/data") && said.contains(&volume) && said.contains("read-only"),
        "the mount is named: {said}"
    );

    let req = ask(&app);
    assert_eq!(class(&req), "dependency_unavailable", "{req:#}");
    let advice = req["plan"]["advice"].to_string();
    assert!(
        advice.contains(&net_db.name)
            && advice.contains(&net_app.name)
            && advice.contains("share no network"),
        "both networks are named: {advice}"
    );

    let req = ask(&bind);
    assert_eq!(class(&req), "port_conflict", "{req:#}");
    let advice = req["plan"]["advice"].to_string();
    assert!(
        advice.contains(&holder.name) && advice.contains(&port.to_string()),
        "the holder is named: {advice}"
    );

    let req = ask(&var);
    assert_eq!(class(&req), "config_error", "{req:#}");
    let said = reasons(&req);
    assert!(
        said.contains("DATABASE_URL") && said.contains("DATABASE_URI"),
        "the near miss is named: {said}"
    );
    assert!(
        !said.contains("postgres://db/app"),
        "the cause names the variable, never its value: {said}"
    );

    let req = ask(&user);
    assert_eq!(class(&req), "permission_denied", "{req:#}");
    let said = reasons(&req);
    assert!(
        said.contains("4321") && said.contains("/srv/state"),
        "the user and the mount are named: {said}"
    );
    drop(db);
    let _ = docker(&["volume", "rm", "-f", &volume]);
}

/// A ledger that exits 3 saying nothing drydock can read a cause in.
fn silent_ledger(test: &str) -> Container {
    Container::run(
        test,
        &[
            FIXTURE_IMAGE,
            "crash",
            "--code",
            "3",
            "--line",
            "INFO replaying journal segment 17",
            "--line",
            "ledger: stopped after segment 17",
        ],
    )
}

/// Item 5: nothing supports a cause. The answer is `unknown`, with its
/// shape, its last words, what was ruled out and where to look next, and
/// no write, even with `--yes`.
#[test]
fn an_honest_unknown_proposes_nothing() {
    let dd = drydock();
    let c = silent_ledger("unknown");
    exited(&c);
    dd.up();
    let (code, req) = dd.ask_json(&["--yes", "--container", &c.name, "ledger is down"]);
    assert_eq!(code, 0, "{req:#}");
    assert_eq!(class(&req), "unknown", "{req:#}");
    let reason = req["diagnosis"]["causes"][0]["reason"]
        .as_str()
        .unwrap_or("")
        .to_string();
    for words in [
        "cannot tell",
        "exit 3",
        "Ruled out",
        "not an OOM kill",
        "Look next",
    ] {
        assert!(reason.contains(words), "{words:?} in {reason}");
    }
    assert!(
        req["diagnosis"]["confidence"]
            .as_f64()
            .is_some_and(|c| c < 0.6),
        "{req:#}"
    );
    assert!(steps(&req).is_empty(), "{req:#}");
    assert!(writes_on(&dd, &c).is_empty());
    shape_cited(&req);
}

/// Item 6: with a model configured, a failure the rules cannot name goes
/// to the model as an open investigation (no rules answer to confirm).
/// The model calls it a crash and proposes a start that nothing supports:
/// the start is refused with the reason, the request says so, and the
/// diagnosis records the model's turns, tokens and time.
#[test]
fn a_model_investigates_openly_where_the_rules_cannot_tell_and_its_unsupported_start_is_refused() {
    let dd = drydock();
    let c = silent_ledger("open-model");
    exited(&c);
    let finished = c.inspect("{{.State.FinishedAt}}");
    let model = scripted_model::start(vec![
        (
            "submit_diagnosis",
            json!({"summary": "the ledger crashed", "confidence": 0.8, "causes": [{"class": "crash", "reason": "it stopped after segment 17", "confidence": 0.8, "evidence_ids": ["{EV}"]}]}),
        ),
        (
            "propose_plan",
            json!({"steps": [{"action": "start", "container": c.name, "reason": "start it again", "expected_effect": "it runs"}], "advice": []}),
        ),
    ]);
    dd.up_with_model(&model.url);
    let (code, req) = dd.ask_json(&["--yes", "--container", &c.name, "ledger is down"]);
    assert_eq!(code, 0, "{req:#}\n{}", dd.agent_log());
    assert_eq!(
        req["rules_diagnosis"]["causes"][0]["class"], "unknown",
        "{req:#}"
    );
    let first = model.bodies().first().cloned().unwrap_or_default();
    assert!(
        first.contains("could not name the cause"),
        "the investigation is open: {first}"
    );
    assert!(
        !first.contains("confirm or refute"),
        "no rules answer to confirm"
    );
    let told = model.bodies().join("\n");
    assert!(
        told.contains("is refused") && told.contains("a start would go differently"),
        "the start was refused with the reason"
    );
    assert!(steps(&req).is_empty(), "{req:#}");
    let advice = req["plan"]["advice"].to_string();
    assert!(
        advice.contains("No start or restart") || advice.contains("proposes no start or restart"),
        "{advice}"
    );
    assert_eq!(req["diagnosis"]["engine"], "llm:scripted", "{req:#}");
    let run = &req["diagnosis"]["model"];
    assert_eq!(run["open"], true, "{req:#}");
    assert!(run["turns"].as_u64().is_some_and(|t| t >= 2), "{run:#}");
    assert!(
        run["prompt_tokens"].as_u64().is_some_and(|t| t > 0),
        "{run:#}"
    );
    assert!(run["elapsed_ms"].is_u64(), "{run:#}");
    assert!(
        dd.write_rows().is_empty(),
        "no write call: {:?}",
        dd.write_rows()
    );
    assert_eq!(
        c.inspect("{{.State.FinishedAt}}"),
        finished,
        "never started"
    );
}

/// Issue 49, item 5: with `llm.investigate: blind`, discovery chooses no
/// target. The model names the one the person means (a service a person
/// stopped after it ran well), drydock observes it and keeps the model's
/// start of it (its evidence supports one), drops the model's restart of
/// a healthy bystander the target's evidence never names, and the start is
/// signed, executed and verified on the model's target only.
#[test]
fn a_blind_model_finds_the_target_and_only_writes_its_evidence_supports_are_kept() {
    let dd = drydock();
    let api = Container::run("blind-api", &[FIXTURE_IMAGE, "serve", "--port", "8080"]);
    let bystander = Container::run("blind-cache", &[FIXTURE_IMAGE, "serve", "--port", "6379"]);
    // Ran well (past `RAN_WELL_AFTER`), then a person stopped it.
    std::thread::sleep(Duration::from_secs(3));
    docker_ok(&["stop", "-t", "2", &api.name]);
    exited(&api);
    let model = scripted_model::start(vec![
        (
            "submit_diagnosis",
            json!({"target": api.name, "summary": "the api was stopped", "confidence": 0.9, "causes": [{"class": "stopped", "reason": "it was stopped after running well", "confidence": 0.9, "evidence_ids": ["{EV}"]}]}),
        ),
        (
            "propose_plan",
            json!({"steps": [
                {"action": "start", "container": api.name, "reason": "start it again", "expected_effect": "it serves"},
                {"action": "restart", "container": bystander.name, "reason": "to be safe", "expected_effect": "fresh"}
            ], "advice": []}),
        ),
    ]);
    dd.up_with_model_investigating(&model.url, "blind");
    let (code, req) = dd.ask_json(&["--yes", "the api is down"]);
    assert_eq!(code, 0, "{req:#}\n{}", dd.agent_log());
    let first = model.bodies().first().cloned().unwrap_or_default();
    assert!(first.contains("drydock has not chosen a target"), "{first}");
    assert!(!first.contains("drydock resolved the target"), "{first}");
    assert_eq!(
        req["target"]["container_name"],
        api.name.as_str(),
        "{req:#}"
    );
    assert_eq!(req["diagnosis"]["engine"], "llm:scripted", "{req:#}");
    let kept = steps(&req);
    assert_eq!(kept.len(), 1, "{req:#}");
    assert_eq!(
        (kept[0].0.as_str(), kept[0].1.as_str()),
        ("start", api.name.as_str())
    );
    let advice = req["plan"]["advice"].to_string();
    assert!(
        advice.contains(&format!(
            "dropped the model's step `restart {}`",
            bystander.name
        )),
        "{advice}"
    );
    assert_eq!(req["status"], "completed", "{req:#}");
    assert_eq!(api.inspect("{{.State.Status}}"), "running");
    let started: Vec<Value> = writes_on(&dd, &api)
        .into_iter()
        .filter(|r| r["decision"] == "allowed")
        .collect();
    assert_eq!(started.len(), 1, "{:?}", dd.write_rows());
    assert!(
        writes_on(&dd, &bystander).is_empty(),
        "{:?}",
        dd.write_rows()
    );
    dd.assert_audit_intact();
}
