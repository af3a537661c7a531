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
  /// The last `expire`'s moment (epoch ms), kept as long as a load begun
  /// before it may still write: no such load's value is written after it.
  pub expired: String,
}

impl RedisKeys {
  pub fn new(prefix: &str, key: &str) -> RedisKeys {
    let value = format!("{{{prefix}{key}}}");
    let lock = format!("{value}:lock");
    let backoff = format!("{value}:backoff");
    let expired = format!("{value}:expired");
    RedisKeys {
      value,
      lock,
      backoff,
      expired,
    }
  }

  /// The cache key these names were made from, with `prefix` (theirs).
  pub fn key(&self, prefix: &str) -> &str {
    let start = (1 + prefix.len()).min(self.value.len());
    let end = self.value.len().saturating_sub(1).max(start);
    &self.value[start..end]
  }
}

/// The Redis name of `tag`'s invalidation stamp (`deleteByTag`):
/// `<prefix>tag:{<tag>}`, hash-tagged by the tag, so tags spread over a
/// cluster's slots. It does not start with `{` as every key's names do
/// (`{<prefix>…`): no key's name is ever a tag's, and no `clear`, a
/// namespace's or the whole prefix's (SCAN `{<prefix>…*`), removes a stamp,
/// which would make the values it invalidated count again.
pub fn tag_stamp(prefix: &str, tag: &str) -> String {
  format!("{prefix}tag:{{{tag}}}")
}

/// The Redis name of the fleet's load slots (`fleetMaxConcurrentLoads`,
/// `LOAD_SLOTS_SCRIPT`): `<prefix>loads:{loads}`, one hash on one slot.
/// Like a tag's stamp it does not start with `{`, so no key's name is ever
/// it and no `clear` removes it.
pub fn load_slots(prefix: &str) -> String {
  format!("{prefix}loads:{{loads}}")
}

/// The channel that carries fill notices and invalidations for one prefix.
pub fn events_channel(prefix: &str) -> String {
  format!("herdcache:events:{prefix}")
}

/// How many Redis Cluster hash slots there are.
pub const SLOTS: u16 = 16_384;

/// The Redis Cluster hash slot of `name`: CRC16 (XMODEM) of its hash tag
/// (the text between the first `{` and the next `}`, when not empty), else
/// of the whole name, modulo [`SLOTS`].
pub fn slot(name: &[u8]) -> u16 {
  let tagged = name.iter().position(|&b| b == b'{').and_then(|open| {
    let rest = &name[open + 1..];
    match rest.iter().position(|&b| b == b'}') {
      Some(len) if len > 0 => Some(&rest[..len]),
      _ => None,
    }
  });
  crc16(tagged.unwrap_or(name)) % SLOTS
}

fn crc16(bytes: &[u8]) -> u16 {
  let mut crc: u16 = 0;
  for &byte in bytes {
    crc ^= u16::from(byte) << 8;
    for _ in 0..8 {
      crc = if crc & 0x8000 != 0 {
        (crc << 1) ^ 0x1021
      } else {
        crc << 1
      };
    }
  }
  crc
}

/// The sharded events channels of one prefix on a Redis Cluster: `count`
/// channels, the `i`-th hash-tagged onto a slot in the `i`-th of `count`
/// equal slot ranges, so the channels spread over the primaries as the
/// slots do. A key's changes go on the channel of its slot's range
/// ([`channel_of`]).
pub fn sharded_channels(prefix: &str, count: u16) -> Vec<String> {
  let base = events_channel(prefix);
  (0..count)
    .map(|i| {
      let range = u32::from(SLOTS) / u32::from(count);
      (0u32..)
        .map(|n| format!("{base}:{{{n}}}"))
        .find(|name| u32::from(slot(name.as_bytes())) / range == u32::from(i))
        .expect("some tag lands in every range")
    })
    .collect()
}

/// Which of `count` [`sharded_channels`] carries the changes of the key
/// whose value name is `value`.
pub fn channel_of(value: &str, count: u16) -> usize {
  let range = u32::from(SLOTS) / u32::from(count);
  (u32::from(slot(value.as_bytes())) / range) as usize
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

  /// `CLUSTER KEYSLOT`'s answers, asked of redis-server 7.0.
  #[test]
  fn slots_are_redis_clusters() {
    assert_eq!(slot(b"foo"), 12182);
    assert_eq!(slot(b"hello"), 866);
    assert_eq!(slot(b"{user1000}.following"), slot(b"user1000"));
    assert_eq!(slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
    assert_eq!(slot(b"somekey"), 11058);
    assert_eq!(slot(b"{}x"), crc16(b"{}x") % SLOTS);
    assert_eq!(slot(b""), 0);
  }

  #[test]
  fn a_keys_names_give_back_the_key() {
    for (prefix, key) in [("app:", "user:1"), ("", "k"), ("é:", "}{ü"), ("p:", "")] {
      assert_eq!(RedisKeys::new(prefix, key).key(prefix), key);
    }
  }

  #[test]
  fn sharded_channels_cover_the_slot_ranges_in_order() {
    let channels = sharded_channels("app:", 16);
    assert_eq!(channels.len(), 16);
    for (i, name) in channels.iter().enumerate() {
      assert!(name.starts_with("herdcache:events:app::{"), "{name}");
      assert_eq!(channel_of(name, 16), i, "{name}");
    }
    let value = RedisKeys::new("app:", "user:42").value;
    assert_eq!(
      channel_of(&value, 16),
      usize::from(slot(value.as_bytes()) / 1024)
    );
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
