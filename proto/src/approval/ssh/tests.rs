use super::*;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING};

const CLAIMS: &[u8] = b"{\"action\":\"restart\"}";

/// An approver key as an ssh-agent (or a security key behind it) holds it:
/// its public key and a signer of the agent's answer.
struct Held {
    public: SshPublicKey,
    sign: AgentSign,
}

/// The agent's answer to a signing request for some data.
type AgentSign = Box<dyn Fn(&[u8]) -> Vec<u8>>;

fn ed25519(sk_flags: Option<u8>) -> Held {
    let secret = ed25519_dalek::SigningKey::from_bytes(&rand::random::<[u8; 32]>());
    let kind = if sk_flags.is_some() {
        SshKind::SkEd25519
    } else {
        SshKind::Ed25519
    };
    let mut blob = Vec::new();
    put_string(&mut blob, kind.name().as_bytes());
    put_string(&mut blob, secret.verifying_key().as_bytes());
    if sk_flags.is_some() {
        put_string(&mut blob, b"ssh:");
    }
    let public = SshPublicKey::from_blob(&blob).expect("a key");
    let sign = Box::new(move |data: &[u8]| {
        let mut out = Vec::new();
        put_string(&mut out, kind.name().as_bytes());
        match sk_flags {
            None => {
                use ed25519_dalek::Signer as _;
                put_string(&mut out, &secret.sign(data).to_bytes());
            }
            Some(flags) => {
                use ed25519_dalek::Signer as _;
                let framed = sk_frame(flags, 7, data);
                put_string(&mut out, &secret.sign(&framed).to_bytes());
                out.push(flags);
                out.extend_from_slice(&7u32.to_be_bytes());
            }
        }
        out
    });
    Held { public, sign }
}

/// What a security key signs for `data`.
fn sk_frame(flags: u8, counter: u32, data: &[u8]) -> Vec<u8> {
    let mut framed = digest::digest(&digest::SHA256, b"ssh:").as_ref().to_vec();
    framed.push(flags);
    framed.extend_from_slice(&counter.to_be_bytes());
    framed.extend_from_slice(digest::digest(&digest::SHA256, data).as_ref());
    framed
}

fn p256(sk_flags: Option<u8>) -> Held {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("key");
    let kind = if sk_flags.is_some() {
        SshKind::SkEcdsaP256
    } else {
        SshKind::EcdsaP256
    };
    let mut blob = Vec::new();
    put_string(&mut blob, kind.name().as_bytes());
    put_string(&mut blob, b"nistp256");
    put_string(&mut blob, pair.public_key().as_ref());
    if sk_flags.is_some() {
        put_string(&mut blob, b"ssh:");
    }
    let public = SshPublicKey::from_blob(&blob).expect("a key");
    let sign = Box::new(move |data: &[u8]| {
        let signed = match sk_flags {
            Some(flags) => sk_frame(flags, 1, data),
            None => data.to_vec(),
        };
        let fixed = pair.sign(&SystemRandom::new(), &signed).expect("sign");
        let mut mpints = Vec::new();
        for half in fixed.as_ref().chunks(32) {
            // An mpint: no leading zeros, a zero byte before a high bit.
            let trimmed: Vec<u8> = half.iter().copied().skip_while(|b| *b == 0).collect();
            let mut n = Vec::new();
            if trimmed.first().is_some_and(|b| b & 0x80 != 0) {
                n.push(0);
            }
            n.extend_from_slice(&trimmed);
            put_string(&mut mpints, &n);
        }
        let mut out = Vec::new();
        put_string(&mut out, kind.name().as_bytes());
        put_string(&mut out, &mpints);
        if let Some(flags) = sk_flags {
            out.push(flags);
            out.extend_from_slice(&1u32.to_be_bytes());
        }
        out
    });
    Held { public, sign }
}

fn sshsig(held: &Held, message: &[u8]) -> Vec<u8> {
    wrap(&held.public, &(held.sign)(&signed_data(message)))
}

#[test]
fn every_kind_verifies_over_the_claims_and_nothing_else() {
    for held in [
        ed25519(None),
        ed25519(Some(0x01)),
        p256(None),
        p256(Some(0x05)),
    ] {
        let kind = held.public.kind.name();
        let sig = sshsig(&held, CLAIMS);
        verify(&sig, CLAIMS, &held.public).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert!(
            verify(&sig, b"{\"action\":\"stop\"}", &held.public).is_err(),
            "{kind}"
        );
        let line = held.public.to_line();
        assert_eq!(
            SshPublicKey::parse(&format!("{line} ops@laptop")),
            Ok(held.public.clone())
        );
        // Another key of the same kind: refused.
        let other = match held.public.kind {
            SshKind::Ed25519 => ed25519(None),
            SshKind::SkEd25519 => ed25519(Some(1)),
            SshKind::EcdsaP256 => p256(None),
            SshKind::SkEcdsaP256 => p256(Some(1)),
        };
        let e = verify(&sig, CLAIMS, &other.public).expect_err(kind);
        assert!(e.0.contains("another key"), "{kind}: {e}");
        // One flipped byte of the signature: refused.
        let mut bent = sig.clone();
        let at = bent.len() - 12;
        bent[at] ^= 1;
        assert!(verify(&bent, CLAIMS, &held.public).is_err(), "{kind}");
    }
}

#[test]
fn a_signature_for_another_namespace_or_untouched_key_is_refused() {
    let held = ed25519(None);
    let mut other_ns = b"SSHSIG".to_vec();
    put_string(&mut other_ns, b"git");
    put_string(&mut other_ns, b"");
    put_string(&mut other_ns, b"sha512");
    put_string(
        &mut other_ns,
        digest::digest(&digest::SHA512, CLAIMS).as_ref(),
    );
    let signature = (held.sign)(&other_ns);
    let mut blob = b"SSHSIG".to_vec();
    blob.extend_from_slice(&1u32.to_be_bytes());
    put_string(&mut blob, &held.public.blob);
    put_string(&mut blob, b"git");
    put_string(&mut blob, b"");
    put_string(&mut blob, b"sha512");
    put_string(&mut blob, &signature);
    let e = verify(&blob, CLAIMS, &held.public).expect_err("namespace git");
    assert!(e.0.contains("namespace `git`"), "{e}");

    for untouched in [ed25519(Some(0x04)), p256(Some(0x00))] {
        let e = verify(&sshsig(&untouched, CLAIMS), CLAIMS, &untouched.public)
            .expect_err("no user presence");
        assert!(e.0.contains("not touched"), "{e}");
    }
}

#[test]
fn keys_and_blobs_that_are_not_what_they_say_are_refused() {
    for (line, why) in [
        (
            "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQ== x",
            "not supported",
        ),
        ("ssh-ed25519", "not `TYPE BASE64"),
        ("ssh-ed25519 !!!", "not base64"),
    ] {
        let e = SshPublicKey::parse(line).expect_err(line);
        assert!(e.0.contains(why), "{line}: {e}");
    }
    let mut rsa = Vec::new();
    put_string(&mut rsa, b"ssh-rsa");
    put_string(&mut rsa, &[1, 0, 1]);
    assert!(SshPublicKey::from_blob(&rsa)
        .expect_err("rsa")
        .0
        .contains("not supported"));
    let held = ed25519(None);
    let relabelled = format!(
        "ecdsa-sha2-nistp256 {}",
        held.public
            .to_line()
            .split_once(' ')
            .map(|x| x.1)
            .unwrap_or_default()
    );
    assert!(SshPublicKey::parse(&relabelled).is_err());
    for blob in [&b"SSHSIG"[..], b"not at all", &[0u8; 5000][..]] {
        assert!(verify(blob, CLAIMS, &held.public).is_err());
    }
}
