//! The legacy sessions of our MCP server sides (the adapter's and the bridge's): one per
//! `initialize`, bounded in number and shared fairly among callers, dropped when idle.
//! Pure: the caller passes `now`; no I/O.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::mpsc;

/// A legacy session: who opened it, what its client declared, and its streams.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    /// The key its sessions are counted by (the verified identity, or the client address).
    pub caller: String,
    /// The revision negotiated at `initialize`.
    pub protocol_version: String,
    /// The client capabilities its `initialize` declared (names only).
    pub declared: HashSet<String>,
    /// URIs its client subscribed to.
    pub subscriptions: HashSet<String>,
    pub log_level: Option<String>,
    /// Its GET stream, one at a time.
    pub stream: Option<mpsc::Sender<Value>>,
    /// The ids this session's client saw for the child's requests, mapped to the child's.
    pub server_requests: HashMap<u64, Value>,
    pub next_server_request_id: u64,
    /// Its calls in flight: the client's id (as JSON text) → the child's id.
    pub calls: HashMap<String, u64>,
    pub open_requests: usize,
    pub last_active: Instant,
}

impl Session {
    pub fn can(&self, capability: &str) -> bool {
        self.declared.contains(capability)
    }

    /// Serving a request now: such a session is never evicted.
    fn in_call(&self) -> bool {
        self.open_requests > 0
    }

    fn has_stream(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// No call and no open GET stream.
    pub fn idle(&self) -> bool {
        !self.in_call() && !self.has_stream()
    }

    /// Push a message on the session's GET stream; false when it has none or it is full.
    pub fn push(&self, message: &Value) -> bool {
        self.stream
            .as_ref()
            .is_some_and(|s| s.try_send(message.clone()).is_ok())
    }
}

/// No session may make room for this caller's new one: 503.
#[derive(Debug, thiserror::Error)]
#[error("every session slot is taken")]
pub struct SessionLimit;

/// The session table: bounded, fair by caller, expiring.
///
/// **Fair by caller.** When the table is full, a caller's fair share is the table divided
/// among the callers that hold sessions, the newcomer included:
/// - a caller at or over its share makes room among **its own** sessions: the least
///   recently used idle one goes, or, with none idle, it is refused — a flood of
///   `initialize` from one caller evicts only its own sessions;
/// - a caller under its share takes the place of the least recently used session **not in
///   a call** of the caller most over its share: there a held GET stream does not protect a
///   session (the stream closes with it) — one caller's held streams cannot lock another out;
/// - a session in a call is never evicted.
#[derive(Debug)]
pub struct Sessions {
    by_id: HashMap<String, Session>,
    limit: usize,
    idle_after: Duration,
    /// Whether a caller at its share may replace its own idle session (the adapter's table);
    /// else it waits for one of its own to expire (the bridge's).
    replace_own_idle: bool,
    /// Sessions dropped to make room for new ones since start.
    pub evicted: u64,
}

impl Sessions {
    pub fn new(limit: usize, idle_after: Duration) -> Self {
        Self {
            by_id: HashMap::new(),
            limit,
            idle_after,
            replace_own_idle: true,
            evicted: 0,
        }
    }

    /// The same table, but a caller at its share is refused rather than replacing its own
    /// idle session (the bridge's rule: an agent's sessions are not dropped under it).
    pub fn keeping_own_idle(mut self) -> Self {
        self.replace_own_idle = false;
        self
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// How many sessions speak each revision.
    pub fn versions(&self) -> std::collections::BTreeMap<&str, usize> {
        let mut versions = std::collections::BTreeMap::new();
        for session in self.by_id.values() {
            *versions.entry(session.protocol_version.as_str()).or_default() += 1;
        }
        versions
    }

    pub fn get(&self, id: &str) -> Option<&Session> {
        self.by_id.get(id)
    }

    pub fn get_mut(&mut self, id: &str) -> Option<&mut Session> {
        self.by_id.get_mut(id)
    }

    /// The live session with this id, touched; None if unknown or idle too long (dropped).
    pub fn lookup(&mut self, id: &str, now: Instant) -> Option<&mut Session> {
        let stale = self.by_id.get(id).is_some_and(|s| self.idle_too_long(s, now));
        if stale {
            self.by_id.remove(id);
            return None;
        }
        let session = self.by_id.get_mut(id)?;
        session.last_active = now;
        Some(session)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.by_id.values()
    }

    pub fn remove(&mut self, id: &str) -> Option<Session> {
        self.by_id.remove(id)
    }

    /// Every session, taken out (the child is gone: they all end).
    pub fn clear(&mut self) -> Vec<Session> {
        self.by_id.drain().map(|(_, s)| s).collect()
    }

    /// Whether a new session would be admitted now without taking a busy one's place.
    pub fn has_room(&self) -> bool {
        self.by_id.len() < self.limit || self.by_id.values().any(Session::idle)
    }

    /// Open a session for `caller`; returns its id and the sessions dropped to make room
    /// (expired or evicted: the caller ends them).
    pub fn open(
        &mut self,
        caller: &str,
        protocol_version: String,
        declared: HashSet<String>,
        now: Instant,
    ) -> Result<(String, Vec<Session>), SessionLimit> {
        let mut dropped = Vec::new();
        if self.by_id.len() >= self.limit {
            dropped.extend(self.expire(now));
        }
        if self.by_id.len() >= self.limit {
            let victim = self.victim(caller).ok_or(SessionLimit)?;
            dropped.extend(self.by_id.remove(&victim));
            self.evicted += 1;
        }
        let id = uuid::Uuid::new_v4().simple().to_string();
        let session = Session {
            id: id.clone(),
            caller: caller.to_owned(),
            protocol_version,
            declared,
            subscriptions: HashSet::new(),
            log_level: None,
            stream: None,
            server_requests: HashMap::new(),
            next_server_request_id: 0,
            calls: HashMap::new(),
            open_requests: 0,
            last_active: now,
        };
        self.by_id.insert(id.clone(), session);
        Ok((id, dropped))
    }

    fn victim(&self, caller: &str) -> Option<String> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for session in self.by_id.values() {
            *counts.entry(session.caller.as_str()).or_default() += 1;
        }
        let callers = counts.len() + usize::from(!counts.contains_key(caller));
        let share = (self.limit / callers.max(1)).max(1);
        let least_recently_used = |of: &str, evictable: fn(&Session) -> bool| {
            self.by_id
                .values()
                .filter(|s| s.caller == of && evictable(s))
                .min_by_key(|s| s.last_active)
                .map(|s| s.id.clone())
        };
        if counts.get(caller).copied().unwrap_or(0) >= share {
            return if self.replace_own_idle {
                least_recently_used(caller, Session::idle)
            } else {
                None
            };
        }
        let mut over: Vec<(&str, usize)> = counts
            .into_iter()
            .filter(|(key, n)| *n > share && *key != caller)
            .collect();
        over.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        over.into_iter()
            .find_map(|(greedy, _)| least_recently_used(greedy, |s| !s.in_call()))
    }

    fn idle_too_long(&self, session: &Session, now: Instant) -> bool {
        session.idle() && now.duration_since(session.last_active) > self.idle_after
    }

    /// The sessions idle longer than the limit, taken out.
    pub fn expire(&mut self, now: Instant) -> Vec<Session> {
        let stale: Vec<String> = self
            .by_id
            .values()
            .filter(|s| self.idle_too_long(s, now))
            .map(|s| s.id.clone())
            .collect();
        stale.iter().filter_map(|id| self.by_id.remove(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(limit: usize) -> Sessions {
        Sessions::new(limit, Duration::from_secs(60))
    }

    #[test]
    fn a_full_table_makes_room_with_the_callers_own_idle_session() {
        let now = Instant::now();
        let mut sessions = table(2);
        let (first, _) = sessions.open("a", "v".into(), HashSet::new(), now).unwrap();
        sessions.open("b", "v".into(), HashSet::new(), now).unwrap();
        let (_, evicted) = sessions.open("a", "v".into(), HashSet::new(), now).unwrap();
        assert_eq!(
            evicted.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
            vec![first]
        );
    }

    #[test]
    fn a_greedy_caller_gives_way_to_a_newcomer_even_with_held_streams() {
        let now = Instant::now();
        let mut sessions = table(4);
        let mut held = Vec::new();
        for _ in 0..4 {
            let (id, _) = sessions.open("greedy", "v".into(), HashSet::new(), now).unwrap();
            let (sender, receiver) = mpsc::channel(1);
            sessions.get_mut(&id).unwrap().stream = Some(sender);
            held.push(receiver);
        }
        assert!(
            sessions.open("greedy", "v".into(), HashSet::new(), now).is_err(),
            "its own streams are held"
        );
        let (_, evicted) = sessions
            .open("newcomer", "v".into(), HashSet::new(), now)
            .unwrap();
        assert_eq!(evicted.len(), 1);
        assert_eq!(evicted[0].caller, "greedy");
    }

    #[test]
    fn a_table_keeping_own_idle_sessions_refuses_a_caller_at_its_share_only() {
        let now = Instant::now();
        let mut sessions = table(2).keeping_own_idle();
        let later = now + Duration::from_millis(1);
        let (first, _) = sessions.open("a", "v".into(), HashSet::new(), now).unwrap();
        sessions.open("a", "v".into(), HashSet::new(), later).unwrap();
        assert!(sessions.open("a", "v".into(), HashSet::new(), later).is_err());
        let (_, evicted) = sessions.open("b", "v".into(), HashSet::new(), later).unwrap();
        assert_eq!(
            evicted.iter().map(|s| s.id.clone()).collect::<Vec<_>>(),
            vec![first]
        );
    }

    #[test]
    fn busy_sessions_are_never_evicted() {
        let now = Instant::now();
        let mut sessions = table(1);
        let (id, _) = sessions.open("a", "v".into(), HashSet::new(), now).unwrap();
        sessions.get_mut(&id).unwrap().open_requests = 1;
        assert!(sessions.open("b", "v".into(), HashSet::new(), now).is_err());
    }

    #[test]
    fn idle_sessions_expire_after_the_limit() {
        let now = Instant::now();
        let mut sessions = table(3);
        sessions.open("a", "v".into(), HashSet::new(), now).unwrap();
        assert!(sessions.expire(now + Duration::from_secs(30)).is_empty());
        assert_eq!(sessions.expire(now + Duration::from_secs(61)).len(), 1);
    }
}
