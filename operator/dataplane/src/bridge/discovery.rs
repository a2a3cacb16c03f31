//! Progressive discovery (`discovery: search`, `bridge/discovery.py`): two tools instead of
//! the whole catalog. In `search` mode the agent's `tools/list` holds the bridge's own two
//! tools: `search_tools` ranks the run's catalog (what `tools/list` would show in `full`
//! mode: the tools the policies hide stay hidden) by a query over names, titles and
//! descriptions and returns each hit with its schema; `call_tool` calls a tool by name
//! through the one call pipeline (every check, rule, hook and audit line, under the real
//! tool's name). This module owns the two definitions, the ranking and the routing of a
//! `tools/call` in `search` mode; the pipeline and the front ask it.

use std::sync::LazyLock;

use serde_json::{Map, Value, json};

use super::core::Core;

pub const SEARCH_TOOL: &str = "search_tools";
pub const CALL_TOOL: &str = "call_tool";
pub const DEFAULT_HITS: i64 = 5;
pub const MAX_HITS: i64 = 20;
/// A query is read up to this many characters.
const MAX_QUERY_CHARS: usize = 512;
/// How much a query word found in each field counts.
const WEIGHTS: [(Field, f64); 3] = [(Field::Name, 3.0), (Field::Title, 2.0), (Field::Description, 1.0)];

/// The `tools/list` of a run in `search` mode.
pub static TOOLS: LazyLock<Value> = LazyLock::new(|| {
    json!([
        {
            "name": SEARCH_TOOL,
            "title": "Search tools",
            "description": "Finds the tools this agent may call: give a few words of what you want to do; \
                            returns the best matches with their input schemas. Call one with call_tool.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 512},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_HITS},
                },
                "required": ["query"],
                "additionalProperties": false,
            },
            "annotations": {"readOnlyHint": true},
        },
        {
            "name": CALL_TOOL,
            "title": "Call a tool",
            "description": "Calls a tool that search_tools found, by its name, with its arguments.",
            "inputSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
                "required": ["name"],
                "additionalProperties": false,
            },
        },
    ])
});

#[derive(Clone, Copy)]
enum Field {
    Name,
    Title,
    Description,
}

/// What a `tools/call` in `search` mode becomes.
pub enum Route {
    /// Not one of the bridge's two tools (or `full` mode): the call as sent.
    Direct,
    /// `search_tools`: its `CallToolResult`, answered from the catalog.
    Answer(Value),
    /// `call_tool`: the call of the named tool, through the pipeline like any call.
    Call(Map<String, Value>),
}

impl Core {
    /// The agent's `tools/list` result: the bridge's two tools in `search` mode, else the
    /// catalog's tools.
    pub fn listing(&self) -> Value {
        if self.config.discovery == "search" {
            json!({"tools": *TOOLS})
        } else {
            json!({"tools": self.catalog().tools()})
        }
    }

    /// Where a `tools/call` (params an object, its name a string) goes.
    pub fn route(&self, params: &Map<String, Value>) -> Route {
        if self.config.discovery != "search" {
            return Route::Direct;
        }
        match params.get("name").and_then(Value::as_str) {
            Some(SEARCH_TOOL) => {
                Route::Answer(search_result(&self.catalog().tools(), params.get("arguments")))
            }
            Some(CALL_TOOL) => Route::Call(by_name(params.get("arguments"))),
            _ => Route::Direct,
        }
    }
}

/// The call `call_tool`'s arguments name: its name (a string, else "": not in the catalog)
/// and its arguments.
pub fn by_name(arguments: Option<&Value>) -> Map<String, Value> {
    let inner = arguments.and_then(Value::as_object);
    let name = inner
        .and_then(|i| i.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut params = Map::new();
    params.insert("name".into(), Value::String(name.to_owned()));
    params.insert(
        "arguments".into(),
        inner
            .and_then(|i| i.get("arguments"))
            .cloned()
            .unwrap_or(Value::Null),
    );
    params
}

/// The lower-cased ASCII words (`[a-z0-9]+`) of a string; none of any other value.
fn words(text: Option<&Value>) -> Vec<String> {
    let Some(text) = text.and_then(Value::as_str) else {
        return Vec::new();
    };
    text.to_lowercase()
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether a value counts as given (Python's truthiness).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// A tool's title: its own, else its annotations'.
fn title(tool: &Value) -> Option<&Value> {
    let fallback = tool.get("annotations").and_then(|a| a.get("title"));
    tool.get("title").filter(|t| truthy(t)).or(fallback)
}

fn name(tool: &Value) -> String {
    match tool.get("name") {
        Some(Value::String(name)) => name.clone(),
        None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// How well `tool` matches the query words: per word, the weight of each field that holds
/// it (a prefix of a field's word counts half), so a word in the name weighs most.
pub fn score(tool: &Value, query: &[String]) -> f64 {
    let spaced = Value::String(name(tool).replace(['_', '-'], " "));
    let name_words = words(Some(&spaced));
    let title_words = words(title(tool));
    let description_words = words(tool.get("description"));
    let mut total = 0.0;
    for word in query {
        for (field, weight) in WEIGHTS {
            let found = match field {
                Field::Name => &name_words,
                Field::Title => &title_words,
                Field::Description => &description_words,
            };
            if found.contains(word) {
                total += weight;
            } else if found.iter().any(|candidate| candidate.starts_with(word.as_str())) {
                total += weight / 2.0;
            }
        }
    }
    total
}

/// The best `limit` tools of `listing` for `query`, best first (ties by name), each as
/// `{name, inputSchema, title, description}`; tools that match no word are left out.
pub fn search(listing: &[Value], query: &str, limit: i64) -> Vec<Value> {
    let query = words(Some(&Value::String(query.to_owned())));
    let mut ranked: Vec<(f64, String, &Value)> = listing
        .iter()
        .map(|tool| (score(tool, &query), name(tool), tool))
        .collect();
    ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let keep = usize::try_from(limit.clamp(1, MAX_HITS)).unwrap_or(1);
    ranked
        .into_iter()
        .take(keep)
        .take_while(|(points, _, _)| *points > 0.0)
        .map(|(_, name, tool)| {
            let mut hit = Map::new();
            hit.insert("name".into(), Value::String(name));
            hit.insert(
                "inputSchema".into(),
                tool.get("inputSchema").cloned().unwrap_or(Value::Null),
            );
            for (key, value) in [("title", title(tool)), ("description", tool.get("description"))] {
                if let Some(value) = value.filter(|v| truthy(v)) {
                    hit.insert(key.into(), value.clone());
                }
            }
            Value::Object(hit)
        })
        .collect()
}

/// The `CallToolResult` of a `search_tools` call.
pub fn search_result(listing: &[Value], arguments: Option<&Value>) -> Value {
    let arguments = arguments.and_then(Value::as_object);
    let query = arguments.and_then(|a| a.get("query")).and_then(Value::as_str);
    let limit = match arguments.and_then(|a| a.get("limit")) {
        None => Some(DEFAULT_HITS),
        // An integer however large (a bigger one asks for the most); a boolean is 1 or 0
        // (the Python bridge's `int`).
        Some(Value::Bool(one)) => Some(i64::from(*one)),
        Some(limit) => limit.as_i64().or_else(|| limit.as_u64().map(|_| i64::MAX)),
    };
    let (Some(query), Some(limit)) = (query.filter(|q| !q.trim().is_empty()), limit) else {
        let hint = "search_tools needs a query: a few words of what you want to do.";
        return json!({
            "content": [{"type": "text", "text": format!("invalid_arguments: {hint}")}],
            "structuredContent": {"code": "invalid_arguments", "hint": hint},
            "isError": true,
        });
    };
    let query: String = query.chars().take(MAX_QUERY_CHARS).collect();
    let hits = search(listing, &query, limit);
    let names: Vec<&str> = hits.iter().filter_map(|h| h["name"].as_str()).collect();
    let names = if names.is_empty() {
        "no tool matched; try other words".to_owned()
    } else {
        names.join(", ")
    };
    json!({
        "content": [{"type": "text", "text": format!("Found: {names}.")}],
        "structuredContent": {"tools": hits},
        "isError": false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing() -> Vec<Value> {
        vec![
            json!({"name": "docs_search_docs", "description": "Search the docs.", "inputSchema": {}}),
            json!({"name": "git_log", "title": "Search history", "inputSchema": {}}),
            json!({"name": "mail_send", "description": "Sends mail; can search contacts.", "inputSchema": {}}),
            json!({"name": "time_now", "description": "The time.", "inputSchema": {"type": "object"}}),
        ]
    }

    fn names(hits: &[Value]) -> Vec<&str> {
        hits.iter().map(|h| h["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn search_ranks_names_over_titles_over_descriptions_and_drops_non_matches() {
        let listing = listing();
        let hits = search(&listing, "search", 10);
        assert_eq!(names(&hits), ["docs_search_docs", "git_log", "mail_send"]);
        assert_eq!(hits[1]["title"], "Search history");
        assert!(hits[0].get("inputSchema").is_some());
        assert_eq!(names(&search(&listing, "tim", 10)), ["time_now"]); // a prefix counts
        assert_eq!(search(&listing, "search", 1), hits[..1]);
        let bad = search_result(&listing, Some(&json!({"limit": 2})));
        assert_eq!(bad["isError"], true);
        assert_eq!(bad["structuredContent"]["code"], "invalid_arguments");
    }

    #[test]
    fn scores_weigh_each_field_and_a_prefix_half() {
        let tool = json!({"name": "ops_get-time", "annotations": {"title": "Clock"},
                          "description": "Tells the time of day."});
        let query = |q: &str| words(Some(&Value::String(q.into())));
        assert_eq!(score(&tool, &query("time")), 3.0 + 1.0);
        assert_eq!(score(&tool, &query("clo")), 1.0); // the annotations' title, a prefix
        assert_eq!(score(&tool, &query("GET day")), 3.0 + 1.0);
        assert_eq!(score(&tool, &query("nothing")), 0.0);
    }

    #[test]
    fn ties_go_by_name_and_the_limit_is_held_between_one_and_twenty() {
        let many: Vec<Value> = (0..30)
            .rev()
            .map(|i| json!({"name": format!("t{i:02}_echo"), "inputSchema": {}}))
            .collect();
        let hits = search(&many, "echo", 100);
        assert_eq!(hits.len(), 20);
        assert_eq!(hits[0]["name"], "t00_echo");
        assert_eq!(search(&many, "echo", 0).len(), 1);
        assert_eq!(search(&many, "echo", -4).len(), 1);
        let huge = search_result(&many, Some(&json!({"query": "echo", "limit": u64::MAX})));
        assert_eq!(huge["structuredContent"]["tools"].as_array().unwrap().len(), 20);
        let one = search_result(&many, Some(&json!({"query": "echo", "limit": true})));
        assert_eq!(one["structuredContent"]["tools"].as_array().unwrap().len(), 1);
        let default = search_result(&many, Some(&json!({"query": "echo"})));
        assert_eq!(default["structuredContent"]["tools"].as_array().unwrap().len(), 5);
    }

    #[test]
    fn a_result_names_its_hits_and_a_bad_query_or_limit_is_refused() {
        let listing = listing();
        let found = search_result(&listing, Some(&json!({"query": "time"})));
        assert_eq!(found["content"][0]["text"], "Found: time_now.");
        assert_eq!(found["isError"], false);
        let none = search_result(&listing, Some(&json!({"query": "zebra"})));
        assert_eq!(
            none["content"][0]["text"],
            "Found: no tool matched; try other words."
        );
        assert_eq!(none["structuredContent"]["tools"], json!([]));
        for bad in [
            json!({"query": "  "}),
            json!({"query": 3}),
            json!({"query": "x", "limit": 2.5}),
            json!("x"),
        ] {
            let refused = search_result(&listing, Some(&bad));
            assert_eq!(refused["structuredContent"]["code"], "invalid_arguments", "{bad}");
        }
        assert_eq!(search_result(&listing, None)["isError"], true);
        let long = format!("{} time", "x".repeat(600));
        let cut = search_result(&listing, Some(&json!({"query": long})));
        assert_eq!(cut["structuredContent"]["tools"], json!([])); // the query is read to 512
    }

    #[test]
    fn a_call_by_name_is_the_named_call_and_a_name_not_a_string_names_no_tool() {
        let call = by_name(Some(&json!({"name": "ops_echo", "arguments": {"message": "hi"}})));
        assert_eq!(
            Value::Object(call),
            json!({"name": "ops_echo", "arguments": {"message": "hi"}})
        );
        let nameless = by_name(Some(&json!({"name": 7})));
        assert_eq!(Value::Object(nameless), json!({"name": "", "arguments": null}));
        assert_eq!(by_name(Some(&json!("ops_echo")))["name"], "");
        assert_eq!(by_name(None)["name"], "");
    }

    #[test]
    fn the_two_tools_are_the_python_bridges() {
        let tools = TOOLS.as_array().unwrap();
        assert_eq!(names(tools), [SEARCH_TOOL, CALL_TOOL]);
        assert_eq!(tools[0]["inputSchema"]["properties"]["limit"]["maximum"], 20);
        assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
        assert_eq!(tools[1]["inputSchema"]["required"], json!(["name"]));
    }
}
