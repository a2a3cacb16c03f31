//! Resource URIs namespaced per server, reversibly (`mcp/uris.py`): the prefix and a `.` go
//! where the URI's authority (or opaque part) begins, the scheme stays (`ui://chart/app` of
//! prefix `apps` is `ui://apps.chart/app`, `urn:isbn:1` is `urn:apps.isbn:1`, text without
//! a scheme gets `apps.` in front); a URI is mapped back only when mapping the result forward
//! again gives the same text. URI templates alike. The empty prefix leaves URIs as they are.
//! Pure.

/// The URI's head (scheme, `:` and `//` when present) and the rest.
fn split(uri: &str) -> (&str, &str) {
    let bytes = uri.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return ("", uri);
    }
    let end = bytes
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'.' | b'-')))
        .unwrap_or(bytes.len());
    if bytes.get(end) != Some(&b':') {
        return ("", uri);
    }
    let mut head = end + 1;
    if uri[head..].starts_with("//") {
        head += 2;
    }
    uri.split_at(head)
}

/// The URI agents see for the server of `prefix`'s `uri`.
pub fn exposed_uri(prefix: &str, uri: &str) -> String {
    if prefix.is_empty() {
        return uri.to_owned();
    }
    let (head, rest) = split(uri);
    format!("{head}{prefix}.{rest}")
}

/// The server's own URI behind `exposed`, or None when it is no URI of the server of `prefix`.
pub fn original_uri(prefix: &str, exposed: &str) -> Option<String> {
    if prefix.is_empty() {
        return Some(exposed.to_owned());
    }
    let marker = format!("{prefix}.");
    let (head, rest) = split(exposed);
    let mut candidates = Vec::new();
    if let Some(tail) = rest.strip_prefix(&marker) {
        candidates.push(format!("{head}{tail}"));
    }
    if let Some(tail) = exposed.strip_prefix(&marker) {
        candidates.push(tail.to_owned());
    }
    candidates
        .into_iter()
        .find(|candidate| exposed_uri(prefix, candidate) == exposed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_namespaced_where_the_authority_begins() {
        assert_eq!(
            exposed_uri("apps", "ui://chart/app.html"),
            "ui://apps.chart/app.html"
        );
        assert_eq!(exposed_uri("apps", "file:///README.md"), "file://apps./README.md");
        assert_eq!(exposed_uri("apps", "urn:isbn:123"), "urn:apps.isbn:123");
        assert_eq!(exposed_uri("apps", "notes://{name}"), "notes://apps.{name}");
        assert_eq!(exposed_uri("apps", "plain text"), "apps.plain text");
        assert_eq!(exposed_uri("", "ui://x"), "ui://x");
    }

    #[test]
    fn an_exposed_uri_maps_back_only_to_its_own_server() {
        for uri in [
            "ui://chart/app.html",
            "file:///README.md",
            "urn:isbn:123",
            "plain",
            "demo://resource/static/1",
        ] {
            assert_eq!(
                original_uri("apps", &exposed_uri("apps", uri)).as_deref(),
                Some(uri)
            );
        }
        assert_eq!(original_uri("apps", "ui://other.chart/x"), None);
        assert_eq!(original_uri("ev", "ui://apps.chart/x"), None);
    }
}
