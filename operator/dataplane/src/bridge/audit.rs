//! The audit trail (`bridge/audit.py`): one JSON line per call, ASCII only, on standard
//! output (and appended to `audit.file`) — time, run, identity, server, exposed and original
//! tool, outcome, duration, attempts and a SHA-256 of the arguments' canonical JSON; never a
//! value, a hint, an upstream message or a name the agent made up (`(unknown)` and a short
//! hash). Pure but for [`AuditSink::write`].

use std::io::Write;
use std::sync::Mutex;

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use super::naming::hex;

/// The `tool` of a record whose name is not in the catalog.
pub const UNKNOWN_TOOL: &str = "(unknown)";
/// Hex digits of the SHA-256 of an unknown tool name kept in `toolSha256`.
const TOOL_HASH_CHARS: usize = 16;

/// Sorted keys, no spaces, UTF-8 kept: the same value always gives the same text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(key).expect("a string encodes"));
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&serde_json::to_string(other).expect("a value encodes")),
    }
}

/// SHA-256 (hex) of the canonical JSON of `value`.
pub fn digest(value: &Value) -> String {
    hex(&Sha256::digest(canonical_json(value).as_bytes()))
}

/// The short hash of a tool name that is not a catalog name.
pub fn tool_digest(sent: &Value) -> String {
    digest(sent)[..TOOL_HASH_CHARS].to_owned()
}

/// The facts of one call.
pub struct Record<'a> {
    pub time: time::OffsetDateTime,
    pub run: &'a str,
    pub identity: Option<&'a Value>,
    pub server: Option<String>,
    /// The exposed name when it is a catalog name.
    pub tool: Option<String>,
    /// What the agent sent as the name, when `tool` is unknown.
    pub sent_name: Option<Value>,
    pub original_tool: Option<String>,
    pub outcome: &'a str,
    pub duration_ms: f64,
    pub attempts: u32,
    /// None when the request could not be read as a call.
    pub arguments: Option<&'a Value>,
    /// The PII kinds and counts found per direction, and the directions scanned in part.
    pub pii: Option<&'a super::pii::hook::Findings>,
    /// What the authorization rules decided (`{rule, action}`), none when no rule decided.
    pub policy: Option<Value>,
    /// Whom the server's OAuth token names as its subject and actor (`sub`, `act.sub`).
    pub upstream: (Option<String>, Option<String>),
}

impl Record<'_> {
    pub fn to_value(&self) -> Value {
        let format = time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
        );
        let when = self
            .time
            .to_offset(time::UtcOffset::UTC)
            .format(&format)
            .unwrap_or_default();
        let mut record = Map::new();
        record.insert("time".into(), json!(when));
        record.insert("run".into(), json!(self.run));
        if let Some(identity) = self.identity {
            record.insert("identity".into(), identity.clone());
        }
        record.insert("server".into(), json!(self.server));
        record.insert("tool".into(), json!(self.tool.as_deref().unwrap_or(UNKNOWN_TOOL)));
        record.insert("originalTool".into(), json!(self.original_tool));
        record.insert("outcome".into(), json!(self.outcome));
        record.insert(
            "durationMs".into(),
            json!((self.duration_ms * 1000.0).round() / 1000.0),
        );
        record.insert("attempts".into(), json!(self.attempts));
        record.insert("argumentsSha256".into(), json!(self.arguments.map(digest)));
        let pii = self.pii.map_or_else(|| json!({}), |pii| pii.to_value());
        record.insert("pii".into(), pii);
        if let Some(policy) = &self.policy {
            record.insert("policy".into(), policy.clone());
        }
        if let Some(subject) = &self.upstream.0 {
            record.insert("upstreamSubject".into(), json!(subject));
        }
        if let Some(actor) = &self.upstream.1 {
            record.insert("upstreamActor".into(), json!(actor));
        }
        if self.tool.is_none()
            && let Some(sent) = &self.sent_name
        {
            record.insert("toolSha256".into(), json!(tool_digest(sent)));
        }
        if let Some(pii) = self.pii.filter(|pii| !pii.unscanned.is_empty()) {
            record.insert("piiUnscanned".into(), json!(pii.unscanned));
        }
        Value::Object(record)
    }
}

/// A JSON line with every non-ASCII character escaped (`\uXXXX`, surrogate pairs beyond the
/// BMP), newline-terminated.
pub fn ascii_line(value: &Value) -> String {
    let text = serde_json::to_string(value).expect("a Value always encodes");
    let mut out = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    out.push('\n');
    out
}

/// Where audit lines go: standard output and, when configured, a file appended to.
pub struct AuditSink {
    stdout: bool,
    file: Option<Mutex<std::fs::File>>,
}

impl AuditSink {
    pub fn open(stdout: bool, file: Option<&std::path::Path>) -> std::io::Result<Self> {
        let file = file
            .map(|path| std::fs::OpenOptions::new().create(true).append(true).open(path))
            .transpose()?
            .map(Mutex::new);
        Ok(Self { stdout, file })
    }

    pub fn write(&self, record: &Record<'_>) {
        let line = ascii_line(&record.to_value());
        if self.stdout {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
        if let Some(file) = &self.file
            && let Ok(mut file) = file.lock()
        {
            let _ = file.write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record<'a>(arguments: Option<&'a Value>, tool: Option<&str>) -> Record<'a> {
        Record {
            time: time::OffsetDateTime::UNIX_EPOCH,
            run: "default/agent-1",
            identity: None,
            server: tool.map(|_| "default/everything".to_owned()),
            tool: tool.map(str::to_owned),
            sent_name: Some(json!("nobody_tool")),
            original_tool: tool.map(|_| "echo".to_owned()),
            outcome: "ok",
            duration_ms: 1.23456,
            attempts: 1,
            arguments,
            pii: None,
            policy: None,
            upstream: Default::default(),
        }
    }

    #[test]
    fn the_pii_facts_are_kinds_and_counts_per_direction_and_the_unscanned_directions() {
        use crate::bridge::pii::hook::Findings;
        fn line(pii: &Findings) -> Value {
            let arguments = json!({});
            let mut record = record(Some(&arguments), Some("ev_echo"));
            record.pii = Some(pii);
            record.to_value()
        }
        let mut pii = Findings::default();
        assert_eq!(line(&pii)["pii"], json!({}));
        assert!(line(&pii).get("piiUnscanned").is_none());
        pii.counts.entry("results").or_default().insert("email", 2);
        pii.unscanned.push("results");
        let parsed = line(&pii);
        assert_eq!(parsed["pii"], json!({"results": {"email": 2}}));
        assert_eq!(parsed["piiUnscanned"], json!(["results"]));
    }

    #[test]
    fn a_line_has_the_facts_and_no_value() {
        let arguments = json!({"message": "a-secret", "b": 1});
        let line = ascii_line(&record(Some(&arguments), Some("ev_echo")).to_value());
        assert!(!line.contains("a-secret") && line.ends_with('\n'));
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(parsed["durationMs"], 1.235);
        assert_eq!(parsed["argumentsSha256"].as_str().unwrap().len(), 64);
        assert!(parsed.get("toolSha256").is_none());
    }

    #[test]
    fn a_line_names_the_rule_that_decided_and_only_when_one_did() {
        let arguments = json!({"body": "a-secret"});
        let mut denied = record(Some(&arguments), Some("ev_echo"));
        denied.outcome = "policy_denied";
        denied.policy = Some(json!({"rule": "server rule 1", "action": "deny"}));
        let line = ascii_line(&denied.to_value());
        assert!(!line.contains("a-secret"));
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            parsed["policy"],
            json!({"rule": "server rule 1", "action": "deny"})
        );
        let plain = record(Some(&arguments), Some("ev_echo")).to_value();
        assert!(plain.get("policy").is_none());
    }

    #[test]
    fn an_unknown_name_is_never_written_only_hashed() {
        let line = ascii_line(&record(Some(&json!({})), None).to_value());
        assert!(!line.contains("nobody_tool") && line.contains("(unknown)"));
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["toolSha256"].as_str().unwrap().len(), 16);
    }

    #[test]
    fn canonical_json_sorts_keys_and_keeps_utf8_and_lines_are_ascii() {
        assert_eq!(
            canonical_json(&json!({"b": [1, {"d": 1, "c": "é"}], "a": null})),
            r#"{"a":null,"b":[1,{"c":"é","d":1}]}"#
        );
        // The digest of Python's json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False).
        assert_eq!(
            digest(&json!({})),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(ascii_line(&json!("é😀")), "\"\\u00e9\\ud83d\\ude00\"\n");
    }
}
