//! The rules' unit tests (`tests/unit/test_bridge_policies.py`'s rules cases): layers,
//! fail-closed, the listing, the variables a rule reads, and the file's checks.

use serde_json::{Value, json};

use super::*;
use crate::bridge::catalog::Catalog;
use crate::bridge::config::parse;
use crate::bridge::pins::definition_digest;
use crate::bridge::scrub::Scrubber;

fn search() -> Value {
    json!({"name": "search_docs", "description": "Search the docs.",
           "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
           "annotations": {"readOnlyHint": true}})
}

fn delete() -> Value {
    json!({"name": "delete_page", "description": "Delete a page.", "title": "Delete",
           "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
           "annotations": {"destructiveHint": true}})
}

/// The run `team/r1` calling as `account`, one server `team/docs` with `rules`.
fn config(rules: Value, account: &str) -> BridgeConfig {
    pinned_config(rules, account, json!({}))
}

/// The same with more fields of the server (`toolDigests`, `pinning`, `overrides`).
fn pinned_config(rules: Value, account: &str, more: Value) -> BridgeConfig {
    let mut text = json!({
        "apiVersion": "mcp-operator.dev/v1alpha1", "kind": "BridgeConfig",
        "run": {"name": "r1", "namespace": "team"},
        "identity": {"namespace": "team", "serviceAccount": account, "pod": "r1"},
        "servers": [{"name": "docs", "namespace": "team", "url": "http://docs.team:8080/mcp",
                     "prefix": "docs", "policy": {"rules": rules}}],
    });
    for (key, value) in more.as_object().unwrap() {
        text["servers"][0][key] = value.clone();
    }
    parse(&text.to_string(), "test").unwrap()
}

/// The catalog of `config` over the two tools, with its rules.
fn catalog(config: &BridgeConfig) -> Catalog {
    let mut catalog = Catalog::build(
        &config.servers,
        &[Some(vec![search(), delete()])],
        &Scrubber::default(),
    );
    catalog.rules = RuleBook::build(config, &catalog.entries);
    catalog
}

fn listed(catalog: &Catalog) -> Vec<String> {
    let tools = catalog.tools();
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn only_researcher() -> Value {
    json!([
        {"match": "tool.name.startsWith('search_') && caller.serviceAccount == 'researcher'",
         "action": "allow"},
        {"match": "tool.name.startsWith('search_')", "action": "deny",
         "reason": "search is for researchers"},
    ])
}

#[test]
fn a_rule_allows_search_for_one_service_account_and_hides_it_from_others() {
    let allowed = catalog(&config(only_researcher(), "researcher"));
    assert!(listed(&allowed).contains(&"docs_search_docs".to_owned()));
    let decision = allowed.rules.decide("docs_search_docs", &json!({"query": "x"}));
    assert_eq!(decision.action, Action::Allow);
    assert_eq!(decision.audited(), None);
    let other = catalog(&config(only_researcher(), "intern"));
    assert_eq!(listed(&other), ["docs_delete_page"]);
    let decision = other.rules.decide("docs_search_docs", &json!({"query": "x"}));
    assert_eq!(decision.describe(), "server rule 1");
    let refused = denied("docs_search_docs", &decision).to_result();
    let content = &refused["structuredContent"];
    assert_eq!(content["code"], "policy_denied");
    assert_eq!(content["rule"], "server rule 1");
    assert_eq!(content["action"], "deny");
    let hint = content["hint"].as_str().unwrap();
    assert!(hint.starts_with("search is for researchers (the server rule 1 of the policy refused docs_search_docs; the call was not sent)."), "{hint}");
    assert_eq!(
        decision.audited(),
        Some(json!({"rule": "server rule 1", "action": "deny"}))
    );
}

#[test]
fn a_rule_over_the_arguments_denies_a_pattern_and_keeps_the_tool_listed() {
    let rules = json!([{
        "match": "has(arguments.query) && arguments.query.matches('(?i)password')",
        "action": "deny", "reason": "do not search for credentials"}]);
    let catalog = catalog(&config(rules, "researcher"));
    assert!(listed(&catalog).contains(&"docs_search_docs".to_owned()));
    let decide = |arguments: Value| catalog.rules.decide("docs_search_docs", &arguments).action;
    assert_eq!(decide(json!({"query": "install"})), Action::Allow);
    assert_eq!(decide(json!({"query": "admin PASSWORD"})), Action::Deny);
    assert_eq!(decide(json!({})), Action::Allow);
}

#[test]
fn a_run_rule_cannot_lift_a_server_deny_but_can_add_one() {
    let rules = json!([
        {"match": "tool.name == 'delete_page'", "action": "deny", "reason": "no deleting"},
        {"match": "true", "action": "allow", "layer": "run"},
        {"match": "tool.name == 'search_docs'", "action": "deny", "layer": "run"},
    ]);
    let both = catalog(&config(rules, "researcher"));
    let decision = both.rules.decide("docs_delete_page", &json!({"path": "/"}));
    assert_eq!(
        (decision.action, decision.describe()),
        (Action::Deny, "server rule 0".into())
    );
    // The run's first rule (allow everything) decides the run layer: search stays allowed.
    assert_eq!(both.rules.decide("docs_search_docs", &json!({})), ALLOWED);
    let run_deny = catalog(&config(
        json!([{"match": "true", "action": "deny", "layer": "run"}]),
        "r",
    ));
    let decision = run_deny.rules.decide("docs_search_docs", &json!({}));
    assert_eq!(
        (decision.action, decision.describe()),
        (Action::Deny, "run rule 0".into())
    );
    assert!(listed(&run_deny).is_empty());
    let hint = denied("docs_search_docs", &decision).hint;
    assert!(
        hint.starts_with("a policy rule does not allow this call (the run rule 0"),
        "{hint}"
    );
}

#[test]
fn a_rule_that_cannot_be_evaluated_fails_closed() {
    // arguments.path is missing in the call: the deny rule counts as matching.
    let deny = json!([{"match": "arguments.path.startsWith('/etc')", "action": "deny"}]);
    let denying = catalog(&config(deny, "researcher"));
    assert_eq!(
        denying.rules.decide("docs_delete_page", &json!({})).action,
        Action::Deny
    );
    assert_eq!(
        denying
            .rules
            .decide("docs_delete_page", &json!({"path": "/tmp"}))
            .action,
        Action::Allow
    );
    let allow_then_deny = json!([
        {"match": "arguments.path.startsWith('/tmp')", "action": "allow"},
        {"match": "true", "action": "deny"},
    ]);
    let guarded = catalog(&config(allow_then_deny, "researcher"));
    let decision = guarded.rules.decide("docs_delete_page", &json!({}));
    assert_eq!(
        (decision.action, decision.describe()),
        (Action::Deny, "server rule 1".into())
    );
    let tmp = json!({"path": "/tmp/x"});
    assert_eq!(
        guarded.rules.decide("docs_delete_page", &tmp).action,
        Action::Allow
    );
    // A rule reading arguments before the deny keeps the tool listed.
    assert_eq!(listed(&guarded).len(), 2);
    // A static rule that errors (a type error) fails closed too, and hides the tool.
    let wrong = json!([{"match": "tool.name + 1 == 2", "action": "deny"}]);
    assert!(listed(&catalog(&config(wrong, "r"))).is_empty());
    let wrong_allow = json!([{"match": "tool.name + 1 == 2", "action": "allow"},
                             {"match": "tool.name == 'delete_page'", "action": "deny"}]);
    assert_eq!(listed(&catalog(&config(wrong_allow, "r"))), ["docs_search_docs"]);
}

fn pins() -> Value {
    json!({"search_docs": definition_digest(&search()), "delete_page": definition_digest(&delete())})
}

#[test]
fn rules_see_the_pinned_annotations_only_when_the_definition_is_the_pinned_one() {
    let rules = json!([{"match": "tool.annotations.destructiveHint == true", "action": "deny"}]);
    let pinned = catalog(&pinned_config(rules.clone(), "r", json!({"toolDigests": pins()})));
    assert_eq!(
        pinned.rules.decide("docs_delete_page", &json!({})).action,
        Action::Deny
    );
    // search_docs's pinned annotations have no destructiveHint: the rule cannot be read and
    // fails closed, as in Python.
    assert_eq!(listed(&pinned), Vec::<String>::new());
    let reading = json!([{"match": "has(tool.annotations.readOnlyHint) && tool.annotations.readOnlyHint", "action": "deny"}]);
    let read_only = catalog(&pinned_config(
        reading.clone(),
        "r",
        json!({"toolDigests": pins()}),
    ));
    assert_eq!(listed(&read_only), ["docs_delete_page"]);
    // Off: no pin is trusted, whatever the digests say.
    let off = json!({"toolDigests": pins(), "pinning": "off"});
    assert_eq!(
        listed(&catalog(&pinned_config(reading.clone(), "r", off))).len(),
        2
    );
    // A pin of another definition: none either (and the drifted tool is not listed anyway).
    let mut other = pins();
    other["delete_page"] = json!("0".repeat(64));
    let drifted = catalog(&pinned_config(
        json!([{"match": "tool.annotations == {}", "action": "deny"}]),
        "r",
        json!({"toolDigests": other}),
    ));
    assert_eq!(
        drifted.rules.decide("docs_delete_page", &json!({})).action,
        Action::Deny
    );
    assert_eq!(
        drifted.rules.decide("docs_search_docs", &json!({})).action,
        Action::Allow
    );
    // An override's title is the title a rule reads; the annotations stay the server's.
    let titled =
        json!([{"match": "tool.title == 'Erase' && tool.annotations.title == 'Delete'", "action": "deny"}]);
    let mut annotated = delete();
    annotated["annotations"]["title"] = json!("Delete");
    let digests = json!({"delete_page": definition_digest(&annotated)});
    let more = json!({"toolDigests": digests, "overrides": [{"name": "delete_page", "title": "Erase"}]});
    let config = pinned_config(titled, "r", more);
    let mut overridden = Catalog::build(&config.servers, &[Some(vec![annotated])], &Scrubber::default());
    overridden.rules = RuleBook::build(&config, &overridden.entries);
    assert_eq!(
        overridden.rules.decide("docs_delete_page", &json!({})).action,
        Action::Deny
    );
    assert!(listed(&overridden).is_empty());
}

#[test]
fn without_a_pin_the_annotations_are_not_trusted_and_the_rule_fails_closed() {
    let rules = json!([{"match": "tool.annotations.destructiveHint == true", "action": "deny"}]);
    let unpinned = catalog(&config(rules, "researcher"));
    assert_eq!(
        unpinned.rules.decide("docs_delete_page", &json!({})).action,
        Action::Deny
    );
    assert_eq!(
        unpinned.rules.decide("docs_search_docs", &json!({})).action,
        Action::Deny
    );
    let reading = json!([{"match": "tool.annotations == {}", "action": "deny"}]);
    assert!(listed(&catalog(&config(reading, "r"))).is_empty());
}

#[test]
fn a_rule_reads_the_caller_the_server_and_the_tool_as_python_builds_them() {
    let rules = json!([{"match": "caller == {'run': 'r1', 'namespace': 'team', 'serviceAccount': 'ci', 'pod': 'r1'} && server == {'name': 'docs', 'namespace': 'team'} && tool.exposedName == 'docs_' + tool.name && tool.title == (tool.name == 'delete_page' ? 'Delete' : '')",
                        "action": "deny"}]);
    assert!(listed(&catalog(&config(rules, "ci"))).is_empty());
    // Without an identity the caller's account and pod are empty.
    let mut bare = config(
        json!([{"match": "caller.serviceAccount == '' && caller.pod == ''", "action": "deny"}]),
        "x",
    );
    bare.identity = None;
    assert!(listed(&catalog(&bare)).is_empty());
}

#[test]
fn arguments_reach_cel_with_the_types_python_gives_them() {
    let rules = json!([{"match": "type(arguments.i) == int && type(arguments.u) == uint && type(arguments.f) == double && arguments.l.exists(x, x == 'b') && arguments.m.k == null && arguments.f == 1",
                        "action": "deny"}]);
    let catalog = catalog(&config(rules, "r"));
    let call =
        json!({"i": -3, "u": 9_223_372_036_854_775_808_u64, "f": 1.0, "l": ["a", "b"], "m": {"k": null}});
    assert_eq!(
        catalog.rules.decide("docs_search_docs", &call).action,
        Action::Deny
    );
    let other = json!({"i": 1.5, "u": 1, "f": 1.0, "l": [], "m": {"k": null}});
    assert_eq!(
        catalog.rules.decide("docs_search_docs", &other).action,
        Action::Allow
    );
    // A result that is not `true` is no match, and no error.
    let number = json!([{"match": "1", "action": "deny"}]);
    assert_eq!(listed(&super::tests::catalog(&config(number, "r"))).len(), 2);
}

#[test]
fn a_tool_without_rules_and_an_unknown_tool_are_allowed() {
    let catalog = catalog(&config(json!([]), "r"));
    assert_eq!(catalog.rules.decide("docs_delete_page", &json!({})), ALLOWED);
    assert_eq!(catalog.rules.decide("nothing", &json!({})), ALLOWED);
    assert_eq!(listed(&catalog).len(), 2);
}

#[test]
fn a_bad_expression_is_refused_when_the_file_is_read_naming_the_rule() {
    for (expression, words) in [
        ("tool.name ==", "not a valid CEL expression"),
        ("tol.name == 'x'", "Undefined variable"),
    ] {
        let text = json!({
            "apiVersion": "mcp-operator.dev/v1alpha1", "kind": "BridgeConfig",
            "run": {"name": "r1", "namespace": "team"},
            "servers": [{"name": "docs", "namespace": "team", "url": "http://d/", "prefix": "docs",
                         "policy": {"rules": [{"match": "true", "action": "allow"},
                                              {"match": expression, "action": "deny"}]}}],
        });
        let refused = parse(&text.to_string(), "f").unwrap_err();
        assert!(
            refused.contains("servers[0].policy.rules[1].match") && refused.contains(words),
            "{refused}"
        );
    }
    // A comprehension's own names are no unknown variables.
    let fine = json!([{"match": "arguments.l.exists(x, x == tool.name)", "action": "deny"}]);
    assert_eq!(config(fine, "r").servers[0].policy.rules.len(), 1);
}

#[test]
fn an_evaluation_error_is_told_without_the_values_of_the_call() {
    let rules = json!([{"match": "arguments.q + 1 == 2 || arguments.q[arguments.q] == 1", "action": "deny"}]);
    let catalog = catalog(&config(rules, "r"));
    let marker = json!({"q": "sekrit-9f41"});
    assert_eq!(
        catalog.rules.decide("docs_search_docs", &marker).action,
        Action::Deny
    );
    let tool = &catalog.rules.tools["docs_search_docs"];
    let scope = {
        let mut scope = tool.context.new_inner_scope();
        scope.add_variable_from_value("arguments", to_cel(&marker));
        scope
    };
    for expression in [
        "arguments.q + 1",
        "arguments.q.matches(arguments.q + '(')",
        "{'a': 1}[arguments.q]",
    ] {
        let error = Program::compile(expression).unwrap().execute(&scope).unwrap_err();
        assert!(
            error.to_string().contains("sekrit") || expression.contains("[arguments.q]"),
            "{error}"
        );
        let told = plain(&error, expression);
        assert!(!told.contains("sekrit"), "{told}");
    }
    let missing = Program::compile("arguments.path")
        .unwrap()
        .execute(&scope)
        .unwrap_err();
    assert_eq!(plain(&missing, "arguments.path"), "No such key: path");
}
