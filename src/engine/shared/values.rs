//! How a store reads what it holds, declared once for every store: the
//! bytes under a key's value name as a [`Read`], a tag's stamp, and the
//! header judgement the conditional writes make (the Lua scripts of
//! `core::fleet::scripts` make the same one, `envelope_header`).

use super::Read;
use crate::core::body::{decompressed, Body, Formatted, JSON_FORMAT};
use crate::core::envelope::{DecodeError, Envelope, Meta, MAX_DIGITS};
use crate::core::fleet::Change;
use crate::core::options::MAX_VALUE_BYTES;

/// The bytes stored under a key's value name (`None`: nothing there), as
/// the fleet reads them. A tombstone (a `delete`'s) is nothing there. A
/// header that does not parse, or a value that is not what its header says
/// (not UTF-8 JSON, a layout its bytes do not fit), is a foreign or corrupt
/// value, not a store failure.
pub fn read_bytes(bytes: Option<&[u8]>) -> Read {
  let Some(bytes) = bytes else {
    return Read::Missing;
  };
  let Some((header, rest)) = split_header(bytes) else {
    return Read::Corrupt(DecodeError::NotAnEnvelope);
  };
  let meta = match Envelope::decode_header(header) {
    Ok(meta) if meta.is_tombstone() => return Read::Missing,
    Ok(meta) => meta,
    Err(e) => return Read::Corrupt(e),
  };
  // A valid header over a bad rest (tags, format line, value) is a bad
  // value: the write, which reads the header only, replaces it by its stamp.
  let body = Envelope::decode_body(header, rest)
    .ok()
    .and_then(|(tags, etag, body)| Some((tags, etag, readable(body)?)));
  match body {
    Some((tags, etag, body)) => Read::Found(Envelope {
      meta,
      body,
      tags,
      etag,
    }),
    None => Read::Corrupt(DecodeError::BadValue { stamp: meta.stamp }),
  }
}

/// The value as its reader takes it, or `None` when it is not what its
/// header says: a JSON text, or formatted bytes whose layout fits them,
/// decompressed first (a corrupt frame is a bad value too).
fn readable(body: Body) -> Option<Body> {
  let body = match body {
    Body::Formatted(f) if f.compressed => Body::Formatted(Formatted {
      bytes: decompressed(&f.bytes, MAX_VALUE_BYTES as u64)?,
      compressed: false,
      format: f.format,
    }),
    body => body,
  };
  match body {
    // A compressed JSON text is the JSON text it was.
    Body::Formatted(f) if f.format == JSON_FORMAT => {
      readable(Body::Json(String::from_utf8(f.bytes).ok()?))
    }
    Body::Json(json) => is_json(&json).then_some(Body::Json(json)),
    Body::Formatted(formatted) => layout_fits(&formatted).then_some(Body::Formatted(formatted)),
  }
}

/// Whether the bytes of the built-in serializer's format are laid out as
/// its layout says (`lib/values.js`): `[jsonLength, [kind, length, ...path],
/// ...]`, a JSON text of that length, then the parts, every byte
/// accounted for. An application's serializer judges its own bytes.
fn layout_fits(formatted: &Formatted) -> bool {
  let Some(layout) = formatted.format.strip_prefix("json ") else {
    return true;
  };
  let Ok(serde_json::Value::Array(layout)) = serde_json::from_str(layout) else {
    return false;
  };
  let Some((json_length, parts)) = layout.split_first() else {
    return false;
  };
  let length = |value: Option<&serde_json::Value>| value.and_then(|v| v.as_u64());
  let Some(json_length) = length(Some(json_length)) else {
    return false;
  };
  let mut total = json_length;
  for part in parts {
    let part = part.as_array().map(Vec::as_slice).unwrap_or_default();
    let kind = part.first().and_then(|k| k.as_str());
    let path_ok = part.iter().skip(2).all(|p| p.is_string() || p.is_u64());
    match (kind, length(part.get(1))) {
      (Some("Buffer" | "Uint8Array" | "ArrayBuffer"), Some(n)) if path_ok => total += n,
      _ => return false,
    }
  }
  let bytes = &formatted.bytes;
  total == bytes.len() as u64
    && std::str::from_utf8(&bytes[..json_length as usize]).is_ok_and(is_json)
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
