//! Thin, checked wrappers over the Node-API C calls the hot paths use. The
//! napi-derive glue costs ~0.2 µs per method call (DESIGN.md §2), so the
//! entry points that run per `getOrLoad` are raw callbacks built from these.

use crate::core::error::{Error, Kind};
use napi::sys;
use std::ffi::c_char;
use std::mem::MaybeUninit;
use std::ptr;

pub type Env = sys::napi_env;
pub type Value = sys::napi_value;

/// Why a raw call failed: a herdcache error to build, or a JS exception
/// already taken off the engine (a loader or helper threw).
pub enum Failure {
  Coded(Error),
  Thrown(Value),
}

impl From<Error> for Failure {
  fn from(e: Error) -> Self {
    Failure::Coded(e)
  }
}

pub type RawResult<T> = Result<T, Failure>;

/// Turns a napi status into a result; a pending exception is taken, so it can
/// be handed to a promise instead of escaping.
pub unsafe fn check(env: Env, status: sys::napi_status) -> RawResult<()> {
  if status == sys::Status::napi_ok {
    return Ok(());
  }
  let mut pending = false;
  sys::napi_is_exception_pending(env, &mut pending);
  if pending {
    let mut exception = ptr::null_mut();
    sys::napi_get_and_clear_last_exception(env, &mut exception);
    return Err(Failure::Thrown(exception));
  }
  Err(Failure::Coded(Error::new(
    crate::core::error::Code::Internal,
    Kind::Plain,
    format!("internal Node-API call failed with status {status}"),
  )))
}

macro_rules! napi_try {
  ($env:expr, $call:expr) => {
    $crate::binding::raw::check($env, $call)?
  };
}
pub(crate) use napi_try;

pub unsafe fn type_of(env: Env, value: Value) -> sys::napi_valuetype {
  let mut t = sys::ValueType::napi_undefined;
  sys::napi_typeof(env, value, &mut t);
  t
}

pub unsafe fn undefined(env: Env) -> Value {
  let mut v = ptr::null_mut();
  sys::napi_get_undefined(env, &mut v);
  v
}

pub unsafe fn null(env: Env) -> Value {
  let mut v = ptr::null_mut();
  sys::napi_get_null(env, &mut v);
  v
}

pub unsafe fn boolean(env: Env, b: bool) -> Value {
  let mut v = ptr::null_mut();
  sys::napi_get_boolean(env, b, &mut v);
  v
}

pub unsafe fn number(env: Env, n: f64) -> Value {
  let mut v = ptr::null_mut();
  sys::napi_create_double(env, n, &mut v);
  v
}

pub unsafe fn string(env: Env, s: &str) -> Value {
  let mut v = ptr::null_mut();
  sys::napi_create_string_utf8(env, s.as_ptr() as *const c_char, s.len() as isize, &mut v);
  v
}

/// A JS string made from UTF-16 code units, lone surrogates included.
pub unsafe fn string_utf16(env: Env, units: &[u16]) -> Value {
  let mut v = ptr::null_mut();
  sys::napi_create_string_utf16(env, units.as_ptr(), units.len() as isize, &mut v);
  v
}

/// A JS string's UTF-16 code units, exactly: UTF-8 cannot carry a lone
/// surrogate (napi writes U+FFFD for it), UTF-16 can.
pub unsafe fn get_string_utf16(env: Env, value: Value) -> RawResult<Vec<u16>> {
  let mut len = 0;
  napi_try!(
    env,
    sys::napi_get_value_string_utf16(env, value, ptr::null_mut(), 0, &mut len)
  );
  let mut units = vec![0u16; len + 1];
  let mut written = 0;
  napi_try!(
    env,
    sys::napi_get_value_string_utf16(env, value, units.as_mut_ptr(), units.len(), &mut written)
  );
  units.truncate(written);
  Ok(units)
}

pub unsafe fn get_number(env: Env, value: Value) -> f64 {
  let mut n = 0.0;
  sys::napi_get_value_double(env, value, &mut n);
  n
}

pub unsafe fn get_bool(env: Env, value: Value) -> bool {
  let mut b = false;
  sys::napi_get_value_bool(env, value, &mut b);
  b
}

/// A stack buffer for reading short JS strings (keys) without allocating
/// (+70 ns for a `String`, measured). Left uninitialised and never moved:
/// zeroing or copying it showed up in the hit path's profile.
pub struct Utf8 {
  stack: MaybeUninit<[u8; 128]>,
}

impl Utf8 {
  pub fn new() -> Utf8 {
    Utf8 {
      stack: MaybeUninit::uninit(),
    }
  }

  /// Reads `value` (a JS string) into the buffer, or into a `String` when it
  /// does not fit.
  pub unsafe fn read<'a>(&'a mut self, env: Env, value: Value) -> RawResult<Text<'a>> {
    let capacity = std::mem::size_of::<[u8; 128]>();
    let buf = self.stack.as_mut_ptr() as *mut u8;
    let mut len = 0;
    napi_try!(
      env,
      sys::napi_get_value_string_utf8(env, value, buf as *mut c_char, capacity, &mut len)
    );
    // napi stops short of a code point that does not fit, so a nearly full
    // buffer may hold a cut string: read it again at its real size.
    if len + 4 >= capacity {
      return Ok(Text::Heap(get_string_sized(env, value)?));
    }
    let bytes = std::slice::from_raw_parts(buf, len);
    Ok(Text::Stack(std::str::from_utf8_unchecked(bytes)))
  }
}

/// A string read by [`Utf8::read`].
pub enum Text<'a> {
  Stack(&'a str),
  Heap(String),
}

impl Text<'_> {
  pub fn as_str(&self) -> &str {
    match self {
      Text::Stack(s) => s,
      Text::Heap(s) => s,
    }
  }
}

unsafe fn get_string_sized(env: Env, value: Value) -> RawResult<String> {
  let mut needed = 0;
  napi_try!(
    env,
    sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut needed)
  );
  let mut buf = vec![0u8; needed + 1];
  let mut written = 0;
  napi_try!(
    env,
    sys::napi_get_value_string_utf8(
      env,
      value,
      buf.as_mut_ptr() as *mut c_char,
      buf.len(),
      &mut written
    )
  );
  buf.truncate(written);
  // napi writes whole UTF-8 sequences only.
  Ok(String::from_utf8(buf).unwrap_or_default())
}

pub unsafe fn get_string(env: Env, value: Value) -> RawResult<String> {
  get_string_sized(env, value)
}

pub unsafe fn set_property(
  env: Env,
  object: Value,
  name: &std::ffi::CStr,
  value: Value,
) -> RawResult<()> {
  napi_try!(
    env,
    sys::napi_set_named_property(env, object, name.as_ptr(), value)
  );
  Ok(())
}

/// A JS error with `code`, of the class the error's kind names.
pub unsafe fn make_error(env: Env, error: &Error) -> Value {
  let code = string(env, error.code.as_str());
  let message = string(env, &error.message);
  let mut v = ptr::null_mut();
  match error.kind {
    Kind::Type => sys::napi_create_type_error(env, code, message, &mut v),
    Kind::Range => sys::napi_create_range_error(env, code, message, &mut v),
    Kind::Plain => sys::napi_create_error(env, code, message, &mut v),
  };
  v
}

pub unsafe fn failure_value(env: Env, failure: Failure) -> Value {
  match failure {
    Failure::Coded(e) => make_error(env, &e),
    Failure::Thrown(v) => v,
  }
}

/// Throws the failure as a JS exception (for synchronous entry points).
pub unsafe fn throw(env: Env, failure: Failure) -> Value {
  let v = failure_value(env, failure);
  sys::napi_throw(env, v);
  ptr::null_mut()
}

pub unsafe fn settled(env: Env, value: Value, fulfilled: bool) -> Value {
  let mut deferred = ptr::null_mut();
  let mut promise = ptr::null_mut();
  sys::napi_create_promise(env, &mut deferred, &mut promise);
  if fulfilled {
    sys::napi_resolve_deferred(env, deferred, value);
  } else {
    sys::napi_reject_deferred(env, deferred, value);
  }
  promise
}

pub unsafe fn resolved(env: Env, value: Value) -> Value {
  settled(env, value, true)
}

pub unsafe fn rejected(env: Env, failure: Failure) -> Value {
  let v = failure_value(env, failure);
  settled(env, v, false)
}

pub unsafe fn call(env: Env, function: Value, args: &[Value]) -> RawResult<Value> {
  let mut result = ptr::null_mut();
  napi_try!(
    env,
    sys::napi_call_function(
      env,
      undefined(env),
      function,
      args.len(),
      args.as_ptr(),
      &mut result
    )
  );
  Ok(result)
}

/// A `napi_ref`, deleted when dropped. Everything that holds one lives and
/// dies on the JS thread of the env that made it.
pub struct JsRef {
  env: Env,
  raw: sys::napi_ref,
}

impl JsRef {
  /// A strong reference (keeps the value alive), for objects and functions.
  pub unsafe fn strong(env: Env, value: Value) -> RawResult<JsRef> {
    Self::with_count(env, value, 1)
  }

  /// A weak reference: `get` answers `None` once the value was collected.
  pub unsafe fn weak(env: Env, value: Value) -> RawResult<JsRef> {
    Self::with_count(env, value, 0)
  }

  unsafe fn with_count(env: Env, value: Value, count: u32) -> RawResult<JsRef> {
    let mut raw = ptr::null_mut();
    napi_try!(env, sys::napi_create_reference(env, value, count, &mut raw));
    Ok(JsRef { env, raw })
  }

  pub unsafe fn get(&self, env: Env) -> Option<Value> {
    let mut v = ptr::null_mut();
    sys::napi_get_reference_value(env, self.raw, &mut v);
    (!v.is_null()).then_some(v)
  }
}

impl Drop for JsRef {
  fn drop(&mut self) {
    unsafe {
      sys::napi_delete_reference(self.env, self.raw);
    }
  }
}

impl std::fmt::Debug for JsRef {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    f.write_str("JsRef")
  }
}

/// A native function whose data pointer owns `data` until the function is
/// collected.
pub unsafe fn function<T>(
  env: Env,
  name: &str,
  callback: unsafe extern "C" fn(Env, sys::napi_callback_info) -> Value,
  data: T,
) -> RawResult<Value> {
  unsafe extern "C" fn free<T>(
    _env: Env,
    data: *mut std::ffi::c_void,
    _hint: *mut std::ffi::c_void,
  ) {
    drop(Box::from_raw(data as *mut T));
  }
  let data = Box::into_raw(Box::new(data)) as *mut std::ffi::c_void;
  let mut f = ptr::null_mut();
  let status = sys::napi_create_function(
    env,
    name.as_ptr() as *const c_char,
    name.len() as isize,
    Some(callback),
    data,
    &mut f,
  );
  if status != sys::Status::napi_ok {
    drop(Box::from_raw(data as *mut T));
    check(env, status)?;
  }
  napi_try!(
    env,
    sys::napi_add_finalizer(
      env,
      f,
      data,
      Some(free::<T>),
      ptr::null_mut(),
      ptr::null_mut()
    )
  );
  Ok(f)
}

/// The arguments (up to N) and the data pointer of a raw callback.
pub unsafe fn args<const N: usize, T>(
  env: Env,
  info: sys::napi_callback_info,
) -> ([Value; N], usize, *const T) {
  let mut argv = [ptr::null_mut(); N];
  let mut argc = N;
  let mut data = ptr::null_mut();
  // Missing arguments come back as `undefined`.
  sys::napi_get_cb_info(
    env,
    info,
    &mut argc,
    argv.as_mut_ptr(),
    ptr::null_mut(),
    &mut data,
  );
  (argv, argc, data as *const T)
}
