//! What to make of a stdout line of the child that is too long to read: the call it answers.
//!
//! Pure: given the first and last bytes of a line over `--max-line-bytes` (the middle was
//! never kept), find whether it is a JSON-RPC response and to which id, without parsing
//! it. Serializers put the id near the start (`{"jsonrpc":"2.0","id":7,"result":…`,
//! Python's SDK) or as the last member (`{"result":…,"jsonrpc":"2.0","id":7}`, the
//! TypeScript SDK); the first member other than `jsonrpc` and `id` must be `result` or
//! `error`, so that a request of the child (whose id is in the child's own id space) is
//! never taken for an answer. The last member before the final `}` belongs to the outermost
//! object, so an `"id"` there is the message's own. The error that fails the call says how
//! long the line was, never what it said.

use std::sync::LazyLock;

use regex::bytes::Regex;
use serde_json::Value;

use crate::jsonrpc::{self, INTERNAL_ERROR};

/// How much of each end of an oversized line is kept to look for the id.
pub const EDGE_BYTES: usize = 1024;

const ID: &str = r#"(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")"#;
const JSONRPC: &str = r#""jsonrpc"\s*:\s*"2\.0"\s*,\s*"#;

static HEAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"^\s*\{{\s*(?:{JSONRPC})?(?:"id"\s*:\s*{ID}\s*,\s*)?(?:{JSONRPC})?"(?:result|error)"\s*:"#
    ))
    .expect("a valid pattern")
});
static TAIL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(
        r#"[,{{]\s*"id"\s*:\s*{ID}\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}}\s*$"#
    ))
    .expect("a valid pattern")
});

fn decode_id(raw: &[u8]) -> Option<Value> {
    if let Some(quoted) = raw.strip_prefix(b"\"").and_then(|r| r.strip_suffix(b"\"")) {
        let text = std::str::from_utf8(quoted).ok()?;
        return (!text.contains('\\')).then(|| Value::from(text));
    }
    std::str::from_utf8(raw)
        .ok()?
        .parse::<i64>()
        .ok()
        .map(Value::from)
}

/// The id of the response whose line starts with `head` and ends with `tail`, if any.
pub fn response_id(head: &[u8], tail: &[u8]) -> Option<Value> {
    let start = HEAD.captures(head)?;
    if let Some(id) = start.get(1) {
        return decode_id(id.as_bytes());
    }
    TAIL.captures(tail)
        .and_then(|end| end.get(1))
        .and_then(|id| decode_id(id.as_bytes()))
}

/// The error response that stands in for an answer of `size` bytes over `limit`.
pub fn too_large_answer(id: &Value, size: usize, limit: usize) -> Value {
    let text = format!(
        "The MCP server's answer was at least {size} bytes, over the adapter's limit of {limit} bytes (--max-line-bytes)"
    );
    jsonrpc::error_response(Some(id), INTERNAL_ERROR, &text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_id_is_found_at_the_start_or_the_end() {
        assert_eq!(
            response_id(br#"{"jsonrpc":"2.0","id":7,"result":{"x":"#, b"}}"),
            Some(json!(7))
        );
        assert_eq!(
            response_id(br#"{"result":{"content":["#, br#"]},"jsonrpc":"2.0","id":"a"}"#),
            Some(json!("a"))
        );
    }

    #[test]
    fn a_request_of_the_child_is_never_taken_for_an_answer() {
        assert_eq!(
            response_id(
                br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage""#,
                b"}"
            ),
            None
        );
    }

    #[test]
    fn an_id_nested_in_the_result_is_not_the_messages() {
        assert_eq!(response_id(br#"{"result":{"a":["#, br#"{"id":3}]}}"#), None);
    }
}
