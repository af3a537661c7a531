//! The engine's clock and its random draws: epoch milliseconds from a
//! cheap coarse clock (plus the offset tests may add), and uniform draws
//! from one small generator per cache. Both can be pinned for tests.

use crate::engine::epoch::Epoch;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

/// A cache's clock: the store's time in epoch ms, read as the wall clock
/// plus offsets. One per cache, shared by the local engine and the fleet,
/// so a test's time moves memory TTLs, Redis TTLs and the circuit breaker
/// alike, and everything an instance writes to the store or compares with
/// what it read there is in the time the whole fleet agrees on.
#[derive(Debug, Clone, Default)]
pub struct Clock {
  offsets: Arc<Offsets>,
  /// The cache's epoch (`engine::epoch`), carried by its clock because
  /// the clock is the one thing its engine, its fleet and the binding all
  /// share; moved here whenever the offset does.
  epoch: Epoch,
}

/// The parts of a clock's offset from this machine's wall clock, in ms,
/// and their sum (the one load a hit pays).
#[derive(Debug, Default)]
struct Offsets {
  total: AtomicI64,
  /// Set under this lock only: `(advanced, server, skew)`.
  parts: Mutex<(i64, i64, i64)>,
}

impl Clock {
  /// The cache's epoch.
  pub fn epoch(&self) -> &Epoch {
    &self.epoch
  }

  /// What [`Clock::now`] adds to this machine's coarse wall clock, in ms.
  pub fn offset(&self) -> i64 {
    self.offsets.total.load(Ordering::Relaxed)
  }

  #[inline]
  pub fn now(&self) -> u64 {
    wall_clock_ms().saturating_add_signed(self.offsets.total.load(Ordering::Relaxed))
  }

  /// Test hook (`advanceClock`): moves this cache's time forward.
  pub fn advance(&self, ms: u64) {
    self.update(|parts| parts.0 = parts.0.saturating_add(ms.min(i64::MAX as u64) as i64));
  }

  /// Test hook: this machine's wall clock reads `ms` off (a skewed host);
  /// the store's time, once measured, corrects it.
  pub fn set_skew(&self, ms: i64) {
    self.update(|parts| parts.2 = ms);
  }

  /// The wall clock as this machine (with its skew) reads it, precisely:
  /// what [`Clock::set_server_offset`]'s measurement is taken against.
  pub fn wall(&self) -> u64 {
    let skew = self
      .offsets
      .parts
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .2;
    system_clock_ms().saturating_add_signed(skew)
  }

  /// The store's time minus [`Clock::wall`], as last measured.
  pub fn set_server_offset(&self, ms: i64) {
    self.update(|parts| parts.1 = ms);
  }

  pub fn server_offset(&self) -> i64 {
    self
      .offsets
      .parts
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .1
  }

  fn update(&self, change: impl FnOnce(&mut (i64, i64, i64))) {
    let mut parts = self.offsets.parts.lock().unwrap_or_else(|p| p.into_inner());
    change(&mut parts);
    let (advanced, server, skew) = *parts;
    let total = advanced.saturating_add(server).saturating_add(skew);
    self.offsets.total.store(total, Ordering::Relaxed);
    self.epoch.bump();
  }
}

/// The store's clock offset from one `TIME` round trip: the wall clock was
/// `before` when it was sent and `after` when it answered, the server said
/// `server` (all epoch ms). The server read its clock somewhere in between:
/// taking the middle bounds the error by half the round trip.
pub fn server_offset(before: u64, server: u64, after: u64) -> i64 {
  let middle = before / 2 + after / 2 + (before % 2 + after % 2) / 2;
  server as i64 - middle as i64
}

/// Epoch milliseconds from the coarse real-time clock on Linux: a few ms of
/// resolution (plenty for TTLs) at a fraction of `SystemTime::now`'s cost,
/// which was a tenth of a cache hit.
#[cfg(target_os = "linux")]
pub fn wall_clock_ms() -> u64 {
  #[cfg(test)]
  if let Some(ms) = simulated::now() {
    return ms;
  }
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

/// How often the published wall clock is written.
pub const PUBLISHED_EVERY_MS: u64 = 1;

/// This machine's coarse wall clock ([`wall_clock_ms`], what [`Clock::now`]
/// adds its offset to), as an `f64`'s bits, written every
/// [`PUBLISHED_EVERY_MS`] by a thread of its own (started on first use, one
/// per process) so that JavaScript reads it without a call (index.js's
/// remembered hits): a reader may find it that much behind the coarse
/// clock, plus the thread's wake-up; index.js checks it against `Date.now()`
/// now and then, and reads `Date.now()` instead while it lags.
pub fn published_wall_clock() -> &'static AtomicU64 {
  static CELL: AtomicU64 = AtomicU64::new(0);
  static TICKER: std::sync::Once = std::sync::Once::new();
  TICKER.call_once(|| {
    let publish = || CELL.store((wall_clock_ms() as f64).to_bits(), Ordering::Relaxed);
    publish();
    // A thread that could not be started leaves the clock still: index.js
    // finds it lagging and reads `Date.now()`.
    let _ = std::thread::Builder::new()
      .name("herdcache-clock".into())
      .spawn(move || loop {
        std::thread::sleep(std::time::Duration::from_millis(PUBLISHED_EVERY_MS));
        publish();
      });
  });
  &CELL
}

pub fn system_clock_ms() -> u64 {
  #[cfg(test)]
  if let Some(ms) = simulated::now() {
    return ms;
  }
  SystemTime::now()
    .duration_since(UNIX_EPOCH)
    .map(|d| d.as_millis() as u64)
    .unwrap_or(0)
}

/// The fleet simulator's wall clock (`engine::sim`, tests only): while a
/// simulation runs on this thread, the wall clock is its epoch plus tokio's
/// (paused) time since it started, so every instance's clock, the memory
/// store's and every timer move together, on the scheduler's time alone.
#[cfg(test)]
pub mod simulated {
  use std::cell::Cell;
  use tokio::time::Instant;

  thread_local! {
    static STARTED: Cell<Option<(Instant, u64)>> = const { Cell::new(None) };
  }

  /// From now on this thread's wall clock reads `epoch` plus tokio's time.
  pub fn start(epoch: u64) {
    STARTED.set(Some((Instant::now(), epoch)));
  }

  /// Back to the real clock.
  pub fn stop() {
    STARTED.set(None);
  }

  pub(super) fn now() -> Option<u64> {
    STARTED
      .get()
      .map(|(at, epoch)| epoch + at.elapsed().as_millis() as u64)
  }
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

  #[test]
  fn a_measured_offset_corrects_a_skewed_wall_clock() {
    let clock = Clock::default();
    clock.set_skew(5_000);
    let skewed = clock.now();
    assert!(
      skewed >= wall_clock_ms() + 4_990,
      "the skew shows until measured"
    );
    // The server says the true time, mid-way through a 4 ms round trip.
    let truth = system_clock_ms();
    let before = clock.wall();
    clock.set_server_offset(server_offset(before, truth + 2, before + 4));
    let corrected = clock.now() as i64 - wall_clock_ms() as i64;
    assert!(
      corrected.abs() <= 20,
      "off by {corrected} ms after the correction"
    );
    clock.advance(1_000);
    assert!(
      clock.now() >= wall_clock_ms() + 980,
      "advanceClock still moves it"
    );
  }

  #[test]
  fn the_offset_is_taken_at_the_middle_of_the_round_trip() {
    assert_eq!(server_offset(1_000, 1_500, 1_010), 495);
    assert_eq!(server_offset(1_000, 900, 1_000), -100);
    assert_eq!(server_offset(1_001, 1_001, 1_002), 0);
  }
}
