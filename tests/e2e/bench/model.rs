//! The benchmark's scripted model: the scripted OpenAI-compatible server of
//! the tests, answering from what the agent sent it. It reads the target,
//! confirms the rules engine's findings (the analyzer block of the first
//! message) as its diagnosis, and proposes the obvious write. It is a
//! baseline for the model path (the loop, the validation, the tools, the
//! cost in calls), not a model: it can only be as right as the rules
//! engine, and a table where it scores below the rules shows what the path
//! itself loses.

use serde_json::{json, Value};

use crate::scripted_model::{self, Model};

/// The JSON inside the first `<untrusted-data … source="analyzer">` block.
fn analyzer(first: &str) -> Option<Value> {
    let start = first.find("source=\"analyzer\">\n")? + "source=\"analyzer\">\n".len();
    let end = first[start..].find("\n</untrusted-data")? + start;
    serde_json::from_str(&first[start..end]).ok()
}

/// `name=NAME id=ID` of the target block.
fn target(first: &str) -> Option<String> {
    let block = &first[first.find("drydock resolved the target to:")?..];
    let at = block.find("name=")? + "name=".len();
    block[at..].split_whitespace().next().map(str::to_string)
}

/// The container a dependency cause says is down: `that is container X,
/// which is exited`.
fn stopped_dependency(diagnosis: &Value) -> Option<String> {
    diagnosis["causes"].as_array()?.iter().find_map(|c| {
        let reason = c["reason"].as_str()?;
        let rest = reason.split("that is container ").nth(1)?;
        let (name, state) = rest.split_once(", which is ")?;
        ["exited", "created", "dead"]
            .iter()
            .any(|s| state.starts_with(s))
            .then(|| name.to_string())
    })
}

/// The obvious writes for the analyzer's primary class.
fn steps(diagnosis: &Value, target: &str) -> Vec<Value> {
    let primary = &diagnosis["causes"][0];
    let reason = primary["reason"].as_str().unwrap_or("");
    let step = |action: &str, container: &str| json!({"action": action, "container": container, "reason": reason, "expected_effect": "it recovers"});
    match primary["class"].as_str().unwrap_or("") {
        "unhealthy" => vec![step("restart", target)],
        "dependency_unavailable" => {
            // The dependency first, when it is down; then the target, when
            // it exited too.
            let mut steps: Vec<Value> = stopped_dependency(diagnosis)
                .map(|d| vec![step("start", &d)])
                .unwrap_or_default();
            if reason.contains(" exited with code ") {
                steps.push(step("start", target));
            }
            steps
        }
        "stopped" if reason.contains("one-off job") => vec![],
        "stopped" | "crash" | "unknown" => vec![step("start", target)],
        _ => vec![],
    }
}

/// One answer: the tool to call and its arguments.
fn respond(body: &str) -> (String, String) {
    let Ok(req) = serde_json::from_str::<Value>(body) else {
        return (
            "ask_clarification".into(),
            json!({"question": "?"}).to_string(),
        );
    };
    let messages = req["messages"].as_array().cloned().unwrap_or_default();
    let first = messages
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let last_call = messages
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .and_then(|m| m["tool_calls"][0]["function"]["name"].as_str())
        .map(str::to_string);
    let (Some(diagnosis), Some(target)) = (analyzer(&first), target(&first)) else {
        return (
            "ask_clarification".into(),
            json!({"question": "Which container do you mean?"}).to_string(),
        );
    };
    match last_call.as_deref() {
        None => (
            "inspect_container".into(),
            json!({"container": target}).to_string(),
        ),
        Some("submit_diagnosis") => (
            "propose_plan".into(),
            json!({"steps": steps(&diagnosis, &target), "advice": []}).to_string(),
        ),
        Some(_) => {
            let causes: Vec<Value> = diagnosis["causes"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .take(5)
                .map(|c| {
                    json!({
                        "class": c["class"],
                        "reason": c["reason"],
                        "confidence": c["confidence"],
                        "evidence_ids": c["evidence_ids"],
                    })
                })
                .collect();
            (
                "submit_diagnosis".into(),
                json!({
                    "summary": diagnosis["summary"],
                    "confidence": diagnosis["confidence"],
                    "causes": causes,
                })
                .to_string(),
            )
        }
    }
}

/// Start the echo model; its URL goes in `llm.base_url`.
pub fn start() -> Model {
    scripted_model::start_with(|_, body| respond(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_confirms_the_analyzer_and_proposes_the_obvious_write() {
        let first = "The operator's request:\nweb is down\n\ndrydock resolved the target to:\n<untrusted-data boundary=\"b\" source=\"target\">\nname=shop-web-1 id=abc\n</untrusted-data boundary=\"b\">\n\nAnalyzer results (rules engine) to confirm or refute:\n<untrusted-data boundary=\"b\" source=\"analyzer\">\n{\"summary\":\"s\",\"confidence\":0.8,\"causes\":[{\"class\":\"dependency_unavailable\",\"reason\":\"shop-web-1 cannot reach db; that is container shop-db-1, which is exited\",\"confidence\":0.8,\"evidence_ids\":[\"ev-1\"]}],\"engine\":\"rules\"}\n</untrusted-data boundary=\"b\">";
        let body = |msgs: Value| json!({"messages": msgs}).to_string();
        let user = json!({"role": "user", "content": first});
        let (tool, args) = respond(&body(json!([user])));
        assert_eq!(
            (tool.as_str(), args.as_str()),
            ("inspect_container", r#"{"container":"shop-web-1"}"#)
        );
        let called =
            |name: &str| json!({"role": "assistant", "tool_calls": [{"function": {"name": name}}]});
        let (tool, args) = respond(&body(json!([user, called("inspect_container")])));
        assert_eq!(tool, "submit_diagnosis");
        assert!(args.contains("dependency_unavailable"), "{args}");
        let (tool, args) = respond(&body(json!([
            user,
            called("inspect_container"),
            called("submit_diagnosis")
        ])));
        assert_eq!(tool, "propose_plan");
        assert!(
            args.contains(r#""container":"shop-db-1""#) && args.contains(r#""action":"start""#),
            "{args}"
        );
    }
}
