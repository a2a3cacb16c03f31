//! What a server sends on one relayed call's stream, judged for that call's agent alone:
//! its requests asked of the agent or refused (undeclared, unknown, about an ended call,
//! past the bounds; a flood dropped), `ping` answered, its progress passed on under the
//! agent's own token, and the questions sent to the agent.

use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{
    Heard, MAX_ASKS_PER_CALL, MAX_OPEN_ASKS, MAX_REFUSALS, Question, Refusal, Relay, ToAgent, key_text, lock,
};
use crate::capabilities::{capability_for, required_capability};
use crate::jsonrpc::{INTERNAL_ERROR, METHOD_NOT_FOUND};

impl Relay {
    /// A request or notification of the server on the call's stream: what to do with it.
    pub fn heard(&self, message: &Value) -> Heard {
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
        let Some(id) = message.get("id").filter(|id| crate::jsonrpc::valid_id(id)) else {
            if method == "notifications/progress" {
                self.progress(params);
            } else if method == "notifications/message" {
                let level = lock(&self.log_level).clone();
                if let Some(note) =
                    super::super::logs::call_log(level.as_deref(), message, &self.core.scrubber)
                {
                    let _ = self.to_agent.try_send(ToAgent::Note(note)); // a full queue drops it
                }
            }
            return Heard::Nothing;
        };
        if method == "ping" {
            self.observe(method, "relayed");
            return Heard::Reply(json!({"jsonrpc": "2.0", "id": id, "result": {}}));
        }
        if capability_for(method).is_none() {
            return self.refuse(id, method, "unsupported", METHOD_NOT_FOUND, "Method not found");
        }
        if let Some(missing) = self.missing_for(method, &params) {
            let text = format!("The client did not declare {missing}");
            return self.refuse(id, method, "undeclared", METHOD_NOT_FOUND, &text);
        }
        if self.ended.load(Ordering::Relaxed) || self.is_cancelled() {
            let text = "The call this request is about has ended";
            return self.refuse(id, method, "ended", INTERNAL_ERROR, text);
        }
        {
            let mut counts = lock(&self.counts);
            if counts.asked < MAX_ASKS_PER_CALL && counts.open < MAX_OPEN_ASKS {
                counts.asked += 1;
                counts.open += 1;
                let params = self.core.scrubber.json(params);
                return Heard::Ask {
                    id: id.clone(),
                    method: method.to_owned(),
                    params,
                };
            }
        }
        let text = "Too many requests to the client in one call";
        self.refuse(id, method, "bounded", INTERNAL_ERROR, text)
    }

    /// A question of the server is no longer waited for (answered, or withdrawn by it).
    pub fn ask_withdrawn(&self) {
        let mut counts = lock(&self.counts);
        counts.open = counts.open.saturating_sub(1);
    }

    /// Ask the agent one question of a legacy server (after [`Heard::Ask`]); the JSON-RPC
    /// response for the server.
    pub async fn ask_for_server(&self, id: Value, method: &str, params: Value) -> Value {
        let key = format!("request-{}", key_text(&id));
        let answered = self.ask(key, method, params).await;
        self.ask_withdrawn();
        match answered {
            Ok(result) => {
                self.observe(method, "relayed");
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            }
            Err(refusal) => {
                self.observe(method, "agent_error");
                json!({"jsonrpc": "2.0", "id": id,
                       "error": {"code": refusal.code, "message": refusal.message}})
            }
        }
    }

    /// The capability a request of the server needs and the agent did not declare.
    pub fn missing_for(&self, method: &str, params: &Value) -> Option<String> {
        required_capability(method, params, &self.declared)
    }

    /// Count `n` more questions of the call; false past [`MAX_ASKS_PER_CALL`].
    pub fn count_asks(&self, n: usize) -> bool {
        let mut counts = lock(&self.counts);
        counts.asked += n;
        counts.asked <= MAX_ASKS_PER_CALL
    }

    /// A notification of the server's progress, for the agent under its own token.
    fn progress(&self, params: Value) {
        let Some(agent_token) = &self.agent_token else {
            return; // nobody of this call asked for progress
        };
        if params.get("progressToken").and_then(Value::as_str) != Some(self.token.as_str()) {
            return;
        }
        let mut shown = self.core.scrubber.json(params);
        shown["progressToken"] = agent_token.clone();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": shown});
        let _ = self.to_agent.try_send(ToAgent::Note(note)); // a full queue drops progress
    }

    async fn ask(&self, key: String, method: &str, params: Value) -> Result<Value, Refusal> {
        let receiver = self.send_ask(key, method, params).await?;
        receiver
            .await
            .unwrap_or_else(|_| Err(Refusal::internal("The agent's side of the call ended")))
    }

    pub async fn send_ask(
        &self,
        key: String,
        method: &str,
        params: Value,
    ) -> Result<oneshot::Receiver<Result<Value, Refusal>>, Refusal> {
        self.enqueue(key, method, params, false).await
    }

    /// The bridge's own question to the agent (an approval): only an answer given after it
    /// was asked counts.
    pub async fn send_fresh(
        &self,
        key: String,
        method: &str,
        params: Value,
    ) -> Result<oneshot::Receiver<Result<Value, Refusal>>, Refusal> {
        self.enqueue(key, method, params, true).await
    }

    async fn enqueue(
        &self,
        key: String,
        method: &str,
        params: Value,
        fresh: bool,
    ) -> Result<oneshot::Receiver<Result<Value, Refusal>>, Refusal> {
        let (answer, answered) = oneshot::channel();
        let request = json!({"method": method, "params": params});
        self.to_agent
            .send(ToAgent::Ask(Question {
                key,
                request,
                answer,
                fresh,
            }))
            .await
            .map_err(|_| Refusal::internal("The agent's side of the call ended"))?;
        Ok(answered)
    }

    fn refuse(&self, id: &Value, method: &str, outcome: &'static str, code: i64, text: &str) -> Heard {
        let refused = {
            let mut counts = lock(&self.counts);
            counts.refused += 1;
            counts.refused
        };
        if refused > MAX_REFUSALS {
            self.observe(method, "dropped");
            if refused == MAX_REFUSALS + 1 {
                tracing::warn!("Stopped answering a server that flooded one call with requests");
            }
            return Heard::Nothing;
        }
        self.observe(method, outcome);
        Heard::Reply(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": text}}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::relay::tests::relay;

    fn request(id: u64, method: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"messages": []}})
    }

    fn refusal_code(heard: Heard) -> Option<i64> {
        match heard {
            Heard::Reply(reply) => reply["error"]["code"].as_i64(),
            _ => None,
        }
    }

    #[test]
    fn an_undeclared_capability_or_an_unknown_method_is_refused_never_asked() {
        let (relay, _from_call, _cancel) = relay(&["roots"], None);
        let sampled = relay.heard(&request(1, "sampling/createMessage"));
        assert_eq!(refusal_code(sampled), Some(METHOD_NOT_FOUND));
        assert_eq!(
            refusal_code(relay.heard(&request(2, "tools/call"))),
            Some(METHOD_NOT_FOUND)
        );
        assert!(matches!(
            relay.heard(&request(3, "roots/list")),
            Heard::Ask { .. }
        ));
        let pong = relay.heard(&request(4, "ping"));
        assert!(matches!(pong, Heard::Reply(reply) if reply["result"] == json!({})));
    }

    #[test]
    fn a_flood_is_bounded_then_refused_then_dropped() {
        let (relay, _from_call, _cancel) = relay(&["sampling"], None);
        let verdicts: Vec<Heard> = (0..200)
            .map(|id| relay.heard(&request(id, "sampling/createMessage")))
            .collect();
        let asked = verdicts.iter().filter(|h| matches!(h, Heard::Ask { .. })).count();
        let refused = verdicts.iter().filter(|h| matches!(h, Heard::Reply(_))).count();
        assert_eq!(asked, MAX_OPEN_ASKS);
        assert_eq!(refused, MAX_REFUSALS);
        let dropped = verdicts.iter().filter(|h| matches!(h, Heard::Nothing)).count();
        assert_eq!(dropped, 200 - MAX_OPEN_ASKS - MAX_REFUSALS);
    }

    #[test]
    fn a_request_about_an_ended_or_cancelled_call_is_refused() {
        let (ended, _from_call, _cancel) = relay(&["sampling"], None);
        ended.end();
        let late = ended.heard(&request(1, "sampling/createMessage"));
        assert_eq!(refusal_code(late), Some(INTERNAL_ERROR));
        let (cancelled, _from_call, cancel) = relay(&["sampling"], None);
        cancel.send_replace(Some("gone".into()));
        assert!(cancelled.is_cancelled());
        let late = cancelled.heard(&request(1, "sampling/createMessage"));
        assert_eq!(refusal_code(late), Some(INTERNAL_ERROR));
    }

    #[test]
    fn a_call_sent_again_after_its_attempt_ended_is_heard_again() {
        let (retried, _from_call, _cancel) = relay(&["sampling"], None);
        retried.end();
        retried.resend();
        let asked = retried.heard(&request(1, "sampling/createMessage"));
        assert!(matches!(asked, Heard::Ask { .. }));
    }

    #[test]
    fn progress_for_the_bridges_token_reaches_the_agent_under_its_own() {
        let (relay, mut from_call, _cancel) = relay(&[], Some(json!(7)));
        assert_eq!(relay.meta(false)["progressToken"], json!(relay.token));
        for token in [json!(relay.token), json!("mcp-bridge-other"), json!(7)] {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                              "params": {"progressToken": token, "progress": 1}});
            assert!(matches!(relay.heard(&note), Heard::Nothing));
        }
        let Ok(ToAgent::Note(note)) = from_call.try_recv() else {
            panic!("the call's own progress reaches its agent");
        };
        assert_eq!(note["params"]["progressToken"], json!(7));
        assert!(
            from_call.try_recv().is_err(),
            "another token's progress is not this agent's"
        );
    }
}
