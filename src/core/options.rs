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
pub const DEFAULT_RECOVERY_MAX_ENTRIES: u64 = 10_000;
/// Five minutes: a `set` or `delete` older than that is rarely still wanted.
pub const DEFAULT_RECOVERY_MAX_AGE: u64 = 300_000;
/// 8 MiB: eight times memcached's item limit, far past what a cache entry
/// should be, and small enough that a runaway result is refused before it
/// is copied into Redis and every instance's memory.
pub const DEFAULT_MAX_VALUE_BYTES: u64 = 8 << 20;
/// Redis's own limit of a string value.
pub const MAX_VALUE_BYTES: f64 = (512u64 << 20) as f64;
/// Loads that wait for a slot of `maxConcurrentLoads`: enough for a cold
/// start of a thousand keys behind a small cap, bounded so a storm past it
/// gets a coded error at once instead of an ever longer wait.
pub const DEFAULT_MAX_QUEUED_LOADS: u64 = 1_000;

/// TTLs up to ~34 years: far past any use, and epoch + TTL cannot overflow.
pub const MAX_TTL: f64 = (1u64 << 40) as f64;
/// JS timers fire at once past 2^31 - 1 ms, so timeouts stop there.
pub const MAX_TIMEOUT: f64 = 2_147_483_647.0;

/// Every option of `new Cache(options)` that the native side takes, declared
/// once: its doc (which napi-rs copies into `binding.d.ts`), its Rust type
/// (which gives its JS type), its JS name and its default as the README's
/// option tables write it (`None`: no default). `$then` is a macro that
/// receives the list: `raw_cache_options` below makes [`RawCacheOptions`]
/// and [`CACHE_OPTIONS`]; the binding makes its `#[napi(object)]` struct.
/// A new option goes here, into [`CacheConfig::from_raw`] and into the
/// README; `__test__/names.test.js` fails until the README has it. The docs
/// are `#[doc = "..."]` attributes, not `///`: passed through a macro, `///`
/// becomes a raw string, which napi-derive copies with its `r"` into the
/// `.d.ts`.
macro_rules! cache_options {
  ($then:ident) => {
    $then! {
      #[doc = " Soft TTL, ms: how long a value is fresh. Default 60 000. Past it, the"]
      #[doc = " value is served stale while one background refresh runs."]
      ttl: f64 => "ttl", default = Some("60000");
      #[doc = " Hard TTL, ms: how long a value may still be served stale; must be"]
      #[doc = " >= `ttl`. Default 10 × `ttl`. Past it, the entry is a miss."]
      hard_ttl: f64 => "hardTtl", default = Some("10 × ttl");
      #[doc = " Spread of every TTL written, a fraction in [0, 1): each TTL is drawn"]
      #[doc = " uniformly from ttl × (1 ± jitter), so keys written together do not"]
      #[doc = " expire together. Default 0.1."]
      jitter: f64 => "jitter", default = Some("0.1");
      #[doc = " XFetch eagerness (>= 0): a fresh entry is refreshed early when"]
      #[doc = " `now - computeMs * beta * ln(u) >= freshUntil`. Default 1; 0 turns"]
      #[doc = " early refresh off; > 1 refreshes earlier."]
      beta: f64 => "beta", default = Some("1");
      #[doc = " How long, ms, a \"not found\" result (a loader returning `null` or"]
      #[doc = " `undefined`) is cached. Default 5 000; 0 turns negative caching off."]
      negative_ttl: f64 => "negativeTtl", default = Some("5000");
      #[doc = " How long, ms, this process's memory (the L1) uses its copy of an"]
      #[doc = " entry; past it a call reads Redis again (without Redis: loads),"]
      #[doc = " though the entry's TTL runs on. Default: the entry's own TTLs."]
      l1_ttl: f64 => "l1Ttl", default = None;
      #[doc = " How long, ms, a caller holding a stale value waits for the refresh"]
      #[doc = " before it is answered with the stale value. Default 0: at once."]
      soft_timeout: f64 => "softTimeout", default = Some("0");
      #[doc = " How long, ms, a load may run: past it its waiters reject with"]
      #[doc = " `ERR_HERDCACHE_TIMEOUT` and the loader's `signal` aborts. Default 30 000."]
      hard_timeout: f64 => "hardTimeout", default = Some("30000");
      #[doc = " The longest back-off, ms, between background refreshes of a key that"]
      #[doc = " keep failing: 250 ms after the first failure, doubling up to this; the"]
      #[doc = " stale value is served meanwhile; 0 turns it off. Default 10 000."]
      refresh_backoff: f64 => "refreshBackoff", default = Some("10000");
      #[doc = " Bound of the embedded store; the least recently used entry is evicted"]
      #[doc = " past it. Default 10 000."]
      max_entries: f64 => "maxEntries", default = Some("10000");
      #[doc = " Bound of this process's memory in bytes: the values it holds (the"]
      #[doc = " UTF-8 bytes of their JSON text) and their keys; the least recently"]
      #[doc = " used entries are evicted past it, as past `maxEntries`. An integer"]
      #[doc = " >= 1, at most 4 GiB. Default: no bound in bytes."]
      l1_max_bytes: f64 => "l1MaxBytes", default = None;
      #[doc = " The largest value, in bytes, this process keeps in memory: a bigger"]
      #[doc = " one is read from Redis on every call (coalesced), or without Redis"]
      #[doc = " loaded every time. An integer >= 1. Default: `l1MaxBytes`."]
      l1_max_value_bytes: f64 => "l1MaxValueBytes", default = None;
      #[doc = " A namespace put before every key (in Redis: the value of key `k` is"]
      #[doc = " stored under `{<prefix>k}`). Default ''."]
      prefix: String => "prefix", default = Some("''");
      #[doc = " A `redis://` or `rediss://` URL (user, password and db in the URL);"]
      #[doc = " for a Redis Cluster, `{ cluster: [url, ...] }` (some of its nodes)."]
      #[doc = " With it, all instances sharing the Redis recompute a key once per"]
      #[doc = " expiry between them. Without it, the embedded in-process store."]
      redis: String => "redis", default = None;
      #[doc = " Lease of the fleet lock, ms (Redis only). The winner extends it every"]
      #[doc = " lockTtl/3 while its loader runs (up to `hardTimeout`), so a crashed"]
      #[doc = " winner frees the key within lockTtl. Default 5 000."]
      lock_ttl: f64 => "lockTtl", default = Some("5000");
      #[doc = " Keep an in-process L1 in front of Redis (bounded by `maxEntries`,"]
      #[doc = " default 1 000 with Redis), invalidated on every instance when a key is"]
      #[doc = " set, deleted or refreshed elsewhere. Default true."]
      l1: bool => "l1", default = Some("true");
      #[doc = " Have Redis tell every instance's L1 of changes made outside"]
      #[doc = " herdcache (`redis-cli DEL`, another service's `SET`, `EXPIRE`,"]
      #[doc = " evictions, `FLUSHDB`): client tracking on the events connection"]
      #[doc = " (`CLIENT TRACKING ON BCAST PREFIX`, RESP3), per primary on a"]
      #[doc = " cluster. A server that cannot (before Redis 6) is reported once, as"]
      #[doc = " a process warning; an ACL that refuses it, once, with"]
      #[doc = " `ERR_HERDCACHE_REDIS_NOPERM`; either way the cache runs as without"]
      #[doc = " it. With `l1` only. Default true."]
      tracking: bool => "tracking", default = Some("true");
      #[doc = " Bound of each Redis command and connection attempt, ms. Default 1 000."]
      redis_timeout: f64 => "redisTimeout", default = Some("1000");
      #[doc = " After a Redis failure, Redis is skipped for this long, ms (calls are"]
      #[doc = " served from memory or by the loader), then one call probes it again."]
      #[doc = " Default 5 000."]
      circuit_breaker_duration: f64 => "circuitBreakerDuration", default = Some("5000");
      #[doc = " How many `set`, `delete` and `clear` calls that could not reach Redis"]
      #[doc = " are kept to be delivered when it is back (auto-recovery; one per key,"]
      #[doc = " the latest). Past it the oldest is dropped, and counted in"]
      #[doc = " `recoveryDropped`. Default 10 000; 0 keeps none."]
      recovery_max_entries: f64 => "recoveryMaxEntries", default = Some("10000");
      #[doc = " How long, ms, such a call is kept to be delivered; older ones are"]
      #[doc = " dropped (counted in `recoveryDropped`). Default 300 000 (5 min)."]
      recovery_max_age: f64 => "recoveryMaxAge", default = Some("300000");
      #[doc = " Bound of one value, in UTF-8 bytes of its JSON text. A loader result"]
      #[doc = " or `set()` value past it is refused with `ERR_HERDCACHE_VALUE_TOO_LARGE`"]
      #[doc = " (nothing is stored; a background refresh keeps the stale value), so a"]
      #[doc = " runaway result is not copied into Redis and every instance's memory."]
      #[doc = " Default 8 MiB (8 388 608); at most 512 MiB, Redis's limit."]
      max_value_bytes: f64 => "maxValueBytes", default = Some("8388608");
      #[doc = " The most loaders running at once in this process, across distinct"]
      #[doc = " keys (an integer >= 1); loads past it wait in a FIFO queue (callers"]
      #[doc = " with a stale value are answered at once). Default: no cap."]
      max_concurrent_loads: f64 => "maxConcurrentLoads", default = None;
      #[doc = " Bound of that queue (an integer >= 0; 0: no queue): a cold load past"]
      #[doc = " it rejects its callers with `ERR_HERDCACHE_LOAD_QUEUE_FULL`, a"]
      #[doc = " background refresh is skipped. Only with `maxConcurrentLoads`."]
      #[doc = " Default 1 000."]
      max_queued_loads: f64 => "maxQueuedLoads", default = Some("1000");
      #[doc = " The most loaders running at once across every instance sharing the"]
      #[doc = " Redis (an integer >= 1; Redis only): a semaphore in Redis whose"]
      #[doc = " slots are leased like the lock (a crashed holder frees its slots"]
      #[doc = " within `lockTtl`) and handed out in turn, so no instance starves;"]
      #[doc = " loads past it wait in this process's queue. When Redis cannot be"]
      #[doc = " asked, loads run under the per-process cap alone"]
      #[doc = " (`maxConcurrentLoads`, which defaults to this). Default: no cap."]
      fleet_max_concurrent_loads: f64 => "fleetMaxConcurrentLoads", default = None;
      #[doc = " How values are stored: `'json'` (JSON text, with `Buffer`,"]
      #[doc = " `Uint8Array` and `ArrayBuffer` parts kept as raw bytes), or an object"]
      #[doc = " `{ name, serialize(value), deserialize(bytes) }` (the JS wrapper"]
      #[doc = " passes its `name`: 1 to 64 letters, digits or `._:@/+-`). The name is"]
      #[doc = " stored with each value; a value written under another name is a miss."]
      serializer: String => "serializer", default = Some("'json'");
      #[doc = " `{ threshold, level }`: values whose stored bytes are `threshold` or"]
      #[doc = " more (default 1 024) are stored zstd-compressed (`level` 1 to 22,"]
      #[doc = " default 3) when that saves bytes; readers decompress them whatever"]
      #[doc = " their own option. The JS wrapper passes the object as JSON text."]
      #[doc = " Redis only. Default: values are stored as they are."]
      compress: String => "compress", default = None;
    }
  };
}
// For the binding, whose `#[napi(object)]` form of the list is the only
// other user.
#[cfg(feature = "napi")]
pub(crate) use cache_options;

/// The JS type (`typeof`) of an option's Rust type.
pub trait JsType {
  const JS_TYPE: &'static str;
}

impl JsType for f64 {
  const JS_TYPE: &'static str = "number";
}

impl JsType for String {
  const JS_TYPE: &'static str = "string";
}

impl JsType for bool {
  const JS_TYPE: &'static str = "boolean";
}

/// One entry of [`CACHE_OPTIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionSpec {
  /// The JS name (camelCase).
  pub name: &'static str,
  /// `number`, `string` or `boolean`, as `typeof` says.
  pub js_type: &'static str,
  /// As the README's option tables write it; `None`: no default.
  pub default: Option<&'static str>,
  /// The doc comment, one line per `///` line.
  pub doc: &'static str,
  /// The Rust field's name, to check the JS name against (tests).
  pub field: &'static str,
}

macro_rules! raw_cache_options {
  ($($(#[doc = $doc:tt])* $field:ident: $ty:tt => $js:literal, default = $default:expr;)*) => {
    /// Cache options as they arrive from JS: absent fields take the defaults.
    #[derive(Debug, Clone, Default)]
    pub struct RawCacheOptions {
      $(pub $field: Option<$ty>,)*
    }

    /// The native options of `new Cache(options)`, in declaration order.
    pub const CACHE_OPTIONS: &[OptionSpec] = &[$(OptionSpec {
      name: $js,
      js_type: <$ty as JsType>::JS_TYPE,
      default: $default,
      doc: concat!($($doc, "\n"),*),
      field: stringify!($field),
    },)*];
  };
}

cache_options!(raw_cache_options);

/// The Redis part of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct RedisConfig {
  pub endpoint: RedisEndpoint,
  /// The fleet lock's lease, ms; extended while the winner's loader runs.
  pub lock_ttl: u64,
  /// Whether an in-process L1 answers hot keys without Redis.
  pub l1: bool,
  /// Whether the server is asked to tell the L1 of changes made outside
  /// herdcache (client tracking); only with `l1`.
  pub tracking: bool,
  /// Bound of each Redis command and connection attempt, ms.
  pub timeout: u64,
  /// How long Redis is skipped after a failure, ms.
  pub breaker_cooldown: u64,
  /// How many calls that could not reach Redis are kept to be delivered.
  pub recovery_max_entries: u64,
  /// How long each of them is kept, ms.
  pub recovery_max_age: u64,
  /// `fleetMaxConcurrentLoads`: the fleet's load slots (`None`: no cap).
  pub fleet_max_concurrent_loads: Option<u64>,
}

/// Where the Redis store is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedisEndpoint {
  /// One server (or a proxy in front of several): its URL.
  Node(String),
  /// A Redis Cluster (or Valkey cluster): the URLs of some of its nodes,
  /// the seeds the client learns the topology from.
  Cluster(Vec<String>),
}

/// The TTL part of the configuration: what a call may override.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EntryPolicy {
  pub ttl: u64,
  pub hard_ttl: u64,
  pub negative_ttl: u64,
  pub beta: f64,
  /// How long the L1 uses its copy (`l1Ttl`); `None`: as long as the
  /// entry's TTLs allow.
  pub l1_ttl: Option<u64>,
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
  /// The bound in bytes of what memory holds (`l1MaxBytes`), and of one
  /// value it keeps (`l1MaxValueBytes`, never above the first).
  pub l1_max_bytes: Option<u64>,
  pub l1_max_value_bytes: Option<u64>,
  /// The load bulkhead (lib/bulkhead.js): loaders running at once in this
  /// process as given (`None`: no cap, or with `fleetMaxConcurrentLoads`
  /// that one: [`CacheConfig::process_load_cap`]), and the queue behind them.
  pub max_concurrent_loads: Option<u64>,
  pub max_queued_loads: u64,
  pub prefix: String,
  pub redis: Option<RedisConfig>,
  /// The serializer's name (`core::body`): a stored value of another is a miss.
  pub serializer: String,
  /// The `compress` option: `None`, values are stored as they are.
  pub compress: Option<Compress>,
}

/// What one `getOrLoad` call asks of the tiers: `forceFresh: true` (load
/// now: no value written before the call answers it, though a load already
/// running in this process is joined), `l1: false` (this process's memory is
/// neither read nor written), `redis: false` (the shared store is neither
/// read, locked nor written). The JS wrapper passes them as the bits of one
/// number: bit `i` is [`Tiers::OPTIONS`]`[i]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tiers {
  pub force_fresh: bool,
  pub skip_l1: bool,
  pub skip_redis: bool,
}

impl Tiers {
  /// The call options behind the bits, in bit order (`names().tiers`).
  pub const OPTIONS: [&'static str; 3] = ["forceFresh", "l1", "redis"];

  /// The tiers of `bits` (bits past [`Tiers::OPTIONS`] are ignored).
  pub fn from_bits(bits: u32) -> Tiers {
    Tiers {
      force_fresh: bits & 1 != 0,
      skip_l1: bits & 2 != 0,
      skip_redis: bits & 4 != 0,
    }
  }

  /// Whether the call reads memory first, as a call without these options.
  pub fn reads_l1(self) -> bool {
    !self.force_fresh && !self.skip_l1
  }
}

/// Values of `threshold` bytes or more are stored compressed at `level`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Compress {
  pub threshold: u64,
  pub level: i32,
}

/// The `compress` option's threshold when it gives none: Rails's
/// `compress_threshold`; below it zstd's frame costs more than it saves.
pub const DEFAULT_COMPRESS_THRESHOLD: u64 = 1024;
/// zstd's own default level.
pub const DEFAULT_COMPRESS_LEVEL: i32 = 3;

/// Per-call overrides of [`EntryPolicy`].
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCallOptions {
  pub ttl: Option<f64>,
  pub hard_ttl: Option<f64>,
  pub negative_ttl: Option<f64>,
  pub beta: Option<f64>,
  pub l1_ttl: Option<f64>,
}

impl RawCallOptions {
  pub fn is_empty(&self) -> bool {
    self.ttl.is_none()
      && self.hard_ttl.is_none()
      && self.negative_ttl.is_none()
      && self.beta.is_none()
      && self.l1_ttl.is_none()
  }
}

/// `l1Ttl`, ms (> 0), or `otherwise` when not given.
fn l1_ttl(value: Option<f64>, otherwise: Option<u64>) -> Result<Option<u64>, Error> {
  match value {
    None => Ok(otherwise),
    some => millis("l1Ttl", some, f64::MIN_POSITIVE, MAX_TTL, 0).map(Some),
  }
}

fn range(name: &str, rule: &str, value: f64) -> Error {
  Error::new(
    Code::InvalidOption,
    Kind::Range,
    format!("option `{name}` must be {rule}; got {}", js_number(value)),
  )
}

/// A number as JavaScript prints it: `Infinity`, `-Infinity`, `NaN`, `1.5`.
fn js_number(value: f64) -> String {
  if value.is_nan() {
    "NaN".to_string()
  } else if value.is_infinite() {
    if value > 0.0 { "Infinity" } else { "-Infinity" }.to_string()
  } else {
    value.to_string()
  }
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
  /// The cache's configuration, or a coded error naming the first bad
  /// option found.
  pub fn from_raw(raw: &RawCacheOptions) -> Result<CacheConfig, Error> {
    let (ttl, hard_ttl) = ttls(raw)?;
    let jitter = jitter(raw.jitter)?;
    let redis = match &raw.redis {
      None => None,
      Some(text) => Some(RedisConfig::from_raw(text, raw)?),
    };
    refuse_redis_only(raw, redis.is_some())?;
    let max_entries =
      integer("maxEntries", raw.max_entries, 1, "an integer >= 1")?.unwrap_or(match redis {
        Some(_) => DEFAULT_L1_MAX_ENTRIES,
        None => DEFAULT_MAX_ENTRIES,
      });
    let max_value_bytes = max_value_bytes(raw.max_value_bytes)?;
    let positive = "an integer >= 1 (bytes), at most 4294967295";
    let l1_max_bytes = integer("l1MaxBytes", raw.l1_max_bytes, 1, positive)?;
    let l1_max_value_bytes = integer("l1MaxValueBytes", raw.l1_max_value_bytes, 1, positive)?;
    let (max_concurrent_loads, max_queued_loads) = load_caps(raw, redis.as_ref())?;
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
        l1_ttl: l1_ttl(raw.l1_ttl, None)?,
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
      l1_max_bytes,
      l1_max_value_bytes: match (l1_max_value_bytes, l1_max_bytes) {
        (Some(value), Some(all)) => Some(value.min(all)),
        (value, all) => value.or(all),
      },
      max_concurrent_loads,
      max_queued_loads,
      prefix: raw.prefix.clone().unwrap_or_default(),
      redis,
      serializer: serializer(raw.serializer.as_deref())?,
      compress: raw.compress.as_deref().map(compress).transpose()?,
    })
  }
}

/// `ttl` and `hardTtl` (by default a multiple of `ttl`), the hard one no shorter.
fn ttls(raw: &RawCacheOptions) -> Result<(u64, u64), Error> {
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
  Ok((ttl, hard_ttl))
}

fn jitter(value: Option<f64>) -> Result<f64, Error> {
  match value {
    None => Ok(DEFAULT_JITTER),
    Some(j) if j.is_finite() && (0.0..1.0).contains(&j) => Ok(j),
    Some(j) => Err(range(
      "jitter",
      "a fraction >= 0 and < 1 (0.1 spreads TTLs by ±10 %)",
      j,
    )),
  }
}

fn max_value_bytes(value: Option<f64>) -> Result<u64, Error> {
  match value {
    None => Ok(DEFAULT_MAX_VALUE_BYTES),
    Some(n) if n.is_finite() && n >= 1.0 && n.fract() == 0.0 && n <= MAX_VALUE_BYTES => {
      Ok(n as u64)
    }
    Some(n) => Err(range(
      "maxValueBytes",
      &format!("an integer >= 1 and <= {MAX_VALUE_BYTES} (Redis's limit)"),
      n,
    )),
  }
}

/// An option of the Redis store given without `redis` is a mistake, said
/// as one (it would do nothing).
/// The `compress` option, as the JS wrapper passes it: `{ threshold?,
/// level? }` as JSON text.
fn compress(text: &str) -> Result<Compress, Error> {
  let bad = |what: &str| {
    Error::new(
      Code::InvalidOption,
      Kind::Range,
      format!("option `compress` must be {{ threshold?, level? }}: {what}"),
    )
  };
  let value: serde_json::Value = serde_json::from_str(text).map_err(|_| bad("an object"))?;
  let object = value.as_object().ok_or_else(|| bad("an object"))?;
  if let Some(other) = object.keys().find(|k| *k != "threshold" && *k != "level") {
    return Err(bad(&format!("unknown member `{other}`")));
  }
  let whole = |name: &str, min: f64, max: f64| match object.get(name) {
    None | Some(serde_json::Value::Null) => Ok(None),
    Some(v) => match v.as_f64() {
      Some(n) if n.fract() == 0.0 && (min..=max).contains(&n) => Ok(Some(n)),
      _ => Err(bad(&format!(
        "`{name}` an integer from {min} to {max}; got {v}"
      ))),
    },
  };
  let threshold = whole("threshold", 0.0, MAX_VALUE_BYTES)?;
  let level = whole("level", 1.0, 22.0)?;
  Ok(Compress {
    threshold: threshold.map_or(DEFAULT_COMPRESS_THRESHOLD, |n| n as u64),
    level: level.map_or(DEFAULT_COMPRESS_LEVEL, |n| n as i32),
  })
}

/// The longest serializer name: it is written into every stored value.
pub const MAX_SERIALIZER_NAME: usize = 64;

/// The serializer's name (`'json'` when not given): one word of
/// [`MAX_SERIALIZER_NAME`] characters at most, so it reads back from the
/// entry's format line (`core::body`) as it was written.
fn serializer(name: Option<&str>) -> Result<String, Error> {
  let name = name.unwrap_or(crate::core::body::JSON_FORMAT);
  let allowed = |c: char| c.is_ascii_alphanumeric() || "._:@/+-".contains(c);
  if name.is_empty() || name.len() > MAX_SERIALIZER_NAME || !name.chars().all(allowed) {
    return Err(Error::new(
      Code::InvalidOption,
      Kind::Range,
      format!(
        "option `serializer`: its name must be 1 to {MAX_SERIALIZER_NAME} letters, digits or `._:@/+-` (it is stored with every value); got {name:?}"
      ),
    ));
  }
  Ok(name.to_string())
}

fn refuse_redis_only(raw: &RawCacheOptions, has_redis: bool) -> Result<(), Error> {
  for (name, given) in [
    ("lockTtl", raw.lock_ttl.is_some()),
    ("l1", raw.l1.is_some()),
    ("tracking", raw.tracking.is_some()),
    ("redisTimeout", raw.redis_timeout.is_some()),
    (
      "circuitBreakerDuration",
      raw.circuit_breaker_duration.is_some(),
    ),
    ("recoveryMaxEntries", raw.recovery_max_entries.is_some()),
    ("recoveryMaxAge", raw.recovery_max_age.is_some()),
    (
      "fleetMaxConcurrentLoads",
      raw.fleet_max_concurrent_loads.is_some(),
    ),
    ("compress", raw.compress.is_some()),
  ] {
    if given && !has_redis {
      return Err(Error::new(
        Code::InvalidOption,
        Kind::Type,
        format!("option `{name}` applies to the Redis store; give `redis` too, or leave it out"),
      ));
    }
  }
  Ok(())
}

/// `maxConcurrentLoads` and `maxQueuedLoads` (which bounds the queue of a
/// cap, this process's or the fleet's, and needs one).
fn load_caps(
  raw: &RawCacheOptions,
  redis: Option<&RedisConfig>,
) -> Result<(Option<u64>, u64), Error> {
  let max_concurrent_loads = integer(
    "maxConcurrentLoads",
    raw.max_concurrent_loads,
    1,
    "an integer >= 1",
  )?;
  let capped =
    max_concurrent_loads.is_some() || redis.is_some_and(|r| r.fleet_max_concurrent_loads.is_some());
  let max_queued_loads = match raw.max_queued_loads {
    Some(_) if !capped => {
      return Err(Error::new(
        Code::InvalidOption,
        Kind::Type,
        "option `maxQueuedLoads` bounds the queue of `maxConcurrentLoads` (or `fleetMaxConcurrentLoads`); give one of them too, or leave it out",
      ))
    }
    queued => integer(
      "maxQueuedLoads",
      queued,
      0,
      "an integer >= 0 (0: no queue, loads past maxConcurrentLoads are refused)",
    )?
    .unwrap_or(DEFAULT_MAX_QUEUED_LOADS),
  };
  Ok((max_concurrent_loads, max_queued_loads))
}

impl RedisConfig {
  /// The Redis store's options, `text` its URL (or cluster seeds).
  fn from_raw(text: &str, raw: &RawCacheOptions) -> Result<RedisConfig, Error> {
    Ok(RedisConfig {
      endpoint: redis_endpoint(text)?,
      lock_ttl: millis("lockTtl", raw.lock_ttl, 3.0, MAX_TIMEOUT, DEFAULT_LOCK_TTL)?,
      l1: raw.l1.unwrap_or(true),
      tracking: raw.tracking.unwrap_or(true) && raw.l1.unwrap_or(true),
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
      recovery_max_entries: integer(
        "recoveryMaxEntries",
        raw.recovery_max_entries,
        0,
        "an integer >= 0 (0 keeps none)",
      )?
      .unwrap_or(DEFAULT_RECOVERY_MAX_ENTRIES),
      recovery_max_age: millis(
        "recoveryMaxAge",
        raw.recovery_max_age,
        0.0,
        MAX_TTL,
        DEFAULT_RECOVERY_MAX_AGE,
      )?,
      fleet_max_concurrent_loads: integer(
        "fleetMaxConcurrentLoads",
        raw.fleet_max_concurrent_loads,
        1,
        "an integer >= 1",
      )?,
    })
  }
}

impl CacheConfig {
  /// The cap of the loads running at once in this process:
  /// `maxConcurrentLoads`, else `fleetMaxConcurrentLoads` (an instance never
  /// runs more than the fleet's, and when Redis cannot be asked that is
  /// the cap that holds). `None`: no bulkhead.
  pub fn process_load_cap(&self) -> Option<u64> {
    self.max_concurrent_loads.or_else(|| {
      self
        .redis
        .as_ref()
        .and_then(|r| r.fleet_max_concurrent_loads)
    })
  }
}

/// An option that counts something: an integer `>= min` (and within u32),
/// or `None` when not given; else a RangeError saying it must be `what`.
fn integer(name: &str, value: Option<f64>, min: u32, what: &str) -> Result<Option<u64>, Error> {
  match value {
    None => Ok(None),
    Some(n)
      if n.is_finite() && n >= f64::from(min) && n.fract() == 0.0 && n <= f64::from(u32::MAX) =>
    {
      Ok(Some(n as u64))
    }
    Some(n) => Err(range(name, what, n)),
  }
}

/// The `redis` option: a URL, or (as the JS wrapper passes `{ cluster:
/// [...] }`) that object as JSON text.
fn redis_endpoint(text: &str) -> Result<RedisEndpoint, Error> {
  if !text.starts_with('{') {
    return check_redis_url(text).map(RedisEndpoint::Node);
  }
  let bad = || {
    Error::new(
      Code::InvalidOption,
      Kind::Type,
      "option `redis` must be a redis:// or rediss:// URL, or { cluster: [url, ...] } with the URLs of some of the cluster's nodes, e.g. { cluster: ['redis://127.0.0.1:7000'] }",
    )
  };
  let value: serde_json::Value = serde_json::from_str(text).map_err(|_| bad())?;
  let object = value.as_object().ok_or_else(bad)?;
  if object.keys().any(|k| k != "cluster") {
    return Err(bad());
  }
  let seeds = object
    .get("cluster")
    .and_then(|c| c.as_array())
    .filter(|c| !c.is_empty())
    .ok_or_else(bad)?;
  let urls = seeds
    .iter()
    .map(|url| url.as_str().ok_or_else(bad).and_then(check_redis_url))
    .collect::<Result<Vec<_>, _>>()?;
  if urls
    .iter()
    .any(|u| u.starts_with("rediss://") != urls[0].starts_with("rediss://"))
  {
    return Err(Error::new(
      Code::InvalidOption,
      Kind::Type,
      "option `redis.cluster`: every node URL must use the same scheme (all redis:// or all rediss://)",
    ));
  }
  Ok(RedisEndpoint::Cluster(urls))
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
      l1_ttl: l1_ttl(call.l1_ttl, self.l1_ttl)?,
    })
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn numbers_in_messages_read_as_javascript_prints_them() {
    assert_eq!(js_number(f64::INFINITY), "Infinity");
    assert_eq!(js_number(f64::NEG_INFINITY), "-Infinity");
    assert_eq!(js_number(f64::NAN), "NaN");
    assert_eq!(js_number(1.5), "1.5");
    assert!(range("ttl", "a number", f64::INFINITY)
      .message
      .ends_with("got Infinity"));
  }

  /// napi-rs names an object field by camel-casing it; the table's JS
  /// names must be those names.
  #[test]
  fn option_names_are_the_camel_cased_fields() {
    let camel = |field: &str| {
      let mut out = String::new();
      let mut upper = false;
      for c in field.chars() {
        if c == '_' {
          upper = true;
        } else if upper {
          out.extend(c.to_uppercase());
          upper = false;
        } else {
          out.push(c);
        }
      }
      out
    };
    let mut seen = std::collections::HashSet::new();
    for option in CACHE_OPTIONS {
      assert_eq!(option.name, camel(option.field), "{option:?}");
      assert!(seen.insert(option.name), "{} declared twice", option.name);
      assert!(!option.doc.trim().is_empty(), "{} has no doc", option.name);
    }
    assert_eq!(CACHE_OPTIONS.len(), 27);
    let types: Vec<_> = CACHE_OPTIONS.iter().map(|o| (o.name, o.js_type)).collect();
    assert!(types.contains(&("ttl", "number")));
    assert!(types.contains(&("redis", "string")));
    assert!(types.contains(&("l1", "boolean")));
  }

  /// The defaults the table declares (for the README) are the ones
  /// `from_raw` applies. A new option must be added here.
  #[test]
  fn declared_defaults_are_the_applied_ones() {
    let local = CacheConfig::from_raw(&RawCacheOptions::default()).unwrap();
    let with_redis = RawCacheOptions {
      redis: Some("redis://127.0.0.1:6379".into()),
      ..RawCacheOptions::default()
    };
    let redis = CacheConfig::from_raw(&with_redis).unwrap().redis.unwrap();
    for option in CACHE_OPTIONS {
      let applied = match option.name {
        "ttl" => Some(local.entry.ttl.to_string()),
        "hardTtl" => Some(format!("{} × ttl", local.entry.hard_ttl / local.entry.ttl)),
        "jitter" => Some(local.jitter.to_string()),
        "beta" => Some(local.entry.beta.to_string()),
        "negativeTtl" => Some(local.entry.negative_ttl.to_string()),
        "l1Ttl" => local.entry.l1_ttl.map(|ms| ms.to_string()),
        "softTimeout" => Some(local.soft_timeout.to_string()),
        "hardTimeout" => Some(local.hard_timeout.to_string()),
        "refreshBackoff" => Some(local.refresh_backoff.to_string()),
        "maxEntries" => Some(local.max_entries.to_string()),
        "l1MaxBytes" => local.l1_max_bytes.map(|n| n.to_string()),
        "l1MaxValueBytes" => local.l1_max_value_bytes.map(|n| n.to_string()),
        "prefix" => Some(format!("'{}'", local.prefix)),
        "redis" => local.redis.as_ref().map(|r| format!("{:?}", r.endpoint)),
        "lockTtl" => Some(redis.lock_ttl.to_string()),
        "l1" => Some(redis.l1.to_string()),
        "tracking" => Some(redis.tracking.to_string()),
        "redisTimeout" => Some(redis.timeout.to_string()),
        "circuitBreakerDuration" => Some(redis.breaker_cooldown.to_string()),
        "recoveryMaxEntries" => Some(redis.recovery_max_entries.to_string()),
        "recoveryMaxAge" => Some(redis.recovery_max_age.to_string()),
        "maxValueBytes" => Some(local.max_value_bytes.to_string()),
        "maxConcurrentLoads" => local.max_concurrent_loads.map(|n| n.to_string()),
        "maxQueuedLoads" => Some(local.max_queued_loads.to_string()),
        "fleetMaxConcurrentLoads" => redis.fleet_max_concurrent_loads.map(|n| n.to_string()),
        "serializer" => Some(format!("'{}'", local.serializer)),
        "compress" => local.compress.map(|c| format!("{c:?}")),
        other => panic!("option `{other}`: check its declared default here"),
      };
      assert_eq!(
        applied.as_deref(),
        option.default,
        "the default of `{}`",
        option.name
      );
    }
  }

  #[test]
  fn compress_takes_a_threshold_and_a_level() {
    let with = |text: &str| {
      CacheConfig::from_raw(&RawCacheOptions {
        compress: Some(text.into()),
        redis: Some("redis://127.0.0.1:6379".into()),
        ..RawCacheOptions::default()
      })
      .map(|c| c.compress)
    };
    let compress = |threshold, level| Ok(Some(Compress { threshold, level }));
    assert_eq!(
      with("{}"),
      compress(DEFAULT_COMPRESS_THRESHOLD, DEFAULT_COMPRESS_LEVEL)
    );
    assert_eq!(with(r#"{"threshold":0,"level":19}"#), compress(0, 19));
    for bad in [
      "1",
      "[]",
      r#"{"threshold":-1}"#,
      r#"{"threshold":1.5}"#,
      r#"{"level":0}"#,
      r#"{"level":23}"#,
      r#"{"treshold":1}"#,
    ] {
      assert_eq!(with(bad).unwrap_err().code, Code::InvalidOption, "{bad}");
    }
  }

  #[test]
  fn a_serializer_name_is_one_word_that_reads_back_from_the_format_line() {
    let named = |name: &str| {
      CacheConfig::from_raw(&RawCacheOptions {
        serializer: Some(name.into()),
        ..RawCacheOptions::default()
      })
      .map(|c| c.serializer)
    };
    for good in ["msgpackr", "superjson@2", "proto:user.v1", "a/b+c-d_e", "x"] {
      assert_eq!(named(good).as_deref(), Ok(good));
    }
    let long = "x".repeat(MAX_SERIALIZER_NAME + 1);
    for bad in ["", "two words", "new\nline", "é", long.as_str()] {
      let error = named(bad).unwrap_err();
      assert_eq!(error.code, Code::InvalidOption, "{bad:?}");
    }
  }

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
  fn load_bulkhead_options() {
    let c = CacheConfig::from_raw(&RawCacheOptions::default()).unwrap();
    assert_eq!((c.max_concurrent_loads, c.max_queued_loads), (None, 1_000));
    let raw = RawCacheOptions {
      max_concurrent_loads: Some(50.0),
      max_queued_loads: Some(0.0),
      ..Default::default()
    };
    let c = CacheConfig::from_raw(&raw).unwrap();
    assert_eq!((c.max_concurrent_loads, c.max_queued_loads), (Some(50), 0));
    for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY, 1e12] {
      let raw = RawCacheOptions {
        max_concurrent_loads: Some(bad),
        ..Default::default()
      };
      let err = CacheConfig::from_raw(&raw).unwrap_err();
      assert_eq!(
        (err.code, err.kind),
        (Code::InvalidOption, Kind::Range),
        "{bad}"
      );
      assert!(
        err.message.contains("maxConcurrentLoads"),
        "{}",
        err.message
      );
    }
    for bad in [-1.0, 2.5, f64::NAN] {
      let raw = RawCacheOptions {
        max_concurrent_loads: Some(4.0),
        max_queued_loads: Some(bad),
        ..Default::default()
      };
      let err = CacheConfig::from_raw(&raw).unwrap_err();
      assert_eq!(
        (err.code, err.kind),
        (Code::InvalidOption, Kind::Range),
        "{bad}"
      );
      assert!(err.message.contains("maxQueuedLoads"), "{}", err.message);
    }
    // A queue bound without a cap would bound nothing: a mistake, said so.
    let raw = RawCacheOptions {
      max_queued_loads: Some(10.0),
      ..Default::default()
    };
    let err = CacheConfig::from_raw(&raw).unwrap_err();
    assert_eq!((err.code, err.kind), (Code::InvalidOption, Kind::Type));
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
    assert_eq!(
      (r.recovery_max_entries, r.recovery_max_age),
      (10_000, 300_000)
    );
    for bad in [-1.0, 1.5, f64::NAN] {
      let raw = RawCacheOptions {
        redis: Some("redis://127.0.0.1:6379".into()),
        recovery_max_entries: Some(bad),
        ..Default::default()
      };
      assert_eq!(
        CacheConfig::from_raw(&raw).unwrap_err().code,
        Code::InvalidOption,
        "recoveryMaxEntries {bad}"
      );
    }
    let cluster = |text: &str| {
      CacheConfig::from_raw(&RawCacheOptions {
        redis: Some(text.into()),
        ..Default::default()
      })
      .map(|c| c.redis.unwrap().endpoint)
    };
    assert_eq!(
      cluster(r#"{"cluster":["redis://127.0.0.1:7000","redis://127.0.0.1:7001"]}"#).unwrap(),
      RedisEndpoint::Cluster(vec![
        "redis://127.0.0.1:7000".into(),
        "redis://127.0.0.1:7001".into()
      ])
    );
    for bad in [
      r#"{"cluster":[]}"#,
      r#"{"cluster":"redis://127.0.0.1:7000"}"#,
      r#"{"cluster":["127.0.0.1:7000"]}"#,
      r#"{"cluster":["redis://a:1","rediss://b:2"]}"#,
      r#"{"cluster":["redis://a:1"],"url":"x"}"#,
      r#"{"url":"redis://a:1"}"#,
      "{",
    ] {
      assert_eq!(cluster(bad).unwrap_err().code, Code::InvalidOption, "{bad}");
    }
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
