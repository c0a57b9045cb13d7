use super::*;

/// The smallest agent.yaml that loads, before the keys a test adds.
const BASE: &str = "token_file: token\nexecutor: {ca: ca.pem, cert: agent.pem, key: agent.key}\nstore: {path: agent.db}\n";

/// A folder with the files `BASE` names, and the path of its agent.yaml.
fn home() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for f in ["token", "ca.pem", "agent.pem", "agent.key"] {
        std::fs::write(dir.path().join(f), "x").unwrap();
    }
    let path = dir.path().join("agent.yaml");
    (dir, path)
}

#[test]
fn plain_tcp_is_refused_unless_asked_for() {
    let (dir, path) = home();
    let base = BASE;
    std::fs::write(&path, base).unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(
        c.listen_on().unwrap(),
        Listen::Unix(dir.path().join("run/agent.sock")),
        "the default is a unix socket next to the config"
    );
    std::fs::write(&path, format!("{base}listen: 127.0.0.1:7420\n")).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("`listen`") && err.contains("allow_plain_tcp"),
        "{err}"
    );
    std::fs::write(
        &path,
        format!("{base}listen: 127.0.0.1:7420\napi: {{allow_plain_tcp: true}}\n"),
    )
    .unwrap();
    assert!(matches!(
        Config::load(&path).unwrap().listen_on().unwrap(),
        Listen::Tcp(_)
    ));
    // Group root would admit every root process to the socket.
    std::fs::write(&path, format!("{base}api: {{allowed_gid: 0}}\n")).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(err.contains("api.allowed_gid"), "{err}");
    std::fs::write(&path, format!("{base}api: {{allowed_gid: 4242}}\n")).unwrap();
    assert_eq!(Config::load(&path).unwrap().api.allowed_gid, Some(4242));
}

fn llm(yaml: &str) -> Result<(), String> {
    let c: LlmConfig = serde_yaml_ng::from_str(yaml).map_err(|e| e.to_string())?;
    c.validate().map_err(|e| e.to_string())
}

#[test]
fn llm_section_is_validated_with_the_key_named() {
    assert!(llm("{provider: openai, model: m, api_key_env: OPENAI_API_KEY}").is_ok());
    let cases = [
        (
            "{provider: openai, model: m, api_key_env: sk-abc123}",
            "llm.api_key_env",
        ),
        ("{provider: openai, model: '', api_key_env: K}", "llm.model"),
        (
            "{provider: openai, model: m, api_key_env: K, base_url: ftp://x}",
            "llm.base_url",
        ),
        (
            "{provider: openai, model: m, api_key_env: K, max_turns: 0}",
            "llm.max_turns",
        ),
        (
            "{provider: openai, model: m, api_key_env: K, timeout: 0s}",
            "llm.timeout",
        ),
        (
            "{provider: openai, model: m, api_key_env: K, max_retries: 99}",
            "llm.max_retries",
        ),
    ];
    for (yaml, key) in cases {
        let err = llm(yaml).unwrap_err();
        assert!(err.contains(key), "{yaml}: {err}");
        assert!(!err.contains("sk-abc123"), "the key leaked: {err}");
    }
    let err = llm("{provider: gemini, model: m, api_key_env: K}").unwrap_err();
    assert!(err.contains("provider") || err.contains("gemini"), "{err}");
}

#[test]
fn a_missing_key_variable_is_named_and_the_key_is_read_from_it() {
    let c: LlmConfig = serde_yaml_ng::from_str(
        "{provider: anthropic, model: m, api_key_env: DRYDOCK_TEST_LLM_KEY_UNSET_1}",
    )
    .unwrap();
    let err = c.api_key().unwrap_err().to_string();
    assert!(err.contains("llm.api_key_env") && err.contains("DRYDOCK_TEST_LLM_KEY_UNSET_1"));
    assert_eq!(c.base_url(), DEFAULT_ANTHROPIC_BASE_URL);
    assert_eq!(c.timeout, DEFAULT_LLM_TIMEOUT);
    assert_eq!(c.max_turns, DEFAULT_LLM_MAX_TURNS);
}

#[test]
fn a_webhook_event_that_does_not_exist_is_refused_naming_the_key_and_the_words() {
    let (_dir, path) = home();
    let base = BASE;
    let hook = |events: &str| {
        format!("{base}notify: {{webhooks: [{{name: ops, url: 'https://hooks.example/x', events: {events}}}]}}\n")
    };
    std::fs::write(&path, hook("[opened, needs_approval]")).unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(
        c.notify.webhooks[0].events,
        vec![
            crate::model::NotifyEvent::Opened,
            crate::model::NotifyEvent::NeedsApproval
        ]
    );
    std::fs::write(&path, hook("[opened, repaired]")).unwrap();
    let err = Config::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("notify.webhooks[0].events[1]")
            && err.contains("repaired")
            && err.contains("schedule_changed"),
        "{err}"
    );
}

#[test]
fn ran_well_after_is_read_and_bounded() {
    let (_dir, path) = home();
    let base = BASE;
    std::fs::write(&path, base).unwrap();
    assert_eq!(
        Config::load(&path).unwrap().diagnosis.ran_well_after,
        Duration::from_secs(60)
    );
    std::fs::write(&path, format!("{base}diagnosis: {{ran_well_after: 5m}}\n")).unwrap();
    assert_eq!(
        Config::load(&path).unwrap().diagnosis.ran_well_after,
        Duration::from_secs(300)
    );
    for bad in ["0s", "2h"] {
        std::fs::write(
            &path,
            format!("{base}diagnosis: {{ran_well_after: {bad}}}\n"),
        )
        .unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(
            err.contains("diagnosis.ran_well_after") && err.contains("1s and 1h"),
            "{bad}: {err}"
        );
    }
}
