//! The running bridge: the configuration, every server's session and last listing (kept up
//! to date by following each server), the tool and prompt catalogs built from them, the
//! agents' legacy sessions, and what the bridge announces of itself. The call pipeline over
//! this state is `pipeline`.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::Notify;

use super::audit::AuditSink;
use super::catalog::Catalog;
use super::config::BridgeConfig;
use super::cursor::CursorCodec;
use super::metrics::Metrics;
use super::prompts::PromptCatalog;
use super::scrub::Scrubber;
use super::sse::{SseReader, next_event};
use super::upstream::{Upstream, header_problem, secret_values};
use crate::sessions::Sessions;

/// A server that is down is listed again after 1 s, doubling, at most 60 s.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A change stream that ended or could not be opened is opened again after this pause.
const CHANGES_REOPEN: Duration = Duration::from_secs(2);
/// Legacy sessions at once, and how long an unused one is kept.
const MAX_SESSIONS: usize = 256;
const SESSION_IDLE: Duration = Duration::from_secs(3600);

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

pub struct Core {
    pub config: BridgeConfig,
    pub run: String,
    pub upstreams: Vec<Option<Arc<Upstream>>>,
    states: Mutex<Vec<ServerState>>,
    catalog: Mutex<Arc<Catalog>>,
    prompts: Mutex<Arc<PromptCatalog>>,
    /// Signs the cursors of listings walked across servers.
    pub cursors: CursorCodec,
    sessions: Mutex<Sessions>,
    pub audit: AuditSink,
    pub metrics: Metrics,
    /// Masks every header value in use in what the agent, the log and the audit see.
    pub scrubber: Scrubber,
    pub inflight: AtomicUsize,
    /// Every server's tools are listed again this often while it is up.
    relist_every: Duration,
    pub stopping: AtomicBool,
    /// Per server: list it again now (a call could not reach it, or it announced a change).
    pub(super) relist: Vec<Notify>,
    /// The agents' relayed calls, as far as they outlive one request.
    pub calls: super::agent::Calls,
    /// Per server (by index): its circuit breaker.
    pub breakers: Vec<Mutex<super::breaker::CircuitBreaker>>,
    /// The token buckets of the rate limits.
    pub limiter: Mutex<super::ratelimit::RateLimiter>,
    /// The random source of the retries' jitter, in `[0, 1)`.
    pub jitter: fn() -> f64,
}

impl Core {
    pub fn new(config: BridgeConfig, audit: AuditSink, relist_every: Duration) -> Arc<Self> {
        let client = super::upstream::http_client();
        let mut states = Vec::new();
        let mut upstreams = Vec::new();
        let metrics = Metrics::default();
        for server in &config.servers {
            let key = server.key();
            let problem = header_problem(server);
            metrics.set_misconfigured(&key, problem.as_ref().map(|(reason, _)| *reason));
            let made = match problem {
                Some((_, why)) => Err(why),
                None => Upstream::new(server.clone(), client.clone()),
            };
            match made {
                Ok(upstream) => {
                    upstreams.push(Some(Arc::new(upstream)));
                    states.push(ServerState::default());
                }
                Err(why) => {
                    tracing::error!("Could not use server {key}: {why}");
                    metrics.set_up(&key, false);
                    upstreams.push(None);
                    states.push(ServerState {
                        listed_once: true,
                        problem: Some(why),
                        ..ServerState::default()
                    });
                }
            }
        }
        let scrubber = Scrubber::new(
            config
                .servers
                .iter()
                .flat_map(secret_values)
                .collect::<Vec<_>>()
                .iter()
                .map(String::as_str),
        );
        let breakers = config
            .servers
            .iter()
            .map(|s| Mutex::new(super::breaker::CircuitBreaker::new(&s.policy.circuit_breaker)))
            .collect();
        let config_len_notifies = config.servers.iter().map(|_| Notify::new()).collect();
        Arc::new(Self {
            run: format!("{}/{}", config.run.namespace, config.run.name),
            config,
            upstreams,
            states: Mutex::new(states),
            catalog: Mutex::new(Arc::new(Catalog::default())),
            prompts: Mutex::new(Arc::new(PromptCatalog::default())),
            cursors: CursorCodec::default(),
            sessions: Mutex::new(Sessions::new(MAX_SESSIONS, SESSION_IDLE).keeping_own_idle()),
            audit,
            metrics,
            scrubber,
            inflight: AtomicUsize::new(0),
            relist_every,
            stopping: AtomicBool::new(false),
            relist: config_len_notifies,
            calls: super::agent::Calls::default(),
            breakers,
            limiter: Mutex::default(),
            jitter: fastrand::f64,
        })
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.lock().expect("the catalog lock").clone()
    }

    pub fn prompts(&self) -> Arc<PromptCatalog> {
        self.prompts.lock().expect("the prompt lock").clone()
    }

    /// The bridge's server capabilities: tools always; prompts, resources and completions
    /// when a server that can be called has them (no subscriptions or logging in this slice).
    pub fn capabilities(&self) -> Value {
        let mut capabilities = json!({"tools": {"listChanged": true}});
        let states = self.states();
        let offered = |feature: &str| {
            states
                .iter()
                .any(|s| s.problem.is_none() && s.capabilities.get(feature).is_some())
        };
        if offered("prompts") {
            capabilities["prompts"] = json!({"listChanged": true});
        }
        if offered("resources") {
            capabilities["resources"] = json!({"listChanged": true, "subscribe": false});
        }
        if offered("completions") {
            capabilities["completions"] = json!({});
        }
        capabilities
    }

    pub fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().expect("the session lock")
    }

    pub fn states(&self) -> Vec<ServerState> {
        self.states.lock().expect("the state lock").clone()
    }

    /// Ready once every server's first listing is done, successful or not.
    pub fn ready(&self) -> bool {
        self.states().iter().all(|s| s.listed_once)
    }

    /// The bridge's own InitializeResult: its identity and the capabilities it serves.
    pub fn init_result(&self, version: &str) -> Value {
        json!({
            "protocolVersion": version,
            "capabilities": self.capabilities(),
            "serverInfo": {"name": "mcp-operator-bridge", "version": env!("CARGO_PKG_VERSION")},
        })
    }

    pub(super) fn update(&self, index: usize, change: impl FnOnce(&mut ServerState)) {
        let mut states = self.states.lock().expect("the state lock");
        change(&mut states[index]);
    }

    /// Build the catalogs from the listings; tell the agents' streams when the tools or the
    /// prompts changed.
    fn rebuild(&self) {
        let states = self.states();
        let prompts: Vec<Option<Vec<Value>>> = states.iter().map(|s| s.prompts.clone()).collect();
        let prompts = Arc::new(PromptCatalog::build(&self.config.servers, &prompts));
        let prompts_changed = {
            let mut held = self.prompts.lock().expect("the prompt lock");
            let changed = held.listing() != prompts.listing();
            *held = prompts;
            changed
        };
        let listings: Vec<Option<Vec<Value>>> = states.into_iter().map(|s| s.tools).collect();
        let fresh = Arc::new(Catalog::build(&self.config.servers, &listings, &self.scrubber));
        let changed = {
            let mut catalog = self.catalog.lock().expect("the catalog lock");
            let changed = catalog.tools() != fresh.tools();
            self.metrics.set_catalog_tools(fresh.entries.len());
            self.limiter
                .lock()
                .expect("the limiter lock")
                .forget_others(fresh.entries.keys());
            *catalog = fresh;
            changed
        };
        for (announce, method) in [
            (changed, "notifications/tools/list_changed"),
            (prompts_changed, "notifications/prompts/list_changed"),
        ] {
            if announce {
                let notification = json!({"jsonrpc": "2.0", "method": method});
                for session in self.sessions().iter() {
                    session.push(&notification);
                }
            }
        }
    }

    /// List one server's tools while the bridge runs: at start, again every few minutes,
    /// and with back-off while it is down (its tools stay listed meanwhile).
    pub async fn follow(self: Arc<Self>, index: usize) {
        let Some(upstream) = self.upstreams[index].clone() else {
            return;
        };
        let key = upstream.server.key();
        let deadline = Duration::from_secs(upstream.server.timeout_seconds());
        let mut backoff = Duration::from_secs(1);
        while !self.stopping.load(Ordering::Relaxed) {
            match upstream.list_all("tools/list", "tools", deadline).await {
                Ok(tools) => {
                    let negotiated = upstream.negotiated().await.unwrap_or_default();
                    let capabilities = negotiated.capabilities;
                    let prompts = if capabilities.get("prompts").is_some() {
                        match upstream.list_all("prompts/list", "prompts", deadline).await {
                            Ok(prompts) => Some(prompts),
                            Err(failure) => {
                                let told = self.scrubber.text(&failure.describe());
                                tracing::warn!("Could not list the prompts of server {key}: {told}");
                                self.states()[index].prompts.clone()
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
                    self.metrics.observe_listing(&key, true);
                    self.update(index, |state| {
                        state.listed_once = true;
                        state.up = true;
                        state.protocol = protocol;
                        state.tools = Some(tools);
                        state.prompts = prompts;
                        state.capabilities = capabilities;
                    });
                    self.rebuild();
                    backoff = Duration::from_secs(1);
                    tokio::select! {
                        () = tokio::time::sleep(self.relist_every) => {}
                        () = self.relist[index].notified() => {}
                    }
                }
                Err(failure) => {
                    let told = self.scrubber.text(&failure.describe());
                    tracing::warn!("Could not list the tools of server {key}: {told}");
                    upstream.reset().await;
                    self.metrics.observe_listing(&key, false);
                    self.update(index, |state| {
                        state.listed_once = true;
                        state.up = false;
                    });
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// Keep the stream the server announces tool changes on open, and list the server
    /// again whenever it opens (a change announced before it opened reached no one), when a
    /// 2026-07-28 server acknowledges the subscription, and at every `list_changed`.
    pub async fn follow_changes(self: Arc<Self>, index: usize) {
        let Some(upstream) = self.upstreams[index].clone() else {
            return;
        };
        while !self.stopping.load(Ordering::Relaxed) {
            if !self.states()[index].listed_once {
                tokio::time::sleep(CHANGES_REOPEN).await;
                continue;
            }
            if upstream.server.transport == "sse" {
                let relist = &self.relist[index]; // changes come on the session's own stream
                upstream.follow_sse(|| relist.notify_one()).await;
                tokio::time::sleep(CHANGES_REOPEN).await;
                continue;
            }
            let Ok(Some(mut body)) = upstream.open_changes().await else {
                tokio::time::sleep(CHANGES_REOPEN).await;
                continue;
            };
            let modern = upstream.negotiated().await.is_some_and(|n| n.modern);
            if !modern {
                self.relist[index].notify_one();
            }
            let mut reader = SseReader::default();
            while let Some(message) = next_event(&mut body, &mut reader).await {
                if message.get("id").is_some() && message.get("method").is_some() {
                    upstream.refuse_unattributed(&message).await;
                    continue;
                }
                let method = message.get("method").and_then(Value::as_str);
                if matches!(
                    method,
                    Some(
                        "notifications/tools/list_changed"
                            | "notifications/prompts/list_changed"
                            | "notifications/subscriptions/acknowledged"
                    )
                ) {
                    self.relist[index].notify_one();
                }
            }
            tokio::time::sleep(CHANGES_REOPEN).await;
        }
    }
}
