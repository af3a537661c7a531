//! A flight's life from its start ([`start_flight`], for `getOrLoad`'s miss),
//! on the binding's side: the promise its callers share (made here, settled
//! here), the fleet's steps the engine's [`crate::engine::Cache`] asks for,
//! and the raw functions the JS leader reports with. Every report takes the
//! flight id alone: the flight knows its key.
//!
//! Everything that happens to a flight goes to `Cache::step`, whose
//! [`Effect`] is carried out in [`carry_out`]: the engine decides each step;
//! this runs its futures, parses values, makes the JS leader, tells it to
//! run the loader or that the flight was answered (`resume(ctx, id,
//! load)`), and settles the callers' promise. With a fleet, the first reads
//! of the flights started in one tick go out together
//! ([`queue_first_read`], [`flush_reads`]).

use super::args::read_tags;
use super::body;
use super::futures::{self, then_on_cache};
use super::held::Held;
use super::raw::{self, napi_try, Env, JsRef, RawResult, Value};
use super::status::{self, Lock, Outcome, Source, StaleReason};
use super::Inner;
use crate::core::body::JSON_FORMAT;
use crate::core::etag::Etag;
use crate::core::options::{EntryPolicy, RawCallOptions, Tiers};
use crate::engine::flights::Flight;
use crate::engine::together::{self, Ask};
use crate::engine::{
  Adopted, Answered, Effect, Event, FirstStep, Keep, Loaded, Pending, Refresh, Written,
};
use napi::sys;
use std::rc::Rc;

/// The JS side of one call: the key (encoded, and as passed), and the loader.
pub(super) struct Call<'a> {
  pub key: &'a str,
  pub key_js: Value,
  pub loader: Value,
  pub policy: EntryPolicy,
  /// The caller refuses stale values (`stale: false`).
  pub refuse_stale: bool,
  /// The tags its value is written with, as passed (read by
  /// [`start_flight`]: a hit needs none).
  pub tags: Value,
  /// What it asks of memory and the fleet (`forceFresh`, `l1`, `redis`).
  pub tiers: Tiers,
}

/// Starts a load of `call.key` and registers it as the key's flight;
/// returns the promise its callers share. `refresh: None` is a foreground
/// load. Its deadline runs from now. The JS leader is told of it at once
/// and runs the loader now; with a fleet, a foreground load's leader is
/// made once its first read did not answer it ([`defer_leader`]), and
/// runs the loader once the fleet says so.
pub(super) unsafe fn start_flight(
  env: Env,
  inner: &Rc<Inner>,
  call: &Call<'_>,
  refresh: Option<Refresh>,
) -> RawResult<Value> {
  let tags = read_tags(env, call.tags)?;
  let (handle, promise) = FlightHandle::new(env)?;
  let (id, first) = {
    let mut cache = inner.cache.borrow_mut();
    cache.begin(
      call.key,
      handle,
      refresh,
      call.policy,
      call.refuse_stale,
      tags,
      call.tiers,
    )
  };
  let waiting = matches!(first, FirstStep::ReadShared { .. });
  let started = if first == (FirstStep::ReadShared { lead_now: false }) {
    defer_leader(env, inner, id, call.key_js, call.loader)
  } else {
    let background = refresh.is_some();
    lead(
      env,
      inner,
      id,
      call.key_js,
      call.loader,
      background,
      promise,
      waiting,
      0.0,
    )
    .map(drop)
  };
  if let Err(failure) = started {
    // The leader never saw it: nobody else has its promise yet.
    let given_up = Event::Failed {
      timed_out: false,
      loader_ran: false,
    };
    if let Effect::Reject {
      release: Some(release),
      ..
    } = inner.cache.borrow_mut().step(id, given_up)
    {
      futures::spawn(release);
    }
    return Err(failure);
  }
  if waiting {
    queue_first_read(env, inner, id)?;
  }
  Ok(promise)
}

/// The binding's handle of a flight: the promise every caller shares, and
/// what settles it. The deferred is settled once, by [`FlightHandle::settle`],
/// which consumes the handle; a handle dropped unsettled (only at release,
/// after close drained the loads) leaves its promise pending.
pub struct FlightHandle {
  /// `None` once handed to the stored entry (a fill without a fleet).
  promise: Option<JsRef>,
  /// Null once settled.
  deferred: sys::napi_deferred,
  /// The `status` objects of the flight's callers that passed one: filled
  /// when it settles (`answer`), `outcome` too if another instance's value
  /// answers it.
  pub statuses: Vec<JsRef>,
  /// The value its callers get, kept while the engine's steps run (our
  /// loader's, while it is written to the fleet; another instance's, once
  /// parsed): an object by reference, a primitive by copy.
  answer: Option<Kept>,
  /// With a fleet, a foreground flight's leading call ([`defer_leader`]):
  /// what its JS leader needs when it is made, and what the background
  /// refresh a stale answer calls for runs ([`carry_out`]).
  call: Option<LeadingCall>,
}

/// A foreground flight's leading call, kept while it is in flight with a
/// fleet. The engine defers its JS leader (`FirstStep::ReadShared {
/// lead_now: false }`: its first read, bounded by the loads' deadline in
/// `Fleet::read_many`, may answer it; bench/cluster.js part 2 measured the
/// cost of a leader made and ended per key); it is made when the fleet
/// first asks for a lock or a load.
struct LeadingCall {
  key: Kept,
  loader: JsRef,
  since: std::time::Instant,
}

impl std::fmt::Debug for FlightHandle {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str("FlightHandle")
  }
}

impl FlightHandle {
  /// A pending promise and its handle.
  pub unsafe fn new(env: Env) -> RawResult<(FlightHandle, Value)> {
    let mut deferred = std::ptr::null_mut();
    let mut promise = std::ptr::null_mut();
    napi_try!(
      env,
      sys::napi_create_promise(env, &mut deferred, &mut promise)
    );
    let handle = FlightHandle {
      promise: Some(JsRef::strong(env, promise)?),
      deferred,
      statuses: Vec::new(),
      answer: None,
      call: None,
    };
    Ok((handle, promise))
  }

  /// The shared promise.
  pub unsafe fn promise(&self, env: Env) -> Option<Value> {
    self.promise.as_ref()?.get(env)
  }

  /// Fulfils (`Ok`) or rejects (`Err`) the shared promise, once.
  unsafe fn settle(&mut self, env: Env, result: Result<Value, Value>) {
    let deferred = std::mem::replace(&mut self.deferred, std::ptr::null_mut());
    if deferred.is_null() {
      return;
    }
    match result {
      Ok(value) => sys::napi_resolve_deferred(env, deferred, value),
      Err(error) => sys::napi_reject_deferred(env, deferred, error),
    };
  }
}

/// A JS value kept across a tokio step, given back as it was (a key, which
/// must not become a promise, or a value).
enum Kept {
  Object(JsRef),
  /// A string, which napi 9 cannot reference: inside a one-element array.
  Text(JsRef),
  Primitive(Held),
}

impl Kept {
  unsafe fn new(env: Env, value: Value) -> RawResult<Kept> {
    Ok(match raw::type_of(env, value) {
      sys::ValueType::napi_object | sys::ValueType::napi_function => {
        Kept::Object(JsRef::strong(env, value)?)
      }
      sys::ValueType::napi_string => Kept::Text(JsRef::strong(env, raw::boxed(env, value)?)?),
      _ => Kept::Primitive(Held::from_js(env, value)?),
    })
  }

  unsafe fn to_js(&self, env: Env) -> Value {
    let undefined = || raw::undefined(env);
    match self {
      Kept::Object(reference) => reference.get(env).unwrap_or_else(undefined),
      Kept::Text(reference) => reference
        .get(env)
        .map_or_else(undefined, |boxed| raw::unboxed(env, boxed)),
      Kept::Primitive(held) => held.value(env),
    }
  }
}

/// Answers a flight's callers with `value`, telling those that asked
/// (`status`) how they were answered: by our load, or by another instance's
/// value (`adopted`).
unsafe fn answer(
  env: Env,
  flight: &mut Flight<FlightHandle>,
  value: Value,
  adopted: Option<Adopted>,
) {
  describe(env, &flight.handle.statuses, flight.answered, adopted);
  flight.handle.settle(env, Ok(value));
}

/// Fills the `statuses` of a flight's callers (see [`answer`]).
unsafe fn describe(env: Env, statuses: &[JsRef], answered: Answered, adopted: Option<Adopted>) {
  let served = adopted.map(|a| a.served);
  let stale = (served == Some(crate::engine::Served::Stale)).then_some(StaleReason::Refresh);
  let meta = adopted.map(|a| (a.meta, a.now));
  for status in statuses {
    let Some(status) = status.get(env) else {
      continue;
    };
    if let Some(served) = served {
      let name = raw::string(env, Outcome::served(served).name());
      let _ = raw::set_property(env, status, c"outcome", name);
    }
    status::describe(
      env,
      status,
      Source::of(answered),
      Lock::of(answered),
      stale,
      meta,
    );
  }
}

/// The frame of the leader's reports: the cache, the flight id, the other
/// arguments; what `body` fails with is thrown.
unsafe fn report<const N: usize>(
  env: Env,
  info: sys::napi_callback_info,
  body: impl FnOnce(&Rc<Inner>, u64, [Value; N]) -> RawResult<Value>,
) -> Value {
  let (argv, _, inner) = raw::args::<N, Rc<Inner>>(env, info);
  // SAFETY: every report is an entry point `install_raw` made with
  // `Rc<Inner>` data; the box outlives the callback, whose function is
  // alive while it runs (as in `entry::get_or_load`).
  let inner: &Rc<Inner> = &*inner;
  let id = raw::get_number(env, argv[0]) as u64;
  body(inner, id, argv).unwrap_or_else(|failure| raw::throw(env, failure))
}

/// `fill(id, value, negative, computeMs, body, format, ttl, hardTtl,
/// noStore, etag, kept)`: our loader's value (its normalised copy; `body`
/// its JSON text, or with `format` its bytes: `binding::body::read`), with
/// what the loader set for its entry (`ctx.setTtl`: `ttl`/`hardTtl`,
/// undefined when not set; `ctx.noStore()`; `ctx.setEtag`: `etag`, a
/// string or undefined). `kept` (`ctx.keep()`): the stamp of the value this
/// process held (`heldValue`), which `value` then is, with no `body`.
/// Answers the callers; with a fleet, once the value is written there:
/// then it returns the write's promise (for `close()` to wait for), else
/// undefined. Throws (the flight stays, for `fail`) when the loader's TTLs
/// break the call options' rules.
pub unsafe extern "C" fn fill(env: Env, info: sys::napi_callback_info) -> Value {
  report::<11>(env, info, |inner, id, argv| {
    let value = argv[1];
    let negative = raw::get_bool(env, argv[2]);
    let compute_ms = raw::get_number(env, argv[3]).max(0.0).round() as u64;
    // Checked before anybody is answered: TTLs the rules refuse fail the load.
    let keep = keep(env, inner, id, argv[6], argv[7], argv[8])?;
    let etag = match raw::type_of(env, argv[9]) {
      sys::ValueType::napi_string => Etag::new(&raw::get_string(env, argv[9])?)?,
      _ => Etag::NONE,
    };
    let kept = (raw::type_of(env, argv[10]) == sys::ValueType::napi_number)
      .then(|| raw::get_number(env, argv[10]) as u64);
    let mut loaded = Loaded {
      etag,
      kept,
      keep,
      ..Loaded::plain((), negative, compute_ms)
    };
    if !inner.cache.borrow().has_fleet() {
      // Weighed only for a cache bounded in bytes: the length walks the text.
      if inner.cache.borrow().config().l1_max_value_bytes.is_some() {
        loaded.bytes = body::stored_len(env, argv[4]);
      }
      return fill_here(env, inner, id, value, loaded);
    }
    if kept.is_none() {
      loaded.body = body::read(env, argv[4], argv[5])?;
    }
    loaded.bytes = loaded.body.as_ref().map_or(0, |body| body.len());
    let loaded = loaded.holding(Held::from_js(env, value)?);
    let kept = Kept::new(env, value)?;
    if let Some(flight) = inner.cache.borrow_mut().flight_mut(id) {
      flight.handle.answer = Some(kept);
    }
    match inner.cache.borrow_mut().step(id, Event::Loaded(loaded)) {
      Effect::Write(write) => self::write(env, inner, id, write),
      effect => {
        carry_out(env, inner, id, effect, None);
        Ok(raw::undefined(env))
      }
    }
  })
}

/// Runs flight `id`'s write to the fleet; its end goes to `step`. Returns
/// the write's promise.
unsafe fn write(env: Env, inner: &Rc<Inner>, id: u64, write: Pending<Written>) -> RawResult<Value> {
  then_on_cache(env, inner.id, write, move |env, inner, written| {
    step(env, inner, id, Event::Written(written))
  })
}

/// What flight `id` keeps of its value: not stored (`noStore`), or stored
/// with the flight's policy as the loader's `ttl`/`hardTtl` override it
/// (numbers, or undefined; the call options' rules, `EntryPolicy::with`).
unsafe fn keep(
  env: Env,
  inner: &Inner,
  id: u64,
  ttl: Value,
  hard_ttl: Value,
  no_store: Value,
) -> RawResult<Keep> {
  if raw::get_bool(env, no_store) {
    return Ok(Keep::Nothing);
  }
  let millis = |value: Value| -> Option<f64> {
    (raw::type_of(env, value) == sys::ValueType::napi_number).then(|| raw::get_number(env, value))
  };
  let overrides = RawCallOptions {
    ttl: millis(ttl),
    hard_ttl: millis(hard_ttl),
    ..Default::default()
  };
  if overrides.is_empty() {
    return Ok(Keep::Store(None));
  }
  let cache = inner.cache.borrow();
  let Some(flight) = cache.flight(id) else {
    return Ok(Keep::Store(None));
  };
  Ok(Keep::Store(Some(flight.policy.with(&overrides)?)))
}

/// `fill` without a fleet. The callers are answered first: resolving reads
/// the value's `then`, which can run user code that calls the cache, and
/// nothing is borrowed here. Then the value is stored.
unsafe fn fill_here(
  env: Env,
  inner: &Rc<Inner>,
  id: u64,
  value: Value,
  loaded: Loaded<()>,
) -> RawResult<Value> {
  let undefined = raw::undefined(env);
  let (deferred, statuses) = match inner.cache.borrow_mut().flight_mut(id) {
    Some(flight) => (
      std::mem::replace(&mut flight.handle.deferred, std::ptr::null_mut()),
      std::mem::take(&mut flight.handle.statuses),
    ),
    None => return Ok(undefined),
  };
  if !deferred.is_null() {
    sys::napi_resolve_deferred(env, deferred, value);
  }
  describe(env, &statuses, Answered::default(), None);
  let promise = match inner.cache.borrow_mut().flight_mut(id) {
    Some(flight) => flight.handle.promise.take(),
    None => return Ok(undefined),
  };
  // Not kept with the value: a hit's promise is made by the JS wrapper
  // (`held`). Let go now rather than when the flight ends.
  drop(promise);
  let loaded = loaded.holding(Held::from_js(env, value)?);
  // Its callers are answered already: what is left is to end it.
  let ended = inner.cache.borrow_mut().step(id, Event::Loaded(loaded));
  carry_out(env, inner, id, ended, None);
  Ok(undefined)
}

/// `fail(id, error, timedOut, loaderRan)`: the load failed, timed out or
/// was given up (`loaderRan`: its loader was called). Rejects the callers
/// with `error`; with a fleet, the lock is released.
pub unsafe extern "C" fn fail(env: Env, info: sys::napi_callback_info) -> Value {
  report::<4>(env, info, |inner, id, argv| {
    let failed = Event::Failed {
      timed_out: raw::get_bool(env, argv[2]),
      loader_ran: raw::get_bool(env, argv[3]),
    };
    let effect = inner.cache.borrow_mut().step(id, failed);
    carry_out(env, inner, id, effect, Some(argv[1]));
    Ok(raw::undefined(env))
  })
}

/// `heldValue(id)`: what this process holds for flight `id`'s key, for
/// its loader's `ctx.stale`: `[value, ageMs, etag, stamp, negative]`
/// (`etag` undefined when none was set), or undefined when it holds nothing
/// servable (`Engine::held`).
pub unsafe extern "C" fn held_value(env: Env, info: sys::napi_callback_info) -> Value {
  report::<1>(env, info, |inner, id, _| {
    let cache = inner.cache.borrow();
    let local = cache.local();
    let held = local.flight(id).and_then(|flight| local.held(&flight.key));
    let Some((value, meta, etag)) = held else {
      return Ok(raw::undefined(env));
    };
    let age = local.now().saturating_sub(meta.stamp);
    let etag = match etag.as_str() {
      Some(etag) => raw::string(env, etag),
      None => raw::undefined(env),
    };
    let fields = [
      value.value(env),
      raw::number(env, age as f64),
      etag,
      raw::number(env, meta.stamp as f64),
      raw::boolean(env, meta.negative),
    ];
    raw::array(env, &fields)
  })
}

/// `recordSoftWait(servedStale)`: the outcome of a stale read that waited.
pub unsafe extern "C" fn record_soft_wait(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, _, inner) = raw::args::<1, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this callback, while its function is alive (as in `entry::get_or_load`).
  (&*inner)
    .cache
    .borrow_mut()
    .local_mut()
    .record_soft_wait(raw::get_bool(env, argv[0]));
  raw::undefined(env)
}

/// `recordLoadQueue(queued, waitedMs, rejected, skipped, bypassed,
/// slotsUsed, queueLength)`: what the load bulkhead (lib/bulkhead.js) did
/// since its last report, and its state now. Numbers JS made, never negative; a
/// non-number reads as 0.
pub unsafe extern "C" fn record_load_queue(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, _, inner) = raw::args::<7, Rc<Inner>>(env, info);
  let count = |value: Value| raw::get_count(env, value);
  let added = [
    count(argv[0]),
    count(argv[1]),
    count(argv[2]),
    count(argv[3]),
    count(argv[4]),
  ];
  let (slots_used, queue_length) = (count(argv[5]), count(argv[6]));
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this callback, while its function is alive (as in `entry::get_or_load`).
  (&*inner)
    .cache
    .borrow_mut()
    .local_mut()
    .record_load_queue(added, slots_used, queue_length);
  raw::undefined(env)
}

/// The background refresh of `key_js` a stale value from the shared store
/// calls for (`Adopted::refresh`: the engine found it due), with the
/// leading call's `loader` and `tiers`.
unsafe fn start_refresh(
  env: Env,
  inner: &Rc<Inner>,
  key_js: Value,
  loader: Value,
  tiers: Tiers,
) -> RawResult<()> {
  let mut key_buf = raw::Utf8::new();
  let key = super::key::read(env, key_js, &mut key_buf)?;
  let policy = inner.cache.borrow().config().entry;
  let call = Call {
    key: key.as_str(),
    key_js,
    loader,
    policy,
    refuse_stale: false,
    tags: raw::undefined(env),
    tiers,
  };
  // Its tags are the stale value's (`Engine::tag_flight`).
  start_flight(env, inner, &call, Some(Refresh::Stale)).map(drop)
}

/// With a fleet, a new flight's first step: a read, batched with the other
/// flights started before the next microtask (`flushReads`).
pub unsafe fn queue_first_read(env: Env, inner: &Rc<Inner>, id: u64) -> RawResult<()> {
  let first = {
    let mut reads = inner.reads.borrow_mut();
    reads.push(id);
    reads.len() == 1
  };
  if first {
    let ctx = inner.helper(env, |h| &h.ctx)?;
    let schedule = inner.helper(env, |h| &h.schedule_reads)?;
    raw::call(env, schedule, &[ctx])?;
  }
  Ok(())
}

/// `flushReads()`: the first read of the flights queued since the last
/// flush, in one pipelined round trip and one completion.
pub unsafe extern "C" fn flush_reads(env: Env, info: sys::napi_callback_info) -> Value {
  let (_, _, inner) = raw::args::<0, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, valid for this
  // callback (as in `entry::get_or_load`).
  let inner: &Rc<Inner> = &*inner;
  let ids = std::mem::take(&mut *inner.reads.borrow_mut());
  let read = inner.cache.borrow().read_many(&ids);
  let Some(read) = read else {
    // Released meanwhile.
    for id in ids {
      step(env, inner, id, Event::Unavailable);
    }
    return raw::undefined(env);
  };
  let started = then_on_cache(env, inner.id, read, |env, inner, answers| {
    *inner.asks.borrow_mut() = Some(Vec::new());
    for (id, key, answer) in answers {
      step(env, inner, id, Event::Read { key, answer });
    }
    let asks = inner.asks.borrow_mut().take().unwrap_or_default();
    ask_together(env, inner, asks);
  });
  started.unwrap_or_else(|failure| raw::throw(env, failure))
}

/// Hands `event` to the engine and carries out what it says.
unsafe fn step(env: Env, inner: &Rc<Inner>, id: u64, event: Event<Held>) {
  let effect = inner.cache.borrow_mut().step(id, event);
  carry_out(env, inner, id, effect, None);
}

/// Carries out `effect` for flight `id`. `thrown`: what its loader threw,
/// for an [`Effect::Reject`] that names no error of the engine's.
unsafe fn carry_out(
  env: Env,
  inner: &Rc<Inner>,
  id: u64,
  effect: Effect<FlightHandle>,
  thrown: Option<Value>,
) {
  match effect {
    Effect::Ask { ask, lead } => {
      // The wait for the lock's holder is bounded by the leader's deadline.
      if lead {
        make_leader(env, inner, id, true);
      }
      let mut collecting = inner.asks.borrow_mut();
      match collecting.as_mut() {
        Some(asks) => asks.push((id, ask)),
        None => {
          drop(collecting);
          ask_alone(env, inner, id, ask);
        }
      }
    }
    Effect::Load { lead: true, .. } => make_leader(env, inner, id, false),
    Effect::Load { lead: false, .. } => resume(env, inner, id, true),
    Effect::Adopt { envelope, .. } => adopt(env, inner, id, &envelope),
    Effect::Write(future) => {
      if write(env, inner, id, future).is_err() {
        // Released meanwhile: its callers are answered without the fleet.
        step(env, inner, id, Event::Written(Written::Skipped));
      }
    }
    Effect::Answer {
      flight,
      adopted,
      resume,
    } => end_answered(env, inner, id, flight, adopted, resume),
    Effect::Reject {
      flight,
      error,
      release,
      resume: tell_leader,
    } => {
      if let Some(release) = release {
        futures::spawn(release);
      }
      if let Some(mut flight) = flight {
        let error = match error {
          Some(error) => raw::failure_value(env, error.into()),
          None => thrown.unwrap_or_else(|| raw::undefined(env)),
        };
        flight.handle.settle(env, Err(error));
      }
      if tell_leader {
        resume(env, inner, id, false);
      }
    }
    Effect::Spawn(future) => futures::spawn(future),
    Effect::Done => {}
  }
}

/// Flight `id` ended with its value ([`Effect::Answer`]): its callers get
/// it, the JS leader is told if the fleet answered it (`tell_leader`), and
/// the refresh a stale answer calls for starts.
unsafe fn end_answered(
  env: Env,
  inner: &Rc<Inner>,
  id: u64,
  flight: Option<Flight<FlightHandle>>,
  adopted: Option<Adopted>,
  tell_leader: bool,
) {
  let refresh = match flight {
    Some(mut flight) => {
      let value = match flight.handle.answer.take() {
        Some(kept) => kept.to_js(env),
        None => raw::undefined(env),
      };
      let call = flight.handle.call.take();
      // The refresh keeps to the tiers its call chose (`l1: false`).
      let tiers = Tiers {
        force_fresh: false,
        ..flight.tiers
      };
      answer(env, &mut flight, value, adopted);
      call
        .filter(|_| adopted.is_some_and(|a| a.refresh))
        .map(|call| (call, tiers))
    }
    None => None,
  };
  if tell_leader {
    resume(env, inner, id, false);
  }
  if let Some((call, tiers)) = refresh {
    if let Some(loader) = call.loader.get(env) {
      // A refresh that cannot start leaves the stale value served: the
      // next call past it asks again.
      let _ = start_refresh(env, inner, call.key.to_js(env), loader, tiers);
    }
  }
}

/// Runs flight `id`'s ask; its answer goes to `step`.
unsafe fn ask_alone(env: Env, inner: &Rc<Inner>, id: u64, ask: Ask) {
  let asked = then_on_cache(
    env,
    inner.id,
    ask.future,
    move |env, inner, (key, acquired)| step(env, inner, id, Event::Claimed { key, acquired }),
  );
  if asked.is_err() {
    step(env, inner, id, Event::Unavailable);
  }
}

/// Runs the asks one read's answers made, answered in one turn
/// (`engine::together`): the ones still out after it, each alone.
unsafe fn ask_together(env: Env, inner: &Rc<Inner>, mut asks: Vec<(u64, Ask)>) {
  if asks.len() <= 1 {
    if let Some((id, ask)) = asks.pop() {
      ask_alone(env, inner, id, ask);
    }
    return;
  }
  let ids: Vec<u64> = asks.iter().map(|(id, _)| *id).collect();
  let group = together::together(asks, together::TOGETHER_WAIT);
  let asked = then_on_cache(env, inner.id, group, |env, inner, answered| {
    for (id, (key, acquired)) in answered.answers {
      step(env, inner, id, Event::Claimed { key, acquired });
    }
    for (id, ask) in answered.rest {
      ask_alone(env, inner, id, ask);
    }
  });
  if asked.is_err() {
    for id in ids {
      step(env, inner, id, Event::Unavailable);
    }
  }
}

/// Another instance's value answers flight `id`: parsed once, and handed
/// to the engine. A value JS cannot take (the reader's checks are Rust's)
/// is loaded instead; one the application's serializer cannot read
/// rejects the flight with its error.
unsafe fn adopt(env: Env, inner: &Rc<Inner>, id: u64, envelope: &crate::core::envelope::Envelope) {
  let parsed = if envelope.meta.negative {
    Ok(raw::null(env))
  } else {
    body::to_js(env, inner, &envelope.body)
  };
  let value = match parsed {
    Ok(value) => value,
    // The application's `deserialize` threw: its callers get the coded error
    // (lib/values.js), as a loader's would be theirs.
    Err(failure) if envelope.body.serializer() != JSON_FORMAT => {
      return reject(env, inner, id, raw::failure_value(env, failure));
    }
    Err(_) => return step(env, inner, id, Event::Unavailable),
  };
  let taken = Kept::new(env, value).and_then(|kept| Ok((kept, Held::from_js(env, value)?)));
  let Ok((kept, held)) = taken else {
    return step(env, inner, id, Event::Unavailable);
  };
  if let Some(flight) = inner.cache.borrow_mut().flight_mut(id) {
    flight.handle.answer = Some(kept);
  }
  let parsed = Event::Parsed {
    value: held,
    meta: envelope.meta,
    tags: envelope.tags.clone(),
    etag: envelope.etag.clone(),
    bytes: envelope.body.len(),
  };
  step(env, inner, id, parsed);
}

/// Tells the JS leader what flight `id` does next: run its loader, or (it
/// was answered) leave.
unsafe fn resume(env: Env, inner: &Rc<Inner>, id: u64, load: bool) {
  let run = || -> RawResult<Value> {
    let ctx = inner.helper(env, |h| &h.ctx)?;
    let resume = inner.helper(env, |h| &h.resume)?;
    let args = [ctx, raw::number(env, id as f64), raw::boolean(env, load)];
    raw::call(env, resume, &args)
  };
  if let Err(failure) = run() {
    // The leader is gone (closed, collected) or threw: nobody can run the
    // loader, so the callers get the reason.
    reject(env, inner, id, raw::failure_value(env, failure));
  }
}

/// Ends flight `id` with `error` for its callers (its lock, if any, let go).
pub unsafe fn reject(env: Env, inner: &Rc<Inner>, id: u64, error: Value) {
  let given_up = Event::Failed {
    timed_out: false,
    loader_ran: false,
  };
  let effect = inner.cache.borrow_mut().step(id, given_up);
  carry_out(env, inner, id, effect, Some(error));
}

/// `lead(ctx, id, key, loader, background, promise, waiting, since)`: the
/// JS leader takes flight `id` (`since`: ms it has been in flight already).
#[allow(clippy::too_many_arguments)]
pub unsafe fn lead(
  env: Env,
  inner: &Inner,
  id: u64,
  key: Value,
  loader: Value,
  background: bool,
  promise: Value,
  waiting: bool,
  since: f64,
) -> RawResult<Value> {
  let ctx = inner.helper(env, |h| &h.ctx)?;
  let lead = inner.helper(env, |h| &h.lead)?;
  let args = [
    ctx,
    raw::number(env, id as f64),
    key,
    loader,
    raw::boolean(env, background),
    promise,
    raw::boolean(env, waiting),
    raw::number(env, since),
  ];
  raw::call(env, lead, &args)
}

/// Leaves flight `id` without a JS leader while its first read is out
/// ([`LeadingCall`]); `key` and `loader` are its leading call's.
pub unsafe fn defer_leader(
  env: Env,
  inner: &Inner,
  id: u64,
  key: Value,
  loader: Value,
) -> RawResult<()> {
  let call = LeadingCall {
    key: Kept::new(env, key)?,
    loader: JsRef::strong(env, loader)?,
    since: std::time::Instant::now(),
  };
  if let Some(flight) = inner.cache.borrow_mut().flight_mut(id) {
    flight.handle.call = Some(call);
  }
  Ok(())
}

/// Makes flight `id`'s JS leader, which the engine held back
/// ([`defer_leader`]; `waiting`: the fleet decides first, else its loader
/// runs now). A leader that cannot be made rejects the flight's callers.
unsafe fn make_leader(env: Env, inner: &Rc<Inner>, id: u64, waiting: bool) {
  let made = {
    let cache = inner.cache.borrow();
    let Some(flight) = cache.flight(id) else {
      return;
    };
    let handle = &flight.handle;
    handle.call.as_ref().map(|call| {
      let since = call.since.elapsed().as_secs_f64() * 1000.0;
      (
        call.key.to_js(env),
        call.loader.get(env),
        since,
        handle.promise(env),
      )
    })
  };
  let led = match made {
    Some((key, Some(loader), since, Some(promise))) => {
      lead(env, inner, id, key, loader, false, promise, waiting, since).map(drop)
    }
    _ => Err(super::closed()),
  };
  if let Err(failure) = led {
    reject(env, inner, id, raw::failure_value(env, failure));
  }
}

/// At close: the flights without a JS leader (in their first read) reject
/// with `reason`, as the leader's `abort` rejects the others.
pub unsafe fn reject_unled(env: Env, inner: &Rc<Inner>, reason: Value) {
  let unled = inner.cache.borrow().unled_flights();
  for id in unled {
    reject(env, inner, id, reason);
  }
}
