//! The prompt catalog (`bridge/prompts.py`): exposed name → server and original name, by
//! the same naming plan as tools (`<prefix>_<prompt>`), through each layer's
//! `promptsAllow`/`promptsDeny`; a prompt whose name is not a valid tool name is left out;
//! a name two servers want goes to the first in the run's order. Pure.

use std::collections::BTreeMap;

use serde_json::Value;

use super::config::{FilterLayer, Server};
use super::naming::{exposed_name, matches, valid_tool_name};

pub struct PromptEntry {
    pub server: usize,
    pub original: String,
    /// The prompt as `prompts/list` shows it.
    pub prompt: Value,
}

#[derive(Default)]
pub struct PromptCatalog {
    pub entries: BTreeMap<String, PromptEntry>,
}

/// Whether a prompt passes every layer's prompt filters.
pub fn prompt_allowed(layers: &[FilterLayer], original: &str) -> bool {
    layers.iter().all(|layer| {
        (layer.prompts_allow.is_empty() || matches(&layer.prompts_allow, original))
            && !matches(&layer.prompts_deny, original)
    })
}

/// Whether a resource or template (by its original URI) passes every layer's resource
/// filters.
pub fn resource_allowed(layers: &[FilterLayer], original: &str) -> bool {
    layers.iter().all(|layer| {
        (layer.resources_allow.is_empty() || matches(&layer.resources_allow, original))
            && !matches(&layer.resources_deny, original)
    })
}

impl PromptCatalog {
    pub fn build(servers: &[Server], listings: &[Option<Vec<Value>>]) -> Self {
        let mut entries = BTreeMap::new();
        for (index, (server, listing)) in servers.iter().zip(listings).enumerate() {
            let Some(listing) = listing else { continue };
            let mut prompts: Vec<(&str, &Value)> = listing
                .iter()
                .filter_map(|prompt| Some((prompt.get("name")?.as_str()?, prompt)))
                .filter(|(name, _)| valid_tool_name(name) && prompt_allowed(&server.filters, name))
                .collect();
            prompts.sort_by(|a, b| a.0.cmp(b.0));
            prompts.dedup_by(|a, b| a.0 == b.0);
            for (original, prompt) in prompts {
                let exposed = exposed_name(&server.prefix, original);
                if entries.contains_key(&exposed) {
                    tracing::warn!(
                        "The prompt {original} of {} is not exposed: {exposed} is taken",
                        server.key()
                    );
                    continue;
                }
                let mut shown = prompt.clone();
                shown["name"] = Value::from(exposed.clone());
                entries.insert(
                    exposed,
                    PromptEntry {
                        server: index,
                        original: original.to_owned(),
                        prompt: shown,
                    },
                );
            }
        }
        Self { entries }
    }

    pub fn listing(&self) -> Vec<Value> {
        self.entries.values().map(|e| e.prompt.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompts_are_named_like_tools_and_filtered_on_their_own() {
        let server: Server = serde_norway::from_str(
            "{name: everything, namespace: default, url: 'http://x/', prefix: ev, filters: [{allow: [echo], promptsDeny: [secret]}]}",
        )
        .unwrap();
        let listing = Some(vec![
            json!({"name": "simple-prompt"}),
            json!({"name": "secret"}),
            json!({"name": "bad name"}),
        ]);
        let catalog = PromptCatalog::build(&[server], &[listing]);
        assert_eq!(catalog.entries.keys().collect::<Vec<_>>(), ["ev_simple-prompt"]);
        assert_eq!(catalog.listing()[0]["name"], "ev_simple-prompt");
    }
}
