//! Thin, checked wrappers over the Node-API C calls the hot paths use. The
//! napi-derive glue costs ~0.2 µs per method call (DESIGN.md §2), so the
//! entry points that run per `getOrLoad` are raw callbacks built from these.
//!
//! # Safety contract of the binding's `unsafe fn`s
//!
//! Unless a function's docs add to it, every `unsafe fn` in `binding` asks
//! one thing of its caller: `env` is the `napi_env` Node-API handed to the
//! callback, napi-rs method or napi-rs future resolver that is running now,
//! on that env's JS thread, and every `Value` passed in is a handle made
//! during that call (its handle scope is still open). The bodies then only
//! pass those handles and pointers to locals to Node-API, which checks
//! types itself: a value of the wrong type gets a status (such as
//! `napi_number_expected`) and leaves the out-parameter alone, so the
//! wrappers that ignore the status answer the zero value they started with.

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
///
/// # Safety
///
/// The module's contract; `status` is what a call on this `env` returned.
pub unsafe fn check(env: Env, status: sys::napi_status) -> RawResult<()> {
  if status == sys::Status::napi_ok {
    return Ok(());
  }
  Err(failed(env, status))
}

/// What [`check`] makes of a status other than `napi_ok`.
///
/// # Safety
///
/// As [`check`].
#[cold]
unsafe fn failed(env: Env, status: sys::napi_status) -> Failure {
  let mut pending = false;
  sys::napi_is_exception_pending(env, &mut pending);
  if pending {
    let mut exception = ptr::null_mut();
    sys::napi_get_and_clear_last_exception(env, &mut exception);
    return Failure::Thrown(exception);
  }
  Failure::Coded(Error::new(
    crate::core::error::Code::Internal,
    Kind::Plain,
    format!("internal Node-API call failed with status {status}"),
  ))
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

/// A JS array of `values`.
pub unsafe fn array(env: Env, values: &[Value]) -> RawResult<Value> {
  let mut array = ptr::null_mut();
  napi_try!(
    env,
    sys::napi_create_array_with_length(env, values.len(), &mut array)
  );
  for (index, value) in values.iter().enumerate() {
    napi_try!(env, sys::napi_set_element(env, array, index as u32, *value));
  }
  Ok(array)
}

/// `[value]`: a one-element array, an object a reference can keep (napi 9
/// references no string).
pub unsafe fn boxed(env: Env, value: Value) -> RawResult<Value> {
  let mut array = ptr::null_mut();
  napi_try!(env, sys::napi_create_array_with_length(env, 1, &mut array));
  napi_try!(env, sys::napi_set_element(env, array, 0, value));
  Ok(array)
}

/// What [`boxed`] put in `array` (undefined if it cannot be read).
pub unsafe fn unboxed(env: Env, array: Value) -> Value {
  let mut value = ptr::null_mut();
  if sys::napi_get_element(env, array, 0, &mut value) != sys::Status::napi_ok {
    return undefined(env);
  }
  value
}

/// A Node `Buffer` holding a copy of `bytes`.
pub unsafe fn buffer_copy(env: Env, bytes: &[u8]) -> RawResult<Value> {
  let (mut v, mut data) = (ptr::null_mut(), ptr::null_mut());
  napi_try!(
    env,
    sys::napi_create_buffer_copy(env, bytes.len(), bytes.as_ptr().cast(), &mut data, &mut v)
  );
  Ok(v)
}

/// The length of a `Buffer` (or any `Uint8Array`) JS passed; 0 for
/// anything else.
pub unsafe fn buffer_len(env: Env, value: Value) -> usize {
  let (mut data, mut len) = (ptr::null_mut(), 0);
  match sys::napi_get_buffer_info(env, value, &mut data, &mut len) {
    sys::Status::napi_ok => len,
    _ => 0,
  }
}

/// A copy of the bytes of a `Buffer` (or any `Uint8Array`) JS passed.
pub unsafe fn get_buffer(env: Env, value: Value) -> RawResult<Vec<u8>> {
  let (mut data, mut len) = (ptr::null_mut(), 0);
  napi_try!(
    env,
    sys::napi_get_buffer_info(env, value, &mut data, &mut len)
  );
  if len == 0 || data.is_null() {
    return Ok(Vec::new());
  }
  // SAFETY: napi gave `len` readable bytes at `data`, owned by `value`,
  // which the caller's frame keeps alive while they are copied.
  Ok(std::slice::from_raw_parts(data.cast::<u8>(), len).to_vec())
}

pub unsafe fn get_number(env: Env, value: Value) -> f64 {
  let mut n = 0.0;
  sys::napi_get_value_double(env, value, &mut n);
  n
}

/// A count JS made (lib/bulkhead.js's reports): a non-number, or one below
/// 0, reads as 0.
pub unsafe fn get_count(env: Env, value: Value) -> u64 {
  let n = get_number(env, value);
  if n.is_finite() && n > 0.0 {
    n.round() as u64
  } else {
    0
  }
}

pub unsafe fn get_bool(env: Env, value: Value) -> bool {
  let mut b = false;
  sys::napi_get_value_bool(env, value, &mut b);
  b
}

/// A stack buffer for reading short JS strings (keys) without allocating
/// (+70 ns for a `String`, measured). Left uninitialised and never moved:
/// zeroing or copying it showed up in the hit path's profile.
///
/// A short string is read as its UTF-16 units (`napi_get_value_string_utf16`,
/// V8's `String::Write`: a copy of the units) and encoded to UTF-8 here, an
/// ASCII key byte by byte: V8's `String::WriteUtf8`, which
/// `napi_get_value_string_utf8` calls, cost a hit ~150 instructions for a
/// 3-character key and was its largest native item (bench/HITPATH.md,
/// profile). The text is the same: a lone surrogate becomes U+FFFD, as
/// `WriteUtf8` with `REPLACE_INVALID_UTF8` makes it.
pub struct Utf8 {
  stack: MaybeUninit<[u8; Utf8::BYTES]>,
}

impl Utf8 {
  /// The most UTF-16 units read into the stack (one more is the end mark):
  /// 127 units, whose UTF-8 takes at most 3 bytes each.
  const UNITS: usize = 128;
  const BYTES: usize = 3 * (Utf8::UNITS - 1);

  pub fn new() -> Utf8 {
    Utf8 {
      stack: MaybeUninit::uninit(),
    }
  }

  /// Reads `value` (a JS string) into the buffer, or into a `String` when it
  /// does not fit.
  ///
  /// # Safety
  ///
  /// The module's contract. The returned text borrows the buffer, so it
  /// cannot outlive it or see it reused.
  pub unsafe fn read<'a>(&'a mut self, env: Env, value: Value) -> RawResult<Text<'a>> {
    match self.read_if_string(env, value)? {
      Some(text) => Ok(text),
      None => Err(failed(env, sys::Status::napi_string_expected)),
    }
  }

  /// As [`Utf8::read`], for a value that may not be a string: `None` then
  /// (Node-API checks the type itself, so a string costs no `napi_typeof`).
  ///
  /// # Safety
  ///
  /// As [`Utf8::read`].
  pub unsafe fn read_if_string<'a>(
    &'a mut self,
    env: Env,
    value: Value,
  ) -> RawResult<Option<Text<'a>>> {
    let mut units = MaybeUninit::<[u16; Utf8::UNITS]>::uninit();
    let units_ptr = units.as_mut_ptr() as *mut u16;
    let mut len = 0;
    let status = sys::napi_get_value_string_utf16(env, value, units_ptr, Utf8::UNITS, &mut len);
    if status == sys::Status::napi_string_expected {
      return Ok(None);
    }
    check(env, status)?;
    // napi writes at most UNITS - 1 units: a string that filled them may
    // be longer, so it is read again at its real size.
    if len + 1 >= Utf8::UNITS {
      return Ok(Some(Text::Heap(get_string_sized(env, value)?)));
    }
    // SAFETY: napi_get_value_string_utf16 returned napi_ok (checked above),
    // so it wrote `len` units (fewer than UNITS, checked above) to the start
    // of `units`, a local array that outlives this borrow.
    let units = std::slice::from_raw_parts(units_ptr, len);
    let out = self.stack.as_mut_ptr() as *mut u8;
    // ASCII, most keys: a unit is its byte.
    let ascii = units.iter().position(|&u| u >= 0x80).unwrap_or(len);
    for (i, &u) in units[..ascii].iter().enumerate() {
      // SAFETY: i < len < UNITS <= BYTES: inside `self.stack`, which
      // `self` owns.
      out.add(i).write(u as u8);
    }
    let mut written = ascii;
    for c in char::decode_utf16(units[ascii..].iter().copied()) {
      let c = c.unwrap_or(char::REPLACEMENT_CHARACTER);
      let mut code = [0u8; 4];
      let bytes = c.encode_utf8(&mut code).as_bytes();
      // SAFETY: `len` < UNITS units make at most 3 bytes each (a surrogate
      // pair, two units, makes 4), so `written + bytes.len()` stays within
      // the BYTES = 3 * (UNITS - 1) bytes of `self.stack`, which `self`
      // owns; `code` is a separate local.
      for (i, &b) in bytes.iter().enumerate() {
        out.add(written + i).write(b);
      }
      written += bytes.len();
    }
    // SAFETY: the first `written` bytes of the buffer were written just
    // above, whole UTF-8 sequences of the chars `encode_utf8` made (a lone
    // surrogate as U+FFFD), so they are initialised, valid UTF-8, and the
    // buffer is borrowed for 'a.
    let text = std::str::from_utf8_unchecked(std::slice::from_raw_parts(out, written));
    Ok(Some(Text::Stack(text)))
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

/// The UTF-8 length of string `value` (0 for any other value), without
/// copying it.
pub unsafe fn utf8_len(env: Env, value: Value) -> usize {
  let mut len = 0;
  let status = sys::napi_get_value_string_utf8(env, value, ptr::null_mut(), 0, &mut len);
  if status == sys::Status::napi_ok {
    len
  } else {
    0
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

pub unsafe fn get_property(env: Env, object: Value, name: &std::ffi::CStr) -> RawResult<Value> {
  let mut value = ptr::null_mut();
  napi_try!(
    env,
    sys::napi_get_named_property(env, object, name.as_ptr(), &mut value)
  );
  Ok(value)
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

/// [`make_error`] with `cause` as its `cause`, defined as `new Error(message,
/// { cause })` defines it (own, not enumerable).
pub unsafe fn make_error_with_cause(env: Env, error: &Error, cause: Value) -> Value {
  let v = make_error(env, error);
  let descriptor = sys::napi_property_descriptor {
    utf8name: c"cause".as_ptr(),
    name: ptr::null_mut(),
    method: None,
    getter: None,
    setter: None,
    value: cause,
    attributes: sys::PropertyAttributes::writable | sys::PropertyAttributes::configurable,
    data: ptr::null_mut(),
  };
  sys::napi_define_properties(env, v, 1, &descriptor);
  v
}

/// A JS exception taken while reading an argument becomes `error`, with the
/// exception as its cause: what JS ran (a getter, a Proxy's trap, a revoked
/// Proxy) is bad input, which gets a code, never a raw TypeError.
pub unsafe fn coded_throw<T>(
  env: Env,
  result: RawResult<T>,
  error: impl FnOnce() -> Error,
) -> RawResult<T> {
  match result {
    Err(Failure::Thrown(cause)) => {
      Err(Failure::Thrown(make_error_with_cause(env, &error(), cause)))
    }
    other => other,
  }
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

/// Calls `function` with `this` undefined.
///
/// # Safety
///
/// The module's contract, and no element of `args` is null: Node-API checks
/// the array pointer but hands each element to V8 unchecked. (The value
/// constructors here answer null only when napi fails to make the value.)
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
/// dies on the JS thread of the env that made it: the raw pointers make
/// `JsRef` neither `Send` nor `Sync`. Each one is a callback's local, or is
/// owned (through the engine, the helpers or `outcome_buffer`) by an `Inner`
/// behind an `Rc` that only napi-managed objects (the `NativeCache` wrapper,
/// the raw functions' data) hold.
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
    Ok(JsRef {
      env,
      raw: create_reference(env, value, count)?,
    })
  }

  /// The referenced value, or `None` once a weak one was collected.
  ///
  /// # Safety
  ///
  /// The module's contract, and `env` is the env this reference was made
  /// on (each `Inner` belongs to one env: a worker has caches of its own).
  pub unsafe fn get(&self, env: Env) -> Option<Value> {
    reference_value(env, self.raw)
  }
}

/// A bare `napi_ref` with `count` (1: strong, 0: weak), for holders that
/// keep the env apart (`JsRef`) or never delete it (a value table's array,
/// `held::table`, which its env deletes at teardown): a caller that does
/// deletes it with [`delete_reference`], once, on the env's JS thread.
///
/// # Safety
///
/// The module's contract.
pub unsafe fn create_reference(env: Env, value: Value, count: u32) -> RawResult<sys::napi_ref> {
  let mut raw = ptr::null_mut();
  napi_try!(env, sys::napi_create_reference(env, value, count, &mut raw));
  Ok(raw)
}

/// The value of a `napi_ref` made on `env`, or `None` (a weak one collected).
///
/// # Safety
///
/// The module's contract, and `raw` is a live reference made on `env`.
pub unsafe fn reference_value(env: Env, raw: sys::napi_ref) -> Option<Value> {
  let mut v = ptr::null_mut();
  sys::napi_get_reference_value(env, raw, &mut v);
  (!v.is_null()).then_some(v)
}

/// Deletes a `napi_ref` made by [`create_reference`] on `env`.
///
/// # Safety
///
/// `raw` was made on `env` and is not used again; this runs on the env's JS
/// thread while the env is alive (in a napi call or a napi finalizer: see
/// `JsRef`'s `Drop`).
pub unsafe fn delete_reference(env: Env, raw: sys::napi_ref) {
  sys::napi_delete_reference(env, raw);
}

impl Drop for JsRef {
  fn drop(&mut self) {
    // SAFETY: `raw` was made by napi_create_reference on `env` (with_count
    // is the only constructor) and is deleted only here, once. A `JsRef` is
    // not `Send`, so this runs on the thread that made it, the env's JS
    // thread; and since its owners are freed in a napi call or a napi
    // finalizer (see the type's docs), the env is still alive. At teardown
    // Node runs the finalizers first, so that they may delete references,
    // as this does (napi_env__::DeleteMe in js_native_api_v8.h).
    unsafe {
      delete_reference(self.env, self.raw);
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
///
/// # Safety
///
/// The module's contract, and `callback` reads its data pointer as a `T`
/// (with [`args`]`::<_, T>`) and only borrows it: the box is freed by the
/// function's finalizer alone.
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
    // SAFETY: this finalizer is registered below for exactly one function,
    // with the pointer `Box::into_raw` gave for a `Box<T>`; Node runs it once,
    // after that function was collected or when the env is torn down, so no
    // callback can still be reading the data (a running callback keeps its
    // function alive).
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
    // SAFETY: no function was made, so nothing else holds `data`: the box
    // made above is freed here and nowhere else (`check` then fails, so the
    // finalizer below is never added for it).
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

/// The arguments (up to N) and the data pointer of a raw callback. The
/// count is the number of arguments JS passed, which may exceed N; only N
/// are copied, and missing ones are `undefined`.
///
/// # Safety
///
/// The module's contract, with `info` the callback info of the running
/// callback; and that callback was made by [`function`] with data of type
/// `T`. Then the pointer is valid for the whole callback (the function is
/// alive while it runs) and may be read as `&T`, never as `&mut T`: a
/// re-entrant call (a loader calling `getOrLoad`) reads the same box.
/// A failed `napi_get_cb_info` (only for an invalid env or info) would leave
/// it null.
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

/// An ArrayBuffer over `cell`'s four bytes, which JavaScript reads with a
/// `Uint32Array` (never writes) while Rust moves the counter, on any
/// thread; the buffer owns an `Arc` of it until collected. `None` where
/// Node-API refuses external buffers (a runtime with V8's sandbox).
pub unsafe fn shared_u32(
  env: Env,
  cell: std::sync::Arc<std::sync::atomic::AtomicU32>,
) -> Option<Value> {
  unsafe extern "C" fn free(_env: Env, _data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    // SAFETY: registered below for exactly one buffer, with the pointer
    // `Box::into_raw` gave for a `Box<Arc<AtomicU32>>`; Node runs it once,
    // after that buffer was collected (no view of it is left to read the
    // cell) or when the env is torn down.
    drop(Box::from_raw(
      hint as *mut std::sync::Arc<std::sync::atomic::AtomicU32>,
    ));
  }
  let data = cell.as_ptr() as *mut std::ffi::c_void;
  let hint = Box::into_raw(Box::new(cell));
  let mut buffer = ptr::null_mut();
  // SAFETY: `data` points at the `AtomicU32` inside the `Arc` that `hint`
  // owns, so it stays valid until `free` runs; four bytes, its size. The
  // JS side only reads it; an aligned u32 read racing an atomic add reads
  // the old or the new count, both of which it handles.
  let status = sys::napi_create_external_arraybuffer(
    env,
    data,
    std::mem::size_of::<u32>(),
    Some(free),
    hint as *mut std::ffi::c_void,
    &mut buffer,
  );
  if status == sys::Status::napi_ok {
    Some(buffer)
  } else {
    // Not taken: the finalizer will never run, so the Arc is dropped here.
    drop(Box::from_raw(hint));
    None
  }
}

/// An ArrayBuffer over `cell`'s eight bytes, which JavaScript reads with a
/// `Float64Array` (never writes) while a thread of the addon rewrites it.
/// `None` where Node-API refuses external buffers.
pub unsafe fn shared_static_f64(
  env: Env,
  cell: &'static std::sync::atomic::AtomicU64,
) -> Option<Value> {
  let mut buffer = ptr::null_mut();
  // SAFETY: `cell` is a static: its eight bytes stay valid for the life of
  // the process, so no finalizer is needed. An aligned 8-byte read racing
  // an atomic store reads the old or the new value, never a mix, on the
  // platforms this addon is built for (x86-64, aarch64).
  let status = sys::napi_create_external_arraybuffer(
    env,
    cell.as_ptr() as *mut std::ffi::c_void,
    std::mem::size_of::<u64>(),
    None,
    ptr::null_mut(),
    &mut buffer,
  );
  (status == sys::Status::napi_ok).then_some(buffer)
}
