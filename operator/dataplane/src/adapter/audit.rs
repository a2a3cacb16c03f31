//! The adapter's audit trail (`--audit`): one JSON line per `tools/call` it serves.
//!
//! A line names the time, the verified caller (kind, namespace, ServiceAccount, Pod;
//! `anonymous` with `--auth none`), the tool, the outcome (`ok`, `tool_error` for a result
//! with `isError`, `error` for a JSON-RPC error, the adapter's own included) and the duration
//! — never arguments, results or messages. A tool name that is not a valid tool name (1-128
//! of `[A-Za-z0-9_.-]`) is written as `(invalid)` with a short hash, so no text a caller made
//! up reaches the trail. Each line is flushed as it is written.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::Mutex;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const INVALID: &str = "(invalid)";

/// Where the lines go.
pub struct Audit {
    sink: Mutex<Box<dyn Write + Send>>,
}

/// A call's tool as the trail names it: the name, or `(invalid)` and a short hash.
pub type ToolName = (String, Option<String>);

/// The tool of a call as the trail names it, and a hash in place of a name that is not one.
pub fn tool_of(params: Option<&Value>) -> ToolName {
    let name = params.and_then(|p| p.get("name"));
    match name.and_then(Value::as_str) {
        Some(text) if valid_tool_name(text) => (text.to_owned(), None),
        _ => {
            let shown = name.map_or_else(|| "None".to_owned(), ToString::to_string);
            let digest = Sha256::digest(shown.as_bytes());
            let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
            (INVALID.to_owned(), Some(hex))
        }
    }
}

fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// The outcome of an answer for the trail.
pub fn outcome_of(answer: &Value) -> &'static str {
    if answer.get("error").is_some() {
        "error"
    } else if answer.get("result").and_then(|r| r.get("isError")) == Some(&Value::Bool(true)) {
        "tool_error"
    } else {
        "ok"
    }
}

impl Audit {
    /// `-` for stdout, else a file appended to.
    pub fn open(destination: &str) -> std::io::Result<Self> {
        let sink: Box<dyn Write + Send> = if destination == "-" {
            Box::new(std::io::stdout())
        } else {
            Box::new(OpenOptions::new().create(true).append(true).open(destination)?) as Box<File>
        };
        Ok(Self {
            sink: Mutex::new(sink),
        })
    }

    pub fn record(&self, caller: &Value, tool: &ToolName, outcome: &str, seconds: f64) {
        self.record_with_status(caller, tool, outcome, seconds, None);
    }

    /// A line that also names the HTTP status the call got (front mode: `forwarded`).
    pub fn record_with_status(
        &self,
        caller: &Value,
        tool: &ToolName,
        outcome: &str,
        seconds: f64,
        status: Option<u16>,
    ) {
        let when = time::OffsetDateTime::now_utc();
        let format = time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        let mut line = json!({
            "time": when.format(&format).unwrap_or_default(),
            "caller": caller,
            "tool": tool.0,
            "outcome": outcome,
            "durationMs": (seconds * 1_000_000.0).round() / 1000.0,
        });
        if let Some(hash) = &tool.1 {
            line["toolSha256"] = Value::from(hash.as_str());
        }
        if let Some(status) = status {
            line["status"] = Value::from(status);
        }
        let mut text = line.to_string();
        text.push('\n');
        let mut sink = self
            .sink
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sink
            .write_all(text.as_bytes())
            .and_then(|()| sink.flush())
            .is_err()
        {
            tracing::warn!("Failed to write an audit line");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_name_that_is_not_one_is_hashed_never_written() {
        assert_eq!(tool_of(Some(&json!({"name": "echo"}))), ("echo".to_owned(), None));
        let (name, hash) = tool_of(Some(&json!({"name": "rm -rf /\n"})));
        assert_eq!(name, INVALID);
        assert_eq!(hash.map(|h| h.len()), Some(16));
    }

    #[test]
    fn outcomes_tell_tool_errors_from_protocol_errors() {
        assert_eq!(outcome_of(&json!({"result": {"isError": true}})), "tool_error");
        assert_eq!(outcome_of(&json!({"error": {}})), "error");
        assert_eq!(outcome_of(&json!({"result": {}})), "ok");
    }
}
