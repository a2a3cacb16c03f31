//! The children of `--child-per-session` brought up and down: a child spawned into a place
//! reserved for it (released, and the child stopped, unless it became ready in time), a
//! dropped child reaped in the background with its counts kept, idle and ended children
//! reaped once a second, every child stopped at shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hyper::Response;
use serde_json::Value;

use super::{PoolFront, lock};
use crate::adapter::front::unavailable;
use crate::adapter::pool::SESSION_KEY;
use crate::adapter::pool_child::PooledChild;
use crate::adapter::pool_metrics::{Reaped, Spawned};
use crate::http::Body;

const REAP_PERIOD: Duration = Duration::from_secs(1);

impl PoolFront {
    /// A new place with a ready child, or the 503 that refuses it (pool full, spawn failed or
    /// too slow).
    pub(super) async fn spawn(
        self: &Arc<Self>,
        caller: &str,
        request_id: Option<&Value>,
    ) -> Result<(String, Arc<PooledChild>), Response<Body>> {
        let child = Arc::new(PooledChild::new(
            self.child_config.clone(),
            self.metrics.clone(),
            self.budget.clone(),
            self.audit.clone(),
        ));
        let reserved = {
            let mut pool = lock(&self.pool);
            let now = Instant::now();
            pool.refresh(now, PooledChild::busy);
            pool.reserve(caller, child.clone(), now)
        };
        let (id, dropped) = match reserved {
            Ok(reserved) => reserved,
            Err(full) => {
                self.counts.refused();
                let text = format!("All {} MCP server processes are busy; retry later", full.0);
                return Err(unavailable(request_id, &text));
            }
        };
        for old in dropped {
            self.reap(old, Reaped::Evicted);
        }
        // Until it is ready, the place and the child go with this request (a client gone
        // meanwhile leaves neither behind).
        let mut reserved = Reserved {
            front: self.clone(),
            id: Some(id),
            child: child.clone(),
        };
        let started = Instant::now();
        let outcome = child.start(started + self.config.spawn_timeout()).await;
        if outcome == Spawned::Ready {
            self.counts
                .spawned(outcome, Some(started.elapsed().as_secs_f64()));
            let id = reserved.id.take().unwrap_or_default();
            return Ok((id, child));
        }
        self.counts.spawned(outcome, None);
        tracing::warn!(
            "A new MCP server process did not become ready within {:.0}s ({outcome:?}); stopped it",
            self.config.spawn_timeout_seconds
        );
        drop(reserved);
        Err(unavailable(request_id, "The MCP server did not start in time"))
    }

    /// Stop a dropped child in the background; its counts stay in the totals.
    pub(super) fn reap(&self, child: Arc<PooledChild>, reason: Reaped) {
        self.counts.reaped(reason);
        tracing::debug!("Reaped a child ({reason:?})");
        {
            let router = child.core.router();
            let mut retired = lock(&self.retired);
            retired.0 += router.unattributed_log;
            retired.1 += router.unattributed_request;
        }
        tokio::spawn(async move { child.stop().await });
    }

    /// Once a second: idle children stopped, children whose process or session ended reaped.
    pub async fn reap_idle(self: Arc<Self>) {
        let mut tick = tokio::time::interval(REAP_PERIOD);
        loop {
            tick.tick().await;
            let now = Instant::now();
            let (expired, ended) = {
                let mut pool = lock(&self.pool);
                pool.refresh(now, PooledChild::busy);
                let expired = pool.expire(now);
                let gone: Vec<String> = pool
                    .bound()
                    .filter(|(_, key, child, in_use)| {
                        !in_use && (child.ended() || (key.starts_with(SESSION_KEY) && child.sessions() == 0))
                    })
                    .map(|(id, ..)| id.to_owned())
                    .collect();
                let ended: Vec<_> = gone.iter().filter_map(|id| pool.release(id)).collect();
                (expired, ended)
            };
            for child in expired {
                self.reap(child, Reaped::Idle);
            }
            for child in ended {
                self.reap(child, Reaped::Exited);
            }
        }
    }

    /// Stop every child (shutdown), each within its grace.
    pub async fn stop(&self) {
        let children = lock(&self.pool).clear();
        let mut stopping = tokio::task::JoinSet::new();
        for child in children {
            stopping.spawn(async move { child.stop().await });
        }
        while stopping.join_next().await.is_some() {}
    }
}

/// A place reserved for a child that is starting: released, and the child stopped, unless
/// the spawn succeeded (`id` taken).
struct Reserved {
    front: Arc<PoolFront>,
    id: Option<String>,
    child: Arc<PooledChild>,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            lock(&self.front.pool).release(&id);
            let child = self.child.clone();
            tokio::spawn(async move { child.stop().await });
        }
    }
}
