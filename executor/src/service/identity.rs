//! Who is calling: the identity of the peer's certificate against the
//! allow list, for the pipeline and for the gRPC health service.

use super::*;

impl ExecutorService {
    /// The interceptor for the gRPC health service: it reveals nothing, but
    /// it still answers only known identities.
    // `tonic::Status` is large, but it is what interceptors return.
    #[allow(clippy::result_large_err)]
    pub fn health_gate(
        allowed: HashSet<String>,
        audit: Arc<AuditLog>,
        refusals: Arc<crate::ratelimit::RefusalRows>,
    ) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone {
        move |req: Request<()>| {
            if let Some(h) = req.extensions().get::<crate::prehandler::Handled>() {
                h.mark();
            }
            let certs = req.peer_certs();
            match Self::check_identity(&allowed, certs.as_deref().map(Vec::as_slice)) {
                // Successful probes run on a timer and reveal nothing: not
                // audited. Refusals are.
                Ok(_) => Ok(req),
                Err((caller, why)) => {
                    // Up to a count per window, each committed before the
                    // answer; the rest are counted (`RefusalRows`), so a
                    // flood of probes is not an fsync each.
                    refusals.audit(&audit, || AuditEntry {
                        caller,
                        action: "health".into(),
                        decision: crate::audit::Decision::Denied,
                        code: crate::audit::Code::of(tonic::Code::Unauthenticated),
                        reason: why.clone(),
                        ..Default::default()
                    });
                    Err(Status::unauthenticated(why))
                }
            }
        }
    }

    /// The identity of the caller if it is on the allow list. Also used by
    /// the health service's interceptor.
    pub fn check_identity(
        allowed: &HashSet<String>,
        certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<String, (String, String)> {
        match certs.and_then(|c| c.first()) {
            None => Err((
                "unknown".into(),
                "no client certificate presented".to_string(),
            )),
            Some(cert) => match crate::tls::identity_from_cert(cert.as_ref()) {
                None => Err((
                    "unknown".into(),
                    "client certificate has no common name".to_string(),
                )),
                Some(id) if allowed.contains(&id) => Ok(id),
                Some(id) => {
                    let shown = truncate_for_audit(&redact::neutralise_controls(&id));
                    Err((
                        shown.clone(),
                        format!("client identity `{shown}` is not on the executor's allow list"),
                    ))
                }
            },
        }
    }
}
