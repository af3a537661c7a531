//! The embedded store: entries by encoded key, bounded by `max_entries`
//! (least recently used evicted first), entries past their hard TTL reclaimed.
//! Generic over the value holder, so the binding can keep JS values in it and
//! tests can keep strings.

use crate::core::envelope::Meta;
use crate::core::etag::Etag;
use crate::core::policy;
use crate::core::tags::Tags;
use crate::engine::epoch::Epoch;
use hashlink::LinkedHashMap;
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

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
  /// From this moment (epoch ms) the fresh entry is refreshed early
  /// (XFetch): drawn once by its writer (`policy::xfetch_refresh_at`), with
  /// the beta of the call that wrote it, and shared with the fleet in the
  /// envelope. One draw per write, not one per read: per read, a hot key
  /// read millions of times a second would draw a near-zero `u` within
  /// microseconds and refresh as soon as it was written; and not one per
  /// instance: the earliest of N instances' draws would refresh a fleet
  /// `H(N)` times earlier than one instance.
  pub refresh_at: u64,
  /// The tags it was written with: judged against their invalidation
  /// stamps on every read (`core::tags`).
  pub tags: Tags,
  /// Past this moment (epoch ms) this process no longer answers from this
  /// copy (`l1Ttl`): a call goes on to Redis, else to the loader, though the
  /// entry's own TTLs run on. `u64::MAX`: no such bound.
  pub l1_until: u64,
  /// What it counts against `l1MaxBytes`: its value's bytes as written
  /// (given with [`Entry::weighing`]; 0, unweighed, without a bound in
  /// bytes), and its key's once stored.
  pub bytes: u32,
  /// Its validator (`ctx.setEtag`), for the loader of its next refresh.
  pub etag: Etag,
}

impl<V> Entry<V> {
  /// A newly written entry: no failed refresh yet.
  pub fn new(meta: Meta, value: V, refresh_at: u64) -> Self {
    Entry {
      meta,
      value,
      failures: 0,
      retry_after: 0,
      refresh_at,
      tags: Tags::NONE,
      l1_until: u64::MAX,
      bytes: 0,
      etag: Etag::NONE,
    }
  }

  /// This entry, its value `bytes` long (the UTF-8 bytes of its JSON text).
  pub fn weighing(mut self, bytes: usize) -> Self {
    self.bytes = u32::try_from(bytes).unwrap_or(u32::MAX);
    self
  }

  /// This entry, used here for at most `l1_ttl` from `now` (`None`: as
  /// long as its TTLs allow).
  pub fn in_l1_for(mut self, l1_ttl: Option<u64>, now: u64) -> Self {
    if let Some(ms) = l1_ttl {
      self.l1_until = now.saturating_add(ms);
    }
    self
  }
}

/// What a sweep or an insert removed, for the counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reclaimed {
  pub evicted: u64,
  pub expired: u64,
}

/// A stored key: up to [`StoreKey::INLINE`] bytes inside the map node itself,
/// longer ones on the heap. Most cache keys are short (`user:1234`), and a
/// `String` would cost them a second allocation (a 32-byte malloc chunk
/// for a 24-byte header's 10 bytes of text) on top of the node.
///
/// Hashes and compares as its `str`, so the map is looked up by `&str`.
pub struct StoreKey(KeyRepr);

enum KeyRepr {
  Inline {
    len: u8,
    bytes: [u8; StoreKey::INLINE],
  },
  Heap(Box<str>),
}

impl StoreKey {
  /// The longest key kept inline: what fits next to the length and the
  /// tag in the 24 bytes a `Box<str>` and its tag take anyway.
  pub const INLINE: usize = 22;

  #[inline]
  pub fn as_str(&self) -> &str {
    match &self.0 {
      KeyRepr::Inline { len, bytes } => {
        // SAFETY: an inline key is only made by `From<&str>` below, which
        // copies the whole of a `str` (valid UTF-8) into the first `len`
        // bytes; nothing writes to them afterwards.
        unsafe { std::str::from_utf8_unchecked(&bytes[..*len as usize]) }
      }
      KeyRepr::Heap(text) => text,
    }
  }
}

impl From<&str> for StoreKey {
  fn from(key: &str) -> Self {
    if key.len() <= StoreKey::INLINE {
      let mut bytes = [0u8; StoreKey::INLINE];
      bytes[..key.len()].copy_from_slice(key.as_bytes());
      StoreKey(KeyRepr::Inline {
        len: key.len() as u8,
        bytes,
      })
    } else {
      StoreKey(KeyRepr::Heap(key.into()))
    }
  }
}

impl From<String> for StoreKey {
  fn from(key: String) -> Self {
    if key.len() <= StoreKey::INLINE {
      StoreKey::from(key.as_str())
    } else {
      StoreKey(KeyRepr::Heap(key.into_boxed_str()))
    }
  }
}

impl Borrow<str> for StoreKey {
  fn borrow(&self) -> &str {
    self.as_str()
  }
}

// As `str` hashes and compares, so that `Borrow<str>` lookups find it.
impl Hash for StoreKey {
  fn hash<H: Hasher>(&self, state: &mut H) {
    self.as_str().hash(state)
  }
}

impl PartialEq for StoreKey {
  fn eq(&self, other: &Self) -> bool {
    self.as_str() == other.as_str()
  }
}

impl Eq for StoreKey {}

impl std::fmt::Debug for StoreKey {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    self.as_str().fmt(f)
  }
}

#[derive(Debug)]
pub struct MemoryStore<V> {
  // Front = least recently used.
  map: LinkedHashMap<StoreKey, Entry<V>>,
  max_entries: usize,
  /// `l1MaxBytes` (`u64::MAX`: none), and what the entries weigh now.
  max_bytes: u64,
  bytes: u64,
  next_sweep: u64,
  /// Moved by every change to an entry (`engine::epoch`): whatever hands
  /// out an entry to change, or adds or removes one, bumps it.
  epoch: Epoch,
}

impl<V> MemoryStore<V> {
  pub fn new(max_entries: usize, max_bytes: Option<u64>) -> Self {
    MemoryStore {
      map: LinkedHashMap::new(),
      max_entries: max_entries.max(1),
      max_bytes: max_bytes.unwrap_or(u64::MAX),
      bytes: 0,
      next_sweep: 0,
      epoch: Epoch::default(),
    }
  }

  /// This store, its changes counted on `epoch`.
  pub fn counting_on(mut self, epoch: Epoch) -> Self {
    self.epoch = epoch;
    self
  }

  pub fn len(&self) -> usize {
    self.map.len()
  }

  /// What the entries weigh (`Entry::bytes`), as `l1MaxBytes` counts.
  pub fn bytes(&self) -> u64 {
    self.bytes
  }

  pub fn is_empty(&self) -> bool {
    self.map.is_empty()
  }

  /// The live entry for `key`, marked most recently used. An entry past
  /// its hard TTL is not returned; the next write or sweep reclaims it.
  /// The one way to an entry that does not move the epoch: a lookup's
  /// (`Engine::decide`, `Engine::get`), which read it and change nothing.
  #[inline]
  pub fn touch(&mut self, key: &str, now: u64) -> (Option<&mut Entry<V>>, Reclaimed) {
    let reclaimed = self.sweep_if_due(now);
    let found = match self.map.to_back(key) {
      Some(entry) if policy::alive(&entry.meta, now) => Some(entry),
      _ => None,
    };
    (found, reclaimed)
  }

  /// Looks without reordering or reclaiming.
  pub fn peek(&self, key: &str) -> Option<&Entry<V>> {
    self.map.get(key)
  }

  pub fn peek_mut(&mut self, key: &str) -> Option<&mut Entry<V>> {
    self.epoch.bump();
    self.map.get_mut(key)
  }

  /// Stores `entry` under `key` (a `&str` or a `String`, whose buffer a
  /// long key keeps), replacing what was there; the least recently used
  /// entries leave past `max_entries` or `max_bytes` (never the new one).
  pub fn insert(&mut self, key: impl Into<StoreKey>, mut entry: Entry<V>, now: u64) -> Reclaimed {
    let mut reclaimed = self.sweep_if_due(now);
    self.epoch.bump();
    let key = key.into();
    self.remove(key.as_str());
    if entry.bytes > 0 {
      let key_bytes = u32::try_from(key.as_str().len()).unwrap_or(u32::MAX);
      entry.bytes = entry.bytes.saturating_add(key_bytes);
    }
    self.bytes += u64::from(entry.bytes);
    self.map.insert(key, entry);
    while self.map.len() > self.max_entries || (self.bytes > self.max_bytes && self.map.len() > 1) {
      if let Some((_, evicted)) = self.map.pop_front() {
        self.bytes -= u64::from(evicted.bytes);
      }
      reclaimed.evicted += 1;
    }
    reclaimed
  }

  pub fn remove(&mut self, key: &str) -> Option<Entry<V>> {
    let removed = self.map.remove(key)?;
    self.epoch.bump();
    self.bytes -= u64::from(removed.bytes);
    Some(removed)
  }

  pub fn clear(&mut self) -> usize {
    let n = self.map.len();
    self.epoch.bump();
    self.map.clear();
    self.bytes = 0;
    n
  }

  /// Removes every entry whose key starts with `prefix` (a namespace's
  /// clear); returns how many. One pass over the store.
  pub fn remove_prefix(&mut self, prefix: &str) -> usize {
    let before = self.map.len();
    self.retain(|key, _| !key.starts_with(prefix));
    before - self.map.len()
  }

  /// Keeps the entries `keep` says to, the byte count with them.
  fn retain(&mut self, mut keep: impl FnMut(&str, &Entry<V>) -> bool) {
    let (bytes, before) = (&mut self.bytes, self.map.len());
    self.map.retain(|key, entry| {
      let kept = keep(key.as_str(), entry);
      if !kept {
        *bytes -= u64::from(entry.bytes);
      }
      kept
    });
    if self.map.len() != before {
      self.epoch.bump();
    }
  }

  /// Every lookup asks, so the answer "not yet" is kept inline and cheap:
  /// with the sweep in the same function, the compiler saved its registers
  /// before the comparison (19 instructions on every hit instead of 4).
  #[inline(always)]
  fn sweep_if_due(&mut self, now: u64) -> Reclaimed {
    if now < self.next_sweep {
      return Reclaimed::default();
    }
    self.sweep(now)
  }

  #[cold]
  #[inline(never)]
  fn sweep(&mut self, now: u64) -> Reclaimed {
    self.next_sweep = now.saturating_add(SWEEP_INTERVAL_MS);
    let before = self.map.len();
    self.retain(|_, entry| policy::alive(&entry.meta, now));
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
      tags: Tags::NONE,
      failures: 0,
      meta: Meta {
        fresh_until: hard_until / 2,
        hard_until,
        compute_ms: 1,
        stamp: 0,
        refresh_at: Some(hard_until / 2),
        negative: false,
      },
      value: value.to_string(),
      retry_after: 0,
      refresh_at: hard_until / 2,
      l1_until: u64::MAX,
      bytes: 0,
      etag: Etag::NONE,
    }
  }

  #[test]
  fn evicts_the_least_recently_used() {
    let mut s = MemoryStore::new(2, None);
    s.insert("a", entry("A", 100), 0);
    s.insert("b", entry("B", 100), 0);
    assert!(s.touch("a", 1).0.is_some());
    let r = s.insert("c", entry("C", 100), 1);
    assert_eq!(r.evicted, 1);
    assert!(s.peek("a").is_some());
    assert!(s.peek("b").is_none());
    assert!(s.peek("c").is_some());
  }

  /// `l1MaxBytes`: values and keys weighed, the least recently used out
  /// first, and every way out of the store (replaced, removed, swept,
  /// cleared) takes its weight with it.
  #[test]
  fn evicts_by_bytes_and_keeps_the_count_true() {
    let mut s = MemoryStore::new(100, Some(250));
    s.insert("a", entry("A", u64::MAX / 2).weighing(99), 0);
    s.insert("b", entry("B", 100).weighing(99), 0);
    assert_eq!(s.bytes(), 200, "each value and its one-byte key");
    assert!(s.touch("a", 1).0.is_some());
    let r = s.insert("c", entry("C", 100).weighing(99), 1);
    assert_eq!((r.evicted, s.bytes()), (1, 200));
    assert!(s.peek("b").is_none(), "the least recently used left");
    s.insert("c", entry("C", 100).weighing(9), 1);
    assert_eq!(s.bytes(), 110, "a replaced value's weight leaves with it");
    s.remove("c");
    assert_eq!(s.bytes(), 100);
    s.insert("long", entry("L", 5).weighing(10), 1);
    assert_eq!(s.remove_prefix("lo"), 1);
    assert_eq!(s.bytes(), 100);
    s.insert("d", entry("D", 5).weighing(10), 1);
    s.touch("a", SWEEP_INTERVAL_MS + 6);
    assert_eq!((s.len(), s.bytes()), (1, 100), "the sweep took d");
    s.clear();
    assert_eq!(s.bytes(), 0);
    // A value heavier than the bound alone is kept (the engine keeps such
    // values out with l1MaxValueBytes), and the rest leave for it.
    s.insert("e", entry("E", 100_000).weighing(10), 1);
    s.insert("big", entry("B", 100_000).weighing(400), 1);
    assert_eq!((s.len(), s.bytes()), (1, 403));
  }

  #[test]
  fn an_expired_entry_is_not_returned_and_is_reclaimed_by_the_sweep() {
    let mut s = MemoryStore::new(10, None);
    s.insert("a", entry("A", 100), 0);
    assert!(s.touch("a", 100).0.is_none());
    assert_eq!(s.touch("a", SWEEP_INTERVAL_MS + 1).1.expired, 1);
    assert!(s.is_empty());
  }

  #[test]
  fn sweeps_reclaim_untouched_expired_entries() {
    let mut s = MemoryStore::new(100, None);
    for i in 0..50 {
      s.insert(format!("k{i}"), entry("v", 500), 0);
    }
    s.insert("long", entry("v", 10_000), 0);
    // Not due yet: nothing reclaimed before the interval passes.
    assert_eq!(s.touch("nothing", 600).1.expired, 0);
    let r = s.touch("nothing", SWEEP_INTERVAL_MS + 1).1;
    assert_eq!(r.expired, 50);
    assert_eq!(s.len(), 1);
  }

  #[test]
  fn keys_short_and_long_are_found_by_their_text() {
    let mut s = MemoryStore::new(10, None);
    let short = "s".repeat(StoreKey::INLINE);
    let long = "l".repeat(StoreKey::INLINE + 1);
    let unicode = "clé:ünïcødé:😀:ключ"; // multi-byte, over the inline size
    s.insert(short.as_str(), entry("short", 100), 0);
    s.insert(long.clone(), entry("long", 100), 0);
    s.insert(unicode, entry("unicode", 100), 0);
    s.insert("", entry("empty", 100), 0);
    assert!(matches!(
      StoreKey::from(short.as_str()).0,
      KeyRepr::Inline { .. }
    ));
    assert!(matches!(StoreKey::from(long.as_str()).0, KeyRepr::Heap(_)));
    assert_eq!(s.peek(&short).unwrap().value, "short");
    assert_eq!(s.peek(&long).unwrap().value, "long");
    assert_eq!(s.peek(unicode).unwrap().value, "unicode");
    assert_eq!(s.peek("").unwrap().value, "empty");
    assert!(s.peek(&short[1..]).is_none());
    assert!(s.peek(&long[1..]).is_none());
    assert_eq!(s.len(), 4);
  }

  #[test]
  fn a_key_takes_no_more_room_than_a_string() {
    assert_eq!(std::mem::size_of::<StoreKey>(), 24);
    assert_eq!(std::mem::size_of::<String>(), 24);
  }

  #[test]
  fn overwriting_keeps_one_entry() {
    let mut s = MemoryStore::new(10, None);
    s.insert("a", entry("1", 100), 0);
    s.insert("a", entry("2", 100), 0);
    assert_eq!(s.len(), 1);
    assert_eq!(s.peek("a").unwrap().value, "2");
  }
}
