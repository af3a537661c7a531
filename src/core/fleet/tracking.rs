//! Redis client tracking, the pure part: which cache key a tracking message
//! names, and which messages are the echo of a change herdcache announced
//! itself.
//!
//! The events subscription's connection asks the server to tell it of every
//! change to a name under the prefix (`CLIENT TRACKING ON BCAST PREFIX`),
//! so a `DEL` from `redis-cli`, a migration script's `SET`, an `EXPIRE`, an
//! eviction or a `FLUSHDB` reaches every L1. That connection writes nothing,
//! so `NOLOOP` would spare nothing: every herdcache write is heard twice,
//! once as its announcement on the events channel (`f`, `d`, `e`, `c`, `p`)
//! and once as its tracking message. [`Echoes`] pairs the two, whichever
//! comes first, within a window: a tracking message no announcement of the
//! same key meets within it is a change made outside herdcache.

use std::collections::{HashMap, VecDeque};

/// How long (ms) a tracking message waits for the announcement of the same
/// change, and an announcement for its tracking message. On one server the
/// script announces in the step that writes, so both come in one flush; on
/// a cluster the writer announces after its script's reply, a round trip
/// later. A late pair costs the L1 one read of Redis, never a stale value.
pub const ECHO_WINDOW_MS: u64 = 20;

/// Past this many tracking messages held at once, the L1 is cleared instead
/// (a flood of outside writes: one clear costs less than holding them).
pub const MOST_HELD: usize = 10_000;

/// Past this many announcements remembered at once, the oldest is let go
/// (its echo, if it comes, costs one read).
const MOST_ANNOUNCED: usize = 10_000;

/// The name every one of the prefix's keys' Redis names starts with: the
/// tracking prefix (`{<prefix>`; tag stamps and load slots do not start with
/// `{`, so they are not tracked).
pub fn tracked_prefix(prefix: &str) -> String {
  format!("{{{prefix}")
}

/// The cache key whose value's Redis name is `name` (`{<prefix><key>}`), or
/// `None` for another name under the prefix: a lock, a back-off or expire
/// marker (which end in `:lock`, `:backoff`, `:expired`, never in `}`).
pub fn value_key<'a>(prefix: &str, name: &'a str) -> Option<&'a str> {
  name
    .strip_prefix('{')?
    .strip_prefix(prefix)?
    .strip_suffix('}')
}

/// What a tracking message about a key comes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracked {
  /// The echo of an announcement heard already: nothing more to do.
  Echo,
  /// Held until its window ends, for the announcement that would make it
  /// an echo ([`Echoes::due`] gives it back otherwise).
  Held,
  /// Too many are held: clear the L1 ([`Echoes::reset`] has let them go).
  Flooded,
}

/// The tracking messages and announcements waiting for their pair; every
/// moment is a monotonic ms given by the caller.
#[derive(Debug, Default)]
pub struct Echoes {
  /// Tracking messages held: key → the end of its window.
  held: HashMap<String, u64>,
  /// The same, in the order their windows end (an entry whose key left
  /// `held`, or was held again, is passed over).
  held_order: VecDeque<(u64, String)>,
  /// Announcements of one key's change: key → the end of its window.
  announced: HashMap<String, u64>,
  announced_order: VecDeque<(u64, String)>,
  /// Clears announced (`None`: the whole prefix; `Some`: a namespace's
  /// sub-prefix), each with the end of its window.
  clears: Vec<(Option<String>, u64)>,
}

impl Echoes {
  /// A tracking message about `key`, heard at `now`.
  pub fn tracked(&mut self, key: &str, now: u64) -> Tracked {
    self.forget_announced(now);
    if self.announced.remove(key).is_some() || self.in_clear(key, now) {
      return Tracked::Echo;
    }
    if self.held.contains_key(key) {
      // One change outside is as good as two: the key goes once.
      return Tracked::Held;
    }
    if self.held.len() >= MOST_HELD {
      self.reset();
      return Tracked::Flooded;
    }
    let until = now + ECHO_WINDOW_MS;
    self.held.insert(key.to_string(), until);
    self.held_order.push_back((until, key.to_string()));
    Tracked::Held
  }

  /// Herdcache announced a change of `key` (`f`, `d`, `e`, from any
  /// instance) at `now`: true when it meets its tracking message, held.
  pub fn announced(&mut self, key: &str, now: u64) -> bool {
    if self.held.remove(key).is_some() {
      return true;
    }
    self.forget_announced(now);
    if self.announced.len() >= MOST_ANNOUNCED {
      if let Some((_, oldest)) = self.announced_order.pop_front() {
        self.announced.remove(&oldest);
      }
    }
    let until = now + ECHO_WINDOW_MS;
    self.announced.insert(key.to_string(), until);
    self.announced_order.push_back((until, key.to_string()));
    false
  }

  /// Herdcache announced a clear (`sub_prefix`: a namespace's, `None`: the
  /// whole prefix's) at `now`: the tracking messages of its keys, held or
  /// heard within the window, are its echoes. Answers how many were held.
  pub fn cleared(&mut self, sub_prefix: Option<&str>, now: u64) -> usize {
    let before = self.held.len();
    self
      .held
      .retain(|key, _| sub_prefix.is_some_and(|p| !key.starts_with(p)));
    self.clears.retain(|&(_, until)| until > now);
    self
      .clears
      .push((sub_prefix.map(str::to_string), now + ECHO_WINDOW_MS));
    before - self.held.len()
  }

  /// The keys whose tracking message no announcement met by `now`: changed
  /// outside herdcache.
  pub fn due(&mut self, now: u64) -> Vec<String> {
    ended(&mut self.held, &mut self.held_order, now)
  }

  /// When the next held message's window ends, if any is held.
  pub fn next_due(&self) -> Option<u64> {
    self
      .held_order
      .iter()
      .find(|(until, key)| self.held.get(key) == Some(until))
      .map(|&(until, _)| until)
  }

  /// Lets everything go (the L1 is cleared, or the subscription is made
  /// anew).
  pub fn reset(&mut self) {
    *self = Echoes::default();
  }

  fn in_clear(&self, key: &str, now: u64) -> bool {
    self.clears.iter().any(|(sub_prefix, until)| {
      *until > now && sub_prefix.as_deref().is_none_or(|p| key.starts_with(p))
    })
  }

  fn forget_announced(&mut self, now: u64) {
    ended(&mut self.announced, &mut self.announced_order, now);
  }
}

/// Takes out of `waiting` the keys whose window ended by `now`, in the
/// order their windows end (`order`'s entries for a key that left
/// `waiting`, or waits again, are passed over).
fn ended(
  waiting: &mut HashMap<String, u64>,
  order: &mut VecDeque<(u64, String)>,
  now: u64,
) -> Vec<String> {
  let mut ended = Vec::new();
  while order.front().is_some_and(|&(until, _)| until <= now) {
    let (until, key) = order.pop_front().expect("front");
    if waiting.get(&key) == Some(&until) {
      waiting.remove(&key);
      ended.push(key);
    }
  }
  ended
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::fleet::RedisKeys;

  #[test]
  fn only_a_value_name_names_a_key() {
    for (prefix, key) in [
      ("app:", "user:1"),
      ("", "k"),
      ("p:", "a}"),
      ("p:", "x}:lock"),
    ] {
      let keys = RedisKeys::new(prefix, key);
      assert!(keys.value.starts_with(&tracked_prefix(prefix)));
      assert_eq!(value_key(prefix, &keys.value), Some(key), "{key}");
      for other in [&keys.lock, &keys.backoff, &keys.expired] {
        assert!(other.starts_with(&tracked_prefix(prefix)));
        assert_eq!(value_key(prefix, other), None, "{other}");
      }
    }
    assert_eq!(value_key("app:", "{other:k}"), None);
    assert_eq!(value_key("app:", "app:tag:{t}"), None);
    assert!(!crate::core::fleet::tag_stamp("app:", "t").starts_with(&tracked_prefix("app:")));
    assert!(!crate::core::fleet::load_slots("app:").starts_with(&tracked_prefix("app:")));
  }

  #[test]
  fn a_tracking_message_then_its_announcement_is_an_echo() {
    let mut echoes = Echoes::default();
    assert_eq!(echoes.tracked("k", 100), Tracked::Held);
    assert_eq!(echoes.next_due(), Some(100 + ECHO_WINDOW_MS));
    assert!(echoes.announced("k", 105));
    assert_eq!(echoes.due(1_000), Vec::<String>::new());
    assert_eq!(echoes.next_due(), None);
  }

  #[test]
  fn an_announcement_then_its_tracking_message_is_an_echo_once() {
    let mut echoes = Echoes::default();
    assert!(!echoes.announced("k", 100));
    assert_eq!(echoes.tracked("k", 101), Tracked::Echo);
    // A second message is a second change: not herdcache's.
    assert_eq!(echoes.tracked("k", 102), Tracked::Held);
    assert_eq!(echoes.due(102 + ECHO_WINDOW_MS), vec!["k".to_string()]);
  }

  #[test]
  fn an_unmet_message_is_a_change_made_outside_once_its_window_ends() {
    let mut echoes = Echoes::default();
    assert_eq!(echoes.tracked("a", 100), Tracked::Held);
    assert_eq!(echoes.tracked("b", 110), Tracked::Held);
    assert_eq!(echoes.tracked("a", 115), Tracked::Held);
    assert!(echoes.due(100 + ECHO_WINDOW_MS - 1).is_empty());
    assert_eq!(echoes.due(100 + ECHO_WINDOW_MS), vec!["a".to_string()]);
    assert_eq!(echoes.next_due(), Some(110 + ECHO_WINDOW_MS));
    assert_eq!(echoes.due(200), vec!["b".to_string()]);
    // An announcement past its window meets nothing.
    assert!(!echoes.announced("c", 300));
    assert_eq!(echoes.tracked("c", 300 + ECHO_WINDOW_MS), Tracked::Held);
  }

  #[test]
  fn a_clear_meets_the_messages_of_its_keys_before_and_after_it() {
    let mut echoes = Echoes::default();
    echoes.tracked("users:1", 100);
    echoes.tracked("posts:1", 100);
    assert_eq!(echoes.cleared(Some("users:"), 101), 1);
    assert_eq!(echoes.tracked("users:2", 102), Tracked::Echo);
    assert_eq!(echoes.tracked("posts:2", 102), Tracked::Held);
    assert_eq!(echoes.cleared(None, 103), 2);
    assert_eq!(echoes.tracked("any", 104), Tracked::Echo);
    assert_eq!(echoes.tracked("any", 103 + ECHO_WINDOW_MS), Tracked::Held);
  }

  #[test]
  fn a_flood_lets_everything_go() {
    let mut echoes = Echoes::default();
    for i in 0..MOST_HELD {
      assert_eq!(echoes.tracked(&i.to_string(), 0), Tracked::Held);
    }
    assert_eq!(echoes.tracked("one more", 0), Tracked::Flooded);
    assert!(echoes.due(1_000).is_empty());
    assert_eq!(echoes.tracked("after", 1_000), Tracked::Held);
  }
}
