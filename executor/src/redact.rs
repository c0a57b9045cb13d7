//! Output shaping: secrets are redacted and terminal control sequences are
//! neutralised before anything leaves the executor. The agent (and any model
//! behind it) is not trusted with credentials it does not need to diagnose.
//!
//! Three kinds of rule, checked against the corpus in
//! `executor/tests/redaction-corpus.tsv` (`executor/tests/redaction.rs`
//! prints recall and false positives):
//! - **shapes**: credentials recognisable by themselves (cloud and SaaS key
//!   prefixes, JWTs, webhook URLs, private key blocks);
//! - **places**: a password in a URL's userinfo, an `Authorization` header,
//!   a command-line flag (`--password X`, `redis-cli -a X`, `mysql -pX`,
//!   `curl -u user:X`), a `.netrc` line, a registry `auth` entry;
//! - **names**: `name=value`, `name: value`, JSON (escaped too) and XML
//!   pairs whose name looks secret (`is_secret_name`).

use std::sync::{OnceLock, RwLock};

use regex::Regex;

pub const REDACTED: &str = "[REDACTED]";
/// What a value the executor holds as a secret (a registry's password or
/// token) is replaced with, wherever it shows up.
pub const WITHHELD: &str = "[REDACTED: a configured credential]";

/// Values of the executor's own configuration that are secrets, whatever
/// their shape: withheld from every text it answers or audits.
fn known() -> &'static RwLock<Vec<String>> {
    static KNOWN: OnceLock<RwLock<Vec<String>>> = OnceLock::new();
    KNOWN.get_or_init(|| RwLock::new(Vec::new()))
}

/// Withhold `secret` (4 characters or more) from all text from now on.
pub fn withhold(secret: &str) {
    if secret.len() < 4 {
        return;
    }
    let mut list = known().write().unwrap_or_else(|p| p.into_inner());
    if !list.iter().any(|s| s == secret) {
        list.push(secret.to_string());
        // The longest first: a secret containing another is withheld whole.
        list.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
}

/// Replace the withheld values in each of `texts`, in place.
pub fn withhold_in(texts: &mut [&mut String]) {
    for text in texts.iter_mut() {
        if let (withheld, 1..) = withhold_known(text) {
            **text = withheld;
        }
    }
}

/// `text` with every withheld value replaced; how many were.
pub fn withhold_known(text: &str) -> (String, u32) {
    let list = known().read().unwrap_or_else(|p| p.into_inner());
    let mut out = None::<String>;
    let mut count = 0u32;
    for secret in list.iter() {
        let current = out.as_deref().unwrap_or(text);
        if current.contains(secret.as_str()) {
            count += current.matches(secret.as_str()).count() as u32;
            out = Some(current.replace(secret.as_str(), WITHHELD));
        }
    }
    (out.unwrap_or_else(|| text.to_string()), count)
}

/// A private key that starts without an end is blanked for at most this
/// many lines (a 4096-bit PGP key is about 110), then the window says so.
pub const MAX_KEY_LINES: u32 = 200;

/// Words that make a name secret-looking, wherever they are in it.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "pass",
    "passphrase",
    "secret",
    "secrets",
    "token",
    "credential",
    "credentials",
    "apikey",
    "dsn",
    "cookie",
    "sessionid",
    "sid",
    "sig",
    "signature",
    // Traefik's `…basicauth.users` labels (htpasswd lines: a user and a
    // password hash). Not `auth` alone: "auth: token expired" is a message.
    "basicauth",
    "digestauth",
    "htpasswd",
];
/// A name ending with one of these holds something about a secret (where it
/// is, how long it lasts), not the secret: `PASSWORD_FILE`, `KEY_ID`.
const NOT_SECRET_LAST_WORDS: &[&str] = &[
    "file", "path", "dir", "name", "id", "hint", "type", "length", "len", "size", "min", "max",
    "policy", "expiry", "expires", "timeout", "ttl", "count", "enabled", "required", "prompt",
    "url", "endpoint", "host", "user", "username",
];

/// The words of a name: split at `_ - . :` and lowercase-to-uppercase
/// changes (`dbPassword`, `SharedAccessKey`), lowercased.
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            if !word.is_empty() {
                out.push(std::mem::take(&mut word));
            }
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Does a variable, field or parameter with this name hold a secret?
pub fn is_secret_name(name: &str) -> bool {
    let words = words(name);
    let Some(last) = words.last() else {
        return false;
    };
    // The shell's working directory, not a password.
    if matches!(name, "PWD" | "OLDPWD") {
        return false;
    }
    if NOT_SECRET_LAST_WORDS.contains(&last.as_str()) {
        return false;
    }
    last == "key" || words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
}

fn compile(table: &[(&str, &'static str)]) -> Vec<(Regex, &'static str)> {
    table
        .iter()
        .filter_map(|(re, rep)| Regex::new(re).ok().map(|r| (r, *rep)))
        .collect()
}

/// Credentials recognisable by their shape, and the places a credential
/// sits in whatever its name.
fn shape_patterns() -> &'static [(Regex, &'static str)] {
    static PATTERNS: OnceLock<Vec<(Regex, &'static str)>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        compile(&[
            // A whole key on one line, or its header with whatever follows
            // (PEM, OpenSSH, encrypted, PGP).
            (r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)", "[REDACTED PRIVATE KEY]"),
            // user:password@ in URLs and connection strings (the user may be empty).
            (r"(?P<keep>[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)[^\s@/]+@", "${keep}[REDACTED]@"),
            // Authorization headers.
            (r"(?i)(?P<keep>\b(?:bearer|token)\s+)[a-z0-9\-._~+/]{12,}=*", "${keep}[REDACTED]"),
            (r"(?i)(?P<keep>\bbasic\s+)[a-z0-9+/]{8,}=*", "${keep}[REDACTED]"),
            // Command lines: flags that take a secret, and the usual tools.
            (r"(?i)(?P<keep>--[a-z0-9\-]*(?:password|passwd|pass|token|secret|api-?key)\s+)[^\s\-][^\s]*", "${keep}[REDACTED]"),
            (r"(?P<keep>\bredis-cli\b[^\n]*?\s-a\s+)[^\s]+", "${keep}[REDACTED]"),
            (r"(?P<keep>\bmysql(?:admin|dump|sh)?\b[^\n]*?\s-p)[^\s]+", "${keep}[REDACTED]"),
            (r"(?P<keep>\b(?:curl|wget)\b[^\n]*?\s(?:-u|--user)\s+[^\s:]+:)[^\s]+", "${keep}[REDACTED]"),
            // .netrc, a registry's auth entry, cookies.
            (r"(?i)(?P<keep>\blogin\s+\S+\s+password\s+)\S+", "${keep}[REDACTED]"),
            (r#"(?P<keep>\\?"auth\\?"\s*:\s*\\?")[A-Za-z0-9+/=]+"#, "${keep}[REDACTED]"),
            (r"(?i)(?P<keep>\b(?:set-)?cookie:\s*)[^\s].*", "${keep}[REDACTED]"),
            // Cloud and SaaS keys (shapes as their providers document them).
            (r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b", REDACTED),
            (r"\bAIza[0-9A-Za-z_\-]{30,40}\b", REDACTED),
            (r"\bGOCSPX-[0-9A-Za-z_\-]{24,}", REDACTED),
            (r"\bgh[pousr]_[A-Za-z0-9]{30,}\b", REDACTED),
            (r"\bgithub_pat_[A-Za-z0-9_]{40,}", REDACTED),
            (r"\bglpat-[A-Za-z0-9_\-]{20,}", REDACTED),
            (r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", REDACTED),
            (r"(?P<keep>hooks\.slack\.com/services/)[A-Za-z0-9_/]+", "${keep}[REDACTED]"),
            (r"(?P<keep>discord(?:app)?\.com/api/webhooks/[0-9]+/)[A-Za-z0-9_\-]+", "${keep}[REDACTED]"),
            (r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}", REDACTED),
            (r"\bsk-[A-Za-z0-9_\-]{20,}", REDACTED),
            (r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{30,}", REDACTED),
            (r"\bkey-[0-9a-z]{32}\b", REDACTED),
            (r"\bnpm_[A-Za-z0-9]{36}\b", REDACTED),
            (r"\bpypi-AgE[A-Za-z0-9_\-]{40,}", REDACTED),
            (r"\bdckr_pat_[A-Za-z0-9_\-]{20,}", REDACTED),
            (r"\bhv[sb]\.[A-Za-z0-9_\-]{24,}", REDACTED),
            (r"\bdo[por]_v1_[a-f0-9]{64}\b", REDACTED),
            (r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b", REDACTED),
            (r"\bhf_[A-Za-z]{30,}\b", REDACTED),
            (r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b", REDACTED),
            (r"\bNRAK-[A-Z0-9]{20,}\b", REDACTED),
            (r"\bATATT3[A-Za-z0-9_\-=]{20,}", REDACTED),
            (r"\blin_api_[A-Za-z0-9]{32,}\b", REDACTED),
            (r"\b[0-9]{8,10}:AA[A-Za-z0-9_\-]{30,35}\b", REDACTED),
            (r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", REDACTED),
        ])
    })
}

/// `name=value`, `name: value`, `"name": "value"`, `\"name\":\"value\"`.
fn pair_pattern() -> &'static Regex {
    static PAIR: OnceLock<Regex> = OnceLock::new();
    PAIR.get_or_init(|| {
        Regex::new(r#"(?P<key>[A-Za-z0-9_.\-]+)(?P<sep>\\?["']?[ \t]*[=:][ \t]*\\?["']?)(?P<val>[^\s"'\\,;&<>?]+)"#)
            .expect("the pair pattern is a valid constant")
    })
}

/// `<name>value</name>`.
fn xml_pattern() -> &'static Regex {
    static XML: OnceLock<Regex> = OnceLock::new();
    XML.get_or_init(|| {
        Regex::new(r"<(?P<key>[A-Za-z_][A-Za-z0-9_.:\-]*)>(?P<val>[^<]+)</")
            .expect("the XML pattern is a valid constant")
    })
}

fn ansi() -> &'static Regex {
    static ANSI: OnceLock<Regex> = OnceLock::new();
    // CSI and OSC sequences, and the two-byte escapes.
    ANSI.get_or_init(|| {
        Regex::new(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])")
            .expect("the ANSI pattern is a valid constant")
    })
}

/// Redact one line of text; returns the line and how many secrets were
/// withheld.
pub fn redact_text(text: &str) -> (String, u32) {
    let (mut out, mut count) = withhold_known(text);
    // One pass tells whether any pattern matches at all (most text has
    // none); only then are they applied in turn, each to the last one's
    // output, as before.
    if shape_set().is_match(&out) {
        for (re, rep) in shape_patterns() {
            if re.is_match(&out) {
                count += re.find_iter(&out).count() as u32;
                out = re.replace_all(&out, *rep).into_owned();
            }
        }
    }
    // A pair needs its `=` or `:`, a tag its `</`, and either a name that
    // looks secret (`may_name_a_secret`).
    if !may_name_a_secret(&out) {
        return (out, count);
    }
    if out.contains(['=', ':']) {
        let (paired, n) = withhold_named_values(pair_pattern(), &out);
        count += n;
        out = paired;
    }
    if out.contains("</") {
        let (tagged, n) = withhold_named_values(xml_pattern(), &out);
        count += n;
        out = tagged;
    }
    (out, count)
}

/// Whether some name in `text` could be one `is_secret_name` holds
/// secret: each of its words is a piece of the name, lowercased, so a text
/// that contains none of these (ignoring case) names no secret.
fn may_name_a_secret(text: &str) -> bool {
    static WORDS: OnceLock<Regex> = OnceLock::new();
    WORDS
        .get_or_init(|| {
            // `pass` covers password, passwd, passphrase and htpasswd; `key`
            // covers apikey; `sig` covers signature; `secret` secrets.
            Regex::new(
                "(?i)pass|pwd|secret|token|credential|key|dsn|cookie|sessionid|sid|sig|basicauth|digestauth",
            )
            .expect("the secret words are a valid constant")
        })
        .is_match(text)
}

/// Every shape pattern at once, to skip them all when none matches.
fn shape_set() -> &'static regex::RegexSet {
    static SET: OnceLock<regex::RegexSet> = OnceLock::new();
    SET.get_or_init(|| {
        regex::RegexSet::new(shape_patterns().iter().map(|(re, _)| re.as_str()))
            .expect("the shape patterns compiled one by one")
    })
}

/// Replace the `val` of every match whose `key` looks secret. A match whose
/// key does not is not consumed past its separator: its value may hold the
/// next pair (`A: X-Api-Key: …` is `A` = `X-Api-Key: …`, and also
/// `X-Api-Key` = `…`).
fn withhold_named_values(re: &Regex, text: &str) -> (String, u32) {
    let mut out = String::with_capacity(text.len());
    let mut count = 0;
    let mut copied = 0;
    let mut at = 0;
    while at <= text.len() {
        let Some(c) = re.captures_at(text, at) else {
            break;
        };
        let (Some(key), Some(val)) = (c.name("key"), c.name("val")) else {
            break;
        };
        if is_secret_name(key.as_str()) && !val.as_str().starts_with("[REDACTED") {
            out.push_str(&text[copied..val.start()]);
            out.push_str(REDACTED);
            copied = val.end();
            count += 1;
            at = val.end();
        } else {
            at = val.start().max(key.end());
        }
        if at == text.len() {
            break;
        }
    }
    out.push_str(&text[copied..]);
    (out, count)
}

/// Remove ANSI sequences and replace other control characters (tab kept) so
/// output cannot repaint an operator's terminal or smuggle hidden text.
pub fn neutralise_controls(text: &str) -> String {
    // Every ANSI sequence begins with ESC, itself a control character:
    // text without one has nothing to change.
    if !text.chars().any(char::is_control) {
        return text.to_string();
    }
    let stripped = ansi().replace_all(text, "");
    stripped
        .chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{FFFD}'
            } else {
                c
            }
        })
        .collect()
}

/// Multi-line text (health probe output): each line neutralised and
/// redacted, line breaks kept, trailing whitespace dropped.
pub fn shape_multiline(text: &str) -> (String, u32) {
    let mut total = 0;
    let lines: Vec<String> = text
        .trim_end()
        .lines()
        .map(|l| {
            let (l, n) = redact_text(&neutralise_controls(l.trim_end_matches('\r')));
            total += n;
            l
        })
        .collect();
    (lines.join("\n"), total)
}

/// Is this line a private key's BEGIN or END marker (PEM, OpenSSH, PGP)?
fn key_marker(text: &str) -> Option<KeyMarker> {
    static MARKER: OnceLock<Regex> = OnceLock::new();
    let re = MARKER.get_or_init(|| {
        Regex::new(r"-----(BEGIN|END) [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
            .expect("the key marker pattern is a valid constant")
    });
    let mut begin = false;
    let mut end = false;
    for c in re.captures_iter(text) {
        match &c[1] {
            "BEGIN" => begin = true,
            _ => end = true,
        }
    }
    match (begin, end) {
        (false, false) => None,
        (true, false) => Some(KeyMarker::Begin),
        (false, true) => Some(KeyMarker::End),
        (true, true) => Some(KeyMarker::Whole),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyMarker {
    Begin,
    End,
    /// Begin and end on one line (`redact_text` handles it).
    Whole,
}

/// What lines inside a key block look like: base64 (or nothing), or an
/// armour header (`Version: …`, `Proc-Type: …`).
fn looks_like_key_material(text: &str) -> bool {
    let t = text.trim();
    t.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
        || t.split_once(": ").is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// Shapes a sequence of log lines. Stateful because a private key spans
/// lines: the lines between its BEGIN and END lines are withheld while they
/// look like key material, for at most `MAX_KEY_LINES` lines, so a stray
/// BEGIN line cannot hide the evidence after it.
#[derive(Default)]
pub struct LogShaper {
    /// Lines withheld so far in the key being read, if one is open.
    in_private_key: Option<u32>,
    redactions: u32,
}

impl LogShaper {
    /// A shaper for one window of lines. A window that starts inside a key
    /// (its first marker is an END line: the tail cut the BEGIN off) is
    /// withheld up to that END line.
    pub fn for_window<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> LogShaper {
        let first_marker = lines
            .into_iter()
            .find_map(|raw| key_marker(&String::from_utf8_lossy(raw)));
        LogShaper {
            in_private_key: (first_marker == Some(KeyMarker::End)).then_some(0),
            redactions: 0,
        }
    }

    pub fn line(&mut self, raw: &[u8]) -> String {
        let text = String::from_utf8_lossy(raw);
        let text = neutralise_controls(text.trim_end_matches(['\n', '\r']));
        if let Some(withheld) = self.in_private_key {
            if key_marker(&text) == Some(KeyMarker::End) {
                self.in_private_key = None;
                self.redactions += 1;
                return REDACTED.to_string();
            }
            if !looks_like_key_material(&text) {
                // A log line, not key material: the block was cut short
                // (or its BEGIN line was a decoy). Stop hiding, and say so.
                self.in_private_key = None;
                let (line, n) = redact_text(&text);
                self.redactions += n;
                return format!("[private key without an end line: blanking stopped] {line}");
            }
            self.redactions += 1;
            if withheld + 1 >= MAX_KEY_LINES {
                self.in_private_key = None;
                return format!(
                    "{REDACTED} (a private key began {MAX_KEY_LINES} lines above without an end line; the lines after this one are shown, redacted line by line)"
                );
            }
            self.in_private_key = Some(withheld + 1);
            return REDACTED.to_string();
        }
        if key_marker(&text) == Some(KeyMarker::Begin) {
            self.in_private_key = Some(0);
        }
        let (line, n) = redact_text(&text);
        self.redactions += n;
        line
    }

    pub fn redactions(&self) -> u32 {
        self.redactions
    }
}

/// Bytes from Docker to a safe, redacted line.
pub fn shape_log_line(raw: &[u8]) -> (String, u32) {
    let text = String::from_utf8_lossy(raw);
    let trimmed = text.trim_end_matches(['\n', '\r']);
    redact_text(&neutralise_controls(trimmed))
}

/// A command as an argument list (a healthcheck's test, a command line):
/// each argument is redacted with the arguments before it as context, so
/// `["redis-cli", "-a", "pw"]` withholds `pw` as `redis-cli -a pw` would.
pub fn redact_argv(args: &[String]) -> (Vec<String>, u32) {
    let mut out = Vec::with_capacity(args.len());
    let mut total = 0;
    let mut context = String::new();
    // `context` redacted: the previous round's `with_context`.
    let mut before = String::new();
    for arg in args {
        let arg = neutralise_controls(arg);
        let joined = if context.is_empty() {
            arg.clone()
        } else {
            format!("{context} {arg}")
        };
        let (with_context, _) = redact_text(&joined);
        let shaped = match with_context.strip_prefix(before.as_str()) {
            Some(rest) if context.is_empty() => rest.to_string(),
            Some(rest) => rest.strip_prefix(' ').unwrap_or(rest).to_string(),
            // A redaction across the boundary: withhold the argument.
            None => REDACTED.to_string(),
        };
        total += u32::from(shaped != arg);
        out.push(shaped);
        context = joined;
        before = with_context;
    }
    (out, total)
}

/// Which environment values leave the executor (`redact.env`).
#[derive(Debug, Clone, Default)]
pub enum EnvPolicy {
    /// Values of secret-looking names are withheld; the others are shown,
    /// redacted like any text.
    #[default]
    SecretLooking,
    /// Every value is withheld, except those of the allowed names (shown,
    /// redacted like any text). Names always stay: they are evidence.
    All {
        allow: std::collections::HashSet<String>,
    },
}

/// `KEY=VALUE` under a policy.
pub fn redact_env_with(entry: &str, policy: &EnvPolicy) -> (String, u32) {
    match policy {
        EnvPolicy::SecretLooking => redact_env(entry),
        EnvPolicy::All { allow } => {
            let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
            if allow.contains(key) && !is_secret_name(key) {
                return redact_env(entry);
            }
            let key = neutralise_controls(key);
            if value.is_empty() {
                (format!("{key}="), 0)
            } else {
                (format!("{key}={REDACTED}"), 1)
            }
        }
    }
}

/// `KEY=VALUE` from a container's environment, with the value withheld when
/// the key looks secret and credentials stripped from it otherwise.
pub fn redact_env(entry: &str) -> (String, u32) {
    let (key, value) = entry.split_once('=').unwrap_or((entry, ""));
    let key = neutralise_controls(key);
    if is_secret_name(&key) && !value.is_empty() {
        return (format!("{key}={REDACTED}"), 1);
    }
    let (value, n) = redact_text(&neutralise_controls(value));
    (format!("{key}={value}"), n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configured_credential_is_withheld_whatever_its_shape() {
        let plain = "plain-words-no-shape-7781";
        assert_eq!(redact_text(&format!("pulled with {plain}")).1, 0);
        withhold(plain);
        withhold("ab");
        let (out, n) = redact_text(&format!("denied for ci:{plain} (again {plain})"));
        assert_eq!(n, 2, "{out}");
        assert!(!out.contains(plain) && out.contains(WITHHELD), "{out}");
        assert_eq!(withhold_known("ab and abc stay").0, "ab and abc stay");
    }

    #[test]
    fn the_prefilter_lets_every_secret_word_through() {
        for w in SECRET_WORDS
            .iter()
            .chain(&["key", "Api_Key", "X-AUTH-TOKEN", "dbPassword"])
        {
            assert!(may_name_a_secret(&format!("a {w}=x")), "{w}");
            assert!(
                redact_text(&format!("{w}=hunter2hunter2")).1 >= 1 || !is_secret_name(w),
                "{w}"
            );
        }
        assert!(!may_name_a_secret("PATH=/usr/local/bin:/usr/bin"));
        assert_eq!(
            redact_text("GET /health: 200 in 3 ms").0,
            "GET /health: 200 in 3 ms"
        );
    }

    #[test]
    fn env_values_of_secret_keys_are_withheld() {
        let cases = [
            ("DB_PASSWORD=hunter2", "DB_PASSWORD=[REDACTED]", 1),
            ("API_TOKEN=abc", "API_TOKEN=[REDACTED]", 1),
            (
                "traefik.http.middlewares.a.basicauth.users=admin:$apr1$x$y",
                "traefik.http.middlewares.a.basicauth.users=[REDACTED]",
                1,
            ),
            (
                "aws_secret_access_key=zzz",
                "aws_secret_access_key=[REDACTED]",
                1,
            ),
            (
                "DATABASE_URL=postgres://app:s3cret@db:5432/app",
                "DATABASE_URL=postgres://app:[REDACTED]@db:5432/app",
                1,
            ),
            ("PORT=8080", "PORT=8080", 0),
            ("EMPTY_SECRET=", "EMPTY_SECRET=", 0),
        ];
        for (input, want, n) in cases {
            assert_eq!(redact_env(input), (want.to_string(), n), "{input}");
        }
    }

    #[test]
    fn log_secrets_are_redacted() {
        let cases = [
            (
                "Authorization: Bearer eyJhbGciOi.abc",
                "Authorization: Bearer [REDACTED]",
            ),
            (
                "connecting to mysql://root:pw@db:3306/x",
                "connecting to mysql://root:[REDACTED]@db:3306/x",
            ),
            ("password=hunter2 user=bob", "password=[REDACTED] user=bob"),
            (
                "aws key AKIAIOSFODNN7EXAMPLE used",
                "aws key [REDACTED] used",
            ),
            (
                "token: ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                "token: [REDACTED]",
            ),
            ("-----BEGIN RSA PRIVATE KEY-----", "[REDACTED PRIVATE KEY]"),
            (
                "connection refused to db:5432",
                "connection refused to db:5432",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(redact_text(input).0, want, "{input}");
        }
        assert!(redact_text("password=a secret=b").1 >= 2);
    }

    #[test]
    fn controls_and_bad_utf8_are_neutralised() {
        assert_eq!(neutralise_controls("\x1b[31mred\x1b[0m"), "red");
        assert_eq!(
            neutralise_controls("a\x07b\rc\td"),
            "a\u{FFFD}b\u{FFFD}c\td"
        );
        assert_eq!(neutralise_controls("\x1b]0;title\x07x"), "x");
        let mut shaper = LogShaper::default();
        let lines: Vec<String> = [
            "key:",
            "-----BEGIN PRIVATE KEY-----",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            "-----END PRIVATE KEY-----",
            "after",
        ]
        .iter()
        .map(|l| shaper.line(l.as_bytes()))
        .collect();
        assert_eq!(
            lines,
            [
                "key:",
                "[REDACTED PRIVATE KEY]",
                "[REDACTED]",
                "[REDACTED]",
                "after"
            ]
        );
        assert_eq!(shaper.redactions(), 3);
        let cut: [&[u8]; 3] = [
            b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
            b"-----END PRIVATE KEY-----",
            b"after",
        ];
        let mut shaper = LogShaper::for_window(cut);
        let lines: Vec<String> = cut.iter().map(|l| shaper.line(l)).collect();
        assert_eq!(
            lines,
            ["[REDACTED]", "[REDACTED]", "after"],
            "a window starting inside a key"
        );
        assert_eq!(
            redact_text("k=-----BEGIN PRIVATE KEY-----MIIEvQIB-----END PRIVATE KEY----- done").0,
            "k=[REDACTED PRIVATE KEY] done"
        );
        let (line, _) = shape_log_line(b"ok \xff\xfe end\n");
        assert_eq!(line, "ok \u{FFFD}\u{FFFD} end");
        assert_eq!(
            shape_multiline("HTTP 503\r\npassword=x\n\n"),
            ("HTTP 503\npassword=[REDACTED]".to_string(), 1)
        );
    }
}
