//! Exposed tool names and tool filters, the shared naming plan (`mcp/naming.py`): a
//! server's tool `search.docs` is `<prefix>_search_docs` to the agent, sanitised to
//! `[A-Za-z0-9_-]` and kept within 64 characters by a hash suffix; filters are `*`/`?` globs
//! on the original name, layer after layer. Pure.

use sha2::{Digest, Sha256};

use super::config::FilterLayer;
use crate::hosts::glob;

/// Exposed names stay within this length (several LLM APIs reject longer tool names).
pub const MAX_EXPOSED_NAME_CHARS: usize = 64;
/// Hex digits of `sha256(original)` that shorten an exposed name.
const HASH_CHARS: usize = 8;

/// Whether `name` is a valid MCP tool name: 1 to 128 characters of `[A-Za-z0-9_.-]`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `<prefix>_<original>` (the original alone for the empty prefix), every character outside
/// `[A-Za-z0-9_-]` made `_`; a longer result keeps its first 55 characters, `_` and the
/// first 8 hex digits of `sha256(original)`.
pub fn exposed_name(prefix: &str, original: &str) -> String {
    let joined = if prefix.is_empty() {
        original.to_owned()
    } else {
        format!("{prefix}_{original}")
    };
    let sanitised: String = joined
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if sanitised.len() <= MAX_EXPOSED_NAME_CHARS {
        return sanitised;
    }
    let digest = hex(&Sha256::digest(original.as_bytes()));
    let keep = MAX_EXPOSED_NAME_CHARS - 1 - HASH_CHARS;
    format!("{}_{}", &sanitised[..keep], &digest[..HASH_CHARS])
}

/// Whether `name` matches any of the globs (`*` any run, `?` one character; case-sensitive).
pub fn matches(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|pattern| glob(pattern, name))
}

/// Whether a tool passes every layer: its allow globs (empty: every tool), then its deny globs.
pub fn tool_allowed(layers: &[FilterLayer], original: &str) -> bool {
    layers.iter().all(|layer| {
        (layer.allow.is_empty() || matches(&layer.allow, original)) && !matches(&layer.deny, original)
    })
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(allow: &[&str], deny: &[&str]) -> FilterLayer {
        FilterLayer {
            allow: allow.iter().map(|s| (*s).to_owned()).collect(),
            deny: deny.iter().map(|s| (*s).to_owned()).collect(),
            ..FilterLayer::default()
        }
    }

    #[test]
    fn names_are_prefixed_and_sanitised() {
        assert_eq!(exposed_name("github", "search.docs"), "github_search_docs");
        assert_eq!(exposed_name("ev", "get-env"), "ev_get-env");
        assert_eq!(exposed_name("", "echo"), "echo");
    }

    #[test]
    fn a_long_name_is_cut_with_the_hash_of_the_original() {
        let original = "a".repeat(80);
        let name = exposed_name("p", &original);
        assert_eq!(name.len(), 64);
        let digest = hex(&Sha256::digest(original.as_bytes()));
        assert!(name.ends_with(&format!("_{}", &digest[..8])));
        assert!(name.starts_with("p_aaa"));
    }

    #[test]
    fn every_layer_must_allow_and_none_deny() {
        let layers = [layer(&["get-*", "echo"], &[]), layer(&[], &["get-env"])];
        assert!(tool_allowed(&layers, "echo") && tool_allowed(&layers, "get-sum"));
        assert!(!tool_allowed(&layers, "get-env") && !tool_allowed(&layers, "add"));
        assert!(tool_allowed(&[], "anything"));
    }

    #[test]
    fn tool_names_are_checked() {
        assert!(valid_tool_name("a.b-c_d") && !valid_tool_name("") && !valid_tool_name("a b"));
        assert!(!valid_tool_name(&"x".repeat(129)));
    }
}
