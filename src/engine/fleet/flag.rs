//! [`Flag`]: a condition tokio tasks can wait for.

use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::Notify;

/// A flag tasks can wait for: a flight given up (set once, when it timed
/// out, its leader is gone, the cache closes, or its steps end: they stop
/// at their next await), or the events subscription being live (set and
/// cleared as it connects and drops).
#[derive(Default)]
pub struct Flag {
  set: AtomicBool,
  notify: Notify,
}

impl Flag {
  pub(super) fn set(&self, on: bool) {
    self.set.store(on, Ordering::SeqCst);
    if on {
      self.notify.notify_waiters();
    }
  }

  pub(super) fn is_set(&self) -> bool {
    self.set.load(Ordering::SeqCst)
  }

  /// Resolves once set (at once if it is).
  pub(super) async fn wait(&self) {
    loop {
      let notified = self.notify.notified();
      tokio::pin!(notified);
      // Registered before the check: a set in between still wakes us.
      notified.as_mut().enable();
      if self.is_set() {
        return;
      }
      notified.await;
    }
  }
}
