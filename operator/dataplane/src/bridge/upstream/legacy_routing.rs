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
    } else if text.starts_with('?') {
        format!("{scheme}://{authority}{}{text}", base.path())
    } else {
        let path = base.path();
        let folder = &path[..path.rfind('/').map_or(0, |i| i + 1)];
        let folder = if folder.is_empty() { "/" } else { folder };
        format!("{scheme}://{authority}{folder}{text}")
    };
    let resolved = resolved.split('#').next().unwrap_or_default();
    let not_plain = || "the event stream named an endpoint that is not a plain URL".to_owned();
    if resolved.chars().any(|c| c <= ' ' || c >= '\u{7f}') {
        return Err(not_plain());
    }
    let uri: hyper::Uri = resolved.parse().map_err(|_| not_plain())?;
    let (Some(scheme), Some(host)) = (uri.scheme_str(), uri.host()) else {
        return Err(not_plain());
    };
    // Without userinfo, query and fragment: safe to show (`display_url`), and to send.
    let port = uri.port().map(|p| format!(":{p}")).unwrap_or_default();
    let shown = format!("{scheme}://{host}{port}{}", uri.path());
    if origin(&uri).is_none() || origin(&uri) != origin(base) {
        return Err(format!(
            "the event stream named an endpoint on another origin ({shown}), which is refused: \
             the session's headers and credentials would go there"
        ));
    }
    let query = uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    format!("{shown}{query}").parse().map_err(|_| not_plain())
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

    const SSE: &str = "http://mcp.example:8080/sse";

    fn resolved(base: &str, data: &str) -> Result<String, String> {
        endpoint_url(&base.parse().unwrap(), data).map(|uri| uri.to_string())
    }

    #[test]
    fn an_endpoint_on_the_streams_origin_is_resolved_against_it() {
        for (data, expected) in [
            (
                "/message?sessionId=abc",
                "http://mcp.example:8080/message?sessionId=abc",
            ),
            (
                "message?sessionId=abc",
                "http://mcp.example:8080/message?sessionId=abc",
            ),
            ("  /m\n", "http://mcp.example:8080/m"),
            ("http://mcp.example:8080/m", "http://mcp.example:8080/m"),
            ("HTTP://MCP.Example:8080/m", "http://MCP.Example:8080/m"), // the same origin
            ("//mcp.example:8080/m", "http://mcp.example:8080/m"),
            ("/m#part", "http://mcp.example:8080/m"),
            ("http://who@mcp.example:8080/m", "http://mcp.example:8080/m"), // no userinfo
            ("?sessionId=1", "http://mcp.example:8080/sse?sessionId=1"),
        ] {
            assert_eq!(resolved(SSE, data).as_deref(), Ok(expected), "{data}");
        }
    }

    #[test]
    fn a_default_port_is_the_same_origin_written_or_not() {
        let written = resolved("https://h.example/sse", "https://h.example:443/m");
        assert_eq!(written.as_deref(), Ok("https://h.example:443/m"));
        let unwritten = resolved("http://h.example:80/sse", "http://h.example/m");
        assert_eq!(unwritten.as_deref(), Ok("http://h.example/m"));
    }

    #[test]
    fn an_endpoint_on_another_origin_is_refused() {
        for data in [
            "http://evil.example:8080/message",       // another host
            "http://mcp.example:9090/message",        // another port
            "https://mcp.example:8080/message",       // another scheme
            "http://mcp.example/message",             // port 80, not 8080
            "//evil.example/message",                 // scheme-relative elsewhere
            "file:///etc/passwd",                     // no origin at all
            "http://mcp.example:8080@evil.example/m", // userinfo that looks like the host
            "http://mcp.example:99999/m",             // no port at all
        ] {
            assert!(resolved(SSE, data).is_err(), "{data}");
        }
        let refused = resolved(SSE, "http://who@evil.example:1/m?sessionId=secret").unwrap_err();
        assert!(
            refused.contains("on another origin (http://evil.example:1/m), which is refused"),
            "{refused}"
        );
    }

    #[test]
    fn an_endpoint_that_could_not_go_on_a_request_line_as_it_is_is_refused() {
        let long = format!("/{}", "a".repeat(MAX_ENDPOINT_CHARS));
        for data in [
            "",
            "   ",
            "/m\r\nx-forged: 1",
            "/a b",
            "/m\u{0}",
            "/\u{e9}",
            long.as_str(),
        ] {
            assert!(resolved(SSE, data).is_err(), "{data:?}");
        }
    }

    #[test]
    fn the_endpoint_names_its_session() {
        let named = |data: &str| session_of(&endpoint_url(&SSE.parse().unwrap(), data).unwrap());
        assert_eq!(named("/m?sessionId=s-1"), "s-1");
        assert_eq!(named("/m?x=1&session_id=s-2"), "s-2");
        assert_eq!(named("/m"), "http://mcp.example:8080/m");
    }

    #[test]
    fn events_give_each_events_type_with_its_data_across_chunks() {
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
