//! Acquisition: who loads a key across the fleet, decided by
//! `core::fleet::acquire`'s machine and carried out here against the store
//! (reads, lock commands, the wait for the holder's fill notice), and the
//! locks this instance holds for its flights, with their leases.

use super::{bump, Acquired, Flag, Fleet, HeldLock, Steps, Terms};
use crate::core::fleet::{Acquisition, Check, Heard, LockAttempt, Next, ReadAnswer};
use crate::engine::shared::{lock_token, Notice, SharedStore};
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

  /// [`Fleet::acquire_steps`]' decision: the flight's [`Acquisition`]
  /// carried out against the store, one step at a time (every decision is
  /// the machine's; this only runs its reads, lock commands and waits and
  /// tells it what they answered). A flight given up before a step that
  /// would reach the store is told so instead.
  async fn decide_loader(
    self: &Arc<Self>,
    key: &str,
    id: u64,
    terms: Terms,
    read_first: bool,
    given_up: &Flag,
    parked: &AtomicBool,
  ) -> Acquired {
    let mut machine = Acquisition::new(lock_token(), read_first, terms.refresh);
    let keys = Arc::new(self.store.keys(key));
    // One fill listener per flight, registered before the re-check that
    // precedes a wait, and kept across waits that time out.
    let mut notice = None;
    let mut heard = Heard::Began {
      allowed: self.allowed(),
    };
    loop {
      let next = machine.step(heard);
      if given_up.is_set() && !matches!(next, Next::Release | Next::Done(_)) {
        heard = Heard::GivenUp;
        continue;
      }
      heard = match next {
        Next::Done(acquired) => return acquired,
        Next::Read(check) => Heard::Read(self.check(key, &keys, check, &terms, &mut notice).await),
        Next::Lock { refresh } => {
          let attempt = self.try_lock(&keys, machine.token(), refresh).await;
          if attempt == Some(LockAttempt::Won) {
            bump(&self.counters.lock_acquired);
          }
          Heard::Locked(attempt)
        }
        // Registered (with its lease keeper) before the next await, so a
        // give-up or a stop finds it.
        Next::KeepLease => {
          Heard::LeaseKept(self.keep_lease(id, Arc::clone(&keys), machine.token().to_string()))
        }
        Next::Release => {
          self.release_soon(Arc::clone(&keys), machine.token().to_string());
          Heard::Released
        }
        Next::Wait { ms } => {
          self.wait_for_notice(key, &mut notice, ms, parked).await;
          Heard::Woke
        }
      };
    }
  }

  /// Carries out one of the machine's reads: the first (any value that
  /// answers `terms`, a corrupt one counted), or a fresh re-check (after
  /// listening for the fill notice, when it precedes a wait).
  async fn check(
    &self,
    key: &str,
    keys: &S::Keys,
    check: Check,
    terms: &Terms,
    notice: &mut Option<oneshot::Receiver<Notice>>,
  ) -> ReadAnswer {
    match check {
      Check::Answer => {
        let Some(read) = self.read(keys).await else {
          return ReadAnswer::Failed;
        };
        self.note_corrupt(key, &read);
        match self.answer(key, &read, terms) {
          Some(answer) => ReadAnswer::Answers(answer),
          None => ReadAnswer::Nothing,
        }
      }
      Check::BeforeWait { first_contention } => {
        if first_contention {
          bump(&self.counters.lock_contended);
        }
        notice.get_or_insert_with(|| self.events.wait(key));
        self.check_fresh(key, keys, terms).await
      }
      Check::Fresh => self.check_fresh(key, keys, terms).await,
    }
  }

  async fn check_fresh(&self, key: &str, keys: &S::Keys, terms: &Terms) -> ReadAnswer {
    match self
      .fresh(key, keys, self.clock.now(), terms.newer_than)
      .await
    {
      None => ReadAnswer::Failed,
      Some(None) => ReadAnswer::Nothing,
      Some(Some(e)) => ReadAnswer::Answers(Acquired::Value(e)),
    }
  }

  /// Waits up to `ms` for the key's fill notice, parked (so
  /// `engine::together` can answer the turn's other asks). A timeout (the
  /// lease ran out first: the holder died, or is extending it) keeps the
  /// listener for the next wait. Bounded by the flight's deadline, not
  /// here: see `loser_wait`.
  async fn wait_for_notice(
    &self,
    key: &str,
    notice: &mut Option<oneshot::Receiver<Notice>>,
    ms: u64,
    parked: &AtomicBool,
  ) {
    let waiter = notice.get_or_insert_with(|| self.events.wait(key));
    bump(&self.counters.lock_waits);
    parked.store(true, Ordering::SeqCst);
    let woken = tokio::time::timeout(Duration::from_millis(ms), waiter).await;
    parked.store(false, Ordering::SeqCst);
    if let Ok(woken) = woken {
      if woken == Ok(Notice::Changed) {
        bump(&self.counters.fill_notices);
      }
      *notice = None;
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
