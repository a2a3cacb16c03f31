//! One forwarded call, from its request to its answer: sent to the child under a fresh id
//! (refused with 503 when too many are in flight), waited for with its deadline, answered as
//! JSON or, once something related to it comes first and the caller accepts it, as an SSE
//! stream; counted, audited and shaped for the caller's era; cancelled at the child when its
//! caller goes first. A 2026-07-28 call's questions end its request with an input-required
//! round (`rounds`).

use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use hyper::Response;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Sleep;

use super::rounds::{Round, Settled};
use super::{Caller, Front, unavailable};
use crate::adapter::audit::{Audit, ToolName, outcome_of, tool_of};
use crate::adapter::core::Core;
use crate::adapter::router::{CallSink, Envelope};
use crate::era;
use crate::http::{self, Body};
use crate::jsonrpc::{self, INTERNAL_ERROR};

/// JSON-RPC code of a call that was not answered in time (the SDK's REQUEST_TIMEOUT).
const REQUEST_TIMEOUT: i64 = -32001;

impl Front {
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn forward(
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
    pub(super) async fn answer(&self, mut waiting: Waiting) -> Response<Body> {
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

/// One step of waiting for a call.
enum Step {
    Related(Value),
    Answer(Value),
    Ask(Value),
    TimedOut,
}

/// The next question of the child, or never for a call that cannot have rounds.
async fn next_ask(asks: &mut Option<mpsc::UnboundedReceiver<Value>>) -> Option<Value> {
    match asks {
        Some(asks) => asks.recv().await,
        None => std::future::pending().await,
    }
}

/// A forwarded call between its request and its answer; an interactive 2026-07-28 call's is
/// kept across its rounds (parked in `Front::rounds` between them).
pub struct Waiting {
    pub(super) child_id: u64,
    /// The id of the request that waits now (a retry brings its own).
    pub(super) client_id: Value,
    pub(super) answered: oneshot::Receiver<Value>,
    pub(super) relayed: mpsc::Receiver<Value>,
    pub(super) asks: Option<mpsc::UnboundedReceiver<Value>>,
    pub(super) finish: Finish,
    pub(super) guard: CallGuard,
    pub(super) timeout: Pin<Box<Sleep>>,
    pub(super) round: Option<Round>,
}

impl Waiting {
    fn gone(&self) -> Value {
        jsonrpc::error_response(
            Some(&self.client_id),
            INTERNAL_ERROR,
            crate::adapter::core::CHILD_EXITED,
        )
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
pub(super) struct Finish {
    core: Arc<Core>,
    audit: Option<(Arc<Audit>, ToolName)>,
    caller: Value,
    method: String,
    pub(super) modern: Option<(String, Arc<Value>)>,
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

/// Cancels its call at the child when dropped before the call ended (the client went away).
pub(super) struct CallGuard {
    core: Arc<Core>,
    child_id: u64,
    session: Option<String>,
    pub(super) done: bool,
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
