//! Acquisition: who loads a key across the fleet (another instance's
//! value, the lock, or a wait for the holder's fill notice), and the locks
//! this instance holds for its flights, with their leases.

use super::{bump, Acquired, Flag, Fleet, HeldLock, Steps, Terms};
use crate::core::fleet::loser_wait;
use crate::engine::shared::{lock_token, LockAttempt, SharedStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

impl<S: SharedStore> Fleet<S> {
  /// Registers flight `id`'s fleet steps, before its first await: what
  /// [`Fleet::give_up`] fires. Already fired when the fleet stopped.
  pub fn begin_steps(&self, id: u64) -> Arc<Flag> {
    let given_up = Arc::new(Flag::default());
    let mut steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
    if self.stopped.load(Ordering::SeqCst) {
      given_up.set(true);
      return given_up;
    }
    match steps.get(&id) {
      // Asked again (after a stale answer): the same steps go on.
      Some(existing) => Arc::clone(&existing.given_up),
      None => {
        steps.insert(
          id,
          Steps {
            given_up: Arc::clone(&given_up),
            lock: None,
          },
        );
        given_up
      }
    }
  }

  /// Flight `id` was given up (timed out, its leader gone, the cache
  /// closing; a caller's own signal only stops that caller waiting): its
  /// steps stop at their next await and take no lock after
  /// this. A lock it holds stays for the flight's own release
  /// ([`Fleet::abandon`], [`Fleet::fail_refresh`]), which follows.
  pub fn give_up(&self, id: u64) {
    let steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(flight) = steps.get(&id) {
      flight.given_up.set(true);
    }
  }

  /// Ends flight `id`'s steps: its lease keeper stops, and the lock it
  /// holds, if any, is handed back for the caller to release or write.
  pub(super) fn end_steps(&self, id: u64) -> Option<(Arc<S::Keys>, String)> {
    let flight = self
      .steps
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .remove(&id)?;
    flight.given_up.set(true);
    let lock = flight.lock?;
    lock.extender.abort();
    Some((lock.keys, lock.token))
  }

  /// [`Fleet::acquire_steps`] with the flight's steps registered when it
  /// is first polled.
  pub async fn acquire(
    self: &Arc<Self>,
    key: &str,
    id: u64,
    terms: Terms,
    read_first: bool,
  ) -> Acquired {
    let given_up = self.begin_steps(id);
    let parked = AtomicBool::new(false);
    self
      .acquire_steps(key, id, terms, read_first, given_up, &parked)
      .await
  }

  /// Decides who loads `key` (flight `id`): another instance's value, or
  /// the lock (this instance loads), or a wait for the winner's fill
  /// notice. `read_first: false` when [`Fleet::read_many`] just read it.
  /// `given_up` is [`Fleet::begin_steps`]'s: once it fires, the steps end
  /// (answering a local load, which a flight that is gone never runs) and a
  /// lock won meanwhile is released at once. `parked` is set while the
  /// steps wait for the lock's holder to fill the key
  /// (`engine::together`).
  pub async fn acquire_steps(
    self: &Arc<Self>,
    key: &str,
    id: u64,
    terms: Terms,
    read_first: bool,
    given_up: Arc<Flag>,
    parked: &AtomicBool,
  ) -> Acquired {
    let acquired = tokio::select! {
      biased;
      () = given_up.wait() => Acquired::Load { token: None },
      acquired = self.decide_loader(key, id, terms, read_first, &given_up, parked) => acquired,
    };
    if !matches!(acquired, Acquired::Load { token: Some(_) }) {
      // No lock for the flight: nothing of it stays with the fleet (a lock
      // won just before the give-up is let go of).
      if let Some((keys, token)) = self.end_steps(id) {
        self.release_soon(keys, token);
      }
    }
    acquired
  }

  /// [`Fleet::acquire_steps`]' decision: a value read first, else the lock
  /// asked for until it is won, backs off, fails, or a value the holder
  /// wrote answers.
  async fn decide_loader(
    self: &Arc<Self>,
    key: &str,
    id: u64,
    terms: Terms,
    read_first: bool,
    given_up: &Flag,
    parked: &AtomicBool,
  ) -> Acquired {
    let local = Acquired::Load { token: None };
    if !self.allowed() {
      return local;
    }
    let keys = Arc::new(self.store.keys(key));
    if read_first {
      let Some(read) = self.read(&keys).await else {
        return local;
      };
      self.note_corrupt(key, &read);
      if let Some(answer) = self.answer(key, &read, &terms) {
        return answer;
      }
    }
    let token = lock_token();
    let mut contended = false;
    // One fill waiter per flight, registered before the first re-check and
    // kept across waits that time out (a new one only after it fired).
    let mut notice = None;
    loop {
      if given_up.is_set() {
        return local;
      }
      match self.try_lock(&keys, &token, terms.refresh).await {
        None => return local,
        Some(LockAttempt::Won) => return self.won(key, id, keys, token, terms).await,
        Some(LockAttempt::BackingOff { failures, ms }) => {
          return Acquired::BackOff { failures, ms };
        }
        Some(LockAttempt::Held(lease)) => {
          if !contended {
            contended = true;
            bump(&self.counters.lock_contended);
          }
          let waited = self.wait_for_holder(key, &keys, lease, terms, &mut notice, parked);
          if let Some(answer) = waited.await {
            return answer;
          }
        }
      }
    }
  }

  /// One ask for the lock under `token`; `None`: the command failed (the
  /// lock is released later, in case it landed all the same).
  async fn try_lock(&self, keys: &Arc<S::Keys>, token: &str, refresh: bool) -> Option<LockAttempt> {
    // Dropped mid-command (given up), the lock may still land under our
    // token: released then, as after a failure.
    let mut pending = PendingLock {
      fleet: self,
      lock: Some((Arc::clone(keys), token.to_string())),
    };
    let attempt = if refresh {
      self.store.lock_refresh(keys, token, self.lease.ttl).await
    } else {
      self.store.lock(keys, token, self.lease.ttl).await
    };
    pending.lock = None;
    let answer = self.track(attempt);
    if answer.is_none() {
      // The command failed or timed out here, but it may still land and
      // take the lock under our token, which nobody would then release
      // or fill: another instance would wait out the whole lease.
      self.release_later(Arc::clone(keys), token.to_string());
    }
    answer
  }

  /// The lock was won: held from here, unless someone wrote between our
  /// read and our lock.
  async fn won(
    self: &Arc<Self>,
    key: &str,
    id: u64,
    keys: Arc<S::Keys>,
    token: String,
    terms: Terms,
  ) -> Acquired {
    let local = Acquired::Load { token: None };
    bump(&self.counters.lock_acquired);
    // Registered (with its lease keeper) before the next await, so a
    // give-up or a stop finds it.
    if !self.keep_lease(id, Arc::clone(&keys), token.clone()) {
      self.release_soon(keys, token);
      return local;
    }
    // The lock is let go of without an await after `end_steps`: that fires
    // this flight's give-up, which would win `acquire_steps`' select over
    // this answer, and the flight would load without the lock.
    let answer = match self
      .fresh(key, &keys, self.clock.now(), terms.newer_than)
      .await
    {
      Some(Some(e)) => Acquired::Value(e),
      None => local,
      Some(None) => return Acquired::Load { token: Some(token) },
    };
    if let Some((keys, token)) = self.end_steps(id) {
      self.release_soon(keys, token);
    }
    answer
  }

  /// The lock is held by another instance (`lease` ms left): a value it
  /// wrote, if any, re-checked before and after waiting for its fill
  /// notice (or the lease's end). `None`: ask for the lock again.
  async fn wait_for_holder(
    &self,
    key: &str,
    keys: &S::Keys,
    lease: u64,
    terms: Terms,
    notice: &mut Option<oneshot::Receiver<()>>,
    parked: &AtomicBool,
  ) -> Option<Acquired> {
    let local = Some(Acquired::Load { token: None });
    // Subscribe before re-checking: a fill in between still wakes us.
    let waiter = notice.get_or_insert_with(|| self.events.wait(key));
    match self
      .fresh(key, keys, self.clock.now(), terms.newer_than)
      .await
    {
      Some(Some(e)) => return Some(Acquired::Value(e)),
      None => return local,
      Some(None) => {}
    }
    // Bounded by the flight's deadline, not here: see `loser_wait`.
    let ms = loser_wait(lease);
    bump(&self.counters.lock_waits);
    // A timeout (the lease ran out first: the holder died, or is
    // extending it) keeps the waiter for the next turn.
    parked.store(true, Ordering::SeqCst);
    let woken = tokio::time::timeout(Duration::from_millis(ms), waiter).await;
    parked.store(false, Ordering::SeqCst);
    if let Ok(woken) = woken {
      if woken.is_ok() {
        bump(&self.counters.fill_notices);
      }
      *notice = None;
    }
    match self
      .fresh(key, keys, self.clock.now(), terms.newer_than)
      .await
    {
      Some(Some(e)) => Some(Acquired::Value(e)),
      None => local,
      Some(None) => None,
    }
  }

  /// Compare-and-deletes a lock we may hold, off the caller's path and past
  /// the breaker. The command that took it may land late (or after a
  /// reconnect, behind a release sent on the new connection), so the
  /// release is repeated every redisTimeout until it removed the lock or the
  /// lease is over; with our unique token every attempt is harmless.
  pub(super) fn release_later(&self, keys: Arc<S::Keys>, token: String) {
    let Some(fleet) = self.me.upgrade() else {
      return;
    };
    let every = fleet.store.command_timeout();
    let until = Instant::now() + Duration::from_millis(fleet.lease.ttl);
    self.runtime.spawn(async move {
      loop {
        if let Ok(true) = fleet.store.release(&keys, &token).await {
          return;
        }
        if Instant::now() + every > until || fleet.stopped.load(Ordering::SeqCst) {
          return;
        }
        tokio::time::sleep(every).await;
      }
    });
  }

  /// Compare-and-deletes a lock we hold, once, on a task of its own (what
  /// a flight given up or a stopping fleet lets go of).
  pub(super) fn release_soon(&self, keys: Arc<S::Keys>, token: String) {
    let Some(fleet) = self.me.upgrade() else {
      return;
    };
    self.runtime.spawn(async move {
      let result = fleet.store.release(&keys, &token).await;
      fleet.track(result);
    });
  }

  /// Registers the lock flight `id` won and extends its lease every third
  /// of its TTL while the flight's loader runs, until the flight ends (or
  /// hardTimeout plus one lease, whichever first). False, and nothing
  /// registered, when the flight was given up meanwhile: the caller
  /// releases the lock.
  pub(super) fn keep_lease(self: &Arc<Self>, id: u64, keys: Arc<S::Keys>, token: String) -> bool {
    let mut steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
    let Some(flight) = steps.get_mut(&id).filter(|f| !f.given_up.is_set()) else {
      return false;
    };
    let fleet = Arc::clone(self);
    let every = Duration::from_millis(self.lease.extend_every);
    let give_up = Instant::now() + Duration::from_millis(self.hard_timeout + self.lease.ttl);
    let extended = (Arc::clone(&keys), token.clone());
    let extender = self.runtime.spawn(async move {
      let (keys, token) = extended;
      while Instant::now() < give_up {
        tokio::time::sleep(every).await;
        match fleet.store.extend(&keys, &token, fleet.lease.ttl).await {
          Ok(true) => {}
          // Lost the lock (lease ran out and someone took it) or Redis fails:
          // stop; the write stays conditional on the stamp either way.
          _ => break,
        }
      }
    });
    if let Some(old) = flight.lock.replace(HeldLock {
      keys,
      token,
      extender,
    }) {
      old.extender.abort();
    }
    true
  }
}

/// A lock command in flight: dropped before it answered (its flight given
/// up), the lock it may have taken is released.
struct PendingLock<'a, S: SharedStore> {
  fleet: &'a Fleet<S>,
  /// The lock's names and token while the command is in flight.
  lock: Option<(Arc<S::Keys>, String)>,
}

impl<S: SharedStore> Drop for PendingLock<'_, S> {
  fn drop(&mut self) {
    if let Some((keys, token)) = self.lock.take() {
      self.fleet.release_later(keys, token);
    }
  }
}
