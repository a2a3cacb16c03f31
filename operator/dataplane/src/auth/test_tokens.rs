//! What the auth tests sign and write: test keys only (a trusted one in the file's JWK Set,
//! another not), the `/metrics` access file the operator renders, a temporary file that
//! goes when dropped, and tokens shaped as the kubelet's.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::{Value, json};

const ISSUER: &str = "https://kubernetes.default.svc";
pub(super) const METRICS: &str = "metrics.mcp-operator.dev";
/// Test keys only (P-256, PKCS#8): `TRUSTED` is in the file's JWK Set, `OTHER` is not.
pub(super) const TRUSTED: (&str, &str, &str) = (
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgVQ639bq9qS4GrBfgxAXARqeN1EwO0VS7ksY+hWTBAo+hRANCAASFgV/cZDUfM8SXDqg3SYaxi/D35zKm8isua4hPn6OW2EcOzzq0GI0b6XsKryda1rX2Kdb5uUf1k1xjMWUhiEQG",
    "hYFf3GQ1HzPElw6oN0mGsYvw9-cypvIrLmuIT5-jltg",
    "Rw7POrQYjRvpewqvJ1rWtfYp1vm5R_WTXGMxZSGIRAY",
);
pub(super) const OTHER: &str = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgp+zDw6K8i4WIOeQ0gQz3jlOVN4grbS66k3dUuk5A+WChRANCAASLHwHtp9QA4qbWo/FoXbi0GQSxL5XXxTqByZySxhtPmqMe52DRJwuTVo1kDaxSRX8WtAezTm0Y56rfa4jMWoFW";
pub(super) const SCRAPER: &str = "system:serviceaccount:monitoring:prometheus";

fn jwks() -> Value {
    json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "trusted", "use": "sig",
                     "x": TRUSTED.1, "y": TRUSTED.2}]})
}

/// The file the operator renders for `/metrics` (`render.metrics_access`).
pub(super) fn metrics_access(keys: bool) -> Value {
    let mut body = json!({"audience": METRICS,
                          "allow": {"namespaces": [], "operators": [SCRAPER]}});
    if keys {
        body["issuer"] = json!(ISSUER);
        body["jwks"] = jwks();
    }
    body
}

pub(super) struct TempFile(pub(super) std::path::PathBuf);

impl TempFile {
    pub(super) fn new(document: &Value) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "mcp-dataplane-gate-{}-{}.json",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let file = Self(std::env::temp_dir().join(name));
        file.write(document);
        file
    }

    pub(super) fn write(&self, document: &Value) {
        std::fs::write(&self.0, serde_json::to_vec_pretty(document).unwrap()).unwrap();
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(super) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

pub(super) fn token(
    key: &str,
    kid: &str,
    namespace: &str,
    account: &str,
    audience: &str,
    exp: u64,
) -> String {
    let mut header = Header::new(jsonwebtoken::Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    let claims = json!({
        "iss": ISSUER, "aud": [audience], "sub": format!("system:serviceaccount:{namespace}:{account}"),
        "iat": now(), "nbf": now(), "exp": exp,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": account, "uid": "u"}},
    });
    let der = STANDARD.decode(key).unwrap();
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ec_der(&der)).unwrap()
}

pub(super) fn scraper_token() -> String {
    token(
        TRUSTED.0,
        "trusted",
        "monitoring",
        "prometheus",
        METRICS,
        now() + 600,
    )
}
