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
//! - **Cancellation.** A client's `notifications/cancelled` (or a disconnect, a timeout, a
//!   DELETE) becomes `notifications/cancelled` with the child's id.
//!
//! Modules: this one the pending-call table and what goes from clients to the child;
//! `from_child` the child's answers and notifications routed; `server_requests` the child's
//! requests to clients attributed, delivered or refused.

mod from_child;
mod server_requests;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Instant;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use super::listeners::Listener;
use crate::jsonrpc::{self, INTERNAL_ERROR, REQUEST_CANCELLED};
use crate::param_headers::ToolHeaderSchemas;
use crate::sessions::Sessions;

/// Client requests during which a server may ask the client something or log about it.
pub const CAUSING_METHODS: [&str; 4] = [
    "tools/call",
    "prompts/get",
    "resources/read",
    "completion/complete",
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

    fn forget(&mut self, call: &PendingCall) {
        if call.capabilities.is_some() && !self.asked.is_empty() {
            self.asked.retain(|_, child_id| *child_id != call.child_id);
        }
        if let Some(session) = call.session.as_deref().and_then(|id| self.sessions.get_mut(id)) {
            session.calls.remove(&key(&call.client_id));
            session.last_active = Instant::now();
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    pub(super) fn router() -> Router {
        Router::new(Sessions::new(10, Duration::from_secs(60)), 10)
    }

    pub(super) fn sink() -> (CallSink, oneshot::Receiver<Value>, mpsc::Receiver<Value>) {
        let (answer, answered) = oneshot::channel();
        let (related, relayed) = mpsc::channel(8);
        (CallSink::new(answer, Some(related)), answered, relayed)
    }

    pub(super) fn session(router: &mut Router, declared: &[&str]) -> String {
        let declared = declared.iter().map(|c| (*c).to_owned()).collect();
        router
            .sessions
            .open("caller", "2025-06-18".into(), declared, Instant::now())
            .unwrap()
            .0
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
