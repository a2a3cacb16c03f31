//! The stateless 2026-07-28 era at the MCP endpoint: POST only, the admission ladder
//! (`era::classify_modern`), `server/discover` answered here, `subscriptions/listen`
//! streams, the `Mcp-Param-*` check of tool calls, the caller's envelope taken off the
//! params, and the input-required rounds of a call begun or resumed (`requestState`).

use std::collections::BTreeMap;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use super::rounds::Round;
use super::{Caller, Front, unavailable};
use crate::adapter::listeners::{self, Listener};
use crate::adapter::router::Envelope;
use crate::capabilities::declared_capabilities;
use crate::era::{self, Admission, RoutingHeaders};
use crate::http::{self, Body};
use crate::jsonrpc::{self, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::rounds;

impl Front {
    pub(super) async fn stateless(&self, request: Request<Incoming>, caller: &Caller) -> Response<Body> {
        if request.method() != Method::POST {
            return http::method_not_allowed("POST");
        }
        let accept = http::header(&request, "accept").unwrap_or("*/*").to_owned();
        if !accept.contains("application/json") && !accept.contains("*/*") {
            return http::plain(406, "Accept must include application/json");
        }
        let sse_ok = accept.contains("text/event-stream");
        let owned: Vec<(String, Vec<String>)> = ["mcp-protocol-version", "mcp-method", "mcp-name"]
            .iter()
            .map(|name| {
                (
                    (*name).to_owned(),
                    http::header_all(&request, name)
                        .into_iter()
                        .map(str::to_owned)
                        .collect(),
                )
            })
            .collect();
        let param_headers = crate::param_headers::of_request(request.headers());
        let mut message = match self.read_body(request).await {
            Ok(message) => message,
            Err(refused) => return refused,
        };
        let routing = RoutingHeaders {
            version: owned[0].1.iter().map(String::as_str).collect(),
            method: owned[1].1.iter().map(String::as_str).collect(),
            name: owned[2].1.iter().map(String::as_str).collect(),
        };
        let version = match era::classify_modern(&message, &routing) {
            Admission::Refused { status, message } => return http::json(status, &message),
            Admission::Notification => return http::empty(202),
            Admission::Call { version } => version,
        };
        let id = message["id"].clone();
        let method = message["method"].as_str().unwrap_or_default().to_owned();
        let Some(child_result) = self.core.init_result() else {
            return unavailable(Some(&id), "The MCP server is not ready");
        };
        if method == "server/discover" {
            let result = era::discover_result(&child_result, &version);
            return http::json(200, &jsonrpc::result_response(&id, result));
        }
        if method == "subscriptions/listen" {
            return self.listen(id, &message, &child_result);
        }
        if !era::MODERN_REQUESTS.contains(&method.as_str()) {
            let text = format!("Method not found: {method}");
            return http::json(404, &jsonrpc::error_response(Some(&id), METHOD_NOT_FOUND, &text));
        }
        if method == "tools/call"
            && let Some(params) = message.get("params").and_then(Value::as_object)
            && let Some(why) = self.core.router().tool_headers.check(params, &param_headers)
        {
            return http::json(
                400,
                &jsonrpc::error_response(Some(&id), jsonrpc::HEADER_MISMATCH, &why),
            );
        }
        let mut envelope = Envelope::default();
        if let Some(params) = message.get_mut("params").and_then(Value::as_object_mut) {
            let meta = params.get("_meta");
            envelope.log_level = meta
                .and_then(|m| m.get(era::LOG_LEVEL_META_KEY))
                .and_then(Value::as_str)
                .map(str::to_owned);
            envelope.capabilities =
                declared_capabilities(meta.and_then(|m| m.get(era::CLIENT_CAPABILITIES_META_KEY)));
            era::strip_envelope(params);
        }
        let mut round = None;
        if era::INPUT_REQUIRED_METHODS.contains(&method.as_str()) {
            if !message.get("params").is_some_and(Value::is_object) {
                message["params"] = json!({});
            }
            let params = message["params"].as_object_mut().expect("made an object above");
            let Some(answers) = rounds::input_responses(params) else {
                let text = "inputResponses must be an object whose values are results";
                return http::json(400, &jsonrpc::error_response(Some(&id), INVALID_PARAMS, text));
            };
            let target = rounds::request_target(&method, Some(params));
            if let Some(state) = params.remove("requestState") {
                return self.resume(id, &method, state, target, answers).await;
            }
            round = Some(Round {
                method: method.clone(),
                target,
                answers,
                asked: BTreeMap::new(),
            });
        }
        self.forward(
            message,
            &method,
            None,
            sse_ok,
            Some((version, child_result)),
            envelope,
            caller,
            round,
        )
        .await
    }

    /// A `subscriptions/listen` stream: acknowledged first (with what the child can honor of
    /// the filter), then the child's notifications it agreed to carry, until the caller goes.
    fn listen(&self, id: Value, message: &Value, child_result: &Value) -> Response<Body> {
        let requested = message
            .get("params")
            .and_then(|p| p.get("notifications"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let agreed = listeners::honored(&requested, child_result.get("capabilities"));
        let (sender, receiver) = mpsc::channel(self.core.config.stream_queue);
        let listener = Listener::new(id.clone(), sender, &agreed);
        {
            let mut router = self.core.router();
            router.listeners.retain(|l| l.offer("", &Value::Null));
            if router.listeners.len() >= self.core.config.max_sessions {
                return unavailable(Some(&id), "Too many listen streams");
            }
            listener.acknowledge(&agreed);
            let uris: Vec<String> = listener.uris.iter().cloned().collect();
            router.listeners.push(listener);
            drop(router);
            for uri in uris {
                self.core.subscribe_child(&uri);
            }
        }
        http::events(receiver)
    }

    // ------------------------------------------------------------------ input-required rounds

    /// A retry with `requestState`: the parked call gets the answers and goes on waiting (or is
    /// parked again for what is still unanswered); 400 for a state that names nothing this
    /// request may resume.
    async fn resume(
        &self,
        id: Value,
        method: &str,
        state: Value,
        target: Option<String>,
        answers: Map<String, Value>,
    ) -> Response<Body> {
        let (parked, dropped) = match state.as_str() {
            Some(token) => self.rounds.take(token, method, target.as_deref(), Instant::now()),
            None => (None, Vec::new()),
        };
        self.rounds
            .drop_parked(dropped, "The caller did not retry in time");
        let Some(mut waiting) = parked else {
            let text = "requestState is unknown, expired, altered or not for this request";
            return http::json(400, &jsonrpc::error_response(Some(&id), INVALID_PARAMS, text));
        };
        waiting.client_id = id;
        waiting.timeout = Box::pin(tokio::time::sleep(self.core.config.request_timeout()));
        let round = waiting.round.as_mut().expect("a parked call has its round");
        round.answers = answers;
        let asked = std::mem::take(&mut round.asked);
        let mut missing = BTreeMap::new();
        for (key, ask) in asked {
            match round.answers.remove(&key) {
                Some(answer) => self.core.answer_asked(&ask.child_request_id, answer),
                None => {
                    missing.insert(key, ask);
                }
            }
        }
        if !missing.is_empty() {
            return http::json(200, &self.rounds.park(waiting, missing));
        }
        self.answer(waiting).await
    }
}
