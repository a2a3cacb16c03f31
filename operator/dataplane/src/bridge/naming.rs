//! Exposed tool names and tool filters, the shared naming plan (`mcp/naming.py`): a
//! server's tool `search.docs` is `<prefix>_search_docs` to the agent, sanitised to
//! `[A-Za-z0-9_-]` and kept within 64 characters by a hash suffix; filters are `*`/`?` globs
//! on the original name, layer after layer. Two tools that want one exposed name never share
//! or swap it (`plan`): the incumbent (a tool exposed before) keeps it, else the first by
//! original name, and the other is left out. Pure.

use std::collections::{BTreeMap, BTreeSet};

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

/// A tool left out because another tool of its server has its exposed name.
#[derive(Debug, PartialEq, Eq)]
pub struct Refused {
    pub original: String,
    /// The exposed name it maps to.
    pub wanted: String,
    /// The original name of the tool that has `wanted`.
    pub holder: String,
}

/// The names of one server's tools (`naming.plan`): `layer`'s allow (empty: all), then its
/// deny, then exposed names; invalid names and a name listed again are left out. Of two
/// tools that map to one exposed name, the one in `incumbents` (exposed before) keeps it,
/// else the first by original name; the other is refused. Exposed name → the tool as given.
pub fn plan<'a, T>(
    tools: Vec<(&'a str, T)>,
    prefix: &str,
    layer: &FilterLayer,
    incumbents: &BTreeSet<&str>,
) -> (BTreeMap<String, (&'a str, T)>, Vec<Refused>) {
    let mut wanted: Vec<(&str, T)> = tools
        .into_iter()
        .filter(|(name, _)| tool_allowed(std::slice::from_ref(layer), name))
        .collect();
    // Incumbents first, then by original name; stable: of a name listed twice, the first.
    wanted.sort_by_key(|(name, _)| (!incumbents.contains(name), *name));
    let mut exposed: BTreeMap<String, (&str, T)> = BTreeMap::new();
    let mut kept = BTreeSet::new();
    let mut refused = Vec::new();
    for (name, tool) in wanted {
        if !valid_tool_name(name) || !kept.insert(name) {
            continue;
        }
        let wanted = exposed_name(prefix, name);
        match exposed.get(&wanted) {
            Some((holder, _)) => refused.push(Refused {
                original: name.to_owned(),
                holder: (*holder).to_owned(),
                wanted,
            }),
            None => {
                exposed.insert(wanted, (name, tool));
            }
        }
    }
    refused.sort_by(|a, b| a.original.cmp(&b.original));
    (exposed, refused)
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

    fn planned(tools: &[&str], incumbents: &[&str]) -> (Vec<(String, String)>, Vec<Refused>) {
        let listed = tools.iter().map(|t| (*t, ())).collect();
        let held = incumbents.iter().copied().collect();
        let (exposed, refused) = plan(listed, "docs", &layer(&[], &["secret*"]), &held);
        let exposed = exposed
            .into_iter()
            .map(|(e, (o, ()))| (e, o.to_owned()))
            .collect();
        (exposed, refused)
    }

    #[test]
    fn an_incumbent_keeps_its_name_against_a_newcomer_else_the_first_by_original_name() {
        let pair = (
            "docs_search_docs".to_owned(),
            "search.docs".to_owned(),
            "search_docs".to_owned(),
        );
        // Nobody held it: the first by original name ("." sorts before "_").
        let (exposed, refused) = planned(&["search_docs", "search.docs", "secret_x"], &[]);
        assert_eq!(exposed, [(pair.0.clone(), pair.1.clone())]);
        assert_eq!(
            refused,
            [Refused {
                original: pair.2.clone(),
                wanted: pair.0.clone(),
                holder: pair.1.clone()
            }]
        );
        // search_docs was exposed before: the newcomer search.docs is left out.
        let (exposed, refused) = planned(&["search.docs", "search_docs"], &["search_docs"]);
        assert_eq!(exposed, [(pair.0.clone(), pair.2.clone())]);
        assert_eq!(refused[0].original, "search.docs");
        // A name listed twice and an invalid one are left out without a collision.
        let (exposed, refused) = planned(&["a", "a", "b c"], &[]);
        assert_eq!(exposed, [("docs_a".to_owned(), "a".to_owned())]);
        assert!(refused.is_empty());
    }

    #[test]
    fn tool_names_are_checked() {
        assert!(valid_tool_name("a.b-c_d") && !valid_tool_name("") && !valid_tool_name("a b"));
        assert!(!valid_tool_name(&"x".repeat(129)));
    }
}
