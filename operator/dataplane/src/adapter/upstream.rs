//! The authenticating front of an HTTP-native MCP server in the same Pod (`--upstream-url`).
//!
//! Owns the adapter's other mode: no stdio child, but a server of the Pod that speaks MCP over
//! HTTP itself on a loopback port. Every request to the MCP path passes exactly the checks of
//! the stdio mode (`front`: Host/Origin, then the caller's token, 401/403 before the body is
//! read, then the byte budget), and is then forwarded with the hop-by-hop headers and both
//! credentials headers (`Authorization`, `Mcp-Operator-Authorization`) removed: the caller's
//! token is never passed on (MCP authorization spec). The answer streams back as it arrives —
//! a JSON body or an event stream alike, never buffered whole — until the upstream ends it or
//! the client goes (then the upstream connection is dropped, not reused). A request body is
//! read within `--max-body-bytes`; a `tools/call` is audited (`forwarded`, the upstream's
//! status). `/readyz` asks whether the upstream's port accepts connections.
//!
//! Only a loopback `http://` upstream is taken: a front that forwards off the Pod would be an
//! open proxy (the operator's NetworkPolicy admits only the front's port).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::HOST;
use hyper::{Request, Response, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use super::audit::{Audit, tool_of};
use super::metrics::Metrics;
use crate::http::{self, Body};

const LOOPBACK: [&str; 4] = ["127.0.0.1", "::1", "[::1]", "localhost"];

/// Request headers never forwarded besides the hop-by-hop ones (`http::HOP_BY_HOP`): the
/// credentials, and what frames this request.
const NOT_FORWARDED: [&str; 6] = [
    "host",
    "authorization",
    "mcp-operator-authorization",
    "content-length",
    "proxy-authorization",
    "expect",
];

/// Why `url` cannot be the front's upstream, or None.
pub fn url_problem(url: &str) -> Option<String> {
    let Ok(uri) = url.parse::<Uri>() else {
        return Some("--upstream-url must be an http:// URL".into());
    };
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Some("--upstream-url must be an http:// URL".into());
    }
    if !LOOPBACK.contains(&uri.host().unwrap_or_default()) {
        return Some("--upstream-url must name the loopback address (the server in the same Pod)".into());
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) || uri.query().is_some() {
        return Some("--upstream-url must have no credentials, query or fragment".into());
    }
    None
}

/// The upstream server of front mode, and what the front counts of it.
pub struct Upstream {
    url: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    inflight: AtomicUsize,
    forwarded: AtomicU64,
    failed: AtomicU64,
}

/// Counts a forwarded request in flight until its answer's body has ended or been dropped.
struct InFlight(Arc<Upstream>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.inflight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What one forwarded request needs of the front.
pub struct Forwarding<'a> {
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    pub request_timeout: Duration,
    pub audit: Option<(&'a Audit, &'a Value)>,
    pub metrics: &'a Metrics,
}

impl Upstream {
    /// The front of `url` (checked by `url_problem` at start).
    pub fn new(url: &str) -> Arc<Self> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        Arc::new(Self {
            url: url.parse().expect("--upstream-url was checked at start"),
            client: Client::builder(TokioExecutor::new()).build(connector),
            inflight: AtomicUsize::new(0),
            forwarded: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        })
    }

    /// Whether the upstream's port accepts a connection within a second.
    pub async fn accepts(&self) -> bool {
        let port = self.url.port_u16().unwrap_or(80);
        let host = self.url.host().unwrap_or("127.0.0.1").trim_matches(['[', ']']);
        let connecting = tokio::net::TcpStream::connect((host, port));
        matches!(
            tokio::time::timeout(Duration::from_secs(1), connecting).await,
            Ok(Ok(_))
        )
    }

    /// The health body of front mode.
    pub fn health(&self, ok: bool, auth: &str) -> Value {
        json!({
            "status": if ok { "ok" } else { "unavailable" },
            "upstream": self.url.to_string(),
            "auth": auth,
            "inflight": self.inflight.load(Ordering::Relaxed),
            "forwarded": self.forwarded.load(Ordering::Relaxed),
            "upstreamFailures": self.failed.load(Ordering::Relaxed),
        })
    }

    /// Forward one checked request and relay its answer as it arrives; 502 when the upstream
    /// does not answer within the request timeout.
    pub async fn forward(
        self: &Arc<Self>,
        request: Request<Incoming>,
        how: Forwarding<'_>,
    ) -> Response<Body> {
        let (parts, incoming) = request.into_parts();
        let body = match http::read_bytes(
            Request::from_parts(parts.clone(), incoming),
            how.max_body_bytes,
            how.body_timeout,
        )
        .await
        {
            Ok(body) => body,
            Err(refused) => return refused.response(),
        };
        let message: Option<Value> = (parts.method == hyper::Method::POST)
            .then(|| serde_json::from_slice(&body).ok())
            .flatten();
        let method = message
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut outgoing = Request::builder()
            .method(parts.method.clone())
            .uri(self.target(&parts.uri));
        for (name, value) in &parts.headers {
            if forwarded(name.as_str()) {
                outgoing = outgoing.header(name, value);
            }
        }
        let authority = self
            .url
            .authority()
            .map(|a| a.as_str().to_owned())
            .unwrap_or_default();
        outgoing = outgoing.header(HOST, authority);
        let Ok(outgoing) = outgoing.body(Full::new(body)) else {
            return http::plain(400, "The request could not be forwarded");
        };
        self.inflight.fetch_add(1, Ordering::Relaxed);
        let in_flight = InFlight(self.clone());
        let started = Instant::now();
        let answered = tokio::time::timeout(how.request_timeout, self.client.request(outgoing)).await;
        let status = match &answered {
            Ok(Ok(answer)) => Some(answer.status().as_u16()),
            _ => None,
        };
        if let Some(method) = &method {
            how.metrics.observe(
                method,
                status.is_none_or(|s| s >= 400),
                started.elapsed().as_secs_f64(),
            );
        }
        if let (Some((audit, caller)), Some("tools/call")) = (how.audit, method.as_deref()) {
            let tool = tool_of(message.as_ref().and_then(|m| m.get("params")));
            let seconds = started.elapsed().as_secs_f64();
            audit.record_with_status(caller, &tool, "forwarded", seconds, Some(status.unwrap_or(502)));
        }
        let answer = match answered {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => return self.failure(&error.to_string()),
            Err(_) => return self.failure("no answer within the request timeout"),
        };
        self.forwarded.fetch_add(1, Ordering::Relaxed);
        let (head, incoming) = answer.into_parts();
        let mut response = Response::new(Body::Relayed {
            body: incoming,
            _keep: Box::new(in_flight),
        });
        *response.status_mut() = head.status;
        for (name, value) in &head.headers {
            if !crate::http::is_hop_by_hop(name.as_str()) {
                response.headers_mut().append(name.clone(), value.clone());
            }
        }
        response
    }

    /// The upstream's URL for a request to the front's path (its query kept).
    fn target(&self, uri: &Uri) -> Uri {
        let path = self.url.path();
        let path_and_query = match uri.query() {
            Some(query) => format!("{path}?{query}"),
            None => path.to_owned(),
        };
        let mut parts = self.url.clone().into_parts();
        parts.path_and_query = path_and_query.parse().ok();
        Uri::from_parts(parts).unwrap_or_else(|_| self.url.clone())
    }

    fn failure(&self, why: &str) -> Response<Body> {
        self.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("Failed to forward a request to {}: {why}", self.url);
        http::plain(502, "The MCP server in this Pod did not answer")
    }
}

/// Whether a request header of this name (any case) is forwarded.
fn forwarded(name: &str) -> bool {
    let lowered = name.to_ascii_lowercase();
    !NOT_FORWARDED.contains(&lowered.as_str()) && !crate::http::is_hop_by_hop(&lowered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_loopback_http_url_is_an_upstream() {
        assert_eq!(url_problem("http://127.0.0.1:8081/mcp"), None);
        assert_eq!(url_problem("http://[::1]:8081/mcp"), None);
        assert!(
            url_problem("http://10.0.0.1:80/mcp")
                .unwrap()
                .contains("loopback")
        );
        assert!(url_problem("ftp://127.0.0.1/").unwrap().contains("http"));
        assert!(url_problem("http://user:pw@127.0.0.1/").is_some());
        assert!(url_problem("http://127.0.0.1/mcp?x=1").is_some());
    }

    #[test]
    fn credentials_and_hop_headers_are_never_forwarded() {
        assert!(!forwarded("Authorization"));
        assert!(!forwarded("mcp-operator-authorization"));
        assert!(!forwarded("connection") && !forwarded("Proxy-Connection") && !forwarded("TE"));
        assert!(forwarded("x-trace"));
        assert!(forwarded("mcp-session-id"));
    }
}
