//! Key encoding. A key is a string (used as it is) or a list of parts. Parts
//! are escaped and joined with `:`, so part boundaries can never be confused:
//! `["a:b", "c"]` and `["a", "b:c"]` are different keys, while the readable
//! `"feed:t1:en"` and `["feed", "t1", "en"]` are the same one.

use super::error::{Code, Error, Kind};

/// Longest encoded key accepted, in bytes: far above any sane key, low enough
/// that a runaway key (a whole JSON document) is caught as a bug.
pub const MAX_KEY_BYTES: usize = 64 * 1024;

/// One part of an array key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Part<'a> {
  Text(&'a str),
  Number(f64),
}

pub fn check_string_key(key: &str) -> Result<(), Error> {
  if key.is_empty() {
    return Err(invalid(
      "the key is an empty string; give a non-empty string or an array of parts",
    ));
  }
  check_length(key.len())
}

/// Builds an array key part by part, so the binding can encode straight from
/// JS values without collecting them first.
#[derive(Debug, Default)]
pub struct KeyBuilder {
  out: String,
  parts: usize,
}

impl KeyBuilder {
  pub fn push(&mut self, part: Part<'_>) -> Result<(), Error> {
    if self.parts > 0 {
      self.out.push(':');
    }
    self.parts += 1;
    match part {
      Part::Text(text) => {
        for ch in text.chars() {
          if ch == ':' || ch == '\\' {
            self.out.push('\\');
          }
          self.out.push(ch);
        }
      }
      Part::Number(n) => {
        if !n.is_finite() {
          return Err(invalid(format!(
            "a key part is the number {n}; numbers in keys must be finite"
          )));
        }
        push_number(&mut self.out, n);
      }
    }
    check_length(self.out.len())
  }

  pub fn finish(self) -> Result<String, Error> {
    if self.parts == 0 {
      return Err(invalid("the key is an empty array; give at least one part"));
    }
    Ok(self.out)
  }
}

/// Encodes a whole array key.
pub fn encode_parts(parts: &[Part<'_>]) -> Result<String, Error> {
  let mut builder = KeyBuilder::default();
  for part in parts {
    builder.push(*part)?;
  }
  builder.finish()
}

/// Numbers print as JavaScript's `String(n)` does for the values keys use:
/// integers without a fraction (`42`, not `42.0`), `-0` as `0`.
fn push_number(out: &mut String, n: f64) {
  use std::fmt::Write;
  if n == n.trunc() && n.abs() < 1e21 {
    let _ = write!(out, "{}", n as i128);
  } else {
    let _ = write!(out, "{n}");
  }
}

fn check_length(len: usize) -> Result<(), Error> {
  if len > MAX_KEY_BYTES {
    return Err(invalid(format!(
      "the key is {len} bytes long; keys are limited to {MAX_KEY_BYTES} bytes (hash large inputs first)"
    )));
  }
  Ok(())
}

pub fn invalid(message: impl Into<String>) -> Error {
  Error::new(Code::InvalidKey, Kind::Type, message)
}

#[cfg(test)]
mod tests {
  use super::*;
  use Part::{Number as N, Text as T};

  #[test]
  fn parts_join_with_colons() {
    assert_eq!(
      encode_parts(&[T("feed"), T("t1"), T("en")]).unwrap(),
      "feed:t1:en"
    );
  }

  #[test]
  fn part_boundaries_never_collide() {
    let a = encode_parts(&[T("a:b"), T("c")]).unwrap();
    let b = encode_parts(&[T("a"), T("b:c")]).unwrap();
    let c = encode_parts(&[T("a"), T("b"), T("c")]).unwrap();
    assert_ne!(a, b);
    assert_ne!(a, c);
    assert_ne!(b, c);
    assert_ne!(
      encode_parts(&[T("feed"), T("t"), T("en")]).unwrap(),
      encode_parts(&[T("feed"), T("ten")]).unwrap()
    );
    // A backslash cannot be used to fake an escaped separator.
    assert_ne!(
      encode_parts(&[T("a\\"), T("b")]).unwrap(),
      encode_parts(&[T("a\\:b")]).unwrap()
    );
  }

  #[test]
  fn empty_parts_stay_distinct() {
    assert_eq!(encode_parts(&[T("a"), T("")]).unwrap(), "a:");
    assert_ne!(
      encode_parts(&[T("a"), T("")]).unwrap(),
      encode_parts(&[T("a:")]).unwrap()
    );
  }

  #[test]
  fn numbers_print_like_javascript() {
    assert_eq!(encode_parts(&[T("user"), N(42.0)]).unwrap(), "user:42");
    assert_eq!(encode_parts(&[N(-0.0)]).unwrap(), "0");
    assert_eq!(encode_parts(&[N(1.5)]).unwrap(), "1.5");
    assert_eq!(encode_parts(&[N(-7.0)]).unwrap(), "-7");
  }

  #[test]
  fn rejects_bad_keys_with_a_code() {
    assert_eq!(encode_parts(&[]).unwrap_err().code, Code::InvalidKey);
    assert_eq!(
      encode_parts(&[N(f64::NAN)]).unwrap_err().code,
      Code::InvalidKey
    );
    assert_eq!(
      encode_parts(&[N(f64::INFINITY)]).unwrap_err().code,
      Code::InvalidKey
    );
    assert_eq!(check_string_key("").unwrap_err().code, Code::InvalidKey);
    assert!(check_string_key("x").is_ok());
    let long = "x".repeat(MAX_KEY_BYTES + 1);
    assert_eq!(check_string_key(&long).unwrap_err().code, Code::InvalidKey);
    assert_eq!(
      encode_parts(&[T(&long)]).unwrap_err().code,
      Code::InvalidKey
    );
  }
}
