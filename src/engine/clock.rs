//! The engine's clock and its random draws: epoch milliseconds from a
//! cheap coarse clock (plus the offset tests may add), and uniform draws
//! from one small generator per cache. Both can be pinned for tests.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A cache's clock: the wall clock in epoch ms plus the offset tests add
/// (`advanceClock`). One per cache, shared by the local engine and the
/// fleet, so a test's time moves memory TTLs, Redis TTLs and the circuit
/// breaker alike.
#[derive(Debug, Clone, Default)]
pub struct Clock {
  offset: Arc<AtomicU64>,
}

impl Clock {
  #[inline]
  pub fn now(&self) -> u64 {
    wall_clock_ms().saturating_add(self.offset.load(Ordering::Relaxed))
  }

  pub fn advance(&self, ms: u64) {
    let _ = self
      .offset
      .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| {
        Some(o.saturating_add(ms))
      });
  }
}

/// Epoch milliseconds from the coarse real-time clock on Linux: a few ms of
/// resolution (plenty for TTLs) at a fraction of `SystemTime::now`'s cost,
/// which was a tenth of a cache hit.
#[cfg(target_os = "linux")]
pub fn wall_clock_ms() -> u64 {
  let mut ts = libc::timespec {
    tv_sec: 0,
    tv_nsec: 0,
  };
  // SAFETY: clock_gettime only writes the `timespec` it is pointed at, here
  // a local borrowed exclusively for the call; CLOCK_REALTIME_COARSE exists
  // on every Linux since 2.6.32, and a failure (-1) leaves `ts` alone and
  // falls back to `SystemTime` below.
  if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) } == 0 {
    return ts.tv_sec as u64 * 1_000 + ts.tv_nsec as u64 / 1_000_000;
  }
  system_clock_ms()
}

#[cfg(not(target_os = "linux"))]
pub fn wall_clock_ms() -> u64 {
  system_clock_ms()
}

fn system_clock_ms() -> u64 {
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0)
}

/// SplitMix64, seeded once from `rand`: the engine lives on one thread, and
/// the thread-local `rand::rng()` took a lock for its TLS slot on every hit
/// (the addon is a dlopen'd library).
#[derive(Debug)]
pub struct Draws(u64);

impl Draws {
  pub fn seeded() -> Draws {
    Draws(rand::random())
  }

  /// A uniform draw in (0, 1], unless pinned.
  pub fn next(&mut self, fixed: Option<f64>) -> f64 {
    if let Some(u) = fixed {
      return u;
    }
    self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = self.0;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    // 53 random bits -> [0, 1), flipped to (0, 1].
    1.0 - (z >> 11) as f64 / (1u64 << 53) as f64
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn draws_are_uniform_in_the_half_open_unit_interval() {
    let mut d = Draws(42);
    let samples: Vec<f64> = (0..10_000).map(|_| d.next(None)).collect();
    assert!(samples.iter().all(|u| *u > 0.0 && *u <= 1.0));
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    assert!((mean - 0.5).abs() < 0.02, "{mean}");
    assert_eq!(d.next(Some(0.25)), 0.25);
  }
}
