//! One relayed call waited for on the agent's side, in the agent's era (`agent` starts it):
//!
//! - **a legacy agent**: what the server says about the call (progress, its questions, each
//!   under an id of the session's own) goes on the POST's answer, which turns from JSON to
//!   Server-Sent Events with the first of them, when the agent accepts SSE; else on the
//!   session's GET stream (a question with no stream to go on is refused to the server).
//!   Its answers come back as POSTed responses (`agent::Calls::answered`);
//! - **a 2026-07-28 agent**: progress goes on the request's SSE answer when it accepts one;
//!   questions, gathered for a moment, end the request with an `input_required` result and
//!   park the call for the retry (`agent::Calls::park`), which brings `inputResponses`;
//!   answers the agent sent along before it was asked count for a question of that key. A
//!   call that needed a capability the agent did not declare answers `-32021`.
//!
//! A call whose request goes away (the agent closed it, its stream) is cancelled; the call's
//! own task finishes on its own and writes its audit line. A legacy call its agent cancelled
//! gets no answer (its stream ends without one).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use hyper::Response;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};

use super::agent::round_reply;
use super::core::Core;
use super::relay::{Question, Refusal, Relay, ToAgent};
use crate::http::{self, Body};
use crate::jsonrpc::{self, INTERNAL_ERROR, MISSING_REQUIRED_CLIENT_CAPABILITY};

/// How long to wait for more questions before a round is answered with the ones so far.
const SETTLE: Duration = Duration::from_millis(10);
const SETTLE_ROUNDS: usize = 10;
/// Messages of one call's SSE answer queued for the agent.
const EVENT_QUEUE: usize = 64;
/// An agent that takes nothing off a full SSE answer for this long has its call ended.
const STALLED: Duration = Duration::from_secs(30);

type Answer = oneshot::Sender<Result<Value, Refusal>>;

/// The agent's era, and what its side of the call keeps.
pub enum Side {
    Legacy {
        session: String,
        client_id: String,
        sse: bool,
        /// The tasks that wait for the agent's answers (ended with the call).
        asks: JoinSet<()>,
        /// The ids of the questions it was sent.
        sent: Vec<u64>,
    },
    Modern {
        request_id: Value,
        version: String,
        method: String,
        target: Option<String>,
        sse: bool,
        pending: BTreeMap<String, (Value, Answer)>,
        early: Map<String, Value>,
    },
}

impl Side {
    pub fn legacy(session: String, client_id: String, sse: bool) -> Self {
        Side::Legacy {
            session,
            client_id,
            sse,
            asks: JoinSet::new(),
            sent: Vec::new(),
        }
    }

    pub fn modern(
        request_id: Value,
        version: String,
        method: String,
        target: Option<String>,
        sse: bool,
        early: Map<String, Value>,
    ) -> Self {
        Side::Modern {
            request_id,
            version,
            method,
            target,
            sse,
            pending: BTreeMap::new(),
            early,
        }
    }
}

/// What waiting brought.
enum Out {
    /// A message for the agent's stream.
    Event(Value),
    /// The answer (its HTTP status when it is the only thing sent).
    Final(u16, Value),
    /// Questions for a 2026-07-28 agent: the call is to be parked.
    Round,
    /// A legacy call its agent cancelled: no answer (a stream ends without one).
    Unanswered,
}

pub struct Call {
    core: Arc<Core>,
    from_call: mpsc::Receiver<ToAgent>,
    done: JoinHandle<Value>,
    cancel: Arc<watch::Sender<Option<String>>>,
    relay: Arc<Relay>,
    side: Side,
    finished: bool,
    /// Progress that came while a round's questions were gathered, for the SSE answer.
    held: VecDeque<Value>,
}

impl Call {
    pub fn new(
        core: Arc<Core>,
        from_call: mpsc::Receiver<ToAgent>,
        done: JoinHandle<Value>,
        cancel: Arc<watch::Sender<Option<String>>>,
        relay: Arc<Relay>,
        side: Side,
    ) -> Self {
        Self {
            core,
            from_call,
            done,
            cancel,
            relay,
            side,
            finished: false,
            held: VecDeque::new(),
        }
    }

    /// A 2026-07-28 agent's retry: its request now waits, its answers go to the questions.
    pub fn resume(&mut self, id: Value, sse_ok: bool, answers: Map<String, Value>) {
        if let Side::Modern {
            request_id,
            sse,
            pending,
            ..
        } = &mut self.side
        {
            *request_id = id;
            *sse = sse_ok;
            for (key, value) in answers {
                if let Some((_, answer)) = pending.remove(&key) {
                    let _ = answer.send(Ok(value));
                }
            }
        }
    }

    async fn next(&mut self) -> Out {
        loop {
            if let Some(note) = self.held.pop_front() {
                return Out::Event(note);
            }
            if let Side::Modern { pending, .. } = &mut self.side {
                pending.retain(|_, (_, answer)| !answer.is_closed()); // withdrawn meanwhile
                if !pending.is_empty() && !self.done.is_finished() {
                    return Out::Round;
                }
            }
            let message = tokio::select! {
                biased;
                Some(message) = self.from_call.recv() => message,
                reply = &mut self.done => {
                    self.finished = true;
                    let reply = reply.unwrap_or_else(|_| {
                        jsonrpc::error_response(None, INTERNAL_ERROR, "The call failed")
                    });
                    return self.shaped(reply);
                }
            };
            match message {
                ToAgent::Note(note) => match &self.side {
                    Side::Legacy { sse: true, .. } | Side::Modern { sse: true, .. } => {
                        return Out::Event(note);
                    }
                    Side::Legacy { session, .. } => {
                        push(&self.core, session, &note);
                    }
                    Side::Modern { .. } => {} // no stream to carry it
                },
                ToAgent::Ask(question) => {
                    if let Some(event) = self.ask(question).await {
                        return Out::Event(event);
                    }
                }
            }
        }
    }

    /// A question for the agent: for a legacy agent, the request to send on its stream (or
    /// None when it went on the GET stream or could not go); a 2026-07-28 agent's waits for
    /// the round.
    async fn ask(&mut self, question: Question) -> Option<Value> {
        match &mut self.side {
            Side::Legacy {
                session,
                sse,
                asks,
                sent,
                ..
            } => {
                let visible = self.core.sessions().get_mut(session).map(|s| {
                    s.next_server_request_id += 1;
                    s.next_server_request_id
                });
                let Some(visible) = visible else {
                    let _ = question
                        .answer
                        .send(Err(Refusal::internal("The client's session ended")));
                    return None;
                };
                let mut message = question.request;
                message["jsonrpc"] = json!("2.0");
                message["id"] = json!(visible);
                let answered = self.core.calls.expect(session, visible);
                if !*sse && !push(&self.core, session, &message) {
                    self.core.calls.forget(session, &[visible]);
                    let method = message["method"].as_str().unwrap_or_default();
                    let text = format!("No open stream to deliver {method} to the client on");
                    let _ = question.answer.send(Err(Refusal::internal(&text)));
                    return None;
                }
                sent.push(visible);
                asks.spawn(await_answer(answered, question.answer));
                sse.then_some(message)
            }
            Side::Modern { .. } => {
                self.gather(question);
                for _ in 0..SETTLE_ROUNDS {
                    tokio::time::sleep(SETTLE).await;
                    let mut more = false;
                    while let Ok(message) = self.from_call.try_recv() {
                        match message {
                            ToAgent::Ask(question) => {
                                self.gather(question);
                                more = true;
                            }
                            ToAgent::Note(note) => {
                                if matches!(self.side, Side::Modern { sse: true, .. }) {
                                    self.held.push_back(note);
                                }
                            }
                        }
                    }
                    if !more || self.done.is_finished() {
                        break;
                    }
                }
                None
            }
        }
    }

    /// A 2026-07-28 agent's question: answered from what it sent along (never a `fresh`
    /// one: the bridge's own question takes only the answer to the round), else pending.
    pub(super) fn gather(&mut self, question: Question) {
        if let Side::Modern { pending, early, .. } = &mut self.side {
            if !question.fresh
                && let Some(given) = early.remove(&question.key)
            {
                let _ = question.answer.send(Ok(given));
                return;
            }
            let mut shown = question.key;
            while pending.contains_key(&shown) {
                shown.push('-'); // two questions under one key
            }
            pending.insert(shown, (question.request, question.answer));
        }
    }

    /// The call's answer as its agent's era wants it, with the HTTP status of a lone answer.
    fn shaped(&self, mut reply: Value) -> Out {
        let Side::Modern {
            request_id,
            version,
            method,
            ..
        } = &self.side
        else {
            if self.relay.is_cancelled() {
                return Out::Unanswered;
            }
            return Out::Final(200, reply);
        };
        if let Some(required) = self.relay.required() {
            let mut names: Vec<&String> = required
                .as_object()
                .map(|o| o.keys().collect())
                .unwrap_or_default();
            names.sort();
            let names = names.iter().map(|n| n.as_str()).collect::<Vec<_>>().join(", ");
            let text = format!(
                "The client did not declare {}",
                if names.is_empty() { "a capability" } else { &names }
            );
            reply = jsonrpc::error_response(Some(request_id), MISSING_REQUIRED_CLIENT_CAPABILITY, &text);
            reply["error"]["data"] = json!({"requiredCapabilities": required});
        }
        reply["id"] = request_id.clone();
        if let Some(code) = reply
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_i64)
        {
            return Out::Final(jsonrpc::http_status_for(code), reply);
        }
        let init = self.core.init_result(version);
        if let Some(result) = reply.get_mut("result") {
            *result = crate::era::modern_result(method, version, result.take(), init.get("serverInfo"));
        }
        Out::Final(200, reply)
    }

    /// Park a 2026-07-28 call for its retry; the `input_required` reply of this round.
    fn park(self) -> Value {
        let Side::Modern {
            request_id,
            version,
            method,
            target,
            pending,
            ..
        } = &self.side
        else {
            unreachable!("only a 2026-07-28 call has rounds")
        };
        let requests: Map<String, Value> = pending.iter().map(|(k, (r, _))| (k.clone(), r.clone())).collect();
        let (core, id, version) = (self.core.clone(), request_id.clone(), version.clone());
        let (method, target) = (method.clone(), target.clone());
        let token = core.calls.park(self, &method, target);
        round_reply(&core, &id, &version, requests, token)
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        if !self.finished {
            self.cancel
                .send_replace(Some("The agent closed its request".to_owned()));
        }
        if let Side::Legacy {
            session,
            client_id,
            sent,
            ..
        } = &self.side
        {
            self.core.calls.forget(session, sent);
            self.core.calls.finished(session, client_id);
            if let Some(session) = self.core.sessions().get_mut(session) {
                session.open_requests = session.open_requests.saturating_sub(1);
            }
        }
    }
}

/// A message on a legacy session's GET stream; false when it has none or it is full.
fn push(core: &Core, session: &str, message: &Value) -> bool {
    core.sessions().get(session).is_some_and(|s| s.push(message))
}

/// Wait for a legacy agent's answer to one question; pass it to the relay as a result or a
/// refusal (nothing when the call ended first).
async fn await_answer(answered: oneshot::Receiver<Value>, mut answer: Answer) {
    let message = tokio::select! {
        message = answered => message,
        () = answer.closed() => return,
    };
    let Ok(message) = message else {
        let _ = answer.send(Err(Refusal::internal("The client could not be asked")));
        return;
    };
    let outcome = match (message.get("result"), message.get("error")) {
        (_, Some(error)) => Err(Refusal {
            code: error
                .get("code")
                .and_then(Value::as_i64)
                .unwrap_or(INTERNAL_ERROR),
            message: error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }),
        (Some(result), None) if result.is_object() => Ok(result.clone()),
        _ => Err(Refusal::internal("The client answered without a result")),
    };
    let _ = answer.send(outcome);
}

/// Wait for the call and answer its request: JSON, or SSE once something went first.
pub async fn answer(mut call: Call) -> Response<Body> {
    let first = match call.next().await {
        Out::Final(status, reply) => return http::json(status, &reply),
        Out::Round => return http::json(200, &call.park()),
        Out::Unanswered => return http::json(200, &json!({})),
        Out::Event(first) => first,
    };
    let (events, receiver) = mpsc::channel(EVENT_QUEUE);
    tokio::spawn(async move {
        if !send_within(&events, first).await {
            return; // the agent went away (or stopped reading): dropping the call cancels it
        }
        loop {
            let out = tokio::select! {
                out = call.next() => out,
                () = events.closed() => return,
            };
            let last = match out {
                Out::Event(event) => {
                    if !send_within(&events, event).await {
                        return;
                    }
                    continue;
                }
                Out::Final(_, reply) => reply,
                Out::Round => call.park(),
                Out::Unanswered => return,
            };
            send_within(&events, last).await;
            return;
        }
    });
    http::events(receiver)
}

/// Queue a message on an SSE answer; false when the agent went away or has not read its
/// stream for [`STALLED`] (a full queue then ends the call rather than hold it).
async fn send_within(events: &mpsc::Sender<Value>, message: Value) -> bool {
    matches!(
        tokio::time::timeout(STALLED, events.send(message)).await,
        Ok(Ok(()))
    )
}
