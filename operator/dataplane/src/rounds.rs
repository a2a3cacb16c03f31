//! Input-required rounds of the 2026-07-28 era, as both server sides keep them: the adapter
//! for a legacy child's call, the bridge for a call whose server asks its agent something.
//!
//! When a server asks a 2026-07-28 caller something mid-call (sampling, elicitation, roots),
//! the call cannot wait on an open stream: the caller gets a result with `resultType:
//! "input_required"`, the `inputRequests` and an opaque `requestState`, and retries the request
//! with `inputResponses`; the server's call stays open meanwhile. Owns, pure (callers pass
//! `now`):
//!
//! - what was asked (`Ask`): the key the caller sees (the child may name it in
//!   `_meta["mcp-operator.dev/inputKey"]`, else `request-<id>`), the child's request id, the
//!   method and the params shown to the caller;
//! - the parked calls (`RoundStore`) by `requestState`: a random token naming state held
//!   here (it carries no data, so an altered or invented token names nothing), bound to the
//!   request it was issued for (method and target), used once; at most `max_parked` wait (the
//!   oldest is evicted), each for at most `ttl`; the caller ends what falls out;
//! - the retry's answers (`input_responses`), taken out of the params and checked in shape.
//!
//! The HTTP side (settling the questions, the replies, delivering the answers) is each server
//! side's own (`adapter::front`, `bridge::agent`).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// Where a child may name the key of its request in `inputRequests` (`params._meta`).
pub const INPUT_KEY_META: &str = "mcp-operator.dev/inputKey";

/// One server→client request of the child, as a 2026-07-28 caller sees it.
#[derive(Debug, Clone)]
pub struct Ask {
    pub key: String,
    pub child_request_id: Value,
    pub method: String,
    pub params: Value,
}

impl Ask {
    /// The `Ask` for a child's request: its key from `_meta` (else from its id), the params
    /// without the keys meant for the adapter.
    pub fn from_child(message: &Value) -> Self {
        let child_request_id = message.get("id").cloned().unwrap_or(Value::Null);
        let mut params = message
            .get("params")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let id_text = match &child_request_id {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        };
        let mut key = format!("request-{id_text}");
        if let Some(Value::Object(meta)) = params.remove("_meta") {
            if let Some(named) = meta.get(INPUT_KEY_META).and_then(Value::as_str)
                && !named.is_empty()
                && named.chars().count() <= 128
            {
                key = named.to_owned();
            }
            let kept: Map<String, Value> = meta
                .into_iter()
                .filter(|(k, _)| k != INPUT_KEY_META && k != "progressToken")
                .collect();
            if !kept.is_empty() {
                params.insert("_meta".into(), Value::Object(kept));
            }
        }
        Self {
            key,
            child_request_id,
            method: message
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            params: Value::Object(params),
        }
    }

    pub fn as_input_request(&self) -> Value {
        json!({"method": self.method, "params": self.params})
    }
}

/// The part of a request that a retry must repeat: the tool or prompt name, or the URI.
pub fn request_target(method: &str, params: Option<&Map<String, Value>>) -> Option<String> {
    let key = if method == "resources/read" { "uri" } else { "name" };
    params?.get(key)?.as_str().map(str::to_owned)
}

/// Take `inputResponses` out of `params`: None when it is not an object of objects (each a
/// result for one question); an empty map when absent.
pub fn input_responses(params: &mut Map<String, Value>) -> Option<Map<String, Value>> {
    match params.remove("inputResponses") {
        None => Some(Map::new()),
        Some(Value::Object(responses)) if responses.values().all(Value::is_object) => Some(responses),
        Some(_) => None,
    }
}

/// A call parked for its caller's retry, with what the store needs to know of it.
struct Entry<T> {
    token: String,
    method: String,
    target: Option<String>,
    expires: Instant,
    call: T,
}

/// Parked calls by `requestState`, bounded in count and time (oldest first).
pub struct RoundStore<T> {
    parked: VecDeque<Entry<T>>,
    max_parked: usize,
    ttl: Duration,
}

impl<T> RoundStore<T> {
    pub fn new(max_parked: usize, ttl: Duration) -> Self {
        Self {
            parked: VecDeque::new(),
            max_parked: max_parked.max(1),
            ttl,
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.parked.len()
    }

    /// Keep `call` until `now + ttl`; its token, and what was evicted or expired to make room.
    pub fn park(&mut self, call: T, method: &str, target: Option<String>, now: Instant) -> (String, Vec<T>) {
        let mut dropped = self.expire(now);
        while self.parked.len() >= self.max_parked {
            if let Some(oldest) = self.parked.pop_front() {
                dropped.push(oldest.call);
            }
        }
        let token = format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        self.parked.push_back(Entry {
            token: token.clone(),
            method: method.to_owned(),
            target,
            expires: now + self.ttl,
            call,
        });
        (token, dropped)
    }

    /// The call parked under `token` for this request, removed; None when the token is
    /// unknown, expired, or was issued for another request. Also returns what expired.
    pub fn take(
        &mut self,
        token: &str,
        method: &str,
        target: Option<&str>,
        now: Instant,
    ) -> (Option<T>, Vec<T>) {
        let dropped = self.expire(now);
        let found = self
            .parked
            .iter()
            .position(|e| e.token == token && e.method == method && e.target.as_deref() == target);
        let call = found.and_then(|index| self.parked.remove(index)).map(|e| e.call);
        (call, dropped)
    }

    /// Drop every parked call whose time is up; returns them.
    pub fn expire(&mut self, now: Instant) -> Vec<T> {
        let mut expired = Vec::new();
        let mut kept = VecDeque::with_capacity(self.parked.len());
        for entry in self.parked.drain(..) {
            if entry.expires <= now {
                expired.push(entry.call);
            } else {
                kept.push_back(entry);
            }
        }
        self.parked = kept;
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ask_takes_its_key_from_meta_and_keeps_only_the_callers_meta() {
        let message = json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create", "params": {
            "message": "name?", "_meta": {INPUT_KEY_META: "user_name", "progressToken": 3, "x": 1}}});
        let ask = Ask::from_child(&message);
        assert_eq!(ask.key, "user_name");
        assert_eq!(ask.params, json!({"message": "name?", "_meta": {"x": 1}}));
        let plain = Ask::from_child(&json!({"id": "a", "method": "roots/list"}));
        assert_eq!(plain.key, "request-a");
        assert_eq!(
            plain.as_input_request(),
            json!({"method": "roots/list", "params": {}})
        );
    }

    #[test]
    fn input_responses_must_be_an_object_of_objects() {
        let mut ok = json!({"inputResponses": {"a": {"x": 1}}})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(input_responses(&mut ok).unwrap().len(), 1);
        assert!(ok.is_empty());
        let mut bad = json!({"inputResponses": {"a": 1}}).as_object().unwrap().clone();
        assert!(input_responses(&mut bad).is_none());
        assert!(input_responses(&mut Map::new()).unwrap().is_empty());
    }

    #[test]
    fn a_token_is_bound_to_its_request_used_once_and_bounded_in_count_and_time() {
        let now = Instant::now();
        let mut store = RoundStore::new(2, Duration::from_secs(3));
        let (first, _) = store.park(1, "tools/call", Some("t".into()), now);
        let (second, _) = store.park(2, "tools/call", Some("t".into()), now);
        let (third, evicted) = store.park(3, "tools/call", Some("t".into()), now);
        assert_eq!(evicted, vec![1]);
        assert_eq!(store.take(&first, "tools/call", Some("t"), now).0, None);
        assert_eq!(store.take(&second, "prompts/get", Some("t"), now).0, None);
        assert_eq!(store.take(&second, "tools/call", Some("other"), now).0, None);
        assert_eq!(store.take(&second, "tools/call", Some("t"), now).0, Some(2));
        assert_eq!(store.take(&second, "tools/call", Some("t"), now).0, None);
        let later = now + Duration::from_secs(4);
        let (none, expired) = store.take(&third, "tools/call", Some("t"), later);
        assert_eq!((none, expired), (None, vec![3]));
        assert_eq!(store.len(), 0);
    }
}
