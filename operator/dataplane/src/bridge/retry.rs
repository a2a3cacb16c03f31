//! Retries and the breaker around the call (`bridge/retry.py`, and `_send` of
//! `bridge/pipeline.py`): only a transient failure (the server not reached, the answer
//! lost, a gateway's 502/503/504) of a tool the server annotated `readOnlyHint` or
//! `idempotentHint` true is tried again, at most `maxAttempts - 1` times, after a wait
//! uniform in `[0, min(maxBackoffMs, initialBackoffMs * 2^(attempt-1))]` (full jitter), and
//! never past the call's deadline (`timeoutSeconds` covers every attempt and wait). Any
//! other call is never repeated: it may have had effects. Every attempt asks the server's
//! circuit breaker first; a failed attempt (or the deadline) counts against it, an answer
//! (even one that says no) for it, a cancelled or unsent call neither. The random source is
//! injected; time is tokio's.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::breaker::{CircuitBreaker, State};
use super::policy::RetryPolicy;
use super::upstream::Failure;

/// Whether the tool's annotations say repeating a call is harmless.
pub fn retry_safe(annotations: Option<&Value>) -> bool {
    ["readOnlyHint", "idempotentHint"]
        .iter()
        .any(|hint| annotations.and_then(|a| a.get(*hint)) == Some(&Value::Bool(true)))
}

/// Whether trying the request again may help: the server was not reached or lost the call,
/// or a gateway said 502/503/504. (The deadline is the call's whole budget: no retry.)
pub fn transient(failure: &Failure) -> bool {
    matches!(failure, Failure::Unavailable(_) | Failure::Status(502..=504, _))
}

/// The upper bound of the wait after failed attempt number `attempt` (1-based), in ms.
pub fn backoff_bound_ms(attempt: u32, policy: &RetryPolicy) -> f64 {
    let doubled = 2f64.powi(attempt.saturating_sub(1).min(64) as i32);
    (policy.initial_backoff_ms as f64 * doubled).min(policy.max_backoff_ms as f64)
}

/// Seconds to wait before attempt `attempt + 1`, or None when there is none. `attempt` is
/// the number of the attempt that just failed; `remaining` the seconds left before the
/// call's deadline; `random` returns a float in `[0, 1)`.
pub fn next_delay(
    attempt: u32,
    failure: &Failure,
    safe: bool,
    policy: &RetryPolicy,
    remaining: f64,
    random: &(dyn Fn() -> f64 + Sync),
) -> Option<f64> {
    if !transient(failure) || !safe || attempt >= policy.max_attempts {
        return None;
    }
    let delay = random() * backoff_bound_ms(attempt, policy) / 1000.0;
    (delay < remaining).then_some(delay)
}

/// How a governed call ended.
#[derive(Debug)]
pub enum Sent {
    /// The server's result.
    Answered(Value),
    /// The breaker let nothing through: whole seconds until it lets a trial call through.
    CircuitOpen(u64),
    /// The last attempt failed. `open`: the breaker is open after it; `retry_after`: whole
    /// seconds until it lets a trial through (0 when it would now).
    Failed {
        failure: Failure,
        open: bool,
        retry_after: u64,
    },
}

/// A governed call: how it ended, and how many attempts were sent.
#[derive(Debug)]
pub struct Governed {
    pub sent: Sent,
    pub attempts: u32,
}

/// A trial the breaker let through: released if the call ends with no verdict (it was
/// cancelled, or the agent went away and the future was dropped), so that another may try.
struct Claim<'a> {
    breaker: &'a Mutex<CircuitBreaker>,
    settled: bool,
}

impl Claim<'_> {
    fn settle(&mut self, verdict: impl FnOnce(&mut CircuitBreaker)) {
        self.settled = true;
        verdict(&mut self.breaker.lock().expect("the breaker lock"));
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.breaker.lock().expect("the breaker lock").release();
        }
    }
}

/// Call under the breaker and the retry rules until `deadline`: `attempt(time left)` sends
/// one attempt (and answers `Failure::Timeout` when the time left passed).
pub async fn governed<F, Fut>(
    breaker: &Mutex<CircuitBreaker>,
    policy: &RetryPolicy,
    safe: bool,
    deadline: Instant,
    random: &(dyn Fn() -> f64 + Sync),
    mut attempt: F,
) -> Governed
where
    F: FnMut(Duration) -> Fut,
    Fut: Future<Output = Result<Value, Failure>>,
{
    let mut attempts = 0;
    loop {
        let now = Instant::now();
        {
            let mut held = breaker.lock().expect("the breaker lock");
            if !held.allow(now) {
                let wait = held.remaining_open(now).ceil() as u64;
                return Governed {
                    sent: Sent::CircuitOpen(wait),
                    attempts,
                };
            }
        }
        let mut claim = Claim {
            breaker,
            settled: false,
        };
        attempts += 1;
        let answered = attempt(deadline.saturating_duration_since(now)).await;
        let failure = match answered {
            Ok(result) => {
                claim.settle(CircuitBreaker::record_success);
                return Governed {
                    sent: Sent::Answered(result),
                    attempts,
                };
            }
            Err(failure) => failure,
        };
        let now = Instant::now();
        match &failure {
            Failure::Cancelled => claim.settle(CircuitBreaker::release),
            Failure::Misconfigured(_) | Failure::Unauthorized { .. } => {
                claim.settle(CircuitBreaker::release);
                attempts -= 1; // nothing was sent
            }
            Failure::Timeout => claim.settle(|b| b.record_failure(now)),
            failure if !transient(failure) => claim.settle(CircuitBreaker::record_success), // it answered: it is up
            _ => claim.settle(|b| b.record_failure(now)),
        }
        let (open, retry_after) = {
            let held = breaker.lock().expect("the breaker lock");
            (
                held.state(now) == State::Open,
                held.remaining_open(now).ceil() as u64,
            )
        };
        let remaining = deadline.saturating_duration_since(now).as_secs_f64();
        let delay = next_delay(attempts, &failure, safe, policy, remaining, random);
        match delay {
            Some(delay) if !open => tokio::time::sleep(Duration::from_secs_f64(delay)).await,
            _ => {
                return Governed {
                    sent: Sent::Failed {
                        failure,
                        open,
                        retry_after,
                    },
                    attempts,
                };
            }
        }
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
