//! Where a request's bearer token comes from: `Mcp-Operator-Authorization` (the header the
//! operator's probe uses through the API server's service proxy, which consumes
//! `Authorization`) when it is set, else `Authorization`; missing, not a bearer token, or
//! the token.

use hyper::Request;

/// What a request's credentials are.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Credential<'a> {
    /// No (or an empty) header: 401 `Bearer`, no error code (RFC 6750 §3.1).
    Missing,
    /// A header that is not a bearer token (another scheme, no token): `invalid_token`.
    NotBearer,
    Token(&'a str),
}

/// The credential of a request: `Mcp-Operator-Authorization` when it is set, else
/// `Authorization`.
pub(super) fn bearer<B>(request: &Request<B>) -> Credential<'_> {
    let Some(value) = ["mcp-operator-authorization", "authorization"]
        .iter()
        .find_map(|name| request.headers().get(*name).filter(|v| !v.is_empty()))
    else {
        return Credential::Missing;
    };
    let Ok(value) = value.to_str() else {
        return Credential::NotBearer;
    };
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    match token.trim_matches(' ') {
        token if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() => Credential::Token(token),
        _ => Credential::NotBearer,
    }
}
