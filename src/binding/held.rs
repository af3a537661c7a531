//! How the embedded store holds a value: the settled promise of the parsed
//! JS value, handed to every hit (a resolved promise never changes, and
//! making one per hit was most of a hit's cost; a hit is a reference lookup
//! instead of a `JSON.parse`). An object or a string is held through that
//! promise alone, which keeps it alive: one `napi_ref` per entry, not two
//! (each is ~80 bytes in Node 20, bench/RESULTS.md, memory), and a string
//! is not copied (a UTF-16 copy beside the JS string tripled what a string
//! value cost: bench/L1BYTES.md). Numbers, booleans, null and undefined are
//! kept by copy and their promise is made on the first hit.
//!
//! A `Held` is in every entry of the store, so it is kept small: the env
//! once for both references (bare `napi_ref`s, not two `JsRef`s that would
//! each carry it). 32 bytes.

use super::raw::{self, Env, JsRef, RawResult, Value};
use napi::sys;
use std::cell::Cell;
use std::ptr;

#[derive(Debug)]
pub struct Held {
  /// The env both references were made on (the entry's cache belongs to it).
  env: Env,
  value: HeldValue,
  /// A strong `napi_ref` to the settled promise of the value, or null until
  /// one is made.
  resolved: Cell<sys::napi_ref>,
}

#[derive(Debug)]
enum HeldValue {
  /// An object, function or string: it lives in the settled promise (a
  /// string as it was, lone surrogates and all).
  InPromise,
  Number(f64),
  Bool(bool),
  Null,
  Undefined,
}

impl Held {
  pub unsafe fn from_js(env: Env, value: Value) -> RawResult<Held> {
    Held::settled(env, value, None)
  }

  /// `value` held with `promise`, a promise already fulfilled with it (the
  /// flight's), as its settled promise; without one, an object's is made
  /// here.
  pub unsafe fn settled(env: Env, value: Value, promise: Option<JsRef>) -> RawResult<Held> {
    let held = Held {
      env,
      value: HeldValue::from_js(env, value)?,
      // The flight's `JsRef` was made on this env: a cache lives on one.
      resolved: Cell::new(promise.map_or(ptr::null_mut(), JsRef::into_raw)),
    };
    // Resolving a promise with an object reads its `then`, which can run
    // user code (a getter on Object.prototype) that calls back into the
    // cache. So an object's promise is made here, before the value is
    // stored, and not on its first hit, while the engine is borrowed. It is
    // also all that keeps the object.
    if let (HeldValue::InPromise, true) = (&held.value, held.resolved.get().is_null()) {
      let promise = raw::resolved(env, value);
      held.resolved.set(raw::create_reference(env, promise, 1)?);
    }
    Ok(held)
  }

  /// Something that gives the value: a number, boolean, null or undefined
  /// itself, an object or a string as its settled promise (the only
  /// reference kept to it). Resolving a promise with either gives the value.
  pub unsafe fn value_or_promise(&self, env: Env) -> Value {
    match self.value {
      HeldValue::InPromise => self.resolved(env),
      _ => self.value.to_js(env),
    }
  }

  /// A promise resolved with the value; the same one on every call. Made
  /// on the first call for a primitive (which runs no user code), at
  /// `from_js` for an object.
  #[inline]
  pub unsafe fn resolved(&self, env: Env) -> Value {
    let cached = self.resolved.get();
    if !cached.is_null() {
      if let Some(promise) = raw::reference_value(env, cached) {
        return promise;
      }
    }
    let promise = raw::resolved(env, self.value.to_js(env));
    if cached.is_null() {
      if let Ok(reference) = raw::create_reference(env, promise, 1) {
        self.resolved.set(reference);
      }
    }
    promise
  }
}

impl Drop for Held {
  fn drop(&mut self) {
    // SAFETY: both references were made by `raw::create_reference` on
    // `self.env` (in `from_js` and `resolved`, the only places that set
    // them) and are deleted here only, once. A `Held` is not `Send` (raw
    // pointers), so this runs on the env's JS thread; it lives in an
    // engine owned by an `Inner`, which is freed in a napi call or a napi
    // finalizer while the env is alive, as `JsRef`'s `Drop` explains.
    unsafe {
      let promise = self.resolved.get();
      if !promise.is_null() {
        raw::delete_reference(self.env, promise);
      }
    }
  }
}

impl HeldValue {
  unsafe fn from_js(env: Env, value: Value) -> RawResult<HeldValue> {
    Ok(match raw::type_of(env, value) {
      sys::ValueType::napi_object | sys::ValueType::napi_function | sys::ValueType::napi_string => {
        HeldValue::InPromise
      }
      sys::ValueType::napi_number => HeldValue::Number(raw::get_number(env, value)),
      sys::ValueType::napi_boolean => HeldValue::Bool(raw::get_bool(env, value)),
      sys::ValueType::napi_null => HeldValue::Null,
      _ => HeldValue::Undefined,
    })
  }

  unsafe fn to_js(&self, env: Env) -> Value {
    match self {
      // Never asked for: its promise is made with the `Held`.
      HeldValue::InPromise => raw::undefined(env),
      HeldValue::Number(n) => raw::number(env, *n),
      HeldValue::Bool(b) => raw::boolean(env, *b),
      HeldValue::Null => raw::null(env),
      HeldValue::Undefined => raw::undefined(env),
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_held_value_is_four_words() {
    assert_eq!(std::mem::size_of::<HeldValue>(), 16);
    assert_eq!(std::mem::size_of::<Held>(), 32);
  }
}
