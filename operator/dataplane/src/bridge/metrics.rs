//! The bridge's Prometheus metrics (docs/bridge.md's table, `bridge/metrics.py`'s names):
//! calls by server, exposed tool and outcome, their duration, each server's availability and
//! listings, the catalog's size. Label values stay bounded: `tool` is a catalog name or
//! `(unknown)`, `server` a configured server. `/metrics` is guarded by `--metrics-access`
//! (the shared `auth::gate`) when it is given.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The latency buckets of the call histogram, in seconds (0.5 ms to 60 s).
const BUCKETS: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    tool: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProblemLabels {
    reason: &'static str,
    server: String,
}

/// Why a server cannot be called as configured (the `reason` label's values).
pub const MISCONFIGURATIONS: [&str; 2] = ["InvalidHeader", "UnreadableHeader"];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerRequestLabels {
    method: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListingLabels {
    server: String,
    result: &'static str,
}

pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Family<ServerLabels, Histogram>,
    up: Family<ServerLabels, Gauge<f64, AtomicU64>>,
    listings: Family<ListingLabels, Counter>,
    misconfigured: Family<ProblemLabels, Gauge<f64, AtomicU64>>,
    catalog_tools: Gauge<f64, AtomicU64>,
    server_requests: Family<ServerRequestLabels, Counter>,
    config_reloads: Family<ResultLabels, Counter<f64, AtomicU64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "mcp_bridge_calls",
            "Tool calls by server, exposed tool and outcome code",
            calls.clone(),
        );
        let durations = Family::<ServerLabels, Histogram>::new_with_constructor(|| Histogram::new(BUCKETS));
        registry.register(
            "mcp_bridge_call_duration_seconds",
            "Time from a tools/call's arrival to its answer, all pipeline steps included",
            durations.clone(),
        );
        let up = Family::<ServerLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "mcp_bridge_upstream_up",
            "1 when the server's last listing or call reached it, 0 while it is down",
            up.clone(),
        );
        let listings = Family::<ListingLabels, Counter>::default();
        registry.register(
            "mcp_bridge_upstream_listings",
            "tools/list rounds sent to a server, by result (ok, failed)",
            listings.clone(),
        );
        let misconfigured = Family::<ProblemLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "mcp_bridge_upstream_misconfigured",
            "1 while the server cannot be called as configured (reason InvalidHeader: a header value with a control character; UnreadableHeader: a header's valueFile could not be read); the bridge never contacts it",
            misconfigured.clone(),
        );
        let catalog_tools = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "mcp_bridge_catalog_tools",
            "Tools the agent's tools/list shows",
            catalog_tools.clone(),
        );
        let server_requests = Family::<ServerRequestLabels, Counter>::default();
        registry.register(
            "mcp_bridge_server_requests",
            "Requests servers sent the agents during calls, by method and outcome (relayed, undeclared, unsupported, ended, bounded, dropped, agent_error)",
            server_requests.clone(),
        );
        let config_reloads = Family::<ResultLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "mcp_bridge_config_reloads",
            "Configuration file changes seen, by result (applied, invalid).",
            config_reloads.clone(),
        );
        Self {
            registry,
            server_requests,
            config_reloads,
            calls,
            durations,
            up,
            listings,
            misconfigured,
            catalog_tools,
        }
    }
}

impl Metrics {
    /// One call: `server` None when the name was not in the catalog (`(unknown)`).
    pub fn observe_call(&self, server: Option<&str>, tool: &str, outcome: &str, seconds: f64) {
        let (server, tool) = match server {
            Some(server) => (server.to_owned(), tool.to_owned()),
            None => ("(unknown)".to_owned(), "(unknown)".to_owned()),
        };
        self.durations
            .get_or_create(&ServerLabels {
                server: server.clone(),
            })
            .observe(seconds);
        self.calls
            .get_or_create(&CallLabels {
                server,
                tool,
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    pub fn observe_listing(&self, server: &str, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.listings
            .get_or_create(&ListingLabels {
                server: server.to_owned(),
                result,
            })
            .inc();
        self.set_up(server, ok);
    }

    pub fn set_up(&self, server: &str, up: bool) {
        self.up
            .get_or_create(&ServerLabels {
                server: server.to_owned(),
            })
            .set(if up { 1.0 } else { 0.0 });
    }

    /// A server was configured: whether it can be called at all, and if not, why.
    pub fn set_misconfigured(&self, server: &str, reason: Option<&str>) {
        for each in MISCONFIGURATIONS {
            let labels = ProblemLabels {
                reason: each,
                server: server.to_owned(),
            };
            self.misconfigured
                .get_or_create(&labels)
                .set(if reason == Some(each) { 1.0 } else { 0.0 });
        }
    }

    /// A server's request during a call and what became of it; a method we do not relay is
    /// counted as `(other)` (the label stays bounded).
    pub fn observe_server_request(&self, method: &str, outcome: &'static str) {
        let method = crate::capabilities::RELAYED_REQUESTS
            .iter()
            .map(|(relayed, _)| *relayed)
            .chain(["ping"])
            .find(|known| *known == method)
            .unwrap_or("(other)");
        self.server_requests
            .get_or_create(&ServerRequestLabels { method, outcome })
            .inc();
    }

    /// A new content of the configuration file: applied, or invalid (the running one kept).
    pub fn observe_reload(&self, applied: bool) {
        let result = if applied { "applied" } else { "invalid" };
        self.config_reloads.get_or_create(&ResultLabels { result }).inc();
    }

    /// A server left the configuration: drop its availability series.
    pub fn forget_server(&self, server: &str) {
        let server = server.to_owned();
        self.up.remove(&ServerLabels {
            server: server.clone(),
        });
        for reason in MISCONFIGURATIONS {
            let server = server.clone();
            self.misconfigured.remove(&ProblemLabels { reason, server });
        }
    }

    pub fn set_catalog_tools(&self, tools: usize) {
        self.catalog_tools.set(tools as f64);
    }

    /// The exposition text.
    pub fn encode(&self) -> String {
        let mut page = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut page, &self.registry);
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_listings_and_availability_are_exposed() {
        let metrics = Metrics::default();
        metrics.observe_call(Some("default/everything"), "ev_echo", "ok", 0.002);
        metrics.observe_call(None, "nobody_tool", "not_allowlisted", 0.0001);
        metrics.observe_listing("default/everything", true);
        metrics.set_catalog_tools(3);
        let page = metrics.encode();
        assert!(page.contains(
            "mcp_bridge_calls_total{server=\"default/everything\",tool=\"ev_echo\",outcome=\"ok\"} 1"
        ));
        assert!(page.contains("tool=\"(unknown)\"") && !page.contains("nobody_tool"));
        assert!(
            page.contains("mcp_bridge_upstream_up{server=\"default/everything\"} 1.0"),
            "{page}"
        );
        assert!(page.contains("mcp_bridge_catalog_tools 3.0"));
        assert!(page.contains("mcp_bridge_call_duration_seconds_bucket"));
    }

    #[test]
    fn reloads_are_counted_and_a_removed_servers_series_dropped() {
        let metrics = Metrics::default();
        metrics.observe_reload(true);
        metrics.observe_reload(false);
        metrics.observe_reload(true);
        metrics.set_up("default/gone", true);
        metrics.set_misconfigured("default/gone", None);
        metrics.forget_server("default/gone");
        let page = metrics.encode();
        assert!(
            page.contains("mcp_bridge_config_reloads_total{result=\"applied\"} 2.0"),
            "{page}"
        );
        assert!(page.contains("mcp_bridge_config_reloads_total{result=\"invalid\"} 1.0"));
        assert!(!page.contains("default/gone"), "{page}");
    }
}
