//! The fleet protocol over a shared store (DESIGN.md §3): for one flight,
//! read; use a fresh value another instance wrote; else take the lock, or
//! wait for the winner's fill notice; extend the lease while our loader runs;
//! write conditionally and release. Every store failure fails open (the
//! caller loads locally) and feeds the circuit breaker, which makes calls
//! skip the store for a cool-down instead of each waiting for a timeout.
//! The store is a [`SharedStore`] (Redis: [`RedisStore`], the default).
//!
//! Runs on tokio; the in-process side (L1, flight table) stays with the
//! caller, which gets invalidations from other instances through
//! [`Fleet::invalidations`].
//!
//! Auto-recovery: a `set`, `delete` or `clear` that could not reach the
//! store is kept ([`RecoveryQueue`]) and replayed by a task of the fleet
//! once the store answers again, reconciled by write stamp and announced;
//! meanwhile the values it invalidated are not served from the store.

use super::clock::Clock;
use super::recovery::{KeyOp, RecoveryQueue, Replay};
use super::shared::{lock_token, Events, LockAttempt, Read, RedisStore, SharedStore, SlotGrant};
use super::slots::{self, LoadSlots};
use crate::core::breaker::{Breaker, State};
use crate::core::envelope::{DecodeError, Envelope};
use crate::core::fleet::{loser_wait, Change, Lease};
use crate::core::policy::{self, Answers};
use crate::core::tags::{TagStamps, TAG_STAMPS_CAPACITY};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::runtime::Handle;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Counters kept on the tokio side, read with the engine's.
#[derive(Debug, Default)]
pub struct FleetCounters {
  pub lock_acquired: AtomicU64,
  pub lock_contended: AtomicU64,
  pub lock_waits: AtomicU64,
  pub fill_notices: AtomicU64,
  pub redis_hits: AtomicU64,
  pub redis_errors: AtomicU64,
  pub corrupt_values: AtomicU64,
  /// Queued operations delivered later (auto-recovery).
  pub recovered: AtomicU64,
  /// Queued operations given up: past the bounds, or undelivered at close.
  pub recovery_dropped: AtomicU64,
}

/// The tag stamps, locked; a panic elsewhere while they were held left
/// them whole (every change is one assignment).
pub fn lock(tags: &SharedTagStamps) -> std::sync::MutexGuard<'_, TagStamps> {
  tags.lock().unwrap_or_else(|p| p.into_inner())
}

fn bump(counter: &AtomicU64) {
  counter.fetch_add(1, Ordering::Relaxed);
}

/// What a flight does after [`Fleet::acquire`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
  /// Another instance's fresh value: use it, run no loader.
  Value(Envelope),
  /// A stale value, for a caller that accepts one (a refresh should start).
  Stale(Envelope),
  /// A background refresh while the key backs off fleet-wide (another
  /// instance's refresh failed): run no loader, back off locally as well.
  BackOff { failures: u32, ms: u64 },
  /// Run the loader. `token` is the lock held (`None`: Redis unavailable or
  /// the wait ran out, load without it).
  Load { token: Option<String> },
}

/// What may answer one flight: values fresh as of `now` (epoch ms, the
/// caller's clock) and, for an early refresh, newer than the stamp it
/// replaces; stale values only if `accept_stale` (a foreground flight of
/// callers that allow them). `refresh`: a background refresh no caller
/// waits on, which honours the fleet's back-off (foreground loads ignore
/// it: their callers need a value, and errors are never cached).
#[derive(Debug, Clone, Copy)]
pub struct Terms {
  pub now: u64,
  pub accept_stale: bool,
  pub newer_than: Option<u64>,
  pub refresh: bool,
}

pub struct FleetConfig {
  pub lock_ttl: u64,
  pub hard_timeout: u64,
  pub breaker_cooldown: u64,
  /// The cache's clock, shared with its local engine.
  pub clock: Clock,
  /// Bounds of the operations kept for auto-recovery: how many, and how
  /// long each (ms).
  pub recovery_max_entries: usize,
  pub recovery_max_age: u64,
  /// `fleetMaxConcurrentLoads`: the fleet's load slots (`None`: no fleet cap).
  pub load_slots: Option<u64>,
}

/// The fleet protocol over the store `S`; `Fleet` alone is the Redis one.
pub struct Fleet<S: SharedStore = RedisStore> {
  store: S,
  /// The tags' invalidation stamps, shared with the local engine (which
  /// judges its entries by them on every hit of a tagged one).
  tags: SharedTagStamps,
  /// The longest life a tag's stamp is kept in the store for (ms): the
  /// longest a `deleteByTag` asked for, for its replay.
  tag_ttl: AtomicU64,
  events: Arc<Events>,
  breaker: Mutex<Breaker>,
  lease: Lease,
  hard_timeout: u64,
  clock: Clock,
  pub counters: FleetCounters,
  /// The fleet steps of each flight that asked who loads (by flight id):
  /// whether it was given up, and the lock it holds. What this instance
  /// holds in the store is here and nowhere else, so a flight given up, a
  /// `close()` or the end of the JS environment can let go of all of it.
  steps: Mutex<HashMap<u64, Steps<S::Keys>>>,
  /// Set by [`Fleet::stop`]: no step starts any more.
  stopped: AtomicBool,
  /// The last command reached the store; the subscription is live.
  connected: AtomicBool,
  subscription: Arc<Flag>,
  /// The runtime the fleet's tasks run on (the JS thread that stops a
  /// fleet is not inside it).
  runtime: Handle,
  invalidations: Arc<Invalidations>,
  subscriber: Mutex<Option<JoinHandle<()>>>,
  /// The task that keeps the clock's offset to the store's ([`Clock`]),
  /// and the shortest round trip an offset was measured in (ms).
  clock_sync: Mutex<Option<JoinHandle<()>>>,
  clock_rtt: AtomicU64,
  clock_passed_over: AtomicU64,
  clock_syncing: tokio::sync::Mutex<()>,
  /// Keys whose stored value had a valid header over a value that is not
  /// UTF-8 JSON, with its stamp: the next write of the key replaces it even
  /// if that stamp is newer (the write script cannot judge JSON).
  corrupt_stamps: Mutex<HashMap<String, u64>>,
  /// Writes and invalidations waiting for the store (auto-recovery), their
  /// count (read without the lock on every read of the store), and the
  /// task that replays them, there only while something waits.
  recovery: Mutex<RecoveryQueue>,
  recovery_pending: AtomicUsize,
  replayer: Mutex<Option<JoinHandle<()>>>,
  /// Wakes the replay task at once: the breaker's probe just closed it.
  replay_now: Arc<Notify>,
  /// The breaker's probe task, there only while the breaker is open.
  prober: Mutex<Option<JoinHandle<()>>>,
  breaker_cooldown: u64,
  /// This fleet, for the replay task (which must not keep it alive).
  me: Weak<Fleet<S>>,
  /// With `fleetMaxConcurrentLoads`: this instance's side of the fleet's
  /// load slots, and the task keeping the store in step with it.
  load_slots: Option<Arc<LoadSlots>>,
  slots_keeper: Mutex<Option<JoinHandle<()>>>,
}

/// What `close()` could not deliver: the operation (`set`, `delete`,
/// `expire`, `deleteByTag`, `clear`) and its key (none for a clear) or tag,
/// or for a namespace's clear its encoded names (`users`, `users:eu`: the
/// sub-prefix without its last `:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undelivered {
  pub op: &'static str,
  pub key: Option<String>,
  pub tag: Option<String>,
  pub namespace: Option<String>,
}

/// One flight's fleet steps ([`Fleet::steps`]).
struct Steps<K> {
  given_up: Arc<Flag>,
  lock: Option<HeldLock<K>>,
}

/// A lock this instance holds for a flight, and the task extending its lease.
struct HeldLock<K> {
  keys: Arc<K>,
  token: String,
  extender: JoinHandle<()>,
}

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
  fn set(&self, on: bool) {
    self.set.store(on, Ordering::SeqCst);
    if on {
      self.notify.notify_waiters();
    }
  }

  fn is_set(&self) -> bool {
    self.set.load(Ordering::SeqCst)
  }

  /// Resolves once set (at once if it is).
  async fn wait(&self) {
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

/// The replay task's pause between attempts when the breaker's cool-down
/// is 0 (it probes at the cool-down otherwise): no busy loop.
const MIN_REPLAY_PAUSE: Duration = Duration::from_millis(100);

/// How long a write or invalidation made before the store first answered
/// waits for it (capped by the command timeout): a healthy store's first
/// connection is made well within it; a silent or unreachable one does not
/// hold the caller for a whole connection attempt (the operation is kept
/// and delivered once the store answers).
const FIRST_ANSWER_WAIT: Duration = Duration::from_millis(100);

/// The breaker's probes are at least this far apart (its cool-down may be
/// 0): a store that fails at once is not asked in a busy loop.
const MIN_PROBE_PAUSE: Duration = Duration::from_millis(100);

/// Past this many remembered corrupt stamps the memo starts afresh.
const MAX_CORRUPT_STAMPS: usize = 10_000;

/// The tags' invalidation stamps, where the fleet's tasks and the thread
/// that owns the L1 both reach them.
pub type SharedTagStamps = Arc<Mutex<TagStamps>>;

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
}

/// Past this many queued changes, the L1 is cleared instead.
const MAX_QUEUED_CHANGES: usize = 10_000;

impl Invalidations {
  fn push(&self, change: Invalidation) {
    let mut changes = self.changes.lock().unwrap_or_else(|p| p.into_inner());
    if changes.len() >= MAX_QUEUED_CHANGES {
      changes.clear();
      changes.push(Invalidation::Changed(Change::Cleared));
    } else {
      changes.push(change);
    }
    self.pending.store(true, Ordering::Release);
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

impl<S: SharedStore> Fleet<S> {
  /// Must run inside the tokio runtime (the subscriber is spawned).
  pub fn start(store: S, config: FleetConfig) -> Arc<Fleet<S>> {
    let invalidations = Arc::new(Invalidations::default());
    let subscription = Arc::new(Flag::default());
    let origin = store.origin().to_string();
    let tags: SharedTagStamps = Arc::new(Mutex::new(TagStamps::new(TAG_STAMPS_CAPACITY)));
    let lease = Lease::new(config.lock_ttl);
    let load_slots = config
      .load_slots
      .map(|cap| Arc::new(LoadSlots::new(cap, lease.ttl)));
    let events = {
      let invalidations = Arc::clone(&invalidations);
      let tags = Arc::clone(&tags);
      let load_slots = load_slots.clone();
      Events::new(move |event| match &event.change {
        // Ours were asked for in the call that freed them.
        Change::SlotsFreed { up_to } => {
          if let Some(slots) = load_slots.as_ref().filter(|_| event.origin != origin) {
            slots.freed(*up_to);
          }
        }
        change => {
          if let Change::Tagged { tag, at } = change {
            // At once, for the fleet's reads too; the L1's flights hear of
            // it with the invalidations.
            lock(&tags).invalidated(tag, *at);
          }
          if event.origin != origin {
            invalidations.push(Invalidation::Changed(change.clone()));
          }
        }
      })
    };
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
      clock: config.clock,
      counters: FleetCounters::default(),
      steps: Mutex::new(HashMap::new()),
      stopped: AtomicBool::new(false),
      connected: AtomicBool::new(false),
      subscription: Arc::clone(&subscription),
      runtime: Handle::current(),
      invalidations: Arc::clone(&invalidations),
      subscriber: Mutex::new(None),
      clock_sync: Mutex::new(None),
      clock_rtt: AtomicU64::new(u64::MAX / 4),
      clock_passed_over: AtomicU64::new(0),
      clock_syncing: tokio::sync::Mutex::new(()),
      corrupt_stamps: Mutex::new(HashMap::new()),
      tags: Arc::clone(&tags),
      tag_ttl: AtomicU64::new(0),
      store,
    });
    // Until the subscription is live, changes elsewhere go unseen: each
    // connection, the first too, clears the L1, so nothing missed is served
    // from it (an instance that cached values before its first connection
    // would otherwise keep them past another instance's change).
    let handle = fleet.store.subscribe(&fleet.events, move |connected| {
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
      }
      if connected {
        invalidations.push(Invalidation::Subscribed);
      }
    });
    *fleet.subscriber.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    let sync = fleet.runtime.spawn(sync_clock(Arc::downgrade(&fleet)));
    *fleet.clock_sync.lock().unwrap_or_else(|p| p.into_inner()) = Some(sync);
    if let Some(load_slots) = &fleet.load_slots {
      let keeper = slots::keep(Arc::downgrade(&fleet), Arc::clone(load_slots));
      *fleet.slots_keeper.lock().unwrap_or_else(|p| p.into_inner()) =
        Some(fleet.runtime.spawn(keeper));
    }
    fleet
  }

  /// With `fleetMaxConcurrentLoads`: this instance's side of the fleet's
  /// load slots.
  pub fn load_slots(&self) -> Option<&Arc<LoadSlots>> {
    self.load_slots.as_ref()
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

  /// What the store found that the application must be told (each once).
  pub fn problems(&self) -> Vec<super::shared::Problem> {
    self.store.problems().take()
  }

  /// Measures the offset to the store's clock now, whatever the last
  /// measurement's round trip (the host's clock was just changed: the test
  /// hook `skewClock`).
  pub async fn resync_clock(&self) -> bool {
    self
      .clock_passed_over
      .store(CLOCK_MAX_PASSED_OVER, Ordering::Relaxed);
    self.sync_clock_now().await
  }

  /// Measures the offset to the store's clock now (the periodic task does
  /// it every [`CLOCK_SYNC_EVERY`]). True if the store answered.
  pub async fn sync_clock_now(&self) -> bool {
    // One measurement at a time: the last one applied is the last taken.
    let _one = self.clock_syncing.lock().await;
    let mut best: Option<(i64, u64)> = None;
    for _ in 0..CLOCK_SAMPLES {
      match self.clock_sample().await {
        Some(sample) if best.is_none_or(|b| sample.1 < b.1) => best = Some(sample),
        Some(_) => {}
        None => break,
      }
    }
    let Some((offset, rtt)) = best else {
      return false;
    };
    // A slow round trip (a reconnect, a paused server) bounds the error
    // loosely: it replaces the offset only if it is not much slower than
    // the last one taken, or after a few were passed over (the network
    // itself got slower).
    let last_rtt = self.clock_rtt.load(Ordering::Relaxed);
    let passed_over = self.clock_passed_over.load(Ordering::Relaxed);
    if rtt
      <= last_rtt
        .saturating_mul(2)
        .saturating_add(CLOCK_RTT_SLACK_MS)
      || passed_over >= CLOCK_MAX_PASSED_OVER
    {
      self.clock.set_server_offset(offset);
      self.clock_rtt.store(rtt, Ordering::Relaxed);
      self.clock_passed_over.store(0, Ordering::Relaxed);
    } else {
      self
        .clock_passed_over
        .store(passed_over + 1, Ordering::Relaxed);
    }
    true
  }

  /// One offset sample: the store's time against the wall clock, and the
  /// round trip it was taken in (ms). `None`: the store did not answer.
  async fn clock_sample(&self) -> Option<(i64, u64)> {
    let before = self.clock.wall();
    let server = self.store.server_time().await.ok()?;
    let after = self.clock.wall();
    Some((
      super::clock::server_offset(before, server, after),
      after.saturating_sub(before),
    ))
  }

  /// How many of this instance's flights wait for `key`'s fill notice.
  pub fn waiting_for(&self, key: &str) -> usize {
    self.events.waiting(key)
  }

  pub fn invalidations(&self) -> Arc<Invalidations> {
    Arc::clone(&self.invalidations)
  }

  pub fn circuit_open(&self) -> bool {
    self
      .breaker
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .is_open()
  }

  /// Whether a call may use the store: only while the breaker is closed.
  /// Open, no call waits on the store; [`Fleet::start_prober`] probes it.
  fn allowed(&self) -> bool {
    self
      .breaker
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .closed()
  }

  /// Starts the probe task unless it runs: while the breaker is open, one
  /// attempt per cool-down (at least [`MIN_PROBE_PAUSE`] apart) to reach
  /// the store as the fleet needs it (`SharedStore::ready`: a connection,
  /// and for Redis its scripts), on a task of its own, so no caller waits
  /// on a connection or on a store that does not answer. Its success
  /// closes the breaker and wakes the replay of what was kept meanwhile.
  fn start_prober(&self) {
    let mut prober = self.prober.lock().unwrap_or_else(|p| p.into_inner());
    if prober.is_some() || self.stopped.load(Ordering::SeqCst) {
      return;
    }
    let me = self.me.clone();
    *prober = Some(self.runtime.spawn(async move {
      loop {
        let wait = {
          let Some(fleet) = me.upgrade() else { return };
          let now = fleet.clock.now();
          let state = fleet
            .breaker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .state;
          match state {
            State::Open { until } => until.saturating_sub(now),
            _ => 0,
          }
        };
        tokio::time::sleep(Duration::from_millis(wait).max(MIN_PROBE_PAUSE)).await;
        let Some(fleet) = me.upgrade() else { return };
        if fleet.stopped.load(Ordering::SeqCst) {
          return;
        }
        let probing = {
          let mut breaker = fleet.breaker.lock().unwrap_or_else(|p| p.into_inner());
          breaker.allow(fleet.clock.now()) && !breaker.closed()
        };
        if probing {
          let answer = fleet.store.ready().await;
          fleet.track(answer);
        }
        let mut prober = fleet.prober.lock().unwrap_or_else(|p| p.into_inner());
        if fleet.allowed() {
          *prober = None;
          drop(prober);
          fleet.replay_now.notify_one();
          return;
        }
      }
    }));
  }

  /// Feeds the breaker, the error counter and the connected gauge; a
  /// failure that opens the breaker is reported with its cause (once while
  /// the store keeps failing for it: `Problems::failed`).
  fn track<T>(&self, result: Result<T, S::Error>) -> Option<T> {
    let mut breaker = self.breaker.lock().unwrap_or_else(|p| p.into_inner());
    match result {
      Ok(value) => {
        breaker.success();
        drop(breaker);
        if !self.connected.swap(true, Ordering::Relaxed) {
          self.store.problems().answered();
        }
        Some(value)
      }
      Err(error) => {
        bump(&self.counters.redis_errors);
        let opened = breaker.failure(self.clock.now());
        drop(breaker);
        self.connected.store(false, Ordering::Relaxed);
        if opened {
          self.store.problems().failed(self.store.describe(&error));
          self.start_prober();
        }
        None
      }
    }
  }

  /// Whether the last command reached the store (the command connection
  /// is up), and whether the events subscription is live.
  pub fn connected(&self) -> (bool, bool) {
    (
      self.connected.load(Ordering::Relaxed),
      self.subscription.is_set(),
    )
  }

  /// The last failure's cause (kept once the store answers again).
  pub fn last_problem(&self) -> Option<super::shared::Problem> {
    self.store.problems().last()
  }

  /// `cache.ready()`: resolves once the store answers as the fleet needs
  /// (connected, authenticated, db selected, scripts loaded) and the
  /// events subscription is live; else the cause, within twice the
  /// store's command timeout (a connection attempt, then the probe that
  /// explains its failure). Calls made meanwhile fail open as ever.
  pub async fn ready(&self) -> Result<(), super::shared::Problem> {
    let bound = self.store.command_timeout() * 2;
    let check = async {
      let answered = self.store.ready().await;
      if let Err(error) = answered {
        let problem = self.store.describe(&error);
        self.track(Err::<(), _>(error));
        return Err(problem);
      }
      self.track(Ok::<(), S::Error>(()));
      self.subscription.wait().await;
      Ok(())
    };
    match tokio::time::timeout(bound, check).await {
      Ok(answer) => answer,
      Err(_) => Err(
        self
          .store
          .problems()
          .subscription_problem()
          .unwrap_or_else(|| super::shared::Problem {
            code: crate::core::error::Code::RedisTimeout,
            message: format!(
              "Redis did not answer (or the events subscription did not go live) within twice redisTimeout ({} ms)",
              bound.as_millis()
            ),
          }),
      ),
    }
  }

  async fn read(&self, keys: &S::Keys) -> Option<Read> {
    let mut read = self.track(self.store.read(keys).await)?;
    self.judge_tags(std::slice::from_mut(&mut read)).await;
    Some(read)
  }

  /// The tag stamps of this instance (shared with its L1).
  pub fn tag_stamps(&self) -> SharedTagStamps {
    Arc::clone(&self.tags)
  }

  /// Turns every value in `reads` that a `deleteByTag` invalidated into a
  /// miss. The stamps of its tags not known as the fleet's are read first
  /// (one batch for all of `reads`); when they cannot be, such a value is
  /// a miss too: it is never served past an invalidation it could not
  /// check.
  async fn judge_tags(&self, reads: &mut [Read]) {
    let tagged = |read: &Read| matches!(read, Read::Found(e) if !e.tags.is_empty());
    if !reads.iter().any(tagged) {
      return;
    }
    let (mut wanted, epoch) = {
      let stamps = lock(&self.tags);
      let mut wanted: Vec<String> = Vec::new();
      for read in reads.iter() {
        if let Read::Found(e) = read {
          wanted.extend(stamps.unconfirmed(&e.tags).cloned());
        }
      }
      (wanted, stamps.epoch())
    };
    wanted.sort_unstable();
    wanted.dedup();
    let live = self.subscription.is_set();
    let just_read = match wanted.is_empty() {
      true => Vec::new(),
      false => {
        let answer = self.store.tag_stamps(&wanted).await;
        match self.track(answer) {
          Some(stamps) => wanted.into_iter().zip(stamps).collect(),
          None => Vec::new(),
        }
      }
    };
    let mut stamps = lock(&self.tags);
    for (tag, at) in &just_read {
      match live {
        true => stamps.confirm(tag, *at, epoch),
        false => stamps.invalidated(tag, *at),
      }
    }
    let read_now: Vec<&str> = just_read.iter().map(|(tag, _)| tag.as_str()).collect();
    for read in reads.iter_mut() {
      if let Read::Found(e) = read {
        if !stamps.admits_shared(&e.tags, e.meta.stamp, &read_now) {
          *read = Read::Missing;
        }
      }
    }
  }

  /// Counts a corrupt value where a flight first meets it (re-reads of the
  /// same flight do not count it again), and remembers the stamp of one
  /// with a valid header, for the write that replaces it.
  fn note_corrupt(&self, key: &str, read: &Read) {
    match read {
      Read::Corrupt(DecodeError::BadValue { stamp }) => {
        bump(&self.counters.corrupt_values);
        let mut stamps = self
          .corrupt_stamps
          .lock()
          .unwrap_or_else(|p| p.into_inner());
        if stamps.len() >= MAX_CORRUPT_STAMPS {
          stamps.clear();
        }
        stamps.insert(key.to_string(), *stamp);
      }
      Read::Corrupt(_) => bump(&self.counters.corrupt_values),
      _ => {}
    }
  }

  fn take_corrupt_stamp(&self, key: &str) -> Option<u64> {
    let mut stamps = self
      .corrupt_stamps
      .lock()
      .unwrap_or_else(|p| p.into_inner());
    if stamps.is_empty() {
      return None;
    }
    stamps.remove(key)
  }

  /// The usable envelope under the key, if any (counted as a Redis hit):
  /// fresh as of `now` (epoch ms), and newer than `newer_than` when given.
  /// `None`: Redis failed.
  async fn fresh(
    &self,
    key: &str,
    keys: &S::Keys,
    now: u64,
    newer_than: Option<u64>,
  ) -> Option<Option<Envelope>> {
    Some(match self.read(keys).await? {
      Read::Found(e)
        if policy::answers(&e.meta, now, false, newer_than) == Some(Answers::Value)
          && self.counts(key, &e) =>
      {
        bump(&self.counters.redis_hits);
        Some(e)
      }
      _ => None,
    })
  }

  /// What a read of the key answers a flight with, if anything: a usable
  /// value, or (for callers that accept one) a stale one.
  fn answer(&self, key: &str, read: &Read, terms: &Terms) -> Option<Acquired> {
    let Read::Found(e) = read else { return None };
    if !self.counts(key, e) {
      return None;
    }
    let answers = policy::answers(&e.meta, terms.now, terms.accept_stale, terms.newer_than)?;
    bump(&self.counters.redis_hits);
    Some(match answers {
      Answers::Value => Acquired::Value(e.clone()),
      Answers::Stale => Acquired::Stale(e.clone()),
    })
  }

  /// The first step of many flights at once: one pipelined read. Each gets
  /// its answer, or `None`: go on with [`Fleet::acquire`] (no second read).
  pub async fn read_many(&self, requests: &[(String, Terms)]) -> Vec<Option<Acquired>> {
    let local = || Some(Acquired::Load { token: None });
    if !self.allowed() {
      return requests.iter().map(|_| local()).collect();
    }
    let keys: Vec<S::Keys> = requests
      .iter()
      .map(|(key, _)| self.store.keys(key))
      .collect();
    // Bounded by the loads' deadline: the binding may leave a flight without
    // a JS leader (and its hardTimeout timer) while this read is out.
    let bound = Duration::from_millis(self.hard_timeout);
    let judged = async {
      let mut reads = self.track(self.store.read_many(&keys).await)?;
      self.judge_tags(&mut reads).await;
      Some(reads)
    };
    let Ok(Some(reads)) = tokio::time::timeout(bound, judged).await else {
      return requests.iter().map(|_| local()).collect();
    };
    reads
      .iter()
      .zip(requests)
      .map(|(read, (key, terms))| {
        self.note_corrupt(key, read);
        self.answer(key, read, terms)
      })
      .collect()
  }

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
  fn end_steps(&self, id: u64) -> Option<(Arc<S::Keys>, String)> {
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

  async fn decide_loader(
    self: &Arc<Self>,
    key: &str,
    id: u64,
    terms: Terms,
    read_first: bool,
    given_up: &Flag,
    parked: &AtomicBool,
  ) -> Acquired {
    let Terms { newer_than, .. } = terms;
    let local = Acquired::Load { token: None };
    if !self.allowed() {
      return local;
    }
    let keys = Arc::new(self.store.keys(key));
    if read_first {
      match self.read(&keys).await {
        None => return local,
        Some(read) => {
          self.note_corrupt(key, &read);
          if let Some(answer) = self.answer(key, &read, &terms) {
            return answer;
          }
        }
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
      // Dropped mid-command (given up), the lock may still land under our
      // token: released then, as after a failure.
      let mut pending = PendingLock {
        fleet: self,
        lock: Some((Arc::clone(&keys), token.clone())),
      };
      let attempt = if terms.refresh {
        self.store.lock_refresh(&keys, &token, self.lease.ttl).await
      } else {
        self.store.lock(&keys, &token, self.lease.ttl).await
      };
      pending.lock = None;
      match self.track(attempt) {
        None => {
          // The command failed or timed out here, but it may still land and
          // take the lock under our token, which nobody would then release
          // or fill: another instance would wait out the whole lease.
          self.release_later(Arc::clone(&keys), token);
          return local;
        }
        Some(LockAttempt::Won) => {
          bump(&self.counters.lock_acquired);
          // Held from here: registered (with its lease keeper) before the
          // next await, so a give-up or a stop finds it.
          if !self.keep_lease(id, Arc::clone(&keys), token.clone()) {
            self.release_soon(Arc::clone(&keys), token);
            return local;
          }
          // Someone may have written between our read and our lock. The
          // lock is let go of without an await after `end_steps`: that fires
          // this flight's give-up, which would win `acquire_steps`' select
          // over this answer, and the flight would load without the lock.
          let answer = match self.fresh(key, &keys, self.clock.now(), newer_than).await {
            Some(Some(e)) => Acquired::Value(e),
            None => local,
            Some(None) => return Acquired::Load { token: Some(token) },
          };
          if let Some((keys, token)) = self.end_steps(id) {
            self.release_soon(keys, token);
          }
          return answer;
        }
        Some(LockAttempt::BackingOff { failures, ms }) => {
          return Acquired::BackOff { failures, ms };
        }
        Some(LockAttempt::Held(lease)) => {
          if !contended {
            contended = true;
            bump(&self.counters.lock_contended);
          }
          // Subscribe before re-checking: a fill in between still wakes us.
          let waiter = notice.get_or_insert_with(|| self.events.wait(key));
          match self.fresh(key, &keys, self.clock.now(), newer_than).await {
            Some(Some(e)) => return Acquired::Value(e),
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
            notice = None;
          }
          match self.fresh(key, &keys, self.clock.now(), newer_than).await {
            Some(Some(e)) => return Acquired::Value(e),
            None => return local,
            Some(None) => {}
          }
        }
      }
    }
  }

  /// Compare-and-deletes a lock we may hold, off the caller's path and past
  /// the breaker. The command that took it may land late (or after a
  /// reconnect, behind a release sent on the new connection), so the
  /// release is repeated every redisTimeout until it removed the lock or the
  /// lease is over; with our unique token every attempt is harmless.
  fn release_later(&self, keys: Arc<S::Keys>, token: String) {
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
  fn release_soon(&self, keys: Arc<S::Keys>, token: String) {
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
  fn keep_lease(self: &Arc<Self>, id: u64, keys: Arc<S::Keys>, token: String) -> bool {
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
    let result = self.write_envelope(key, &envelope, token.as_deref()).await;
    self.track(result)
  }

  /// How long `envelope` lives in the store: to its hard TTL, 1 ms at least.
  fn hard_ttl_left(&self, envelope: &Envelope) -> u64 {
    envelope
      .meta
      .hard_until
      .saturating_sub(self.clock.now())
      .max(1)
  }

  /// The conditional write of `envelope`, expiring at its hard TTL, over a
  /// corrupt value this instance read (untracked: the caller feeds the
  /// breaker).
  async fn write_envelope(
    &self,
    key: &str,
    envelope: &Envelope,
    token: Option<&str>,
  ) -> Result<bool, S::Error> {
    let keys = self.store.keys(key);
    let px = self.hard_ttl_left(envelope);
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
    let px = self.hard_ttl_left(&envelope);
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
  fn before_first_answer(&self) -> bool {
    !self.connected.load(Ordering::Relaxed)
  }

  /// `call`, awaited whole, or with `first` for [`FIRST_ANSWER_WAIT`] at
  /// most (`None` then: it was kept, and the replay delivers it once the
  /// store answers).
  async fn unhurried<T>(&self, first: bool, call: impl Future<Output = T>) -> Option<T> {
    if !first {
      return Some(call.await);
    }
    let wait = FIRST_ANSWER_WAIT.min(self.store.command_timeout());
    tokio::time::timeout(wait, call).await.ok()
  }

  /// This instance's write of `key` stamped `stamp` lost to a later value
  /// in the store: the L1 lets go of it ([`Invalidation::Superseded`]).
  fn superseded(&self, key: &str, stamp: u64) {
    self.invalidations.push(Invalidation::Superseded {
      key: key.to_string(),
      stamp,
    });
  }

  /// `get` past the L1: the live envelope, if Redis answers.
  pub async fn peek(&self, key: &str, now: u64) -> Option<Envelope> {
    if !self.allowed() {
      return None;
    }
    match self.read(&self.store.keys(key)).await? {
      Read::Found(e) if now < e.meta.hard_until && self.counts(key, &e) => Some(e),
      _ => None,
    }
  }

  /// Delivers one invalidation (`delete`, `expire`, `deleteByTag`, `clear`):
  /// `call` on the store when the breaker allows it; if it answered,
  /// `settle` supersedes what was kept for auto-recovery before it,
  /// otherwise `keep` keeps it to be delivered later. `None`: not reached.
  async fn deliver<T>(
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

  /// `delete`: whether the store had a value (`None`: not reached; the
  /// delete is kept for auto-recovery).
  pub async fn delete(&self, key: &str) -> Option<bool> {
    let stamp = self.clock.now();
    let keys = self.store.keys(key);
    self
      .deliver(
        self.store.delete(key, &keys),
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
        self.store.expire(key, &keys, at),
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
        self.store.clear(),
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
        self.store.clear_prefix(prefix, None),
        |fleet| fleet.settle_queued(|queue| queue.settled_clear_prefix(prefix, stamp)),
        |fleet| fleet.kept(|queue, now| queue.push_clear_prefix(prefix, stamp, now)),
      )
      .await
  }

  /// An operation reached the store: `settle` supersedes what was queued
  /// before it (nothing to do, one atomic load, when nothing is queued).
  fn settle_queued<T>(&self, settle: impl FnOnce(&mut RecoveryQueue) -> T) {
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
  fn with_recovery<T>(&self, f: impl FnOnce(&mut RecoveryQueue) -> T) -> T {
    let mut queue = self.recovery.lock().unwrap_or_else(|p| p.into_inner());
    let result = f(&mut queue);
    self.recovery_pending.store(queue.len(), Ordering::Relaxed);
    result
  }

  fn dropped(&self, n: u64) {
    if n > 0 {
      self
        .counters
        .recovery_dropped
        .fetch_add(n, Ordering::Relaxed);
    }
  }

  /// Whether a stored value of `key` may be served: not while a queued
  /// operation invalidated it (one atomic load when nothing is queued).
  fn counts(&self, key: &str, e: &Envelope) -> bool {
    self.recovery_pending() == 0
      || !self
        .recovery
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .hides(key, e.meta.stamp)
  }

  /// A live operation on `key` at `stamp` reached the store: what was
  /// queued for the key before it is superseded.
  fn settled(&self, key: &str, stamp: u64) {
    self.settle_queued(|queue| queue.settled(key, stamp));
  }

  fn keep(&self, key: &str, op: KeyOp) {
    self.kept(|queue, now| queue.push(key, op, now));
  }

  /// Queues an operation for auto-recovery (`push` answers how many fell
  /// out of the bounds, given the time), and makes sure it is replayed.
  fn kept(&self, push: impl FnOnce(&mut RecoveryQueue, u64) -> u64) {
    let now = self.clock.now();
    let dropped = self.with_recovery(|queue| push(queue, now));
    self.dropped(dropped);
    self.start_replayer();
  }

  /// Starts the replay task unless it runs. It ends when nothing waits
  /// (checked under the same lock, so an operation queued as it ends starts
  /// a new one), or when the fleet is gone.
  fn start_replayer(&self) {
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
        tokio::select! {
          () = tokio::time::sleep(wait) => {}
          () = replay_now.notified() => {}
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
  async fn replay(&self, force: bool) -> bool {
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
        Replay::Clear { stamp } => self.store.clear_not_newer(*stamp).await.map(drop),
        Replay::Tag { tag, stamp } => {
          let px = self.tag_ttl.load(Ordering::Relaxed);
          self.store.invalidate_tag(tag, *stamp, px).await.map(drop)
        }
        Replay::ClearPrefix { prefix, stamp } => self
          .store
          .clear_prefix(prefix, Some(*stamp))
          .await
          .map(drop),
        Replay::Key { key, op } => match op {
          KeyOp::Set(envelope) if envelope.meta.hard_until > self.clock.now() => {
            let written = self.write_envelope(key, envelope, None).await;
            if matches!(written, Ok(false)) {
              self.superseded(key, envelope.meta.stamp);
            }
            written.map(drop)
          }
          // A value that expired while it waited still replaced the
          // older ones: they go, as its write would have made them.
          KeyOp::Set(_) | KeyOp::Delete { .. } => self
            .store
            .delete_not_newer(key, &self.store.keys(key), op.stamp())
            .await
            .map(drop),
          KeyOp::Expire { stamp } => self
            .store
            .expire(key, &self.store.keys(key), *stamp)
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

  fn stop_tasks(&self) {
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

/// How often the offset to the store's clock is measured again (clocks
/// drift by far less than a millisecond a minute), and how many round trips
/// each measurement takes (the shortest is kept: its error is the smallest).
const CLOCK_SYNC_EVERY: Duration = Duration::from_secs(60);
const CLOCK_SAMPLES: usize = 3;
/// A sample's round trip may exceed twice the best by this much (ms) and
/// still replace the offset (the coarse clock's resolution, jitter).
const CLOCK_RTT_SLACK_MS: u64 = 10;
/// After this many slow measurements in a row, the next is taken anyway.
const CLOCK_MAX_PASSED_OVER: u64 = 3;
/// Until a first measurement succeeds, it is tried this often.
const CLOCK_RETRY: Duration = Duration::from_secs(1);

/// Keeps `fleet`'s clock in the store's time: every instance then stamps
/// its writes and judges freshness in one time, whatever its own wall clock
/// says. The error is at most half the shortest round trip of a sample
/// (plus the coarse clock's few ms and the drift between samples).
async fn sync_clock<S: SharedStore>(fleet: Weak<Fleet<S>>) {
  loop {
    let measured = {
      let Some(fleet) = fleet.upgrade() else { return };
      fleet.sync_clock_now().await
    };
    tokio::time::sleep(if measured {
      CLOCK_SYNC_EVERY
    } else {
      CLOCK_RETRY
    })
    .await;
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

impl<S: SharedStore> Drop for Fleet<S> {
  fn drop(&mut self) {
    self.stopped.store(true, Ordering::SeqCst);
    self.stop_tasks();
  }
}
