//! How the embedded store holds a value: the parsed JS value itself, so a
//! hit is a reference lookup instead of a `JSON.parse` (objects by
//! `napi_ref`; primitives, which napi 9 cannot reference, by copy).

use super::raw::{self, Env, JsRef, RawResult, Value};
use napi::sys;

#[derive(Debug)]
pub enum Held {
  Object(JsRef),
  Text(String),
  Number(f64),
  Bool(bool),
  Null,
  Undefined,
}

impl Held {
  pub unsafe fn from_js(env: Env, value: Value) -> RawResult<Held> {
    Ok(match raw::type_of(env, value) {
      sys::ValueType::napi_object | sys::ValueType::napi_function => {
        Held::Object(JsRef::strong(env, value)?)
      }
      sys::ValueType::napi_string => Held::Text(raw::get_string(env, value)?),
      sys::ValueType::napi_number => Held::Number(raw::get_number(env, value)),
      sys::ValueType::napi_boolean => Held::Bool(raw::get_bool(env, value)),
      sys::ValueType::napi_null => Held::Null,
      _ => Held::Undefined,
    })
  }

  pub unsafe fn to_js(&self, env: Env) -> Value {
    match self {
      Held::Object(r) => r.get(env).unwrap_or_else(|| raw::undefined(env)),
      Held::Text(s) => raw::string(env, s),
      Held::Number(n) => raw::number(env, *n),
      Held::Bool(b) => raw::boolean(env, *b),
      Held::Null => raw::null(env),
      Held::Undefined => raw::undefined(env),
    }
  }
}
