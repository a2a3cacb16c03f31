//! HTTP pieces every server side shares: the accept loop (HTTP/1.1 keep-alive, a deadline
//! on request heads), the response body (whole, a stream of Server-Sent Events fed by a
//! channel, or another server's body relayed), plain and JSON answers, and reading a request
//! body within a limit. No protocol here.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use serde_json::Value;
use tokio::sync::mpsc;

/// A response body: all of it at once, SSE events as a channel yields them, or another
/// server's body relayed as it arrives (with what must live as long as the relay).
pub enum Body {
    Whole(Option<Bytes>),
    Events(mpsc::Receiver<Value>),
    Relayed {
        body: Incoming,
        _keep: Box<dyn Send + Sync>,
    },
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Events(events) => events
                .poll_recv(cx)
                .map(|event| event.map(|message| Ok(Frame::data(sse_event(&message))))),
            // An upstream that breaks mid-body ends the relay: the client sees a short body.
            Body::Relayed { body, .. } => match Pin::new(body).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
                Poll::Ready(Some(Err(_)) | None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, Body::Whole(None))
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Whole(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Body::Whole(None) => SizeHint::with_exact(0),
            Body::Events(_) | Body::Relayed { .. } => SizeHint::default(),
        }
    }
}

/// One JSON-RPC message as one SSE `message` event.
pub fn sse_event(message: &Value) -> Bytes {
    let mut out = Vec::with_capacity(128);
    out.extend_from_slice(b"event: message\ndata: ");
    serde_json::to_writer(&mut out, message).expect("a Value always encodes");
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

pub fn plain(status: u16, text: &str) -> Response<Body> {
    let mut response = Response::new(Body::Whole(Some(Bytes::copy_from_slice(text.as_bytes()))));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The headers that frame one hop (RFC 9110 §7.6.1, and the `Proxy-Connection` of old
/// clients): never forwarded to another hop, never set by configuration.
pub const HOP_BY_HOP: [&str; 7] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Whether `name` (any case) is a hop-by-hop header.
pub fn is_hop_by_hop(name: &str) -> bool {
    HOP_BY_HOP.iter().any(|hop| hop.eq_ignore_ascii_case(name))
}

/// `405 Method Not Allowed`, naming the methods the path takes (`allow`).
pub fn method_not_allowed(allow: &'static str) -> Response<Body> {
    let mut response = plain(405, "Method Not Allowed");
    response
        .headers_mut()
        .insert("allow", HeaderValue::from_static(allow));
    response
}

pub fn json(status: u16, message: &Value) -> Response<Body> {
    let body = serde_json::to_vec(message).expect("a Value always encodes");
    let mut response = Response::new(Body::Whole(Some(Bytes::from(body))));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub fn empty(status: u16) -> Response<Body> {
    let mut response = Response::new(Body::Whole(None));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response
}

/// An SSE response whose events the channel yields; it ends when every sender is gone.
pub fn events(receiver: mpsc::Receiver<Value>) -> Response<Body> {
    let mut response = Response::new(Body::Events(receiver));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(
        "cache-control",
        HeaderValue::from_static("no-cache, no-transform"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// A request header as text (None when absent or not visible ASCII).
pub fn header<'a>(request: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Every copy of a header, as text.
pub fn header_all<'a>(request: &'a Request<Incoming>, name: &str) -> Vec<&'a str> {
    request
        .headers()
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.trim_matches([' ', '\t']))
        .collect()
}

/// Why a body was not read.
#[derive(Debug)]
pub enum BodyError {
    /// 415: not JSON.
    NotJson,
    /// 413: over the limit.
    TooLarge,
    /// 400: not JSON that parses.
    Malformed(String),
    /// The client went away while sending it.
    Gone,
    /// The client did not send it in time: the connection is closed.
    TimedOut,
}

impl BodyError {
    pub fn response(&self) -> Response<Body> {
        match self {
            BodyError::NotJson => plain(415, "Content-Type must be application/json"),
            BodyError::TooLarge => plain(413, "Request body too large"),
            BodyError::Malformed(why) => json(
                400,
                &crate::jsonrpc::error_response(
                    None,
                    crate::jsonrpc::PARSE_ERROR,
                    &format!("Parse error: {why}"),
                ),
            ),
            BodyError::Gone => plain(400, "Request body not received"),
            BodyError::TimedOut => {
                let mut response = plain(408, "Request body not received in time");
                response
                    .headers_mut()
                    .insert(hyper::header::CONNECTION, HeaderValue::from_static("close"));
                response
            }
        }
    }
}

/// Read a request's body to its end and drop it, within `limit` bytes and `deadline`.
pub async fn discard(request: Request<Incoming>, limit: usize, deadline: std::time::Duration) {
    let mut body = request.into_body();
    let draining = async {
        let mut seen = 0;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, Bytes::len);
            if seen > limit {
                break;
            }
        }
    };
    let _ = tokio::time::timeout(deadline, draining).await;
}

/// The decoded JSON body of a request, read within `limit` bytes and `deadline`.
pub async fn read_json(
    request: Request<Incoming>,
    limit: usize,
    deadline: std::time::Duration,
) -> Result<Value, BodyError> {
    let content_type = header(&request, CONTENT_TYPE.as_str()).unwrap_or_default();
    if !content_type.to_ascii_lowercase().starts_with("application/json") {
        return Err(BodyError::NotJson);
    }
    let bytes = read_bytes(request, limit, deadline).await?;
    serde_json::from_slice(&bytes).map_err(|e| BodyError::Malformed(e.to_string()))
}

/// A request's body as it came, read within `limit` bytes and `deadline`.
pub async fn read_bytes(
    request: Request<Incoming>,
    limit: usize,
    deadline: std::time::Duration,
) -> Result<Bytes, BodyError> {
    let declared = header(&request, CONTENT_LENGTH.as_str()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(BodyError::TooLarge);
    }
    let reading = Limited::new(request.into_body(), limit).collect();
    let collected = tokio::time::timeout(deadline, reading)
        .await
        .map_err(|_| BodyError::TimedOut)?;
    match collected {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => Err(BodyError::TooLarge),
        Err(_) => Err(BodyError::Gone),
    }
}

/// Serve HTTP/1.1 on `listener` until the task is dropped: each connection kept alive, its
/// request heads read within `header_timeout` (slowloris), each request answered by `handle`
/// with the peer's address. A failed accept (out of descriptors) is retried after 50 ms.
pub async fn serve<H, F>(listener: tokio::net::TcpListener, header_timeout: std::time::Duration, handle: H)
where
    H: Fn(Request<Incoming>, std::net::SocketAddr) -> F + Clone + Send + 'static,
    F: std::future::Future<Output = Response<Body>> + Send + 'static,
{
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!("Failed to accept a connection: {error}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let answer = handle(request, peer);
                async move { Ok::<_, Infallible>(answer.await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = connection.await;
        });
    }
}
