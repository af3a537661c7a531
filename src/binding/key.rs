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
      check_text(env, value, text)
    }
    other => read_other_coded(env, value, other),
  }
}

/// As [`read`], a string key first: Node-API checks the type itself, so a
/// string key costs no `napi_typeof`.
pub unsafe fn read_string_first(env: Env, value: Value, buf: &mut Utf8) -> RawResult<Key<'_>> {
  match buf.read_if_string(env, value)? {
    Some(text) => check_text(env, value, text),
    None => read_other_coded(env, value, raw::type_of(env, value)),
  }
}

/// [`read_other`], where JS that throws while the key is read (a revoked
/// Proxy, a getter or trap that throws) makes `ERR_HERDCACHE_INVALID_KEY`
/// with the exception as its cause.
unsafe fn read_other_coded(
  env: Env,
  value: Value,
  t: sys::napi_valuetype,
) -> RawResult<Key<'static>> {
  raw::coded_throw(env, read_other(env, value, t), || {
    key::invalid(
      "the key could not be read: reading it threw (a revoked Proxy, or a getter or Proxy trap that throws; the error is this one's `cause`); give a non-empty string or an array of strings and numbers".to_string(),
    )
  })
}

/// A string key, read: refused if it lost a lone surrogate, is empty or too long.
#[inline(always)]
unsafe fn check_text<'a>(env: Env, value: Value, text: Text<'a>) -> RawResult<Key<'a>> {
  check_lossless(env, value, text.as_str(), None)?;
  key::check_string_key(text.as_str())?;
  Ok(Key::Text(text))
}

/// A key that is not a string (`t` its type): an array of parts, or refused.
unsafe fn read_other(env: Env, value: Value, t: sys::napi_valuetype) -> RawResult<Key<'static>> {
  match t {
    sys::ValueType::napi_object => {
      let mut is_array = false;
      napi_try!(env, sys::napi_is_array(env, value, &mut is_array));
      let mut len = 0u32;
      if is_array {
        napi_try!(env, sys::napi_get_array_length(env, value, &mut len));
      } else if array_is_array(env, value)? {
        // A Proxy over an array (Vue's and MobX's reactive arrays):
        // `napi_is_array` says no, `Array.isArray` yes; read through its traps.
        let length = raw::get_property(env, value, c"length")?;
        let n = raw::get_number(env, length);
        if !(n >= 0.0 && n <= u32::MAX as f64 && n.fract() == 0.0) {
          return Err(not_a_key("an array-like Proxy without a valid length").into());
        }
        len = n as u32;
      } else {
        return Err(not_a_key("an object").into());
      }
      let mut builder = KeyBuilder::default();
      let mut part_buf = Utf8::new();
      for i in 0..len {
        let mut part = std::ptr::null_mut();
        napi_try!(env, sys::napi_get_element(env, value, i, &mut part));
        match raw::type_of(env, part) {
          sys::ValueType::napi_string => {
            let text = part_buf.read(env, part)?;
            check_lossless(env, part, text.as_str(), Some(i))?;
            builder.push(Part::Text(text.as_str()))?
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

/// `Array.isArray(value)`, which (unlike `napi_is_array`) sees through a Proxy.
unsafe fn array_is_array(env: Env, value: Value) -> RawResult<bool> {
  let mut global = std::ptr::null_mut();
  napi_try!(env, sys::napi_get_global(env, &mut global));
  let array = raw::get_property(env, global, c"Array")?;
  let is_array = raw::get_property(env, array, c"isArray")?;
  let answer = raw::call(env, is_array, &[value])?;
  Ok(raw::type_of(env, answer) == sys::ValueType::napi_boolean && raw::get_bool(env, answer))
}

/// Keys are read as UTF-8, which turns a lone surrogate (half of an emoji
/// cut by `.slice()`, say) into U+FFFD: '\uD800' and '\uFFFD' would be one
/// key, and one input's value would be served for another. Such a key is
/// refused. Only a key that reads back with U+FFFD in it is looked at again.
unsafe fn check_lossless(env: Env, value: Value, text: &str, part: Option<u32>) -> RawResult<()> {
  // Most keys are ASCII: one word-at-a-time scan decides.
  if text.is_ascii() || !text.contains('\u{FFFD}') {
    return Ok(());
  }
  let units = raw::get_string_utf16(env, value)?;
  if char::decode_utf16(units).all(|c| c.is_ok()) {
    return Ok(());
  }
  let what = match part {
    Some(i) => format!("key part {i}"),
    None => "the key".to_string(),
  };
  Err(
    key::invalid(format!(
      "{what} contains a lone surrogate (half of a UTF-16 pair, e.g. an emoji cut by .slice()), which cannot be stored without changing it; give well-formed text (String.prototype.toWellFormed())"
    ))
    .into(),
  )
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
