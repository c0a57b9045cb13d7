//! The redaction corpus (`redaction-corpus.tsv`): every credential shape
//! must be withheld, every near miss must stay readable. Prints recall and
//! the false-positive rate; fails on any miss.

use drydock_executor::redact::{redact_env, redact_text, LogShaper};

struct Case<'a> {
    secret: bool,
    shape: &'a str,
    mode: &'a str,
    value: &'a str,
    text: &'a str,
}

fn corpus() -> Vec<Case<'static>> {
    include_str!("redaction-corpus.tsv")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.splitn(5, '\t').collect();
            assert_eq!(f.len(), 5, "a corpus line has 5 fields: {l}");
            assert!(f[4].contains(f[3]), "the text holds the value: {l}");
            Case {
                secret: match f[0] {
                    "secret" => true,
                    "keep" => false,
                    other => panic!("unknown kind {other}: {l}"),
                },
                shape: f[1],
                mode: f[2],
                value: f[3],
                text: f[4],
            }
        })
        .collect()
}

fn shaped(mode: &str, text: &str) -> String {
    match mode {
        "env" => redact_env(text).0,
        "line" => {
            let mut shaper = LogShaper::default();
            shaper.line(text.as_bytes())
        }
        other => panic!("unknown mode {other}"),
    }
}

#[test]
fn every_shape_in_the_corpus_is_withheld_and_every_near_miss_kept() {
    let cases = corpus();
    let (mut caught, mut secrets, mut kept, mut keeps) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for c in &cases {
        let out = shaped(c.mode, c.text);
        if c.secret {
            secrets += 1;
            // The secret must not survive, nor any 8-character piece of it.
            let leaked = out.contains(c.value)
                || (c.value.len() >= 8
                    && c.value
                        .as_bytes()
                        .windows(8)
                        .any(|w| out.as_bytes().windows(8).any(|o| o == w)));
            if leaked {
                failures.push(format!("LEAKED {} ({}): {out}", c.shape, c.mode));
            } else {
                caught += 1;
            }
        } else {
            keeps += 1;
            if out.contains(c.value) {
                kept += 1;
            } else {
                failures.push(format!("BLANKED {} ({}): {out}", c.shape, c.mode));
            }
        }
    }
    println!(
        "redaction corpus: {caught}/{secrets} secret shapes withheld (recall {:.1} %), {} of {keeps} near misses blanked (false positives {:.1} %)",
        100.0 * f64::from(caught) / f64::from(secrets),
        keeps - kept,
        100.0 * f64::from(keeps - kept) / f64::from(keeps)
    );
    assert!(
        secrets >= 60,
        "the corpus has {secrets} shapes; at least 60"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_key_block_without_an_end_hides_a_bounded_number_of_lines_and_says_so() {
    // Key material that never ends: at most MAX_KEY_LINES lines hidden.
    let mut shaper = LogShaper::default();
    let mut out = vec![shaper.line(b"-----BEGIN PGP PRIVATE KEY BLOCK-----")];
    for i in 0..500 {
        out.push(shaper.line(format!("lQOYBGF0aXoBCADK{i}").as_bytes()));
    }
    out.push(shaper.line(b"ERROR the evidence"));
    let withheld = out.iter().filter(|l| l.starts_with("[REDACTED")).count();
    assert!(
        withheld as u32 <= drydock_executor::redact::MAX_KEY_LINES + 1,
        "{withheld} lines withheld"
    );
    assert!(
        out.iter().any(|l| l.contains("without an end line")),
        "it says so"
    );
    assert_eq!(out.last().map(String::as_str), Some("ERROR the evidence"));
    // A decoy BEGIN line followed by ordinary log lines hides only itself.
    let mut shaper = LogShaper::default();
    let out: Vec<String> = [
        "-----BEGIN PRIVATE KEY-----",
        "INFO listening on :8080",
        "ERROR db down",
    ]
    .iter()
    .map(|l| shaper.line(l.as_bytes()))
    .collect();
    assert_eq!(out[0], "[REDACTED PRIVATE KEY]");
    assert!(
        out[1].contains("without an end line") && out[1].ends_with("INFO listening on :8080"),
        "{out:?}"
    );
    assert_eq!(out[2], "ERROR db down");
    // A block that ends is withheld to its end, and no further.
    let mut shaper = LogShaper::default();
    let lines: Vec<String> = [
        "-----BEGIN PGP PRIVATE KEY BLOCK-----",
        "lQOYBGF0aXoBCADK",
        "-----END PGP PRIVATE KEY BLOCK-----",
        "after",
    ]
    .iter()
    .map(|l| shaper.line(l.as_bytes()))
    .collect();
    assert_eq!(lines[1], "[REDACTED]");
    assert_eq!(lines[2], "[REDACTED]");
    assert_eq!(lines[3], "after");
}

#[test]
fn a_secret_is_withheld_however_the_line_around_it_is_cased() {
    // Names are matched whatever their case and convention.
    for name in [
        "db_password",
        "DB_PASSWORD",
        "dbPassword",
        "db-password",
        "Db.Password",
        "RABBITMQ_DEFAULT_PASS",
    ] {
        let line = format!("{name}=Zq8rT5vW2xY");
        let (out, n) = redact_text(&line);
        assert!(!out.contains("Zq8rT5vW2xY") && n == 1, "{line} -> {out}");
        let (env, n) = redact_env(&line);
        assert!(!env.contains("Zq8rT5vW2xY") && n == 1, "{line} -> {env}");
    }
}

#[test]
fn healthcheck_commands_as_argument_lists_withhold_their_credentials() {
    use drydock_executor::redact::redact_argv;
    let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (test, secret) in [
        (
            argv(&["CMD", "redis-cli", "-a", "rcliPw3", "ping"]),
            "rcliPw3",
        ),
        (
            argv(&["CMD-SHELL", "mysqladmin ping -u root -pmaPw4"]),
            "maPw4",
        ),
        (argv(&["CMD", "mysqladmin", "ping", "-pmaPw5"]), "maPw5"),
        (
            argv(&[
                "CMD",
                "curl",
                "-fsS",
                "-u",
                "admin:curlPw6",
                "http://localhost/",
            ]),
            "curlPw6",
        ),
        (argv(&["CMD", "pg_isready", "--password", "pgPw7"]), "pgPw7"),
    ] {
        let (out, n) = redact_argv(&test);
        assert!(
            n >= 1 && !out.iter().any(|a| a.contains(secret)),
            "{test:?} -> {out:?}"
        );
        assert_eq!(out.len(), test.len(), "one argument for one argument");
    }
    let plain = argv(&["CMD", "curl", "-f", "http://localhost:8080/health"]);
    assert_eq!(redact_argv(&plain), (plain.clone(), 0));
}
