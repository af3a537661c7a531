//! Running the engine's futures on napi's tokio runtime. Their results come
//! back on the JS thread, where they become JS values or, for a flight's
//! steps, go back to the cache they belong to: looked up by id in the
//! registry (`super::with_cache`), since a `Rc<Inner>` cannot cross to tokio.

use super::raw::{self, Env, Failure, RawResult, Value};
use super::Inner;
use crate::core::error::{Code, Error, Kind};
use napi::bindgen_prelude::execute_tokio_future;
use std::future::Future;
use std::rc::Rc;

/// Runs `future` on tokio and returns its promise, which `to_js` fulfils
/// on the JS thread (with the env napi-rs resolves it with: that is the env
/// the binding's contract speaks of inside it, `binding/raw.rs`).
pub unsafe fn promise<T: Send + 'static>(
  env: Env,
  future: impl Future<Output = T> + Send + 'static,
  to_js: impl FnOnce(Env, T) -> Value + Send + 'static,
) -> RawResult<Value> {
  execute_tokio_future(
    env,
    async move { napi::Result::Ok(future.await) },
    move |env, value| Ok(to_js(env, value)),
  )
  .map_err(|e| {
    Failure::Coded(Error::new(
      Code::Internal,
      Kind::Plain,
      format!("internal: {e}"),
    ))
  })
}

/// Runs `future` on tokio, then `then` on the JS thread with the cache
/// `cache_id` (skipped if it is gone). Returns the promise of that, which
/// fulfils with `undefined` and never rejects.
pub unsafe fn then_on_cache<T: Send + 'static>(
  env: Env,
  cache_id: u64,
  future: impl Future<Output = T> + Send + 'static,
  then: impl FnOnce(Env, &Rc<Inner>, T) + Send + 'static,
) -> RawResult<Value> {
  promise(env, future, move |env, value| {
    super::with_cache(cache_id, |inner| {
      then(env, inner, value);
      inner.report_problems(env);
    });
    raw::undefined(env)
  })
}

/// [`promise`] for a call of cache `cache_id`: once it completed, what the
/// store found meanwhile is reported ([`Inner::report_problems`]).
pub unsafe fn promise_on_cache<T: Send + 'static>(
  env: Env,
  cache_id: u64,
  future: impl Future<Output = T> + Send + 'static,
  to_js: impl FnOnce(Env, T) -> Value + Send + 'static,
) -> RawResult<Value> {
  promise(env, future, move |env, value| {
    let value = to_js(env, value);
    super::with_cache(cache_id, |inner| inner.report_problems(env));
    value
  })
}

/// Runs `future` on tokio; nobody waits for it.
pub fn spawn(future: impl Future<Output = ()> + Send + 'static) {
  napi::bindgen_prelude::spawn(future);
}
