//! The adapter's HTTP entry: `/healthz`, `/readyz` (open to anyone: the kubelet's probes
//! carry no token), `/metrics` (with `--metrics-access`, only the scrapers it lists), and
//! the MCP endpoint —
//! Host/Origin first, then the era (a `MCP-Protocol-Version` naming no handshake revision
//! is the stateless 2026-07-28 entry), then the legacy session protocol by method (POST,
//! GET, DELETE). A forwarded call is answered as JSON, or as SSE once something related to
//! it (progress, a server request) comes before its answer and the client accepts SSE.
//!
//! Modules: this one the entry (routes, admission, the byte budget, front mode, health and
//! metrics); `legacy` the session era by method; `modern` the stateless 2026-07-28 era;
//! `calls` one forwarded call from request to answer; `rounds` 2026-07-28 input-required
//! rounds, parked between a call's requests.

mod calls;
mod legacy;
mod modern;
mod rounds;

use std::net::SocketAddr;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::Value;

use super::audit::Audit;
use super::budget::{self, BodyBudget};
use super::core::Core;
use super::upstream::{Forwarding, Upstream};
use crate::auth::gate::{Gate, admit_scraper};
use crate::era;
use crate::hosts::{HostPolicy, Refusal};
use crate::http::{self, Body};
use crate::jsonrpc::{self, INTERNAL_ERROR};

pub use rounds::InputRounds;

pub struct Front {
    pub core: Arc<Core>,
    pub hosts: HostPolicy,
    pub budget: Arc<BodyBudget>,
    /// Who may call (`--auth kubernetes`); None when authentication is off.
    pub gate: Option<Gate>,
    /// Who may read `/metrics` (`--metrics-access`); None: anyone.
    pub scrapers: Option<Gate>,
    pub audit: Option<Arc<Audit>>,
    /// 2026-07-28 calls waiting for their callers' input.
    pub rounds: Arc<InputRounds>,
    /// Front mode (`--upstream-url`): the HTTP server of the Pod that checked requests go to.
    pub upstream: Option<Arc<Upstream>>,
}

/// Who is asking: the key its sessions are counted and owned by, and its audit form.
pub struct Caller {
    pub key: String,
    audit: Value,
}

/// The checks before the MCP endpoint serves anyone: Host and Origin, then who calls (the
/// verified identity, or the client's address with authentication off).
pub fn admit(
    hosts: &HostPolicy,
    gate: Option<&Gate>,
    request: &Request<Incoming>,
    peer: SocketAddr,
) -> Result<Caller, Response<Body>> {
    match hosts.check(http::header(request, "host"), http::header(request, "origin")) {
        Some(Refusal::Host) => return Err(http::plain(421, "Invalid Host header")),
        Some(Refusal::Origin) => return Err(http::plain(403, "Invalid Origin header")),
        None => {}
    }
    Ok(match gate {
        Some(gate) => {
            let verified = gate.admit(request)?;
            Caller {
                key: verified.username(),
                audit: verified.audit(),
            }
        }
        None => Caller {
            key: peer.ip().to_string(),
            audit: serde_json::json!({"kind": "anonymous"}),
        },
    })
}

impl Front {
    pub async fn handle(self: Arc<Self>, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
        let path = request.uri().path();
        match (request.method(), path) {
            (&Method::GET, "/healthz" | "/readyz") if self.upstream.is_some() => {
                let upstream = self.upstream.as_ref().expect("front mode");
                let ok = path == "/healthz" || upstream.accepts().await;
                let body = upstream.health(ok, self.core.config.auth.name());
                return http::json(if ok { 200 } else { 503 }, &body);
            }
            (&Method::GET, "/healthz") => {
                let (running, body) = self.health(running_status);
                return http::json(if running { 200 } else { 503 }, &body);
            }
            (&Method::GET, "/readyz") => {
                let (ready, body) = self.health(|_| self.core.ready());
                return http::json(if ready { 200 } else { 503 }, &body);
            }
            (&Method::GET, "/metrics") => {
                if let Err(refusal) = admit_scraper(self.scrapers.as_ref(), &request) {
                    return refusal;
                }
                return self.metrics();
            }
            _ => {}
        }
        if path != self.core.config.path {
            return http::plain(404, "Not Found");
        }
        let caller = match admit(&self.hosts, self.gate.as_ref(), &request, peer) {
            Ok(caller) => caller,
            Err(refused) => return refused,
        };
        self.serve_mcp(request, &caller).await
    }

    /// The MCP endpoint for an admitted caller: the byte budget, then front mode or the eras.
    pub async fn serve_mcp(&self, request: Request<Incoming>, caller: &Caller) -> Response<Body> {
        let _reservation = if request.method() == Method::POST {
            match self.budget.reserve(http::header(&request, "content-length")) {
                Ok(reservation) => Some(reservation),
                Err(budget::Refused::TooLarge) => {
                    let limit = self.core.config.max_body_bytes;
                    return http::plain(
                        413,
                        &format!("Request body too large: the limit is {limit} bytes"),
                    );
                }
                Err(budget::Refused::Spent) => {
                    // Read and drop the body (within its limit), so that the client, still
                    // sending, reads the refusal rather than a reset connection.
                    let config = &self.core.config;
                    http::discard(request, config.max_body_bytes, config.body_timeout()).await;
                    return unavailable(None, "Too many request bytes in flight; retry later");
                }
            }
        } else {
            None
        };
        if let Some(upstream) = &self.upstream {
            let config = &self.core.config;
            let forwarding = Forwarding {
                max_body_bytes: config.max_body_bytes,
                body_timeout: config.body_timeout(),
                request_timeout: config.request_timeout(),
                audit: self.audit.as_deref().map(|audit| (audit, &caller.audit)),
                metrics: &self.core.metrics,
            };
            return upstream.forward(request, forwarding).await;
        }
        if era::is_modern(http::header(&request, "mcp-protocol-version")) {
            return self.stateless(request, caller).await;
        }
        match *request.method() {
            Method::POST => self.legacy_post(request, caller).await,
            Method::GET => self.legacy_get(&request, caller),
            Method::DELETE => self.legacy_delete(&request, caller),
            _ => http::method_not_allowed("GET, POST, DELETE"),
        }
    }

    /// The health body, with the byte budget's limits; `ok` decides the status.
    fn health(&self, ok: impl Fn(bool) -> bool) -> (bool, Value) {
        let (running, mut body) = self.core.health();
        let ok = ok(running);
        body["status"] = Value::from(if ok { "ok" } else { "unavailable" });
        let limits = &mut body["limits"];
        limits["inflightBytes"] = Value::from(self.budget.in_use());
        limits["maxInflightBytes"] = Value::from(self.budget.limit());
        limits["refusedForBytes"] = Value::from(self.budget.refused());
        (ok, body)
    }

    fn metrics(&self) -> Response<Body> {
        let (sessions, inflight, unattributed) = {
            let router = self.core.router();
            (
                router.sessions.len(),
                router.inflight(),
                (router.unattributed_log, router.unattributed_request),
            )
        };
        let page = self.core.metrics.encode(sessions, inflight, unattributed);
        let mut response = http::plain(200, &page);
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        );
        response
    }
    /// A request's JSON body within the body limit and deadline, or the answer refusing it.
    async fn read_body(&self, request: Request<Incoming>) -> Result<Value, Response<Body>> {
        let config = &self.core.config;
        http::read_json(request, config.max_body_bytes, config.body_timeout())
            .await
            .map_err(|error| error.response())
    }
}

fn running_status(running: bool) -> bool {
    running
}

/// 503 with `Retry-After: 1` and a JSON-RPC error.
pub fn unavailable(id: Option<&Value>, text: &str) -> Response<Body> {
    let mut response = http::json(503, &jsonrpc::error_response(id, INTERNAL_ERROR, text));
    response
        .headers_mut()
        .insert("retry-after", hyper::header::HeaderValue::from_static("1"));
    response
}
