//! Values between JS and the envelope: a JSON text, or bytes in a format
//! (`core::body`) that `lib/values.js` encodes and decodes.

use super::raw::{self, Env, RawResult, Value};
use super::Inner;
use crate::core::body::{Body, Formatted};
use napi::sys;

/// The body JS hands over for the store: `format` a string says `body` is a
/// `Buffer` in that format; else `body` is the value's JSON text (`None`
/// when it is not a string: nothing to write).
pub(super) unsafe fn read(env: Env, body: Value, format: Value) -> RawResult<Option<Body>> {
  if raw::type_of(env, format) == sys::ValueType::napi_string {
    let formatted = Formatted {
      format: raw::get_string(env, format)?,
      bytes: raw::get_buffer(env, body)?,
      compressed: false,
    };
    return Ok(Some(Body::Formatted(formatted)));
  }
  match raw::type_of(env, body) {
    sys::ValueType::napi_string => Ok(Some(Body::Json(raw::get_string(env, body)?))),
    _ => Ok(None),
  }
}

/// How many bytes the stored form JS handed over takes (a JSON text's
/// UTF-8 bytes, a `Buffer`'s length; 0 for anything else), without a copy:
/// what `l1MaxBytes` weighs a value by.
pub(super) unsafe fn stored_len(env: Env, body: Value) -> usize {
  match raw::type_of(env, body) {
    sys::ValueType::napi_string => raw::utf8_len(env, body),
    _ => raw::buffer_len(env, body),
  }
}

/// The JS value of a stored body: `JSON.parse` of a JSON text, or what
/// `lib/values.js` `decode` makes of formatted bytes (it may throw: an
/// application's `deserialize`).
pub(super) unsafe fn to_js(env: Env, inner: &Inner, body: &Body) -> RawResult<Value> {
  match body {
    Body::Json(json) => {
      let parse = inner.helper(env, |h| &h.json_parse)?;
      raw::call(env, parse, &[raw::string(env, json)])
    }
    Body::Formatted(formatted) => {
      let ctx = inner.helper(env, |h| &h.ctx)?;
      let decode = inner.helper(env, |h| &h.decode)?;
      let args = [
        ctx,
        raw::string(env, &formatted.format),
        raw::buffer_copy(env, &formatted.bytes)?,
      ];
      raw::call(env, decode, &args)
    }
  }
}

/// A stored body as JS decodes it itself (`peek`): the JSON text, or
/// `[format, bytes]`.
pub(super) unsafe fn stored(env: Env, body: &Body) -> RawResult<Value> {
  let formatted = match body {
    Body::Json(json) => return Ok(raw::string(env, json)),
    Body::Formatted(formatted) => formatted,
  };
  let mut pair = std::ptr::null_mut();
  raw::napi_try!(env, sys::napi_create_array_with_length(env, 2, &mut pair));
  let format = raw::string(env, &formatted.format);
  raw::napi_try!(env, sys::napi_set_element(env, pair, 0, format));
  let bytes = raw::buffer_copy(env, &formatted.bytes)?;
  raw::napi_try!(env, sys::napi_set_element(env, pair, 1, bytes));
  Ok(pair)
}
