//! The legacy (session) era at the MCP endpoint, by method: a POST's `initialize` opening a
//! session for its caller, its notifications, its answers to the child's requests and its
//! calls (in the caller's own session only: another caller's is unknown, 404); GET the
//! session's stream; DELETE its end.

use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Request, Response};
use serde_json::Value;

use super::{Caller, Front, unavailable};
use crate::adapter::router::Envelope;
use crate::capabilities::declared_capabilities;
use crate::era;
use crate::http::{self, Body};
use crate::jsonrpc::{self, INVALID_PARAMS, INVALID_REQUEST};
use crate::legacy;

impl Front {
    pub(super) async fn legacy_post(&self, request: Request<Incoming>, caller: &Caller) -> Response<Body> {
        let accept = http::header(&request, "accept").unwrap_or("*/*").to_owned();
        let json_ok = accept.contains("application/json") || accept.contains("*/*");
        let sse_ok = accept.contains("text/event-stream");
        if !json_ok && !sse_ok {
            return http::plain(406, "Accept must include application/json or text/event-stream");
        }
        let session_id = http::header(&request, "mcp-session-id").map(str::to_owned);
        let mut message = match self.read_body(request).await {
            Ok(message) => message,
            Err(refused) => return refused,
        };
        if !message.is_object() || message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            let text = if message.is_array() {
                "Batches are not supported"
            } else {
                "Invalid JSON-RPC message"
            };
            return http::json(400, &jsonrpc::error_response(None, INVALID_REQUEST, text));
        }
        let method = message.get("method").cloned();
        if method.as_ref().and_then(Value::as_str) == Some("initialize") {
            return self.initialize(&message, &caller.key);
        }
        let id = message.get("id").cloned();
        let Some(session_id) = session_id else {
            return http::json(
                400,
                &jsonrpc::error_response(id.as_ref(), INVALID_REQUEST, "Missing Mcp-Session-Id header"),
            );
        };
        if !self.owns(&session_id, caller) {
            return http::json(
                404,
                &jsonrpc::error_response(id.as_ref(), INVALID_REQUEST, "Session not found"),
            );
        }
        let Some(method) = method else {
            if id.is_some() && (message.get("result").is_some() || message.get("error").is_some()) {
                let line = self.core.router().forward_response(&mut message, &session_id);
                self.core.write(line);
                return http::empty(202);
            }
            return http::json(
                400,
                &jsonrpc::error_response(None, INVALID_REQUEST, "Invalid JSON-RPC message"),
            );
        };
        let Some(method) = method.as_str().map(str::to_owned) else {
            return http::json(
                400,
                &jsonrpc::error_response(None, INVALID_REQUEST, "Invalid method"),
            );
        };
        let Some(id) = id else {
            let line = self
                .core
                .router()
                .forward_notification(&message, Some(&session_id));
            self.core.write(line);
            return http::empty(202);
        };
        if !jsonrpc::valid_id(&id) {
            return http::json(
                400,
                &jsonrpc::error_response(None, INVALID_REQUEST, "Invalid request id"),
            );
        }
        let session = Some(session_id.as_str());
        self.forward(
            message,
            &method,
            session,
            sse_ok,
            None,
            Envelope::default(),
            caller,
            None,
        )
        .await
    }

    /// A legacy `initialize`: a session opened for `caller` with the child's capabilities.
    pub fn initialize(&self, message: &Value, caller: &str) -> Response<Body> {
        let id = message.get("id");
        let params = message.get("params").and_then(Value::as_object);
        let (Some(id), Some(params)) = (id, params) else {
            return http::json(
                400,
                &jsonrpc::error_response(id, INVALID_REQUEST, "Invalid initialize"),
            );
        };
        if !params.get("capabilities").is_some_and(Value::is_object)
            || !params.get("clientInfo").is_some_and(Value::is_object)
        {
            return http::json(
                400,
                &jsonrpc::error_response(Some(id), INVALID_PARAMS, "Invalid initialize params"),
            );
        }
        let Some(child_result) = self.core.init_result() else {
            return unavailable(Some(id), "The MCP server is not ready");
        };
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let result = era::initialize_result(&child_result, requested);
        let version = result["protocolVersion"].as_str().unwrap_or_default().to_owned();
        let declared = declared_capabilities(params.get("capabilities"));
        let opened = self
            .core
            .router()
            .sessions
            .open(caller, version, declared, Instant::now());
        let Ok((session_id, evicted)) = opened else {
            return unavailable(Some(id), "Too many sessions");
        };
        for old in evicted {
            tracing::debug!("Evicted idle session {} to make room for {session_id}", old.id);
        }
        let mut response = http::json(200, &jsonrpc::result_response(id, result));
        if let Ok(value) = hyper::header::HeaderValue::from_str(&session_id) {
            response.headers_mut().insert("mcp-session-id", value);
        }
        response
    }

    /// Whether the session exists (touched) and was opened by this caller: another caller's
    /// session is as good as unknown (404).
    fn owns(&self, session_id: &str, caller: &Caller) -> bool {
        let mut router = self.core.router();
        router
            .sessions
            .lookup(session_id, Instant::now())
            .is_some_and(|s| s.caller == caller.key)
    }

    pub(super) fn legacy_get(&self, request: &Request<Incoming>, caller: &Caller) -> Response<Body> {
        let queue = self.core.config.stream_queue;
        legacy::get_stream(request, &mut self.core.router().sessions, &caller.key, queue)
    }

    pub(super) fn legacy_delete(&self, request: &Request<Incoming>, caller: &Caller) -> Response<Body> {
        let named = legacy::named_session(request, &mut self.core.router().sessions, &caller.key);
        match named {
            Ok(session_id) => {
                self.core
                    .end_session(&session_id, "Session deleted by the client");
                http::empty(200)
            }
            Err(refused) => refused,
        }
    }
}
