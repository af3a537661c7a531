//! The load bulkhead's calls on the fleet's load slots
//! (`fleetMaxConcurrentLoads`, `engine::slots`): `loadSlots(released,
//! wanted)` and `nextLoadSlots()`. Only lib/bulkhead.js calls them, and
//! only when `ctx.fleetMaxConcurrentLoads` is set.

use super::futures::promise_on_cache;
use super::raw::{self, Env, Value};
use super::Inner;
use crate::engine::slots::LoadSlots;
use napi::sys;
use std::rc::Rc;
use std::sync::Arc;

/// The load slots of the cache an entry point was made for, and its
/// arguments; `None` without a fleet cap (or once the fleet stopped).
unsafe fn slots_of<const N: usize>(
  env: Env,
  info: sys::napi_callback_info,
) -> ([Value; N], u64, Option<Arc<LoadSlots>>) {
  let (argv, _, inner) = raw::args::<N, Rc<Inner>>(env, info);
  // SAFETY: an entry point made with `Rc<Inner>` data, borrowed only for
  // this statement, while its function is alive (as in `entry::get_or_load`).
  let inner: &Inner = &*inner;
  (argv, inner.id, inner.cache.borrow().load_slots())
}

/// `loadSlots(released, wanted)`: `released` fleet slots given back (their
/// loaders settled, or no queued load needed them), and the queued loads a
/// fleet slot would start now number `wanted` (all of them, not a change).
pub unsafe extern "C" fn load_slots(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, _, slots) = slots_of::<2>(env, info);
  if let Some(slots) = slots {
    slots.update(raw::get_count(env, argv[0]), raw::get_count(env, argv[1]));
  }
  raw::undefined(env)
}

/// `nextLoadSlots()`: a promise of the fleet slots granted since the last
/// one (> 0), of -1 (Redis could not be asked: run the queue under the
/// per-process cap), or of 0 (nothing is wanted any more, or no fleet).
pub unsafe extern "C" fn next_load_slots(env: Env, info: sys::napi_callback_info) -> Value {
  let (_, cache_id, slots) = slots_of::<0>(env, info);
  let Some(slots) = slots else {
    return raw::resolved(env, raw::number(env, 0.0));
  };
  promise_on_cache(
    env,
    cache_id,
    async move { slots.next().await },
    |env, n| raw::number(env, n as f64),
  )
  .unwrap_or_else(|failure| raw::throw(env, failure))
}
