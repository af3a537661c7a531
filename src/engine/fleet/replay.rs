//! Auto-recovery: the operations kept while the store could not be
//! reached, replayed once it answers again, and what `close()` could not
//! deliver.

use super::{bump, Fleet, Undelivered};
use crate::core::envelope::Envelope;
use crate::core::policy;
use crate::engine::recovery::{KeyOp, RecoveryQueue, Replay};
use crate::engine::shared::{ClearScope, SharedStore};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// The replay task's pause between attempts when the breaker's cool-down
/// is 0 (it probes at the cool-down otherwise): no busy loop.
const MIN_REPLAY_PAUSE: Duration = Duration::from_millis(100);

impl<S: SharedStore> Fleet<S> {
  /// An operation reached the store: `settle` supersedes what was queued
  /// before it (nothing to do, one atomic load, when nothing is queued).
  pub(super) fn settle_queued<T>(&self, settle: impl FnOnce(&mut RecoveryQueue) -> T) {
    if self.recovery_pending() > 0 {
      self.with_recovery(settle);
    }
  }

  /// Operations waiting for the store (auto-recovery).
  pub fn recovery_pending(&self) -> usize {
    self.recovery_pending.load(Ordering::Relaxed)
  }

  /// Runs `f` on the queue and updates the count read without its lock;
  /// `f` answers how many operations it dropped (counted).
  pub(super) fn with_recovery<T>(&self, f: impl FnOnce(&mut RecoveryQueue) -> T) -> T {
    let mut queue = self.recovery.lock().unwrap_or_else(|p| p.into_inner());
    let result = f(&mut queue);
    self.recovery_pending.store(queue.len(), Ordering::Relaxed);
    result
  }

  pub(super) fn dropped(&self, n: u64) {
    if n > 0 {
      self
        .counters
        .recovery_dropped
        .fetch_add(n, Ordering::Relaxed);
    }
  }

  /// Whether a stored value of `key` may be served: not while a queued
  /// operation invalidated it (one atomic load when nothing is queued).
  pub(super) fn counts(&self, key: &str, e: &Envelope) -> bool {
    self.recovery_pending() == 0
      || !self
        .recovery
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .hides(key, e.meta.stamp)
  }

  /// A live operation on `key` at `stamp` reached the store: what was
  /// queued for the key before it is superseded.
  pub(super) fn settled(&self, key: &str, stamp: u64) {
    self.settle_queued(|queue| queue.settled(key, stamp));
  }

  pub(super) fn keep(&self, key: &str, op: KeyOp) {
    self.kept(|queue, now| queue.push(key, op, now));
  }

  /// Queues an operation for auto-recovery (`push` answers how many fell
  /// out of the bounds, given the time), and makes sure it is replayed.
  pub(super) fn kept(&self, push: impl FnOnce(&mut RecoveryQueue, u64) -> u64) {
    let now = self.clock.now();
    let dropped = self.with_recovery(|queue| push(queue, now));
    self.dropped(dropped);
    self.start_replayer();
  }

  /// Starts the replay task unless it runs. It ends when nothing waits
  /// (checked under the same lock, so an operation queued as it ends starts
  /// a new one), or when the fleet is gone.
  pub(super) fn start_replayer(&self) {
    let mut replayer = self.replayer.lock().unwrap_or_else(|p| p.into_inner());
    if replayer.is_some() || self.recovery_pending() == 0 {
      return;
    }
    let me = self.me.clone();
    let pause = Duration::from_millis(self.breaker_cooldown).max(MIN_REPLAY_PAUSE);
    let replay_now = Arc::clone(&self.replay_now);
    *replayer = Some(tokio::spawn(async move {
      loop {
        // With the breaker closed (what waits was kept before the first
        // connection was made), soon; open, at its probe's pace.
        let wait = match me.upgrade() {
          Some(fleet) if fleet.allowed() => MIN_REPLAY_PAUSE,
          Some(_) => pause,
          None => return,
        };
        // Biased: no random draw (a simulated fleet replays exactly).
        tokio::select! {
          biased;
          () = replay_now.notified() => {}
          () = tokio::time::sleep(wait) => {}
        }
        let Some(fleet) = me.upgrade() else { return };
        fleet.replay(false).await;
        let mut replayer = fleet.replayer.lock().unwrap_or_else(|p| p.into_inner());
        if fleet.recovery_pending() == 0 {
          *replayer = None;
          return;
        }
      }
    }));
  }

  /// One pass over the queue, in call order, while the store answers:
  /// each operation reconciled by its stamp (a replayed `set` is the
  /// conditional write; a `delete` or `clear` spares values newer than it)
  /// and announced. Past the breaker when `force` (close). True if the
  /// queue was emptied.
  pub(super) async fn replay(&self, force: bool) -> bool {
    let now = self.clock.now();
    let expired = self.with_recovery(|queue| queue.expire(now));
    self.dropped(expired);
    if self.recovery_pending() == 0 {
      return true;
    }
    if !force && !self.allowed() {
      return false;
    }
    let batch = self.with_recovery(|queue| queue.snapshot());
    for (seq, replay) in batch {
      let result = match &replay {
        Replay::Clear { stamp } => self
          .store
          .clear(ClearScope::All, Some(*stamp))
          .await
          .map(drop),
        Replay::Tag { tag, stamp } => {
          let px = self.tag_ttl.load(Ordering::Relaxed);
          self.store.invalidate_tag(tag, *stamp, px).await.map(drop)
        }
        Replay::ClearPrefix { prefix, stamp } => self
          .store
          .clear(ClearScope::Namespace(prefix), Some(*stamp))
          .await
          .map(drop),
        Replay::Key { key, op } => match op {
          KeyOp::Set(envelope) if policy::alive(&envelope.meta, self.clock.now()) => {
            let written = self.write_envelope(key, envelope, None, true).await;
            if matches!(written, Ok(false)) {
              self.superseded(key, envelope.meta.stamp);
            }
            written.map(drop)
          }
          // A value that expired while it waited still replaced the
          // older ones: they go, as its write would have made them.
          KeyOp::Set(_) | KeyOp::Delete { .. } => self
            .store
            .delete(key, &self.store.keys(key), self.deletion(op.stamp(), true))
            .await
            .map(drop),
          KeyOp::Expire { stamp } => self
            .store
            .expire(key, &self.store.keys(key), *stamp, self.guarded_ms())
            .await
            .map(drop),
        },
      };
      if self.track(result).is_none() {
        return false;
      }
      if self.with_recovery(|queue| queue.delivered(seq, &replay)) {
        bump(&self.counters.recovered);
      }
    }
    self.recovery_pending() == 0
  }

  /// At close: one more attempt (each command bounded by the store's
  /// timeout, the whole by twice that), then what is still queued is given
  /// up (counted as dropped) and returned, for the caller to report.
  pub async fn flush_recovery(&self) -> Vec<Undelivered> {
    if let Some(handle) = self
      .replayer
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .take()
    {
      handle.abort();
    }
    if self.recovery_pending() == 0 {
      return Vec::new();
    }
    let bound = self.store.command_timeout() * 2;
    let _ = tokio::time::timeout(bound, self.replay(true)).await;
    let left = self.with_recovery(|queue| queue.take_all());
    self.dropped(left.len() as u64);
    left
      .into_iter()
      .map(|replay| match replay {
        Replay::Clear { .. } => Undelivered {
          op: "clear",
          key: None,
          tag: None,
          namespace: None,
        },
        Replay::Tag { tag, .. } => Undelivered {
          op: "deleteByTag",
          key: None,
          tag: Some(tag),
          namespace: None,
        },
        Replay::ClearPrefix { prefix, .. } => Undelivered {
          op: "clear",
          key: None,
          tag: None,
          namespace: Some(prefix.strip_suffix(':').unwrap_or(&prefix).to_string()),
        },
        Replay::Key { key, op } => Undelivered {
          op: match op {
            KeyOp::Set(_) => "set",
            KeyOp::Delete { .. } => "delete",
            KeyOp::Expire { .. } => "expire",
          },
          key: Some(key),
          tag: None,
          namespace: None,
        },
      })
      .collect()
  }
}
