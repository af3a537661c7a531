//! The cache's epoch: a counter that moves whenever what a hit answered
//! from this process's memory may have changed since: an entry written,
//! removed, evicted or altered, changes queued from the fleet, the clock's
//! offset moved, the cache closed. The binding lets JavaScript read it, so
//! a hit it remembered (the promise of a fresh entry's value, its deadline) is
//! answered again without a call into the addon while the epoch has not
//! moved and the deadline has not passed: nothing else can make that hit
//! answer differently.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct Epoch(Arc<AtomicU32>);

impl Epoch {
  /// Something a remembered hit relied on may have changed.
  #[inline]
  pub fn bump(&self) {
    self.0.fetch_add(1, Ordering::Release);
  }

  pub fn get(&self) -> u32 {
    self.0.load(Ordering::Acquire)
  }

  /// The counter itself, shared: the binding hands its address to
  /// JavaScript and keeps this until JavaScript lets the view go.
  pub fn cell(&self) -> Arc<AtomicU32> {
    Arc::clone(&self.0)
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn clones_share_one_counter() {
    let a = Epoch::default();
    let b = a.clone();
    let before = a.get();
    b.bump();
    assert_eq!(a.get(), before + 1);
    assert_eq!(a.cell().load(Ordering::Relaxed), before + 1);
  }
}
