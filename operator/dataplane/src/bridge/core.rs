//! The running bridge: the configuration, every server's session and last listing (kept up
//! to date by following each server), the tool and prompt catalogs built from them, the
//! agents' legacy sessions, and what the bridge announces of itself. The call pipeline over
//! this state is `pipeline`.
//!
//! One `Core` is one configuration (a generation): its servers, catalogs and scrubber never
//! change, so a request holds one `Arc<Core>` and every index it reads (a catalog entry's
//! server) is of that configuration. A reload (`reload`) builds the next `Core` and swaps it
//! in; what outlives a configuration is shared by `Arc` (sessions, calls, metrics, counters)
//! and a server whose connection settings stay is the same `Slot` (its session, listing and
//! followers) in both.

use std::sync::atomic::{AtomicBool, AtomicUsize};
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
pub use super::slot::{ServerState, Slot};
use super::upstream::{HttpClient, Upstream, secret_values};
use crate::sessions::Sessions;

/// Legacy sessions at once, and how long an unused one is kept.
const MAX_SESSIONS: usize = 256;
const SESSION_IDLE: Duration = Duration::from_secs(3600);

pub struct Core {
    pub config: BridgeConfig,
    pub run: String,
    /// Per server, in the configuration's order: its slot, its session (None: it cannot be
    /// called as configured) and its relist signal (the slot's, indexed as the servers).
    pub slots: Vec<Arc<Slot>>,
    pub upstreams: Vec<Option<Arc<Upstream>>>,
    catalog: Mutex<Arc<Catalog>>,
    prompts: Mutex<Arc<PromptCatalog>>,
    /// Signs the cursors of listings walked across servers.
    pub cursors: Arc<CursorCodec>,
    sessions: Arc<Mutex<Sessions>>,
    pub audit: Arc<AuditSink>,
    pub metrics: Arc<Metrics>,
    /// Masks every header value in use in what the agent, the log and the audit see.
    pub scrubber: Scrubber,
    pub inflight: Arc<AtomicUsize>,
    /// Every server's tools are listed again this often while it is up.
    pub relist_every: Duration,
    pub stopping: Arc<AtomicBool>,
    pub(super) relist: Vec<Arc<Notify>>,
    /// The agents' relayed calls, as far as they outlive one request.
    pub calls: Arc<super::agent::Calls>,
    /// The one HTTP client of every server's session (and of the approval webhook).
    pub client: HttpClient,
    /// Per server (by index): its circuit breaker (a server that stays keeps its own).
    pub breakers: Vec<Arc<Mutex<super::breaker::CircuitBreaker>>>,
    /// The token buckets of the rate limits (of every configuration: a changed limit is a
    /// new bucket).
    pub limiter: Arc<Mutex<super::ratelimit::RateLimiter>>,
    /// The random source of the retries' jitter, in `[0, 1)`.
    pub jitter: fn() -> f64,
    /// The log level each legacy agent session set (`logs`).
    pub logs: Arc<super::logs::Levels>,
    /// The agent sessions' resource subscriptions (`subscriptions`).
    pub subscriptions: Arc<super::subscriptions::Subscriptions>,
}

/// What one configuration's `Core` shares with the next.
pub struct Shared {
    pub cursors: Arc<CursorCodec>,
    pub sessions: Arc<Mutex<Sessions>>,
    pub audit: Arc<AuditSink>,
    pub metrics: Arc<Metrics>,
    pub inflight: Arc<AtomicUsize>,
    pub relist_every: Duration,
    pub stopping: Arc<AtomicBool>,
    pub calls: Arc<super::agent::Calls>,
    pub client: HttpClient,
    pub limiter: Arc<Mutex<super::ratelimit::RateLimiter>>,
    pub jitter: fn() -> f64,
    pub logs: Arc<super::logs::Levels>,
    pub subscriptions: Arc<super::subscriptions::Subscriptions>,
}

impl Core {
    pub fn new(config: BridgeConfig, audit: AuditSink, relist_every: Duration) -> Arc<Self> {
        let shared = Shared {
            cursors: Arc::new(CursorCodec::default()),
            sessions: Arc::new(Mutex::new(
                Sessions::new(MAX_SESSIONS, SESSION_IDLE).keeping_own_idle(),
            )),
            audit: Arc::new(audit),
            metrics: Arc::new(Metrics::default()),
            inflight: Arc::new(AtomicUsize::new(0)),
            relist_every,
            stopping: Arc::new(AtomicBool::new(false)),
            calls: Arc::new(super::agent::Calls::default()),
            client: super::upstream::http_client(),
            limiter: Arc::default(),
            jitter: fastrand::f64,
            logs: Arc::default(),
            subscriptions: Arc::default(),
        };
        let slots = config
            .servers
            .iter()
            .map(|server| {
                let signature = super::reload::signature(server);
                Arc::new(Slot::new(server, &shared.client, &shared.metrics, signature))
            })
            .collect();
        Arc::new(Self::assemble(config, slots, shared, Default::default()))
    }

    /// A configuration's `Core` over its servers' slots (in the configuration's order), with
    /// what it shares with the one before and that one's catalogs (the incumbents of the
    /// next build; a `Core` is not served before `refresh` built its own).
    pub fn assemble(
        config: BridgeConfig,
        slots: Vec<Arc<Slot>>,
        shared: Shared,
        catalogs: (Arc<Catalog>, Arc<PromptCatalog>),
    ) -> Self {
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
            .map(|s| {
                Arc::new(Mutex::new(super::breaker::CircuitBreaker::new(
                    &s.policy.circuit_breaker,
                )))
            })
            .collect();
        Self {
            run: format!("{}/{}", config.run.namespace, config.run.name),
            config,
            upstreams: slots.iter().map(|s| s.upstream.clone()).collect(),
            relist: slots.iter().map(|s| s.relist.clone()).collect(),
            slots,
            catalog: Mutex::new(catalogs.0),
            prompts: Mutex::new(catalogs.1),
            cursors: shared.cursors,
            sessions: shared.sessions,
            audit: shared.audit,
            metrics: shared.metrics,
            scrubber,
            inflight: shared.inflight,
            relist_every: shared.relist_every,
            stopping: shared.stopping,
            calls: shared.calls,
            client: shared.client,
            breakers,
            limiter: shared.limiter,
            jitter: shared.jitter,
            logs: shared.logs,
            subscriptions: shared.subscriptions,
        }
    }

    /// What the next configuration's `Core` shares with this one (the audit sink: when its
    /// settings stay).
    pub fn shared(&self) -> Shared {
        Shared {
            cursors: self.cursors.clone(),
            sessions: self.sessions.clone(),
            audit: self.audit.clone(),
            metrics: self.metrics.clone(),
            inflight: self.inflight.clone(),
            relist_every: self.relist_every,
            stopping: self.stopping.clone(),
            calls: self.calls.clone(),
            client: self.client.clone(),
            limiter: self.limiter.clone(),
            jitter: self.jitter,
            logs: self.logs.clone(),
            subscriptions: self.subscriptions.clone(),
        }
    }

    /// Its catalogs, for the next configuration's first build.
    pub fn catalogs(&self) -> (Arc<Catalog>, Arc<PromptCatalog>) {
        (self.catalog(), self.prompts())
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.lock().expect("the catalog lock").clone()
    }

    pub fn prompts(&self) -> Arc<PromptCatalog> {
        self.prompts.lock().expect("the prompt lock").clone()
    }

    /// The bridge's server capabilities: tools always; prompts, resources and completions
    /// when a server that can be called has them, logging, and resource subscriptions.
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
            let subscribe = states.iter().any(|s| {
                s.problem.is_none() && s.capabilities.pointer("/resources/subscribe") == Some(&json!(true))
            });
            capabilities["resources"] = json!({"listChanged": true, "subscribe": subscribe});
        }
        if offered("completions") {
            capabilities["completions"] = json!({});
        }
        if offered("logging") {
            capabilities["logging"] = json!({});
        }
        capabilities
    }

    pub fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().expect("the session lock")
    }

    pub fn states(&self) -> Vec<ServerState> {
        self.slots.iter().map(|slot| slot.state()).collect()
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
        self.slots[index].update(change);
    }

    /// Build the catalogs from the listings; tell the agents' streams when the tools or the
    /// prompts changed.
    pub fn rebuild(&self) {
        let changed = self.refresh();
        self.announce(changed);
    }

    /// Build the catalogs from the listings (the tools of the catalog before keep their
    /// names); whether the tools and the prompts the agents see changed.
    pub fn refresh(&self) -> (bool, bool) {
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
        let previous = self.catalog();
        let mut fresh = Catalog::build_after(&self.config.servers, &listings, &self.scrubber, &previous);
        fresh.rules = super::rules::RuleBook::build(&self.config, &fresh.entries);
        let fresh = Arc::new(fresh);
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
        (changed, prompts_changed)
    }

    /// Tell every agent's stream that the tools (`.0`) or the prompts (`.1`) changed.
    pub fn announce(&self, (tools, prompts): (bool, bool)) {
        for (announce, method) in [
            (tools, "notifications/tools/list_changed"),
            (prompts, "notifications/prompts/list_changed"),
        ] {
            if announce {
                let notification = json!({"jsonrpc": "2.0", "method": method});
                for session in self.sessions().iter() {
                    session.push(&notification);
                }
                // Listen streams that asked for it (a closed one is ended at the next update
                // or listen, which can tell its servers).
                self.subscriptions.offer(&notification, false);
            }
        }
    }
}
