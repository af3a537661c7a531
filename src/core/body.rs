//! What an envelope holds after its header and tags: the value's JSON text
//! (`hc2`, `hc3`), or bytes in a named format (`hc4`).
//!
//! An `hc4` entry is written only when JSON text alone cannot carry the
//! value: binary parts (a `Buffer`, `Uint8Array` or `ArrayBuffer`, at the
//! top or nested), a serializer of the application's, or compressed bytes;
//! or when the value has a validator (`core::etag`), which only `hc4` has a
//! line for.
//! A plain JSON value is still `hc2`/`hc3`, so every reader of those keeps
//! reading it, and older readers take an `hc4` entry for a miss (an unknown
//! version). Its second line says how to read the bytes:
//!
//! ```text
//! hc4 <freshUntil> <hardUntil> <computeMs> <stamp> <refreshAt> <v|n>
//! <compression> <lines> <format>
//! [tags as in hc3, when `lines` has t]
//! [the validator, when `lines` has e]
//! <bytes>
//! ```
//!
//! `compression` is `-` or [`ZSTD`]; `format` is the serializer's name,
//! then after a space how its bytes are laid out (the JS side's business:
//! `lib/values.js`), e.g. `json [12,["Buffer",5]]`: 12 bytes of JSON text,
//! then a 5-byte `Buffer` that is the value itself (an empty path).

/// The built-in serializer's name: `JSON.stringify`, and binary parts.
pub const JSON_FORMAT: &str = "json";
/// The second line's compression field of zstd-compressed bytes.
pub const ZSTD: &str = "zstd";
/// The second line's field for "no compression", or "no tags".
const NONE: &str = "-";

/// Values of this many bytes or more are compressed and decompressed on
/// tokio's blocking pool rather than inline on a runtime worker.
pub const INLINE_COMPRESSION_MAX: usize = 64 * 1024;

/// An envelope's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
  /// The value's JSON text (`null` for a negative marker).
  Json(String),
  /// Bytes in a named format (`hc4`).
  Formatted(Formatted),
}

/// Bytes and how to read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Formatted {
  /// The serializer's name, then (after a space) the layout of its bytes.
  pub format: String,
  /// The bytes, compressed when `compressed` (only on their way to or from
  /// the store: a reader decompresses them before anything else sees them).
  pub bytes: Vec<u8>,
  pub compressed: bool,
}

impl Body {
  /// The JSON text, when the value is one.
  pub fn json(&self) -> Option<&str> {
    match self {
      Body::Json(json) => Some(json),
      Body::Formatted(_) => None,
    }
  }

  /// The value's bytes as stored (compressed, if they are).
  pub fn len(&self) -> usize {
    match self {
      Body::Json(json) => json.len(),
      Body::Formatted(f) => f.bytes.len(),
    }
  }

  pub fn is_empty(&self) -> bool {
    self.len() == 0
  }

  /// The serializer that wrote the value: a JSON text is [`JSON_FORMAT`]'s.
  pub fn serializer(&self) -> &str {
    match self {
      Body::Json(_) => JSON_FORMAT,
      Body::Formatted(f) => f.format.split(' ').next().unwrap_or_default(),
    }
  }
}

/// `body` as zstd at `level` compresses it (a JSON text becomes bytes of
/// the built-in format), or `None` when that saves nothing (bytes that are
/// compressed already: an image) or it is compressed already.
pub fn compressed(body: &Body, level: i32) -> Option<Body> {
  let (format, bytes) = match body {
    Body::Json(json) => (JSON_FORMAT, json.as_bytes()),
    Body::Formatted(f) if !f.compressed => (f.format.as_str(), f.bytes.as_slice()),
    Body::Formatted(_) => return None,
  };
  let packed = zstd::bulk::compress(bytes, level).ok()?;
  (packed.len() < bytes.len()).then(|| {
    Body::Formatted(Formatted {
      format: format.to_string(),
      bytes: packed,
      compressed: true,
    })
  })
}

/// The bytes a zstd frame holds, if it is one and they are no more than
/// `limit` (a value past Redis's own limit is no value herdcache wrote).
pub fn decompressed(bytes: &[u8], limit: u64) -> Option<Vec<u8>> {
  use std::io::Read;
  let decoder = zstd::stream::read::Decoder::new(bytes).ok()?;
  let mut out = Vec::new();
  decoder.take(limit + 1).read_to_end(&mut out).ok()?;
  (out.len() as u64 <= limit).then_some(out)
}

/// The lines an `hc4` entry has between its second line and its bytes,
/// named by the second line's second field: `-` none, `t` a line of tags,
/// `e` a line with the value's validator (`core::etag`), `te` both, in that
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lines {
  pub tags: bool,
  pub etag: bool,
}

impl Lines {
  fn field(self) -> &'static str {
    match (self.tags, self.etag) {
      (false, false) => NONE,
      (true, false) => "t",
      (false, true) => "e",
      (true, true) => "te",
    }
  }

  fn read(field: &str) -> Option<Lines> {
    let (tags, etag) = match field {
      NONE => (false, false),
      "t" => (true, false),
      "e" => (false, true),
      "te" => (true, true),
      _ => return None,
    };
    Some(Lines { tags, etag })
  }
}

/// The `hc4` second line of bytes in `format` (`compressed` or not),
/// followed by `lines`.
pub fn format_line(compressed: bool, format: &str, lines: Lines) -> String {
  let compression = if compressed { ZSTD } else { NONE };
  format!("{compression} {} {format}", lines.field())
}

/// An `hc4` second line read back: (compressed, lines, format), or `None`
/// when it is not one this version writes.
pub fn read_format_line(line: &str) -> Option<(bool, Lines, &str)> {
  let mut fields = line.splitn(3, ' ');
  let compressed = match fields.next()? {
    NONE => false,
    ZSTD => true,
    _ => return None,
  };
  let lines = Lines::read(fields.next()?)?;
  let format = fields
    .next()
    .filter(|f| !f.is_empty() && !f.starts_with(' '))?;
  Some((compressed, lines, format))
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_format_line_reads_back() {
    let format = "json [3,[\"Buffer\",2,\"a b\"]]";
    for compressed in [false, true] {
      for (tags, etag) in [(false, false), (true, false), (false, true), (true, true)] {
        let lines = Lines { tags, etag };
        let line = format_line(compressed, format, lines);
        assert_eq!(read_format_line(&line), Some((compressed, lines, format)));
      }
    }
    for bad in [
      "",
      "-",
      "- -",
      "- - ",
      "gzip - json",
      "- x json",
      "- et json",
      "-  - json",
    ] {
      assert_eq!(read_format_line(bad), None, "{bad:?}");
    }
  }

  #[test]
  fn compression_round_trips_and_keeps_what_it_cannot_shrink() {
    let json = format!("[{}]", vec!["{\"a\":1}"; 200].join(","));
    let Some(Body::Formatted(packed)) = compressed(&Body::Json(json.clone()), 3) else {
      panic!("a repetitive JSON text compresses");
    };
    assert!(packed.compressed && packed.format == JSON_FORMAT);
    assert!(packed.bytes.len() < json.len() / 10);
    assert_eq!(
      decompressed(&packed.bytes, 1 << 20).unwrap(),
      json.as_bytes()
    );
    assert_eq!(decompressed(&packed.bytes, 10), None, "past the limit");
    assert_eq!(decompressed(b"not zstd", 1 << 20), None);
    assert_eq!(
      compressed(&Body::Json("1".into()), 3),
      None,
      "nothing saved"
    );
    assert_eq!(
      compressed(&Body::Formatted(packed), 3),
      None,
      "compressed already"
    );
  }

  #[test]
  fn the_serializer_is_the_formats_first_word() {
    let formatted = |format: &str| {
      Body::Formatted(Formatted {
        format: format.into(),
        bytes: vec![1],
        compressed: false,
      })
    };
    assert_eq!(formatted("msgpackr b").serializer(), "msgpackr");
    assert_eq!(formatted("json [1]").serializer(), JSON_FORMAT);
    assert_eq!(Body::Json("1".into()).serializer(), JSON_FORMAT);
  }
}
