//! What the bridge serves beyond tools in this slice (`bridge/aggregate.py`): `prompts/list`
//! from the prompt catalog (one page) and `prompts/get` by exposed name; `resources/list` and
//! `resources/templates/list` walked across the servers that offer resources in the run's
//! order (whole upstream pages in a page of ours, the next server's while the page holds
//! fewer than 100 items, none after a server's own cursor) under the bridge's signed cursor;
//! `resources/read` routed by exposed URI, the contents' URIs rewritten; `completion/complete`
//! routed by its `ref` (a prompt's exposed name, a template's exposed URI). A filtered prompt or
//! resource answers as if it did not exist (`-32602`); a method of a feature no server has
//! is `-32601`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::core::Core;
use super::cursor::Position;
use super::prompts::resource_allowed;
use super::relay::Relay;
use super::upstream::Failure;
use super::uris::{exposed_uri, original_uri};
use crate::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND};

/// The methods answered here.
pub const METHODS: [&str; 6] = [
    "completion/complete",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// A page of ours takes the next server's first page while it holds fewer items than this.
const PAGE_ITEMS: usize = 100;
/// Deadline of one upstream request of these methods.
const REQUEST_SECONDS: Duration = Duration::from_secs(30);

/// Why one of these requests is refused: the JSON-RPC error's code, message and data.
struct Refusal {
    code: i64,
    text: String,
    data: Option<Value>,
}

fn refusal(code: i64, text: String) -> Refusal {
    Refusal {
        code,
        text,
        data: None,
    }
}

/// Invalid params naming the URI, in the message and in `data.uri` (SEP-2164; cut: the agent
/// chose it).
fn not_found(uri: &str) -> Refusal {
    let shown: String = uri.chars().take(200).collect();
    Refusal {
        code: INVALID_PARAMS,
        text: format!("Resource not found: {shown}"),
        data: Some(json!({"uri": shown})),
    }
}

/// The JSON-RPC response to one of [`METHODS`].
/// `relay`: the agent's call, for the requests during which a server may ask it something
/// (`prompts/get`, `resources/read`).
pub async fn answer(
    core: &Core,
    id: &Value,
    method: &str,
    params: Option<&Value>,
    relay: Option<&Arc<Relay>>,
) -> Value {
    let feature = match method {
        "completion/complete" => "completions",
        other => other.split('/').next().unwrap_or_default(),
    };
    if core.capabilities().get(feature).is_none() {
        let text = format!("Method not found: {method} (no server of this run offers {feature})");
        return jsonrpc::error_response(Some(id), METHOD_NOT_FOUND, &text);
    }
    let empty = Map::new();
    let params = match params {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(params)) => params,
        Some(_) => return jsonrpc::error_response(Some(id), INVALID_PARAMS, "Invalid params: not an object"),
    };
    let answered = match method {
        "prompts/list" => prompts_list(core, params),
        "prompts/get" => prompts_get(core, params, relay).await,
        "resources/read" => read(core, params, relay).await,
        "completion/complete" => complete(core, params).await,
        _ => listing(core, method, params).await,
    };
    match answered {
        Ok(result) => jsonrpc::result_response(id, result),
        Err(Refusal { code, text, data }) => {
            let mut response = jsonrpc::error_response(Some(id), code, &text);
            if let Some(data) = data {
                response["error"]["data"] = data;
            }
            response
        }
    }
}

fn prompts_list(core: &Core, params: &Map<String, Value>) -> Result<Value, Refusal> {
    if params.get("cursor").is_some_and(|c| !c.is_null()) {
        return Err(refusal(
            INVALID_PARAMS,
            "Invalid params: unknown cursor".to_owned(),
        ));
    }
    Ok(json!({"prompts": core.prompts().listing()}))
}

async fn prompts_get(
    core: &Core,
    params: &Map<String, Value>,
    relay: Option<&Arc<Relay>>,
) -> Result<Value, Refusal> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or_default();
    let catalog = core.prompts();
    let Some(entry) = catalog.entries.get(name) else {
        let shown: String = name.chars().take(80).collect();
        return Err(refusal(INVALID_PARAMS, format!("Unknown prompt: '{shown}'")));
    };
    let mut sent = params.clone();
    sent.insert("name".into(), json!(entry.original));
    forward(core, entry.server, "prompts/get", sent, relay).await
}

/// A request of these methods at one server: its result without the era's stamp, or the
/// server's JSON-RPC error (code kept), or -32603 naming the server.
async fn forward(
    core: &Core,
    index: usize,
    method: &str,
    mut params: Map<String, Value>,
    relay: Option<&Arc<Relay>>,
) -> Result<Value, Refusal> {
    let key = core.config.servers[index].key();
    let Some(upstream) = &core.upstreams[index] else {
        return Err(refusal(
            INTERNAL_ERROR,
            format!("Server {key} cannot be called as configured"),
        ));
    };
    crate::era::strip_envelope(&mut params);
    let answered = match relay {
        Some(relay) => {
            upstream
                .call_relayed(method, params, REQUEST_SECONDS, relay)
                .await
        }
        None => upstream.request(method, params, REQUEST_SECONDS).await,
    };
    match answered {
        Ok(result) => Ok(plain_result(result)),
        Err(Failure::Rpc { code, message, data }) => Err(Refusal {
            code,
            text: core.scrubber.text(&message),
            data: data.map(|data| core.scrubber.json(data)),
        }),
        Err(failure) => Err(refusal(
            INTERNAL_ERROR,
            format!(
                "Server {key} could not answer {method}: {}",
                core.scrubber.text(&failure.describe())
            ),
        )),
    }
}

/// An upstream's result without what a 2026-07-28 server stamps on it for its caller.
pub fn plain_result(mut result: Value) -> Value {
    if let Some(object) = result.as_object_mut() {
        if object.get("resultType").and_then(Value::as_str) == Some("complete") {
            object.remove("resultType");
        }
        if let Some(Value::Object(meta)) = object.get_mut("_meta") {
            meta.remove(crate::era::SERVER_INFO_META_KEY);
            if meta.is_empty() {
                object.remove("_meta");
            }
        }
    }
    result
}

/// The servers offering resources, in the run's order, that can be called.
fn resource_servers(core: &Core) -> Vec<usize> {
    core.states()
        .iter()
        .enumerate()
        .filter(|(i, s)| core.upstreams[*i].is_some() && s.capabilities.get("resources").is_some())
        .map(|(i, _)| i)
        .collect()
}

/// The server an exposed URI (or template) belongs to and its own URI: a prefixed server
/// whose namespace it carries first, in the run's order, then the first unprefixed server;
/// None when none has it or the filters hide it.
pub(super) fn route(core: &Core, uri: &str) -> Option<(usize, String)> {
    let servers = resource_servers(core);
    let all = &core.config.servers;
    let found = servers
        .iter()
        .filter(|i| !all[**i].prefix.is_empty())
        .find_map(|i| original_uri(&all[*i].prefix, uri).map(|o| (*i, o)))
        .or_else(|| {
            servers
                .iter()
                .find(|i| all[**i].prefix.is_empty())
                .map(|i| (*i, uri.to_owned()))
        })?;
    resource_allowed(&all[found.0].filters, &found.1).then_some(found)
}

/// The exposed URI of a server's URI, when it routes back to that server and passes the
/// filters (else the item is not shown).
fn exposed(core: &Core, index: usize, uri: &str) -> Option<String> {
    let server = &core.config.servers[index];
    if !resource_allowed(&server.filters, uri) {
        return None;
    }
    let shown = exposed_uri(&server.prefix, uri);
    (route(core, &shown)?.0 == index).then_some(shown)
}

async fn listing(core: &Core, method: &str, params: &Map<String, Value>) -> Result<Value, Refusal> {
    let (key, field) = if method == "resources/list" {
        ("resources", "uri")
    } else {
        ("resourceTemplates", "uriTemplate")
    };
    let servers = resource_servers(core);
    let keys: Vec<String> = servers.iter().map(|i| core.config.servers[*i].key()).collect();
    let position = match params.get("cursor").filter(|c| !c.is_null()) {
        None => match keys.first() {
            Some(first) => Position {
                server: first.clone(),
                cursor: None,
            },
            None => return Ok(json!({key: []})),
        },
        Some(cursor) => core
            .cursors
            .decode(method, cursor)
            .map_err(|why| refusal(INVALID_PARAMS, format!("Invalid params: {why}")))?,
    };
    let Some(mut at) = keys.iter().position(|k| *k == position.server) else {
        return Err(refusal(
            INVALID_PARAMS,
            "Invalid params: the cursor's server is gone".to_owned(),
        ));
    };
    let mut cursor = position.cursor;
    let mut items = Vec::new();
    let next = loop {
        let index = servers[at];
        let mut sent = Map::new();
        if let Some(cursor) = cursor.take() {
            sent.insert("cursor".into(), json!(cursor));
        }
        let page = match forward(core, index, method, sent, None).await {
            Ok(page) => page,
            Err(Refusal { text: why, .. }) => {
                tracing::warn!("Left server {} out of {method}: {why}", keys[at]);
                json!({})
            }
        };
        for item in page.get(key).and_then(Value::as_array).into_iter().flatten() {
            let Some(uri) = item.get(field).and_then(Value::as_str) else {
                continue;
            };
            if let Some(shown) = exposed(core, index, uri) {
                let mut item = item.clone();
                item[field] = json!(shown);
                items.push(item);
            }
        }
        let next = match page.get("nextCursor").and_then(Value::as_str) {
            Some(following) => Some(Position {
                server: keys[at].clone(),
                cursor: Some(following.to_owned()),
            }),
            None => keys.get(at + 1).map(|server| Position {
                server: server.clone(),
                cursor: None,
            }),
        };
        match next {
            Some(ref position) if position.server != keys[at] && items.len() < PAGE_ITEMS => at += 1,
            _ => break next,
        }
    };
    let mut result = json!({key: items});
    if let Some(next) = next {
        result["nextCursor"] = json!(core.cursors.encode(method, &next));
    }
    Ok(result)
}

async fn read(
    core: &Core,
    params: &Map<String, Value>,
    relay: Option<&Arc<Relay>>,
) -> Result<Value, Refusal> {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err(refusal(
            INVALID_PARAMS,
            "Invalid params: uri must be a string".to_owned(),
        ));
    };
    let Some((index, original)) = route(core, uri) else {
        return Err(not_found(uri));
    };
    let mut sent = params.clone();
    sent.insert("uri".into(), json!(original));
    let mut result = forward(core, index, "resources/read", sent, relay).await?;
    let prefix = &core.config.servers[index].prefix;
    if let Some(contents) = result.get_mut("contents").and_then(Value::as_array_mut) {
        for content in contents {
            if let Some(uri) = content.get("uri").and_then(Value::as_str) {
                let shown = exposed_uri(prefix, uri);
                content["uri"] = json!(shown);
            }
        }
    }
    Ok(result)
}

/// `completion/complete` routed by its `ref`: a prompt by exposed name, a template by
/// exposed URI template; the server sees its own names.
async fn complete(core: &Core, params: &Map<String, Value>) -> Result<Value, Refusal> {
    let reference = params.get("ref").and_then(Value::as_object);
    let Some(reference) = reference else {
        return Err(refusal(
            INVALID_PARAMS,
            "Invalid params: ref must be an object".to_owned(),
        ));
    };
    let (index, field, original) = match reference.get("type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let name = reference.get("name").and_then(Value::as_str).unwrap_or_default();
            let catalog = core.prompts();
            let Some(entry) = catalog.entries.get(name) else {
                let shown: String = name.chars().take(80).collect();
                return Err(refusal(INVALID_PARAMS, format!("Unknown prompt: '{shown}'")));
            };
            (entry.server, "name", entry.original.clone())
        }
        Some("ref/resource") if reference.get("uri").is_some_and(Value::is_string) => {
            let uri = reference["uri"].as_str().unwrap_or_default();
            let Some((index, original)) = route(core, uri) else {
                return Err(not_found(uri));
            };
            (index, "uri", original)
        }
        _ => {
            let text = "Invalid params: ref must be a ref/prompt or ref/resource";
            return Err(refusal(INVALID_PARAMS, text.to_owned()));
        }
    };
    let mut sent = params.clone();
    let mut reference = reference.clone();
    reference.insert(field.into(), json!(original));
    sent.insert("ref".into(), Value::Object(reference));
    forward(core, index, "completion/complete", sent, None).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relayed_result_loses_the_upstreams_stamp_only() {
        let stamped = json!({"content": [], "resultType": "complete",
                             "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "x"}, "keep": 1}});
        assert_eq!(
            plain_result(stamped),
            json!({"content": [], "_meta": {"keep": 1}})
        );
        let bare = json!({"resultType": "complete", "_meta": {"io.modelcontextprotocol/serverInfo": {}}});
        assert_eq!(plain_result(bare), json!({}));
        let parked = json!({"resultType": "input_required"});
        assert_eq!(plain_result(parked.clone()), parked);
    }
}
