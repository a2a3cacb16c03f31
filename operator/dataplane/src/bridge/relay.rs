//! What a server says about one agent's call while it runs, judged for that agent alone
//! (`bridge/relay.py`'s rules): one `Relay` per relayed call (`tools/call`, `prompts/get`,
//! `resources/read`), made by the front, handed down to the call at its server (`upcall`).
//!
//! - **Attribution by construction.** A relay hears only what its server sends on the call's
//!   own response stream, or the `inputRequests` of the call's own 2026-07-28 result; what it
//!   passes on goes to its agent's channel only ([`ToAgent`], carried in the agent's era by
//!   `agent`). Nothing it hears can be another agent's.
//! - **Server requests** (`sampling/createMessage`, `elicitation/create`, `roots/list`) are
//!   asked of the agent; `ping` is answered here. Refused, never sent to the agent: a
//!   capability the agent did not declare (`-32601` to a legacy server; a 2026-07-28 server's
//!   round fails the call with `-32021` naming it), any other method (`-32601`), a request
//!   about a call that ended, and past the bounds: [`MAX_ASKS_PER_CALL`] per call,
//!   [`MAX_OPEN_ASKS`] waiting at once, [`MAX_ROUNDS`] rounds (`inputs` judges a round's
//!   questions). Past [`MAX_REFUSALS`] refusals a flood is dropped unanswered.
//! - **Progress**: the server sees a token of the bridge's own per call (two agents' tokens
//!   cannot collide); its progress for that token goes to the agent under the agent's token.
//! - **Cancellation**: the front cancels (the agent's `notifications/cancelled`, its request
//!   closed, its session ended); [`Relay::cancelled`] wakes the call at its server.
//!
//! Everything shown to the agent is masked by the core's scrubber; every server request is
//! counted by method and outcome.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use super::core::Core;
use crate::capabilities::{capabilities_object, capability_for, required_capability};
use crate::jsonrpc::{INTERNAL_ERROR, METHOD_NOT_FOUND};

/// Server requests relayed to the agent during one call (a sampling loop, a form per step).
pub const MAX_ASKS_PER_CALL: usize = 32;
/// Server requests of one call waiting for the agent at once.
pub const MAX_OPEN_ASKS: usize = 4;
/// Refusals one call sends its server; past that, its requests are dropped unanswered.
pub const MAX_REFUSALS: usize = 64;
/// `input_required` rounds of a 2026-07-28 server in one call.
pub const MAX_ROUNDS: usize = 16;
/// Messages about one call queued for its agent.
pub const AGENT_QUEUE: usize = 64;

static TOKENS: AtomicU64 = AtomicU64::new(1);

/// The agent could not be asked, or answered with an error: what the server is told.
#[derive(Debug, Clone)]
pub struct Refusal {
    pub code: i64,
    pub message: String,
}

impl Refusal {
    pub fn internal(message: &str) -> Self {
        Self {
            code: INTERNAL_ERROR,
            message: message.to_owned(),
        }
    }
}

/// What a call tells its agent; the front carries it in the agent's era.
pub enum ToAgent {
    /// A notification about the call (progress), under the agent's own token.
    Note(Value),
    /// A question (`{"method", "params"}`) under a key; the agent's result, or a refusal.
    Ask {
        key: String,
        request: Value,
        answer: oneshot::Sender<Result<Value, Refusal>>,
    },
}

/// What to do with a message the server sent on the call's stream.
pub enum Heard {
    Nothing,
    /// Send this message to the server now (an answer to its request: a refusal, a pong).
    Reply(Value),
    /// Ask the agent this, then answer the server's request `id` with what it said.
    Ask {
        id: Value,
        method: String,
        params: Value,
    },
}

#[derive(Default)]
struct Counts {
    asked: usize,
    open: usize,
    refused: usize,
}

/// One agent call in flight, as the call at its server sees it.
pub struct Relay {
    core: Arc<Core>,
    to_agent: mpsc::Sender<ToAgent>,
    agent_token: Option<Value>,
    /// The token the server sees for this call.
    pub token: String,
    declared: HashSet<String>,
    cancel: watch::Receiver<Option<String>>,
    counts: Mutex<Counts>,
    ended: std::sync::atomic::AtomicBool,
    /// The client capabilities the call needed and its agent did not declare, once that
    /// ended it (a 2026-07-28 agent gets that error, not a failed tool result).
    required: Mutex<Option<Value>>,
    /// The id of the call's last request at its server (what a cancellation names).
    upstream_id: Mutex<Option<u64>>,
}

/// The agent's `params._meta.progressToken`, when it is one (a string or an integer).
pub fn progress_token(params: Option<&Value>) -> Option<Value> {
    let token = params?.get("_meta")?.get("progressToken")?;
    (token.is_string() || token.is_i64() || token.is_u64()).then(|| token.clone())
}

impl Relay {
    pub fn new(
        core: Arc<Core>,
        to_agent: mpsc::Sender<ToAgent>,
        agent_token: Option<Value>,
        declared: HashSet<String>,
        cancel: watch::Receiver<Option<String>>,
    ) -> Self {
        Self {
            core,
            to_agent,
            agent_token,
            token: format!("mcp-bridge-{}", TOKENS.fetch_add(1, Ordering::Relaxed)),
            declared,
            cancel,
            counts: Mutex::default(),
            ended: false.into(),
            required: Mutex::default(),
            upstream_id: Mutex::default(),
        }
    }

    /// The `_meta` the server is sent with the call: the bridge's progress token (when the
    /// agent asked for progress), and to a 2026-07-28 server what the agent declared.
    pub fn meta(&self, modern: bool) -> Map<String, Value> {
        let mut meta = Map::new();
        if self.agent_token.is_some() {
            meta.insert("progressToken".into(), json!(self.token));
        }
        if modern {
            meta.insert(
                crate::era::CLIENT_CAPABILITIES_META_KEY.into(),
                capabilities_object(&self.declared),
            );
        }
        meta
    }

    /// Resolves once the call is cancelled (never, for a call that is not).
    pub async fn cancelled(&self) {
        let mut cancel = self.cancel.clone();
        if cancel.wait_for(Option::is_some).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancel.borrow().is_some()
    }

    /// The call at its server is over: whatever it asks now is about an ended call.
    pub fn end(&self) {
        self.ended.store(true, Ordering::Relaxed);
    }

    /// The call was sent to its server under this id.
    pub fn sent_as(&self, id: u64) {
        *lock(&self.upstream_id) = Some(id);
    }

    pub fn upstream_id(&self) -> Option<u64> {
        *lock(&self.upstream_id)
    }

    /// The call ended for want of these client capabilities (`requiredCapabilities`).
    pub fn missing(&self, required: Value) {
        *lock(&self.required) = Some(required);
    }

    pub fn required(&self) -> Option<Value> {
        lock(&self.required).clone()
    }

    /// A request or notification of the server on the call's stream: what to do with it.
    pub fn heard(&self, message: &Value) -> Heard {
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        let Some(id) = message.get("id").filter(|id| crate::jsonrpc::valid_id(id)) else {
            if method == "notifications/progress" {
                self.progress(params);
            }
            return Heard::Nothing;
        };
        if method == "ping" {
            self.observe(method, "relayed");
            return Heard::Reply(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
        }
        if capability_for(method).is_none() {
            return self.refuse(id, method, "unsupported", METHOD_NOT_FOUND, "Method not found");
        }
        if let Some(missing) = self.missing_for(method, &params) {
            let text = format!("The client did not declare {missing}");
            return self.refuse(id, method, "undeclared", METHOD_NOT_FOUND, &text);
        }
        if self.ended.load(Ordering::Relaxed) || self.is_cancelled() {
            let text = "The call this request is about has ended";
            return self.refuse(id, method, "ended", INTERNAL_ERROR, text);
        }
        {
            let mut counts = lock(&self.counts);
            if counts.asked < MAX_ASKS_PER_CALL && counts.open < MAX_OPEN_ASKS {
                counts.asked += 1;
                counts.open += 1;
                let params = self.core.scrubber.json(params);
                return Heard::Ask {
                    id: id.clone(),
                    method: method.to_owned(),
                    params,
                };
            }
        }
        let text = "Too many requests to the client in one call";
        self.refuse(id, method, "bounded", INTERNAL_ERROR, text)
    }

    /// A question of the server is no longer waited for (answered, or withdrawn by it).
    pub fn ask_withdrawn(&self) {
        let mut counts = lock(&self.counts);
        counts.open = counts.open.saturating_sub(1);
    }

    /// Ask the agent one question of a legacy server (after [`Heard::Ask`]); the JSON-RPC
    /// response for the server.
    pub async fn ask_for_server(&self, id: Value, method: &str, params: Value) -> Value {
        let key = format!("request-{}", key_text(&id));
        let answered = self.ask(key, method, params).await;
        self.ask_withdrawn();
        match answered {
            Ok(result) => {
                self.observe(method, "relayed");
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            }
            Err(refusal) => {
                self.observe(method, "agent_error");
                json!({"jsonrpc": "2.0", "id": id,
                       "error": {"code": refusal.code, "message": refusal.message}})
            }
        }
    }

    /// The capability a request of the server needs and the agent did not declare.
    pub fn missing_for(&self, method: &str, params: &Value) -> Option<String> {
        required_capability(method, params, &self.declared)
    }

    /// What a server says, masked for the agent.
    pub fn scrub(&self, value: Value) -> Value {
        self.core.scrubber.json(value)
    }

    /// Count `n` more questions of the call; false past [`MAX_ASKS_PER_CALL`].
    pub fn count_asks(&self, n: usize) -> bool {
        let mut counts = lock(&self.counts);
        counts.asked += n;
        counts.asked <= MAX_ASKS_PER_CALL
    }

    /// A notification of the server's progress, for the agent under its own token.
    fn progress(&self, params: Value) {
        let Some(agent_token) = &self.agent_token else {
            return; // nobody of this call asked for progress
        };
        if params.get("progressToken").and_then(Value::as_str) != Some(self.token.as_str()) {
            return;
        }
        let mut shown = self.core.scrubber.json(params);
        shown["progressToken"] = agent_token.clone();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": shown});
        let _ = self.to_agent.try_send(ToAgent::Note(note)); // a full queue drops progress
    }

    async fn ask(&self, key: String, method: &str, params: Value) -> Result<Value, Refusal> {
        let receiver = self.send_ask(key, method, params).await?;
        receiver
            .await
            .unwrap_or_else(|_| Err(Refusal::internal("The agent's side of the call ended")))
    }

    pub async fn send_ask(
        &self,
        key: String,
        method: &str,
        params: Value,
    ) -> Result<oneshot::Receiver<Result<Value, Refusal>>, Refusal> {
        let (answer, answered) = oneshot::channel();
        let request = json!({"method": method, "params": params});
        self.to_agent
            .send(ToAgent::Ask { key, request, answer })
            .await
            .map_err(|_| Refusal::internal("The agent's side of the call ended"))?;
        Ok(answered)
    }

    fn refuse(&self, id: &Value, method: &str, outcome: &'static str, code: i64, text: &str) -> Heard {
        let refused = {
            let mut counts = lock(&self.counts);
            counts.refused += 1;
            counts.refused
        };
        if refused > MAX_REFUSALS {
            self.observe(method, "dropped");
            if refused == MAX_REFUSALS + 1 {
                tracing::warn!("Stopped answering a server that flooded one call with requests");
            }
            return Heard::Nothing;
        }
        self.observe(method, outcome);
        Heard::Reply(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}))
    }

    pub fn observe(&self, method: &str, outcome: &'static str) {
        self.core.metrics.observe_server_request(method, outcome);
    }
}

/// A request id as text in a key (`7`, `abc`).
pub fn key_text(id: &Value) -> String {
    match id {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
pub(in crate::bridge) mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bridge::audit::AuditSink;

    pub(in crate::bridge) fn core() -> Arc<Core> {
        let config = crate::bridge::config::parse(
            "apiVersion: mcp-operator.dev/v1alpha1\nkind: BridgeConfig\nrun: {name: r, namespace: d}\nservers: []\n",
            "test",
        )
        .expect("a valid configuration");
        let audit = AuditSink::open(false, None).expect("no file to open");
        Core::new(config, audit, Duration::from_secs(60))
    }

    pub(in crate::bridge) fn relay(
        declared: &[&str],
        token: Option<Value>,
    ) -> (Relay, mpsc::Receiver<ToAgent>, watch::Sender<Option<String>>) {
        let (to_agent, from_call) = mpsc::channel(AGENT_QUEUE);
        let (cancel, cancelled) = watch::channel(None);
        let declared = declared.iter().map(|c| (*c).to_owned()).collect();
        (
            Relay::new(core(), to_agent, token, declared, cancelled),
            from_call,
            cancel,
        )
    }

    fn request(id: u64, method: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"messages": []}})
    }

    fn refusal_code(heard: Heard) -> Option<i64> {
        match heard {
            Heard::Reply(reply) => reply["error"]["code"].as_i64(),
            _ => None,
        }
    }

    #[test]
    fn an_undeclared_capability_or_an_unknown_method_is_refused_never_asked() {
        let (relay, _from_call, _cancel) = relay(&["roots"], None);
        let sampled = relay.heard(&request(1, "sampling/createMessage"));
        assert_eq!(refusal_code(sampled), Some(METHOD_NOT_FOUND));
        assert_eq!(
            refusal_code(relay.heard(&request(2, "tools/call"))),
            Some(METHOD_NOT_FOUND)
        );
        assert!(matches!(
            relay.heard(&request(3, "roots/list")),
            Heard::Ask { .. }
        ));
        let pong = relay.heard(&request(4, "ping"));
        assert!(matches!(pong, Heard::Reply(reply) if reply["result"] == json!({})));
    }

    #[test]
    fn a_flood_is_bounded_then_refused_then_dropped() {
        let (relay, _from_call, _cancel) = relay(&["sampling"], None);
        let verdicts: Vec<Heard> = (0..200)
            .map(|id| relay.heard(&request(id, "sampling/createMessage")))
            .collect();
        let asked = verdicts.iter().filter(|h| matches!(h, Heard::Ask { .. })).count();
        let refused = verdicts.iter().filter(|h| matches!(h, Heard::Reply(_))).count();
        assert_eq!(asked, MAX_OPEN_ASKS);
        assert_eq!(refused, MAX_REFUSALS);
        let dropped = verdicts.iter().filter(|h| matches!(h, Heard::Nothing)).count();
        assert_eq!(dropped, 200 - MAX_OPEN_ASKS - MAX_REFUSALS);
    }

    #[test]
    fn a_request_about_an_ended_or_cancelled_call_is_refused() {
        let (ended, _from_call, _cancel) = relay(&["sampling"], None);
        ended.end();
        let late = ended.heard(&request(1, "sampling/createMessage"));
        assert_eq!(refusal_code(late), Some(INTERNAL_ERROR));
        let (cancelled, _from_call, cancel) = relay(&["sampling"], None);
        cancel.send_replace(Some("gone".into()));
        assert!(cancelled.is_cancelled());
        let late = cancelled.heard(&request(1, "sampling/createMessage"));
        assert_eq!(refusal_code(late), Some(INTERNAL_ERROR));
    }

    #[test]
    fn progress_for_the_bridges_token_reaches_the_agent_under_its_own() {
        let (relay, mut from_call, _cancel) = relay(&[], Some(json!(7)));
        assert_eq!(relay.meta(false)["progressToken"], json!(relay.token));
        for token in [json!(relay.token), json!("mcp-bridge-other"), json!(7)] {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": 1}});
            assert!(matches!(relay.heard(&note), Heard::Nothing));
        }
        let Ok(ToAgent::Note(note)) = from_call.try_recv() else {
            panic!("the call's own progress reaches its agent");
        };
        assert_eq!(note["params"]["progressToken"], json!(7));
        assert!(
            from_call.try_recv().is_err(),
            "another token's progress is not this agent's"
        );
    }

    #[test]
    fn a_2026_server_is_told_what_the_agent_declared() {
        let (relay, _from_call, _cancel) = relay(&["sampling"], None);
        let meta = relay.meta(true);
        assert!(meta.get("progressToken").is_none());
        assert_eq!(
            meta[crate::era::CLIENT_CAPABILITIES_META_KEY],
            json!({"sampling": {}})
        );
    }
}
