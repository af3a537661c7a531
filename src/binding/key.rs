//! Reading a key from JS: a string, or an array of strings and finite
//! numbers, encoded by `core::key`.

use super::raw::{self, napi_try, Env, RawResult, Text, Utf8, Value};
use crate::core::key::{self, KeyBuilder, Part};
use napi::sys;

pub enum Key<'a> {
  /// A string key, as it is.
  Text(Text<'a>),
  /// An encoded array key.
  Parts(String),
}

impl Key<'_> {
  pub fn as_str(&self) -> &str {
    match self {
      Key::Text(t) => t.as_str(),
      Key::Parts(s) => s,
    }
  }
}

/// Reads a key; a short string key is read into `buf`, without allocating.
pub unsafe fn read(env: Env, value: Value, buf: &mut Utf8) -> RawResult<Key<'_>> {
  match raw::type_of(env, value) {
    sys::ValueType::napi_string => {
      let text = buf.read(env, value)?;
      key::check_string_key(text.as_str())?;
      Ok(Key::Text(text))
    }
    sys::ValueType::napi_object => {
      let mut is_array = false;
      napi_try!(env, sys::napi_is_array(env, value, &mut is_array));
      if !is_array {
        return Err(not_a_key("an object").into());
      }
      let mut len = 0u32;
      napi_try!(env, sys::napi_get_array_length(env, value, &mut len));
      let mut builder = KeyBuilder::default();
      let mut part_buf = Utf8::new();
      for i in 0..len {
        let mut part = std::ptr::null_mut();
        napi_try!(env, sys::napi_get_element(env, value, i, &mut part));
        match raw::type_of(env, part) {
          sys::ValueType::napi_string => {
            builder.push(Part::Text(part_buf.read(env, part)?.as_str()))?
          }
          sys::ValueType::napi_number => builder.push(Part::Number(raw::get_number(env, part)))?,
          other => {
            return Err(
              key::invalid(format!(
                "key part {i} is {}; parts must be strings or finite numbers",
                describe(other)
              ))
              .into(),
            )
          }
        }
      }
      Ok(Key::Parts(builder.finish()?))
    }
    other => Err(not_a_key(describe(other)).into()),
  }
}

fn not_a_key(what: &str) -> crate::core::error::Error {
  key::invalid(format!(
    "the key is {what}; give a non-empty string or an array of strings and numbers, e.g. ['user', tenantId, id]"
  ))
}

fn describe(t: sys::napi_valuetype) -> &'static str {
  match t {
    sys::ValueType::napi_undefined => "undefined",
    sys::ValueType::napi_null => "null",
    sys::ValueType::napi_boolean => "a boolean",
    sys::ValueType::napi_number => "a number",
    sys::ValueType::napi_string => "a string",
    sys::ValueType::napi_symbol => "a symbol",
    sys::ValueType::napi_object => "an object",
    sys::ValueType::napi_function => "a function",
    sys::ValueType::napi_bigint => "a bigint",
    _ => "not a string",
  }
}
