use super::*;

fn claims() -> ApprovalClaims {
    ApprovalClaims {
        version: CLAIMS_VERSION_NO_HOST,
        approval_id: "apr-1".into(),
        request_id: "req-1".into(),
        action: WriteAction::Restart,
        container_id: "a".repeat(64),
        container_name: "backend".into(),
        plan_digest: "00".repeat(32),
        issued_at: 1,
        expires_at: 2,
        nonce: ApprovalClaims::new_nonce(),
        image_id: None,
        from_image_id: None,
        service: None,
        host: None,
        update: None,
        build: None,
    }
}

fn build_claims() -> BuildClaims {
    let commit = CommitId::parse(&"9c2d1e0a".repeat(5)).unwrap();
    BuildClaims {
        context: "api".into(),
        tag: build_tag("api", &commit),
        commit,
        tree: "ab".repeat(20),
        dockerfile: "Dockerfile".into(),
        subject: Some("fix the port".into()),
        author: None,
    }
}

#[test]
fn a_build_names_its_source_and_nothing_else() {
    let mut c = claims();
    c.action = WriteAction::Build;
    assert!(ApprovalClaims::decode(&c.encode()).is_err(), "no source");
    c.build = Some(build_claims());
    let decoded = ApprovalClaims::decode(&c.encode()).expect("a build");
    assert_eq!(
        decoded.build.as_ref().map(|b| b.tag.as_str()),
        Some("drydock/api:9c2d1e0a9c2d")
    );
    for (what, edit) in [
        (
            "an image",
            Box::new(|c: &mut ApprovalClaims| {
                c.from_image_id = Some(format!("sha256:{}", "a".repeat(64)))
            }) as Box<dyn Fn(&mut ApprovalClaims)>,
        ),
        (
            "another tag",
            Box::new(|c: &mut ApprovalClaims| {
                c.build.as_mut().unwrap().tag = "shop/api:latest".into()
            }),
        ),
        (
            "a path out",
            Box::new(|c: &mut ApprovalClaims| {
                c.build.as_mut().unwrap().dockerfile = "../Dockerfile".into()
            }),
        ),
        (
            "a short tree",
            Box::new(|c: &mut ApprovalClaims| c.build.as_mut().unwrap().tree = "abc".into()),
        ),
        (
            "a bad context",
            Box::new(|c: &mut ApprovalClaims| c.build.as_mut().unwrap().context = "API!".into()),
        ),
        (
            "on a restart",
            Box::new(|c: &mut ApprovalClaims| c.action = WriteAction::Restart),
        ),
    ] {
        let mut bad = c.clone();
        edit(&mut bad);
        assert!(ApprovalClaims::decode(&bad.encode()).is_err(), "{what}");
    }
    // A short commit does not decode: a build names its source in full.
    let text = String::from_utf8(c.encode())
        .unwrap()
        .replace(&"9c2d1e0a".repeat(5), "9c2d1e0");
    assert!(ApprovalClaims::decode(text.as_bytes()).is_err());
}

#[test]
fn an_update_to_a_built_image_names_its_source_and_the_image_it_runs() {
    let mut c = claims();
    c.action = WriteAction::Update;
    c.build = Some(build_claims());
    assert!(
        ApprovalClaims::decode(&c.encode()).is_err(),
        "no from_image_id"
    );
    c.from_image_id = Some(format!("sha256:{}", "b".repeat(64)));
    ApprovalClaims::decode(&c.encode()).expect("an update to a built image");
    c.update = Some(UpdateClaims {
        reference: "r:1".into(),
        digest: format!("sha256:{}", "c".repeat(64)),
        from_version: None,
        to_version: None,
        to_tag: None,
    });
    assert!(
        ApprovalClaims::decode(&c.encode()).is_err(),
        "a registry's and a build's at once"
    );
}

#[test]
fn revisions_are_plain_names() {
    for ok in ["HEAD", "main", "v1.2.3", "release/7", "9c2d1e0"] {
        assert!(is_revision(ok), "{ok}");
    }
    for bad in [
        "", "-n", ".x", "a..b", "a b", "x@{1}", "x^", "x~1", "x:y", "/x", "x/",
    ] {
        assert!(!is_revision(bad), "{bad}");
    }
}

#[test]
fn an_update_names_its_reference_digest_and_current_image_only() {
    let mut c = claims();
    c.action = WriteAction::Update;
    c.from_image_id = Some(format!("sha256:{}", "1".repeat(64)));
    c.update = Some(UpdateClaims {
        reference: "127.0.0.1:5000/shop/api:stable".into(),
        digest: format!("sha256:{}", "2".repeat(64)),
        from_version: Some("1.4.2".into()),
        to_version: Some("1.5.0".into()),
        to_tag: Some("1.5.0".into()),
    });
    assert_eq!(ApprovalClaims::decode(&c.encode()), Ok(c.clone()));
    let refused = |c: &ApprovalClaims| {
        matches!(
            ApprovalClaims::decode(&c.encode()),
            Err(ApprovalFormatError::Malformed(_))
        )
    };
    let mut no_update = c.clone();
    no_update.update = None;
    assert!(refused(&no_update));
    let mut bad_digest = c.clone();
    if let Some(u) = bad_digest.update.as_mut() {
        u.digest = "latest".into();
    }
    assert!(refused(&bad_digest));
    let mut no_from = c.clone();
    no_from.from_image_id = None;
    assert!(refused(&no_from));
    let mut with_image = c.clone();
    with_image.image_id = Some(format!("sha256:{}", "3".repeat(64)));
    assert!(refused(&with_image));
    let mut restart_with_update = c.clone();
    restart_with_update.action = WriteAction::Restart;
    restart_with_update.from_image_id = None;
    assert!(refused(&restart_with_update));
}

#[test]
fn service_claims_name_the_service_and_no_container() {
    let service = ServiceClaims {
        id: "n3urbn38u90m0000000000000".into(),
        name: "shop_api".into(),
        version: 73,
        image: "shop/api:2".into(),
        to_image: None,
    };
    let mut c = claims();
    c.action = WriteAction::ForceUpdate;
    c.container_id.clear();
    c.container_name.clear();
    c.service = Some(service.clone());
    assert_eq!(ApprovalClaims::decode(&c.encode()), Ok(c.clone()));
    let refused = |c: &ApprovalClaims| {
        matches!(
            ApprovalClaims::decode(&c.encode()),
            Err(ApprovalFormatError::Malformed(_))
        )
    };
    let mut with_container = c.clone();
    with_container.container_id = "a".repeat(64);
    assert!(refused(&with_container));
    let mut rollback_without_image = c.clone();
    rollback_without_image.action = WriteAction::ServiceRollback;
    assert!(refused(&rollback_without_image));
    let mut bad_id = c.clone();
    bad_id.service = Some(ServiceClaims {
        id: "N3URBN38U90M0000000000000".into(),
        ..service.clone()
    });
    assert!(refused(&bad_id));
    let mut restart_of_a_service = claims();
    restart_of_a_service.service = Some(service);
    assert!(refused(&restart_of_a_service));
    let mut force_without_service = c;
    force_without_service.service = None;
    assert!(refused(&force_without_service));
}

#[test]
fn signed_claims_round_trip() {
    let key = generate_signing_key();
    let bytes = claims().encode();
    let sig = sign(&bytes, &key);
    assert_eq!(
        verify(&bytes, &sig, &key.verifying_key()),
        Ok(claims_with_nonce(&bytes))
    );
}

fn claims_with_nonce(bytes: &[u8]) -> ApprovalClaims {
    ApprovalClaims::decode(bytes).unwrap()
}

#[test]
fn tampered_bytes_or_other_key_fail() {
    let key = generate_signing_key();
    let bytes = claims().encode();
    let sig = sign(&bytes, &key);
    let mut tampered = bytes.clone();
    let pos = tampered.len() - 3;
    tampered[pos] ^= 1;
    assert_eq!(
        verify(&tampered, &sig, &key.verifying_key()),
        Err(ApprovalFormatError::BadSignature)
    );
    let other = generate_signing_key();
    assert_eq!(
        verify(&bytes, &sig, &other.verifying_key()),
        Err(ApprovalFormatError::BadSignature)
    );
    assert_eq!(
        verify(&bytes, &sig[..10], &key.verifying_key()),
        Err(ApprovalFormatError::SignatureLength)
    );
}

#[test]
fn signature_is_domain_separated() {
    let key = generate_signing_key();
    let bytes = claims().encode();
    let plain = key.sign(&bytes).to_bytes();
    assert_eq!(
        verify(&bytes, &plain, &key.verifying_key()),
        Err(ApprovalFormatError::BadSignature)
    );
}

#[test]
fn unknown_fields_and_versions_are_rejected() {
    let mut value = serde_json::to_value(claims()).unwrap();
    value["extra"] = serde_json::json!(1);
    assert!(matches!(
        ApprovalClaims::decode(&serde_json::to_vec(&value).unwrap()),
        Err(ApprovalFormatError::Malformed(_))
    ));
    // Version 1 names no host, version 2 a well-formed one, no other.
    for (version, host, ok) in [
        (1, None, true),
        (2, Some("host-b"), true),
        (2, Some("db.internal"), true),
        (1, Some("host-b"), false),
        (2, None, false),
        (2, Some(""), false),
        (2, Some("Host-B"), false),
        (2, Some("-b"), false),
        (2, Some("a/b"), false),
        (3, Some("host-b"), false),
        (0, None, false),
    ] {
        let mut c = claims();
        c.version = version;
        c.host = host.map(str::to_string);
        assert_eq!(
            ApprovalClaims::decode(&c.encode()).is_ok(),
            ok,
            "version {version}, host {host:?}"
        );
        if ok {
            assert_eq!(ApprovalClaims::version_for(host), version);
        }
    }
    let mut c = claims();
    c.version = 3;
    assert_eq!(
        ApprovalClaims::decode(&c.encode()),
        Err(ApprovalFormatError::Version(3))
    );
    assert_eq!(
        ApprovalClaims::decode(&vec![b' '; MAX_CLAIMS_BYTES + 1]),
        Err(ApprovalFormatError::TooLarge(MAX_CLAIMS_BYTES + 1))
    );
}

#[test]
fn keys_round_trip_through_text() {
    let key = generate_signing_key();
    let public = format_public_key(&key.verifying_key());
    assert_eq!(parse_public_key(&public).unwrap(), key.verifying_key());
    assert_eq!(
        parse_secret_key(&format_secret_key(&key))
            .unwrap()
            .to_bytes(),
        key.to_bytes()
    );
    assert!(parse_public_key("ed25519:not-base64!").is_err());
    assert!(parse_public_key("rsa:AAAA").is_err());
}
