//! A value's validator (`ctx.setEtag`): the `ETag` (or `Last-Modified`)
//! its origin sent with it, kept beside the value in memory and in the
//! shared store, so a later refresh, on any instance, can ask the origin
//! "changed since?" (`If-None-Match`) and keep the value it has when the
//! answer is no (`ctx.keep()`).
//!
//! One line of text: it is stored on a line of its own in the envelope
//! (`core::body`), so it holds no control character.

use super::error::{Code, Error, Kind};
use std::sync::Arc;

/// Longest validator accepted, in bytes: an ETag is a hash or a version, a
/// few dozen bytes; a kilobyte is a bug.
pub const MAX_ETAG_BYTES: usize = 1024;

/// An entry's validator; `None` when its loader set none (one word, as
/// `Tags`: the entries without one pay a pointer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Etag(Option<Arc<Box<str>>>);

impl Etag {
  pub const NONE: Etag = Etag(None);

  /// `text` as a validator: 1 to [`MAX_ETAG_BYTES`] bytes, no control
  /// character (it is one line of the envelope).
  pub fn new(text: &str) -> Result<Etag, Error> {
    if text.is_empty() || text.len() > MAX_ETAG_BYTES || text.chars().any(char::is_control) {
      return Err(Error::new(
        Code::InvalidOption,
        Kind::Type,
        format!(
          "the etag of setEtag() must be 1 to {MAX_ETAG_BYTES} bytes of text on one line (no control characters); got {} bytes",
          text.len()
        ),
      ));
    }
    Ok(Etag(Some(Arc::new(text.into()))))
  }

  pub fn as_str(&self) -> Option<&str> {
    self.0.as_deref().map(|text| &**text)
  }

  pub fn is_none(&self) -> bool {
    self.0.is_none()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_validator_is_one_line_of_bounded_text() {
    for good in [
      "\"33a64df5\"",
      "W/\"0815\"",
      "Wed, 21 Oct 2015 07:28:00 GMT",
      "é",
    ] {
      assert_eq!(Etag::new(good).unwrap().as_str(), Some(good));
    }
    let longest = "x".repeat(MAX_ETAG_BYTES);
    assert!(Etag::new(&longest).is_ok());
    for bad in ["", "a\nb", "a\rb", "tab\there", "\u{7f}"] {
      let error = Etag::new(bad).unwrap_err();
      assert_eq!(error.code, Code::InvalidOption, "{bad:?}");
    }
    assert!(Etag::new(&format!("{longest}x")).is_err());
    assert!(Etag::NONE.is_none() && Etag::NONE.as_str().is_none());
  }
}
