//! One MCP server of the run as the bridge's client sees it: a session over Streamable
//! HTTP in either era, on the bridge's keep-alive HTTP/1.1 client (`mcp/session.py`'s rules):
//! `server/discover` first at the newest 2026-07-28 revision (straight to the handshake when
//! the server's status named a handshake revision), any rejection of it falls back to
//! `initialize` + `notifications/initialized` and an `Mcp-Session-Id`; answers as JSON or
//! SSE, their id checked against the request's; a lost legacy session established again once
//! per request; the configured headers and `tokenFile` sent with every request, never over
//! the protocol's own headers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Map, Value, json};
use tokio::sync::Mutex;

use super::config::Server;
use super::relay::Relay;
use super::sse::SseReader;
use super::upcall::Talk;
use crate::era;

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// The bridge's one HTTP client: keep-alive HTTP/1.1, at most 64 idle connections per server.
pub fn http_client() -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(Duration::from_secs(10)));
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(64)
        .pool_idle_timeout(Duration::from_secs(60))
        .build(connector)
}

/// Headers the session sets itself: a server's configured headers cannot replace them.
const PROTOCOL_HEADERS: [&str; 7] = [
    "content-type",
    "accept",
    "accept-encoding",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
];

/// An answer stream or body larger than this fails its request.
const MAX_ANSWER_BYTES: usize = 16 << 20;
/// `server/discover` unanswered this long: a legacy server.
const DISCOVER_SECONDS: u64 = 10;
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
    /// No answer within the deadline.
    Timeout,
    /// The bridge cannot send it as configured (a header file unreadable, a bad value).
    Misconfigured(String),
    /// The agent cancelled the call (`relay`): the server was told, nobody waits for it.
    Cancelled,
}

impl Failure {
    pub fn describe(&self) -> String {
        match self {
            Failure::Unavailable(why) | Failure::Misconfigured(why) | Failure::Protocol(why) => why.clone(),
            Failure::Rpc { code, message, .. } => format!("JSON-RPC error {code}: {message}"),
            Failure::Status(status, why) => format!("HTTP {status}: {why}"),
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
    state: Mutex<Option<Negotiated>>,
    ids: AtomicU64,
}

fn client_info() -> Value {
    json!({"name": "mcp-operator-bridge", "version": env!("CARGO_PKG_VERSION")})
}

/// A header value as the SDK encodes it: verbatim when a header can carry it, else
/// `=?base64?…?=`.
pub fn encode_header_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b)) && value.trim() == value;
    if plain && !value.starts_with("=?base64?") {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

impl Upstream {
    pub fn new(server: Server, client: HttpClient) -> Result<Self, String> {
        let uri: hyper::Uri = server.url.parse().map_err(|e| format!("url: {e}"))?;
        if uri.scheme_str() != Some("http") {
            return Err("url: only http:// servers are reached by this bridge yet".to_owned());
        }
        if server.transport != "streamable-http" {
            return Err(format!(
                "transport {} is not served by this bridge yet",
                server.transport
            ));
        }
        Ok(Self {
            server,
            client,
            uri,
            state: Mutex::new(None),
            ids: AtomicU64::new(1),
        })
    }

    pub async fn negotiated(&self) -> Option<Negotiated> {
        self.state.lock().await.clone()
    }

    /// Forget the session (the next request negotiates again).
    pub async fn reset(&self) {
        *self.state.lock().await = None;
    }

    /// The configured headers and the token, read now (files are re-read: the kubelet rotates
    /// them).
    pub(super) fn configured_headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, Failure> {
        let mut out = Vec::new();
        let mut named_authorization = false;
        for header in &self.server.headers {
            let lower = header.name.to_ascii_lowercase();
            if PROTOCOL_HEADERS.contains(&lower.as_str()) {
                continue;
            }
            let value = match (&header.value, &header.value_file) {
                (Some(value), _) => value.clone(),
                (None, Some(file)) => std::fs::read_to_string(file)
                    .map_err(|e| {
                        Failure::Misconfigured(format!(
                            "the value of header {} cannot be read from {}: {e}",
                            header.name,
                            file.display()
                        ))
                    })?
                    .trim()
                    .to_owned(),
                (None, None) => continue,
            };
            let name = HeaderName::from_bytes(lower.as_bytes())
                .map_err(|_| Failure::Misconfigured(format!("header name {} is not valid", header.name)))?;
            let value = HeaderValue::from_str(&value).map_err(|_| {
                Failure::Misconfigured(format!(
                    "the value of header {} has a control character",
                    header.name
                ))
            })?;
            named_authorization |= lower == "authorization";
            out.push((name, value));
        }
        if let Some(file) = &self.server.token_file
            && !named_authorization
        {
            let token = std::fs::read_to_string(file).unwrap_or_default();
            let token = token.trim();
            if token.is_empty() {
                return Err(Failure::Misconfigured(format!(
                    "the token file {} is missing or empty",
                    file.display()
                )));
            }
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Failure::Misconfigured(format!("the token in {} is not a header value", file.display()))
            })?;
            out.push((hyper::header::AUTHORIZATION, value));
        }
        Ok(out)
    }

    fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed)
    }

    /// A request to the server with the era's headers: a POST of one message, or (no
    /// `method`) the legacy session's GET stream.
    fn build(
        &self,
        negotiated: &Negotiated,
        method: Option<&str>,
        params: Option<&Map<String, Value>>,
        id: Option<u64>,
    ) -> Result<Request<Full<Bytes>>, Failure> {
        let mut builder = match method {
            Some(_) => Request::post(self.uri.clone()),
            None => Request::get(self.uri.clone()),
        };
        for (name, value) in self.configured_headers()? {
            builder = builder.header(name, value);
        }
        builder = builder.header("accept-encoding", "identity");
        if !negotiated.protocol_version.is_empty() {
            builder = builder.header("mcp-protocol-version", negotiated.protocol_version.as_str());
        }
        let body = match method {
            Some(method) => {
                let mut message = json!({"jsonrpc": "2.0", "method": method});
                if let Some(id) = id {
                    message["id"] = json!(id);
                }
                if let Some(params) = params {
                    message["params"] = Value::Object(params.clone());
                }
                builder = builder
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream");
                Bytes::from(serde_json::to_vec(&message).expect("a Value always encodes"))
            }
            None => {
                builder = builder.header("accept", "text/event-stream");
                Bytes::new()
            }
        };
        if negotiated.modern {
            let method = method.unwrap_or_default();
            builder = builder.header("mcp-method", method);
            let name = match method {
                "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")),
                "resources/read" => params.and_then(|p| p.get("uri")),
                _ => None,
            };
            if let Some(name) = name.and_then(Value::as_str)
                && let Ok(value) = HeaderValue::from_str(&encode_header_value(name))
            {
                builder = builder.header("mcp-name", value);
            }
        } else if let Some(session) = &negotiated.session_id {
            builder = builder.header("mcp-session-id", session.as_str());
        }
        builder
            .body(Full::new(body))
            .map_err(|e| Failure::Misconfigured(format!("the request cannot be made: {e}")))
    }

    async fn transmit(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, Failure> {
        self.client.request(request).await.map_err(|e| {
            Failure::Unavailable(format!(
                "{} could not be reached: {}",
                self.server.key(),
                chain(&e)
            ))
        })
    }

    /// One POST of a message; the answer's status, session id and, for a request, the
    /// response matching `id` (JSON or read off the SSE stream, where what the server says
    /// about the request on the way goes to its relay, if it has one).
    async fn post(
        &self,
        negotiated: &Negotiated,
        method: &str,
        params: Option<&Map<String, Value>>,
        id: Option<u64>,
        relay: Option<&Arc<Relay>>,
    ) -> Result<(u16, Option<String>, Option<Value>), Failure> {
        let request = self.build(negotiated, Some(method), params, id)?;
        let response = self.transmit(request).await?;
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let Some(id) = id else {
            return Ok((status, session, None));
        };
        let mut body = response.into_body();
        if content_type.starts_with("text/event-stream") && status == 200 {
            let mut talk = relay.map(|relay| Talk::new(relay.clone(), self.responder(negotiated)));
            let mut events = SseReader::default();
            while let Some(frame) = body.frame().await {
                let frame =
                    frame.map_err(|e| Failure::Unavailable(format!("the answer stream broke: {e}")))?;
                let Some(data) = frame.data_ref() else { continue };
                if events.push(data) > MAX_ANSWER_BYTES {
                    return Err(Failure::Unavailable("the answer stream is too large".to_owned()));
                }
                while let Some(message) = events.next_message() {
                    if message.get("method").is_none() {
                        if message.get("id") == Some(&json!(id)) {
                            return Ok((status, session, Some(message)));
                        }
                    } else if let Some(talk) = talk.as_mut() {
                        talk.heard(&message);
                    }
                }
            }
            return Err(Failure::Unavailable(
                "the answer stream ended before the response".to_owned(),
            ));
        }
        let bytes = http_body_util::Limited::new(body, MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| Failure::Unavailable(format!("the answer was lost: {e}")))?
            .to_bytes();
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        match parsed {
            Some(message) if message.get("id") == Some(&json!(id)) => Ok((status, session, Some(message))),
            Some(message)
                if message.get("id").is_some_and(Value::is_null) && message.get("error").is_some() =>
            {
                Ok((status, session, Some(message)))
            }
            _ if status >= 400 => Err(Failure::Status(
                status,
                String::from_utf8_lossy(&bytes).chars().take(200).collect(),
            )),
            _ => Err(Failure::Protocol(format!(
                "the answer to {method} is not a JSON-RPC response to it (HTTP {status})"
            ))),
        }
    }

    /// One request at the negotiated era; the result or how it failed.
    pub(super) async fn exchange(
        &self,
        negotiated: &Negotiated,
        method: &str,
        params: Map<String, Value>,
        relay: Option<&Arc<Relay>>,
    ) -> Result<(Value, Option<String>), Failure> {
        let params = self.stamped(negotiated, params);
        let id = self.next_id();
        if let Some(relay) = relay {
            relay.sent_as(id);
        }
        let (status, session, answer) = self
            .post(negotiated, method, Some(&params), Some(id), relay)
            .await?;
        let answer = answer.unwrap_or(Value::Null);
        if let Some(error) = answer.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if answer.get("id") != Some(&json!(id)) {
                return Err(Failure::Status(status, message)); // the transport's refusal
            }
            return Err(Failure::Rpc {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message,
                data: error.get("data").cloned(),
            });
        }
        if status >= 400 {
            return Err(Failure::Status(status, "refused".to_owned()));
        }
        match answer.get("result") {
            Some(result) if result.is_object() => Ok((result.clone(), session)),
            _ => Err(Failure::Protocol(format!(
                "the answer to {method} has no result object"
            ))),
        }
    }

    /// 2026-07-28's per-request envelope in `_meta`.
    fn stamped(&self, negotiated: &Negotiated, mut params: Map<String, Value>) -> Map<String, Value> {
        if negotiated.modern {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(
                    era::PROTOCOL_VERSION_META_KEY.into(),
                    json!(negotiated.protocol_version),
                );
                meta.insert(era::CLIENT_INFO_META_KEY.into(), client_info());
                meta.entry(era::CLIENT_CAPABILITIES_META_KEY)
                    .or_insert_with(|| json!({}));
            }
        }
        params
    }

    /// Negotiate the era (`server/discover`, else the handshake).
    async fn negotiate(&self) -> Result<Negotiated, Failure> {
        let hint = self.server.protocol_version.as_deref();
        if hint.is_some_and(era::is_handshake_version) {
            return self.initialize().await;
        }
        let mut version = era::latest_modern_version().to_owned();
        for attempt in 0..2 {
            let probe = Negotiated {
                protocol_version: version.clone(),
                session_id: None,
                modern: true,
                list_changed: false,
                capabilities: Value::Null,
            };
            let asked = self.exchange(&probe, "server/discover", Map::new(), None);
            let answered = match tokio::time::timeout(Duration::from_secs(DISCOVER_SECONDS), asked).await {
                Err(_) => return self.initialize().await,
                Ok(answered) => answered,
            };
            match answered {
                Ok((result, _)) => {
                    let supported: Vec<&str> = result
                        .get("supportedVersions")
                        .and_then(Value::as_array)
                        .map(|v| v.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let Some(mutual) = era::modern_versions_in(&supported) else {
                        return self.initialize().await;
                    };
                    return Ok(Negotiated {
                        protocol_version: mutual,
                        session_id: None,
                        modern: true,
                        list_changed: announces_changes(&result),
                        capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
                    });
                }
                Err(Failure::Rpc { code, data, .. })
                    if code == crate::jsonrpc::UNSUPPORTED_PROTOCOL_VERSION =>
                {
                    let supported: Vec<&str> = data
                        .as_ref()
                        .and_then(|d| d.get("supported"))
                        .and_then(Value::as_array)
                        .map(|v| v.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    if let Some(mutual) = era::modern_versions_in(&supported)
                        && attempt == 0
                    {
                        version = mutual;
                        continue;
                    }
                    return self.initialize().await;
                }
                Err(failure @ (Failure::Unavailable(_) | Failure::Misconfigured(_) | Failure::Timeout)) => {
                    return Err(failure);
                }
                Err(Failure::Status(status @ (401 | 403), why)) => return Err(Failure::Status(status, why)),
                Err(_) => return self.initialize().await,
            }
        }
        self.initialize().await
    }

    async fn initialize(&self) -> Result<Negotiated, Failure> {
        let latest = rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE
            .as_str()
            .to_owned();
        let fresh = Negotiated::default();
        // A legacy server's one session serves every agent: it is told all the bridge can
        // relay (a server offers some tools only to clients that declared sampling); each of
        // its requests is then checked against what its own agent declared (`relay`).
        let params = json!({
            "protocolVersion": latest,
            "capabilities": {"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}},
            "clientInfo": client_info(),
        });
        let Value::Object(params) = params else {
            unreachable!()
        };
        let (result, session_id) = self.exchange(&fresh, "initialize", params, None).await?;
        let version = result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        if !era::is_handshake_version(&version) {
            return Err(Failure::Unavailable(format!(
                "the server chose protocol version {version}, which this client does not speak"
            )));
        }
        let negotiated = Negotiated {
            protocol_version: version,
            session_id,
            modern: false,
            list_changed: announces_changes(&result),
            capabilities: result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        };
        self.post(&negotiated, "notifications/initialized", None, None, None)
            .await?;
        Ok(negotiated)
    }

    /// The negotiated session, negotiating first when there is none.
    pub async fn connect(&self) -> Result<Negotiated, Failure> {
        let mut state = self.state.lock().await;
        if let Some(negotiated) = state.as_ref() {
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
                _ => return Ok(items),
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
    pub async fn open_changes(&self) -> Result<Option<Incoming>, Failure> {
        let negotiated = self.connect().await?;
        if !negotiated.list_changed {
            return Ok(None);
        }
        let request = if negotiated.modern {
            let mut params = Map::new();
            let mut wanted = json!({"toolsListChanged": true});
            if negotiated.capabilities.pointer("/prompts/listChanged") == Some(&Value::Bool(true)) {
                wanted["promptsListChanged"] = json!(true);
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
        let Some(negotiated) = self.state.lock().await.take() else {
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

/// Whether an InitializeResult or DiscoverResult declares `tools.listChanged` or
/// `prompts.listChanged`.
fn announces_changes(result: &Value) -> bool {
    [
        "/capabilities/tools/listChanged",
        "/capabilities/prompts/listChanged",
    ]
    .iter()
    .any(|pointer| result.pointer(pointer) == Some(&Value::Bool(true)))
}

/// Why the server cannot be called as configured, read now (`bridge/upstreams.py`'s rule):
/// a header file that cannot be read, or a header that would break or forge the request's
/// head; the reason (`UnreadableHeader`, `InvalidHeader`) and a sentence without the value.
pub fn header_problem(server: &Server) -> Option<(&'static str, String)> {
    let key = server.key();
    let mut values = Vec::new();
    for header in &server.headers {
        match (&header.value, &header.value_file) {
            (Some(value), _) => values.push((header.name.as_str(), value.clone())),
            (None, Some(file)) => match std::fs::read_to_string(file) {
                Ok(text) => values.push((header.name.as_str(), text.trim().to_owned())),
                Err(error) => {
                    let why = error.to_string();
                    let why = why.split(" (os error").next().unwrap_or_default();
                    return Some((
                        "UnreadableHeader",
                        format!(
                            "header {} could not be read from {} ({why}), so the bridge does not call server {key} (check the Secret and its mount)",
                            header.name,
                            file.display()
                        ),
                    ));
                }
            },
            (None, None) => {}
        }
    }
    for (name, value) in values {
        let lowered = name.to_ascii_lowercase();
        let refusal = if name.is_empty() || HeaderName::from_bytes(name.as_bytes()).is_err() {
            format!("the header name '{name}' is not a valid HTTP token")
        } else if [
            "content-length",
            "transfer-encoding",
            "connection",
            "keep-alive",
            "te",
            "trailer",
            "upgrade",
            "host",
        ]
        .contains(&lowered.as_str())
        {
            format!("the header '{name}' frames the request, which only the client may do")
        } else if lowered == "expect" {
            format!("the header '{name}' asks for an interim answer, which the client never awaits")
        } else if value
            .chars()
            .any(|c| (c < ' ' && c != '\t') || c == '\u{7f}' || c as u32 > 0xff)
        {
            format!("the value of header '{name}' holds a control character or non-Latin-1 text")
        } else {
            continue;
        };
        return Some((
            "InvalidHeader",
            format!(
                "{refusal}, so the bridge does not call server {key} (fix the header's value or its Secret)"
            ),
        ));
    }
    None
}

/// Every header value (and token) a server is sent: what the scrubber masks.
pub fn secret_values(server: &Server) -> Vec<String> {
    let mut values: Vec<String> = server
        .headers
        .iter()
        .filter_map(|header| match (&header.value, &header.value_file) {
            (Some(value), _) => Some(value.clone()),
            (None, Some(file)) => std::fs::read_to_string(file).ok().map(|t| t.trim().to_owned()),
            (None, None) => None,
        })
        .collect();
    if let Some(token) = server
        .token_file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
    {
        values.push(format!("Bearer {}", token.trim()));
    }
    values
}

fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_a_header_cannot_carry_are_base64() {
        assert_eq!(encode_header_value("get_time"), "get_time");
        assert_eq!(encode_header_value("é"), "=?base64?w6k=?=");
        assert_eq!(encode_header_value(" x"), "=?base64?IHg=?=");
    }
}
