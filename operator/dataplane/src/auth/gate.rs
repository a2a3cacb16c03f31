//! The HTTP side of authentication: a request's bearer token (`bearer`), its verdict (kept
//! until the token's `exp`, at most `CACHE_ENTRIES` tokens, keyed by a SHA-256 of the token,
//! forgotten when the configuration changes), and the refusal: 401 with
//! `WWW-Authenticate: Bearer` for a request without a token, with `error="invalid_token"`
//! and its description for one that is not a bearer token or does not verify, 403 naming the
//! caller (never the token) for one the configuration does not permit. Each caller is logged
//! once (past `SEEN_CALLERS` the memory starts over: a caller may be logged again, none is
//! left unlogged).
//!
//! One gate per endpoint: the MCP endpoint's (`--auth kubernetes`, refusals counted, a
//! configuration without issuer keys refused at start) and `/metrics`' (`--metrics-access`:
//! the scrapers, nothing counted, a configuration without issuer keys refusing every token;
//! `admit_scraper` is that check for every `/metrics` page).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hyper::header::HeaderValue;
use hyper::{Request, Response};
use sha2::{Digest, Sha256};

use super::access::{AccessConfig, AccessConfigError, AccessFile};
use super::bearer::{Credential, bearer};
use super::tokens::{Caller, KeySet, Refusal, Verifier};
use crate::http::{self, Body};

const CACHE_ENTRIES: usize = 4096;
const SEEN_CALLERS: usize = 10_000;

/// Counts refusals by reason (the program's metrics registry owns the counter).
pub trait RefusalCounter: Send + Sync {
    fn refused(&self, reason: Refusal);
}

/// Counts nothing: a refused scrape of `/metrics` is not a caller's refusal.
pub struct Uncounted;

impl RefusalCounter for Uncounted {
    fn refused(&self, _reason: Refusal) {}
}

struct Verdicts {
    generation: u64,
    verifier: Arc<Verifier>,
    by_token: HashMap<[u8; 32], (Caller, bool, u64)>,
}

pub struct Gate {
    file: Mutex<AccessFile>,
    verdicts: Mutex<Verdicts>,
    seen: Mutex<HashSet<String>>,
    counter: Box<dyn RefusalCounter>,
}

fn verifier(config: &AccessConfig) -> Arc<Verifier> {
    Arc::new(Verifier {
        issuer: config.issuer.clone(),
        audience: config.audience.clone(),
        keys: KeySet::new(config.jwks.as_ref()),
    })
}

fn permitted(config: &AccessConfig, caller: &Caller) -> bool {
    if config.operators.contains(&caller.username()) {
        return true;
    }
    let namespace_ok = config.namespaces.contains("*") || config.namespaces.contains(&caller.namespace);
    namespace_ok
        && config.service_accounts.as_ref().is_none_or(|accounts| {
            accounts.contains(&format!("{}/{}", caller.namespace, caller.service_account))
        })
}

impl Gate {
    /// The gate of the configuration at `path`. `require_issuer`: a configuration without
    /// issuer keys is an error (the MCP endpoint's); else it stands, and refuses every token
    /// until a version with keys is read (`/metrics`: the operator could not read the keys
    /// when it wrote the file).
    pub fn open(
        path: &Path,
        counter: Box<dyn RefusalCounter>,
        require_issuer: bool,
    ) -> Result<Self, AccessConfigError> {
        let mut file = AccessFile::open(path, Instant::now())?;
        let config = file.current(Instant::now());
        if require_issuer && config.issuer.is_none() {
            return Err(AccessConfigError(format!(
                "{} has no issuer and jwks: no token could be verified",
                path.display()
            )));
        }
        let verdicts = Verdicts {
            generation: file.generation,
            verifier: verifier(&config),
            by_token: HashMap::new(),
        };
        Ok(Self {
            file: Mutex::new(file),
            verdicts: Mutex::new(verdicts),
            seen: Mutex::new(HashSet::new()),
            counter,
        })
    }

    /// The verified, permitted caller of a request, or the response that refuses it.
    pub fn admit<B>(&self, request: &Request<B>) -> Result<Caller, Response<Body>> {
        let token = match bearer(request) {
            Credential::Token(token) => token,
            Credential::Missing => return Err(self.refuse(Refusal::Missing)),
            Credential::NotBearer => return Err(self.refuse(Refusal::Malformed)),
        };
        let (generation, config) = {
            let mut file = self
                .file
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let config = file.current(Instant::now());
            (file.generation, config)
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let verifier = {
            let mut verdicts = self
                .verdicts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if verdicts.generation != generation {
                *verdicts = Verdicts {
                    generation,
                    verifier: verifier(&config),
                    by_token: HashMap::new(),
                };
            }
            if let Some((caller, allowed, expires)) = verdicts.by_token.get(&digest)
                && *expires > now
            {
                return self.decide(caller.clone(), *allowed);
            }
            verdicts.verifier.clone()
        };
        let (caller, expires) = match verifier.verify(token, now, &config.revoked_pods) {
            Ok(verified) => verified,
            Err(reason) => return Err(self.refuse(reason)),
        };
        let allowed = permitted(&config, &caller);
        {
            let mut verdicts = self
                .verdicts
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if verdicts.generation == generation {
                if verdicts.by_token.len() >= CACHE_ENTRIES {
                    verdicts.by_token.clear();
                }
                verdicts
                    .by_token
                    .insert(digest, (caller.clone(), allowed, expires));
            }
        }
        self.decide(caller, allowed)
    }

    fn decide(&self, caller: Caller, allowed: bool) -> Result<Caller, Response<Body>> {
        let described = caller.describe();
        {
            let mut seen = self
                .seen
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if !seen.contains(&described) {
                if seen.len() >= SEEN_CALLERS {
                    seen.clear();
                }
                let suffix = if allowed { "" } else { " (not permitted)" };
                tracing::info!("Verified caller {described}{suffix}");
                seen.insert(described.clone());
            }
        }
        if !allowed {
            self.counter.refused(Refusal::Forbidden);
            let text = format!("Forbidden: {described} is not permitted to call this server\n");
            return Err(http::plain(403, &text));
        }
        Ok(caller)
    }

    fn refuse(&self, reason: Refusal) -> Response<Body> {
        self.counter.refused(reason);
        let body = match reason {
            Refusal::Missing => "Unauthorized: a bearer token is required\n".to_owned(),
            _ => format!("Unauthorized: {}\n", reason.description()),
        };
        let mut response = http::plain(401, &body);
        let challenge = match reason {
            Refusal::Missing => "Bearer".to_owned(),
            _ => format!(
                "Bearer error=\"invalid_token\", error_description=\"{}\"",
                reason.description()
            ),
        };
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(hyper::header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// Whether `/metrics` may be read: by anyone without `--metrics-access` (no gate), else by
/// the scrapers its gate permits; the refusal otherwise.
pub fn admit_scraper<B>(scrapers: Option<&Gate>, request: &Request<B>) -> Result<(), Response<Body>> {
    match scrapers {
        Some(gate) => gate.admit(request).map(drop),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::test_tokens::{
        METRICS, OTHER, SCRAPER, TRUSTED, TempFile, metrics_access, now, scraper_token, token,
    };

    fn request(authorization: Option<&str>) -> Request<()> {
        let mut request = Request::builder().uri("/metrics");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.body(()).unwrap()
    }

    fn body(response: &Response<Body>) -> String {
        match response.body() {
            Body::Whole(Some(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
            _ => String::new(),
        }
    }

    fn challenge(response: &Response<Body>) -> &str {
        response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    fn admitted(verdict: Result<Caller, Response<Body>>) -> Caller {
        match verdict {
            Ok(caller) => caller,
            Err(refusal) => panic!("refused: {} {}", refusal.status(), body(&refusal)),
        }
    }

    #[derive(Clone, Default)]
    struct Counted(Arc<Mutex<Vec<Refusal>>>);

    impl RefusalCounter for Counted {
        fn refused(&self, reason: Refusal) {
            self.0.lock().unwrap().push(reason);
        }
    }

    #[test]
    fn only_the_listed_scraper_with_a_token_of_the_metrics_audience_is_admitted() {
        let file = TempFile::new(&metrics_access(true));
        let gate = Gate::open(&file.0, Box::new(Uncounted), false).unwrap();
        let scraper = admitted(gate.admit(&request(Some(&format!("Bearer {}", scraper_token())))));
        assert_eq!(scraper.username(), SCRAPER);

        let refusals: [(String, &str); 4] = [
            (
                token(
                    TRUSTED.0,
                    "trusted",
                    "monitoring",
                    "prometheus",
                    "mcp.example",
                    now() + 600,
                ),
                "the token is not for this server",
            ),
            (
                token(
                    TRUSTED.0,
                    "trusted",
                    "monitoring",
                    "prometheus",
                    METRICS,
                    now() - 3600,
                ),
                "the token has expired",
            ),
            (
                token(OTHER, "other", "monitoring", "prometheus", METRICS, now() + 600),
                "the token is signed by no key this server trusts",
            ),
            ("not-a-jwt".to_owned(), "the token is not a JWT"),
        ];
        for (token, why) in refusals {
            let refused = gate
                .admit(&request(Some(&format!("Bearer {token}"))))
                .unwrap_err();
            assert_eq!(refused.status(), 401, "{why}");
            assert_eq!(body(&refused), format!("Unauthorized: {why}\n"));
            assert_eq!(
                challenge(&refused),
                format!("Bearer error=\"invalid_token\", error_description=\"{why}\"")
            );
        }

        let agent = token(TRUSTED.0, "trusted", "team", "agent", METRICS, now() + 600);
        for _ in 0..2 {
            // the second time from the verdict cache: the same answer
            let forbidden = gate
                .admit(&request(Some(&format!("Bearer {agent}"))))
                .unwrap_err();
            assert_eq!(forbidden.status(), 403);
            assert_eq!(
                body(&forbidden),
                "Forbidden: system:serviceaccount:team:agent is not permitted to call this server\n"
            );
            assert!(!body(&forbidden).contains(&agent));
        }
    }

    #[test]
    fn no_token_is_a_bare_challenge_and_another_scheme_an_invalid_token() {
        let file = TempFile::new(&metrics_access(true));
        let counted = Counted::default();
        let gate = Gate::open(&file.0, Box::new(counted.clone()), false).unwrap();
        for missing in [None, Some("")] {
            let refused = gate.admit(&request(missing)).unwrap_err();
            assert_eq!((refused.status().as_u16(), challenge(&refused)), (401, "Bearer"));
            assert_eq!(body(&refused), "Unauthorized: a bearer token is required\n");
        }
        for other in ["Basic dXNlcjpwYXNz", "Bearer", "Bearer   "] {
            let refused = gate.admit(&request(Some(other))).unwrap_err();
            assert_eq!(refused.status(), 401, "{other:?}");
            assert!(
                challenge(&refused).starts_with("Bearer error=\"invalid_token\""),
                "{other:?}"
            );
        }
        // Mcp-Operator-Authorization first, unless empty.
        let probe = Request::builder()
            .header("mcp-operator-authorization", "")
            .header("authorization", format!("Bearer {}", scraper_token()))
            .body(())
            .unwrap();
        admitted(gate.admit(&probe));
        let reasons = counted.0.lock().unwrap().clone();
        use Refusal::{Malformed, Missing};
        assert_eq!(reasons, [Missing, Missing, Malformed, Malformed, Malformed]);
    }

    #[test]
    fn without_issuer_keys_the_metrics_gate_stands_and_refuses_every_token_until_they_come() {
        let file = TempFile::new(&metrics_access(false));
        let why = Gate::open(&file.0, Box::new(Uncounted), true).err().unwrap();
        assert!(why.to_string().contains("has no issuer and jwks"), "{why}");

        let gate = Gate::open(&file.0, Box::new(Uncounted), false).unwrap();
        let bearer = format!("Bearer {}", scraper_token());
        let refused = gate.admit(&request(Some(&bearer))).unwrap_err();
        assert_eq!(refused.status(), 401);
        assert_eq!(
            body(&refused),
            "Unauthorized: the token's issuer is not trusted\n"
        );

        // The operator writes the keys once it can read them: the file is re-read.
        std::thread::sleep(std::time::Duration::from_millis(1100));
        file.write(&metrics_access(true));
        assert_eq!(admitted(gate.admit(&request(Some(&bearer)))).username(), SCRAPER);
    }
}
