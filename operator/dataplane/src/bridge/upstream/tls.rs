//! HTTPS to upstream servers: the bridge's keep-alive client speaks TLS to an `https://`
//! server, verifying its certificate and name as the Python bridge's
//! `ssl.create_default_context()` does: against the system's CA certificates (or the bundle
//! `SSL_CERT_FILE` / `SSL_CERT_DIR` name), TLS 1.2 or 1.3, HTTP/1.1 by ALPN. There is no way
//! to skip the verification (the Python bridge has none either): a server whose certificate
//! no trusted CA signed fails, that server only, with the TLS error as its reason.

use std::sync::Arc;

use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use rustls::RootCertStore;

use super::guard::GuardedConnector;

/// The connector of the bridge's client: plain TCP for `http://`, TLS for `https://`, every
/// destination judged by the egress guard (`guard`).
pub type Connector = HttpsConnector<GuardedConnector>;

/// The CA certificates the bridge trusts: the system's, or those `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` name. What cannot be read is logged, never fatal: an `https://` server
/// then fails its verification, and `http://` servers keep working.
pub fn system_roots() -> RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::warn!("Could not read the system's CA certificates: {error}");
    }
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        tracing::warn!("Ignored {ignored} CA certificates that could not be parsed");
    }
    if added == 0 {
        tracing::warn!("No CA certificate is trusted: every https:// server will fail its verification");
    }
    roots
}

/// `http` wrapped so that `https://` URIs are reached over TLS verified against `roots`.
pub fn connector(http: GuardedConnector, roots: RootCertStore) -> Connector {
    // ring, deprecated in rustls 0.23.48 for lacking post-quantum key exchange: aws-lc-rs has
    // it, but needs cmake and a C build in every image that builds the binary.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("the ring provider speaks TLS 1.2 and 1.3")
        .with_root_certificates(roots)
        .with_no_client_auth();
    HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_http1()
        .wrap_connector(http)
}

#[cfg(test)]
mod tests {
    use super::super::{Upstream, http_client};
    use crate::bridge::config::Server;

    fn server(url: &str) -> Server {
        serde_norway::from_str(&format!(
            "{{name: s, namespace: default, prefix: s, url: '{url}'}}"
        ))
        .unwrap()
    }

    #[test]
    fn https_servers_are_taken_and_other_schemes_refused_by_name() {
        let client = http_client();
        assert!(Upstream::new(server("https://mcp.example.test/mcp"), client.clone()).is_ok());
        assert!(Upstream::new(server("http://127.0.0.1:1/mcp"), client.clone()).is_ok());
        let refused = Upstream::new(server("ftp://mcp.example.test/"), client).err();
        assert_eq!(
            refused.as_deref(),
            Some("url: only http:// and https:// servers are reached by this bridge")
        );
    }
}
