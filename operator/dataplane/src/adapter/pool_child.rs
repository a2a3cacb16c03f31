//! One child of `--child-per-session`: its own core (the shared adapter's, unchanged: one
//! child, its router, its sessions) and its own front, started once and never restarted.
//! Owns the child's start (a process from the command, or a connection to the spawn
//! helper's socket), the wait until it is ready, and its stop; which child serves whom is
//! `pool`'s, the HTTP entry `pool_front`'s.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use super::audit::Audit;
use super::budget::BodyBudget;
use super::child;
use super::config::AdapterConfig;
use super::core::Core;
use super::front::{Front, InputRounds};
use super::metrics::Metrics;
use super::pool_metrics::Spawned;
use crate::hosts::HostPolicy;

/// How often a starting child is asked whether it answered `initialize`.
const READY_POLL: Duration = Duration::from_millis(10);

pub struct PooledChild {
    pub core: Arc<Core>,
    pub front: Arc<Front>,
    /// The task serving the child (None until started); finished once the child ended.
    run: Mutex<Option<JoinHandle<()>>>,
    /// The child's own timers: idle sessions, parked rounds.
    timers: Mutex<Vec<JoinHandle<()>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl PooledChild {
    /// A child not started yet, serving with `config` (one session at most), its metrics,
    /// byte budget and audit shared with every other child.
    pub fn new(
        config: AdapterConfig,
        metrics: Arc<Metrics>,
        budget: Arc<BodyBudget>,
        audit: Option<Arc<Audit>>,
    ) -> Self {
        let hosts = HostPolicy::new(&config.allowed_hosts, &config.allowed_origins);
        let core = Core::new(config, metrics);
        let front = Arc::new(Front {
            core: core.clone(),
            hosts,
            budget,
            gate: None, // the pool's front admits every caller before a child is reached
            scrapers: None,
            audit,
            rounds: InputRounds::new(core.clone()),
            upstream: None,
        });
        Self {
            core,
            front,
            run: Mutex::new(None),
            timers: Mutex::new(Vec::new()),
        }
    }

    /// Start the child and wait until it answered `initialize`, at most until `deadline`.
    pub async fn start(&self, deadline: Instant) -> Spawned {
        let config = &self.core.config;
        let connected = match &config.stdio_fifo_dir {
            Some(directory) => {
                let connecting = child::connect_socket(directory);
                match tokio::time::timeout_at(deadline.into(), connecting).await {
                    Ok(connected) => connected,
                    Err(_) => return Spawned::Timeout,
                }
            }
            None => child::spawn(&config.command),
        };
        let connection = match connected {
            Ok(connection) => connection,
            Err(error) => {
                tracing::error!("Failed to start an MCP server for a new session: {error}");
                return Spawned::Failed;
            }
        };
        *lock(&self.run) = Some(tokio::spawn(self.core.clone().run_once(connection)));
        lock(&self.timers).extend([
            tokio::spawn(self.core.clone().expire_sessions()),
            tokio::spawn(self.front.rounds.clone().expire()),
        ]);
        loop {
            if self.core.init_result().is_some() {
                return Spawned::Ready;
            }
            if self.ended() {
                return Spawned::Failed;
            }
            if Instant::now() >= deadline {
                return Spawned::Timeout;
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// Whether the child can serve no more: it was never started, or it ended.
    pub fn ended(&self) -> bool {
        lock(&self.run).as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Whether the child serves anything now (a call, a stream).
    pub fn busy(&self) -> bool {
        self.core.busy()
    }

    /// How many legacy sessions it holds (one at most).
    pub fn sessions(&self) -> usize {
        self.core.router().sessions.len()
    }

    /// Stop the child: its process group (SIGTERM, then SIGKILL after the grace), or its
    /// connection to the spawn helper (the helper stops the server); its timers end.
    pub async fn stop(&self) {
        for timer in lock(&self.timers).drain(..) {
            timer.abort();
        }
        let run = lock(&self.run).take();
        if let Some(run) = run {
            self.core.request_shutdown();
            let grace = self.core.config.shutdown_grace() + Duration::from_secs(1);
            if tokio::time::timeout(grace, run).await.is_err() {
                tracing::warn!("An MCP server of a session did not stop within its grace");
            }
        }
    }
}
