//! The legacy session protocol's HTTP answers that both server sides give alike: which
//! session a `GET` or `DELETE` names (the caller's own, else as good as unknown: 404), and a
//! session's one `GET` stream (406 without `text/event-stream` in `Accept`, 409 while one is
//! open). What a `DELETE` then ends is each server side's own.

use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Request, Response};
use tokio::sync::mpsc;

use crate::http::{self, Body};
use crate::sessions::Sessions;

/// The id of the session the request names, touched, if `caller` opened it; else the answer.
pub fn named_session(
    request: &Request<Incoming>,
    sessions: &mut Sessions,
    caller: &str,
) -> Result<String, Response<Body>> {
    let Some(session_id) = http::header(request, "mcp-session-id") else {
        return Err(http::plain(400, "Missing Mcp-Session-Id header"));
    };
    match sessions.lookup(session_id, Instant::now()) {
        Some(session) if session.caller == caller => Ok(session_id.to_owned()),
        _ => Err(http::plain(404, "Session not found")),
    }
}

/// Open the named session's `GET` stream, with room for `queue` messages.
pub fn get_stream(
    request: &Request<Incoming>,
    sessions: &mut Sessions,
    caller: &str,
    queue: usize,
) -> Response<Body> {
    if !http::header(request, "accept")
        .unwrap_or_default()
        .contains("text/event-stream")
    {
        return http::plain(406, "Accept must include text/event-stream");
    }
    let session_id = match named_session(request, sessions, caller) {
        Ok(id) => id,
        Err(refused) => return refused,
    };
    let Some(session) = sessions.get_mut(&session_id) else {
        return http::plain(404, "Session not found");
    };
    if session.stream.as_ref().is_some_and(|s| !s.is_closed()) {
        return http::plain(409, "Only one GET stream per session");
    }
    let (sender, receiver) = mpsc::channel(queue);
    session.stream = Some(sender);
    session.last_active = Instant::now();
    http::events(receiver)
}
