//! The events channel's wire format: what changed, and which instance
//! changed it.

/// What happened to a key, on the events channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
  /// A value was written for the key (a load finished, or `set`).
  Filled(String),
  /// The key was deleted.
  Deleted(String),
  /// The key's value was made stale at `at` (epoch ms; `expire`), kept
  /// until its hard TTL.
  Expired { key: String, at: u64 },
  /// Every key of the prefix was cleared.
  Cleared,
  /// Every entry carrying `tag` written by `at` (epoch ms) was invalidated
  /// (`deleteByTag`): its stamp there, for every instance's
  /// `core::tags::TagStamps`.
  Tagged { tag: String, at: u64 },
  /// Every key starting with this encoded sub-prefix (a namespace's
  /// `users:`, ending with the `:` after its name) was cleared.
  PrefixCleared(String),
  /// The key's lock was let go of with nothing written (its load failed or
  /// was given up): the instances waiting for its holder ask again now,
  /// instead of waiting out the lease. No value changed.
  Released(String),
  /// Load slots of the fleet (`fleetMaxConcurrentLoads`) are free while
  /// instances wait for some: the waiting ones whose ticket is at most
  /// `up_to` (0: all of them) ask again. No value changed.
  SlotsFreed { up_to: u64 },
}

/// The origin of a change made outside herdcache, heard through the
/// server's client tracking (`tracking`): no instance's, whose origins are
/// never empty ([`Event::decode`]).
pub const OUTSIDE: &str = "";

/// A message on the events channel: a change, and the instance that made it
/// (so an instance can skip its own notices).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
  pub origin: String,
  pub change: Change,
}

impl Event {
  pub fn new(origin: &str, change: Change) -> Event {
    Event {
      origin: origin.to_string(),
      change,
    }
  }

  /// `f <origin> <key>`, `d <origin> <key>`, `e <origin> <at> <key>`,
  /// `c <origin>`, `t <origin> <at> <tag>`, `p <origin> <sub-prefix>`,
  /// `r <origin> <key>`, `s <origin> <up_to>`; origins have no spaces.
  pub fn encode(&self) -> String {
    let origin = &self.origin;
    match &self.change {
      Change::Filled(key) => format!("f {origin} {key}"),
      Change::Deleted(key) => format!("d {origin} {key}"),
      Change::Expired { key, at } => format!("e {origin} {at} {key}"),
      Change::Cleared => format!("c {origin}"),
      Change::Tagged { tag, at } => format!("t {origin} {at} {tag}"),
      Change::PrefixCleared(prefix) => format!("p {origin} {prefix}"),
      Change::Released(key) => format!("r {origin} {key}"),
      Change::SlotsFreed { up_to } => format!("{} {up_to}", slots_freed_head(origin)),
    }
  }

  /// `None` for a message this version does not know (ignored, not fatal).
  pub fn decode(message: &str) -> Option<Event> {
    let (kind, rest) = message.split_once(' ')?;
    let (origin, key) = match rest.split_once(' ') {
      Some((origin, key)) => (origin, Some(key)),
      None => (rest, None),
    };
    if origin.is_empty() {
      return None;
    }
    let change = match (kind, key) {
      ("f", Some(key)) if !key.is_empty() => Change::Filled(key.to_string()),
      ("d", Some(key)) if !key.is_empty() => Change::Deleted(key.to_string()),
      ("r", Some(key)) if !key.is_empty() => Change::Released(key.to_string()),
      ("e", Some(rest)) => {
        let (at, key) = stamped(rest)?;
        Change::Expired {
          key: key.to_string(),
          at,
        }
      }
      ("t", Some(rest)) => {
        let (at, tag) = stamped(rest)?;
        Change::Tagged {
          tag: tag.to_string(),
          at,
        }
      }
      ("c", None) => Change::Cleared,
      ("s", Some(up_to))
        if !up_to.is_empty() && up_to.len() <= 15 && up_to.bytes().all(|b| b.is_ascii_digit()) =>
      {
        Change::SlotsFreed {
          up_to: up_to.parse().ok()?,
        }
      }
      ("p", Some(prefix)) if !prefix.is_empty() => Change::PrefixCleared(prefix.to_string()),
      _ => return None,
    };
    Some(Event::new(origin, change))
  }

  /// The key the change is about (`None`: all of them, or, for a tag, the
  /// ones carrying it, or for a prefix clear all keys of its prefix, or for
  /// freed load slots none).
  pub fn key(&self) -> Option<&str> {
    match &self.change {
      Change::Filled(key)
      | Change::Deleted(key)
      | Change::Expired { key, .. }
      | Change::Released(key) => Some(key),
      Change::Cleared
      | Change::Tagged { .. }
      | Change::PrefixCleared(_)
      | Change::SlotsFreed { .. } => None,
    }
  }
}

/// The message of [`Change::SlotsFreed`] without its `up_to`, which the
/// load slots script appends (it knows the tickets).
pub fn slots_freed_head(origin: &str) -> String {
  format!("s {origin}")
}

/// `<at> <name>`: a stamp of digits, then a non-empty name.
fn stamped(rest: &str) -> Option<(u64, &str)> {
  let (at, name) = rest.split_once(' ')?;
  if name.is_empty() || at.is_empty() || !at.bytes().all(|b| b.is_ascii_digit()) {
    return None;
  }
  Some((at.parse().ok()?, name))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn events_round_trip_and_unknown_ones_are_ignored() {
    for change in [
      Change::Filled("a b:c".into()),
      Change::Deleted("k".into()),
      Change::Expired {
        key: "a b 7".into(),
        at: 1_733_000_000_123,
      },
      Change::Cleared,
      Change::Tagged {
        tag: "user:42 x".into(),
        at: 1_733_000_000_124,
      },
      Change::PrefixCleared("users:".into()),
      Change::PrefixCleared("a\\:b c:".into()),
      Change::Released("a b:c".into()),
      Change::SlotsFreed { up_to: 0 },
      Change::SlotsFreed { up_to: 42 },
    ] {
      let event = Event::new("p1", change);
      assert_eq!(Event::decode(&event.encode()), Some(event));
    }
    for junk in [
      "",
      "x",
      "f",
      "f ",
      "f p1",
      "f p1 ",
      "z p1 key",
      "c",
      "c  ",
      "d  key",
      "e p1",
      "e p1 12",
      "e p1 12 ",
      "e p1 x1 key",
      "e p1  key",
      "e p1 -1 key",
      "e p1 99999999999999999999999 key",
      "t p1",
      "t p1 12",
      "t p1 12 ",
      "t p1 x tag",
      "p p1",
      "p p1 ",
      "p  users:",
      "r p1",
      "r p1 ",
      "s",
      "s p1",
      "s p1 x",
      "s p1 1 2",
    ] {
      assert_eq!(Event::decode(junk), None, "{junk:?}");
    }
    assert_eq!(Event::decode("f p1 k").unwrap().key(), Some("k"));
    assert_eq!(Event::decode("c p1").unwrap().key(), None);
    assert_eq!(Event::decode("r p1 k 1").unwrap().key(), Some("k 1"));
    assert_eq!(Event::decode("e p1 5 k 1").unwrap().key(), Some("k 1"));
    assert_eq!(
      Event::decode("p p1 users:").map(|e| e.change),
      Some(Change::PrefixCleared("users:".into()))
    );
    assert_eq!(Event::decode("p p1 users:").unwrap().key(), None);
  }
}
