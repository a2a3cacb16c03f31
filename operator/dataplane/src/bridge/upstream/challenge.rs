//! What a server's `401` or `403` asks for: the first challenge of its `WWW-Authenticate`
//! header read (RFC 9110 §11.6.1; the Bearer parameters of RFC 6750 §3 and
//! `resource_metadata` of RFC 9728 §5.1), and said in one sentence for the agent's hint, in
//! the words of `mcp/challenge.py` (the operator's probe says the same in status).
//!
//! Everything quoted from the server is cut and made printable: a challenge is the server's
//! text, and it reaches the agent.

use super::oauth::display_url;

/// The most characters of one quoted challenge value.
const MAX_TEXT: usize = 200;
/// The most bytes of a header that are read: a challenge is a line, not a document.
const MAX_HEADER: usize = 4096;

/// The first challenge of a `WWW-Authenticate` header: its scheme and parameters (the first
/// of a repeated name wins; names are case-insensitive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    params: Vec<(String, String)>,
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c)
}

impl Challenge {
    /// The first challenge of `header`, or `None` when it holds none.
    pub fn parse(header: &str) -> Option<Challenge> {
        let header = header.get(..MAX_HEADER).unwrap_or(header).trim();
        if header.is_empty() {
            return None;
        }
        let (scheme, rest) = header.split_once(' ').unwrap_or((header, ""));
        if !scheme.chars().all(is_tchar) {
            return None;
        }
        let mut params: Vec<(String, String)> = Vec::new();
        let mut rest = rest;
        while let Some((name, value, after)) = param(rest) {
            let name = name.to_ascii_lowercase();
            if !params.iter().any(|(known, _)| *known == name) {
                params.push((name, value));
            }
            rest = after;
        }
        Some(Challenge {
            scheme: scheme.to_owned(),
            params,
        })
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(known, _)| known == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn error(&self) -> Option<&str> {
        self.get("error")
    }

    pub fn scope(&self) -> Option<&str> {
        self.get("scope").filter(|scope| !scope.is_empty())
    }

    pub fn insufficient_scope(&self) -> bool {
        self.error() == Some("insufficient_scope")
    }

    fn resource_metadata(&self) -> Option<&str> {
        self.get("resource_metadata")
            .filter(|url| url.starts_with("https://") || url.starts_with("http://"))
    }
}

/// One `name=value` (a token or a quoted string, then an optional comma) at the start of
/// `text`: the name, the value unquoted and the text after it. `None` at a token68 or at the
/// next challenge (another scheme): the first challenge ends there.
fn param(text: &str) -> Option<(&str, String, &str)> {
    let text = text.trim_start();
    let name_end = text.find(|c: char| !is_tchar(c))?;
    if name_end == 0 {
        return None;
    }
    let (name, rest) = text.split_at(name_end);
    let rest = rest.trim_start().strip_prefix('=')?;
    if rest.starts_with('=') {
        return None; // a token68's padding (`abc==`), not a parameter
    }
    let rest = rest.trim_start();
    let (value, rest) = if let Some(quoted) = rest.strip_prefix('"') {
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        let mut end = None;
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => value.extend(chars.next().map(|(_, escaped)| escaped)),
                '"' => {
                    end = Some(at + 1);
                    break;
                }
                c => value.push(c),
            }
        }
        (value, &quoted[end?..])
    } else {
        let end = rest
            .find(|c: char| c.is_whitespace() || c == ',')
            .unwrap_or(rest.len());
        (rest[..end].to_owned(), &rest[end..])
    };
    let rest = rest.trim_start();
    Some((name, value, rest.strip_prefix(',').unwrap_or(rest)))
}

/// One sentence: what `place` answered with `status` and what it asks for (`challenge`, if
/// it sent one), ending with who can fix it.
pub fn explain(place: &str, status: u16, challenge: Option<&Challenge>) -> String {
    let Some(challenge) = challenge else {
        return format!("{place} answered HTTP {status} without a WWW-Authenticate challenge");
    };
    let mut parts = vec![if challenge.insufficient_scope() {
        format!("{place} answered HTTP {status}: the token lacks a scope it needs")
    } else {
        format!(
            "{place} answered HTTP {status} asking for {} authentication",
            printable(&challenge.scheme)
        )
    }];
    if let Some(scope) = challenge.scope() {
        parts.push(format!(
            "scope {}",
            super::super::errors::python_repr(&printable(scope))
        ));
    } else if challenge.insufficient_scope()
        && let Some(description) = challenge.get("error_description").filter(|d| !d.is_empty())
    {
        parts.push(printable(description));
    }
    if let Some(error) = challenge.error().filter(|e| !e.is_empty())
        && !challenge.insufficient_scope()
    {
        parts.push(format!("error {}", printable(error)));
    }
    if let Some(url) = challenge.resource_metadata() {
        parts.push(format!("resource metadata {}", display_url(url)));
    }
    let mut text = parts[0].clone();
    if parts.len() > 1 {
        text.push_str(&format!(" ({})", parts[1..].join("; ")));
    }
    text.push_str(if challenge.insufficient_scope() {
        ": grant the client that scope, or ask for it in spec.auth"
    } else {
        ": configure spec.auth (see docs/authentication.md)"
    });
    text
}

/// `value` with its unprintable characters as `?`, cut to `MAX_TEXT` characters.
fn printable(value: &str) -> String {
    let shown: String = value
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if shown.chars().count() <= MAX_TEXT {
        return shown;
    }
    let mut head: String = shown.chars().take(MAX_TEXT - 1).collect();
    head.push('…');
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(header: &str) -> Challenge {
        Challenge::parse(header).expect("a challenge")
    }

    #[test]
    fn the_bearer_parameters_are_read_quoted_or_not() {
        let found = read(
            r#"Bearer realm="mcp", error="insufficient_scope", scope="files:read files:write", resource_metadata="https://api.example/.well-known/oauth-protected-resource/mcp""#,
        );
        assert_eq!(found.scheme, "Bearer");
        assert!(found.insufficient_scope());
        assert_eq!(found.scope(), Some("files:read files:write"));
        assert_eq!(
            found.resource_metadata(),
            Some("https://api.example/.well-known/oauth-protected-resource/mcp")
        );
        let bare = read("Bearer error=invalid_token,scope=a");
        assert_eq!(bare.error(), Some("invalid_token"));
        assert_eq!(bare.scope(), Some("a"));
    }

    #[test]
    fn escapes_unquote_and_the_first_of_a_repeated_name_wins() {
        let found = read(r#"Bearer ERROR="a\"b", error="second""#);
        assert_eq!(found.error(), Some("a\"b"));
    }

    #[test]
    fn the_first_challenge_ends_at_the_next_scheme_or_a_token68() {
        let found = read(r#"Bearer scope="x", Basic realm="other""#);
        assert_eq!(found.scope(), Some("x"));
        assert_eq!(found.get("realm"), None);
        assert_eq!(read("Negotiate abc==").params, vec![]);
    }

    #[test]
    fn an_empty_or_malformed_header_is_no_challenge() {
        assert_eq!(Challenge::parse("  "), None);
        assert_eq!(Challenge::parse("Bea(rer x=y"), None);
        assert_eq!(read(r#"Bearer scope="unterminated"#).scope(), None);
        assert_eq!(
            read("Bearer resource_metadata=file:///etc").resource_metadata(),
            None
        );
    }

    #[test]
    fn the_sentence_names_what_the_server_asks_for_and_who_fixes_it() {
        assert_eq!(
            explain("Server a/b", 401, None),
            "Server a/b answered HTTP 401 without a WWW-Authenticate challenge"
        );
        let plain = read(r#"Bearer error="invalid_token", resource_metadata="https://u:p@x.example/m?q=1""#);
        assert_eq!(
            explain("Server a/b", 401, Some(&plain)),
            "Server a/b answered HTTP 401 asking for Bearer authentication (error invalid_token; \
             resource metadata https://x.example/m): configure spec.auth (see docs/authentication.md)"
        );
        let scoped = read(r#"Bearer error="insufficient_scope", scope="mcp:tools""#);
        assert_eq!(
            explain("Server a/b", 403, Some(&scoped)),
            "Server a/b answered HTTP 403: the token lacks a scope it needs (scope 'mcp:tools'): \
             grant the client that scope, or ask for it in spec.auth"
        );
        let described = read(r#"Bearer error="insufficient_scope", error_description="Required scope: x""#);
        assert!(explain("S", 403, Some(&described)).contains("(Required scope: x)"));
    }

    #[test]
    fn what_the_server_wrote_is_made_printable_and_cut() {
        let long = format!("Bearer scope=\"{}\u{7}\"", "s".repeat(300));
        let said = explain("S", 403, Some(&read(&long)));
        assert!(said.contains(&format!("{}…", "s".repeat(199))), "{said}");
        assert!(!said.contains('\u{7}'));
        let bell = read("Bearer error=\"a\u{7}b\"");
        assert!(explain("S", 401, Some(&bell)).contains("error a?b"));
    }
}
