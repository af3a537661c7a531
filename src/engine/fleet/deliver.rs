//! Invalidations (`delete`, `expire`, `deleteByTag`, `clear`): delivered,
//! or kept for auto-recovery.

use super::Fleet;
use crate::engine::recovery::KeyOp;
use crate::engine::shared::{ClearScope, Deletion, SharedStore};
use std::future::Future;
use std::sync::atomic::Ordering;

impl<S: SharedStore> Fleet<S> {
  /// Delivers one invalidation (`delete`, `expire`, `deleteByTag`, `clear`):
  /// `call` on the store when the breaker allows it; if it answered,
  /// `settle` supersedes what was kept for auto-recovery before it,
  /// otherwise `keep` keeps it to be delivered later. `None`: not reached.
  pub(super) async fn deliver<T>(
    &self,
    call: impl Future<Output = Result<T, S::Error>>,
    settle: impl FnOnce(&Self),
    keep: impl FnOnce(&Self),
  ) -> Option<T> {
    if !self.allowed() {
      keep(self);
      return None;
    }
    let first = self.before_first_answer();
    let keep = match first {
      true => {
        keep(self);
        None
      }
      false => Some(keep),
    };
    let answer = match self.unhurried(first, call).await {
      Some(result) => self.track(result),
      None => None,
    };
    match (&answer, keep) {
      (Some(_), _) => settle(self),
      (None, Some(keep)) => keep(self),
      (None, None) => {}
    }
    answer
  }

  /// A delete at `stamp`, its tombstone living as long as a load begun
  /// before it may still write ([`Fleet::guarded_ms`]).
  pub(super) fn deletion(&self, stamp: u64, replayed: bool) -> Deletion {
    Deletion {
      at: stamp,
      px: self.guarded_ms(),
      replayed,
    }
  }

  /// `delete`: whether the store had a value (`None`: not reached; the
  /// delete is kept for auto-recovery).
  pub async fn delete(&self, key: &str) -> Option<bool> {
    let stamp = self.clock.now();
    let keys = self.store.keys(key);
    self
      .deliver(
        self.store.delete(key, &keys, self.deletion(stamp, false)),
        |fleet| fleet.settled(key, stamp),
        |fleet| fleet.keep(key, KeyOp::Delete { stamp }),
      )
      .await
  }

  /// `expire` at `at`: whether the store's value was made stale (`None`:
  /// not reached; the expire is kept for auto-recovery).
  pub async fn expire(&self, key: &str, at: u64) -> Option<bool> {
    let keys = self.store.keys(key);
    self
      .deliver(
        self.store.expire(key, &keys, at, self.guarded_ms()),
        |fleet| fleet.settle_queued(|queue| queue.settled_expire(key, at)),
        |fleet| fleet.kept(|queue, now| queue.push_expire(key, at, now)),
      )
      .await
  }

  /// `deleteByTag` at `at`: whether the store's stamp of `tag` was raised
  /// (`None`: not reached; it is kept for auto-recovery). The stamp lives at
  /// least `px` ms there.
  pub async fn invalidate_tag(&self, tag: &str, at: u64, px: u64) -> Option<bool> {
    self.tag_ttl.fetch_max(px, Ordering::Relaxed);
    self
      .deliver(
        self.store.invalidate_tag(tag, at, px),
        |fleet| fleet.settle_queued(|queue| queue.settled_tag(tag, at)),
        |fleet| fleet.kept(|queue, now| queue.push_tag(tag, at, now)),
      )
      .await
  }

  /// `clear`: how many values the store removed (`None`: not reached; the
  /// clear is kept for auto-recovery).
  pub async fn clear(&self) -> Option<u64> {
    let stamp = self.clock.now();
    self
      .deliver(
        self.store.clear(ClearScope::All, None),
        |fleet| fleet.settle_queued(|queue| queue.settled_clear(stamp)),
        |fleet| fleet.kept(|queue, now| queue.push_clear(stamp, now)),
      )
      .await
  }

  /// A namespace's `clear` of the keys starting with `prefix`: how many
  /// values the store removed (`None`: not reached; the clear is kept for
  /// auto-recovery).
  pub async fn clear_prefix(&self, prefix: &str) -> Option<u64> {
    let stamp = self.clock.now();
    self
      .deliver(
        self.store.clear(ClearScope::Namespace(prefix), None),
        |fleet| fleet.settle_queued(|queue| queue.settled_clear_prefix(prefix, stamp)),
        |fleet| fleet.kept(|queue, now| queue.push_clear_prefix(prefix, stamp, now)),
      )
      .await
  }
}
