//! The two ties of the legacy HTTP+SSE transport (`legacy_sse`), as
//! `mcp/legacy_routing.py` has them: the `POST` endpoint its stream names, resolved against
//! the stream's URL and refused on another origin, and the session it names; and the
//! stream's events (kind and data) as they arrive in chunks.

use bytes::BytesMut;

const MAX_ENDPOINT_CHARS: usize = 2048;

/// The session the endpoint names (`sessionId` or `session_id` of its query), else the
/// endpoint itself.
pub(super) fn session_of(endpoint: &hyper::Uri) -> String {
    let query = endpoint.query().unwrap_or_default();
    query
        .split('&')
        .find_map(|pair| {
            let (name, value) = pair.split_once('=')?;
            matches!(name, "sessionId" | "session_id").then(|| value.chars().take(256).collect())
        })
        .unwrap_or_else(|| endpoint.to_string())
}

/// A URI's scheme, host and port (the scheme's default when it names none).
fn origin(uri: &hyper::Uri) -> Option<(String, String, u16)> {
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return None,
    };
    let host = uri.host()?.to_ascii_lowercase();
    Some((scheme, host, uri.port_u16().unwrap_or(default)))
}

/// The URL the `endpoint` event's data names, resolved against the stream's URL; refused
/// when empty, too long, not a plain URL, or on another origin than the stream.
pub(super) fn endpoint_url(base: &hyper::Uri, data: &str) -> Result<hyper::Uri, String> {
    let text = data.trim();
    if text.is_empty() || text.len() > MAX_ENDPOINT_CHARS {
        return Err("the event stream named an endpoint that is empty or too long".to_owned());
    }
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority().map(|a| a.as_str()).unwrap_or_default();
    let resolved = if text.contains("://") {
        text.to_owned()
    } else if let Some(rest) = text.strip_prefix("//") {
        format!("{scheme}://{rest}")
    } else if text.starts_with('/') {
        format!("{scheme}://{authority}{text}")
    } else {
        let path = base.path();
        let folder = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let folder = if folder.is_empty() { "/" } else { folder };
        format!("{scheme}://{authority}{folder}{text}")
    };
    let resolved = resolved.split('#').next().unwrap_or_default().to_owned();
    if resolved.chars().any(|c| c <= ' ' || c >= '\u{7f}') {
        return Err("the event stream named an endpoint that is not a plain URL".to_owned());
    }
    let uri: hyper::Uri = resolved
        .parse()
        .map_err(|_| "the event stream named an endpoint that is not a plain URL".to_owned())?;
    if origin(&uri).is_none() || origin(&uri) != origin(base) {
        return Err(format!(
            "the event stream named an endpoint on another origin ({resolved}), which is refused: \
             the session's headers and credentials would go there"
        ));
    }
    Ok(uri)
}

/// Events of the stream as they arrive: each one's kind (`event:`) and data lines.
#[derive(Default)]
pub(super) struct Events {
    buffer: BytesMut,
}

impl Events {
    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The bytes of the event not yet complete.
    pub(super) fn pending(&self) -> usize {
        self.buffer.len()
    }

    pub(super) fn next_event(&mut self) -> Option<(String, String)> {
        let lf = self.buffer.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2));
        let crlf = self
            .buffer
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .map(|p| (p, 4));
        let (end, skip) = match (lf, crlf) {
            (Some(a), Some(b)) => {
                if a.0 <= b.0 {
                    a
                } else {
                    b
                }
            }
            (a, b) => a.or(b)?,
        };
        let raw = self.buffer.split_to(end + skip);
        let block = String::from_utf8_lossy(&raw[..end]);
        let (mut kind, mut data) = (String::new(), String::new());
        for line in block.split('\n') {
            let line = line.strip_suffix('\r').unwrap_or(line);
            if let Some(rest) = line.strip_prefix("event:") {
                kind = rest.trim().to_owned();
            } else if let Some(rest) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            }
        }
        Some((kind, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> hyper::Uri {
        "http://127.0.0.1:8080/sse".parse().unwrap()
    }

    #[test]
    fn an_endpoint_is_resolved_against_the_stream_and_names_its_session() {
        let uri = endpoint_url(&base(), " /message?sessionId=s-1 ").unwrap();
        assert_eq!(uri.to_string(), "http://127.0.0.1:8080/message?sessionId=s-1");
        assert_eq!(session_of(&uri), "s-1");
        let relative = endpoint_url(&base(), "messages/?session_id=x#frag").unwrap();
        assert_eq!(
            relative.to_string(),
            "http://127.0.0.1:8080/messages/?session_id=x"
        );
        assert_eq!(session_of(&relative), "x");
        let same = endpoint_url(&base(), "HTTP://127.0.0.1:8080/m").unwrap();
        assert_eq!(session_of(&same), same.to_string());
        let default_port = endpoint_url(&"https://h.test/sse".parse().unwrap(), "https://h.test:443/m");
        assert!(default_port.is_ok());
    }

    #[test]
    fn an_endpoint_elsewhere_or_not_plain_is_refused() {
        for elsewhere in [
            "http://127.0.0.1:9/m",
            "https://127.0.0.1:8080/m",
            "//evil.test/m",
            "http://localhost:8080/m",
        ] {
            let refused = endpoint_url(&base(), elsewhere).unwrap_err();
            assert!(refused.contains("on another origin ("), "{elsewhere}: {refused}");
        }
        assert!(
            endpoint_url(&base(), "/a b")
                .unwrap_err()
                .contains("not a plain URL")
        );
        assert!(
            endpoint_url(&base(), "/\u{e9}")
                .unwrap_err()
                .contains("not a plain URL")
        );
        assert!(
            endpoint_url(&base(), "  ")
                .unwrap_err()
                .contains("empty or too long")
        );
        let long = format!("/{}", "a".repeat(MAX_ENDPOINT_CHARS));
        assert!(
            endpoint_url(&base(), &long)
                .unwrap_err()
                .contains("empty or too long")
        );
    }

    #[test]
    fn events_are_read_across_chunks_with_their_kind() {
        let mut events = Events::default();
        events.push(b"event: endpoint\ndata: /m?sessionId=1\n\n: comment\n\nevent: mess");
        assert_eq!(
            events.next_event(),
            Some(("endpoint".into(), "/m?sessionId=1".into()))
        );
        assert_eq!(events.next_event(), Some((String::new(), String::new())));
        assert_eq!(events.next_event(), None);
        events.push(b"age\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n");
        assert_eq!(
            events.next_event(),
            Some(("message".into(), "{\"a\":\n1}".into()))
        );
        assert_eq!(events.pending(), 0);
    }
}
