//! The digest against vectors written by the Python function (`mcp/definitions.py::
//! definition_digest`), and the pins' verdicts and refusal (`tests/unit/test_bridge_policies.py`).

use serde_json::{Value, json};

use super::*;

/// (a tool as a server lists it, Python's `definition_digest` of it).
const VECTORS: [(&str, &str); 7] = [
    (
        r#"{"name":"echo"}"#,
        "f7817751a90d6baf078dd0e2d98b278faa025d83ccee00eb9b60100ad65bdcb9",
    ),
    (
        r#"{"name":"search_docs","description":"Search the docs.","inputSchema":{"type":"object","properties":{"query":{"type":"string"}}},"annotations":{"readOnlyHint":true}}"#,
        "1dd2ec33dc19faab443bd6fe9df25c7479f927e734cac04e338b1969f3ebb63e",
    ),
    (
        r#"{"annotations":{"readOnlyHint":true},"inputSchema":{"properties":{"query":{"type":"string"}},"type":"object"},"description":"Search the docs.","name":"search_docs","_meta":{"x":1},"icons":[]}"#,
        "1dd2ec33dc19faab443bd6fe9df25c7479f927e734cac04e338b1969f3ebb63e",
    ),
    (
        r#"{"name":"météo","title":"Météo ☀ — 天气 🌦","description":"Quote \" backslash \\ tab\t nl\n cr\r bs\b ff\f ctl\u0001\u001f del\u007f slash / lt < amp &","inputSchema":{"type":"object"}}"#,
        "76813df2cdba4af828c5b674ab601c50586f45ada66e22eb20962b8b30934558",
    ),
    (
        r#"{"name":"nums","inputSchema":{"type":"object","properties":{"n":{"type":"number","minimum":-0.5,"maximum":1e16,"multipleOf":0.0001,"default":1.0,"examples":[0.00001,1e15,123456789012345678,-3,0,2.5e-7,1e100,100.0,1.5e300,-0.0,12345.678,9007199254740993]}}}}"#,
        "0011ff509f12960cf78fea5f9d13987ba88b49da9498008e5ac1308c84941c44",
    ),
    (
        r#"{"name":"nested","outputSchema":{"type":"object","properties":{"z":{"a":[{"c":3,"b":[true,false,null]}],"A":{}},"Z":[]}},"annotations":{"title":"T","destructiveHint":false,"idempotentHint":true},"title":null,"description":null}"#,
        "5f26e14c69ab719f2879f1b791ed61804710c1f3a65520069ea9a5c7f6caa627",
    ),
    (
        r#"{"name":"keys","inputSchema":{"properties":{"é":1,"e":2,"E":3,"_":4,"~":5,"😀":6,"ﬀ":7,"":8}}}"#,
        "3eb17c61109b428ae6cd1b209b64113b2169fb50f5e113db604dcd631d078be7",
    ),
];

#[test]
fn the_digest_is_byte_for_byte_the_pythons() {
    for (text, python) in VECTORS {
        let tool: Value = serde_json::from_str(text).unwrap();
        assert_eq!(definition_digest(&tool), python, "{text}");
    }
}

#[test]
fn floats_are_written_as_pythons_repr() {
    for (value, python) in [
        (0.0_f64, "0.0"),
        (-0.0_f64, "-0.0"),
        (1.0_f64, "1.0"),
        (0.5_f64, "0.5"),
        (-0.5_f64, "-0.5"),
        (0.0001_f64, "0.0001"),
        (1e-05_f64, "1e-05"),
        (0.00012345_f64, "0.00012345"),
        (1000000000000000.0_f64, "1000000000000000.0"),
        (1e+16_f64, "1e+16"),
        (9999999999999998.0_f64, "9999999999999998.0"),
        (1.5e+16_f64, "1.5e+16"),
        (123.456_f64, "123.456"),
        (1e+100_f64, "1e+100"),
        (-2.5e-07_f64, "-2.5e-07"),
        (5e-324_f64, "5e-324"),
        (1.7976931348623157e+308_f64, "1.7976931348623157e+308"),
        (0.1_f64, "0.1"),
        (0.3333333333333333_f64, "0.3333333333333333"),
        (9007199254740992.0_f64, "9007199254740992.0"),
        (1e+22_f64, "1e+22"),
        (12345678.9_f64, "12345678.9"),
    ] {
        assert_eq!(python_float(value), python, "{value:e}");
    }
}

fn search() -> Value {
    json!({
        "name": "search_docs",
        "description": "Search the docs.",
        "inputSchema": {"type": "object", "properties": {"query": {"type": "string"}}},
        "annotations": {"readOnlyHint": true},
    })
}

#[test]
fn the_digest_covers_the_definition_and_not_meta_or_key_order() {
    let base = definition_digest(&search());
    let mut meta = search();
    meta["_meta"] = json!({"x": 1});
    meta["icons"] = json!([]);
    assert_eq!(definition_digest(&meta), base);
    let mut null_title = search();
    null_title["title"] = Value::Null;
    assert_eq!(definition_digest(&null_title), base);
    for (field, value) in [
        ("description", json!("other")),
        ("inputSchema", json!({"type": "object"})),
        ("outputSchema", json!({"type": "object"})),
        ("annotations", json!({"readOnlyHint": false})),
        ("title", json!("Search")),
    ] {
        let mut changed = search();
        changed[field] = value;
        assert_ne!(definition_digest(&changed), base, "{field}");
    }
}

fn server(pinning: &str, pins: Option<&[(&str, &str)]>) -> Server {
    let mut text =
        format!("{{name: docs, namespace: team, url: 'http://x/', prefix: docs, pinning: '{pinning}'");
    if let Some(pins) = pins {
        let listed: Vec<String> = pins.iter().map(|(k, v)| format!("{k}: '{v}'")).collect();
        text.push_str(&format!(", toolDigests: {{{}}}", listed.join(", ")));
    }
    text.push('}');
    serde_norway::from_str(&text).unwrap()
}

const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

#[test]
fn a_pin_that_is_not_the_live_digest_drifts_and_strict_refuses_the_unpinned() {
    let pinned = server("pin", Some(&[("echo", A)]));
    assert_eq!(drift(&pinned, "echo", A), None);
    assert_eq!(drift(&pinned, "echo", B), Some(Drift::Changed));
    assert_eq!(drift(&pinned, "new_tool", B), None);
    let strict = server("strict", Some(&[("echo", A)]));
    assert_eq!(drift(&strict, "new_tool", B), Some(Drift::Unapproved));
    assert_eq!(drift(&strict, "echo", B), Some(Drift::Changed));
    assert_eq!(drift(&server("off", Some(&[("echo", A)])), "echo", B), None);
    assert_eq!(drift(&server("strict", None), "echo", B), None);
}

#[test]
fn the_refusal_names_both_digests_and_when_the_tool_comes_back() {
    let pinned = server("pin", Some(&[("search_docs", A)]));
    let changed = refusal("docs_search_docs", &pinned, "search_docs", Drift::Changed, B);
    assert_eq!(changed.code, "definition_changed");
    assert!(changed.hint.starts_with(
        "The definition of docs_search_docs (its description, schema or annotations) on server team/docs is not the one"
    ));
    assert!(changed.hint.contains("next probe"), "{}", changed.hint);
    assert_eq!(changed.details["server"], "team/docs");
    assert_eq!(changed.details["pinning"], "pin");
    assert_eq!(changed.details["pinnedSha256"], A);
    assert_eq!(changed.details["liveSha256"], B);
    let strict = server("strict", Some(&[("search_docs", A)]));
    let unapproved = refusal("docs_new_tool", &strict, "new_tool", Drift::Unapproved, B);
    assert!(unapproved.hint.starts_with(
        "The tool docs_new_tool of server team/docs has no approved definition yet, so the bridge did not call it"
    ));
    assert!(unapproved.hint.contains("approves"), "{}", unapproved.hint);
    assert_eq!(unapproved.details["pinnedSha256"], Value::Null);
}

#[test]
fn pins_beyond_the_apis_bounds_are_problems() {
    assert!(problems(&server("pin", Some(&[("echo", A)])), "servers[0]").is_empty());
    assert!(problems(&server("pin", None), "servers[0]").is_empty());
    let long = "x".repeat(129);
    let found = problems(&server("pin", Some(&[(&long, A), ("''", A)])), "servers[2]");
    assert_eq!(
        found,
        ["servers[2].toolDigests: every tool name must have 1 to 128 characters"]
    );
    let mut many = server("pin", None);
    many.tool_digests = Some((0..5001).map(|i| (format!("t{i}"), A.to_owned())).collect());
    assert_eq!(
        problems(&many, "s"),
        ["s.toolDigests: must have at most 5000 items"]
    );
}
