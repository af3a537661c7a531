//! A fleet's start (its tasks, and the routing of the store's events) and
//! its stop.

use super::{
  bump, lock, Flag, Fleet, FleetConfig, FleetCounters, Invalidation, Invalidations, SharedTagStamps,
};
use crate::core::breaker::Breaker;
use crate::core::fleet::{Change, Lease};
use crate::core::tags::{TagStamps, TAG_STAMPS_CAPACITY};
use crate::engine::recovery::RecoveryQueue;
use crate::engine::shared::{Events, SharedStore, SlotGrant};
use crate::engine::slots::{self, LoadSlots};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

impl<S: SharedStore> Fleet<S> {
  /// Must run inside the tokio runtime (the subscriber is spawned).
  pub fn start(store: S, config: FleetConfig) -> Arc<Fleet<S>> {
    let invalidations = Arc::new(Invalidations::counting_on(config.clock.epoch().clone()));
    let tags: SharedTagStamps = Arc::new(Mutex::new(TagStamps::new(TAG_STAMPS_CAPACITY)));
    let lease = Lease::new(config.lock_ttl);
    let load_slots = config
      .load_slots
      .map(|cap| Arc::new(LoadSlots::new(cap, lease.ttl)));
    let events = route_events(
      store.origin().to_string(),
      &invalidations,
      &tags,
      load_slots.clone(),
    );
    let fleet = Arc::new_cyclic(|me| Fleet {
      recovery: Mutex::new(RecoveryQueue::new(
        config.recovery_max_entries,
        config.recovery_max_age,
      )),
      recovery_pending: AtomicUsize::new(0),
      replayer: Mutex::new(None),
      replay_now: Arc::new(Notify::new()),
      prober: Mutex::new(None),
      breaker_cooldown: config.breaker_cooldown,
      me: me.clone(),
      events,
      breaker: Mutex::new(Breaker::new(1, config.breaker_cooldown)),
      lease,
      load_slots,
      slots_keeper: Mutex::new(None),
      hard_timeout: config.hard_timeout,
      serializer: config.serializer.clone(),
      clock: config.clock,
      counters: FleetCounters::default(),
      steps: Mutex::new(HashMap::new()),
      stopped: AtomicBool::new(false),
      connected: Arc::new(AtomicBool::new(false)),
      subscription: Arc::new(Flag::default()),
      runtime: Handle::current(),
      invalidations,
      subscriber: Mutex::new(None),
      clock_sync: Mutex::new(None),
      clock_rtt: AtomicU64::new(u64::MAX / 4),
      clock_passed_over: AtomicU64::new(0),
      clock_syncing: tokio::sync::Mutex::new(()),
      corrupt_stamps: Mutex::new(HashMap::new()),
      tags,
      tag_ttl: AtomicU64::new(0),
      store,
    });
    fleet.start_tasks();
    fleet
  }

  /// The subscriber, the clock's sync and, with `fleetMaxConcurrentLoads`,
  /// the keeper of the load slots.
  fn start_tasks(self: &Arc<Self>) {
    let subscriber = self.subscribe();
    *self.subscriber.lock().unwrap_or_else(|p| p.into_inner()) = Some(subscriber);
    let sync = self
      .runtime
      .spawn(super::clock_sync::sync_clock(Arc::downgrade(self)));
    *self.clock_sync.lock().unwrap_or_else(|p| p.into_inner()) = Some(sync);
    if let Some(load_slots) = &self.load_slots {
      let me = Arc::downgrade(self);
      let asked = Arc::clone(load_slots);
      let ask = move |held, wanted| {
        let (me, slots) = (me.clone(), Arc::clone(&asked));
        async move { Some(me.upgrade()?.ask_load_slots(&slots, held, wanted).await) }
      };
      let keeper = slots::keep(ask, Arc::clone(load_slots));
      *self.slots_keeper.lock().unwrap_or_else(|p| p.into_inner()) =
        Some(self.runtime.spawn(keeper));
    }
  }

  /// Subscribes to the store's events. Until the subscription is live,
  /// changes elsewhere go unseen: each connection, the first too, clears
  /// the L1, so nothing missed is served from it (an instance that cached
  /// values before its first connection would otherwise keep them past
  /// another instance's change).
  fn subscribe(&self) -> JoinHandle<()> {
    let subscription = Arc::clone(&self.subscription);
    let tags = Arc::clone(&self.tags);
    let invalidations = Arc::clone(&self.invalidations);
    self.store.subscribe(&self.events, move |connected| {
      // Down, invalidations may be missed; up again, a read of the stamps
      // begun while it was down may predate one. The flag goes down before
      // the stamps are unconfirmed, and up after: a read that saw it up
      // and began after the stamps were unconfirmed confirms only while
      // the subscription is live.
      if !connected {
        subscription.set(false);
      }
      lock(&tags).unconfirm_all();
      if connected {
        subscription.set(true);
        invalidations.push(Invalidation::Subscribed);
      }
    })
  }

  /// One call on the fleet's load slots (`slots::keep`'s): `held` held,
  /// `wanted` more wanted. `None`: the store could not be asked (the
  /// breaker is open, or it failed: counted).
  pub(super) async fn ask_load_slots(
    &self,
    slots: &LoadSlots,
    held: u64,
    wanted: u64,
  ) -> Option<SlotGrant> {
    if !self.allowed() {
      return None;
    }
    let answer = self.store.load_slots(slots.call(held, wanted)).await;
    if let Err(error) = &answer {
      // An ACL that refuses the semaphore (its key, or a command of its
      // script) leaves the rest of the fleet working: the loads run under
      // the per-process cap, and it is reported once, without opening the
      // breaker for the reads and locks.
      let problem = self.store.describe(error);
      if problem.code == crate::core::error::Code::RedisNoPerm {
        bump(&self.counters.redis_errors);
        self.store.problems().raise("load slots", problem);
        return None;
      }
    }
    self.track(answer)
  }

  /// Stops every task of this fleet: the subscriber, the replayer, every
  /// flight's steps (they take no lock after this) and lease keeper. Each
  /// lock still held is released, then the store's connections are closed,
  /// on a task bounded by the store's command timeout: nothing of this
  /// instance outlives it in the store for longer than that.
  pub fn stop(&self) {
    self.stopped.store(true, Ordering::SeqCst);
    let held: Vec<(Arc<S::Keys>, String)> = {
      let mut steps = self.steps.lock().unwrap_or_else(|p| p.into_inner());
      steps
        .drain()
        .filter_map(|(_, flight)| {
          flight.given_up.set(true);
          let lock = flight.lock?;
          lock.extender.abort();
          Some((lock.keys, lock.token))
        })
        .collect()
    };
    self.stop_tasks();
    let slots_known = self.load_slots.as_ref().is_some_and(|slots| slots.stop());
    let Some(fleet) = self.me.upgrade() else {
      // Dropping: the store goes with the fleet.
      return;
    };
    let bound = self.store.command_timeout();
    self.runtime.spawn(async move {
      let releases = held
        .iter()
        .map(|(keys, token)| fleet.store.release(keys, token));
      let slots = async {
        if let Some(slots) = fleet.load_slots.as_ref().filter(|_| slots_known) {
          let _ = fleet.store.load_slots(slots.call(0, 0)).await;
        }
      };
      let _ = tokio::time::timeout(
        bound,
        futures_util::future::join(futures_util::future::join_all(releases), slots),
      )
      .await;
      fleet.store.close();
    });
  }

  pub(super) fn stop_tasks(&self) {
    for task in [
      &self.subscriber,
      &self.replayer,
      &self.prober,
      &self.clock_sync,
      &self.slots_keeper,
    ] {
      if let Some(handle) = task.lock().unwrap_or_else(|p| p.into_inner()).take() {
        handle.abort();
      }
    }
  }

  /// Whether [`Fleet::stop`] ran.
  pub fn is_stopped(&self) -> bool {
    self.stopped.load(Ordering::SeqCst)
  }
}

/// Where the store's events go: slots another instance freed to this
/// instance's side of the load slots; a tag's invalidation to the stamps at
/// once (the fleet's reads judge by them too); every other change another
/// instance made to the L1's queue.
fn route_events(
  origin: String,
  invalidations: &Arc<Invalidations>,
  tags: &SharedTagStamps,
  load_slots: Option<Arc<LoadSlots>>,
) -> Arc<Events> {
  let invalidations = Arc::clone(invalidations);
  let tags = Arc::clone(tags);
  Events::new(move |event| match &event.change {
    // Ours were asked for in the call that freed them.
    Change::SlotsFreed { up_to } => {
      if let Some(slots) = load_slots.as_ref().filter(|_| event.origin != origin) {
        slots.freed(*up_to);
      }
    }
    // No value changed: `Events::dispatch` woke the key's waiters, which
    // ask for the lock again.
    Change::Released(_) => {}
    change => {
      if let Change::Tagged { tag, at } = change {
        // The L1's flights hear of it with the invalidations.
        lock(&tags).invalidated(tag, *at);
      }
      if event.origin != origin {
        invalidations.push(Invalidation::Changed(change.clone()));
      }
    }
  })
}

impl<S: SharedStore> Drop for Fleet<S> {
  fn drop(&mut self) {
    self.stopped.store(true, Ordering::SeqCst);
    self.stop_tasks();
  }
}
