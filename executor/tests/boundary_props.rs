//! Generated inputs against the executor's other gates (property tests on
//! stable Rust): approval decoding and verification, the validity window,
//! policy matching, container-ref and request-id validation, and config
//! parsing. Each gate is compared with an oracle written here
//! independently (i128 arithmetic, plain string tests), so a property fails
//! when the gate lets through what it should refuse, or the reverse, and
//! whenever it panics.
//!
//! `PROPTEST_CASES` sets the cases per property (256 in `cargo test`);
//! `scripts/fuzz.sh` runs each for 10^6. Seeds: `fuzz-seeds/` and the
//! checked-in `*.proptest-regressions`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use drydock_executor::approval::{
    check_window, issued_after_restore, ApprovalInput, ApprovalVerifier, HostBinding,
};
use drydock_executor::config::{ApproverConfig, Config, TargetsConfig};
use drydock_executor::policy::{Policy, ResolvedTarget, COMPOSE_PROJECT_LABEL, DRYDOCK_ROLE_LABEL};
use drydock_executor::service::validate::{
    validate_container_ref, validate_request_id, MAX_CONTAINER_REF_LEN, MAX_REQUEST_ID_LEN,
};
use drydock_proto::approval::{
    self, ApprovalClaims, ContainerWrite, WriteAction, MAX_CLAIMS_BYTES,
};
use ed25519_dalek::SigningKey;
use proptest::prelude::*;

const SKEW: i128 = 60;

fn key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

fn other_key() -> SigningKey {
    SigningKey::from_bytes(&[9u8; 32])
}

fn action() -> impl Strategy<Value = WriteAction> {
    prop_oneof![
        Just(WriteAction::Start),
        Just(WriteAction::Restart),
        Just(WriteAction::Stop)
    ]
}

/// Times near `now` and at the edges of i64.
fn time(now: i64) -> impl Strategy<Value = i64> {
    prop_oneof![
        (-4000i64..4000).prop_map(move |d| now + d),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0),
        any::<i64>(),
    ]
}

fn claims() -> impl Strategy<Value = ApprovalClaims> {
    (
        "[a-z0-9-]{0,20}",
        "[a-zA-Z0-9:_.-]{0,30}",
        action(),
        "[0-9a-f]{64}|\\PC{0,70}",
        "/?[a-z0-9_.-]{0,20}|\\PC{0,10}",
        "[0-9a-f]{64}",
        any::<i64>(),
        any::<i64>(),
        "[0-9a-f]{32}",
        proptest::option::of(prop_oneof![
            Just("host-a".to_string()),
            "[a-z0-9][a-z0-9.-]{0,20}"
        ]),
    )
        .prop_map(
            |(
                approval_id,
                request_id,
                action,
                container_id,
                container_name,
                plan,
                i,
                e,
                nonce,
                host,
            )| {
                ApprovalClaims {
                    version: ApprovalClaims::version_for(host.as_deref()),
                    approval_id,
                    request_id,
                    action,
                    container_id,
                    container_name,
                    plan_digest: plan,
                    issued_at: i,
                    expires_at: e,
                    nonce,
                    image_id: None,
                    from_image_id: None,
                    service: None,
                    host,
                    update: None,
                    build: None,
                }
            },
        )
}

/// The window rule, in i128 so nothing can wrap.
fn window_ok(issued: i64, expires: i64, now: i64, max: i64) -> bool {
    let (i, e, n, m) = (
        i128::from(issued),
        i128::from(expires),
        i128::from(now),
        i128::from(max),
    );
    i < e && e - i <= m && n < e && i <= n + SKEW && i >= n - m - SKEW
}

/// Docker's name grammar (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`) with an optional
/// leading `/`, bounded.
fn container_ref_ok(s: &str) -> bool {
    let body = s.strip_prefix('/').unwrap_or(s);
    let mut chars = body.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    body.len() <= MAX_CONTAINER_REF_LEN
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-')
}

/// A name glob as the operator writes them, and the oracle's reading of it.
#[derive(Debug, Clone)]
enum Glob {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Any,
}

impl Glob {
    fn pattern(&self) -> String {
        match self {
            Glob::Exact(s) => s.clone(),
            Glob::Prefix(s) => format!("{s}*"),
            Glob::Suffix(s) => format!("*{s}"),
            Glob::Any => "*".into(),
        }
    }

    fn matches(&self, name: &str) -> bool {
        match self {
            Glob::Exact(s) => name == s,
            Glob::Prefix(s) => name.starts_with(s.as_str()),
            Glob::Suffix(s) => name.ends_with(s.as_str()),
            Glob::Any => true,
        }
    }
}

fn glob() -> impl Strategy<Value = Glob> {
    prop_oneof![
        "[ab-]{1,4}".prop_map(Glob::Exact),
        "[ab-]{1,3}".prop_map(Glob::Prefix),
        "[ab-]{1,3}".prop_map(Glob::Suffix),
        Just(Glob::Any),
    ]
}

fn small_map() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(
        prop_oneof![
            Just("tier".to_string()),
            Just("team".to_string()),
            Just(COMPOSE_PROJECT_LABEL.to_string()),
            Just(DRYDOCK_ROLE_LABEL.to_string()),
        ],
        "[xy]{1,2}",
        0..4,
    )
}

/// A folder holding the seed config and the files it names, made once.
fn config_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("drydock-config-props-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("pki")).expect("mkdir");
        for f in ["executor.crt", "executor.key", "ca.crt"] {
            std::fs::write(dir.join("pki").join(f), "x").expect("write");
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            dir.join("pki/executor.key"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        dir
    })
}

fn seed_config() -> String {
    include_str!("fuzz-seeds/executor.yaml").replace(
        "APPROVER_PUBLIC_KEY",
        &approval::format_public_key(&key().verifying_key()),
    )
}

/// Write `text` as a config file of its own and load it.
fn load(text: &str) -> Result<Config, String> {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = config_dir().join(format!("executor-{n}.yaml"));
    std::fs::write(&path, text).expect("write config");
    let loaded = Config::load(&path).map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&path);
    loaded
}

/// Lines of block YAML that start a key in a struct: inserting a sibling
/// key before them is inserting an unknown field.
fn key_lines(text: &str) -> Vec<(usize, usize)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let trimmed = l.trim_start();
            let indent = l.len() - trimmed.len();
            let is_key = trimmed.split_once(':').is_some_and(|(k, _)| {
                !k.is_empty() && k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            });
            is_key.then_some((i, indent))
        })
        .collect()
}

proptest! {
    /// Any bytes: decoding never panics, and accepts only bounded claims of
    /// this version that re-encode to claims decoding to the same value.
    #[test]
    fn approval_decoding_accepts_only_well_formed_claims(
        bytes in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..5000),
            claims().prop_map(|c| c.encode()),
            (claims(), 0usize..400, any::<u8>()).prop_map(|(c, at, b)| {
                let mut v = c.encode();
                let at = at % v.len().max(1);
                if at < v.len() { v[at] = b; }
                v
            }),
        ]
    ) {
        if let Ok(c) = ApprovalClaims::decode(&bytes) {
            prop_assert!(bytes.len() <= MAX_CLAIMS_BYTES);
            // Version 1 names no host; version 2 a well-formed one.
            prop_assert!(
                (c.version == approval::CLAIMS_VERSION_NO_HOST && c.host.is_none())
                    || (c.version == approval::CLAIMS_VERSION
                        && c.host.as_deref().is_some_and(approval::is_host_name))
            );
            prop_assert_eq!(ApprovalClaims::decode(&c.encode()).ok(), Some(c));
        }
    }

    /// Encoding then decoding gives the claims back, whatever they hold.
    #[test]
    fn approval_claims_round_trip(c in claims()) {
        prop_assert_eq!(ApprovalClaims::decode(&c.encode()), Ok(c));
    }

    /// A signature binds every byte of the claims, under this key and
    /// context only.
    #[test]
    fn approval_signature_binds_every_byte(
        c in claims(), at in any::<usize>(), flip in 1u8..=255, sig_at in 0usize..64
    ) {
        let bytes = c.encode();
        let sig = approval::sign(&bytes, &key());
        let vk = key().verifying_key();
        prop_assert_eq!(approval::verify(&bytes, &sig, &vk).ok(), Some(c));
        let mut changed = bytes.clone();
        let at = at % changed.len();
        changed[at] ^= flip;
        prop_assert!(approval::verify(&changed, &sig, &vk).is_err());
        let mut bad_sig = sig.clone();
        bad_sig[sig_at] ^= flip;
        prop_assert!(approval::verify(&bytes, &bad_sig, &vk).is_err());
        prop_assert!(approval::verify(&bytes, &sig, &other_key().verifying_key()).is_err());
        prop_assert!(approval::verify(&bytes, &sig[..63], &vk).is_err());
        let grant_sig = drydock_proto::grant::sign(&bytes, &key());
        prop_assert!(approval::verify(&bytes, &grant_sig, &vk).is_err(), "a grant signature is not an approval");
    }

    /// The validity window agrees with the i128 oracle for every triple of
    /// i64 times and any maximum lifetime. Offsets are drawn around each
    /// edge of the rule (skew, oldest issue time, lifetime, expiry) as well
    /// as across the whole range.
    #[test]
    fn approval_window_agrees_with_the_oracle(
        now in prop_oneof![Just(1_800_000_000i64), any::<i64>()],
        max in prop_oneof![0u64..200, any::<u64>()],
        issued_edge in 0usize..4, de_edge in 0usize..4,
        k in -2i64..=2, j in -2i64..=2,
        wide in any::<(i64, i64)>(),
    ) {
        let max_i = i64::try_from(max).unwrap_or(i64::MAX);
        let issued = match issued_edge {
            0 => now.wrapping_add(60).wrapping_add(k),
            1 => now.wrapping_sub(max_i.wrapping_add(60)).wrapping_add(k),
            2 => now.wrapping_add(k * 100),
            _ => wide.0,
        };
        let expires = match de_edge {
            0 => issued.wrapping_add(max_i).wrapping_add(j),
            1 => now.wrapping_add(j),
            2 => issued.wrapping_add(j),
            _ => wide.1,
        };
        let got = check_window(issued, expires, now, Duration::from_secs(max)).is_ok();
        prop_assert_eq!(got, window_ok(issued, expires, now, max_i), "issued {} expires {} now {} max {}", issued, expires, now, max);
    }

    /// After a restore, an approval is accepted exactly when it is valid now
    /// and could not have been accepted at any moment up to the restore
    /// (so the store the restore replaced cannot have spent it, whatever
    /// its dates): the executor's gate (`check_window` and then
    /// `issued_after_restore`, as the write path runs them) against an
    /// oracle that tries every second before the restore.
    #[test]
    fn after_a_restore_only_approvals_unusable_before_it_pass(
        restored_at in prop_oneof![Just(1_800_000_000i64), 1_000i64..2_000_000_000],
        issued_off in -400i64..400,
        lifetime in prop_oneof![1i64..700, -5i64..=0],
        later in 0i64..900,
        max in 1i64..600,
    ) {
        let issued = restored_at + issued_off;
        let expires = issued + lifetime;
        let now = restored_at + later;
        let got = check_window(issued, expires, now, Duration::from_secs(max as u64)).is_ok()
            && issued_after_restore(issued, restored_at);
        // Every second at which the window could have held, up to the
        // restore: no earlier than `issued - skew`, nothing earlier counts.
        let usable_before = (issued - 2 * SKEW as i64 - max - 5..=restored_at)
            .any(|t| window_ok(issued, expires, t, max));
        let expected = window_ok(issued, expires, now, max) && !usable_before;
        prop_assert_eq!(got, expected, "issued {} expires {} now {} restored {} max {}", issued, expires, now, restored_at, max);
    }

    /// The whole verifier: an approval passes exactly when it is signed by
    /// the configured key over these bytes, for this action, container id
    /// and name, request, and inside its window. Each case starts from a
    /// valid approval and changes at most one thing (`change` 0 changes
    /// nothing), so accepting and refusing are both exercised.
    #[test]
    fn approval_verification_agrees_with_the_oracle(
        mut c in claims(),
        change in 0usize..9,
        offset in -120i64..=0,
        lifetime in 1i64..=3600,
        called_other in action(),
        issued in time(1_800_000_000),
        expires in time(1_800_000_000),
        exec_host in proptest::option::of(prop_oneof![Just("host-a"), Just("host-b")]),
        require_host in any::<bool>(),
    ) {
        let now = 1_800_000_000i64;
        c.issued_at = now + offset;
        c.expires_at = (now + offset + lifetime).max(now + 1);
        if c.expires_at - c.issued_at > 3600 {
            c.expires_at = c.issued_at + 3600;
        }
        let mut called = c.action;
        let mut target = ResolvedTarget {
            id: c.container_id.clone(),
            name: format!("/{}", c.container_name.trim_start_matches('/')),
            labels: BTreeMap::new(),
            stop_timeout_secs: None,
            image_id: String::new(),
            image_ref: String::new(),
        };
        let mut request = c.request_id.clone();
        let (mut signer, mut key_id) = (key(), "op");
        match change {
            1 => signer = other_key(),
            2 => key_id = "someone",
            3 => called = called_other,
            4 => target.id = "e".repeat(64),
            5 => target.name = "/shop-web-1".into(),
            6 => request = "req-other".into(),
            7 => { c.issued_at = issued; c.expires_at = expires; }
            8 => c.container_name = format!("{}x", c.container_name),
            _ => {}
        }
        let verifier = ApprovalVerifier::new(
            &[ApproverConfig { id: "op".into(), public_key: approval::format_public_key(&key().verifying_key()) }],
            Duration::from_secs(3600),
        )
        .with_host(HostBinding { name: exec_host.map(str::to_string), require: require_host });
        let bytes = c.encode();
        let sig = approval::sign(&bytes, &signer);
        let write = match called {
            WriteAction::Start => ContainerWrite::Start,
            WriteAction::Restart => ContainerWrite::Restart,
            _ => ContainerWrite::Stop,
        };
        let got = verifier.verify(
            Some(ApprovalInput { claims: &bytes, signature: &sig, key_id, cosigners: vec![] }),
            &write,
            &target,
            &request,
            now,
        );
        let expected = key_id == "op"
            && signer.verifying_key() == key().verifying_key()
            && c.action == called
            && c.container_id == target.id
            && c.container_name.trim_start_matches('/') == target.name.trim_start_matches('/')
            && c.request_id == request
            && window_ok(c.issued_at, c.expires_at, now, 3600)
            // Made for this host; or for none, where the executor allows it.
            && match (c.host.as_deref(), exec_host) {
                (Some(h), Some(n)) => h == n,
                (Some(_), None) => false,
                (None, Some(_)) => !require_host,
                (None, None) => true,
            };
        prop_assert_eq!(got.is_ok(), expected, "change {}: {:?}", change, got.err());
        if change == 0 && c.host.as_deref() == exec_host && (c.host.is_some() || !require_host) {
            prop_assert!(expected, "an unchanged approval is valid");
        }
    }

    /// Policy matching agrees with the oracle; drydock's own containers are
    /// never in scope, whatever the selectors say.
    #[test]
    fn policy_matching_agrees_with_the_oracle(
        globs in proptest::collection::vec(glob(), 0..3),
        allow_labels in small_map(),
        projects in proptest::collection::vec("[xy]{1,2}", 0..2),
        slash in any::<bool>(),
        name in "[ab-]{0,5}",
        labels in small_map(),
    ) {
        let targets = TargetsConfig {
            allow_names: globs.iter().map(Glob::pattern).collect(),
            allow_labels: allow_labels.clone(),
            allow_compose_projects: projects.clone(),
            services: None,
        };
        let policy = Policy::new(targets, Default::default());
        let shown = if slash { format!("/{name}") } else { name.clone() };
        let got = policy.target_allowed(&shown, &labels);
        // No selector at all: no container (the config refuses it, and
        // the policy fails closed if it ever met one).
        let any_selector = !globs.is_empty() || !allow_labels.is_empty() || !projects.is_empty();
        let expected = !labels.contains_key(DRYDOCK_ROLE_LABEL)
            && any_selector
            && (globs.is_empty() || globs.iter().any(|g| g.matches(&name)))
            && allow_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && (projects.is_empty() || labels.get(COMPOSE_PROJECT_LABEL).is_some_and(|p| projects.contains(p)));
        prop_assert_eq!(got, expected, "globs {:?} name {:?}", targets_patterns(&globs), shown);
        let target = ResolvedTarget { id: "f".repeat(64), name: shown, labels, stop_timeout_secs: None, image_id: String::new(), image_ref: String::new() };
        prop_assert_eq!(policy.permit_read(&target).is_ok(), expected);
        prop_assert_eq!(policy.permit_write(&ContainerWrite::Restart, &target).is_ok(), expected);
    }

    /// Pathological globs against long names finish (the fuzz script times
    /// this target) and agree with the prefix/suffix oracle where it has one.
    #[test]
    fn glob_matching_is_bounded(
        stars in 1usize..12, name in "[a]{0,300}b?",
    ) {
        let pattern = format!("{}b", "a*".repeat(stars));
        let targets = TargetsConfig { allow_names: vec![pattern], ..Default::default() };
        let policy = Policy::new(targets, Default::default());
        let got = policy.target_allowed(&name, &BTreeMap::new());
        let expected = name.ends_with('b') && name.len() > stars;
        prop_assert_eq!(got, expected);
    }

    /// Container refs: exactly Docker's name grammar, bounded; never a path,
    /// an option, whitespace or a control character.
    #[test]
    fn container_refs_are_exactly_docker_names(
        s in prop_oneof![
            "/?[a-zA-Z0-9][a-zA-Z0-9_.-]{0,140}",
            "\\PC{0,40}",
            any::<String>(),
            "[a-z./ -]{0,12}",
        ]
    ) {
        let ok = validate_container_ref(&s).is_ok();
        prop_assert_eq!(ok, container_ref_ok(&s), "{:?}", s);
        if ok {
            let body = s.strip_prefix('/').unwrap_or(&s);
            prop_assert!(!body.contains('/') && !body.starts_with('-') && !body.chars().any(char::is_whitespace));
        }
    }

    #[test]
    fn request_ids_are_bounded_and_plain(
        s in prop_oneof!["[A-Za-z0-9_.:-]{0,140}", any::<String>()]
    ) {
        let expected = !s.is_empty()
            && s.len() <= MAX_REQUEST_ID_LEN
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
        prop_assert_eq!(validate_request_id(&s).is_ok(), expected, "{:?}", s);
    }

    /// Config files mangled at random: loading never panics, an error says
    /// what is wrong, and a config that loads still holds the rules
    /// validation promises.
    #[test]
    fn config_parsing_never_accepts_a_broken_policy(
        cut in any::<usize>(), len in 0usize..40,
        insert in prop_oneof![
            Just(String::new()),
            "[a-z_]{1,10}: [a-z0-9\\[\\]{}\"*]{0,10}\n",
            "\\PC{0,12}",
            Just("  - ".to_string()),
            Just(": :".to_string()),
            Just("\t".to_string()),
        ],
    ) {
        let seed = seed_config();
        let mut at = cut % seed.len();
        while !seed.is_char_boundary(at) { at -= 1; }
        let mut end = (at + len).min(seed.len());
        while !seed.is_char_boundary(end) { end -= 1; }
        let text = format!("{}{}{}", &seed[..at], insert, &seed[end..]);
        match load(&text) {
            Ok(config) => {
                let targets = config.targets.as_ref().expect("a loaded config has targets");
                prop_assert!(!(targets.allow_names.is_empty() && targets.allow_labels.is_empty() && targets.allow_compose_projects.is_empty()));
                prop_assert!(!config.tls.allowed_clients.is_empty());
                prop_assert!(["unix://", "tcp://", "http://"].iter().any(|p| config.docker.endpoint.starts_with(p)));
                for a in &config.approvers {
                    prop_assert!(approval::parse_public_key(&a.public_key).is_ok(), "{:?}", a.public_key);
                }
            }
            Err(message) => prop_assert!(!message.trim().is_empty()),
        }
    }

    /// A key inserted beside any key of the file is an unknown field: it is
    /// refused by name, never ignored (a misspelt `enabled` must not leave a
    /// default in force).
    #[test]
    fn config_unknown_keys_are_refused_by_name(pick in any::<usize>(), name in "zz[a-z_]{1,12}") {
        let seed = seed_config();
        let lines: Vec<&str> = seed.lines().collect();
        let keys = key_lines(&seed);
        let (line, indent) = keys[pick % keys.len()];
        let mut out: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        out.insert(line, format!("{}{name}: 1", " ".repeat(indent)));
        let err = load(&(out.join("\n") + "\n")).err();
        prop_assert!(err.as_deref().is_some_and(|e| e.contains(&name)), "line {}: {:?}", line, err);
    }
}

fn targets_patterns(globs: &[Glob]) -> Vec<String> {
    globs.iter().map(Glob::pattern).collect()
}

#[test]
fn the_seed_config_loads() {
    let config = load(&seed_config()).expect("the seed is a valid config");
    assert_eq!(config.approvers.len(), 1);
}
