//! Arguments against the tool's `inputSchema` before anything leaves the Pod
//! (`bridge/validate.py`): the schema as the server sent it, compiled once per catalog
//! entry by the `jsonschema` engine (formats not asserted, no remote `$ref` fetched); a
//! schema that cannot be compiled leaves the arguments unchecked but for being an object,
//! and says so. Values never appear in a hint (masked), only paths. Pure.

use jsonschema::Validator;
use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::LocationSegment;
use serde_json::{Value, json};

use super::errors::ToolError;

/// A hint names at most this many wrong fields, then says how many more there are.
const MAX_REPORTED_ERRORS: usize = 5;
/// Stands for the argument's value in messages.
const MASK: &str = "the value";

/// A tool's compiled schema, or why there is none.
pub enum Compiled {
    Checked(Box<Validator>),
    Unchecked(String),
}

pub fn compile(schema: Option<&Value>) -> Compiled {
    let Some(schema) = schema else {
        return Compiled::Unchecked("the tool has no inputSchema".to_owned());
    };
    if !schema.is_object() && !schema.is_boolean() {
        return Compiled::Unchecked(format!("inputSchema is a {}, not an object", python_type(schema)));
    }
    match jsonschema::options().should_validate_formats(false).build(schema) {
        Ok(validator) => Compiled::Checked(Box::new(validator)),
        Err(error) => Compiled::Unchecked(format!(
            "inputSchema is not a valid JSON Schema: {}",
            error.to_string().lines().next().unwrap_or("unknown error")
        )),
    }
}

/// The name Python gives a JSON value's type (what the Python bridge's hints say).
pub fn python_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// One thing wrong with the arguments: its JSONPath and what is wrong, value masked.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

/// `["a", 0, "b c"]` → `$.a[0]['b c']`.
pub fn json_path(parts: impl IntoIterator<Item = PathPart>) -> String {
    let mut path = String::from("$");
    for part in parts {
        match part {
            PathPart::Index(i) => path.push_str(&format!("[{i}]")),
            PathPart::Key(key) if is_identifier(&key) => {
                path.push('.');
                path.push_str(&key);
            }
            PathPart::Key(key) => path.push_str(&format!("[{}]", super::errors::python_repr(&key))),
        }
    }
    path
}

pub enum PathPart {
    Key(String),
    Index(usize),
}

fn is_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// Check `arguments` (absent counts as `{}`): the errors sorted by path, and the schema's
/// problem when it went unchecked.
pub fn check(compiled: &Compiled, arguments: Option<&Value>) -> (Vec<FieldError>, Option<String>) {
    let empty = json!({});
    let arguments = arguments.filter(|a| !a.is_null()).unwrap_or(&empty);
    let problem = match compiled {
        Compiled::Unchecked(why) => Some(why.clone()),
        Compiled::Checked(_) => None,
    };
    if !arguments.is_object() {
        let error = FieldError {
            path: "$".to_owned(),
            message: format!("arguments must be an object, not {}", python_type(arguments)),
        };
        return (vec![error], problem);
    }
    let Compiled::Checked(validator) = compiled else {
        return (Vec::new(), problem);
    };
    let mut found: Vec<FieldError> = validator
        .iter_errors(arguments)
        .map(|error| {
            let location = error.instance_path();
            let mut parts: Vec<PathPart> = location
                .iter()
                .map(|segment| match segment {
                    LocationSegment::Property(key) => PathPart::Key(key.into_owned()),
                    LocationSegment::Index(i) => PathPart::Index(i),
                })
                .collect();
            if let ValidationErrorKind::Required { property } = error.kind()
                && let Some(name) = property.as_str()
            {
                parts.push(PathPart::Key(name.to_owned()));
            }
            FieldError {
                path: json_path(parts),
                message: error.masked_with(MASK).to_string(),
            }
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    (found, None)
}

/// The `invalid_arguments` error for the errors found.
pub fn invalid_arguments(exposed: &str, errors: &[FieldError], problem: Option<&str>) -> ToolError {
    let shown = &errors[..errors.len().min(MAX_REPORTED_ERRORS)];
    let lines: Vec<String> = shown
        .iter()
        .map(|e| format!("{}: {}", e.path, e.message))
        .collect();
    let more = errors.len() - shown.len();
    let tail = if more > 0 {
        format!(" (and {more} more)")
    } else {
        String::new()
    };
    let mut hint = format!(
        "The arguments of {exposed} do not match its inputSchema: {}{tail}. Fix these fields and call again; the call was not sent.",
        lines.join("; ")
    );
    if let Some(problem) = problem {
        hint.push_str(&format!(" The tool's own schema is broken too ({problem})."));
    }
    let fields: Vec<Value> = shown
        .iter()
        .map(|e| json!({"path": e.path, "message": e.message}))
        .collect();
    ToolError::new("invalid_arguments", hint).with("fields", Value::Array(fields))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Compiled {
        compile(Some(&json!({
            "type": "object",
            "properties": {"message": {"type": "string"}, "odd key": {"type": "integer"}},
            "required": ["message"],
        })))
    }

    #[test]
    fn a_wrong_type_names_the_path_and_the_type_never_the_value() {
        let (errors, problem) = check(&schema(), Some(&json!({"message": 42, "odd key": "secret"})));
        assert!(problem.is_none());
        let paths: Vec<&str> = errors.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["$.message", "$['odd key']"]);
        assert!(errors[0].message.contains("string") && !errors[1].message.contains("secret"));
        let hint = invalid_arguments("ev_echo", &errors, None).hint;
        assert!(hint.contains("$.message") && hint.contains("the call was not sent"));
    }

    #[test]
    fn a_missing_field_is_named_and_absent_arguments_count_as_empty() {
        let (errors, _) = check(&schema(), None);
        assert_eq!(errors[0].path, "$.message");
        let (errors, _) = check(&schema(), Some(&json!([1])));
        assert_eq!(errors[0].message, "arguments must be an object, not list");
    }

    #[test]
    fn a_broken_schema_leaves_the_arguments_unchecked_and_says_so() {
        let broken = compile(Some(&json!({"type": "no-such-type"})));
        let (errors, problem) = check(&broken, Some(&json!({"a": 1})));
        assert!(errors.is_empty() && problem.unwrap().contains("not a valid JSON Schema"));
        assert!(matches!(compile(None), Compiled::Unchecked(_)));
    }
}
