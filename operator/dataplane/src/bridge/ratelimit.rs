//! Rate limits (`bridge/ratelimit.py`): a token bucket per limit and tool. A server's
//! effective policy lists its limits, the server's and the run's (`{tools: globs,
//! perMinute, burst, layer}`); a limit applies to a tool when one of its globs matches the
//! tool's original or exposed name, and each tool it applies to has a bucket of its own
//! (`burst` tokens, `perMinute` added a minute, spread evenly). A call needs a token from
//! every bucket that applies; when one is empty the call is refused (`rate_limited`, with
//! `retryAfterMs`: when the emptiest bucket has a token again) and no bucket is charged.
//! The buckets count this bridge's calls only. No clock of its own: the caller passes `now`.

use std::collections::HashMap;

use serde_json::json;
use tokio::time::Instant;

use super::catalog::Entry;
use super::core::Core;
use super::errors::ToolError;
use super::naming::matches;
use super::policy::{Layer, RateLimit};

/// `capacity` tokens at most, refilled at `rate` tokens a second.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    pub capacity: f64,
    pub rate: f64,
    pub tokens: f64,
    pub updated: Instant,
}

impl TokenBucket {
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = self.capacity.min(self.tokens + elapsed * self.rate);
        self.updated = now;
    }

    /// Seconds until a token is there (0: one is there now).
    fn wait(&mut self, now: Instant) -> f64 {
        self.refill(now);
        if self.tokens >= 1.0 {
            0.0
        } else {
            (1.0 - self.tokens) / self.rate
        }
    }
}

/// (exposed name, layer, position in its layer, perMinute, burst, globs): a changed limit
/// is a new bucket.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BucketKey {
    pub exposed: String,
    pub run: bool,
    pub position: usize,
    pub per_minute: u32,
    pub burst: u32,
    pub tools: Vec<String>,
}

/// Every bucket of one bridge.
#[derive(Debug, Default)]
pub struct RateLimiter {
    pub buckets: HashMap<BucketKey, TokenBucket>,
}

impl RateLimiter {
    /// Take a token from every bucket of the tool (`limits`: its server's): 0.0, or the
    /// seconds to wait (nothing taken).
    pub fn take(&mut self, limits: &[RateLimit], original: &str, exposed: &str, now: Instant) -> f64 {
        let mut positions = [0usize, 0usize];
        let mut keys = Vec::new();
        for limit in limits {
            let run = limit.layer == Layer::Run;
            let position = positions[usize::from(run)];
            positions[usize::from(run)] += 1;
            if matches(&limit.tools, original) || matches(&limit.tools, exposed) {
                keys.push(BucketKey {
                    exposed: exposed.to_owned(),
                    run,
                    position,
                    per_minute: limit.per_minute,
                    burst: limit.burst.unwrap_or(limit.per_minute),
                    tools: limit.tools.clone(),
                });
            }
        }
        let mut wait: f64 = 0.0;
        for key in &keys {
            let capacity = f64::from(key.burst);
            let bucket = self.buckets.entry(key.clone()).or_insert_with(|| TokenBucket {
                capacity,
                rate: f64::from(key.per_minute) / 60.0,
                tokens: capacity,
                updated: now,
            });
            wait = wait.max(bucket.wait(now));
        }
        if wait > 0.0 {
            return wait;
        }
        for key in &keys {
            if let Some(bucket) = self.buckets.get_mut(key) {
                bucket.tokens -= 1.0;
            }
        }
        0.0
    }

    /// Drop the buckets of tools that are no longer in the catalog.
    pub fn forget_others<'a>(&mut self, names: impl IntoIterator<Item = &'a String>) {
        let kept: std::collections::HashSet<&String> = names.into_iter().collect();
        self.buckets.retain(|key, _| kept.contains(&key.exposed));
    }
}

/// `rate_limited`: when to call again.
pub fn limited(exposed: &str, server: &str, wait_seconds: f64) -> ToolError {
    let retry_ms = ((wait_seconds * 1000.0).ceil() as u64).max(1);
    ToolError::new(
        "rate_limited",
        format!(
            "{exposed} was called more often than this run's rate limit allows; the call was not sent. Call it again in {retry_ms} ms or later (retryAfterMs), and spread further calls out."
        ),
    )
    .with("server", json!(server))
    .with("retryAfterMs", json!(retry_ms))
}

impl Core {
    /// The rate limits' verdict on a call of `entry` (exposed as `exposed`): None when every
    /// bucket gave a token.
    pub(super) fn rate_limited(&self, entry: &Entry, exposed: &str) -> Option<ToolError> {
        let server = &self.config.servers[entry.server];
        if server.policy.rate_limits.is_empty() {
            return None;
        }
        let wait = self.limiter.lock().expect("the limiter lock").take(
            &server.policy.rate_limits,
            &entry.original,
            exposed,
            Instant::now(),
        );
        (wait > 0.0).then(|| limited(exposed, &server.key(), wait))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limit(tools: &[&str], per_minute: u32, burst: Option<u32>, layer: Layer) -> RateLimit {
        RateLimit {
            tools: tools.iter().map(|t| (*t).to_owned()).collect(),
            per_minute,
            burst,
            layer,
        }
    }

    fn after(start: Instant, seconds: f64) -> Instant {
        start + Duration::from_secs_f64(seconds)
    }

    #[test]
    fn a_burst_above_the_limit_is_refused_with_retry_after_and_refills_on_time() {
        let limits = [limit(&["search_*"], 60, Some(2), Layer::Server)];
        let mut limiter = RateLimiter::default();
        let t = Instant::now();
        let take = |limiter: &mut RateLimiter, name: &str, at: Instant| {
            limiter.take(&limits, name.trim_start_matches("docs_"), name, at)
        };
        assert_eq!(take(&mut limiter, "docs_search_docs", t), 0.0);
        assert_eq!(take(&mut limiter, "docs_search_docs", t), 0.0);
        let wait = take(&mut limiter, "docs_search_docs", t);
        let refused = limited("docs_search_docs", "tools/docs", wait).to_result();
        let structured = &refused["structuredContent"];
        assert_eq!(structured["code"], "rate_limited");
        assert_eq!(structured["retryAfterMs"], 1000);
        assert_eq!(structured["server"], "tools/docs");
        assert!(structured["hint"].as_str().unwrap().contains("1000 ms"));
        // Another tool: the limit does not match it, so it has no bucket.
        assert_eq!(take(&mut limiter, "docs_delete_page", t), 0.0);
        assert_eq!(limiter.buckets.len(), 1);
        let half = take(&mut limiter, "docs_search_docs", after(t, 0.5));
        assert_eq!(limited("x", "s", half).details["retryAfterMs"], 500);
        assert_eq!(take(&mut limiter, "docs_search_docs", after(t, 1.0)), 0.0);
    }

    #[test]
    fn every_matching_limit_applies_and_a_refused_call_takes_no_token() {
        let limits = [
            limit(&["*"], 600, Some(10), Layer::Server),
            limit(&["docs_search_docs"], 1, Some(1), Layer::Run),
        ];
        let mut limiter = RateLimiter::default();
        let t = Instant::now();
        assert_eq!(limiter.take(&limits, "search_docs", "docs_search_docs", t), 0.0);
        for _ in 0..3 {
            assert!(limiter.take(&limits, "search_docs", "docs_search_docs", t) > 0.0);
        }
        let wide = limiter.buckets.iter().find(|(k, _)| !k.run).unwrap().1;
        assert!((wide.tokens - 9.0).abs() < 1e-9, "{}", wide.tokens);
    }

    #[test]
    fn a_glob_matches_the_original_or_the_exposed_name_and_burst_defaults_to_per_minute() {
        let limits = [limit(&["get-?um"], 2, None, Layer::Server)];
        let mut limiter = RateLimiter::default();
        let t = Instant::now();
        assert_eq!(limiter.take(&limits, "get-sum", "ev_get-sum", t), 0.0);
        assert_eq!(limiter.take(&limits, "get-sum", "ev_get-sum", t), 0.0);
        let wait = limiter.take(&limits, "get-sum", "ev_get-sum", t);
        assert!((wait - 30.0).abs() < 1e-9, "{wait}");
        let exposed = [limit(&["ev_*"], 1, None, Layer::Run)];
        assert_eq!(limiter.take(&exposed, "echo", "ev_echo", t), 0.0);
        assert!(limiter.take(&exposed, "echo", "ev_echo", t) > 0.0);
        assert_eq!(
            limiter.take(&exposed, "echo", "other_echo", t),
            0.0,
            "its own bucket"
        );
    }

    #[test]
    fn buckets_of_tools_gone_from_the_catalog_are_forgotten() {
        let limits = [limit(&["*"], 1, None, Layer::Server)];
        let mut limiter = RateLimiter::default();
        let t = Instant::now();
        limiter.take(&limits, "a", "p_a", t);
        limiter.take(&limits, "b", "p_b", t);
        limiter.forget_others([&"p_b".to_owned()]);
        assert_eq!(limiter.take(&limits, "a", "p_a", t), 0.0, "a fresh bucket");
        assert!(limiter.take(&limits, "b", "p_b", t) > 0.0, "kept its state");
    }

    #[test]
    fn a_tiny_wait_is_at_least_one_millisecond() {
        assert_eq!(limited("x", "s", 1e-7).details["retryAfterMs"], 1);
    }
}
