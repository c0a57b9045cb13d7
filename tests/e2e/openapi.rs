//! The agent's REST API against its OpenAPI 3.1 document
//! (`docs/openapi.json`, served at `/api/v1/openapi.json`), on real daemons:
//! - the router's routes and the document's operations are the same set;
//! - every operation, called with good input as a client would, answers
//!   something the document describes (status, content type, and a body
//!   that validates against the schema, checked by `tests/api/validate.py`
//!   with jsonschema_rs from PyPI), and without the token a 401 problem;
//! - schemathesis, a property-based API fuzzer from PyPI, finds no 5xx, no
//!   answer outside the schema and no route that ignores the token.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use drydock_e2e::*;
use serde_json::{json, Value};

/// (method, path) of every `.route(...)` in agent/src/api.rs.
fn routed() -> BTreeSet<(String, String)> {
    let src = std::fs::read_to_string(workspace_root().join("agent/src/api.rs")).unwrap();
    let method = regex::Regex::new(r"\b(get|post|delete|put|patch)\(").unwrap();
    let mut out = BTreeSet::new();
    for part in src.split(".route(").skip(1) {
        let call = &part[..part.find("))").map_or(part.len(), |i| i + 1)];
        let path = call.split('"').nth(1).unwrap().to_string();
        for m in method.captures_iter(call) {
            out.insert((m[1].to_string(), path.clone()));
        }
    }
    out
}

struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
    answers: Vec<Value>,
}

impl Api {
    async fn call(
        &mut self,
        method: &str,
        template: &str,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let mut req = self
            .http
            .request(
                method.to_uppercase().parse().unwrap(),
                format!("{}{path}", self.base),
            )
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(120));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.expect("the agent answers");
        let status = res.status().as_u16();
        let ctype = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let text = res.text().await.unwrap_or_default();
        let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
        self.answers.push(json!({"method": method, "path": template, "status": status, "content_type": ctype, "body": body}));
        body
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_is_what_its_openapi_document_says() {
    drydock_daemon::tls::install_crypto_provider();
    let python = python_venv("api-venv", "schemathesis");
    let doc_path = workspace_root().join("docs/openapi.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&doc_path).unwrap()).unwrap();
    let documented: BTreeSet<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(p, ops)| {
            ops.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.clone(), p.clone()))
        })
        .collect();
    assert_eq!(
        routed(),
        documented,
        "the router and docs/openapi.json list the same operations"
    );

    let dd = Drydock::init_options(|o| {
        o.agent_tcp = true;
        o.targets = vec!["dd-openapi-*".into()];
    });
    dd.up();
    let token = dd.home.load_cli_config().and_then(|c| c.token()).unwrap();
    let base = format!("http://127.0.0.1:{}", dd.agent_port);
    let mut api = Api {
        base: base.clone(),
        token: token.clone(),
        http: reqwest::Client::new(),
        answers: Vec::new(),
    };
    let served = api
        .call("get", "/api/v1/openapi.json", "/api/v1/openapi.json", None)
        .await;
    assert_eq!(served, doc, "the agent serves docs/openapi.json");

    // Good input, as a client sends it: a request that waits for an
    // approval (a wedged web service) and one that is answered.
    let web = Container::unhealthy_web("openapi", &[]);
    let fix = api
        .call(
            "post",
            "/api/v1/requests",
            "/api/v1/requests",
            Some(json!({"message": format!("{} is unhealthy", web.name)})),
        )
        .await;
    let id = fix["id"].as_str().expect("a request id").to_string();
    let mut approval = String::new();
    for _ in 0..120 {
        let pending = api
            .call("get", "/api/v1/approvals", "/api/v1/approvals", None)
            .await;
        if let Some(a) = pending
            .as_array()
            .and_then(|a| a.iter().find(|a| a["request_id"] == id.as_str()))
        {
            approval = a["approval"]["id"].as_str().unwrap_or_default().to_string();
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(!approval.is_empty(), "the request asks for an approval");
    let bad = api
        .call(
            "post",
            "/api/v1/approvals/{id}/approve",
            &format!("/api/v1/approvals/{approval}/approve"),
            Some(json!({"key_id": "local-operator", "signature": "AAAA"})),
        )
        .await;
    assert_eq!(bad["status"], 400, "{bad}");
    api.call(
        "post",
        "/api/v1/approvals/{id}/reject",
        &format!("/api/v1/approvals/{approval}/reject"),
        None,
    )
    .await;
    let ask = api
        .call(
            "post",
            "/api/v1/requests",
            "/api/v1/requests",
            Some(json!({"message": "is it ok?", "container": web.name, "diagnose_only": true})),
        )
        .await;
    let asked = ask["id"].as_str().unwrap().to_string();
    for (template, path) in [
        (
            "/api/v1/requests/{id}/events",
            format!("/api/v1/requests/{asked}/events"),
        ),
        ("/api/v1/requests/{id}", format!("/api/v1/requests/{asked}")),
        (
            "/api/v1/requests/{id}/timeline",
            format!("/api/v1/requests/{id}/timeline"),
        ),
        ("/api/v1/requests", "/api/v1/requests?limit=10".to_string()),
        ("/api/v1/executor", "/api/v1/executor".to_string()),
        ("/api/v1/hosts", "/api/v1/hosts".to_string()),
        ("/api/v1/containers", "/api/v1/containers".to_string()),
        ("/api/v1/services", "/api/v1/services".to_string()),
        (
            "/api/v1/services/{service}/tasks",
            "/api/v1/services/shop_api/tasks".to_string(),
        ),
        ("/api/v1/grants", "/api/v1/grants".to_string()),
        ("/api/v1/deliveries", "/api/v1/deliveries".to_string()),
        ("/metrics", "/metrics".to_string()),
        ("/healthz", "/healthz".to_string()),
    ] {
        api.call("get", template, &path, None).await;
    }
    let followed = api
        .call(
            "post",
            "/api/v1/requests/{id}/followups",
            &format!("/api/v1/requests/{asked}/followups"),
            Some(json!({"message": "it began after the last deploy"})),
        )
        .await;
    assert_eq!(followed["request"]["id"], asked.as_str(), "{followed}");
    api.call(
        "post",
        "/api/v1/requests/{id}/cancel",
        &format!("/api/v1/requests/{asked}/cancel"),
        None,
    )
    .await;
    let note = api
        .call(
            "post",
            "/api/v1/notes",
            "/api/v1/notes",
            Some(json!({"target": web.name, "text": "flaky under load; see the runbook"})),
        )
        .await;
    let note_id = note["id"].as_str().expect("a note id").to_string();
    api.call(
        "get",
        "/api/v1/notes",
        &format!("/api/v1/notes?target={}", web.name),
        None,
    )
    .await;
    api.call(
        "delete",
        "/api/v1/notes/{id}",
        &format!("/api/v1/notes/{note_id}"),
        None,
    )
    .await;
    let schedule = api
        .call(
            "post",
            "/api/v1/schedules",
            "/api/v1/schedules",
            Some(json!({"message": format!("is {} healthy?", web.name), "every_secs": 3600})),
        )
        .await;
    let schedule_id = schedule["id"].as_str().expect("a schedule id").to_string();
    api.call("get", "/api/v1/schedules", "/api/v1/schedules", None)
        .await;
    api.call(
        "delete",
        "/api/v1/schedules/{id}",
        &format!("/api/v1/schedules/{schedule_id}"),
        None,
    )
    .await;
    api.call(
        "post",
        "/api/v1/grants",
        "/api/v1/grants",
        Some(json!({"claims": "e30=", "signature": "AAAA", "key_id": "local-operator"})),
    )
    .await;
    api.call(
        "delete",
        "/api/v1/grants/{id}",
        "/api/v1/grants/grt-nothing",
        None,
    )
    .await;
    api.call(
        "post",
        "/api/v1/alerts",
        "/api/v1/alerts",
        Some(json!({"alerts": []})),
    )
    .await;
    api.call(
        "post",
        "/api/v1/updates/check",
        "/api/v1/updates/check",
        None,
    )
    .await;
    api.call("get", "/api/v1/updates", "/api/v1/updates", None)
        .await;
    let called: BTreeSet<(String, String)> = api
        .answers
        .iter()
        .map(|a| {
            (
                a["method"].as_str().unwrap().to_string(),
                a["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(called, documented, "every operation was called");
    let answers = dd.dir.path().join("answers.json");
    std::fs::write(&answers, serde_json::to_vec(&api.answers).unwrap()).unwrap();
    let checked = Command::new(&python)
        .arg(workspace_root().join("tests/api/validate.py"))
        .arg(&doc_path)
        .arg(&answers)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "answers outside the document:\n{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    // Without the token: a 401 problem on every operation but /healthz.
    let http = reqwest::Client::new();
    for (method, path) in &documented {
        let url = format!(
            "{base}{}",
            path.replace("{id}", "x").replace("{service}", "x")
        );
        let res = http
            .request(method.to_uppercase().parse().unwrap(), url)
            .send()
            .await
            .unwrap();
        let expected = if path == "/healthz" { 200 } else { 401 };
        assert_eq!(res.status().as_u16(), expected, "{method} {path}");
    }

    // The fuzzer, over every operation, from the document in the repository.
    let st = python.with_file_name("schemathesis");
    let out = Command::new(&st)
        .current_dir(dd.dir.path())
        .args(["run"])
        .arg(&doc_path)
        .args([
            "--url",
            &base,
            "-H",
            &format!("Authorization: Bearer {token}"),
        ])
        // positive_data_acceptance expects any schema-valid input to be
        // accepted; a random signature never is.
        .args([
            "--checks",
            "all",
            "--exclude-checks",
            "positive_data_acceptance",
        ])
        .args([
            "--max-examples",
            "10",
            "--request-timeout",
            "30",
            "--seed",
            "1",
            "--no-color",
        ])
        .output()
        .expect("run schemathesis");
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "schemathesis found problems:\n{said}");
    assert!(
        said.contains(&format!("Tested: {}", documented.len())),
        "{said}"
    );
}
