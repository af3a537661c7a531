//! The embedded store: entries by encoded key, bounded by `max_entries`
//! (least recently used evicted first), entries past their hard TTL reclaimed.
//! Generic over the value holder, so the binding can keep JS values in it and
//! tests can keep strings.

use crate::core::envelope::Meta;
use hashlink::LinkedHashMap;

/// How often at most the whole store is swept for entries past their hard
/// TTL. Lookups and writes drop what they touch; the sweep catches the rest.
pub const SWEEP_INTERVAL_MS: u64 = 1_000;

#[derive(Debug)]
pub struct Entry<V> {
  pub meta: Meta,
  pub value: V,
  /// Failed refreshes in a row since the value was written (the attempt
  /// number of the refresh back-off, `policy::refresh_backoff`); a new
  /// value starts again at 0.
  pub failures: u32,
  /// No background refresh before this (epoch ms): set after a refresh
  /// failed, so a dead database is not hammered.
  pub retry_after: u64,
  /// XFetch eagerness of the call that wrote the entry.
  pub beta: f64,
  /// This entry's XFetch draw. One per entry, not one per read: per read,
  /// a hot key read millions of times a second would draw a near-zero `u`
  /// within microseconds and refresh as soon as it was written; one draw
  /// gives each instance one refresh time, exponentially spread before
  /// expiry, whatever the read rate.
  pub xfetch_u: f64,
}

/// What a sweep or an insert removed, for the counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reclaimed {
  pub evicted: u64,
  pub expired: u64,
}

#[derive(Debug)]
pub struct MemoryStore<V> {
  // Front = least recently used.
  map: LinkedHashMap<String, Entry<V>>,
  max_entries: usize,
  next_sweep: u64,
}

impl<V> MemoryStore<V> {
  pub fn new(max_entries: usize) -> Self {
    MemoryStore {
      map: LinkedHashMap::new(),
      max_entries: max_entries.max(1),
      next_sweep: 0,
    }
  }

  pub fn len(&self) -> usize {
    self.map.len()
  }

  pub fn is_empty(&self) -> bool {
    self.map.is_empty()
  }

  /// The live entry for `key`, marked most recently used. An entry past
  /// its hard TTL is not returned; the next write or sweep reclaims it.
  pub fn touch(&mut self, key: &str, now: u64) -> (Option<&mut Entry<V>>, Reclaimed) {
    let reclaimed = self.sweep_if_due(now);
    let found = match self.map.to_back(key) {
      Some(entry) if now < entry.meta.hard_until => Some(entry),
      _ => None,
    };
    (found, reclaimed)
  }

  /// Looks without reordering or reclaiming.
  pub fn peek(&self, key: &str) -> Option<&Entry<V>> {
    self.map.get(key)
  }

  pub fn peek_mut(&mut self, key: &str) -> Option<&mut Entry<V>> {
    self.map.get_mut(key)
  }

  pub fn insert(&mut self, key: String, entry: Entry<V>, now: u64) -> Reclaimed {
    let mut reclaimed = self.sweep_if_due(now);
    self.map.remove(&key);
    self.map.insert(key, entry);
    while self.map.len() > self.max_entries {
      self.map.pop_front();
      reclaimed.evicted += 1;
    }
    reclaimed
  }

  pub fn remove(&mut self, key: &str) -> Option<Entry<V>> {
    self.map.remove(key)
  }

  pub fn clear(&mut self) -> usize {
    let n = self.map.len();
    self.map.clear();
    n
  }

  fn sweep_if_due(&mut self, now: u64) -> Reclaimed {
    if now < self.next_sweep {
      return Reclaimed::default();
    }
    self.next_sweep = now.saturating_add(SWEEP_INTERVAL_MS);
    let before = self.map.len();
    self.map.retain(|_, entry| now < entry.meta.hard_until);
    Reclaimed {
      evicted: 0,
      expired: (before - self.map.len()) as u64,
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn entry(value: &str, hard_until: u64) -> Entry<String> {
    Entry {
      failures: 0,
      meta: Meta {
        fresh_until: hard_until / 2,
        hard_until,
        compute_ms: 1,
        stamp: 0,
        negative: false,
      },
      value: value.to_string(),
      retry_after: 0,
      beta: 1.0,
      xfetch_u: 1.0,
    }
  }

  #[test]
  fn evicts_the_least_recently_used() {
    let mut s = MemoryStore::new(2);
    s.insert("a".into(), entry("A", 100), 0);
    s.insert("b".into(), entry("B", 100), 0);
    assert!(s.touch("a", 1).0.is_some());
    let r = s.insert("c".into(), entry("C", 100), 1);
    assert_eq!(r.evicted, 1);
    assert!(s.peek("a").is_some());
    assert!(s.peek("b").is_none());
    assert!(s.peek("c").is_some());
  }

  #[test]
  fn an_expired_entry_is_not_returned_and_is_reclaimed_by_the_sweep() {
    let mut s = MemoryStore::new(10);
    s.insert("a".into(), entry("A", 100), 0);
    assert!(s.touch("a", 100).0.is_none());
    assert_eq!(s.touch("a", SWEEP_INTERVAL_MS + 1).1.expired, 1);
    assert!(s.is_empty());
  }

  #[test]
  fn sweeps_reclaim_untouched_expired_entries() {
    let mut s = MemoryStore::new(100);
    for i in 0..50 {
      s.insert(format!("k{i}"), entry("v", 500), 0);
    }
    s.insert("long".into(), entry("v", 10_000), 0);
    // Not due yet: nothing reclaimed before the interval passes.
    assert_eq!(s.touch("nothing", 600).1.expired, 0);
    let r = s.touch("nothing", SWEEP_INTERVAL_MS + 1).1;
    assert_eq!(r.expired, 50);
    assert_eq!(s.len(), 1);
  }

  #[test]
  fn overwriting_keeps_one_entry() {
    let mut s = MemoryStore::new(10);
    s.insert("a".into(), entry("1", 100), 0);
    s.insert("a".into(), entry("2", 100), 0);
    assert_eq!(s.len(), 1);
    assert_eq!(s.peek("a").unwrap().value, "2");
  }
}
