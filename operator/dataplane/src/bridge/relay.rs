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
//!   [`MAX_OPEN_ASKS`] waiting at once, [`MAX_ROUNDS`] rounds of [`MAX_INPUT_REQUESTS`]. Past
//!   [`MAX_REFUSALS`] refusals a flood is dropped unanswered.
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
use super::upstream::Failure;
use crate::capabilities::{capabilities_object, capability_for};
use crate::jsonrpc::{INTERNAL_ERROR, METHOD_NOT_FOUND, MISSING_REQUIRED_CLIENT_CAPABILITY};

/// Server requests relayed to the agent during one call (a sampling loop, a form per step).
pub const MAX_ASKS_PER_CALL: usize = 32;
/// Server requests of one call waiting for the agent at once.
pub const MAX_OPEN_ASKS: usize = 4;
/// Refusals one call sends its server; past that, its requests are dropped unanswered.
pub const MAX_REFUSALS: usize = 64;
/// `input_required` rounds of a 2026-07-28 server in one call.
pub const MAX_ROUNDS: usize = 16;
/// Requests in one such round.
pub const MAX_INPUT_REQUESTS: usize = 16;
/// The longest `inputRequests` key passed to the agent.
pub const MAX_KEY_CHARS: usize = 128;
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
        let Some(capability) = capability_for(method) else {
            return self.refuse(id, method, "unsupported", METHOD_NOT_FOUND, "Method not found");
        };
        if !self.declared.contains(capability) {
            let text = format!("The client did not declare {capability}");
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

    /// Ask the agent one question of a legacy server (after [`Heard::Ask`]); the JSON-RPC
    /// response for the server.
    pub async fn ask_for_server(&self, id: Value, method: &str, params: Value) -> Value {
        let key = format!("request-{}", key_text(&id));
        let answered = self.ask(key, method, params).await;
        lock(&self.counts).open -= 1;
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

    /// The agent's answers to a 2026-07-28 server's round (`inputRequests` of `result`), by key.
    pub async fn inputs(&self, server: &str, result: &Value) -> Result<Map<String, Value>, Failure> {
        let requests = result.get("inputRequests").and_then(Value::as_object);
        let valid = requests.filter(|r| {
            (1..=MAX_INPUT_REQUESTS).contains(&r.len())
                && r.iter().all(|(key, request)| {
                    (1..=MAX_KEY_CHARS).contains(&key.chars().count())
                        && request.get("method").is_some_and(Value::is_string)
                })
        });
        let Some(requests) = valid else {
            return Err(Failure::Protocol(format!(
                "{server} asked for input with inputRequests that are not 1 to {MAX_INPUT_REQUESTS} requests under keys of at most {MAX_KEY_CHARS} characters"
            )));
        };
        let mut asked = Vec::new();
        for (key, request) in requests {
            let method = request["method"].as_str().unwrap_or_default();
            let Some(capability) = capability_for(method) else {
                self.observe(method, "unsupported");
                return Err(Failure::Rpc {
                    code: METHOD_NOT_FOUND,
                    message: format!(
                        "{server} asked the agent for {method}, which the bridge does not relay"
                    ),
                    data: None,
                });
            };
            if !self.declared.contains(capability) {
                self.observe(method, "undeclared");
                let required = json!({capability: {}});
                *lock(&self.required) = Some(required.clone());
                return Err(Failure::Rpc {
                    code: MISSING_REQUIRED_CLIENT_CAPABILITY,
                    message: format!(
                        "{server} asked the agent for {method}, but the agent did not declare {capability}"
                    ),
                    data: Some(json!({"requiredCapabilities": required})),
                });
            }
            let params = self
                .core
                .scrubber
                .json(request.get("params").cloned().unwrap_or_else(|| json!({})));
            asked.push((key.clone(), method.to_owned(), params));
        }
        {
            let mut counts = lock(&self.counts);
            counts.asked += asked.len();
            if counts.asked > MAX_ASKS_PER_CALL {
                drop(counts);
                for (_, method, _) in &asked {
                    self.observe(method, "bounded");
                }
                return Err(Failure::Protocol(format!(
                    "{server} asked the agent more than {MAX_ASKS_PER_CALL} times in one call"
                )));
            }
        }
        let mut waiting = Vec::new();
        for (key, method, params) in asked {
            waiting.push((
                key.clone(),
                method.clone(),
                self.send_ask(key, &method, params).await,
            ));
        }
        let mut answers = Map::new();
        for (key, method, answer) in waiting {
            let answered = match answer {
                Ok(receiver) => receiver
                    .await
                    .unwrap_or_else(|_| Err(Refusal::internal("The agent's side of the call ended"))),
                Err(refusal) => Err(refusal),
            };
            match answered {
                Ok(result) => {
                    self.observe(&method, "relayed");
                    answers.insert(key, result);
                }
                Err(refusal) => {
                    self.observe(&method, "agent_error");
                    return Err(Failure::Rpc {
                        code: refusal.code,
                        message: format!(
                            "the agent could not answer {server}'s request: {}",
                            refusal.message
                        ),
                        data: None,
                    });
                }
            }
        }
        Ok(answers)
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

    async fn send_ask(
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

    fn observe(&self, method: &str, outcome: &'static str) {
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
