//! The Redis side of the entry points: each call here starts a future on
//! napi's tokio runtime and returns its promise; the fleet protocol itself
//! is `engine::fleet`. The values cross as JSON text, parsed once per
//! flight by the JS leader.

use super::held::Held;
use super::hot::{flight_id, keyed, AfterClose};
use super::raw::{self, napi_try, Env, RawResult, Value};
use crate::core::envelope::{Envelope, Meta};
use crate::engine::fleet::{Acquired, Fleet, Terms};
use napi::bindgen_prelude::execute_tokio_future;
use napi::sys;
use std::sync::Arc;

type Fut<T> = std::pin::Pin<Box<dyn std::future::Future<Output = napi::Result<T>> + Send>>;

/// Runs `future` on tokio; its output becomes a JS value on the JS thread.
/// `to_js` gets the env napi-rs resolves the promise with: that is the
/// env the binding's contract speaks of inside it (`binding/raw.rs`).
unsafe fn promise<T: Send + 'static>(
  env: Env,
  future: Fut<T>,
  to_js: impl FnOnce(Env, T) -> Value + Send + 'static,
) -> RawResult<Value> {
  execute_tokio_future(env, future, move |env, value| Ok(to_js(env, value)))
    .map_err(|e| raw::Failure::Coded(internal(e)))
}

fn internal(e: napi::Error) -> crate::core::error::Error {
  crate::core::error::Error::new(
    crate::core::error::Code::Internal,
    crate::core::error::Kind::Plain,
    format!("internal: {e}"),
  )
}

/// An optional JS string argument (a JSON text or a lock token).
unsafe fn optional_string(env: Env, value: Value) -> RawResult<Option<String>> {
  match raw::type_of(env, value) {
    sys::ValueType::napi_string => Ok(Some(raw::get_string(env, value)?)),
    _ => Ok(None),
  }
}

unsafe fn set_number(env: Env, object: Value, name: &std::ffi::CStr, n: u64) -> RawResult<()> {
  raw::set_property(env, object, name, raw::number(env, n as f64))
}

/// `{ kind, json, freshUntil, hardUntil, computeMs, stamp, negative, token }`.
unsafe fn acquired_to_js(env: Env, acquired: Acquired) -> RawResult<Value> {
  let mut object = std::ptr::null_mut();
  napi_try!(env, sys::napi_create_object(env, &mut object));
  let (kind, envelope, token) = match acquired {
    Acquired::Value(e) => ("value", Some(e), None),
    Acquired::Stale(e) => ("stale", Some(e), None),
    Acquired::Load { token } => ("load", None, token),
  };
  raw::set_property(env, object, c"kind", raw::string(env, kind))?;
  if let Some(e) = envelope {
    raw::set_property(env, object, c"json", raw::string(env, &e.json))?;
    set_number(env, object, c"freshUntil", e.meta.fresh_until)?;
    set_number(env, object, c"hardUntil", e.meta.hard_until)?;
    set_number(env, object, c"computeMs", e.meta.compute_ms)?;
    set_number(env, object, c"stamp", e.meta.stamp)?;
    raw::set_property(env, object, c"negative", raw::boolean(env, e.meta.negative))?;
  }
  if let Some(token) = token {
    raw::set_property(env, object, c"token", raw::string(env, &token))?;
  }
  Ok(object)
}

/// The terms a shared value must meet to answer flight `id` of `key`.
fn terms(inner: &super::Inner, key: &str, id: u64) -> Terms {
  let engine = inner.engine.borrow();
  let (accept_stale, newer_than) = engine.flight_terms(key, id).unwrap_or((false, None));
  Terms {
    now: engine.now(),
    accept_stale,
    newer_than,
  }
}

/// `acquire(key, id, readFirst)`: who loads this flight (see
/// `Fleet::acquire`).
pub unsafe extern "C" fn acquire(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<3>(env, info, AfterClose::Works, |inner, key, argv| {
    let fleet = inner.fleet().ok_or_else(super::hot::closed)?;
    let id = flight_id(env, argv[1]);
    let read_first = raw::get_bool(env, argv[2]);
    let terms = terms(inner, key, id);
    let key = key.to_string();
    let future: Fut<Acquired> =
      Box::pin(async move { Ok(fleet.acquire(&key, id, terms, read_first).await) });
    promise(env, future, |env, acquired| {
      acquired_to_js(env, acquired).unwrap_or_else(|_| raw::undefined(env))
    })
  })
}

/// `readMany(keys, ids)`: the first read of many flights in one pipeline;
/// a promise of an array with, per flight, its answer or `null` (go on with
/// `acquire(key, id, false)`).
pub unsafe extern "C" fn read_many(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, _, inner) = raw::args::<2, std::rc::Rc<super::Inner>>(env, info);
  // SAFETY: an entry point `install_raw` made with `Rc<Inner>` data, so the
  // pointer is that box, alive while this function runs; borrowed shared
  // and only until this callback returns (the future gets owned strings and
  // an `Arc<Fleet>`, never `inner`).
  let inner: &super::Inner = &*inner;
  let run = || -> RawResult<Value> {
    let fleet = inner.fleet().ok_or_else(super::hot::closed)?;
    let mut len = 0u32;
    napi_try!(env, sys::napi_get_array_length(env, argv[0], &mut len));
    let mut requests = Vec::with_capacity(len as usize);
    for i in 0..len {
      let (mut key, mut id) = (std::ptr::null_mut(), std::ptr::null_mut());
      napi_try!(env, sys::napi_get_element(env, argv[0], i, &mut key));
      napi_try!(env, sys::napi_get_element(env, argv[1], i, &mut id));
      let key = raw::get_string(env, key)?;
      let terms = terms(inner, &key, flight_id(env, id));
      requests.push((key, terms));
    }
    let future: Fut<Vec<Option<Acquired>>> =
      Box::pin(async move { Ok(fleet.read_many(&requests).await) });
    promise(env, future, |env, answers| {
      let mut array = std::ptr::null_mut();
      sys::napi_create_array_with_length(env, answers.len(), &mut array);
      for (i, answer) in answers.into_iter().enumerate() {
        let value = match answer {
          Some(acquired) => acquired_to_js(env, acquired).unwrap_or_else(|_| raw::null(env)),
          None => raw::null(env),
        };
        sys::napi_set_element(env, array, i as u32, value);
      }
      array
    })
  };
  run().unwrap_or_else(|failure| raw::throw(env, failure))
}

/// `acceptsStale(key, id)`: whether a stale value may still answer the
/// flight (no caller refusing stale values joined it meanwhile).
pub unsafe extern "C" fn accepts_stale(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<2>(env, info, AfterClose::Works, |inner, key, argv| {
    let terms = inner
      .engine
      .borrow()
      .flight_terms(key, flight_id(env, argv[1]));
    Ok(raw::boolean(env, terms.is_some_and(|(accept, _)| accept)))
  })
}

/// `adopt(key, id, value, freshUntil, hardUntil, computeMs, stamp, negative)`:
/// the flight was answered by another instance's value.
pub unsafe extern "C" fn adopt(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<8>(env, info, AfterClose::Works, |inner, key, argv| {
    let held = Held::from_js(env, argv[2])?;
    let number = |v: Value| raw::get_number(env, v).max(0.0) as u64;
    let meta = Meta {
      fresh_until: number(argv[3]),
      hard_until: number(argv[4]),
      compute_ms: number(argv[5]),
      stamp: number(argv[6]),
      negative: raw::get_bool(env, argv[7]),
    };
    let adopted = inner
      .engine
      .borrow_mut()
      .adopt(key, flight_id(env, argv[1]), held, meta);
    Ok(raw::boolean(env, adopted))
  })
}

/// After our loader's value was stored in memory (`stored`), writes it to
/// Redis and releases the lock; a superseded flight only releases. The
/// promise gives 1 (written), 0 (Redis kept a newer value: forget ours) or
/// -1 (not written).
pub unsafe fn settle(
  env: Env,
  fleet: Arc<Fleet>,
  key: &str,
  id: u64,
  stored: Option<Meta>,
  json: Value,
  token: Value,
) -> RawResult<Value> {
  let token = optional_string(env, token)?;
  let key = key.to_string();
  let future: Fut<i32> = match (stored, optional_string(env, json)?) {
    (Some(meta), Some(json)) => Box::pin(async move {
      Ok(
        match fleet.settle(&key, id, Envelope { meta, json }, token).await {
          Some(true) => 1,
          Some(false) => 0,
          None => -1,
        },
      )
    }),
    _ => Box::pin(async move {
      fleet.abandon(&key, id, token).await;
      Ok(-1)
    }),
  };
  promise(env, future, |env, outcome| {
    raw::number(env, f64::from(outcome))
  })
}

/// `forget(key)`: Redis kept a newer value than the one we just stored.
pub unsafe extern "C" fn forget(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<1>(env, info, AfterClose::Works, |inner, key, _| {
    inner.engine.borrow_mut().forget(key);
    Ok(raw::undefined(env))
  })
}

/// `releaseLock(key, id, token)`: a flight given up while it was winning
/// the lock lets go of it.
pub unsafe extern "C" fn release_lock(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<3>(env, info, AfterClose::Works, |inner, key, argv| {
    if let Some(fleet) = inner.fleet() {
      abandon(env, fleet, key, flight_id(env, argv[1]), argv[2])?;
    }
    Ok(raw::undefined(env))
  })
}

/// A failed flight releases its lock.
pub unsafe fn abandon(
  env: Env,
  fleet: Arc<Fleet>,
  key: &str,
  id: u64,
  token: Value,
) -> RawResult<()> {
  let token = optional_string(env, token)?;
  let key = key.to_string();
  napi::bindgen_prelude::spawn(async move { fleet.abandon(&key, id, token).await });
  Ok(())
}

/// `set` with Redis: writes the envelope of what memory now holds.
pub unsafe fn write(
  env: Env,
  fleet: Arc<Fleet>,
  key: &str,
  meta: Meta,
  json: Value,
) -> RawResult<Value> {
  let json = optional_string(env, json)?.unwrap_or_else(|| "null".to_string());
  let key = key.to_string();
  let future: Fut<bool> =
    Box::pin(async move { Ok(fleet.write(&key, Envelope { meta, json }).await) });
  promise(env, future, |env, written| raw::boolean(env, written))
}

pub unsafe fn delete(
  env: Env,
  fleet: Arc<Fleet>,
  key: &str,
  removed_here: bool,
) -> RawResult<Value> {
  let key = key.to_string();
  let future: Fut<bool> =
    Box::pin(async move { Ok(fleet.delete(&key).await.unwrap_or(false) || removed_here) });
  promise(env, future, |env, removed| raw::boolean(env, removed))
}

pub unsafe fn clear(env: Env, fleet: Arc<Fleet>) -> RawResult<Value> {
  let future: Fut<()> = Box::pin(async move {
    fleet.clear().await;
    Ok(())
  });
  promise(env, future, |env, ()| raw::undefined(env))
}

/// `peek(key, stale?)`: `get` past the L1: the value's JSON text, or null
/// (absent, negative, or stale when `stale` is false).
pub unsafe extern "C" fn peek(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<2>(env, info, AfterClose::Rejects, |inner, key, argv| {
    let fleet = inner.fleet().ok_or_else(super::hot::closed)?;
    let allow_stale =
      raw::type_of(env, argv[1]) != sys::ValueType::napi_boolean || raw::get_bool(env, argv[1]);
    let now = inner.engine.borrow().now();
    let key = key.to_string();
    let future: Fut<Option<Envelope>> = Box::pin(async move {
      Ok(
        fleet
          .peek(&key, now)
          .await
          .filter(|e| !e.meta.negative && (now < e.meta.fresh_until || allow_stale)),
      )
    });
    promise(env, future, |env, found| match found {
      Some(e) => raw::string(env, &e.json),
      None => raw::null(env),
    })
  })
}
