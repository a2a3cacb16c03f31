//! Pinned tool definitions (`bridge/pinning.py`, the digest of `mcp/definitions.py`): the
//! SHA-256 of a tool's definition as the server lists it now, byte for byte the digest the
//! operator's probe pins (`servers[].toolDigests`), and what a live definition that is not
//! the pinned one means: left out of `tools/list` and its calls refused with
//! `definition_changed` until the operator re-pins it (`pinning: pin`) or a person approves
//! the change (`strict`, under which a tool without a pin is refused the same way). The
//! catalog asks [`drift`] when it is built; the pipeline turns a drifted entry into
//! [`refusal`]. Pure.
//!
//! The digest covers `name`, `title`, `description`, `inputSchema`, `outputSchema` and
//! `annotations` (absent or null fields left out), written as Python's
//! `json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)` writes them: keys
//! in code-point order, no spaces, non-ASCII as UTF-8, floats as Python's `repr`. That is
//! not RFC 8785 (JCS sorts keys by UTF-16 units and writes `1e+21`-style ECMAScript
//! numbers, `1` for `1.0`), so no canonical-JSON crate gives these bytes: the writer is here.
//! Two numbers serde_json reads as floats where Python reads integers, `-0` and integers
//! beyond 64 bits, get another digest than the probe's: such a tool is refused, never let
//! through (the recursion is bounded by serde_json's nesting limit of 128).

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::config::{Pinning, Server};
use super::errors::ToolError;

/// The fields of a tool that its digest covers.
const DEFINITION_FIELDS: [&str; 6] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
];

/// Why the live definition of a tool is not the pinned one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drift {
    /// It has a pin, and the live definition's digest is another.
    Changed,
    /// It has no pin, under `strict` (added since the last approval).
    Unapproved,
}

/// SHA-256 (lowercase hex) of the canonical JSON of the tool's definition fields.
pub fn definition_digest(tool: &Value) -> String {
    let mut canonical = String::from("{");
    let mut fields: Vec<(&str, &Value)> = DEFINITION_FIELDS
        .iter()
        .filter_map(|key| Some((*key, tool.get(key).filter(|v| !v.is_null())?)))
        .collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    for (index, (key, value)) in fields.into_iter().enumerate() {
        if index > 0 {
            canonical.push(',');
        }
        write_string(&mut canonical, key);
        canonical.push(':');
        write_value(&mut canonical, value);
    }
    canonical.push('}');
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// What is wrong with a server's pins as `api/bridge.py` bounds them, beyond each digest's
/// form (`config` checks that): at most 5000, names of 1 to 128 characters.
pub fn problems(server: &Server, at: &str) -> Vec<String> {
    let Some(digests) = &server.tool_digests else {
        return Vec::new();
    };
    let mut problems = Vec::new();
    if digests.len() > 5000 {
        problems.push(format!("{at}.toolDigests: must have at most 5000 items"));
    }
    if digests
        .keys()
        .any(|name| !(1..=128).contains(&name.chars().count()))
    {
        problems.push(format!(
            "{at}.toolDigests: every tool name must have 1 to 128 characters"
        ));
    }
    problems
}

/// Why the live definition (`live`, its digest) of `original` is not the pinned one.
pub fn drift(server: &Server, original: &str, live: &str) -> Option<Drift> {
    let digests = server.tool_digests.as_ref()?;
    if server.pinning == Pinning::Off {
        return None;
    }
    match digests.get(original) {
        None if server.pinning == Pinning::Strict => Some(Drift::Unapproved),
        None => None,
        Some(pinned) if pinned == live => None,
        Some(_) => Some(Drift::Changed),
    }
}

/// The `definition_changed` error for a drifted tool (the call is not sent).
pub fn refusal(exposed: &str, server: &Server, original: &str, why: Drift, live: &str) -> ToolError {
    let key = server.key();
    let what = match why {
        Drift::Changed => format!(
            "The definition of {exposed} (its description, schema or annotations) on server {key} is not the one the operator pinned when it last probed the server"
        ),
        Drift::Unapproved => {
            format!("The tool {exposed} of server {key} has no approved definition yet")
        }
    };
    let when = if server.pinning == Pinning::Strict {
        "until a person approves the change (toolsPinning strict: the MCPServer's ToolsChanged condition names the command)"
    } else {
        "until the operator's next probe of the server pins the new definition (within the server's probe interval)"
    };
    let pinning = match server.pinning {
        Pinning::Strict => "strict",
        Pinning::Pin => "pin",
        Pinning::Off => "off",
    };
    let pinned = server.tool_digests.as_ref().and_then(|d| d.get(original));
    ToolError::new(
        "definition_changed",
        format!(
            "{what}, so the bridge did not call it: a changed definition may change what the tool does. It stays out of tools/list and cannot be called {when}. The call was not sent; tools of other servers keep working."
        ),
    )
    .with("server", json!(key))
    .with("pinning", json!(pinning))
    .with("pinnedSha256", json!(pinned))
    .with("liveSha256", json!(live))
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => match (number.as_i64(), number.as_u64(), number.as_f64()) {
            (Some(int), _, _) => out.push_str(&int.to_string()),
            (None, Some(int), _) => out.push_str(&int.to_string()),
            (None, None, Some(float)) => out.push_str(&python_float(float)),
            (None, None, None) => out.push_str(&number.to_string()),
        },
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Code-point order: the order of UTF-8 bytes, which `str`'s ordering is.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, &map[key]);
            }
            out.push('}');
        }
    }
}

/// A string as `json.dumps(ensure_ascii=False)` writes it: only `"`, `\` and the control
/// characters below U+0020 escaped.
fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr` of a float: the shortest digits that read back as the same float,
/// positional from 1e-4 up to below 1e16 (with `.0` when whole), else `d.ddde±XX`.
fn python_float(value: f64) -> String {
    if !value.is_finite() {
        // Not JSON; Python writes these names (a parsed listing never holds them).
        return if value.is_nan() {
            "NaN".to_owned()
        } else if value > 0.0 {
            "Infinity".to_owned()
        } else {
            "-Infinity".to_owned()
        };
    }
    let sign = if value.is_sign_negative() { "-" } else { "" };
    // `{:e}` writes the shortest round-trip digits as `d.ddde[-]N`.
    let scientific = format!("{:e}", value.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = if digits.is_empty() { "0".to_owned() } else { digits };
    if (-4..16).contains(&exponent) {
        if exponent < 0 {
            let zeros = "0".repeat((-exponent - 1) as usize);
            return format!("{sign}0.{zeros}{digits}");
        }
        let whole = exponent as usize + 1;
        if digits.len() <= whole {
            let zeros = "0".repeat(whole - digits.len());
            return format!("{sign}{digits}{zeros}.0");
        }
        return format!("{sign}{}.{}", &digits[..whole], &digits[whole..]);
    }
    let (first, rest) = digits.split_at(1);
    let fraction = if rest.is_empty() {
        String::new()
    } else {
        format!(".{rest}")
    };
    let exponent_sign = if exponent < 0 { '-' } else { '+' };
    format!("{sign}{first}{fraction}e{exponent_sign}{:02}", exponent.abs())
}

/// The annotations a rule may trust, `tool.annotations`: the live ones (as the server sent
/// them) only when the server pins (`pinning` not `off`) and the tool's live definition has
/// its pinned digest, which covers the annotations; else none, so that a server cannot
/// dodge a rule by changing its hints after review (`tool_variables` in `rules.py`).
pub fn pinned_annotations(server: &Server, entry: &super::catalog::Entry) -> serde_json::Map<String, Value> {
    let pin = server.tool_digests.as_ref().and_then(|d| d.get(&entry.original));
    if server.pinning != Pinning::Off && pin == Some(&entry.sha256) {
        entry.annotations.clone()
    } else {
        serde_json::Map::new()
    }
}

#[cfg(test)]
mod tests;
