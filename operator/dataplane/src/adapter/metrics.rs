//! The adapter's Prometheus metrics (docs/metrics.md): calls and their latency by method,
//! sessions, calls in flight, child restarts, unattributed messages, the auth mode. Label
//! values come from bounded sets (a method outside the protocol's is `other`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

const KNOWN_METHODS: [&str; 16] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "notifications",
];

/// The latency buckets of every call histogram, in seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub method: &'static str,
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ModeLabels {
    mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// The auth gate's refusals, counted into the adapter's registry.
pub struct AuthRefusals(Family<ReasonLabels, Counter>);

impl crate::auth::gate::RefusalCounter for AuthRefusals {
    fn refused(&self, reason: crate::auth::tokens::Refusal) {
        self.0
            .get_or_create(&ReasonLabels {
                reason: reason.label(),
            })
            .inc();
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

pub struct Metrics {
    registry: Registry,
    /// Floats, so that counts read `12.0` as the earlier adapter's did.
    calls: Family<CallLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    durations: Family<MethodLabels, Histogram>,
    pub child_restarts: Gauge<i64, std::sync::atomic::AtomicI64>,
    sessions: Gauge,
    inflight: Gauge,
    unattributed: Family<KindLabels, Counter>,
    auth_refusals: Family<ReasonLabels, Counter>,
}

/// A method name from a bounded set, for a label.
pub fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|m| **m == method)
        .copied()
        .unwrap_or("other")
}

impl Metrics {
    pub fn new(auth_mode: &'static str) -> Self {
        let mut registry = Registry::default();
        let calls = Family::<CallLabels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        registry.register(
            "mcp_adapter_calls",
            "Calls answered, by method and outcome (result, error)",
            calls.clone(),
        );
        let durations = Family::<MethodLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(BUCKETS.iter().copied())
        });
        registry.register(
            "mcp_adapter_call_duration_seconds",
            "Time from request to answer, by method",
            durations.clone(),
        );
        let child_restarts = Gauge::<i64, std::sync::atomic::AtomicI64>::default();
        registry.register(
            "mcp_adapter_child_restarts",
            "Restarts of the stdio child since start",
            child_restarts.clone(),
        );
        let sessions = Gauge::default();
        registry.register("mcp_adapter_sessions", "Legacy sessions open", sessions.clone());
        let inflight = Gauge::default();
        registry.register(
            "mcp_adapter_inflight_calls",
            "Calls forwarded to the child and not answered",
            inflight.clone(),
        );
        let unattributed = Family::<KindLabels, Counter>::default();
        registry.register(
            "mcp_adapter_unattributed_messages",
            "Messages of the child no call could be attributed to (log: dropped; request: refused)",
            unattributed.clone(),
        );
        let auth_refusals = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "mcp_adapter_auth_refusals",
            "Requests refused by authentication, by reason",
            auth_refusals.clone(),
        );
        let mode = Family::<ModeLabels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
        mode.get_or_create(&ModeLabels { mode: auth_mode }).set(1.0);
        registry.register(
            "mcp_adapter_auth_mode",
            "Who may call the adapter (1 for the mode in force)",
            mode,
        );
        Self {
            registry,
            calls,
            durations,
            child_restarts,
            sessions,
            inflight,
            unattributed,
            auth_refusals,
        }
    }

    /// The counter the auth gate counts its refusals with.
    pub fn auth_refusals(&self) -> AuthRefusals {
        AuthRefusals(self.auth_refusals.clone())
    }

    /// Count one answered call.
    pub fn observe(&self, method: &str, error: bool, seconds: f64) {
        let method = method_label(method);
        let outcome = if error { "error" } else { "result" };
        self.calls.get_or_create(&CallLabels { method, outcome }).inc();
        self.durations
            .get_or_create(&MethodLabels { method })
            .observe(seconds);
    }

    /// The page, with the gauges read now.
    pub fn encode(&self, sessions: usize, inflight: usize, unattributed: (u64, u64)) -> String {
        self.sessions.set(sessions as i64);
        self.inflight.set(inflight as i64);
        // The router counts; the counters follow it (both only grow).
        for (kind, count) in [("log", unattributed.0), ("request", unattributed.1)] {
            let counter = self.unattributed.get_or_create(&KindLabels { kind });
            counter.inc_by(count.saturating_sub(counter.get()));
        }
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
    fn calls_are_counted_by_method_and_outcome() {
        let metrics = Metrics::new("none");
        metrics.observe("tools/call", false, 0.01);
        metrics.observe("tools/call", true, 0.01);
        metrics.observe("made/up", false, 0.01);
        let page = metrics.encode(1, 0, (0, 0));
        assert!(
            page.contains("mcp_adapter_calls_total{method=\"tools/call\",outcome=\"result\"} 1"),
            "{page}"
        );
        assert!(page.contains("mcp_adapter_calls_total{method=\"other\",outcome=\"result\"} 1"));
        assert!(page.contains("mcp_adapter_sessions 1"));
        assert!(page.contains("mcp_adapter_auth_mode{mode=\"none\"} 1"));
    }
}
