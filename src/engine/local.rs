//! The engine: one embedded store, one flight table, the counters, and the
//! decisions of the protocol for one key (see DESIGN.md §3):
//!
//! | entry             | caller gets          | besides                         |
//! |-------------------|----------------------|---------------------------------|
//! | fresh             | the value            | XFetch may start a refresh      |
//! | stale             | the value at once    | one background refresh          |
//! | negative (fresh)  | the not-found marker | —                               |
//! | none / expired    | waits for a load     | one load per key (coalesced)    |

use super::clock::{Clock, Draws};
use super::flights::{Flight, FlightTable};
use super::memory::{Entry, MemoryStore, Reclaimed};
use super::metrics::{Gauges, Metrics};
use crate::core::body::Body;
use crate::core::envelope::Meta;
use crate::core::etag::Etag;
use crate::core::options::{CacheConfig, EntryPolicy, Tiers};
use crate::core::policy::{self, Freshness};
use crate::core::tags::{TagStamps, Tags, TAG_STAMPS_CAPACITY};
use crate::engine::fleet::{lock as lock_tags, SharedTagStamps};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Why a background refresh starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
  /// The entry is stale.
  Stale,
  /// The entry is fresh, and XFetch drew an early refresh.
  Early,
}

/// What a finished load keeps: stored (with the flight's policy, or the
/// one its loader set), or not stored at all (its callers still get it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Keep {
  Store(Option<EntryPolicy>),
  Nothing,
}

/// Our loader's value, with what the loader asked for its entry.
#[derive(Debug)]
pub struct Loaded<V> {
  pub value: V,
  pub negative: bool,
  pub compute_ms: u64,
  /// Its JSON text or formatted bytes, for the shared store (`None`
  /// without one, or when `kept`).
  pub body: Option<Body>,
  /// `ctx.noStore()`, or the TTLs `ctx.setTtl` gave.
  pub keep: Keep,
  /// The UTF-8 bytes of its JSON text, for `l1MaxBytes` (0 when the cache
  /// has no bound in bytes).
  pub bytes: usize,
  /// Its validator (`ctx.setEtag`).
  pub etag: Etag,
  /// `ctx.keep()`: the origin said the value this process held, stamped
  /// so, has not changed; `value` is that value, kept for a new TTL.
  pub kept: Option<u64>,
}

impl<V> Loaded<V> {
  /// A loaded `value` stored as the flight's policy says, nothing else asked.
  pub fn plain(value: V, negative: bool, compute_ms: u64) -> Self {
    Loaded {
      value,
      negative,
      compute_ms,
      body: None,
      keep: Keep::Store(None),
      bytes: 0,
      etag: Etag::NONE,
      kept: None,
    }
  }

  /// The same load, its value held as `value`.
  pub fn holding<W>(self, value: W) -> Loaded<W> {
    Loaded {
      value,
      negative: self.negative,
      compute_ms: self.compute_ms,
      body: self.body,
      keep: self.keep,
      bytes: self.bytes,
      etag: self.etag,
      kept: self.kept,
    }
  }
}

/// A key's refresh back-off after a failed background refresh: the
/// failures in a row so far, and how long no refresh starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
  pub attempt: u32,
  pub ms: u64,
}

/// What the callers of a flight answered by a shared store got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
  Fresh,
  Stale,
  Negative,
}

/// XFetch's draw for an entry written now (`fixed`: pinned by
/// `set_random`): the moment from which it is refreshed early. Negative
/// markers never are.
fn draw_refresh_at(draws: &mut Draws, fixed: Option<f64>, meta: &Meta, beta: f64) -> u64 {
  if meta.negative {
    return meta.fresh_until;
  }
  let u = draws.next(fixed);
  policy::xfetch_refresh_at(meta.stamp, meta.fresh_until, meta.compute_ms, beta, u)
}

/// Whether an entry carrying `tags`, stamped `stamp`, was invalidated by a
/// tag. Out of line: an untagged hit, the common one, pays only the check
/// that it has none.
#[cold]
#[inline(never)]
fn tag_invalidated(stamps: &SharedTagStamps, tags: &Tags, stamp: u64) -> bool {
  lock_tags(stamps).invalidates(tags, stamp)
}

/// No usable entry: join the key's flight, or lead one.
fn join_or_lead<'a, V, F>(
  metrics: &mut Metrics,
  flight: Option<&'a mut Flight<F>>,
) -> Decision<'a, V, F> {
  match flight {
    Some(flight) => {
      metrics.coalesced += 1;
      flight.joined += 1;
      Decision::Join {
        flight: &flight.handle,
      }
    }
    None => {
      metrics.misses += 1;
      Decision::Lead
    }
  }
}

/// Whether a copy past `l1Ttl` gives way to the shared store: there is
/// none (the loader then), or its last command reached it. While it does
/// not, the copy is used as long as its own TTLs allow, so an outage does
/// not turn every key past its `l1Ttl` into a load. Read only past `l1Ttl`:
/// the hit path pays nothing for it.
fn past_l1_goes_on(store_reachable: &Option<Arc<AtomicBool>>) -> bool {
  store_reachable
    .as_ref()
    .is_none_or(|reachable| reachable.load(Ordering::Relaxed))
}

/// What one `getOrLoad` call does.
#[derive(Debug)]
pub enum Decision<'a, V, F> {
  /// A fresh value; `refresh` asks the caller to start a background refresh.
  /// `until`: the same call answers the same way, as long as nothing moves
  /// the epoch (`engine::epoch`), until this moment (the engine's clock):
  /// the entry's fresh deadline, its early refresh, its `l1Ttl`. `None`
  /// for an entry judged by more than time (a tagged one).
  Hit {
    value: &'a V,
    refresh: Option<Refresh>,
    until: Option<u64>,
  },
  /// A stale value; `refresh` asks the caller to start the background refresh.
  /// `counted` is false when the caller may still be answered by the refresh
  /// (softTimeout), and reports the outcome itself.
  Stale {
    value: &'a V,
    refresh: bool,
    join: Option<&'a F>,
    counted: bool,
  },
  /// A fresh not-found marker.
  Negative { value: &'a V },
  /// A load is in flight: share it.
  Join { flight: &'a F },
  /// Nothing usable: this caller starts the load.
  Lead,
}

#[derive(Debug)]
pub struct Engine<V, F> {
  config: CacheConfig,
  store: MemoryStore<V>,
  flights: FlightTable<F>,
  metrics: Metrics,
  running: u64,
  /// What the load bulkhead (lib/bulkhead.js) last reported: slots in use, queue length.
  load_queue: (u64, u64),
  clock: Clock,
  fixed_jitter_u: Option<f64>,
  fixed_xfetch_u: Option<f64>,
  draws: Draws,
  closed: bool,
  /// The tags' invalidation stamps (with a fleet, its own: shared).
  tags: SharedTagStamps,
  /// The latest `deleteByTag` made here: a load or `set` in the same
  /// millisecond is stamped after it, so it survives the invalidation it
  /// followed (stamps are ms, and an entry stamped `at` is invalidated).
  last_tag_invalidation: u64,
  /// The longest life an entry written here, or read from the fleet, can
  /// have (ms): how long a tag's stamp must outlive its `deleteByTag`.
  longest_hard_ttl: u64,
  /// Whether a fleet's shared store is behind this memory ([`Engine::join_fleet`]).
  shared: bool,
  /// With a fleet: whether its last command reached the store.
  store_reachable: Option<Arc<AtomicBool>>,
}

impl<V, F> Engine<V, F> {
  pub fn new(config: CacheConfig) -> Self {
    Engine::with_clock(config, Clock::default())
  }

  /// An engine on `clock` (shared with the fleet).
  pub fn with_clock(config: CacheConfig, clock: Clock) -> Self {
    Engine {
      store: MemoryStore::new(config.max_entries, config.l1_max_bytes)
        .counting_on(clock.epoch().clone()),
      flights: FlightTable::default(),
      metrics: Metrics::default(),
      running: 0,
      load_queue: (0, 0),
      clock,
      fixed_jitter_u: None,
      fixed_xfetch_u: None,
      draws: Draws::seeded(),
      closed: false,
      tags: Arc::new(Mutex::new(TagStamps::new(TAG_STAMPS_CAPACITY))),
      last_tag_invalidation: 0,
      longest_hard_ttl: config.entry.hard_ttl.max(config.entry.ttl),
      shared: false,
      store_reachable: None,
      config,
    }
  }

  /// This engine is the L1 of a fleet's shared store from now on: its
  /// hits are L1 hits, its loads are counted once their loader ran, and
  /// it judges tagged entries by `tags` (the fleet's).
  pub fn join_fleet(&mut self, tags: SharedTagStamps, reachable: Arc<AtomicBool>) {
    self.shared = true;
    self.tags = tags;
    self.store_reachable = Some(reachable);
  }

  /// A stamp for a load or write starting now: after the latest
  /// `deleteByTag` made here.
  fn stamp_now(&self) -> u64 {
    self.now().max(self.last_tag_invalidation.saturating_add(1))
  }

  pub fn config(&self) -> &CacheConfig {
    &self.config
  }

  /// The cache's clock (its epoch with it: `engine::epoch`).
  pub fn clock(&self) -> &Clock {
    &self.clock
  }

  /// Epoch milliseconds in the fleet's time (see [`Clock`]).
  #[inline]
  pub fn now(&self) -> u64 {
    self.clock.now()
  }

  pub fn advance_clock(&mut self, ms: u64) {
    self.clock.advance(ms);
  }

  /// Test hook: this host's wall clock reads `ms` off.
  pub fn skew_clock(&mut self, ms: i64) {
    self.clock.set_skew(ms);
  }

  /// Pins the random draws (`None`: real randomness again): `jitter` for
  /// the TTLs written, `xfetch` for the early-refresh moment drawn when an
  /// entry is written (`1`: never early, `0`: from its stamp, i.e. the first
  /// read refreshes). Entries already there keep their moment.
  pub fn set_random(&mut self, jitter: Option<f64>, xfetch: Option<f64>) {
    self.fixed_jitter_u = jitter;
    self.fixed_xfetch_u = xfetch;
  }

  pub fn is_closed(&self) -> bool {
    self.closed
  }

  pub fn close(&mut self) {
    self.closed = true;
    self.clock.epoch().bump();
  }

  fn count(&mut self, reclaimed: Reclaimed) {
    self.metrics.evictions += reclaimed.evicted;
    self.metrics.expirations += reclaimed.expired;
  }

  /// Decides one `getOrLoad` call. `allow_stale: false` treats a stale entry
  /// as a miss. XFetch refreshes a fresh entry from its `refresh_at`, drawn
  /// by its writer with the `beta` of the call that wrote it.
  #[inline]
  pub fn decide(&mut self, key: &str, allow_stale: bool) -> Decision<'_, V, F> {
    let now = self.now();
    let l1 = self.shared;
    let soft_wait = self.config.soft_timeout > 0;
    let mut flight = self.flights.for_key_mut(key);
    if !allow_stale {
      if let Some(flight) = flight.as_mut() {
        flight.strict = true;
      }
    }
    let (entry, reclaimed) = self.store.touch(key, now);
    let metrics = &mut self.metrics;
    metrics.evictions += reclaimed.evicted;
    metrics.expirations += reclaimed.expired;
    let Some(entry) = entry else {
      return join_or_lead(metrics, flight);
    };
    // Invalidated by a tag: a miss. The entry stays until the load's value
    // replaces it (its stamp is older), as an expired one does.
    let meta = entry.meta();
    if !entry.tags().is_empty() && tag_invalidated(&self.tags, entry.tags(), meta.stamp) {
      return join_or_lead(metrics, flight);
    }
    // Past `l1Ttl` this copy is not used: on to Redis (or the loader). It
    // stays until the new value replaces it, as above.
    if now >= entry.l1_until() && past_l1_goes_on(&self.store_reachable) {
      return join_or_lead(metrics, flight);
    }
    let may_refresh = flight.is_none() && policy::refresh_allowed(entry.retry_after(), now);
    match policy::classify(&meta, now) {
      Freshness::Fresh if meta.negative => {
        metrics.negative_hits += 1;
        metrics.l1_hits += u64::from(l1);
        Decision::Negative {
          value: &entry.value,
        }
      }
      Freshness::Fresh => {
        metrics.hits += 1;
        metrics.l1_hits += u64::from(l1);
        let early = may_refresh && policy::early_refresh_due(entry.refresh_at(), now);
        let until = (entry.tags().is_empty() && !early).then(|| {
          meta
            .fresh_until
            .min(entry.refresh_at())
            .min(entry.l1_until())
        });
        Decision::Hit {
          value: &entry.value,
          refresh: early.then_some(Refresh::Early),
          until,
        }
      }
      Freshness::Stale if allow_stale => {
        metrics.l1_hits += u64::from(l1);
        if !soft_wait {
          metrics.stale_served += 1;
        }
        Decision::Stale {
          value: &entry.value,
          refresh: may_refresh,
          join: flight.map(|f| &f.handle),
          counted: !soft_wait,
        }
      }
      // Stale but not allowed, or expired: a miss that keeps the entry for
      // callers that accept stale values.
      _ => join_or_lead(metrics, flight),
    }
  }

  /// Decides a call that does not read memory (`forceFresh`, `l1: false`):
  /// it joins the key's flight or leads a new one. A `forceFresh` caller
  /// joining a flight makes it refuse every value written before this call
  /// (its loader, if running, is this call's load now).
  pub fn decide_past_l1(&mut self, key: &str, force_fresh: bool) -> Decision<'_, V, F> {
    // A value stamped this very ms may have been read before the call.
    let since = self.stamp_now();
    let mut flight = self.flights.for_key_mut(key);
    if let Some(flight) = flight.as_mut().filter(|_| force_fresh) {
      flight.strict = true;
      flight.replaces = Some(flight.replaces.map_or(since, |r| r.max(since)));
    }
    join_or_lead(&mut self.metrics, flight)
  }

  /// Counts a stale read whose caller waited up to softTimeout: it was
  /// answered with the stale value, or with the refresh's fresh one.
  pub fn record_soft_wait(&mut self, served_stale: bool) {
    if served_stale {
      self.metrics.stale_served += 1;
    } else {
      self.metrics.hits += 1;
    }
  }

  /// What the load bulkhead did since its last report (loads queued, ms
  /// they waited, loads refused, refreshes skipped, loads run without the
  /// fleet's slot because Redis could not be asked) and its state now
  /// (slots in use, queue length). The bulkhead runs in JavaScript, where
  /// the loaders are called; its counts are kept here with the others so
  /// that `stats()` and `metrics()` have one source.
  pub fn record_load_queue(&mut self, added: [u64; 5], slots_used: u64, queue_length: u64) {
    let [queued, waited_ms, rejected, skipped, bypassed] = added;
    self.metrics.fleet_cap_bypassed += bypassed;
    self.metrics.loads_queued += queued;
    self.metrics.load_queue_wait_ms += waited_ms;
    self.metrics.loads_rejected += rejected;
    self.metrics.refreshes_skipped += skipped;
    self.load_queue = (slots_used, queue_length);
  }

  /// Whether values are kept in memory: always, except with Redis and
  /// `l1: false` (every call then reads Redis; flights still coalesce).
  fn keeps_values(&self) -> bool {
    !self.shared || self.config.redis.as_ref().is_none_or(|r| r.l1)
  }

  /// Drops `key` from memory if it still holds the value stamped `stamp`:
  /// the shared store kept a newer one.
  pub fn forget_if_stamp(&mut self, key: &str, stamp: u64) {
    if self
      .store
      .peek(key)
      .is_some_and(|e| e.meta().stamp == stamp)
    {
      self.store.remove(key);
    }
  }

  /// Registers a load for `key` before its loader is called, with the
  /// binding's handle for it; returns its id. Without Redis the loader runs
  /// right away, so the load is counted here; with Redis only once the
  /// loader ran ([`Engine::count_loader_run`]): the fleet may answer the
  /// flight, or it may be given up while it waits.
  pub fn begin_flight(
    &mut self,
    key: &str,
    handle: F,
    refresh: Option<Refresh>,
    policy: EntryPolicy,
  ) -> u64 {
    self.running += 1;
    self.metrics.loads += u64::from(!self.shared);
    match refresh {
      Some(Refresh::Early) => {
        self.metrics.background_refreshes += 1;
        self.metrics.early_refreshes += 1;
      }
      Some(Refresh::Stale) => self.metrics.background_refreshes += 1,
      None => {}
    }
    let replaces = match refresh {
      Some(Refresh::Early) => self.store.peek(key).map(|e| e.meta().stamp),
      _ => None,
    };
    let id = self
      .flights
      .begin(key, handle, refresh.is_some(), policy, self.stamp_now());
    if let Some(flight) = self.flights.get_mut(id) {
      flight.replaces = replaces;
    }
    id
  }

  /// Flight `id` goes to the tiers its leading call asked for. `forceFresh`:
  /// only a value loaded from its start on answers it.
  pub fn route_flight(&mut self, id: u64, tiers: Tiers) {
    if let Some(flight) = self.flights.get_mut(id) {
      flight.tiers = tiers;
      if tiers.force_fresh {
        // Stamped after its start: a load begun the same ms may have read
        // what the caller wants replaced.
        flight.replaces = Some(flight.started_at);
        flight.strict = true;
      }
    }
  }

  /// Flight `id` until it ends (superseded or not).
  pub fn flight(&self, id: u64) -> Option<&Flight<F>> {
    self.flights.get(id)
  }

  pub fn flight_mut(&mut self, id: u64) -> Option<&mut Flight<F>> {
    self.flights.get_mut(id)
  }

  /// The flights whose JS leader is not made yet ([`FlightTable::unled`]).
  pub fn unled_flights(&self) -> Vec<u64> {
    self.flights.unled()
  }

  /// The key's current flight.
  pub fn flight_for_key(&self, key: &str) -> Option<&Flight<F>> {
    self.flights.for_key(key)
  }

  /// The key's current flight.
  pub fn flight_for_key_mut(&mut self, key: &str) -> Option<&mut Flight<F>> {
    self.flights.for_key_mut(key)
  }

  /// Whether a background refresh of `key` may start now: an entry is
  /// there, no flight is, and the key is not backing off.
  pub fn refresh_due(&self, key: &str) -> bool {
    let now = self.now();
    self.flights.for_key(key).is_none()
      && (!self.keeps_values()
        || self.store.peek(key).is_some_and(|e| {
          policy::alive(&e.meta(), now) && policy::refresh_allowed(e.retry_after(), now)
        }))
  }

  /// What a shared store may answer flight `id` with: `(accept_stale,
  /// newer_than)`; `None` when the flight is no longer current.
  pub fn flight_terms(&self, id: u64) -> Option<(bool, Option<u64>)> {
    self
      .flights
      .current(id)
      .map(|f| (!f.background && !f.strict, f.replaces))
  }

  /// Stores a value another instance wrote (read from the shared store) for
  /// flight `id`, with that value's own deadlines: the L1 never looks
  /// fresher than the shared entry. Returns what the flight's callers got.
  ///
  /// The flight's callers were counted as `misses` and `coalesced` when they
  /// came; answered from the shared store, they are recounted as what they
  /// got: `hits`, `staleServed` or `negativeHits`.
  /// `bytes`: its JSON text's, for `l1MaxBytes`.
  pub fn adopt(
    &mut self,
    id: u64,
    value: V,
    meta: Meta,
    (tags, etag): (Tags, Etag),
    bytes: usize,
  ) -> Served {
    let now = self.now();
    let freshness = policy::classify(&meta, now);
    let served = match freshness {
      _ if meta.negative => Served::Negative,
      Freshness::Fresh => Served::Fresh,
      Freshness::Stale | Freshness::Expired => Served::Stale,
    };
    self.running = self.running.saturating_sub(1);
    // A superseded flight's callers are answered too (and their `status`
    // says how): they are recounted as well, but its value is not kept.
    let Some(flight) = self.flights.get(id) else {
      return served;
    };
    let superseded = flight.superseded || flight.tiers.skip_l1 || !self.fits(bytes);
    let (beta, l1_ttl) = (flight.policy.beta, flight.policy.l1_ttl);
    let (leader, joined) = (u64::from(!flight.background), flight.joined);
    let key = flight.key.clone();
    let m = &mut self.metrics;
    m.misses = m.misses.saturating_sub(leader);
    m.coalesced = m.coalesced.saturating_sub(joined);
    *match served {
      Served::Negative => &mut m.negative_hits,
      Served::Fresh => &mut m.hits,
      Served::Stale => &mut m.stale_served,
    } += leader + joined;
    let expired = !policy::alive(&meta, now);
    if superseded || expired || !self.keeps_values() {
      return served;
    }
    // The writer's moment, shared by the fleet; an hc1 entry has none, and
    // this instance draws its own (with the flight's beta).
    let refresh_at = match meta.refresh_at {
      Some(at) => at,
      None => draw_refresh_at(&mut self.draws, self.fixed_xfetch_u, &meta, beta),
    };
    self.longest_hard_ttl = self.longest_hard_ttl.max(policy::hard_ttl_left(&meta, now));
    let mut entry = Entry::new(meta, value, refresh_at)
      .in_l1_for(l1_ttl, now)
      .weighing(self.weight(bytes));
    entry.set_tags(tags);
    entry.set_etag(etag);
    let reclaimed = self.store.insert(key, entry, now);
    self.count(reclaimed);
    served
  }

  /// Applies changes other instances made: their keys leave the L1, and a
  /// deleted (or cleared) key's flight is superseded, as a local `delete`
  /// would.
  pub fn invalidate(&mut self, invalidations: Vec<crate::engine::fleet::Invalidation>) {
    use crate::core::fleet::Change;
    use crate::engine::fleet::Invalidation;
    for invalidation in invalidations {
      match invalidation {
        Invalidation::Changed(Change::Filled(key)) => {
          self.store.remove(&key);
        }
        Invalidation::Changed(Change::Deleted(key)) => {
          self.store.remove(&key);
          self.flights.supersede(&key);
        }
        Invalidation::Changed(Change::Expired { key, at }) => {
          self.expire(&key, at);
        }
        Invalidation::Changed(Change::Cleared) => self.clear(),
        // Its stamp is in the shared stamps already (the fleet put it
        // there as it came): the loads it concerns are left.
        Invalidation::Changed(Change::Tagged { tag, at }) => {
          self.flights.supersede_tagged(&tag, at);
        }
        Invalidation::Changed(Change::PrefixCleared(prefix)) => self.clear_prefix(&prefix),
        // The fleet hands these to its load slots, never here.
        Invalidation::Changed(Change::SlotsFreed { .. } | Change::Released(_)) => {}
        Invalidation::Subscribed => {
          self.store.clear();
        }
        Invalidation::Superseded { key, stamp } => self.forget_if_stamp(&key, stamp),
        Invalidation::Restamped { key, from, to } => {
          if let Some(e) = self.store.peek_mut(&key).filter(|e| e.meta().stamp == from) {
            e.set_meta(Meta {
              stamp: to,
              ..e.meta()
            });
          }
        }
      }
    }
  }

  /// Stores a finished load's value (`negative`: the loader found nothing).
  /// Returns what was stored, to be written to a shared store too: a
  /// superseded flight's result is not stored.
  pub fn fill(&mut self, id: u64, value: V, negative: bool, compute_ms: u64) -> Option<Meta> {
    self.fill_as(id, Loaded::plain(value, negative, compute_ms))
  }

  /// What a value `bytes` long weighs in memory: nothing without a bound in
  /// bytes (`stats().l1Bytes` is then 0), as the binding weighs values only
  /// then.
  fn weight(&self, bytes: usize) -> usize {
    match self.config.l1_max_value_bytes {
      Some(_) => bytes,
      None => 0,
    }
  }

  /// Whether a value `bytes` long may be kept in memory (`l1MaxValueBytes`).
  fn fits(&self, bytes: usize) -> bool {
    self
      .config
      .l1_max_value_bytes
      .is_none_or(|most| bytes as u64 <= most)
  }

  /// [`Engine::fill`] as the loader asked (`ctx.setTtl`, `ctx.noStore`,
  /// `ctx.setEtag`, `ctx.keep`): with its own policy for this entry, or not
  /// stored at all. A kept value keeps the load time (XFetch's δ) and
  /// weight of the copy it was, when that copy is still here.
  pub fn fill_as(&mut self, id: u64, loaded: Loaded<V>) -> Option<Meta> {
    self.running = self.running.saturating_sub(1);
    let flight = self.flights.current(id)?;
    let Keep::Store(own_policy) = loaded.keep else {
      return None;
    };
    let (policy, stamp) = (own_policy.unwrap_or(flight.policy), flight.started_at);
    let key = flight.key.as_str();
    let (mut compute_ms, mut bytes) = (loaded.compute_ms, loaded.bytes);
    if let Some(kept) = loaded.kept {
      if let Some(copy) = self.store.peek(key).filter(|e| e.meta().stamp == kept) {
        compute_ms = copy.meta().compute_ms;
        bytes = bytes.max(copy.bytes() as usize);
      }
    }
    // `l1: false`: memory is not written (the value goes to the fleet only).
    let into_l1 = self.keeps_values() && !flight.tiers.skip_l1 && self.fits(bytes);
    let tags = flight.tags.clone();
    let now = self.now();
    let negative = loaded.negative;
    if negative && policy.negative_ttl == 0 {
      // Not found, and not-found is not cached: what was there is gone.
      if into_l1 {
        self.store.remove(key);
      }
      return None;
    }
    if let Some(stored) = self.store.peek(key) {
      if stored.meta().stamp > stamp {
        return None;
      }
    }
    let u = self.draws.next(self.fixed_jitter_u);
    let (fresh_until, hard_until) = if negative {
      let fresh = now.saturating_add(policy::jittered(policy.negative_ttl, self.config.jitter, u));
      (fresh, fresh)
    } else {
      policy::deadlines(now, policy.ttl, policy.hard_ttl, self.config.jitter, u)
    };
    let mut meta = Meta {
      fresh_until,
      hard_until,
      compute_ms,
      stamp,
      refresh_at: None,
      negative,
    };
    let refresh_at = draw_refresh_at(&mut self.draws, self.fixed_xfetch_u, &meta, policy.beta);
    meta.refresh_at = Some(refresh_at);
    self.longest_hard_ttl = self.longest_hard_ttl.max(policy::hard_ttl_left(&meta, now));
    if into_l1 {
      let mut entry = Entry::new(meta, loaded.value, refresh_at)
        .in_l1_for(policy.l1_ttl, now)
        .weighing(self.weight(bytes));
      entry.set_tags(tags);
      entry.set_etag(loaded.etag);
      let key = key.to_string();
      let reclaimed = self.store.insert(key, entry, now);
      self.count(reclaimed);
    }
    Some(meta)
  }

  /// The deadlines and stamp of flight `id`'s key's copy here, when the
  /// copy [`Engine::held`] gives is the one stamped `stamp` (what a
  /// `ctx.keep()` kept).
  pub fn copy_stamped(&self, id: u64, stamp: u64) -> Option<Meta> {
    let flight = self.flights.get(id)?;
    let (_, meta, _) = self.held(&flight.key)?;
    (meta.stamp == stamp).then_some(meta)
  }

  /// What this process holds for `key`, past its freshness or not, for a
  /// loader to see (`ctx.stale`): its value, stamp and validator. Nothing
  /// when its copy is past its hard TTL, or invalidated by a tag.
  pub fn held(&self, key: &str) -> Option<(&V, Meta, &Etag)> {
    let now = self.now();
    let entry = self.store.peek(key)?;
    let meta = entry.meta();
    let invalidated =
      !entry.tags().is_empty() && tag_invalidated(&self.tags, entry.tags(), meta.stamp);
    let alive = policy::alive(&meta, now) && !invalidated;
    alive.then_some((&entry.value, meta, entry.etag()))
  }

  /// With Redis, a flight's loader ran (it settled, with a value or an
  /// error): counted in `loads`.
  pub fn count_loader_run(&mut self) {
    self.metrics.loads += u64::from(self.shared);
  }

  /// Records a failed load. The entry stays (stale-if-error) and is not
  /// refreshed in the background again for a back-off that grows with each
  /// failure in a row ([`policy::refresh_backoff`], up to `refresh_backoff`).
  /// Returns the back-off a failed background refresh of a key in memory
  /// starts, for the fleet to share.
  pub fn fail(&mut self, id: u64, timed_out: bool) -> Option<Backoff> {
    self.running = self.running.saturating_sub(1);
    self.metrics.load_errors += 1;
    self.metrics.timeouts += u64::from(timed_out);
    let flight = self.flights.get(id)?;
    self.metrics.background_errors += u64::from(flight.background);
    if flight.superseded {
      return None;
    }
    let (now, cap, background) = (self.now(), self.config.refresh_backoff, flight.background);
    let u = self.draws.next(self.fixed_jitter_u);
    let entry = self.store.peek_mut(&flight.key)?;
    let failures = entry.failures().saturating_add(1);
    entry.set_failures(failures);
    let ms = policy::refresh_backoff(failures, cap, u);
    entry.set_retry_after(now.saturating_add(ms));
    (background && ms > 0).then_some(Backoff {
      attempt: failures,
      ms,
    })
  }

  /// Ends flight `id`, which ran no loader (its key backs off).
  pub fn end_unloaded(&mut self, id: u64) -> Option<Flight<F>> {
    self.running = self.running.saturating_sub(1);
    self.flights.end(id)
  }

  /// Another instance's refresh of `key` failed (its back-off marker was
  /// found): no background refresh here for `ms` either, and the next
  /// failure here continues its count.
  pub fn back_off(&mut self, key: &str, backoff: Backoff) {
    let until = self.now().saturating_add(backoff.ms);
    if let Some(entry) = self.store.peek_mut(key) {
      entry.set_failures(entry.failures().max(backoff.attempt));
      entry.set_retry_after(entry.retry_after().max(until));
    }
  }

  /// Ends flight `id`, handing it back (its handle, its lock).
  pub fn end_flight(&mut self, id: u64) -> Option<Flight<F>> {
    self.flights.end(id)
  }

  /// Writes a value directly. A flight in flight for the key is superseded:
  /// its result, loaded from older data, will not be stored.
  /// `bytes`: the value's JSON text's, for `l1MaxBytes`.
  pub fn set(
    &mut self,
    key: &str,
    value: V,
    policy: EntryPolicy,
    tags: Tags,
    bytes: usize,
  ) -> Meta {
    let now = self.now();
    let stamp = self.stamp_now();
    self.flights.supersede(key);
    let (fresh_until, hard_until) = policy::deadlines(
      now,
      policy.ttl,
      policy.hard_ttl,
      self.config.jitter,
      self.draws.next(self.fixed_jitter_u),
    );
    let mut meta = Meta {
      fresh_until,
      hard_until,
      compute_ms: 0,
      stamp,
      refresh_at: None,
      negative: false,
    };
    // No compute time: never early, whatever the draw.
    let refresh_at = draw_refresh_at(&mut self.draws, self.fixed_xfetch_u, &meta, policy.beta);
    meta.refresh_at = Some(refresh_at);
    self.longest_hard_ttl = self.longest_hard_ttl.max(policy::hard_ttl_left(&meta, now));
    let mut entry = Entry::new(meta, value, refresh_at)
      .in_l1_for(policy.l1_ttl, now)
      .weighing(self.weight(bytes));
    entry.set_tags(tags);
    if self.keeps_values() && self.fits(bytes) {
      let reclaimed = self.store.insert(key.to_string(), entry, now);
      self.count(reclaimed);
    }
    meta
  }

  /// The meta of `key`'s entry, as stored (no LRU touch, nothing counted).
  pub fn entry_meta(&self, key: &str) -> Option<Meta> {
    self.store.peek(key).map(|e| e.meta())
  }

  /// Removes `key` and supersedes its flight; true if a live entry was there.
  pub fn delete(&mut self, key: &str) -> bool {
    let now = self.now();
    self.flights.supersede(key);
    self
      .store
      .remove(key)
      .is_some_and(|e| policy::alive(&e.meta(), now))
  }

  /// `expire` at `at`: `key`'s entry is stale from then, kept until its hard
  /// TTL (`Meta::expired_at`), so the next reader is answered at once and
  /// refreshes it. A load of the key that started by then is superseded,
  /// as by `delete`: it may have read what changed. True if a fresh entry
  /// was made stale.
  pub fn expire(&mut self, key: &str, at: u64) -> bool {
    if self
      .flights
      .for_key(key)
      .is_some_and(|flight| flight.started_at <= at)
    {
      self.flights.supersede(key);
    }
    let Some(entry) = self.store.peek_mut(key) else {
      return false;
    };
    let Some(meta) = entry.meta().expired_at(at) else {
      return false;
    };
    entry.set_meta(meta);
    entry.set_refresh_at(entry.refresh_at().min(at));
    true
  }

  pub fn clear(&mut self) {
    self.flights.supersede_all();
    self.store.clear();
  }

  /// `deleteByTag` now: every entry carrying one of `tags` is invalid from
  /// here on (judged as it is read), and the loads carrying one are
  /// superseded. Returns the invalidation's stamp.
  pub fn delete_by_tag(&mut self, tags: &[String]) -> u64 {
    let at = self.stamp_now();
    let mut stamps = lock_tags(&self.tags);
    for tag in tags {
      stamps.invalidated(tag, at);
      self.flights.supersede_tagged(tag, at);
    }
    drop(stamps);
    self.last_tag_invalidation = at;
    at
  }

  /// The tags flight `id`'s value is written with. A background refresh
  /// given none keeps those of the entry it refreshes.
  pub fn tag_flight(&mut self, id: u64, tags: Tags) {
    let Some(flight) = self.flights.get_mut(id) else {
      return;
    };
    flight.tags = match (tags.is_empty(), flight.background) {
      (true, true) => self
        .store
        .peek(&flight.key)
        .map(|e| e.tags().clone())
        .unwrap_or_default(),
      _ => tags,
    };
  }

  /// How long a tag's invalidation stamp must be kept in a shared store:
  /// the longest life an entry carrying it can have.
  pub fn longest_hard_ttl(&self) -> u64 {
    self.longest_hard_ttl
  }

  /// A namespace's `clear`: removes the entries whose key starts with
  /// `prefix` (`users:`) and supersedes their flights, as `clear` does for
  /// all of them.
  pub fn clear_prefix(&mut self, prefix: &str) {
    self.flights.supersede_prefix(prefix);
    self.store.remove_prefix(prefix);
  }

  /// A cached value, fresh or (when allowed) stale; not-found markers and
  /// misses are `None`. Loads nothing and counts nothing.
  pub fn get(&mut self, key: &str, allow_stale: bool) -> Option<&V> {
    let now = self.now();
    let (entry, reclaimed) = self.store.touch(key, now);
    let found = match entry {
      Some(e) if e.meta().negative => None,
      Some(e) if !e.tags().is_empty() && tag_invalidated(&self.tags, e.tags(), e.meta().stamp) => {
        None
      }
      Some(e) if now >= e.l1_until() && past_l1_goes_on(&self.store_reachable) => None,
      Some(e) => match policy::classify(&e.meta(), now) {
        Freshness::Fresh => Some(&e.value),
        Freshness::Stale if allow_stale => Some(&e.value),
        _ => None,
      },
      None => None,
    };
    self.metrics.evictions += reclaimed.evicted;
    self.metrics.expirations += reclaimed.expired;
    found
  }

  pub fn metrics(&self) -> Metrics {
    self.metrics
  }

  pub fn metrics_mut(&mut self) -> &mut Metrics {
    &mut self.metrics
  }

  pub fn gauges(&self) -> Gauges {
    Gauges {
      size: self.store.len() as u64,
      l1_bytes: self.store.bytes(),
      in_flight: self.running,
      load_slots_used: self.load_queue.0,
      load_queue_length: self.load_queue.1,
      ..Gauges::default()
    }
  }

  /// Drops every entry and flight (after `close`, once loads settled).
  pub fn release(&mut self) -> Vec<Flight<F>> {
    self.store.clear();
    self.flights.drain()
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::options::RawCacheOptions;

  type TestEngine = Engine<String, &'static str>;

  fn engine() -> TestEngine {
    let raw = RawCacheOptions {
      ttl: Some(1_000.0),
      hard_ttl: Some(10_000.0),
      jitter: Some(0.0),
      refresh_backoff: Some(5_000.0),
      ..Default::default()
    };
    let mut e = Engine::new(CacheConfig::from_raw(&raw).unwrap());
    e.set_random(Some(0.5), Some(1.0));
    e
  }

  /// The load bulkhead's reports add to the counters and replace the gauges.
  #[test]
  fn load_queue_reports_add_counts_and_set_gauges() {
    let mut e = engine();
    e.record_load_queue([1, 0, 0, 0, 0], 2, 1);
    e.record_load_queue([1, 15, 1, 0, 0], 2, 2);
    e.record_load_queue([0, 7, 0, 1, 3], 1, 0);
    let m = e.metrics();
    assert_eq!(
      (
        m.loads_queued,
        m.load_queue_wait_ms,
        m.loads_rejected,
        m.refreshes_skipped,
        m.fleet_cap_bypassed
      ),
      (2, 22, 1, 1, 3)
    );
    let g = e.gauges();
    assert_eq!((g.load_slots_used, g.load_queue_length), (1, 0));
  }

  /// A load of `key` over what is there (no decide: it may be fresh).
  fn load_over(e: &mut TestEngine, key: &str, compute_ms: u64) -> Meta {
    let policy = e.config().entry;
    let id = e.begin_flight(key, "over", None, policy);
    let meta = e.fill(id, "over".into(), false, compute_ms).unwrap();
    e.end_flight(id);
    meta
  }

  /// Another instance's envelope for `key`, adopted by a flight.
  fn adopt(e: &mut TestEngine, key: &str, meta: Meta) {
    let policy = e.config().entry;
    let id = e.begin_flight(key, "adopt", None, policy);
    assert_eq!(
      e.adopt(id, "theirs".into(), meta, Default::default(), 0),
      Served::Fresh
    );
    e.end_flight(id);
  }

  fn early(e: &mut TestEngine, key: &str) -> bool {
    match e.decide(key, true) {
      Decision::Hit { refresh, .. } => refresh == Some(Refresh::Early),
      other => panic!("{other:?}"),
    }
  }

  #[test]
  fn the_writer_stores_its_refresh_moment_in_the_meta() {
    let mut e = engine();
    e.set_random(Some(0.5), Some(0.5));
    let meta = load_over(&mut e, "k", 1_000);
    // freshUntil - 1000 * ln 2, at least the stamp.
    let expected = (meta.fresh_until - 693).max(meta.stamp);
    assert_eq!(meta.refresh_at, Some(expected));
    e.set_random(Some(0.5), Some(1.0));
    let meta = load_over(&mut e, "k", 1_000);
    assert_eq!(meta.refresh_at, Some(meta.fresh_until));
    // set() has no compute time: never early.
    e.set_random(Some(0.5), Some(0.0));
    let meta = e.set("s", "v".into(), e.config().entry, Tags::NONE, 0);
    assert_eq!(meta.refresh_at, Some(meta.fresh_until));
    // Nor is a not-found marker.
    let id = e.begin_flight("gone", "p", None, e.config().entry);
    let meta = e.fill(id, "null".into(), true, 100).unwrap();
    e.end_flight(id);
    assert_eq!(meta.refresh_at, Some(meta.fresh_until));
  }

  #[test]
  fn an_adopted_envelopes_refresh_moment_decides_the_early_refresh() {
    let mut e = engine();
    // This instance's own draw would refresh at once; the writer's decides.
    e.set_random(Some(0.5), Some(0.0));
    let now = e.now();
    let meta = Meta {
      fresh_until: now + 1_000,
      hard_until: now + 10_000,
      compute_ms: 200,
      stamp: now - 200,
      refresh_at: Some(now + 600),
      negative: false,
    };
    adopt(&mut e, "k", meta);
    assert!(!early(&mut e, "k"));
    e.advance_clock(599);
    assert!(!early(&mut e, "k"), "1 ms before the writer's moment");
    e.advance_clock(1);
    let id = match e.decide("k", true) {
      Decision::Hit {
        value,
        refresh: Some(Refresh::Early),
        ..
      } => {
        assert_eq!(value, "theirs", "served while the refresh runs");
        e.begin_flight("k", "r", Some(Refresh::Early), e.config().entry)
      }
      other => panic!("{other:?}"),
    };
    // One flight per key: the other readers start none.
    for _ in 0..10 {
      assert!(!early(&mut e, "k"));
    }
    // Failed: backing off, no early refresh either.
    e.fail(id, false);
    e.end_flight(id);
    assert!(!early(&mut e, "k"));
    assert_eq!(e.metrics().early_refreshes, 1);

    // A moment at freshUntil: never early, whatever this instance would draw.
    let now = e.now();
    adopt(
      &mut e,
      "late",
      Meta {
        refresh_at: Some(now + 1_000),
        fresh_until: now + 1_000,
        stamp: now,
        ..meta
      },
    );
    e.advance_clock(999);
    assert!(!early(&mut e, "late"));
  }

  #[test]
  fn an_hc1_envelope_gets_a_local_draw_with_the_flights_beta() {
    let mut e = engine();
    let now = e.now();
    let meta = Meta {
      fresh_until: now + 1_000,
      hard_until: now + 10_000,
      compute_ms: 200,
      stamp: now,
      refresh_at: None,
      negative: false,
    };
    e.set_random(Some(0.5), Some(0.0));
    adopt(&mut e, "eager", meta);
    assert!(early(&mut e, "eager"), "u = 0: refreshes at the first read");
    e.set_random(Some(0.5), Some(1.0));
    adopt(&mut e, "never", meta);
    e.advance_clock(999);
    assert!(!early(&mut e, "never"), "u = 1: never early");
    // beta 0 on the adopting flight: never early, whatever the draw.
    e.set_random(Some(0.5), Some(0.0));
    let mut policy = e.config().entry;
    policy.beta = 0.0;
    let id = e.begin_flight("off", "adopt", None, policy);
    let now = e.now();
    e.adopt(
      id,
      "theirs".into(),
      Meta {
        fresh_until: now + 1_000,
        stamp: now,
        ..meta
      },
      Default::default(),
      0,
    );
    e.end_flight(id);
    assert!(!early(&mut e, "off"));
  }

  fn load(e: &mut TestEngine, key: &str, value: &str, compute_ms: u64) {
    assert!(matches!(e.decide(key, true), Decision::Lead));
    let policy = e.config().entry;
    let id = e.begin_flight(key, "promise", None, policy);
    assert!(e.fill(id, value.to_string(), false, compute_ms).is_some());
    assert_eq!(e.end_flight(id).map(|f| f.handle), Some("promise"));
  }

  #[test]
  fn concurrent_callers_join_one_flight() {
    let mut e = engine();
    assert!(matches!(e.decide("k", true), Decision::Lead));
    let id = e.begin_flight("k", "p", None, e.config().entry);
    for _ in 0..99 {
      assert!(matches!(
        e.decide("k", true),
        Decision::Join { flight: &"p" }
      ));
    }
    assert_eq!((e.metrics().misses, e.metrics().coalesced), (1, 99));
    e.fail(id, false);
    assert_eq!((e.metrics().loads, e.metrics().load_errors), (1, 1));
    e.end_flight(id);
    // A failed flight is not reused: the next caller leads again.
    assert!(matches!(e.decide("k", true), Decision::Lead));
    assert_eq!(e.gauges().size, 0);
  }

  #[test]
  fn an_expire_makes_the_entry_stale_and_supersedes_only_older_loads() {
    use crate::core::fleet::Change;
    use crate::engine::fleet::Invalidation;
    let mut e = engine();
    load(&mut e, "k", "v1", 50);
    e.advance_clock(100);
    let at = e.now();
    assert!(e.expire("k", at));
    assert!(!e.expire("k", at), "stale already");
    match e.decide("k", true) {
      Decision::Stale {
        value,
        refresh: true,
        ..
      } => assert_eq!(value, "v1"),
      other => panic!("{other:?}"),
    }
    // Another instance's expire, told over the events channel: a load that
    // started after it is kept, one that started by then is superseded.
    let id = e.begin_flight("k", "after", Some(Refresh::Stale), e.config().entry);
    let expired = |at| {
      vec![Invalidation::Changed(Change::Expired {
        key: "k".into(),
        at,
      })]
    };
    e.invalidate(expired(at - 1));
    assert!(
      e.fill(id, "v2".into(), false, 10).is_some(),
      "started after: stored"
    );
    e.end_flight(id);
    let id = e.begin_flight("k", "before", None, e.config().entry);
    e.advance_clock(5);
    e.invalidate(expired(e.now()));
    assert!(
      e.fill(id, "v3".into(), false, 10).is_none(),
      "started by then: not stored"
    );
    e.end_flight(id);
    match e.decide("k", true) {
      Decision::Stale { value, .. } => assert_eq!(value, "v2", "made stale by the second expire"),
      other => panic!("{other:?}"),
    }
    // The hard TTL stays: gone when it ends.
    e.advance_clock(10_000);
    assert!(matches!(e.decide("k", true), Decision::Lead));
  }

  #[test]
  fn fresh_then_stale_with_one_refresh_then_expired() {
    let mut e = engine();
    load(&mut e, "k", "v1", 50);
    assert!(matches!(
      e.decide("k", true),
      Decision::Hit { refresh: None, .. }
    ));
    e.advance_clock(1_000);
    let id = match e.decide("k", true) {
      Decision::Stale {
        value,
        refresh: true,
        join: None,
        counted: true,
      } => {
        assert_eq!(value, "v1");
        e.begin_flight("k", "refresh", Some(Refresh::Stale), e.config().entry)
      }
      other => panic!("{other:?}"),
    };
    // While the refresh runs, stale readers start no other.
    for _ in 0..10 {
      assert!(matches!(
        e.decide("k", true),
        Decision::Stale { refresh: false, .. }
      ));
    }
    // A caller that refuses stale values joins the refresh.
    assert!(matches!(
      e.decide("k", false),
      Decision::Join { flight: &"refresh" }
    ));
    assert!(e.fill(id, "v2".into(), false, 70).is_some());
    e.end_flight(id);
    match e.decide("k", true) {
      Decision::Hit { value, .. } => assert_eq!(value, "v2"),
      other => panic!("{other:?}"),
    }
    assert_eq!(e.metrics().background_refreshes, 1);
    assert_eq!(e.metrics().stale_served, 11);
    e.advance_clock(10_000);
    assert!(matches!(e.decide("k", true), Decision::Lead));
  }

  /// An engine whose copies are used for 100 ms of a 1 s TTL.
  fn engine_with_l1_ttl() -> TestEngine {
    let raw = RawCacheOptions {
      ttl: Some(1_000.0),
      l1_ttl: Some(100.0),
      jitter: Some(0.0),
      ..Default::default()
    };
    Engine::new(CacheConfig::from_raw(&raw).unwrap())
  }

  #[test]
  fn past_l1_ttl_the_copy_in_memory_is_not_used_though_the_entry_is_fresh() {
    let mut e = engine_with_l1_ttl();
    load(&mut e, "k", "v1", 1);
    e.advance_clock(99);
    assert!(matches!(e.decide("k", true), Decision::Hit { .. }));
    assert_eq!(e.get("k", true).map(String::as_str), Some("v1"));
    e.advance_clock(1);
    assert!(
      matches!(e.decide("k", true), Decision::Lead),
      "past l1Ttl: a miss"
    );
    assert!(e.get("k", true).is_none());
    // A call's own l1Ttl outlives the cache's.
    let longer = e
      .config()
      .entry
      .with(&crate::core::options::RawCallOptions {
        l1_ttl: Some(500.0),
        ..Default::default()
      });
    let id = e.begin_flight("j", "p", None, longer.unwrap());
    assert!(e.fill(id, "v".into(), false, 1).is_some());
    e.end_flight(id);
    e.advance_clock(499);
    assert!(matches!(e.decide("j", true), Decision::Hit { .. }));
    e.advance_clock(1);
    assert!(matches!(e.decide("j", true), Decision::Lead));
    let refused = e
      .config()
      .entry
      .with(&crate::core::options::RawCallOptions {
        l1_ttl: Some(0.0),
        ..Default::default()
      });
    assert_eq!(
      refused.err().map(|e| e.code),
      Some(crate::core::error::Code::InvalidOption)
    );
  }

  /// While the store is unreachable, a copy past `l1Ttl` is used still:
  /// an outage does not make every key a load.
  #[test]
  fn past_l1_ttl_the_copy_is_used_while_the_store_is_unreachable() {
    let mut e = engine_with_l1_ttl();
    let reachable = Arc::new(AtomicBool::new(true));
    let tags = Arc::new(Mutex::new(TagStamps::new(TAG_STAMPS_CAPACITY)));
    e.join_fleet(tags, Arc::clone(&reachable));
    load(&mut e, "k", "v1", 1);
    e.advance_clock(150);
    assert!(matches!(e.decide("k", true), Decision::Lead));
    reachable.store(false, Ordering::Relaxed);
    assert!(matches!(e.decide("k", true), Decision::Hit { .. }));
    assert_eq!(e.get("k", true).map(String::as_str), Some("v1"));
  }

  #[test]
  fn failed_refresh_keeps_the_stale_value_and_backs_off() {
    let mut e = engine();
    load(&mut e, "k", "v1", 10);
    e.advance_clock(1_500);
    let id = e.begin_flight("k", "r", Some(Refresh::Stale), e.config().entry);
    e.fail(id, false);
    e.end_flight(id);
    assert_eq!(e.metrics().background_errors, 1);
    match e.decide("k", true) {
      Decision::Stale { value, refresh, .. } => {
        assert_eq!(value, "v1");
        assert!(!refresh, "backing off");
      }
      other => panic!("{other:?}"),
    }
    e.advance_clock(5_000);
    assert!(matches!(
      e.decide("k", true),
      Decision::Stale { refresh: true, .. }
    ));
  }

  /// Fails one background refresh of `key` (it must be due now).
  fn fail_refresh(e: &mut TestEngine, key: &str) -> Option<Backoff> {
    assert!(
      matches!(e.decide(key, true), Decision::Stale { refresh: true, .. }),
      "a refresh is due"
    );
    let id = e.begin_flight(key, "r", Some(Refresh::Stale), e.config().entry);
    let backoff = e.fail(id, false);
    e.end_flight(id);
    backoff
  }

  fn refresh_due_after(e: &mut TestEngine, key: &str, ms: u64) {
    e.advance_clock(ms - 1);
    assert!(
      matches!(e.decide(key, true), Decision::Stale { refresh: false, .. }),
      "backing off 1 ms before {ms}"
    );
    assert!(!e.refresh_due(key));
    e.advance_clock(1);
    assert!(e.refresh_due(key), "due after {ms} ms");
  }

  #[test]
  fn failed_refreshes_back_off_exponentially_and_a_success_resets() {
    let raw = RawCacheOptions {
      ttl: Some(1_000.0),
      hard_ttl: Some(100_000.0),
      jitter: Some(0.0),
      refresh_backoff: Some(5_000.0),
      ..Default::default()
    };
    let mut e: TestEngine = Engine::new(CacheConfig::from_raw(&raw).unwrap());
    // Jitter draw pinned at 1: the delays are exactly 250 ms doubling,
    // capped at refreshBackoff (5 s here).
    e.set_random(Some(1.0), Some(1.0));
    load(&mut e, "k", "v1", 10);
    e.advance_clock(1_000);
    for (attempt, ms) in [
      (1, 250),
      (2, 500),
      (3, 1_000),
      (4, 2_000),
      (5, 4_000),
      (6, 5_000),
    ] {
      assert_eq!(fail_refresh(&mut e, "k"), Some(Backoff { attempt, ms }));
      refresh_due_after(&mut e, "k", ms);
    }
    // A success resets the count: the next failure waits 250 ms again.
    let id = e.begin_flight("k", "r", Some(Refresh::Stale), e.config().entry);
    assert!(e.fill(id, "v2".into(), false, 10).is_some());
    e.end_flight(id);
    e.advance_clock(1_000);
    assert_eq!(
      fail_refresh(&mut e, "k"),
      Some(Backoff {
        attempt: 1,
        ms: 250
      })
    );
    // The jitter takes up to 15 % off: at u = 0 the second delay is 425 ms.
    e.set_random(Some(0.0), Some(1.0));
    refresh_due_after(&mut e, "k", 250);
    assert_eq!(
      fail_refresh(&mut e, "k"),
      Some(Backoff {
        attempt: 2,
        ms: 425
      })
    );
  }

  #[test]
  fn another_instances_back_off_is_kept_and_continued() {
    let mut e = engine();
    e.set_random(Some(1.0), Some(1.0));
    load(&mut e, "k", "v1", 10);
    e.advance_clock(1_000);
    e.back_off(
      "k",
      Backoff {
        attempt: 3,
        ms: 800,
      },
    );
    refresh_due_after(&mut e, "k", 800);
    // The next failure here is the fourth in a row.
    assert_eq!(
      fail_refresh(&mut e, "k"),
      Some(Backoff {
        attempt: 4,
        ms: 2_000
      })
    );
  }

  #[test]
  fn a_loader_may_set_its_entrys_ttl_or_store_nothing() {
    let nothing = |value: &str| Loaded {
      keep: Keep::Nothing,
      ..Loaded::plain(value.to_string(), false, 5)
    };
    let mut e = engine();
    let policy = e
      .config()
      .entry
      .with(&crate::core::options::RawCallOptions {
        ttl: Some(300.0),
        hard_ttl: Some(600.0),
        ..Default::default()
      });
    let id = e.begin_flight("k", "p", None, e.config().entry);
    let meta = e
      .fill_as(
        id,
        Loaded {
          keep: Keep::Store(Some(policy.unwrap())),
          ..Loaded::plain("v".into(), false, 5)
        },
      )
      .unwrap();
    e.end_flight(id);
    let now = e.now();
    assert_eq!((meta.fresh_until - now, meta.hard_until - now), (300, 600));
    e.advance_clock(300);
    assert!(matches!(e.decide("k", true), Decision::Stale { .. }));
    // Not stored: nothing in memory, nothing to write; what was there stays.
    let id = e.begin_flight("k", "p", Some(Refresh::Stale), e.config().entry);
    assert_eq!(e.fill_as(id, nothing("v2")), None);
    e.end_flight(id);
    assert_eq!(e.get("k", true).map(String::as_str), Some("v"));
    assert_eq!(e.gauges().in_flight, 0);
    let id = e.begin_flight("new", "p", None, e.config().entry);
    assert_eq!(e.fill_as(id, nothing("v")), None);
    e.end_flight(id);
    assert!(matches!(e.decide("new", true), Decision::Lead));
  }

  #[test]
  fn xfetch_draws_decide_early_refresh() {
    let mut e = engine();
    // The draw is the writer's: pinned before the write, it decides.
    e.set_random(Some(0.5), Some(0.0));
    load(&mut e, "k", "v", 100);
    assert!(matches!(
      e.decide("k", true),
      Decision::Hit {
        refresh: Some(Refresh::Early),
        ..
      }
    ));
    // A later pin does not move the moment of the entry already written.
    e.set_random(Some(0.5), Some(1.0));
    assert!(matches!(
      e.decide("k", true),
      Decision::Hit {
        refresh: Some(Refresh::Early),
        ..
      }
    ));
    load_over(&mut e, "k", 100);
    assert!(matches!(
      e.decide("k", true),
      Decision::Hit { refresh: None, .. }
    ));
    e.advance_clock(999);
    assert!(
      matches!(e.decide("k", true), Decision::Hit { refresh: None, .. }),
      "u = 1: never early"
    );
    // An entry written with beta 0 never refreshes early, whatever the draw.
    e.set_random(Some(0.5), Some(0.0));
    let mut policy = e.config().entry;
    policy.beta = 0.0;
    let id = e.begin_flight("k", "p", None, policy);
    assert!(e.fill(id, "v".into(), false, 100).is_some());
    e.end_flight(id);
    assert!(matches!(
      e.decide("k", true),
      Decision::Hit { refresh: None, .. }
    ));
  }

  #[test]
  fn negative_results_are_cached_for_negative_ttl_only() {
    let mut e = engine();
    let id = e.begin_flight("gone", "p", None, e.config().entry);
    assert!(e.fill(id, "null".into(), true, 5).is_some());
    e.end_flight(id);
    assert!(matches!(e.decide("gone", true), Decision::Negative { .. }));
    assert!(e.get("gone", true).is_none());
    e.advance_clock(5_000);
    assert!(matches!(e.decide("gone", true), Decision::Lead));
    let mut policy = e.config().entry;
    policy.negative_ttl = 0;
    let id = e.begin_flight("gone", "p", None, policy);
    assert!(e.fill(id, "null".into(), true, 5).is_none());
  }

  #[test]
  fn set_and_delete_supersede_a_flight() {
    let mut e = engine();
    let id = e.begin_flight("k", "old", None, e.config().entry);
    e.set("k", "direct".into(), e.config().entry, Tags::NONE, 0);
    assert!(e.fill(id, "from-old-data".into(), false, 1).is_none());
    assert!(
      e.end_flight(id).unwrap().superseded,
      "the flight was superseded"
    );
    assert_eq!(e.get("k", true).map(String::as_str), Some("direct"));
    let id = e.begin_flight("k", "p", Some(Refresh::Stale), e.config().entry);
    assert!(e.delete("k"));
    assert!(e.fill(id, "x".into(), false, 1).is_none());
    assert!(matches!(e.decide("k", true), Decision::Lead));
    assert!(!e.delete("k"));
  }

  #[test]
  fn a_namespace_clear_removes_its_keys_and_supersedes_their_flights_only() {
    let mut e = engine();
    for key in ["users:1", "users:eu:2", "users\\:x", "usersX", "feed:1"] {
      load(&mut e, key, "v", 1);
    }
    let inside = e.begin_flight("users:3", "p", None, e.config().entry);
    let outside = e.begin_flight("feed:3", "p", None, e.config().entry);
    e.clear_prefix("users:");
    for gone in ["users:1", "users:eu:2"] {
      assert!(e.get(gone, true).is_none(), "{gone} was cleared");
    }
    for kept in ["users\\:x", "usersX", "feed:1"] {
      assert_eq!(
        e.get(kept, true).map(String::as_str),
        Some("v"),
        "{kept} stays"
      );
    }
    assert!(
      e.fill(inside, "x".into(), false, 1).is_none(),
      "a load of the namespace in flight is not stored"
    );
    assert!(e.fill(outside, "y".into(), false, 1).is_some());
    // Another instance's namespace clear, from the events channel.
    e.invalidate(vec![crate::engine::fleet::Invalidation::Changed(
      crate::core::fleet::Change::PrefixCleared("feed:".into()),
    )]);
    assert!(e.get("feed:1", true).is_none() && e.get("feed:3", true).is_none());
    assert!(e.get("usersX", true).is_some());
  }

  #[test]
  fn stale_false_never_gets_a_stale_value() {
    let mut e = engine();
    load(&mut e, "k", "v", 10);
    e.advance_clock(2_000);
    assert!(matches!(e.decide("k", false), Decision::Lead));
    assert!(e.get("k", false).is_none());
    assert_eq!(e.get("k", true).map(String::as_str), Some("v"));
  }

  #[test]
  fn xfetch_draws_once_per_entry_not_once_per_read() {
    let raw = RawCacheOptions {
      ttl: Some(1_000.0),
      jitter: Some(0.0),
      ..Default::default()
    };
    let mut e: TestEngine = Engine::new(CacheConfig::from_raw(&raw).unwrap());
    let id = e.begin_flight("hot", "p", None, e.config().entry);
    e.fill(id, "v".into(), false, 100).unwrap();
    e.end_flight(id);
    // A read 1 s before expiry of a 100 ms key refreshes early with
    // probability exp(-10) per draw: drawn per read, a million reads would
    // refresh it almost surely; drawn once for the entry, almost never.
    let early = (0..1_000_000)
      .filter(|_| {
        matches!(
          e.decide("hot", true),
          Decision::Hit {
            refresh: Some(Refresh::Early),
            ..
          }
        )
      })
      .count();
    assert_eq!(early, 0);
  }

  #[test]
  fn lru_bound_and_counters() {
    let raw = RawCacheOptions {
      max_entries: Some(3.0),
      ..Default::default()
    };
    let mut e: TestEngine = Engine::new(CacheConfig::from_raw(&raw).unwrap());
    for i in 0..10 {
      e.set(
        &format!("k{i}"),
        "v".into(),
        e.config().entry,
        Tags::NONE,
        0,
      );
    }
    assert_eq!(e.gauges().size, 3);
    assert_eq!(e.metrics().evictions, 7);
  }
}
