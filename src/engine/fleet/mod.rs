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
//!
//! One concern a file, each an `impl` of [`Fleet`] over its own part of it:
//! `lifecycle` (start, the routing of the store's events, stop), `health`
//! (the breaker and its probe, `ready()`), `clock_sync`, `reads` (and the
//! freshness they are judged by), `tags`, `acquire` (who loads, the locks
//! held and their leases), `write` (fills, failures, `set`), `deliver`
//! (invalidations) and `replay` (auto-recovery). This file holds the state
//! they share.

mod acquire;
mod clock_sync;
mod deliver;
mod flag;
mod health;
mod invalidations;
mod lifecycle;
mod reads;
mod replay;
mod tags;
mod write;

pub use crate::core::fleet::Acquired;
pub use flag::Flag;
pub use invalidations::{Invalidation, Invalidations};

use super::clock::Clock;
use super::recovery::RecoveryQueue;
use super::shared::{Events, RedisStore, SharedStore};
use super::slots::LoadSlots;
use crate::core::breaker::Breaker;
use crate::core::fleet::Lease;
use crate::core::tags::TagStamps;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
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
  /// Values' bytes written, before and after compression (`Fleet::stored_body`).
  pub value_bytes_written: AtomicU64,
  pub value_bytes_stored: AtomicU64,
}

/// The tag stamps, locked; a panic elsewhere while they were held left
/// them whole (every change is one assignment).
pub fn lock(tags: &SharedTagStamps) -> std::sync::MutexGuard<'_, TagStamps> {
  tags.lock().unwrap_or_else(|p| p.into_inner())
}

fn bump(counter: &AtomicU64) {
  counter.fetch_add(1, Ordering::Relaxed);
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
  /// The serializer's name: a stored value written with another is a miss.
  pub serializer: String,
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
  /// [`FleetConfig::serializer`].
  serializer: String,
  clock: Clock,
  pub counters: FleetCounters,
  /// The fleet steps of each flight that asked who loads (by flight id):
  /// whether it was given up, and the lock it holds. What this instance
  /// holds in the store is here and nowhere else, so a flight given up, a
  /// `close()` or the end of the JS environment can let go of all of it.
  steps: Mutex<HashMap<u64, Steps<S::Keys>>>,
  /// Set by [`Fleet::stop`]: no step starts any more.
  stopped: AtomicBool,
  /// The last command reached the store (shared with the engine, which
  /// keeps using a copy past `l1Ttl` while it did not: [`Fleet::reachable`]);
  /// the subscription is live.
  connected: Arc<AtomicBool>,
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

/// The tags' invalidation stamps, where the fleet's tasks and the thread
/// that owns the L1 both reach them.
pub type SharedTagStamps = Arc<Mutex<TagStamps>>;

impl<S: SharedStore> Fleet<S> {
  /// With `fleetMaxConcurrentLoads`: this instance's side of the fleet's
  /// load slots.
  pub fn load_slots(&self) -> Option<&Arc<LoadSlots>> {
    self.load_slots.as_ref()
  }

  /// How many of this instance's flights wait for `key`'s fill notice.
  pub fn waiting_for(&self, key: &str) -> usize {
    self.events.waiting(key)
  }

  pub fn invalidations(&self) -> Arc<Invalidations> {
    Arc::clone(&self.invalidations)
  }
}
