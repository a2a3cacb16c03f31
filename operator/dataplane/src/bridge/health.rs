//! The health port (`--health-port`, every address of both families): `/healthz` (200 while
//! the process serves) and `/readyz` (200 once every server's first listing is done,
//! successful or not; the body names each server's `listed`, `up`, `protocol`, tool count
//! and `problem`), as `bridge/health.py` answers them; `/metrics`, to the scrapers
//! `--metrics-access` permits (to anyone without it).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use hyper::body::Incoming;
use hyper::{Method, Request, Response};
use serde_json::{Map, Value, json};

use super::core::Core;
use crate::auth::gate::{Gate, admit_scraper};
use crate::http::{self, Body};

pub fn handle(core: &Arc<Core>, gate: Option<&Gate>, request: &Request<Incoming>) -> Response<Body> {
    let path = request.uri().path();
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return http::plain(405, "Method Not Allowed");
    }
    match path {
        "/healthz" => {
            let (_, body) = body(core, true);
            http::json(200, &body)
        }
        "/readyz" => {
            let (ready, body) = body(core, core.ready());
            http::json(if ready { 200 } else { 503 }, &body)
        }
        "/metrics" => {
            if let Err(refusal) = admit_scraper(gate, request) {
                return refusal;
            }
            let mut response = http::plain(200, &core.metrics.encode());
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        _ => http::plain(404, "Not Found"),
    }
}

fn body(core: &Core, ok: bool) -> (bool, Value) {
    let mut servers = Map::new();
    for (server, state) in core.config.servers.iter().zip(core.states()) {
        let mut entry = json!({
            "listed": state.listed_once,
            "up": state.up,
            "protocol": state.protocol,
            "tools": state.tools.as_ref().map_or(0, Vec::len),
        });
        if let Some(problem) = state.problem {
            entry["problem"] = json!(problem);
        }
        servers.insert(server.key(), entry);
    }
    let body = json!({
        "status": if ok { "ok" } else { "unavailable" },
        "servers": servers,
        "tools": core.catalog().entries.len(),
        "sessions": core.sessions().len(),
        "inflight": core.inflight.load(Ordering::Relaxed),
    });
    (ok, body)
}
