//! JSON-RPC 2.0 as MCP uses it: the error codes we answer with, error objects, and the few
//! reads of a message that routing needs (its id, its method). Pure: no I/O.

use serde_json::{Map, Value, json};

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// MCP 2026-07-28: a routing header disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// MCP 2026-07-28: the request needs a client capability its envelope did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// MCP 2026-07-28: the envelope names a revision the server does not serve.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// A call its client cancelled (LSP's RequestCancelled; MCP defines none).
pub const REQUEST_CANCELLED: i64 = -32800;

/// An error response for `id` (JSON `null` when the request's id is unknown).
pub fn error_response(id: Option<&Value>, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id.cloned().unwrap_or(Value::Null),
           "error": {"code": code, "message": message}})
}

/// A result response.
pub fn result_response(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The HTTP status the 2026-07-28 transport sends for an error code (the SDK's table;
/// unmapped codes, `INTERNAL_ERROR` included, are 200).
pub fn http_status_for(code: i64) -> u16 {
    match code {
        PARSE_ERROR
        | INVALID_REQUEST
        | INVALID_PARAMS
        | HEADER_MISMATCH
        | MISSING_REQUIRED_CLIENT_CAPABILITY
        | UNSUPPORTED_PROTOCOL_VERSION => 400,
        METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

/// Whether `id` is a valid request id: a string or an integer (never a bool, a float or null).
pub fn valid_id(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// The `params` object of a message, if it has one.
pub fn params(message: &Value) -> Option<&Map<String, Value>> {
    message.get("params").and_then(Value::as_object)
}

/// A message encoded as one stdio line (compact JSON and `\n`).
pub fn line(message: &Value) -> Vec<u8> {
    let mut out = serde_json::to_vec(message).expect("a Value always encodes");
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_strings_or_integers_only() {
        assert!(valid_id(&json!(1)) && valid_id(&json!("a")));
        assert!(!valid_id(&json!(true)) && !valid_id(&json!(1.5)) && !valid_id(&Value::Null));
    }

    #[test]
    fn an_error_without_an_id_names_null() {
        let error = error_response(None, INVALID_REQUEST, "bad");
        assert_eq!(error["id"], Value::Null);
        assert_eq!(error["error"]["code"], INVALID_REQUEST);
    }
}
