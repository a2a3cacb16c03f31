//! `mcp-dataplane bridge`: one governed MCP endpoint for an agent, in front of the run's
//! MCPServers (docs/bridge.md), the first slice of the port of `mcp-operator bridge`: tools
//! of servers of both eras, filtered and prefixed, listed and called from agents of both
//! eras, arguments validated, failures as structured tool errors, one audit line per call;
//! prompts and resources listed, got and read across the servers; what a server says about
//! a call (its requests, progress) relayed to the agent that made it, and the agent's
//! cancellation to the server.
//! Modules, one job each:
//!
//! - `config`   the command line and the `BridgeConfig` file
//! - `policy`   one server's effective call policy, typed and checked
//! - `egress`   where the bridge may connect upstream: an address or host judged
//! - `naming`   exposed names and filters (the shared naming plan)
//! - `upstream` one server's MCP client session, both eras, over the keep-alive client
//!   (`upstream/`: `negotiate` the era, `wire` one message and its answer, `headers` the
//!   configured headers, their problems and the values to mask, `tls` HTTPS verified
//!   against the system's CA certificates, `guard` the egress guard at every connect,
//!   `oauth` the OAuth token sent (`auth`, typed in `oauth_config`), `legacy_sse` the legacy
//!   HTTP+SSE transport and `legacy_routing` its endpoint and events)
//! - `sse`      Server-Sent Events read off a server's answer
//! - `scrub`    masking the header values in use in what servers echo
//! - `catalog`  exposed name → server, original name, tool, compiled schema
//! - `pins`     the digest of a tool's definition, and a live one that is not the pinned one
//! - `overrides` the operator's text for a tool, and the arguments it fixes
//! - `validate` arguments against the tool's `inputSchema`
//! - `rules`    the authorization rules (CEL): a call allowed or denied, always-denied tools unlisted
//! - `errors`   the structured tool error
//! - `pii`      PII found, redacted or blocked in arguments and results (`pii/`: `detectors`
//!   the kinds, `checksums` their rules, `leaves` a value walked and rebuilt, `hook` the modes)
//! - `audit`    one JSON line per call, never a value
//! - `core`     the running state of one configuration: servers, catalogs, sessions
//! - `slot`     one configured server: its session, its last listings, its followers
//! - `reload`   the configuration file watched, and a new one applied without a restart
//! - `discovery` `discovery: search`: the two tools listed, the search, a call by name routed
//! - `pipeline` a tools/call: validate, call, structured errors, audit line
//! - `ratelimit` the rate limits: a token bucket per limit and tool (`rate_limited`)
//! - `breaker`  the circuit breaker of one server (`circuit_open`)
//! - `retry`    retries of transient failures of safe tools, under the breaker and deadline
//! - `approval` a held call approved by a person: the run's webhook, else the agent by
//!   elicitation (`approval/`: `settings` the run's settings, `webhook`, `elicit`)
//! - `prompts`  the prompt catalog, and the prompt and resource filters
//! - `uris`     resource URIs namespaced per server, reversibly
//! - `subscriptions` resource subscriptions, counted per agent session, and their updates
//! - `cursor`   the signed cursors of listings walked across servers
//! - `aggregate` prompts and resources: listed, got and read across the servers
//! - `logs`     servers' log messages: each agent session's level, fanned out and filtered
//! - `relay`    what a server says about one agent's call, judged for that agent alone
//!   (`relay/heard`: a message on the call's stream asked, refused, answered or passed on)
//! - `upcall`   a relayed call at its server: its stream heard, its rounds, its cancellation
//! - `inputs`   a 2026-07-28 server's `input_required` round judged and asked of the agent
//! - `agent`    the agent's side of relayed calls: questions owed, calls to cancel, parked rounds
//! - `waiting`  one relayed call waited for in the agent's era (JSON, SSE, input_required)
//! - `front`    the agent's endpoint, both eras
//! - `health`   `/healthz`, `/readyz` and `/metrics` on the health port
//! - `metrics`  the Prometheus metrics

pub mod agent;
pub mod aggregate;
pub mod approval;
pub mod audit;
pub mod breaker;
pub mod catalog;
pub mod config;
pub mod core;
pub mod cursor;
pub mod discovery;
pub mod egress;
pub mod errors;
pub mod front;
pub mod health;
pub mod inputs;
pub mod logs;
pub mod metrics;
pub mod naming;
pub mod overrides;
pub mod pii;
pub mod pins;
pub mod pipeline;
pub mod policy;
pub mod prompts;
pub mod ratelimit;
pub mod relay;
pub mod reload;
pub mod retry;
pub mod rules;
pub mod scrub;
pub mod slot;
pub mod sse;
pub mod subscriptions;
pub mod upcall;
pub mod upstream;
pub mod uris;
pub mod validate;
pub mod waiting;

use std::net::{Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

use crate::auth::gate::{Gate, Uncounted};
use crate::hosts::HostPolicy;
use config::BridgeArgs;

/// Calls in flight at SIGTERM are given this long to finish.
const DRAIN: Duration = Duration::from_secs(25);
/// A client that does not send its request head within this is disconnected.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the standard environment asks for traces (an OTLP endpoint, not turned off with
/// `OTEL_TRACES_EXPORTER=none` or `OTEL_SDK_DISABLED=true`): said once at start, since they
/// are not exported. The endpoint itself is not logged (it may carry credentials).
fn traces_asked_for() -> bool {
    let set = |name: &str| std::env::var(name).is_ok_and(|v| !v.trim().is_empty());
    let asked = set("OTEL_EXPORTER_OTLP_ENDPOINT") || set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let off = std::env::var("OTEL_TRACES_EXPORTER").is_ok_and(|e| e.trim() == "none")
        || std::env::var("OTEL_SDK_DISABLED").is_ok_and(|d| d.trim().eq_ignore_ascii_case("true"));
    asked && !off
}

/// Run the bridge until SIGTERM or SIGINT; the exit code.
pub async fn run(args: BridgeArgs) -> i32 {
    let seen = std::fs::read(&args.config).ok();
    let config = match config::load(&args.config) {
        Ok(config) => config,
        Err(why) => {
            eprintln!("mcp-dataplane bridge: {why}");
            return 2;
        }
    };
    let audit = match audit::AuditSink::open(config.audit.stdout, config.audit.file.as_deref()) {
        Ok(audit) => audit,
        Err(why) => {
            eprintln!("mcp-dataplane bridge: cannot open the audit file: {why}");
            return 2;
        }
    };
    if traces_asked_for() {
        tracing::warn!(
            "Traces were asked for (an OTLP endpoint is set) but this bridge exports none yet; the Python bridge (mcp-operator bridge) does, and the operator renders it for runs with spec.bridge.tracing"
        );
    }
    let listen = config.listen.clone();
    let address = crate::adapter::listen_address(&listen.host, listen.port);
    let listener = match TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("mcp-dataplane bridge: cannot listen on {address}: {error}");
            return 2;
        }
    };
    let health_address = SocketAddr::new(Ipv6Addr::UNSPECIFIED.into(), args.health_port);
    let health_listener = match TcpListener::bind(health_address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("mcp-dataplane bridge: cannot listen on {health_address}: {error}");
            return 2;
        }
    };
    let gate = match args.metrics_access.as_deref() {
        None => None,
        Some(path) => match Gate::open(path, Box::new(Uncounted), false) {
            Ok(gate) => Some(Arc::new(gate)),
            Err(why) => {
                eprintln!("mcp-dataplane bridge: --metrics-access: {why}");
                return 2;
            }
        },
    };
    let core = core::Core::new(config, audit, Duration::from_secs_f64(args.relist_seconds));
    let live = reload::Live::new(core.clone());
    let hosts = Arc::new(HostPolicy::new(std::slice::from_ref(&listen.host), &[]));
    let calls = core.calls.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            calls.expire();
        }
    });
    reload::follow_all(&live, &core.slots);
    let watcher = reload::Watcher::new(args.config.clone(), seen);
    let every = Duration::from_secs_f64(args.reload_seconds);
    tokio::spawn(reload::watch(live.clone(), watcher, every));
    tracing::info!(
        "Serving MCP on http://{address}{} for {} ({} servers); health on port {}",
        listen.path,
        core.run,
        core.config.servers.len(),
        args.health_port
    );
    drop(core); // a request, a follower, holds the configuration it runs on
    let (Ok(mut terminate), Ok(mut interrupt)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        eprintln!("mcp-dataplane bridge: cannot install signal handlers");
        return 2;
    };
    let serving_live = live.clone();
    let serving = crate::http::serve(listener, HEADER_TIMEOUT, move |request, peer| {
        // The configuration running when the request came, to its end.
        let front = front::Front {
            core: serving_live.core(),
            hosts: hosts.clone(),
        };
        Arc::new(front).handle(request, peer)
    });
    let health_live = live.clone();
    let health = crate::http::serve(health_listener, HEADER_TIMEOUT, move |request, _| {
        let response = health::handle(&health_live.core(), gate.as_deref(), &request);
        async move { response }
    });
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
        () = serving => return 1,
        () = health => return 1,
    }
    tracing::info!("Stopping: closing the agents' streams and finishing the calls in flight");
    let core = live.core();
    core.stopping.store(true, Ordering::Relaxed);
    core.sessions().clear();
    let started = Instant::now();
    while core.inflight.load(Ordering::SeqCst) > 0 && started.elapsed() < DRAIN {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let closing: Vec<_> = core.upstreams.iter().flatten().map(|u| u.close()).collect();
    for close in closing {
        close.await;
    }
    tracing::info!("Stopped");
    0
}
