//! Errors with stable codes: the code is the contract JS callers branch on,
//! the message says what to do.

use std::fmt;

/// Declares [`Code`] and its strings once: `Code::as_str` and `Code::ALL`
/// (which the binding exports, so the JS wrapper and the README's error
/// table are checked against it) come from the same list.
macro_rules! codes {
  ($($(#[doc = $doc:tt])* $variant:ident => $code:literal,)*) => {
    /// The stable `code` strings of the cache's errors, made natively or by
    /// the JS wrapper for these rules (`INVALID_VALUE` in `set()`, `TIMEOUT`
    /// at `hardTimeout`). The codes of what only JavaScript does (JSON
    /// serialisation, the value size, loading the binary) are in
    /// `lib/errors.js`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Code {
      $($(#[doc = $doc])* $variant,)*
    }

    impl Code {
      /// Every code, in declaration order.
      pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

      pub fn as_str(self) -> &'static str {
        match self {
          $(Code::$variant => $code,)*
        }
      }
    }
  };
}

codes! {
  InvalidKey => "ERR_HERDCACHE_INVALID_KEY",
  InvalidLoader => "ERR_HERDCACHE_INVALID_LOADER",
  InvalidOption => "ERR_HERDCACHE_INVALID_OPTION",
  InvalidValue => "ERR_HERDCACHE_INVALID_VALUE",
  Timeout => "ERR_HERDCACHE_TIMEOUT",
  Closed => "ERR_HERDCACHE_CLOSED",
  /// A background refresh ran no loader: its key backs off fleet-wide after
  /// a failed refresh elsewhere. Only the refresh's own promise sees it (a
  /// caller's soft wait then serves the stale value): no caller is rejected.
  BackedOff => "ERR_HERDCACHE_BACKED_OFF",
  /// At `close()`: writes or invalidations that could not reach Redis and
  /// were given up (reported to `onError`, with their `operations`).
  Undelivered => "ERR_HERDCACHE_UNDELIVERED",
  /// Redis refused the credentials: a wrong password or user (WRONGPASS),
  /// or none given to a server that wants one (NOAUTH).
  RedisAuth => "ERR_HERDCACHE_REDIS_AUTH",
  /// Redis refused a command for this ACL user (NOPERM): scripts, or
  /// PUBLISH/SUBSCRIBE on the events channel.
  RedisNoPerm => "ERR_HERDCACHE_REDIS_NOPERM",
  /// The URL's db does not exist on the server ("DB index is out of range").
  RedisDb => "ERR_HERDCACHE_REDIS_DB",
  /// Nothing answers at the URL's host and port (refused, no route, no such host).
  RedisUnreachable => "ERR_HERDCACHE_REDIS_UNREACHABLE",
  /// The TLS handshake failed (`rediss://` to a plain port, a certificate
  /// the system's roots do not trust).
  RedisTls => "ERR_HERDCACHE_REDIS_TLS",
  /// Redis did not answer within `redisTimeout`.
  RedisTimeout => "ERR_HERDCACHE_REDIS_TIMEOUT",
  /// Any other Redis failure, with the server's text.
  RedisFailed => "ERR_HERDCACHE_REDIS_FAILED",
  /// A Node-API or runtime call failed: a bug to report, not a usage error.
  Internal => "ERR_HERDCACHE_INTERNAL",
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
