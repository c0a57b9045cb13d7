use super::*;
use drydock_proto::approval::{generate_signing_key, CLAIMS_VERSION, CLAIMS_VERSION_NO_HOST};

#[test]
fn approvals_bind_the_host_they_were_made_for() {
    let key = generate_signing_key();
    let approvers = [ApproverConfig {
        id: "alice".into(),
        public_key: approval::format_public_key(&key.verifying_key()),
    }];
    let verifier = |name: Option<&str>, require: bool| {
        ApprovalVerifier::new(&approvers, Duration::from_secs(3600)).with_host(HostBinding {
            name: name.map(str::to_string),
            require,
        })
    };
    // (executor's name, require, the claims' host, refused with)
    type Case<'a> = (Option<&'a str>, bool, Option<&'a str>, Option<&'a str>);
    let cases: &[Case<'_>] = &[
        (Some("host-b"), false, Some("host-b"), None),
        (Some("host-b"), true, Some("host-b"), None),
        (Some("host-b"), false, None, None),
        (None, false, None, None),
        (
            Some("host-b"),
            false,
            Some("host-a"),
            Some("made for host `host-a`, but this executor is `host-b`"),
        ),
        (Some("host-b"), true, None, Some("names no host")),
        (None, false, Some("host-a"), Some("not named")),
    ];
    for (name, require, host, refused) in cases {
        let mut c = claims();
        c.host = host.map(str::to_string);
        c.version = ApprovalClaims::version_for(*host);
        let bytes = c.encode();
        let sig = approval::sign(&bytes, &key);
        let got = verifier(*name, *require).verify(
            Some(ApprovalInput {
                claims: &bytes,
                signature: &sig,
                key_id: "alice",
                cosigners: vec![],
            }),
            &ContainerWrite::Restart,
            &target(),
            "req",
            NOW,
        );
        match refused {
            None => assert!(got.is_ok(), "{name:?} {require} {host:?}: {got:?}"),
            Some(says) => {
                let err = got.unwrap_err().to_string();
                assert!(err.contains(says), "{name:?} {require} {host:?}: {err}");
            }
        }
    }
    assert_eq!(c_version(), CLAIMS_VERSION);
}

/// A verifier that trusts `key` as the approver `alice`.
fn alice(key: &ed25519_dalek::SigningKey) -> ApprovalVerifier {
    ApprovalVerifier::new(
        &[ApproverConfig {
            id: "alice".into(),
            public_key: approval::format_public_key(&key.verifying_key()),
        }],
        Duration::from_secs(3600),
    )
}

fn c_version() -> u32 {
    ApprovalClaims::version_for(Some("host-b"))
}

#[test]
fn the_window_is_checked_without_wrapping() {
    let max = std::time::Duration::from_secs(3600);
    let now = NOW;
    assert!(check_window(now, now + 600, now, max).is_ok());
    // issued_at = expires_at − 2^63: the subtraction would wrap to a
    // negative lifetime and pass a `lifetime > max` test.
    let expires = now + 300;
    let issued = expires.wrapping_sub(i64::MIN);
    assert!(issued < 0, "{issued}");
    let err = check_window(issued, expires, now, max).unwrap_err();
    assert!(err.to_string().contains("exceeds"), "{err}");
    for (issued, expires) in [
        (i64::MIN, i64::MAX),
        (i64::MIN, now + 10),
        (now + 20, now + 10),
        (now + 10, now + 10),
        (i64::MAX, i64::MIN),
        (now - 7200, now + 10),
        (now + 3_000_000_000, now + 3_000_000_100),
    ] {
        assert!(
            check_window(issued, expires, now, max).is_err(),
            "{issued}..{expires} accepted"
        );
    }
    let err = check_window(now - 5000, now + 10, now, max).unwrap_err();
    assert!(err.to_string().contains("exceeds"), "{err}");
}

const NOW: i64 = 1_800_000_000;

fn target() -> ResolvedTarget {
    ResolvedTarget {
        id: "c".repeat(64),
        name: "/backend".into(),
        ..Default::default()
    }
}

fn claims() -> ApprovalClaims {
    ApprovalClaims {
        version: CLAIMS_VERSION_NO_HOST,
        approval_id: "apr".into(),
        request_id: "req".into(),
        action: WriteAction::Restart,
        container_id: "c".repeat(64),
        container_name: "/backend".into(),
        plan_digest: "d".into(),
        issued_at: NOW - 10,
        expires_at: NOW + 600,
        nonce: "n".into(),
        image_id: None,
        from_image_id: None,
        service: None,
        host: None,
        update: None,
        build: None,
    }
}

#[test]
fn binding_table() {
    let key = generate_signing_key();
    let other_key = generate_signing_key();
    let verifier = alice(&key);
    type Mutate = fn(&mut ApprovalClaims);
    let cases: Vec<(&str, Mutate, bool, Option<&str>)> = vec![
        ("valid", |_| {}, true, None),
        (
            "other action",
            |c| c.action = WriteAction::Start,
            true,
            Some("for action start"),
        ),
        (
            "other container",
            |c| c.container_id = "d".repeat(64),
            true,
            Some("for container"),
        ),
        (
            "harmless name on another id",
            |c| c.container_name = "frontend".into(),
            true,
            Some("names container `frontend`"),
        ),
        (
            "other request",
            |c| c.request_id = "other".into(),
            true,
            Some("for request other"),
        ),
        ("expired", |c| c.expires_at = NOW - 1, true, Some("expired")),
        (
            "from the future",
            |c| {
                c.issued_at = NOW + 3600;
                c.expires_at = NOW + 3900;
            },
            true,
            Some("not valid before"),
        ),
        (
            "too long",
            |c| c.expires_at = NOW + 86_400,
            true,
            Some("exceeds"),
        ),
        ("forged", |_| {}, false, Some("signature does not verify")),
    ];
    for (name, mutate, good_key, want_err) in cases {
        let mut c = claims();
        mutate(&mut c);
        let bytes = c.encode();
        let sig = approval::sign(&bytes, if good_key { &key } else { &other_key });
        let got = verifier.verify(
            Some(ApprovalInput {
                claims: &bytes,
                signature: &sig,
                key_id: "alice",
                cosigners: vec![],
            }),
            &ContainerWrite::Restart,
            &target(),
            "req",
            NOW,
        );
        match want_err {
            None => assert!(got.is_ok(), "{name}: {got:?}"),
            Some(needle) => {
                let err = got.unwrap_err().to_string();
                assert!(err.contains(needle), "{name}: {err}");
            }
        }
    }
    let bytes = claims().encode();
    let sig = approval::sign(&bytes, &key);
    let unknown = verifier.verify(
        Some(ApprovalInput {
            claims: &bytes,
            signature: &sig,
            key_id: "mallory",
            cosigners: vec![],
        }),
        &ContainerWrite::Restart,
        &target(),
        "req",
        NOW,
    );
    assert_eq!(
        unknown.unwrap_err(),
        ApprovalError::UnknownKey {
            key_id: "mallory".into()
        }
    );
    assert_eq!(
        verifier
            .verify(None, &ContainerWrite::Restart, &target(), "req", NOW)
            .unwrap_err(),
        ApprovalError::Missing { action: "restart" }
    );
}

#[test]
fn service_binding_table() {
    let key = generate_signing_key();
    let verifier = alice(&key);
    let service = ResolvedService {
        id: "n3urbn38u90m4jz0gvcm4t7ha".into(),
        name: "shop_api".into(),
        version: 73,
        image: "shop/api:2".into(),
        previous_image: Some("shop/api:1".into()),
        ..Default::default()
    };
    let signed = || {
        let mut c = claims();
        c.action = WriteAction::ServiceRollback;
        c.container_id.clear();
        c.container_name.clear();
        c.service = Some(approval::ServiceClaims {
            id: service.id.clone(),
            name: service.name.clone(),
            version: 73,
            image: "shop/api:2".into(),
            to_image: Some("shop/api:1".into()),
        });
        c
    };
    type Mutate = fn(&mut ApprovalClaims);
    let cases: Vec<(&str, Mutate, ServiceWrite, Option<&str>)> = vec![
        ("valid", |_| {}, ServiceWrite::Rollback, None),
        (
            "a force update's call",
            |_| {},
            ServiceWrite::ForceUpdate,
            Some("for action service_rollback"),
        ),
        (
            "another service",
            |c| c.service.as_mut().unwrap().id = "x".repeat(25),
            ServiceWrite::Rollback,
            Some("for service xxxxx"),
        ),
        (
            "a harmless name",
            |c| c.service.as_mut().unwrap().name = "shop_docs".into(),
            ServiceWrite::Rollback,
            Some("names service `shop_docs`"),
        ),
        (
            "a spec changed since",
            |c| c.service.as_mut().unwrap().version = 72,
            ServiceWrite::Rollback,
            Some("spec version 72"),
        ),
        (
            "another image shown",
            |c| c.service.as_mut().unwrap().image = "shop/api:3".into(),
            ServiceWrite::Rollback,
            Some("ran image shop/api:3"),
        ),
        (
            "another image to return to",
            |c| c.service.as_mut().unwrap().to_image = Some("evil/api:1".into()),
            ServiceWrite::Rollback,
            Some("returns the service to image evil/api:1"),
        ),
        (
            "another request",
            |c| c.request_id = "other".into(),
            ServiceWrite::Rollback,
            Some("for request other"),
        ),
    ];
    for (name, mutate, action, want_err) in cases {
        let mut c = signed();
        mutate(&mut c);
        let bytes = c.encode();
        let sig = approval::sign(&bytes, &key);
        let got = verifier.verify_service(
            Some(ApprovalInput {
                claims: &bytes,
                signature: &sig,
                key_id: "alice",
                cosigners: vec![],
            }),
            &action,
            &service,
            "req",
            NOW,
        );
        match want_err {
            None => assert!(got.is_ok(), "{name}: {got:?}"),
            Some(needle) => {
                let err = got.unwrap_err().to_string();
                assert!(err.contains(needle), "{name}: {err}");
            }
        }
    }
    // A service with no previous spec cannot be rolled back, whatever
    // was signed.
    let bytes = signed().encode();
    let sig = approval::sign(&bytes, &key);
    let fresh = ResolvedService {
        previous_image: None,
        ..service.clone()
    };
    let err = verifier
        .verify_service(
            Some(ApprovalInput {
                claims: &bytes,
                signature: &sig,
                key_id: "alice",
                cosigners: vec![],
            }),
            &ServiceWrite::Rollback,
            &fresh,
            "req",
            NOW,
        )
        .unwrap_err();
    assert!(err.to_string().contains("no previous spec"), "{err}");
}

#[test]
fn a_service_update_is_bound_to_the_tag_its_spec_follows_and_the_digest() {
    let key = generate_signing_key();
    let verifier = alice(&key);
    let pin = format!("sha256:{}", "1".repeat(64));
    let to = format!("sha256:{}", "2".repeat(64));
    let service = ResolvedService {
        id: "n3urbn38u90m4jz0gvcm4t7ha".into(),
        name: "shop_web".into(),
        version: 12,
        image: format!("registry.example.com/shop/web:stable@{pin}"),
        ..Default::default()
    };
    let signed = || {
        let mut c = claims();
        c.action = WriteAction::ServiceUpdate;
        c.container_id.clear();
        c.container_name.clear();
        c.service = Some(approval::ServiceClaims {
            id: service.id.clone(),
            name: service.name.clone(),
            version: 12,
            image: service.image.clone(),
            to_image: None,
        });
        c.update = Some(approval::UpdateClaims {
            reference: "registry.example.com/shop/web:stable".into(),
            digest: to.clone(),
            from_version: None,
            to_version: None,
            to_tag: None,
        });
        c
    };
    let verify = |c: &ApprovalClaims, digest: &str| {
        let bytes = c.encode();
        let sig = approval::sign(&bytes, &key);
        verifier
            .verify_service(
                Some(ApprovalInput {
                    claims: &bytes,
                    signature: &sig,
                    key_id: "alice",
                    cosigners: vec![],
                }),
                &ServiceWrite::Update {
                    digest: approval::ImageId::parse(digest).unwrap(),
                },
                &service,
                "req",
                NOW,
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    assert_eq!(verify(&signed(), &to), Ok(()));
    let err = verify(&signed(), &pin).unwrap_err();
    assert!(err.contains("for an update to sha256:2222"), "{err}");
    let mut other = signed();
    other.update.as_mut().unwrap().reference = "registry.example.com/shop/web:canary".into();
    let err = verify(&other, &to).unwrap_err();
    assert!(
        err.contains("updates the tag registry.example.com/shop/web:canary"),
        "{err}"
    );
    let mut moved = signed();
    moved.service.as_mut().unwrap().version = 11;
    assert!(verify(&moved, &to).unwrap_err().contains("spec version 11"));
    // Decoding refuses what a service update cannot name.
    let mut bad = signed();
    bad.update.as_mut().unwrap().to_tag = Some("2".into());
    assert!(verify(&bad, &to)
        .unwrap_err()
        .contains("names no image_id, from_image_id or to_tag"));
    let mut bad = signed();
    bad.update = None;
    assert!(verify(&bad, &to)
        .unwrap_err()
        .contains("names its reference and digest"));
    let mut bad = signed();
    bad.service.as_mut().unwrap().to_image = Some("x".into());
    assert!(verify(&bad, &to)
        .unwrap_err()
        .contains("names no image to return to"));
}

/// An approver whose key is in an ssh-agent: an SSHSIG over the claims
/// verifies; an Ed25519 signature in drydock's own form does not stand in
/// for it, nor does an SSHSIG by the same key over other claims.
#[test]
fn an_ssh_approver_signs_with_sshsig_only() {
    use drydock_proto::approval::ssh::{put_string, signed_data, wrap, SshPublicKey};
    use ed25519_dalek::Signer as _;
    let key = generate_signing_key();
    let mut blob = Vec::new();
    put_string(&mut blob, b"ssh-ed25519");
    put_string(&mut blob, key.verifying_key().as_bytes());
    let public = SshPublicKey::from_blob(&blob).expect("an ssh key");
    let approvers = [ApproverConfig {
        id: "alice".into(),
        public_key: format!("{} alice@laptop", public.to_line()),
    }];
    let verifier = ApprovalVerifier::new(&approvers, Duration::from_secs(3600));
    let sshsig = |bytes: &[u8]| {
        let mut sig = Vec::new();
        put_string(&mut sig, b"ssh-ed25519");
        put_string(&mut sig, &key.sign(&signed_data(bytes)).to_bytes());
        wrap(&public, &sig)
    };
    let bytes = claims().encode();
    let check = |signature: &[u8]| {
        verifier.verify(
            Some(ApprovalInput {
                claims: &bytes,
                signature,
                key_id: "alice",
                cosigners: vec![],
            }),
            &ContainerWrite::Restart,
            &target(),
            "req",
            NOW,
        )
    };
    check(&sshsig(&bytes)).expect("an SSHSIG over the claims");
    let own_form = approval::sign(&bytes, &key);
    let e = check(&own_form).expect_err("not an SSHSIG").to_string();
    assert!(e.contains("not an SSHSIG"), "{e}");
    let mut other = claims();
    other.nonce = "another".into();
    let e = check(&sshsig(&other.encode()))
        .expect_err("other claims")
        .to_string();
    assert!(e.contains("does not verify"), "{e}");
    assert_eq!(
        verifier.approver_keys(),
        vec![("alice".to_string(), public.to_line())]
    );
}

/// `approvals.required: {restart: 2}`: one signature is refused, two
/// distinct approvers over the same bytes pass (and both are the audit's
/// key id); the same approver twice, one key under two ids, an unknown
/// cosigner and a cosignature over other bytes are refused.
#[test]
fn a_quorum_counts_distinct_approvers_over_the_same_claims() {
    let (alice, bob) = (generate_signing_key(), generate_signing_key());
    let entry = |id: &str, k: &ed25519_dalek::SigningKey| ApproverConfig {
        id: id.into(),
        public_key: approval::format_public_key(&k.verifying_key()),
    };
    let approvers = [
        entry("alice", &alice),
        entry("bob", &bob),
        entry("bob-again", &bob),
    ];
    let quorum = Quorum::new(&[("restart".to_string(), 2), ("t2".to_string(), 2)].into());
    assert_eq!(quorum.required(WriteAction::Restart), 2);
    assert_eq!(quorum.required(WriteAction::Stop), 2, "by its tier");
    assert_eq!(quorum.required(WriteAction::Start), 1);
    let verifier = ApprovalVerifier::new(&approvers, Duration::from_secs(3600)).with_quorum(quorum);
    let bytes = claims().encode();
    let by_alice = approval::sign(&bytes, &alice);
    let by_bob = approval::sign(&bytes, &bob);
    let mut other = claims();
    other.nonce = "another".into();
    let bob_other = approval::sign(&other.encode(), &bob);
    let check = |cosigners: Vec<(&str, &[u8])>| {
        verifier.verify(
            Some(ApprovalInput {
                claims: &bytes,
                signature: &by_alice,
                key_id: "alice",
                cosigners,
            }),
            &ContainerWrite::Restart,
            &target(),
            "req",
            NOW,
        )
    };
    let e = check(vec![]).expect_err("one of two").to_string();
    assert!(
        e.contains("needs 2 approvers") && e.contains("alice"),
        "{e}"
    );
    let ok = check(vec![("bob", &by_bob)]).expect("two approvers");
    assert_eq!(ok.key_id, "alice,bob");
    // bob's key registered again in its OpenSSH form is still bob.
    let bob_ssh = {
        use drydock_proto::approval::ssh::{put_string, SshPublicKey};
        let mut blob = Vec::new();
        put_string(&mut blob, b"ssh-ed25519");
        put_string(&mut blob, bob.verifying_key().as_bytes());
        SshPublicKey::from_blob(&blob).expect("an ssh key")
    };
    let with_ssh = [
        entry("alice", &alice),
        entry("bob", &bob),
        ApproverConfig {
            id: "bob-ssh".into(),
            public_key: bob_ssh.to_line(),
        },
    ];
    let by_bob_ssh = {
        use drydock_proto::approval::ssh::{put_string, signed_data, wrap};
        use ed25519_dalek::Signer as _;
        let mut sig = Vec::new();
        put_string(&mut sig, b"ssh-ed25519");
        put_string(&mut sig, &bob.sign(&signed_data(&bytes)).to_bytes());
        wrap(&bob_ssh, &sig)
    };
    let e = ApprovalVerifier::new(&with_ssh, Duration::from_secs(3600))
        .with_quorum(Quorum::new(&[("restart".to_string(), 2)].into()))
        .verify(
            Some(ApprovalInput {
                claims: &bytes,
                signature: &by_bob,
                key_id: "bob",
                cosigners: vec![("bob-ssh", &by_bob_ssh)],
            }),
            &ContainerWrite::Restart,
            &target(),
            "req",
            NOW,
        )
        .expect_err("one key in two forms")
        .to_string();
    assert!(e.contains("signed twice"), "{e}");
    for (cosigners, says) in [
        (vec![("alice", &by_alice[..])], "signed twice"),
        (
            vec![("bob", &by_bob[..]), ("bob-again", &by_bob[..])],
            "signed twice",
        ),
        (vec![("carol", &by_bob[..])], "unknown key"),
        (vec![("bob", &bob_other[..])], "does not verify"),
    ] {
        let e = check(cosigners).expect_err(says).to_string();
        assert!(e.contains(says), "{says}: {e}");
    }
}
