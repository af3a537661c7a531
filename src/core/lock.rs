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

/// What a lock set by herdcache holds (a UUID v4 token, as a Lua pattern):
/// anything else under a lock key, or a lock without a TTL, was set by no
/// instance and is garbage (see [`LOCK_SCRIPT`]).
pub const TOKEN_PATTERN: &str =
  "^%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$";

/// Takes the lock if it is free: `SET lock token PX ttl` as `SET … NX` does,
/// and in the same round trip tells a loser how long the holder's lease has
/// left. A lock no herdcache instance can have set — no TTL (every lock has
/// one), a value that is not a token, another Redis type — is garbage: it is
/// replaced, so it can neither block a key forever nor make losers spin.
/// KEYS[1] lock; ARGV[1] token, ARGV[2] lease ms, ARGV[3] the token pattern.
/// Returns 0 if this caller now holds the lock, else the holder's lease, ms.
pub const LOCK_SCRIPT: &str = r#"
local held = redis.pcall('GET', KEYS[1])
if held then
  local lease = redis.call('PTTL', KEYS[1])
  if lease > 0 and type(held) == 'string' and string.match(held, ARGV[3]) then
    return lease
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 0
"#;

/// Deletes the lock only if it still holds our token: a holder whose lease
/// ran out must not delete the lock another instance took since. (`pcall`:
/// another Redis type under the lock key is not ours, not an error.)
/// KEYS[1] lock; ARGV[1] token. Returns 1 if released.
pub const RELEASE_SCRIPT: &str = r#"
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#;

/// Extends the lease only while the lock still holds our token.
/// KEYS[1] lock; ARGV[1] token, ARGV[2] lease ms. Returns 1 if extended.
pub const EXTEND_SCRIPT: &str = r#"
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"#;

/// Writes an envelope unless the stored one comes from a load that started
/// later (its stamp is greater), announces the fill, and releases our lock —
/// one round trip, and the lock is only released once the value is readable.
/// The header rules are `Envelope::decode_header`'s (numbers of at most
/// `envelope::MAX_DIGITS` digits, so Lua's doubles compare stamps exactly
/// as the reader reads them; hardUntil >= freshUntil), so a value the
/// reader rejects for its header is overwritten here too. A valid header
/// over a value the reader rejected (not UTF-8 JSON) is replaced when the
/// writer names its stamp (ARGV[7]): the reader, not Lua, judges JSON. A
/// foreign or other-type value is overwritten.
/// KEYS[1] value, KEYS[2] lock; ARGV[1] envelope, ARGV[2] hard TTL ms,
/// ARGV[3] stamp, ARGV[4] token ('' when not holding the lock),
/// ARGV[5] channel, ARGV[6] fill message, ARGV[7] the stamp of a corrupt
/// value to replace (''), ARGV[8] the digit limit.
/// Returns 1 if written, 0 if a newer value was kept.
pub const WRITE_SCRIPT: &str = r#"
local newer = false
local stored = redis.pcall('GET', KEYS[1])
if type(stored) == 'string' then
  local fresh, hard, compute, stamp = string.match(stored, '^hc1 (%d+) (%d+) (%d+) (%d+) [vn]\n')
  local digits = tonumber(ARGV[8])
  newer = stamp ~= nil and #fresh <= digits and #hard <= digits and #compute <= digits
    and #stamp <= digits and tonumber(hard) >= tonumber(fresh)
    and tonumber(stamp) > tonumber(ARGV[3]) and tonumber(stamp) ~= tonumber(ARGV[7])
end
if not newer then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PUBLISH', ARGV[5], ARGV[6])
end
if ARGV[4] ~= '' and redis.pcall('GET', KEYS[2]) == ARGV[4] then
  redis.call('DEL', KEYS[2])
end
return newer and 0 or 1
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
  /// The load's own deadline has come: load locally.
  LoadLocally,
}

/// `lease`: the holder's remaining lease (ms, > 0, as the lock script
/// reports it); `waited`: how long this caller has waited so far;
/// `hard_timeout`: the bound of any load. A winner that keeps extending its
/// lease is waited for up to `hard_timeout`; a lease that runs out means the
/// winner died, and the next attempt takes the lock. Every step waits, so a
/// loser never spins.
pub fn loser_step(lease: u64, waited: u64, hard_timeout: u64) -> LoserStep {
  match hard_timeout.saturating_sub(waited) {
    0 => LoserStep::LoadLocally,
    left => LoserStep::Wait(lease.clamp(1, left)),
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
    assert!(WRITE_SCRIPT.contains(r"'^hc1 (%d+) (%d+) (%d+) (%d+) [vn]\n'"));
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
    assert_eq!(loser_step(2_000, 0, 30_000), LoserStep::Wait(2_000));
    // Never past the load's own deadline.
    assert_eq!(loser_step(2_000, 29_500, 30_000), LoserStep::Wait(500));
    assert_eq!(loser_step(2_000, 30_000, 30_000), LoserStep::LoadLocally);
    // Every step before the deadline waits at least 1 ms: no spinning.
    assert_eq!(loser_step(0, 100, 30_000), LoserStep::Wait(1));
  }

  #[test]
  fn the_token_pattern_matches_lock_tokens_only() {
    // The Lua pattern, translated: 8-4-4-4-12 hex digits, nothing else.
    let lua_to_shape = |text: &str| -> bool {
      let groups: Vec<&str> = text.split('-').collect();
      groups.len() == 5
        && groups
          .iter()
          .zip([8, 4, 4, 4, 12])
          .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    let token = uuid::Uuid::new_v4().to_string();
    assert!(lua_to_shape(&token), "{token}");
    assert_eq!(
      TOKEN_PATTERN.matches("%x").count(),
      32,
      "one %x per hex digit of a UUID"
    );
    assert!(TOKEN_PATTERN.starts_with('^') && TOKEN_PATTERN.ends_with('$'));
  }
}
