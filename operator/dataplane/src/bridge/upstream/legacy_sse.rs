//! A server of the legacy HTTP+SSE transport (2024-11-05, `transport: sse`), as
//! `mcp/legacy_sse.py` reaches it: a `GET` on the server's URL opens an event stream whose
//! first `endpoint` event names where every message is `POST`ed; each POST is answered `202`
//! and every answer comes back on that one stream, read by one task for as long as it lives.
//!
//! - The stream's head and its `endpoint` are awaited `OPEN_STREAM_SECONDS` each; the era is
//!   the handshake's only (no `server/discover`); one event larger than `MAX_EVENT_BYTES`
//!   ends the stream.
//! - The endpoint is resolved against the stream's URL and must be on its origin (scheme,
//!   host, port), else it is refused: the session's headers would go to another server.
//! - Answers are matched to their request by integer id; an answer nobody waits for is
//!   dropped. `notifications/progress` whose token a relayed call sent goes to that call.
//! - A lost stream fails every waiting request (`unavailable`), and the next request opens a
//!   new stream and handshakes again.
//! - A server request (sampling, elicitation, roots) is tied to no call on this transport:
//!   refused (`-32601`); `ping` is answered; at most `MAX_ERRANDS` such answers at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::AbortHandle;

use super::legacy_routing::{Events, endpoint_url, session_of};
use super::{Failure, HttpClient, Negotiated, Upstream};
use crate::bridge::relay::Relay;
use crate::bridge::upcall::Talk;

#[cfg(test)]
#[path = "legacy_sse_tests.rs"]
mod tests;

/// How long the stream's head, then its `endpoint` event, are awaited (each).
const OPEN_STREAM_SECONDS: u64 = 10;
/// One event of the stream larger than this ends the stream (an answer comes in one event).
const MAX_EVENT_BYTES: usize = 8 << 20;
/// Answers to the server's own requests in flight at once; past it they are dropped.
const MAX_ERRANDS: usize = 16;
/// Our answer to a server's request is given up when not taken within this.
const ERRAND_SECONDS: u64 = 10;

struct Waiter {
    answer: oneshot::Sender<Value>,
    /// Where the call's progress goes (a relayed call).
    heard: Option<mpsc::Sender<Value>>,
}

#[derive(Default)]
struct Waiting {
    by_id: HashMap<u64, Waiter>,
    /// Progress token (as JSON text) → the id of the request that sent it.
    progress: HashMap<String, u64>,
}

/// One open event stream: its endpoint, what waits on it; its reader stops when dropped.
pub(super) struct SseStream {
    endpoint: hyper::Uri,
    session: String,
    waiting: Arc<Mutex<Waiting>>,
    changes: watch::Receiver<u64>,
    reader: AbortHandle,
}

impl Drop for SseStream {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Removes a request's waiter however its wait ends.
struct Registered<'a> {
    stream: &'a SseStream,
    id: Option<u64>,
    token: Option<String>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        let mut waiting = lock(&self.stream.waiting);
        if let Some(id) = self.id {
            waiting.by_id.remove(&id);
        }
        if let Some(token) = &self.token {
            waiting.progress.remove(token);
        }
    }
}

impl Upstream {
    pub(super) fn is_legacy_sse(&self) -> bool {
        self.server.transport == "sse"
    }

    fn sse_current(&self) -> Option<Arc<SseStream>> {
        lock(&self.sse).clone()
    }

    /// Whether the session may be used: always for Streamable HTTP; for this transport,
    /// while its stream is read.
    pub(super) fn sse_alive(&self) -> bool {
        !self.is_legacy_sse() || self.sse_current().is_some_and(|s| !s.reader.is_finished())
    }

    /// Let go of the stream (it closes when the last request waiting on it is over).
    pub(super) fn sse_forget(&self) {
        lock(&self.sse).take();
    }

    /// Where messages are posted while the stream is open.
    pub(in crate::bridge) fn sse_endpoint(&self) -> Option<hyper::Uri> {
        self.sse_current().map(|s| s.endpoint.clone())
    }

    /// Open the event stream and learn its endpoint; it becomes the session's stream.
    pub(super) async fn sse_open(&self) -> Result<(), Failure> {
        let key = self.server.key();
        self.sse_forget();
        let headers = self.configured_headers()?;
        let mut builder = Request::get(self.uri.clone());
        for (name, value) in &headers {
            builder = builder.header(name, value);
        }
        let request = builder
            .header("accept", "text/event-stream")
            .header("accept-encoding", "identity")
            .body(Full::new(Bytes::new()))
            .map_err(|e| Failure::Misconfigured(format!("the request cannot be made: {e}")))?;
        let open = Duration::from_secs(OPEN_STREAM_SECONDS);
        let response = tokio::time::timeout(open, self.transmit(request))
            .await
            .map_err(|_| {
                Failure::Unavailable(format!(
                    "{key} did not open its event stream in {OPEN_STREAM_SECONDS}s"
                ))
            })??;
        let status = response.status().as_u16();
        let media = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if status != 200 || !media.starts_with("text/event-stream") {
            if status >= 300 {
                let why = "the event stream was refused".to_owned();
                return Err(Failure::of_status(status, response.headers(), why));
            }
            let media = Some(media.as_str()).filter(|m| !m.is_empty());
            let media = media.unwrap_or("no content type");
            let why = format!("{key} answered GET with HTTP {status} and {media}, not an event stream");
            return Err(Failure::Protocol(why));
        }
        let (named, endpoint) = oneshot::channel();
        let (changed, changes) = watch::channel(0);
        let waiting = Arc::new(Mutex::new(Waiting::default()));
        let reader = Reader {
            key: key.clone(),
            base: self.uri.clone(),
            client: self.client.clone(),
            headers,
            waiting: waiting.clone(),
            changed,
            errands: Arc::new(AtomicUsize::new(0)),
        };
        let task = tokio::spawn(reader.read(response.into_body(), named));
        let reader = task.abort_handle();
        let closed = || Err(Failure::Unavailable(format!("{key} closed its event stream")));
        let named = tokio::time::timeout(open, endpoint)
            .await
            .map_err(|_| {
                let why = format!("{key} named no endpoint on its event stream in {OPEN_STREAM_SECONDS}s");
                Failure::Unavailable(why)
            })
            .and_then(|named| named.unwrap_or_else(|_| closed()));
        let (endpoint, session) = match named {
            Ok(named) => named,
            Err(failure) => {
                reader.abort();
                return Err(failure);
            }
        };
        let stream = SseStream {
            endpoint,
            session,
            waiting,
            changes,
            reader,
        };
        *lock(&self.sse) = Some(Arc::new(stream));
        Ok(())
    }

    /// One message posted to the endpoint; for a request, its answer off the stream (what
    /// the server says about a relayed call on the way goes to its relay).
    pub(super) async fn sse_post(
        &self,
        negotiated: &Negotiated,
        method: &str,
        params: Option<&Map<String, Value>>,
        id: Option<u64>,
        relay: Option<&Arc<Relay>>,
    ) -> Result<(u16, Option<String>, Option<Value>), Failure> {
        let key = self.server.key();
        let Some(stream) = self.sse_current() else {
            return Err(Failure::Unavailable(format!(
                "the event stream of {key} is not open"
            )));
        };
        let mut message = json!({"jsonrpc": "2.0", "method": method, "id": id, "params": params});
        if let Some(message) = message.as_object_mut() {
            message.retain(|_, v| !v.is_null()); // a notification has no id; no params, none
        }
        let (answer, mut answered) = oneshot::channel();
        let (heard, mut hearing) = mpsc::channel(64);
        let token = params
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"))
            .map(Value::to_string)
            .filter(|_| relay.is_some() && id.is_some());
        let _registered = Registered {
            stream: &stream,
            id,
            token: token.clone(),
        };
        if let Some(id) = id {
            let mut waiting = lock(&stream.waiting);
            let heard = relay.map(|_| heard);
            waiting.by_id.insert(id, Waiter { answer, heard });
            if let Some(token) = token {
                waiting.progress.insert(token, id);
            }
        }
        let mut builder = Request::post(stream.endpoint.clone());
        for (name, value) in self.configured_headers()? {
            builder = builder.header(name, value);
        }
        let body = Bytes::from(serde_json::to_vec(&message).expect("a Value always encodes"));
        let request = builder
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("accept-encoding", "identity")
            .body(Full::new(body))
            .map_err(|e| Failure::Misconfigured(format!("the request cannot be made: {e}")))?;
        let response = self.transmit(request).await?;
        let status = response.status().as_u16();
        let (parts, body) = response.into_parts();
        let text = http_body_util::Limited::new(body, 64 << 10)
            .collect()
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        if status >= 300 {
            let why = String::from_utf8_lossy(&text).chars().take(200).collect();
            return Err(Failure::of_status(status, &parts.headers, why));
        }
        let session = Some(stream.session.clone());
        if id.is_none() {
            return Ok((status, session, None));
        }
        let mut talk = relay.map(|relay| Talk::new(relay.clone(), self.responder(negotiated)));
        loop {
            tokio::select! {
                answer = &mut answered => {
                    return match answer {
                        Ok(message) => Ok((status, session, Some(message))),
                        Err(_) => Err(Failure::Unavailable(format!("{key} closed its event stream"))),
                    };
                }
                Some(message) = hearing.recv() => {
                    if let Some(talk) = talk.as_mut() {
                        talk.heard(&message);
                    }
                }
            }
        }
    }

    /// Follow the session's stream for list changes: `on_change` once it is open (a change
    /// announced before reached no one), then at each announced change; returns when the
    /// stream ends or cannot be opened.
    pub async fn follow_sse(&self, on_change: impl Fn()) {
        let Ok(negotiated) = self.connect().await else {
            return;
        };
        let Some(mut changes) = self.sse_current().map(|s| s.changes.clone()) else {
            return;
        };
        if negotiated.list_changed {
            on_change();
        }
        while changes.changed().await.is_ok() {
            if negotiated.list_changed {
                on_change();
            }
        }
    }
}

/// What the stream's reader task holds.
struct Reader {
    key: String,
    base: hyper::Uri,
    client: HttpClient,
    headers: Vec<(HeaderName, HeaderValue)>,
    waiting: Arc<Mutex<Waiting>>,
    changed: watch::Sender<u64>,
    errands: Arc<AtomicUsize>,
}

type Named = Result<(hyper::Uri, String), Failure>;

impl Reader {
    async fn read(self, mut body: hyper::body::Incoming, named: oneshot::Sender<Named>) {
        let key = &self.key;
        let mut named = Some(named);
        let mut endpoint: Option<hyper::Uri> = None;
        let mut events = Events::default();
        let failure = 'reading: loop {
            let frame = match body.frame().await {
                None => break format!("{key} closed its event stream"),
                Some(Err(e)) => break format!("the event stream of {key} broke ({e})"),
                Some(Ok(frame)) => frame,
            };
            let Some(data) = frame.data_ref() else { continue };
            events.push(data);
            while let Some((kind, data)) = events.next_event() {
                if kind == "endpoint" {
                    if endpoint.is_some() {
                        continue;
                    }
                    match endpoint_url(&self.base, &data) {
                        Ok(uri) => {
                            endpoint = Some(uri.clone());
                            if let Some(named) = named.take() {
                                let _ = named.send(Ok((uri.clone(), session_of(&uri))));
                            }
                        }
                        Err(why) => {
                            tracing::warn!("Closed the event stream of {key}: {why}");
                            break 'reading why;
                        }
                    }
                } else if (kind.is_empty() || kind == "message")
                    && let Some(endpoint) = &endpoint
                {
                    self.dispatch(endpoint, &data);
                }
            }
            if events.pending() > MAX_EVENT_BYTES {
                break format!(
                    "{key} ended its event stream: an event is larger than {MAX_EVENT_BYTES} bytes"
                );
            }
        };
        if let Some(named) = named.take() {
            let _ = named.send(Err(Failure::Unavailable(failure)));
        }
        let mut waiting = lock(&self.waiting);
        waiting.by_id.clear(); // every waiting request fails: the stream is lost
        waiting.progress.clear();
    }

    /// One message of the stream, to whom it belongs (never blocking the reader).
    fn dispatch(&self, endpoint: &hyper::Uri, data: &str) {
        let Ok(Value::Object(message)) = serde_json::from_str::<Value>(data) else {
            return;
        };
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            let id = message.get("id").and_then(Value::as_u64);
            let waiter = id.and_then(|id| lock(&self.waiting).by_id.remove(&id));
            if let Some(waiter) = waiter {
                let _ = waiter.answer.send(Value::Object(message));
            }
            return; // else an answer nobody waits for (it gave up): dropped
        };
        if let Some(id) = message.get("id").filter(|id| crate::jsonrpc::valid_id(id)) {
            let reply = if method == "ping" {
                json!({"jsonrpc": "2.0", "id": id, "result": {}})
            } else {
                let error = json!({"code": -32601, "message": format!("{method} belongs to no call")});
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            };
            self.errand(endpoint, reply);
            return;
        }
        match method {
            "notifications/tools/list_changed" | "notifications/prompts/list_changed" => {
                self.changed.send_modify(|n| *n += 1);
            }
            "notifications/progress" => {
                let token = message
                    .get("params")
                    .and_then(|p| p.get("progressToken"))
                    .map(Value::to_string);
                let waiting = lock(&self.waiting);
                let heard = token
                    .and_then(|t| waiting.progress.get(&t))
                    .and_then(|id| waiting.by_id.get(id))
                    .and_then(|w| w.heard.clone());
                drop(waiting);
                if let Some(heard) = heard {
                    let _ = heard.try_send(Value::Object(message));
                }
            }
            _ => {}
        }
    }

    /// Our answer to a server's request, sent in the background (a flood is dropped).
    fn errand(&self, endpoint: &hyper::Uri, reply: Value) {
        if self.errands.fetch_add(1, Ordering::Relaxed) >= MAX_ERRANDS {
            self.errands.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let mut builder = Request::post(endpoint.clone());
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        let body = Bytes::from(serde_json::to_vec(&reply).expect("a Value always encodes"));
        let request = builder
            .header("content-type", "application/json")
            .header("accept-encoding", "identity")
            .body(Full::new(body));
        let (client, errands) = (self.client.clone(), self.errands.clone());
        tokio::spawn(async move {
            if let Ok(request) = request {
                let sending = async {
                    if let Ok(response) = client.request(request).await {
                        let _ = http_body_util::Limited::new(response.into_body(), 64 << 10)
                            .collect()
                            .await;
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(ERRAND_SECONDS), sending).await;
            }
            errands.fetch_sub(1, Ordering::Relaxed);
        });
    }
}
