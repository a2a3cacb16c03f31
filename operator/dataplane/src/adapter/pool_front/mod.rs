//! The HTTP entry of `--child-per-session`: one child (with its own core and front) per
//! session. Owns the routing of a request to the child that serves it, the spawn of a new
//! child when a session begins, and the reaping of children; what each child's front
//! answers is the shared adapter's own (`front`, `core`), unchanged. Per era:
//!
//! - **legacy**: a POST `initialize` without `Mcp-Session-Id` reserves a place in the pool,
//!   spawns a child, waits until it is ready and has its front answer; the session id it
//!   answers with is bound to that child. Later requests with that id go to that child (an
//!   unknown id: 404); a DELETE ends the session and reaps the child.
//! - **2026-07-28**: a caller's requests go to the caller's own child, spawned on its first
//!   request. The caller is the key sessions are counted by (the verified identity, else the
//!   client's address), refined by the `Mcp-Operator-Caller` header when the request has one,
//!   so that several callers behind one address can hold children of their own; fair shares
//!   are counted by the caller key alone, so names buy an address no more than its share. A
//!   caller that disconnects while a request of its child is open, and has no other open,
//!   has its child reaped.
//!
//! Each child's router knows it serves one caller alone (`Router::sole_caller`): what the
//! child asks or logs goes to that caller, never to another session. Host, Origin and the
//! caller's credentials are checked here, before a child is looked up or spawned.
//!
//! Modules: this one the entry (routing per era, serving, health and metrics); `children`
//! the children's spawn, reaping and shutdown.

mod children;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::Value;
use tokio::sync::watch;

use super::audit::Audit;
use super::budget::{self, BodyBudget};
use super::config::AdapterConfig;
use super::front::{self, Caller, unavailable};
use super::metrics::Metrics;
use super::pool::{CALLER_KEY, Pool, SESSION_KEY};
use super::pool_child::PooledChild;
use super::pool_health;
use super::pool_metrics::{PoolMetrics, Reaped};
use crate::auth::gate::{Gate, admit_scraper};
use crate::era;
use crate::hosts::HostPolicy;
use crate::http::{self, Body};
use crate::jsonrpc::{self, INVALID_REQUEST};

/// Names one caller among several behind one caller key (2026-07-28), at most this long.
const CALLER_HEADER: &str = "mcp-operator-caller";
const MAX_CALLER_NAME: usize = 128;

pub struct PoolFront {
    config: AdapterConfig,
    /// Each child's: one session at most.
    child_config: AdapterConfig,
    hosts: HostPolicy,
    gate: Option<Gate>,
    scrapers: Option<Gate>,
    audit: Option<Arc<Audit>>,
    budget: Arc<BodyBudget>,
    metrics: Arc<Metrics>,
    counts: PoolMetrics,
    pool: Mutex<Pool<PooledChild>>,
    /// 2026-07-28 callers whose child is starting: their other requests wait for it.
    starting: Mutex<HashMap<String, watch::Receiver<()>>>,
    /// Unattributed messages (log, request) of children already stopped: counters never go down.
    retired: Mutex<(u64, u64)>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PoolFront {
    pub fn new(
        config: AdapterConfig,
        metrics: Metrics,
        gate: Option<Gate>,
        scrapers: Option<Gate>,
        audit: Option<Arc<Audit>>,
    ) -> Arc<Self> {
        let mut child_config = config.clone();
        child_config.max_sessions = 1;
        Arc::new(Self {
            hosts: HostPolicy::new(&config.allowed_hosts, &config.allowed_origins),
            budget: BodyBudget::new(config.max_inflight_bytes, config.max_body_bytes),
            pool: Mutex::new(Pool::new(config.max_children, config.child_idle())),
            config,
            child_config,
            gate,
            scrapers,
            audit,
            metrics: Arc::new(metrics),
            counts: PoolMetrics::default(),
            starting: Mutex::new(HashMap::new()),
            retired: Mutex::new((0, 0)),
        })
    }

    pub async fn handle(self: Arc<Self>, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let path = request.uri().path();
        match (request.method(), path) {
            (&Method::GET, "/healthz" | "/readyz") => return self.health(path == "/readyz"),
            (&Method::GET, "/metrics") => {
                if let Err(refusal) = admit_scraper(self.scrapers.as_ref(), &request) {
                    return refusal;
                }
                return self.metrics();
            }
            _ => {}
        }
        if path != self.config.path {
            return http::plain(404, "Not Found");
        }
        let caller = match front::admit(&self.hosts, self.gate.as_ref(), &request, peer) {
            Ok(caller) => caller,
            Err(refused) => return refused, // before any child is looked up or spawned
        };
        if era::is_modern(http::header(&request, "mcp-protocol-version")) {
            return self.modern(request, caller).await;
        }
        let method = request.method().clone();
        let Some(session_id) = http::header(&request, "mcp-session-id").map(str::to_owned) else {
            if method != Method::POST {
                return http::plain(400, "Missing Mcp-Session-Id header");
            }
            return self.initialize(request, caller).await;
        };
        let key = format!("{SESSION_KEY}{session_id}");
        let Some((id, child)) = lock(&self.pool).get(&key, Instant::now()) else {
            return not_found(&method);
        };
        let response = self.serve(&id, &child, request, &caller, false).await;
        if method == Method::DELETE {
            let mut pool = lock(&self.pool);
            if child.sessions() == 0 && pool.handling(&id) == 0 {
                let released = pool.release(&id);
                drop(pool);
                if let Some(child) = released {
                    self.reap(child, Reaped::Deleted);
                }
            }
        }
        response
    }

    // ------------------------------------------------------------------ the eras

    async fn modern(self: Arc<Self>, request: Request<Incoming>, caller: Caller) -> Response<Body> {
        if request.method() != Method::POST {
            return http::method_not_allowed("POST");
        }
        let mut key = format!("{CALLER_KEY}{}", caller.key);
        if let Some(name) = http::header(&request, CALLER_HEADER) {
            key.push('|');
            key.extend(name.chars().take(MAX_CALLER_NAME));
        }
        let (id, child) = loop {
            let waiting = lock(&self.starting).get(&key).cloned();
            if let Some(mut started) = waiting {
                let _ = started.changed().await; // its spawner is done, either way
            }
            if let Some(found) = lock(&self.pool).get(&key, Instant::now()) {
                break found;
            }
            let (done, started) = watch::channel(());
            {
                let mut starting = lock(&self.starting);
                if starting.contains_key(&key) {
                    continue;
                }
                starting.insert(key.clone(), started);
            }
            let _starting = Starting {
                front: self.clone(),
                key: key.clone(),
                _done: done,
            };
            // fair shares by who asks (the caller key), not by the name it gives
            let spawned = self.spawn(&caller.key, None).await;
            if let Ok((id, _)) = &spawned {
                lock(&self.pool).bind(id, key.clone(), Instant::now());
            }
            match spawned {
                Ok(found) => break found,
                Err(refused) => return refused,
            }
        };
        self.serve(&id, &child, request, &caller, true).await
    }

    /// A POST without a session: an `initialize` gets a child of its own. Its body is held
    /// against the shared byte budget while it is read and its child spawns.
    async fn initialize(self: Arc<Self>, request: Request<Incoming>, caller: Caller) -> Response<Body> {
        let accept = http::header(&request, "accept").unwrap_or("*/*");
        if !["application/json", "text/event-stream", "*/*"]
            .iter()
            .any(|kind| accept.contains(kind))
        {
            return http::plain(406, "Accept must include application/json or text/event-stream");
        }
        let _reservation = match self.budget.reserve(http::header(&request, "content-length")) {
            Ok(reservation) => reservation,
            Err(budget::Refused::TooLarge) => {
                let limit = self.config.max_body_bytes;
                return http::plain(
                    413,
                    &format!("Request body too large: the limit is {limit} bytes"),
                );
            }
            Err(budget::Refused::Spent) => {
                http::discard(request, self.config.max_body_bytes, self.config.body_timeout()).await;
                return unavailable(None, "Too many request bytes in flight; retry later");
            }
        };
        let read = http::read_json(request, self.config.max_body_bytes, self.config.body_timeout()).await;
        let message = match read {
            Ok(message) => message,
            Err(error) => return error.response(),
        };
        if message.get("method").and_then(Value::as_str) != Some("initialize") {
            let id = message.get("id").filter(|_| message.is_object());
            let text = "Missing Mcp-Session-Id header";
            return http::json(400, &jsonrpc::error_response(id, INVALID_REQUEST, text));
        }
        let (id, child) = match self.spawn(&caller.key, message.get("id")).await {
            Ok(spawned) => spawned,
            Err(refused) => return refused,
        };
        let response = child.front.initialize(&message, &caller.key);
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok());
        let mut pool = lock(&self.pool);
        if let Some(session) = session {
            pool.bind(&id, format!("{SESSION_KEY}{session}"), Instant::now());
        } else if let Some(child) = pool.release(&id) {
            drop(pool);
            self.reap(child, Reaped::Refused); // nothing will reach this child again
        }
        response
    }

    /// Hand a request to a child, its place busy meanwhile; a 2026-07-28 caller gone before
    /// its answer, with nothing else open at its child, has the child reaped.
    async fn serve(
        self: &Arc<Self>,
        id: &str,
        child: &PooledChild,
        request: Request<Incoming>,
        caller: &Caller,
        modern: bool,
    ) -> Response<Body> {
        lock(&self.pool).begin(id);
        let mut serving = Serving {
            front: self.clone(),
            id: id.to_owned(),
            reap_if_gone: modern,
            answered: false,
        };
        let response = child.front.serve_mcp(request, caller).await;
        serving.answered = true;
        response
    }

    // ------------------------------------------------------------------ health and metrics

    fn health(&self, readiness: bool) -> Response<Body> {
        let mut pool = lock(&self.pool);
        pool.refresh(Instant::now(), PooledChild::busy);
        pool_health::health(&self.config, &pool, &self.budget, readiness)
    }

    fn metrics(&self) -> Response<Body> {
        let retired = *lock(&self.retired);
        let pool = lock(&self.pool);
        pool_health::metrics(&pool, &self.metrics, &self.counts, retired)
    }
}

/// A request being served by a child: ends its place's use when dropped, and reaps a
/// 2026-07-28 caller's child when the caller went before its answer (the future is dropped)
/// and nothing else is open there.
struct Serving {
    front: Arc<PoolFront>,
    id: String,
    reap_if_gone: bool,
    answered: bool,
}

impl Drop for Serving {
    fn drop(&mut self) {
        let mut pool = lock(&self.front.pool);
        let open = pool.end(&self.id, Instant::now());
        if self.answered || !self.reap_if_gone || open > 0 {
            return;
        }
        let released = pool.release(&self.id);
        drop(pool);
        if let Some(child) = released {
            self.front.reap(child, Reaped::Disconnected);
        }
    }
}

/// A 2026-07-28 caller's child is starting: its other requests wait until this is dropped.
struct Starting {
    front: Arc<PoolFront>,
    key: String,
    /// Dropped with the guard: the waiters' `changed()` returns.
    _done: watch::Sender<()>,
}

impl Drop for Starting {
    fn drop(&mut self) {
        lock(&self.front.starting).remove(&self.key);
    }
}

fn not_found(method: &Method) -> Response<Body> {
    if method == Method::POST {
        let body = jsonrpc::error_response(None, INVALID_REQUEST, "Session not found");
        return http::json(404, &body);
    }
    http::plain(404, "Session not found")
}
