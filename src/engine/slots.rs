//! The fleet-wide load cap (`fleetMaxConcurrentLoads`), this instance's
//! side: how many of the fleet's load slots it holds, how many its load
//! queue (lib/bulkhead.js) wants, and one task that keeps the shared store
//! ([`SharedStore::load_slots`], a semaphore with leases and a fair queue)
//! in step with both.
//!
//! The JS queue says what it wants as a whole and what it gives back (a slot
//! whose loader settled) in one call ([`LoadSlots::update`]: the loads
//! queued that a slot would start now), and takes the grants through one
//! promise at a time ([`LoadSlots::next`]). The task makes one store
//! call at a time, with the whole holding: a release, a renewal and a
//! request are the same call, so a slot given back goes to the instance
//! first in the fleet's queue, which may be this one. A waiting instance
//! asks again when another announces freed slots, and every
//! [`WAIT_POLL`] in any case (a notice may be lost); its place in the
//! queue lives [`WAIT_LEASE`] without a call. What it holds lives one lock
//! lease (`lockTtl`) and is renewed every third of it, so an instance that
//! crashed frees its slots within `lockTtl`.
//!
//! When the store cannot be asked (down, slow, the breaker open), the
//! waiting JS queue is told to run its loads under the per-process cap
//! alone (fail open); the slots held meanwhile are told to the store once
//! it answers again.

use super::shared::{SlotCall, SlotGrant};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How often a waiting instance asks again without a notice, ms.
pub const WAIT_POLL: u64 = 250;
/// How long a waiting instance keeps its place in the fleet's queue
/// without asking again, ms: a waiter that crashed holds the queue up no
/// longer than this. The task asks every [`WAIT_POLL`], on tokio (a busy
/// JS thread does not stop it).
pub const WAIT_LEASE: u64 = 1_000;
/// After a store call failed, the next one waits this long (ms) unless the
/// queue asks: no busy loop while the store is down.
const RETRY: u64 = 250;

/// What JS gets from [`LoadSlots::next`] when the store could not be asked:
/// run the queued loads under the per-process cap alone.
pub const FAILED_OPEN: i64 = -1;

#[derive(Debug, Default)]
struct State {
  /// Slots the store granted and JS has not given back.
  held: u64,
  /// The holding the store was last told (`None`: not known to it, or a
  /// call failed).
  told: Option<u64>,
  /// Slots the JS queue wants, less the grants handed to it since it said so.
  demand: u64,
  /// Granted, not yet handed to JS.
  granted: u64,
  /// The store could not be asked while JS wanted slots: the next `next`
  /// says to fail open.
  failed_open: bool,
  /// This instance's place in the fleet's queue, as the store last said
  /// (0: not queued).
  ticket: u64,
  stopped: bool,
}

impl State {
  /// What to ask the store for: the demand not yet granted.
  fn wanted(&self) -> u64 {
    self.demand.saturating_sub(self.granted)
  }

  /// Grants past the demand (it fell while they were asked for) are not
  /// handed to JS: they go back, told to the store at the keeper's next
  /// call, or the instance would hold and renew slots nobody uses. True if
  /// some went back.
  fn give_back_surplus(&mut self) -> bool {
    let surplus = self.granted.saturating_sub(self.demand);
    self.granted -= surplus;
    self.held = self.held.saturating_sub(surplus);
    surplus > 0
  }

  /// Whether the store must hear from us now.
  fn must_call(&self) -> bool {
    self.told != Some(self.held) || self.wanted() > 0
  }
}

/// This instance's side of the fleet's load slots.
pub struct LoadSlots {
  cap: u64,
  lease: u64,
  state: Mutex<State>,
  /// Wakes the task: the demand or the holding changed, or slots were
  /// freed elsewhere.
  wake: Notify,
  /// Wakes the JS waiter (`next`).
  ready: Notify,
}

impl LoadSlots {
  /// `cap` slots in the fleet; a holding lives `lease` ms (the lock's,
  /// at least 3) unless renewed.
  pub fn new(cap: u64, lease: u64) -> LoadSlots {
    LoadSlots {
      cap,
      lease,
      state: Mutex::new(State::default()),
      wake: Notify::new(),
      ready: Notify::new(),
    }
  }

  fn state(&self) -> std::sync::MutexGuard<'_, State> {
    self.state.lock().unwrap_or_else(|p| p.into_inner())
  }

  /// The store call that tells it this instance holds `held` and wants
  /// `wanted` more.
  pub fn call(&self, held: u64, wanted: u64) -> SlotCall {
    SlotCall {
      held,
      wanted,
      cap: self.cap,
      lease: self.lease,
      wait: WAIT_LEASE,
    }
  }

  /// Slots held now (the gauge).
  pub fn held(&self) -> u64 {
    self.state().held
  }

  /// From the JS queue: `released` slots given back, and it wants
  /// `demand` now (all it wants, not a change).
  pub fn update(&self, released: u64, demand: u64) {
    let mut state = self.state();
    let had = state.wanted();
    state.held = state.held.saturating_sub(released);
    state.demand = demand;
    let gave_back = state.give_back_surplus();
    let wanted = state.wanted();
    drop(state);
    if released > 0 || gave_back || wanted > had {
      self.wake.notify_one();
    }
    if demand == 0 {
      // The waiter (if any) answers 0, so no promise outlives the demand.
      self.ready.notify_one();
    }
  }

  /// Another instance announced free slots for the waiting instances up to
  /// place `up_to` (0: all): one of them that waits asks again.
  pub fn freed(&self, up_to: u64) {
    let state = self.state();
    let mine = up_to == 0 || state.ticket == 0 || state.ticket <= up_to;
    if mine && state.wanted() > 0 {
      drop(state);
      self.wake.notify_one();
    }
  }

  /// The JS waiter: resolves with the slots granted since (at least one),
  /// [`FAILED_OPEN`], or 0 (nothing is wanted any more, or the fleet
  /// stopped).
  pub async fn next(&self) -> i64 {
    loop {
      let notified = self.ready.notified();
      tokio::pin!(notified);
      notified.as_mut().enable();
      {
        let mut state = self.state();
        if state.granted > 0 {
          let granted = std::mem::take(&mut state.granted);
          state.demand = state.demand.saturating_sub(granted);
          return granted as i64;
        }
        if state.failed_open {
          state.failed_open = false;
          state.demand = 0;
          return FAILED_OPEN;
        }
        if state.stopped || state.demand == 0 {
          return 0;
        }
      }
      notified.await;
    }
  }

  /// No more calls: the JS waiter answers 0. True if the store may count
  /// something of this instance's (the fleet's stop gives it back, bounded).
  pub fn stop(&self) -> bool {
    let mut state = self.state();
    state.stopped = true;
    let known = state.held > 0 || state.told.is_some_and(|told| told > 0) || state.demand > 0;
    drop(state);
    self.ready.notify_one();
    known
  }

  /// The store answered: `granted` more on top of the `held` it was told,
  /// and this instance's place in the queue now.
  fn answered(&self, held: u64, granted: u64, ticket: u64) {
    let mut state = self.state();
    state.ticket = ticket;
    state.held += granted;
    // JS may have given slots back during the call: told what was sent.
    state.told = Some(held + granted);
    state.granted += granted;
    // The keeper, which called, sees the store must be told of it.
    state.give_back_surplus();
    drop(state);
    if granted > 0 {
      self.ready.notify_one();
    }
  }

  /// The store could not be asked: a waiting queue fails open.
  fn failed(&self) {
    let mut state = self.state();
    state.told = None;
    state.ticket = 0;
    let waiting = state.wanted() > 0;
    if waiting {
      state.failed_open = true;
    }
    drop(state);
    if waiting {
      self.ready.notify_one();
    }
  }
}

/// The task that keeps the store in step with `slots` through `ask` (one
/// store call: `held` held, `wanted` more wanted; `Some(None)`: the store
/// could not be asked), until `ask` answers `None` (its fleet is gone; the
/// fleet's `stop` aborts the task before that).
pub async fn keep<A, F>(ask: A, slots: Arc<LoadSlots>)
where
  A: Fn(u64, u64) -> F,
  F: Future<Output = Option<Option<SlotGrant>>>,
{
  let renew = Duration::from_millis(slots.lease / 3);
  let mut renew_due = false;
  loop {
    // Registered before the state is read: a change in between wakes it.
    let wake = slots.wake.notified();
    tokio::pin!(wake);
    wake.as_mut().enable();
    let (held, wanted, must_call) = {
      let state = slots.state();
      (state.held, state.wanted(), state.must_call())
    };
    if !must_call && !renew_due {
      // Idle, or holding slots: wait for a change, or renew them in time.
      if held == 0 {
        wake.await;
      } else {
        renew_due = tokio::time::timeout(renew, wake).await.is_err();
      }
      continue;
    }
    renew_due = false;
    let Some(answer) = ask(held, wanted).await else {
      return;
    };
    let pause = match answer {
      Some(grant) => {
        slots.answered(held, grant.granted, grant.ticket);
        if slots.state().wanted() == 0 {
          continue;
        }
        WAIT_POLL
      }
      None => {
        slots.failed();
        RETRY
      }
    };
    // A change during the call (a release, more demand, a notice) ends
    // the pause at once.
    let _ = tokio::time::timeout(Duration::from_millis(pause), wake).await;
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn answered_now(slots: &LoadSlots) -> Option<i64> {
    futures_util::FutureExt::now_or_never(slots.next())
  }

  #[test]
  fn grants_reach_the_waiter_and_count_against_the_demand() {
    let slots = LoadSlots::new(10, 3_000);
    slots.update(0, 3);
    assert_eq!(answered_now(&slots), None, "nothing granted yet: it waits");
    assert!(slots.state().must_call());
    slots.answered(0, 2, 1);
    assert_eq!(slots.held(), 2);
    assert_eq!(
      slots.state().wanted(),
      1,
      "two of three granted, not yet taken"
    );
    // The queue, not knowing yet, says it wants four now: one more.
    slots.update(0, 4);
    assert_eq!(slots.state().wanted(), 2);
    assert_eq!(answered_now(&slots), Some(2));
    assert_eq!(
      slots.state().demand,
      2,
      "what was handed over is no longer wanted"
    );
    slots.update(1, 2);
    assert_eq!(slots.held(), 1);
    assert!(
      slots.state().must_call(),
      "the store must hear of the release"
    );
    slots.update(0, 0);
    slots.answered(1, 0, 0);
    assert!(!slots.state().must_call());
    assert_eq!(
      answered_now(&slots),
      Some(0),
      "nothing wanted: the waiter is let go"
    );
  }

  #[test]
  fn grants_past_a_demand_that_fell_meanwhile_go_back() {
    let slots = LoadSlots::new(10, 3_000);
    slots.update(0, 2);
    // The queue's loads all ran (or left) while the store was asked.
    slots.update(0, 0);
    slots.answered(0, 2, 0);
    assert_eq!(slots.held(), 0, "nobody will use them: not held");
    assert!(
      slots.state().must_call(),
      "the store must hear they are back"
    );
    assert_eq!(answered_now(&slots), Some(0));
    // Granted and not yet taken when the demand falls: the surplus goes back.
    slots.update(0, 3);
    slots.answered(0, 3, 0);
    slots.update(0, 1);
    assert_eq!(slots.held(), 1);
    assert_eq!(answered_now(&slots), Some(1));
  }

  #[test]
  fn a_store_that_cannot_be_asked_fails_a_waiting_queue_open() {
    let slots = LoadSlots::new(10, 3_000);
    slots.failed();
    assert!(
      !slots.state().failed_open,
      "nobody waits: nothing to fail open"
    );
    slots.update(0, 5);
    slots.failed();
    assert_eq!(answered_now(&slots), Some(FAILED_OPEN));
    assert_eq!(slots.state().demand, 0, "the queue runs what it had");
    assert_eq!(slots.state().told, None);
    // Slots held while the store was down are told once it answers.
    slots.answered(0, 1, 0);
    slots.update(1, 0);
    slots.failed();
    assert!(slots.state().must_call());
  }

  #[test]
  fn a_stopped_fleet_lets_the_waiter_go_and_says_what_to_give_back() {
    let slots = LoadSlots::new(10, 3_000);
    assert!(!slots.stop(), "never held anything");
    let slots = LoadSlots::new(10, 3_000);
    slots.update(0, 2);
    slots.answered(0, 1, 0);
    assert_eq!(answered_now(&slots), Some(1));
    assert!(slots.stop(), "one held: the store is told at stop");
    assert_eq!(answered_now(&slots), Some(0));
  }

  /// The keeper asks through the function it is given (no fleet needed):
  /// the demand goes to the store, the grant to the waiter, a release back
  /// to the store, and the task ends once its asker is gone.
  #[test]
  fn the_keeper_carries_demand_grants_and_releases_through_its_asker() {
    let runtime = tokio::runtime::Builder::new_current_thread()
      .enable_time()
      .build()
      .unwrap();
    let slots = Arc::new(LoadSlots::new(10, 3_000));
    let calls = Arc::new(Mutex::new(Vec::new()));
    let asked = Arc::clone(&calls);
    let ask = move |held: u64, wanted: u64| {
      let calls = Arc::clone(&asked);
      async move {
        let mut calls = calls.lock().unwrap();
        calls.push((held, wanted));
        // The second call finds the fleet gone.
        (calls.len() < 2).then_some(Some(SlotGrant {
          granted: wanted,
          free: 0,
          waiting: 0,
          ticket: 0,
        }))
      }
    };
    runtime.block_on(async {
      let keeper = tokio::spawn(keep(ask, Arc::clone(&slots)));
      slots.update(0, 2);
      assert_eq!(slots.next().await, 2);
      slots.update(2, 0);
      tokio::time::timeout(Duration::from_secs(5), keeper)
        .await
        .expect("the keeper ends once its asker answers None")
        .unwrap();
    });
    assert_eq!(
      *calls.lock().unwrap(),
      vec![(0, 2), (0, 0)],
      "asked for two, then told both were given back"
    );
  }
}
