//! The headers a server is sent beyond the protocol's own: its configured headers and
//! `tokenFile` read now (the kubelet rotates them) or its OAuth token (`oauth`), never over
//! the protocol's headers; why a server cannot be called as configured; the values the
//! scrubber masks (the OAuth client secret too); and the SDK's encoding of a header value
//! (`Mcp-Name`).

use hyper::header::{HeaderName, HeaderValue};

use super::{Failure, Upstream};
use crate::bridge::config::Server;

/// Headers the session sets itself: a server's configured headers cannot replace them.
const PROTOCOL_HEADERS: [&str; 7] = [
    "content-type",
    "accept",
    "accept-encoding",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
];

impl Upstream {
    /// The configured headers and the token, read now (files are re-read: the kubelet rotates
    /// them).
    pub(in crate::bridge) fn configured_headers(&self) -> Result<Vec<(HeaderName, HeaderValue)>, Failure> {
        let mut out = Vec::new();
        let mut named_authorization = false;
        for header in &self.server.headers {
            let lower = header.name.to_ascii_lowercase();
            if PROTOCOL_HEADERS.contains(&lower.as_str()) {
                continue;
            }
            let value = match (&header.value, &header.value_file) {
                (Some(value), _) => value.clone(),
                (None, Some(file)) => std::fs::read_to_string(file)
                    .map_err(|e| {
                        Failure::Misconfigured(format!(
                            "the value of header {} cannot be read from {}: {e}",
                            header.name,
                            file.display()
                        ))
                    })?
                    .trim()
                    .to_owned(),
                (None, None) => continue,
            };
            let name = HeaderName::from_bytes(lower.as_bytes())
                .map_err(|_| Failure::Misconfigured(format!("header name {} is not valid", header.name)))?;
            let value = HeaderValue::from_str(&value).map_err(|_| {
                Failure::Misconfigured(format!(
                    "the value of header {} has a control character",
                    header.name
                ))
            })?;
            named_authorization |= lower == "authorization";
            out.push((name, value));
        }
        if let Some(token) = self.oauth.as_ref().and_then(|o| o.current())
            && !named_authorization
        {
            let value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| Failure::Misconfigured("the OAuth token is not a header value".to_owned()))?;
            out.push((hyper::header::AUTHORIZATION, value));
        } else if let Some(file) = &self.server.token_file
            && !named_authorization
        {
            let token = std::fs::read_to_string(file).unwrap_or_default();
            let token = token.trim();
            if token.is_empty() {
                return Err(Failure::Misconfigured(format!(
                    "the token file {} is missing or empty",
                    file.display()
                )));
            }
            let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                Failure::Misconfigured(format!("the token in {} is not a header value", file.display()))
            })?;
            out.push((hyper::header::AUTHORIZATION, value));
        }
        Ok(out)
    }
}

/// Why the server cannot be called as configured, read now (`bridge/upstreams.py`'s rule):
/// a header file that cannot be read, or a header that would break or forge the request's
/// head; the reason (`UnreadableHeader`, `InvalidHeader`) and a sentence without the value.
pub fn header_problem(server: &Server) -> Option<(&'static str, String)> {
    let key = server.key();
    let mut values = Vec::new();
    for header in &server.headers {
        match (&header.value, &header.value_file) {
            (Some(value), _) => values.push((header.name.as_str(), value.clone())),
            (None, Some(file)) => match std::fs::read_to_string(file) {
                Ok(text) => values.push((header.name.as_str(), text.trim().to_owned())),
                Err(error) => {
                    let why = error.to_string();
                    let why = why.split(" (os error").next().unwrap_or_default();
                    return Some((
                        "UnreadableHeader",
                        format!(
                            "header {} could not be read from {} ({why}), so the bridge does not call server {key} (check the Secret and its mount)",
                            header.name,
                            file.display()
                        ),
                    ));
                }
            },
            (None, None) => {}
        }
    }
    for (name, value) in values {
        let lowered = name.to_ascii_lowercase();
        let refusal = if name.is_empty() || HeaderName::from_bytes(name.as_bytes()).is_err() {
            format!("the header name '{name}' is not a valid HTTP token")
        } else if ["content-length", "host"].contains(&lowered.as_str())
            || crate::http::is_hop_by_hop(&lowered)
        {
            format!("the header '{name}' frames the request, which only the client may do")
        } else if lowered == "expect" {
            format!("the header '{name}' asks for an interim answer, which the client never awaits")
        } else if value
            .chars()
            .any(|c| (c < ' ' && c != '\t') || c == '\u{7f}' || c as u32 > 0xff)
        {
            format!("the value of header '{name}' holds a control character or non-Latin-1 text")
        } else {
            continue;
        };
        return Some((
            "InvalidHeader",
            format!(
                "{refusal}, so the bridge does not call server {key} (fix the header's value or its Secret)"
            ),
        ));
    }
    None
}

/// Every header value (and token) a server is sent: what the scrubber masks.
pub fn secret_values(server: &Server) -> Vec<String> {
    let mut values: Vec<String> = server
        .headers
        .iter()
        .filter_map(|header| match (&header.value, &header.value_file) {
            (Some(value), _) => Some(value.clone()),
            (None, Some(file)) => std::fs::read_to_string(file).ok().map(|t| t.trim().to_owned()),
            (None, None) => None,
        })
        .collect();
    if let Some(token) = server
        .token_file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok())
    {
        values.push(format!("Bearer {}", token.trim()));
    }
    values.extend(server.auth.iter().flat_map(super::oauth::secret_values));
    values
}
