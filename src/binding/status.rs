//! A caller's `status` object beyond `outcome` (lru-cache's `Status` is the
//! model): where its value came from, what the fleet lock did, why a stale
//! value was served, how fresh the value was. Filled only for a caller that
//! passed `status` (a call without one pays nothing); `waitedMs`, and the
//! stale reasons a soft wait finds, are the JS wrapper's (`lib/callers.js`).
//! Each name is declared here once; `names()` exports them.

use super::raw::{self, Env, Value};
use crate::core::envelope::Meta;
use crate::engine::{Answered, Origin, Served};

/// Declares a `status` field's values once, with their names.
macro_rules! status_field {
  ($(#[$doc:meta])* $name:ident: $($(#[$vdoc:meta])* $variant:ident => $text:literal),* $(,)?) => {
    $(#[$doc])*
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum $name {
      $($(#[$vdoc])* $variant,)*
    }

    impl $name {
      /// Every value's name, in declaration order (`names()`). Read by
      /// `names()` only, which `cfg(test)` builds do not register.
      #[cfg_attr(test, allow(dead_code))]
      pub const NAMES: &'static [&'static str] = &[$($text,)*];

      pub fn name(self) -> &'static str {
        match self {
          $($name::$variant => $text,)*
        }
      }
    }
  };
}

status_field! {
  /// `status.source`: where the value came from.
  Source:
    /// This process's memory (L1), synchronously.
    Memory => "memory",
    /// Redis, written there before (a read, no lock asked).
    Redis => "redis",
    /// Another instance's load, after this one found the lock taken.
    Fleet => "fleet",
    /// A load in this process (this call's, or one it joined).
    Load => "load",
}

status_field! {
  /// `status.lock`: with Redis, what the fleet lock said when the flight asked.
  Lock:
    Won => "won",
    Lost => "lost",
}

status_field! {
  /// `status.stale`: why a stale value was served.
  StaleReason:
    /// A refresh started, or was running: stale-while-revalidate.
    Refresh => "refresh",
    /// No refresh: the key backs off after failed refreshes.
    Backoff => "backoff",
    /// `softTimeout` passed before the refresh landed (set by `lib/callers.js`).
    #[allow(dead_code)] // named here, set by JS
    Timeout => "timeout",
    /// The refresh failed: stale-if-error (set by `lib/callers.js`).
    #[allow(dead_code)] // named here, set by JS
    Error => "error",
}

impl Source {
  /// Where a flight's value came from, as the engine recorded it.
  pub fn of(answered: Answered) -> Source {
    match answered.from {
      None => Source::Load,
      Some(Origin::Store) => Source::Redis,
      Some(Origin::Holder) => Source::Fleet,
    }
  }
}

impl Lock {
  /// What the fleet lock said to a flight, as the engine recorded it.
  pub fn of(answered: Answered) -> Option<Lock> {
    answered
      .lock_won
      .map(|won| if won { Lock::Won } else { Lock::Lost })
  }
}

/// Writes `source`, `lock`, `stale` and `ttl` (ms of freshness left at
/// `now`, negative once stale; when `meta` is known) on `status`. What a
/// setter throws is ignored: the call is answered all the same.
pub unsafe fn describe(
  env: Env,
  status: Value,
  source: Source,
  lock: Option<Lock>,
  stale: Option<StaleReason>,
  meta: Option<(Meta, u64)>,
) {
  let set = |name: &std::ffi::CStr, value: Value| {
    let _ = raw::set_property(env, status, name, value);
  };
  set(c"source", raw::string(env, source.name()));
  if let Some(lock) = lock {
    set(c"lock", raw::string(env, lock.name()));
  }
  if let Some(stale) = stale {
    set(c"stale", raw::string(env, stale.name()));
  }
  if let Some((meta, now)) = meta {
    let ttl = meta.fresh_until as f64 - now as f64;
    set(c"ttl", raw::number(env, ttl));
  }
}

/// Declares [`Outcome`] and its `status.outcome` names once: the byte of a
/// variant is its position in the list, from 1 (0: no outcome written), and
/// `Outcome::NAMES` (exported by `names()`) is in that order.
macro_rules! outcomes {
  ($first:ident => $first_name:literal, $($variant:ident => $name:literal,)*) => {
    /// How a call was answered, written to the cache's outcome slot (a byte
    /// the JS wrapper reads right after the call, to fill `status.outcome`):
    /// setting a property from native code costs more than the whole hit.
    #[derive(Clone, Copy)]
    #[repr(u8)]
    pub enum Outcome {
      $first = 1,
      $($variant,)*
    }

    impl Outcome {
      /// The `status.outcome` of byte `b` is `NAMES[b - 1]`. Read by
      /// `names()` only, which `cfg(test)` builds do not register.
      #[cfg_attr(test, allow(dead_code))]
      pub const NAMES: &'static [&'static str] = &[$first_name, $($name,)*];
    }
  };
}

outcomes! {
  Hit => "hit",
  Stale => "stale",
  Negative => "negative",
  Miss => "miss",
  Coalesced => "coalesced",
}

impl Outcome {
  pub fn name(self) -> &'static str {
    Outcome::NAMES[self as usize - 1]
  }

  /// What the callers of a flight the shared store answered got.
  pub fn served(served: Served) -> Outcome {
    match served {
      Served::Fresh => Outcome::Hit,
      Served::Stale => Outcome::Stale,
      Served::Negative => Outcome::Negative,
    }
  }
}
