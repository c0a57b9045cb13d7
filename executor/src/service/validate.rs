//! Bounded, well-formed input, checked before anything else looks at it.

use super::*;

pub const MAX_REQUEST_ID_LEN: usize = 128;

pub const MAX_CONTAINER_REF_LEN: usize = 128;

pub fn validate_request_id(id: &str) -> Result<(), ExecError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_REQUEST_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ExecError::InvalidArgument(format!(
            "request_id must be 1 to {MAX_REQUEST_ID_LEN} characters of [A-Za-z0-9-_.:]"
        )))
    }
}

/// Docker names: `[a-zA-Z0-9][a-zA-Z0-9_.-]*`, ids: hex. A leading `/` is
/// accepted because inspect output carries one.
pub fn validate_container_ref(name: &str) -> Result<(), ExecError> {
    if docker_ref_ok(name.strip_prefix('/').unwrap_or(name)) {
        Ok(())
    } else {
        Err(ExecError::InvalidArgument(format!(
            "container must be a container name or id (1 to {MAX_CONTAINER_REF_LEN} characters of [a-zA-Z0-9_.-])"
        )))
    }
}

/// A Swarm service's name or id: the same characters as a container's.
pub fn validate_service_ref(name: &str) -> Result<(), ExecError> {
    if docker_ref_ok(name) {
        Ok(())
    } else {
        Err(ExecError::InvalidArgument(format!(
            "service must be a service name or id (1 to {MAX_CONTAINER_REF_LEN} characters of [a-zA-Z0-9_.-])"
        )))
    }
}

fn docker_ref_ok(body: &str) -> bool {
    !body.is_empty()
        && body.len() <= MAX_CONTAINER_REF_LEN
        && body.as_bytes()[0].is_ascii_alphanumeric()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
}

pub(super) fn truncate_for_audit(s: &str) -> String {
    const MAX: usize = 512;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

pub(super) fn validate_filters(req: &pb::ListContainersRequest) -> Result<(), ExecError> {
    const STATUSES: &[&str] = &[
        "",
        "created",
        "running",
        "paused",
        "restarting",
        "removing",
        "exited",
        "dead",
    ];
    if !STATUSES.contains(&req.status.as_str()) {
        return Err(ExecError::InvalidArgument(format!(
            "status filter must be one of {}",
            STATUSES[1..].join(", ")
        )));
    }
    if req.name.len() > MAX_CONTAINER_REF_LEN || req.compose_project.len() > MAX_CONTAINER_REF_LEN {
        return Err(ExecError::InvalidArgument(format!(
            "name and compose_project filters are at most {MAX_CONTAINER_REF_LEN} characters"
        )));
    }
    if req.labels.len() > 16
        || req
            .labels
            .iter()
            .any(|(k, v)| k.is_empty() || k.len() > 256 || v.len() > 256)
    {
        return Err(ExecError::InvalidArgument(
            "at most 16 label filters, keys 1 to 256 and values up to 256 characters".into(),
        ));
    }
    Ok(())
}

/// A fault class as the rules engine names them: `[a-z_]`, 1 to 64.
pub(super) fn validate_fault_class(class: &str) -> Result<(), ExecError> {
    if class.is_empty()
        || class.len() > 64
        || !class.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    {
        return Err(ExecError::InvalidArgument(format!(
            "fault_class `{}` is not a class name ([a-z_], 1 to 64 characters); a grant needs the class the repair is for",
            truncate_for_audit(class)
        )));
    }
    Ok(())
}

/// `text` as a content id (`sha256:` and 64 hex digits), or the refusal
/// naming the `field`, what it must be and why.
pub(super) fn content_id(
    text: &str,
    field: &str,
    what: &str,
    why: &str,
) -> Result<ImageId, ExecError> {
    ImageId::parse(text).ok_or_else(|| {
        ExecError::InvalidArgument(format!(
            "{field} `{}` is not {what} (sha256: and 64 hex digits); {why}",
            truncate_for_audit(&redact::neutralise_controls(text))
        ))
    })
}

/// A commit a build names: a full id, never a branch or a tag.
pub(super) fn commit_argument(text: &str) -> Result<CommitId, ExecError> {
    CommitId::parse(text).ok_or_else(|| {
        ExecError::InvalidArgument(format!(
            "commit `{}` is not a full commit id (40 or 64 lowercase hex digits); a build names its source by content, never by a branch or tag",
            truncate_for_audit(&redact::neutralise_controls(text))
        ))
    })
}

/// A write that only a person's approval can authorise, as the write path
/// takes it (no grant, no fault class).
pub(super) fn approval_only(
    request_id: String,
    container: String,
    approval: Option<pb::Approval>,
) -> pb::WriteRequest {
    pb::WriteRequest {
        request_id,
        container,
        approval,
        grant: None,
        fault_class: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_validation_table() {
        for good in [
            "backend",
            "/shop-prod-backend-1",
            "a.b_c-d",
            &"f".repeat(64),
        ] {
            assert!(validate_container_ref(good).is_ok(), "{good}");
        }
        for bad in ["", "/", "-x", "a b", "a/b", "x;rm", &"a".repeat(129), "ü"] {
            assert!(validate_container_ref(bad).is_err(), "{bad}");
            assert!(validate_service_ref(bad).is_err(), "{bad}");
        }
        assert!(validate_service_ref("shop_api").is_ok());
        assert!(validate_service_ref("/shop_api").is_err());
        for good in ["req-1", "01J:abc.def_1"] {
            assert!(validate_request_id(good).is_ok(), "{good}");
        }
        for bad in ["", "a b", "x\n", &"r".repeat(129)] {
            assert!(validate_request_id(bad).is_err(), "{bad}");
        }
    }
}
