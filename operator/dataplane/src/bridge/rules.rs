//! The authorization rules (`bridge/rules.py`): which calls a server's rules allow or deny.
//! Each server's effective policy lists its rules, the server's layer then the run's, each
//! a CEL `match` (the operator's dialect: the `cel` crate its Python binding wraps) with an
//! `action`. Per layer the first rule that matches decides; no match allows. The two
//! layers' verdicts combine to the stricter (`allow` < `approve` < `deny`), so a run's rules
//! only add restrictions. A rule that cannot be evaluated fails closed: a `deny` or
//! `approve` rule counts as matching, an `allow` rule as not.
//!
//! **Cost.** Rules that do not read `arguments` have one answer per tool, taken when the
//! catalog is built. The others run per call in a child scope of the tool's own CEL
//! context, which holds `caller`, `server` and `tool` converted once: a call converts only
//! its `arguments`, and only when such a rule is reached. (The engine compiles a `matches`
//! pattern at each evaluation, as it does under the Python bridge.)
//!
//! **Listing.** A tool is left out of `tools/list` when a layer denies it whatever the
//! arguments: its rules up to the first that matches read no arguments, and that one denies.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock};

use cel::objects::{Key, Map as CelMap};
use cel::{Context, Env, ExecutionError, Program};
use serde_json::{Value, json};

use super::catalog::Entry;
use super::config::{BridgeConfig, Server};
use super::errors::ToolError;
use super::policy::{Action, Layer, Rule};

/// What a rule may read.
const VARIABLES: [&str; 4] = ["caller", "server", "tool", "arguments"];
/// A rule's expression is at most this long (`MAX_EXPRESSION_CHARS`), its reason this long.
const MAX_EXPRESSION_CHARS: usize = 4096;
const MAX_REASON_CHARS: usize = 512;
/// An evaluation error is cut to this many characters in the log.
const MAX_LOGGED_ERROR: usize = 200;

/// CEL's standard library, built once: a context of its own per tool would rebuild it
/// (`Context::default` does), about 30 µs each.
static STDLIB: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(Env::stdlib()));

/// A context with the standard functions and no variables, as `Context::default` makes.
fn context() -> Context<'static> {
    Context::with_env(STDLIB.clone())
}

/// What the rules say of one call: the action, and the rule that decided (none: allowed).
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub action: Action,
    /// The deciding rule's layer, its place in that layer's list (from 0) and its reason.
    pub rule: Option<(Layer, usize, Option<String>)>,
}

pub const ALLOWED: Decision = Decision {
    action: Action::Allow,
    rule: None,
};

impl Decision {
    /// `server rule 2` / `run rule 0` / `no rule` (hints and audit lines).
    pub fn describe(&self) -> String {
        match &self.rule {
            None => "no rule".to_owned(),
            Some((layer, position, _)) => format!("{} rule {position}", layer_name(*layer)),
        }
    }

    /// The audit line's `policy`: `{rule, action}`, none when no rule decided.
    pub fn audited(&self) -> Option<Value> {
        self.rule.as_ref()?;
        Some(json!({"rule": self.describe(), "action": action_name(self.action)}))
    }
}

fn layer_name(layer: Layer) -> &'static str {
    match layer {
        Layer::Server => "server",
        Layer::Run => "run",
    }
}

fn action_name(action: Action) -> &'static str {
    match action {
        Action::Allow => "allow",
        Action::Approve => "approve",
        Action::Deny => "deny",
    }
}

/// `policy_denied`: the rule's reason as the hint, in the Python bridge's words.
pub fn denied(exposed: &str, decision: &Decision) -> ToolError {
    let reason = decision
        .rule
        .as_ref()
        .and_then(|(_, _, reason)| reason.clone())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "a policy rule does not allow this call".to_owned());
    let described = decision.describe();
    ToolError::new(
        "policy_denied",
        format!(
            "{reason} (the {described} of the policy refused {exposed}; the call was not sent). Calling again with the same arguments will be refused the same way."
        ),
    )
    .with("rule", json!(described))
    .with("action", json!(action_name(decision.action)))
}

/// A rule's expression compiled, and whether it reads `arguments`.
struct Compiled {
    program: Arc<Program>,
    dynamic: bool,
}

fn compile(expression: &str) -> Result<Compiled, String> {
    let program = Program::compile(expression).map_err(|e| {
        let text = e.to_string();
        let first = text.trim().lines().next().unwrap_or_default().to_owned();
        format!("not a valid CEL expression: {first}")
    })?;
    let dynamic = program.references().has_variable("arguments");
    Ok(Compiled {
        program: Arc::new(program),
        dynamic,
    })
}

/// What is wrong with a rule's `match` and `reason` (`check_expression`): it must compile and
/// read only `caller`, `server`, `tool` and `arguments` (a comprehension's own names pass:
/// a dry run on empty variables tells them from a name nothing defines).
pub fn problem(rule: &Rule) -> Option<String> {
    if rule.matches.chars().count() > MAX_EXPRESSION_CHARS {
        return Some(format!(
            "match: must be at most {MAX_EXPRESSION_CHARS} characters"
        ));
    }
    if rule
        .reason
        .as_ref()
        .is_some_and(|r| r.chars().count() > MAX_REASON_CHARS)
    {
        return Some(format!("reason: must be at most {MAX_REASON_CHARS} characters"));
    }
    let compiled = match compile(&rule.matches) {
        Ok(compiled) => compiled,
        Err(why) => return Some(format!("match: {why}")),
    };
    let references = compiled.program.references();
    if references.variables().iter().all(|v| VARIABLES.contains(v)) {
        return None;
    }
    let mut context = context();
    for name in VARIABLES {
        context.add_variable_from_value(
            name,
            cel::Value::Map(CelMap::from(HashMap::<String, cel::Value>::new())),
        );
    }
    match compiled.program.execute(&context) {
        Err(ExecutionError::UndeclaredReference(name)) => Some(format!(
            "match: Undefined variable or function '{name}'; a rule may read caller, server, tool and arguments"
        )),
        _ => None,
    }
}

/// One rule of one tool: its program, and for a rule that reads no arguments its answer.
struct ToolRule {
    action: Action,
    position: usize,
    reason: Option<String>,
    expression: Arc<str>,
    program: Arc<Program>,
    /// For a rule that reads no arguments: whether it matches this tool (fail-closed).
    known: Option<bool>,
}

/// The rules of one tool: both layers, and the tool's context of fixed variables.
pub struct ToolRules {
    layers: [(Layer, Vec<ToolRule>); 2],
    context: Context<'static>,
}

impl ToolRules {
    fn new(rules: &[(Arc<str>, &Rule, &Compiled)], variables: [(&str, Value); 3]) -> Self {
        let mut context = context();
        for (name, value) in variables {
            context.add_variable_from_value(name, to_cel(&value));
        }
        let mut layers = [(Layer::Server, Vec::new()), (Layer::Run, Vec::new())];
        for (layer, entries) in &mut layers {
            let mine = rules.iter().filter(|(_, rule, _)| rule.layer == *layer);
            for (position, (expression, rule, compiled)) in mine.enumerate() {
                let known = (!compiled.dynamic)
                    .then(|| matched(rule.action, expression, compiled.program.execute(&context)));
                entries.push(ToolRule {
                    action: rule.action,
                    position,
                    reason: rule.reason.clone(),
                    expression: expression.clone(),
                    program: compiled.program.clone(),
                    known,
                });
            }
        }
        Self { layers, context }
    }

    /// The stricter of the two layers' first matching rules for a call with `arguments`.
    pub fn decide(&self, arguments: &Value) -> Decision {
        let mut scope: Option<Context<'_>> = None;
        let mut verdict = ALLOWED;
        for (layer, entries) in &self.layers {
            for entry in entries {
                let hit = match entry.known {
                    Some(known) => known,
                    None => {
                        let scope = scope.get_or_insert_with(|| {
                            let mut scope = self.context.new_inner_scope();
                            scope.add_variable_from_value("arguments", to_cel(arguments));
                            scope
                        });
                        matched(entry.action, &entry.expression, entry.program.execute(scope))
                    }
                };
                if hit {
                    if entry.action > verdict.action {
                        verdict = Decision {
                            action: entry.action,
                            rule: Some((*layer, entry.position, entry.reason.clone())),
                        };
                    }
                    break;
                }
            }
        }
        verdict
    }

    /// The deny that holds for every call of this tool, if one does (see the module).
    fn denied_whatever_the_arguments(&self) -> bool {
        self.layers.iter().any(|(_, entries)| {
            for entry in entries {
                match entry.known {
                    None => return false,
                    Some(true) => return entry.action == Action::Deny,
                    Some(false) => {}
                }
            }
            false
        })
    }
}

/// Whether an evaluation counts as a match: `true` does; an error does for a restricting
/// rule (fail closed), and is logged without any value the call carried.
fn matched(action: Action, expression: &str, result: Result<cel::Value, ExecutionError>) -> bool {
    match result {
        Ok(value) => value == cel::Value::Bool(true),
        Err(error) => {
            let told: String = plain(&error, expression).chars().take(MAX_LOGGED_ERROR).collect();
            tracing::warn!("Rule {expression:?} could not be evaluated: {told}");
            action != Action::Allow
        }
    }
}

/// An evaluation error in words that carry no value of the call (the variants that hold
/// values are named by what went wrong only; a missing key only when the rule names it).
fn plain(error: &ExecutionError, expression: &str) -> String {
    match error {
        // A key the call named (`m[arguments.k]`) is a value: said only when the rule says it.
        ExecutionError::NoSuchKey(key) if !expression.contains(key.as_str()) => "No such key".to_owned(),
        ExecutionError::NoSuchKey(_)
        | ExecutionError::UndeclaredReference(_)
        | ExecutionError::NoSuchOverload
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::InvalidArgumentCount { .. }
        | ExecutionError::MissingArgumentOrTarget => error.to_string(),
        ExecutionError::FunctionError { function, .. } => {
            format!("Error executing function '{function}'")
        }
        _ => "a value of a type or range the expression cannot use".to_owned(),
    }
}

/// A JSON value as CEL sees it (as the Python binding converts: an integer is `int`, one
/// above `int`'s range `uint`, any other number `double`).
pub fn to_cel(value: &Value) -> cel::Value {
    match value {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => cel::Value::Int(i),
            (None, Some(u)) => cel::Value::UInt(u),
            _ => cel::Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => cel::Value::String(Arc::new(s.clone())),
        Value::Array(items) => cel::Value::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => cel::Value::Map(CelMap {
            map: Arc::new(
                map.iter()
                    .map(|(k, v)| (Key::String(Arc::new(k.clone())), to_cel(v)))
                    .collect(),
            ),
        }),
    }
}

/// Python's truthiness of a JSON value (`a or b`).
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(items) => !items.is_empty(),
        Value::Object(map) => !map.is_empty(),
    }
}

/// `caller`, `server` and `tool` of one catalog entry (`tool_variables`).
fn tool_variables(
    config: &BridgeConfig,
    server: &Server,
    exposed: &str,
    entry: &Entry,
) -> [(&'static str, Value); 3] {
    let identity = config.identity.as_ref();
    let said = |field: &str| {
        identity
            .and_then(|i| i.get(field))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let title = [entry.tool.get("title"), entry.annotations.get("title")]
        .into_iter()
        .flatten()
        .find(|t| truthy(t))
        .and_then(Value::as_str)
        .unwrap_or_default();
    [
        (
            "caller",
            json!({"run": config.run.name, "namespace": config.run.namespace,
                   "serviceAccount": said("serviceAccount"), "pod": said("pod")}),
        ),
        (
            "server",
            json!({"name": server.name, "namespace": server.namespace}),
        ),
        (
            "tool",
            json!({"name": entry.original, "exposedName": exposed, "title": title,
                   "annotations": super::pins::pinned_annotations(server, entry)}),
        ),
    ]
}

/// Every tool's rules for one configuration and catalog (built with the catalog).
#[derive(Default)]
pub struct RuleBook {
    tools: HashMap<String, ToolRules>,
    /// Exposed names no call can be allowed for: left out of `tools/list`.
    pub hidden: BTreeSet<String>,
}

impl RuleBook {
    pub fn build<'a>(
        config: &BridgeConfig,
        entries: impl IntoIterator<Item = (&'a String, &'a Arc<Entry>)>,
    ) -> Self {
        let mut compiled: Vec<Vec<(Arc<str>, &Rule, Compiled)>> = Vec::new();
        for server in &config.servers {
            let mut rules = Vec::new();
            for rule in &server.policy.rules {
                match compile(&rule.matches) {
                    Ok(program) => rules.push((Arc::from(rule.matches.as_str()), rule, program)),
                    // The file was checked when it was read; never reached.
                    Err(why) => tracing::error!("Rule {:?} not compiled: {why}", rule.matches),
                }
            }
            compiled.push(rules);
        }
        let mut book = Self::default();
        for (exposed, entry) in entries {
            let server = &config.servers[entry.server];
            let rules = &compiled[entry.server];
            if server.policy.rules.is_empty() {
                continue;
            }
            let borrowed: Vec<_> = rules.iter().map(|(e, r, c)| (e.clone(), *r, c)).collect();
            let variables = tool_variables(config, server, exposed, entry);
            let tool = ToolRules::new(&borrowed, variables);
            if tool.denied_whatever_the_arguments() {
                book.hidden.insert(exposed.clone());
            }
            book.tools.insert(exposed.clone(), tool);
        }
        book
    }

    /// The verdict on a call of `exposed` with `arguments` (`{}` when the call had none).
    pub fn decide(&self, exposed: &str, arguments: &Value) -> Decision {
        self.tools
            .get(exposed)
            .map_or(ALLOWED, |rules| rules.decide(arguments))
    }
}

#[cfg(test)]
mod tests;
