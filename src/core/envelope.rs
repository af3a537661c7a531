//! The stored entry, versioned. One text format, readable with `redis-cli GET`:
//!
//! ```text
//! hc1 <freshUntil> <hardUntil> <computeMs> <stamp> <v|n>
//! <value as JSON text>
//! ```
//!
//! - `freshUntil`, `hardUntil`: epoch milliseconds; fresh before the first,
//!   servable stale before the second.
//! - `computeMs`: how long the load that produced the value took (XFetch's δ).
//! - `stamp`: epoch milliseconds at which that load *started*; a write is
//!   only newer than what is stored if its stamp is not older, so a late lock
//!   holder cannot overwrite a newer value.
//! - `v` a value, `n` a "not found" marker (then the value line is `null`).
//!
//! Anything else (another program's value, a truncated write, a future
//! version) decodes to an error, which callers count and treat as a miss.

use std::fmt;

pub const VERSION_TAG: &str = "hc1";

/// Header numbers have at most this many digits (below 10^15 ms, the year
/// 33658): exact as doubles, so the write script (Lua) compares stamps
/// exactly as this decoder reads them, and the two agree on what is valid.
pub const MAX_DIGITS: usize = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
  pub fresh_until: u64,
  pub hard_until: u64,
  pub compute_ms: u64,
  pub stamp: u64,
  pub negative: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
  pub meta: Meta,
  /// The value as JSON text (`null` for a negative marker).
  pub json: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
  NotAnEnvelope,
  UnknownVersion(String),
  BadHeader(&'static str),
  /// A valid header over a value that is not UTF-8 JSON (found by the
  /// reader, which checks the value; `decode` does not). The stamp lets the
  /// next write replace exactly this value, even though its stamp is newer.
  BadValue {
    stamp: u64,
  },
}

impl fmt::Display for DecodeError {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match self {
      DecodeError::NotAnEnvelope => write!(f, "not a herdcache entry"),
      DecodeError::UnknownVersion(v) => write!(f, "unknown entry version {v:?}"),
      DecodeError::BadHeader(field) => write!(f, "corrupt entry header: bad {field}"),
      DecodeError::BadValue { .. } => write!(f, "corrupt entry: the value is not UTF-8 JSON"),
    }
  }
}

impl std::error::Error for DecodeError {}

impl Envelope {
  pub fn encode(&self) -> String {
    let m = &self.meta;
    let mut out = String::with_capacity(self.json.len() + 64);
    out.push_str(VERSION_TAG);
    for n in [m.fresh_until, m.hard_until, m.compute_ms, m.stamp] {
      out.push(' ');
      out.push_str(&n.to_string());
    }
    out.push_str(if m.negative { " n\n" } else { " v\n" });
    out.push_str(&self.json);
    out
  }

  pub fn decode(text: &str) -> Result<Envelope, DecodeError> {
    let (header, json) = text.split_once('\n').ok_or(DecodeError::NotAnEnvelope)?;
    let meta = Envelope::decode_header(header)?;
    if json.is_empty() {
      return Err(DecodeError::BadHeader("value"));
    }
    Ok(Envelope {
      meta,
      json: json.to_string(),
    })
  }

  /// The first line of an envelope, without its newline.
  pub fn decode_header(header: &str) -> Result<Meta, DecodeError> {
    let mut fields = header.split(' ');
    match fields.next() {
      Some(VERSION_TAG) => {}
      Some(tag) if tag.starts_with("hc") && tag.len() <= 8 => {
        return Err(DecodeError::UnknownVersion(tag.to_string()))
      }
      _ => return Err(DecodeError::NotAnEnvelope),
    }
    let mut number = |name: &'static str| -> Result<u64, DecodeError> {
      let field = fields.next().ok_or(DecodeError::BadHeader(name))?;
      if field.is_empty() || field.len() > MAX_DIGITS || !field.bytes().all(|b| b.is_ascii_digit())
      {
        return Err(DecodeError::BadHeader(name));
      }
      field.parse().map_err(|_| DecodeError::BadHeader(name))
    };
    let fresh_until = number("freshUntil")?;
    let hard_until = number("hardUntil")?;
    let compute_ms = number("computeMs")?;
    let stamp = number("stamp")?;
    let negative = match fields.next() {
      Some("v") => false,
      Some("n") => true,
      _ => return Err(DecodeError::BadHeader("kind")),
    };
    if fields.next().is_some() {
      return Err(DecodeError::BadHeader("field count"));
    }
    if hard_until < fresh_until {
      return Err(DecodeError::BadHeader("hardUntil"));
    }
    Ok(Meta {
      fresh_until,
      hard_until,
      compute_ms,
      stamp,
      negative,
    })
  }

  /// Whether this entry may replace `stored`: a write from a load that
  /// started earlier than the stored value's load loses.
  pub fn is_newer_than(&self, stored: &Meta) -> bool {
    self.meta.stamp >= stored.stamp
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn sample(negative: bool) -> Envelope {
    Envelope {
      meta: Meta {
        fresh_until: 1_700_000_060_000,
        hard_until: 1_700_000_600_000,
        compute_ms: 612,
        stamp: 1_700_000_000_000,
        negative,
      },
      json: if negative {
        "null".into()
      } else {
        "{\"a\":[1,2],\"s\":\"x\\ny\"}".into()
      },
    }
  }

  #[test]
  fn round_trips() {
    for negative in [false, true] {
      let e = sample(negative);
      let text = e.encode();
      assert_eq!(Envelope::decode(&text).unwrap(), e);
    }
  }

  #[test]
  fn is_readable_text() {
    let text = sample(false).encode();
    assert!(text.starts_with("hc1 1700000060000 1700000600000 612 1700000000000 v\n{"));
  }

  #[test]
  fn value_may_contain_newlines_and_spaces() {
    let mut e = sample(false);
    e.json = "\"a b\\nc\"".into();
    let text = e.encode();
    assert_eq!(Envelope::decode(&text).unwrap().json, e.json);
  }

  #[test]
  fn foreign_and_corrupt_values_are_errors() {
    let cases = [
      ("", DecodeError::NotAnEnvelope),
      ("{\"plain\":\"json\"}", DecodeError::NotAnEnvelope),
      ("hello\nworld", DecodeError::NotAnEnvelope),
      (
        "hc9 1 2 3 4 v\n1",
        DecodeError::UnknownVersion("hc9".into()),
      ),
      ("hc1 x 2 3 4 v\n1", DecodeError::BadHeader("freshUntil")),
      ("hc1 1 2 3\n1", DecodeError::BadHeader("stamp")),
      ("hc1 1 2 3 4 q\n1", DecodeError::BadHeader("kind")),
      (
        "hc1 1 2 3 4 v extra\n1",
        DecodeError::BadHeader("field count"),
      ),
      ("hc1 5 2 3 4 v\n1", DecodeError::BadHeader("hardUntil")),
      ("hc1 1 2 3 4 v\n", DecodeError::BadHeader("value")),
      ("hc1 -1 2 3 4 v\n1", DecodeError::BadHeader("freshUntil")),
      (
        "hc1 99999999999999999999999 2 3 4 v\n1",
        DecodeError::BadHeader("freshUntil"),
      ),
    ];
    for (text, expected) in cases {
      assert_eq!(Envelope::decode(text).unwrap_err(), expected, "{text:?}");
    }
  }

  #[test]
  fn truncation_at_every_byte_never_panics() {
    let text = sample(false).encode();
    for cut in 0..text.len() {
      let _ = Envelope::decode(&text[..cut]);
    }
  }

  #[test]
  fn older_loads_do_not_overwrite_newer_ones() {
    let stored = sample(false).meta;
    let mut late = sample(false);
    late.meta.stamp = stored.stamp - 1;
    assert!(!late.is_newer_than(&stored));
    late.meta.stamp = stored.stamp + 1;
    assert!(late.is_newer_than(&stored));
  }
}
