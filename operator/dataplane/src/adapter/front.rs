//! The adapter's HTTP entry: `/healthz`, `/readyz` (open to anyone: the kubelet's probes
//! carry no token), `/metrics` (with `--metrics-access`, only the scrapers it lists), and
//! the MCP endpoint —
//! Host/Origin first, then the era (a `MCP-Protocol-Version` naming no handshake revision
//! is the stateless 2026-07-28 entry), then the legacy session protocol by method (POST,
//! GET, DELETE). A forwarded call is answered as JSON, or as SSE once something related to
//! it (progress, a server request) comes before its answer and the client accepts SSE.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Sleep;

use super::audit::{Audit, ToolName, outcome_of, tool_of};
use super::budget::{self, BodyBudget};
use super::core::Core;
use super::listeners::{self, Listener};
use super::router::{CallSink, Envelope};
use super::upstream::{Forwarding, Upstream};
use crate::auth::gate::Gate;
use crate::capabilities::declared_capabilities;
use crate::era::{self, Admission, RoutingHeaders};
use crate::hosts::{HostPolicy, Refusal};
use crate::http::{self, Body};
use crate::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND};
use crate::legacy;
use crate::rounds::{self, Ask, RoundStore};

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
    /// 2026-07-28 calls waiting for their callers' input.
    pub rounds: Arc<InputRounds>,
    /// Front mode (`--upstream-url`): the HTTP server of the Pod that checked requests go to.
    pub upstream: Option<Arc<Upstream>>,
}

/// How long to wait for more questions of the child before answering with the ones so far,
/// and at most how many such waits (a child that keeps asking is answered after 100 ms).
const SETTLE: Duration = Duration::from_millis(10);
const SETTLE_ROUNDS: usize = 10;

/// Who is asking: the key its sessions are counted and owned by, and its audit form.
pub struct Caller {
    pub key: String,
    audit: Value,
}

/// The checks before the MCP endpoint serves anyone: Host and Origin, then who calls (the
/// verified identity, or the client's address with authentication off).
pub fn admit(
    hosts: &HostPolicy,
    gate: Option<&Gate>,
    request: &Request<Incoming>,
    peer: SocketAddr,
) -> Result<Caller, Response<Body>> {
    match hosts.check(http::header(request, "host"), http::header(request, "origin")) {
        Some(Refusal::Host) => return Err(http::plain(421, "Invalid Host header")),
        Some(Refusal::Origin) => return Err(http::plain(403, "Invalid Origin header")),
        None => {}
    }
    Ok(match gate {
        Some(gate) => {
            let verified = gate.admit(request)?;
            Caller {
                key: verified.username(),
                audit: verified.audit(),
            }
        }
        None => Caller {
            key: peer.ip().to_string(),
            audit: serde_json::json!({"kind": "anonymous"}),
        },
    })
}

impl Front {
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let path = request.uri().path();
        match (request.method(), path) {
            (&Method::GET, "/healthz" | "/readyz") if self.upstream.is_some() => {
                let upstream = self.upstream.as_ref().expect("front mode");
                let ok = path == "/healthz" || upstream.accepts().await;
                let body = upstream.health(ok, self.core.config.auth.name());
                return http::json(if ok { 200 } else { 503 }, &body);
            }
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
        let caller = match admit(&self.hosts, self.gate.as_ref(), &request, peer) {
            Ok(caller) => caller,
            Err(refused) => return refused,
        };
        self.serve_mcp(request, &caller).await
    }

    /// The MCP endpoint for an admitted caller: the byte budget, then front mode or the eras.
    pub async fn serve_mcp(&self, request: Request<Incoming>, caller: &Caller) -> Response<Body> {
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
        if let Some(upstream) = &self.upstream {
            let config = &self.core.config;
            let forwarding = Forwarding {
                max_body_bytes: config.max_body_bytes,
                body_timeout: config.body_timeout(),
                request_timeout: config.request_timeout(),
                audit: self.audit.as_deref().map(|audit| (audit, &caller.audit)),
                metrics: &self.core.metrics,
            };
            return upstream.forward(request, forwarding).await;
        }
        if era::is_modern(http::header(&request, "mcp-protocol-version")) {
            return self.stateless(request, caller).await;
        }
        match *request.method() {
            Method::POST => self.legacy_post(request, caller).await,
            Method::GET => self.legacy_get(&request, caller),
            Method::DELETE => self.legacy_delete(&request, caller),
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
        let mut message = match self.read_body(request).await {
            Ok(message) => message,
            Err(refused) => return refused,
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
            None,
        )
        .await
    }

    /// A legacy `initialize`: a session opened for `caller` with the child's capabilities.
    pub fn initialize(&self, message: &Value, caller: &str) -> Response<Body> {
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
        let queue = self.core.config.stream_queue;
        legacy::get_stream(request, &mut self.core.router().sessions, &caller.key, queue)
    }

    fn legacy_delete(&self, request: &Request<Incoming>, caller: &Caller) -> Response<Body> {
        let named = legacy::named_session(request, &mut self.core.router().sessions, &caller.key);
        match named {
            Ok(session_id) => {
                self.core
                    .end_session(&session_id, "Session deleted by the client");
                http::empty(200)
            }
            Err(refused) => refused,
        }
    }

    /// A request's JSON body within the body limit and deadline, or the answer refusing it.
    async fn read_body(&self, request: Request<Incoming>) -> Result<Value, Response<Body>> {
        let config = &self.core.config;
        http::read_json(request, config.max_body_bytes, config.body_timeout())
            .await
            .map_err(|error| error.response())
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
        let mut message = match self.read_body(request).await {
            Ok(message) => message,
            Err(refused) => return refused,
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
        if method == "subscriptions/listen" {
            return self.listen(id, &message, &child_result);
        }
        if !era::MODERN_REQUESTS.contains(&method.as_str()) {
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
            envelope.capabilities =
                declared_capabilities(meta.and_then(|m| m.get(era::CLIENT_CAPABILITIES_META_KEY)));
            era::strip_envelope(params);
        }
        let mut round = None;
        if era::INPUT_REQUIRED_METHODS.contains(&method.as_str()) {
            if !message.get("params").is_some_and(Value::is_object) {
                message["params"] = json!({});
            }
            let params = message["params"].as_object_mut().expect("made an object above");
            let Some(answers) = rounds::input_responses(params) else {
                let text = "inputResponses must be an object whose values are results";
                return http::json(400, &jsonrpc::error_response(Some(&id), INVALID_PARAMS, text));
            };
            let target = rounds::request_target(&method, Some(params));
            if let Some(state) = params.remove("requestState") {
                return self.resume(id, &method, state, target, answers).await;
            }
            round = Some(Round {
                method: method.clone(),
                target,
                answers,
                asked: BTreeMap::new(),
            });
        }
        self.forward(
            message,
            &method,
            None,
            sse_ok,
            Some((version, child_result)),
            envelope,
            caller,
            round,
        )
        .await
    }

    /// A `subscriptions/listen` stream: acknowledged first (with what the child can honor of
    /// the filter), then the child's notifications it agreed to carry, until the caller goes.
    fn listen(&self, id: Value, message: &Value, child_result: &Value) -> Response<Body> {
        let requested = message
            .get("params")
            .and_then(|p| p.get("notifications"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let agreed = listeners::honored(&requested, child_result.get("capabilities"));
        let (sender, receiver) = mpsc::channel(self.core.config.stream_queue);
        let listener = Listener::new(id.clone(), sender, &agreed);
        {
            let mut router = self.core.router();
            router.listeners.retain(|l| l.offer("", &Value::Null));
            if router.listeners.len() >= self.core.config.max_sessions {
                return unavailable(Some(&id), "Too many listen streams");
            }
            listener.acknowledge(&agreed);
            let uris: Vec<String> = listener.uris.iter().cloned().collect();
            router.listeners.push(listener);
            drop(router);
            for uri in uris {
                self.core.subscribe_child(&uri);
            }
        }
        http::events(receiver)
    }

    // ------------------------------------------------------------------ input-required rounds

    /// A retry with `requestState`: the parked call gets the answers and goes on waiting (or is
    /// parked again for what is still unanswered); 400 for a state that names nothing this
    /// request may resume.
    async fn resume(
        &self,
        id: Value,
        method: &str,
        state: Value,
        target: Option<String>,
        answers: Map<String, Value>,
    ) -> Response<Body> {
        let (parked, dropped) = match state.as_str() {
            Some(token) => self.rounds.take(token, method, target.as_deref(), Instant::now()),
            None => (None, Vec::new()),
        };
        self.rounds
            .drop_parked(dropped, "The caller did not retry in time");
        let Some(mut waiting) = parked else {
            let text = "requestState is unknown, expired, altered or not for this request";
            return http::json(400, &jsonrpc::error_response(Some(&id), INVALID_PARAMS, text));
        };
        waiting.client_id = id;
        waiting.timeout = Box::pin(tokio::time::sleep(self.core.config.request_timeout()));
        let round = waiting.round.as_mut().expect("a parked call has its round");
        round.answers = answers;
        let asked = std::mem::take(&mut round.asked);
        let mut missing = BTreeMap::new();
        for (key, ask) in asked {
            match round.answers.remove(&key) {
                Some(answer) => self.core.answer_asked(&ask.child_request_id, answer),
                None => {
                    missing.insert(key, ask);
                }
            }
        }
        if !missing.is_empty() {
            return http::json(200, &self.rounds.park(waiting, missing));
        }
        self.answer(waiting).await
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
        round: Option<Round>,
    ) -> Response<Body> {
        let client_id = message["id"].clone();
        let audited =
            (method == "tools/call" && self.audit.is_some()).then(|| tool_of(message.get("params")));
        let (answer, answered) = oneshot::channel();
        let (related, relayed) = mpsc::channel(self.core.config.stream_queue);
        let mut sink = CallSink::new(answer, sse_ok.then_some(related));
        let asks = round.is_some().then(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            sink = std::mem::replace(&mut sink, CallSink::new(oneshot::channel().0, None)).with_asks(sender);
            receiver
        });
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
        let waiting = Waiting {
            child_id,
            client_id,
            answered,
            relayed,
            asks,
            finish: Finish {
                core: self.core.clone(),
                audit: self.audit.clone().zip(audited),
                caller: caller.audit.clone(),
                method: method.to_owned(),
                modern,
                started: Instant::now(),
            },
            guard: CallGuard {
                core: self.core.clone(),
                child_id,
                session: session.map(str::to_owned),
                done: false,
            },
            timeout: Box::pin(tokio::time::sleep(self.core.config.request_timeout())),
            round,
        };
        self.answer(waiting).await
    }

    /// Wait for a call's answer and send it: as JSON, or as SSE once something related to it
    /// comes first; a question of the child to a 2026-07-28 caller ends this request with an
    /// input-required round (the call is parked for the retry).
    async fn answer(&self, mut waiting: Waiting) -> Response<Body> {
        // Biased, related messages first: the router queues a call's progress before its
        // answer, and each of them must reach the caller before the answer ends the call.
        let first_related = loop {
            let step = tokio::select! {
                biased;
                Some(first) = waiting.relayed.recv() => Step::Related(first),
                reply = &mut waiting.answered => Step::Answer(reply.unwrap_or_else(|_| waiting.gone())),
                Some(ask) = next_ask(&mut waiting.asks) => Step::Ask(ask),
                () = &mut waiting.timeout => Step::TimedOut,
            };
            match step {
                Step::Related(first) => break first,
                Step::Answer(reply) => return waiting.reply_json(reply),
                Step::TimedOut => {
                    let reply = waiting.timed_out();
                    return waiting.reply_json(reply);
                }
                Step::Ask(ask) => match self.rounds.settle(&mut waiting, ask).await {
                    Settled::Nothing => {}
                    Settled::Answered(reply) => return waiting.reply_json(reply),
                    Settled::Asked(asked) => return http::json(200, &self.rounds.park(waiting, asked)),
                },
            }
        };
        // Something streams before the answer: the rest of this call is an SSE stream.
        // (An SSE call's questions end it with the round's reply as its last event.)
        let (events, receiver) = mpsc::channel(self.core.config.stream_queue);
        let rounds = self.rounds.clone();
        tokio::spawn(async move {
            if events.send(first_related).await.is_err() {
                return; // the client went: the guard cancels the call
            }
            loop {
                let step = tokio::select! {
                    biased;
                    Some(message) = waiting.relayed.recv() => Step::Related(message),
                    reply = &mut waiting.answered => Step::Answer(reply.unwrap_or_else(|_| waiting.gone())),
                    Some(ask) = next_ask(&mut waiting.asks) => Step::Ask(ask),
                    () = events.closed() => return,
                    () = &mut waiting.timeout => Step::TimedOut,
                };
                let last = match step {
                    Step::Related(message) => {
                        if events.send(message).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    Step::Answer(reply) => waiting.reply(reply).1,
                    Step::TimedOut => {
                        let reply = waiting.timed_out();
                        waiting.reply(reply).1
                    }
                    Step::Ask(ask) => match rounds.settle(&mut waiting, ask).await {
                        Settled::Nothing => continue,
                        Settled::Answered(reply) => waiting.reply(reply).1,
                        Settled::Asked(asked) => rounds.park(waiting, asked),
                    },
                };
                let _ = events.send(last).await;
                return;
            }
        });
        http::events(receiver)
    }
}

/// The 2026-07-28 calls waiting for their callers' input, and what is done with them.
pub struct InputRounds {
    core: Arc<Core>,
    store: Mutex<RoundStore<Waiting>>,
}

impl InputRounds {
    /// At most half the calls in flight wait (callers that never retry cannot take every
    /// slot), each for one request timeout.
    pub fn new(core: Arc<Core>) -> Arc<Self> {
        let store = RoundStore::new(core.config.max_inflight / 2, core.config.request_timeout());
        Arc::new(Self {
            core,
            store: Mutex::new(store),
        })
    }

    fn take(
        &self,
        token: &str,
        method: &str,
        target: Option<&str>,
        now: Instant,
    ) -> (Option<Waiting>, Vec<Waiting>) {
        lock(&self.store).take(token, method, target, now)
    }

    /// The child asked: wait a moment for more questions, answer what the caller already
    /// answered, and say what is left to ask (or the call's answer, if it came meanwhile).
    async fn settle(&self, waiting: &mut Waiting, first: Value) -> Settled {
        let mut messages = vec![first];
        let mut seen = 0;
        let mut last = None;
        for _ in 0..SETTLE_ROUNDS {
            if messages.len() == seen {
                break;
            }
            seen = messages.len();
            tokio::time::sleep(SETTLE).await;
            if let Some(asks) = waiting.asks.as_mut() {
                while let Ok(message) = asks.try_recv() {
                    messages.push(message);
                }
            }
            if let Ok(reply) = waiting.answered.try_recv() {
                last = Some(reply);
                break;
            }
        }
        let round = waiting.round.as_mut().expect("only a call with a round is asked");
        let mut asked = BTreeMap::new();
        for message in &messages {
            let ask = Ask::from_child(message);
            if let Some(answer) = round.answers.remove(&ask.key) {
                self.core.answer_asked(&ask.child_request_id, answer);
                continue;
            }
            let key = if asked.contains_key(&ask.key) {
                format!("{}-{}", ask.key, ask.child_request_id)
            } else {
                ask.key.clone()
            };
            asked.insert(key, ask);
        }
        match last {
            Some(reply) => Settled::Answered(reply),
            None if asked.is_empty() => Settled::Nothing,
            None => Settled::Asked(asked),
        }
    }

    /// Keep the call for its caller's retry; the `input_required` reply of this round.
    fn park(&self, mut waiting: Waiting, asked: BTreeMap<String, Ask>) -> Value {
        let client_id = waiting.client_id.clone();
        let requests: Map<String, Value> = asked
            .iter()
            .map(|(key, ask)| (key.clone(), ask.as_input_request()))
            .collect();
        let server_info = waiting
            .finish
            .modern
            .as_ref()
            .and_then(|(_, child_result)| child_result.get("serverInfo").cloned());
        let round = waiting
            .round
            .as_mut()
            .expect("only a call with a round is parked");
        round.asked = asked;
        let (method, target) = (round.method.clone(), round.target.clone());
        let (token, dropped) = lock(&self.store).park(waiting, &method, target, Instant::now());
        self.drop_parked(dropped, "Too many calls wait for their callers' input");
        let mut result = json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": token,
        });
        if let Some(info) = server_info {
            result["_meta"] = json!({era::SERVER_INFO_META_KEY: info});
        }
        jsonrpc::result_response(&client_id, result)
    }

    /// Calls whose callers will not retry (expired, evicted): cancelled at the child.
    fn drop_parked(&self, dropped: Vec<Waiting>, reason: &str) {
        for mut waiting in dropped {
            tracing::info!("Cancelled call {} waiting for input: {reason}", waiting.child_id);
            self.core.cancel(waiting.child_id, reason);
            waiting.guard.done = true;
        }
    }

    /// Cancel the parked calls whose callers did not retry in time, once a second.
    pub async fn expire(self: Arc<Self>) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let expired = lock(&self.store).expire(Instant::now());
            self.drop_parked(expired, "The caller did not retry in time");
        }
    }
}

/// One step of waiting for a call.
enum Step {
    Related(Value),
    Answer(Value),
    Ask(Value),
    TimedOut,
}

/// What the child's questions came to once settled.
enum Settled {
    /// Everything asked was answered already: wait on.
    Nothing,
    /// The call's answer came meanwhile.
    Answered(Value),
    /// Questions for the caller, by key.
    Asked(BTreeMap<String, Ask>),
}

/// The next question of the child, or never for a call that cannot have rounds.
async fn next_ask(asks: &mut Option<mpsc::UnboundedReceiver<Value>>) -> Option<Value> {
    match asks {
        Some(asks) => asks.recv().await,
        None => std::future::pending().await,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An interactive 2026-07-28 call's rounds: what it is about, what its caller answered ahead,
/// what it was asked and has not answered.
pub struct Round {
    method: String,
    target: Option<String>,
    answers: Map<String, Value>,
    asked: BTreeMap<String, Ask>,
}

/// A forwarded call between its request and its answer; an interactive 2026-07-28 call's is
/// kept across its rounds (parked in `Front::rounds` between them).
pub struct Waiting {
    child_id: u64,
    /// The id of the request that waits now (a retry brings its own).
    client_id: Value,
    answered: oneshot::Receiver<Value>,
    relayed: mpsc::Receiver<Value>,
    asks: Option<mpsc::UnboundedReceiver<Value>>,
    finish: Finish,
    guard: CallGuard,
    timeout: Pin<Box<Sleep>>,
    round: Option<Round>,
}

impl Waiting {
    fn gone(&self) -> Value {
        jsonrpc::error_response(Some(&self.client_id), INTERNAL_ERROR, super::core::CHILD_EXITED)
    }

    fn timed_out(&self) -> Value {
        let core = &self.finish.core;
        core.cancel(self.child_id, "Request timed out");
        let seconds = core.config.request_timeout_seconds;
        let text = format!("The MCP server did not answer within {seconds:.0}s");
        jsonrpc::error_response(Some(&self.client_id), REQUEST_TIMEOUT, &text)
    }

    /// The call ended: counted, audited, shaped, under the id of the request that waits now.
    fn reply(&mut self, mut reply: Value) -> (u16, Value) {
        self.guard.done = true;
        reply["id"] = self.client_id.clone();
        self.finish.reply(reply)
    }

    fn reply_json(&mut self, reply: Value) -> Response<Body> {
        let (status, reply) = self.reply(reply);
        http::json(status, &reply)
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

/// 503 with `Retry-After: 1` and a JSON-RPC error.
pub fn unavailable(id: Option<&Value>, text: &str) -> Response<Body> {
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
