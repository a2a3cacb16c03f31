//! Server-Sent Events as the bridge's client reads them off a server's answer: events split
//! on a blank line (`\n\n` or `\r\n\r\n`), the JSON of their `data:` lines, across chunks
//! as the body brings them; a change stream's events are bounded, not its length. Pure but
//! for [`next_event`], which reads a body.

use bytes::BytesMut;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

/// A change stream holding more than this undelivered is given up (it is opened again).
const MAX_EVENT_BYTES: usize = 16 << 20;

/// Server-Sent Events read off a body in chunks: the JSON of each event's data.
#[derive(Default)]
pub struct SseReader {
    buffer: BytesMut,
    seen: usize,
}

impl SseReader {
    /// Add a chunk; the bytes seen so far.
    pub fn push(&mut self, chunk: &[u8]) -> usize {
        self.buffer.extend_from_slice(chunk);
        self.seen += chunk.len();
        self.seen
    }

    /// The next complete event's JSON message (events without JSON data are skipped).
    pub fn next_message(&mut self) -> Option<Value> {
        loop {
            let text = &self.buffer[..];
            let end = find_event_end(text)?;
            let (event, skip) = end;
            let raw = self.buffer.split_to(event + skip);
            let block = String::from_utf8_lossy(&raw[..event]);
            let mut data = String::new();
            for line in block.split('\n') {
                let line = line.strip_suffix('\r').unwrap_or(line);
                if let Some(rest) = line.strip_prefix("data:") {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                }
            }
            if let Ok(message) = serde_json::from_str::<Value>(&data) {
                return Some(message);
            }
        }
    }
}

/// Where the first event ends (`\n\n` or `\r\n\r\n`): its length and the separator's.
fn find_event_end(text: &[u8]) -> Option<(usize, usize)> {
    let lf = text.windows(2).position(|w| w == b"\n\n").map(|p| (p, 2));
    let crlf = text.windows(4).position(|w| w == b"\r\n\r\n").map(|p| (p, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The next JSON message of an SSE body; None when it ends or breaks.
pub async fn next_event(body: &mut Incoming, reader: &mut SseReader) -> Option<Value> {
    loop {
        if let Some(message) = reader.next_message() {
            return Some(message);
        }
        let frame = body.frame().await?.ok()?;
        if let Some(data) = frame.data_ref() {
            reader.push(data);
            reader.seen = 0; // a change stream is long-lived: only its events are bounded
            if reader.buffer.len() > MAX_EVENT_BYTES {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_are_read_across_chunks() {
        let mut reader = SseReader::default();
        reader.push(b"event: message\nid: 1\ndata: {\"jsonrpc\":\"2.0\",");
        assert!(reader.next_message().is_none());
        reader.push(b"\"id\":1,\"result\":{}}\n\n: comment\n\nevent: message\r\ndata: {\"a\":1}\r\n\r\n");
        assert_eq!(reader.next_message().unwrap()["id"], 1);
        assert_eq!(reader.next_message().unwrap()["a"], 1);
        assert!(reader.next_message().is_none());
    }
}
