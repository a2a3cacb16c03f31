//! The circuit breaker of one server (`bridge/breaker.py`): stop calling a server that keeps
//! failing, try it again later. closed → open after `failureThreshold` consecutive failures
//! → half-open once `openSeconds` have passed (one trial call at a time is let through) →
//! closed on that call's success, open again on its failure. What counts as a failure (an
//! unreachable server, the deadline; not an answer that says no) is the retry loop's
//! decision (`retry`). Pure: the caller passes `now` to every method.

use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use super::errors::ToolError;
use super::policy::CircuitBreakerPolicy;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Closed,
    Open,
    HalfOpen,
}

/// The breaker of one server.
#[derive(Debug, Clone)]
pub struct CircuitBreaker {
    pub failure_threshold: u32,
    pub open_for: Duration,
    /// Consecutive failures so far.
    pub failures: u32,
    /// When the circuit last opened; None while closed.
    pub opened_at: Option<Instant>,
    /// Half-open: the one trial call is running.
    pub trial_in_flight: bool,
}

impl CircuitBreaker {
    pub fn new(policy: &CircuitBreakerPolicy) -> Self {
        Self {
            failure_threshold: policy.failure_threshold,
            open_for: Duration::from_secs(policy.open_seconds),
            failures: 0,
            opened_at: None,
            trial_in_flight: false,
        }
    }

    pub fn state(&self, now: Instant) -> State {
        match self.opened_at {
            None => State::Closed,
            Some(opened) if now.saturating_duration_since(opened) < self.open_for => State::Open,
            Some(_) => State::HalfOpen,
        }
    }

    /// Seconds until the circuit lets a trial call through (0 when it would now).
    pub fn remaining_open(&self, now: Instant) -> f64 {
        self.opened_at.map_or(0.0, |opened| {
            (opened + self.open_for)
                .saturating_duration_since(now)
                .as_secs_f64()
        })
    }

    /// Whether a call may go out now; in half-open state, claims the one trial.
    pub fn allow(&mut self, now: Instant) -> bool {
        match self.state(now) {
            State::Closed => true,
            State::Open => false,
            State::HalfOpen if self.trial_in_flight => false,
            State::HalfOpen => {
                self.trial_in_flight = true;
                true
            }
        }
    }

    pub fn record_success(&mut self) {
        self.failures = 0;
        self.opened_at = None;
        self.trial_in_flight = false;
    }

    pub fn record_failure(&mut self, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        let half_open_trial = self.trial_in_flight;
        self.trial_in_flight = false;
        if half_open_trial || self.failures >= self.failure_threshold {
            self.opened_at = Some(now);
        }
    }

    /// A claimed trial ended with no verdict (the call was cancelled): let another try.
    pub fn release(&mut self) {
        self.trial_in_flight = false;
    }
}

/// `circuit_open`: the call was not sent; `wait` whole seconds until a trial is let through.
pub fn circuit_open(server: &str, wait: u64) -> ToolError {
    let when = if wait > 0 {
        format!("in {wait} s")
    } else {
        "once the trial call in flight has finished".to_owned()
    };
    ToolError::new(
        "circuit_open",
        format!(
            "Server {server} is unavailable: its recent calls failed, so the bridge stopped calling it and will try again {when}. The call was not sent. Tools of other servers keep working."
        ),
    )
    .with("server", json!(server))
    .with("retryAfterSeconds", json!(wait))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn breaker() -> CircuitBreaker {
        CircuitBreaker::new(&CircuitBreakerPolicy {
            failure_threshold: 3,
            open_seconds: 30,
        })
    }

    /// A clock of the test's: `at(t0, 100.0)` is 100 s after `t0`.
    fn at(t0: Instant, seconds: f64) -> Instant {
        t0 + Duration::from_secs_f64(seconds)
    }

    fn tripped(t0: Instant) -> CircuitBreaker {
        let mut breaker = breaker();
        for _ in 0..3 {
            breaker.record_failure(at(t0, 100.0));
        }
        breaker
    }

    #[test]
    fn it_stays_closed_below_the_threshold() {
        let t0 = Instant::now();
        let mut breaker = breaker();
        breaker.record_failure(at(t0, 1.0));
        breaker.record_failure(at(t0, 2.0));
        assert_eq!(breaker.state(at(t0, 3.0)), State::Closed);
        assert!(breaker.allow(at(t0, 3.0)));
        assert_eq!(breaker.remaining_open(at(t0, 3.0)), 0.0);
    }

    #[test]
    fn a_success_resets_the_count_of_consecutive_failures() {
        let t0 = Instant::now();
        let mut breaker = breaker();
        breaker.record_failure(at(t0, 1.0));
        breaker.record_failure(at(t0, 2.0));
        breaker.record_success();
        breaker.record_failure(at(t0, 4.0));
        breaker.record_failure(at(t0, 5.0));
        assert_eq!(breaker.state(at(t0, 6.0)), State::Closed);
    }

    #[test]
    fn it_opens_after_the_threshold_and_says_for_how_long() {
        let t0 = Instant::now();
        let mut breaker = tripped(t0);
        assert_eq!(breaker.state(at(t0, 100.0)), State::Open);
        assert!(!breaker.allow(at(t0, 110.0)));
        assert!((breaker.remaining_open(at(t0, 110.0)) - 20.0).abs() < 1e-6);
        assert!((breaker.remaining_open(at(t0, 129.5)) - 0.5).abs() < 1e-6);
    }

    #[test]
    fn it_turns_half_open_after_open_seconds_and_lets_one_trial_through() {
        let t0 = Instant::now();
        let mut breaker = tripped(t0);
        assert_eq!(breaker.state(at(t0, 130.0)), State::HalfOpen);
        assert!(breaker.allow(at(t0, 130.0)));
        assert!(!breaker.allow(at(t0, 130.1)), "a second call waits for the trial");
        assert_eq!(breaker.remaining_open(at(t0, 130.1)), 0.0);
    }

    #[test]
    fn a_successful_trial_closes_it() {
        let t0 = Instant::now();
        let mut breaker = tripped(t0);
        assert!(breaker.allow(at(t0, 131.0)));
        breaker.record_success();
        assert_eq!(breaker.state(at(t0, 131.5)), State::Closed);
        assert!(breaker.allow(at(t0, 131.6)) && breaker.allow(at(t0, 131.7)));
    }

    #[test]
    fn a_failed_trial_opens_it_again_for_open_seconds() {
        let t0 = Instant::now();
        let mut breaker = tripped(t0);
        assert!(breaker.allow(at(t0, 131.0)));
        breaker.record_failure(at(t0, 132.0));
        assert_eq!(breaker.state(at(t0, 132.0)), State::Open);
        assert!((breaker.remaining_open(at(t0, 132.0)) - 30.0).abs() < 1e-6);
        assert_eq!(breaker.state(at(t0, 162.0)), State::HalfOpen);
    }

    #[test]
    fn a_cancelled_trial_lets_another_call_try() {
        let t0 = Instant::now();
        let mut breaker = tripped(t0);
        assert!(breaker.allow(at(t0, 131.0)));
        breaker.release();
        assert!(breaker.allow(at(t0, 131.1)));
    }

    #[test]
    fn the_refusal_says_when_to_come_back() {
        let later = circuit_open("tools/github", 20).to_result();
        assert_eq!(later["structuredContent"]["code"], "circuit_open");
        assert_eq!(later["structuredContent"]["retryAfterSeconds"], 20);
        let hint = later["structuredContent"]["hint"].as_str().unwrap();
        assert!(
            hint.contains("tools/github") && hint.contains("in 20 s"),
            "{hint}"
        );
        let trial = circuit_open("tools/github", 0);
        assert!(trial.hint.contains("once the trial call in flight has finished"));
    }
}
