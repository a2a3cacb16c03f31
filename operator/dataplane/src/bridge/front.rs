//! The agent's endpoint (`listen.host:listen.port` + `listen.path`) in both eras, on the
//! shared server pieces (`era`, `hosts`, `http`, `sessions`): Host/Origin first; a
//! `MCP-Protocol-Version` naming no handshake revision is the stateless 2026-07-28 entry
//! (its admission ladder, `server/discover`, typed and cache-hinted results,
//! `subscriptions/listen` streams of `subscriptions`); else legacy sessions of the bridge's
//! own (`initialize` answered by the bridge, `Mcp-Session-Id`, one GET stream per session for
//! list changes, log messages and resource updates, `logging/setLevel` and
//! `resources/subscribe` of `logs` and `subscriptions`, `DELETE`). Requests the
//! front refuses with a 4xx other than 404 and 409 leave an `invalid_request` audit line.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response};
use serde_json::{Map, Value, json};

use super::core::Core;
use super::{agent, aggregate};
use crate::era::{self, Admission, RoutingHeaders};
use crate::hosts::{HostPolicy, Refusal};
use crate::http::{self, Body};
use crate::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use crate::legacy;

/// Larger request bodies get 413.
const MAX_BODY_BYTES: usize = 4 << 20;
/// A body not received within this is refused (408) and its connection closed.
const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Messages queued on a session's GET stream.
const STREAM_QUEUE: usize = 64;

pub struct Front {
    pub core: Arc<Core>,
    pub hosts: Arc<HostPolicy>,
}

/// What answering a request decided besides its response: whether it left an audit line.
struct Answer {
    response: Response<Body>,
    audited: bool,
}

impl From<Response<Body>> for Answer {
    fn from(response: Response<Body>) -> Self {
        Self {
            response,
            audited: false,
        }
    }
}

impl Front {
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        if request.uri().path() != self.core.config.listen.path {
            return http::plain(404, "Not Found");
        }
        self.core.inflight.fetch_add(1, Ordering::SeqCst);
        let answer = self.serve(request, peer).await;
        self.core.inflight.fetch_sub(1, Ordering::SeqCst);
        let status = answer.response.status().as_u16();
        if (400..500).contains(&status) && status != 404 && status != 409 && !answer.audited {
            self.core.audit_invalid(None);
        }
        answer.response
    }

    async fn serve(&self, request: Request<Incoming>, peer: SocketAddr) -> Answer {
        match self
            .hosts
            .check(http::header(&request, "host"), http::header(&request, "origin"))
        {
            Some(Refusal::Host) => return http::plain(421, "Invalid Host header").into(),
            Some(Refusal::Origin) => return http::plain(403, "Invalid Origin header").into(),
            None => {}
        }
        let caller = peer.ip().to_string();
        if era::is_modern(http::header(&request, "mcp-protocol-version")) {
            return self.stateless(request).await;
        }
        match *request.method() {
            Method::POST => self.legacy_post(request, &caller).await,
            Method::GET => self.legacy_get(&request, &caller).into(),
            Method::DELETE => self.legacy_delete(&request, &caller).into(),
            _ => http::method_not_allowed("GET, POST, DELETE").into(),
        }
    }

    // ------------------------------------------------------------------ the legacy era

    async fn legacy_post(&self, request: Request<Incoming>, caller: &str) -> Answer {
        let accept = http::header(&request, "accept").unwrap_or("*/*").to_owned();
        if !accept.contains("application/json")
            && !accept.contains("text/event-stream")
            && !accept.contains("*/*")
        {
            return http::plain(406, "Accept must include application/json or text/event-stream").into();
        }
        let sse_ok = accept.contains("text/event-stream");
        let session_id = http::header(&request, "mcp-session-id").map(str::to_owned);
        let message = match http::read_json(request, MAX_BODY_BYTES, BODY_TIMEOUT).await {
            Ok(message) => message,
            Err(error) => return error.response().into(),
        };
        if !message.is_object() || message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            let text = if message.is_array() {
                "Batches are not supported"
            } else {
                "Invalid JSON-RPC message"
            };
            return http::json(400, &jsonrpc::error_response(None, INVALID_REQUEST, text)).into();
        }
        let method = message.get("method").and_then(Value::as_str).map(str::to_owned);
        let id = message.get("id").cloned();
        if method.as_deref() == Some("initialize") {
            return self.initialize(&message, caller).into();
        }
        let Some(session_id) = session_id else {
            let error =
                jsonrpc::error_response(id.as_ref(), INVALID_REQUEST, "Missing Mcp-Session-Id header");
            return http::json(400, &error).into();
        };
        if !self.owns(&session_id, caller) {
            let error = jsonrpc::error_response(id.as_ref(), INVALID_REQUEST, "Session not found");
            return http::json(404, &error).into();
        }
        let (Some(method), Some(id)) = (method, id) else {
            // A notification, or the client's answer to a question of a call of this session.
            match message.get("method").and_then(Value::as_str) {
                None => self.core.calls.answered(&session_id, &message),
                Some("notifications/cancelled") => {
                    let reason = "The agent cancelled the call";
                    self.core.calls.cancel(&session_id, message.get("params"), reason);
                }
                Some(_) => {}
            }
            return http::empty(202).into();
        };
        if !jsonrpc::valid_id(&id) {
            return http::json(
                400,
                &jsonrpc::error_response(None, INVALID_REQUEST, "Invalid request id"),
            )
            .into();
        }
        if method == "ping" {
            return http::json(200, &jsonrpc::result_response(&id, json!({}))).into();
        }
        if relayed(&method, &message) {
            self.touch(&session_id);
            let response = agent::serve_legacy(&self.core, &session_id, &id, &method, &message, sse_ok).await;
            return Answer {
                response,
                audited: method == "tools/call",
            };
        }
        let (reply, audited) = if method == "resources/subscribe" || method == "resources/unsubscribe" {
            let on = method == "resources/subscribe";
            let set = super::subscriptions::answer(&self.core, &session_id, message.get("params"), on).await;
            let reply = match set {
                Ok(result) => jsonrpc::result_response(&id, result),
                Err((code, text)) => jsonrpc::error_response(Some(&id), code, &text),
            };
            (reply, false)
        } else if method == "logging/setLevel" {
            let set = super::logs::set_level(&self.core, &session_id, message.get("params")).await;
            let reply = match set {
                Ok(result) => jsonrpc::result_response(&id, result),
                Err((code, text)) => jsonrpc::error_response(Some(&id), code, &text),
            };
            (reply, false)
        } else {
            self.dispatch(&method, &message, &id).await
        };
        self.touch(&session_id);
        Answer {
            response: http::json(200, &reply),
            audited,
        }
    }

    fn initialize(&self, message: &Value, caller: &str) -> Response<Body> {
        let id = message.get("id");
        let params = message.get("params").and_then(Value::as_object);
        let (Some(id), Some(params)) = (id, params) else {
            return http::json(
                400,
                &jsonrpc::error_response(id, INVALID_REQUEST, "Invalid initialize"),
            );
        };
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let speaks = rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE.as_str();
        let version = era::negotiate_version(requested, speaks);
        let declared: HashSet<String> = params
            .get("capabilities")
            .and_then(Value::as_object)
            .map(|c| c.keys().cloned().collect())
            .unwrap_or_default();
        let opened = self
            .core
            .sessions()
            .open(caller, version.clone(), declared, Instant::now());
        let Ok((session_id, evicted)) = opened else {
            return unavailable(Some(id), "Too many sessions");
        };
        for old in evicted {
            tracing::debug!("Dropped session {} to make room for {session_id}", old.id);
            self.core.calls.end_session(&old.id);
            self.core.logs.forget(&old.id);
            super::subscriptions::end_session(&self.core, &old.id);
        }
        let result = self.core.init_result(&version);
        let mut response = http::json(200, &jsonrpc::result_response(id, result));
        if let Ok(value) = HeaderValue::from_str(&session_id) {
            response.headers_mut().insert("mcp-session-id", value);
        }
        response
    }

    /// Whether the session exists and was opened by this caller (another's is unknown: 404).
    fn owns(&self, session_id: &str, caller: &str) -> bool {
        self.core
            .sessions()
            .lookup(session_id, Instant::now())
            .is_some_and(|s| s.caller == caller)
    }

    fn touch(&self, session_id: &str) {
        if let Some(session) = self.core.sessions().get_mut(session_id) {
            session.last_active = Instant::now();
        }
    }

    fn legacy_get(&self, request: &Request<Incoming>, caller: &str) -> Response<Body> {
        legacy::get_stream(request, &mut self.core.sessions(), caller, STREAM_QUEUE)
    }

    fn legacy_delete(&self, request: &Request<Incoming>, caller: &str) -> Response<Body> {
        let named = legacy::named_session(request, &mut self.core.sessions(), caller);
        match named {
            Ok(session_id) => {
                self.core.sessions().remove(&session_id);
                self.core.calls.end_session(&session_id);
                self.core.logs.forget(&session_id);
                super::subscriptions::end_session(&self.core, &session_id);
                http::empty(200)
            }
            Err(refused) => refused,
        }
    }

    // ------------------------------------------------------------------ the 2026-07-28 era

    async fn stateless(&self, request: Request<Incoming>) -> Answer {
        if request.method() != Method::POST {
            return http::method_not_allowed("POST").into();
        }
        let accept = http::header(&request, "accept").unwrap_or("*/*").to_owned();
        if !accept.contains("application/json") && !accept.contains("*/*") {
            return http::plain(406, "Accept must include application/json").into();
        }
        let sse_ok = accept.contains("text/event-stream");
        let copies = |name: &str| -> Vec<String> {
            http::header_all(&request, name)
                .into_iter()
                .map(str::to_owned)
                .collect()
        };
        let (versions, methods, names) = (
            copies("mcp-protocol-version"),
            copies("mcp-method"),
            copies("mcp-name"),
        );
        let param_headers = crate::param_headers::of_request(request.headers());
        let message = match http::read_json(request, MAX_BODY_BYTES, BODY_TIMEOUT).await {
            Ok(message) => message,
            Err(error) => return error.response().into(),
        };
        let routing = RoutingHeaders {
            version: versions.iter().map(String::as_str).collect(),
            method: methods.iter().map(String::as_str).collect(),
            name: names.iter().map(String::as_str).collect(),
        };
        let version = match era::classify_modern(&message, &routing) {
            Admission::Refused { status, message } => return http::json(status, &message).into(),
            Admission::Notification => return http::empty(202).into(),
            Admission::Call { version } => version,
        };
        let id = message["id"].clone();
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let init = self.core.init_result(&version);
        if method == "server/discover" {
            let result = era::discover_result(&init, &version);
            return http::json(200, &jsonrpc::result_response(&id, result)).into();
        }
        if method == "subscriptions/listen" && sse_ok {
            return super::subscriptions::listen(&self.core, &id, &message)
                .await
                .into();
        }
        if !era::MODERN_REQUESTS.contains(&method.as_str()) || method == "subscriptions/listen" {
            let text = format!("Method not found: {method}");
            return http::json(404, &jsonrpc::error_response(Some(&id), METHOD_NOT_FOUND, &text)).into();
        }
        if method == "tools/call"
            && let Some(params) = message.get("params").and_then(Value::as_object)
            && let Some(why) = self.core.catalog().param_headers.check(params, &param_headers)
        {
            // As the SDK's server checks them: a header that disagrees with its argument.
            let refusal = jsonrpc::error_response(Some(&id), jsonrpc::HEADER_MISMATCH, &why);
            return http::json(400, &refusal).into();
        }
        if relayed(&method, &message) {
            let response = agent::serve_modern(&self.core, &id, &method, &message, &version, sse_ok).await;
            return Answer {
                response,
                audited: method == "tools/call",
            };
        }
        let (mut reply, audited) = self.dispatch(&method, &message, &id).await;
        let code = reply
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64);
        if let Some(result) = reply.get_mut("result") {
            *result = era::modern_result(&method, &version, result.take(), init.get("serverInfo"));
        }
        Answer {
            response: http::json(code.map_or(200, jsonrpc::http_status_for), &reply),
            audited,
        }
    }

    // ------------------------------------------------------------------ both eras

    /// A request's reply (the same in both eras before shaping) and whether it was audited.
    async fn dispatch(&self, method: &str, message: &Value, id: &Value) -> (Value, bool) {
        match method {
            "tools/list" => (jsonrpc::result_response(id, self.core.listing()), false),
            "tools/call" => {
                let params = message.get("params").and_then(Value::as_object);
                let Some(params) = params.filter(|p| p.get("name").is_some_and(Value::is_string)) else {
                    let sent = params.and_then(|p| p.get("name")).cloned();
                    self.core.audit_invalid(sent);
                    let text = "tools/call needs params with a string name";
                    return (jsonrpc::error_response(Some(id), INVALID_PARAMS, text), true);
                };
                let params: Map<String, Value> = params.clone();
                (
                    jsonrpc::result_response(id, self.core.call(&params, None).await),
                    true,
                )
            }
            method if aggregate::METHODS.contains(&method) => {
                let params = message.get("params");
                (
                    aggregate::answer(&self.core, id, method, params, None).await,
                    false,
                )
            }
            _ => {
                let text = format!("Method not found: {method}");
                (jsonrpc::error_response(Some(id), METHOD_NOT_FOUND, &text), false)
            }
        }
    }
}

/// Whether a request runs as a relayed call (`agent`): one of its methods, and for
/// `tools/call` a readable one (else the pipeline's refusal answers it here).
fn relayed(method: &str, message: &Value) -> bool {
    agent::RELAYED.contains(&method)
        && (method != "tools/call"
            || message
                .get("params")
                .and_then(|p| p.get("name"))
                .is_some_and(Value::is_string))
}

fn unavailable(id: Option<&Value>, text: &str) -> Response<Body> {
    let mut response = http::json(503, &jsonrpc::error_response(id, INTERNAL_ERROR, text));
    response
        .headers_mut()
        .insert("retry-after", HeaderValue::from_static("1"));
    response
}
