//! The 2026-07-28 admission of a request (the SDK's inbound ladder): the envelope in
//! `params._meta`, the routing headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`)
//! that appear once and agree with the body, a served version; and the SDK's encoding of a
//! header value it mirrors.

use base64::Engine;
use rmcp::model::ProtocolVersion;
use serde_json::{Value, json};

use super::{CLIENT_CAPABILITIES_META_KEY, PROTOCOL_VERSION_META_KEY, modern_versions};
use crate::jsonrpc::{self, HEADER_MISMATCH, INVALID_PARAMS, INVALID_REQUEST, UNSUPPORTED_PROTOCOL_VERSION};

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

/// A header value as the SDK encodes it: verbatim when a header can carry it, else
/// `=?base64?…?=` (what `decode_header_value` reads back).
pub fn encode_header_value(value: &str) -> String {
    let plain = value.bytes().all(|b| (0x20..0x7f).contains(&b)) && value.trim() == value;
    if plain && !value.starts_with("=?base64?") {
        value.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_a_header_cannot_carry_are_base64() {
        assert_eq!(encode_header_value("get_time"), "get_time");
        assert_eq!(encode_header_value("é"), "=?base64?w6k=?=");
        assert_eq!(encode_header_value(" x"), "=?base64?IHg=?=");
        assert_eq!(
            decode_header_value(&encode_header_value("é")).as_deref(),
            Some("é")
        );
    }

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
}
