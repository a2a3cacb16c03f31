//! What a PII mode does with a finding (`bridge/hooks.py`'s `PiiHook`): per direction
//! (`policy.pii.arguments` before the call, `policy.pii.results` after it), `off` does not
//! scan, `detect` records kinds and counts for the audit line, `redact` rewrites the value,
//! `block` refuses it (`pii_blocked`, naming the kinds, never the values). A direction
//! larger than the scanner's budget is scanned only in part: `block` then refuses it
//! (`pii_unscannable`), `redact` redacts what it scanned and says so (`piiUnscanned`, and
//! for a result a note in its `_meta` and `content`), `detect` only records it. A value with
//! much text is scanned on Tokio's blocking pool, so a huge result never stalls the calls
//! of other agents on the bridge's one thread.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{OFFLOAD_CHARS, Report, SCANNER, text_size};
use crate::bridge::errors::ToolError;
use crate::bridge::policy::PiiMode;

/// The `_meta` key of a result's note that it was scanned only in part.
pub const PII_META: &str = "dev.mcp-operator/pii";

/// Which way a value goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Arguments,
    Results,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Arguments => "arguments",
            Direction::Results => "results",
        }
    }
}

/// What the scans of one call found, for its audit line: kinds and counts per direction,
/// and the directions too large to scan whole.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Findings {
    pub counts: BTreeMap<&'static str, BTreeMap<&'static str, u64>>,
    pub unscanned: Vec<&'static str>,
}

impl Findings {
    /// The audit record's `pii`: `{direction: {kind: count}}`, directions with nothing left out.
    pub fn to_value(&self) -> Value {
        json!(self.counts)
    }
}

/// The call a scan belongs to, as its refusals name it.
pub struct Subject<'a> {
    pub tool: &'a str,
    pub server: &'a str,
}

/// What the mode made of a value: the value to go on with (`None`: unchanged) and the
/// refusal, when the mode refuses it.
pub struct Verdict {
    pub value: Option<Value>,
    pub refusal: Option<ToolError>,
}

/// Scan `value` going `direction` under `mode`; record what was found in `findings`.
pub async fn judge(
    mode: PiiMode,
    direction: Direction,
    value: &Value,
    subject: &Subject<'_>,
    findings: &mut Findings,
) -> Verdict {
    if mode == PiiMode::Off {
        return Verdict {
            value: None,
            refusal: None,
        };
    }
    let redact = mode == PiiMode::Redact;
    let report = if text_size(value, OFFLOAD_CHARS) >= OFFLOAD_CHARS {
        let owned = value.clone();
        match tokio::task::spawn_blocking(move || SCANNER.scan(&owned, redact)).await {
            Ok(report) => report,
            Err(_) => {
                return Verdict {
                    value: None,
                    refusal: Some(hook_failed(subject, direction)),
                };
            }
        }
    } else {
        SCANNER.scan(value, redact)
    };
    let limit = SCANNER.max_chars;
    decide(mode, direction, report, value, limit, subject, findings)
}

/// The mode's verdict on a scan's report of `original`, by a scanner of budget `limit`
/// (pure: the unit tests drive it).
pub fn decide(
    mode: PiiMode,
    direction: Direction,
    report: Report,
    original: &Value,
    limit: usize,
    subject: &Subject<'_>,
    findings: &mut Findings,
) -> Verdict {
    let counts = findings.counts.entry(direction.name()).or_default();
    for (kind, count) in &report.counts {
        *counts.entry(kind).or_default() += count;
    }
    if counts.is_empty() {
        findings.counts.remove(direction.name());
    }
    if report.unscanned {
        findings.unscanned.push(direction.name());
    }
    let refusal = match mode {
        PiiMode::Block if report.unscanned => Some(unscannable(subject, direction, limit)),
        PiiMode::Block if report.found() => Some(blocked(subject, direction, findings)),
        _ => None,
    };
    let mut value = report.value;
    if mode == PiiMode::Redact && direction == Direction::Results && report.unscanned {
        let base = value.take().unwrap_or_else(|| original.clone());
        value = Some(with_note(base, limit));
    }
    Verdict { value, refusal }
}

fn counted(counts: &BTreeMap<&'static str, u64>) -> String {
    counts
        .iter()
        .map(|(kind, count)| format!("{kind} x{count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn blocked(subject: &Subject<'_>, direction: Direction, findings: &Findings) -> ToolError {
    let counts = findings.counts.get(direction.name()).cloned().unwrap_or_default();
    let (tool, server, listed) = (subject.tool, subject.server, counted(&counts));
    let hint = match direction {
        Direction::Arguments => format!(
            "The arguments of {tool} contain personal data ({listed}), which the policy of server {server} does not let leave the Pod. Remove or anonymise it and call again; the call was not sent."
        ),
        Direction::Results => format!(
            "The result of {tool} contained personal data ({listed}), which the policy of server {server} does not let through, so it was withheld. The call itself was executed: do not repeat it to get the result."
        ),
    };
    ToolError::new("pii_blocked", hint)
        .with("direction", json!(direction.name()))
        .with("kinds", json!(counts))
}

fn unscannable(subject: &Subject<'_>, direction: Direction, limit: usize) -> ToolError {
    let (what, after) = match direction {
        Direction::Arguments => ("arguments", "the call was not sent"),
        Direction::Results => (
            "result",
            "it was withheld. The call itself was executed: do not repeat it to get the result; ask for less (a page, a filter) instead",
        ),
    };
    ToolError::new(
        "pii_unscannable",
        format!(
            "The {what} of {} is larger than the {limit} characters the bridge scans for personal data, and the policy of server {} lets through only what was scanned, so {after}.",
            subject.tool, subject.server
        ),
    )
    .with("direction", json!(direction.name()))
    .with("maxChars", json!(limit))
}

/// A scan that could not finish (its worker panicked): the bridge fails closed.
fn hook_failed(subject: &Subject<'_>, direction: Direction) -> ToolError {
    tracing::error!("Bridge hook pii failed {} {}", direction.name(), subject.tool);
    let stopped = match direction {
        Direction::Arguments => "the call was not sent",
        Direction::Results => "its result was withheld",
    };
    ToolError::new(
        "hook_failed",
        format!(
            "The bridge's policy hook pii failed on this call, so {stopped}. This is a fault of the bridge, not of the arguments; report it rather than retrying."
        ),
    )
    .with("hook", json!("pii"))
}

/// `result` with the note that only its first `limit` characters were scanned.
pub fn with_note(result: Value, limit: usize) -> Value {
    let Value::Object(mut result) = result else {
        return result;
    };
    let note = format!(
        "[mcp-bridge: only the first {limit} characters of this result were scanned for personal data and redacted; the rest was not scanned]"
    );
    let mut meta = match result.remove("_meta") {
        Some(Value::Object(meta)) => meta,
        _ => Map::new(),
    };
    meta.insert(PII_META.into(), json!(note));
    result.insert("_meta".into(), Value::Object(meta));
    if let Some(Value::Array(content)) = result.get_mut("content") {
        content.push(json!({"type": "text", "text": note}));
    }
    Value::Object(result)
}

#[cfg(test)]
mod tests {
    //! Ported from the PII parts of `tests/unit/test_bridge_hooks.py`.
    use super::super::{Scanner, detectors};
    use super::*;

    const EMAIL: &str = "alice@example.com";
    const SUBJECT: Subject<'static> = Subject {
        tool: "ev_echo",
        server: "default/everything",
    };

    /// `decide` on a scan by `scanner`: the verdict and what the audit line would say.
    fn run(scanner: &Scanner, mode: PiiMode, direction: Direction, value: &Value) -> (Verdict, Findings) {
        let mut findings = Findings::default();
        let report = if mode == PiiMode::Off {
            Report::default()
        } else {
            scanner.scan(value, mode == PiiMode::Redact)
        };
        let verdict = decide(
            mode,
            direction,
            report,
            value,
            scanner.max_chars,
            &SUBJECT,
            &mut findings,
        );
        (verdict, findings)
    }

    fn full(mode: PiiMode, direction: Direction, value: &Value) -> (Verdict, Findings) {
        run(&SCANNER, mode, direction, value)
    }

    fn found(direction: &'static str, kind: &'static str, count: u64) -> Findings {
        let mut findings = Findings::default();
        findings.counts.entry(direction).or_default().insert(kind, count);
        findings
    }

    #[test]
    fn off_neither_scans_nor_changes() {
        let (verdict, findings) = full(PiiMode::Off, Direction::Arguments, &json!({"to": EMAIL}));
        assert!(verdict.value.is_none() && verdict.refusal.is_none());
        assert_eq!(findings, Findings::default());
    }

    #[test]
    fn detect_counts_and_forwards_unchanged() {
        let (verdict, findings) = full(PiiMode::Detect, Direction::Arguments, &json!({"to": EMAIL}));
        assert!(verdict.value.is_none() && verdict.refusal.is_none());
        assert_eq!(findings, found("arguments", "email", 1));
    }

    #[test]
    fn redact_rewrites_the_arguments_before_they_leave() {
        let (verdict, findings) = full(PiiMode::Redact, Direction::Arguments, &json!({"to": EMAIL}));
        assert_eq!(verdict.value, Some(json!({"to": "[REDACTED:email]"})));
        assert!(verdict.refusal.is_none());
        assert_eq!(findings, found("arguments", "email", 1));
    }

    #[test]
    fn block_refuses_the_call_and_names_the_kinds_not_the_values() {
        let (verdict, _) = full(PiiMode::Block, Direction::Arguments, &json!({"to": EMAIL}));
        let refusal = verdict.refusal.unwrap();
        assert_eq!(refusal.code, "pii_blocked");
        assert!(refusal.hint.contains("email x1") && !refusal.hint.contains(EMAIL));
        assert!(refusal.hint.contains("the call was not sent"));
        assert!(refusal.hint.contains("server default/everything"));
        assert_eq!(refusal.details["kinds"], json!({"email": 1}));
        assert_eq!(refusal.details["direction"], "arguments");
    }

    #[test]
    fn block_passes_a_call_without_pii() {
        let (verdict, findings) = full(PiiMode::Block, Direction::Arguments, &json!({"to": "nobody"}));
        assert!(verdict.refusal.is_none() && verdict.value.is_none());
        assert_eq!(findings, Findings::default());
    }

    #[test]
    fn results_are_redacted_after_the_call() {
        let result = json!({"content": [{"type": "text", "text": format!("mail {EMAIL}")}]});
        let (verdict, findings) = full(PiiMode::Redact, Direction::Results, &result);
        let value = verdict.value.unwrap();
        assert_eq!(value["content"][0]["text"], "mail [REDACTED:email]");
        assert!(verdict.refusal.is_none());
        assert_eq!(findings, found("results", "email", 1));
    }

    #[test]
    fn a_blocked_result_is_withheld_and_says_the_call_ran() {
        let result = json!({"content": [{"type": "text", "text": EMAIL}]});
        let (verdict, _) = full(PiiMode::Block, Direction::Results, &result);
        let refusal = verdict.refusal.unwrap();
        assert_eq!(refusal.code, "pii_blocked");
        assert!(refusal.hint.contains("The call itself was executed"));
        assert_eq!(refusal.details["direction"], "results");
    }

    #[test]
    fn block_refuses_arguments_too_large_to_scan_and_says_why() {
        let small = Scanner::new(detectors::builtin(), 100);
        let value = json!({"text": "x".repeat(500)});
        let (verdict, findings) = run(&small, PiiMode::Block, Direction::Arguments, &value);
        let refusal = verdict.refusal.unwrap();
        assert_eq!(refusal.code, "pii_unscannable");
        assert!(refusal.hint.contains("100 characters") && refusal.hint.contains("not sent"));
        assert_eq!(refusal.details["maxChars"], 100);
        assert_eq!(findings.unscanned, vec!["arguments"]);
    }

    #[test]
    fn block_withholds_a_result_too_large_to_scan() {
        let small = Scanner::new(detectors::builtin(), 100);
        let result = json!({"content": [{"type": "text", "text": "x".repeat(500)}]});
        let (verdict, _) = run(&small, PiiMode::Block, Direction::Results, &result);
        let refusal = verdict.refusal.unwrap();
        assert!(refusal.code == "pii_unscannable" && refusal.hint.contains("executed"));
    }

    #[test]
    fn redact_redacts_what_it_scanned_of_a_large_result_and_says_so() {
        let small = Scanner::new(detectors::builtin(), 100);
        let text = format!("{EMAIL} {}", "x".repeat(500));
        let result = json!({"content": [{"type": "text", "text": text}]});
        let (verdict, findings) = run(&small, PiiMode::Redact, Direction::Results, &result);
        let value = verdict.value.unwrap();
        assert!(
            value["content"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("[REDACTED:email]")
        );
        assert!(
            value["_meta"][PII_META]
                .as_str()
                .unwrap()
                .contains("only the first 100")
        );
        assert_eq!(
            value["content"].as_array().unwrap().len(),
            2,
            "a note in content too"
        );
        assert_eq!(findings.unscanned, vec!["results"]);
        assert_eq!(findings.counts, found("results", "email", 1).counts);
        // Nothing found in the part scanned: the note is still added.
        let plain = json!({"content": [{"type": "text", "text": "x".repeat(500)}]});
        let (verdict, _) = run(&small, PiiMode::Redact, Direction::Results, &plain);
        assert!(verdict.value.unwrap()["_meta"][PII_META].is_string());
    }

    #[test]
    fn detect_lets_a_large_value_through_and_only_records_it() {
        let small = Scanner::new(detectors::builtin(), 100);
        let value = json!({"text": "x".repeat(500)});
        let (verdict, findings) = run(&small, PiiMode::Detect, Direction::Arguments, &value);
        assert!(verdict.refusal.is_none() && verdict.value.is_none());
        assert_eq!(findings.unscanned, vec!["arguments"]);
    }

    #[tokio::test]
    async fn a_large_value_is_scanned_off_the_event_loop_with_the_same_verdict() {
        let text = format!("{} {EMAIL}", "x ".repeat(OFFLOAD_CHARS));
        let value = json!({"content": [{"type": "text", "text": text}]});
        assert!(text_size(&value, OFFLOAD_CHARS) >= OFFLOAD_CHARS);
        let mut findings = Findings::default();
        let verdict = judge(
            PiiMode::Block,
            Direction::Results,
            &value,
            &SUBJECT,
            &mut findings,
        )
        .await;
        assert_eq!(verdict.refusal.unwrap().code, "pii_blocked");
        assert_eq!(findings, found("results", "email", 1));
        let mut findings = Findings::default();
        let small = json!({"to": EMAIL});
        let verdict = judge(
            PiiMode::Redact,
            Direction::Arguments,
            &small,
            &SUBJECT,
            &mut findings,
        )
        .await;
        assert_eq!(verdict.value, Some(json!({"to": "[REDACTED:email]"})));
    }

    #[tokio::test]
    async fn a_large_scan_gives_the_event_loop_back_and_a_small_one_does_not() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        for (size, offloaded) in [(OFFLOAD_CHARS, true), (100, false)] {
            let ticks = Arc::new(AtomicUsize::new(0));
            let counting = ticks.clone();
            let ticker = tokio::spawn(async move {
                loop {
                    counting.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
            });
            let value = json!({"v": "1 ".repeat(size / 2 + 1)});
            let mut findings = Findings::default();
            judge(
                PiiMode::Detect,
                Direction::Results,
                &value,
                &SUBJECT,
                &mut findings,
            )
            .await;
            let seen = ticks.load(Ordering::Relaxed);
            ticker.abort();
            assert_eq!(
                seen > 0,
                offloaded,
                "{size}: the loop ran {seen} times during the scan"
            );
        }
    }
}
