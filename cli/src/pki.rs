//! drydock's PKI, generated in Rust (rcgen) rather than with openssl: one CA,
//! the executor's server certificate and the agent's client certificate. The
//! end-to-end tests issue their certificates (expired ones, other CAs) with
//! this same code.

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use time::{Duration, OffsetDateTime};

pub const EXECUTOR_IDENTITY: &str = "drydock-executor";
pub const AGENT_IDENTITY: &str = "drydock-agent";
pub const HEALTHCHECK_IDENTITY: &str = "drydock-healthcheck";
/// The agent API's server certificate (`drydock init --agent-tls NAME`).
pub const AGENT_API_IDENTITY: &str = "drydock-agent-api";

#[derive(Debug, thiserror::Error)]
#[error("certificate generation failed: {0}")]
pub struct PkiError(#[from] rcgen::Error);

/// A certificate and its private key, PEM encoded.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    Server,
    Client,
}

pub struct Authority {
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// A new CA valid for ten years.
    pub fn new(name: &str) -> Result<Authority, PkiError> {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "drydock");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let now = OffsetDateTime::now_utc();
        params.not_before = now - Duration::hours(1);
        params.not_after = now + Duration::days(3650);
        let cert: Certificate = params.self_signed(&key)?;
        Ok(Authority {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(params, key),
        })
    }

    /// The CA `drydock init` made, from its certificate and key (to issue
    /// another host's executor certificate from the same CA).
    pub fn load(cert_pem: &str, key_pem: &str) -> Result<Authority, PkiError> {
        let key = KeyPair::from_pem(key_pem)?;
        let issuer = Issuer::from_ca_cert_pem(cert_pem, key)?;
        Ok(Authority {
            cert_pem: cert_pem.to_string(),
            key_pem: key_pem.to_string(),
            issuer,
        })
    }

    pub fn cert_pem(&self) -> String {
        self.cert_pem.clone()
    }

    pub fn key_pem(&self) -> String {
        self.key_pem.clone()
    }

    /// Issue a leaf whose common name is its identity, valid for `days`
    /// starting `starts_in_days` from now (negative values issue certificates
    /// that are already expired, for tests).
    pub fn issue(
        &self,
        identity: &str,
        sans: &[String],
        usage: Usage,
        starts_in_days: i64,
        days: i64,
    ) -> Result<Issued, PkiError> {
        let key = KeyPair::generate()?;
        let mut names = vec![identity.to_string()];
        names.extend(sans.iter().cloned());
        names.dedup();
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, identity);
        params
            .distinguished_name
            .push(DnType::OrganizationName, "drydock");
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        let start = OffsetDateTime::now_utc() + Duration::days(starts_in_days) - Duration::hours(1);
        params.not_before = start;
        params.not_after = start + Duration::days(days);
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// Everything `drydock init` writes for mTLS.
pub struct Bundle {
    pub ca: Authority,
    pub executor: Issued,
    pub agent: Issued,
    /// May call only the executor's gRPC health service.
    pub healthcheck: Issued,
}

/// The executor's certificate names `drydock-executor`, `localhost`,
/// `127.0.0.1` and any extra host names (for example the compose service).
pub fn generate(extra_executor_names: &[String]) -> Result<Bundle, PkiError> {
    let ca = Authority::new("drydock CA")?;
    let mut sans = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    sans.extend(extra_executor_names.iter().cloned());
    let executor = ca.issue(EXECUTOR_IDENTITY, &sans, Usage::Server, 0, 825)?;
    let agent = ca.issue(AGENT_IDENTITY, &[], Usage::Client, 0, 825)?;
    let healthcheck = ca.issue(HEALTHCHECK_IDENTITY, &[], Usage::Client, 0, 825)?;
    Ok(Bundle {
        ca,
        executor,
        agent,
        healthcheck,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_is_pem() {
        let b = generate(&["executor".into()]).unwrap();
        assert!(b.ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(b.executor.key_pem.contains("PRIVATE KEY"));
        assert_ne!(b.executor.cert_pem, b.agent.cert_pem);
    }
}
