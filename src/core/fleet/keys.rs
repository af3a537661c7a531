//! The Redis names herdcache uses for one prefix: a key's value, lock and
//! back-off marker,
//! and the events channel.

/// The Redis names of one cache key. Value and lock share a Redis Cluster
/// hash tag (`{…}`), so scripts that touch both stay on one slot; the lock
/// name is the value name plus a suffix, so even a key containing `}` keeps
/// the two on the same tag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisKeys {
  pub value: String,
  pub lock: String,
  /// The fleet's refresh back-off marker (`engine::fleet`): the failures
  /// in a row, expiring when the next refresh may run.
  pub backoff: String,
}

impl RedisKeys {
  pub fn new(prefix: &str, key: &str) -> RedisKeys {
    let value = format!("{{{prefix}{key}}}");
    let lock = format!("{value}:lock");
    let backoff = format!("{value}:backoff");
    RedisKeys {
      value,
      lock,
      backoff,
    }
  }
}

/// The channel that carries fill notices and invalidations for one prefix.
pub fn events_channel(prefix: &str) -> String {
  format!("herdcache:events:{prefix}")
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
      assert_eq!(hash_tag(&keys.value), hash_tag(&keys.backoff), "{key}");
      assert_ne!(keys.value, keys.lock);
      assert_ne!(keys.backoff, keys.lock);
    }
    assert_eq!(RedisKeys::new("app:", "user:42").value, "{app:user:42}");
    assert_eq!(RedisKeys::new("app:", "user:42").lock, "{app:user:42}:lock");
    assert_eq!(
      RedisKeys::new("app:", "user:42").backoff,
      "{app:user:42}:backoff"
    );
  }
}
