//! What the fleet's tasks tell the thread that owns the L1 to forget.

use crate::core::fleet::Change;
use crate::engine::epoch::Epoch;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What the thread that owns the L1 must forget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalidation {
  /// Another instance changed (or deleted, or cleared) keys.
  Changed(Change),
  /// The events subscription went live, the first time or again after
  /// being down: what the L1 holds was filled while changes elsewhere could
  /// go unseen, so it may be outdated; loads in flight are not (they read
  /// Redis afresh).
  Subscribed,
  /// This instance's `set` of `key` lost to a value in the store stamped
  /// later (written within the clocks' error by another instance): the
  /// value it put in memory leaves it, unless something replaced it there
  /// meanwhile, so this instance reads what the fleet reads.
  Superseded { key: String, stamp: u64 },
  /// This instance's `set` of `key` stamped `from` was written stamped `to`,
  /// after a value another instance wrote within the clocks' error: the
  /// value in memory, unless something replaced it meanwhile, takes the
  /// stamp the fleet's copy has.
  Restamped { key: String, from: u64, to: u64 },
}

/// Invalidations queued for the thread that owns the L1.
#[derive(Default)]
pub struct Invalidations {
  pending: AtomicBool,
  changes: Mutex<Vec<Invalidation>>,
  /// The cache's epoch, moved with every change queued: a hit JavaScript
  /// remembered is not answered again before the change is applied.
  epoch: Epoch,
}

/// Past this many queued changes, the L1 is cleared instead.
const MAX_QUEUED_CHANGES: usize = 10_000;

impl Invalidations {
  pub fn counting_on(epoch: Epoch) -> Invalidations {
    Invalidations {
      epoch,
      ..Invalidations::default()
    }
  }

  pub(super) fn push(&self, change: Invalidation) {
    let mut changes = self.changes.lock().unwrap_or_else(|p| p.into_inner());
    if changes.len() >= MAX_QUEUED_CHANGES {
      changes.clear();
      changes.push(Invalidation::Changed(Change::Cleared));
    } else {
      changes.push(change);
    }
    self.pending.store(true, Ordering::Release);
    self.epoch.bump();
  }

  /// The queued changes; one atomic load (no read-modify-write) when there
  /// are none, since every call on the hot path asks.
  pub fn take(&self) -> Vec<Invalidation> {
    if !self.pending.load(Ordering::Acquire) || !self.pending.swap(false, Ordering::Acquire) {
      return Vec::new();
    }
    std::mem::take(&mut *self.changes.lock().unwrap_or_else(|p| p.into_inner()))
  }
}
