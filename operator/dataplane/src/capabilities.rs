//! Client capabilities as our server sides route by them (the adapter and the bridge both
//! pass a server's requests — sampling, elicitation, roots — to the client that caused them,
//! and only to a client that declared the capability): the names a client declared (the
//! relayed capabilities and their modes as `name.sub`, never the client's own objects, which
//! any client could make megabytes large), which capability a server→client request needs,
//! and the object that declares names again (what the bridge tells a 2026-07-28 server its
//! agent declared). Pure: no I/O.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

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

/// The modes of elicitation a client may declare (`elicitation.form`, `elicitation.url`).
const ELICITATION_MODES: [&str; 2] = ["form", "url"];

/// The capability names a client declared (its `initialize` capabilities, or a 2026-07-28
/// request's envelope): the top-level keys whose value is an object, and the elicitation
/// modes it names (`{"elicitation": {"url": {}}}` → `elicitation`, `elicitation.url`).
pub fn declared_capabilities(capabilities: Option<&Value>) -> HashSet<String> {
    let Some(capabilities) = capabilities.and_then(Value::as_object) else {
        return HashSet::new();
    };
    let mut names: HashSet<String> = capabilities
        .iter()
        .filter(|(_, value)| value.is_object())
        .map(|(name, _)| name.clone())
        .collect();
    if let Some(elicitation) = capabilities.get("elicitation").and_then(Value::as_object) {
        for mode in ELICITATION_MODES {
            if elicitation
                .get(mode)
                .is_some_and(|v| v.is_object() || v == &Value::Bool(true))
            {
                names.insert(format!("elicitation.{mode}"));
            }
        }
    }
    names
}

/// The capability a server→client request needs and `names` lack (None: declared, or a
/// method that needs none). `elicitation/create` in URL mode needs `elicitation.url`; in form
/// mode a bare `elicitation` counts (the only shape before modes), one that names only `url`
/// does not.
pub fn required_capability(method: &str, params: &Value, names: &HashSet<String>) -> Option<String> {
    let capability = capability_for(method)?;
    if !names.contains(capability) {
        return Some(capability.to_owned());
    }
    if capability == "elicitation" {
        let has = |mode: &str| names.contains(&format!("elicitation.{mode}"));
        if params.get("mode").and_then(Value::as_str) == Some("url") {
            return (!has("url")).then(|| "elicitation.url".to_owned());
        }
        if has("url") && !has("form") {
            return Some("elicitation.form".to_owned());
        }
    }
    None
}

/// A missing capability's name as `requiredCapabilities` shows it: `sampling` →
/// `{"sampling": {}}`, `elicitation.url` → `{"elicitation": {"url": {}}}`.
pub fn required_object(missing: &str) -> Value {
    match missing.split_once('.') {
        Some((name, sub)) => json!({name: {sub: {}}}),
        None => json!({missing: {}}),
    }
}

/// The capabilities object that declares the relayed capabilities among `names` again.
pub fn capabilities_object(names: &HashSet<String>) -> Value {
    let declared: Map<String, Value> = RELAYED_REQUESTS
        .iter()
        .filter(|(_, capability)| names.contains(*capability))
        .map(|(_, capability)| {
            let mut value = Map::new();
            if *capability == "elicitation" {
                for mode in ELICITATION_MODES {
                    if names.contains(&format!("elicitation.{mode}")) {
                        value.insert(mode.to_owned(), Value::Object(Map::new()));
                    }
                }
            }
            ((*capability).to_owned(), Value::Object(value))
        })
        .collect();
    Value::Object(declared)
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn url_elicitation_needs_its_mode_and_form_only_a_bare_or_form_declaration() {
        let bare = declared_capabilities(Some(&json!({"elicitation": {}})));
        let url = json!({"mode": "url", "url": "https://x", "message": "m"});
        let form = json!({"message": "m", "requestedSchema": {}});
        assert_eq!(required_capability("elicitation/create", &form, &bare), None);
        assert_eq!(
            required_capability("elicitation/create", &url, &bare).as_deref(),
            Some("elicitation.url")
        );
        let url_only = declared_capabilities(Some(&json!({"elicitation": {"url": {}}})));
        assert_eq!(required_capability("elicitation/create", &url, &url_only), None);
        assert_eq!(
            required_capability("elicitation/create", &form, &url_only).as_deref(),
            Some("elicitation.form")
        );
        assert_eq!(
            capabilities_object(&url_only),
            json!({"elicitation": {"url": {}}})
        );
        assert_eq!(
            required_object("elicitation.url"),
            json!({"elicitation": {"url": {}}})
        );
        assert_eq!(required_object("sampling"), json!({"sampling": {}}));
        assert_eq!(
            required_capability("sampling/createMessage", &form, &url_only).as_deref(),
            Some("sampling")
        );
    }
}
