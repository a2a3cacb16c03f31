//! The agent's side of relayed calls (`bridge/front_relay.py`'s rules): an agent's
//! `tools/call`, `prompts/get` or `resources/read` runs in a task of its own with a `relay`,
//! and what its server says about it reaches that agent in the agent's era (`waiting`).
//! Owns what outlives one HTTP request:
//!
//! - the questions legacy agents were sent and owe an answer to, by session and the id the
//!   session saw (an answer in another session names nothing);
//! - the legacy calls an agent may cancel, by session and the id its client gave them
//!   (`notifications/cancelled` of another session names nothing; a session's end cancels
//!   its calls);
//! - the 2026-07-28 calls parked between `input_required` rounds (the shared `rounds`
//!   store: a `requestState` bound to its request, used once; at most [`MAX_PARKED`], each
//!   for [`PARKED`]; a call that falls out is cancelled).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use super::core::Core;
use super::relay::{AGENT_QUEUE, Relay, key_text, progress_token};
use super::waiting::{Call, Side};
use crate::capabilities::declared_capabilities;
use crate::http::{self, Body};
use crate::jsonrpc::{self, INVALID_PARAMS};
use crate::rounds::{self, RoundStore};

/// The agent requests during which a server may ask the agent something.
pub const RELAYED: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];
/// 2026-07-28 calls waiting for their agents' next retry.
pub const MAX_PARKED: usize = 64;
/// How long such a call waits for the retry.
pub const PARKED: Duration = Duration::from_secs(300);

type Cancel = Arc<watch::Sender<Option<String>>>;

/// The relayed calls of the bridge's agents, as far as they outlive one request.
pub struct Calls {
    asked: Mutex<HashMap<(String, u64), oneshot::Sender<Value>>>,
    running: Mutex<HashMap<(String, String), Cancel>>,
    parked: Mutex<RoundStore<Call>>,
}

impl Default for Calls {
    fn default() -> Self {
        Self {
            asked: Mutex::default(),
            running: Mutex::default(),
            parked: Mutex::new(RoundStore::new(MAX_PARKED, PARKED)),
        }
    }
}

impl Calls {
    /// A legacy agent's answer to a question it was sent in this session.
    pub fn answered(&self, session: &str, message: &Value) {
        let Some(id) = message.get("id").and_then(Value::as_u64) else {
            return;
        };
        if let Some(waiter) = lock(&self.asked).remove(&(session.to_owned(), id)) {
            let _ = waiter.send(message.clone());
        }
    }

    /// A legacy agent's `notifications/cancelled` for one of this session's calls.
    pub fn cancel(&self, session: &str, params: Option<&Value>, reason: &str) {
        let Some(request_id) = params.and_then(|p| p.get("requestId")) else {
            return;
        };
        let key = (session.to_owned(), key_text(request_id));
        if let Some(cancel) = lock(&self.running).get(&key) {
            cancel.send_replace(Some(reason.to_owned()));
        }
    }

    /// The session ended: its calls are cancelled, its questions moot.
    pub fn end_session(&self, session: &str) {
        lock(&self.running).retain(|(owner, _), cancel| {
            if owner == session {
                cancel.send_replace(Some("The session ended".to_owned()));
            }
            owner != session
        });
        lock(&self.asked).retain(|(owner, _), _| owner != session);
    }

    /// Register a question a legacy session is sent under `id`; the receiver of its answer.
    pub(super) fn expect(&self, session: &str, id: u64) -> oneshot::Receiver<Value> {
        let (sender, receiver) = oneshot::channel();
        lock(&self.asked).insert((session.to_owned(), id), sender);
        receiver
    }

    pub(super) fn forget(&self, session: &str, ids: &[u64]) {
        let mut asked = lock(&self.asked);
        for id in ids {
            asked.remove(&(session.to_owned(), *id));
        }
    }

    pub(super) fn finished(&self, session: &str, client_id: &str) {
        lock(&self.running).remove(&(session.to_owned(), client_id.to_owned()));
    }

    /// Keep a 2026-07-28 call for its agent's retry; its `requestState`.
    pub(super) fn park(&self, call: Call, method: &str, target: Option<String>) -> String {
        let (token, dropped) = lock(&self.parked).park(call, method, target, Instant::now());
        drop(dropped); // dropping a call cancels it
        token
    }

    /// Drop the parked calls whose agents did not retry in time (they are cancelled).
    pub fn expire(&self) {
        let expired = lock(&self.parked).expire(Instant::now());
        drop(expired);
    }
}

/// Start a relayed call in its own task: the agent's side of it.
fn start(
    core: &Arc<Core>,
    id: &Value,
    method: &str,
    params: Value,
    side: Side,
    declared: HashSet<String>,
    log_level: Option<String>,
) -> (Call, Cancel) {
    let (cancel, cancelled) = watch::channel(None);
    let cancel = Arc::new(cancel);
    let (to_agent, from_call) = mpsc::channel(AGENT_QUEUE);
    let token = progress_token(Some(&params));
    let relay = Arc::new(Relay::new(core.clone(), to_agent, token, declared, cancelled));
    relay.set_log_level(log_level);
    let (task_core, task_relay, task_id, task_method) =
        (core.clone(), relay.clone(), id.clone(), method.to_owned());
    // The call's own task finishes (and writes its audit line) whatever becomes of the
    // request that started it; it counts as in flight for the drain at SIGTERM.
    core.inflight.fetch_add(1, Ordering::SeqCst);
    let done = tokio::spawn(async move {
        let relay = Some(&task_relay);
        let reply = if task_method == "tools/call" {
            let params = params.as_object().cloned().unwrap_or_default();
            jsonrpc::result_response(&task_id, task_core.call(&params, relay).await)
        } else {
            super::aggregate::answer(&task_core, &task_id, &task_method, Some(&params), relay).await
        };
        task_core.inflight.fetch_sub(1, Ordering::SeqCst);
        reply
    });
    let call = Call::new(core.clone(), from_call, done, cancel.clone(), relay, side);
    (call, cancel)
}

/// A legacy agent's relayed request: JSON, or SSE once its server spoke first.
pub async fn serve_legacy(
    core: &Arc<Core>,
    session: &str,
    id: &Value,
    method: &str,
    message: &Value,
    sse: bool,
) -> hyper::Response<Body> {
    // A session in a call is never evicted (`sessions`); `waiting::Call` ends its part.
    let declared = core
        .sessions()
        .get_mut(session)
        .map(|s| {
            s.open_requests += 1;
            s.declared.clone()
        })
        .unwrap_or_default();
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    let client_id = key_text(id);
    let side = Side::legacy(session.to_owned(), client_id.clone(), sse);
    let level = core.logs.of(session);
    let (call, cancel) = start(core, id, method, params, side, declared, level);
    lock(&core.calls.running).insert((session.to_owned(), client_id), cancel);
    super::waiting::answer(call).await
}

/// A 2026-07-28 agent's relayed request: a new call, or the retry of a round.
pub async fn serve_modern(
    core: &Arc<Core>,
    id: &Value,
    method: &str,
    message: &Value,
    version: &str,
    sse: bool,
) -> hyper::Response<Body> {
    let mut params = message
        .get("params")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let Some(answers) = rounds::input_responses(&mut params) else {
        let text = "inputResponses must be an object whose values are results";
        return http::json(400, &jsonrpc::error_response(Some(id), INVALID_PARAMS, text));
    };
    let target = rounds::request_target(method, Some(&params));
    if let Some(state) = params.remove("requestState") {
        let parked = state.as_str().map(|token| {
            let (call, dropped) =
                lock(&core.calls.parked).take(token, method, target.as_deref(), Instant::now());
            drop(dropped);
            call
        });
        let Some(mut call) = parked.flatten() else {
            let text = "requestState is unknown, expired, altered or not for this request";
            return http::json(400, &jsonrpc::error_response(Some(id), INVALID_PARAMS, text));
        };
        call.resume(id.clone(), sse, answers);
        return super::waiting::answer(call).await;
    }
    let level = super::logs::request_level(params.get("_meta"));
    let meta = params.get("_meta");
    let declared = declared_capabilities(meta.and_then(|m| m.get(crate::era::CLIENT_CAPABILITIES_META_KEY)));
    crate::era::strip_envelope(&mut params);
    let side = Side::modern(
        id.clone(),
        version.to_owned(),
        method.to_owned(),
        target,
        sse,
        answers,
    );
    let (call, _cancel) = start(core, id, method, Value::Object(params), side, declared, level);
    super::waiting::answer(call).await
}

/// An `input_required` result asking `requests`, under the id of the request it answers.
pub fn round_reply(
    core: &Core,
    id: &Value,
    version: &str,
    requests: Map<String, Value>,
    token: String,
) -> Value {
    let init = core.init_result(version);
    let result = json!({
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": token,
        "_meta": {crate::era::SERVER_INFO_META_KEY: init["serverInfo"]},
    });
    jsonrpc::result_response(id, result)
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
