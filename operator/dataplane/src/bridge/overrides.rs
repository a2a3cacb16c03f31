//! Tool overrides (`bridge/overrides.py`, the MCPServer's `spec.toolsOverride`): our text,
//! and arguments we fix. An override names a tool by its original name and may give it
//! another `title` and `description` (what the agent's `tools/list` shows) and
//! `fixedArguments`: values the bridge sends whatever the agent says. Fixed arguments are
//! removed from the `inputSchema` the agent sees (from `properties` and `required`); the
//! agent's arguments are validated against that schema and the fixed values merged in after
//! validation, so a call that names a fixed argument is refused (`invalid_arguments`). The
//! pin (`pins`) covers the server's own definition; the override is ours and is not pinned.
//! The catalog applies [`overridden`]; the pipeline [`with_fixed`]. Pure.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use super::config::ToolOverride;
use super::errors::ToolError;

/// What is wrong with a server's overrides as `api/bridge.py` bounds them (`at`: where the
/// server is in the file).
pub fn problems(overrides: &[ToolOverride], at: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if overrides.len() > 256 {
        problems.push(format!("{at}.overrides: must have at most 256 items"));
    }
    for (index, wanted) in overrides.iter().enumerate() {
        let at = format!("{at}.overrides[{index}]");
        if !(1..=128).contains(&wanted.name.chars().count()) {
            problems.push(format!("{at}.name: must have 1 to 128 characters"));
        }
        if wanted.title.as_ref().is_some_and(|t| t.chars().count() > 256) {
            problems.push(format!("{at}.title: must have at most 256 characters"));
        }
        if wanted
            .description
            .as_ref()
            .is_some_and(|d| d.chars().count() > 4096)
        {
            problems.push(format!("{at}.description: must have at most 4096 characters"));
        }
        if wanted.fixed_arguments.as_ref().is_some_and(|f| f.len() > 32) {
            problems.push(format!("{at}.fixedArguments: must have at most 32 arguments"));
        }
    }
    problems
}

/// The tool as the agent sees it (its definition for `tools/list`) and the schema its
/// arguments are validated against.
pub fn overridden(tool: &Value, wanted: Option<&ToolOverride>) -> (Value, Option<Value>) {
    let mut definition = tool.clone();
    let mut schema = tool.get("inputSchema").cloned();
    let Some(wanted) = wanted else {
        return (definition, schema);
    };
    if let Some(title) = &wanted.title {
        definition["title"] = json!(title);
        if let Some(annotations) = definition.get_mut("annotations").and_then(Value::as_object_mut)
            && annotations.contains_key("title")
        {
            annotations.insert("title".into(), json!(title));
        }
    }
    if let Some(description) = &wanted.description {
        definition["description"] = json!(description);
    }
    let fixed = wanted.fixed_arguments.as_ref().filter(|f| !f.is_empty());
    if let (Some(fixed), Some(Value::Object(object))) = (fixed, schema.as_mut()) {
        if let Some(Value::Object(properties)) = object.get_mut("properties") {
            properties.retain(|name, _| !fixed.contains_key(name));
        }
        if let Some(Value::Array(required)) = object.get_mut("required") {
            required.retain(|name| name.as_str().is_none_or(|n| !fixed.contains_key(n)));
        }
        definition["inputSchema"] = Value::Object(object.clone());
    }
    (definition, schema)
}

/// The arguments sent for a call the schema accepted (`None`: `{}`): the agent's with the
/// fixed ones merged in, or `invalid_arguments` when the agent named a fixed one. A tool with
/// no fixed arguments (most) borrows the agent's: a call's arguments are copied only to be
/// changed.
pub fn with_fixed<'a>(
    exposed: &str,
    arguments: Option<&'a Value>,
    fixed: &Map<String, Value>,
) -> Result<Cow<'a, Value>, ToolError> {
    if fixed.is_empty() {
        return Ok(arguments.map_or_else(|| Cow::Owned(json!({})), Cow::Borrowed));
    }
    let mut sent = arguments.cloned().unwrap_or_else(|| json!({}));
    let Value::Object(given) = &mut sent else {
        return Ok(Cow::Owned(sent));
    };
    let mut named: Vec<String> = given
        .keys()
        .filter(|name| fixed.contains_key(*name))
        .cloned()
        .collect();
    if !named.is_empty() {
        named.sort();
        return Err(fixed_named(exposed, &named));
    }
    for (name, value) in fixed {
        given.insert(name.clone(), value.clone());
    }
    Ok(Cow::Owned(sent))
}

/// `invalid_arguments`: the agent tried to set arguments the server's owner fixed.
pub fn fixed_named(exposed: &str, names: &[String]) -> ToolError {
    let listed = names.join(", ");
    let them = if names.len() == 1 { "it" } else { "them" };
    ToolError::new(
        "invalid_arguments",
        format!(
            "{exposed} does not take {listed}: the server's configuration fixes {them} for every call. Call it again without {listed}; the call was not sent."
        ),
    )
    .with("fixed", json!(names))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete() -> Value {
        json!({
            "name": "delete_page",
            "description": "Delete a page.",
            "inputSchema": {"type": "object",
                            "properties": {"path": {"type": "string"}, "force": {"type": "boolean"}},
                            "required": ["path", "force"]},
            "annotations": {"destructiveHint": true, "title": "Delete"},
        })
    }

    fn wanted(fixed: Value) -> ToolOverride {
        ToolOverride {
            name: "delete_page".into(),
            title: Some("Delete a draft".into()),
            description: Some("Deletes a page under /drafts only.".into()),
            fixed_arguments: fixed.as_object().cloned(),
        }
    }

    #[test]
    fn an_override_shows_our_text_and_takes_the_fixed_arguments_out_of_the_schema() {
        let (shown, schema) = overridden(&delete(), Some(&wanted(json!({"path": "/drafts/current"}))));
        assert_eq!(shown["title"], "Delete a draft");
        assert_eq!(shown["annotations"]["title"], "Delete a draft");
        assert_eq!(shown["annotations"]["destructiveHint"], true);
        assert_eq!(shown["description"], "Deletes a page under /drafts only.");
        let schema = schema.unwrap();
        assert_eq!(shown["inputSchema"], schema);
        assert_eq!(schema["properties"], json!({"force": {"type": "boolean"}}));
        assert_eq!(schema["required"], json!(["force"]));
        // The server's own listing is not changed.
        assert_eq!(delete()["inputSchema"]["required"], json!(["path", "force"]));
    }

    #[test]
    fn without_an_override_or_fixed_arguments_the_schema_is_the_servers() {
        let (shown, schema) = overridden(&delete(), None);
        assert_eq!((shown, schema.as_ref()), (delete(), delete().get("inputSchema")));
        let (shown, schema) = overridden(&delete(), Some(&wanted(json!({}))));
        assert_eq!(schema.as_ref(), delete().get("inputSchema"));
        assert_eq!(shown["inputSchema"], delete()["inputSchema"]);
        let mut untitled = delete();
        untitled["annotations"] = json!({"destructiveHint": true});
        let (shown, _) = overridden(&untitled, Some(&wanted(json!({}))));
        assert_eq!(shown["annotations"], json!({"destructiveHint": true}));
    }

    #[test]
    fn overrides_beyond_the_apis_bounds_are_problems_naming_the_field() {
        assert!(problems(&[wanted(json!({"path": "/"}))], "servers[0]").is_empty());
        let mut long = wanted(json!({}));
        long.name = String::new();
        long.title = Some("t".repeat(257));
        long.description = Some("d".repeat(4097));
        let many: Map<String, Value> = (0..33).map(|i| (format!("a{i}"), json!(i))).collect();
        long.fixed_arguments = Some(many);
        let found = problems(&[wanted(json!({})), long], "servers[1]");
        let fields: Vec<&str> = found.iter().map(|p| p.split(':').next().unwrap()).collect();
        assert_eq!(
            fields,
            [
                "servers[1].overrides[1].name",
                "servers[1].overrides[1].title",
                "servers[1].overrides[1].description",
                "servers[1].overrides[1].fixedArguments",
            ]
        );
        let crowd = vec![wanted(json!({})); 257];
        assert_eq!(
            problems(&crowd, "s"),
            ["s.overrides: must have at most 256 items"]
        );
    }

    #[test]
    fn the_fixed_values_are_merged_and_an_agent_that_names_one_is_refused() {
        let fixed = json!({"path": "/drafts/current", "mode": "soft"});
        let fixed = fixed.as_object().unwrap();
        let sent = with_fixed("docs_delete_page", None, fixed).unwrap();
        assert_eq!(*sent, json!({"path": "/drafts/current", "mode": "soft"}));
        let forced = json!({"force": true});
        let sent = with_fixed("docs_delete_page", Some(&forced), fixed).unwrap();
        assert_eq!(
            *sent,
            json!({"force": true, "path": "/drafts/current", "mode": "soft"})
        );
        let given = json!({"path": "/"});
        let borrowed = with_fixed("t", Some(&given), &Map::new()).unwrap();
        assert!(
            matches!(borrowed, Cow::Borrowed(_)),
            "no fixed arguments: nothing copied"
        );
        let refused = with_fixed(
            "docs_delete_page",
            Some(&json!({"path": "/", "mode": "hard"})),
            fixed,
        )
        .unwrap_err();
        assert_eq!(refused.code, "invalid_arguments");
        assert_eq!(refused.details["fixed"], json!(["mode", "path"]));
        assert_eq!(
            refused.hint,
            "docs_delete_page does not take mode, path: the server's configuration fixes them for every call. Call it again without mode, path; the call was not sent."
        );
        let one = with_fixed("t", Some(&json!({"path": "/"})), fixed).unwrap_err();
        assert!(one.hint.contains("fixes it for every call"), "{}", one.hint);
    }
}
