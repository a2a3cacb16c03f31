//! Server→client requests of the child (sampling, elicitation, roots): attributed to one
//! call in flight (`attribute`), delivered to its legacy caller if it declared the capability
//! or asked of its 2026-07-28 caller as an input-required round, the caller's answer mapped
//! back; what cannot be attributed or delivered is refused to the child, never sent to a
//! bystander. `ping` is answered here.

use serde_json::{Value, json};

use super::{CAUSING_METHODS, Router, key};
use crate::capabilities::capability_for;
use crate::jsonrpc::{self, INTERNAL_ERROR, METHOD_NOT_FOUND};

impl Router {
    /// The call a message the child sent on its own belongs to, or None when it cannot be
    /// told:
    /// 1. a `progressToken` of ours in `params._meta` names the call (a token naming no call
    ///    in flight names none);
    /// 2. without one, only when exactly one legacy session exists and every call in flight
    ///    is that session's: its oldest call that may cause it;
    /// 3. a child serving one caller alone (`sole_caller`) has nobody else's calls: its
    ///    oldest call that may cause it, whatever the session (or none: 2026-07-28);
    /// 4. otherwise nobody — guessing "the only call open" sent one session's prompt to
    ///    another.
    pub(super) fn attribute(&self, message: &Value) -> Option<u64> {
        let token = jsonrpc::params(message)
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"));
        if let Some(token) = token {
            let call = token.as_u64().and_then(|t| self.pending.get(&t))?;
            return call.tokened.then_some(call.child_id);
        }
        if self.sole_caller {
            let mut causing = self.pending.values();
            return causing
                .find(|call| CAUSING_METHODS.contains(&call.method.as_str()))
                .map(|call| call.child_id);
        }
        if self.sessions.len() != 1 {
            return None;
        }
        let only = self.sessions.iter().next()?.id.as_str();
        let mut candidate = None;
        for call in self.pending.values() {
            if call.session.as_deref() != Some(only) {
                return None; // someone else has a call open: it may be theirs
            }
            if candidate.is_none() && CAUSING_METHODS.contains(&call.method.as_str()) {
                candidate = Some(call.child_id);
            }
        }
        candidate
    }

    pub(super) fn server_request(&mut self, method: &str, message: &mut Value) -> Option<Vec<u8>> {
        let child_request_id = message["id"].clone();
        if method == "ping" {
            return Some(jsonrpc::line(&jsonrpc::result_response(
                &child_request_id,
                json!({}),
            )));
        }
        let refuse = |code: i64, text: &str| {
            Some(jsonrpc::line(&jsonrpc::error_response(
                Some(&child_request_id),
                code,
                text,
            )))
        };
        let Some(child_id) = self.attribute(message) else {
            self.unattributed_request += 1;
            return refuse(
                INTERNAL_ERROR,
                &format!("{method} could not be attributed to one call in flight"),
            );
        };
        let call = &self.pending[&child_id];
        let Some(session_id) = call.session.clone() else {
            return self.ask_modern(method, child_id, message);
        };
        let Some(session) = self.sessions.get_mut(&session_id) else {
            return refuse(INTERNAL_ERROR, "Client session ended");
        };
        if let Some(capability) = capability_for(method)
            && !session.can(capability)
        {
            return refuse(
                METHOD_NOT_FOUND,
                &format!("The client did not declare {capability}"),
            );
        }
        session.next_server_request_id += 1;
        let visible = session.next_server_request_id;
        message["id"] = json!(visible);
        if !self.deliver(child_id, message) {
            return refuse(INTERNAL_ERROR, &format!("No open stream to deliver {method} on"));
        }
        if let Some(session) = self.sessions.get_mut(&session_id) {
            session.server_requests.insert(visible, child_request_id.clone());
        }
        self.server_requests
            .insert(key(&child_request_id), (session_id, visible));
        None
    }

    /// A server request attributed to a 2026-07-28 call: a question of an input-required
    /// round, if the call may have one and its caller declared the capability; else the
    /// child's refusal line.
    fn ask_modern(&mut self, method: &str, child_id: u64, message: &Value) -> Option<Vec<u8>> {
        let child_request_id = message["id"].clone();
        let call = &self.pending[&child_id];
        let refuse = |error: Value| Some(jsonrpc::line(&error));
        let Some(capabilities) = call.capabilities.as_ref().filter(|_| call.sink.asks.is_some()) else {
            let text = format!("{method} cannot be asked during {}", call.method);
            return refuse(jsonrpc::error_response(
                Some(&child_request_id),
                METHOD_NOT_FOUND,
                &text,
            ));
        };
        if let Some(capability) = capability_for(method)
            && !capabilities.contains(capability)
        {
            let text = format!("The client did not declare {capability}");
            let mut error = jsonrpc::error_response(
                Some(&child_request_id),
                jsonrpc::MISSING_REQUIRED_CLIENT_CAPABILITY,
                &text,
            );
            error["error"]["data"] = json!({"requiredCapabilities": {capability: {}}});
            return refuse(error);
        }
        if !call.sink.ask(message) {
            let text = format!("No way to deliver {method} to the caller");
            return refuse(jsonrpc::error_response(
                Some(&child_request_id),
                INTERNAL_ERROR,
                &text,
            ));
        }
        self.asked.insert(key(&child_request_id), child_id);
        None
    }

    /// A 2026-07-28 caller's answer (from `inputResponses`) to what the child asked it: the
    /// line for the child, or None when the child no longer waits for it.
    pub fn answer_asked(&mut self, child_request_id: &Value, result: Value) -> Option<Vec<u8>> {
        self.asked.remove(&key(child_request_id))?;
        Some(jsonrpc::line(&jsonrpc::result_response(child_request_id, result)))
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::super::tests::{router, session, sink};
    use super::*;
    use crate::adapter::router::Envelope;

    #[test]
    fn a_server_request_with_two_sessions_and_no_token_is_refused_to_the_child() {
        let mut router = router();
        let (a, _b) = (
            session(&mut router, &["sampling"]),
            session(&mut router, &["sampling"]),
        );
        let (sink, _, mut relayed) = sink();
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        router
            .forward_request(&mut call, Some(&a), sink, Envelope::default())
            .unwrap();
        let lines = router.route_from_child(
            json!({"jsonrpc": "2.0", "id": 99, "method": "sampling/createMessage", "params": {}}),
        );
        let refusal: Value = serde_json::from_slice(&lines[0]).unwrap();
        assert_eq!(refusal["error"]["code"], INTERNAL_ERROR);
        assert!(relayed.try_recv().is_err());
        assert_eq!(router.unattributed_request, 1);
    }

    #[test]
    fn a_child_of_one_caller_alone_gives_its_untokened_request_to_the_oldest_call() {
        let mut router = router();
        router.sole_caller = true;
        let (sink, _, _) = sink();
        let (asks, mut asked) = mpsc::unbounded_channel();
        let sink = sink.with_asks(asks);
        let envelope = Envelope {
            capabilities: ["roots".to_owned()].into(),
            ..Envelope::default()
        };
        let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        router.forward_request(&mut call, None, sink, envelope).unwrap();
        let ask = json!({"jsonrpc": "2.0", "id": 5, "method": "roots/list", "params": {}});
        assert!(router.route_from_child(ask).is_empty());
        assert_eq!(asked.try_recv().unwrap()["method"], "roots/list");
        assert_eq!(router.unattributed_request, 0);
    }

    #[test]
    fn a_server_request_carrying_the_calls_token_reaches_that_call_only() {
        let mut router = router();
        let (a, b) = (
            session(&mut router, &["sampling"]),
            session(&mut router, &["sampling"]),
        );
        let (sink_a, _, mut relayed_a) = sink();
        let (sink_b, _, mut relayed_b) = sink();
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        router
            .forward_request(&mut call.clone(), Some(&a), sink_a, Envelope::default())
            .unwrap();
        let (id_b, _) = router
            .forward_request(&mut call.clone(), Some(&b), sink_b, Envelope::default())
            .unwrap();
        let ask = json!({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage",
                         "params": {"_meta": {"progressToken": id_b}}});
        assert!(router.route_from_child(ask).is_empty());
        assert!(relayed_a.try_recv().is_err());
        let asked = relayed_b.try_recv().unwrap();
        let mut answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"ok": true}});
        let line = router.forward_response(&mut answer, &b).unwrap();
        assert_eq!(serde_json::from_slice::<Value>(&line).unwrap()["id"], "s1");
    }
}
