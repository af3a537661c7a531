//! The only module that touches Node-API. `NativeCache` (napi-derive, cold
//! paths: construction, installation, close, test hooks) hands the JS
//! wrapper a set of raw functions for everything that runs per call:
//! `entry` (`getOrLoad`, and `getOrLoadMany`'s keys in one call), `flight`
//! (a flight's steps and the leader's reports), `ops` (get, set, delete,
//! expire, clear, stats). Each converts JS values and calls the engine's
//! [`Cache`], which decides.

mod args;
mod body;
mod entry;
mod flight;
mod futures;
mod held;
mod key;
// Reached only through the module registration napi-derive emits, which it
// leaves out of `cfg(test)` builds.
#[cfg_attr(test, allow(dead_code))]
mod names;
mod ops;
mod options;
mod raw;
mod slots;
mod status;

use crate::core::error::{Code, Error as CoreError, Kind};
use crate::core::options::CacheConfig;
use crate::engine::fleet::Undelivered;
use crate::engine::Cache;
use flight::FlightHandle;
use held::Held;
use napi::bindgen_prelude::*;
use napi_derive::napi;
use raw::{Failure, JsRef, RawResult};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

pub use options::CacheOptions;

/// The JS functions the native side calls. `lead`, `softWait`, `resume`
/// and `scheduleReads` are module-level functions of `lib/` (they hold no
/// cache); the per-cache context is held weakly, so no reference cycle runs
/// through a strong `napi_ref` and an unused Cache can be collected.
struct Helpers {
  ctx: JsRef,
  lead: JsRef,
  soft_wait: JsRef,
  resume: JsRef,
  schedule_reads: JsRef,
  /// `reportProblem(ctx, code, message)`: what the store found, to `onError`.
  report_problem: JsRef,
  /// `JSON.parse`, for values another instance wrote.
  json_parse: JsRef,
  /// `decode(ctx, format, bytes)` (`lib/values.js`): a value in a format of
  /// its own (`core::body`).
  decode: JsRef,
}

pub(crate) struct Inner {
  /// This cache's number in the registry (`with_cache`).
  id: u64,
  cache: RefCell<Cache<Held, FlightHandle>>,
  helpers: RefCell<Option<Helpers>>,
  /// Bytes shared with JS (an ArrayBuffer's memory): the outcome of the
  /// last `getOrLoad` (byte 0), whether the last `getOrLoadMany`'s promises
  /// all are fulfilled (byte 1), how the last `getOrLoad` gave its answer
  /// (byte 2, and bytes 16 to 20: `set_given_slot`). Null until installed.
  outcome_slot: Cell<*mut u8>,
  outcome_buffer: RefCell<Option<JsRef>>,
  /// With a fleet: the flights whose first read goes out at the next flush.
  reads: RefCell<Vec<u64>>,
  /// While a read's answers are stepped: the asks they made, which go out
  /// together (`flight::flush_reads`, `engine::together`).
  asks: RefCell<Option<Vec<(u64, crate::engine::together::Ask)>>>,
  /// `getOrLoadMany`'s buffer for its keys' text, kept between calls.
  many_keys: Cell<String>,
}

thread_local! {
  /// The caches of this JS thread, by id: what a tokio completion, which
  /// can carry only `Send` data, finds its cache by.
  static CACHES: RefCell<HashMap<u64, Weak<Inner>>> = RefCell::new(HashMap::new());
  static NEXT_CACHE_ID: Cell<u64> = const { Cell::new(1) };
  /// Whether this thread's environment has the teardown hook.
  static HOOKED: Cell<bool> = const { Cell::new(false) };
}

/// The end of this thread's JS environment (a worker thread ending, the
/// process exiting): every cache of the thread stops its fleet now, since
/// its tokio tasks would otherwise go on holding locks and connections.
/// One hook per thread, added with its first cache.
unsafe extern "C" fn stop_caches_of_thread(_data: *mut std::ffi::c_void) {
  let caches: Vec<Rc<Inner>> = CACHES
    .try_with(|caches| caches.borrow().values().filter_map(Weak::upgrade).collect())
    .unwrap_or_default();
  for inner in caches {
    if let Ok(mut cache) = inner.cache.try_borrow_mut() {
      cache.stop_fleet();
    }
  }
}

/// Adds [`stop_caches_of_thread`] to `env`, once per thread.
unsafe fn hook_thread_teardown(env: raw::Env) {
  if HOOKED.with(|hooked| hooked.replace(true)) {
    return;
  }
  napi::sys::napi_add_env_cleanup_hook(env, Some(stop_caches_of_thread), std::ptr::null_mut());
}

/// Runs `f` with cache `id`, if it is still alive.
fn with_cache(id: u64, f: impl FnOnce(&Rc<Inner>)) {
  let inner = CACHES.with(|caches| caches.borrow().get(&id).and_then(Weak::upgrade));
  if let Some(inner) = inner {
    f(&inner);
  }
}

impl Drop for Inner {
  fn drop(&mut self) {
    // At thread teardown the registry may be gone already: nothing to do then.
    let _ = CACHES.try_with(|caches| caches.borrow_mut().remove(&self.id));
  }
}

pub(crate) fn closed() -> Failure {
  Failure::Coded(CoreError::new(
    Code::Closed,
    Kind::Plain,
    "the cache was closed; create a new Cache to keep caching",
  ))
}

impl Inner {
  /// Hands what the store found to JS (`reportProblem`; a notice, which is
  /// no failure, with the code `""`): called on the JS thread whenever a
  /// store call of this cache completed.
  pub(crate) unsafe fn report_problems(&self, env: raw::Env) {
    let (problems, notices) = match self.cache.try_borrow() {
      Ok(cache) => (cache.take_problems(), cache.take_notices()),
      Err(_) => return,
    };
    let reports = problems
      .into_iter()
      .map(|problem| (problem.code.as_str(), problem.message))
      .chain(notices.into_iter().map(|notice| ("", notice)));
    for (code, message) in reports {
      let (Ok(ctx), Ok(report)) = (
        self.helper(env, |h| &h.ctx),
        self.helper(env, |h| &h.report_problem),
      ) else {
        return;
      };
      let args = [ctx, raw::string(env, code), raw::string(env, &message)];
      let _ = raw::call(env, report, &args);
    }
  }

  fn set_outcome(&self, outcome: u8) {
    self.set_slot(0, outcome);
  }

  /// Byte 1 of the outcome slot: no promise the last `getOrLoadMany`
  /// answered can reject.
  fn set_many_fulfilled(&self, fulfilled: bool) {
    self.set_slot(1, u8::from(fulfilled));
  }

  /// Byte 2 of the outcome slot: how the last `getOrLoad` gave its answer
  /// (`entry::GIVEN`).
  fn set_given(&self, given: u8) {
    self.set_slot(2, given);
  }

  /// The last `getOrLoad` left its value in slot `slot` of the value table
  /// (bytes 16 to 20).
  #[inline]
  fn set_given_slot(&self, slot: u32) {
    self.set_given(entry::GIVEN_SLOT);
    self.write_at(GIVEN_SLOT_AT, slot);
  }

  /// Bytes 4 to 16 of the outcome slot: whether, and while which epoch and
  /// until when, the JS wrapper may answer the last call's key again itself
  /// (`entry::Remember`).
  #[inline]
  fn set_remember(&self, remember: entry::Remember) {
    self.write_at(REMEMBER_EPOCH_AT, remember.epoch);
    self.write_at(REMEMBER_UNTIL_AT, remember.until);
  }

  /// Writes byte `at` (< 4) of the outcome slot.
  #[inline]
  fn set_slot(&self, at: usize, byte: u8) {
    debug_assert!(at < REMEMBER_EPOCH_AT);
    self.write_at(at, byte);
  }

  /// Writes `value` at byte `at` of the outcome slot (nothing before it is
  /// installed).
  #[inline]
  fn write_at<T: Copy>(&self, at: usize, value: T) {
    assert!(at + std::mem::size_of::<T>() <= OUTCOME_BYTES);
    let slot = self.outcome_slot.get();
    if !slot.is_null() {
      // SAFETY: a non-null slot is the data pointer napi_create_arraybuffer
      // gave in `install_raw` for an `OUTCOME_BYTES`-byte buffer, set after a strong
      // reference to that buffer went into `outcome_buffer`: the ArrayBuffer
      // lives as long as `self`, and V8 never moves a backing store. Only
      // the JS thread touches it (`Inner` is behind an `Rc`). What no Rust
      // type enforces: the buffer must never be detached (transferred), or
      // this writes to freed memory. The JS wrapper keeps it in private
      // fields (`#fns`, `#outcome`) and never transfers it. The bytes
      // written are inside the buffer (asserted above; the callers' offsets
      // are constants, so the check folds away). Written unaligned: V8
      // gives no alignment promise for the backing store.
      unsafe { (slot.add(at) as *mut T).write_unaligned(value) };
    }
  }

  /// One of the helper functions (or the context) as a JS value.
  unsafe fn helper(
    &self,
    env: raw::Env,
    pick: impl Fn(&Helpers) -> &JsRef,
  ) -> RawResult<raw::Value> {
    let helpers = self.helpers.borrow();
    helpers
      .as_ref()
      .and_then(|h| pick(h).get(env))
      .ok_or_else(|| {
        Failure::Coded(CoreError::new(
          Code::Closed,
          Kind::Plain,
          "this cache is gone (closed or garbage-collected); create a new Cache",
        ))
      })
  }
}

unsafe fn to_napi_error(env: raw::Env, failure: Failure) -> Error {
  let value = raw::failure_value(env, failure);
  match Unknown::from_napi_value(env, value) {
    Ok(unknown) => unknown.into(),
    Err(e) => e,
  }
}

/// The native half of a `Cache`. Use the `Cache` class of the package's
/// entry point; this one has no public contract.
#[napi]
pub struct NativeCache {
  inner: Rc<Inner>,
}

#[napi]
impl NativeCache {
  #[napi(constructor)]
  pub fn new(env: Env, options: Option<CacheOptions>) -> Result<Self> {
    let raw_options = options.unwrap_or_default().into_raw();
    let config = CacheConfig::from_raw(&raw_options).map_err(|e| {
      // SAFETY: `env` is the env napi-rs passed to this constructor, which
      // runs now on its JS thread; the error value is made in its scope.
      unsafe { to_napi_error(env.raw(), Failure::Coded(e)) }
    })?;
    // The fleet's tasks are spawned on napi's tokio runtime.
    let cache = napi::bindgen_prelude::within_runtime_if_available(|| Cache::open(config))
      .map_err(|e| {
        // SAFETY: as above: the constructor's own env, on its JS thread.
        unsafe { to_napi_error(env.raw(), Failure::Coded(e)) }
      })?;
    let id = NEXT_CACHE_ID.with(|next| next.replace(next.get() + 1));
    let inner = Rc::new(Inner {
      id,
      cache: RefCell::new(cache),
      helpers: RefCell::new(None),
      outcome_slot: Cell::new(std::ptr::null_mut()),
      outcome_buffer: RefCell::new(None),
      reads: RefCell::new(Vec::new()),
      asks: RefCell::new(None),
      many_keys: Cell::new(String::new()),
    });
    CACHES.with(|caches| caches.borrow_mut().insert(id, Rc::downgrade(&inner)));
    // SAFETY: `env` is the env napi-rs passed to this constructor, on its
    // JS thread; the hook takes no data and finds the caches through this
    // thread's registry.
    unsafe { hook_thread_teardown(env.raw()) };
    Ok(NativeCache { inner })
  }

  /// Wires the JS helpers in and returns the raw entry points. The validated
  /// timeouts are written onto `ctx` for the JS leader.
  #[napi(
    ts_args_type = "ctx: object, lead: Function, softWait: Function, resume: Function, scheduleReads: Function, reportProblem: Function, decode: Function",
    ts_return_type = "Record<string, Function>"
  )]
  // The helpers are positional, as `lib/native-contract.d.ts` lists them.
  #[allow(clippy::too_many_arguments)]
  pub fn install<'env>(
    &self,
    env: &'env Env,
    ctx: Unknown<'env>,
    lead: Unknown<'env>,
    soft_wait: Unknown<'env>,
    resume: Unknown<'env>,
    schedule_reads: Unknown<'env>,
    report_problem: Unknown<'env>,
    decode: Unknown<'env>,
  ) -> Result<Unknown<'env>> {
    let env = env.raw();
    // SAFETY: `env` is the env napi-rs passed to this method, running now on
    // its JS thread, and the handles are this call's arguments, alive
    // in its scope. `install_raw` registers only callbacks that read their
    // data as `Rc<Inner>`, which is what it gives `raw::function`.
    unsafe {
      self.install_raw(
        env,
        ctx.value().value,
        [
          lead,
          soft_wait,
          resume,
          schedule_reads,
          report_problem,
          decode,
        ]
        .map(|f| f.value().value),
      )
    }
    .map_err(|f| {
      // SAFETY: the same env, still inside this method.
      unsafe { to_napi_error(env, f) }
    })
  }

  /// Stops new calls; what is in flight goes on until the JS side drains
  /// it, but for the flights in their first read, which no JS leader holds
  /// yet: they reject with `reason` now.
  #[napi(ts_args_type = "reason: Error")]
  pub fn close(&self, env: &Env, reason: Unknown) {
    self.inner.cache.borrow_mut().close();
    // SAFETY: `env` is the env napi-rs passed to this method, running now
    // on its JS thread; `reason` is a value of this call.
    unsafe { flight::reject_unled(env.raw(), &self.inner, reason.value().value) }
  }

  /// At close (once loads and writes settled): one more attempt to deliver
  /// the writes and invalidations that could not reach Redis. Fulfils with
  /// what is still undelivered (given up), never rejects.
  #[napi(
    ts_return_type = "Promise<Array<{ op: 'set' | 'delete' | 'expire' | 'clear'; key?: string; namespace?: string }>>"
  )]
  pub fn flush_recovery<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
    let env = env.raw();
    let flush = self.inner.cache.borrow().flush_recovery();
    // SAFETY: `env` is the env napi-rs passed to this method, running now
    // on its JS thread.
    unsafe {
      answer_later(env, self.inner.id, flush, Vec::new(), |env, left| {
        undelivered_to_js(env, left)
      })
    }
  }

  /// `ready()`: fulfils with null once Redis answers as the fleet needs it
  /// (or at once without Redis), else with the cause `{ code, message }`
  /// (which the JS wrapper rejects with); never rejects itself.
  #[napi(ts_return_type = "Promise<{ code: string; message: string } | null>")]
  pub fn ready<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
    let env = env.raw();
    let ready = self.inner.cache.borrow().ready();
    // SAFETY: `env` is the env napi-rs passed to this method, running now
    // on its JS thread.
    unsafe {
      answer_later(
        env,
        self.inner.id,
        ready,
        Ok(()),
        |env, answer| match answer {
          Ok(()) => raw::null(env),
          Err(problem) => problem_to_js(env, &problem),
        },
      )
    }
  }

  /// The last Redis failure's cause, `{ code, message }`, or null.
  #[napi(ts_return_type = "{ code: string; message: string } | null")]
  pub fn last_redis_error<'env>(&self, env: &'env Env) -> Result<Unknown<'env>> {
    let env = env.raw();
    let last = self.inner.cache.borrow().last_problem();
    // SAFETY: `env` is the env napi-rs passed to this method, on its JS
    // thread; the value is made in its scope.
    unsafe {
      let value = match last {
        Some(problem) => problem_to_js(env, &problem),
        None => raw::null(env),
      };
      Unknown::from_napi_value(env, value)
    }
  }

  /// Drops every entry and flight (after close, once flights settled).
  #[napi]
  pub fn release(&self) {
    let flights = self.inner.cache.borrow_mut().release();
    drop(flights);
    self.inner.helpers.borrow_mut().take();
  }

  /// Test hook: moves this cache's clock forward by `ms`.
  #[napi]
  pub fn advance_clock(&self, ms: f64) {
    if ms.is_finite() && ms > 0.0 {
      self
        .inner
        .cache
        .borrow_mut()
        .local_mut()
        .advance_clock(ms.round() as u64);
    }
  }

  /// Test hook: this host's wall clock reads `ms` off (positive: ahead).
  /// With Redis, the offset to the server's clock is measured again, which
  /// corrects it: the promise fulfils once it was (true if Redis answered).
  #[napi(ts_return_type = "Promise<boolean>")]
  pub fn skew_clock<'env>(&self, env: &'env Env, ms: f64) -> Result<Unknown<'env>> {
    let env = env.raw();
    let ms = if ms.is_finite() { ms.round() as i64 } else { 0 };
    let sync = self.inner.cache.borrow_mut().skew_clock(ms);
    // SAFETY: `env` is the env napi-rs passed to this method, running now
    // on its JS thread.
    unsafe {
      answer_later(env, self.inner.id, sync, false, |env, synced| {
        raw::boolean(env, synced)
      })
    }
  }

  /// Test hook: pins the uniform draws in (0, 1] used for jitter and XFetch
  /// (`null`: random again).
  #[napi]
  pub fn set_random(&self, jitter: Option<f64>, xfetch: Option<f64>) {
    let clamp = |u: Option<f64>| u.filter(|u| u.is_finite()).map(|u| u.clamp(0.0, 1.0));
    self
      .inner
      .cache
      .borrow_mut()
      .local_mut()
      .set_random(clamp(jitter), clamp(xfetch));
  }
}

/// The promise of a cold-path method that may have work for tokio: the
/// work's answer as `to_js` makes it, or (no work: no Redis) `without`'s,
/// already settled. The value is made with the env it is resolved with
/// (`futures::promise`); `env` must be the calling method's.
unsafe fn answer_later<'env, T: Send + 'static>(
  env: raw::Env,
  cache_id: u64,
  work: Option<impl std::future::Future<Output = T> + Send + 'static>,
  without: T,
  to_js: impl FnOnce(raw::Env, T) -> raw::Value + Send + 'static,
) -> Result<Unknown<'env>> {
  let promise = match work {
    None => raw::resolved(env, to_js(env, without)),
    Some(work) => {
      futures::promise_on_cache(env, cache_id, work, to_js).map_err(|f| to_napi_error(env, f))?
    }
  };
  Unknown::from_napi_value(env, promise)
}

/// `{ code, message }`.
unsafe fn problem_to_js(env: raw::Env, problem: &crate::engine::shared::Problem) -> raw::Value {
  let mut object = std::ptr::null_mut();
  napi::sys::napi_create_object(env, &mut object);
  let _ = raw::set_property(
    env,
    object,
    c"code",
    raw::string(env, problem.code.as_str()),
  );
  let _ = raw::set_property(env, object, c"message", raw::string(env, &problem.message));
  object
}

/// `[{ op, key }]` (no `key` for a clear; `tag` for a `deleteByTag`; a
/// namespace's clear has its `namespace`).
unsafe fn undelivered_to_js(env: raw::Env, left: Vec<Undelivered>) -> raw::Value {
  use napi::sys;
  let mut array = std::ptr::null_mut();
  sys::napi_create_array_with_length(env, left.len(), &mut array);
  for (index, item) in left.iter().enumerate() {
    let mut object = std::ptr::null_mut();
    sys::napi_create_object(env, &mut object);
    let _ = raw::set_property(env, object, c"op", raw::string(env, item.op));
    if let Some(key) = &item.key {
      let _ = raw::set_property(env, object, c"key", raw::string(env, key));
    }
    if let Some(tag) = &item.tag {
      let _ = raw::set_property(env, object, c"tag", raw::string(env, tag));
    }
    if let Some(namespace) = &item.namespace {
      let _ = raw::set_property(env, object, c"namespace", raw::string(env, namespace));
    }
    sys::napi_set_element(env, array, index as u32, object);
  }
  array
}

type EntryPoint = unsafe extern "C" fn(raw::Env, napi::sys::napi_callback_info) -> raw::Value;

/// The outcome slot's size: the outcome byte, `getOrLoadMany`'s byte, the
/// byte saying how the answer was given, from [`REMEMBER_EPOCH_AT`] a `u32`
/// and an `f64` (`Inner::set_remember`), and at [`GIVEN_SLOT_AT`] a `u32`
/// (`Inner::set_given_slot`).
const OUTCOME_BYTES: usize = 24;
const REMEMBER_EPOCH_AT: usize = 4;
const REMEMBER_UNTIL_AT: usize = 8;
const GIVEN_SLOT_AT: usize = 16;

/// The raw functions `install()` returns (with `outcomeBuffer`,
/// `epochBuffer`, `clockBuffer` and `values`), by JS name.
/// `lib/native-contract.d.ts` describes each for the JS side, and
/// `__test__/native-contract.test.js` checks that it lists these.
const ENTRY_POINTS: [(&std::ffi::CStr, EntryPoint); 20] = [
  (c"getOrLoad", entry::get_or_load),
  (c"getOrLoadMany", entry::get_or_load_many),
  (c"fill", flight::fill),
  (c"heldValue", flight::held_value),
  (c"fail", flight::fail),
  (c"recordSoftWait", flight::record_soft_wait),
  (c"flushReads", flight::flush_reads),
  (c"recordLoadQueue", flight::record_load_queue),
  (c"loadSlots", slots::load_slots),
  (c"nextLoadSlots", slots::next_load_slots),
  (c"get", ops::get),
  (c"set", ops::set),
  (c"delete", ops::delete),
  (c"expire", ops::expire),
  (c"deleteByTag", ops::delete_by_tag),
  (c"clear", ops::clear),
  (c"clearPrefix", ops::clear_prefix),
  (c"peek", ops::peek),
  (c"stats", ops::stats),
  (c"metrics", ops::metrics),
];

impl NativeCache {
  unsafe fn install_raw<'env>(
    &self,
    env: raw::Env,
    ctx: raw::Value,
    [lead, soft_wait, resume, schedule_reads, report_problem, decode]: [raw::Value; 6],
  ) -> RawResult<Unknown<'env>> {
    let mut global = std::ptr::null_mut();
    raw::napi_try!(env, napi::sys::napi_get_global(env, &mut global));
    let json = raw::get_property(env, global, c"JSON")?;
    let json_parse = raw::get_property(env, json, c"parse")?;
    *self.inner.helpers.borrow_mut() = Some(Helpers {
      ctx: JsRef::weak(env, ctx)?,
      lead: JsRef::strong(env, lead)?,
      soft_wait: JsRef::strong(env, soft_wait)?,
      resume: JsRef::strong(env, resume)?,
      schedule_reads: JsRef::strong(env, schedule_reads)?,
      report_problem: JsRef::strong(env, report_problem)?,
      json_parse: JsRef::strong(env, json_parse)?,
      decode: JsRef::strong(env, decode)?,
    });
    let mut slot = std::ptr::null_mut();
    let mut buffer = std::ptr::null_mut();
    raw::napi_try!(
      env,
      napi::sys::napi_create_arraybuffer(env, OUTCOME_BYTES, &mut slot, &mut buffer)
    );
    // The slot is published only once the buffer is held (`set_outcome`).
    *self.inner.outcome_buffer.borrow_mut() = Some(JsRef::strong(env, buffer)?);
    self.inner.outcome_slot.set(slot as *mut u8);
    let config = self.inner.cache.borrow().config().clone();
    share_config(env, ctx, &config)?;
    let mut object = std::ptr::null_mut();
    raw::napi_try!(env, napi::sys::napi_create_object(env, &mut object));
    raw::set_property(env, object, c"outcomeBuffer", buffer)?;
    raw::set_property(env, object, c"values", held::table(env)?)?;
    let epoch = self.inner.cache.borrow().local().clock().epoch().cell();
    let clock = crate::engine::clock::published_wall_clock();
    if let (Some(epoch), Some(clock)) = (
      raw::shared_u32(env, epoch),
      raw::shared_static_f64(env, clock),
    ) {
      raw::set_property(env, object, c"epochBuffer", epoch)?;
      raw::set_property(env, object, c"clockBuffer", clock)?;
    }
    // Every entry reads its data pointer as `Rc<Inner>` (`raw::args`), the
    // type given here: `raw::function`'s requirement.
    for (prop, callback) in ENTRY_POINTS {
      let name = prop.to_str().unwrap_or_default();
      let f = raw::function(env, name, callback, Rc::clone(&self.inner))?;
      raw::set_property(env, object, prop, f)?;
    }
    Unknown::from_napi_value(env, object).map_err(|e| {
      Failure::Coded(crate::core::error::Error::new(
        crate::core::error::Code::Internal,
        crate::core::error::Kind::Plain,
        e.to_string(),
      ))
    })
  }
}

/// Tells the JS context what it needs of the configuration.
unsafe fn share_config(
  env: raw::Env,
  ctx: raw::Value,
  config: &crate::core::options::CacheConfig,
) -> RawResult<()> {
  let fleet_cap = config
    .redis
    .as_ref()
    .and_then(|r| r.fleet_max_concurrent_loads);
  let numbers = [
    (c"hardTimeout", config.hard_timeout as f64),
    (c"softTimeout", config.soft_timeout as f64),
    (c"maxValueBytes", config.max_value_bytes as f64),
    // 0: no cap (lib/bulkhead.js makes no bulkhead then).
    (
      c"maxConcurrentLoads",
      config.process_load_cap().unwrap_or(0) as f64,
    ),
    // 0: no fleet cap (the bulkhead asks for no fleet slots).
    (c"fleetMaxConcurrentLoads", fleet_cap.unwrap_or(0) as f64),
    (c"maxQueuedLoads", config.max_queued_loads as f64),
  ];
  for (name, value) in numbers {
    raw::set_property(env, ctx, name, raw::number(env, value))?;
  }
  raw::set_property(
    env,
    ctx,
    c"redis",
    raw::boolean(env, config.redis.is_some()),
  )?;
  // What reads a value's JSON text: Redis stores it, `l1MaxValueBytes`
  // (`l1MaxBytes`) weighs it. Without either, lib/json-copy.js makes the
  // copy the callers get without the text.
  let needs_text = config.redis.is_some() || config.l1_max_value_bytes.is_some();
  raw::set_property(env, ctx, c"needsText", raw::boolean(env, needs_text))
}
