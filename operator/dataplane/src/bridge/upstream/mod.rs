//! One MCP server of the run as the bridge's client sees it: a session over Streamable
//! HTTP in either era, on the bridge's keep-alive HTTP/1.1 client (`mcp/session.py`'s rules):
//! `server/discover` first at the newest 2026-07-28 revision (straight to the handshake when
//! the server's status named a handshake revision), any rejection of it falls back to
//! `initialize` + `notifications/initialized` and an `Mcp-Session-Id`; answers as JSON or
//! SSE, their id checked against the request's; a lost legacy session established again once
//! per request; the configured headers and `tokenFile` sent with every request, never over
//! the protocol's own headers.
//!
//! Modules: this one the session (its state, requests with a deadline, a lost session made
//! again, listings, the changes stream, its end); `negotiate` the era; `wire` one message
//! sent and its answer read; `headers` the configured headers, their problems and secrets;
//! `tls` the client's HTTPS, verified against the system's CA certificates; `guard` the
//! egress guard under every connection; `oauth` the OAuth token a server is sent (`auth`,
//! typed in `oauth_config`), a 401 answered with one new token and one more try;
//! `legacy_sse` a server of the legacy HTTP+SSE transport (`transport: sse`),
//! `legacy_routing` its endpoint and its events.

mod challenge;
mod guard;
mod headers;
mod legacy_routing;
mod legacy_sse;
mod negotiate;
mod oauth;
mod oauth_config;
mod tls;
mod wire;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::param_headers::ToolHeaderSchemas;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Request;
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

use super::config::Server;
use super::relay::Relay;

pub use headers::{header_problem, secret_values};
pub use oauth::OAuth;

pub type HttpClient = Client<tls::Connector, Full<Bytes>>;

/// The bridge's one HTTP client: keep-alive HTTP/1.1, at most 64 idle connections per server,
/// `https://` servers over TLS verified against the system's CA certificates (`tls`), every
/// destination judged by the egress guard (`guard`).
pub fn http_client() -> HttpClient {
    let connector = guard::GuardedConnector::new(|http| {
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
    });
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(64)
        .pool_idle_timeout(Duration::from_secs(60))
        .build(tls::connector(connector, tls::system_roots()))
}

/// Pages of one listing at most (a server that never ends its cursor is an error).
const MAX_PAGES: usize = 100;

/// How a request to the server failed.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// Not reached, or the answer was lost or not MCP: the server may be down.
    Unavailable(String),
    /// The server answered with a JSON-RPC error.
    Rpc {
        code: i64,
        message: String,
        data: Option<Value>,
    },
    /// An answer that is not the JSON-RPC response to the request (another id, no result,
    /// not JSON): the server is out of step, the request failed.
    Protocol(String),
    /// The HTTP status of a refusal (no JSON-RPC error in it).
    Status(u16, String),
    /// A `401` or `403`: the server refused the bridge's credentials or their scope.
    /// `challenge` is its `WWW-Authenticate` header, `why` what its body said (the JSON-RPC
    /// error's message, or the text).
    Denied {
        status: u16,
        challenge: Option<String>,
        why: String,
    },
    /// No answer within the deadline.
    Timeout,
    /// The bridge cannot send it as configured (a header file unreadable, a bad value).
    Misconfigured(String),
    /// The agent cancelled the call (`relay`): the server was told, nobody waits for it.
    Cancelled,
    /// No OAuth token could be had (`oauth`): the token endpoint refused the client, the
    /// subject or (`insufficient_scope`) the scopes; nothing was sent to the server.
    Unauthorized { insufficient_scope: bool, why: String },
}

impl Failure {
    /// The failure of an answer with an error `status` whose body said `why`: `Denied` for
    /// a 401 or 403 (with the challenge among `headers`), else `Status`.
    pub(crate) fn of_status(status: u16, headers: &hyper::HeaderMap, why: String) -> Failure {
        if !matches!(status, 401 | 403) {
            return Failure::Status(status, why);
        }
        let challenge = headers
            .get(hyper::header::WWW_AUTHENTICATE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        Failure::Denied {
            status,
            challenge,
            why,
        }
    }

    /// The agent's hint for a refusal of the bridge's credentials (`Denied`): what the
    /// server asked for and who can fix it (`challenge`); `None` for any other failure and
    /// for a 403 that is not about a scope (the server refused the request itself).
    pub fn unauthorized(&self, key: &str) -> Option<(&'static str, String, Option<String>)> {
        let Failure::Denied {
            status, challenge, ..
        } = self
        else {
            return None;
        };
        let found = challenge.as_deref().and_then(challenge::Challenge::parse);
        let place = format!("Server {key}");
        if let Some(found) = found.as_ref().filter(|c| c.insufficient_scope()) {
            let hint = format!(
                "{}. The call was refused before it ran; calling again will not help until the token carries that scope.",
                challenge::explain(&place, *status, Some(found))
            );
            let scope = found.scope().map(|s| s.chars().take(256).collect());
            return Some(("insufficient_scope", hint, scope));
        }
        if *status != 401 {
            return None;
        }
        let hint = format!(
            "{}. The call was refused before it ran (a new token was tried once); calling again will not help until the credentials are fixed. Tools of other servers keep working.",
            challenge::explain(&place, 401, found.as_ref())
        );
        Some(("upstream_unauthorized", hint, None))
    }

    pub fn describe(&self) -> String {
        match self {
            Failure::Unavailable(why) | Failure::Misconfigured(why) | Failure::Protocol(why) => why.clone(),
            Failure::Unauthorized { why, .. } => why.clone(),
            Failure::Rpc { code, message, .. } => format!("JSON-RPC error {code}: {message}"),
            Failure::Status(status, why) => format!("HTTP {status}: {why}"),
            Failure::Denied { status, why, .. } if why.is_empty() => format!("HTTP {status}"),
            Failure::Denied { status, why, .. } => format!("HTTP {status}: {why}"),
            Failure::Timeout => "no answer in time".to_owned(),
            Failure::Cancelled => "the call was cancelled".to_owned(),
        }
    }
}

/// What the session negotiated.
#[derive(Debug, Clone, Default)]
pub struct Negotiated {
    pub protocol_version: String,
    pub session_id: Option<String>,
    pub modern: bool,
    /// The server declared `tools.listChanged`: it announces changes on a stream.
    pub list_changed: bool,
    /// The capabilities the server declared.
    pub capabilities: Value,
}

pub struct Upstream {
    pub server: Server,
    pub(super) client: HttpClient,
    pub(super) uri: hyper::Uri,
    /// The server's OAuth credentials (`auth`), whose token every request carries.
    pub(super) oauth: Option<OAuth>,
    state: Mutex<Option<Negotiated>>,
    ids: AtomicU64,
    /// The event stream of a server of the legacy HTTP+SSE transport (`legacy_sse`).
    sse: std::sync::Mutex<Option<Arc<legacy_sse::SseStream>>>,
    /// The `x-mcp-header` annotations of the tools it listed last: the `Mcp-Param-*` headers
    /// each 2026-07-28 call to them carries (`wire`).
    pub(super) param_headers: std::sync::Mutex<ToolHeaderSchemas>,
}

fn client_info() -> Value {
    json!({"name": "mcp-operator-bridge", "version": env!("CARGO_PKG_VERSION")})
}

impl Upstream {
    pub fn new(server: Server, client: HttpClient) -> Result<Self, String> {
        let uri: hyper::Uri = server.url.parse().map_err(|e| format!("url: {e}"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err("url: only http:// and https:// servers are reached by this bridge".to_owned());
        }
        let oauth = server.auth.as_ref().map(OAuth::new).transpose()?;
        if server.transport != "streamable-http" && server.transport != "sse" {
            return Err(format!(
                "transport {} is not served by this bridge yet",
                server.transport
            ));
        }
        Ok(Self {
            server,
            client,
            uri,
            oauth,
            state: Mutex::new(None),
            ids: AtomicU64::new(1),
            sse: std::sync::Mutex::new(None),
            param_headers: std::sync::Mutex::default(),
        })
    }

    /// Whom the OAuth token in use names as its subject and actor (none without `auth`).
    pub fn upstream_subject_and_actor(&self) -> (Option<String>, Option<String>) {
        self.oauth
            .as_ref()
            .map(OAuth::subject_and_actor)
            .unwrap_or_default()
    }

    pub async fn negotiated(&self) -> Option<Negotiated> {
        self.state.lock().await.clone()
    }

    /// Forget the session (the next request negotiates again).
    pub async fn reset(&self) {
        *self.state.lock().await = None;
        self.sse_forget();
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// The negotiated session, negotiating first when there is none.
    pub async fn connect(&self) -> Result<Negotiated, Failure> {
        let mut state = self.state.lock().await;
        if let Some(negotiated) = state.as_ref()
            && self.sse_alive()
        {
            return Ok(negotiated.clone());
        }
        let negotiated = self.negotiate().await?;
        *state = Some(negotiated.clone());
        Ok(negotiated)
    }

    /// One request in the negotiated era within `deadline`; a lost legacy session (404, or a
    /// 400 naming the session) is established again once.
    pub async fn request(
        &self,
        method: &str,
        params: Map<String, Value>,
        deadline: Duration,
    ) -> Result<Value, Failure> {
        tokio::time::timeout(deadline, self.once(method, params, None))
            .await
            .unwrap_or(Err(Failure::Timeout))
    }

    /// One request in the negotiated era, with no deadline of its own; a lost legacy
    /// session is established again once.
    pub(super) async fn once(
        &self,
        method: &str,
        params: Map<String, Value>,
        relay: Option<&Arc<Relay>>,
    ) -> Result<Value, Failure> {
        let Some(oauth) = &self.oauth else {
            return self.session_once(method, params, relay).await;
        };
        let sent = oauth.bearer(&self.client).await?;
        let answer = match self.session_once(method, params.clone(), relay).await {
            Err(Failure::Denied { status: 401, .. }) => {
                oauth.rejected(&sent); // one new token, one more try
                oauth.bearer(&self.client).await?;
                self.session_once(method, params, relay).await
            }
            other => other,
        };
        match answer {
            Ok(result) => Ok(oauth.mask(result)),
            Err(Failure::Status(status, why)) => Err(Failure::Status(status, oauth.mask_text(&why))),
            Err(Failure::Denied {
                status,
                challenge,
                why,
            }) => Err(Failure::Denied {
                status,
                challenge: challenge.map(|c| oauth.mask_text(&c)),
                why: oauth.mask_text(&why),
            }),
            Err(Failure::Unavailable(why)) => Err(Failure::Unavailable(oauth.mask_text(&why))),
            Err(Failure::Protocol(why)) => Err(Failure::Protocol(oauth.mask_text(&why))),
            Err(Failure::Rpc { code, message, data }) => Err(Failure::Rpc {
                code,
                message: oauth.mask_text(&message),
                data: data.map(|d| oauth.mask(d)),
            }),
            Err(other) => Err(other),
        }
    }

    /// One request in the negotiated era; a lost legacy session is established again once.
    async fn session_once(
        &self,
        method: &str,
        params: Map<String, Value>,
        relay: Option<&Arc<Relay>>,
    ) -> Result<Value, Failure> {
        let negotiated = self.connect().await?;
        match self.exchange(&negotiated, method, params.clone(), relay).await {
            Err(Failure::Status(status, why))
                if !negotiated.modern
                    && negotiated.session_id.is_some()
                    && (status == 404 || (status == 400 && why.to_ascii_lowercase().contains("session")))
                    && self.lost(&negotiated).await =>
            {
                let negotiated = self.connect().await?;
                self.exchange(&negotiated, method, params, relay)
                    .await
                    .map(|(r, _)| r)
            }
            other => other.map(|(result, _)| result),
        }
    }

    /// Whether the session in use was lost: it is forgotten, so the next connect makes a new one.
    async fn lost(&self, negotiated: &Negotiated) -> bool {
        let mut state = self.state.lock().await;
        let same = state
            .as_ref()
            .is_some_and(|s| s.session_id == negotiated.session_id);
        if same {
            *state = None;
        }
        same
    }

    /// Every item of a listing (`tools/list` → `tools`, `prompts/list` → `prompts`), page
    /// after page (only an absent `nextCursor` ends it).
    pub async fn list_all(&self, method: &str, key: &str, deadline: Duration) -> Result<Vec<Value>, Failure> {
        let mut items = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let mut params = Map::new();
            if let Some(cursor) = cursor.take() {
                params.insert("cursor".into(), cursor);
            }
            let result = self.request(method, params, deadline).await?;
            if let Some(page) = result.get(key).and_then(Value::as_array) {
                items.extend(page.iter().filter(|t| t.is_object()).cloned());
            }
            match result.get("nextCursor") {
                Some(next) if next.is_string() => cursor = Some(next.clone()),
                _ => {
                    if method == "tools/list" {
                        let mut learnt = ToolHeaderSchemas::default();
                        learnt.learn_tools(&items);
                        *self.param_headers.lock().expect("the param headers lock") = learnt;
                    }
                    return Ok(items);
                }
            }
        }
        Err(Failure::Unavailable(format!(
            "{method} went on for more than {MAX_PAGES} pages"
        )))
    }

    /// The stream the server announces changes on: a legacy session's GET stream, or the
    /// answer to a 2026-07-28 `subscriptions/listen` for `toolsListChanged` (and
    /// `promptsListChanged` when it has prompts); None when the server declared no list
    /// changes or refused the stream.
    /// `resources`: the URIs a 2026-07-28 server's listen stream subscribes to.
    pub async fn open_changes(&self, resources: &[String]) -> Result<Option<Incoming>, Failure> {
        if let Some(oauth) = &self.oauth {
            oauth.bearer(&self.client).await?;
        }
        let negotiated = self.connect().await?;
        // A legacy server that logs, or takes subscriptions, sends those there too (`logs`,
        // `subscriptions`).
        let caps = &negotiated.capabilities;
        let legacy_extra =
            caps.get("logging").is_some() || caps.pointer("/resources/subscribe") == Some(&json!(true));
        let extra = if negotiated.modern {
            !resources.is_empty()
        } else {
            legacy_extra
        };
        if !negotiated.list_changed && !extra {
            return Ok(None);
        }
        let request = if negotiated.modern {
            let mut params = Map::new();
            let mut wanted = json!({"toolsListChanged": true});
            if negotiated.capabilities.pointer("/prompts/listChanged") == Some(&Value::Bool(true)) {
                wanted["promptsListChanged"] = json!(true);
            }
            if !resources.is_empty() {
                wanted["resourceSubscriptions"] = json!(resources);
            }
            params.insert("notifications".into(), wanted);
            let params = self.stamped(&negotiated, params);
            let id = self.next_id();
            self.build(&negotiated, Some("subscriptions/listen"), Some(&params), Some(id))?
        } else {
            self.build(&negotiated, None, None, None)?
        };
        let response = self.transmit(request).await?;
        let streams = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        if response.status() != 200 || !streams {
            if response.status() == 404 && !negotiated.modern {
                self.lost(&negotiated).await;
            }
            return Ok(None);
        }
        Ok(Some(response.into_body()))
    }

    /// End a legacy session at the server (`DELETE`), within a second; best effort.
    pub async fn close(&self) {
        self.sse_forget(); // this transport ends its session by closing the stream
        let Some(negotiated) = self.state.lock().await.take().filter(|_| !self.is_legacy_sse()) else {
            return;
        };
        let Some(session) = negotiated.session_id.filter(|_| !negotiated.modern) else {
            return;
        };
        let mut builder = Request::delete(self.uri.clone())
            .header("mcp-session-id", session.as_str())
            .header("mcp-protocol-version", negotiated.protocol_version.as_str());
        if let Ok(headers) = self.configured_headers() {
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
        }
        if let Ok(request) = builder.body(Full::new(Bytes::new())) {
            let _ = tokio::time::timeout(Duration::from_secs(1), self.client.request(request)).await;
        }
    }
}
