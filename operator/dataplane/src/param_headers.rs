//! `Mcp-Param-*` headers of 2026-07-28 tool calls (`x-mcp-header` annotations; the official
//! SDKs keep these private to their servers and clients, so they are written here from the
//! spec), for both sides of the data plane: the adapter checks a caller's headers against its
//! child's tool schemas, as the SDK's server does; the bridge writes the headers of each call
//! it sends a 2026-07-28 server ([`ToolHeaderSchemas::headers_for`]), as the SDK's client does
//! (such a server refuses a call to an annotated tool without them).
//!
//! Owns what is remembered of a server's tools for that — only input schemas that annotate
//! properties with `x-mcp-header`, by tool name, at most `MAX_TOOLS`, learnt from every
//! `tools/list` result and forgotten when the list changes or the child restarts — and the
//! check: each annotated property's header and argument are present
//! together and equal (after the base64 sentinel is decoded; an integer compares by value),
//! or absent together. A call to a tool whose schema is not known, or whose annotations are
//! not valid (a conforming client sends no headers for it), is not checked. Pure: no I/O.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::era::{decode_header_value, encode_header_value};

const MAX_TOOLS: usize = 1000;
const KEY: &str = "x-mcp-header";

/// An annotated property: its path of `properties` keys, its header token, its type.
#[derive(Debug, Clone)]
struct Annotation {
    path: Vec<String>,
    token: String,
    kind: String,
}

#[derive(Debug, Default)]
pub struct ToolHeaderSchemas {
    by_tool: HashMap<String, Vec<Annotation>>,
}

fn is_token(text: &str) -> bool {
    !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Every `x-mcp-header` anywhere in a schema.
fn count_anywhere(value: &Value) -> usize {
    match value {
        Value::Object(map) => {
            usize::from(map.contains_key(KEY)) + map.values().map(count_anywhere).sum::<usize>()
        }
        Value::Array(items) => items.iter().map(count_anywhere).sum(),
        _ => 0,
    }
}

/// The annotations on the pure `properties` chain from the root.
fn chain(
    schema: &Map<String, Value>,
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Value, Option<Value>)>,
) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        let Some(property) = property.as_object() else {
            continue;
        };
        path.push(name.clone());
        if let Some(token) = property.get(KEY) {
            out.push((path.clone(), token.clone(), property.get("type").cloned()));
        }
        chain(property, path, out);
        path.pop();
    }
}

/// The annotations of a schema, or None when they are not valid (then nothing is checked).
fn annotations(schema: &Value) -> Option<Vec<Annotation>> {
    let root = schema.as_object()?;
    let mut found = Vec::new();
    chain(root, &mut Vec::new(), &mut found);
    if found.len() != count_anywhere(schema) {
        return None; // an annotation off the pure `properties` chain (or on the root)
    }
    let mut seen = std::collections::HashSet::new();
    found
        .into_iter()
        .map(|(path, token, kind)| {
            let token = token.as_str().filter(|t| is_token(t))?.to_owned();
            let kind = kind
                .as_ref()
                .and_then(Value::as_str)
                .filter(|k| ["integer", "string", "boolean"].contains(k))?;
            seen.insert(token.to_ascii_lowercase()).then_some(Annotation {
                path,
                token,
                kind: kind.to_owned(),
            })
        })
        .collect()
}

/// How a body value is written in a header, or None when it cannot be.
fn render(value: &Value) -> Option<String> {
    match value {
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn matches(kind: &str, value: &Value, rendered: &str, decoded: &str) -> bool {
    if kind == "integer"
        && let Some(whole) = value
            .as_i64()
            .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
    {
        let (int_part, fraction) = decoded.split_once('.').unwrap_or((decoded, ""));
        let canonical = !int_part.is_empty()
            && int_part
                .trim_start_matches('-')
                .bytes()
                .all(|b| b.is_ascii_digit())
            && fraction.bytes().all(|b| b == b'0');
        if canonical {
            return int_part.parse::<i64>().ok() == Some(whole);
        }
    }
    decoded == rendered
}

/// Every `Mcp-Param-*` header of a request (each copy), by lowercase name, its value
/// trimmed: what [`ToolHeaderSchemas::check`] reads.
pub fn of_request(headers: &hyper::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("mcp-param-"))
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.trim().to_owned())))
        .collect()
}

/// The value at `path` of a call's arguments (`properties` keys from the root).
fn at<'a>(arguments: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter()
        .try_fold(arguments.get(first)?, |node, step| node.get(step))
}

impl ToolHeaderSchemas {
    /// Remember the annotated schemas of one `tools/list` result (page).
    pub fn learn(&mut self, result: Option<&Value>) {
        let Some(tools) = result.and_then(|r| r.get("tools")).and_then(Value::as_array) else {
            return;
        };
        self.learn_tools(tools);
    }

    /// The `Mcp-Param-*` headers of a call to `name` with `arguments`, as the SDK's client
    /// writes them: one per annotated property the arguments hold (a value a header cannot
    /// carry as text is base64-encoded); none for a tool without valid annotations.
    pub fn headers_for(&self, name: &str, arguments: Option<&Value>) -> Vec<(String, String)> {
        let (Some(annotated), Some(arguments)) =
            (self.by_tool.get(name), arguments.and_then(Value::as_object))
        else {
            return Vec::new();
        };
        annotated
            .iter()
            .filter_map(|annotation| {
                let value = at(arguments, &annotation.path).filter(|v| !v.is_null())?;
                let text = render(value)?;
                Some((
                    format!("Mcp-Param-{}", annotation.token),
                    encode_header_value(&text),
                ))
            })
            .collect()
    }

    /// Remember the annotated schemas of these tools (a listing's items).
    pub fn learn_tools<'a>(&mut self, tools: impl IntoIterator<Item = &'a Value>) {
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let schema = tool.get("inputSchema").filter(|s| count_anywhere(s) > 0);
            match schema {
                Some(schema) if self.by_tool.len() < MAX_TOOLS || self.by_tool.contains_key(name) => {
                    match annotations(schema) {
                        Some(found) => self.by_tool.insert(name.to_owned(), found),
                        None => self.by_tool.remove(name),
                    };
                }
                _ => {
                    self.by_tool.remove(name);
                }
            }
        }
    }

    /// The child's tool list changed, or the child restarted.
    pub fn forget(&mut self) {
        self.by_tool.clear();
    }

    /// Why a `tools/call`'s `Mcp-Param-*` headers disagree with its arguments, if they do.
    /// `headers` are every copy of every `mcp-param-*` header, by lowercase name.
    pub fn check(&self, params: &Map<String, Value>, headers: &[(String, String)]) -> Option<String> {
        let name = params.get("name").and_then(Value::as_str)?;
        let annotated = self.by_tool.get(name)?;
        let empty = Map::new();
        let arguments = params
            .get("arguments")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for annotation in annotated {
            let header = format!("Mcp-Param-{}", annotation.token);
            let key = header.to_ascii_lowercase();
            let copies: Vec<&str> = headers
                .iter()
                .filter(|(k, _)| *k == key)
                .map(|(_, v)| v.as_str())
                .collect();
            if copies.len() > 1 {
                return Some(format!("{header} header appears more than once"));
            }
            let raw = copies.first().copied();
            let argument = annotation.path.join(".");
            let value = at(arguments, &annotation.path).filter(|v| !v.is_null());
            let Some(value) = value else {
                if raw.is_some() {
                    return Some(format!(
                        "{header} header is present but the request body's '{argument}' argument is absent"
                    ));
                }
                continue;
            };
            let Some(rendered) = render(value) else {
                if raw.is_some() {
                    return Some(format!(
                        "{header} header does not match the request body's '{argument}' argument"
                    ));
                }
                continue;
            };
            let Some(raw) = raw else {
                return Some(format!(
                    "{header} header is missing but the request body's '{argument}' argument is present"
                ));
            };
            let Some(decoded) = decode_header_value(raw) else {
                return Some(format!(
                    "{header} header carries a malformed base64 sentinel value"
                ));
            };
            if !matches(&annotation.kind, value, &rendered, &decoded) {
                return Some(format!(
                    "{header} header does not match the request body's '{argument}' argument"
                ));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schemas() -> ToolHeaderSchemas {
        let mut schemas = ToolHeaderSchemas::default();
        schemas.learn(Some(
            &json!({"tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"}}}}]}),
        ));
        schemas
    }

    fn call(arguments: Value) -> Map<String, Value> {
        json!({"name": "t", "arguments": arguments})
            .as_object()
            .unwrap()
            .clone()
    }

    fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn agreeing_headers_pass_in_plain_and_base64() {
        let s = schemas();
        let args = json!({"region": "eu-west", "n": 42});
        assert_eq!(
            s.check(
                &call(args.clone()),
                &headers(&[("mcp-param-region", "eu-west"), ("mcp-param-n", "42.0")])
            ),
            None
        );
        let encoded = [
            ("mcp-param-region", "=?base64?ZXUtd2VzdA==?="),
            ("mcp-param-n", "42"),
        ];
        assert_eq!(s.check(&call(args), &headers(&encoded)), None);
    }

    #[test]
    fn missing_different_or_malformed_headers_are_refused() {
        let s = schemas();
        let args = json!({"region": "eu-west"});
        assert!(s.check(&call(args.clone()), &[]).is_some());
        assert!(
            s.check(&call(args.clone()), &headers(&[("mcp-param-region", "us-east")]))
                .is_some()
        );
        assert!(
            s.check(&call(args), &headers(&[("mcp-param-region", "=?base64?ZXU!?=")]))
                .is_some()
        );
        assert!(
            s.check(&call(json!({})), &headers(&[("mcp-param-region", "x")]))
                .is_some()
        );
    }

    #[test]
    fn the_headers_written_for_a_call_pass_the_check() {
        let s = schemas();
        let args = json!({"region": "zürich", "n": 7, "other": "x"});
        let written = s.headers_for("t", Some(&args));
        assert_eq!(
            written,
            headers(&[
                ("Mcp-Param-N", "7"),
                ("Mcp-Param-Region", "=?base64?esO8cmljaA==?=")
            ])
        );
        let lowered: Vec<(String, String)> = written
            .into_iter()
            .map(|(k, v)| (k.to_ascii_lowercase(), v))
            .collect();
        assert_eq!(s.check(&call(args), &lowered), None);
        assert_eq!(s.headers_for("t", Some(&json!({}))), vec![]);
        assert_eq!(s.headers_for("unknown", Some(&json!({"region": "x"}))), vec![]);
    }

    #[test]
    fn an_annotation_off_the_properties_chain_makes_the_schema_unchecked() {
        let mut s = ToolHeaderSchemas::default();
        s.learn(Some(
            &json!({"tools": [{"name": "t", "inputSchema": {"type": "object",
            "items": {"x-mcp-header": "X", "type": "string"}}}]}),
        ));
        assert_eq!(s.check(&call(json!({})), &headers(&[("mcp-param-x", "1")])), None);
    }
}
