//! The simulated fleet: instances of the whole engine ([`Cache`]) over one
//! [`MemoryServer`], each call carried out as the binding carries out a
//! `getOrLoad` (decide, begin, the first read, the fleet's asks, the
//! loader, the write, `hardTimeout`), recorded in the [`History`].

use super::check::{History, Origin, Stored};
use crate::core::options::{CacheConfig, EntryPolicy, RawCacheOptions, RawCallOptions, Tiers};
use crate::core::tags::Tags;
use crate::engine::fleet::Acquired;
use crate::engine::shared::values::stored_header;
use crate::engine::shared::{FaultSwitch, Faults, MemoryServer, MemoryStore};
use crate::engine::{Cache, Decision, Effect, Event, FirstStep, Loaded, Refresh, Step, Written};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

pub type SimCache = Cache<String, u64, MemoryStore>;

pub const PREFIX: &str = "sim:";

/// The options every instance runs with: short bounds, so a few seconds of
/// simulated time hold many lock periods.
pub struct Options {
  pub ttl: u64,
  pub lock_ttl: u64,
  pub hard_timeout: u64,
  pub redis_timeout: u64,
  pub breaker_cooldown: u64,
}

pub struct Instance {
  pub cache: RefCell<SimCache>,
  pub faults: FaultSwitch,
  pub alive: Cell<bool>,
  pub tasks: RefCell<Vec<JoinHandle<()>>>,
  /// Flights whose load kept a value: the value and the flight's stamp,
  /// checked once the keep lands (`History::keep_landed`).
  pub keeping: RefCell<HashMap<u64, (String, u64)>>,
}

/// What every task shares.
pub struct World {
  pub server: Arc<MemoryServer>,
  pub instances: RefCell<Vec<Rc<Instance>>>,
  pub history: RefCell<History>,
  pub options: Options,
  next: Cell<u64>,
}

impl World {
  pub fn new(server: Arc<MemoryServer>, history: History, options: Options) -> Rc<World> {
    Rc::new(World {
      server,
      instances: RefCell::new(Vec::new()),
      history: RefCell::new(history),
      options,
      next: Cell::new(0),
    })
  }

  pub fn now(&self) -> u64 {
    self.server.now()
  }

  pub fn log(&self, line: String) {
    self.history.borrow_mut().log(self.now(), line);
  }

  fn next(&self) -> u64 {
    self.next.set(self.next.get() + 1);
    self.next.get()
  }

  /// A new instance, its clock `skew` ms off the store's until measured.
  pub fn start_instance(&self, skew: i64) -> usize {
    let o = &self.options;
    let raw = RawCacheOptions {
      ttl: Some(o.ttl as f64),
      hard_ttl: Some(o.ttl as f64 * 2.0),
      jitter: Some(0.0),
      beta: Some(0.0),
      hard_timeout: Some(o.hard_timeout as f64),
      redis: Some("redis://simulated".into()),
      lock_ttl: Some(o.lock_ttl as f64),
      redis_timeout: Some(o.redis_timeout as f64),
      circuit_breaker_duration: Some(o.breaker_cooldown as f64),
      ..Default::default()
    };
    let config = CacheConfig::from_raw(&raw).expect("the simulation's options are valid");
    let store = self
      .server
      .store(PREFIX, Faults::default())
      .with_timeout(Duration::from_millis(o.redis_timeout));
    let faults = store.fault_switch();
    let mut cache = Cache::open_on(config, store);
    cache.local_mut().skew_clock(skew);
    let mut instances = self.instances.borrow_mut();
    instances.push(Rc::new(Instance {
      cache: RefCell::new(cache),
      faults,
      alive: Cell::new(true),
      tasks: RefCell::new(Vec::new()),
      keeping: RefCell::new(HashMap::new()),
    }));
    instances.len() - 1
  }

  pub fn instance(&self, i: usize) -> Rc<Instance> {
    Rc::clone(&self.instances.borrow()[i])
  }

  /// The store's value of `key`, as the checks see it.
  pub fn stored(&self, key: &str) -> Option<Stored> {
    let name = crate::core::fleet::RedisKeys::new(PREFIX, key).value;
    self.server.with(|k| {
      let bytes = k.text(&name)?;
      let meta = stored_header(bytes)?;
      let (_, body) = crate::engine::shared::values::split_header(bytes)?;
      Some(Stored {
        json: String::from_utf8_lossy(body).into_owned(),
        fresh_until: meta.fresh_until,
        stamp: meta.stamp,
      })
    })
  }

  /// Whether `key`'s fleet back-off marker (a failed background refresh's)
  /// is live in the store.
  pub fn backing_off(&self, key: &str) -> bool {
    let name = crate::core::fleet::RedisKeys::new(PREFIX, key).backoff;
    self.server.with(|k| k.pttl(&name) > 0)
  }

  /// Every lock in the store: its token and lease left.
  pub fn locks(&self) -> Vec<(String, i64)> {
    self.server.with(|k| {
      let names: Vec<String> = k
        .names_starting(&format!("{{{PREFIX}"))
        .into_iter()
        .filter(|n| n.ends_with(":lock"))
        .collect();
      names
        .into_iter()
        .filter_map(|name| {
          let token = String::from_utf8_lossy(k.text(&name)?).into_owned();
          Some((token, k.pttl(&name)))
        })
        .collect()
    })
  }

  /// Kills instance `i` as a crash would: its work stops where it is, its
  /// connection answers nothing, and it releases nothing.
  pub fn kill(&self, i: usize) {
    let instance = self.instance(i);
    instance.alive.set(false);
    instance.faults.set(Faults {
      refused: true,
      ..Faults::default()
    });
    for task in instance.tasks.borrow_mut().drain(..) {
      task.abort();
    }
    self.history.borrow_mut().killed(self.now(), i);
  }
}

/// Runs `work` on instance `i`, aborted if it is killed.
pub fn spawn_on(
  world: &Rc<World>,
  i: usize,
  work: impl std::future::Future<Output = ()> + 'static,
) {
  let instance = world.instance(i);
  if !instance.alive.get() {
    return;
  }
  let task = tokio::task::spawn_local(work);
  instance.tasks.borrow_mut().push(task);
}

/// The key whose values go stale soon after they are written (its calls
/// pass a short `ttl`), so stale callers and their background refreshes
/// run often; the other keys' values stay fresh through most of a run.
pub const SHORT_LIVED: &str = "c";

/// What `key`'s calls write with: the cache's policy, or for
/// [`SHORT_LIVED`] a life of a tenth of it (the hard TTL too, so shorter
/// than a load may run: a value `set` meanwhile must still not be
/// overwritten by that load's older one).
fn policy_of(cache: &SimCache, key: &str) -> EntryPolicy {
  let policy = cache.config().entry;
  if key != SHORT_LIVED {
    return policy;
  }
  let short = RawCallOptions {
    ttl: Some(policy.ttl as f64 / 10.0),
    ..Default::default()
  };
  policy
    .with(&short)
    .expect("a tenth of a valid ttl is valid")
}

/// How a call was decided.
enum Decided {
  /// Answered now (a hit, or a stale value while a refresh runs).
  Now,
  /// Answered now with a stale value; a background refresh starts.
  Stale,
  Join(u64),
  Lead,
}

/// One `getOrLoad` of `key` on instance `i` by a caller that takes fresh
/// values only, or (`allow_stale`) stale ones too, which start the one
/// background refresh as the binding's `serve_stale` does.
pub async fn get_or_load(world: Rc<World>, i: usize, key: String, allow_stale: bool) {
  let instance = world.instance(i);
  let call = world.history.borrow_mut().call(i, &key);
  let decided = {
    let mut cache = instance.cache.borrow_mut();
    match cache.decide(&key, allow_stale) {
      Decision::Stale { refresh: true, .. } => Decided::Stale,
      Decision::Hit { .. } | Decision::Negative { .. } | Decision::Stale { .. } => Decided::Now,
      Decision::Join { flight } => Decided::Join(*flight),
      Decision::Lead => Decided::Lead,
    }
  };
  match decided {
    Decided::Now => world.history.borrow_mut().settled(call),
    Decided::Stale => {
      world.history.borrow_mut().settled(call);
      lead(&world, &instance, i, key, None).await
    }
    Decided::Join(flight) => world.history.borrow_mut().joined(call, flight),
    Decided::Lead => lead(&world, &instance, i, key, Some(call)).await,
  }
}

/// A flight: led by `call` (else a background refresh nobody waits on),
/// begun, carried out until it ends, or given up at `hardTimeout` (as
/// lib/deadlines.js gives it up).
async fn lead(
  world: &Rc<World>,
  instance: &Rc<Instance>,
  i: usize,
  key: String,
  call: Option<usize>,
) {
  let handle = world.next();
  let refresh = match call {
    Some(call) => {
      world.history.borrow_mut().joined(call, handle);
      None
    }
    None => Some(Refresh::Stale),
  };
  let (id, first) = {
    let mut cache = instance.cache.borrow_mut();
    let policy = policy_of(&cache, &key);
    cache.begin(
      &key,
      handle,
      refresh,
      policy,
      false,
      Tags::NONE,
      Tiers::default(),
    )
  };
  let kind = if refresh.is_some() {
    "refresh"
  } else {
    "flight"
  };
  world.log(format!("i{i} {kind} {handle} of {key:?} begins"));
  let loader = Rc::new(Cell::new(None));
  let token = Rc::new(RefCell::new(None));
  let flight = fly(world, instance, i, &key, id, first, &loader, &token);
  let timeout = Duration::from_millis(world.options.hard_timeout);
  if tokio::time::timeout(timeout, flight).await.is_err() {
    world.log(format!("i{i} flight {handle} given up at hardTimeout"));
    let failed = Event::Failed {
      timed_out: true,
      loader_ran: loader.get().is_some(),
    };
    let effect = instance.cache.borrow_mut().step(id, failed);
    if let Effect::Reject {
      release: Some(release),
      ..
    } = effect
    {
      tokio::spawn(release);
    }
  }
  let mut history = world.history.borrow_mut();
  if let Some(run) = loader.get() {
    history.loader_ended(run);
  }
  if let Some(token) = token.borrow().as_deref() {
    history.token_released(world.now(), token);
  }
  history.flight_ended(handle);
}

#[allow(clippy::too_many_arguments)]
async fn fly(
  world: &Rc<World>,
  instance: &Rc<Instance>,
  i: usize,
  key: &str,
  id: u64,
  first: FirstStep,
  loader: &Rc<Cell<Option<usize>>>,
  token: &Rc<RefCell<Option<String>>>,
) {
  let mut effect = match first {
    FirstStep::Load => Effect::Load {
      locked: false,
      lead: false,
    },
    FirstStep::ReadShared { .. } => {
      let read = instance.cache.borrow().read_many(&[id]);
      let Some(read) = read else { return };
      let Some((_, key, answer)) = read.await.into_iter().next() else {
        return;
      };
      instance
        .cache
        .borrow_mut()
        .step(id, Event::Read { key, answer })
    }
  };
  // Every effect is carried out as the binding does (binding/flight.rs),
  // with futures awaited here instead of spawned.
  loop {
    let event = match effect {
      Effect::Ask { ask, .. } => {
        let (key, acquired) = ask.future.await;
        if let Acquired::Load { token: Some(won) } = &acquired {
          world.history.borrow_mut().token(won, i);
          *token.borrow_mut() = Some(won.clone());
        }
        Event::Claimed { key, acquired }
      }
      Effect::Load { .. } => load(world, instance, i, key, id, loader).await,
      Effect::Adopt { envelope, .. } => {
        let json = envelope.body.json().unwrap_or_default().to_string();
        world.log(format!("i{i} adopts {json} for {key:?}"));
        Event::Parsed {
          bytes: json.len(),
          value: json,
          meta: envelope.meta,
          tags: envelope.tags,
          etag: envelope.etag,
        }
      }
      Effect::Write(write) => {
        let written = write.await;
        world.log(format!("i{i} write of {key:?}: {written:?}"));
        check_keep(world, instance, key, id, written);
        Event::Written(written)
      }
      Effect::Reject { error, release, .. } => {
        if let Some(error) = error {
          world.log(format!(
            "i{i} flight of {key:?} ends unloaded: {}",
            error.message
          ));
        }
        if let Some(release) = release {
          release.await;
        }
        return;
      }
      Effect::Spawn(work) => {
        tokio::spawn(work);
        return;
      }
      Effect::Answer { .. } | Effect::Done => return,
    };
    effect = instance.cache.borrow_mut().step(id, event);
  }
}

/// Flight `id`'s write ended `written`: if its load kept a value and the
/// keep landed, the store holds that value (or a later one).
fn check_keep(world: &World, instance: &Instance, key: &str, id: u64, written: Written) {
  let keep = instance.keeping.borrow_mut().remove(&id);
  if let (Some((json, stamp)), Written::Stored) = (keep, written) {
    let stored = world.stored(key);
    let now = world.now();
    let mut history = world.history.borrow_mut();
    history.keep_landed(now, key, &json, stamp, stored);
  }
}

/// The loader: runs for a while, then its value is filled and written, or
/// (every [`FAILING`]th run) it fails: nothing is written, the lock is let
/// go of, and a failed background refresh leaves the fleet's back-off.
async fn load(
  world: &Rc<World>,
  instance: &Rc<Instance>,
  i: usize,
  key: &str,
  id: u64,
  loader: &Rc<Cell<Option<usize>>>,
) -> Event<String> {
  let stored = world.stored(key);
  let started = world.now();
  let held = instance
    .cache
    .borrow()
    .local()
    .held(key)
    .map(|(json, meta, _)| (json.clone(), meta.stamp));
  let unwaited_refresh = instance
    .cache
    .borrow()
    .flight(id)
    .is_some_and(|f| f.background && !f.strict && f.joined == 0);
  let backing_off = unwaited_refresh && world.backing_off(key);
  let (run, runs_for) = {
    let mut history = world.history.borrow_mut();
    let run = history.loader_started(world.now(), i, key, stored, backing_off);
    (run, LOADER_MS[run % LOADER_MS.len()])
  };
  loader.set(Some(run));
  world.log(format!("i{i} loader of {key:?} starts ({runs_for} ms)"));
  tokio::time::sleep(Duration::from_millis(runs_for)).await;
  world.history.borrow_mut().loader_ended(run);
  if run % FAILING == FAILING - 1 {
    world.log(format!("i{i} loader of {key:?} fails"));
    return Event::Failed {
      timed_out: false,
      loader_ran: true,
    };
  }
  // Every KEEPING-th run finds its origin unchanged (`ctx.keep()`): the
  // value its instance held as the loader started.
  if let (Some((json, held_stamp)), KEEPING_RUN) = (held, run % KEEPING) {
    world.log(format!("i{i} loader of {key:?} keeps {json}"));
    // Told now, not once written: the store holds the kept deadlines as
    // soon as the script ran, before the write's future answers.
    world.history.borrow_mut().kept(&json, started);
    let flight_stamp = instance.cache.borrow().flight(id).map(|f| f.started_at);
    if let Some(stamp) = flight_stamp {
      instance
        .keeping
        .borrow_mut()
        .insert(id, (json.clone(), stamp));
    }
    return Event::Loaded(Loaded {
      bytes: json.len(),
      kept: Some(held_stamp),
      ..Loaded::plain(json, false, runs_for)
    });
  }
  let json = format!("\"v{}\"", world.next());
  world
    .history
    .borrow_mut()
    .value(&json, Origin::Fill { began: started });
  world.log(format!("i{i} loader of {key:?} returns {json}"));
  Event::Loaded(Loaded {
    bytes: json.len(),
    body: Some(crate::core::body::Body::Json(json.clone())),
    ..Loaded::plain(json, false, runs_for)
  })
}

/// One run in this many keeps the value its instance holds, when it holds
/// one (the [`KEEPING_RUN`]th of each round).
const KEEPING: usize = 5;
const KEEPING_RUN: usize = 2;

/// How long loaders run, in turn: mostly short, some past `lockTtl` (the
/// lease must be extended), none past `hardTimeout`.
const LOADER_MS: [u64; 8] = [5, 40, 12, 90, 1, 450, 25, 60];

/// One loader run in this many fails (coprime with `LOADER_MS.len()`, so
/// slow and fast runs both fail).
const FAILING: usize = 7;

/// A live `set` of `key` on instance `i`.
pub async fn set(world: Rc<World>, i: usize, key: String) {
  let instance = world.instance(i);
  let json = format!("\"v{}\"", world.next());
  let at = world.now();
  world.history.borrow_mut().value(&json, Origin::Set);
  world.log(format!("i{i} sets {key:?} to {json}"));
  let write = {
    let mut cache = instance.cache.borrow_mut();
    let policy = policy_of(&cache, &key);
    cache.set(
      &key,
      json.clone(),
      policy,
      crate::core::body::Body::Json(json),
      Tags::NONE,
    )
  };
  if let Some(write) = write {
    if write.await {
      world.history.borrow_mut().applied(&key, at);
    }
  }
}

/// A live `expire` of `key` on instance `i`: applied once the store holds
/// its moment in the key's expire marker (one kept for auto-recovery does
/// not, yet).
pub async fn expire(world: Rc<World>, i: usize, key: String) {
  let instance = world.instance(i);
  world.log(format!("i{i} expires {key:?}"));
  let (at, step) = {
    let mut cache = instance.cache.borrow_mut();
    (cache.local().now(), cache.expire(&key))
  };
  if let Step::Later(expire) = step {
    expire.await;
    let marker = crate::core::fleet::RedisKeys::new(PREFIX, &key).expired;
    let marked = world.server.with(|k| k.number(&marker));
    if marked.is_some_and(|marked| marked >= at) {
      world.history.borrow_mut().expired(&key, at);
    }
  }
}

/// A live `delete` of `key` on instance `i`.
pub async fn delete(world: Rc<World>, i: usize, key: String) {
  let instance = world.instance(i);
  let at = world.now();
  world.log(format!("i{i} deletes {key:?}"));
  let step = instance.cache.borrow_mut().delete(&key);
  if let Step::Later(delete) = step {
    delete.await;
    // Reached the store if its tombstone (or something newer) is there:
    // one kept for auto-recovery has not, yet.
    let name = crate::core::fleet::RedisKeys::new(PREFIX, &key).value;
    let gone = world.server.with(|k| {
      k.text(&name)
        .and_then(stored_header)
        .is_some_and(|meta| meta.stamp >= at)
    });
    if gone {
      world.history.borrow_mut().applied(&key, at);
    }
  }
}
