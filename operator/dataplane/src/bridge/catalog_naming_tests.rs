//! The catalog's names against the catalog before it and the run's filter layers (the
//! Python catalog's incumbents and `ToolPlan.narrowed`).

use serde_json::json;

use super::*;

fn server(name: &str, prefix: &str, deny: &[&str]) -> Server {
    let text = format!(
        "{{name: {name}, namespace: default, url: 'http://x/', prefix: '{prefix}', filters: [{{deny: {deny:?}}}]}}"
    );
    serde_norway::from_str(&text).unwrap()
}

#[test]
fn a_tool_of_the_catalog_before_keeps_its_name_against_a_newcomer() {
    let scrubber = Scrubber::default();
    let docs = || server("docs", "docs", &[]);
    let before = Catalog::build(
        &[docs()],
        &[Some(vec![json!({"name": "search_docs"})])],
        &scrubber,
    );
    let both = Some(vec![
        json!({"name": "search.docs"}),
        json!({"name": "search_docs"}),
    ]);
    // With no catalog before, the first by original name ("." sorts before "_").
    let fresh = Catalog::build(&[docs()], std::slice::from_ref(&both), &scrubber);
    assert_eq!(fresh.get("docs_search_docs").unwrap().original, "search.docs");
    let after = Catalog::build_after(&[docs()], std::slice::from_ref(&both), &scrubber, &before);
    assert_eq!(after.get("docs_search_docs").unwrap().original, "search_docs");
    assert_eq!(after.entries.len(), 1);
    // Held by the server's key, not its index: a reload put another server before it.
    let reordered = [server("other", "o", &[]), docs()];
    let after = Catalog::build_after(&reordered, &[None, both.clone()], &scrubber, &after);
    let entry = after.get("docs_search_docs").unwrap();
    assert_eq!((entry.server, entry.original.as_str()), (1, "search_docs"));
    // Another server's tools are no incumbents of this one.
    let renamed = [server("wiki", "docs", &[])];
    let other = Catalog::build_after(&renamed, std::slice::from_ref(&both), &scrubber, &after);
    assert_eq!(other.get("docs_search_docs").unwrap().original, "search.docs");
}

#[test]
fn a_later_filter_layer_narrows_without_renaming() {
    // The server's own layer names both tools; the run's layer then removes the holder:
    // the other one was left out by the plan and does not take the name over.
    let mut docs = server("docs", "docs", &[]);
    docs.filters
        .push(server("x", "x", &["search.docs"]).filters.remove(0));
    let both = [Some(vec![
        json!({"name": "search_docs"}),
        json!({"name": "search.docs"}),
        json!({"name": "add"}),
    ])];
    let catalog = Catalog::build(&[docs], &both, &Scrubber::default());
    assert_eq!(catalog.names(), ["docs_add"]);
}
