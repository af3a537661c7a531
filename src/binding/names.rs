//! `names()`: the public names the native side declares, for the JS wrapper
//! (which takes its option checks and outcome names from here) and for
//! `__test__/names.test.js` (which checks the README and the `.d.ts` files
//! against them). Called once, when the package is loaded.

use super::entry::{GIVEN, MANY_KEYS};
use super::status::{Lock, Outcome, Source, StaleReason};
use super::ENTRY_POINTS;
use crate::core::error::Code;
use crate::core::etag::MAX_ETAG_BYTES;
use crate::core::key::MAX_KEY_BYTES;
use crate::core::options::{Tiers, CACHE_OPTIONS, MAX_TTL};
use crate::engine::metrics::{Gauges, Metrics};
use crate::engine::slots::FAILED_OPEN;
use napi_derive::napi;

/// One native option of `new Cache(options)`.
#[napi(object)]
pub struct OptionName {
  /// The option's name, e.g. `hardTtl`.
  pub name: String,
  /// What `typeof` must say of a value: `number`, `string` or `boolean`.
  pub js_type: String,
  /// The default as the README's option tables write it; absent: none.
  pub default: Option<String>,
}

/// One key of `stats()`.
#[napi(object)]
pub struct CounterName {
  /// The `stats()` key, e.g. `staleServed`.
  pub name: String,
  /// Its `metrics()` (Prometheus) name.
  pub metric: String,
  /// A gauge (a value now), not a counter since the cache was made.
  pub gauge: bool,
}

/// The names the native side declares, each list in its declaration order.
#[napi(object)]
pub struct Names {
  /// The native options of `new Cache(options)` (`core::options::cache_options!`).
  pub options: Vec<OptionName>,
  /// The error codes the native side declares (`core::error::Code`).
  pub codes: Vec<String>,
  /// `status.outcome` names: outcome byte `b` (1-based) is `outcomes[b - 1]`.
  pub outcomes: Vec<String>,
  /// The `stats()` keys, in order: the counters, then the gauges.
  pub counters: Vec<CounterName>,
  /// The functions `install()` returns, besides `outcomeBuffer`, `epochBuffer`, `clockBuffer` and `values`.
  pub entry_points: Vec<String>,
  /// How `getOrLoad` gave its answer: byte 2 of the outcome buffer `b` is `given[b]`.
  pub given: Vec<String>,
  /// The values of a caller's `status` fields besides `outcome`.
  pub status: StatusNames,
  /// The numbers the JS side checks against or answers with.
  pub limits: Limits,
  /// The `getOrLoad` options passed as the bits of one number, in bit
  /// order (`core::options::Tiers`): bit `i` is `1 << i`.
  pub tiers: Vec<String>,
}

/// The numbers both sides must agree on, declared in Rust only.
#[napi(object)]
pub struct Limits {
  /// The longest TTL of any option or `setTtl()`, in ms (`core::options::MAX_TTL`).
  pub max_ttl: f64,
  /// The longest encoded key, in bytes (`core::key::MAX_KEY_BYTES`).
  pub max_key_bytes: u32,
  /// The most keys one native `getOrLoadMany` call takes (`binding::entry::MANY_KEYS`).
  pub many_keys: u32,
  /// What `nextLoadSlots` answers when the store could not be asked (`engine::slots::FAILED_OPEN`).
  pub failed_open: i64,
  /// The longest validator `ctx.setEtag()` takes, in UTF-8 bytes (`core::etag::MAX_ETAG_BYTES`).
  pub max_etag_bytes: u32,
}

/// The values of `status.source`, `status.lock` and `status.stale`.
#[napi(object)]
pub struct StatusNames {
  pub source: Vec<String>,
  pub lock: Vec<String>,
  pub stale: Vec<String>,
}

/// The public names the addon declares (options, error codes, outcomes,
/// counters, entry points). Not part of the package's API.
#[napi]
pub fn names() -> Names {
  let counter = |(name, metric, _, _): (&str, &str, &str, u64), gauge: bool| CounterName {
    name: name.to_owned(),
    metric: metric.to_owned(),
    gauge,
  };
  let metrics = Metrics::default().counters().into_iter();
  let gauges = Gauges::default().gauges().into_iter();
  Names {
    options: CACHE_OPTIONS
      .iter()
      .map(|o| OptionName {
        name: o.name.to_owned(),
        js_type: o.js_type.to_owned(),
        default: o.default.map(str::to_owned),
      })
      .collect(),
    codes: Code::ALL.iter().map(|c| c.as_str().to_owned()).collect(),
    outcomes: Outcome::NAMES.iter().map(|&n| n.to_owned()).collect(),
    counters: metrics
      .map(|c| counter(c, false))
      .chain(gauges.map(|g| counter(g, true)))
      .collect(),
    entry_points: ENTRY_POINTS
      .iter()
      .map(|(name, _)| name.to_string_lossy().into_owned())
      .collect(),
    given: owned(&GIVEN),
    status: StatusNames {
      source: owned(Source::NAMES),
      lock: owned(Lock::NAMES),
      stale: owned(StaleReason::NAMES),
    },
    limits: Limits {
      max_ttl: MAX_TTL,
      max_key_bytes: MAX_KEY_BYTES as u32,
      many_keys: MANY_KEYS as u32,
      failed_open: FAILED_OPEN,
      max_etag_bytes: MAX_ETAG_BYTES as u32,
    },
    tiers: owned(&Tiers::OPTIONS),
  }
}

fn owned(names: &[&str]) -> Vec<String> {
  names.iter().map(|&n| n.to_owned()).collect()
}
