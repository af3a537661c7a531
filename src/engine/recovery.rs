//! Auto-recovery: the `set`, `delete`, `expire`, `deleteByTag` and `clear`
//! calls that could not reach the shared store (breaker open, command
//! failed or timed out), kept until the fleet delivers them. One operation
//! per key, the latest (a later set or delete of the key replaces the
//! earlier one), and one per tag, the latest; a clear supersedes
//! everything queued before it, a namespace's clear what was queued before
//! it under its prefix. Bounded in count and in age: what falls out
//! is counted as dropped, never silently. In memory only.

use crate::core::envelope::Envelope;
use std::collections::{BTreeMap, HashMap};

/// What is to be delivered for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOp {
  /// A `set`: the conditional write of this envelope (its stamp decides).
  Set(Envelope),
  /// A `delete` at `stamp` (epoch ms): values not newer go.
  Delete { stamp: u64 },
  /// An `expire` at `stamp` (epoch ms): values not newer become stale.
  Expire { stamp: u64 },
}

impl KeyOp {
  /// The write stamp the operation is reconciled by.
  pub fn stamp(&self) -> u64 {
    match self {
      KeyOp::Set(envelope) => envelope.meta.stamp,
      KeyOp::Delete { stamp } | KeyOp::Expire { stamp } => *stamp,
    }
  }
}

/// One queued operation, as the replay sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Replay {
  Key {
    key: String,
    op: KeyOp,
  },
  /// A `clear` at `stamp`: the prefix's values not newer go.
  Clear {
    stamp: u64,
  },
  /// A namespace's `clear` at `stamp`: the values not newer of the keys
  /// starting with `prefix` (`users:`) go.
  ClearPrefix {
    prefix: String,
    stamp: u64,
  },
  /// A `deleteByTag` at `stamp`: the tag's invalidation stamp raised to it.
  Tag {
    tag: String,
    stamp: u64,
  },
}

/// What a sequence number holds: a key's operation or a tag's.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Queued {
  Key(String),
  Tag(String),
}

/// A queued operation's place: its sequence number (the order the calls
/// were made in) and when it was queued (epoch ms, the fleet's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
  seq: u64,
  queued_at: u64,
}

/// The operations waiting for the shared store.
#[derive(Debug)]
pub struct RecoveryQueue {
  max_entries: usize,
  max_age: u64,
  next_seq: u64,
  keys: HashMap<String, (Slot, KeyOp)>,
  /// Each tag's latest `deleteByTag` stamp.
  tags: HashMap<String, (Slot, u64)>,
  /// The queued keys and tags by sequence number: the oldest goes first.
  order: BTreeMap<u64, Queued>,
  clear: Option<(Slot, u64)>,
  /// Namespaces' clears by sub-prefix, each with its slot and stamp.
  prefixes: HashMap<String, (Slot, u64)>,
}

impl RecoveryQueue {
  /// At most `max_entries` operations (a clear is one), each kept at most
  /// `max_age` ms.
  pub fn new(max_entries: usize, max_age: u64) -> RecoveryQueue {
    RecoveryQueue {
      max_entries,
      max_age,
      next_seq: 0,
      keys: HashMap::new(),
      tags: HashMap::new(),
      order: BTreeMap::new(),
      clear: None,
      prefixes: HashMap::new(),
    }
  }

  pub fn len(&self) -> usize {
    self.keys.len() + self.tags.len() + self.prefixes.len() + usize::from(self.clear.is_some())
  }

  pub fn is_empty(&self) -> bool {
    self.len() == 0
  }

  fn slot(&mut self, now: u64) -> Slot {
    self.next_seq += 1;
    Slot {
      seq: self.next_seq,
      queued_at: now,
    }
  }

  /// Keeps `op` for `key`, replacing what was queued for it. Returns how
  /// many operations fell out of the count bound (this one included, when
  /// the bound is 0).
  pub fn push(&mut self, key: &str, op: KeyOp, now: u64) -> u64 {
    if self.max_entries == 0 {
      return 1;
    }
    let slot = self.slot(now);
    if let Some((old, _)) = self.keys.insert(key.to_string(), (slot, op)) {
      self.order.remove(&old.seq);
    }
    self.order.insert(slot.seq, Queued::Key(key.to_string()));
    self.bound()
  }

  /// Keeps a `deleteByTag` of `tag` at `stamp` (the later of it and one
  /// queued before: stamps only rise). Returns what [`RecoveryQueue::push`]
  /// does.
  pub fn push_tag(&mut self, tag: &str, stamp: u64, now: u64) -> u64 {
    if self.max_entries == 0 {
      return 1;
    }
    let slot = self.slot(now);
    let stamp = match self.tags.insert(tag.to_string(), (slot, stamp)) {
      Some((old, queued)) => {
        self.order.remove(&old.seq);
        stamp.max(queued)
      }
      None => stamp,
    };
    self.tags.insert(tag.to_string(), (slot, stamp));
    self.order.insert(slot.seq, Queued::Tag(tag.to_string()));
    self.bound()
  }

  /// A live `deleteByTag` of `tag` at `stamp` reached the store: a queued
  /// one not newer is superseded.
  pub fn settled_tag(&mut self, tag: &str, stamp: u64) {
    if let Some(&(slot, queued)) = self.tags.get(tag) {
      if queued <= stamp {
        self.tags.remove(tag);
        self.order.remove(&slot.seq);
      }
    }
  }

  /// Drops the oldest past the count bound; returns how many.
  fn bound(&mut self) -> u64 {
    let mut dropped = 0;
    while self.len() > self.max_entries {
      self.drop_oldest();
      dropped += 1;
    }
    dropped
  }

  fn forget(&mut self, queued: &Queued) {
    match queued {
      Queued::Key(key) => drop(self.keys.remove(key)),
      Queued::Tag(tag) => drop(self.tags.remove(tag)),
    }
  }

  /// The slot `queued` holds now, if it is still queued.
  fn slot_of(&self, queued: &Queued) -> Option<Slot> {
    match queued {
      Queued::Key(key) => self.keys.get(key).map(|(slot, _)| *slot),
      Queued::Tag(tag) => self.tags.get(tag).map(|(slot, _)| *slot),
    }
  }

  /// Keeps an `expire` of `key` at `at`. It does not replace a queued set
  /// (whose value would be lost): that set is delivered expired instead; a
  /// queued delete stays (nothing is left to expire). Returns what
  /// [`RecoveryQueue::push`] does.
  pub fn push_expire(&mut self, key: &str, at: u64, now: u64) -> u64 {
    match self.keys.get_mut(key) {
      Some((_, KeyOp::Set(envelope))) => {
        expire_envelope(envelope, at);
        0
      }
      Some((_, KeyOp::Delete { .. })) => 0,
      _ => self.push(key, KeyOp::Expire { stamp: at }, now),
    }
  }

  /// A live `expire` of `key` at `at` reached the store: a queued expire
  /// not newer is superseded; a queued set, not written yet, is delivered
  /// expired.
  pub fn settled_expire(&mut self, key: &str, at: u64) {
    match self.keys.get_mut(key) {
      Some((_, KeyOp::Set(envelope))) => expire_envelope(envelope, at),
      Some((_, KeyOp::Expire { stamp })) if *stamp <= at => self.settled(key, at),
      _ => {}
    }
  }

  /// Keeps a clear at `stamp`: it supersedes every operation queued before
  /// it (they are not dropped: the clear covers them). Returns how many fell
  /// out of the count bound.
  pub fn push_clear(&mut self, stamp: u64, now: u64) -> u64 {
    if self.max_entries == 0 {
      return 1;
    }
    self.keys.clear();
    self.tags.clear();
    self.order.clear();
    self.prefixes.clear();
    let slot = self.slot(now);
    self.clear = Some((slot, stamp));
    0
  }

  /// Keeps a namespace's clear of the keys starting with `prefix` at
  /// `stamp`: it supersedes what was queued before it under that prefix
  /// (key operations, and clears of the prefix or of namespaces nested in
  /// it), not a queued whole clear nor other namespaces' operations.
  /// Returns how many fell out of the count bound.
  pub fn push_clear_prefix(&mut self, prefix: &str, stamp: u64, now: u64) -> u64 {
    if self.max_entries == 0 {
      return 1;
    }
    self.supersede_under(prefix, u64::MAX);
    let slot = self.slot(now);
    self.prefixes.insert(prefix.to_string(), (slot, stamp));
    self.bound()
  }

  /// Removes the key operations and namespace clears under `prefix` with a
  /// stamp not newer than `stamp`.
  fn supersede_under(&mut self, prefix: &str, stamp: u64) {
    let under: Vec<String> = self
      .keys
      .iter()
      .filter(|(key, (_, op))| key.starts_with(prefix) && op.stamp() <= stamp)
      .map(|(key, _)| key.clone())
      .collect();
    for key in under {
      if let Some((slot, _)) = self.keys.remove(&key) {
        self.order.remove(&slot.seq);
      }
    }
    self
      .prefixes
      .retain(|queued, (_, s)| !(queued.starts_with(prefix) && *s <= stamp));
  }

  /// The clear (always the oldest: it superseded what came before), else
  /// the oldest key.
  fn drop_oldest(&mut self) {
    if self.clear.take().is_some() {
      return;
    }
    let oldest_prefix = self
      .prefixes
      .iter()
      .min_by_key(|(_, (slot, _))| slot.seq)
      .map(|(prefix, (slot, _))| (prefix.clone(), slot.seq));
    if let Some((prefix, seq)) = oldest_prefix {
      if self
        .order
        .first_key_value()
        .is_none_or(|(first, _)| seq < *first)
      {
        self.prefixes.remove(&prefix);
        return;
      }
    }
    if let Some((_, queued)) = self.order.pop_first() {
      self.forget(&queued);
    }
  }

  /// Drops what was queued more than `max_age` ms before `now`; returns how
  /// many.
  pub fn expire(&mut self, now: u64) -> u64 {
    let old = |slot: &Slot| now.saturating_sub(slot.queued_at) > self.max_age;
    let mut dropped = 0;
    if self.clear.as_ref().is_some_and(|(slot, _)| old(slot)) {
      self.clear = None;
      dropped += 1;
    }
    let prefixes = self.prefixes.len();
    self.prefixes.retain(|_, (slot, _)| !old(slot));
    dropped += (prefixes - self.prefixes.len()) as u64;
    let expired: Vec<(u64, Queued)> = self
      .order
      .iter()
      .take_while(|(seq, queued)| {
        self
          .slot_of(queued)
          .is_some_and(|slot| slot.seq == **seq && old(&slot))
      })
      .map(|(seq, queued)| (*seq, queued.clone()))
      .collect();
    for (seq, queued) in expired {
      self.order.remove(&seq);
      self.forget(&queued);
      dropped += 1;
    }
    dropped
  }

  /// Everything queued, in the order it is to be delivered (the calls'
  /// order), each with its sequence number for [`RecoveryQueue::delivered`].
  pub fn snapshot(&self) -> Vec<(u64, Replay)> {
    let mut out = Vec::with_capacity(self.len());
    if let Some((slot, stamp)) = self.clear {
      out.push((slot.seq, Replay::Clear { stamp }));
    }
    let mut prefixes: Vec<_> = self.prefixes.iter().collect();
    prefixes.sort_by_key(|(_, (slot, _))| slot.seq);
    for (prefix, (slot, stamp)) in prefixes {
      out.push((
        slot.seq,
        Replay::ClearPrefix {
          prefix: prefix.clone(),
          stamp: *stamp,
        },
      ));
    }
    for (seq, queued) in &self.order {
      match queued {
        Queued::Key(key) => {
          if let Some((_, op)) = self.keys.get(key) {
            out.push((
              *seq,
              Replay::Key {
                key: key.clone(),
                op: op.clone(),
              },
            ));
          }
        }
        Queued::Tag(tag) => {
          if let Some(&(_, stamp)) = self.tags.get(tag) {
            out.push((
              *seq,
              Replay::Tag {
                tag: tag.clone(),
                stamp,
              },
            ));
          }
        }
      }
    }
    out
  }

  /// Operation `seq` reached the store: it leaves the queue, unless a later
  /// one replaced it meanwhile. True if it left.
  pub fn delivered(&mut self, seq: u64, replay: &Replay) -> bool {
    match replay {
      Replay::Clear { .. } => {
        if self.clear.is_some_and(|(slot, _)| slot.seq == seq) {
          self.clear = None;
          return true;
        }
        false
      }
      Replay::ClearPrefix { prefix, .. } => {
        if self
          .prefixes
          .get(prefix)
          .is_some_and(|(slot, _)| slot.seq == seq)
        {
          self.prefixes.remove(prefix);
          return true;
        }
        false
      }
      Replay::Key { key, .. } => {
        if self.keys.get(key).is_some_and(|(slot, _)| slot.seq == seq) {
          self.keys.remove(key);
          self.order.remove(&seq);
          return true;
        }
        false
      }
      Replay::Tag { tag, .. } => {
        if self.tags.get(tag).is_some_and(|(slot, _)| slot.seq == seq) {
          self.tags.remove(tag);
          self.order.remove(&seq);
          return true;
        }
        false
      }
    }
  }

  /// A live `set` or `delete` of `key` at `stamp` reached the store: what
  /// was queued for the key before it is superseded.
  pub fn settled(&mut self, key: &str, stamp: u64) {
    if let Some((slot, op)) = self.keys.get(key) {
      if op.stamp() <= stamp {
        let seq = slot.seq;
        self.keys.remove(key);
        self.order.remove(&seq);
      }
    }
  }

  /// A live `clear` at `stamp` reached the store: everything queued with a
  /// stamp not newer is superseded.
  pub fn settled_clear(&mut self, stamp: u64) {
    if self.clear.is_some_and(|(_, s)| s <= stamp) {
      self.clear = None;
    }
    let tags: Vec<String> = self
      .tags
      .iter()
      .filter(|(_, (_, queued))| *queued <= stamp)
      .map(|(tag, _)| tag.clone())
      .collect();
    for tag in tags {
      if let Some((slot, _)) = self.tags.remove(&tag) {
        self.order.remove(&slot.seq);
      }
    }
    self.prefixes.retain(|_, (_, s)| *s > stamp);
    let superseded: Vec<String> = self
      .keys
      .iter()
      .filter(|(_, (_, op))| op.stamp() <= stamp)
      .map(|(key, _)| key.clone())
      .collect();
    for key in superseded {
      if let Some((slot, _)) = self.keys.remove(&key) {
        self.order.remove(&slot.seq);
      }
    }
  }

  /// A live namespace's clear of `prefix` at `stamp` reached the store:
  /// what was queued under the prefix with a stamp not newer is superseded.
  pub fn settled_clear_prefix(&mut self, prefix: &str, stamp: u64) {
    self.supersede_under(prefix, stamp);
  }

  /// Whether a stored value of `key` with `stamp` is one a queued operation
  /// invalidated (it was written no later than the operation): it must not
  /// be served while the operation waits.
  pub fn hides(&self, key: &str, stamp: u64) -> bool {
    self.clear.is_some_and(|(_, s)| stamp <= s)
      || self
        .prefixes
        .iter()
        .any(|(prefix, (_, s))| stamp <= *s && key.starts_with(prefix.as_str()))
      || self
        .keys
        .get(key)
        .is_some_and(|(_, op)| stamp <= op.stamp())
  }

  /// Empties the queue, returning what was in it, in order.
  pub fn take_all(&mut self) -> Vec<Replay> {
    let all = self.snapshot().into_iter().map(|(_, r)| r).collect();
    self.keys.clear();
    self.tags.clear();
    self.order.clear();
    self.clear = None;
    self.prefixes.clear();
    all
  }
}

/// `envelope` after an expire at `at` (`Meta::expired_at`; unchanged when
/// written later or stale by then).
fn expire_envelope(envelope: &mut Envelope, at: u64) {
  if let Some(meta) = envelope.meta.expired_at(at) {
    envelope.meta = meta;
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::envelope::Meta;

  fn set(stamp: u64) -> KeyOp {
    KeyOp::Set(Envelope {
      meta: Meta {
        fresh_until: stamp + 10,
        hard_until: stamp + 20,
        compute_ms: 0,
        stamp,
        negative: false,
        refresh_at: None,
      },
      body: crate::core::body::Body::Json("1".into()),
      tags: crate::core::tags::Tags::NONE,
      etag: Default::default(),
    })
  }

  fn keys(q: &RecoveryQueue) -> Vec<String> {
    q.snapshot()
      .into_iter()
      .map(|(_, r)| match r {
        Replay::Key { key, .. } => key,
        Replay::Clear { .. } => "<clear>".into(),
        Replay::Tag { tag, .. } => format!("<tag {tag}>"),
        Replay::ClearPrefix { prefix, .. } => format!("<clear {prefix}>"),
      })
      .collect()
  }

  fn op(q: &RecoveryQueue, key: &str) -> Option<KeyOp> {
    q.snapshot().into_iter().find_map(|(_, r)| match r {
      Replay::Key { key: k, op } if k == key => Some(op),
      _ => None,
    })
  }

  #[test]
  fn an_expire_keeps_a_queued_set_and_delivers_it_stale() {
    let mut q = RecoveryQueue::new(10, 1_000);
    q.push("a", set(100), 0);
    assert_eq!(q.push_expire("a", 105, 0), 0);
    let Some(KeyOp::Set(envelope)) = op(&q, "a") else {
      panic!("the set stays queued")
    };
    assert_eq!(
      (envelope.meta.fresh_until, envelope.meta.hard_until),
      (105, 120)
    );
    // A queued delete stays; with nothing queued the expire is queued.
    q.push("b", KeyOp::Delete { stamp: 100 }, 0);
    q.push_expire("b", 105, 0);
    assert_eq!(op(&q, "b"), Some(KeyOp::Delete { stamp: 100 }));
    q.push_expire("c", 105, 0);
    assert_eq!(op(&q, "c"), Some(KeyOp::Expire { stamp: 105 }));
    assert!(
      q.hides("c", 105) && !q.hides("c", 106),
      "values not newer are not served meanwhile"
    );
    // A later set replaces the expire, as any later operation does.
    q.push("c", set(110), 0);
    assert!(matches!(op(&q, "c"), Some(KeyOp::Set(_))));
    // A live expire: a queued expire not newer is superseded, a queued set expired.
    q.push_expire("d", 105, 0);
    q.settled_expire("d", 104);
    assert_eq!(
      op(&q, "d"),
      Some(KeyOp::Expire { stamp: 105 }),
      "an older live expire supersedes nothing"
    );
    q.settled_expire("d", 106);
    assert_eq!(op(&q, "d"), None);
    q.settled_expire("c", 112);
    let Some(KeyOp::Set(envelope)) = op(&q, "c") else {
      panic!("the set stays queued")
    };
    assert_eq!(envelope.meta.fresh_until, 112);
  }

  #[test]
  fn a_tag_keeps_its_latest_invalidation_in_call_order_with_the_keys() {
    let mut q = RecoveryQueue::new(3, 100);
    q.push_tag("user:1", 50, 0);
    q.push("user:1", set(40), 0);
    q.push_tag("user:1", 30, 10);
    assert_eq!(
      keys(&q),
      ["user:1", "<tag user:1>"],
      "a tag and a key of the same name are apart; the tag moved last"
    );
    let (seq, replay) = q.snapshot().remove(1);
    assert_eq!(
      replay,
      Replay::Tag {
        tag: "user:1".into(),
        stamp: 50
      },
      "the later stamp of the two is kept"
    );
    q.settled_tag("user:1", 49);
    assert_eq!(q.len(), 2, "an older live invalidation supersedes nothing");
    assert!(q.delivered(seq, &replay));
    assert_eq!(keys(&q), ["user:1"]);
    q.push_tag("a", 1, 20);
    q.push_tag("b", 1, 30);
    assert_eq!(q.push_tag("c", 1, 40), 1, "the oldest (the key) falls out");
    assert_eq!(keys(&q), ["<tag a>", "<tag b>", "<tag c>"]);
    assert_eq!(q.expire(125), 1, "a is older than 100 ms");
    q.settled_tag("b", 5);
    assert_eq!(keys(&q), ["<tag c>"]);
    q.settled_clear(1);
    assert!(q.is_empty(), "a live clear covers the tags queued before");
    q.push_tag("d", 1, 0);
    q.push_clear(2, 0);
    assert_eq!(keys(&q), ["<clear>"]);
    assert_eq!(q.take_all().len(), 1);
  }

  #[test]
  fn the_latest_operation_per_key_is_kept_in_call_order() {
    let mut q = RecoveryQueue::new(10, 1_000);
    q.push("a", set(1), 0);
    q.push("b", KeyOp::Delete { stamp: 2 }, 0);
    q.push("a", KeyOp::Delete { stamp: 3 }, 0);
    assert_eq!(
      keys(&q),
      ["b", "a"],
      "a's delete replaced its set and moved last"
    );
    assert_eq!(q.len(), 2);
    let snapshot = q.snapshot();
    assert_eq!(
      snapshot[1].1,
      Replay::Key {
        key: "a".into(),
        op: KeyOp::Delete { stamp: 3 }
      }
    );
    q.push_clear(4, 0);
    assert_eq!(keys(&q), ["<clear>"], "a clear supersedes what came before");
    q.push("c", set(5), 0);
    assert_eq!(keys(&q), ["<clear>", "c"]);
  }

  #[test]
  fn the_bounds_drop_the_oldest_and_count_them() {
    let mut q = RecoveryQueue::new(2, 100);
    assert_eq!(q.push("a", set(1), 0), 0);
    assert_eq!(q.push("b", set(2), 10), 0);
    assert_eq!(q.push("c", set(3), 20), 1, "a falls out");
    assert_eq!(keys(&q), ["b", "c"]);
    assert_eq!(q.expire(105), 0);
    assert_eq!(q.expire(111), 1, "b is older than 100 ms");
    assert_eq!(keys(&q), ["c"]);
    assert_eq!(q.expire(1_000), 1);
    assert!(q.is_empty());
    let mut off = RecoveryQueue::new(0, 100);
    assert_eq!(off.push("a", set(1), 0), 1, "a bound of 0 keeps nothing");
    assert_eq!(off.push_clear(1, 0), 1);
    assert!(off.is_empty());
  }

  #[test]
  fn delivery_removes_only_what_was_not_replaced_meanwhile() {
    let mut q = RecoveryQueue::new(10, 1_000);
    q.push("a", set(1), 0);
    let (seq, replay) = q.snapshot().remove(0);
    q.push("a", KeyOp::Delete { stamp: 2 }, 0);
    assert!(!q.delivered(seq, &replay), "a later delete replaced it");
    let (seq, replay) = q.snapshot().remove(0);
    assert!(q.delivered(seq, &replay));
    assert!(q.is_empty());
  }

  #[test]
  fn queued_operations_hide_the_values_they_invalidated() {
    let mut q = RecoveryQueue::new(10, 1_000);
    q.push("a", KeyOp::Delete { stamp: 50 }, 0);
    assert!(q.hides("a", 50) && q.hides("a", 10));
    assert!(!q.hides("a", 51), "a value written after the delete counts");
    assert!(!q.hides("b", 10));
    q.settled("a", 40);
    assert!(
      q.hides("a", 10),
      "an older live write does not supersede it"
    );
    q.settled("a", 60);
    assert!(!q.hides("a", 10));
    q.push_clear(100, 0);
    assert!(q.hides("b", 100) && !q.hides("b", 101));
    q.push("c", set(120), 0);
    q.settled_clear(110);
    assert!(!q.hides("b", 100), "a live clear superseded the queued one");
    assert!(q.hides("c", 120), "but not what came after it");
    assert_eq!(q.take_all().len(), 1);
    assert!(q.is_empty());
  }

  #[test]
  fn a_namespace_clear_supersedes_what_was_queued_under_its_prefix_only() {
    let mut q = RecoveryQueue::new(10, 1_000);
    q.push("users:a", set(1), 0);
    q.push("users:b\\:c", KeyOp::Delete { stamp: 2 }, 0);
    q.push("usersX", set(3), 0);
    q.push("feed:a", set(4), 0);
    q.push_clear_prefix("users:eu:", 5, 0);
    assert_eq!(q.push_clear_prefix("users:", 6, 0), 0);
    assert_eq!(
      keys(&q),
      ["<clear users:>", "usersX", "feed:a"],
      "its keys and the nested namespace's clear went, others stay"
    );
    assert!(q.hides("users:z", 6) && q.hides("users:eu:z", 1));
    assert!(!q.hides("users:z", 7), "a value written after it counts");
    assert!(!q.hides("feed:b", 6), "another namespace's values count");
    q.push("users:a", set(8), 0);
    assert_eq!(keys(&q), ["<clear users:>", "usersX", "feed:a", "users:a"]);
    // A live clear of the namespace settles what is not newer, only under it.
    q.settled_clear_prefix("users:", 7);
    assert_eq!(keys(&q), ["usersX", "feed:a", "users:a"]);
    // A whole clear supersedes queued namespace clears; a namespace clear
    // leaves a queued whole clear.
    q.push_clear_prefix("feed:", 9, 0);
    q.push_clear(10, 0);
    assert_eq!(keys(&q), ["<clear>"]);
    q.push_clear_prefix("feed:", 11, 0);
    assert_eq!(keys(&q), ["<clear>", "<clear feed:>"]);
    q.settled_clear(12);
    assert!(q.is_empty(), "a live whole clear settles a namespace's too");
    // Delivery, the bounds and the age.
    q.push_clear_prefix("a:", 13, 0);
    let (seq, replay) = q.snapshot().remove(0);
    assert_eq!(
      replay,
      Replay::ClearPrefix {
        prefix: "a:".into(),
        stamp: 13
      }
    );
    q.push_clear_prefix("a:", 14, 0);
    assert!(
      !q.delivered(seq, &replay),
      "a later clear of it replaced it"
    );
    let (seq, replay) = q.snapshot().remove(0);
    assert!(q.delivered(seq, &replay) && q.is_empty());
    let mut small = RecoveryQueue::new(2, 100);
    small.push_clear_prefix("a:", 1, 0);
    small.push("k", set(2), 10);
    assert_eq!(
      small.push("l", set(3), 20),
      1,
      "the oldest, a's clear, falls out"
    );
    assert_eq!(keys(&small), ["k", "l"]);
    small.push_clear_prefix("b:", 4, 30);
    assert_eq!(keys(&small), ["<clear b:>", "l"]);
    assert_eq!(small.expire(125), 1, "l is older than 100 ms");
    assert_eq!(small.expire(131), 1, "then b's clear");
    assert!(small.is_empty());
    assert_eq!(RecoveryQueue::new(0, 1).push_clear_prefix("a:", 1, 0), 1);
  }
}
