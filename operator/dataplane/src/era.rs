//! Protocol eras as our servers serve them: which era a request speaks, the 2026-07-28
//! admission of a request, and the answers a server side gives itself per era.
//!
//! The revisions come from the official SDK (`rmcp::model::ProtocolVersion`): a
//! `MCP-Protocol-Version` header naming anything but a handshake revision routes to the
//! stateless 2026-07-28 entry, whose ladder then refuses what it does not serve. Pure: no
//! I/O. Leaves who the server is (its InitializeResult) to the caller.

use base64::Engine;
use rmcp::model::ProtocolVersion;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{self, HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION};

pub const PROTOCOL_VERSION_META_KEY: &str = "io.modelcontextprotocol/protocolVersion";
pub const CLIENT_INFO_META_KEY: &str = "io.modelcontextprotocol/clientInfo";
pub const CLIENT_CAPABILITIES_META_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
pub const LOG_LEVEL_META_KEY: &str = "io.modelcontextprotocol/logLevel";
pub const SERVER_INFO_META_KEY: &str = "io.modelcontextprotocol/serverInfo";

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

/// The requests a 2026-07-28 client may send (no `ping`, `initialize`, `logging/setLevel`
/// or subscriptions of the session era).
pub const MODERN_REQUESTS: [&str; 10] = [
    "completion/complete",
    "prompts/get",
    "prompts/list",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "server/discover",
    "subscriptions/listen",
    "tools/call",
    "tools/list",
];

/// The requests whose 2026-07-28 result may be `input_required`.
pub const INPUT_REQUIRED_METHODS: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

fn handshake_versions() -> impl Iterator<Item = &'static ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .filter(|v| v.has_initialize())
}

fn modern_versions() -> impl Iterator<Item = &'static ProtocolVersion> {
    ProtocolVersion::KNOWN_VERSIONS
        .iter()
        .filter(|v| !v.has_initialize())
}

/// The newest 2026-07-28-era revision we speak.
pub fn latest_modern_version() -> &'static str {
    modern_versions()
        .last()
        .map_or("2026-07-28", ProtocolVersion::as_str)
}

/// The newest revision without a handshake that we and a peer (`supported`) both speak.
pub fn modern_versions_in(supported: &[&str]) -> Option<String> {
    modern_versions()
        .filter(|v| supported.contains(&v.as_str()))
        .last()
        .map(|v| v.as_str().to_owned())
}

pub fn is_handshake_version(version: &str) -> bool {
    handshake_versions().any(|v| v.as_str() == version)
}

/// Whether an `MCP-Protocol-Version` header routes the request to the stateless era.
pub fn is_modern(version_header: Option<&str>) -> bool {
    version_header.is_some_and(|v| !is_handshake_version(v))
}

/// What the 2026-07-28 admission decided of a POSTed body.
#[derive(Debug, PartialEq)]
pub enum Admission {
    /// A request that passed every rung: serve it at `version`.
    Call { version: String },
    /// A notification at a served version: 202.
    Notification,
    /// Refused before it is served: the HTTP status and the JSON-RPC error.
    Refused { status: u16, message: Value },
}

/// The routing headers of a request, each as every copy it was sent with.
#[derive(Debug, Default)]
pub struct RoutingHeaders<'a> {
    pub version: Vec<&'a str>,
    pub method: Vec<&'a str>,
    pub name: Vec<&'a str>,
}

fn refused(code: i64, text: &str, id: Option<&Value>, data: Option<Value>) -> Admission {
    let mut message = jsonrpc::error_response(id, code, text);
    if let Some(data) = data {
        message["error"]["data"] = data;
    }
    Admission::Refused {
        status: jsonrpc::http_status_for(code),
        message,
    }
}

fn unsupported(requested: &Value, id: Option<&Value>) -> Admission {
    let supported: Vec<&str> = modern_versions().map(ProtocolVersion::as_str).collect();
    refused(
        UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        id,
        Some(json!({"supported": supported, "requested": requested})),
    )
}

/// Admit or refuse a decoded 2026-07-28 POST body (the SDK's inbound ladder: envelope in
/// `params._meta`, routing headers that appear once and agree with the body, a served
/// version).
pub fn classify_modern(body: &Value, headers: &RoutingHeaders<'_>) -> Admission {
    let invalid = || {
        refused(
            INVALID_REQUEST,
            "Body must be a single JSON-RPC request or notification object",
            None,
            None,
        )
    };
    let Some(object) = body.as_object() else {
        return invalid();
    };
    let version_header = headers.version.first().copied().unwrap_or("");
    let Some(id) = object.get("id") else {
        if !object.get("method").is_some_and(Value::is_string) {
            return invalid();
        }
        if !modern_versions().any(|v| v.as_str() == version_header) {
            return unsupported(&json!(version_header), None);
        }
        return Admission::Notification;
    };
    let method = object.get("method").and_then(Value::as_str);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0")
        || method.is_none()
        || !jsonrpc::valid_id(id)
        || object.get("params").is_some_and(|p| !p.is_object())
    {
        return invalid();
    }
    let method = method.unwrap_or_default();
    for (name, copies) in [
        ("MCP-Protocol-Version", &headers.version),
        ("Mcp-Method", &headers.method),
        ("Mcp-Name", &headers.name),
    ] {
        if copies.len() > 1 {
            return refused(
                HEADER_MISMATCH,
                &format!("{name} header appears more than once"),
                Some(id),
                None,
            );
        }
    }
    let meta = object
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object);
    let Some(meta) = meta else {
        let text = format!(
            "params._meta must be an object carrying the required '{PROTOCOL_VERSION_META_KEY}' and '{CLIENT_CAPABILITIES_META_KEY}' envelope keys"
        );
        return refused(INVALID_PARAMS, &text, Some(id), None);
    };
    let missing: Vec<&str> = [PROTOCOL_VERSION_META_KEY, CLIENT_CAPABILITIES_META_KEY]
        .into_iter()
        .filter(|key| !meta.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        let text = format!(
            "params._meta is missing the required envelope key(s): {}",
            missing.join(", ")
        );
        return refused(INVALID_PARAMS, &text, Some(id), None);
    }
    let version = &meta[PROTOCOL_VERSION_META_KEY];
    if headers.version.is_empty() || version.as_str() != Some(version_header) {
        let text = "MCP-Protocol-Version header does not match the request envelope's protocol version";
        return refused(HEADER_MISMATCH, text, Some(id), None);
    }
    if headers.method.first().copied() != Some(method) {
        return refused(
            HEADER_MISMATCH,
            "Mcp-Method header does not match the request body's method",
            Some(id),
            None,
        );
    }
    if let Some(key) = name_key(method) {
        let body_value = object.get("params").and_then(|p| p.get(key));
        if let Some(body_value) = body_value.filter(|v| !v.is_null()) {
            let header = headers.name.first().and_then(|v| decode_header_value(v));
            if header.as_deref().map(Value::from).as_ref() != Some(body_value) {
                let text = format!("Mcp-Name header does not match the request body's '{key}' parameter");
                return refused(HEADER_MISMATCH, &text, Some(id), None);
            }
        }
    }
    let Some(version) = version.as_str() else {
        return refused(
            INVALID_PARAMS,
            "the protocol-version envelope value must be a string",
            Some(id),
            None,
        );
    };
    if !modern_versions().any(|v| v.as_str() == version) {
        return unsupported(&json!(version), Some(id));
    }
    Admission::Call {
        version: version.to_owned(),
    }
}

/// The params key a method's `Mcp-Name` header mirrors.
fn name_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// A header value as the SDK encodes it: verbatim, or `=?base64?…?=` for what a header
/// cannot carry. A malformed or non-canonical sentinel decodes to nothing, so that it
/// never matches a body value by accident.
pub fn decode_header_value(value: &str) -> Option<String> {
    let Some(payload) = value.strip_prefix("=?base64?").and_then(|v| v.strip_suffix("?=")) else {
        return Some(value.to_owned());
    };
    let engine = base64::engine::general_purpose::STANDARD;
    let decoded = engine.decode(payload).ok()?;
    if engine.encode(&decoded) != payload {
        return None;
    }
    String::from_utf8(decoded).ok()
}

// ---------------------------------------------------------------- our own answers

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

    fn call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name,
            "_meta": {PROTOCOL_VERSION_META_KEY: "2026-07-28", CLIENT_CAPABILITIES_META_KEY: {}}}})
    }

    fn headers<'a>(name: &'a str) -> RoutingHeaders<'a> {
        RoutingHeaders {
            version: vec!["2026-07-28"],
            method: vec!["tools/call"],
            name: vec![name],
        }
    }

    #[test]
    fn a_handshake_version_header_is_the_legacy_era() {
        assert!(!is_modern(None) && !is_modern(Some("2025-06-18")));
        assert!(is_modern(Some("2026-07-28")) && is_modern(Some("1999-01-01")));
    }

    #[test]
    fn a_call_whose_headers_agree_is_admitted() {
        assert_eq!(
            classify_modern(&call("echo"), &headers("echo")),
            Admission::Call {
                version: "2026-07-28".into()
            }
        );
    }

    #[test]
    fn a_name_header_that_disagrees_is_a_header_mismatch() {
        let Admission::Refused { status, message } = classify_modern(&call("echo"), &headers("other")) else {
            panic!("admitted")
        };
        assert_eq!(
            (status, message["error"]["code"].as_i64()),
            (400, Some(HEADER_MISMATCH))
        );
    }

    #[test]
    fn a_duplicated_routing_header_is_refused() {
        let mut twice = headers("echo");
        twice.method.push("tools/call");
        assert!(matches!(
            classify_modern(&call("echo"), &twice),
            Admission::Refused { status: 400, .. }
        ));
    }

    #[test]
    fn a_missing_envelope_is_invalid_params() {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
        let h = RoutingHeaders {
            version: vec!["2026-07-28"],
            method: vec!["tools/list"],
            name: vec![],
        };
        let Admission::Refused { message, .. } = classify_modern(&body, &h) else {
            panic!("admitted")
        };
        assert_eq!(message["error"]["code"], INVALID_PARAMS);
    }

    #[test]
    fn base64_header_values_decode_and_bad_ones_never_match() {
        assert_eq!(
            decode_header_value("=?base64?w6ljaG8=?=").as_deref(),
            Some("écho")
        );
        assert_eq!(decode_header_value("=?base64?w6ljaG9=?="), None);
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
    }

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
