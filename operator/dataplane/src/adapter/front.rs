//! The adapter's HTTP entry: `/healthz`, `/readyz` (open to anyone: the kubelet's probes
//! carry no token), `/metrics` (with `--metrics-access`, only the scrapers it lists), and
//! the MCP endpoint —
//! Host/Origin first, then the era (a `MCP-Protocol-Version` naming no handshake revision
//! is the stateless 2026-07-28 entry), then the legacy session protocol by method (POST,
//! GET, DELETE). A forwarded call is answered as JSON, or as SSE once something related to
//! it (progress, a server request) comes before its answer and the client accepts SSE.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::audit::{Audit, ToolName, outcome_of, tool_of};
use super::budget::{self, BodyBudget};
use super::core::Core;
use super::router::{CallSink, Envelope, declared_capabilities};
use crate::auth::gate::Gate;
use crate::era::{self, Admission, RoutingHeaders};
use crate::hosts::{HostPolicy, Refusal};
use crate::http::{self, Body};
use crate::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};

/// JSON-RPC code of a call that was not answered in time (the SDK's REQUEST_TIMEOUT).
const REQUEST_TIMEOUT: i64 = -32001;

pub struct Front {
    pub core: Arc<Core>,
    pub hosts: HostPolicy,
    pub budget: Arc<BodyBudget>,
    /// Who may call (`--auth kubernetes`); None when authentication is off.
    pub gate: Option<Gate>,
    /// Who may read `/metrics` (`--metrics-access`); None: anyone.
    pub scrapers: Option<Gate>,
    pub audit: Option<Arc<Audit>>,
}

/// Who is asking: the key its sessions are counted and owned by, and its audit form.
pub struct Caller {
    key: String,
    audit: Value,
}

impl Front {
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let path = request.uri().path();
        match (request.method(), path) {
            (&Method::GET, "/healthz") => {
                let (running, body) = self.health(running_status);
                return http::json(if running { 200 } else { 503 }, &body);
            }
            (&Method::GET, "/readyz") => {
                let (ready, body) = self.health(|_| self.core.ready());
                return http::json(if ready { 200 } else { 503 }, &body);
            }
            (&Method::GET, "/metrics") => {
                if let Some(scrapers) = &self.scrapers
                    && let Err(refusal) = scrapers.admit(&request)
                {
                    return refusal;
                }
                return self.metrics();
            }
            _ => {}
        }
        if path != self.core.config.path {
            return http::plain(404, "Not Found");
        }
        match self
            .hosts
            .check(http::header(&request, "host"), http::header(&request, "origin"))
        {
            Some(Refusal::Host) => return http::plain(421, "Invalid Host header"),
            Some(Refusal::Origin) => return http::plain(403, "Invalid Origin header"),
            None => {}
        }
        let caller = match &self.gate {
            Some(gate) => match gate.admit(&request) {
                Ok(verified) => Caller {
                    key: verified.username(),
                    audit: verified.audit(),
                },
                Err(refusal) => return refusal,
            },
            None => Caller {
                key: peer.ip().to_string(),
                audit: serde_json::json!({"kind": "anonymous"}),
            },
        };
        let _reservation = if request.method() == Method::POST {
            match self.budget.reserve(http::header(&request, "content-length")) {
                Ok(reservation) => Some(reservation),
                Err(budget::Refused::TooLarge) => {
                    let limit = self.core.config.max_body_bytes;
                    return http::plain(
                        413,
                        &format!("Request body too large: the limit is {limit} bytes"),
                    );
                }
                Err(budget::Refused::Spent) => {
                    // Read and drop the body (within its limit), so that the client, still
                    // sending, reads the refusal rather than a reset connection.
                    let config = &self.core.config;
                    http::discard(request, config.max_body_bytes, config.body_timeout()).await;
                    return unavailable(None, "Too many request bytes in flight; retry later");
                }
            }
        } else {
            None
        };
        if era::is_modern(http::header(&request, "mcp-protocol-version")) {
            return self.stateless(request, &caller).await;
        }
        match *request.method() {
            Method::POST => self.legacy_post(request, &caller).await,
            Method::GET => self.legacy_get(&request, &caller),
            Method::DELETE => self.legacy_delete(&request, &caller),
            _ => {
                let mut response = http::plain(405, "Method Not Allowed");
                response.headers_mut().insert(
                    "allow",
                    hyper::header::HeaderValue::from_static("GET, POST, DELETE"),
                );
                response
            }
        }
    }

    /// The health body, with the byte budget's limits; `ok` decides the status.
    fn health(&self, ok: impl Fn(bool) -> bool) -> (bool, Value) {
        let (running, mut body) = self.core.health();
        let ok = ok(running);
        body["status"] = Value::from(if ok { "ok" } else { "unavailable" });
        let limits = &mut body["limits"];
        limits["inflightBytes"] = Value::from(self.budget.in_use());
        limits["maxInflightBytes"] = Value::from(self.budget.limit());
        limits["refusedForBytes"] = Value::from(self.budget.refused());
        (ok, body)
    }

    fn metrics(&self) -> Response<Body> {
        let (sessions, inflight, unattributed) = {
            let router = self.core.router();
            (
                router.sessions.len(),
                router.inflight(),
                (router.unattributed_log, router.unattributed_request),
            )
        };
        let page = self.core.metrics.encode(sessions, inflight, unattributed);
        let mut response = http::plain(200, &page);
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        response
    }

    // ------------------------------------------------------------------ the legacy era

    async fn legacy_post(&self, request: Request<Incoming>, caller: &Caller) -> Response<Body> {
        let accept = http::header(&request, "accept").unwrap_or("*/*").to_owned();
        let json_ok = accept.contains("application/json") || accept.contains("*/*");
        let sse_ok = accept.contains("text/event-stream");
        if !json_ok && !sse_ok {
            return http::plain(406, "Accept must include application/json or text/event-stream");
        }
        let session_id = http::header(&request, "mcp-session-id").map(str::to_owned);
        let mut message = match http::read_json(
            request,
            self.core.config.max_body_bytes,
            self.core.config.body_timeout(),
        )
        .await
        {
            Ok(message) => message,
            Err(error) => return error.response(),
        };
        if !message.is_object() || message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            let text = if message.is_array() {
                "Batches are not supported"
            } else {
                "Invalid JSON-RPC message"
            };
            return http::json(400, &jsonrpc::error_response(None, INVALID_REQUEST, text));
        }
        let method = message.get("method").cloned();
        if method.as_ref().and_then(Value::as_str) == Some("initialize") {
            return self.initialize(&message, &caller.key);
        }
        let id = message.get("id").cloned();
        let Some(session_id) = session_id else {
            return http::json(
                400,
                &jsonrpc::error_response(id.as_ref(), INVALID_REQUEST, "Missing Mcp-Session-Id header"),
            );
        };
        if !self.owns(&session_id, caller) {
            return http::json(
                404,
                &jsonrpc::error_response(id.as_ref(), INVALID_REQUEST, "Session not found"),
            );
        }
        let Some(method) = method else {
            if id.is_some() && (message.get("result").is_some() || message.get("error").is_some()) {
                let line = self.core.router().forward_response(&mut message, &session_id);
                self.core.write(line);
                return http::empty(202);
            }
            return http::json(
                400,
                &jsonrpc::error_response(None, INVALID_REQUEST, "Invalid JSON-RPC message"),
            );
        };
        let Some(method) = method.as_str().map(str::to_owned) else {
            return http::json(
                400,
                &jsonrpc::error_response(None, INVALID_REQUEST, "Invalid method"),
            );
        };
        let Some(id) = id else {
            let line = self
                .core
                .router()
                .forward_notification(&message, Some(&session_id));
            self.core.write(line);
            return http::empty(202);
        };
        if !jsonrpc::valid_id(&id) {
            return http::json(
                400,
                &jsonrpc::error_response(None, INVALID_REQUEST, "Invalid request id"),
            );
        }
        let session = Some(session_id.as_str());
        self.forward(
            message,
            &method,
            session,
            sse_ok,
            None,
            Envelope::default(),
            caller,
        )
        .await
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
        if !params.get("capabilities").is_some_and(Value::is_object)
            || !params.get("clientInfo").is_some_and(Value::is_object)
        {
            return http::json(
                400,
                &jsonrpc::error_response(Some(id), INVALID_PARAMS, "Invalid initialize params"),
            );
        }
        let Some(child_result) = self.core.init_result() else {
            return unavailable(Some(id), "The MCP server is not ready");
        };
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let result = era::initialize_result(&child_result, requested);
        let version = result["protocolVersion"].as_str().unwrap_or_default().to_owned();
        let declared = declared_capabilities(params.get("capabilities"));
        let opened = self
            .core
            .router()
            .sessions
            .open(caller, version, declared, Instant::now());
        let Ok((session_id, evicted)) = opened else {
            return unavailable(Some(id), "Too many sessions");
        };
        for old in evicted {
            tracing::debug!("Evicted idle session {} to make room for {session_id}", old.id);
        }
        let mut response = http::json(200, &jsonrpc::result_response(id, result));
        if let Ok(value) = hyper::header::HeaderValue::from_str(&session_id) {
            response.headers_mut().insert("mcp-session-id", value);
        }
        response
    }

    /// Whether the session exists (touched) and was opened by this caller: another caller's
    /// session is as good as unknown (404).
    fn owns(&self, session_id: &str, caller: &Caller) -> bool {
        let mut router = self.core.router();
        router
            .sessions
            .lookup(session_id, Instant::now())
            .is_some_and(|s| s.caller == caller.key)
    }

    fn legacy_get(&self, request: &Request<Incoming>, caller: &Caller) -> Response<Body> {
        if !http::header(request, "accept")
            .unwrap_or_default()
            .contains("text/event-stream")
        {
            return http::plain(406, "Accept must include text/event-stream");
        }
        let Some(session_id) = http::header(request, "mcp-session-id") else {
            return http::plain(400, "Missing Mcp-Session-Id header");
        };
        if !self.owns(session_id, caller) {
            return http::plain(404, "Session not found");
        }
        let mut router = self.core.router();
        let Some(session) = router.sessions.get_mut(session_id) else {
            return http::plain(404, "Session not found");
        };
        if session.stream.as_ref().is_some_and(|s| !s.is_closed()) {
            return http::plain(409, "Only one GET stream per session");
        }
        let (sender, receiver) = mpsc::channel(self.core.config.stream_queue);
        session.stream = Some(sender);
        session.last_active = Instant::now();
        http::events(receiver)
    }

    fn legacy_delete(&self, request: &Request<Incoming>, caller: &Caller) -> Response<Body> {
        let Some(session_id) = http::header(request, "mcp-session-id") else {
            return http::plain(400, "Missing Mcp-Session-Id header");
        };
        if !self.owns(session_id, caller) {
            return http::plain(404, "Session not found");
        }
        self.core.end_session(session_id, "Session deleted by the client");
        http::empty(200)
    }

    // ------------------------------------------------------------------ the 2026-07-28 era

    async fn stateless(&self, request: Request<Incoming>, caller: &Caller) -> Response<Body> {
        if request.method() != Method::POST {
            let mut response = http::plain(405, "Method Not Allowed");
            response
                .headers_mut()
                .insert("allow", hyper::header::HeaderValue::from_static("POST"));
            return response;
        }
        let accept = http::header(&request, "accept").unwrap_or("*/*").to_owned();
        if !accept.contains("application/json") && !accept.contains("*/*") {
            return http::plain(406, "Accept must include application/json");
        }
        let sse_ok = accept.contains("text/event-stream");
        let owned: Vec<(String, Vec<String>)> = ["mcp-protocol-version", "mcp-method", "mcp-name"]
            .iter()
            .map(|name| {
                (
                    (*name).to_owned(),
                    http::header_all(&request, name)
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                )
            })
            .collect();
        let param_headers: Vec<(String, String)> = request
            .headers()
            .iter()
            .filter(|(name, _)| name.as_str().starts_with("mcp-param-"))
            .filter_map(|(name, value)| {
                Some((name.as_str().to_owned(), value.to_str().ok()?.trim().to_owned()))
            })
            .collect();
        let mut message = match http::read_json(
            request,
            self.core.config.max_body_bytes,
            self.core.config.body_timeout(),
        )
        .await
        {
            Ok(message) => message,
            Err(error) => return error.response(),
        };
        let routing = RoutingHeaders {
            version: owned[0].1.iter().map(String::as_str).collect(),
            method: owned[1].1.iter().map(String::as_str).collect(),
            name: owned[2].1.iter().map(String::as_str).collect(),
        };
        let version = match era::classify_modern(&message, &routing) {
            Admission::Refused { status, message } => return http::json(status, &message),
            Admission::Notification => return http::empty(202),
            Admission::Call { version } => version,
        };
        let id = message["id"].clone();
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let Some(child_result) = self.core.init_result() else {
            return unavailable(Some(&id), "The MCP server is not ready");
        };
        if method == "server/discover" {
            let result = era::discover_result(&child_result, &version);
            return http::json(200, &jsonrpc::result_response(&id, result));
        }
        if !era::MODERN_REQUESTS.contains(&method.as_str()) || method == "subscriptions/listen" {
            let text = format!("Method not found: {method}");
            return http::json(404, &jsonrpc::error_response(Some(&id), METHOD_NOT_FOUND, &text));
        }
        if method == "tools/call"
            && let Some(params) = message.get("params").and_then(Value::as_object)
            && let Some(why) = self.core.router().tool_headers.check(params, &param_headers)
        {
            return http::json(
                400,
                &jsonrpc::error_response(Some(&id), jsonrpc::HEADER_MISMATCH, &why),
            );
        }
        let mut envelope = Envelope::default();
        if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
            let meta = params.get("_meta");
            envelope.log_level = meta
                .and_then(|m| m.get(era::LOG_LEVEL_META_KEY))
                .and_then(Value::as_str)
                .map(str::to_owned);
            if era::INPUT_REQUIRED_METHODS.contains(&method.as_str()) && params.contains_key("requestState") {
                let text = "requestState names no input-required round of this server";
                return http::json(400, &jsonrpc::error_response(Some(&id), INVALID_PARAMS, text));
            }
            era::strip_envelope(params);
        }
        self.forward(
            message,
            &method,
            None,
            sse_ok,
            Some((version, child_result)),
            envelope,
            caller,
        )
        .await
    }

    // ------------------------------------------------------------------ forwarding a call

    #[allow(clippy::too_many_arguments)]
    async fn forward(
        &self,
        mut message: Value,
        method: &str,
        session: Option<&str>,
        sse_ok: bool,
        modern: Option<(String, Arc<Value>)>,
        envelope: Envelope,
        caller: &Caller,
    ) -> Response<Body> {
        let client_id = message["id"].clone();
        let audited =
            (method == "tools/call" && self.audit.is_some()).then(|| tool_of(message.get("params")));
        let (answer, mut answered) = oneshot::channel();
        let (related, mut relayed) = mpsc::channel(self.core.config.stream_queue);
        let sink = CallSink::new(answer, sse_ok.then_some(related));
        let forwarded = self
            .core
            .router()
            .forward_request(&mut message, session, sink, envelope);
        drop(message); // the line is all the child needs: no decoded body waits with the call
        let child_id = match forwarded {
            Ok((child_id, line)) => {
                if let Some(session) = session
                    && let Some(session) = self.core.router().sessions.get_mut(session)
                {
                    session.open_requests += 1;
                }
                self.core.write([line]);
                child_id
            }
            Err(full) => return unavailable(Some(&client_id), &format!("Too many calls in flight ({full})")),
        };
        let finish = Finish {
            core: self.core.clone(),
            audit: self.audit.clone().zip(audited),
            caller: caller.audit.clone(),
            method: method.to_owned(),
            modern,
            started: Instant::now(),
        };
        let mut guard = CallGuard {
            core: self.core.clone(),
            child_id,
            session: session.map(str::to_owned),
            done: false,
        };
        let mut timeout = Box::pin(tokio::time::sleep(self.core.config.request_timeout()));
        let timed_out = {
            let client_id = client_id.clone();
            move |core: &Core| {
                core.cancel(child_id, "Request timed out");
                let seconds = core.config.request_timeout_seconds;
                let text = format!("The MCP server did not answer within {seconds:.0}s");
                jsonrpc::error_response(Some(&client_id), REQUEST_TIMEOUT, &text)
            }
        };
        let gone = || jsonrpc::error_response(Some(&client_id), INTERNAL_ERROR, super::core::CHILD_EXITED);
        // Biased, related messages first: the router queues a call's progress before its
        // answer, and each of them must reach the caller before the answer ends the call.
        let first_related = tokio::select! {
            biased;
            Some(first) = relayed.recv() => first,
            reply = &mut answered => {
                guard.done = true;
                let (status, reply) = finish.reply(reply.unwrap_or_else(|_| gone()));
                return http::json(status, &reply);
            }
            () = &mut timeout => {
                guard.done = true;
                let (_, reply) = finish.reply(timed_out(&self.core));
                return http::json(200, &reply);
            }
        };
        // Something streams before the answer: the rest of this call is an SSE stream.
        let (events, receiver) = mpsc::channel(self.core.config.stream_queue);
        let gone = gone();
        tokio::spawn(async move {
            let mut guard = guard;
            if events.send(first_related).await.is_err() {
                return; // the client went: the guard cancels the call
            }
            loop {
                tokio::select! {
                    biased;
                    Some(message) = relayed.recv() => {
                        if events.send(message).await.is_err() {
                            return;
                        }
                    }
                    reply = &mut answered => {
                        guard.done = true;
                        let _ = events.send(finish.reply(reply.unwrap_or(gone)).1).await;
                        return;
                    }
                    () = events.closed() => return,
                    () = &mut timeout => {
                        guard.done = true;
                        let _ = events.send(finish.reply(timed_out(&finish.core)).1).await;
                        return;
                    }
                }
            }
        });
        http::events(receiver)
    }
}

/// What is done with a call's answer, whichever way it comes: counted, audited, shaped.
struct Finish {
    core: Arc<Core>,
    audit: Option<(Arc<Audit>, ToolName)>,
    caller: Value,
    method: String,
    modern: Option<(String, Arc<Value>)>,
    started: Instant,
}

impl Finish {
    /// The HTTP status (a 2026-07-28 error has its own) and the reply shaped for the era.
    fn reply(&self, reply: Value) -> (u16, Value) {
        let seconds = self.started.elapsed().as_secs_f64();
        let error = reply
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64);
        self.core.metrics.observe(&self.method, error.is_some(), seconds);
        if let Some((audit, tool)) = &self.audit {
            audit.record(&self.caller, tool, outcome_of(&reply), seconds);
        }
        let status = match (&self.modern, error) {
            (Some(_), Some(code)) => jsonrpc::http_status_for(code),
            _ => 200,
        };
        (status, shape(&self.method, reply, self.modern.as_ref()))
    }
}

/// A reply as the caller's era wants it: a 2026-07-28 result is typed, cache-hinted and
/// stamped with the server's identity.
fn shape(method: &str, mut reply: Value, modern: Option<&(String, Arc<Value>)>) -> Value {
    if let Some((version, child_result)) = modern
        && let Some(result) = reply.get_mut("result")
    {
        *result = era::modern_result(method, version, result.take(), child_result.get("serverInfo"));
    }
    reply
}

fn running_status(running: bool) -> bool {
    running
}

fn unavailable(id: Option<&Value>, text: &str) -> Response<Body> {
    let mut response = http::json(503, &jsonrpc::error_response(id, INTERNAL_ERROR, text));
    response
        .headers_mut()
        .insert("retry-after", hyper::header::HeaderValue::from_static("1"));
    response
}

/// Cancels its call at the child when dropped before the call ended (the client went away).
struct CallGuard {
    core: Arc<Core>,
    child_id: u64,
    session: Option<String>,
    done: bool,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.done && self.core.router().is_pending(self.child_id) {
            self.core.cancel(self.child_id, "The client disconnected");
        }
        if let Some(session) = self.session.as_deref()
            && let Some(session) = self.core.router().sessions.get_mut(session)
        {
            session.open_requests = session.open_requests.saturating_sub(1);
            session.last_active = Instant::now();
        }
    }
}
