//! The raw entry points besides `getOrLoad`: `get`, `set`, `delete`,
//! `clear`, `clearPrefix` (a namespace's clear), `peek` (get past memory, with Redis), `stats` and `metrics`.
//! With a fleet, the ones that reach Redis return a promise.

use super::args::{read_call_options, read_tags};
use super::body;
use super::futures::promise_on_cache;
use super::held::Held;
use super::key;
use super::raw::{self, napi_try, Env, RawResult, Utf8, Value};
use super::{closed, Inner};
use crate::core::body::Body;
use crate::engine::Step;
use napi::sys;
use std::rc::Rc;

/// The frame of the entry points that take a key first: reads the
/// arguments and the key (refused after `close()`), runs `body`, throws
/// what it fails with.
unsafe fn keyed<const N: usize>(
  env: Env,
  info: sys::napi_callback_info,
  body: impl FnOnce(&Inner, &str, [Value; N]) -> RawResult<Value>,
) -> Value {
  let (argv, _, inner) = raw::args::<N, Rc<Inner>>(env, info);
  // SAFETY: every caller of `keyed` is an entry point `install_raw` made
  // with `Rc<Inner>` data; the box outlives the callback, whose function is
  // alive while it runs (as in `entry::get_or_load`). `body` only gets `&Inner`.
  let inner: &Inner = &*inner;
  let run = || {
    if inner.cache.borrow().is_closed() {
      return Err(closed());
    }
    let mut key_buf = Utf8::new();
    let key = key::read(env, argv[0], &mut key_buf)?;
    // Reading an array key runs its getters, which may close the cache.
    if inner.cache.borrow().is_closed() {
      return Err(closed());
    }
    body(inner, key.as_str(), argv)
  };
  match run() {
    Ok(v) => v,
    Err(failure) => raw::throw(env, failure),
  }
}

/// `get(key, stale?)`: the value in memory, or undefined; with Redis, a
/// miss is answered by `peek`.
pub unsafe extern "C" fn get(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<2>(env, info, |inner, key, argv| {
    let undefined = raw::undefined(env);
    let options = read_call_options(
      env,
      [
        argv[1], undefined, undefined, undefined, undefined, undefined, undefined,
      ],
    )?;
    let mut cache = inner.cache.borrow_mut();
    Ok(match cache.get(key, !options.refuse_stale) {
      Some(held) => held.value(env),
      None => undefined,
    })
  })
}

/// `set(key, value, ttl?, hardTtl?, body?, tags?, format?)`: `value` is
/// already the normalised copy, `body` its JSON text, or with `format` its
/// bytes (for Redis: `binding::body::read`). Returns the Redis write's
/// promise, or undefined.
pub unsafe extern "C" fn set(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<7>(env, info, |inner, key, argv| {
    let undefined = raw::undefined(env);
    let options = read_call_options(
      env,
      [
        undefined, argv[2], argv[3], undefined, undefined, undefined, undefined,
      ],
    )?;
    let tags = read_tags(env, argv[5])?;
    let held = Held::from_js(env, argv[1])?;
    let body = body::read(env, argv[4], argv[6])?.unwrap_or_else(|| Body::Json("null".into()));
    let write = {
      let mut cache = inner.cache.borrow_mut();
      let policy = cache.config().entry.with(&options.overrides)?;
      cache.set(key, held, policy, body, tags)
    };
    match write {
      Some(write) => promise_on_cache(env, inner.id, write, |env, written| {
        raw::boolean(env, written)
      }),
      None => Ok(undefined),
    }
  })
}

/// `delete(key)`: true if a live entry was removed (with Redis: a promise,
/// true if Redis or memory had one).
pub unsafe extern "C" fn delete(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<1>(env, info, |inner, key, _| {
    let deleted = inner.cache.borrow_mut().delete(key);
    boolean_answer(env, inner, deleted)
  })
}

/// `expire(key)`: true if a fresh entry was made stale (with Redis: a
/// promise, true if Redis or memory had one).
pub unsafe extern "C" fn expire(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<1>(env, info, |inner, key, _| {
    let expired = inner.cache.borrow_mut().expire(key);
    boolean_answer(env, inner, expired)
  })
}

/// A yes/no answer now, or (with Redis) a promise of it.
unsafe fn boolean_answer(env: Env, inner: &Inner, answer: Step<bool, bool>) -> RawResult<Value> {
  match answer {
    Step::Done(yes) => Ok(raw::boolean(env, yes)),
    Step::Later(later) => promise_on_cache(env, inner.id, later, |env, yes| raw::boolean(env, yes)),
  }
}

/// `deleteByTag(tags)`: every entry carrying one of `tags` is invalid from
/// now on (with Redis: a promise, settled once every instance was told, or
/// the invalidations were kept for auto-recovery).
pub unsafe extern "C" fn delete_by_tag(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, _, inner) = raw::args::<1, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this callback, while its function is alive (as in `entry::get_or_load`).
  let inner: &Inner = &*inner;
  let run = || {
    if inner.cache.borrow().is_closed() {
      return Err(closed());
    }
    let tags = read_tags(env, argv[0])?;
    let sent = inner.cache.borrow_mut().delete_by_tag(tags.as_slice());
    match sent {
      Some(sent) => promise_on_cache(env, inner.id, sent, |env, ()| raw::undefined(env)),
      None => Ok(raw::undefined(env)),
    }
  };
  run().unwrap_or_else(|failure| raw::throw(env, failure))
}

/// `clear()` (with Redis: a promise).
pub unsafe extern "C" fn clear(env: Env, info: sys::napi_callback_info) -> Value {
  let (_, _, inner) = raw::args::<0, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this callback, while its function is alive (as in `entry::get_or_load`).
  let inner: &Inner = &*inner;
  if inner.cache.borrow().is_closed() {
    return raw::throw(env, closed());
  }
  let clear = inner.cache.borrow_mut().clear();
  match clear {
    Some(clear) => promise_on_cache(env, inner.id, clear, |env, ()| raw::undefined(env))
      .unwrap_or_else(|failure| raw::throw(env, failure)),
    None => raw::undefined(env),
  }
}

/// `clearPrefix(namespace)`: a namespace's `clear()`. `namespace` is the
/// view's names as an array key (`['users', 'eu']`); the keys starting with
/// its encoding and `:` (`users:eu:`) are cleared (with Redis: a promise).
pub unsafe extern "C" fn clear_prefix(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<1>(env, info, |inner, namespace, _| {
    let prefix = format!("{namespace}:");
    let clear = inner.cache.borrow_mut().clear_prefix(&prefix);
    match clear {
      Some(clear) => promise_on_cache(env, inner.id, clear, |env, ()| raw::undefined(env)),
      None => Ok(raw::undefined(env)),
    }
  })
}

/// `peek(key, stale?)`: `get` past the L1: the value's JSON text, or
/// `[format, bytes]` for JS to decode (`binding::body::stored`), or null
/// (absent, negative, or stale when `stale` is false).
pub unsafe extern "C" fn peek(env: Env, info: sys::napi_callback_info) -> Value {
  keyed::<2>(env, info, |inner, key, argv| {
    let allow_stale =
      raw::type_of(env, argv[1]) != sys::ValueType::napi_boolean || raw::get_bool(env, argv[1]);
    let peek = inner.cache.borrow().peek(key, allow_stale);
    let peek = peek.ok_or_else(closed)?;
    promise_on_cache(env, inner.id, peek, |env, found| match found {
      Some(e) => body::stored(env, &e.body).unwrap_or_else(|failure| raw::throw(env, failure)),
      None => raw::null(env),
    })
  })
}

/// `stats()`: the counters and gauges as a plain object.
pub unsafe extern "C" fn stats(env: Env, info: sys::napi_callback_info) -> Value {
  let ([remembered], _, inner) = raw::args::<1, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only
  // within this call, while its function is alive (as in `entry::get_or_load`).
  credit_remembered(env, &*inner, remembered);
  let cache = (&*inner).cache.borrow();
  let ((metrics, gauges), last) = (cache.snapshot(), cache.last_problem());
  drop(cache);
  let build = || {
    let mut object = std::ptr::null_mut();
    napi_try!(env, sys::napi_create_object(env, &mut object));
    for (name, _, _, value) in metrics.counters().into_iter().chain(gauges.gauges()) {
      let name = std::ffi::CString::new(name).unwrap_or_default();
      raw::set_property(env, object, &name, raw::number(env, value as f64))?;
    }
    let last = match last {
      Some(problem) => raw::string(env, problem.code.as_str()),
      None => raw::null(env),
    };
    raw::set_property(env, object, c"lastRedisError", last)?;
    Ok(object)
  };
  match build() {
    Ok(object) => object,
    Err(failure) => raw::throw(env, failure),
  }
}

/// `metrics()`: the Prometheus text format.
pub unsafe extern "C" fn metrics(env: Env, info: sys::napi_callback_info) -> Value {
  let ([remembered], _, inner) = raw::args::<1, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only
  // within this call, while its function is alive (as in `entry::get_or_load`).
  credit_remembered(env, &*inner, remembered);
  let cache = (&*inner).cache.borrow();
  let ((metrics, gauges), last) = (cache.snapshot(), cache.last_problem());
  drop(cache);
  let last = last.map(|problem| problem.code.as_str());
  let text = crate::engine::metrics::prometheus(&metrics, &gauges, last);
  raw::string(env, &text)
}

/// `stats(remembered)`, `metrics(remembered)`: the hits the JS wrapper
/// answered from what it remembered since it last asked (a number; any
/// other value counts none) are counted first.
unsafe fn credit_remembered(env: Env, inner: &Inner, remembered: Value) {
  if raw::type_of(env, remembered) == sys::ValueType::napi_number {
    let hits = raw::get_number(env, remembered);
    if hits.is_finite() && hits >= 1.0 {
      inner.cache.borrow_mut().credit_hits(hits as u64);
    }
  }
}
