//! What the child says, routed: its answers to the calls that wait for them (a `tools/list`
//! result teaching the `x-mcp-header` schemas), progress to the call whose token it carries,
//! `resources/updated` to the subscribed sessions and listen streams, log messages to the
//! call they are attributed to at its caller's level (else dropped and counted), list changes
//! to every session's stream and listen stream.

use serde_json::{Map, Value, json};

use super::{Router, key};
use crate::jsonrpc;

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

impl Router {
    /// Route one message from the child; returns lines to write back to the child.
    pub fn route_from_child(&mut self, mut message: Value) -> Vec<Vec<u8>> {
        let Some(method) = message.get("method") else {
            self.response(message);
            return Vec::new();
        };
        let Some(method) = method.as_str().map(str::to_owned) else {
            tracing::warn!("Dropped a child message with a non-string method");
            return Vec::new();
        };
        if message.get("id").is_some() {
            return self.server_request(&method, &mut message).into_iter().collect();
        }
        self.notification(&method, message);
        Vec::new()
    }

    fn response(&mut self, mut message: Value) {
        let call = message
            .get("id")
            .and_then(Value::as_u64)
            .and_then(|id| self.pending.remove(&id));
        let Some(mut call) = call else {
            tracing::debug!("Dropped a child response to an unknown id");
            return;
        };
        self.forget(&call);
        if call.method == "tools/list" {
            self.tool_headers.learn(message.get("result"));
        }
        message["id"] = call.client_id.clone();
        call.sink.respond(message);
    }

    fn notification(&mut self, method: &str, mut message: Value) {
        let params = jsonrpc::params(&message).cloned().unwrap_or_default();
        match method {
            "notifications/progress" => {
                let token = params.get("progressToken").and_then(Value::as_u64);
                let Some(call) = token.and_then(|t| self.pending.get(&t)) else {
                    return;
                };
                let Some(original) = call.progress_token.clone() else {
                    return;
                };
                message["params"]["progressToken"] = original;
                self.deliver(call.child_id, &message);
            }
            "notifications/cancelled" => {
                let Some(child_request_id) = params.get("requestId") else {
                    return;
                };
                if let Some((session_id, visible)) = self.server_requests.remove(&key(child_request_id))
                    && let Some(session) = self.sessions.get_mut(&session_id)
                {
                    session.server_requests.remove(&visible);
                    message["params"]["requestId"] = json!(visible);
                    session.push(&message);
                }
            }
            "notifications/resources/updated" => {
                let uri = params.get("uri").and_then(Value::as_str).unwrap_or_default();
                for session in self.sessions.iter().filter(|s| s.subscriptions.contains(uri)) {
                    session.push(&message);
                }
                self.listeners.retain(|l| l.offer(method, &message));
            }
            "notifications/message" => self.log(&message, &params),
            _ => {
                if method == "notifications/tools/list_changed" {
                    self.tool_headers.forget();
                }
                for session in self.sessions.iter() {
                    session.push(&message);
                }
                self.listeners.retain(|l| l.offer(method, &message));
            }
        }
    }

    /// A message to a call's caller: on the call's own stream, else its session's.
    pub(super) fn deliver(&self, child_id: u64, message: &Value) -> bool {
        let Some(call) = self.pending.get(&child_id) else {
            return false;
        };
        if call.sink.related(message) {
            return true;
        }
        call.session
            .as_deref()
            .and_then(|id| self.sessions.get(id))
            .is_some_and(|s| s.push(message))
    }

    fn log(&mut self, message: &Value, params: &Map<String, Value>) {
        let Some(child_id) = self.attribute(message) else {
            self.unattributed_log += 1;
            tracing::debug!("Dropped a log message that could not be attributed to one call");
            return;
        };
        let call = &self.pending[&child_id];
        let level = params.get("level").and_then(Value::as_str);
        let wanted = match call.session.as_deref() {
            Some(id) => at_least(level, self.sessions.get(id).and_then(|s| s.log_level.as_deref())),
            // A 2026-07-28 caller hears logs only when its request set a level.
            None => call.log_level.is_some() && at_least(level, call.log_level.as_deref()),
        };
        if wanted {
            self.deliver(child_id, message);
        }
    }
}

/// Whether a log message at `level` passes a client's `threshold`.
fn at_least(level: Option<&str>, threshold: Option<&str>) -> bool {
    let position = |l: &str| LOG_LEVELS.iter().position(|k| *k == l);
    match threshold.and_then(position) {
        None => true,
        Some(min) => level.and_then(position).is_some_and(|l| l >= min),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::tests::{router, session, sink};
    use super::*;
    use crate::adapter::router::Envelope;

    #[test]
    fn two_sessions_with_the_same_id_get_their_own_answers() {
        let mut router = router();
        let (a, b) = (session(&mut router, &[]), session(&mut router, &[]));
        let (sink_a, mut answer_a, _) = sink();
        let (sink_b, mut answer_b, _) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let (id_a, _) = router
            .forward_request(&mut call.clone(), Some(&a), sink_a, Envelope::default())
            .unwrap();
        let (id_b, _) = router
            .forward_request(&mut call, Some(&b), sink_b, Envelope::default())
            .unwrap();
        router.route_from_child(json!({"jsonrpc": "2.0", "id": id_b, "result": {"who": "b"}}));
        router.route_from_child(json!({"jsonrpc": "2.0", "id": id_a, "result": {"who": "a"}}));
        assert_eq!(
            answer_a.try_recv().unwrap(),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"who": "a"}})
        );
        assert_eq!(answer_b.try_recv().unwrap()["result"]["who"], "b");
    }

    #[test]
    fn progress_goes_back_under_the_callers_own_token() {
        let mut router = router();
        let s = session(&mut router, &[]);
        let (sink, _, mut relayed) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                              "params": {"name": "x", "_meta": {"progressToken": "mine"}}});
        let (child_id, line) = router
            .forward_request(&mut call, Some(&s), sink, Envelope::default())
            .unwrap();
        let sent: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(sent["params"]["_meta"]["progressToken"], json!(child_id));
        router.route_from_child(json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                 "params": {"progressToken": child_id, "progress": 1}}));
        assert_eq!(relayed.try_recv().unwrap()["params"]["progressToken"], "mine");
    }
}
