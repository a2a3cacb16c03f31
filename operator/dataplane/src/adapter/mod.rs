//! `mcp-dataplane adapter`: one stdio MCP server served to many HTTP clients of both
//! protocol eras (docs/adapter.md). Modules, one job each:
//!
//! - `config`   the typed configuration (flags and environment)
//! - `router`   the protocol core: id and token remapping, routing, attribution, cancellation
//!   (`router/`: `from_child` what the child says, `server_requests` its requests to clients)
//! - `child`    the stdio child: spawn in its own group, bounded lines, stop
//! - `core`     the running state: the supervised child, the router, health
//! - `front`    the HTTP entry: health, metrics, both eras, answers as JSON or SSE (`front/`:
//!   `legacy` and `modern` the eras, `calls` one forwarded call, `rounds` input-required rounds)
//! - `listeners` the 2026-07-28 `subscriptions/listen` streams: agreement, fan-out tags
//! - `metrics`  the Prometheus metrics
//! - `oversized` the call a child's line over the limit answers
//! - `budget`   the byte budget of request bodies in flight
//! - `audit`    one JSON line per `tools/call`: the verified caller, tool, outcome, duration
//! - `upstream` front mode: the checked requests forwarded to an HTTP server of the Pod
//! - `pool`     `--child-per-session`: which child serves which session or caller (pure)
//! - `pool_child` one child of the pool: its own core and front, start, stop
//! - `pool_front` `--child-per-session`'s HTTP entry: routing, spawn, reaping, health
//!   (`pool_front/children`: the children's spawn, reaping and shutdown)
//! - `pool_health` the pool's health and metrics pages
//! - `pool_metrics` the pool's metrics: spawns, refusals, reaped children

pub mod audit;
pub mod budget;
pub mod child;
pub mod config;
pub mod core;
pub mod front;
pub mod listeners;
pub mod metrics;
pub mod oversized;
pub mod pool;
pub mod pool_child;
pub mod pool_front;
pub mod pool_health;
pub mod pool_metrics;
pub mod router;
pub mod upstream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{SignalKind, signal};

use crate::auth::gate::{Gate, Uncounted};
use crate::hosts::HostPolicy;
use config::{AdapterConfig, AuthMode};

/// Run the adapter until SIGTERM or SIGINT; the exit code.
pub async fn run(config: AdapterConfig) -> i32 {
    let problems = config.problems();
    if !problems.is_empty() {
        for problem in problems {
            eprintln!("mcp-dataplane adapter: {problem}");
        }
        return 2;
    }
    if config.make_fifos {
        let directory = config
            .stdio_fifo_dir
            .as_deref()
            .unwrap_or(std::path::Path::new("."));
        return match child::make_fifos(directory) {
            Ok(()) => 0,
            Err(why) => {
                eprintln!(
                    "mcp-dataplane adapter: cannot make the FIFOs in {}: {why}",
                    directory.display()
                );
                1
            }
        };
    }
    let metrics = metrics::Metrics::new(config.auth.name());
    let refusals = Box::new(metrics.auth_refusals());
    let gate = match (&config.auth, &config.access_config) {
        (AuthMode::Kubernetes, Some(path)) => match Gate::open(path, refusals, true) {
            Ok(gate) => Some(gate),
            Err(why) => {
                eprintln!("mcp-dataplane adapter: {why}");
                return 2;
            }
        },
        _ => {
            tracing::warn!("Authentication is off (--auth none): every caller is served as anonymous");
            None
        }
    };
    // The scrapers' gate: the same verifier and cache, nothing counted, and a file without
    // issuer keys (the operator could not read them) refusing every scrape rather than
    // stopping the adapter.
    let scrapers = match config.metrics_access.as_deref() {
        Some(path) => match Gate::open(path, Box::new(Uncounted), false) {
            Ok(gate) => Some(gate),
            Err(why) => {
                eprintln!("mcp-dataplane adapter: --metrics-access: {why}");
                return 2;
            }
        },
        None => None,
    };
    let audit = match config.audit.as_deref().map(audit::Audit::open).transpose() {
        Ok(audit) => audit.map(Arc::new),
        Err(why) => {
            eprintln!("mcp-dataplane adapter: cannot open the audit file: {why}");
            return 2;
        }
    };
    let address = listen_address(&config.host, config.port);
    let listener = match TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("mcp-dataplane adapter: cannot listen on {address}: {error}");
            return 2;
        }
    };
    if config.child_per_session {
        return run_pool(config, metrics, gate, scrapers, audit, listener, address).await;
    }
    let hosts = HostPolicy::new(&config.allowed_hosts, &config.allowed_origins);
    let core = core::Core::new(config, Arc::new(metrics));
    let budget = budget::BodyBudget::new(core.config.max_inflight_bytes, core.config.max_body_bytes);
    let front = Arc::new(front::Front {
        core: core.clone(),
        hosts,
        budget,
        gate,
        scrapers,
        audit,
        rounds: front::InputRounds::new(core.clone()),
        upstream: core.config.upstream_url.as_deref().map(upstream::Upstream::new),
    });
    tracing::info!("Serving MCP on http://{address}{}", core.config.path);
    let supervisor = if front.upstream.is_some() {
        tracing::info!(
            "Front mode: forwarding to {}",
            core.config.upstream_url.as_deref().unwrap_or_default()
        );
        tokio::spawn(std::future::pending())
    } else {
        tokio::spawn(core.clone().supervise())
    };
    tokio::spawn(core.clone().expire_sessions());
    tokio::spawn(front.rounds.clone().expire());
    let (Ok(mut terminate), Ok(mut interrupt)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        eprintln!("mcp-dataplane adapter: cannot install signal handlers");
        return 2;
    };
    let header_timeout = core.config.header_timeout();
    let accepting = crate::http::serve(listener, header_timeout, move |request, peer| {
        front.clone().handle(request, peer)
    });
    tokio::pin!(accepting);
    tokio::pin!(supervisor);
    let code = tokio::select! {
        _ = terminate.recv() => None,
        _ = interrupt.recv() => None,
        ended = &mut supervisor => Some(match ended {
            Ok(Err(why)) => { tracing::error!("Stopping: {why}"); 1 }
            _ => 0,
        }),
        () = &mut accepting => Some(1),
    };
    if let Some(code) = code {
        return code;
    }
    tracing::info!(
        "Stopping: the MCP server gets {:.0}s to exit",
        core.config.shutdown_grace_seconds
    );
    core.request_shutdown();
    let _ = tokio::time::timeout(core.config.shutdown_grace() + Duration::from_secs(1), supervisor).await;
    0
}

/// `--child-per-session`: serve until SIGTERM or SIGINT, then stop every child.
async fn run_pool(
    config: AdapterConfig,
    metrics: metrics::Metrics,
    gate: Option<Gate>,
    scrapers: Option<Gate>,
    audit: Option<Arc<audit::Audit>>,
    listener: TcpListener,
    address: SocketAddr,
) -> i32 {
    tracing::info!(
        "Serving MCP on http://{address}{}, one MCP server per session (at most {})",
        config.path,
        config.max_children
    );
    let header_timeout = config.header_timeout();
    let front = pool_front::PoolFront::new(config, metrics, gate, scrapers, audit);
    let reaper = tokio::spawn(front.clone().reap_idle());
    let (Ok(mut terminate), Ok(mut interrupt)) =
        (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
    else {
        eprintln!("mcp-dataplane adapter: cannot install signal handlers");
        return 2;
    };
    let serving = front.clone();
    let accepting = crate::http::serve(listener, header_timeout, move |request, peer| {
        serving.clone().handle(request, peer)
    });
    let code = tokio::select! {
        _ = terminate.recv() => 0,
        _ = interrupt.recv() => 0,
        () = accepting => 1,
    };
    tracing::info!("Stopping: every MCP server gets its grace to exit");
    reaper.abort();
    front.stop().await;
    code
}

pub fn listen_address(host: &str, port: u16) -> SocketAddr {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip = if host.is_empty() || host == "::" {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    } else if host == "localhost" {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        host.parse().unwrap_or(std::net::Ipv4Addr::LOCALHOST.into())
    };
    SocketAddr::new(ip, port)
}
