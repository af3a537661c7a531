//! The options the native cache takes. The JS wrapper checks types and
//! unknown names first (so a wrong type is a `TypeError` with our code);
//! ranges are checked by `core::options`.

use crate::core::options::RawCacheOptions;
use napi_derive::napi;

/// Options of `new Cache(options)`. Durations are milliseconds.
#[napi(object)]
#[derive(Debug, Default)]
pub struct CacheOptions {
  /// Soft TTL, ms: how long a value is fresh. Default 60 000. Past it, the
  /// value is served stale while one background refresh runs.
  pub ttl: Option<f64>,
  /// Hard TTL, ms: how long a value may still be served stale; must be
  /// >= `ttl`. Default 10 × `ttl`. Past it, the entry is a miss.
  pub hard_ttl: Option<f64>,
  /// Spread of every TTL written, a fraction in [0, 1): each TTL is drawn
  /// uniformly from ttl × (1 ± jitter), so keys written together do not
  /// expire together. Default 0.1.
  pub jitter: Option<f64>,
  /// XFetch eagerness (>= 0): a fresh entry is refreshed early when
  /// `now - computeMs * beta * ln(u) >= freshUntil`. Default 1; 0 turns
  /// early refresh off; > 1 refreshes earlier.
  pub beta: Option<f64>,
  /// How long, ms, a "not found" result (a loader returning `null` or
  /// `undefined`) is cached. Default 5 000; 0 turns negative caching off.
  pub negative_ttl: Option<f64>,
  /// How long, ms, a caller holding a stale value waits for the refresh
  /// before it is answered with the stale value. Default 0: at once.
  pub soft_timeout: Option<f64>,
  /// How long, ms, a load may run: past it its waiters reject with
  /// `ERR_HERDCACHE_TIMEOUT` and the loader's `signal` aborts. Default 30 000.
  pub hard_timeout: Option<f64>,
  /// How long, ms, a key is not refreshed in the background again after a
  /// refresh failed; the stale value is served meanwhile. Default 10 000.
  pub refresh_backoff: Option<f64>,
  /// Bound of the embedded store; the least recently used entry is evicted
  /// past it. Default 10 000.
  pub max_entries: Option<f64>,
  /// A namespace put before every key (in Redis: the value of key `k` is
  /// stored under `{<prefix>k}`). Default ''.
  pub prefix: Option<String>,
  /// A `redis://` or `rediss://` URL (user, password and db in the URL).
  /// With it, all instances sharing the Redis recompute a key once per
  /// expiry between them. Without it, the embedded in-process store.
  pub redis: Option<String>,
  /// Lease of the fleet lock, ms (Redis only). The winner extends it every
  /// lockTtl/3 while its loader runs (up to `hardTimeout`), so a crashed
  /// winner frees the key within lockTtl. Default 5 000.
  pub lock_ttl: Option<f64>,
  /// Keep an in-process L1 in front of Redis (bounded by `maxEntries`,
  /// default 1 000 with Redis), invalidated on every instance when a key is
  /// set, deleted or refreshed elsewhere. Default true.
  pub l1: Option<bool>,
  /// Bound of each Redis command and connection attempt, ms. Default 1 000.
  pub redis_timeout: Option<f64>,
  /// After a Redis failure, Redis is skipped for this long, ms (calls are
  /// served from memory or by the loader), then one call probes it again.
  /// Default 5 000.
  pub circuit_breaker_duration: Option<f64>,
  /// Bound of one value, in UTF-8 bytes of its JSON text. A loader result
  /// or `set()` value past it is refused with `ERR_HERDCACHE_VALUE_TOO_LARGE`
  /// (nothing is stored; a background refresh keeps the stale value), so a
  /// runaway result is not copied into Redis and every instance's memory.
  /// Default 8 MiB (8 388 608); at most 512 MiB, Redis's limit.
  pub max_value_bytes: Option<f64>,
}

impl CacheOptions {
  pub fn to_raw(&self) -> RawCacheOptions {
    RawCacheOptions {
      ttl: self.ttl,
      hard_ttl: self.hard_ttl,
      jitter: self.jitter,
      beta: self.beta,
      negative_ttl: self.negative_ttl,
      soft_timeout: self.soft_timeout,
      hard_timeout: self.hard_timeout,
      refresh_backoff: self.refresh_backoff,
      max_entries: self.max_entries,
      prefix: self.prefix.clone(),
      redis: self.redis.clone(),
      lock_ttl: self.lock_ttl,
      l1: self.l1,
      redis_timeout: self.redis_timeout,
      circuit_breaker_duration: self.circuit_breaker_duration,
      max_value_bytes: self.max_value_bytes,
    }
  }
}
