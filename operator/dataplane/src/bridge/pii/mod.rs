//! PII detection and redaction in any JSON value: the scanner (`bridge/pii.py`).
//!
//! The detectors it runs are `detectors`'; how a value is walked into texts and rebuilt is
//! `leaves`'; what a mode does with a finding is `hook`'s. `Scanner::scan` reads every string
//! leaf and key, numbers as their decimal text, and base64 payloads that decode to text; each
//! after normalising; small base64 runs inside a string decoded and scanned; and the *seams*
//! between adjacent strings (their ends joined directly and with a space), so that a value
//! split across fields is found where the pieces meet. The work per call is bounded
//! (`MAX_SCAN_CHARS` per direction; the report says `unscanned` when the value was larger)
//! and linear: a long text is scanned a window at a time. It reports kinds and counts only,
//! never the values.

pub mod checksums;
pub mod detectors;
pub mod hook;
pub mod leaves;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use detectors::{Detector, digit_count};
use leaves::{Finding, Leaf, Walk, decoded_text, normalise};

/// Characters scanned per direction of one call; what lies beyond is *unscanned*.
pub const MAX_SCAN_CHARS: usize = 2 * 1024 * 1024;
/// A base64-looking run inside a string up to this long is decoded and scanned.
const MAX_BASE64_RUN: usize = 4096;
const MIN_BASE64_RUN: usize = 12;
/// A longer text is scanned a window at a time (bytes here, characters in Python).
pub const CHUNK_CHARS: usize = 32 * 1024;
/// Context either side of a window: more than any finding is long.
const CHUNK_CONTEXT: usize = 512;
/// Of each string, this many characters at either end take part in the seam scan.
const SEAM_CHARS: usize = 128;
/// A value with at least this many bytes of text is scanned on the blocking pool, off the
/// bridge's one event-loop thread: more than one window (Python's threshold is 256K
/// characters; the backtracking patterns here cost more per character than Python's C
/// engine on adversarial text, and a thread hand-off costs microseconds).
pub const OFFLOAD_CHARS: usize = CHUNK_CHARS;

static BASE64_RUN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"[A-Za-z0-9+/_-]{12,}={0,2}").expect("the pattern compiles"));

/// The built-in scanner, its detectors compiled once.
pub static SCANNER: LazyLock<Scanner> = LazyLock::new(|| Scanner::new(detectors::builtin(), MAX_SCAN_CHARS));

/// What a scan found: counts per kind (never the values) and the value, rewritten when
/// redacting (`None`: unchanged).
#[derive(Debug, Default)]
pub struct Report {
    pub counts: BTreeMap<&'static str, u64>,
    pub value: Option<Value>,
    /// The value was larger than the budget: only its first part was scanned.
    pub unscanned: bool,
}

impl Report {
    pub fn found(&self) -> bool {
        !self.counts.is_empty()
    }
}

/// How many bytes of text `value` holds (strings and keys), counted up to `limit` (a quick
/// walk, to decide where to scan it).
pub fn text_size(value: &Value, limit: usize) -> usize {
    let mut total = 0;
    let mut pending = vec![value];
    while let Some(item) = pending.pop() {
        if total >= limit {
            break;
        }
        match item {
            Value::String(text) => total += text.len(),
            Value::Object(map) => {
                total += map.keys().map(String::len).sum::<usize>();
                pending.extend(map.values());
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    total
}

/// Byte index of the char boundary at or before `index`.
fn floor(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// Byte index of the char boundary at or after `index`.
fn ceil(text: &str, mut index: usize) -> usize {
    while index < text.len() && !text.is_char_boundary(index) {
        index += 1;
    }
    index.min(text.len())
}

/// Runs detectors over every string of a JSON value.
pub struct Scanner {
    pub detectors: Vec<Detector>,
    pub max_chars: usize,
}

impl Scanner {
    pub fn new(detectors: Vec<Detector>, max_chars: usize) -> Self {
        Self { detectors, max_chars }
    }

    /// Non-overlapping findings in `text` as it is; the earlier detector wins a tie, the
    /// longer span wins an overlap that starts first.
    pub fn spans(&self, text: &str) -> Vec<Finding> {
        let digits = digit_count(text);
        let mut found: Vec<(usize, usize, &'static str, usize)> = Vec::new();
        for (rank, detector) in self.detectors.iter().enumerate() {
            if digits < detector.min_digits || detector.trigger.is_some_and(|t| !text.contains(t)) {
                continue;
            }
            found.extend(
                detector
                    .find(text)
                    .into_iter()
                    .map(|(s, e)| (s, e, detector.kind, rank)),
            );
        }
        found.sort_by_key(|f| (f.0, f.3, std::cmp::Reverse(f.1 - f.0)));
        let mut kept: Vec<Finding> = Vec::new();
        for (start, end, kind, _) in found {
            if kept.last().is_some_and(|last| start < last.1) {
                continue;
            }
            kept.push((start, end, kind));
        }
        kept
    }

    /// Findings in an already normalised `text`, and in the small base64 runs in it that
    /// decode to text (one finding per finding inside such a run).
    pub fn find(&self, text: &str, decode: bool) -> Vec<Finding> {
        let mut found = if text.len() <= CHUNK_CHARS {
            self.spans(text)
        } else {
            self.chunked(text)
        };
        if !decode || text.len() < MIN_BASE64_RUN {
            return found;
        }
        let mut extra = Vec::new();
        for run in BASE64_RUN.find_iter(text) {
            let (start, end) = (run.start(), run.end());
            if end - start > MAX_BASE64_RUN {
                continue;
            }
            let before = found.partition_point(|f| f.1 <= start);
            if before < found.len() && found[before].0 < end {
                continue; // the run overlaps a finding
            }
            let Some((decoded, _)) = decoded_text(run.as_str()) else {
                continue;
            };
            let inner = self.find(&normalise(&decoded), false);
            extra.extend(inner.into_iter().map(|(_, _, kind)| (start, end, kind)));
        }
        if !extra.is_empty() {
            found.extend(extra);
            found.sort_unstable();
        }
        found
    }

    /// `spans` of a long text, a window at a time: each window a chunk with `CHUNK_CONTEXT`
    /// bytes either side, keeping the findings that start in its chunk.
    fn chunked(&self, text: &str) -> Vec<Finding> {
        let mut found: Vec<Finding> = Vec::new();
        let mut chunk = 0;
        while chunk < text.len() {
            let next = ceil(text, chunk + CHUNK_CHARS);
            let origin = floor(text, chunk.saturating_sub(CHUNK_CONTEXT));
            let until = ceil(text, next + CHUNK_CONTEXT);
            for (start, end, kind) in self.spans(&text[origin..until]) {
                let finding = (origin + start, origin + end, kind);
                if (chunk..next).contains(&finding.0) && found.last().is_none_or(|last| finding.0 >= last.1) {
                    found.push(finding);
                }
            }
            chunk = next;
        }
        found
    }

    /// Find values split across adjacent strings: scan the ends of neighbouring strings
    /// joined, and keep what crosses a join. Adds the findings to the leaves they touch;
    /// returns their kinds, one per finding.
    fn seams(&self, leaves: &mut [Leaf]) -> Vec<&'static str> {
        let mut kinds = Vec::new();
        let every: Vec<usize> = (0..leaves.len())
            .filter(|&i| leaves[i].seam && !leaves[i].text.is_empty())
            .collect();
        let values: Vec<usize> = every.iter().copied().filter(|&i| !leaves[i].key).collect();
        for (chain, joiner) in [(every, ""), (values, " ")] {
            if chain.len() < 2 {
                continue;
            }
            let mut seam = String::new();
            let mut places: Vec<(usize, usize, usize, usize)> = Vec::new(); // start, end, leaf, offset
            for (number, &leaf) in chain.iter().enumerate() {
                if number > 0 {
                    seam.push_str(joiner);
                }
                let text = &leaves[leaf].text;
                let chars = text.chars().count();
                let parts: Vec<(&str, usize)> = if chars <= 2 * SEAM_CHARS {
                    vec![(text.as_str(), 0)]
                } else {
                    let head = text.char_indices().nth(SEAM_CHARS).map_or(text.len(), |(i, _)| i);
                    let tail = text
                        .char_indices()
                        .nth(chars - SEAM_CHARS)
                        .map_or(text.len(), |(i, _)| i);
                    vec![(&text[..head], 0), (&text[tail..], tail)]
                };
                for (index, (part, offset)) in parts.into_iter().enumerate() {
                    if index > 0 {
                        seam.push('\0'); // the middle of a long string is not a seam
                    }
                    places.push((seam.len(), seam.len() + part.len(), leaf, offset));
                    seam.push_str(part);
                }
            }
            for (start, end, kind) in self.find(&seam, false) {
                let first = places.partition_point(|p| p.0 <= start).saturating_sub(1);
                let last = places.partition_point(|p| p.0 < end);
                let touched: Vec<_> = places[first..last.max(first)]
                    .iter()
                    .filter(|p| p.0 < end && start < p.1)
                    .collect();
                if touched.len() < 2 {
                    continue;
                }
                let ranges: Vec<(usize, usize, usize)> = touched
                    .iter()
                    .map(|&&(a, b, leaf, offset)| (leaf, start.max(a) - a + offset, end.min(b) - a + offset))
                    .collect();
                let grown = ranges
                    .iter()
                    .any(|&(leaf, s0, e0)| leaves[leaf].findings.iter().any(|&(s, e, _)| s < e0 && s0 < e));
                if grown {
                    continue; // it grew out of a finding counted already
                }
                for (leaf, s, e) in ranges {
                    leaves[leaf].findings.push((s, e, kind));
                }
                kinds.push(kind);
            }
        }
        kinds
    }

    /// Find PII anywhere in `value`; with `redact`, also return it rewritten. At most
    /// `max_chars` of it are scanned: the rest is left as it is and the report says so.
    pub fn scan(&self, value: &Value, redact: bool) -> Report {
        let mut walk = Walk::new(self.max_chars);
        let skeleton = walk.value(value);
        let mut counts: BTreeMap<&'static str, u64> = BTreeMap::new();
        for leaf in &mut walk.leaves {
            leaf.findings = self.find(&leaf.text, true);
            for (_, _, kind) in &leaf.findings {
                *counts.entry(kind).or_default() += 1;
            }
        }
        for kind in self.seams(&mut walk.leaves) {
            *counts.entry(kind).or_default() += 1;
        }
        let value = (redact && !counts.is_empty()).then(|| skeleton.rebuilt(&walk.leaves));
        Report {
            counts,
            value,
            unscanned: walk.unscanned,
        }
    }
}

#[cfg(test)]
mod tests;
