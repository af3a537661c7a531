//! The shared store a fleet of instances meets in: the [`SharedStore`]
//! trait the fleet protocol (`engine::fleet`) runs over, the types its
//! calls answer with, and [`Events`], which hands fill notices and
//! invalidations from a store's subscription to the flights waiting for
//! them. Two implementations: [`redis::RedisStore`], on one server or a
//! Redis Cluster (one store written once over either topology), and
//! [`memory::MemoryStore`], in process, with the same semantics and
//! injectable faults. Every store passes the contract suite,
//! `tests/server/store_contract.rs`; what they judge alike is declared once in
//! `values`.

pub mod memory;
pub mod redis;
pub(crate) mod values;

pub use self::memory::{FaultSwitch, Faults, MemoryError, MemoryServer, MemoryStore};
pub use self::redis::{RedisStore, RedisTimeouts};
pub use crate::core::fleet::LockAttempt;

use crate::core::envelope::{DecodeError, Envelope, Meta};
use crate::core::error::Code;
use crate::core::fleet::Event;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// What a read found under a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
  Missing,
  Found(Envelope),
  /// Not a herdcache envelope (another program's value, a corrupt write):
  /// treated as a miss, and counted.
  Corrupt(DecodeError),
}

/// One call on the fleet's load slots ([`SharedStore::load_slots`]): this
/// instance holds `held` (the whole holding, not a change: a repeat is
/// harmless) for `lease` ms unless it calls again, and wants `wanted` more,
/// of `cap` in the fleet; if it must wait, its place in the queue lives
/// `wait` ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotCall {
  pub held: u64,
  pub wanted: u64,
  pub cap: u64,
  pub lease: u64,
  pub wait: u64,
}

/// What a call on the fleet's load slots answered
/// ([`SharedStore::load_slots`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotGrant {
  /// Slots granted by this call (now held, on top of what was held).
  pub granted: u64,
  /// Slots free after it.
  pub free: u64,
  /// Other instances waiting for slots.
  pub waiting: u64,
  /// This instance's place in the queue (0: not queued).
  pub ticket: u64,
}

/// Something the application must hear about the store, which no retry
/// fixes: a refusal by the server's ACL, a misconfiguration. Reported to
/// `onError` (or as a process warning) with its stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
  pub code: Code,
  pub message: String,
}

/// The problems a store found, each reported once: queued for the thread
/// that owns the cache, which takes them whenever a store call it made
/// completes (one atomic load when there are none).
#[derive(Debug, Default)]
pub struct Problems {
  pending: AtomicBool,
  queue: Mutex<Vec<Problem>>,
  /// What the application should hear of once that is no failure (a server
  /// that cannot track keys for the L1): reported as a process warning.
  notices: Mutex<Vec<String>>,
  notices_pending: AtomicBool,
  /// What was reported already, by what was refused (`publish`, …).
  seen: Mutex<HashSet<&'static str>>,
  /// The cause last reported (an outage's until the store answers again);
  /// the last failure's cause, kept after it answered again.
  failing: Mutex<Option<Code>>,
  last: Mutex<Option<Problem>>,
  /// Why the events subscription is not live, when it is not.
  subscription: Mutex<Option<Problem>>,
  /// While a failed connection is being explained: `Some`, with the
  /// failure reported meanwhile (held for the explanation).
  held: Mutex<Option<Option<Problem>>>,
  /// What the last explanation found, until the store answers: a failure
  /// that says less (a timeout, a refused or dropped connection, where the
  /// explanation found a refused password or a plain-text port) is that.
  explained: Mutex<Option<Problem>>,
}

impl Problems {
  /// Queues `problem` unless one about `what` was queued before.
  pub fn raise(&self, what: &'static str, problem: Problem) {
    if self.first(what) {
      self.queue(problem);
    }
  }

  /// Queues `message` as a notice (no failure: the one there is, a server
  /// that cannot track keys) unless one about `what` was queued before.
  pub fn notice(&self, what: &'static str, message: String) {
    if !self.first(what) {
      return;
    }
    self
      .notices
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .push(message);
    self.notices_pending.store(true, Ordering::Release);
  }

  /// Whether nothing about `what` was reported before (and now it is).
  fn first(&self, what: &'static str) -> bool {
    self
      .seen
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .insert(what)
  }

  fn queue(&self, problem: Problem) {
    self
      .queue
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .push(problem);
    self.pending.store(true, Ordering::Release);
  }

  /// A failure that opened the circuit breaker: queued unless its cause
  /// was already reported since the store last answered (a store that
  /// stays misconfigured is reported once, not at every probe).
  pub fn failed(&self, problem: Problem) {
    let problem = match &*self.explained.lock().unwrap_or_else(|p| p.into_inner()) {
      Some(explained) if transient(problem.code) => explained.clone(),
      _ => problem,
    };
    if let Some(held) = self.held.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
      *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(problem.clone());
      *held = Some(problem);
      return;
    }
    let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
    *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(problem.clone());
    if *failing == Some(problem.code) {
      return;
    }
    *failing = Some(problem.code);
    drop(failing);
    self.queue(problem);
  }

  /// A connection failed and is being explained (a second look, off the
  /// callers' path): the failure it opens the breaker with is held until
  /// [`Problems::explained`], so it is reported once, with its cause.
  pub fn explaining(&self) {
    *self.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(None);
  }

  /// What the explanation found (`None`: nothing more than the failure
  /// said): reported in place of the failure held meanwhile.
  pub fn explained(&self, explained: Option<Problem>) {
    let held = self.held.lock().unwrap_or_else(|p| p.into_inner()).take();
    if explained.is_some() {
      *self.explained.lock().unwrap_or_else(|p| p.into_inner()) = explained.clone();
    }
    if let Some(problem) = explained.or(held.flatten()) {
      self.failed(problem);
    }
  }

  /// The store answered: the next outage is reported again. A refusal
  /// (credentials, ACL, db, TLS) is not: a user whose ACL forbids scripts
  /// still has its reads answered, and is told once.
  pub fn answered(&self) {
    self
      .explained
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .take();
    let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
    if failing.is_some_and(transient) {
      *failing = None;
    }
  }

  /// The last failure's cause, if any failed (kept once the store answers again).
  pub fn last(&self) -> Option<Problem> {
    self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
  }

  /// The subscription went down for `problem` (`None`: it is live).
  pub fn subscription(&self, problem: Option<Problem>) {
    *self.subscription.lock().unwrap_or_else(|p| p.into_inner()) = problem;
  }

  pub fn subscription_problem(&self) -> Option<Problem> {
    self
      .subscription
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .clone()
  }

  pub fn take(&self) -> Vec<Problem> {
    if !self.pending.load(Ordering::Acquire) || !self.pending.swap(false, Ordering::Acquire) {
      return Vec::new();
    }
    std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()))
  }

  pub fn take_notices(&self) -> Vec<String> {
    if !self.notices_pending.load(Ordering::Acquire)
      || !self.notices_pending.swap(false, Ordering::Acquire)
    {
      return Vec::new();
    }
    std::mem::take(&mut *self.notices.lock().unwrap_or_else(|p| p.into_inner()))
  }
}

/// A failure no configuration causes: the next outage is reported anew.
fn transient(code: Code) -> bool {
  matches!(
    code,
    Code::RedisTimeout | Code::RedisUnreachable | Code::RedisFailed
  )
}

/// A fresh lock token: random, unique per acquisition.
pub fn lock_token() -> String {
  uuid::Uuid::new_v4().to_string()
}

/// A `delete` as the store carries it out ([`SharedStore::delete`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deletion {
  /// The delete's stamp (epoch ms, the fleet's clock).
  pub at: u64,
  /// How long its tombstone lives: longer than any load begun before it
  /// may still try to write.
  pub px: u64,
  /// Replayed by auto-recovery (sparing a newer value), or live.
  pub replayed: bool,
}

/// What a clear removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClearScope<'a> {
  /// Every value of the store's prefix: `clear()`.
  All,
  /// A namespace's: the values of the keys starting with this encoded
  /// sub-prefix (such as `users:`; never empty, or it would be `All`).
  Namespace(&'a str),
}

/// What the fleet protocol needs from the store its instances share: values
/// (envelopes), one lock per key with a lease, and a channel of changes.
///
/// Every call is one round trip (or one pipeline) and bounded by the store's
/// own timeouts; an `Err` is a store failure, which the fleet fails open on
/// (the caller loads locally) and feeds to its circuit breaker. Values the
/// store holds but herdcache did not write are not failures: they read as
/// [`Read::Corrupt`], and writes and locks replace them.
///
/// The futures are `Send` (the fleet spawns lease keepers and retried
/// releases on tokio) and the fleet calls them by static dispatch:
/// `Fleet<S: SharedStore>`, no trait objects. It holds what the fleet calls
/// and nothing else: what only tests look at (a lock's lease, the back-off
/// marker) is the contract suite's fixture (`tests/server/support`, `Inspect`).
pub trait SharedStore: Send + Sync + 'static {
  /// The store's names for one user key (value and lock), computed once per
  /// flight and passed to every call about that key.
  type Keys: Send + Sync + 'static;
  type Error: std::fmt::Debug + Send + 'static;

  /// The names of `key` under this store's prefix.
  fn keys(&self, key: &str) -> Self::Keys;

  /// Names this store on the events channel: its own changes come back with
  /// it, so the fleet can tell them from other instances'.
  fn origin(&self) -> &str;

  /// The bound of one call: a lock whose taking may have failed is released
  /// again this often until its lease is over.
  fn command_timeout(&self) -> Duration;

  fn read(&self, keys: &Self::Keys) -> impl Future<Output = Result<Read, Self::Error>> + Send;

  /// Reads many keys in one round trip; the answers come in `keys`' order.
  fn read_many(
    &self,
    keys: &[Self::Keys],
  ) -> impl Future<Output = Result<Vec<Read>, Self::Error>> + Send;

  /// Takes the lock under `token` for `ttl` ms if it is free, or held by
  /// something no instance can have set (garbage: replaced); else says how
  /// long the holder's lease has left.
  fn lock(
    &self,
    keys: &Self::Keys,
    token: &str,
    ttl: u64,
  ) -> impl Future<Output = Result<LockAttempt, Self::Error>> + Send;

  /// [`SharedStore::lock`] for a background refresh: while the key's
  /// back-off marker lives (left by [`SharedStore::fail_refresh`]), takes
  /// nothing and answers [`LockAttempt::BackingOff`] with the marker's
  /// count and remaining life. A marker no instance can have set (not a
  /// count, no TTL) is ignored.
  fn lock_refresh(
    &self,
    keys: &Self::Keys,
    token: &str,
    ttl: u64,
  ) -> impl Future<Output = Result<LockAttempt, Self::Error>> + Send;

  /// A background refresh failed: in one step, leaves the key's back-off
  /// marker (`failures`, living `ms`) and releases the lock if it still
  /// holds `token` (true if so). Any write of the key removes the marker.
  fn fail_refresh(
    &self,
    keys: &Self::Keys,
    token: Option<&str>,
    failures: u32,
    ms: u64,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// Sets the lease to `ttl` ms if the lock still holds `token`. True if so.
  fn extend(
    &self,
    keys: &Self::Keys,
    token: &str,
    ttl: u64,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// Deletes the lock if it still holds `token` (a holder whose lease ran
  /// out must not free the lock another instance took since). True if so.
  fn release(
    &self,
    keys: &Self::Keys,
    token: &str,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// Writes `envelope` for `key`, expiring in `px` ms, unless the stored
  /// value is a valid envelope from a load that started later (a greater
  /// stamp); a stored value the reader rejects is replaced, and so is one
  /// with a valid header over a bad value whose stamp is `corrupt_stamp`.
  /// A write announces the fill on the events channel, and in any case the
  /// lock is released if it still holds `token`, after the value is
  /// readable. A write removes the key's back-off marker. True if written,
  /// false if a newer value was kept.
  fn write_over(
    &self,
    key: &str,
    keys: &Self::Keys,
    envelope: &Envelope,
    px: u64,
    token: Option<&str>,
    corrupt_stamp: Option<u64>,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// `ctx.keep()`: when the stored value is the copy `kept` describes
  /// (its stamp and deadlines), gives it `meta`'s deadlines and stamp, its
  /// bytes untouched, expiring in `px` ms; not over a later write, a
  /// tombstone, or after an `expire` past `meta.stamp` (as
  /// [`SharedStore::write_over`] judges them). A keep announces the fill
  /// and ends the back-off; in any case the lock is released if it still
  /// holds `token`. True if kept.
  fn keep_over(
    &self,
    key: &str,
    keys: &Self::Keys,
    kept: &Meta,
    meta: &Meta,
    px: u64,
    token: Option<&str>,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// A live `set`: writes `envelope` for `key`, expiring in `px` ms,
  /// whatever is stored, stamped one past the stored value's stamp when that
  /// is not earlier than the envelope's (another instance's write within the
  /// clocks' error), so the `set` orders after it. Announces the fill and
  /// removes the key's back-off marker. Answers the stamp written.
  fn write_newest(
    &self,
    key: &str,
    keys: &Self::Keys,
    envelope: &Envelope,
    px: u64,
  ) -> impl Future<Output = Result<u64, Self::Error>> + Send;

  /// Deletes `key`: leaves a tombstone in its place (`envelope::tombstone`,
  /// read as nothing there) stamped `deletion.at`, living `deletion.px` ms,
  /// so a load that began before the delete cannot write its older value
  /// over it; then announces it. Live (`replayed: false`): lands whatever
  /// is stored, stamped one past the stored value's stamp when that is not
  /// earlier (as [`SharedStore::write_newest`]); true if a value (not a
  /// tombstone) was there. Replayed (auto-recovery): lands unless the
  /// stored value is a valid envelope from a load that started later (a
  /// greater stamp), and announces only then; true if it landed, false if a
  /// newer value was kept.
  fn delete(
    &self,
    key: &str,
    keys: &Self::Keys,
    deletion: Deletion,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// `expire` at `at` (epoch ms), live or replayed: makes `key`'s value
  /// stale from `at`, its value and hard TTL kept, unless it was written
  /// later (a greater stamp), is stale by then already, or is not a valid
  /// envelope (`Meta::expired_at`); then announces it. In any case, for
  /// `guard` ms no [`SharedStore::write_over`] of a load begun before `at`
  /// is written. True if expired.
  fn expire(
    &self,
    key: &str,
    keys: &Self::Keys,
    at: u64,
    guard: u64,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// `deleteByTag` at `at` (epoch ms), live or replayed: raises `tag`'s
  /// invalidation stamp to `at` (never lowers it), keeping it at least `px`
  /// ms, and announces it. True if raised.
  fn invalidate_tag(
    &self,
    tag: &str,
    at: u64,
    px: u64,
  ) -> impl Future<Output = Result<bool, Self::Error>> + Send;

  /// The invalidation stamps of `tags` (0: never invalidated, or another
  /// program's value), in `tags`' order.
  fn tag_stamps(
    &self,
    tags: &[String],
  ) -> impl Future<Output = Result<Vec<u64>, Self::Error>> + Send;

  /// Removes the values of `scope` (and no other) and announces it: live
  /// (`not_newer_than: None`), or replayed for a clear made at stamp `t`
  /// (`Some(t)`), sparing the valid envelopes newer than `t`. Returns how
  /// many were removed.
  fn clear(
    &self,
    scope: ClearScope<'_>,
    not_newer_than: Option<u64>,
  ) -> impl Future<Output = Result<u64, Self::Error>> + Send;

  /// The fleet's load slots (`fleetMaxConcurrentLoads`, a semaphore of
  /// `call.cap` slots shared by every instance): sets this instance's
  /// holding and grants what it wants, fairly (`LOAD_SLOTS_SCRIPT`); one
  /// granted less than it wants keeps a place in the queue. When slots are
  /// free and others wait, announces
  /// [`crate::core::fleet::Change::SlotsFreed`], naming the last place that
  /// may get one.
  fn load_slots(
    &self,
    call: SlotCall,
  ) -> impl Future<Output = Result<SlotGrant, Self::Error>> + Send;

  /// Delivers every event on the channel (this store's own included) to
  /// `events` until the returned task is aborted, reconnecting as needed;
  /// `on_connected` tells whether the subscription is live (while it is
  /// not, changes elsewhere may be missed). Must run inside tokio.
  fn subscribe(
    &self,
    events: &Arc<Events>,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> JoinHandle<()>;

  /// The store's clock, epoch ms: what the fleet's instances agree on
  /// (`engine::clock`).
  fn server_time(&self) -> impl Future<Output = Result<u64, Self::Error>> + Send;

  /// Closes the store's connections; every call after this fails. Calls
  /// in flight finish within the command timeout.
  fn close(&self);

  /// What this store found that the application must be told.
  fn problems(&self) -> &Arc<Problems>;

  /// What a failure means for the application: its cause, coded, with the
  /// server's own text and what to check.
  fn describe(&self, error: &Self::Error) -> Problem;

  /// Resolves once the store answers as the fleet needs it to: connected,
  /// authenticated, its db selected, its scripts loaded (`cache.ready()`;
  /// the subscription is the fleet's to wait for).
  fn ready(&self) -> impl Future<Output = Result<(), Self::Error>> + Send;
}

type Handler = Arc<dyn Fn(&Event) + Send + Sync>;

/// What woke a waiter of a key ([`Events::wait`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notice {
  /// The key changed (a fill, a delete, an expire, a clear).
  Changed,
  /// Its lock was let go of with nothing written.
  Released,
}

/// Fill notices and invalidations, from one subscription per store. Callers
/// that lost the lock register a waiter *before* they re-read the key, so a
/// fill that lands in between still wakes them.
pub struct Events {
  waiters: Mutex<HashMap<String, Vec<oneshot::Sender<Notice>>>>,
  handler: Handler,
  /// What the server's client tracking did (a Redis store's, with the
  /// `tracking` option).
  pub tracking: TrackingState,
}

/// The server's client tracking for one instance's L1: whether it is on,
/// and what it told.
#[derive(Debug, Default)]
pub struct TrackingState {
  /// True while the server tells the subscription of every change under
  /// the prefix.
  pub live: AtomicBool,
  /// Changes made outside herdcache, applied to the L1.
  pub changes: AtomicU64,
  /// Herdcache's own changes heard again through tracking, not applied
  /// twice.
  pub echoes: AtomicU64,
}

impl TrackingState {
  pub fn changed(&self) {
    self.changes.fetch_add(1, Ordering::Relaxed);
  }

  /// `n` of herdcache's changes were heard again through tracking.
  pub fn echoed(&self, n: u64) {
    self.echoes.fetch_add(n, Ordering::Relaxed);
  }
}

impl Events {
  pub fn new(handler: impl Fn(&Event) + Send + Sync + 'static) -> Arc<Events> {
    Arc::new(Events {
      waiters: Mutex::new(HashMap::new()),
      handler: Arc::new(handler),
      tracking: TrackingState::default(),
    })
  }

  /// Resolves when `key` is filled, deleted or cleared. Waiters whose
  /// caller gave up (dropped the receiver) are pruned here, so a key that is
  /// waited on often but never filled holds no more than its live waiters.
  pub fn wait(&self, key: &str) -> oneshot::Receiver<Notice> {
    let (tx, rx) = oneshot::channel();
    let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
    let list = waiters.entry(key.to_string()).or_default();
    list.retain(|waiter| !waiter.is_closed());
    list.push(tx);
    rx
  }

  /// How many callers wait for `key` now.
  pub fn waiting(&self, key: &str) -> usize {
    let waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
    waiters
      .get(key)
      .map_or(0, |list| list.iter().filter(|w| !w.is_closed()).count())
  }

  /// Wakes the waiters of the event's key (all of them for a clear, those
  /// of its keys for a namespace's clear, none for a tag), then
  /// hands the event to the handler.
  pub fn dispatch(&self, event: &Event) {
    let notice = match event.change {
      crate::core::fleet::Change::Released(_) => Notice::Released,
      _ => Notice::Changed,
    };
    let woken: Vec<oneshot::Sender<Notice>> = {
      let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
      match (&event.change, event.key()) {
        // A namespace's clear wakes the waiters of its keys only.
        (crate::core::fleet::Change::PrefixCleared(prefix), _) => {
          let keys: Vec<String> = waiters
            .keys()
            .filter(|key| key.starts_with(prefix.as_str()))
            .cloned()
            .collect();
          keys
            .iter()
            .flat_map(|key| waiters.remove(key).unwrap_or_default())
            .collect()
        }
        // A winner whose load a tag invalidated writes nothing: its
        // lock's release tells the waiters, as for any load that failed.
        // Freed load slots change no key.
        (
          crate::core::fleet::Change::Tagged { .. } | crate::core::fleet::Change::SlotsFreed { .. },
          _,
        ) => Vec::new(),
        (_, Some(key)) => waiters.remove(key).unwrap_or_default(),
        (_, None) => waiters.drain().flat_map(|(_, w)| w).collect(),
      }
    };
    for waiter in woken {
      let _ = waiter.send(notice);
    }
    (self.handler)(event);
  }
}
