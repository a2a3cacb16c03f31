//! One server's effective call policy, as the operator writes it into the bridge file
//! (`operator/mcp_operator/api/bridge_policy.py`, `CallPolicy` after `tighten`): the server's
//! defaults already made stricter by the run, so the bridge applies it as it stands. Typed
//! and checked here; each part is enforced by its own module. Pure.

use serde::Deserialize;

/// What PII scanning does in one direction, from the most lenient to the strictest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PiiMode {
    #[default]
    Off,
    Detect,
    Redact,
    Block,
}

/// PII scanning per direction.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PiiPolicy {
    #[serde(default)]
    pub arguments: PiiMode,
    #[serde(default)]
    pub results: PiiMode,
}

/// Retries of transient failures (only for read-only or idempotent tools).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPolicy {
    /// Attempts in all: 3 is one call and two retries.
    #[serde(default = "three")]
    pub max_attempts: u32,
    /// Upper bound of the first wait (full jitter).
    #[serde(default = "hundred")]
    pub initial_backoff_ms: u64,
    /// Cap of the bound, which doubles after each attempt.
    #[serde(default = "two_thousand")]
    pub max_backoff_ms: u64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: three(),
            initial_backoff_ms: hundred(),
            max_backoff_ms: two_thousand(),
        }
    }
}

/// When the bridge stops calling a server that keeps failing, and for how long.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CircuitBreakerPolicy {
    /// Consecutive failed calls that open the circuit.
    #[serde(default = "five")]
    pub failure_threshold: u32,
    /// Seconds the circuit stays open before one trial call is let through.
    #[serde(default = "thirty")]
    pub open_seconds: u64,
}

impl Default for CircuitBreakerPolicy {
    fn default() -> Self {
        Self {
            failure_threshold: five(),
            open_seconds: thirty(),
        }
    }
}

/// Whose rule or limit: the server's, or the run's (which may only add restrictions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layer {
    #[default]
    Server,
    Run,
}

/// What a call a rule matches gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Approve,
    Deny,
}

/// An authorization rule: a CEL expression over `caller`, `server`, `tool` and `arguments`.
#[allow(dead_code)] // read by the rules as they are ported; the file refuses rules until then
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Rule {
    #[serde(rename = "match")]
    pub matches: String,
    pub action: Action,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub layer: Layer,
}

/// A token bucket per matching tool (`ratelimit`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RateLimit {
    /// Globs on the original or the exposed tool name.
    pub tools: Vec<String>,
    /// Tokens added per minute.
    pub per_minute: u32,
    /// Most tokens held at once; unset: `perMinute`.
    #[serde(default)]
    pub burst: Option<u32>,
    #[serde(default)]
    pub layer: Layer,
}

/// How calls to one server are governed.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallPolicy {
    #[serde(default)]
    pub pii: PiiPolicy,
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Deadline of one call, all attempts and waits included.
    #[serde(default = "thirty")]
    pub timeout_seconds: u64,
    #[serde(default)]
    pub circuit_breaker: CircuitBreakerPolicy,
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(default)]
    pub rate_limits: Vec<RateLimit>,
    /// Tools (globs on the original or exposed name) every call of which waits for approval.
    #[serde(default)]
    pub require_approval: Vec<String>,
    /// Every call of a tool that may be destructive waits for approval.
    #[serde(default)]
    pub approve_destructive: bool,
}

impl Default for CallPolicy {
    fn default() -> Self {
        Self {
            pii: PiiPolicy::default(),
            retry: RetryPolicy::default(),
            timeout_seconds: thirty(),
            circuit_breaker: CircuitBreakerPolicy::default(),
            rules: Vec::new(),
            rate_limits: Vec::new(),
            require_approval: Vec::new(),
            approve_destructive: false,
        }
    }
}

fn three() -> u32 {
    3
}
fn five() -> u32 {
    5
}
fn hundred() -> u64 {
    100
}
fn two_thousand() -> u64 {
    2000
}
fn thirty() -> u64 {
    30
}

/// What is wrong with a policy, each problem naming its field under `at` (the bounds of
/// `bridge_policy.py`, so a file the operator would refuse is refused here too).
pub fn problems(policy: &CallPolicy, at: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let mut bounded = |field: &str, value: u64, low: u64, high: u64| {
        if !(low..=high).contains(&value) {
            problems.push(format!("{at}.{field}: must be from {low} to {high}"));
        }
    };
    bounded("timeoutSeconds", policy.timeout_seconds, 1, 3600);
    bounded("retry.maxAttempts", policy.retry.max_attempts.into(), 1, 5);
    bounded(
        "retry.initialBackoffMs",
        policy.retry.initial_backoff_ms,
        1,
        60_000,
    );
    bounded("retry.maxBackoffMs", policy.retry.max_backoff_ms, 1, 300_000);
    bounded(
        "circuitBreaker.failureThreshold",
        policy.circuit_breaker.failure_threshold.into(),
        1,
        1000,
    );
    bounded(
        "circuitBreaker.openSeconds",
        policy.circuit_breaker.open_seconds,
        1,
        3600,
    );
    for (index, limit) in policy.rate_limits.iter().enumerate() {
        bounded(
            &format!("rateLimits[{index}].perMinute"),
            limit.per_minute.into(),
            1,
            100_000,
        );
        if let Some(burst) = limit.burst {
            bounded(&format!("rateLimits[{index}].burst"), burst.into(), 1, 10_000);
        }
    }
    for (index, limit) in policy.rate_limits.iter().enumerate() {
        if limit.tools.is_empty() {
            problems.push(format!(
                "{at}.rateLimits[{index}].tools: must name at least one tool"
            ));
        }
    }
    if policy.retry.initial_backoff_ms > policy.retry.max_backoff_ms {
        problems.push(format!(
            "{at}.retry: initialBackoffMs must not be greater than maxBackoffMs"
        ));
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        if rule.matches.is_empty() {
            problems.push(format!("{at}.rules[{index}].match: must not be empty"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_policy_has_the_defaults_of_the_operator() {
        let policy: CallPolicy = serde_json::from_str("{}").unwrap();
        assert_eq!(policy.timeout_seconds, 30);
        assert_eq!(policy.retry.max_attempts, 3);
        assert_eq!(policy.circuit_breaker.failure_threshold, 5);
        assert_eq!(policy.pii.arguments, PiiMode::Off);
        assert!(problems(&policy, "policy").is_empty());
    }

    #[test]
    fn a_full_policy_reads_as_the_operator_writes_it() {
        let policy: CallPolicy = serde_json::from_str(
            r#"{"pii": {"arguments": "block", "results": "redact"}, "timeoutSeconds": 5,
                "rules": [{"match": "tool.name == 'x'", "action": "deny", "reason": "no", "layer": "run"}],
                "rateLimits": [{"tools": ["get-*"], "perMinute": 60, "burst": 2}],
                "requireApproval": ["rm"], "approveDestructive": true}"#,
        )
        .unwrap();
        assert_eq!(policy.pii.arguments, PiiMode::Block);
        assert!(PiiMode::Block > PiiMode::Redact);
        assert_eq!(policy.rules[0].action, Action::Deny);
        assert_eq!(policy.rules[0].layer, Layer::Run);
        assert_eq!(policy.rate_limits[0].burst, Some(2));
        assert!(policy.approve_destructive);
    }

    #[test]
    fn out_of_bounds_values_and_unknown_fields_are_refused() {
        let policy: CallPolicy = serde_json::from_str(
            r#"{"timeoutSeconds": 0, "retry": {"initialBackoffMs": 5000, "maxBackoffMs": 10}}"#,
        )
        .unwrap();
        let found = problems(&policy, "servers[0].policy").join("; ");
        assert!(found.contains("servers[0].policy.timeoutSeconds"), "{found}");
        assert!(found.contains("initialBackoffMs must not be greater"), "{found}");
        assert!(serde_json::from_str::<CallPolicy>(r#"{"surprise": 1}"#).is_err());
        assert!(serde_json::from_str::<CallPolicy>(r#"{"pii": {"arguments": "loud"}}"#).is_err());
    }
}
