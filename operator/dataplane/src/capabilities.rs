//! Client capabilities as our server sides route by them (the adapter and the bridge both
//! pass a server's requests — sampling, elicitation, roots — to the client that caused them,
//! and only to a client that declared the capability): the names a client declared, which
//! capability a server→client request needs, and the object that declares names again (what
//! the bridge tells a 2026-07-28 server its agent declared). Pure: no I/O.

use std::collections::HashSet;

use serde_json::{Map, Value};

/// The server→client requests that are relayed to a client, with the capability each needs.
pub const RELAYED_REQUESTS: [(&str, &str); 3] = [
    ("sampling/createMessage", "sampling"),
    ("elicitation/create", "elicitation"),
    ("roots/list", "roots"),
];

/// The client capability a server→client request needs (None: not one we relay).
pub fn capability_for(method: &str) -> Option<&'static str> {
    RELAYED_REQUESTS
        .iter()
        .find(|(relayed, _)| *relayed == method)
        .map(|(_, capability)| *capability)
}

/// The capability names a client declared (its `initialize` capabilities, or a 2026-07-28
/// request's envelope): the top-level keys whose value is an object.
pub fn declared_capabilities(capabilities: Option<&Value>) -> HashSet<String> {
    capabilities
        .and_then(Value::as_object)
        .map(|c| {
            c.iter()
                .filter(|(_, value)| value.is_object())
                .map(|(name, _)| name.clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The capabilities object that declares the relayed capabilities among `names` again.
pub fn capabilities_object(names: &HashSet<String>) -> Value {
    let declared: Map<String, Value> = RELAYED_REQUESTS
        .iter()
        .filter(|(_, capability)| names.contains(*capability))
        .map(|(_, capability)| ((*capability).to_owned(), Value::Object(Map::new())))
        .collect();
    Value::Object(declared)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn declared_names_come_back_as_an_object_of_the_relayed_ones() {
        let declared = declared_capabilities(Some(
            &json!({"sampling": {}, "roots": {"listChanged": true}, "x": 1}),
        ));
        assert_eq!(declared.len(), 2);
        assert_eq!(capability_for("roots/list"), Some("roots"));
        assert_eq!(capability_for("tools/list"), None);
        assert_eq!(
            capabilities_object(&declared),
            json!({"roots": {}, "sampling": {}})
        );
    }
}
