//! Clock sync: the fleet keeps its clock in the store's time.

use super::Fleet;
use crate::engine::shared::SharedStore;
use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::Duration;

/// How often the offset to the store's clock is measured again (clocks
/// drift by far less than a millisecond a minute), and how many round trips
/// each measurement takes (the shortest is kept: its error is the smallest).
const CLOCK_SYNC_EVERY: Duration = Duration::from_secs(60);
const CLOCK_SAMPLES: usize = 3;
/// A sample's round trip may exceed twice the best by this much (ms) and
/// still replace the offset (the coarse clock's resolution, jitter).
const CLOCK_RTT_SLACK_MS: u64 = 10;
/// After this many slow measurements in a row, the next is taken anyway.
const CLOCK_MAX_PASSED_OVER: u64 = 3;
/// Until a first measurement succeeds, it is tried this often.
const CLOCK_RETRY: Duration = Duration::from_secs(1);

impl<S: SharedStore> Fleet<S> {
  /// Measures the offset to the store's clock now, whatever the last
  /// measurement's round trip (the host's clock was just changed: the test
  /// hook `skewClock`).
  pub async fn resync_clock(&self) -> bool {
    self
      .clock_passed_over
      .store(CLOCK_MAX_PASSED_OVER, Ordering::Relaxed);
    self.sync_clock_now().await
  }

  /// Measures the offset to the store's clock now (the periodic task does
  /// it every [`CLOCK_SYNC_EVERY`]). True if the store answered.
  pub async fn sync_clock_now(&self) -> bool {
    // One measurement at a time: the last one applied is the last taken.
    let _one = self.clock_syncing.lock().await;
    let mut best: Option<(i64, u64)> = None;
    for _ in 0..CLOCK_SAMPLES {
      match self.clock_sample().await {
        Some(sample) if best.is_none_or(|b| sample.1 < b.1) => best = Some(sample),
        Some(_) => {}
        None => break,
      }
    }
    let Some((offset, rtt)) = best else {
      return false;
    };
    // A slow round trip (a reconnect, a paused server) bounds the error
    // loosely: it replaces the offset only if it is not much slower than
    // the last one taken, or after a few were passed over (the network
    // itself got slower).
    let last_rtt = self.clock_rtt.load(Ordering::Relaxed);
    let passed_over = self.clock_passed_over.load(Ordering::Relaxed);
    if rtt
      <= last_rtt
        .saturating_mul(2)
        .saturating_add(CLOCK_RTT_SLACK_MS)
      || passed_over >= CLOCK_MAX_PASSED_OVER
    {
      self.clock.set_server_offset(offset);
      self.clock_rtt.store(rtt, Ordering::Relaxed);
      self.clock_passed_over.store(0, Ordering::Relaxed);
    } else {
      self
        .clock_passed_over
        .store(passed_over + 1, Ordering::Relaxed);
    }
    true
  }

  /// One offset sample: the store's time against the wall clock, and the
  /// round trip it was taken in (ms). `None`: the store did not answer.
  pub(super) async fn clock_sample(&self) -> Option<(i64, u64)> {
    let before = self.clock.wall();
    let server = self.store.server_time().await.ok()?;
    let after = self.clock.wall();
    Some((
      crate::engine::clock::server_offset(before, server, after),
      after.saturating_sub(before),
    ))
  }
}

/// Keeps `fleet`'s clock in the store's time: every instance then stamps
/// its writes and judges freshness in one time, whatever its own wall clock
/// says. The error is at most half the shortest round trip of a sample
/// (plus the coarse clock's few ms and the drift between samples).
pub(super) async fn sync_clock<S: SharedStore>(fleet: Weak<Fleet<S>>) {
  loop {
    let measured = {
      let Some(fleet) = fleet.upgrade() else { return };
      fleet.sync_clock_now().await
    };
    tokio::time::sleep(if measured {
      CLOCK_SYNC_EVERY
    } else {
      CLOCK_RETRY
    })
    .await;
  }
}
