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
//! counted by method and outcome. Modules:
//!
//! - this one the relay of one call: its bounds, its token, its cancellation, what ended it
//! - `heard`  what the server sends on the call's stream, judged: asked, refused, answered,
//!   progress passed on

mod heard;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use super::core::Core;
use crate::capabilities::capabilities_object;
use crate::jsonrpc::INTERNAL_ERROR;

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
    /// A question for the agent.
    Ask(Question),
}

/// A question (`{"method", "params"}`) under a key; the agent's result, or a refusal.
pub struct Question {
    pub key: String,
    pub request: Value,
    pub answer: oneshot::Sender<Result<Value, Refusal>>,
    /// Only an answer given after the question reached the agent counts (the bridge's own
    /// question, an approval: never one a 2026-07-28 agent sent along before).
    pub fresh: bool,
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
    /// The agent's log level for this call (`logs`): its session's, or its request's.
    log_level: Mutex<Option<String>>,
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
            log_level: Mutex::default(),
        }
    }

    /// The agent's log level for this call (None: it gets no logs), set before it starts.
    pub fn set_log_level(&self, level: Option<String>) {
        *lock(&self.log_level) = level;
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
            if let Some(level) = lock(&self.log_level).clone() {
                meta.insert(crate::era::LOG_LEVEL_META_KEY.into(), json!(level));
            }
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

    /// The call is sent to its server again (a retry, `retry`): it is live again.
    pub fn resend(&self) {
        self.ended.store(false, Ordering::Relaxed);
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

    /// What a server says, masked for the agent.
    pub fn scrub(&self, value: Value) -> Value {
        self.core.scrubber.json(value)
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
