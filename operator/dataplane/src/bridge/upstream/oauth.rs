//! The OAuth access token a server is sent (`servers[].auth`; `bridge/auth.py`,
//! `mcp/oauth.py`, `mcp/tokens.py`): the typed `auth` (exactly one of
//! `oauth2ClientCredentials`, RFC 6749 §4.4, and `tokenExchange`, RFC 8693, whose subject is
//! the run's projected ServiceAccount token), the token request (RFC 8707 `resource`,
//! `audience`, `scope`; `client_secret_basic`, or `client_id` in the form for a public
//! client; files re-read for every request) on the bridge's one client within 10 s and
//! 64 KiB, the token cached until shortly before `expires_in` with one request at a time,
//! a 401 dropping the token it carried. Neither the token nor a secret is in a message:
//! `mask` hides the token in what the server answers, `secret_values` names the secret.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::Request;
use serde_json::Value;

use super::oauth_config::Grant;
use super::{Failure, HttpClient};
use crate::bridge::scrub::Scrubber;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// One token request (connect, send, the whole answer) takes at most this long.
const TOKEN_SECONDS: u64 = 10;
/// A token endpoint's answer larger than this is refused.
const MAX_TOKEN_RESPONSE_BYTES: usize = 64 * 1024;
/// A token whose response gave no `expires_in` is used this long.
const DEFAULT_LIFETIME_SECONDS: f64 = 300.0;
/// A token is replaced this long before it expires, or a tenth of its lifetime if shorter.
const MAX_REFRESH_MARGIN_SECONDS: f64 = 30.0;
/// Token endpoint errors that mean "these credentials are not accepted".
const REFUSALS: [&str; 5] = [
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "access_denied",
    "invalid_token",
];

/// How a token could not be had: `Failure::Unauthorized`, or `Failure::Unavailable` when the
/// endpoint was not reached or slow (another try may do better).
fn refused(insufficient_scope: bool, why: String) -> Failure {
    Failure::Unauthorized {
        insufficient_scope,
        why,
    }
}

/// `url` without userinfo, query and fragment (`display_url`).
pub fn display_url(url: &str) -> String {
    match url.parse::<hyper::Uri>() {
        Ok(uri) => format!(
            "{}://{}{}",
            uri.scheme_str().unwrap_or_default(),
            uri.authority()
                .map(|a| a.as_str().rsplit('@').next().unwrap_or_default())
                .unwrap_or_default(),
            uri.path()
        ),
        Err(_) => "<invalid URL>".to_owned(),
    }
}

/// A mounted secret's value, trailing whitespace dropped.
fn read_secret(path: &Path) -> Result<String, Failure> {
    std::fs::read_to_string(path)
        .map(|t| t.trim().to_owned())
        .map_err(|e| {
            let why = e.to_string();
            let why = why.split(" (os error").next().unwrap_or_default().to_owned();
            refused(false, format!("{} could not be read ({why})", path.display()))
        })
}

/// `application/x-www-form-urlencoded` (Python's `urlencode`).
fn form_encode(form: &[(&str, String)]) -> String {
    let quote = |text: &str| {
        let mut out = String::new();
        for byte in text.bytes() {
            match byte {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => out.push(byte as char),
                b' ' => out.push('+'),
                _ => out.push_str(&format!("%{byte:02X}")),
            }
        }
        out
    };
    form.iter()
        .map(|(k, v)| format!("{}={}", quote(k), quote(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// RFC 3986 percent-encoding of a client id or secret (`quote(safe="")`).
fn quote(text: &str) -> String {
    form_encode(&[("", text.to_owned())])[1..].replace('+', "%20")
}

/// A token request's form fields, in order.
type Form = Vec<(&'static str, String)>;

struct Token {
    value: String,
    /// The token's `sub` and `act.sub` claims when it is a JWT (for the audit; unverified).
    claims: (Option<String>, Option<String>),
    refresh_at: Instant,
    masks: Scrubber,
}

/// One server's OAuth credentials: the grant, the token in use, one request at a time.
pub struct OAuth {
    grant: Grant,
    exchange: bool,
    uri: hyper::Uri,
    token: std::sync::Mutex<Option<std::sync::Arc<Token>>>,
    flight: tokio::sync::Mutex<()>,
    /// Token requests made.
    pub requests: std::sync::atomic::AtomicU64,
}

impl OAuth {
    /// The credentials `auth` configures, or why it is not a valid `auth` (no value in it).
    pub fn new(auth: &Value) -> Result<Self, String> {
        let (grant, exchange, uri) = super::oauth_config::parse(auth)?;
        Ok(Self {
            grant,
            exchange,
            uri,
            token: Default::default(),
            flight: Default::default(),
            requests: Default::default(),
        })
    }

    /// The token endpoint's name in messages.
    fn shown(&self) -> String {
        display_url(&self.grant.token_url)
    }

    /// Who asks, in messages.
    fn who(&self) -> String {
        match &self.grant.client_id {
            Some(id) => format!("client {id}"),
            None => "the subject token".to_owned(),
        }
    }

    /// The token request's form and its `authorization` header, the files read now.
    fn request_parts(&self) -> Result<(Form, Option<String>), Failure> {
        let grant = &self.grant;
        let mut form = Vec::new();
        if let Some(subject) = grant.subject_token_file.as_deref().filter(|_| self.exchange) {
            form.push(("grant_type", TOKEN_EXCHANGE.to_owned()));
            form.push(("subject_token", read_secret(subject)?));
            form.push(("subject_token_type", JWT_TOKEN_TYPE.to_owned()));
            form.push(("requested_token_type", ACCESS_TOKEN_TYPE.to_owned()));
        } else {
            form.push(("grant_type", "client_credentials".to_owned()));
        }
        if !grant.resource.is_empty() {
            form.push(("resource", grant.resource.clone()));
        }
        if let Some(audience) = grant.audience.as_ref().filter(|a| !a.is_empty()) {
            form.push(("audience", audience.clone()));
        }
        if !grant.scopes.is_empty() {
            form.push(("scope", grant.scopes.join(" ")));
        }
        let basic = match (&grant.client_id, &grant.client_secret_file) {
            (None, _) => None,
            (Some(id), None) => {
                form.push(("client_id", id.clone()));
                None
            }
            (Some(id), Some(file)) => {
                let pair = format!("{}:{}", quote(id), quote(&read_secret(file)?));
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(pair)
                ))
            }
        };
        Ok((form, basic))
    }

    /// The bearer token to send: the cached one, or one obtained now (one request at a time;
    /// who waited takes its token).
    pub async fn bearer(&self, client: &HttpClient) -> Result<String, Failure> {
        if let Some(token) = self.usable() {
            return Ok(token.value.clone());
        }
        let _flight = self.flight.lock().await;
        if let Some(token) = self.usable() {
            return Ok(token.value.clone());
        }
        let token = std::sync::Arc::new(self.obtain(client).await?);
        *self.token.lock().expect("not poisoned") = Some(token.clone());
        Ok(token.value.clone())
    }

    fn usable(&self) -> Option<std::sync::Arc<Token>> {
        let token = self.token.lock().expect("not poisoned").clone()?;
        (Instant::now() < token.refresh_at).then_some(token)
    }

    /// The token in use, if any (for the request's headers).
    pub fn current(&self) -> Option<String> {
        self.token
            .lock()
            .expect("not poisoned")
            .as_ref()
            .map(|t| t.value.clone())
    }

    /// A 401 for a request that carried `sent`: that token is dropped (unless another
    /// request replaced it already).
    pub fn rejected(&self, sent: &str) {
        let mut token = self.token.lock().expect("not poisoned");
        if token.as_ref().is_some_and(|t| t.value == sent) {
            *token = None;
        }
    }

    /// Whom the token in use names as its subject and actor (`sub`, `act.sub`), for the
    /// audit's `upstreamSubject` / `upstreamActor`.
    pub fn subject_and_actor(&self) -> (Option<String>, Option<String>) {
        let token = self.token.lock().expect("not poisoned");
        token.as_ref().map(|t| t.claims.clone()).unwrap_or_default()
    }

    /// `value` with the token in use masked (a server may echo it).
    pub fn mask(&self, value: Value) -> Value {
        match self.token.lock().expect("not poisoned").clone() {
            Some(token) => token.masks.json(value),
            None => value,
        }
    }

    /// `text` with the token in use masked.
    pub fn mask_text(&self, text: &str) -> String {
        match self.token.lock().expect("not poisoned").clone() {
            Some(token) => token.masks.text(text),
            None => text.to_owned(),
        }
    }

    async fn obtain(&self, client: &HttpClient) -> Result<Token, Failure> {
        let (form, basic) = self.request_parts()?;
        let shown = self.shown();
        let mut builder = Request::post(self.uri.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .header("accept-encoding", "identity")
            .header("cache-control", "no-store");
        if let Some(basic) = basic {
            builder = builder.header("authorization", basic);
        }
        let request = builder
            .body(Full::new(Bytes::from(form_encode(&form))))
            .map_err(|_| refused(false, format!("the token request to {shown} cannot be made")))?;
        self.requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let exchange = async {
            let response = client.request(request).await.map_err(|e| {
                let mut why = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(cause) = source {
                    why = format!("{why}: {cause}");
                    source = cause.source();
                }
                match why.find("refused to connect") {
                    Some(at) => refused(false, format!(
                        "the token endpoint {shown} was not contacted: {} (the egress policy; see docs/security.md)",
                        &why[at..]
                    )),
                    None => Failure::Unavailable(format!("could not connect to the token endpoint {shown}: {why}")),
                }
            })?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), MAX_TOKEN_RESPONSE_BYTES)
                .collect()
                .await
                .map_err(|e| match e.downcast_ref::<http_body_util::LengthLimitError>() {
                    Some(_) => refused(
                        false,
                        format!("the token endpoint {shown} sent more than {MAX_TOKEN_RESPONSE_BYTES} bytes"),
                    ),
                    None => {
                        Failure::Unavailable(format!("the connection to the token endpoint {shown} failed"))
                    }
                })?
                .to_bytes();
            Ok::<_, Failure>((status, body))
        };
        let (status, body) = tokio::time::timeout(Duration::from_secs(TOKEN_SECONDS), exchange)
            .await
            .map_err(|_| {
                Failure::Unavailable(format!(
                    "the token endpoint {shown} did not answer within {TOKEN_SECONDS}s"
                ))
            })??;
        let parsed = serde_json::from_slice::<Value>(&body)
            .ok()
            .filter(Value::is_object);
        if status != 200 {
            return Err(self.refusal(status, parsed.as_ref()));
        }
        let Some(parsed) = parsed else {
            return Err(refused(
                false,
                format!("the token endpoint {shown} answered with a body that is not JSON"),
            ));
        };
        token_from(&parsed, &shown)
    }

    /// What a token endpoint's error answer means (RFC 6749 §5.2), in one sentence.
    fn refusal(&self, status: u16, parsed: Option<&Value>) -> Failure {
        let (shown, who) = (self.shown(), self.who());
        let code = parsed
            .and_then(|p| p.get("error"))
            .and_then(Value::as_str)
            .filter(|c| c.is_ascii() && c.len() <= 64);
        let said = code.map(|c| format!(" ({c})")).unwrap_or_default();
        if code.is_some_and(|c| REFUSALS.contains(&c))
            || (matches!(status, 400 | 401 | 403) && code.is_none())
        {
            return refused(
                false,
                format!(
                    "the token endpoint {shown} refused {who} with HTTP {status}{said}: check the client's ID and secret, or the subject token's audience"
                ),
            );
        }
        match code {
            Some("invalid_scope") => refused(
                true,
                format!("the token endpoint {shown} refused the scopes asked for by {who}{said}"),
            ),
            Some("invalid_target" | "invalid_request" | "unsupported_grant_type") => refused(
                false,
                format!(
                    "the token endpoint {shown} refused the token request of {who}{said}: check its resource, audience and grant"
                ),
            ),
            _ if matches!(status, 502..=504) => {
                Failure::Unavailable(format!("the token endpoint {shown} answered HTTP {status}{said}"))
            }
            _ => refused(
                false,
                format!("the token endpoint {shown} answered HTTP {status}{said}"),
            ),
        }
    }
}

/// The token of a successful token response (RFC 6749 §5.1).
fn token_from(response: &Value, shown: &str) -> Result<Token, Failure> {
    let value = response
        .get("access_token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if value.is_empty() || !value.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(refused(
            false,
            format!("the token endpoint {shown} sent no usable access_token"),
        ));
    }
    let kind = response.get("token_type");
    if !kind
        .and_then(Value::as_str)
        .is_some_and(|k| k.eq_ignore_ascii_case("bearer"))
    {
        let kind: String = kind
            .map(|k| k.to_string())
            .unwrap_or("None".into())
            .chars()
            .take(32)
            .collect();
        return Err(refused(
            false,
            format!("the token endpoint {shown} sent a token of type {kind}, not Bearer"),
        ));
    }
    let lifetime = response
        .get("expires_in")
        .and_then(Value::as_f64)
        .filter(|s| *s > 0.0 && s.is_finite())
        .unwrap_or(DEFAULT_LIFETIME_SECONDS)
        .min(1e9);
    let margin = MAX_REFRESH_MARGIN_SECONDS.min(lifetime / 10.0);
    Ok(Token {
        value: value.to_owned(),
        claims: jwt_subject_and_actor(value),
        refresh_at: Instant::now() + Duration::from_secs_f64(lifetime - margin),
        masks: Scrubber::new([value, format!("Bearer {value}").as_str()]),
    })
}

/// The `sub` and `act.sub` claims of a JWT, unverified (the server verifies the token);
/// none for a token that is not a JWT.
fn jwt_subject_and_actor(token: &str) -> (Option<String>, Option<String>) {
    let claims = token
        .split('.')
        .nth(1)
        .filter(|_| token.split('.').count() == 3)
        .and_then(|payload| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload.trim_end_matches('='))
                .ok()
        })
        .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok())
        .unwrap_or_default();
    let claim = |value: Option<&Value>| {
        value
            .and_then(Value::as_str)
            .map(|s| s.chars().take(256).collect::<String>())
    };
    (
        claim(claims.get("sub")),
        claim(claims.get("act").and_then(|a| a.get("sub"))),
    )
}

/// The client secret `auth` names (read now), for the scrubber.
pub fn secret_values(auth: &Value) -> Vec<String> {
    ["oauth2ClientCredentials", "tokenExchange"]
        .iter()
        .filter_map(|grant| auth.get(grant)?.get("clientSecretFile")?.as_str())
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .map(|secret| secret.trim().to_owned())
        .collect()
}

#[cfg(test)]
#[path = "oauth_tests.rs"]
mod tests;
