//! `--child-per-session`'s `/healthz`, `/readyz` and `/metrics`: the pool's children and
//! limits, and the adapter's metrics summed over every child (with the counts of children
//! already stopped, so that counters never go down) next to the pool's own.

use hyper::Response;
use serde_json::json;

use super::budget::BodyBudget;
use super::child::SPAWN_SOCKET;
use super::config::AdapterConfig;
use super::metrics::Metrics;
use super::pool::Pool;
use super::pool_child::PooledChild;
use super::pool_metrics::PoolMetrics;
use crate::http::{self, Body};

/// Whether a child could be started now: in a managed Pod, once the server container's
/// spawn helper listens.
fn can_spawn(config: &AdapterConfig) -> bool {
    config
        .stdio_fifo_dir
        .as_ref()
        .is_none_or(|directory| directory.join(SPAWN_SOCKET).exists())
}

/// The health body; for `/readyz` (`readiness`), 503 while no new child could start.
pub fn health(
    config: &AdapterConfig,
    pool: &Pool<PooledChild>,
    budget: &BodyBudget,
    readiness: bool,
) -> Response<Body> {
    let ok = !readiness || (pool.can_admit() && can_spawn(config));
    let body = json!({
        "status": if ok { "ok" } else { "unavailable" },
        "mode": "perSession",
        "auth": config.auth.name(),
        "children": pool.len(),
        "sessions": pool.children().map(|child| child.sessions()).sum::<usize>(),
        "limits": {
            "maxChildren": pool.max_children(),
            "childrenEvicted": pool.evicted(),
            "inflightBytes": budget.in_use(),
            "maxInflightBytes": budget.limit(),
            "refusedForBytes": budget.refused(),
        },
    });
    http::json(if ok { 200 } else { 503 }, &body)
}

/// The metrics page: sessions, calls and unattributed messages summed over the children
/// (`retired`: the unattributed log messages and requests of stopped ones), then the pool's.
pub fn metrics(
    pool: &Pool<PooledChild>,
    metrics: &Metrics,
    counts: &PoolMetrics,
    retired: (u64, u64),
) -> Response<Body> {
    let (mut sessions, mut inflight, (mut log, mut request)) = (0, 0, retired);
    for child in pool.children() {
        let router = child.core.router();
        sessions += router.sessions.len();
        inflight += router.inflight();
        log += router.unattributed_log;
        request += router.unattributed_request;
    }
    let page = metrics.encode(sessions, inflight, (log, request));
    let ours = counts.encode(pool.len());
    let page = match page.strip_suffix("# EOF\n") {
        Some(head) => format!("{head}{ours}# EOF\n"),
        None => page + &ours,
    };
    let mut response = http::plain(200, &page);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
