//! One configured server as the bridge runs it (a `Slot`): its session, what its last
//! listings said (`ServerState`, as `/readyz` reports it) and its two followers, which list
//! it at start, on a timer, with back-off while it is down and whenever it announces a
//! change. A slot outlives a reload that keeps the server's connection settings; a reload
//! that removes or changes them retires it (its followers end; `reload` ends its session).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{Notify, watch};

use super::config::Server;
use super::metrics::Metrics;
use super::reload::Live;
use super::sse::{SseReader, next_event};
use super::upstream::{HttpClient, Upstream, header_problem};

/// A server that is down is listed again after 1 s, doubling, at most 60 s.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A change stream that ended or could not be opened is opened again after this pause.
const CHANGES_REOPEN: Duration = Duration::from_secs(2);

/// One server as `/readyz` reports it.
#[derive(Debug, Default, Clone)]
pub struct ServerState {
    pub listed_once: bool,
    pub up: bool,
    pub protocol: Option<String>,
    /// Its last successful listing (kept while it is down).
    pub tools: Option<Vec<Value>>,
    /// Its last prompt listing, when it has prompts.
    pub prompts: Option<Vec<Value>>,
    /// The capabilities it declared (`{}` until it was reached).
    pub capabilities: Value,
    /// Why it cannot be called at all.
    pub problem: Option<String>,
}

/// One server's session and what the bridge knows of it: kept across reloads while its
/// connection settings (`signature`) stay the same, retired (its followers stopped, its
/// session ended) when a reload removes or changes it.
pub struct Slot {
    pub key: String,
    /// What forces a new session when it changes (`reload::signature`).
    pub signature: String,
    pub upstream: Option<Arc<Upstream>>,
    state: Mutex<ServerState>,
    /// List it again now (a call could not reach it, it announced a change, new pins).
    pub relist: Arc<Notify>,
    /// Open the change stream again: the resource subscriptions it carries changed.
    pub resubscribe: Notify,
    retired: watch::Sender<bool>,
}

impl Slot {
    /// A new server's slot: its session, or why it cannot be called (never contacted).
    pub fn new(server: &Server, client: &HttpClient, metrics: &Metrics, signature: String) -> Self {
        let key = server.key();
        let problem = header_problem(server);
        metrics.set_misconfigured(&key, problem.as_ref().map(|(reason, _)| *reason));
        let made = match problem {
            Some((_, why)) => Err(why),
            None => Upstream::new(server.clone(), client.clone()),
        };
        let (upstream, state) = match made {
            Ok(upstream) => (Some(Arc::new(upstream)), ServerState::default()),
            Err(why) => {
                tracing::error!("Could not use server {key}: {why}");
                metrics.set_up(&key, false);
                let state = ServerState {
                    listed_once: true,
                    problem: Some(why),
                    ..ServerState::default()
                };
                (None, state)
            }
        };
        Self {
            key,
            signature,
            upstream,
            state: Mutex::new(state),
            relist: Arc::new(Notify::new()),
            resubscribe: Notify::new(),
            retired: watch::channel(false).0,
        }
    }

    pub fn state(&self) -> ServerState {
        self.state.lock().expect("the state lock").clone()
    }

    pub(super) fn update(&self, change: impl FnOnce(&mut ServerState)) {
        change(&mut self.state.lock().expect("the state lock"));
    }

    /// Stop its followers: a reload removed or replaced it.
    pub fn retire(&self) {
        self.retired.send_replace(true);
    }

    pub fn is_retired(&self) -> bool {
        *self.retired.borrow()
    }

    async fn until_retired(&self) {
        let mut retired = self.retired.subscribe();
        let _ = retired.wait_for(|r| *r).await;
    }
}

/// List one server's tools while it is configured: at start, again every few minutes, and
/// with back-off while it is down (its tools stay listed meanwhile); each listing rebuilds
/// the catalogs of the configuration running then. Ends when its slot is retired.
pub async fn follow(live: Arc<Live>, slot: Arc<Slot>) {
    tokio::select! {
        () = listing(&live, &slot) => {}
        () = slot.until_retired() => {}
    }
}

async fn listing(live: &Live, slot: &Slot) {
    let Some(upstream) = slot.upstream.clone() else {
        return;
    };
    let key = slot.key.clone();
    let core = live.core();
    let (relist_every, metrics, stopping) = (core.relist_every, core.metrics.clone(), core.stopping.clone());
    drop(core);
    let mut backoff = Duration::from_secs(1);
    while !stopping.load(Ordering::Relaxed) {
        // The deadline of the configuration running now (a reload may change it).
        let configured = live
            .core()
            .config
            .servers
            .iter()
            .find(|s| s.key() == key)
            .map(Server::timeout_seconds);
        let deadline = Duration::from_secs(configured.unwrap_or_else(|| upstream.server.timeout_seconds()));
        match upstream.list_all("tools/list", "tools", deadline).await {
            Ok(tools) => {
                let negotiated = upstream.negotiated().await.unwrap_or_default();
                let capabilities = negotiated.capabilities;
                let prompts = if capabilities.get("prompts").is_some() {
                    match upstream.list_all("prompts/list", "prompts", deadline).await {
                        Ok(prompts) => Some(prompts),
                        Err(failure) => {
                            let told = live.core().scrubber.text(&failure.describe());
                            tracing::warn!("Could not list the prompts of server {key}: {told}");
                            slot.state().prompts
                        }
                    }
                } else {
                    None
                };
                let protocol = Some(negotiated.protocol_version).filter(|v| !v.is_empty());
                tracing::info!(
                    "Listed {} tools of {key} ({})",
                    tools.len(),
                    protocol.as_deref().unwrap_or("?")
                );
                metrics.observe_listing(&key, true);
                slot.update(|state| {
                    state.listed_once = true;
                    state.up = true;
                    state.protocol = protocol;
                    state.tools = Some(tools);
                    state.prompts = prompts;
                    state.capabilities = capabilities;
                });
                live.core().rebuild();
                backoff = Duration::from_secs(1);
                tokio::select! {
                    () = tokio::time::sleep(relist_every) => {}
                    () = slot.relist.notified() => {}
                }
            }
            Err(failure) => {
                let told = live.core().scrubber.text(&failure.describe());
                tracing::warn!("Could not list the tools of server {key}: {told}");
                upstream.reset().await;
                metrics.observe_listing(&key, false);
                slot.update(|state| {
                    state.listed_once = true;
                    state.up = false;
                });
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// Keep the stream the server announces tool changes on open, and list the server again
/// whenever it opens (a change announced before it opened reached no one), when a
/// 2026-07-28 server acknowledges the subscription, and at every `list_changed`. Ends when
/// its slot is retired.
pub async fn follow_changes(live: Arc<Live>, slot: Arc<Slot>) {
    tokio::select! {
        () = changes(&live, &slot) => {}
        () = slot.until_retired() => {}
    }
}

async fn changes(live: &Live, slot: &Slot) {
    let Some(upstream) = slot.upstream.clone() else {
        return;
    };
    let stopping = live.core().stopping.clone();
    while !stopping.load(Ordering::Relaxed) {
        if !slot.state().listed_once {
            tokio::select! {
                () = tokio::time::sleep(CHANGES_REOPEN) => {}
                () = slot.resubscribe.notified() => {}
            }
            continue;
        }
        if upstream.server.transport == "sse" {
            let relist = &slot.relist; // changes come on the session's own stream
            upstream.follow_sse(|| relist.notify_one()).await;
            tokio::time::sleep(CHANGES_REOPEN).await;
            continue;
        }
        let wanted = live.core().subscriptions.wanted(&slot.key);
        let Ok(Some(mut body)) = upstream.open_changes(&wanted).await else {
            tokio::select! {
                () = tokio::time::sleep(CHANGES_REOPEN) => {}
                () = slot.resubscribe.notified() => {}
            }
            continue;
        };
        let modern = upstream.negotiated().await.is_some_and(|n| n.modern);
        if !modern {
            slot.relist.notify_one();
        }
        let mut reader = SseReader::default();
        loop {
            let message = tokio::select! {
                message = next_event(&mut body, &mut reader) => message,
                () = slot.resubscribe.notified(), if modern => break,
            };
            let Some(message) = message else {
                tokio::time::sleep(CHANGES_REOPEN).await;
                break;
            };
            if message.get("id").is_some() && message.get("method").is_some() {
                upstream.refuse_unattributed(&message).await;
                continue;
            }
            let method = message.get("method").and_then(Value::as_str);
            if method == Some("notifications/message") {
                super::logs::deliver(&live.core(), &message);
            }
            if method == Some("notifications/resources/updated") {
                super::subscriptions::deliver(&live.core(), &slot.key, &message);
            }
            if matches!(
                method,
                Some(
                    "notifications/tools/list_changed"
                        | "notifications/prompts/list_changed"
                        | "notifications/subscriptions/acknowledged"
                )
            ) {
                slot.relist.notify_one();
            }
        }
    }
}
