//! A JSON value as the PII scanner reads it (`bridge/pii_leaves.py`): its texts normalised,
//! walked into leaves, rebuilt.
//!
//! - **Normalising** (`normalise`): NFKC per character, digits of every script as ASCII,
//!   zero-width and format characters removed, dashes, dots and spaces of other scripts
//!   folded, so that a look-alike character cannot hide a value from the patterns; a finding
//!   in the normalised text is mapped back onto the original characters when redacted.
//! - **The walk** (`Walk`): every string, key and number (as its decimal text), and each
//!   base64 payload (a `blob`, an image's or audio's `data`) that decodes to text, becomes a
//!   `Leaf`, in order, until the budget is spent. Unlike the Python bridge, a payload key that
//!   holds no base64 is scanned as the text it is: the content decides, not the key's name.
//! - **Rebuilding** (`Skeleton::rebuilt`): the value again, each finding redacted
//!   (`[REDACTED:email]`; a redacted blob stays base64 in its alphabet).

use base64::Engine;
use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value};
use unicode_general_category::{GeneralCategory, get_general_category};
use unicode_normalization::UnicodeNormalization;

/// A base64 payload up to this many characters is decoded and scanned when it is text; a
/// larger one only when its `mimeType` says text.
pub const SMALL_BLOB_CHARS: usize = 64 * 1024;
const TEXT_TYPES: [&str; 4] = [
    "text/",
    "application/json",
    "application/xml",
    "application/x-yaml",
];

/// A finding: byte range in a leaf's normalised text, and its kind.
pub type Finding = (usize, usize, &'static str);

fn fold(c: char, out: &mut String) {
    match get_general_category(c) {
        GeneralCategory::Format => {}
        GeneralCategory::DecimalNumber => out.push(decimal(c)),
        GeneralCategory::DashPunctuation => out.push('-'),
        GeneralCategory::SpaceSeparator => out.push(' '),
        _ => match u32::from(c) {
            0x00B7 | 0x2027 | 0x3002 | 0x30FB | 0xFF61 | 0xFF65 => out.push('.'),
            0x2212 => out.push('-'),
            _ => out.push(c),
        },
    }
}

/// The ASCII digit of a decimal digit of any script: Unicode keeps each script's digits in
/// runs of ten from zero, so the value is the distance from the run's start, modulo ten.
fn decimal(c: char) -> char {
    if c.is_ascii_digit() {
        return c;
    }
    let mut start = u32::from(c);
    while start > 0
        && char::from_u32(start - 1)
            .is_some_and(|p| get_general_category(p) == GeneralCategory::DecimalNumber)
    {
        start -= 1;
    }
    let value = (u32::from(c) - start) % 10;
    char::from_digit(value, 10).unwrap_or('0')
}

/// One original character as the detectors read it.
fn folded(c: char, out: &mut String) {
    for n in std::iter::once(c).nfkc() {
        fold(n, out);
    }
}

/// `text` as the detectors read it; ASCII text is returned as it is.
pub fn normalise(text: &str) -> String {
    if text.is_ascii() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        folded(c, &mut out);
    }
    out
}

/// For each byte of `normalise(text)`, the byte range in `text` of the character it came
/// from (plus one entry past the end), to map a finding back onto the original.
fn origins(text: &str) -> Vec<(usize, usize)> {
    let mut origins = Vec::with_capacity(text.len() + 1);
    let mut piece = String::new();
    for (index, c) in text.char_indices() {
        piece.clear();
        folded(c, &mut piece);
        origins.extend(std::iter::repeat_n((index, index + c.len_utf8()), piece.len()));
    }
    origins.push((text.len(), text.len()));
    origins
}

/// A float that is not a whole number as Python's `repr` writes it: the shortest digits
/// that read back, in scientific notation below 1e-4 (whole ones are written as integers).
fn python_float(f: f64) -> String {
    if f != 0.0 && f.abs() < 1e-4 {
        let scientific = format!("{f:e}");
        if let Some((mantissa, exponent)) = scientific.split_once('e') {
            let exponent: i32 = exponent.parse().unwrap_or_default();
            let sign = if exponent < 0 { '-' } else { '+' };
            return format!("{mantissa}e{sign}{:02}", exponent.abs());
        }
    }
    format!("{f}")
}

pub fn redaction(kind: &str) -> String {
    format!("[REDACTED:{kind}]")
}

/// One scanned text of the value: a string, a key, a number's text or a decoded blob.
pub struct Leaf {
    pub original: String,
    /// `normalise(original)`.
    pub text: String,
    /// Whether it takes part in the seam scan (strings and keys; not numbers or blobs).
    pub seam: bool,
    /// A mapping key (the values-only seam chain leaves keys out).
    pub key: bool,
    /// What did not fit in the scan's budget: kept as it is, after `original`.
    pub rest: String,
    /// What was found in it, alone or at a seam (`text`'s byte offsets).
    pub findings: Vec<Finding>,
}

impl Leaf {
    pub fn redacted(&self) -> String {
        if self.findings.is_empty() {
            return format!("{}{}", self.original, self.rest);
        }
        let mapped = (self.text != self.original).then(|| origins(&self.original));
        let mut out = String::new();
        let mut position = 0;
        for (start, end, kind) in merged(&self.findings) {
            let (start, end) = match &mapped {
                Some(o) => (o[start].0, o[end.saturating_sub(1).max(start)].1),
                None => (start, end),
            };
            if start < position {
                continue;
            }
            out.push_str(&self.original[position..start]);
            out.push_str(&redaction(kind));
            position = end;
        }
        out.push_str(&self.original[position..]);
        out.push_str(&self.rest);
        out
    }
}

/// Findings sorted and without overlaps (the earlier one keeps an overlapping range).
fn merged(findings: &[Finding]) -> Vec<Finding> {
    let mut sorted = findings.to_vec();
    sorted.sort_unstable();
    let mut kept: Vec<Finding> = Vec::new();
    for finding in sorted {
        if let Some(last) = kept.last_mut()
            && finding.0 < last.1
        {
            last.1 = last.1.max(finding.1);
            continue;
        }
        kept.push(finding);
    }
    kept
}

/// Where each leaf sits in the value being rebuilt.
pub enum Skeleton {
    Kept(Value),
    Text(usize),
    Number(usize, Value),
    Blob(usize, bool),
    List(Vec<Skeleton>),
    Mapping(Vec<(Skeleton, Skeleton)>),
}

/// One scan: the leaves collected in order, under the budget (in characters).
pub struct Walk {
    pub leaves: Vec<Leaf>,
    remaining: usize,
    pub unscanned: bool,
}

impl Walk {
    pub fn new(budget: usize) -> Self {
        Self {
            leaves: Vec::new(),
            remaining: budget,
            unscanned: false,
        }
    }

    /// The index of a new leaf for `text`; `None` when the budget is spent. A string that
    /// does not fit is scanned in its first part (`partial`), the rest kept as is.
    fn take(&mut self, text: &str, seam: bool, key: bool, partial: bool) -> Option<usize> {
        let mut head = text;
        let mut rest = "";
        let chars = text.chars().count();
        if chars > self.remaining {
            self.unscanned = true;
            if !partial || self.remaining == 0 {
                self.remaining = 0;
                return None;
            }
            let cut = text
                .char_indices()
                .nth(self.remaining)
                .map_or(text.len(), |(i, _)| i);
            (head, rest) = text.split_at(cut);
            self.remaining = 0;
        } else {
            self.remaining -= chars;
        }
        self.leaves.push(Leaf {
            original: head.to_owned(),
            text: normalise(head),
            seam,
            key,
            rest: rest.to_owned(),
            findings: Vec::new(),
        });
        Some(self.leaves.len() - 1)
    }

    fn text(&mut self, text: &str, key: bool) -> Skeleton {
        match self.take(text, true, key, true) {
            Some(index) => Skeleton::Text(index),
            None => Skeleton::Kept(Value::String(text.to_owned())),
        }
    }

    fn number(&mut self, value: &Value) -> Skeleton {
        let shown = match (value.as_f64(), value.is_f64()) {
            (Some(f), true) if !f.is_finite() => return Skeleton::Kept(value.clone()),
            (Some(f), true) if f.fract() == 0.0 => format!("{f:.0}"),
            (Some(f), true) => python_float(f),
            _ => value.to_string(),
        };
        match self.take(&shown, false, false, false) {
            Some(index) => Skeleton::Number(index, value.clone()),
            None => Skeleton::Kept(value.clone()),
        }
    }

    /// A payload key's string: decoded and scanned when it is base64 of text; kept when it
    /// is base64 of binary (or too large to decode and not said to be text); scanned as the
    /// text it is when it is not base64 at all.
    fn blob(&mut self, encoded: &str, mime_type: Option<&Value>) -> Skeleton {
        let texty = mime_type
            .and_then(Value::as_str)
            .is_some_and(|m| TEXT_TYPES.iter().any(|t| m.starts_with(t)));
        if encoded.len() > SMALL_BLOB_CHARS && !texty && looks_base64(encoded) {
            return Skeleton::Kept(Value::String(encoded.to_owned()));
        }
        let Some((raw, url)) = decoded(encoded) else {
            return self.text(encoded, false);
        };
        let Some(text) = as_text(raw) else {
            // Binary: kept, unless spaces in it say it is words that only look like base64.
            if looks_base64(encoded) {
                return Skeleton::Kept(Value::String(encoded.to_owned()));
            }
            return self.text(encoded, false);
        };
        match self.take(&text, false, false, false) {
            Some(index) => Skeleton::Blob(index, url),
            None => Skeleton::Kept(Value::String(encoded.to_owned())),
        }
    }

    pub fn value(&mut self, value: &Value) -> Skeleton {
        match value {
            Value::String(text) => self.text(text, false),
            Value::Number(_) => self.number(value),
            Value::Array(items) => Skeleton::List(items.iter().map(|i| self.value(i)).collect()),
            Value::Object(map) => {
                let payload = match map.get("type").and_then(Value::as_str) {
                    Some("image" | "audio") => Some("data"),
                    _ => None,
                };
                let mut items = Vec::with_capacity(map.len());
                for (key, item) in map {
                    let new_key = self.text(key, true);
                    let slot = match item {
                        Value::String(s) if Some(key.as_str()) == payload || key == "blob" => {
                            self.blob(s, map.get("mimeType"))
                        }
                        _ => self.value(item),
                    };
                    items.push((new_key, slot));
                }
                Skeleton::Mapping(items)
            }
            other => Skeleton::Kept(other.clone()),
        }
    }
}

impl Skeleton {
    pub fn rebuilt(self, leaves: &[Leaf]) -> Value {
        match self {
            Skeleton::Kept(value) => value,
            Skeleton::Text(index) => Value::String(leaves[index].redacted()),
            Skeleton::Number(index, number) if leaves[index].findings.is_empty() => number,
            Skeleton::Number(index, _) => Value::String(leaves[index].redacted()),
            Skeleton::Blob(index, url) => Value::String(encoded(&leaves[index].redacted(), url)),
            Skeleton::List(items) => Value::Array(items.into_iter().map(|i| i.rebuilt(leaves)).collect()),
            Skeleton::Mapping(items) => {
                let mut result = Map::new();
                for (key, item) in items {
                    let mut new_key = match key.rebuilt(leaves) {
                        Value::String(key) => key,
                        other => other.to_string(),
                    };
                    while result.contains_key(&new_key) {
                        new_key.push('#'); // two keys redacted alike: keep both
                    }
                    result.insert(new_key, item.rebuilt(leaves));
                }
                Value::Object(result)
            }
        }
    }
}

/// Whether `encoded` is made of base64 (either alphabet), padding and line breaks only: a
/// payload with spaces or tabs that decodes to no text is words, and scanned as such.
fn looks_base64(encoded: &str) -> bool {
    encoded
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"+/-_=\r\n".contains(&b))
}

const LENIENT: GeneralPurposeConfig = GeneralPurposeConfig::new()
    .with_decode_padding_mode(DecodePaddingMode::Indifferent)
    .with_decode_allow_trailing_bits(true);
const STANDARD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, LENIENT);

/// Python's `str.isprintable()` for one character.
fn printable(c: char) -> bool {
    use GeneralCategory as G;
    c == ' '
        || !matches!(
            get_general_category(c),
            G::Control
                | G::Format
                | G::Surrogate
                | G::PrivateUse
                | G::Unassigned
                | G::LineSeparator
                | G::ParagraphSeparator
                | G::SpaceSeparator
        )
}

/// The bytes that `encoded` (standard or URL-safe base64, whitespace ignored, padding
/// optional) holds, and whether it used the URL-safe alphabet; `None` when it is not base64.
fn decoded(encoded: &str) -> Option<(Vec<u8>, bool)> {
    let compact: String = encoded.split_whitespace().collect();
    let url = compact.contains(['-', '_']);
    let body = compact.trim_end_matches('=');
    let added = (4 - compact.len() % 4) % 4;
    if compact.len() - body.len() + added > 2 {
        return None;
    }
    let body: String = if url {
        body.replace('-', "+").replace('_', "/")
    } else {
        body.to_owned()
    };
    Some((STANDARD.decode(body).ok()?, url))
}

/// `raw` as text: UTF-8, not empty, and at least 95% printable.
fn as_text(raw: Vec<u8>) -> Option<String> {
    let text = String::from_utf8(raw).ok()?;
    let total = text.chars().count();
    let shown = text
        .chars()
        .filter(|c| printable(*c) || "\t\n\r".contains(*c))
        .count();
    if text.is_empty() || (shown as f64) < total as f64 * 0.95 {
        return None;
    }
    Some(text)
}

/// The UTF-8 text that `encoded` (standard or URL-safe base64) holds, and whether it used the
/// URL-safe alphabet; `None` when it is not base64 or not text.
pub fn decoded_text(encoded: &str) -> Option<(String, bool)> {
    let (raw, url) = decoded(encoded)?;
    Some((as_text(raw)?, url))
}

fn encoded(text: &str, url: bool) -> String {
    if url {
        base64::engine::general_purpose::URL_SAFE.encode(text)
    } else {
        base64::engine::general_purpose::STANDARD.encode(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_python_writes_them() {
        assert_eq!(python_float(1.5), "1.5");
        assert_eq!(python_float(1e-5), "1e-05");
        assert_eq!(python_float(-1.234567e-6), "-1.234567e-06");
        let mut walk = Walk::new(100);
        walk.value(&serde_json::json!([4111111111111111.0, 7, 0.25]));
        let texts: Vec<&str> = walk.leaves.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, ["4111111111111111", "7", "0.25"]);
    }

    #[test]
    fn base64_is_read_as_python_reads_it() {
        assert_eq!(decoded_text("YQ"), Some(("a".to_owned(), false)));
        assert_eq!(decoded_text("YQ=="), Some(("a".to_owned(), false)));
        assert_eq!(decoded_text("YWJj===="), None, "too much padding");
        assert_eq!(decoded_text("YWJjZ"), None, "a length base64 never has");
        assert_eq!(decoded_text("aGk_Pz8-"), Some(("hi???>".to_owned(), true)));
        assert_eq!(decoded_text("AAECAw=="), None, "bytes, not text");
    }
}
