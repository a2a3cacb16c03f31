//! A relayed call at its server (`relay`'s upstream side): the request sent with the
//! call's `_meta` (the bridge's progress token, what a 2026-07-28 server is told the agent
//! declared); what the server says on the call's stream handed to the relay while the
//! answer is read (`Talk`: the relay's verdicts sent back to the server by tasks of the
//! call's own, never in the way of the stream, all ended with the call; a question the
//! server withdraws with `notifications/cancelled` stops being waited for); a 2026-07-28
//! server's `input_required` rounds answered by the agent and the call sent again with
//! `inputResponses` and its `requestState`; a cancellation told to a legacy server
//! (`notifications/cancelled`) or, for a 2026-07-28 one, the request's stream closed.
//! Also the answer to a server request no call can own (one on a legacy session's GET
//! stream): refused.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::task::{AbortHandle, JoinSet};

use super::relay::{Heard, MAX_ROUNDS, Relay, key_text};
use super::upstream::{Failure, HttpClient, Negotiated, Upstream};
use crate::jsonrpc::{INTERNAL_ERROR, MISSING_REQUIRED_CLIENT_CAPABILITY};

/// An answer to a server's request is given up when not taken within this.
const REPLY_SECONDS: Duration = Duration::from_secs(10);
/// The most of a server's reply to our answer that is read (then dropped).
const REPLY_BYTES: usize = 64 << 10;

/// What sends our messages (answers, a cancellation) to one session of a server.
pub struct Responder {
    client: HttpClient,
    uri: hyper::Uri,
    headers: Vec<(HeaderName, HeaderValue)>,
    version: String,
    session: Option<String>,
}

impl Responder {
    /// POST one message (a response or a notification); the server's reply is read and
    /// dropped. Best effort: a server that does not take it has lost its own request.
    pub async fn send(&self, message: Value) {
        let mut builder = Request::post(self.uri.clone());
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        builder = builder
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("accept-encoding", "identity");
        if !self.version.is_empty() {
            builder = builder.header("mcp-protocol-version", self.version.as_str());
        }
        if let Some(session) = &self.session {
            builder = builder.header("mcp-session-id", session.as_str());
        }
        let body = Bytes::from(serde_json::to_vec(&message).expect("a Value always encodes"));
        let Ok(request) = builder.body(Full::new(body)) else {
            return;
        };
        let sending = async {
            if let Ok(response) = self.client.request(request).await {
                let _ = http_body_util::Limited::new(response.into_body(), REPLY_BYTES)
                    .collect()
                    .await;
            }
        };
        let _ = tokio::time::timeout(REPLY_SECONDS, sending).await;
    }
}

/// What a call's stream says, judged by its relay; the answers sent by the call's tasks.
pub struct Talk {
    relay: Arc<Relay>,
    responder: Option<Arc<Responder>>,
    /// Aborted when the call's answer is read (the stream's reader drops this).
    tasks: JoinSet<()>,
    /// The questions being asked of the agent, by the server's request id (as text): what
    /// the server's `notifications/cancelled` stops.
    open: HashMap<String, AbortHandle>,
}

impl Talk {
    pub fn new(relay: Arc<Relay>, responder: Option<Responder>) -> Self {
        Self {
            relay,
            responder: responder.map(Arc::new),
            tasks: JoinSet::new(),
            open: HashMap::new(),
        }
    }

    /// A message with a method on the call's stream.
    pub fn heard(&mut self, message: &Value) {
        while self.tasks.try_join_next().is_some() {}
        self.open.retain(|_, task| !task.is_finished());
        let Some(responder) = self.responder.clone() else {
            return;
        };
        if message.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
            let gone = message.pointer("/params/requestId").map(key_text);
            if let Some(task) = gone.and_then(|id| self.open.remove(&id)) {
                task.abort(); // the server withdrew its question: the agent's answer is moot
                self.relay.ask_withdrawn();
            }
            return;
        }
        match self.relay.heard(message) {
            Heard::Nothing => {}
            Heard::Reply(reply) => {
                self.tasks.spawn(async move { responder.send(reply).await });
            }
            Heard::Ask { id, method, params } => {
                let relay = self.relay.clone();
                let key = key_text(&id);
                let task = self.tasks.spawn(async move {
                    let reply = relay.ask_for_server(id, &method, params).await;
                    responder.send(reply).await;
                });
                self.open.insert(key, task);
            }
        }
    }
}

impl Upstream {
    /// What answers this session of the server (None: its headers cannot be sent).
    pub(super) fn responder(&self, negotiated: &Negotiated) -> Option<Responder> {
        let headers = self.configured_headers().ok()?;
        if let Some(endpoint) = self.sse_endpoint() {
            // The legacy HTTP+SSE transport: the endpoint names the session, no headers do.
            let (client, uri, version, session) = (self.client.clone(), endpoint, String::new(), None);
            return Some(Responder {
                client,
                uri,
                headers,
                version,
                session,
            });
        }
        Some(Responder {
            client: self.client.clone(),
            uri: self.uri.clone(),
            headers,
            version: negotiated.protocol_version.clone(),
            session: negotiated.session_id.clone().filter(|_| !negotiated.modern),
        })
    }

    /// A relayed request (`tools/call`, `prompts/get`, `resources/read`) within `deadline`,
    /// unless its agent cancels it first: the server's final result.
    pub async fn call_relayed(
        &self,
        method: &str,
        params: Map<String, Value>,
        deadline: Duration,
        relay: &Arc<Relay>,
    ) -> Result<Value, Failure> {
        let outcome = tokio::select! {
            biased;
            () = relay.cancelled() => Err(Failure::Cancelled),
            answered = tokio::time::timeout(deadline, self.rounds(method, params, relay)) => {
                answered.unwrap_or(Err(Failure::Timeout))
            }
        };
        relay.end();
        match &outcome {
            Err(Failure::Cancelled) => self.tell_cancelled(relay).await,
            Err(Failure::Rpc { code, data, .. }) if *code == MISSING_REQUIRED_CLIENT_CAPABILITY => {
                let required = data.as_ref().and_then(|d| d.get("requiredCapabilities"));
                relay.missing(
                    required
                        .filter(|r| r.is_object())
                        .cloned()
                        .unwrap_or_else(|| json!({})),
                );
            }
            _ => {}
        }
        outcome
    }

    /// The request, and again with the agent's answers for each `input_required` round.
    async fn rounds(
        &self,
        method: &str,
        mut base: Map<String, Value>,
        relay: &Arc<Relay>,
    ) -> Result<Value, Failure> {
        let negotiated = self.connect().await?;
        let mut meta = match base.remove("_meta") {
            Some(Value::Object(meta)) => meta,
            _ => Map::new(),
        };
        meta.remove("progressToken"); // the agent's: the server gets the bridge's own
        meta.extend(relay.meta(negotiated.modern));
        if !meta.is_empty() {
            base.insert("_meta".into(), Value::Object(meta));
        }
        let mut sent = base.clone();
        for _ in 0..=MAX_ROUNDS {
            let result = self.once(method, sent, Some(relay)).await?;
            if result.get("resultType").and_then(Value::as_str) != Some("input_required") {
                return Ok(result);
            }
            let answers = super::inputs::answers(relay, &self.server.key(), &result).await?;
            sent = base.clone();
            sent.insert("inputResponses".into(), Value::Object(answers));
            if let Some(state) = result.get("requestState").filter(|s| s.is_string()) {
                sent.insert("requestState".into(), state.clone());
            }
        }
        Err(Failure::Protocol(format!(
            "{} asked for the agent's input more than {MAX_ROUNDS} times",
            self.server.key()
        )))
    }

    /// Tell a legacy server its request was cancelled (a 2026-07-28 server saw its stream
    /// close when the request was dropped).
    async fn tell_cancelled(&self, relay: &Relay) {
        let Some(negotiated) = self.negotiated().await.filter(|n| !n.modern) else {
            return;
        };
        let (Some(id), Some(responder)) = (relay.upstream_id(), self.responder(&negotiated)) else {
            return;
        };
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "The agent cancelled the call"}});
        responder.send(notification).await;
    }

    /// A server request that belongs to no call (on a legacy session's GET stream): refused,
    /// never sent to an agent.
    pub async fn refuse_unattributed(&self, message: &Value) {
        let Some(id) = message.get("id").filter(|id| crate::jsonrpc::valid_id(id)) else {
            return;
        };
        let Some(negotiated) = self.negotiated().await else {
            return;
        };
        if let Some(responder) = self.responder(&negotiated) {
            let text = "The bridge relays requests only about a call in flight";
            let refusal =
                json!({"jsonrpc": "2.0", "id": id, "error": {"code": INTERNAL_ERROR, "message": text}});
            responder.send(refusal).await;
        }
    }
}
