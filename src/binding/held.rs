//! How the embedded store holds a value: the parsed JS value itself, so a
//! hit is a reference lookup instead of a `JSON.parse` (objects by
//! `napi_ref`; primitives, which napi 9 cannot reference, by copy), plus the
//! settled promise of it, made on the first hit and handed to every later
//! one: a resolved promise never changes, and making one per hit was most
//! of a hit's cost.

use super::raw::{self, Env, JsRef, RawResult, Value};
use napi::sys;
use std::cell::OnceCell;

#[derive(Debug)]
pub struct Held {
  value: HeldValue,
  resolved: OnceCell<JsRef>,
}

#[derive(Debug)]
enum HeldValue {
  Object(JsRef),
  /// UTF-16 code units, so a string with a lone surrogate comes back as it
  /// went in (UTF-8 would turn it into U+FFFD).
  Text(Vec<u16>),
  Number(f64),
  Bool(bool),
  Null,
  Undefined,
}

impl Held {
  pub unsafe fn from_js(env: Env, value: Value) -> RawResult<Held> {
    let held = Held {
      value: HeldValue::from_js(env, value)?,
      resolved: OnceCell::new(),
    };
    // Resolving a promise with an object reads its `then`, which can run
    // user code (a getter on Object.prototype) that calls back into the
    // cache. So an object's promise is made here, before the value is
    // stored, and not on its first hit, while the engine is borrowed.
    if let HeldValue::Object(_) = held.value {
      held.resolved(env);
    }
    Ok(held)
  }

  /// `value` with `promise`, a promise already fulfilled with it (the
  /// flight's), as its settled promise.
  pub unsafe fn settled(env: Env, value: Value, promise: Option<JsRef>) -> RawResult<Held> {
    let resolved = OnceCell::new();
    if let Some(promise) = promise {
      let _ = resolved.set(promise);
    }
    let held = Held {
      value: HeldValue::from_js(env, value)?,
      resolved,
    };
    if let (HeldValue::Object(_), None) = (&held.value, held.resolved.get()) {
      held.resolved(env);
    }
    Ok(held)
  }

  pub unsafe fn to_js(&self, env: Env) -> Value {
    self.value.to_js(env)
  }

  /// A promise resolved with the value; the same one on every call. Made
  /// on the first call for a primitive (which runs no user code), at
  /// `from_js` for an object.
  pub unsafe fn resolved(&self, env: Env) -> Value {
    if let Some(promise) = self.resolved.get().and_then(|r| r.get(env)) {
      return promise;
    }
    let promise = raw::resolved(env, self.value.to_js(env));
    if let Ok(reference) = JsRef::strong(env, promise) {
      let _ = self.resolved.set(reference);
    }
    promise
  }
}

impl HeldValue {
  unsafe fn from_js(env: Env, value: Value) -> RawResult<HeldValue> {
    Ok(match raw::type_of(env, value) {
      sys::ValueType::napi_object | sys::ValueType::napi_function => {
        HeldValue::Object(JsRef::strong(env, value)?)
      }
      sys::ValueType::napi_string => HeldValue::Text(raw::get_string_utf16(env, value)?),
      sys::ValueType::napi_number => HeldValue::Number(raw::get_number(env, value)),
      sys::ValueType::napi_boolean => HeldValue::Bool(raw::get_bool(env, value)),
      sys::ValueType::napi_null => HeldValue::Null,
      _ => HeldValue::Undefined,
    })
  }

  unsafe fn to_js(&self, env: Env) -> Value {
    match self {
      HeldValue::Object(r) => r.get(env).unwrap_or_else(|| raw::undefined(env)),
      HeldValue::Text(units) => raw::string_utf16(env, units),
      HeldValue::Number(n) => raw::number(env, *n),
      HeldValue::Bool(b) => raw::boolean(env, *b),
      HeldValue::Null => raw::null(env),
      HeldValue::Undefined => raw::undefined(env),
    }
  }
}
