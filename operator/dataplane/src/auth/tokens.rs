//! Offline verification of Kubernetes ServiceAccount tokens.
//!
//! A token is a caller when: its signature verifies with a key of the configured JWK Set
//! under **the key's own algorithm** (RSA and EC keys only — `RS*`, `PS*`, `ES256`, `ES384`;
//! a symmetric, private or `none` key never signs here, so there is no algorithm
//! confusion), its issuer is ours, its `aud` contains our audience, it has an `exp`, its
//! `exp`, `nbf` and `iat` hold within `LEEWAY_SECONDS`, and its `kubernetes.io` claims name
//! a ServiceAccount that matches `sub` (and a Pod that is not revoked). `jsonwebtoken` reads
//! and checks the JWS; this module picks the keys and reads the claims.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::Value;

/// Clock skew tolerated on `exp`, `nbf` and `iat`.
pub const LEEWAY_SECONDS: u64 = 30;
/// A longer bearer value is not a token of ours (Kubernetes tokens are ~1 KiB).
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Why a token was refused: the `reason` label of the refusals counter (a bounded set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    Missing,
    Malformed,
    UnknownKey,
    BadSignature,
    Expired,
    NotYetValid,
    NoExpiry,
    WrongAudience,
    WrongIssuer,
    BadClaims,
    Revoked,
    Forbidden,
}

impl Refusal {
    pub fn label(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Malformed => "malformed",
            Refusal::UnknownKey => "unknown_key",
            Refusal::BadSignature => "bad_signature",
            Refusal::Expired => "expired",
            Refusal::NotYetValid => "not_yet_valid",
            Refusal::NoExpiry => "no_expiry",
            Refusal::WrongAudience => "wrong_audience",
            Refusal::WrongIssuer => "wrong_issuer",
            Refusal::BadClaims => "bad_claims",
            Refusal::Revoked => "revoked",
            Refusal::Forbidden => "forbidden",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Refusal::Missing => "no bearer token",
            Refusal::Malformed => "the token is not a JWT",
            Refusal::UnknownKey => "the token is signed by no key this server trusts",
            Refusal::BadSignature => "the token's signature does not verify",
            Refusal::Expired => "the token has expired",
            Refusal::NotYetValid => "the token is not valid yet",
            Refusal::NoExpiry => "the token has no expiry",
            Refusal::WrongAudience => "the token is not for this server",
            Refusal::WrongIssuer => "the token's issuer is not trusted",
            Refusal::BadClaims => "the token lacks the claims of a ServiceAccount token",
            Refusal::Revoked => "the token's Pod is gone",
            Refusal::Forbidden => "the caller may not use this server",
        }
    }
}

/// A verified caller: a ServiceAccount, and the Pod its token is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub namespace: String,
    pub service_account: String,
    pub pod: Option<String>,
    pub pod_uid: Option<String>,
}

impl Caller {
    /// The Kubernetes username: `system:serviceaccount:<namespace>:<name>`.
    pub fn username(&self) -> String {
        format!(
            "{SERVICE_ACCOUNT_PREFIX}{}:{}",
            self.namespace, self.service_account
        )
    }

    /// Safe words naming it in a log line or a 403 (never a token or another claim).
    pub fn describe(&self) -> String {
        match &self.pod {
            Some(pod) => format!("{} (pod {pod})", self.username()),
            None => self.username(),
        }
    }

    /// How the audit line names it.
    pub fn audit(&self) -> Value {
        let mut caller = serde_json::json!({"kind": "serviceaccount", "namespace": self.namespace,
                                            "serviceAccount": self.service_account});
        if let Some(pod) = &self.pod {
            caller["pod"] = Value::from(pod.as_str());
        }
        caller
    }
}

/// A key of the JWK Set that may sign here, with its algorithm.
struct Key {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

/// The usable keys of a JWK Set: public RSA and EC signing keys of the allowed algorithms.
pub struct KeySet {
    keys: Vec<Key>,
}

fn algorithm_of(jwk: &Jwk) -> Option<Algorithm> {
    let declared = jwk.common.key_algorithm;
    match (&jwk.algorithm, declared) {
        (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => Some(Algorithm::RS256),
        (AlgorithmParameters::RSA(_), Some(KeyAlgorithm::RS384)) => Some(Algorithm::RS384),
        (AlgorithmParameters::RSA(_), Some(KeyAlgorithm::RS512)) => Some(Algorithm::RS512),
        (AlgorithmParameters::RSA(_), Some(KeyAlgorithm::PS256)) => Some(Algorithm::PS256),
        (AlgorithmParameters::RSA(_), Some(KeyAlgorithm::PS384)) => Some(Algorithm::PS384),
        (AlgorithmParameters::RSA(_), Some(KeyAlgorithm::PS512)) => Some(Algorithm::PS512),
        (AlgorithmParameters::EllipticCurve(ec), None | Some(KeyAlgorithm::ES256))
            if ec.curve == EllipticCurve::P256 =>
        {
            Some(Algorithm::ES256)
        }
        (AlgorithmParameters::EllipticCurve(ec), None | Some(KeyAlgorithm::ES384))
            if ec.curve == EllipticCurve::P384 =>
        {
            Some(Algorithm::ES384)
        }
        _ => None,
    }
}

impl KeySet {
    /// The usable keys of `jwks` (others are skipped, never trusted).
    pub fn new(jwks: Option<&Value>) -> Self {
        let mut keys = Vec::new();
        for raw in jwks
            .and_then(|j| j.get("keys"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if raw.get("d").is_some() {
                continue; // a private key published by mistake: never used
            }
            let Ok(jwk) = serde_json::from_value::<Jwk>(raw.clone()) else {
                continue;
            };
            if jwk
                .common
                .public_key_use
                .as_ref()
                .is_some_and(|u| *u != PublicKeyUse::Signature)
            {
                continue;
            }
            let (Some(algorithm), Ok(key)) = (algorithm_of(&jwk), DecodingKey::from_jwk(&jwk)) else {
                continue;
            };
            keys.push(Key {
                kid: jwk.common.key_id.clone(),
                algorithm,
                key,
            });
        }
        Self { keys }
    }

    /// The keys that may have signed a token whose header names `kid`.
    fn candidates(&self, kid: Option<&str>) -> Vec<&Key> {
        if let Some(kid) = kid.filter(|k| !k.is_empty())
            && let Some(named) = self.keys.iter().find(|k| k.kid.as_deref() == Some(kid))
        {
            return vec![named];
        }
        match kid.filter(|k| !k.is_empty()) {
            Some(_) => self.keys.iter().filter(|k| k.kid.is_none()).collect(),
            None => self.keys.iter().collect(),
        }
    }
}

/// Verification of one issuer's tokens for one audience.
pub struct Verifier {
    /// `None`: the configuration names no issuer (its keys could not be read when it was
    /// written), so no token is ours: every one is refused as `WrongIssuer`.
    pub issuer: Option<String>,
    pub audience: String,
    pub keys: KeySet,
}

impl Verifier {
    /// The caller a token names and its `exp`, or why it is refused.
    pub fn verify(
        &self,
        token: &str,
        now: u64,
        revoked: &std::collections::HashSet<String>,
    ) -> Result<(Caller, u64), Refusal> {
        if token.len() > MAX_TOKEN_BYTES || token.matches('.').count() != 2 {
            return Err(Refusal::Malformed);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::Malformed)?;
        let Some(issuer) = self.issuer.as_deref() else {
            return Err(Refusal::WrongIssuer);
        };
        let candidates = self.keys.candidates(header.kid.as_deref());
        let mut refusal = Refusal::UnknownKey;
        for key in candidates.into_iter().filter(|k| k.algorithm == header.alg) {
            let mut validation = Validation::new(key.algorithm);
            validation.leeway = LEEWAY_SECONDS;
            validation.set_required_spec_claims(&["exp", "iss", "aud"]);
            validation.set_issuer(&[issuer]);
            validation.set_audience(&[&self.audience]);
            validation.validate_nbf = true;
            match jsonwebtoken::decode::<Value>(token, &key.key, &validation) {
                Ok(data) => return self.caller(&data.claims, now, revoked),
                Err(error) => {
                    refusal = match error.kind() {
                        ErrorKind::InvalidSignature => Refusal::BadSignature,
                        ErrorKind::ExpiredSignature => return Err(Refusal::Expired),
                        ErrorKind::ImmatureSignature => return Err(Refusal::NotYetValid),
                        ErrorKind::InvalidIssuer => return Err(Refusal::WrongIssuer),
                        ErrorKind::InvalidAudience => return Err(Refusal::WrongAudience),
                        ErrorKind::MissingRequiredClaim(claim) => {
                            return Err(match claim.as_str() {
                                "exp" => Refusal::NoExpiry,
                                "iss" => Refusal::WrongIssuer,
                                _ => Refusal::WrongAudience,
                            });
                        }
                        ErrorKind::InvalidClaimFormat(_) => return Err(Refusal::BadClaims),
                        ErrorKind::Base64(_)
                        | ErrorKind::Json(_)
                        | ErrorKind::Utf8(_)
                        | ErrorKind::InvalidToken => {
                            return Err(Refusal::Malformed);
                        }
                        _ => refusal,
                    }
                }
            }
        }
        Err(refusal)
    }

    fn caller(
        &self,
        claims: &Value,
        now: u64,
        revoked: &std::collections::HashSet<String>,
    ) -> Result<(Caller, u64), Refusal> {
        let exp = claims
            .get("exp")
            .and_then(Value::as_f64)
            .ok_or(Refusal::NoExpiry)?;
        if let Some(iat) = claims.get("iat").and_then(Value::as_f64)
            && iat - LEEWAY_SECONDS as f64 > now as f64
        {
            return Err(Refusal::NotYetValid);
        }
        let kube = claims
            .get("kubernetes.io")
            .filter(|k| k.is_object())
            .ok_or(Refusal::BadClaims)?;
        let text = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let namespace = text(kube.get("namespace")).ok_or(Refusal::BadClaims)?;
        let account =
            text(kube.get("serviceaccount").and_then(|a| a.get("name"))).ok_or(Refusal::BadClaims)?;
        if claims.get("sub").and_then(Value::as_str)
            != Some(&format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{account}"))
        {
            return Err(Refusal::BadClaims);
        }
        let (mut pod, mut pod_uid) = (None, None);
        if let Some(bound) = kube.get("pod").filter(|p| p.is_object()) {
            pod = Some(text(bound.get("name")).ok_or(Refusal::BadClaims)?);
            let uid = text(bound.get("uid")).ok_or(Refusal::BadClaims)?;
            if revoked.contains(&uid) {
                return Err(Refusal::Revoked);
            }
            pod_uid = Some(uid);
        }
        Ok((
            Caller {
                namespace,
                service_account: account,
                pod,
                pod_uid,
            },
            exp.max(0.0) as u64 + LEEWAY_SECONDS,
        ))
    }
}
