//! The input-required rounds of 2026-07-28 calls: the child's questions settled (what the
//! caller answered ahead goes to the child, the rest is asked), the call parked for its
//! caller's retry under a `requestState` token (at most half the calls in flight, each for
//! one request timeout), and cancelled at the child when its caller does not retry in time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::calls::Waiting;
use crate::adapter::core::Core;
use crate::era;
use crate::jsonrpc;
use crate::rounds::{Ask, RoundStore};

/// How long to wait for more questions of the child before answering with the ones so far,
/// and at most how many such waits (a child that keeps asking is answered after 100 ms).
const SETTLE: Duration = Duration::from_millis(10);
const SETTLE_ROUNDS: usize = 10;

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

    pub(super) fn take(
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
    pub(super) async fn settle(&self, waiting: &mut Waiting, first: Value) -> Settled {
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
    pub(super) fn park(&self, mut waiting: Waiting, asked: BTreeMap<String, Ask>) -> Value {
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
    pub(super) fn drop_parked(&self, dropped: Vec<Waiting>, reason: &str) {
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

/// What the child's questions came to once settled.
pub(super) enum Settled {
    /// Everything asked was answered already: wait on.
    Nothing,
    /// The call's answer came meanwhile.
    Answered(Value),
    /// Questions for the caller, by key.
    Asked(BTreeMap<String, Ask>),
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An interactive 2026-07-28 call's rounds: what it is about, what its caller answered ahead,
/// what it was asked and has not answered.
pub struct Round {
    pub(super) method: String,
    pub(super) target: Option<String>,
    pub(super) answers: Map<String, Value>,
    pub(super) asked: BTreeMap<String, Ask>,
}
