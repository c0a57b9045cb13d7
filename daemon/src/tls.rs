//! One rustls crypto provider for the whole process: ring, the provider the
//! executor's server and tonic's client already use. reqwest is built
//! without a provider of its own (no second TLS stack in the tree), so every
//! process that builds an HTTP client installs this one first.

/// Install ring as the process-wide default. Idempotent: a provider that is
/// already installed (this one, by an earlier call) is kept.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
