//! Servers' log messages relayed to the agents (`bridge/aggregate.py`'s logging part): the
//! log level each legacy agent session set (`logging/setLevel`), sent on to every legacy
//! server that logs at the most verbose level any session asked for; a server's
//! `notifications/message` on its change stream fanned out to the sessions that set a level
//! it reaches; one on a call's own stream judged for that call's agent alone (its session's
//! level, or a 2026-07-28 request's `_meta["io.modelcontextprotocol/logLevel"]`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::core::Core;
use super::scrub::Scrubber;
use crate::jsonrpc::INVALID_PARAMS;

/// The levels of RFC 5424, least severe first.
pub const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Deadline of one `logging/setLevel` sent on to a server.
const REQUEST_SECONDS: Duration = Duration::from_secs(30);

fn rank(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level)
}

/// Whether a message of `message_level` reaches an agent that set `wanted` (None: no logs).
pub fn reaches(wanted: Option<&str>, message_level: &str) -> bool {
    match (wanted.and_then(rank), rank(message_level)) {
        (Some(wanted), Some(level)) => level >= wanted,
        _ => false,
    }
}

/// A log message a server sent on a call's own stream, as its agent gets it: only when
/// `level` (the agent's: its session's, or its request's) reaches it, masked.
pub fn call_log(level: Option<&str>, message: &Value, scrubber: &Scrubber) -> Option<Value> {
    if message.get("method").and_then(Value::as_str) != Some("notifications/message") {
        return None;
    }
    let params = message.get("params").filter(|p| p.is_object())?;
    let said = params.get("level").and_then(Value::as_str)?;
    reaches(level, said).then(|| {
        json!({"jsonrpc": "2.0", "method": "notifications/message", "params": scrubber.json(params.clone())})
    })
}

/// The level of a 2026-07-28 request (its `_meta["io.modelcontextprotocol/logLevel"]`), when
/// it is one.
pub fn request_level(meta: Option<&Value>) -> Option<String> {
    let level = meta?.get(crate::era::LOG_LEVEL_META_KEY)?.as_str()?;
    rank(level).map(|_| level.to_owned())
}

/// The log level each legacy agent session set (shared by every configuration).
#[derive(Default)]
pub struct Levels {
    by_session: Mutex<HashMap<String, String>>,
}

impl Levels {
    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.by_session.lock().expect("the log level lock")
    }

    /// Record a session's level; the most verbose level any session asked for now.
    pub fn set(&self, session: &str, level: &str) -> &'static str {
        let mut held = self.held();
        held.insert(session.to_owned(), level.to_owned());
        let most = held.values().filter_map(|l| rank(l)).min().unwrap_or(0);
        LEVELS[most]
    }

    /// The level a session set (None: it asked for no logs).
    pub fn of(&self, session: &str) -> Option<String> {
        self.held().get(session).cloned()
    }

    /// A session ended: nothing more is delivered to it.
    pub fn forget(&self, session: &str) {
        self.held().remove(session);
    }

    /// Forget the sessions that are gone (ended idle, without a word).
    pub fn keep_only(&self, live: &[String]) {
        self.held().retain(|session, _| live.contains(session));
    }

    /// The sessions a message of `level` reaches.
    pub fn reached(&self, level: &str) -> Vec<String> {
        self.held()
            .iter()
            .filter(|(_, wanted)| reaches(Some(wanted), level))
            .map(|(session, _)| session.clone())
            .collect()
    }
}

/// `logging/setLevel` of a legacy agent session: its level recorded, and every legacy server
/// that logs told the most verbose level any session asked for (a server that fails is
/// logged, not the agent's error).
pub async fn set_level(core: &Core, session: &str, params: Option<&Value>) -> Result<Value, (i64, String)> {
    let level = params
        .and_then(|p| p.get("level"))
        .and_then(Value::as_str)
        .filter(|l| rank(l).is_some());
    let Some(level) = level else {
        let text = format!("Invalid params: level must be one of {LEVELS:?}");
        return Err((INVALID_PARAMS, text));
    };
    let wanted = core.logs.set(session, level);
    let live: Vec<String> = core.sessions().iter().map(|s| s.id.clone()).collect();
    core.logs.keep_only(&live);
    for (index, upstream) in core.upstreams.iter().enumerate() {
        let Some(upstream) = upstream else { continue };
        let state = core.slots[index].state();
        if state.capabilities.get("logging").is_none() || !state.up {
            continue;
        }
        // 2026-07-28 carries the level in each request's _meta, not in logging/setLevel.
        if upstream.negotiated().await.is_none_or(|n| n.modern) {
            continue;
        }
        let mut sent = Map::new();
        sent.insert("level".into(), json!(wanted));
        if let Err(failure) = upstream.request("logging/setLevel", sent, REQUEST_SECONDS).await {
            let told = core.scrubber.text(&failure.describe());
            tracing::info!("Could not set the log level of {}: {told}", upstream.server.key());
        }
    }
    Ok(json!({}))
}

/// A server's `notifications/message` on its change stream, to the agent sessions whose level
/// it reaches (masked); anything else is not a log message and is left alone.
pub fn deliver(core: &Core, message: &Value) {
    let Some(level) = message
        .get("params")
        .filter(|p| p.is_object())
        .and_then(|p| p.get("level"))
        .and_then(Value::as_str)
    else {
        return;
    };
    let reached = core.logs.reached(level);
    if reached.is_empty() {
        return;
    }
    let note = json!({"jsonrpc": "2.0", "method": "notifications/message",
                      "params": core.scrubber.json(message["params"].clone())});
    let sessions = core.sessions();
    for session in reached {
        if let Some(held) = sessions.iter().find(|s| s.id == session) {
            held.push(&note); // a full queue drops the message
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reaches_an_agent_at_or_above_its_level_only() {
        assert!(reaches(Some("info"), "info"));
        assert!(reaches(Some("info"), "emergency"));
        assert!(!reaches(Some("warning"), "info"));
        assert!(!reaches(None, "emergency"), "no level set: no logs");
        assert!(
            !reaches(Some("loud"), "error"),
            "an unknown level asked for nothing"
        );
        assert!(
            !reaches(Some("debug"), "verbose"),
            "an unknown level is not a log message"
        );
    }

    #[test]
    fn a_calls_log_is_masked_and_filtered() {
        let scrubber = Scrubber::new(["s3cr3t-value"]);
        let said = json!({"jsonrpc": "2.0", "method": "notifications/message",
                          "params": {"level": "error", "data": "token s3cr3t-value"}});
        let shown = call_log(Some("warning"), &said, &scrubber).expect("error ≥ warning");
        assert!(!shown.to_string().contains("s3cr3t-value"));
        assert_eq!(shown["params"]["level"], "error");
        assert!(call_log(Some("critical"), &said, &scrubber).is_none());
        assert!(call_log(None, &said, &scrubber).is_none());
        let progress = json!({"method": "notifications/progress", "params": {"level": "error"}});
        assert!(call_log(Some("debug"), &progress, &scrubber).is_none());
    }

    #[test]
    fn the_servers_get_the_most_verbose_level_any_session_asked_for() {
        let levels = Levels::default();
        assert_eq!(levels.set("a", "error"), "error");
        assert_eq!(levels.set("b", "info"), "info");
        assert_eq!(levels.set("a", "critical"), "info");
        assert_eq!(levels.reached("warning"), vec!["b".to_owned()]);
        let mut both = levels.reached("critical");
        both.sort();
        assert_eq!(both, ["a", "b"]);
        levels.forget("b");
        assert!(levels.reached("warning").is_empty());
        assert_eq!(levels.of("a").as_deref(), Some("critical"));
        assert_eq!(levels.of("b"), None);
    }

    #[test]
    fn a_2026_requests_level_is_read_from_its_meta() {
        let meta = json!({"io.modelcontextprotocol/logLevel": "notice"});
        assert_eq!(request_level(Some(&meta)).as_deref(), Some("notice"));
        let bogus = json!({"io.modelcontextprotocol/logLevel": "loud"});
        assert_eq!(request_level(Some(&bogus)), None);
        assert_eq!(request_level(None), None);
    }
}
