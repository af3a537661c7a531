//! Option validation and defaults, for the cache and for one call. Numbers
//! arrive as JS numbers (`f64`); everything is checked here once, so the
//! engine only sees sane integers.

use super::error::{Code, Error, Kind};

pub const DEFAULT_TTL: u64 = 60_000;
pub const HARD_TTL_FACTOR: u64 = 10;
pub const DEFAULT_JITTER: f64 = 0.1;
pub const DEFAULT_BETA: f64 = 1.0;
pub const DEFAULT_NEGATIVE_TTL: u64 = 5_000;
pub const DEFAULT_SOFT_TIMEOUT: u64 = 0;
pub const DEFAULT_HARD_TIMEOUT: u64 = 30_000;
pub const DEFAULT_REFRESH_BACKOFF: u64 = 10_000;
pub const DEFAULT_MAX_ENTRIES: u64 = 10_000;
/// The in-process L1 in front of Redis holds the hot keys only.
pub const DEFAULT_L1_MAX_ENTRIES: u64 = 1_000;
pub const DEFAULT_LOCK_TTL: u64 = 5_000;
pub const DEFAULT_REDIS_TIMEOUT: u64 = 1_000;
pub const DEFAULT_CIRCUIT_BREAKER_DURATION: u64 = 5_000;
/// 8 MiB: eight times memcached's item limit, far past what a cache entry
/// should be, and small enough that a runaway result is refused before it
/// is copied into Redis and every instance's memory.
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 8 << 20;
/// Redis's own limit of a string value.
pub const MAX_VALUE_BYTES: f64 = (512u64 << 20) as f64;

/// TTLs up to ~34 years: far past any use, and epoch + TTL cannot overflow.
pub const MAX_TTL: f64 = (1u64 << 40) as f64;
/// JS timers fire at once past 2^31 - 1 ms, so timeouts stop there.
pub const MAX_TIMEOUT: f64 = 2_147_483_647.0;

/// Cache options as they arrive from JS: absent fields take the defaults.
#[derive(Debug, Clone, Default)]
pub struct RawCacheOptions {
  pub ttl: Option<f64>,
  pub hard_ttl: Option<f64>,
  pub jitter: Option<f64>,
  pub beta: Option<f64>,
  pub negative_ttl: Option<f64>,
  pub soft_timeout: Option<f64>,
  pub hard_timeout: Option<f64>,
  pub refresh_backoff: Option<f64>,
  pub max_entries: Option<f64>,
  pub prefix: Option<String>,
  pub redis: Option<String>,
  pub lock_ttl: Option<f64>,
  pub l1: Option<bool>,
  pub redis_timeout: Option<f64>,
  pub circuit_breaker_duration: Option<f64>,
  pub max_value_bytes: Option<f64>,
}

/// The Redis part of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisConfig {
  pub url: String,
  /// The fleet lock's lease, ms; extended while the winner's loader runs.
  pub lock_ttl: u64,
  /// Whether an in-process L1 answers hot keys without Redis.
  pub l1: bool,
  /// Bound of each Redis command and connection attempt, ms.
  pub timeout: u64,
  /// How long Redis is skipped after a failure, ms.
  pub breaker_cooldown: u64,
}

/// The TTL part of the configuration: what a call may override.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntryPolicy {
  pub ttl: u64,
  pub hard_ttl: u64,
  pub negative_ttl: u64,
  pub beta: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CacheConfig {
  pub entry: EntryPolicy,
  pub jitter: f64,
  pub soft_timeout: u64,
  pub hard_timeout: u64,
  pub refresh_backoff: u64,
  pub max_entries: usize,
  /// Bound of a value's JSON text, UTF-8 bytes (checked where it is made).
  pub max_value_bytes: u64,
  pub prefix: String,
  pub redis: Option<RedisConfig>,
}

/// Per-call overrides of [`EntryPolicy`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCallOptions {
  pub ttl: Option<f64>,
  pub hard_ttl: Option<f64>,
  pub negative_ttl: Option<f64>,
  pub beta: Option<f64>,
}

impl RawCallOptions {
  pub fn is_empty(&self) -> bool {
    self.ttl.is_none()
      && self.hard_ttl.is_none()
      && self.negative_ttl.is_none()
      && self.beta.is_none()
  }
}

fn range(name: &str, rule: &str, value: f64) -> Error {
  Error::new(
    Code::InvalidOption,
    Kind::Range,
    format!("option `{name}` must be {rule}; got {value}"),
  )
}

fn millis(name: &str, value: Option<f64>, min: f64, max: f64, default: u64) -> Result<u64, Error> {
  let Some(v) = value else { return Ok(default) };
  let rule = if min > 0.0 {
    format!("a number of milliseconds > 0 and <= {max}")
  } else {
    format!("a number of milliseconds >= 0 and <= {max}")
  };
  if !v.is_finite() || v < min || v > max || (min > 0.0 && v <= 0.0) {
    return Err(range(name, &rule, v));
  }
  Ok(v.round().max(if min > 0.0 { 1.0 } else { 0.0 }) as u64)
}

fn beta(value: Option<f64>) -> Result<f64, Error> {
  match value {
    None => Ok(DEFAULT_BETA),
    Some(v) if (0.0..=1e6).contains(&v) => Ok(v),
    Some(v) => Err(range(
      "beta",
      "a finite number >= 0 (0 turns early refresh off)",
      v,
    )),
  }
}

impl CacheConfig {
  pub fn from_raw(raw: &RawCacheOptions) -> Result<CacheConfig, Error> {
    let ttl = millis("ttl", raw.ttl, f64::MIN_POSITIVE, MAX_TTL, DEFAULT_TTL)?;
    let hard_ttl = millis(
      "hardTtl",
      raw.hard_ttl,
      f64::MIN_POSITIVE,
      MAX_TTL,
      ttl.saturating_mul(HARD_TTL_FACTOR).min(MAX_TTL as u64),
    )?;
    if hard_ttl < ttl {
      return Err(Error::new(
        Code::InvalidOption,
        Kind::Range,
        format!("option `hardTtl` ({hard_ttl} ms) must be >= `ttl` ({ttl} ms): the hard TTL bounds how long a stale value is served after the soft one"),
      ));
    }
    let jitter = match raw.jitter {
      None => DEFAULT_JITTER,
      Some(j) if j.is_finite() && (0.0..1.0).contains(&j) => j,
      Some(j) => {
        return Err(range(
          "jitter",
          "a fraction >= 0 and < 1 (0.1 spreads TTLs by ±10 %)",
          j,
        ))
      }
    };
    let redis = match &raw.redis {
      None => None,
      Some(url) => Some(RedisConfig {
        url: check_redis_url(url)?,
        lock_ttl: millis("lockTtl", raw.lock_ttl, 3.0, MAX_TIMEOUT, DEFAULT_LOCK_TTL)?,
        l1: raw.l1.unwrap_or(true),
        timeout: millis(
          "redisTimeout",
          raw.redis_timeout,
          1.0,
          MAX_TIMEOUT,
          DEFAULT_REDIS_TIMEOUT,
        )?,
        breaker_cooldown: millis(
          "circuitBreakerDuration",
          raw.circuit_breaker_duration,
          0.0,
          MAX_TIMEOUT,
          DEFAULT_CIRCUIT_BREAKER_DURATION,
        )?,
      }),
    };
    for (name, given) in [
      ("lockTtl", raw.lock_ttl.is_some()),
      ("l1", raw.l1.is_some()),
      ("redisTimeout", raw.redis_timeout.is_some()),
      (
        "circuitBreakerDuration",
        raw.circuit_breaker_duration.is_some(),
      ),
    ] {
      if given && redis.is_none() {
        return Err(Error::new(
          Code::InvalidOption,
          Kind::Type,
          format!("option `{name}` applies to the Redis store; give `redis` too, or leave it out"),
        ));
      }
    }
    let max_entries = match raw.max_entries {
      None if redis.is_some() => DEFAULT_L1_MAX_ENTRIES,
      None => DEFAULT_MAX_ENTRIES,
      Some(n) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= u32::MAX as f64 => n as u64,
      Some(n) => return Err(range("maxEntries", "an integer >= 1", n)),
    };
    let max_value_bytes = match raw.max_value_bytes {
      None => DEFAULT_MAX_VALUE_BYTES,
      Some(n) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= MAX_VALUE_BYTES => n as u64,
      Some(n) => {
        return Err(range(
          "maxValueBytes",
          &format!("an integer >= 1 and <= {MAX_VALUE_BYTES} (Redis's limit)"),
          n,
        ))
      }
    };
    Ok(CacheConfig {
      entry: EntryPolicy {
        ttl,
        hard_ttl,
        negative_ttl: millis(
          "negativeTtl",
          raw.negative_ttl,
          0.0,
          MAX_TTL,
          DEFAULT_NEGATIVE_TTL,
        )?,
        beta: beta(raw.beta)?,
      },
      jitter,
      soft_timeout: millis(
        "softTimeout",
        raw.soft_timeout,
        0.0,
        MAX_TIMEOUT,
        DEFAULT_SOFT_TIMEOUT,
      )?,
      hard_timeout: millis(
        "hardTimeout",
        raw.hard_timeout,
        f64::MIN_POSITIVE,
        MAX_TIMEOUT,
        DEFAULT_HARD_TIMEOUT,
      )?,
      refresh_backoff: millis(
        "refreshBackoff",
        raw.refresh_backoff,
        0.0,
        MAX_TTL,
        DEFAULT_REFRESH_BACKOFF,
      )?,
      max_entries: max_entries as usize,
      max_value_bytes,
      prefix: raw.prefix.clone().unwrap_or_default(),
      redis,
    })
  }
}

/// A `redis://` or `rediss://` URL (user, password, db and query parts are
/// the client's to parse).
fn check_redis_url(url: &str) -> Result<String, Error> {
  let rest = url
    .strip_prefix("redis://")
    .or_else(|| url.strip_prefix("rediss://"));
  match rest {
    Some(rest) if !rest.is_empty() => Ok(url.to_string()),
    _ => Err(Error::new(
      Code::InvalidOption,
      Kind::Type,
      "option `redis` must be a redis:// or rediss:// URL, e.g. redis://127.0.0.1:6379",
    )),
  }
}

impl EntryPolicy {
  /// Applies a call's overrides. A call that sets `ttl` alone keeps the
  /// cache's hardTtl/ttl ratio, so a shorter-lived entry is not served stale
  /// for the cache's whole hard TTL.
  pub fn with(&self, call: &RawCallOptions) -> Result<EntryPolicy, Error> {
    if call.is_empty() {
      return Ok(*self);
    }
    let ttl = millis("ttl", call.ttl, f64::MIN_POSITIVE, MAX_TTL, self.ttl)?;
    let scaled_hard = if call.ttl.is_some() {
      ((ttl as f64) * (self.hard_ttl as f64 / self.ttl as f64)).round() as u64
    } else {
      self.hard_ttl.max(ttl)
    };
    let hard_ttl = millis(
      "hardTtl",
      call.hard_ttl,
      f64::MIN_POSITIVE,
      MAX_TTL,
      scaled_hard,
    )?;
    if hard_ttl < ttl {
      return Err(Error::new(
        Code::InvalidOption,
        Kind::Range,
        format!("option `hardTtl` ({hard_ttl} ms) must be >= `ttl` ({ttl} ms)"),
      ));
    }
    Ok(EntryPolicy {
      ttl,
      hard_ttl,
      negative_ttl: millis(
        "negativeTtl",
        call.negative_ttl,
        0.0,
        MAX_TTL,
        self.negative_ttl,
      )?,
      beta: match call.beta {
        None => self.beta,
        some => beta(some)?,
      },
    })
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn defaults() {
    let c = CacheConfig::from_raw(&RawCacheOptions::default()).unwrap();
    assert_eq!(c.entry.ttl, 60_000);
    assert_eq!(c.entry.hard_ttl, 600_000);
    assert_eq!(c.entry.negative_ttl, 5_000);
    assert_eq!(c.entry.beta, 1.0);
    assert_eq!(c.jitter, 0.1);
    assert_eq!(c.soft_timeout, 0);
    assert_eq!(c.hard_timeout, 30_000);
    assert_eq!(c.max_entries, 10_000);
    assert_eq!(c.max_value_bytes, 8 * 1024 * 1024);
  }

  #[test]
  fn hard_ttl_defaults_to_ten_times_ttl() {
    let raw = RawCacheOptions {
      ttl: Some(1_000.0),
      ..Default::default()
    };
    assert_eq!(CacheConfig::from_raw(&raw).unwrap().entry.hard_ttl, 10_000);
  }

  #[test]
  fn rejects_out_of_range_values_with_the_option_named() {
    let bad = [
      RawCacheOptions {
        ttl: Some(-1.0),
        ..Default::default()
      },
      RawCacheOptions {
        ttl: Some(0.0),
        ..Default::default()
      },
      RawCacheOptions {
        ttl: Some(f64::NAN),
        ..Default::default()
      },
      RawCacheOptions {
        ttl: Some(f64::INFINITY),
        ..Default::default()
      },
      RawCacheOptions {
        jitter: Some(1.0),
        ..Default::default()
      },
      RawCacheOptions {
        jitter: Some(-0.1),
        ..Default::default()
      },
      RawCacheOptions {
        beta: Some(-1.0),
        ..Default::default()
      },
      RawCacheOptions {
        negative_ttl: Some(-5.0),
        ..Default::default()
      },
      RawCacheOptions {
        hard_timeout: Some(0.0),
        ..Default::default()
      },
      RawCacheOptions {
        hard_timeout: Some(3e9),
        ..Default::default()
      },
      RawCacheOptions {
        max_entries: Some(0.0),
        ..Default::default()
      },
      RawCacheOptions {
        max_entries: Some(1.5),
        ..Default::default()
      },
      RawCacheOptions {
        ttl: Some(1_000.0),
        hard_ttl: Some(999.0),
        ..Default::default()
      },
      RawCacheOptions {
        max_value_bytes: Some(0.0),
        ..Default::default()
      },
      RawCacheOptions {
        max_value_bytes: Some(1e12),
        ..Default::default()
      },
      RawCacheOptions {
        max_value_bytes: Some(10.5),
        ..Default::default()
      },
    ];
    for raw in bad {
      let err = CacheConfig::from_raw(&raw).unwrap_err();
      assert_eq!(err.code, Code::InvalidOption, "{raw:?}");
      assert_eq!(err.kind, Kind::Range);
      assert!(err.message.contains("option `"), "{}", err.message);
    }
  }

  #[test]
  fn zero_negative_ttl_and_soft_timeout_are_allowed() {
    let raw = RawCacheOptions {
      negative_ttl: Some(0.0),
      soft_timeout: Some(0.0),
      beta: Some(0.0),
      jitter: Some(0.0),
      ..Default::default()
    };
    let c = CacheConfig::from_raw(&raw).unwrap();
    assert_eq!(
      (c.entry.negative_ttl, c.soft_timeout, c.entry.beta, c.jitter),
      (0, 0, 0.0, 0.0)
    );
  }

  #[test]
  fn redis_options() {
    let raw = RawCacheOptions {
      redis: Some("redis://127.0.0.1:6379/2".into()),
      ..Default::default()
    };
    let c = CacheConfig::from_raw(&raw).unwrap();
    let r = c.redis.unwrap();
    assert_eq!(
      (r.lock_ttl, r.l1, r.timeout, r.breaker_cooldown),
      (5_000, true, 1_000, 5_000)
    );
    assert_eq!(c.max_entries, 1_000);
    for url in ["http://x", "redis://", "127.0.0.1:6379", ""] {
      let raw = RawCacheOptions {
        redis: Some(url.into()),
        ..Default::default()
      };
      assert_eq!(
        CacheConfig::from_raw(&raw).unwrap_err().code,
        Code::InvalidOption,
        "{url}"
      );
    }
    let raw = RawCacheOptions {
      lock_ttl: Some(1_000.0),
      ..Default::default()
    };
    assert_eq!(
      CacheConfig::from_raw(&raw).unwrap_err().code,
      Code::InvalidOption
    );
  }

  #[test]
  fn call_ttl_keeps_the_hard_ratio() {
    let c = CacheConfig::from_raw(&RawCacheOptions::default()).unwrap();
    let call = RawCallOptions {
      ttl: Some(1_000.0),
      ..Default::default()
    };
    let p = c.entry.with(&call).unwrap();
    assert_eq!((p.ttl, p.hard_ttl), (1_000, 10_000));
    let call = RawCallOptions {
      hard_ttl: Some(700_000.0),
      ..Default::default()
    };
    assert_eq!(c.entry.with(&call).unwrap().hard_ttl, 700_000);
    let call = RawCallOptions {
      ttl: Some(5.0),
      hard_ttl: Some(4.0),
      ..Default::default()
    };
    assert_eq!(c.entry.with(&call).unwrap_err().code, Code::InvalidOption);
    let call = RawCallOptions {
      beta: Some(f64::NAN),
      ..Default::default()
    };
    assert_eq!(c.entry.with(&call).unwrap_err().code, Code::InvalidOption);
  }
}
