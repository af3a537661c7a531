//! The fleet lock's pure parts: the Redis key names, the Lua scripts, and
//! the lease arithmetic. The lock is an *efficiency* lock (one recompute per
//! expiry across a fleet, most of the time), never a correctness guarantee:
//! it has no fencing token, so a holder paused past its lease can still write.
//! What such a late writer cannot do is overwrite a newer value: writes are
//! conditional on the envelope's stamp (`WRITE_SCRIPT`).

/// The Redis names of one cache key. Value and lock share a Redis Cluster
/// hash tag (`{…}`), so scripts that touch both stay on one slot; the lock
/// name is the value name plus a suffix, so even a key containing `}` keeps
/// the two on the same tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisKeys {
  pub value: String,
  pub lock: String,
}

impl RedisKeys {
  pub fn new(prefix: &str, key: &str) -> RedisKeys {
    let value = format!("{{{prefix}{key}}}");
    let lock = format!("{value}:lock");
    RedisKeys { value, lock }
  }
}

/// The channel that carries fill notices and invalidations for one prefix.
pub fn events_channel(prefix: &str) -> String {
  format!("herdcache:events:{prefix}")
}

/// What happened to a key, on the events channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
  /// A value was written for the key (a load finished, or `set`).
  Filled(String),
  /// The key was deleted.
  Deleted(String),
  /// Every key of the prefix was cleared.
  Cleared,
}

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

  /// `f <origin> <key>`, `d <origin> <key>`, `c <origin>`; origins have no spaces.
  pub fn encode(&self) -> String {
    let origin = &self.origin;
    match &self.change {
      Change::Filled(key) => format!("f {origin} {key}"),
      Change::Deleted(key) => format!("d {origin} {key}"),
      Change::Cleared => format!("c {origin}"),
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
      ("c", None) => Change::Cleared,
      _ => return None,
    };
    Some(Event::new(origin, change))
  }

  /// The key the change is about (`None`: all of them).
  pub fn key(&self) -> Option<&str> {
    match &self.change {
      Change::Filled(key) | Change::Deleted(key) => Some(key),
      Change::Cleared => None,
    }
  }
}

/// Deletes the lock only if it still holds our token: a holder whose lease
/// ran out must not delete the lock another instance took since.
/// KEYS[1] lock; ARGV[1] token. Returns 1 if released.
pub const RELEASE_SCRIPT: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// Extends the lease only while the lock still holds our token.
/// KEYS[1] lock; ARGV[1] token, ARGV[2] lease ms. Returns 1 if extended.
pub const EXTEND_SCRIPT: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// Writes an envelope unless the stored one comes from a load that started
/// later (its stamp is greater), announces the fill, and releases our lock —
/// one round trip, and the lock is only released once the value is readable.
/// A stored value that is not an envelope (foreign, corrupt, another Redis
/// type) is overwritten.
/// KEYS[1] value, KEYS[2] lock; ARGV[1] envelope, ARGV[2] hard TTL ms,
/// ARGV[3] stamp, ARGV[4] token ('' when not holding the lock),
/// ARGV[5] channel, ARGV[6] fill message.
/// Returns 1 if written, 0 if a newer value was kept.
pub const WRITE_SCRIPT: &str = r#"
local written = 0
local stored = redis.pcall('GET', KEYS[1])
local stamp = type(stored) == 'string' and string.match(stored, '^hc1 %d+ %d+ %d+ (%d+) [vn]\n')
if not stamp or tonumber(stamp) <= tonumber(ARGV[3]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[5], ARGV[6])
  written = 1
end
if ARGV[4] ~= '' and redis.call('GET', KEYS[2]) == ARGV[4] then
  redis.call('DEL', KEYS[2])
end
return written
"#;

/// How a lock is held while a load runs: the lease is short, so a crashed
/// holder frees the key quickly, and is extended while the load runs, so a
/// slow load keeps it (up to `hardTimeout`, which bounds every load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
  /// The lock's TTL, ms, as set and as extended.
  pub ttl: u64,
  /// How often, ms, a running load extends it.
  pub extend_every: u64,
}

impl Lease {
  pub fn new(lock_ttl: u64) -> Lease {
    let ttl = lock_ttl.max(3);
    Lease {
      ttl,
      extend_every: (ttl / 3).max(1),
    }
  }
}

/// What a caller that lost the lock on a cold miss does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoserStep {
  /// Wait up to this many ms for the winner's fill notice.
  Wait(u64),
  /// The wait is over (lease gone, or the load's own deadline): load locally.
  LoadLocally,
}

/// `lock_pttl`: the lock's remaining lease (ms) as Redis reports it, `None`
/// if the lock is gone; `waited`: how long this caller has waited so far;
/// `hard_timeout`: the bound of any load. A winner that keeps extending its
/// lease is waited for up to `hard_timeout`; a lease that ran out means the
/// winner died.
pub fn loser_step(lock_pttl: Option<u64>, waited: u64, hard_timeout: u64) -> LoserStep {
  let left = hard_timeout.saturating_sub(waited);
  match lock_pttl {
    Some(pttl) if pttl > 0 && left > 0 => LoserStep::Wait(pttl.min(left)),
    _ => LoserStep::LoadLocally,
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  /// Redis Cluster's hash tag: the part between the first `{` and the next `}`.
  fn hash_tag(name: &str) -> &str {
    match name.find('{') {
      Some(open) => match name[open + 1..].find('}') {
        Some(len) if len > 0 => &name[open + 1..open + 1 + len],
        _ => name,
      },
      None => name,
    }
  }

  #[test]
  fn value_and_lock_share_a_hash_tag() {
    for key in ["user:42", "a}b", "{x}", "}", "tenant\\:1:feed"] {
      let keys = RedisKeys::new("app:", key);
      assert_eq!(hash_tag(&keys.value), hash_tag(&keys.lock), "{key}");
      assert_ne!(keys.value, keys.lock);
    }
    assert_eq!(RedisKeys::new("app:", "user:42").value, "{app:user:42}");
    assert_eq!(RedisKeys::new("app:", "user:42").lock, "{app:user:42}:lock");
  }

  #[test]
  fn events_round_trip_and_unknown_ones_are_ignored() {
    for change in [
      Change::Filled("a b:c".into()),
      Change::Deleted("k".into()),
      Change::Cleared,
    ] {
      let event = Event::new("p1", change);
      assert_eq!(Event::decode(&event.encode()), Some(event));
    }
    for junk in [
      "", "x", "f", "f ", "f p1", "f p1 ", "z p1 key", "c", "c  ", "d  key",
    ] {
      assert_eq!(Event::decode(junk), None, "{junk:?}");
    }
    assert_eq!(Event::decode("f p1 k").unwrap().key(), Some("k"));
    assert_eq!(Event::decode("c p1").unwrap().key(), None);
  }

  #[test]
  fn the_write_script_reads_the_envelope_stamp() {
    // The pattern must match what `Envelope::encode` writes.
    use crate::core::envelope::{Envelope, Meta};
    let text = Envelope {
      meta: Meta {
        fresh_until: 1,
        hard_until: 2,
        compute_ms: 3,
        stamp: 1_700_000_000_123,
        negative: false,
      },
      json: "{}".into(),
    }
    .encode();
    assert!(text.starts_with("hc1 1 2 3 1700000000123 v\n"));
    assert!(WRITE_SCRIPT.contains(r"'^hc1 %d+ %d+ %d+ (%d+) [vn]\n'"));
  }

  #[test]
  fn leases_are_extended_three_times_per_ttl() {
    assert_eq!(
      Lease::new(6_000),
      Lease {
        ttl: 6_000,
        extend_every: 2_000
      }
    );
    assert_eq!(Lease::new(0).ttl, 3);
  }

  #[test]
  fn losers_wait_for_a_live_lease_then_load_locally() {
    assert_eq!(loser_step(Some(2_000), 0, 30_000), LoserStep::Wait(2_000));
    // Never past the load's own deadline.
    assert_eq!(
      loser_step(Some(2_000), 29_500, 30_000),
      LoserStep::Wait(500)
    );
    assert_eq!(
      loser_step(Some(2_000), 30_000, 30_000),
      LoserStep::LoadLocally
    );
    // The lease is gone: the winner died (or just finished: the caller reads first).
    assert_eq!(loser_step(None, 100, 30_000), LoserStep::LoadLocally);
    assert_eq!(loser_step(Some(0), 100, 30_000), LoserStep::LoadLocally);
  }
}
