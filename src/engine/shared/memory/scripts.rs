//! The effects of the Redis store's Lua scripts (`core::fleet::scripts`),
//! each one call on the [`Keyspace`], run whole as a script is. Their rules
//! are the scripts' rules; the header judgement is the reader's
//! (`values::stored_header`), which the scripts copy in Lua.

use super::server::{Keyspace, Stored};
use crate::core::envelope::{
  tombstone, Envelope, Meta, VERSION_TAG, VERSION_TAG_FORMATTED, VERSION_TAG_TAGGED,
};
use crate::core::fleet::RedisKeys;
use crate::engine::shared::values::{split_header, stored_header};
use crate::engine::shared::{Deletion, LockAttempt};

/// Whether `held` is a lock token (`TOKEN_PATTERN`: a UUID's 8-4-4-4-12
/// hex digits, nothing else).
pub fn is_token(held: &[u8]) -> bool {
  let groups: Vec<&[u8]> = held.split(|&b| b == b'-').collect();
  groups.len() == 5
    && groups
      .iter()
      .zip([8, 4, 4, 4, 12])
      .all(|(g, n)| g.len() == n && g.iter().all(u8::is_ascii_hexdigit))
}

/// The stored value's stamp, when its header is valid.
fn stamp_of(keyspace: &mut Keyspace, name: &str) -> Option<u64> {
  stored_header_of(keyspace, name).map(|meta| meta.stamp)
}

/// Whether `name` holds exactly `token` (another type does not).
fn holds(keyspace: &mut Keyspace, name: &str, token: &str) -> bool {
  keyspace.text(name) == Some(token.as_bytes())
}

/// `LOCK_SCRIPT`.
pub fn lock(keyspace: &mut Keyspace, lock: &str, token: &str, ttl: u64) -> LockAttempt {
  if holds(keyspace, lock, token) {
    keyspace.pexpire(lock, ttl);
    return LockAttempt::Won;
  }
  let a_token = keyspace.text(lock).is_some_and(is_token);
  let lease = keyspace.pttl(lock);
  if a_token && lease > 0 {
    return LockAttempt::Held(lease as u64);
  }
  let token = Stored::Text(token.as_bytes().to_vec());
  keyspace.set(lock, token, Some(ttl));
  LockAttempt::Won
}

/// `REFRESH_LOCK_SCRIPT`: the back-off marker first.
pub fn lock_refresh(
  keyspace: &mut Keyspace,
  keys: &RedisKeys,
  token: &str,
  ttl: u64,
) -> LockAttempt {
  let failures = keyspace
    .text(&keys.backoff)
    .filter(|f| !f.is_empty() && f.len() <= 9 && f.iter().all(u8::is_ascii_digit))
    .and_then(|f| std::str::from_utf8(f).ok()?.parse::<u32>().ok());
  let left = keyspace.pttl(&keys.backoff);
  match failures {
    Some(failures) if left > 0 => LockAttempt::BackingOff {
      failures,
      ms: left as u64,
    },
    _ => lock(keyspace, &keys.lock, token, ttl),
  }
}

/// `FAIL_REFRESH_SCRIPT`: true if the lock was released.
pub fn fail_refresh(
  keyspace: &mut Keyspace,
  keys: &RedisKeys,
  token: Option<&str>,
  failures: u32,
  ms: u64,
) -> bool {
  let marker = Stored::Text(failures.to_string().into_bytes());
  keyspace.set(&keys.backoff, marker, Some(ms));
  release(keyspace, &keys.lock, token.unwrap_or(""))
}

/// `RELEASE_SCRIPT`: true if released.
pub fn release(keyspace: &mut Keyspace, lock: &str, token: &str) -> bool {
  !token.is_empty() && holds(keyspace, lock, token) && keyspace.del(lock)
}

/// `EXTEND_SCRIPT`: true if extended.
pub fn extend(keyspace: &mut Keyspace, lock: &str, token: &str, ttl: u64) -> bool {
  holds(keyspace, lock, token) && keyspace.pexpire(lock, ttl)
}

/// `WRITE_SCRIPT` without its announcement: true if written.
pub fn write(
  keyspace: &mut Keyspace,
  keys: &RedisKeys,
  envelope: &Envelope,
  px: u64,
  token: Option<&str>,
  corrupt_stamp: Option<u64>,
) -> bool {
  let newer = stamp_of(keyspace, &keys.value)
    .is_some_and(|stamp| stamp > envelope.meta.stamp && Some(stamp) != corrupt_stamp)
    || keyspace
      .number(&keys.expired)
      .is_some_and(|at| at > envelope.meta.stamp);
  if !newer {
    let text = Stored::Text(envelope.encode());
    keyspace.set(&keys.value, text, Some(px));
    keyspace.del(&keys.backoff);
  }
  release(keyspace, &keys.lock, token.unwrap_or(""));
  !newer
}

/// `SET_SCRIPT` without its announcement: the stamp written.
pub fn write_newest(
  keyspace: &mut Keyspace,
  keys: &RedisKeys,
  envelope: &Envelope,
  px: u64,
) -> u64 {
  let mut envelope = envelope.clone();
  if let Some(theirs) = stamp_of(keyspace, &keys.value) {
    if theirs >= envelope.meta.stamp {
      envelope.meta.stamp = theirs + 1;
    }
  }
  let text = Stored::Text(envelope.encode());
  keyspace.set(&keys.value, text, Some(px));
  keyspace.del(&keys.backoff);
  envelope.meta.stamp
}

/// `DELETE_SCRIPT` (live) or `DELETE_NOT_NEWER_SCRIPT` (replayed) without
/// the announcement: a tombstone in the value's place. Live: true if a
/// value (not a tombstone) was there. Replayed: true if it landed, false
/// if a newer value was kept.
pub fn delete(keyspace: &mut Keyspace, value: &str, deletion: Deletion) -> bool {
  let stored = stored_header_of(keyspace, value);
  let mut stamp = deletion.at;
  let answer = match (deletion.replayed, stored) {
    (true, Some(meta)) if meta.stamp > deletion.at => return false,
    (true, _) => true,
    (false, stored) => {
      if let Some(meta) = stored.filter(|meta| meta.stamp >= stamp) {
        stamp = meta.stamp + 1;
      }
      let tombstone = stored.is_some_and(|meta| meta.is_tombstone());
      keyspace.get(value).is_some() && !tombstone
    }
  };
  let text = Stored::Text(tombstone(stamp).into_bytes());
  keyspace.set(value, text, Some(deletion.px));
  answer
}

/// The stored value's header, when it is a valid one.
fn stored_header_of(keyspace: &mut Keyspace, name: &str) -> Option<Meta> {
  stored_header(keyspace.text(name)?)
}

/// `EXPIRE_SCRIPT` without its announcement: true if expired. The value
/// and its TTL are kept; an `hc1` header is rewritten as `hc2`. Its moment
/// is left in the key's expire marker for `guard` ms (raised, never
/// lowered).
pub fn expire(keyspace: &mut Keyspace, keys: &RedisKeys, at: u64, guard: u64) -> bool {
  if keyspace
    .number(&keys.expired)
    .is_none_or(|marked| marked < at)
  {
    let marker = Stored::Text(at.to_string().into_bytes());
    keyspace.set(&keys.expired, marker, Some(guard.max(1)));
  }
  let value = keys.value.as_str();
  let Some(stored) = keyspace.text(value) else {
    return false;
  };
  let Some((header, body)) = split_header(stored) else {
    return false;
  };
  let Some(meta) = stored_header(stored).and_then(|meta| meta.expired_at(at)) else {
    return false;
  };
  let text = restamped(header, body, &meta);
  keyspace.replace_keeping_ttl(value, Stored::Text(text));
  true
}

/// A stored entry (`header`, then `body`: its tags, format line and value,
/// kept as they are) with the deadlines and stamp of `meta`, in the
/// version it had (an `hc1` one becomes `hc2`).
fn restamped(header: &str, body: &[u8], meta: &Meta) -> Vec<u8> {
  let version = match header.split(' ').next() {
    Some(tag @ (VERSION_TAG_TAGGED | VERSION_TAG_FORMATTED)) => tag,
    _ => VERSION_TAG,
  };
  let refresh = meta
    .refresh_at
    .unwrap_or(meta.fresh_until)
    .min(meta.fresh_until);
  let kind = if meta.negative { 'n' } else { 'v' };
  let mut text = format!(
    "{version} {} {} {} {} {refresh} {kind}\n",
    meta.fresh_until, meta.hard_until, meta.compute_ms, meta.stamp
  )
  .into_bytes();
  text.extend_from_slice(body);
  text
}

/// `KEEP_SCRIPT` without its announcement: true if the stored value was
/// the copy `kept` describes (its stamp and deadlines) and now has
/// `meta`'s.
pub fn keep(
  keyspace: &mut Keyspace,
  keys: &RedisKeys,
  kept: &Meta,
  meta: &Meta,
  px: u64,
  token: Option<&str>,
) -> bool {
  let expired_since = keyspace
    .number(&keys.expired)
    .is_some_and(|at| at > meta.stamp);
  let value = keys.value.as_str();
  let kept = match keyspace.text(value) {
    Some(stored) if !expired_since => split_header(stored).and_then(|(header, body)| {
      let found = Envelope::decode_header(header).ok()?;
      let same = !found.is_tombstone()
        && (found.stamp, found.fresh_until, found.hard_until)
          == (kept.stamp, kept.fresh_until, kept.hard_until);
      let meta = Meta {
        negative: found.negative,
        ..*meta
      };
      same.then(|| restamped(header, body, &meta))
    }),
    _ => None,
  };
  let landed = kept.is_some();
  if let Some(text) = kept {
    keyspace.set(value, Stored::Text(text), Some(px));
    keyspace.del(&keys.backoff);
  }
  release(keyspace, &keys.lock, token.unwrap_or(""));
  landed
}

/// `TAG_SCRIPT` without its announcement: true if raised.
pub fn invalidate_tag(keyspace: &mut Keyspace, name: &str, at: u64, px: u64) -> bool {
  let current = keyspace
    .text(name)
    .filter(|s| !s.is_empty() && s.iter().all(u8::is_ascii_digit))
    .and_then(|s| std::str::from_utf8(s).ok()?.parse::<u64>().ok());
  if current.is_some_and(|current| current >= at) {
    return false;
  }
  let px = u64::try_from(keyspace.pttl(name)).map_or(px, |ttl| ttl.max(px));
  keyspace.set(name, Stored::Text(at.to_string().into_bytes()), Some(px));
  true
}

/// A clear's sweep of the names starting with `start`: all of them, or
/// (replayed) all but valid envelopes newer than the clear's stamp
/// (`CLEAR_NOT_NEWER_SCRIPT`). How many were removed.
pub fn sweep(keyspace: &mut Keyspace, start: &str, not_newer_than: Option<u64>) -> u64 {
  let mut removed = 0;
  for name in keyspace.names_starting(start) {
    let keep =
      not_newer_than.is_some_and(|t| stamp_of(keyspace, &name).is_some_and(|theirs| theirs > t));
    if !keep && keyspace.del(&name) {
      removed += 1;
    }
  }
  removed
}
