//! One message to the server on the wire: the request built with the era's headers (the
//! 2026-07-28 `Mcp-Method`, `Mcp-Name` and `_meta` envelope, or the legacy session id), sent
//! on the keep-alive client, and its answer read as JSON or off an SSE stream (what the
//! server says about the request on the way going to its relay), its id checked against the
//! request's and turned into a result or a `Failure`.

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Request, Response};
use serde_json::{Map, Value, json};

use super::{Failure, Negotiated, Upstream, client_info};
use crate::bridge::relay::Relay;
use crate::bridge::sse::SseReader;
use crate::bridge::upcall::Talk;
use crate::era;
use crate::era::encode_header_value;

/// An answer stream or body larger than this fails its request.
const MAX_ANSWER_BYTES: usize = 16 << 20;

impl Upstream {
    /// A request to the server with the era's headers: a POST of one message, or (no
    /// `method`) the legacy session's GET stream.
    pub(super) fn build(
        &self,
        negotiated: &Negotiated,
        method: Option<&str>,
        params: Option<&Map<String, Value>>,
        id: Option<u64>,
    ) -> Result<Request<Full<Bytes>>, Failure> {
        let mut builder = match method {
            Some(_) => Request::post(self.uri.clone()),
            None => Request::get(self.uri.clone()),
        };
        for (name, value) in self.configured_headers()? {
            builder = builder.header(name, value);
        }
        builder = builder.header("accept-encoding", "identity");
        if !negotiated.protocol_version.is_empty() {
            builder = builder.header("mcp-protocol-version", negotiated.protocol_version.as_str());
        }
        let body = match method {
            Some(method) => {
                let mut message = json!({"jsonrpc": "2.0", "method": method});
                if let Some(id) = id {
                    message["id"] = json!(id);
                }
                if let Some(params) = params {
                    message["params"] = Value::Object(params.clone());
                }
                builder = builder
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream");
                Bytes::from(serde_json::to_vec(&message).expect("a Value always encodes"))
            }
            None => {
                builder = builder.header("accept", "text/event-stream");
                Bytes::new()
            }
        };
        if negotiated.modern {
            let method = method.unwrap_or_default();
            builder = builder.header("mcp-method", method);
            let name = match method {
                "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")),
                "resources/read" => params.and_then(|p| p.get("uri")),
                _ => None,
            };
            if let Some(name) = name.and_then(Value::as_str)
                && let Ok(value) = HeaderValue::from_str(&encode_header_value(name))
            {
                builder = builder.header("mcp-name", value);
            }
            if method == "tools/call"
                && let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str)
            {
                let arguments = params.and_then(|p| p.get("arguments"));
                let written = self
                    .param_headers
                    .lock()
                    .expect("the param headers lock")
                    .headers_for(name, arguments);
                for (header, value) in written {
                    if let Ok(value) = HeaderValue::from_str(&value) {
                        builder = builder.header(header, value);
                    }
                }
            }
        } else if let Some(session) = &negotiated.session_id {
            builder = builder.header("mcp-session-id", session.as_str());
        }
        builder
            .body(Full::new(body))
            .map_err(|e| Failure::Misconfigured(format!("the request cannot be made: {e}")))
    }

    pub(super) async fn transmit(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, Failure> {
        self.client.request(request).await.map_err(|e| {
            Failure::Unavailable(format!(
                "{} could not be reached: {}",
                self.server.key(),
                chain(&e)
            ))
        })
    }

    /// One POST of a message; the answer's status, session id and, for a request, the
    /// response matching `id` (JSON or read off the SSE stream, where what the server says
    /// about the request on the way goes to its relay, if it has one).
    pub(super) async fn post(
        &self,
        negotiated: &Negotiated,
        method: &str,
        params: Option<&Map<String, Value>>,
        id: Option<u64>,
        relay: Option<&Arc<Relay>>,
    ) -> Result<(u16, Option<String>, Option<Value>), Failure> {
        if self.is_legacy_sse() {
            return self.sse_post(negotiated, method, params, id, relay).await;
        }
        let request = self.build(negotiated, Some(method), params, id)?;
        let response = self.transmit(request).await?;
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(status, 401 | 403) {
            return Err(denied(status, response).await);
        }
        let Some(id) = id else {
            return Ok((status, session, None));
        };
        let mut body = response.into_body();
        if content_type.starts_with("text/event-stream") && status == 200 {
            let mut talk = relay.map(|relay| Talk::new(relay.clone(), self.responder(negotiated)));
            let mut events = SseReader::default();
            while let Some(frame) = body.frame().await {
                let frame =
                    frame.map_err(|e| Failure::Unavailable(format!("the answer stream broke: {e}")))?;
                let Some(data) = frame.data_ref() else { continue };
                if events.push(data) > MAX_ANSWER_BYTES {
                    return Err(Failure::Unavailable("the answer stream is too large".to_owned()));
                }
                while let Some(message) = events.next_message() {
                    if message.get("method").is_none() {
                        if message.get("id") == Some(&json!(id)) {
                            return Ok((status, session, Some(message)));
                        }
                    } else if let Some(talk) = talk.as_mut() {
                        talk.heard(&message);
                    }
                }
            }
            return Err(Failure::Unavailable(
                "the answer stream ended before the response".to_owned(),
            ));
        }
        let bytes = http_body_util::Limited::new(body, MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| Failure::Unavailable(format!("the answer was lost: {e}")))?
            .to_bytes();
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        match parsed {
            Some(message) if message.get("id") == Some(&json!(id)) => Ok((status, session, Some(message))),
            Some(message)
                if message.get("id").is_some_and(Value::is_null) && message.get("error").is_some() =>
            {
                Ok((status, session, Some(message)))
            }
            _ if status >= 400 => Err(Failure::Status(
                status,
                String::from_utf8_lossy(&bytes).chars().take(200).collect(),
            )),
            _ => Err(Failure::Protocol(format!(
                "the answer to {method} is not a JSON-RPC response to it (HTTP {status})"
            ))),
        }
    }

    /// One request at the negotiated era; the result or how it failed.
    pub(super) async fn exchange(
        &self,
        negotiated: &Negotiated,
        method: &str,
        params: Map<String, Value>,
        relay: Option<&Arc<Relay>>,
    ) -> Result<(Value, Option<String>), Failure> {
        let params = self.stamped(negotiated, params);
        let id = self.next_id();
        if let Some(relay) = relay {
            relay.sent_as(id);
        }
        let (status, session, answer) = self
            .post(negotiated, method, Some(&params), Some(id), relay)
            .await?;
        let answer = answer.unwrap_or(Value::Null);
        if let Some(error) = answer.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            if answer.get("id") != Some(&json!(id)) {
                return Err(Failure::Status(status, message)); // the transport's refusal
            }
            return Err(Failure::Rpc {
                code: error.get("code").and_then(Value::as_i64).unwrap_or(0),
                message,
                data: error.get("data").cloned(),
            });
        }
        if status >= 400 {
            return Err(Failure::Status(status, "refused".to_owned()));
        }
        match answer.get("result") {
            Some(result) if result.is_object() => Ok((result.clone(), session)),
            _ => Err(Failure::Protocol(format!(
                "the answer to {method} has no result object"
            ))),
        }
    }

    /// 2026-07-28's per-request envelope in `_meta`.
    pub(super) fn stamped(
        &self,
        negotiated: &Negotiated,
        mut params: Map<String, Value>,
    ) -> Map<String, Value> {
        if negotiated.modern {
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert(
                    era::PROTOCOL_VERSION_META_KEY.into(),
                    json!(negotiated.protocol_version),
                );
                meta.insert(era::CLIENT_INFO_META_KEY.into(), client_info());
                meta.entry(era::CLIENT_CAPABILITIES_META_KEY)
                    .or_insert_with(|| json!({}));
            }
        }
        params
    }
}

fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The failure of a `401` or `403` (`Failure::Denied`): its challenge, and what its body said
/// (the JSON-RPC error's message, else the start of the text).
async fn denied(status: u16, response: Response<Incoming>) -> Failure {
    let (parts, body) = response.into_parts();
    let bytes = http_body_util::Limited::new(body, 64 << 10)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let said = serde_json::from_slice::<Value>(&bytes).ok().and_then(|m| {
        m.pointer("/error/message")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let why = said.unwrap_or_else(|| String::from_utf8_lossy(&bytes).chars().take(200).collect());
    Failure::of_status(status, &parts.headers, why)
}
