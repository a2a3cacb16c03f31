//! The metrics of `--child-per-session`'s pool (docs/metrics.md): spawn time, spawns by
//! outcome, refusals, reaped children by reason, children running. Written as text next to
//! the adapter's own page; label values from fixed sets. Counts are written as floats
//! (`4.0`), as the earlier adapter's exposition wrote them.

use std::fmt::Write;
use std::sync::Mutex;

/// From a local interpreter (tens of milliseconds) to an `npx`/`uvx` cold start.
const SPAWN_BUCKETS: [f64; 11] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0];

/// How a spawn ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spawned {
    Ready,
    Timeout,
    Failed,
}

/// Why a child was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaped {
    Deleted,
    Idle,
    Disconnected,
    Evicted,
    Exited,
    Refused,
}

const SPAWNED: [(Spawned, &str); 3] = [
    (Spawned::Ready, "ready"),
    (Spawned::Timeout, "timeout"),
    (Spawned::Failed, "failed"),
];
const REAPED: [(Reaped, &str); 6] = [
    (Reaped::Deleted, "deleted"),
    (Reaped::Idle, "idle"),
    (Reaped::Disconnected, "disconnected"),
    (Reaped::Evicted, "evicted"),
    (Reaped::Exited, "exited"),
    (Reaped::Refused, "refused"),
];

#[derive(Default)]
struct Counts {
    /// Per bucket (not cumulative), then the sum and count.
    spawn_buckets: [u64; SPAWN_BUCKETS.len()],
    spawn_sum: f64,
    spawn_count: u64,
    spawns: [u64; SPAWNED.len()],
    refused: u64,
    reaped: [u64; REAPED.len()],
}

#[derive(Default)]
pub struct PoolMetrics {
    counts: Mutex<Counts>,
}

impl PoolMetrics {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn spawned(&self, outcome: Spawned, seconds: Option<f64>) {
        let mut counts = self.counts();
        let index = SPAWNED.iter().position(|(o, _)| *o == outcome).unwrap_or(0);
        counts.spawns[index] += 1;
        if let Some(seconds) = seconds {
            if let Some(bucket) = SPAWN_BUCKETS.iter().position(|bound| seconds <= *bound) {
                counts.spawn_buckets[bucket] += 1;
            }
            counts.spawn_sum += seconds;
            counts.spawn_count += 1;
        }
    }

    pub fn refused(&self) {
        self.counts().refused += 1;
    }

    pub fn reaped(&self, reason: Reaped) {
        let index = REAPED.iter().position(|(r, _)| *r == reason).unwrap_or(0);
        self.counts().reaped[index] += 1;
    }

    /// The pool's part of `/metrics`, with `children` running or starting now.
    pub fn encode(&self, children: usize) -> String {
        let counts = self.counts();
        let mut page = String::new();
        let name = "mcp_adapter_child_spawn_seconds";
        let _ = writeln!(
            page,
            "# HELP {name} Time from spawning a child (--child-per-session) to its answer to initialize.\n# TYPE {name} histogram"
        );
        let mut cumulative = 0;
        for (bound, count) in SPAWN_BUCKETS.iter().zip(counts.spawn_buckets) {
            cumulative += count;
            let _ = writeln!(page, "{name}_bucket{{le=\"{bound:?}\"}} {:?}", cumulative as f64);
        }
        let _ = writeln!(
            page,
            "{name}_bucket{{le=\"+Inf\"}} {:?}",
            counts.spawn_count as f64
        );
        let _ = writeln!(page, "{name}_sum {:?}", counts.spawn_sum);
        let _ = writeln!(page, "{name}_count {:?}", counts.spawn_count as f64);
        let family = |page: &mut String, name: &str, help: &str| {
            let _ = writeln!(page, "# HELP {name} {help}\n# TYPE {name} counter");
        };
        family(
            &mut page,
            "mcp_adapter_child_spawns",
            "Children spawned (--child-per-session), by outcome (ready, timeout, failed).",
        );
        for ((_, label), count) in SPAWNED.iter().zip(counts.spawns) {
            let _ = writeln!(
                page,
                "mcp_adapter_child_spawns_total{{outcome=\"{label}\"}} {:?}",
                count as f64
            );
        }
        family(
            &mut page,
            "mcp_adapter_pool_refused",
            "Requests refused with 503 because every child's place was busy.",
        );
        let _ = writeln!(page, "mcp_adapter_pool_refused_total {:?}", counts.refused as f64);
        family(
            &mut page,
            "mcp_adapter_children_reaped",
            "Children stopped, by reason (deleted, idle, disconnected, evicted, exited, refused).",
        );
        for ((_, label), count) in REAPED.iter().zip(counts.reaped) {
            let _ = writeln!(
                page,
                "mcp_adapter_children_reaped_total{{reason=\"{label}\"}} {:?}",
                count as f64
            );
        }
        let _ = writeln!(
            page,
            "# HELP mcp_adapter_children Children running or starting (--child-per-session).\n# TYPE mcp_adapter_children gauge\nmcp_adapter_children {:?}",
            children as f64
        );
        page
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawns_and_reaps_are_counted_as_floats() {
        let metrics = PoolMetrics::default();
        metrics.spawned(Spawned::Ready, Some(0.2));
        metrics.spawned(Spawned::Timeout, None);
        metrics.reaped(Reaped::Evicted);
        let page = metrics.encode(1);
        assert!(
            page.contains("mcp_adapter_child_spawn_seconds_count 1.0"),
            "{page}"
        );
        assert!(page.contains("mcp_adapter_child_spawn_seconds_bucket{le=\"0.25\"} 1.0"));
        assert!(page.contains("mcp_adapter_child_spawns_total{outcome=\"timeout\"} 1.0"));
        assert!(page.contains("mcp_adapter_children_reaped_total{reason=\"evicted\"} 1.0"));
        assert!(page.contains("mcp_adapter_children 1.0"));
    }
}
