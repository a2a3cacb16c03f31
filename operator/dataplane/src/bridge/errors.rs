//! The structured tool error (`bridge/errors.py`): what every refusal or failure of a call
//! becomes before the agent sees it — a `CallToolResult` with `isError: true` whose
//! `structuredContent` carries a stable `code` (the audit outcome) and a `hint` a model can
//! act on. Pure.

use serde_json::{Map, Value, json};

/// A hint is cut to this many characters (it goes into a model's context).
const MAX_HINT_CHARS: usize = 2000;

#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: &'static str,
    pub hint: String,
    /// Extra machine-readable facts (`fields`, `similar`, `rpcCode`, …).
    pub details: Map<String, Value>,
}

impl ToolError {
    pub fn new(code: &'static str, hint: String) -> Self {
        Self {
            code,
            hint,
            details: Map::new(),
        }
    }

    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.details.insert(key.to_owned(), value);
        self
    }

    /// The MCP `CallToolResult`: the text for models that read only `content`, and
    /// `structuredContent` with code, hint and details.
    pub fn to_result(&self) -> Value {
        let hint: String = if self.hint.chars().count() <= MAX_HINT_CHARS {
            self.hint.clone()
        } else {
            self.hint.chars().take(MAX_HINT_CHARS - 1).collect()
        };
        let mut structured = Map::new();
        structured.insert("code".into(), json!(self.code));
        structured.insert("hint".into(), json!(hint));
        for (key, value) in &self.details {
            structured.insert(key.clone(), value.clone());
        }
        json!({
            "content": [{"type": "text", "text": format!("{}: {hint}", self.code)}],
            "structuredContent": structured,
            "isError": true,
        })
    }
}

/// A name fit for a message: quoted as Python's `repr` quotes it, cut to `limit` characters.
pub fn quoted(name: &str, limit: usize) -> String {
    let cut: String = if name.chars().count() <= limit {
        name.to_owned()
    } else {
        let mut head: String = name.chars().take(limit - 1).collect();
        head.push('…');
        head
    };
    python_repr(&cut)
}

/// `repr()` of a Python string: single quotes unless the text has one and no double quote.
pub fn python_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_error_is_a_call_tool_result_with_code_and_hint() {
        let error = ToolError::new("not_allowlisted", "no".into()).with("similar", json!([]));
        let result = error.to_result();
        assert_eq!(result["isError"], true);
        assert_eq!(result["structuredContent"]["code"], "not_allowlisted");
        assert_eq!(result["structuredContent"]["similar"], json!([]));
        assert_eq!(result["content"][0]["text"], "not_allowlisted: no");
    }

    #[test]
    fn names_are_quoted_like_python() {
        assert_eq!(quoted("ev_get-env", 64), "'ev_get-env'");
        assert_eq!(quoted("it's", 64), "\"it's\"");
        assert_eq!(quoted("abcdef", 4), "'abc…'");
    }
}
