//! Errors with stable codes: the code is the contract JS callers branch on,
//! the message says what to do.

use std::fmt;

/// The stable `code` strings of errors herdcache makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Code {
  InvalidKey,
  InvalidLoader,
  InvalidOption,
  InvalidValue,
  Unserializable,
  Timeout,
  Closed,
  /// A Node-API or runtime call failed: a bug to report, not a usage error.
  Internal,
}

impl Code {
  pub fn as_str(self) -> &'static str {
    match self {
      Code::InvalidKey => "ERR_HERDCACHE_INVALID_KEY",
      Code::InvalidLoader => "ERR_HERDCACHE_INVALID_LOADER",
      Code::InvalidOption => "ERR_HERDCACHE_INVALID_OPTION",
      Code::InvalidValue => "ERR_HERDCACHE_INVALID_VALUE",
      Code::Unserializable => "ERR_HERDCACHE_UNSERIALIZABLE",
      Code::Timeout => "ERR_HERDCACHE_TIMEOUT",
      Code::Closed => "ERR_HERDCACHE_CLOSED",
      Code::Internal => "ERR_HERDCACHE_INTERNAL",
    }
  }
}

/// Which JS error class the binding builds: a wrong type is a `TypeError`,
/// a number out of range a `RangeError`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
  Type,
  Range,
  Plain,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
  pub code: Code,
  pub kind: Kind,
  pub message: String,
}

impl Error {
  pub fn new(code: Code, kind: Kind, message: impl Into<String>) -> Self {
    Error {
      code,
      kind,
      message: message.into(),
    }
  }
}

impl fmt::Display for Error {
  fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    write!(f, "{}: {}", self.code.as_str(), self.message)
  }
}

impl std::error::Error for Error {}
