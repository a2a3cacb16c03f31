//! The bounded pool of `--child-per-session`: which child serves which key. Pure
//! bookkeeping (no processes, no sockets, no clock: callers pass `now`).
//!
//! A *slot* is one child's place, held from the moment its spawn is reserved until the child
//! is reaped. A slot is reached by a key once bound: `session:<Mcp-Session-Id>` (a legacy
//! session, bound when the slot's child answered its `initialize`) or `caller:<key>` (a
//! 2026-07-28 caller, `pool_front` says what the key is).
//!
//! The bounds, the fairness among callers and the idle expiry are the one session table's
//! (`crate::sessions`): a slot is a session of that table, counted by its caller, busy while
//! it spawns or serves (`refresh` tells the table) and then never evicted, idle otherwise. A
//! full pool makes room by the table's fair rule, or refuses (`PoolFull`: 503). Every child
//! the pool drops is returned to the caller, who stops it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::sessions::Sessions;

pub const SESSION_KEY: &str = "session:";
pub const CALLER_KEY: &str = "caller:";

/// Every child's place is busy (or not this caller's to take): answer 503.
#[derive(Debug, thiserror::Error)]
#[error("all {0} children are busy")]
pub struct PoolFull(pub usize);

/// One child's place.
struct Slot<T> {
    child: Arc<T>,
    /// The key that routes to it, once bound.
    key: Option<String>,
    /// The child is starting: busy, and bound to no key yet.
    spawning: bool,
    /// Requests being handed to the child now.
    handling: usize,
}

/// Slots by id (the session table's) and by the key that routes to them.
pub struct Pool<T> {
    table: Sessions,
    slots: HashMap<String, Slot<T>>,
    by_key: HashMap<String, String>,
}

impl<T> Pool<T> {
    pub fn new(max_children: usize, idle_after: Duration) -> Self {
        Self {
            table: Sessions::new(max_children, idle_after),
            slots: HashMap::new(),
            by_key: HashMap::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn max_children(&self) -> usize {
        self.table.limit()
    }

    /// Idle children dropped to make room for new ones since start.
    pub fn evicted(&self) -> u64 {
        self.table.evicted
    }

    /// Whether a new child could take a place now without refusing (after `refresh`).
    pub fn can_admit(&self) -> bool {
        self.table.has_room()
    }

    /// Every child in the pool.
    pub fn children(&self) -> impl Iterator<Item = &Arc<T>> {
        self.slots.values().map(|slot| &slot.child)
    }

    /// Every bound slot: its id, key, child and whether it is in use.
    pub fn bound(&self) -> impl Iterator<Item = (&str, &str, &Arc<T>, bool)> {
        self.slots.iter().filter_map(|(id, slot)| {
            let busy = slot.spawning || slot.handling > 0;
            Some((id.as_str(), slot.key.as_deref()?, &slot.child, busy))
        })
    }

    /// A place for `child`, spawning, for `caller` (the key fair shares are counted by); its
    /// id and the children dropped to make room (stop them).
    pub fn reserve(
        &mut self,
        caller: &str,
        child: Arc<T>,
        now: Instant,
    ) -> Result<(String, Vec<Arc<T>>), PoolFull> {
        let (id, dropped) = self
            .table
            .open(caller, String::new(), HashSet::new(), now)
            .map_err(|_| PoolFull(self.table.limit()))?;
        if let Some(session) = self.table.get_mut(&id) {
            session.open_requests = 1; // spawning
        }
        let dropped = dropped.iter().filter_map(|old| self.unbind(&old.id)).collect();
        let slot = Slot {
            child,
            key: None,
            spawning: true,
            handling: 0,
        };
        self.slots.insert(id.clone(), slot);
        Ok((id, dropped))
    }

    /// The slot's child is running and serves `key` from now on.
    pub fn bind(&mut self, id: &str, key: String, now: Instant) {
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        slot.spawning = false;
        if let Some(old) = slot.key.replace(key.clone()) {
            self.by_key.remove(&old);
        }
        self.by_key.insert(key, id.to_owned());
        self.touch(id, now);
    }

    /// The slot that serves `key` (its id and child), touched; None if there is none.
    pub fn get(&mut self, key: &str, now: Instant) -> Option<(String, Arc<T>)> {
        let id = self.by_key.get(key)?.clone();
        let child = self.slots.get(&id)?.child.clone();
        self.touch(&id, now);
        Some((id, child))
    }

    /// How many requests are being handed to the slot's child now.
    pub fn handling(&self, id: &str) -> usize {
        self.slots.get(id).map_or(0, |slot| slot.handling)
    }

    /// A request is being handed to the slot's child: in use until `end`.
    pub fn begin(&mut self, id: &str) {
        if let Some(slot) = self.slots.get_mut(id) {
            slot.handling += 1;
        }
        if let Some(session) = self.table.get_mut(id) {
            session.open_requests += 1;
        }
    }

    /// A request handed to the slot's child is over; how many others are still open.
    pub fn end(&mut self, id: &str, now: Instant) -> usize {
        let Some(slot) = self.slots.get_mut(id) else {
            return 0;
        };
        slot.handling = slot.handling.saturating_sub(1);
        let open = slot.handling;
        self.touch(id, now);
        open
    }

    /// Drop one slot (its session ended, its spawn failed, its child died); its child.
    pub fn release(&mut self, id: &str) -> Option<Arc<T>> {
        self.table.remove(id);
        self.unbind(id)
    }

    /// Tell the table which slots are in use now (`busy` asks a child): a slot in use is
    /// touched and never evicted.
    pub fn refresh(&mut self, now: Instant, busy: impl Fn(&T) -> bool) {
        for (id, slot) in &self.slots {
            let in_use = slot.spawning || slot.handling > 0 || busy(&slot.child);
            if let Some(session) = self.table.get_mut(id) {
                session.open_requests = usize::from(in_use);
                if in_use {
                    session.last_active = now;
                }
            }
        }
    }

    /// Drop the slots idle for longer than the idle limit (after `refresh`); their children.
    pub fn expire(&mut self, now: Instant) -> Vec<Arc<T>> {
        let expired = self.table.expire(now);
        expired.iter().filter_map(|old| self.unbind(&old.id)).collect()
    }

    /// Drop every slot (shutdown); their children.
    pub fn clear(&mut self) -> Vec<Arc<T>> {
        self.table.clear();
        self.by_key.clear();
        self.slots.drain().map(|(_, slot)| slot.child).collect()
    }

    fn touch(&mut self, id: &str, now: Instant) {
        if let Some(session) = self.table.get_mut(id) {
            session.last_active = now;
        }
    }

    fn unbind(&mut self, id: &str) -> Option<Arc<T>> {
        let slot = self.slots.remove(id)?;
        if let Some(key) = &slot.key
            && self.by_key.get(key).is_some_and(|bound| bound == id)
        {
            self.by_key.remove(key);
        }
        Some(slot.child)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(max: usize) -> Pool<&'static str> {
        Pool::new(max, Duration::from_secs(60))
    }

    #[test]
    fn a_full_pool_refuses_while_every_child_is_busy_and_evicts_an_idle_one() {
        let now = Instant::now();
        let mut pool = pool(2);
        let (a, _) = pool.reserve("ip", Arc::new("a"), now).unwrap();
        let (b, _) = pool.reserve("ip", Arc::new("b"), now).unwrap();
        pool.bind(&a, "caller:a".into(), now);
        pool.bind(&b, "caller:b".into(), now);
        pool.refresh(now, |_| true);
        assert!(!pool.can_admit());
        assert!(pool.reserve("ip", Arc::new("c"), now).is_err());
        pool.refresh(now, |child| *child == "b");
        let (_, dropped) = pool.reserve("ip", Arc::new("c"), now).unwrap();
        assert_eq!(dropped.iter().map(|c| **c).collect::<Vec<_>>(), vec!["a"]);
        assert!(pool.get("caller:a", now).is_none());
        assert_eq!(pool.evicted(), 1);
    }

    #[test]
    fn a_spawning_slot_is_never_evicted_nor_expired() {
        let now = Instant::now();
        let mut pool = pool(1);
        pool.reserve("ip", Arc::new("a"), now).unwrap();
        pool.refresh(now, |_| false);
        assert!(pool.reserve("ip", Arc::new("b"), now).is_err());
        assert!(pool.expire(now + Duration::from_secs(120)).is_empty());
    }

    #[test]
    fn idle_slots_expire_and_released_ones_route_no_more() {
        let now = Instant::now();
        let mut pool = pool(3);
        let (a, _) = pool.reserve("ip", Arc::new("a"), now).unwrap();
        pool.bind(&a, "session:1".into(), now);
        let (b, _) = pool.reserve("ip", Arc::new("b"), now).unwrap();
        pool.bind(&b, "session:2".into(), now);
        pool.begin(&b);
        let later = now + Duration::from_secs(61);
        pool.refresh(later, |_| false);
        assert_eq!(
            pool.expire(later).iter().map(|c| **c).collect::<Vec<_>>(),
            vec!["a"]
        );
        assert_eq!(pool.end(&b, later), 0);
        assert!(pool.release(&b).is_some());
        assert!(pool.get("session:2", later).is_none() && pool.len() == 0);
    }
}
