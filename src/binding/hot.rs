//! The raw entry points (`napi_create_function` with the cache as data):
//! `getOrLoad` on every call, and the per-flight calls the JS leader makes.
//! A hit or a join is answered here synchronously, on the JS thread: no
//! tokio, no thread hop, no per-call closure.

use super::held::Held;
use super::key::{self, Key};
use super::raw::{self, napi_try, Env, Failure, JsRef, RawResult, Utf8, Value};
use super::{fleet, Inner};
use crate::core::error::{Code, Error, Kind};
use crate::core::options::{EntryPolicy, RawCallOptions};
use crate::engine::{Decision, Refresh};
use napi::sys;
use std::rc::Rc;

/// Declares [`Outcome`] and its `status.outcome` names once: the byte of a
/// variant is its position in the list, from 1 (0: no outcome written), and
/// `Outcome::NAMES` (exported by `names()`) is in that order.
macro_rules! outcomes {
  ($first:ident => $first_name:literal, $($variant:ident => $name:literal,)*) => {
    /// How a call was answered, written to the cache's outcome slot (a byte
    /// the JS wrapper reads right after the call, to fill `status.outcome`):
    /// setting a property from native code costs more than the whole hit.
    #[derive(Clone, Copy)]
    #[repr(u8)]
    pub(super) enum Outcome {
      $first = 1,
      $($variant,)*
    }

    impl Outcome {
      /// The `status.outcome` of byte `b` is `NAMES[b - 1]`. Read by
      /// `names()` only, which `cfg(test)` builds do not register.
      #[cfg_attr(test, allow(dead_code))]
      pub(super) const NAMES: &'static [&'static str] = &[$first_name, $($name,)*];
    }
  };
}

outcomes! {
  Hit => "hit",
  Stale => "stale",
  Negative => "negative",
  Miss => "miss",
  Coalesced => "coalesced",
}

/// The per-call options, passed positionally by the JS wrapper (it reads
/// the options object, where property access is cheap).
#[derive(Default)]
struct CallOptions {
  refuse_stale: bool,
  overrides: RawCallOptions,
}

fn option_type(name: &str, rule: &str) -> Failure {
  Failure::Coded(Error::new(
    Code::InvalidOption,
    Kind::Type,
    format!("call option `{name}` must be {rule}"),
  ))
}

unsafe fn optional_number(env: Env, value: Value, name: &str) -> RawResult<Option<f64>> {
  match raw::type_of(env, value) {
    sys::ValueType::napi_undefined => Ok(None),
    sys::ValueType::napi_number => Ok(Some(raw::get_number(env, value))),
    _ => Err(option_type(name, "a number")),
  }
}

/// `stale, ttl, hardTtl, negativeTtl, beta`, each possibly undefined.
unsafe fn read_call_options(
  env: Env,
  [stale, ttl, hard_ttl, negative_ttl, beta]: [Value; 5],
) -> RawResult<CallOptions> {
  let refuse_stale = match raw::type_of(env, stale) {
    sys::ValueType::napi_undefined => false,
    sys::ValueType::napi_boolean => !raw::get_bool(env, stale),
    _ => return Err(option_type("stale", "a boolean")),
  };
  Ok(CallOptions {
    refuse_stale,
    overrides: RawCallOptions {
      ttl: optional_number(env, ttl, "ttl")?,
      hard_ttl: optional_number(env, hard_ttl, "hardTtl")?,
      negative_ttl: optional_number(env, negative_ttl, "negativeTtl")?,
      beta: optional_number(env, beta, "beta")?,
    },
  })
}

pub(super) fn closed() -> Failure {
  Failure::Coded(Error::new(
    Code::Closed,
    Kind::Plain,
    "the cache was closed; create a new Cache to keep caching",
  ))
}

/// What the decision asks for, with the JS values taken out while the engine
/// was borrowed (calling into JS may re-enter it).
enum Action {
  /// A settled promise of the value, an outcome, maybe a refresh to start.
  Serve(Value, Outcome, Option<Refresh>),
  Stale {
    value: Value,
    refresh: bool,
    join: Option<Value>,
    counted: bool,
  },
  Join(Value),
  Lead,
}

/// The JS side of one call: the key as passed, and the loader.
struct Call<'a> {
  key: &'a Key<'a>,
  key_js: Value,
  loader: Value,
  policy: EntryPolicy,
}

/// `getOrLoad(key, loader, stale?, ttl?, hardTtl?, negativeTtl?, beta?)`.
pub unsafe extern "C" fn get_or_load(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, argc, inner) = raw::args::<7, Rc<Inner>>(env, info);
  // SAFETY: `install_raw` made this function with `raw::function` and an
  // `Rc<Inner>` as data, so the pointer is that box. The box is freed only
  // by the function's finalizer, which cannot run while the function is
  // being called, so the borrow is valid for this whole callback; it is
  // shared, and re-entrant calls (the loader calling `getOrLoad`) only take
  // shared borrows too, mutating through the `RefCell`s.
  let inner = &*inner;
  inner.set_outcome(0);
  match get_or_load_impl(env, inner, argv, argc > 2) {
    Ok((promise, outcome)) => {
      inner.set_outcome(outcome as u8);
      promise
    }
    Err(failure) => raw::rejected(env, failure),
  }
}

unsafe fn get_or_load_impl(
  env: Env,
  inner: &Rc<Inner>,
  argv: [Value; 7],
  has_options: bool,
) -> RawResult<(Value, Outcome)> {
  let [key_js, loader, stale, ttl, hard_ttl, negative_ttl, beta] = argv;
  if inner.engine.borrow().is_closed() {
    return Err(closed());
  }
  inner.apply_invalidations();
  let mut key_buf = Utf8::new();
  let key = key::read(env, key_js, &mut key_buf)?;
  if raw::type_of(env, loader) != sys::ValueType::napi_function {
    return Err(Failure::Coded(Error::new(
      Code::InvalidLoader,
      Kind::Type,
      "the loader is not a function; pass ({ key, signal }) => value or an async function",
    )));
  }
  let options = if has_options {
    read_call_options(env, [stale, ttl, hard_ttl, negative_ttl, beta])?
  } else {
    CallOptions::default()
  };
  let policy = inner
    .engine
    .borrow()
    .config()
    .entry
    .with(&options.overrides)?;
  let action = {
    let mut engine = inner.engine.borrow_mut();
    match engine.decide(key.as_str(), !options.refuse_stale) {
      Decision::Hit { value, refresh } => Action::Serve(value.resolved(env), Outcome::Hit, refresh),
      Decision::Negative { value } => Action::Serve(value.resolved(env), Outcome::Negative, None),
      Decision::Stale {
        value,
        refresh,
        join,
        counted,
      } => Action::Stale {
        value: value.to_js(env),
        refresh,
        join: join.and_then(|f| f.get(env)),
        counted,
      },
      Decision::Join { flight } => match flight.get(env) {
        Some(promise) => Action::Join(promise),
        None => Action::Lead,
      },
      Decision::Lead => Action::Lead,
    }
  };
  let call = Call {
    key: &key,
    key_js,
    loader,
    policy,
  };
  Ok(match action {
    Action::Serve(promise, outcome, refresh) => {
      if let Some(refresh) = refresh {
        let _ = start_flight(env, inner, &call, Some(refresh));
      }
      (promise, outcome)
    }
    Action::Stale {
      value,
      refresh,
      join,
      counted,
    } => {
      let flight = if refresh {
        start_flight(env, inner, &call, Some(Refresh::Stale)).ok()
      } else {
        join
      };
      let promise = match flight {
        Some(flight) if !counted => soft_wait(env, inner, flight, value)?,
        _ => {
          if !counted {
            inner.engine.borrow_mut().record_soft_wait(true);
          }
          raw::resolved(env, value)
        }
      };
      (promise, Outcome::Stale)
    }
    Action::Join(promise) => (promise, Outcome::Coalesced),
    Action::Lead => (start_flight(env, inner, &call, None)?, Outcome::Miss),
  })
}

/// Starts a load of `call.key` through the JS leader and registers it as the
/// key's flight. `refresh: None` is a foreground load.
unsafe fn start_flight(
  env: Env,
  inner: &Rc<Inner>,
  call: &Call<'_>,
  refresh: Option<Refresh>,
) -> RawResult<Value> {
  let key = call.key.as_str();
  let id = inner
    .engine
    .borrow_mut()
    .begin_flight(key, refresh, call.policy);
  let started = (|| {
    let ctx = inner.helper(env, |h| &h.ctx)?;
    let lead = inner.helper(env, |h| &h.lead)?;
    let key_arg = match call.key {
      Key::Text(_) => call.key_js,
      Key::Parts(encoded) => raw::string(env, encoded),
    };
    let args = [
      ctx,
      key_arg,
      call.key_js,
      call.loader,
      raw::number(env, id as f64),
      raw::boolean(env, refresh.is_some()),
    ];
    raw::call(env, lead, &args)
  })();
  if started.is_err() {
    let mut engine = inner.engine.borrow_mut();
    engine.fail(key, id, refresh.is_some(), false);
    engine.end_flight(key, id);
  }
  started
}

unsafe fn soft_wait(env: Env, inner: &Rc<Inner>, flight: Value, stale: Value) -> RawResult<Value> {
  let ctx = inner.helper(env, |h| &h.ctx)?;
  let wait = inner.helper(env, |h| &h.soft_wait)?;
  raw::call(env, wait, &[ctx, flight, stale])
}

/// The flight id the JS leader hands back.
pub(super) unsafe fn flight_id(env: Env, value: Value) -> u64 {
  raw::get_number(env, value) as u64
}

/// Whether a synchronous entry point still works after `close()`: the
/// leader's reports must, for the loads that were in flight.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum AfterClose {
  Works,
  Rejects,
}

/// The frame of the synchronous entry points that take a key first: reads
/// the arguments and the key, runs `body`, throws what it fails with.
pub(super) unsafe fn keyed<const N: usize>(
  env: Env,
  info: sys::napi_callback_info,
  after_close: AfterClose,
  body: impl FnOnce(&Inner, &str, [Value; N]) -> RawResult<Value>,
) -> Value {
  let (argv, _, inner) = raw::args::<N, Rc<Inner>>(env, info);
  // SAFETY: every caller of `keyed` is an entry point `install_raw` made
  // with `Rc<Inner>` data; the box outlives the callback, whose function is
  // alive while it runs (as in `get_or_load`). `body` only gets `&Inner`.
  let inner: &Inner = &*inner;
  let run = || {
    if after_close == AfterClose::Rejects && inner.engine.borrow().is_closed() {
      return Err(closed());
    }
    inner.apply_invalidations();
    let mut key_buf = Utf8::new();
    let key = key::read(env, argv[0], &mut key_buf)?;
    body(inner, key.as_str(), argv)
  };
  match run() {
    Ok(v) => v,
    Err(failure) => raw::throw(env, failure),
  }
}

/// `attachFlight(key, id, promise)`: the leader made the flight's shared
/// promise. It is attached before the loader runs, so a loader that calls
/// `getOrLoad` on its own key joins its own flight instead of recursing.
pub unsafe extern "C" fn attach_flight(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<3>(env, info, AfterClose::Works, |inner, key, argv| {
    let handle = JsRef::strong(env, argv[2])?;
    let id = flight_id(env, argv[1]);
    let attached = inner.engine.borrow_mut().attach_flight(key, id, handle);
    Ok(raw::boolean(env, attached.is_ok()))
  })
}

/// `fill(key, id, value, negative, computeMs, json?, token?)`: our loader
/// finished. With Redis, the value is also written there (conditional on the
/// flight's stamp, announced, our lock released): returns that write's
/// promise; without, whether the value was stored.
pub unsafe extern "C" fn fill(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<7>(env, info, AfterClose::Works, |inner, key, argv| {
    let held = Held::from_js(env, argv[2])?;
    let negative = raw::get_bool(env, argv[3]);
    let compute_ms = raw::get_number(env, argv[4]).max(0.0).round() as u64;
    let id = flight_id(env, argv[1]);
    let stored = {
      let mut engine = inner.engine.borrow_mut();
      engine.count_loader_run();
      engine.fill(key, id, held, negative, compute_ms)
    };
    match inner.fleet() {
      Some(fleet) => fleet::settle(env, fleet, key, id, stored, argv[5], argv[6]),
      None => Ok(raw::boolean(env, stored.is_some())),
    }
  })
}

/// `fail(key, id, background, timedOut, token?, loaderRan)`: a load failed.
pub unsafe extern "C" fn fail(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<6>(env, info, AfterClose::Works, |inner, key, argv| {
    let (background, timed_out) = (raw::get_bool(env, argv[2]), raw::get_bool(env, argv[3]));
    let id = flight_id(env, argv[1]);
    {
      let mut engine = inner.engine.borrow_mut();
      if raw::get_bool(env, argv[5]) {
        engine.count_loader_run();
      }
      engine.fail(key, id, background, timed_out);
    }
    if let Some(fleet) = inner.fleet() {
      fleet::abandon(env, fleet, key, id, argv[4])?;
    }
    Ok(raw::undefined(env))
  })
}

/// `endFlight(key, id)`: called before the flight's promise settles, so its
/// waiters resume with the key free for a new load.
pub unsafe extern "C" fn end_flight(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<2>(env, info, AfterClose::Works, |inner, key, argv| {
    let handle = inner
      .engine
      .borrow_mut()
      .end_flight(key, flight_id(env, argv[1]));
    drop(handle);
    Ok(raw::undefined(env))
  })
}

/// `recordSoftWait(servedStale)`: the outcome of a stale read that waited.
pub unsafe extern "C" fn record_soft_wait(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, _, inner) = raw::args::<1, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this callback, while its function is alive (as in `get_or_load`).
  (&*inner)
    .engine
    .borrow_mut()
    .record_soft_wait(raw::get_bool(env, argv[0]));
  raw::undefined(env)
}

/// `get(key, stale?)`: the value in memory, or undefined; with Redis, a
/// miss is answered by `peek`.
pub unsafe extern "C" fn get(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<2>(env, info, AfterClose::Rejects, |inner, key, argv| {
    let undefined = raw::undefined(env);
    let options = read_call_options(env, [argv[1], undefined, undefined, undefined, undefined])?;
    let mut engine = inner.engine.borrow_mut();
    Ok(match engine.get(key, !options.refuse_stale) {
      Some(held) => held.to_js(env),
      None => undefined,
    })
  })
}

/// `set(key, value, ttl?, hardTtl?, json?)`: `value` is already the
/// JSON-normalised copy, `json` its text (for Redis). Returns the Redis
/// write's promise, or undefined.
pub unsafe extern "C" fn set(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<5>(env, info, AfterClose::Rejects, |inner, key, argv| {
    let undefined = raw::undefined(env);
    let options = read_call_options(env, [undefined, argv[2], argv[3], undefined, undefined])?;
    let held = Held::from_js(env, argv[1])?;
    let meta = {
      let mut engine = inner.engine.borrow_mut();
      let policy = engine.config().entry.with(&options.overrides)?;
      engine.set(key, held, policy)
    };
    match inner.fleet() {
      Some(fleet) => fleet::write(env, fleet, key, meta, argv[4]),
      None => Ok(undefined),
    }
  })
}

/// `delete(key)`: true if a live entry was removed (with Redis: a promise,
/// true if Redis or memory had one).
pub unsafe extern "C" fn delete(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<1>(env, info, AfterClose::Rejects, |inner, key, _| {
    let removed = inner.engine.borrow_mut().delete(key);
    match inner.fleet() {
      Some(fleet) => fleet::delete(env, fleet, key, removed),
      None => Ok(raw::boolean(env, removed)),
    }
  })
}

/// `clear()` (with Redis: a promise).
pub unsafe extern "C" fn clear(env: Env, info: sys::napi_callback_info) -> Value {
  let (_, _, inner) = raw::args::<0, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this callback, while its function is alive (as in `get_or_load`).
  let inner: &Inner = &*inner;
  if inner.engine.borrow().is_closed() {
    return raw::throw(env, closed());
  }
  inner.engine.borrow_mut().clear();
  match inner.fleet() {
    Some(fleet) => fleet::clear(env, fleet).unwrap_or_else(|f| raw::throw(env, f)),
    None => raw::undefined(env),
  }
}

/// `stats()`: the counters and gauges as a plain object.
pub unsafe extern "C" fn stats(env: Env, info: sys::napi_callback_info) -> Value {
  let (_, _, inner) = raw::args::<0, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this statement, while its function is alive (as in `get_or_load`).
  let (metrics, gauges) = (&*inner).snapshot();
  let build = || {
    let mut object = std::ptr::null_mut();
    napi_try!(env, sys::napi_create_object(env, &mut object));
    for (name, _, _, value) in metrics.counters().into_iter().chain(gauges.gauges()) {
      let name = std::ffi::CString::new(name).unwrap_or_default();
      raw::set_property(env, object, &name, raw::number(env, value as f64))?;
    }
    Ok(object)
  };
  match build() {
    Ok(object) => object,
    Err(failure) => raw::throw(env, failure),
  }
}

/// `metrics()`: the Prometheus text format.
pub unsafe extern "C" fn metrics(env: Env, info: sys::napi_callback_info) -> Value {
  let (_, _, inner) = raw::args::<0, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this statement, while its function is alive (as in `get_or_load`).
  let (metrics, gauges) = (&*inner).snapshot();
  let text = crate::engine::metrics::prometheus(&metrics, &gauges);
  raw::string(env, &text)
}

/// `startRefresh(key, loader)`: a flight was answered with a stale value
/// from Redis; start the background refresh that value calls for (unless a
/// flight is already there, or the key backs off after a failure).
pub unsafe extern "C" fn start_refresh(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, _, inner) = raw::args::<2, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, valid for this
  // callback (as in `get_or_load`), including while `start_flight` calls
  // into JS, which may re-enter other entry points with shared borrows.
  let inner: &Rc<Inner> = &*inner;
  let run = || -> RawResult<Value> {
    let mut key_buf = Utf8::new();
    let key = key::read(env, argv[0], &mut key_buf)?;
    let (due, policy) = {
      let engine = inner.engine.borrow();
      (
        !engine.is_closed() && engine.refresh_due(key.as_str()),
        engine.config().entry,
      )
    };
    if due {
      let call = Call {
        key: &key,
        key_js: argv[0],
        loader: argv[1],
        policy,
      };
      start_flight(env, inner, &call, Some(Refresh::Stale))?;
    }
    Ok(raw::boolean(env, due))
  };
  run().unwrap_or_else(|failure| raw::throw(env, failure))
}
