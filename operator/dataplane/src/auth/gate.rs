//! The HTTP side of authentication: a request's bearer token (`Mcp-Operator-Authorization`,
//! the header the operator's probe uses through the API server's service proxy, which
//! consumes `Authorization`; else `Authorization`), its verdict (kept until the token's
//! `exp`, at most `CACHE_ENTRIES` tokens, keyed by a SHA-256 of the token, forgotten when the
//! configuration changes), and the refusal: 401 with `WWW-Authenticate` for a token that is
//! missing or does not verify, 403 naming the caller (never the token) for one the
//! configuration does not permit. A verified caller is logged once, within `SEEN_CALLERS`.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hyper::header::HeaderValue;
use hyper::{Request, Response};
use sha2::{Digest, Sha256};

use super::access::{AccessConfig, AccessConfigError, AccessFile};
use super::tokens::{Caller, KeySet, Refusal, Verifier};
use crate::http::{self, Body};

const CACHE_ENTRIES: usize = 4096;
const SEEN_CALLERS: usize = 10_000;

/// Counts refusals by reason (the program's metrics registry owns the counter).
pub trait RefusalCounter: Send + Sync {
    fn refused(&self, reason: Refusal);
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
        issuer: config.issuer.clone().unwrap_or_default(),
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

/// The bearer token of a request, if it carries one.
fn bearer<B>(request: &Request<B>) -> Option<&str> {
    let value = ["mcp-operator-authorization", "authorization"]
        .iter()
        .find_map(|name| request.headers().get(*name))?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl Gate {
    pub fn open(path: &Path, counter: Box<dyn RefusalCounter>) -> Result<Self, AccessConfigError> {
        let mut file = AccessFile::open(path, Instant::now())?;
        let config = file.current(Instant::now());
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
        let Some(token) = bearer(request) else {
            return Err(self.refuse(Refusal::Missing));
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
        if !allowed {
            self.counter.refused(Refusal::Forbidden);
            let text = format!("{} may not use this server", caller.username());
            return Err(http::plain(403, &text));
        }
        let name = caller.username();
        let mut seen = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if seen.len() < SEEN_CALLERS && seen.insert(format!("{name}/{}", caller.pod.as_deref().unwrap_or("")))
        {
            match &caller.pod {
                Some(pod) => tracing::info!("Verified caller {name} (pod {pod})"),
                None => tracing::info!("Verified caller {name}"),
            }
        }
        Ok(caller)
    }

    fn refuse(&self, reason: Refusal) -> Response<Body> {
        self.counter.refused(reason);
        let mut response = http::plain(401, reason.description());
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
