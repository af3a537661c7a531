//! The stored entry, versioned. One text format, readable with `redis-cli GET`:
//!
//! ```text
//! hc2 <freshUntil> <hardUntil> <computeMs> <stamp> <refreshAt> <v|n>
//! <value as JSON text>
//! ```
//!
//! - `freshUntil`, `hardUntil`: epoch milliseconds; fresh before the first,
//!   servable stale before the second.
//! - `computeMs`: how long the load that produced the value took (XFetch's δ).
//! - `stamp`: epoch milliseconds at which that load *started*; a write is
//!   only newer than what is stored if its stamp is not older, so a late lock
//!   holder cannot overwrite a newer value.
//! - `refreshAt`: epoch milliseconds from which a reader refreshes the fresh
//!   entry early (XFetch), drawn once by the writer
//!   ([`crate::core::policy::xfetch_refresh_at`]): every instance reading the
//!   entry refreshes at the same moment, so a fleet of N refreshes as early
//!   as one instance would, not as early as the earliest of N draws.
//! - `v` a value, `n` a "not found" marker (then the value line is `null`).
//!
//! A tagged entry (`Tags`, `core::tags`) is an `hc3` entry: the same header,
//! then its tags as one JSON array of strings on their own line, then the
//! value:
//!
//! ```text
//! hc3 <freshUntil> <hardUntil> <computeMs> <stamp> <refreshAt> <v|n>
//! ["tenant:7","user:42"]
//! <value as JSON text>
//! ```
//!
//! An untagged entry is still written `hc2`, so a reader that knows only
//! `hc2` reads every untagged entry (a tagged one is a miss to it).
//!
//! A `delete` leaves a tombstone ([`tombstone`]) in the value's place for a
//! while: an `hc2` entry expired since the epoch (`freshUntil` and
//! `hardUntil` 0), stamped with the delete. Every reader, this version's
//! and older ones, reads it as nothing there; every conditional write
//! compares its stamp as any other, so a load that began before the delete
//! cannot write its (older) value over it.
//!
//! Rules (the write script's too, see `fleet::scripts::WRITE_SCRIPT`): every
//! number has 1 to [`MAX_DIGITS`] ASCII digits, `hardUntil >= freshUntil`,
//! `refreshAt <= freshUntil`. The previous version, `hc1`, is the same
//! header without `refreshAt`; it is still read (its [`Meta::refresh_at`] is
//! `None`: the reader draws the moment itself, as before `hc2`). Every
//! writer writes `hc2`.
//!
//! A value JSON text cannot carry (binary parts, an application's
//! serializer, compressed bytes), or one with a validator (`core::etag`), is
//! an `hc4` entry: the same header, a line saying how to read its bytes,
//! then its tags and its validator (if any) and its bytes; see `core::body`.
//!
//! Anything else (another program's value, a truncated write, a future
//! version) decodes to an error, which callers count and treat as a miss.

use super::body::{format_line, read_format_line, Body, Formatted, Lines, JSON_FORMAT};
use super::etag::Etag;
use super::tags::Tags;
use std::fmt;

/// The version every writer writes.
pub const VERSION_TAG: &str = "hc2";
/// The version before `refreshAt`, still read.
pub const VERSION_TAG_V1: &str = "hc1";
/// The version of a tagged entry: `hc2`'s header, then a line of tags.
pub const VERSION_TAG_TAGGED: &str = "hc3";
/// The version of an entry in a format of its own (`core::body`): `hc2`'s
/// header, then a line saying how to read its bytes.
pub const VERSION_TAG_FORMATTED: &str = "hc4";

/// Header numbers have at most this many digits (below 10^15 ms, the year
/// 33658): exact as doubles, so the write script (Lua) compares stamps
/// exactly as this decoder reads them, and the two agree on what is valid.
pub const MAX_DIGITS: usize = 15;

/// The text of a tombstone stamped `stamp`: what a `delete` leaves.
pub fn tombstone(stamp: u64) -> String {
  format!("{VERSION_TAG} 0 0 0 {stamp} 0 v\nnull")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
  pub fresh_until: u64,
  pub hard_until: u64,
  pub compute_ms: u64,
  pub stamp: u64,
  /// When a reader refreshes the fresh entry early (epoch ms, `<=
  /// fresh_until`); `None` for an `hc1` entry, whose reader draws it.
  pub refresh_at: Option<u64>,
  pub negative: bool,
}

impl Meta {
  /// Whether this is a [`tombstone`]'s header: expired since the epoch,
  /// which no entry a load or a `set` writes can be.
  pub fn is_tombstone(&self) -> bool {
    self.fresh_until == 0 && self.hard_until == 0
  }

  /// This entry after an `expire` at `at` (epoch ms): stale from `at` (its
  /// freshUntil and refreshAt no later), its hard TTL and value kept. An
  /// entry written after `at` (a greater stamp) is not the one expired:
  /// `None`, as for one already stale then.
  pub fn expired_at(&self, at: u64) -> Option<Meta> {
    if self.stamp > at || self.fresh_until <= at {
      return None;
    }
    Some(Meta {
      fresh_until: at,
      refresh_at: self.refresh_at.map(|r| r.min(at)),
      ..*self
    })
  }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
  pub meta: Meta,
  /// The value: JSON text (`null` for a negative marker), or formatted bytes.
  pub body: Body,
  /// The tags the value was written with (`deleteByTag`).
  pub tags: Tags,
  /// The value's validator (`ctx.setEtag`), if its loader set one.
  pub etag: Etag,
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
      DecodeError::BadValue { .. } => {
        write!(f, "corrupt entry: the value is not what its header says")
      }
    }
  }
}

impl std::error::Error for DecodeError {}

/// A line of UTF-8 (without its newline) and the bytes after it.
fn split_line(bytes: &[u8]) -> Option<(&str, &[u8])> {
  let newline = bytes.iter().position(|&b| b == b'\n')?;
  let line = std::str::from_utf8(&bytes[..newline]).ok()?;
  Some((line, &bytes[newline + 1..]))
}

impl Envelope {
  pub fn encode(&self) -> Vec<u8> {
    let m = &self.meta;
    let tags = match self.tags.is_empty() {
      true => None,
      // Strings serialize infallibly.
      false => Some(serde_json::to_string(self.tags.as_slice()).unwrap_or_default()),
    };
    // A validator has a line of its own, which only `hc4` has: a JSON
    // value with one is written as JSON bytes of the built-in format.
    let version = match (&self.body, &tags) {
      (Body::Formatted(_), _) => VERSION_TAG_FORMATTED,
      (Body::Json(_), _) if !self.etag.is_none() => VERSION_TAG_FORMATTED,
      (Body::Json(_), Some(_)) => VERSION_TAG_TAGGED,
      (Body::Json(_), None) => VERSION_TAG,
    };
    let mut out = String::with_capacity(64 + tags.as_ref().map_or(0, String::len));
    out.push_str(version);
    // A writer without a moment of its own (none in herdcache) writes
    // "never early"; one past freshUntil would make the entry unreadable.
    let refresh_at = m.refresh_at.unwrap_or(m.fresh_until).min(m.fresh_until);
    for n in [
      m.fresh_until,
      m.hard_until,
      m.compute_ms,
      m.stamp,
      refresh_at,
    ] {
      out.push(' ');
      out.push_str(&n.to_string());
    }
    out.push_str(if m.negative { " n\n" } else { " v\n" });
    if version == VERSION_TAG_FORMATTED {
      let lines = Lines {
        tags: tags.is_some(),
        etag: !self.etag.is_none(),
      };
      let (compressed, format) = match &self.body {
        Body::Formatted(f) => (f.compressed, f.format.as_str()),
        Body::Json(_) => (false, JSON_FORMAT),
      };
      out.push_str(&format_line(compressed, format, lines));
      out.push('\n');
    }
    if let Some(tags) = tags {
      out.push_str(&tags);
      out.push('\n');
    }
    if let Some(etag) = self.etag.as_str() {
      out.push_str(etag);
      out.push('\n');
    }
    let mut bytes = out.into_bytes();
    match &self.body {
      Body::Json(json) => bytes.extend_from_slice(json.as_bytes()),
      Body::Formatted(formatted) => bytes.extend_from_slice(&formatted.bytes),
    }
    bytes
  }

  /// An envelope from its bytes. The value is not judged (whether a JSON
  /// text is one, whether compressed bytes decompress): that is the
  /// reader's (`engine::shared::values::read_bytes`).
  pub fn decode(bytes: impl AsRef<[u8]>) -> Result<Envelope, DecodeError> {
    let bytes = bytes.as_ref();
    let newline = bytes
      .iter()
      .position(|&b| b == b'\n')
      .ok_or(DecodeError::NotAnEnvelope)?;
    let header = std::str::from_utf8(&bytes[..newline]).map_err(|_| DecodeError::NotAnEnvelope)?;
    let meta = Envelope::decode_header(header)?;
    let (tags, etag, body) = Envelope::decode_body(header, &bytes[newline + 1..])?;
    if body.is_empty() {
      return Err(DecodeError::BadHeader("value"));
    }
    Ok(Envelope {
      meta,
      body,
      tags,
      etag,
    })
  }

  /// What follows a valid `header`: the tags, the validator, and the value
  /// (JSON text must be UTF-8; whether it is JSON is the reader's to
  /// judge). `Err`: a bad value (the reader's `Read::Corrupt` with its
  /// stamp, which the next write may replace).
  pub fn decode_body(header: &str, rest: &[u8]) -> Result<(Tags, Etag, Body), DecodeError> {
    let bad = DecodeError::BadHeader("value");
    if !header.starts_with(VERSION_TAG_FORMATTED) {
      let text = std::str::from_utf8(rest).map_err(|_| bad)?;
      let (tags, json) = Envelope::decode_tags(header, text)?;
      return Ok((tags, Etag::NONE, Body::Json(json.to_string())));
    }
    let (line, rest) = split_line(rest).ok_or(DecodeError::BadHeader("format"))?;
    let (compressed, lines, format) =
      read_format_line(line).ok_or(DecodeError::BadHeader("format"))?;
    let (tags, rest) = match lines.tags {
      true => {
        let (line, rest) = split_line(rest).ok_or(DecodeError::BadHeader("tags"))?;
        (Envelope::read_tags(line)?, rest)
      }
      false => (Tags::NONE, rest),
    };
    let (etag, bytes) = match lines.etag {
      true => {
        let (line, bytes) = split_line(rest).ok_or(DecodeError::BadHeader("etag"))?;
        let etag = Etag::new(line).map_err(|_| DecodeError::BadHeader("etag"))?;
        (etag, bytes)
      }
      false => (Etag::NONE, rest),
    };
    // Plain JSON text in `hc4` (it has a validator) is read as `hc2`'s.
    if !compressed && format == JSON_FORMAT {
      let text = std::str::from_utf8(bytes).map_err(|_| bad)?;
      return Ok((tags, etag, Body::Json(text.to_string())));
    }
    let formatted = Formatted {
      format: format.to_string(),
      bytes: bytes.to_vec(),
      compressed,
    };
    Ok((tags, etag, Body::Formatted(formatted)))
  }

  /// What follows a valid `header`: an `hc3` entry's tags, and the value's
  /// text (the rest of `body`).
  pub fn decode_tags<'a>(header: &str, body: &'a str) -> Result<(Tags, &'a str), DecodeError> {
    if !header.starts_with(VERSION_TAG_TAGGED) {
      return Ok((Tags::NONE, body));
    }
    let (line, json) = body
      .split_once('\n')
      .ok_or(DecodeError::BadHeader("tags"))?;
    Ok((Envelope::read_tags(line)?, json))
  }

  /// A line of tags: a JSON array of one or more valid tags.
  fn read_tags(line: &str) -> Result<Tags, DecodeError> {
    serde_json::from_str::<Vec<String>>(line)
      .ok()
      .and_then(|tags| Tags::new(tags).ok())
      .filter(|tags| !tags.is_empty())
      .ok_or(DecodeError::BadHeader("tags"))
  }

  /// The first line of an envelope, without its newline.
  pub fn decode_header(header: &str) -> Result<Meta, DecodeError> {
    let mut fields = header.split(' ');
    let has_refresh_at = match fields.next() {
      Some(VERSION_TAG | VERSION_TAG_TAGGED | VERSION_TAG_FORMATTED) => true,
      Some(VERSION_TAG_V1) => false,
      Some(tag) if tag.starts_with("hc") && tag.len() <= 8 => {
        return Err(DecodeError::UnknownVersion(tag.to_string()))
      }
      _ => return Err(DecodeError::NotAnEnvelope),
    };
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
    let refresh_at = match has_refresh_at {
      true => Some(number("refreshAt")?),
      false => None,
    };
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
    if refresh_at.is_some_and(|at| at > fresh_until) {
      return Err(DecodeError::BadHeader("refreshAt"));
    }
    Ok(Meta {
      fresh_until,
      hard_until,
      compute_ms,
      stamp,
      refresh_at,
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

  #[test]
  fn an_expired_entry_is_stale_from_then_and_keeps_its_hard_ttl() {
    let meta = Meta {
      fresh_until: 2_000,
      hard_until: 9_000,
      compute_ms: 40,
      stamp: 1_000,
      refresh_at: Some(1_800),
      negative: false,
    };
    let expired = meta.expired_at(1_500).unwrap();
    assert_eq!(
      (expired.fresh_until, expired.refresh_at),
      (1_500, Some(1_500))
    );
    assert_eq!(
      expired,
      Meta {
        fresh_until: 1_500,
        refresh_at: Some(1_500),
        ..meta
      }
    );
    // refreshAt already earlier stays; an hc1 entry has none.
    assert_eq!(meta.expired_at(1_900).unwrap().refresh_at, Some(1_800));
    let hc1 = Meta {
      refresh_at: None,
      ..meta
    };
    assert_eq!(hc1.expired_at(1_500).unwrap().refresh_at, None);
    // Written after the expire, or stale already: not expired.
    assert_eq!(meta.expired_at(999), None);
    assert_eq!(meta.expired_at(2_000), None);
    assert_eq!(meta.expired_at(1_000).unwrap().fresh_until, 1_000);
  }

  fn sample(negative: bool) -> Envelope {
    Envelope {
      meta: Meta {
        fresh_until: 1_700_000_060_000,
        hard_until: 1_700_000_600_000,
        compute_ms: 612,
        stamp: 1_700_000_000_000,
        refresh_at: Some(1_700_000_059_400),
        negative,
      },
      body: Body::Json(if negative {
        "null".into()
      } else {
        "{\"a\":[1,2],\"s\":\"x\\ny\"}".into()
      }),
      tags: Tags::NONE,
      etag: Default::default(),
    }
  }

  #[test]
  fn a_tagged_entry_is_hc3_with_its_tags_on_their_own_line() {
    let mut e = sample(false);
    e.tags = Tags::new(vec!["user:42".into(), "a \"b\"\nc".into()]).unwrap();
    let text = String::from_utf8(e.encode()).unwrap();
    assert!(text.starts_with(
      "hc3 1700000060000 1700000600000 612 1700000000000 1700000059400 v\n[\"a \\\"b\\\"\\nc\",\"user:42\"]\n{"
    ));
    assert_eq!(Envelope::decode(&text).unwrap(), e);
    for bad in ["[]", "[1]", "[\"\"]", "nope", "{}"] {
      let text = format!("hc3 1 2 3 4 1 v\n{bad}\n1");
      assert_eq!(
        Envelope::decode(&text).unwrap_err(),
        DecodeError::BadHeader("tags"),
        "{text:?}"
      );
    }
    assert_eq!(
      Envelope::decode("hc3 1 2 3 4 1 v\n[\"a\"]").unwrap_err(),
      DecodeError::BadHeader("tags")
    );
  }

  #[test]
  fn an_entry_in_a_format_of_its_own_is_hc4_with_raw_bytes() {
    let mut e = sample(false);
    let bytes = vec![0, b'\n', 255, 7];
    e.body = Body::Formatted(Formatted {
      format: "json [4,[\"Buffer\",4]]".into(),
      bytes: bytes.clone(),
      compressed: false,
    });
    let encoded = e.encode();
    let head = b"hc4 1700000060000 1700000600000 612 1700000000000 1700000059400 v\n- - json ";
    assert!(encoded.starts_with(head));
    assert!(encoded.ends_with(&bytes));
    assert_eq!(Envelope::decode(&encoded).unwrap(), e);
    e.tags = Tags::new(vec!["t:1".into()]).unwrap();
    if let Body::Formatted(f) = &mut e.body {
      f.compressed = true;
    }
    let encoded = e.encode();
    assert!(encoded
      .windows(11)
      .any(|w| w == b"\nzstd t json"[..11].as_ref()));
    assert_eq!(Envelope::decode(&encoded).unwrap(), e);
    for bad in ["hc4 1 2 3 4 1 v\n1", "hc4 1 2 3 4 1 v\nbr - json\n1"] {
      assert_eq!(
        Envelope::decode(bad).unwrap_err(),
        DecodeError::BadHeader("format"),
        "{bad:?}"
      );
    }
  }

  #[test]
  fn a_validator_has_a_line_of_its_own_in_hc4() {
    let mut e = sample(false);
    e.etag = Etag::new("W/\"v 7\"").unwrap();
    let text = String::from_utf8(e.encode()).unwrap();
    assert!(text.starts_with(
      "hc4 1700000060000 1700000600000 612 1700000000000 1700000059400 v\n- e json\nW/\"v 7\"\n{\"a\""
    ));
    assert_eq!(
      Envelope::decode(&text).unwrap(),
      e,
      "JSON text stays JSON text"
    );
    e.tags = Tags::new(vec!["t:1".into()]).unwrap();
    e.body = Body::Formatted(Formatted {
      format: "json [1,[\"Buffer\",2]]".into(),
      bytes: vec![b'0', 1, 2],
      compressed: true,
    });
    let text = e.encode();
    assert!(text
      .windows(39)
      .any(|w| w == b"\nzstd te json [1,[\"Buffer\",2]]\n[\"t:1\"]\nW/"[..39].as_ref()));
    assert_eq!(Envelope::decode(&text).unwrap(), e);
    for bad in [
      "hc4 1 2 3 4 1 v\n- e json\n\n1",
      "hc4 1 2 3 4 1 v\n- e json\n1",
    ] {
      assert_eq!(
        Envelope::decode(bad).unwrap_err(),
        DecodeError::BadHeader("etag"),
        "{bad:?}"
      );
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
    let text = String::from_utf8(sample(false).encode()).unwrap();
    assert!(
      text.starts_with("hc2 1700000060000 1700000600000 612 1700000000000 1700000059400 v\n{")
    );
  }

  #[test]
  fn the_previous_version_is_still_read_without_a_refresh_moment() {
    let e = Envelope::decode("hc1 1700000060000 1700000600000 612 1700000000000 v\n[1]").unwrap();
    assert_eq!(e.meta.refresh_at, None);
    assert_eq!(
      (
        e.meta.fresh_until,
        e.meta.hard_until,
        e.meta.compute_ms,
        e.meta.stamp
      ),
      (1_700_000_060_000, 1_700_000_600_000, 612, 1_700_000_000_000)
    );
    assert_eq!(e.body.json(), Some("[1]"));
    // Written again, it is an hc2 entry that never refreshes early.
    assert!(e
      .encode()
      .starts_with(b"hc2 1700000060000 1700000600000 612 1700000000000 1700000060000 v\n"));
  }

  #[test]
  fn the_refresh_moment_is_at_most_fresh_until() {
    let at = |refresh_at: &str| Envelope::decode(format!("hc2 1000 2000 5 500 {refresh_at} v\n1"));
    assert_eq!(at("1000").unwrap().meta.refresh_at, Some(1_000));
    // Before the stamp is valid: "refresh at the first read".
    assert_eq!(at("0").unwrap().meta.refresh_at, Some(0));
    assert_eq!(at("1001").unwrap_err(), DecodeError::BadHeader("refreshAt"));
  }

  #[test]
  fn value_may_contain_newlines_and_spaces() {
    let mut e = sample(false);
    e.body = Body::Json("\"a b\\nc\"".into());
    let text = e.encode();
    assert_eq!(Envelope::decode(&text).unwrap().body, e.body);
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
      ("hc2 1 2 3 4 v\n1", DecodeError::BadHeader("refreshAt")),
      ("hc2 1 2 3 4 x v\n1", DecodeError::BadHeader("refreshAt")),
      (
        "hc2 1 2 3 4 1 v extra\n1",
        DecodeError::BadHeader("field count"),
      ),
      ("hc2 5 2 3 4 1 v\n1", DecodeError::BadHeader("hardUntil")),
      ("hc2 1 2 3 4 1 q\n1", DecodeError::BadHeader("kind")),
      ("hc1 1 2 3 4 1 v\n1", DecodeError::BadHeader("kind")),
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
