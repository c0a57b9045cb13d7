//! Generated inputs against the redactor (property tests on stable Rust):
//! a secret from the corpus planted anywhere in random text, wrapped in
//! quotes or brackets, with its name re-cased, never survives; output stays
//! within bounds; no input makes the redactor or the log shaper panic.
//!
//! `PROPTEST_CASES` sets the cases per property (256 by default, as CI runs
//! it); `scripts/fuzz.sh` runs each property for 10^6 cases.

use drydock_executor::redact::{redact_env, redact_text, LogShaper, MAX_KEY_LINES};
use proptest::prelude::*;

/// The corpus's `secret` cases in `line` mode: (value, text).
fn secrets() -> Vec<(String, String)> {
    include_str!("redaction-corpus.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .filter_map(|l| {
            let f: Vec<&str> = l.splitn(5, '\t').collect();
            (f.len() == 5 && f[0] == "secret" && f[2] == "line")
                .then(|| (f[3].to_string(), f[4].to_string()))
        })
        .collect()
}

/// Log-ish noise: words, numbers, punctuation, timestamps, unicode.
fn noise() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            "[a-zA-Z]{1,12}",
            "[0-9]{1,6}",
            Just("2026-12-01T04:00:00Z".to_string()),
            Just("INFO".to_string()),
            Just("ERROR".to_string()),
            "[\\[\\](){}<>|#*~^]{1,2}",
            "\\PC{1,4}",
        ],
        0..8,
    )
    .prop_map(|w| w.join(" "))
}

proptest! {
    #[test]
    fn a_planted_secret_never_survives(
        idx in any::<prop::sample::Index>(),
        before in noise(),
        after in noise(),
        wrap in 0usize..4,
    ) {
        let cases = secrets();
        let (value, text) = &cases[idx.index(cases.len())];
        let planted = match wrap {
            0 => text.clone(),
            1 => format!("\"{text}\""),
            2 => format!("[{text}]"),
            _ => format!("({text})"),
        };
        let line = format!("{before} {planted} {after}");
        let (out, n) = redact_text(&line);
        prop_assert!(!out.contains(value.as_str()), "{line}\n-> {out}");
        prop_assert!(n >= 1);
        // The same line through the log shaper.
        let mut shaper = LogShaper::default();
        let shaped = shaper.line(line.as_bytes());
        prop_assert!(!shaped.contains(value.as_str()), "{line}\n-> {shaped}");
    }

    #[test]
    fn a_secret_named_value_is_withheld_in_any_case_and_convention(
        name in prop::sample::select(vec!["password", "db_password", "api_key", "secret", "auth_token", "client_secret", "rabbitmq_default_pass"]),
        upper in any::<bool>(),
        kebab in any::<bool>(),
        sep in prop::sample::select(vec!["=", ": ", "=\"", "\":\"", "\\\":\\\""]),
        value in "[A-Za-z0-9]{8,24}",
        before in noise(),
    ) {
        let mut name = name.to_string();
        if upper { name = name.to_uppercase(); }
        if kebab { name = name.replace('_', "-"); }
        let line = format!("{before} {name}{sep}{value}");
        let (out, _) = redact_text(&line);
        prop_assert!(!out.contains(&value), "{line}\n-> {out}");
        let (env, _) = redact_env(&format!("{name}={value}"));
        prop_assert!(!env.contains(&value), "{env}");
    }

    #[test]
    fn any_text_is_shaped_within_bounds(text in "\\PC{0,400}") {
        let (out, n) = redact_text(&text);
        // Each redaction replaces at least one character with a marker of
        // at most 23 ("[REDACTED PRIVATE KEY]").
        prop_assert!(out.len() <= text.len() + 23 * (n as usize));
    }

    #[test]
    fn no_run_of_lines_hides_more_than_the_bound(
        lines in proptest::collection::vec(
            prop_oneof![
                Just("-----BEGIN PRIVATE KEY-----".to_string()),
                Just("-----END PRIVATE KEY-----".to_string()),
                "[A-Za-z0-9+/=]{0,64}",
                "\\PC{0,40}",
            ],
            0..600,
        )
    ) {
        let mut shaper = LogShaper::default();
        let mut run = 0u32;
        for l in &lines {
            let out = shaper.line(l.as_bytes());
            if out == "[REDACTED]" {
                run += 1;
                prop_assert!(run <= MAX_KEY_LINES, "{run} lines in a row withheld");
            } else {
                run = 0;
            }
        }
    }
}
