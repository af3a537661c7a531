//! Writes: a flight's fill (conditional on its stamp, releasing its lock),
//! its failure, and `set`.

use super::{Fleet, Invalidation};
use crate::core::body::{compressed, Body, INLINE_COMPRESSION_MAX};
use crate::core::envelope::{Envelope, Meta};
use crate::core::options::Compress;
use crate::core::policy;
use crate::engine::recovery::KeyOp;
use crate::engine::shared::SharedStore;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How long a write or invalidation made before the store first answered
/// waits for it (capped by the command timeout): a healthy store's first
/// connection is made well within it; a silent or unreachable one does not
/// hold the caller for a whole connection attempt (the operation is kept
/// and delivered once the store answers).
const FIRST_ANSWER_WAIT: Duration = Duration::from_millis(100);

impl<S: SharedStore> Fleet<S> {
  /// A value as the store will hold it: compressed when `compress` asks for
  /// it and it is at or past its threshold (`core::body::compressed`: kept
  /// as it is if that saves nothing). A large one is compressed on tokio's
  /// blocking pool, so a runtime worker stays free for the fleet's I/O; a
  /// small one inline, where the hand-off would cost more than the work.
  /// Both sizes are counted.
  pub async fn stored_body(&self, body: Body, compress: Option<Compress>) -> Body {
    let written = body.len() as u64;
    let body = match compress {
      Some(c) if written >= c.threshold && body.len() >= INLINE_COMPRESSION_MAX => {
        let shared = Arc::new(body);
        let input = Arc::clone(&shared);
        let packed = tokio::task::spawn_blocking(move || compressed(&input, c.level)).await;
        // Not smaller, or the pool is shutting down (the process exits):
        // as it is (the task dropped its reference: nothing is copied).
        packed
          .ok()
          .flatten()
          .unwrap_or_else(|| Arc::unwrap_or_clone(shared))
      }
      Some(c) if written >= c.threshold => compressed(&body, c.level).unwrap_or(body),
      _ => body,
    };
    self
      .counters
      .value_bytes_written
      .fetch_add(written, Ordering::Relaxed);
    let stored = body.len() as u64;
    self
      .counters
      .value_bytes_stored
      .fetch_add(stored, Ordering::Relaxed);
    body
  }

  /// Writes a flight's result (conditional on its stamp), announces it, and
  /// releases the lock it holds: `Some(true)` written, `Some(false)` a newer
  /// value was kept, `None` skipped or failed (counted).
  pub async fn settle(
    &self,
    key: &str,
    id: u64,
    envelope: Envelope,
    token: Option<String>,
  ) -> Option<bool> {
    let token = token.or(self.end_steps(id).map(|(_, token)| token));
    if !self.allowed() {
      if let Some(token) = token {
        // Skipped, but the lock is ours to free.
        self.release_soon(Arc::new(self.store.keys(key)), token);
      }
      return None;
    }
    let result = self
      .write_envelope(key, &envelope, token.as_deref(), false)
      .await;
    self.track(result)
  }

  /// `ctx.keep()`: the stored value this instance's copy `kept` describes
  /// takes `meta`'s deadlines (`SharedStore::keep_over`), announced, and
  /// the lock it holds is released: `Some(true)` kept, `Some(false)` the
  /// store holds another value (this instance's copy is superseded),
  /// `None` skipped or failed (counted).
  pub async fn keep_stored(
    &self,
    key: &str,
    id: u64,
    kept: Meta,
    meta: Meta,
    token: Option<String>,
  ) -> Option<bool> {
    let token = token.or(self.end_steps(id).map(|(_, token)| token));
    let keys = self.store.keys(key);
    if !self.allowed() {
      if let Some(token) = token {
        self.release_soon(Arc::new(keys), token);
      }
      return None;
    }
    let px = policy::hard_ttl_left(&meta, self.clock.now()).max(1);
    let result = self
      .store
      .keep_over(key, &keys, &kept, &meta, px, token.as_deref())
      .await;
    self.track(result)
  }

  /// How long `envelope` lives in the store: to its hard TTL, 1 ms at least.
  pub(super) fn hard_ttl_left(&self, envelope: &Envelope) -> u64 {
    policy::hard_ttl_left(&envelope.meta, self.clock.now()).max(1)
  }

  /// How long a stamp the application wrote (a `set`, a `delete`'s
  /// tombstone) stays in the store: as long as a load begun before it may
  /// still write (its `hardTimeout`, the lock's lease, the write's own
  /// bound), so no older fill lands over it. A value past its hard TTL is
  /// kept that long, but every reader judges it expired (`policy::alive`).
  pub(super) fn guarded_ms(&self) -> u64 {
    let command = self.store.command_timeout().as_millis() as u64;
    self.hard_timeout + self.lease.ttl + command
  }

  /// How long a `set`'s `envelope` lives in the store: its hard TTL, and
  /// never less than [`Fleet::guarded_ms`].
  fn set_ttl(&self, envelope: &Envelope) -> u64 {
    self.hard_ttl_left(envelope).max(self.guarded_ms())
  }

  /// The conditional write of `envelope` (a fill, or `set` a replayed
  /// `set`), expiring at its hard TTL (a `set`: [`Fleet::set_ttl`]), over a
  /// corrupt value this instance read (untracked: the caller feeds the
  /// breaker).
  pub(super) async fn write_envelope(
    &self,
    key: &str,
    envelope: &Envelope,
    token: Option<&str>,
    set: bool,
  ) -> Result<bool, S::Error> {
    let keys = self.store.keys(key);
    let px = match set {
      true => self.set_ttl(envelope),
      false => self.hard_ttl_left(envelope),
    };
    let corrupt = self.take_corrupt_stamp(key);
    self
      .store
      .write_over(key, &keys, envelope, px, token, corrupt)
      .await
  }

  /// A flight whose loader failed: release its lock so another instance
  /// may try (nothing is written: errors are never cached).
  pub async fn abandon(&self, key: &str, id: u64, token: Option<String>) {
    let token = token.or(self.end_steps(id).map(|(_, token)| token));
    self.take_corrupt_stamp(key);
    if let Some(token) = token {
      let keys = self.store.keys(key);
      let result = self.store.release(&keys, &token).await;
      self.track(result);
    }
  }

  /// A background refresh whose loader failed: leaves the key's back-off
  /// marker (`failures` in a row, for `ms`) and releases its lock in one
  /// step, so the fleet makes its next attempt only after the back-off.
  pub async fn fail_refresh(
    &self,
    key: &str,
    id: u64,
    token: Option<String>,
    failures: u32,
    ms: u64,
  ) {
    let token = token.or(self.end_steps(id).map(|(_, token)| token));
    self.take_corrupt_stamp(key);
    if token.is_none() && !self.allowed() {
      return;
    }
    let keys = self.store.keys(key);
    let result = self
      .store
      .fail_refresh(&keys, token.as_deref(), failures, ms)
      .await;
    self.track(result);
  }

  /// `set`: an envelope written outside any flight, over whatever is
  /// stored: the application's newest value always lands, stamped after the
  /// stored one if need be (`write_newest`), and this instance's memory
  /// takes the stamp written. One that cannot reach the store is kept for
  /// auto-recovery (false then), and replayed conditionally.
  pub async fn write(&self, key: &str, envelope: Envelope) -> bool {
    if !self.allowed() {
      self.keep(key, KeyOp::Set(envelope));
      return false;
    }
    let first = self.before_first_answer();
    if first {
      self.keep(key, KeyOp::Set(envelope.clone()));
    }
    let keys = self.store.keys(key);
    let px = self.set_ttl(&envelope);
    // A corrupt value this instance read is overwritten by any write.
    self.take_corrupt_stamp(key);
    let Some(result) = self
      .unhurried(first, self.store.write_newest(key, &keys, &envelope, px))
      .await
    else {
      return false;
    };
    match self.track(result) {
      Some(stamp) => {
        self.settled(key, envelope.meta.stamp);
        if stamp != envelope.meta.stamp {
          self.invalidations.push(Invalidation::Restamped {
            key: key.to_string(),
            from: envelope.meta.stamp,
            to: stamp,
          });
        }
        true
      }
      None => {
        if !first {
          self.keep(key, KeyOp::Set(envelope));
        }
        false
      }
    }
  }

  /// No command reached the store yet (the first connection is being
  /// made): a write or invalidation is kept for auto-recovery before it is
  /// sent, and its caller waits [`FIRST_ANSWER_WAIT`] at most
  /// ([`Fleet::unhurried`]); if it lands, it supersedes what was kept.
  pub(super) fn before_first_answer(&self) -> bool {
    !self.connected.load(Ordering::Relaxed)
  }

  /// `call`, awaited whole, or with `first` for [`FIRST_ANSWER_WAIT`] at
  /// most (`None` then: it was kept, and the replay delivers it once the
  /// store answers).
  pub(super) async fn unhurried<T>(&self, first: bool, call: impl Future<Output = T>) -> Option<T> {
    if !first {
      return Some(call.await);
    }
    let wait = FIRST_ANSWER_WAIT.min(self.store.command_timeout());
    tokio::time::timeout(wait, call).await.ok()
  }

  /// This instance's write of `key` stamped `stamp` lost to a later value
  /// in the store: the L1 lets go of it ([`Invalidation::Superseded`]).
  pub(super) fn superseded(&self, key: &str, stamp: u64) {
    self.invalidations.push(Invalidation::Superseded {
      key: key.to_string(),
      stamp,
    });
  }
}
