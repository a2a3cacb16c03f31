//! Masking the header values in use (`mcp/scrub.py`): a server can echo the credential it
//! was sent into an error or a result, so every hint, every upstream `isError` result and
//! every listed tool passes through a [`Scrubber`] that replaces each value with `***` —
//! the value itself and each long token in it (`Bearer s3cr3t` → also `s3cr3t`), matched
//! case-insensitively, in the forms a server would echo: percent-encoded, JSON-escaped and
//! base64 (standard and URL-safe, at any alignment inside a longer base64 text). Pure.

use std::collections::BTreeSet;

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use regex::{Regex, RegexBuilder};
use serde_json::{Map, Value};

pub const MASK: &str = "***";
/// A value shorter than this is not masked (it would mask ordinary words).
const MIN_VALUE_CHARS: usize = 4;
/// A whitespace-separated part of a value is masked on its own from this length.
const MIN_TOKEN_CHARS: usize = 8;

/// The base64 text of `secret` wherever it starts inside a longer encoded text: for each of
/// the three alignments, only the characters that depend on `secret` alone.
fn base64_forms(secret: &[u8]) -> BTreeSet<String> {
    let mut forms = BTreeSet::new();
    for shift in 0..3usize {
        let mut shifted = vec![0u8; shift];
        shifted.extend_from_slice(secret);
        let encoded = STANDARD.encode(&shifted);
        let start = (shift * 4).div_ceil(3);
        let end = ((shift + secret.len()) / 3) * 4;
        if end > start && end - start >= MIN_TOKEN_CHARS {
            let core = &encoded[start..end];
            forms.insert(core.to_owned());
            forms.insert(core.replace('+', "-").replace('/', "_"));
        }
    }
    forms.insert(STANDARD.encode(secret));
    forms.insert(STANDARD_NO_PAD.encode(secret));
    forms.insert(URL_SAFE_NO_PAD.encode(secret));
    forms
}

/// Python's `urllib.parse.quote(text, safe="")` (and `quote_plus` when `plus`).
fn percent(text: &str, plus: bool) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-' | b'~' => out.push(byte as char),
            b' ' if plus => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// Every text form of one secret value that is masked.
pub fn forms_of(value: &str) -> BTreeSet<String> {
    let mut plain = BTreeSet::new();
    if value.trim().chars().count() >= MIN_VALUE_CHARS {
        plain.insert(value.trim().to_owned());
    }
    plain.extend(
        value
            .split_whitespace()
            .filter(|t| t.chars().count() >= MIN_TOKEN_CHARS)
            .map(str::to_owned),
    );
    let mut found = BTreeSet::new();
    for text in plain {
        found.insert(percent(&text, false));
        found.insert(percent(&text, true));
        let escaped = serde_json::to_string(&text).expect("a string encodes");
        found.insert(escaped[1..escaped.len() - 1].to_owned());
        let ascii = super::audit::ascii_line(&Value::String(text.clone()));
        found.insert(ascii.trim_end()[1..ascii.trim_end().len() - 1].to_owned());
        found.extend(base64_forms(text.as_bytes()));
        found.insert(text);
    }
    found.retain(|form| form.chars().count() >= MIN_VALUE_CHARS);
    found
}

/// Replaces every form of the given values with `***`.
#[derive(Default)]
pub struct Scrubber {
    pattern: Option<Regex>,
}

impl Scrubber {
    pub fn new<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        let mut forms: Vec<String> = values
            .into_iter()
            .flat_map(forms_of)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        forms.sort_by_key(|form| std::cmp::Reverse(form.len()));
        if forms.is_empty() {
            return Self::default();
        }
        let alternation: Vec<String> = forms.iter().map(|form| regex::escape(form)).collect();
        let pattern = RegexBuilder::new(&alternation.join("|"))
            .case_insensitive(true)
            .size_limit(64 << 20)
            .build()
            .ok();
        Self { pattern }
    }

    pub fn text(&self, text: &str) -> String {
        match &self.pattern {
            Some(pattern) if !text.is_empty() => pattern.replace_all(text, MASK).into_owned(),
            _ => text.to_owned(),
        }
    }

    /// `value` with every string in it masked (object keys too).
    pub fn json(&self, value: Value) -> Value {
        if self.pattern.is_none() {
            return value;
        }
        match value {
            Value::String(text) => Value::String(self.text(&text)),
            Value::Array(items) => Value::Array(items.into_iter().map(|item| self.json(item)).collect()),
            Value::Object(map) => Value::Object(
                map.into_iter()
                    .map(|(key, item)| (self.text(&key), self.json(item)))
                    .collect::<Map<String, Value>>(),
            ),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "Bearer ghp_R3alLooking0Token1234567890abcdefXYZ";

    #[test]
    fn a_value_is_masked_in_every_form_a_server_echoes() {
        let scrubber = Scrubber::new([TOKEN]);
        let bare = "ghp_R3alLooking0Token1234567890abcdefXYZ";
        assert_eq!(
            scrubber.text(&format!("the token {TOKEN} is bad")),
            "the token *** is bad"
        );
        assert_eq!(
            scrubber.text(&format!("token={}", bare.to_uppercase())),
            "token=***"
        );
        let echoed = STANDARD.encode(format!("Authorization: {TOKEN}"));
        let masked = scrubber.text(&format!("rejected {echoed}"));
        assert!(
            masked.contains(MASK) && !masked.contains(&echoed[24..]),
            "{masked}"
        );
        let json = scrubber.json(serde_json::json!({"a": [bare], bare: 1}));
        assert_eq!(json, serde_json::json!({"a": ["***"], "***": 1}));
    }

    #[test]
    fn short_values_are_left_alone_and_no_values_change_nothing() {
        assert_eq!(Scrubber::new(["abc"]).text("abc abc"), "abc abc");
        assert_eq!(Scrubber::new([]).text("x"), "x");
    }
}
