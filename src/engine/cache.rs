//! The cache: the local engine (memory, flights, counters) and, with Redis,
//! the fleet, and every step of a flight (ARCHITECTURE.md, "A flight, step
//! by step"). A flight is registered by [`Cache::begin`], which says what it
//! does first ([`FirstStep`]); from then on everything that happens to it is
//! an [`Event`] handed to [`Cache::step`], which says what the binding
//! carries out next ([`Effect`]): ask the store (a future whose answer comes
//! back as an event), make the JS leader and run our loader, parse another
//! instance's value, write ours, answer or reject the callers, start the
//! refresh a stale answer calls for, let go of a lock. The lock and the wait
//! for its holder are the machine of `core::fleet::acquire`, which the
//! ask's future carries out (`Fleet::acquire_steps`). The first reads of a
//! tick's flights go out in one pipeline ([`Cache::read_many`]).
//!
//! Futures returned here own what they need (an `Arc<Fleet>`, the key) and
//! run on tokio; the binding runs them and reports back by flight id.

use super::clock::Clock;
use super::fleet::{Acquired, Fleet, FleetConfig, Invalidations, Terms, Undelivered};
use super::flights::{Flight, Origin};
use super::local::{Backoff, Decision, Engine, Loaded, Refresh, Served};
use super::metrics::{Gauges, Metrics};
use super::shared::{Problem, RedisStore, RedisTimeouts, SharedStore};
use super::slots::LoadSlots;
use super::together::Ask;
use super::Pending;
use crate::core::body::Body;
use crate::core::envelope::{Envelope, Meta};
use crate::core::error::{Code, Error, Kind};
use crate::core::etag::Etag;
use crate::core::options::{
  CacheConfig, EntryPolicy, RedisEndpoint, Tiers, DEFAULT_CIRCUIT_BREAKER_DURATION,
  DEFAULT_LOCK_TTL, DEFAULT_RECOVERY_MAX_AGE, DEFAULT_RECOVERY_MAX_ENTRIES,
};
use crate::core::policy;
use crate::core::tags::Tags;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What a new flight does first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstStep {
  /// Run the loader now (no fleet).
  Load,
  /// Ask the shared store first ([`Cache::read_many`]). `lead_now`: make
  /// the JS leader at once (a background refresh: `waitUntil` gets its
  /// promise now); else only once the fleet asks for a lock or a load
  /// (most first reads answer the flight, and a leader made and ended per
  /// such key costs a tenth of a cold read's main-thread time).
  ReadShared { lead_now: bool },
}

/// What happened to a flight, for [`Cache::step`].
#[derive(Debug)]
pub enum Event<V> {
  /// Its first read (one pipeline for the tick's flights) answered, with
  /// a value that answers it, or `None`: ask who loads next.
  Read {
    key: String,
    answer: Option<Acquired>,
  },
  /// The fleet answered who loads (an [`Effect::Ask`]'s future).
  Claimed { key: String, acquired: Acquired },
  /// The fleet could not be asked (released, or its future did not
  /// start), or another instance's value could not be taken (JS refused
  /// its JSON): load without it.
  Unavailable,
  /// Another instance's value ([`Effect::Adopt`]), as JS parsed it;
  /// `bytes`: its JSON text's (for `l1MaxBytes`).
  Parsed {
    value: V,
    meta: Meta,
    tags: Tags,
    etag: Etag,
    bytes: usize,
  },
  /// Our loader's value.
  Loaded(Loaded<V>),
  /// The write an [`Effect::Write`] ran ended.
  Written(Written),
  /// The load failed or timed out (`timed_out`), or was given up (the
  /// leader gone, the cache closed); `loader_ran`: its loader was called.
  Failed { timed_out: bool, loader_ran: bool },
}

/// What the binding carries out for a flight ([`Cache::step`]).
pub enum Effect<F> {
  /// Run this ask and hand its answer back to `step` as
  /// [`Event::Claimed`]: with the other asks of the turn
  /// ([`super::together`]). `lead`: make the flight's JS leader now (it
  /// waits for the fleet's answer, bounded by its deadline).
  Ask { ask: Ask, lead: bool },
  /// Our loader runs now: `locked`, holding the fleet lock (else there is
  /// no store to ask, or it failed). `lead`: make the JS leader, which runs
  /// it at once; else tell the leader there is.
  Load { locked: bool, lead: bool },
  /// Another instance's value answers the flight: parse its JSON and hand
  /// it to `step` as [`Event::Parsed`] (or, if JS refuses it,
  /// [`Event::Unavailable`]). `from`: how the flight came by it.
  Adopt { envelope: Envelope, from: Origin },
  /// Write our value to the shared store: run the future and hand its
  /// answer to `step` as [`Event::Written`]. The callers wait for it.
  Write(Pending<Written>),
  /// The flight ended with its value: answer its callers, if it is still
  /// there (its [`Flight::answered`] says how). `adopted`: it was another
  /// instance's value. `resume`: tell its JS leader it was answered (the
  /// fleet answered it, not the leader's loader).
  Answer {
    flight: Option<Flight<F>>,
    adopted: Option<Adopted>,
    resume: bool,
  },
  /// The flight ended without a value: reject its callers, if it is still
  /// there, with `error` (`None`: the loader's, which the binding holds),
  /// and run `release` to its end (its lock let go). `resume`: tell its JS
  /// leader it is done (the fleet ended it, not the leader).
  Reject {
    flight: Option<Flight<F>>,
    error: Option<Error>,
    release: Option<Pending<()>>,
    resume: bool,
  },
  /// Run this future to its end and forget it (a lock let go).
  Spawn(Pending<()>),
  /// Nothing: the flight ended meanwhile.
  Done,
}

/// How another instance's value answered a flight ([`Effect::Answer`]).
#[derive(Debug, Clone, Copy)]
pub struct Adopted {
  /// What its callers got.
  pub served: Served,
  /// The value's deadlines (its callers' `status.ttl`), and the time now.
  pub meta: Meta,
  pub now: u64,
  /// The value was stale: start a background refresh of the key.
  pub refresh: bool,
}

/// Whether the JS leader of a flight the fleet ended must be told: it was
/// made (or the flight is gone, and whoever leads it is told all the same).
fn led<F>(flight: &Option<Flight<F>>) -> bool {
  flight.as_ref().is_none_or(|f| f.led)
}

impl<F> std::fmt::Debug for Effect<F> {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str(match self {
      Effect::Ask { .. } => "Ask",
      Effect::Load { .. } => "Load",
      Effect::Adopt { .. } => "Adopt",
      Effect::Write(_) => "Write",
      Effect::Answer { .. } => "Answer",
      Effect::Reject { .. } => "Reject",
      Effect::Spawn(_) => "Spawn",
      Effect::Done => "Done",
    })
  }
}

/// How a flight's write to the shared store went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Written {
  Stored,
  /// The store kept a newer value: memory forgets ours.
  Superseded,
  /// Not written (Redis skipped or failing, or nothing to write).
  Skipped,
}

/// An answer known now, or one a future gives.
pub enum Step<T, U> {
  Done(T),
  Later(Pending<U>),
}

pub struct Cache<V, F, S: SharedStore = RedisStore> {
  local: Engine<V, F>,
  fleet: Option<Arc<Fleet<S>>>,
  /// The fleet's queue of other instances' changes, read on every call.
  invalidations: Option<Arc<Invalidations>>,
  /// The counters as they were when `release` stopped the fleet: `stats()`
  /// after `close()` still has the fleet's.
  released: Option<Metrics>,
  /// The fleet's last failure's cause, as it was when it stopped.
  last_problem: Option<Problem>,
}

impl<V, F> Cache<V, F> {
  /// The cache `config` names, with the shared store it names (opened on
  /// the tokio runtime the caller is inside: its tasks are spawned). The
  /// error is what the configuration got wrong (an unusable Redis URL).
  pub fn open(config: CacheConfig) -> Result<Self, Error> {
    let Some(redis) = &config.redis else {
      return Ok(Cache::new(config, Clock::default(), None));
    };
    let timeout = Duration::from_millis(redis.timeout);
    let timeouts = RedisTimeouts {
      connect: timeout,
      command: timeout,
      retries: 1,
    };
    let store = match &redis.endpoint {
      RedisEndpoint::Node(url) => RedisStore::open(url, &config.prefix, timeouts),
      RedisEndpoint::Cluster(seeds) => RedisStore::open_cluster(seeds, &config.prefix, timeouts),
    };
    let store = store.map_err(|e| {
      let message = format!("option `redis` is not a usable Redis URL: {e}");
      Error::new(Code::InvalidOption, Kind::Type, message)
    })?;
    let store = store.with_tracking(redis.tracking);
    Ok(Cache::open_on(config, store))
  }
}

impl<V, F, S: SharedStore> Cache<V, F, S> {
  /// The cache `config` names, over `store` (the store is chosen here,
  /// once: Redis for [`Cache::open`], the memory store in tests). The
  /// fleet's bounds are `config.redis`'s, or their defaults without one.
  pub fn open_on(config: CacheConfig, store: S) -> Self {
    let clock = Clock::default();
    let redis = config.redis.as_ref();
    let fleet_config = FleetConfig {
      lock_ttl: redis.map_or(DEFAULT_LOCK_TTL, |r| r.lock_ttl),
      hard_timeout: config.hard_timeout,
      breaker_cooldown: redis.map_or(DEFAULT_CIRCUIT_BREAKER_DURATION, |r| r.breaker_cooldown),
      clock: clock.clone(),
      recovery_max_entries: redis.map_or(DEFAULT_RECOVERY_MAX_ENTRIES, |r| r.recovery_max_entries)
        as usize,
      recovery_max_age: redis.map_or(DEFAULT_RECOVERY_MAX_AGE, |r| r.recovery_max_age),
      load_slots: redis.and_then(|r| r.fleet_max_concurrent_loads),
      serializer: config.serializer.clone(),
    };
    let fleet = Fleet::start(store, fleet_config);
    Cache::new(config, clock, Some(fleet))
  }

  /// A cache on `clock`; `fleet`, when given, must run on the same clock.
  pub fn new(config: CacheConfig, clock: Clock, fleet: Option<Arc<Fleet<S>>>) -> Self {
    let mut local = Engine::with_clock(config, clock);
    if let Some(fleet) = &fleet {
      local.join_fleet(fleet.tag_stamps(), fleet.reachable());
    }
    Cache {
      local,
      invalidations: fleet.as_ref().map(|f| f.invalidations()),
      fleet,
      released: None,
      last_problem: None,
    }
  }

  /// The local engine, for what involves no flight sequencing (reads of
  /// the configuration and the clock, `get`, test hooks).
  pub fn local(&self) -> &Engine<V, F> {
    &self.local
  }

  pub fn local_mut(&mut self) -> &mut Engine<V, F> {
    &mut self.local
  }

  pub fn has_fleet(&self) -> bool {
    self.fleet.is_some()
  }

  pub fn config(&self) -> &CacheConfig {
    self.local.config()
  }

  pub fn is_closed(&self) -> bool {
    self.local.is_closed()
  }

  pub fn close(&mut self) {
    self.local.close();
  }

  /// Takes in what other instances changed (one atomic load when nothing).
  #[inline]
  fn apply_invalidations(&mut self) {
    if let Some(invalidations) = &self.invalidations {
      let changes = invalidations.take();
      if !changes.is_empty() {
        self.local.invalidate(changes);
      }
    }
  }

  /// Decides one `getOrLoad` call (see [`Engine::decide`]).
  #[inline]
  pub fn decide(&mut self, key: &str, allow_stale: bool) -> Decision<'_, V, F> {
    self.apply_invalidations();
    self.local.decide(key, allow_stale)
  }

  /// Decides a call that does not read memory (`forceFresh`, `l1: false`;
  /// see [`Engine::decide_past_l1`]).
  pub fn decide_past_l1(&mut self, key: &str, tiers: Tiers) -> Decision<'_, V, F> {
    self.apply_invalidations();
    self.local.decide_past_l1(key, tiers.force_fresh)
  }

  /// A cached value, fresh or (when allowed) stale (see [`Engine::get`]).
  pub fn get(&mut self, key: &str, allow_stale: bool) -> Option<&V> {
    self.apply_invalidations();
    self.local.get(key, allow_stale)
  }

  /// Registers a load of `key` with the binding's handle; returns its id
  /// and what it does first.
  /// `refuse_stale`: its leader refuses stale values, so a value another
  /// instance wrote must be fresh too. `tags`: what its value is written
  /// with (a background refresh given none keeps its entry's). `tiers`:
  /// what its leading call asked of memory and the fleet.
  #[allow(clippy::too_many_arguments)]
  pub fn begin(
    &mut self,
    key: &str,
    handle: F,
    refresh: Option<Refresh>,
    policy: EntryPolicy,
    refuse_stale: bool,
    tags: Tags,
    tiers: Tiers,
  ) -> (u64, FirstStep) {
    let id = self.local.begin_flight(key, handle, refresh, policy);
    if tiers != Tiers::default() {
      self.local.route_flight(id, tiers);
    }
    if refuse_stale && refresh.is_none() {
      if let Some(flight) = self.local.flight_mut(id) {
        flight.strict = true;
      }
    }
    if !tags.is_empty() || refresh.is_some() {
      self.local.tag_flight(id, tags);
    }
    let first = match self.fleet {
      Some(_) if !tiers.skip_redis => FirstStep::ReadShared {
        lead_now: refresh.is_some(),
      },
      _ => FirstStep::Load,
    };
    if first == (FirstStep::ReadShared { lead_now: false }) {
      if let Some(flight) = self.local.flight_mut(id) {
        flight.led = false;
      }
    }
    (id, first)
  }

  /// The flights whose JS leader is not made yet: at close the binding
  /// rejects their callers (no leader's `abort` reaches them).
  pub fn unled_flights(&self) -> Vec<u64> {
    self.local.unled_flights()
  }

  pub fn flight(&self, id: u64) -> Option<&Flight<F>> {
    self.local.flight(id)
  }

  pub fn flight_mut(&mut self, id: u64) -> Option<&mut Flight<F>> {
    self.local.flight_mut(id)
  }

  /// What a shared value must meet to answer flight `id`.
  fn terms(&self, id: u64) -> Terms {
    let (accept_stale, newer_than) = self.local.flight_terms(id).unwrap_or((false, None));
    Terms {
      now: self.local.now(),
      accept_stale,
      newer_than,
      refresh: self.unwaited_refresh(id),
    }
  }

  /// Whether flight `id`'s leading call keeps it off the shared store
  /// (`redis: false`).
  fn skips_redis(&self, id: u64) -> bool {
    self.local.flight(id).is_some_and(|f| f.tiers.skip_redis)
  }

  /// Whether flight `id` is a background refresh nobody waits on (no caller
  /// joined it): only such a flight honours the fleet's back-off.
  fn unwaited_refresh(&self, id: u64) -> bool {
    self
      .local
      .flight(id)
      .is_some_and(|f| f.background && !f.strict && f.joined == 0)
  }

  /// The first read of the flights `ids`, in one pipeline. Flights that
  /// ended are left out: the future answers, per flight still there, its
  /// id, its key and its answer (`None`: go on with [`Cache::acquire`]).
  #[allow(clippy::type_complexity)]
  pub fn read_many(
    &self,
    ids: &[u64],
  ) -> Option<impl Future<Output = Vec<(u64, String, Option<Acquired>)>> + Send + 'static> {
    let fleet = self.fleet.clone()?;
    let (mut found, mut requests) = (Vec::with_capacity(ids.len()), Vec::with_capacity(ids.len()));
    for &id in ids {
      if let Some(flight) = self.local.flight(id) {
        found.push(id);
        requests.push((flight.key.clone(), self.terms(id)));
      }
    }
    Some(async move {
      let answers = fleet.read_many(&requests).await;
      found
        .into_iter()
        .zip(requests)
        .zip(answers)
        .map(|((id, (key, _)), answer)| (id, key, answer))
        .collect()
    })
  }

  /// Flight `id`'s next step: what to carry out after `event`.
  pub fn step(&mut self, id: u64, event: Event<V>) -> Effect<F> {
    match event {
      Event::Read { answer: None, .. } => self.ask(id, false),
      Event::Read {
        key,
        answer: Some(acquired),
      } => self.claim(id, key, acquired, Origin::Store),
      Event::Claimed { key, acquired } => self.claim(id, key, acquired, Origin::Holder),
      Event::Unavailable => self.load(id, false),
      Event::Parsed {
        value,
        meta,
        tags,
        etag,
        bytes,
      } => self.adopt(id, value, meta, (tags, etag), bytes),
      Event::Loaded(loaded) => self.fill(id, loaded),
      Event::Written(written) => self.written(id, written),
      Event::Failed {
        timed_out,
        loader_ran,
      } => self.fail(id, timed_out, loader_ran),
    }
  }

  /// Flight `id` runs our loader (`locked`: holding the fleet lock); its
  /// JS leader is made now if it was not.
  fn load(&mut self, id: u64, locked: bool) -> Effect<F> {
    let Some(flight) = self.local.flight_mut(id) else {
      return Effect::Done;
    };
    if locked {
      flight.answered.lock_won = Some(true);
    }
    let lead = !std::mem::replace(&mut flight.led, true);
    Effect::Load { locked, lead }
  }

  /// Who loads flight `id`: the fleet lock, a wait for the winner, or a
  /// value already there (`read_first`: read before taking the lock).
  fn ask(&mut self, id: u64, read_first: bool) -> Effect<F> {
    let (Some(fleet), Some(flight)) = (self.fleet.clone(), self.local.flight(id)) else {
      // Ended meanwhile (nothing to do), or released (load without Redis).
      return self.load(id, false);
    };
    let key = flight.key.clone();
    let terms = self.terms(id);
    let lead = self
      .local
      .flight_mut(id)
      .is_some_and(|flight| !std::mem::replace(&mut flight.led, true));
    // Registered now, on this thread: a give-up that follows finds it.
    let given_up = fleet.begin_steps(id);
    let parked = Arc::new(AtomicBool::new(false));
    let steps_parked = Arc::clone(&parked);
    let ask = Ask {
      future: Box::pin(async move {
        let acquired = fleet
          .acquire_steps(&key, id, terms, read_first, given_up, &steps_parked)
          .await;
        (key, acquired)
      }),
      parked,
    };
    Effect::Ask { ask, lead }
  }

  /// What flight `id` does with the fleet's answer.
  fn claim(&mut self, id: u64, key: String, acquired: Acquired, from: Origin) -> Effect<F> {
    if let Acquired::BackOff { failures, ms } = acquired {
      if self.unwaited_refresh(id) {
        self.local.back_off(
          &key,
          Backoff {
            attempt: failures,
            ms,
          },
        );
        // Nobody waits on it but soft waits (which take the stale value
        // on a rejection) and `waitUntil`: it ran no loader.
        let error = Error::new(
          Code::BackedOff,
          Kind::Plain,
          "herdcache: not refreshed, the key backs off after a failed refresh in the fleet",
        );
        let flight = self.local.end_unloaded(id);
        return Effect::Reject {
          resume: led(&flight),
          flight,
          error: Some(error),
          release: None,
        };
      }
    }
    if self.local.flight(id).is_none() {
      return match (acquired, self.fleet.clone()) {
        (Acquired::Load { token: Some(token) }, Some(fleet)) => {
          let lock = Some(token);
          Effect::Spawn(Box::pin(async move { fleet.abandon(&key, id, lock).await }))
        }
        _ => Effect::Done,
      };
    }
    match acquired {
      Acquired::Load { token } => {
        let locked = token.is_some();
        if let Some(flight) = self.local.flight_mut(id) {
          flight.lock = token;
        }
        self.load(id, locked)
      }
      // A stale value came, but a caller refusing stale values joined
      // meanwhile (or, to a back-off, any caller joined): ask again.
      Acquired::Stale(_)
        if self
          .local
          .flight_terms(id)
          .is_some_and(|(accept, _)| !accept) =>
      {
        self.ask(id, true)
      }
      Acquired::BackOff { .. } => self.ask(id, true),
      Acquired::Value(envelope) | Acquired::Stale(envelope) => {
        if let Some(flight) = self.local.flight_mut(id) {
          flight.answered.from = Some(from);
          if from == Origin::Holder {
            flight.answered.lock_won = Some(false);
          }
        }
        Effect::Adopt { envelope, from }
      }
    }
  }

  /// Flight `id` was answered by another instance's value (`value` parsed
  /// from `meta`'s envelope): stored with its own deadlines, the flight
  /// ended; a stale value calls for a background refresh.
  fn adopt(
    &mut self,
    id: u64,
    value: V,
    meta: Meta,
    labels: (Tags, Etag),
    bytes: usize,
  ) -> Effect<F> {
    let served = self.local.adopt(id, value, meta, labels, bytes);
    let flight = self.local.end_flight(id);
    // A refresh's own stale answer calls for no other refresh. A flight
    // kept out of memory (`l1: false`) has no entry there to judge: the
    // fleet's back-off is its refresh's to honour.
    let refresh = served == Served::Stale
      && flight.as_ref().is_some_and(|f| {
        let due = match f.tiers.skip_l1 {
          true => self.local.flight_for_key(&f.key).is_none(),
          false => self.local.refresh_due(&f.key),
        };
        !f.background && !self.local.is_closed() && due
      });
    let adopted = Adopted {
      served,
      meta,
      now: self.local.now(),
      refresh,
    };
    Effect::Answer {
      resume: led(&flight),
      flight,
      adopted: Some(adopted),
    }
  }

  /// Our loader's result. Without a fleet the flight ends here; with one,
  /// the value is written to the shared store (conditional on the flight's
  /// stamp, announced, the lock released) and the flight ends once
  /// [`Event::Written`] says so.
  fn fill(&mut self, id: u64, mut loaded: Loaded<V>) -> Effect<F> {
    let (body, etag) = (loaded.body.take(), loaded.etag.clone());
    // What the kept copy was, to find it in the store: before the fill
    // replaces it here.
    let kept = loaded.kept.map(|stamp| self.local.copy_stamped(id, stamp));
    let stored = self.local.fill_as(id, loaded);
    let fleet = self.fleet.clone().filter(|_| !self.skips_redis(id));
    let Some(fleet) = fleet else {
      if self.fleet.is_some() {
        self.local.count_loader_run();
      }
      return Effect::Answer {
        flight: self.local.end_flight(id),
        adopted: None,
        resume: false,
      };
    };
    self.local.count_loader_run();
    let (key, lock, tags) = match self.local.flight_mut(id) {
      Some(flight) => (flight.key.clone(), flight.lock.take(), flight.tags.clone()),
      None => return Effect::Done,
    };
    let compress = self.local.config().compress;
    Effect::Write(Box::pin(async move {
      let settled = match (stored, body, kept) {
        (Some(meta), _, Some(Some(kept))) => fleet.keep_stored(&key, id, kept, meta, lock).await,
        // Its copy went from memory meanwhile: which value it was is not
        // known, and the store's is left as it is.
        (Some(_), _, Some(None)) => {
          fleet.abandon(&key, id, lock).await;
          Some(false)
        }
        (Some(meta), Some(body), None) => {
          let body = fleet.stored_body(body, compress).await;
          let envelope = Envelope {
            meta,
            body,
            tags,
            etag,
          };
          fleet.settle(&key, id, envelope, lock).await
        }
        _ => {
          fleet.abandon(&key, id, lock).await;
          return Written::Skipped;
        }
      };
      match settled {
        Some(true) => Written::Stored,
        Some(false) => Written::Superseded,
        None => Written::Skipped,
      }
    }))
  }

  /// Flight `id`'s write ended: it ends too. A value the store superseded
  /// leaves memory, unless something newer replaced it there meanwhile.
  fn written(&mut self, id: u64, written: Written) -> Effect<F> {
    let flight = self.local.end_flight(id);
    if let Some(flight) = &flight {
      if written == Written::Superseded && !flight.superseded {
        self.local.forget_if_stamp(&flight.key, flight.started_at);
      }
    }
    Effect::Answer {
      flight,
      adopted: None,
      resume: false,
    }
  }

  /// A failed load (`loader_ran`: it was called, and settled or timed
  /// out). The flight ends; with a fleet, its lock is released, and a
  /// failed background refresh leaves its back-off for the whole fleet.
  fn fail(&mut self, id: u64, timed_out: bool, loader_ran: bool) -> Effect<F> {
    if loader_ran {
      self.local.count_loader_run();
    }
    if let Some(fleet) = &self.fleet {
      // Its fleet steps stop now: no lock is taken for it after this.
      fleet.give_up(id);
    }
    // A flight given up before its loader ran (closed, the leader gone)
    // says nothing about the backend: the fleet does not back off for it.
    let backoff = self.local.fail(id, timed_out).filter(|_| loader_ran);
    let mut flight = self.local.end_flight(id);
    let release = match (&self.fleet, flight.as_mut()) {
      (Some(fleet), Some(flight)) if !flight.tiers.skip_redis => {
        let (fleet, key, lock) = (Arc::clone(fleet), flight.key.clone(), flight.lock.take());
        let release: Pending<()> = Box::pin(async move {
          match backoff {
            Some(b) => fleet.fail_refresh(&key, id, lock, b.attempt, b.ms).await,
            None => fleet.abandon(&key, id, lock).await,
          }
        });
        Some(release)
      }
      _ => None,
    };
    Effect::Reject {
      flight,
      error: None,
      release,
      resume: false,
    }
  }

  /// `set`: stored here, and with a fleet written there (the future: whether
  /// it was written).
  pub fn set(
    &mut self,
    key: &str,
    value: V,
    policy: EntryPolicy,
    body: Body,
    tags: Tags,
  ) -> Option<impl Future<Output = bool> + Send + 'static> {
    self.apply_invalidations();
    let meta = self.local.set(key, value, policy, tags.clone(), body.len());
    let fleet = self.fleet.clone()?;
    let (key, compress) = (key.to_string(), self.local.config().compress);
    Some(async move {
      let body = fleet.stored_body(body, compress).await;
      fleet
        .write(
          &key,
          Envelope {
            meta,
            body,
            tags,
            etag: Default::default(),
          },
        )
        .await
    })
  }

  /// `deleteByTag`: every entry carrying one of `tags` is invalid from now
  /// on, here and (with a fleet, the future) on every instance; delivered
  /// later if the store cannot be reached.
  pub fn delete_by_tag(
    &mut self,
    tags: &[String],
  ) -> Option<impl Future<Output = ()> + Send + 'static> {
    self.apply_invalidations();
    let at = self.local.delete_by_tag(tags);
    let fleet = self.fleet.clone()?;
    let (tags, px) = (tags.to_vec(), self.local.longest_hard_ttl());
    Some(async move {
      let sent = tags.iter().map(|tag| fleet.invalidate_tag(tag, at, px));
      futures_util::future::join_all(sent).await;
    })
  }

  /// `delete`: whether a live entry was removed here (or, with a fleet,
  /// there: the future).
  pub fn delete(&mut self, key: &str) -> Step<bool, bool> {
    self.apply_invalidations();
    let removed = self.local.delete(key);
    let Some(fleet) = self.fleet.clone() else {
      return Step::Done(removed);
    };
    let key = key.to_string();
    Step::Later(Box::pin(async move {
      fleet.delete(&key).await.unwrap_or(false) || removed
    }))
  }

  /// `expire`: whether a fresh entry was made stale here (or, with a
  /// fleet, there: the future). Stale from now, kept until its hard TTL.
  pub fn expire(&mut self, key: &str) -> Step<bool, bool> {
    self.apply_invalidations();
    let at = self.local.now();
    let expired = self.local.expire(key, at);
    let Some(fleet) = self.fleet.clone() else {
      return Step::Done(expired);
    };
    let key = key.to_string();
    Step::Later(Box::pin(async move {
      fleet.expire(&key, at).await.unwrap_or(false) || expired
    }))
  }

  pub fn clear(&mut self) -> Option<impl Future<Output = ()> + Send + 'static> {
    self.local.clear();
    let fleet = self.fleet.clone()?;
    Some(async move {
      fleet.clear().await;
    })
  }

  /// A namespace's `clear`: the keys starting with `prefix` (an encoded
  /// sub-prefix such as `users:`) leave memory here, their flights are
  /// superseded, and with a fleet they are removed there (the future).
  pub fn clear_prefix(
    &mut self,
    prefix: &str,
  ) -> Option<impl Future<Output = ()> + Send + 'static> {
    self.apply_invalidations();
    self.local.clear_prefix(prefix);
    let fleet = self.fleet.clone()?;
    let prefix = prefix.to_string();
    Some(async move {
      fleet.clear_prefix(&prefix).await;
    })
  }

  /// With `fleetMaxConcurrentLoads` (and Redis): this instance's side of
  /// the fleet's load slots, which the load bulkhead asks and gives back.
  pub fn load_slots(&self) -> Option<Arc<LoadSlots>> {
    self.fleet.as_ref()?.load_slots().cloned()
  }

  /// `get` past memory: the live envelope in the shared store, if any
  /// (absent, negative, or stale when `allow_stale` is false: `None`).
  pub fn peek(
    &self,
    key: &str,
    allow_stale: bool,
  ) -> Option<impl Future<Output = Option<Envelope>> + Send + 'static> {
    let fleet = self.fleet.clone()?;
    let now = self.local.now();
    let key = key.to_string();
    Some(async move {
      fleet
        .peek(&key, now)
        .await
        .filter(|e| !e.meta.negative && policy::answers(&e.meta, now, allow_stale, None).is_some())
    })
  }

  /// At close, with a fleet: one more attempt to deliver what could not
  /// reach the store; the future answers what is still undelivered.
  pub fn flush_recovery(&self) -> Option<impl Future<Output = Vec<Undelivered>> + Send + 'static> {
    let fleet = self.fleet.clone()?;
    Some(async move { fleet.flush_recovery().await })
  }

  /// Counts `hits` fresh hits answered without the engine (the binding's
  /// remembered hits, `engine::epoch`), as `Engine::decide` counts its own.
  pub fn credit_hits(&mut self, hits: u64) {
    let l1 = self.fleet.is_some();
    let metrics = match self.released.as_mut() {
      Some(released) => released,
      None => self.local.metrics_mut(),
    };
    metrics.hits += hits;
    metrics.l1_hits += if l1 { hits } else { 0 };
  }

  /// The counters and gauges, the fleet's included.
  pub fn snapshot(&self) -> (Metrics, Gauges) {
    if let Some(metrics) = self.released {
      return (metrics, self.local.gauges());
    }
    let (mut metrics, mut gauges) = (self.local.metrics(), self.local.gauges());
    if let Some(fleet) = &self.fleet {
      let c = &fleet.counters;
      let read = |n: &AtomicU64| n.load(Ordering::Relaxed);
      metrics.lock_acquired = read(&c.lock_acquired);
      metrics.lock_contended = read(&c.lock_contended);
      metrics.lock_waits = read(&c.lock_waits);
      metrics.fill_notices = read(&c.fill_notices);
      metrics.redis_hits = read(&c.redis_hits);
      metrics.redis_errors = read(&c.redis_errors);
      metrics.corrupt_values = read(&c.corrupt_values);
      metrics.recovered = read(&c.recovered);
      metrics.recovery_dropped = read(&c.recovery_dropped);
      metrics.value_bytes_written = read(&c.value_bytes_written);
      metrics.value_bytes_stored = read(&c.value_bytes_stored);
      gauges.circuit_open = u64::from(fleet.circuit_open());
      gauges.recovery_pending = fleet.recovery_pending() as u64;
      let (connected, subscribed) = fleet.connected();
      gauges.redis_connected = u64::from(connected);
      gauges.redis_subscribed = u64::from(subscribed);
      let (tracking, changes, echoes) = fleet.tracking();
      gauges.redis_tracking = u64::from(tracking && subscribed);
      metrics.tracked_changes = changes;
      metrics.tracked_echoes = echoes;
      gauges.fleet_slots_held = fleet.load_slots().map_or(0, |slots| slots.held());
    }
    (metrics, gauges)
  }

  /// Drops every entry and flight, and stops the fleet (after `close`,
  /// once loads settled). Returns the flights still there.
  pub fn release(&mut self) -> Vec<Flight<F>> {
    self.stop_fleet();
    self.local.release()
  }

  /// Closes the cache and stops its fleet at once: every task ends, the
  /// locks it holds are released and its connections closed (the end of
  /// the JS environment that owns the cache, or the cache itself).
  pub fn stop_fleet(&mut self) {
    self.local.close();
    if let Some(fleet) = &self.fleet {
      self.released = Some(self.snapshot().0);
      self.last_problem = fleet.last_problem();
    }
    if let Some(fleet) = self.fleet.take() {
      fleet.stop();
    }
    self.invalidations = None;
  }

  /// Test hook: this host's wall clock reads `ms` off. With a fleet, the
  /// future measures the store's clock again (as the fleet does every
  /// minute), which corrects it.
  pub fn skew_clock(&mut self, ms: i64) -> Option<impl Future<Output = bool> + Send + 'static> {
    self.local.skew_clock(ms);
    let fleet = self.fleet.clone()?;
    Some(async move { fleet.resync_clock().await })
  }

  /// The last shared-store failure's cause, if any (kept once the store
  /// answers again, and after release).
  pub fn last_problem(&self) -> Option<Problem> {
    match &self.fleet {
      Some(fleet) => fleet.last_problem(),
      None => self.last_problem.clone(),
    }
  }

  /// `ready()`: with a fleet, resolves once the shared store answers as it
  /// needs (see [`Fleet::ready`]); `None` without one.
  pub fn ready(&self) -> Option<impl Future<Output = Result<(), Problem>> + Send + 'static> {
    let fleet = self.fleet.clone()?;
    Some(async move { fleet.ready().await })
  }

  /// What the shared store found that the application must be told.
  pub fn take_problems(&self) -> Vec<Problem> {
    self
      .fleet
      .as_ref()
      .map(|fleet| fleet.problems())
      .unwrap_or_default()
  }

  /// What the shared store found that the application should hear of, no
  /// failure (a server that cannot track keys): process warnings.
  pub fn take_notices(&self) -> Vec<String> {
    self
      .fleet
      .as_ref()
      .map(|fleet| fleet.notices())
      .unwrap_or_default()
  }
}

impl<V, F, S: SharedStore> Drop for Cache<V, F, S> {
  fn drop(&mut self) {
    self.stop_fleet();
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::options::RawCacheOptions;
  use crate::engine::flights::Answered;

  fn cache() -> Cache<String, &'static str> {
    let raw = RawCacheOptions {
      ttl: Some(1_000.0),
      jitter: Some(0.0),
      ..Default::default()
    };
    Cache::new(CacheConfig::from_raw(&raw).unwrap(), Clock::default(), None)
  }

  fn loaded(value: &str, json: Option<&str>) -> Event<String> {
    Event::Loaded(Loaded {
      body: json.map(|json| Body::Json(json.into())),
      ..Loaded::plain(value.into(), false, 3)
    })
  }

  fn parsed(value: &str, meta: Meta) -> Event<String> {
    Event::Parsed {
      value: value.into(),
      meta,
      tags: Tags::NONE,
      etag: Etag::NONE,
      bytes: 0,
    }
  }

  fn envelope(now: u64, fresh_for: u64, hard_for: u64) -> Envelope {
    Envelope {
      meta: Meta {
        fresh_until: now + fresh_for,
        hard_until: now + hard_for,
        compute_ms: 5,
        stamp: now,
        refresh_at: Some(now + fresh_for),
        negative: false,
      },
      body: Body::Json("\"theirs\"".into()),
      tags: Tags::NONE,
      etag: Default::default(),
    }
  }

  #[test]
  fn open_opens_the_store_the_configuration_names() {
    let local: Cache<String, ()> =
      Cache::open(CacheConfig::from_raw(&RawCacheOptions::default()).unwrap()).unwrap();
    assert!(!local.has_fleet());
    let raw = RawCacheOptions {
      redis: Some("redis://127.0.0.1:99999".into()),
      ..Default::default()
    };
    let refused = Cache::<String, ()>::open(CacheConfig::from_raw(&raw).unwrap()).err();
    assert_eq!(refused.map(|e| e.code), Some(Code::InvalidOption));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let raw = RawCacheOptions {
      redis: Some("redis://127.0.0.1:6379".into()),
      ..Default::default()
    };
    let opened =
      runtime.block_on(async { Cache::<String, ()>::open(CacheConfig::from_raw(&raw).unwrap()) });
    assert!(
      opened.unwrap().has_fleet(),
      "connects on first use: no server needed to open"
    );
  }

  #[test]
  fn without_a_fleet_a_flight_loads_first_and_ends_at_its_fill() {
    let mut c = cache();
    let policy = c.config().entry;
    let (id, first) = c.begin("k", "p", None, policy, false, Tags::NONE, Tiers::default());
    assert_eq!(first, FirstStep::Load);
    let Effect::Answer {
      flight: Some(flight),
      adopted: None,
      resume: false,
    } = c.step(id, loaded("v", None))
    else {
      panic!("a fill without a fleet ends the flight");
    };
    assert_eq!(flight.answered, Answered::default(), "answered by our load");
    assert_eq!((flight.key.as_str(), flight.handle), ("k", "p"));
    assert!(c.flight(id).is_none());
    assert_eq!(c.get("k", true).map(String::as_str), Some("v"));
  }

  #[test]
  fn the_fleets_answer_decides_the_next_step() {
    let mut c = cache();
    let policy = c.config().entry;
    let (id, _) = c.begin("k", "p", None, policy, false, Tags::NONE, Tiers::default());
    let token = Some("t".to_string());
    let claimed = |acquired| Event::Claimed {
      key: "k".into(),
      acquired,
    };
    let load = Acquired::Load {
      token: token.clone(),
    };
    assert!(matches!(
      c.step(id, claimed(load.clone())),
      Effect::Load {
        locked: true,
        lead: false
      }
    ));
    assert_eq!(
      c.flight(id).unwrap().lock,
      token,
      "the flight holds the lock it won"
    );
    assert_eq!(c.flight(id).unwrap().answered.lock_won, Some(true));
    let now = c.local().now();
    let stale = envelope(now - 2_000, 1_000, 10_000);
    assert!(
      matches!(c.step(id, claimed(Acquired::Stale(stale.clone()))), Effect::Adopt { envelope: e, from: Origin::Holder } if e == stale),
      "a foreground flight of callers that accept stale values takes a stale value"
    );
    let answered = c.flight(id).unwrap().answered;
    assert_eq!(
      (answered.from, answered.lock_won),
      (Some(Origin::Holder), Some(false)),
      "its callers are told the lock's holder answered"
    );
    // A caller refusing stale values joins: the same answer now asks
    // again (here, with no fleet to ask, it loads).
    assert!(matches!(c.decide("k", false), Decision::Join { .. }));
    assert!(matches!(
      c.step(id, claimed(Acquired::Stale(stale))),
      Effect::Load { locked: false, .. }
    ));
    let fresh = envelope(now, 1_000, 10_000);
    assert!(matches!(
      c.step(id, Event::Read { key: "k".into(), answer: Some(Acquired::Value(fresh.clone())) }),
      Effect::Adopt { envelope: e, from: Origin::Store } if e == fresh
    ));
    assert!(matches!(
      c.step(id, Event::Unavailable),
      Effect::Load { locked: false, .. }
    ));
    // Ended meanwhile: nothing to do (with a fleet, a lock it won is let go).
    let failed = Event::Failed {
      timed_out: true,
      loader_ran: false,
    };
    assert!(matches!(
      c.step(id, failed),
      Effect::Reject {
        flight: Some(_),
        error: None,
        release: None,
        resume: false
      }
    ));
    assert!(matches!(c.step(id, claimed(load)), Effect::Done));
    assert!(matches!(c.step(id, Event::Unavailable), Effect::Done));
  }

  #[test]
  fn a_leader_that_refuses_stale_values_makes_a_strict_flight() {
    let mut c = cache();
    let policy = c.config().entry;
    let (id, _) = c.begin("k", "p", None, policy, true, Tags::NONE, Tiers::default());
    assert!(c.flight(id).unwrap().strict);
    let (id, _) = c.begin(
      "j",
      "p",
      Some(Refresh::Stale),
      policy,
      true,
      Tags::NONE,
      Tiers::default(),
    );
    assert!(!c.flight(id).unwrap().strict, "a refresh is never strict");
  }

  #[test]
  fn an_adopted_value_answers_the_callers_and_is_recounted() {
    let mut c = cache();
    let policy = c.config().entry;
    assert!(matches!(c.decide("k", true), Decision::Lead));
    let (id, _) = c.begin("k", "p", None, policy, false, Tags::NONE, Tiers::default());
    for _ in 0..3 {
      assert!(matches!(c.decide("k", true), Decision::Join { .. }));
    }
    let now = c.local().now();
    let meta = envelope(now, 1_000, 10_000).meta;
    let Effect::Answer {
      flight,
      adopted: Some(adopted),
      resume: true,
    } = c.step(id, parsed("theirs", meta))
    else {
      panic!("an adopted value ends the flight, and its leader is told");
    };
    assert_eq!((adopted.served, adopted.refresh), (Served::Fresh, false));
    assert_eq!(flight.map(|f| f.handle), Some("p"));
    let (metrics, gauges) = c.snapshot();
    assert_eq!((metrics.misses, metrics.coalesced, metrics.hits), (0, 0, 4));
    assert_eq!(gauges.in_flight, 0);
    assert_eq!(c.get("k", false).map(String::as_str), Some("theirs"));
  }

  #[test]
  fn a_superseded_write_forgets_only_its_own_value() {
    let mut c = cache();
    let policy = c.config().entry;
    let (id, _) = c.begin("k", "p", None, policy, false, Tags::NONE, Tiers::default());
    assert!(matches!(
      c.step(id, loaded("ours", None)),
      Effect::Answer {
        flight: Some(_),
        ..
      }
    ));
    // With a fleet the flight stays until its write ended (`written`).
    let (id, _) = c.begin("k", "p2", None, policy, false, Tags::NONE, Tiers::default());
    c.local_mut().fill(id, "ours".into(), false, 1);
    let written = c.step(id, Event::Written(Written::Superseded));
    assert!(matches!(
      written,
      Effect::Answer {
        flight: Some(_),
        ..
      }
    ));
    assert!(
      c.get("k", true).is_none(),
      "the store kept a newer value: ours is forgotten"
    );
    let (id, _) = c.begin("k", "p3", None, policy, false, Tags::NONE, Tiers::default());
    c.local_mut().fill(id, "mine".into(), false, 1);
    c.local_mut().advance_clock(1);
    let _ = c.set(
      "k",
      "direct".into(),
      policy,
      Body::Json("\"direct\"".into()),
      Tags::NONE,
    );
    let written = c.step(id, Event::Written(Written::Superseded));
    assert!(matches!(
      written,
      Effect::Answer {
        flight: Some(_),
        ..
      }
    ));
    assert_eq!(
      c.get("k", true).map(String::as_str),
      Some("direct"),
      "a newer set stays"
    );
  }

  #[test]
  fn a_forced_flight_takes_only_what_is_loaded_after_it_began() {
    let mut c = cache();
    let policy = c.config().entry;
    let forced = Tiers {
      force_fresh: true,
      ..Tiers::default()
    };
    let (id, _) = c.begin("k", "p", None, policy, false, Tags::NONE, forced);
    let began = c.flight(id).unwrap().started_at;
    let terms = c.terms(id);
    assert_eq!((terms.newer_than, terms.accept_stale), (Some(began), false));
    assert!(matches!(
      c.step(id, loaded("v", None)),
      Effect::Answer { .. }
    ));
    // A forced caller joining a plain flight raises its bar to the call.
    let (id, _) = c.begin("j", "p", None, policy, false, Tags::NONE, Tiers::default());
    assert_eq!(c.terms(id).newer_than, None);
    c.local_mut().advance_clock(5);
    assert!(matches!(
      c.decide_past_l1("j", forced),
      Decision::Join { .. }
    ));
    let terms = c.terms(id);
    assert_eq!(
      (terms.newer_than, terms.accept_stale),
      (Some(began + 5), false)
    );
  }

  #[test]
  fn a_flight_told_to_skip_memory_leaves_it_as_it_was() {
    let mut c = cache();
    let policy = c.config().entry;
    let no_l1 = Tiers {
      skip_l1: true,
      ..Tiers::default()
    };
    let (id, _) = c.begin("k", "p", None, policy, false, Tags::NONE, no_l1);
    assert!(matches!(
      c.step(id, loaded("v", None)),
      Effect::Answer { .. }
    ));
    assert!(c.get("k", true).is_none(), "not written to memory");
    let (id, _) = c.begin("k", "p", None, policy, false, Tags::NONE, Tiers::default());
    assert!(matches!(
      c.step(id, loaded("v", None)),
      Effect::Answer { .. }
    ));
    assert!(
      matches!(c.decide_past_l1("k", no_l1), Decision::Lead),
      "memory not read"
    );
  }

  /// `redis: false` over a fleet: no read, no write, no lock to let go.
  #[tokio::test]
  async fn a_flight_told_to_skip_the_fleet_loads_and_ends_here() {
    use crate::engine::shared::{Faults, MemoryServer, MemoryStore};
    let server = MemoryServer::new();
    let store = server.store("p:", Faults::default());
    let raw = RawCacheOptions::default();
    let mut c: Cache<String, &str, MemoryStore> =
      Cache::open_on(CacheConfig::from_raw(&raw).unwrap(), store);
    let policy = c.config().entry;
    let no_redis = Tiers {
      skip_redis: true,
      ..Tiers::default()
    };
    let (id, first) = c.begin("k", "p", None, policy, false, Tags::NONE, no_redis);
    assert_eq!(first, FirstStep::Load);
    assert!(matches!(
      c.step(id, loaded("v", Some("\"v\""))),
      Effect::Answer {
        flight: Some(_),
        ..
      }
    ));
    assert_eq!(c.get("k", true).map(String::as_str), Some("v"));
    let (id, _) = c.begin("f", "p", None, policy, false, Tags::NONE, no_redis);
    let failed = Event::Failed {
      timed_out: false,
      loader_ran: true,
    };
    assert!(matches!(
      c.step(id, failed),
      Effect::Reject { release: None, .. }
    ));
    c.close();
  }

  /// The seam is one: the whole engine over the in-process store. A
  /// flight on `a` reads, wins the lock, loads and writes; the same key's
  /// flight on `b` is answered by that value, with no loader run.
  #[tokio::test]
  async fn two_caches_over_the_memory_store_load_a_key_once() {
    use crate::engine::shared::{Faults, MemoryServer, MemoryStore};
    let server = MemoryServer::new();
    let open = |server: &Arc<MemoryServer>| -> Cache<String, &'static str, MemoryStore> {
      let raw = RawCacheOptions {
        ttl: Some(60_000.0),
        jitter: Some(0.0),
        ..Default::default()
      };
      let store = server.store("p:", Faults::default());
      Cache::open_on(CacheConfig::from_raw(&raw).unwrap(), store)
    };
    let (mut a, mut b) = (open(&server), open(&server));
    let policy = a.config().entry;
    let (id, first) = a.begin("k", "a", None, policy, false, Tags::NONE, Tiers::default());
    assert_eq!(first, FirstStep::ReadShared { lead_now: false });
    let read = a.read_many(&[id]).unwrap().await;
    let [(_, key, answer)] = <[_; 1]>::try_from(read).unwrap();
    assert!(answer.is_none(), "nothing stored yet: {answer:?}");
    let Effect::Ask { ask, lead: true } = a.step(id, Event::Read { key, answer }) else {
      panic!("a flight that read nothing asks who loads, and its JS leader is made");
    };
    assert!(a.unled_flights().is_empty());
    let (key, acquired) = ask.future.await;
    assert!(
      matches!(acquired, Acquired::Load { token: Some(_) }),
      "{acquired:?}"
    );
    assert!(matches!(
      a.step(id, Event::Claimed { key, acquired }),
      Effect::Load {
        locked: true,
        lead: false
      }
    ));
    let Effect::Write(write) = a.step(id, loaded("v", Some("\"v\""))) else {
      panic!("with a fleet the value is written first");
    };
    assert_eq!(write.await, Written::Stored);
    assert!(matches!(
      a.step(id, Event::Written(Written::Stored)),
      Effect::Answer {
        flight: Some(_),
        adopted: None,
        resume: false
      }
    ));
    let (id, _) = b.begin("k", "b", None, policy, false, Tags::NONE, Tiers::default());
    assert_eq!(b.unled_flights(), vec![id], "its leader waits for the read");
    let read = b.read_many(&[id]).unwrap().await;
    let [(_, key, answer)] = <[_; 1]>::try_from(read).unwrap();
    let Effect::Adopt { envelope, from } = b.step(id, Event::Read { key, answer }) else {
      panic!("b's flight is answered by a's value");
    };
    assert_eq!(envelope.body.json(), Some("\"v\""));
    assert_eq!(from, Origin::Store, "read, not waited for");
    let Effect::Answer {
      adopted: Some(adopted),
      resume: false,
      ..
    } = b.step(id, parsed("v", envelope.meta))
    else {
      panic!("the value ends the flight, which had no JS leader to tell");
    };
    assert_eq!(adopted.served, Served::Fresh);
    assert!(b.unled_flights().is_empty());
    let (metrics, _) = b.snapshot();
    assert_eq!(metrics.loads, 0, "b ran no loader");
    a.close();
    b.close();
  }
}
