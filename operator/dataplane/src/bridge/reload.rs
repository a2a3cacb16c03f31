//! Reload without restart (`bridge/reload.py`, and what `BridgeCore.apply` and
//! `UpstreamPool.configure` do with a new configuration).
//!
//! The watcher polls the configuration *path* every `--reload-seconds` (2 s) and compares
//! the content: a ConfigMap volume is updated by the kubelet through a symlink swap, so the
//! file's inode, even its directory, changes. A new content that does not load is logged and
//! counted (`mcp_bridge_config_reloads_total{result="invalid"}`) and the running
//! configuration kept; a valid one is applied once (`result="applied"`).
//!
//! Applying builds the next `Core` (one configuration, `core`) and swaps it in. `Live` holds
//! the running one in a `tokio::sync::watch` cell: a request takes `Live::core()` once — a
//! read lock held only to clone an `Arc`, never across an await — and runs on that snapshot
//! to its end, so a call in flight on a removed server finishes on the configuration it
//! started in (its server's session is ended only after it, within the server's deadline).
//! A server whose connection settings (`signature`) stay keeps its `Slot`: its session, its
//! listing and its followers, listed again at once only when its pins changed (the
//! operator's probe saw other definitions); a new or changed server gets a new slot and is
//! listed; a removed or replaced one is retired, its metric series dropped. The catalog is
//! rebuilt before the swap (the tools of the running catalog keep their names) and the
//! agents' streams hear `notifications/tools/list_changed` (and the prompts' one) when what
//! they see changed. The listen address needs a restart: a new one is logged and ignored.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use super::audit::AuditSink;
use super::config::{self, BridgeConfig, Server};
use super::core::{Core, Slot};
use super::naming::hex;
use super::slot::{follow, follow_changes};
use super::upstream::{header_problem, secret_values};

/// `--reload-seconds` below this is this (`max(0.1, …)` of the Python command line).
const MIN_RELOAD_SECONDS: f64 = 0.1;
/// … and above this is this (a day: as good as never).
const MAX_RELOAD_SECONDS: f64 = 86_400.0;
/// A retired session's calls in flight are looked for this often.
const DRAIN_POLL: Duration = Duration::from_millis(50);

/// `--reload-seconds`: a number of seconds, at least 0.1 (a smaller one, or NaN, is 0.1).
pub fn reload_seconds(text: &str) -> Result<f64, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| "must be a number of seconds".to_owned())?;
    Ok(if seconds >= MIN_RELOAD_SECONDS {
        seconds.min(MAX_RELOAD_SECONDS)
    } else {
        MIN_RELOAD_SECONDS
    })
}

/// The running configuration's `Core`, swapped whole by a reload.
pub struct Live {
    current: watch::Sender<Arc<Core>>,
}

impl Live {
    pub fn new(core: Arc<Core>) -> Arc<Self> {
        Arc::new(Self {
            current: watch::channel(core).0,
        })
    }

    /// The running configuration: a request holds it to its end.
    pub fn core(&self) -> Arc<Core> {
        self.current.borrow().clone()
    }
}

/// Start the followers of `slots` (at start, and a reload's new servers).
pub fn follow_all(live: &Arc<Live>, slots: &[Arc<Slot>]) {
    for slot in slots {
        tokio::spawn(follow(live.clone(), slot.clone()));
        tokio::spawn(follow_changes(live.clone(), slot.clone()));
    }
}

/// What forces a new session with a server when it changes (`_connection_signature`): its
/// URL, transport, protocol hint, headers (and the values they read now), token file and
/// auth; hashed, so that no header value is kept here.
pub fn signature(server: &Server) -> String {
    let headers: Vec<_> = server
        .headers
        .iter()
        .map(|h| json!([h.name, h.value, h.value_file]))
        .collect();
    let problem = header_problem(server).map(|(_, why)| why);
    let text = json!([
        server.key(),
        server.url,
        server.transport,
        server.protocol_version,
        headers,
        server.token_file,
        server.auth,
        secret_values(server),
        problem,
    ])
    .to_string();
    hex(&Sha256::digest(text.as_bytes()))
}

/// What the operator's probe last saw of a server's tools (its pinned names and digests).
fn same_pins(a: &Server, b: &Server) -> bool {
    a.tools == b.tools && a.tool_digests == b.tool_digests
}

/// Take a new (valid) configuration without a restart.
pub fn apply(live: &Arc<Live>, mut config: BridgeConfig) {
    let old = live.core();
    let (was, now) = (&old.config.listen, &config.listen);
    if (&was.host, was.port, &was.path) != (&now.host, now.port, &now.path) {
        tracing::warn!(
            "Kept listening on {}:{}{}: a new listen address needs a restart",
            was.host,
            was.port,
            was.path
        );
        config.listen = was.clone();
    }
    let mut shared = old.shared();
    let (was, now) = (&old.config.audit, &config.audit);
    if (was.stdout, &was.file) != (now.stdout, &now.file) {
        match AuditSink::open(now.stdout, now.file.as_deref()) {
            Ok(sink) => shared.audit = Arc::new(sink),
            Err(why) => tracing::error!("Could not open the audit file, kept the running audit: {why}"),
        }
    }
    let mut claimed = vec![false; old.slots.len()];
    let (mut fresh, mut repinned) = (Vec::new(), Vec::new());
    let mut slots = Vec::new();
    for server in &config.servers {
        let signature = signature(server);
        let key = server.key();
        let kept = old
            .slots
            .iter()
            .zip(&old.config.servers)
            .enumerate()
            .find(|(i, (slot, _))| {
                !claimed[*i] && slot.key == key && slot.signature == signature && !slot.is_retired()
            });
        match kept {
            Some((index, (slot, before))) => {
                claimed[index] = true;
                if !same_pins(before, server) && slot.upstream.is_some() {
                    repinned.push(slot.clone());
                }
                slots.push(slot.clone());
            }
            None => {
                let slot = Arc::new(Slot::new(server, &shared.client, &shared.metrics, signature));
                fresh.push(slot.clone());
                slots.push(slot);
            }
        }
    }
    let mut next = Core::assemble(config, slots, shared, old.catalogs());
    carry_breakers(&old, &mut next);
    let next = Arc::new(next);
    let changed = next.refresh();
    live.current.send_replace(next.clone());
    next.announce(changed);
    for (slot, server) in old
        .slots
        .iter()
        .zip(&old.config.servers)
        .zip(claimed)
        .filter_map(|(pair, kept)| (!kept).then_some(pair))
    {
        slot.retire();
        if !next.slots.iter().any(|s| s.key == slot.key) {
            next.metrics.forget_server(&slot.key);
        }
        let drain = Duration::from_secs(server.timeout_seconds());
        tokio::spawn(end_session(slot.clone(), drain));
    }
    follow_all(live, &fresh);
    for slot in repinned {
        slot.relist.notify_one();
    }
}

/// A server that stays keeps its circuit breaker (its state), with the new policy's
/// threshold and open time (`CallPipeline.reconfigure`).
fn carry_breakers(old: &Core, next: &mut Core) {
    for (index, server) in next.config.servers.iter().enumerate() {
        let key = server.key();
        let Some(kept) = old.slots.iter().position(|s| s.key == key) else {
            continue;
        };
        let breaker = old.breakers[kept].clone();
        {
            let mut held = breaker.lock().expect("the breaker lock");
            let policy = &server.policy.circuit_breaker;
            held.failure_threshold = policy.failure_threshold;
            held.open_for = Duration::from_secs(policy.open_seconds);
        }
        next.breakers[index] = breaker;
    }
}

/// End a removed or replaced server's session: its calls in flight (which hold its session
/// through the configuration they started in) finish first, within its call deadline, then
/// the server hears the session is over.
async fn end_session(slot: Arc<Slot>, drain: Duration) {
    let Some(upstream) = slot.upstream.clone() else {
        return;
    };
    let started = Instant::now();
    // Held here twice: by the slot and by this task.
    while Arc::strong_count(&upstream) > 2 && started.elapsed() < drain {
        tokio::time::sleep(DRAIN_POLL).await;
    }
    upstream.close().await;
}

/// What one look at the file found.
#[derive(Debug)]
pub enum Checked {
    /// The content seen last (applied or refused), or a file that cannot be read.
    Unchanged,
    /// A new content that does not load: the running configuration is kept.
    Refused,
    /// A new valid configuration, to apply.
    Valid(Box<BridgeConfig>),
}

/// Looks at one configuration file; each new content is judged once.
pub struct Watcher {
    path: PathBuf,
    /// The content last read (applied or refused); empty after a failed read.
    seen: Option<Vec<u8>>,
}

impl Watcher {
    /// `seen`: the content the bridge started with.
    pub fn new(path: PathBuf, seen: Option<Vec<u8>>) -> Self {
        Self { path, seen }
    }

    pub fn check(&mut self) -> Checked {
        let content = match std::fs::read(&self.path) {
            Ok(content) => content,
            Err(error) => {
                if self.seen.as_deref() != Some(b"") {
                    tracing::error!(
                        "Could not read {}, kept the running configuration: {error}",
                        self.path.display()
                    );
                    self.seen = Some(Vec::new());
                }
                return Checked::Unchanged;
            }
        };
        if self.seen.as_ref() == Some(&content) {
            return Checked::Unchanged;
        }
        let text = String::from_utf8_lossy(&content).into_owned();
        self.seen = Some(content);
        match config::parse(&text, &self.path.display().to_string()) {
            Ok(config) => Checked::Valid(Box::new(config)),
            Err(why) => {
                tracing::error!("Refused the new configuration, kept the running one: {why}");
                Checked::Refused
            }
        }
    }
}

/// Look at the file every `every` and apply each new valid content, for ever.
pub async fn watch(live: Arc<Live>, mut watcher: Watcher, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        match watcher.check() {
            Checked::Unchanged => {}
            Checked::Refused => live.core().metrics.observe_reload(false),
            Checked::Valid(config) => {
                let (run, servers) = (
                    format!("{}/{}", config.run.namespace, config.run.name),
                    config.servers.len(),
                );
                apply(&live, *config);
                tracing::info!("Applied the new configuration of {run} with {servers} servers");
                live.core().metrics.observe_reload(true);
            }
        }
    }
}

#[cfg(test)]
#[path = "reload_tests.rs"]
mod tests;
