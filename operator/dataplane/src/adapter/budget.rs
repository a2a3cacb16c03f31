//! The byte budget of request bodies in flight: how much clients may make the adapter hold.
//!
//! The front asks what a request would cost (its `Content-Length`; a body of unknown length
//! costs the most a body may be) and reserves that before reading the body; the reservation
//! goes back when the request is answered. Over the per-request limit → 413; over what is
//! left of the budget → 503 with `Retry-After`. No HTTP here.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

#[derive(Debug)]
pub struct BodyBudget {
    limit_bytes: usize,
    max_body_bytes: usize,
    in_use: AtomicUsize,
    refused: AtomicU64,
}

/// Why a body was not admitted.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Over the per-request limit: 413.
    TooLarge,
    /// The budget is spent for now: 503, retry.
    Spent,
}

/// Bytes reserved for one request, given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<BodyBudget>,
    size: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.in_use.fetch_sub(self.size, Ordering::Relaxed);
    }
}

impl BodyBudget {
    pub fn new(limit_bytes: usize, max_body_bytes: usize) -> Arc<Self> {
        Arc::new(Self {
            limit_bytes,
            max_body_bytes,
            in_use: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
        })
    }

    /// Reserve what a body of this declared length may cost.
    pub fn reserve(self: &Arc<Self>, content_length: Option<&str>) -> Result<Reservation, Refused> {
        let size = match content_length.map(|v| v.trim().parse::<usize>()) {
            Some(Ok(length)) if length > self.max_body_bytes => return Err(Refused::TooLarge),
            Some(Ok(length)) => length,
            _ => self.max_body_bytes, // chunked or unknown: the most it may turn out to be
        };
        let reserved = self
            .in_use
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                (used + size <= self.limit_bytes).then_some(used + size)
            });
        if reserved.is_err() {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::Spent);
        }
        Ok(Reservation {
            budget: self.clone(),
            size,
        })
    }

    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit_bytes
    }

    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_admitted_until_the_budget_is_spent_and_given_back_when_answered() {
        let budget = BodyBudget::new(700_000, 200_000);
        let held: Vec<_> = (0..3).map(|_| budget.reserve(Some("190000")).unwrap()).collect();
        assert_eq!(budget.reserve(Some("190000")).unwrap_err(), Refused::Spent);
        assert_eq!(budget.refused(), 1);
        drop(held);
        assert_eq!(budget.in_use(), 0);
        assert!(budget.reserve(Some("190000")).is_ok());
    }

    #[test]
    fn a_body_over_the_limit_is_too_large_and_one_of_unknown_length_costs_the_limit() {
        let budget = BodyBudget::new(1_000_000, 200_000);
        assert_eq!(budget.reserve(Some("200001")).unwrap_err(), Refused::TooLarge);
        let unknown = budget.reserve(None).unwrap();
        assert_eq!(budget.in_use(), 200_000);
        drop(unknown);
    }
}
