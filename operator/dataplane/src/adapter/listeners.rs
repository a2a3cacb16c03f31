//! 2026-07-28 `subscriptions/listen` streams: what each one asked to hear, and the tagging.
//!
//! Owns the record of one open listen stream and the rules about it: which of the requested
//! notification types the child can honor (those its capabilities advertise: `listChanged`
//! per list, `subscribe` for resource updates), whether a notification belongs on the stream
//! (its type was agreed; for `resources/updated`, its URI was named), and the tag every
//! message on a stream carries (`_meta["io.modelcontextprotocol/subscriptionId"]`: the listen
//! request's id). The HTTP stream is `front`'s, the fan-out the router's.

use std::collections::HashSet;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

pub const SUBSCRIPTION_ID_META: &str = "io.modelcontextprotocol/subscriptionId";
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
const LIST_CHANGED: [(&str, &str, &str); 3] = [
    ("toolsListChanged", "tools", "notifications/tools/list_changed"),
    (
        "promptsListChanged",
        "prompts",
        "notifications/prompts/list_changed",
    ),
    (
        "resourcesListChanged",
        "resources",
        "notifications/resources/list_changed",
    ),
];

/// The subset of a `subscriptions/listen` filter that the child's capabilities support.
pub fn honored(requested: &Map<String, Value>, capabilities: Option<&Value>) -> Map<String, Value> {
    let mut agreed = Map::new();
    for (key, capability, _) in LIST_CHANGED {
        let offered = capabilities
            .and_then(|c| c.get(capability))
            .filter(|c| c.is_object());
        let lists = offered
            .and_then(|c| c.get("listChanged"))
            .is_some_and(|v| v.as_bool() == Some(true));
        if requested.get(key) == Some(&Value::Bool(true)) && lists {
            agreed.insert(key.to_owned(), Value::Bool(true));
        }
    }
    let resources = capabilities
        .and_then(|c| c.get("resources"))
        .filter(|c| c.is_object());
    let subscribes = resources
        .and_then(|c| c.get("subscribe"))
        .is_some_and(|v| v.as_bool() == Some(true));
    if let Some(uris) = requested.get("resourceSubscriptions").and_then(Value::as_array)
        && subscribes
    {
        let uris: Vec<Value> = uris.iter().filter(|u| u.is_string()).cloned().collect();
        agreed.insert("resourceSubscriptions".into(), Value::Array(uris));
    }
    agreed
}

/// One open `subscriptions/listen` stream.
#[derive(Debug)]
pub struct Listener {
    subscription_id: Value,
    stream: mpsc::Sender<Value>,
    /// The list-changed notifications this stream agreed to carry.
    methods: HashSet<&'static str>,
    /// The resources whose `notifications/resources/updated` it carries.
    pub uris: HashSet<String>,
}

impl Listener {
    pub fn new(subscription_id: Value, stream: mpsc::Sender<Value>, agreed: &Map<String, Value>) -> Self {
        let methods = LIST_CHANGED
            .iter()
            .filter(|(key, _, _)| agreed.contains_key(*key))
            .map(|(_, _, method)| *method)
            .collect();
        let uris = agreed
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|uris| uris.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        Self {
            subscription_id,
            stream,
            methods,
            uris,
        }
    }

    fn wants(&self, method: &str, params: Option<&Value>) -> bool {
        if method == "notifications/resources/updated" {
            let uri = params.and_then(|p| p.get("uri")).and_then(Value::as_str);
            return uri.is_some_and(|u| self.uris.contains(u));
        }
        self.methods.contains(method)
    }

    /// `message` with this stream's subscription id in `params._meta`.
    fn tagged(&self, message: &Value) -> Value {
        let mut message = message.clone();
        if !message.get("params").is_some_and(Value::is_object) {
            message["params"] = json!({});
        }
        let params = &mut message["params"];
        if !params.get("_meta").is_some_and(Value::is_object) {
            params["_meta"] = json!({});
        }
        params["_meta"][SUBSCRIPTION_ID_META] = self.subscription_id.clone();
        message
    }

    /// The first message on the stream.
    pub fn acknowledge(&self, agreed: &Map<String, Value>) -> bool {
        let ack = json!({"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {"notifications": agreed}});
        self.stream.try_send(self.tagged(&ack)).is_ok()
    }

    /// Offer a notification of the child; false once the stream's reader is gone.
    pub fn offer(&self, method: &str, message: &Value) -> bool {
        if self.stream.is_closed() {
            return false;
        }
        if self.wants(method, message.get("params")) {
            let _ = self.stream.try_send(self.tagged(message));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_the_child_offers_is_agreed_and_each_message_is_tagged() {
        let requested = json!({"toolsListChanged": true, "promptsListChanged": true,
            "resourceSubscriptions": ["file:///a", 3]});
        let caps = json!({"tools": {"listChanged": true}, "prompts": {}, "resources": {"subscribe": true}});
        let agreed = honored(requested.as_object().unwrap(), Some(&caps));
        assert_eq!(
            Value::Object(agreed.clone()),
            json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
        );
        let (sender, mut receiver) = mpsc::channel(4);
        let listener = Listener::new(json!("l-1"), sender, &agreed);
        assert!(listener.acknowledge(&agreed));
        let tools = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        let prompts = json!({"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"});
        let other = json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "file:///b"}});
        assert!(listener.offer("notifications/prompts/list_changed", &prompts));
        assert!(listener.offer("notifications/resources/updated", &other));
        assert!(listener.offer("notifications/tools/list_changed", &tools));
        let ack = receiver.try_recv().unwrap();
        assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID_META], "l-1");
        let next = receiver.try_recv().unwrap();
        assert_eq!(
            next,
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUBSCRIPTION_ID_META: "l-1"}}})
        );
        assert!(receiver.try_recv().is_err());
        drop(receiver);
        assert!(!listener.offer("notifications/tools/list_changed", &tools));
    }
}
