//! The protocol core: one child, many clients, matched by id.
//!
//! Owns everything that decides where a JSON-RPC message goes, and nothing that moves
//! bytes: no sockets, no subprocesses, no clock. The caller feeds it decoded messages and
//! writes the lines it returns to the child; messages for clients go to the sinks the
//! caller supplies.
//!
//! - **Ids.** Every request forwarded to the child gets a fresh integer id; the pending-call
//!   table maps it back to the caller's id and sink. Progress tokens are remapped the same
//!   way (two sessions may both use token `1`); a call that may cause server requests
//!   carries the adapter's token even when its caller asked for no progress, so that the
//!   child can name the call.
//! - **Notifications from the child.** Progress goes to the call whose request carried the
//!   token; `resources/updated` to the sessions that subscribed to the URI; log messages to
//!   the call they are attributed to, else nowhere (counted); list changes to every
//!   session's stream.
//! - **Cancellation.** A client's `notifications/cancelled` (or a disconnect, a timeout, a
//!   DELETE) becomes `notifications/cancelled` with the child's id.
//! - **Server→client requests** (sampling, elicitation, roots) go to the call they are
//!   attributed to (`attribute`), if its legacy client declared the capability; what
//!   cannot be attributed or delivered is refused to the child, never sent to a bystander.
//!   `ping` is answered here.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::listeners::Listener;
use super::param_headers::ToolHeaderSchemas;
use crate::capabilities::capability_for;
use crate::jsonrpc::{self, INTERNAL_ERROR, METHOD_NOT_FOUND, REQUEST_CANCELLED};
use crate::sessions::Sessions;

/// Client requests during which a server may ask the client something or log about it.
pub const CAUSING_METHODS: [&str; 4] = [
    "tools/call",
    "prompts/get",
    "resources/read",
    "completion/complete",
];

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Where what concerns one call goes: its answer once, and the messages related to it
/// (progress, server requests) while it runs, if its caller can take them.
#[derive(Debug)]
pub struct CallSink {
    answer: Option<oneshot::Sender<Value>>,
    related: Option<mpsc::Sender<Value>>,
    /// The child's questions to a 2026-07-28 caller (input-required rounds), for a call that
    /// may have them.
    asks: Option<mpsc::UnboundedSender<Value>>,
}

impl CallSink {
    pub fn new(answer: oneshot::Sender<Value>, related: Option<mpsc::Sender<Value>>) -> Self {
        Self {
            answer: Some(answer),
            related,
            asks: None,
        }
    }

    /// The sink of a 2026-07-28 call whose questions become input-required rounds.
    pub fn with_asks(mut self, asks: mpsc::UnboundedSender<Value>) -> Self {
        self.asks = Some(asks);
        self
    }

    fn ask(&self, message: &Value) -> bool {
        self.asks
            .as_ref()
            .is_some_and(|a| a.send(message.clone()).is_ok())
    }

    fn respond(&mut self, message: Value) {
        if let Some(answer) = self.answer.take() {
            let _ = answer.send(message);
        }
    }

    fn related(&self, message: &Value) -> bool {
        self.related
            .as_ref()
            .is_some_and(|r| r.try_send(message.clone()).is_ok())
    }
}

/// A request forwarded to the child and not yet answered.
#[derive(Debug)]
pub struct PendingCall {
    pub child_id: u64,
    pub client_id: Value,
    pub method: String,
    /// The legacy session it came in, or None for a 2026-07-28 call.
    pub session: Option<String>,
    sink: CallSink,
    /// The caller's own progress token, if it asked for progress.
    progress_token: Option<Value>,
    /// The child knows this call by a token of ours (its child id).
    tokened: bool,
    /// A 2026-07-28 caller's log level.
    log_level: Option<String>,
    /// A 2026-07-28 caller's declared capabilities (None: a legacy or internal call).
    capabilities: Option<HashSet<String>>,
}

/// Too many calls are in flight: the caller answers 503.
#[derive(Debug, thiserror::Error)]
#[error("{0} calls are in flight")]
pub struct RouterFull(pub usize);

/// A 2026-07-28 caller's envelope: what it said of itself on this request.
#[derive(Debug, Default, Clone)]
pub struct Envelope {
    pub log_level: Option<String>,
    /// The capabilities the caller declared (`declared_capabilities`).
    pub capabilities: HashSet<String>,
}

/// Pending calls, id and token remapping, sessions, and routing of what the child says.
#[derive(Debug)]
pub struct Router {
    pub sessions: Sessions,
    /// Oldest first (ids only grow).
    pending: BTreeMap<u64, PendingCall>,
    next_id: u64,
    max_inflight: usize,
    /// The child's server-request id (as JSON text) → the session and the id it saw.
    server_requests: HashMap<String, (String, u64)>,
    /// The child's questions to 2026-07-28 callers still unanswered: its request id (as JSON
    /// text) → the call that asked.
    asked: HashMap<String, u64>,
    /// Log messages dropped and server requests refused since start: no call could be
    /// attributed.
    pub unattributed_log: u64,
    pub unattributed_request: u64,
    /// The child's `x-mcp-header` schemas, learnt from its `tools/list` results.
    pub tool_headers: ToolHeaderSchemas,
    /// The open 2026-07-28 `subscriptions/listen` streams.
    pub listeners: Vec<Listener>,
    /// The child serves one caller alone (`--child-per-session`): see `attribute`.
    pub sole_caller: bool,
}

fn key(id: &Value) -> String {
    id.to_string()
}

impl Router {
    pub fn new(sessions: Sessions, max_inflight: usize) -> Self {
        Self {
            sessions,
            pending: BTreeMap::new(),
            next_id: 1,
            max_inflight,
            server_requests: HashMap::new(),
            asked: HashMap::new(),
            unattributed_log: 0,
            unattributed_request: 0,
            tool_headers: ToolHeaderSchemas::default(),
            listeners: Vec::new(),
            sole_caller: false,
        }
    }

    pub fn inflight(&self) -> usize {
        self.pending.len()
    }

    pub fn is_pending(&self, child_id: u64) -> bool {
        self.pending.contains_key(&child_id)
    }

    // ----------------------------------------------------------------- client -> child

    /// Remap a client's request for the child; returns the child's id and the line to write.
    /// `message` is rewritten in place (id, progress token).
    pub fn forward_request(
        &mut self,
        message: &mut Value,
        session: Option<&str>,
        sink: CallSink,
        envelope: Envelope,
    ) -> Result<(u64, Vec<u8>), RouterFull> {
        if self.pending.len() >= self.max_inflight {
            return Err(RouterFull(self.max_inflight));
        }
        let child_id = self.next_id;
        self.next_id += 1;
        let client_id = message.get("id").cloned().unwrap_or(Value::Null);
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let causing = CAUSING_METHODS.contains(&method.as_str());
        let mut progress_token = None;
        if causing && !message.get("params").is_some_and(Value::is_object) {
            message["params"] = json!({});
        }
        if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
            let meta = params.get_mut("_meta").and_then(Value::as_object_mut);
            match meta {
                Some(meta) if meta.contains_key("progressToken") => {
                    progress_token = meta.insert("progressToken".into(), json!(child_id));
                }
                Some(meta) if causing => {
                    meta.insert("progressToken".into(), json!(child_id));
                }
                None if causing => {
                    params.insert("_meta".into(), json!({"progressToken": child_id}));
                }
                _ => {}
            }
            if let Some(session) = session.and_then(|id| self.sessions.get_mut(id)) {
                track_session_state(&method, params, session);
            }
        }
        message["id"] = json!(child_id);
        let tokened = progress_token.is_some() || causing;
        let call = PendingCall {
            child_id,
            client_id: client_id.clone(),
            method,
            session: session.map(str::to_owned),
            sink,
            progress_token,
            tokened,
            log_level: envelope.log_level,
            capabilities: session.is_none().then_some(envelope.capabilities),
        };
        if let Some(session) = session.and_then(|id| self.sessions.get_mut(id)) {
            session.calls.insert(key(&client_id), child_id);
        }
        self.pending.insert(child_id, call);
        Ok((child_id, jsonrpc::line(message)))
    }

    /// A request the adapter itself originates (the handshake); returns the line to write.
    pub fn internal_request(&mut self, method: &str, params: Value, sink: CallSink) -> Vec<u8> {
        let mut message = json!({"jsonrpc": "2.0", "id": 0, "method": method, "params": params});
        // The handshake runs before any client call: the table cannot be full.
        let max = self.max_inflight;
        self.max_inflight = usize::MAX;
        let line = self
            .forward_request(&mut message, None, sink, Envelope::default())
            .map(|(_, l)| l);
        self.max_inflight = max;
        line.unwrap_or_default()
    }

    /// Remap a client's notification; returns the line to write, or None to drop it.
    pub fn forward_notification(&mut self, message: &Value, session: Option<&str>) -> Option<Vec<u8>> {
        match message.get("method").and_then(Value::as_str) {
            // the adapter initialized the child once, for everyone
            Some("notifications/initialized") => None,
            Some("notifications/cancelled") => {
                let params = jsonrpc::params(message)?;
                let request_id = params.get("requestId")?;
                let child_id = *self.sessions.get(session?)?.calls.get(&key(request_id))?;
                let reason = params
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("Cancelled by the client");
                self.cancel(child_id, reason)
            }
            _ => Some(jsonrpc::line(message)),
        }
    }

    /// A client's answer to a server→client request, mapped back to the child's id.
    pub fn forward_response(&mut self, message: &mut Value, session_id: &str) -> Option<Vec<u8>> {
        let visible = message.get("id").and_then(Value::as_u64)?;
        let session = self.sessions.get_mut(session_id)?;
        let child_request_id = session.server_requests.remove(&visible)?;
        self.server_requests.remove(&key(&child_request_id));
        message["id"] = child_request_id;
        Some(jsonrpc::line(message))
    }

    /// Forget a call and tell the child; the caller's sink gets a cancellation error.
    pub fn cancel(&mut self, child_id: u64, reason: &str) -> Option<Vec<u8>> {
        let mut call = self.pending.remove(&child_id)?;
        self.forget(&call);
        call.sink.respond(jsonrpc::error_response(
            Some(&call.client_id),
            REQUEST_CANCELLED,
            reason,
        ));
        if call.method == "initialize" {
            return None; // initialize must not be cancelled
        }
        let params = json!({"requestId": child_id, "reason": reason});
        Some(jsonrpc::line(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}),
        ))
    }

    /// A session is gone: cancel its calls, refuse its server requests; lines for the child.
    pub fn end_session(&mut self, session_id: &str, reason: &str) -> Vec<Vec<u8>> {
        let Some(session) = self.sessions.remove(session_id) else {
            return Vec::new();
        };
        let mut lines: Vec<Vec<u8>> = session
            .calls
            .values()
            .filter_map(|child_id| self.cancel(*child_id, reason))
            .collect();
        for child_request_id in session.server_requests.values() {
            self.server_requests.remove(&key(child_request_id));
            let refusal =
                jsonrpc::error_response(Some(child_request_id), INTERNAL_ERROR, "Client session ended");
            lines.push(jsonrpc::line(&refusal));
        }
        lines
    }

    /// The child is gone: every call fails with `code`, every session ends; returns how
    /// many calls failed and how many sessions were reset.
    pub fn fail_all(&mut self, code: i64, reason: &str) -> (usize, usize) {
        let calls = std::mem::take(&mut self.pending);
        self.server_requests.clear();
        self.asked.clear();
        self.tool_headers.forget();
        let failed = calls.len();
        for (_, mut call) in calls {
            call.sink
                .respond(jsonrpc::error_response(Some(&call.client_id), code, reason));
        }
        (failed, self.sessions.clear().len())
    }

    // ----------------------------------------------------------------- child -> clients

    /// Route one message from the child; returns lines to write back to the child.
    pub fn route_from_child(&mut self, mut message: Value) -> Vec<Vec<u8>> {
        let Some(method) = message.get("method") else {
            self.response(message);
            return Vec::new();
        };
        let Some(method) = method.as_str().map(str::to_owned) else {
            tracing::warn!("Dropped a child message with a non-string method");
            return Vec::new();
        };
        if message.get("id").is_some() {
            return self.server_request(&method, &mut message).into_iter().collect();
        }
        self.notification(&method, message);
        Vec::new()
    }

    fn response(&mut self, mut message: Value) {
        let call = message
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| self.pending.remove(&id));
        let Some(mut call) = call else {
            tracing::debug!("Dropped a child response to an unknown id");
            return;
        };
        self.forget(&call);
        if call.method == "tools/list" {
            self.tool_headers.learn(message.get("result"));
        }
        message["id"] = call.client_id.clone();
        call.sink.respond(message);
    }

    fn forget(&mut self, call: &PendingCall) {
        if call.capabilities.is_some() && !self.asked.is_empty() {
            self.asked.retain(|_, child_id| *child_id != call.child_id);
        }
        if let Some(session) = call.session.as_deref().and_then(|id| self.sessions.get_mut(id)) {
            session.calls.remove(&key(&call.client_id));
            session.last_active = Instant::now();
        }
    }

    fn notification(&mut self, method: &str, mut message: Value) {
        let params = jsonrpc::params(&message).cloned().unwrap_or_default();
        match method {
            "notifications/progress" => {
                let token = params.get("progressToken").and_then(Value::as_u64);
                let Some(call) = token.and_then(|t| self.pending.get(&t)) else {
                    return;
                };
                let Some(original) = call.progress_token.clone() else {
                    return;
                };
                message["params"]["progressToken"] = original;
                self.deliver(call.child_id, &message);
            }
            "notifications/cancelled" => {
                let Some(child_request_id) = params.get("requestId") else {
                    return;
                };
                if let Some((session_id, visible)) = self.server_requests.remove(&key(child_request_id))
                    && let Some(session) = self.sessions.get_mut(&session_id)
                {
                    session.server_requests.remove(&visible);
                    message["params"]["requestId"] = json!(visible);
                    session.push(&message);
                }
            }
            "notifications/resources/updated" => {
                let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default();
                for session in self.sessions.iter().filter(|s| s.subscriptions.contains(uri)) {
                    session.push(&message);
                }
                self.listeners.retain(|l| l.offer(method, &message));
            }
            "notifications/message" => self.log(&message, &params),
            _ => {
                if method == "notifications/tools/list_changed" {
                    self.tool_headers.forget();
                }
                for session in self.sessions.iter() {
                    session.push(&message);
                }
                self.listeners.retain(|l| l.offer(method, &message));
            }
        }
    }

    /// A message to a call's caller: on the call's own stream, else its session's.
    fn deliver(&self, child_id: u64, message: &Value) -> bool {
        let Some(call) = self.pending.get(&child_id) else {
            return false;
        };
        if call.sink.related(message) {
            return true;
        }
        call.session
            .as_deref()
            .and_then(|id| self.sessions.get(id))
            .is_some_and(|s| s.push(message))
    }

    fn log(&mut self, message: &Value, params: &Map<String, Value>) {
        let Some(child_id) = self.attribute(message) else {
            self.unattributed_log += 1;
            tracing::debug!("Dropped a log message that could not be attributed to one call");
            return;
        };
        let call = &self.pending[&child_id];
        let level = params.get("level").and_then(Value::as_str);
        let wanted = match call.session.as_deref() {
            Some(id) => at_least(level, self.sessions.get(id).and_then(|s| s.log_level.as_deref())),
            // A 2026-07-28 caller hears logs only when its request set a level.
            None => call.log_level.is_some() && at_least(level, call.log_level.as_deref()),
        };
        if wanted {
            self.deliver(child_id, message);
        }
    }

    /// The call a message the child sent on its own belongs to, or None when it cannot be
    /// told:
    /// 1. a `progressToken` of ours in `params._meta` names the call (a token naming no call
    ///    in flight names none);
    /// 2. without one, only when exactly one legacy session exists and every call in flight
    ///    is that session's: its oldest call that may cause it;
    /// 3. a child serving one caller alone (`sole_caller`) has nobody else's calls: its
    ///    oldest call that may cause it, whatever the session (or none: 2026-07-28);
    /// 4. otherwise nobody — guessing "the only call open" sent one session's prompt to
    ///    another.
    fn attribute(&self, message: &Value) -> Option<u64> {
        let token = jsonrpc::params(message)
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"));
        if let Some(token) = token {
            let call = token.as_u64().and_then(|t| self.pending.get(&t))?;
            return call.tokened.then_some(call.child_id);
        }
        if self.sole_caller {
            let mut causing = self.pending.values();
            return causing
                .find(|call| CAUSING_METHODS.contains(&call.method.as_str()))
                .map(|call| call.child_id);
        }
        if self.sessions.len() != 1 {
            return None;
        }
        let only = self.sessions.iter().next()?.id.as_str();
        let mut candidate = None;
        for call in self.pending.values() {
            if call.session.as_deref() != Some(only) {
                return None; // someone else has a call open: it may be theirs
            }
            if candidate.is_none() && CAUSING_METHODS.contains(&call.method.as_str()) {
                candidate = Some(call.child_id);
            }
        }
        candidate
    }

    fn server_request(&mut self, method: &str, message: &mut Value) -> Option<Vec<u8>> {
        let child_request_id = message["id"].clone();
        if method == "ping" {
            return Some(jsonrpc::line(&jsonrpc::result_response(
                &child_request_id,
                json!({}),
            )));
        }
        let refuse = |code: i64, text: &str| {
            Some(jsonrpc::line(&jsonrpc::error_response(
                Some(&child_request_id),
                code,
                text,
            )))
        };
        let Some(child_id) = self.attribute(message) else {
            self.unattributed_request += 1;
            return refuse(
                INTERNAL_ERROR,
                &format!("{method} could not be attributed to one call in flight"),
            );
        };
        let call = &self.pending[&child_id];
        let Some(session_id) = call.session.clone() else {
            return self.ask_modern(method, child_id, message);
        };
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return refuse(INTERNAL_ERROR, "Client session ended");
        };
        if let Some(capability) = capability_for(method)
            && !session.can(capability)
        {
            return refuse(
                METHOD_NOT_FOUND,
                &format!("The client did not declare {capability}"),
            );
        }
        session.next_server_request_id += 1;
        let visible = session.next_server_request_id;
        message["id"] = json!(visible);
        if !self.deliver(child_id, message) {
            return refuse(INTERNAL_ERROR, &format!("No open stream to deliver {method} on"));
        }
        if let Some(session) = self.sessions.get_mut(&session_id) {
            session.server_requests.insert(visible, child_request_id.clone());
        }
        self.server_requests
            .insert(key(&child_request_id), (session_id, visible));
        None
    }
}

impl Router {
    /// A server request attributed to a 2026-07-28 call: a question of an input-required
    /// round, if the call may have one and its caller declared the capability; else the
    /// child's refusal line.
    fn ask_modern(&mut self, method: &str, child_id: u64, message: &Value) -> Option<Vec<u8>> {
        let child_request_id = message["id"].clone();
        let call = &self.pending[&child_id];
        let refuse = |error: Value| Some(jsonrpc::line(&error));
        let Some(capabilities) = call.capabilities.as_ref().filter(|_| call.sink.asks.is_some()) else {
            let text = format!("{method} cannot be asked during {}", call.method);
            return refuse(jsonrpc::error_response(
                Some(&child_request_id),
                METHOD_NOT_FOUND,
                &text,
            ));
        };
        if let Some(capability) = capability_for(method)
            && !capabilities.contains(capability)
        {
            let text = format!("The client did not declare {capability}");
            let mut error = jsonrpc::error_response(
                Some(&child_request_id),
                jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY,
                &text,
            );
            error["error"]["data"] = json!({"requiredCapabilities": {capability: {}}});
            return refuse(error);
        }
        if !call.sink.ask(message) {
            let text = format!("No way to deliver {method} to the caller");
            return refuse(jsonrpc::error_response(
                Some(&child_request_id),
                INTERNAL_ERROR,
                &text,
            ));
        }
        self.asked.insert(key(&child_request_id), child_id);
        None
    }

    /// A 2026-07-28 caller's answer (from `inputResponses`) to what the child asked it: the
    /// line for the child, or None when the child no longer waits for it.
    pub fn answer_asked(&mut self, child_request_id: &Value, result: Value) -> Option<Vec<u8>> {
        self.asked.remove(&key(child_request_id))?;
        Some(jsonrpc::line(&jsonrpc::result_response(child_request_id, result)))
    }
}

/// What a session's own requests change of its state: its log level, its subscriptions.
fn track_session_state(method: &str, params: &Map<String, Value>, session: &mut crate::sessions::Session) {
    match method {
        "logging/setLevel" => {
            session.log_level = params.get("level").and_then(Value::as_str).map(str::to_owned)
        }
        "resources/subscribe" | "resources/unsubscribe" => {
            if let Some(uri) = params.get("uri").and_then(Value::as_str) {
                if method == "resources/subscribe" {
                    session.subscriptions.insert(uri.to_owned());
                } else {
                    session.subscriptions.remove(uri);
                }
            }
        }
        _ => {}
    }
}

/// Whether a log message at `level` passes a client's `threshold`.
fn at_least(level: Option<&str>, threshold: Option<&str>) -> bool {
    let position = |l: &str| LOG_LEVELS.iter().position(|k| *k == l);
    match threshold.and_then(position) {
        None => true,
        Some(min) => level.and_then(position).is_some_and(|l| l >= min),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn router() -> Router {
        Router::new(Sessions::new(10, Duration::from_secs(60)), 10)
    }

    fn sink() -> (CallSink, oneshot::Receiver<Value>, mpsc::Receiver<Value>) {
        let (answer, answered) = oneshot::channel();
        let (related, relayed) = mpsc::channel(8);
        (CallSink::new(answer, Some(related)), answered, relayed)
    }

    fn session(router: &mut Router, declared: &[&str]) -> String {
        let declared = declared.iter().map(|c| (*c).to_owned()).collect();
        router
            .sessions
            .open("caller", "2025-06-18".into(), declared, Instant::now())
            .unwrap()
            .0
    }

    #[test]
    fn two_sessions_with_the_same_id_get_their_own_answers() {
        let mut router = router();
        let (a, b) = (session(&mut router, &[]), session(&mut router, &[]));
        let (sink_a, mut answer_a, _) = sink();
        let (sink_b, mut answer_b, _) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let (id_a, _) = router
            .forward_request(&mut call.clone(), Some(&a), sink_a, Envelope::default())
            .unwrap();
        let (id_b, _) = router
            .forward_request(&mut call, Some(&b), sink_b, Envelope::default())
            .unwrap();
        router.route_from_child(json!({"jsonrpc": "2.0", "id": id_b, "result": {"who": "b"}}));
        router.route_from_child(json!({"jsonrpc": "2.0", "id": id_a, "result": {"who": "a"}}));
        assert_eq!(
            answer_a.try_recv().unwrap(),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"who": "a"}})
        );
        assert_eq!(answer_b.try_recv().unwrap()["result"]["who"], "b");
    }

    #[test]
    fn progress_goes_back_under_the_callers_own_token() {
        let mut router = router();
        let s = session(&mut router, &[]);
        let (sink, _, mut relayed) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                              "params": {"name": "x", "_meta": {"progressToken": "mine"}}});
        let (child_id, line) = router
            .forward_request(&mut call, Some(&s), sink, Envelope::default())
            .unwrap();
        let sent: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(sent["params"]["_meta"]["progressToken"], json!(child_id));
        router.route_from_child(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                 "params": {"progressToken": child_id, "progress": 1}}));
        assert_eq!(relayed.try_recv().unwrap()["params"]["progressToken"], "mine");
    }

    #[test]
    fn a_server_request_with_two_sessions_and_no_token_is_refused_to_the_child() {
        let mut router = router();
        let (a, _b) = (
            session(&mut router, &["sampling"]),
            session(&mut router, &["sampling"]),
        );
        let (sink, _, mut relayed) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        router
            .forward_request(&mut call, Some(&a), sink, Envelope::default())
            .unwrap();
        let lines = router.route_from_child(
            json!({"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {}}),
        );
        let refusal: Value = serde_json::from_slice(&lines[0]).unwrap();
        assert_eq!(refusal["error"]["code"], INTERNAL_ERROR);
        assert!(relayed.try_recv().is_err());
        assert_eq!(router.unattributed_request, 1);
    }

    #[test]
    fn a_child_of_one_caller_alone_gives_its_untokened_request_to_the_oldest_call() {
        let mut router = router();
        router.sole_caller = true;
        let (sink, _, _) = sink();
        let (asks, mut asked) = mpsc::unbounded_channel();
        let sink = sink.with_asks(asks);
        let envelope = Envelope {
            capabilities: ["roots".to_owned()].into(),
            ..Envelope::default()
        };
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        router.forward_request(&mut call, None, sink, envelope).unwrap();
        let ask = json!({"jsonrpc": "2.0", "id": 5, "method": "roots/list", "params": {}});
        assert!(router.route_from_child(ask).is_empty());
        assert_eq!(asked.try_recv().unwrap()["method"], "roots/list");
        assert_eq!(router.unattributed_request, 0);
    }

    #[test]
    fn a_server_request_carrying_the_calls_token_reaches_that_call_only() {
        let mut router = router();
        let (a, b) = (
            session(&mut router, &["sampling"]),
            session(&mut router, &["sampling"]),
        );
        let (sink_a, _, mut relayed_a) = sink();
        let (sink_b, _, mut relayed_b) = sink();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        router
            .forward_request(&mut call.clone(), Some(&a), sink_a, Envelope::default())
            .unwrap();
        let (id_b, _) = router
            .forward_request(&mut call.clone(), Some(&b), sink_b, Envelope::default())
            .unwrap();
        let ask = json!({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage",
                         "params": {"_meta": {"progressToken": id_b}}});
        assert!(router.route_from_child(ask).is_empty());
        assert!(relayed_a.try_recv().is_err());
        let asked = relayed_b.try_recv().unwrap();
        let mut answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"ok": true}});
        let line = router.forward_response(&mut answer, &b).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&line).unwrap()["id"], "s1");
    }

    #[test]
    fn a_cancelled_call_answers_its_caller_and_tells_the_child() {
        let mut router = router();
        let s = session(&mut router, &[]);
        let (sink, mut answer, _) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "x"}});
        let (child_id, _) = router
            .forward_request(&mut call, Some(&s), sink, Envelope::default())
            .unwrap();
        let cancel =
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}});
        let line = router.forward_notification(&cancel, Some(&s)).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&line).unwrap()["params"]["requestId"],
            json!(child_id)
        );
        assert_eq!(answer.try_recv().unwrap()["error"]["code"], REQUEST_CANCELLED);
        assert!(!router.is_pending(child_id));
    }

    #[test]
    fn another_sessions_call_cannot_be_cancelled() {
        let mut router = router();
        let (a, b) = (session(&mut router, &[]), session(&mut router, &[]));
        let (sink, _, _) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "x"}});
        let (child_id, _) = router
            .forward_request(&mut call, Some(&a), sink, Envelope::default())
            .unwrap();
        let cancel =
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}});
        assert!(router.forward_notification(&cancel, Some(&b)).is_none());
        assert!(router.is_pending(child_id));
    }

    #[test]
    fn the_inflight_bound_refuses_more_calls() {
        let mut router = Router::new(Sessions::new(10, Duration::from_secs(60)), 1);
        let (first, _, _) = sink();
        let (second, _, _) = sink();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        router
            .forward_request(&mut call.clone(), None, first, Envelope::default())
            .unwrap();
        assert!(
            router
                .forward_request(&mut call.clone(), None, second, Envelope::default())
                .is_err()
        );
    }
}
