//! The answers a server side gives itself per era: the version an `initialize` is answered
//! with, a session's InitializeResult, the `server/discover` result, a 2026 request's
//! envelope taken off for a legacy server, and a legacy result shaped as a 2026-07-28
//! server shapes its own.

use rmcp::model::ProtocolVersion;
use serde_json::{Map, Value, json};

use super::{
    CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, LOG_LEVEL_META_KEY, PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY, is_handshake_version, modern_versions,
};

const RESERVED_META_KEYS: [&str; 4] = [
    PROTOCOL_VERSION_META_KEY,
    CLIENT_INFO_META_KEY,
    CLIENT_CAPABILITIES_META_KEY,
    LOG_LEVEL_META_KEY,
];

/// Methods whose 2026-07-28 results carry `ttlMs` and `cacheScope`.
const CACHEABLE: [&str; 6] = [
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "server/discover",
    "tools/list",
];

/// The version to answer a client's `initialize` with, for a server that speaks `speaks`:
/// the client's when the server speaks it or newer, else the server's (never more than it
/// speaks).
pub fn negotiate_version(requested: Option<&str>, speaks: &str) -> String {
    let position = |v: &str| {
        ProtocolVersion::KNOWN_VERSIONS
            .iter()
            .position(|k| k.as_str() == v)
    };
    if let Some(requested) = requested.filter(|r| is_handshake_version(r))
        && let (Some(asked), Some(spoken)) = (position(requested), position(speaks))
        && asked <= spoken
    {
        return requested.to_owned();
    }
    if is_handshake_version(speaks) {
        speaks.to_owned()
    } else {
        ProtocolVersion::LATEST_WITH_INITIALIZE.as_str().to_owned()
    }
}

/// A session's InitializeResult: the server's own, at the version negotiated for this client.
pub fn initialize_result(server_result: &Value, requested: Option<&str>) -> Value {
    let speaks = server_result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut result = server_result.clone();
    result["protocolVersion"] = Value::from(negotiate_version(requested, speaks));
    result
}

/// The 2026-07-28 `server/discover` result, derived from the server's InitializeResult.
pub fn discover_result(server_result: &Value, version: &str) -> Value {
    let supported: Vec<&str> = modern_versions().map(ProtocolVersion::as_str).collect();
    let mut result = json!({
        "supportedVersions": supported,
        "capabilities": server_result.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        "ttlMs": 0,
        "cacheScope": "private",
        "resultType": "complete",
    });
    if let Some(instructions) = server_result.get("instructions").filter(|v| v.is_string()) {
        result["instructions"] = instructions.clone();
    }
    modern_result(
        "server/discover",
        version,
        result,
        server_result.get("serverInfo"),
    )
}

/// A 2026 request's params without the per-request envelope keys, for a legacy server.
pub fn strip_envelope(params: &mut Map<String, Value>) {
    let Some(Value::Object(meta)) = params.get_mut("_meta") else {
        return;
    };
    for key in RESERVED_META_KEYS {
        meta.remove(key);
    }
    if meta.is_empty() {
        params.remove("_meta");
    }
}

/// Shape a (legacy) result the way a 2026-07-28 server shapes its own: cache hints where
/// the method's result carries them, `resultType` (default `complete`), and the server's
/// `serverInfo` stamped into `_meta`.
pub fn modern_result(method: &str, _version: &str, result: Value, server_info: Option<&Value>) -> Value {
    let mut shaped = match result {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    if CACHEABLE.contains(&method) {
        shaped.entry("ttlMs").or_insert(json!(0));
        shaped.entry("cacheScope").or_insert(json!("private"));
    }
    shaped.entry("resultType").or_insert(json!("complete"));
    if let Some(info) = server_info.filter(|i| i.is_object()) {
        match shaped.get_mut("_meta") {
            None => {
                shaped.insert("_meta".into(), json!({SERVER_INFO_META_KEY: info}));
            }
            Some(Value::Object(meta)) => {
                if meta.get(SERVER_INFO_META_KEY).is_none_or(Value::is_null) {
                    meta.insert(SERVER_INFO_META_KEY.into(), info.clone());
                }
            }
            Some(_) => {}
        }
    }
    Value::Object(shaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_never_claims_more_than_the_server_speaks() {
        assert_eq!(negotiate_version(Some("2025-06-18"), "2025-11-25"), "2025-06-18");
        assert_eq!(negotiate_version(Some("2025-11-25"), "2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_version(Some("nonsense"), "2025-06-18"), "2025-06-18");
        assert_eq!(negotiate_version(None, "2026-07-28"), "2025-11-25");
    }

    #[test]
    fn the_envelope_comes_off_and_other_meta_stays() {
        let mut params = json!({"_meta": {PROTOCOL_VERSION_META_KEY: "x", "progressToken": 3}});
        strip_envelope(params.as_object_mut().unwrap());
        assert_eq!(params, json!({"_meta": {"progressToken": 3}}));
    }

    #[test]
    fn a_modern_result_is_stamped_and_typed() {
        let shaped = modern_result(
            "tools/list",
            "2026-07-28",
            json!({"tools": []}),
            Some(&json!({"name": "s"})),
        );
        assert_eq!(shaped["resultType"], "complete");
        assert_eq!(shaped["ttlMs"], 0);
        assert_eq!(shaped["_meta"][SERVER_INFO_META_KEY]["name"], "s");
    }
}
