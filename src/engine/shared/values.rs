//! How a store reads what it holds, declared once for every store: the
//! bytes under a key's value name as a [`Read`], a tag's stamp, and the
//! header judgement the conditional writes make (the Lua scripts of
//! `core::fleet::scripts` make the same one, `envelope_header`).

use super::Read;
use crate::core::envelope::{DecodeError, Envelope, Meta, MAX_DIGITS};
use crate::core::fleet::Change;

/// The bytes stored under a key's value name (`None`: nothing there), as
/// the fleet reads them. A tombstone (a `delete`'s) is nothing there. A
/// header that does not parse, or a value that is not UTF-8 JSON, is a
/// foreign or corrupt value, not a store failure.
pub fn read_bytes(bytes: Option<&[u8]>) -> Read {
  let Some(bytes) = bytes else {
    return Read::Missing;
  };
  let Some((header, body)) = split_header(bytes) else {
    return Read::Corrupt(DecodeError::NotAnEnvelope);
  };
  let meta = match Envelope::decode_header(header) {
    Ok(meta) if meta.is_tombstone() => return Read::Missing,
    Ok(meta) => meta,
    Err(e) => return Read::Corrupt(e),
  };
  let Ok(body) = std::str::from_utf8(body) else {
    return Read::Corrupt(DecodeError::BadValue { stamp: meta.stamp });
  };
  // A valid header over a bad line of tags is a bad value: the write,
  // which reads the header only, replaces it by its stamp.
  let Ok((tags, json)) = Envelope::decode_tags(header, body) else {
    return Read::Corrupt(DecodeError::BadValue { stamp: meta.stamp });
  };
  match is_json(json) {
    true => Read::Found(Envelope {
      meta,
      json: json.to_string(),
      tags,
    }),
    false => Read::Corrupt(DecodeError::BadValue { stamp: meta.stamp }),
  }
}

/// The stored bytes' header, when it is a valid one: what a conditional
/// write judges a stored value by (its body is the reader's to judge).
pub fn stored_header(bytes: &[u8]) -> Option<Meta> {
  let (header, _) = split_header(bytes)?;
  Envelope::decode_header(header).ok()
}

/// The first line (UTF-8) and the rest.
pub fn split_header(bytes: &[u8]) -> Option<(&str, &[u8])> {
  let newline = bytes.iter().position(|&b| b == b'\n')?;
  let header = std::str::from_utf8(&bytes[..newline]).ok()?;
  Some((header, &bytes[newline + 1..]))
}

/// A tag's stored stamp: digits (`TAG_SCRIPT`), else none (0).
pub fn parse_stamp(bytes: Option<&[u8]>) -> u64 {
  bytes
    .filter(|b| !b.is_empty() && b.len() <= MAX_DIGITS && b.iter().all(u8::is_ascii_digit))
    .and_then(|b| std::str::from_utf8(b).ok()?.parse().ok())
    .unwrap_or(0)
}

/// Whether `text` is one JSON value: an envelope whose value line is not
/// would fail every reader's `JSON.parse`, so it is treated as corrupt here.
/// Values nested past serde's recursion limit (128) are left to the JS
/// reader's `JSON.parse`, which has none: herdcache writes such values too.
fn is_json(text: &str) -> bool {
  let mut values = serde_json::Deserializer::from_str(text).into_iter::<serde::de::IgnoredAny>();
  match values.next() {
    Some(Ok(_)) => values.next().is_none(),
    Some(Err(e)) => e.to_string().starts_with("recursion limit exceeded"),
    None => false,
  }
}

/// What a sweep of the keys starting with `within` announces: a clear, or
/// (a namespace's) a clear of that prefix.
pub fn cleared(within: &str) -> Change {
  match within {
    "" => Change::Cleared,
    prefix => Change::PrefixCleared(prefix.to_string()),
  }
}
