//! The tests of `retry`: the decisions (tests/unit/test_bridge_retry.py) and the loop under
//! the breaker (the retry and breaker cases of tests/unit/test_bridge_pipeline.py), with a
//! scripted attempt and tokio's paused clock.

use std::cell::RefCell;
use std::collections::VecDeque;

use serde_json::json;

use super::*;
use crate::bridge::policy::CircuitBreakerPolicy;

const POLICY: RetryPolicy = RetryPolicy {
    max_attempts: 3,
    initial_backoff_ms: 100,
    max_backoff_ms: 250,
};

fn unavailable() -> Failure {
    Failure::Unavailable("connection refused".to_owned())
}

fn delay(attempt: u32, failure: &Failure, safe: bool, remaining: f64, random: f64) -> Option<f64> {
    next_delay(attempt, failure, safe, &POLICY, remaining, &|| random)
}

fn close(a: Option<f64>, b: f64) -> bool {
    a.is_some_and(|a| (a - b).abs() < 1e-9)
}

#[test]
fn only_read_only_or_idempotent_tools_are_retry_safe() {
    for (annotations, safe) in [
        (json!({"readOnlyHint": true}), true),
        (json!({"idempotentHint": true}), true),
        (json!({"readOnlyHint": false, "idempotentHint": true}), true),
        (json!({}), false),
        (json!({"readOnlyHint": false}), false),
        (json!({"destructiveHint": false}), false),
        (json!({"readOnlyHint": "true"}), false),
    ] {
        assert_eq!(retry_safe(Some(&annotations)), safe, "{annotations}");
        let retried = delay(1, &unavailable(), retry_safe(Some(&annotations)), 30.0, 0.5);
        assert_eq!(retried.is_some(), safe, "{annotations}");
    }
    assert!(!retry_safe(None));
}

#[test]
fn a_transient_failure_is_retried_up_to_max_attempts_minus_one_times() {
    assert!(delay(1, &unavailable(), true, 30.0, 0.5).is_some());
    assert!(delay(2, &unavailable(), true, 30.0, 0.5).is_some());
    assert!(delay(3, &unavailable(), true, 30.0, 0.5).is_none());
    assert!(delay(1, &Failure::Status(503, "busy".into()), true, 30.0, 0.5).is_some());
}

#[test]
fn other_failures_are_never_retried() {
    for failure in [
        Failure::Rpc {
            code: -32602,
            message: "bad params".into(),
            data: None,
        },
        Failure::Timeout,
        Failure::Status(500, "bug".into()),
        Failure::Protocol("not JSON".into()),
        Failure::Cancelled,
        Failure::Misconfigured("bad header".into()),
    ] {
        assert!(delay(1, &failure, true, 30.0, 0.5).is_none(), "{failure:?}");
    }
}

#[test]
fn the_backoff_doubles_up_to_its_cap() {
    let bounds: Vec<f64> = (1..=4).map(|a| backoff_bound_ms(a, &POLICY)).collect();
    assert_eq!(bounds, [100.0, 200.0, 250.0, 250.0]);
    assert_eq!(backoff_bound_ms(u32::MAX, &POLICY), 250.0);
}

#[test]
fn full_jitter_spreads_the_wait_from_zero_to_the_bound() {
    assert_eq!(delay(2, &unavailable(), true, 30.0, 0.0), Some(0.0));
    assert!(close(delay(2, &unavailable(), true, 30.0, 0.5), 0.1));
    assert!(close(delay(2, &unavailable(), true, 30.0, 0.999), 0.1998));
}

#[test]
fn no_retry_whose_wait_would_pass_the_deadline() {
    assert!(delay(1, &unavailable(), true, 0.04, 0.5).is_none());
    assert!(close(delay(1, &unavailable(), true, 0.06, 0.5), 0.05));
}

#[test]
fn a_single_attempt_policy_never_retries() {
    let once = RetryPolicy {
        max_attempts: 1,
        ..RetryPolicy::default()
    };
    assert!(next_delay(1, &unavailable(), true, &once, 30.0, &|| 0.5).is_none());
}

// -- the loop ---------------------------------------------------------------------------------

/// Answers each attempt from a script (the last step repeats) and records when it came.
struct Script {
    steps: RefCell<VecDeque<Result<Value, Failure>>>,
    times: RefCell<Vec<Instant>>,
}

impl Script {
    fn new(steps: Vec<Result<Value, Failure>>) -> Self {
        Self {
            steps: RefCell::new(steps.into()),
            times: RefCell::default(),
        }
    }

    async fn attempt(&self, _left: Duration) -> Result<Value, Failure> {
        self.times.borrow_mut().push(Instant::now());
        let mut steps = self.steps.borrow_mut();
        let step = if steps.len() > 1 {
            steps.pop_front()
        } else {
            steps.front().cloned()
        };
        step.expect("a scripted step")
    }

    fn calls(&self) -> usize {
        self.times.borrow().len()
    }
}

fn github_breaker() -> Mutex<CircuitBreaker> {
    Mutex::new(CircuitBreaker::new(&CircuitBreakerPolicy {
        failure_threshold: 3,
        open_seconds: 30,
    }))
}

async fn run(breaker: &Mutex<CircuitBreaker>, script: &Script, safe: bool) -> Governed {
    let deadline = Instant::now() + Duration::from_secs(30);
    governed(breaker, &POLICY, safe, deadline, &|| 0.5, |left| {
        script.attempt(left)
    })
    .await
}

fn done() -> Result<Value, Failure> {
    Ok(json!({"content": [], "isError": false}))
}

#[tokio::test(start_paused = true)]
async fn a_failing_non_idempotent_tool_is_called_once() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(unavailable())]);
    let governed = run(&breaker, &script, false).await;
    assert_eq!((script.calls(), governed.attempts), (1, 1));
    assert!(matches!(
        governed.sent,
        Sent::Failed {
            open: false,
            retry_after: 0,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_read_only_or_idempotent_tool_is_retried_twice_with_backoff() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(unavailable()), Err(unavailable()), done()]);
    let governed = run(&breaker, &script, true).await;
    assert!(matches!(governed.sent, Sent::Answered(_)));
    assert_eq!(governed.attempts, 3);
    let times = script.times.borrow();
    // Jitter 0.5 × the bound: 50 ms, then 100 ms.
    assert_eq!(times[1] - times[0], Duration::from_millis(50));
    assert_eq!(times[2] - times[1], Duration::from_millis(100));
    assert_eq!(breaker.lock().unwrap().failures, 0, "the success reset the count");
}

#[tokio::test(start_paused = true)]
async fn retries_end_with_the_last_failure_and_count_against_the_breaker() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(unavailable())]);
    let governed = run(&breaker, &script, true).await;
    assert_eq!((script.calls(), governed.attempts), (3, 3));
    // Three failed attempts reached the threshold: the failure says the circuit opened.
    assert!(matches!(
        governed.sent,
        Sent::Failed {
            open: true,
            retry_after: 30,
            ..
        }
    ));
}

#[tokio::test(start_paused = true)]
async fn a_json_rpc_error_is_never_retried_and_counts_as_an_answer() {
    let breaker = github_breaker();
    breaker.lock().unwrap().record_failure(Instant::now());
    let script = Script::new(vec![Err(Failure::Rpc {
        code: -32602,
        message: "unknown repository".into(),
        data: None,
    })]);
    let governed = run(&breaker, &script, true).await;
    assert_eq!(script.calls(), 1);
    assert!(matches!(
        governed.sent,
        Sent::Failed {
            failure: Failure::Rpc { code: -32602, .. },
            ..
        }
    ));
    assert_eq!(breaker.lock().unwrap().failures, 0);
}

#[tokio::test(start_paused = true)]
async fn the_circuit_opens_after_consecutive_failures_and_says_for_how_long() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(unavailable())]);
    let last: Vec<Governed> = {
        let mut all = Vec::new();
        for _ in 0..3 {
            all.push(run(&breaker, &script, false).await);
        }
        all
    };
    assert!(matches!(
        last[2].sent,
        Sent::Failed {
            open: true,
            retry_after: 30,
            ..
        }
    ));
    tokio::time::advance(Duration::from_secs(10)).await;
    let refused = run(&breaker, &script, false).await;
    assert!(matches!(refused.sent, Sent::CircuitOpen(20)), "{refused:?}");
    assert_eq!((script.calls(), refused.attempts), (3, 0));
}

#[tokio::test(start_paused = true)]
async fn the_circuit_closes_when_the_server_is_back() {
    let breaker = github_breaker();
    let failing = Script::new(vec![Err(unavailable())]);
    for _ in 0..3 {
        run(&breaker, &failing, false).await;
    }
    tokio::time::advance(Duration::from_secs(31)).await;
    let back = Script::new(vec![done()]);
    assert!(matches!(
        run(&breaker, &back, false).await.sent,
        Sent::Answered(_)
    ));
    assert!(matches!(
        run(&breaker, &back, false).await.sent,
        Sent::Answered(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_call_the_agent_cancelled_spares_the_breaker() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(Failure::Cancelled)]);
    for _ in 0..5 {
        let governed = run(&breaker, &script, true).await;
        assert_eq!(governed.attempts, 1);
        assert!(matches!(
            governed.sent,
            Sent::Failed {
                failure: Failure::Cancelled,
                ..
            }
        ));
    }
    assert_eq!(breaker.lock().unwrap().failures, 0);
    assert!(matches!(
        run(&breaker, &Script::new(vec![done()]), true).await.sent,
        Sent::Answered(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_misconfigured_server_is_not_sent_to_nor_retried() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(Failure::Misconfigured("bad header".into()))]);
    let governed = run(&breaker, &script, true).await;
    assert_eq!((script.calls(), governed.attempts), (1, 0));
    assert_eq!(breaker.lock().unwrap().failures, 0);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_counts_against_the_breaker_and_ends_the_call() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(Failure::Timeout)]);
    let governed = run(&breaker, &script, true).await;
    assert_eq!(script.calls(), 1);
    assert!(matches!(
        governed.sent,
        Sent::Failed {
            failure: Failure::Timeout,
            ..
        }
    ));
    assert_eq!(breaker.lock().unwrap().failures, 1);
}

#[tokio::test(start_paused = true)]
async fn no_retry_waits_past_the_deadline() {
    let breaker = github_breaker();
    let script = Script::new(vec![Err(unavailable())]);
    let deadline = Instant::now() + Duration::from_millis(40);
    let governed = governed(&breaker, &POLICY, true, deadline, &|| 0.5, |left| {
        script.attempt(left)
    })
    .await;
    assert_eq!(
        (script.calls(), governed.attempts),
        (1, 1),
        "a 50 ms wait would pass it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_trial_whose_call_was_dropped_lets_another_call_try() {
    let breaker = github_breaker();
    for _ in 0..3 {
        breaker.lock().unwrap().record_failure(Instant::now());
    }
    tokio::time::advance(Duration::from_secs(31)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let hanging = governed(&breaker, &POLICY, true, deadline, &|| 0.5, |_| {
        std::future::pending::<Result<Value, Failure>>()
    });
    // The agent went away: the call's future is dropped mid-trial.
    assert!(
        tokio::time::timeout(Duration::from_secs(1), hanging)
            .await
            .is_err()
    );
    assert!(!breaker.lock().unwrap().trial_in_flight);
    assert!(matches!(
        run(&breaker, &Script::new(vec![done()]), true).await.sent,
        Sent::Answered(_)
    ));
}
