//! What a person is asked to sign, read from the claims themselves.
//!
//! Every prompt, the console's approval card and the MCP server's view of
//! an approval are built from the decoded claims the CLI is about to sign
//! (action, container name and id, expiry), never from the agent's free
//! text, so a compromised agent cannot get a signature for something other
//! than what the person saw.

use anyhow::bail;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use drydock_proto::approval::{ApprovalClaims, CLOCK_SKEW_SECS};
use drydock_vocab::ApprovalRecord;

use crate::text::{describe_time, safe, unix_now};

/// Claims are signed only if their lifetime is at most this long, whatever
/// the agent asks: the agent's own `approval_ttl` cannot be set higher.
pub const MAX_SIGNED_LIFETIME_SECS: i64 = 3600;

/// Decode what the agent asks us to sign and check it is what the record
/// says: the same approval id, and (when following one) the same request.
pub fn decode(
    approval: &ApprovalRecord,
    expected_request: Option<&str>,
) -> anyhow::Result<(ApprovalClaims, Vec<u8>)> {
    let bytes = B64
        .decode(&approval.claims)
        .map_err(|_| anyhow::anyhow!("approval {} claims are not base64", approval.id))?;
    let claims = ApprovalClaims::decode(&bytes)?;
    if let Some(req) = expected_request {
        if claims.request_id != req {
            bail!(
                "the agent asked to sign an approval for request {} while following {req}; refusing",
                claims.request_id
            );
        }
    }
    if claims.approval_id != approval.id {
        bail!(
            "approval {} carries claims for {}; refusing",
            approval.id,
            claims.approval_id
        );
    }
    Ok((claims, bytes))
}

/// Refuse to sign claims a careful person would not: an empty or inverted
/// window, a lifetime longer than any the agent may give (`max_lifetime`
/// seconds), an `issued_at` not close to now, or claims already expired.
/// The executor checks the same, but a signature that is never made cannot
/// be misused.
pub fn check_signable(c: &ApprovalClaims, now: i64, max_lifetime: i64) -> anyhow::Result<()> {
    if c.expires_at <= c.issued_at {
        bail!("refusing to sign: the claims' expiry is not after their issue time");
    }
    let lifetime = c.expires_at.checked_sub(c.issued_at);
    if lifetime.is_none_or(|l| l > max_lifetime) {
        bail!(
            "refusing to sign: the claims would stay valid for longer than {} (expires {})",
            humantime::format_duration(std::time::Duration::from_secs(max_lifetime.unsigned_abs())),
            describe_time(c.expires_at, now)
        );
    }
    if c.expires_at <= now {
        bail!(
            "refusing to sign: the approval expired {}",
            describe_time(c.expires_at, now)
        );
    }
    if c.issued_at > now.saturating_add(CLOCK_SKEW_SECS)
        || c.issued_at < now.saturating_sub(max_lifetime.saturating_add(CLOCK_SKEW_SECS))
    {
        bail!(
            "refusing to sign: the claims say they were issued {}, which is not close to now; check the agent's clock",
            describe_time(c.issued_at, now)
        );
    }
    Ok(())
}

/// What the claims act on: `("service", name, id)` for a Swarm service's
/// write, else `("container", name, id)`.
pub fn target_of(c: &ApprovalClaims) -> (&'static str, String, String) {
    match &c.service {
        Some(s) => ("service", s.name.clone(), s.id.clone()),
        None => (
            "container",
            c.container_name.trim_start_matches('/').to_string(),
            c.container_id.clone(),
        ),
    }
}

/// When the claims say they were issued and until when they hold, as a
/// person should see them beside each other: an `issued_at` ahead of this
/// machine's clock (the agent writes it; the executor and `check_signable`
/// accept up to `CLOCK_SKEW_SECS` ahead) is said in words.
pub fn describe_window(c: &ApprovalClaims, now: i64) -> String {
    let ahead = if c.issued_at > now {
        ", ahead of this machine's clock"
    } else {
        ""
    };
    format!(
        "issued {}{ahead}, expires {}",
        describe_time(c.issued_at, now),
        describe_time(c.expires_at, now)
    )
}

/// One line saying exactly what the claims authorise: for a rollback, both
/// images in full (what runs now, and what will run).
pub fn describe(c: &ApprovalClaims) -> String {
    let window = describe_window(c, unix_now());
    let on = c
        .host
        .as_ref()
        .map(|h| format!(" on host {}", safe(h)))
        .unwrap_or_default();
    if let Some(s) = &c.service {
        let version = |v: &Option<String>| {
            v.as_ref()
                .map(|v| format!(" (version {})", safe(v)))
                .unwrap_or_default()
        };
        let images = match (&s.to_image, &c.update) {
            (Some(to), _) => format!(
                " from image {} back to image {} and the rest of its previous spec (environment, mounts, secrets, resources: all the last update changed)",
                safe(&s.image),
                safe(to)
            ),
            (None, Some(u)) => format!(
                " following tag {} from image {}{} to the registry's manifest {}{} (the engine's rolling update, rolled back by the engine if a new task fails)",
                safe(&u.reference),
                safe(&s.image),
                version(&u.from_version),
                safe(&u.digest),
                version(&u.to_version)
            ),
            (None, None) => format!(" running image {}", safe(&s.image)),
        };
        return format!(
            "{} Swarm service {} (id {}, spec version {}){on}{images} — request {}, approval {}, {window}",
            c.action,
            safe(&s.name),
            safe(&s.id),
            s.version,
            safe(&c.request_id),
            safe(&c.approval_id)
        );
    }
    let built = c.build.as_ref().map(|b| {
        format!(
            "commit {} (tree {}, {}{}{}) of build context {}, tagged {}",
            b.commit,
            safe(&b.tree),
            safe(&b.dockerfile),
            b.subject
                .as_ref()
                .map(|s| format!(", \"{}\"", safe(s)))
                .unwrap_or_default(),
            b.author
                .as_ref()
                .map(|a| format!(" by {}", safe(a)))
                .unwrap_or_default(),
            safe(&b.context),
            safe(&b.tag)
        )
    });
    let images = match (&c.from_image_id, &c.image_id, &c.update) {
        _ if c.build.is_some() && c.from_image_id.is_none() => format!(
            " from {} (built from the commit's own files; the container is not touched)",
            built.unwrap_or_default()
        ),
        (Some(from), None, None) if c.build.is_some() => format!(
            " from image {} to the image built from {} (put back unless it runs healthy through the executor's window)",
            safe(from),
            built.unwrap_or_default()
        ),
        (Some(from), Some(to), _) => format!(" from image {} to image {}", safe(from), safe(to)),
        (Some(from), None, Some(u)) => format!(
            " following tag {}{} from image {}{} to the registry's manifest {}{} (put back unless it runs healthy through the executor's window)",
            safe(&u.reference),
            u.to_tag
                .as_ref()
                .map(|t| format!(" to the newer tag {}", safe(t)))
                .unwrap_or_default(),
            safe(from),
            u.from_version
                .as_ref()
                .map(|v| format!(" (version {})", safe(v)))
                .unwrap_or_default(),
            safe(&u.digest),
            u.to_version
                .as_ref()
                .map(|v| format!(" (version {})", safe(v)))
                .unwrap_or_default(),
        ),
        _ => String::new(),
    };
    format!(
        "{} container {} (id {}){on}{images} — request {}, approval {}, {window}",
        c.action,
        safe(&c.container_name),
        safe(&c.container_id),
        safe(&c.request_id),
        safe(&c.approval_id)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::LAST_WRITABLE_SECOND;
    use drydock_proto::approval::{WriteAction, CLAIMS_VERSION};
    use drydock_vocab::ApprovalStatus;

    const NOW: i64 = 1_800_000_000;

    fn claims(issued_at: i64, expires_at: i64) -> ApprovalClaims {
        ApprovalClaims {
            version: CLAIMS_VERSION,
            approval_id: "apr-1".into(),
            request_id: "req-1".into(),
            action: WriteAction::Restart,
            container_id: "c".repeat(64),
            container_name: "web".into(),
            plan_digest: "0".repeat(64),
            issued_at,
            expires_at,
            nonce: "n".into(),
            image_id: None,
            from_image_id: None,
            service: None,
            host: Some("host-a".into()),
            update: None,
            build: None,
        }
    }

    fn record(id: &str, claims: &ApprovalClaims) -> ApprovalRecord {
        ApprovalRecord {
            id: id.into(),
            request_id: claims.request_id.clone(),
            step: 0,
            status: ApprovalStatus::Pending,
            claims: B64.encode(claims.encode()),
            expires_at: claims.expires_at,
            key_id: None,
            signature: None,
            decided_at: None,
            grant_id: None,
            required: 1,
            cosignatures: Vec::new(),
        }
    }

    #[test]
    fn extreme_times_are_described_not_panicked_on() {
        for t in [
            i64::MIN,
            -1,
            0,
            LAST_WRITABLE_SECOND,
            LAST_WRITABLE_SECOND + 1,
            253_402_300_800 * 4,
            i64::MAX,
        ] {
            let text = describe(&claims(NOW, t));
            assert!(text.contains("expires"), "{text}");
            let text = describe(&claims(t, NOW));
            assert!(text.contains("issued"), "{text}");
        }
    }

    #[test]
    fn the_issue_time_is_shown_beside_the_expiry_and_said_when_ahead() {
        let text = describe_window(&claims(NOW - 30, NOW + 570), NOW);
        assert_eq!(
            text,
            "issued 2027-01-15T07:59:30Z (30 s ago), expires 2027-01-15T08:09:30Z (in 10 min)"
        );
        let ahead = describe_window(&claims(NOW + 58, NOW + 658), NOW);
        assert!(
            ahead.starts_with(
                "issued 2027-01-15T08:00:58Z (in 58 s), ahead of this machine's clock, expires"
            ),
            "{ahead}"
        );
        // Further ahead than the executor accepts: never signed.
        let err =
            check_signable(&claims(NOW + CLOCK_SKEW_SECS + 1, NOW + 600), NOW, 3600).unwrap_err();
        assert!(err.to_string().contains("not close to now"), "{err}");
        assert!(check_signable(&claims(NOW + CLOCK_SKEW_SECS, NOW + 600), NOW, 3600).is_ok());
    }

    #[test]
    fn only_sane_windows_are_signed() {
        assert!(check_signable(&claims(NOW, NOW + 600), NOW, 600).is_ok());
        let wrapped = (NOW + 300).wrapping_sub(i64::MIN);
        for (issued, expires, why) in [
            (wrapped, NOW + 300, "longer than"),
            (NOW, NOW + 601, "longer than"),
            (NOW + 10, NOW + 5, "not after"),
            (NOW + 3600, NOW + 3700, "not close to now"),
            (NOW - 700, NOW - 100, "expired"),
            (i64::MIN, i64::MAX, "longer than"),
            (NOW, i64::MAX, "longer than"),
        ] {
            let err = check_signable(&claims(issued, expires), NOW, 600).unwrap_err();
            assert!(err.to_string().contains(why), "{issued}..{expires}: {err}");
        }
    }

    #[test]
    fn a_rollback_is_described_with_both_images() {
        let mut c = claims(NOW, NOW + 600);
        c.action = WriteAction::Rollback;
        c.from_image_id = Some(format!("sha256:{}", "2".repeat(64)));
        c.image_id = Some(format!("sha256:{}", "1".repeat(64)));
        let text = describe(&c);
        assert!(
            text.starts_with(&format!(
                "rollback container web (id {}) on host host-a from image sha256:{} to image sha256:{}",
                "c".repeat(64),
                "2".repeat(64),
                "1".repeat(64)
            )),
            "{text}"
        );
    }

    #[test]
    fn a_build_and_its_update_name_the_commit_tree_and_tag() {
        let commit = drydock_proto::approval::CommitId::parse(&"9c2d1e0a".repeat(5)).unwrap();
        let mut c = claims(NOW, NOW + 600);
        c.action = WriteAction::Build;
        c.build = Some(drydock_proto::approval::BuildClaims {
            context: "api".into(),
            tag: drydock_proto::approval::build_tag("api", &commit),
            commit,
            tree: "ab".repeat(20),
            dockerfile: "Dockerfile".into(),
            subject: Some("fix the port".into()),
            author: Some("Ann <ann@example.com>".into()),
        });
        let text = describe(&c);
        for part in [
            "build container web",
            &format!("commit {}", "9c2d1e0a".repeat(5)),
            &format!("tree {}", "ab".repeat(20)),
            "\"fix the port\" by Ann",
            "tagged drydock/api:9c2d1e0a9c2d",
            "the container is not touched",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
        c.action = WriteAction::Update;
        c.from_image_id = Some(format!("sha256:{}", "2".repeat(64)));
        let text = describe(&c);
        assert!(
            text.contains(&format!(
                "from image sha256:{} to the image built from commit {}",
                "2".repeat(64),
                "9c2d1e0a".repeat(5)
            )),
            "{text}"
        );
    }

    #[test]
    fn claims_for_another_approval_or_request_are_refused() {
        let c = claims(NOW, NOW + 600);
        assert!(decode(&record("apr-1", &c), Some("req-1")).is_ok());
        let err = decode(&record("apr-2", &c), None).unwrap_err();
        assert!(
            err.to_string().contains("carries claims for apr-1"),
            "{err}"
        );
        let err = decode(&record("apr-1", &c), Some("req-9")).unwrap_err();
        assert!(err.to_string().contains("while following req-9"), "{err}");
        let mut garbled = record("apr-1", &c);
        garbled.claims = "not base64!".into();
        assert!(decode(&garbled, None).is_err());
    }
}
