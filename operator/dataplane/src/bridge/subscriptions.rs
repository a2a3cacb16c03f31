//! Resource subscriptions of legacy agent sessions (`bridge/aggregate.py`'s subscription
//! part), counted per agent session: `resources/subscribe` routed by exposed URI (a hidden or
//! unknown one refused as a read would be) and sent on to a legacy server once, however many
//! sessions hold the URI; `resources/unsubscribe` sent only when no session holds it any more
//! (one session leaving never ends another's subscription), and for every URI a session held
//! alone when it ends; a 2026-07-28 server gets the URIs as the `resourceSubscriptions` of
//! the bridge's listen stream, opened again with the new list. The server's
//! `notifications/resources/updated` reaches only the sessions holding its URI, exposed.
//! A 2026-07-28 agent's `subscriptions/listen` stream (the adapter's `listeners` rules: what
//! is honored, the tagging) counts as a session of its own, ended when its reader goes; at
//! most 256 such streams.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::core::Core;
use crate::adapter::listeners::{Listener, honored};
use crate::http::{self, Body};
use crate::jsonrpc::{self, INTERNAL_ERROR, INVALID_PARAMS};

/// Open `subscriptions/listen` streams at once.
const MAX_LISTENERS: usize = 256;
/// Messages queued on a listen stream.
const LISTEN_QUEUE: usize = 64;

/// Subscriptions one agent session may hold: each may cost an upstream request.
const MAX_PER_SESSION: usize = 256;
/// Where a 2026-07-28 server names the listen stream a notification is for.
const SUBSCRIPTION_ID_META_KEY: &str = "io.modelcontextprotocol/subscriptionId";
/// Deadline of one `resources/subscribe` or `unsubscribe` sent on to a server.
const REQUEST_SECONDS: Duration = Duration::from_secs(30);

/// One subscription of a session: the server (its key), its own URI and the exposed one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Held {
    pub server: String,
    pub original: String,
    pub exposed: String,
}

/// Every legacy agent session's subscriptions (shared by every configuration).
#[derive(Default)]
pub struct Subscriptions {
    by_session: Mutex<HashMap<String, HashSet<Held>>>,
    /// The open listen streams of 2026-07-28 agents, each under its session key.
    listeners: Mutex<Vec<(String, Listener)>>,
    opened: std::sync::atomic::AtomicU64,
}

impl Subscriptions {
    fn held(&self) -> MutexGuard<'_, HashMap<String, HashSet<Held>>> {
        self.by_session.lock().expect("the subscription lock")
    }

    fn holders(all: &HashMap<String, HashSet<Held>>, server: &str, original: &str) -> usize {
        all.values()
            .filter(|subs| subs.iter().any(|h| h.server == server && h.original == original))
            .count()
    }

    /// A session subscribes: Ok(true) when no session held the server's URI before (the
    /// server is to be told); Err when the session holds too many.
    pub fn add(&self, session: &str, held: Held) -> Result<bool, ()> {
        let mut all = self.held();
        let first = Self::holders(&all, &held.server, &held.original) == 0;
        let mine = all.entry(session.to_owned()).or_default();
        if mine.contains(&held) {
            return Ok(false);
        }
        if mine.len() >= MAX_PER_SESSION {
            return Err(());
        }
        mine.insert(held);
        Ok(first)
    }

    /// A session unsubscribes from an exposed URI: what it held, when no session holds that
    /// server's URI any more (the server is to be told).
    pub fn remove(&self, session: &str, exposed: &str) -> Option<Held> {
        let mut all = self.held();
        let mine = all.get_mut(session)?;
        let held = mine.iter().find(|h| h.exposed == exposed)?.clone();
        mine.remove(&held);
        if mine.is_empty() {
            all.remove(session);
        }
        (Self::holders(&all, &held.server, &held.original) == 0).then_some(held)
    }

    /// A session ended: what it held that no other session holds.
    pub fn end(&self, session: &str) -> Vec<Held> {
        let mut all = self.held();
        let Some(mine) = all.remove(session) else {
            return Vec::new();
        };
        let mut alone: Vec<Held> = mine
            .into_iter()
            .filter(|h| Self::holders(&all, &h.server, &h.original) == 0)
            .collect();
        alone.sort_by(|a, b| a.original.cmp(&b.original));
        alone.dedup_by(|a, b| a.server == b.server && a.original == b.original);
        alone
    }

    /// Offer a notification to every open listen stream (each carries what it agreed to);
    /// the keys of the streams whose readers are gone, forgotten when `prune` (their
    /// subscriptions are then the caller's to end).
    pub fn offer(&self, message: &Value, prune: bool) -> Vec<String> {
        let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
        let mut listeners = self.listeners.lock().expect("the listener lock");
        let mut gone = Vec::new();
        listeners.retain(|(key, listener)| {
            let open = listener.offer(method, message);
            if !open {
                gone.push(key.clone());
            }
            open || !prune
        });
        gone
    }

    /// The URIs of a server some session holds, sorted (a listen stream's list).
    pub fn wanted(&self, server: &str) -> Vec<String> {
        let mut uris: Vec<String> = self
            .held()
            .values()
            .flatten()
            .filter(|h| h.server == server)
            .map(|h| h.original.clone())
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        uris.sort();
        uris
    }

    /// The sessions holding a server's URI, each with the URI it subscribed to.
    pub fn subscribers(&self, server: &str, original: &str) -> Vec<(String, String)> {
        self.held()
            .iter()
            .flat_map(|(session, subs)| {
                subs.iter()
                    .filter(|h| h.server == server && h.original == original)
                    .map(|h| (session.clone(), h.exposed.clone()))
            })
            .collect()
    }
}

/// `resources/subscribe` (`on`) or `resources/unsubscribe` of a legacy agent session.
pub async fn answer(
    core: &Core,
    session: &str,
    params: Option<&Value>,
    on: bool,
) -> Result<Value, (i64, String)> {
    let Some(uri) = params.and_then(|p| p.get("uri")).and_then(Value::as_str) else {
        return Err((INVALID_PARAMS, "Invalid params: uri must be a string".to_owned()));
    };
    if !on {
        if let Some(held) = core.subscriptions.remove(session, uri) {
            tell(core, &held, false).await;
        }
        return Ok(json!({}));
    }
    let Some((index, original)) = super::aggregate::route(core, uri) else {
        let shown: String = uri.chars().take(200).collect();
        return Err((INVALID_PARAMS, format!("Resource not found: {shown}")));
    };
    let held = Held {
        server: core.config.servers[index].key(),
        original,
        exposed: uri.to_owned(),
    };
    match core.subscriptions.add(session, held.clone()) {
        Ok(true) => tell(core, &held, true).await,
        Ok(false) => {}
        Err(()) => {
            let text = "Invalid params: too many resource subscriptions";
            return Err((INVALID_PARAMS, text.to_owned()));
        }
    }
    Ok(json!({}))
}

/// A session ended: the servers told of the subscriptions nobody else holds (in the
/// background: the session's end waits for no server).
pub fn end_session(core: &Arc<Core>, session: &str) {
    let alone = core.subscriptions.end(session);
    if alone.is_empty() {
        return;
    }
    let core = core.clone();
    tokio::spawn(async move {
        for held in alone {
            tell(&core, &held, false).await;
        }
    });
}

/// Tell a server its URI is now wanted (`on`) or no longer: a legacy server by request, a
/// 2026-07-28 server by its listen stream opened again with the new list.
async fn tell(core: &Core, held: &Held, on: bool) {
    let Some(index) = core.slots.iter().position(|s| s.key == held.server) else {
        return;
    };
    let Some(upstream) = &core.upstreams[index] else {
        return;
    };
    if upstream.negotiated().await.is_some_and(|n| n.modern) {
        core.slots[index].resubscribe.notify_one();
        return;
    }
    let method = if on {
        "resources/subscribe"
    } else {
        "resources/unsubscribe"
    };
    let mut sent = Map::new();
    sent.insert("uri".into(), json!(held.original));
    if let Err(failure) = upstream.request(method, sent, REQUEST_SECONDS).await {
        let told = core.scrubber.text(&failure.describe());
        tracing::info!("Could not send {method} to {}: {told}", held.server);
    }
}

/// A server's `notifications/resources/updated` on its change stream, to the sessions
/// holding its URI (legacy GET streams and listen streams), under the URI each subscribed to.
pub fn deliver(core: &Arc<Core>, server: &str, message: &Value) {
    let Some(params) = message.get("params").and_then(Value::as_object) else {
        return;
    };
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return;
    };
    let reached = core.subscriptions.subscribers(server, uri);
    let mut exposed_uris: Vec<String> = Vec::new();
    {
        let sessions = core.sessions();
        for (session, exposed) in reached {
            let note = update(core, params, &exposed);
            if let Some(held) = sessions.iter().find(|s| s.id == session) {
                held.push(&note); // a full queue drops it
            } else if !exposed_uris.contains(&exposed) {
                exposed_uris.push(exposed);
            }
        }
    }
    for exposed in exposed_uris {
        let gone = core.subscriptions.offer(&update(core, params, &exposed), true);
        for key in gone {
            end_session(core, &key);
        }
    }
}

/// The update an agent gets: the exposed URI, without the bridge's own listen stream's id.
fn update(core: &Core, params: &Map<String, Value>, exposed: &str) -> Value {
    let mut shown = core.scrubber.json(Value::Object(params.clone()));
    shown["uri"] = json!(exposed);
    if let Some(meta) = shown.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(SUBSCRIPTION_ID_META_KEY);
        if meta.is_empty() {
            shown.as_object_mut().map(|o| o.remove("_meta"));
        }
    }
    json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": shown})
}

/// A 2026-07-28 agent's `subscriptions/listen`: acknowledged first (what the bridge honours
/// of the filter), then the notifications it agreed to carry, until the agent goes. Each
/// named URI it can route is subscribed to as a legacy session's would be.
pub async fn listen(core: &Arc<Core>, id: &Value, message: &Value) -> hyper::Response<Body> {
    let requested = message
        .get("params")
        .and_then(|p| p.get("notifications"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let agreed = honored(&requested, Some(&core.capabilities()));
    for key in core.subscriptions.offer(&Value::Null, true) {
        end_session(core, &key);
    }
    let (sender, receiver) = tokio::sync::mpsc::channel(LISTEN_QUEUE);
    let listener = Listener::new(id.clone(), sender, &agreed);
    if core
        .subscriptions
        .listeners
        .lock()
        .expect("the listener lock")
        .len()
        >= MAX_LISTENERS
    {
        let error = jsonrpc::error_response(Some(id), INTERNAL_ERROR, "Too many listen streams");
        return http::json(503, &error);
    }
    let number = core
        .subscriptions
        .opened
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let key = format!("listen-{number}");
    let uris: Vec<String> = listener.uris.iter().cloned().collect();
    for uri in uris {
        let params = json!({"uri": uri});
        if let Err((_, why)) = answer(core, &key, Some(&params), true).await {
            tracing::debug!("Left {uri} out of a listen stream: {why}");
        }
    }
    listener.acknowledge(&agreed);
    core.subscriptions
        .listeners
        .lock()
        .expect("the listener lock")
        .push((key, listener));
    http::events(receiver)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(server: &str, original: &str) -> Held {
        Held {
            server: server.into(),
            original: original.into(),
            exposed: format!("{server}:{original}"),
        }
    }

    #[test]
    fn a_server_is_told_at_the_first_subscriber_and_after_the_last_only() {
        let subs = Subscriptions::default();
        assert_eq!(subs.add("s1", sub("a", "file:///x")), Ok(true));
        assert_eq!(subs.add("s2", sub("a", "file:///x")), Ok(false));
        assert_eq!(subs.add("s2", sub("a", "file:///x")), Ok(false), "twice is once");
        assert_eq!(
            subs.add("s2", sub("b", "file:///x")),
            Ok(true),
            "another server's"
        );
        assert_eq!(subs.remove("s1", "a:file:///x"), None, "s2 still holds it");
        assert_eq!(
            subs.subscribers("a", "file:///x"),
            [("s2".to_owned(), "a:file:///x".to_owned())]
        );
        assert_eq!(subs.remove("s2", "a:file:///x"), Some(sub("a", "file:///x")));
        assert_eq!(subs.remove("s2", "a:file:///x"), None, "not held any more");
        assert!(subs.subscribers("a", "file:///x").is_empty());
    }

    #[test]
    fn an_ended_session_gives_up_only_what_it_held_alone() {
        let subs = Subscriptions::default();
        subs.add("s1", sub("a", "u1")).unwrap();
        subs.add("s1", sub("a", "u2")).unwrap();
        subs.add("s2", sub("a", "u2")).unwrap();
        assert_eq!(subs.wanted("a"), ["u1", "u2"]);
        assert_eq!(subs.end("s1"), [sub("a", "u1")]);
        assert_eq!(subs.wanted("a"), ["u2"]);
        assert!(subs.end("s1").is_empty());
        assert_eq!(subs.end("s2"), [sub("a", "u2")]);
        assert!(subs.wanted("a").is_empty());
    }

    #[test]
    fn a_session_holds_a_bounded_number() {
        let subs = Subscriptions::default();
        for i in 0..MAX_PER_SESSION {
            assert!(subs.add("s", sub("a", &format!("u{i}"))).is_ok());
        }
        assert_eq!(subs.add("s", sub("a", "one-more")), Err(()));
        assert_eq!(subs.add("t", sub("a", "one-more")), Ok(true));
    }
}
