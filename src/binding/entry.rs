//! `getOrLoad`, the raw entry point every call goes through (and
//! `getOrLoadMany`, the same for many keys in one crossing). A hit or a
//! join is answered here synchronously, on the JS thread: no tokio, no
//! thread hop, no per-call closure. A miss starts a flight
//! ([`start_flight`]), whose life is `binding/flight.rs`.

use super::args::{check_tags_shape, read_call_options};
use super::flight::{start_flight, Call};
use super::key;
use super::raw::{self, Env, Failure, JsRef, RawResult, Utf8, Value};
use super::status::{self, Outcome, Source, StaleReason};
use super::{closed, Inner};
use crate::core::error::{Code, Error, Kind};
use crate::core::options::{EntryPolicy, Tiers};
use crate::engine::{Decision, Refresh};
use napi::sys;
use std::rc::Rc;

/// What the decision asks for, with the JS values taken out while the engine
/// was borrowed (calling into JS may re-enter it).
enum Action {
  /// The value, an outcome, maybe a refresh to start, and whether JS may
  /// answer it again itself.
  Serve(Given, Outcome, Option<Refresh>, Remember),
  Stale {
    /// The entry's value.
    value: Value,
    refresh: bool,
    join: Option<Value>,
    counted: bool,
  },
  Join(Value),
  Lead,
}

/// What a call answers with. A value from memory is given as it is, and
/// the caller makes its promise: `getOrLoad`'s JS wrapper does it cheaper
/// than Node-API, and remembers a hot key's.
#[derive(Clone, Copy)]
enum Given {
  /// A promise: the flight's, or a soft wait's.
  Promise(Value),
  /// The value.
  Value(Value),
  /// The value, in this slot of the value table (`held::table`), where the
  /// JS wrapper reads it: cheaper than handing it over (an element read
  /// through Node-API, ~60 ns). Only for a call that runs no JS between the
  /// decision and its return, which could empty the slot (a refresh's
  /// leader, a `status` object's setters), and whose caller reads it at
  /// once (`getOrLoad`'s, with `slot_ok`).
  Slot(u32),
}

/// `names().given`: byte 2 of the outcome slot is the index here of how
/// the last `getOrLoad` gave its answer.
pub(super) const GIVEN: [&str; 3] = ["promise", "value", "slot"];
const GIVEN_PROMISE: u8 = 0;
const GIVEN_VALUE: u8 = 1;
pub(super) const GIVEN_SLOT: u8 = 2;

impl Given {
  /// The promise or the value: what a caller that reads no slot is given.
  fn as_read(self) -> Value {
    match self {
      Given::Promise(value) | Given::Value(value) => value,
      Given::Slot(_) => unreachable!("only a caller that reads the slot is given one"),
    }
  }
}

/// How a call was answered.
struct Answer {
  given: Given,
  outcome: Outcome,
  remember: Remember,
}

/// A fresh hit JS may answer again itself (index.js `#remember`): until
/// `until` (this machine's wall time, ms; 0: it may not), while the cache's
/// epoch is still `epoch`, the one read before the decision (a change
/// queued after that read moves the epoch past it).
#[derive(Clone, Copy, Default)]
pub(super) struct Remember {
  pub until: f64,
  pub epoch: u32,
}

/// `getOrLoad(key, loader, stale?, ttl?, hardTtl?, negativeTtl?, beta?, status?, tags?, tiers?, l1Ttl?)`.
pub unsafe extern "C" fn get_or_load(env: Env, info: sys::napi_callback_info) -> Value {
  // Most calls pass no options: two arguments. Node-API fills every slot
  // asked for (past the arguments with undefined), so those are read alone
  // first, and the rest only when there are more.
  let ([key_js, loader], argc, inner) = raw::args::<2, Rc<Inner>>(env, info);
  let argv = if argc > 2 {
    raw::args::<11, Rc<Inner>>(env, info).0
  } else {
    let undefined = raw::undefined(env);
    let mut argv = [undefined; 11];
    argv[0] = key_js;
    argv[1] = loader;
    argv
  };
  // SAFETY: `install_raw` made this function with `raw::function` and an
  // `Rc<Inner>` as data, so the pointer is that box. The box is freed only
  // by the function's finalizer, which cannot run while the function is
  // being called, so the borrow is valid for this whole callback; it is
  // shared, and re-entrant calls (the loader calling `getOrLoad`) only take
  // shared borrows too, mutating through the `RefCell`s.
  let inner = &*inner;
  let [key_js, loader, stale, ttl, hard_ttl, negative_ttl, beta, status, tags, tiers, l1_ttl] =
    argv;
  let given = argc > 2;
  let options = Options::Unread {
    values: [stale, ttl, hard_ttl, negative_ttl, beta, l1_ttl, tiers],
    given,
  };
  // Without options, `status` is undefined: no need to look at it.
  let status = given.then_some(status);
  inner.set_outcome(0);
  let answer = answer_key(env, inner, key_js, loader, options, tags, status);
  // Written last: a loader this call ran may have made calls of its own.
  inner.set_given(GIVEN_PROMISE);
  match answer {
    Ok(answer) => {
      inner.set_outcome(answer.outcome as u8);
      inner.set_remember(answer.remember);
      match answer.given {
        Given::Promise(promise) => promise,
        Given::Value(value) => {
          inner.set_given(GIVEN_VALUE);
          value
        }
        Given::Slot(slot) => {
          inner.set_given_slot(slot);
          raw::undefined(env)
        }
      }
    }
    Err(failure) => raw::rejected(env, failure),
  }
}

/// The most keys one `getOrLoadMany` call takes (lib/many.js calls it once
/// per this many): they come as arguments, read into a buffer on the stack.
pub(super) const MANY_KEYS: usize = 256;

/// The arguments of `getOrLoadMany` before its keys.
const MANY_FIXED: usize = 9;

/// `getOrLoadMany(collect, loader, stale, ttl, hardTtl, negativeTtl, beta,
/// l1Ttl, tags, ...keys)`: `getOrLoad(key, loader, stale, …, tags)` for each key,
/// in order, in one crossing (at most [`MANY_KEYS`]), the options read once.
/// Every key is read first: one that is no key is thrown (its
/// `ERR_HERDCACHE_INVALID_KEY`) before any is looked up. Answers
/// `collect(...answers)`: each key's promise (a key getOrLoad would reject:
/// a rejected one), or its value from memory, of which the caller makes a
/// promise (`Promise.resolve` leaves a promise as it is). The outcome slot ends as the last key's call leaves it;
/// its byte 1 is 1 when no answer can reject (every key was answered from
/// memory: a fresh, negative or stale value), else 0.
///
/// The keys come as arguments, and the promises go as arguments (`collect`
/// is `(...promises) => promises`): reading or writing an array's elements
/// through Node-API costs ~0.1 µs each, more than a whole hit, and
/// `Array.of` ~15 ns, where rest parameters take ~3.
pub unsafe extern "C" fn get_or_load_many(env: Env, info: sys::napi_callback_info) -> Value {
  let (argv, argc, inner) = raw::args::<{ MANY_FIXED + MANY_KEYS }, Rc<Inner>>(env, info);
  // SAFETY: as in `get_or_load`: `install_raw` made this function with
  // `raw::function` and an `Rc<Inner>` as data, alive while it runs, and
  // only borrowed shared.
  let inner = &*inner;
  inner.set_many_fulfilled(false);
  if argc > argv.len() {
    return raw::throw(
      env,
      Failure::Coded(Error::new(
        Code::Internal,
        Kind::Range,
        format!("getOrLoadMany takes at most {MANY_KEYS} keys a call"),
      )),
    );
  }
  let (fixed, keys) = argv[..argc.max(MANY_FIXED)].split_at(MANY_FIXED);
  let &[collect, loader, stale, ttl, hard_ttl, negative_ttl, beta, l1_ttl, tags] = fixed else {
    unreachable!("split at MANY_FIXED")
  };
  let mut ends = [0usize; MANY_KEYS];
  let text = match read_many_keys(env, inner, keys, &mut ends) {
    Ok(text) => text,
    Err(failure) => return raw::throw(env, failure),
  };
  // No tiers: `l1`, `redis` and `forceFresh` are getOrLoad's alone.
  let tiers = raw::undefined(env);
  let values = [stale, ttl, hard_ttl, negative_ttl, beta, l1_ttl, tiers];
  // Bad options are read again by each key, which then fails as its own
  // getOrLoad call would (after its key's checks).
  let options = match check_options(env, inner, values, true, tags) {
    Ok(checked) => Options::Checked(checked),
    Err(_) => Options::Unread {
      values,
      given: true,
    },
  };
  let loader_ok = raw::type_of(env, loader) == sys::ValueType::napi_function;
  let mut promises = [std::ptr::null_mut(); MANY_KEYS];
  let mut fulfilled = true;
  let mut start = 0;
  for ((&key_js, &end), promise) in keys.iter().zip(&ends).zip(promises.iter_mut()) {
    let key = &text[start..end];
    start = end;
    inner.set_outcome(0);
    // As `answer_key`, with the key read already.
    let answer = if inner.cache.borrow().is_closed() {
      Err(closed())
    } else if !loader_ok {
      Err(not_a_loader())
    } else {
      answer_read_key(env, inner, key, key_js, loader, options, tags, None, false)
    };
    *promise = match answer {
      Ok(answer) => {
        inner.set_outcome(answer.outcome as u8);
        fulfilled &= matches!(
          answer.outcome,
          Outcome::Hit | Outcome::Stale | Outcome::Negative
        );
        answer.given.as_read()
      }
      Err(failure) => {
        fulfilled = false;
        raw::rejected(env, failure)
      }
    };
  }
  keep_many_keys(inner, text);
  match raw::call(env, collect, &promises[..keys.len()]) {
    Ok(array) => {
      inner.set_many_fulfilled(fulfilled);
      array
    }
    Err(failure) => raw::throw(env, failure),
  }
}

/// The keys' text, end to end (each key's end in `ends`), in the buffer
/// reused from call to call (a nested call, from JS this one calls, takes
/// an empty one).
unsafe fn read_many_keys(
  env: Env,
  inner: &Inner,
  keys: &[Value],
  ends: &mut [usize; MANY_KEYS],
) -> RawResult<String> {
  let mut text = inner.many_keys.take();
  text.clear();
  for (&key_js, end) in keys.iter().zip(ends.iter_mut()) {
    let mut key_buf = Utf8::new();
    match key::read_string_first(env, key_js, &mut key_buf) {
      Ok(key) => text.push_str(key.as_str()),
      Err(failure) => {
        keep_many_keys(inner, text);
        return Err(failure);
      }
    }
    *end = text.len();
  }
  Ok(text)
}

/// The most bytes of keys' text `getOrLoadMany` keeps between calls: a
/// call of longer keys allocates its own.
const MANY_KEYS_KEPT: usize = 16 * 1024;

/// Keeps `text` for the next `getOrLoadMany` call, unless it grew large.
fn keep_many_keys(inner: &Inner, text: String) {
  if text.capacity() <= MANY_KEYS_KEPT {
    inner.many_keys.set(text);
  }
}

/// A call's options, read and checked: the same for every key of a
/// `getOrLoadMany` call.
#[derive(Clone, Copy)]
struct Checked {
  refuse_stale: bool,
  /// The entry policy with the call's overrides; `None` for a call without
  /// options, whose policy is the cache's own, read only if the call
  /// starts a flight (a hit needs none: bench/HITPATH.md).
  policy: Option<EntryPolicy>,
  tiers: Tiers,
}

/// Where the options of one key's call come from.
#[derive(Clone, Copy)]
enum Options {
  /// As passed (`given`: any argument past the loader): read after the
  /// key, so a bad key is reported before a bad option.
  Unread { values: [Value; 7], given: bool },
  /// Read once already (a `getOrLoadMany` call's, for each of its keys).
  Checked(Checked),
}

/// Reads and checks the positional call options (`stale, ttl, hardTtl,
/// negativeTtl, beta, l1Ttl, tiers`) and the shape of `tags`.
#[inline(always)]
unsafe fn check_options(
  env: Env,
  inner: &Inner,
  values: [Value; 7],
  given: bool,
  tags: Value,
) -> RawResult<Checked> {
  // Without options every argument past the loader is undefined already.
  if !given {
    return Ok(Checked {
      refuse_stale: false,
      policy: None,
      tiers: Tiers::default(),
    });
  }
  let options = read_call_options(env, values)?;
  let policy = inner
    .cache
    .borrow()
    .config()
    .entry
    .with(&options.overrides)?;
  check_tags_shape(env, tags)?;
  Ok(Checked {
    refuse_stale: options.refuse_stale,
    policy: Some(policy),
    tiers: options.tiers,
  })
}

/// One key's `getOrLoad` call: its promise and how it was answered.
/// `status`: the caller's `status` argument, if it passed options.
#[inline(always)]
unsafe fn answer_key(
  env: Env,
  inner: &Rc<Inner>,
  key_js: Value,
  loader: Value,
  options: Options,
  tags: Value,
  status: Option<Value>,
) -> RawResult<Answer> {
  if inner.cache.borrow().is_closed() {
    return Err(closed());
  }
  let mut key_buf = Utf8::new();
  let key = key::read_string_first(env, key_js, &mut key_buf)?;
  // Reading an array key runs its getters (a Proxy's traps), which may have
  // closed the cache: a flight started now would never be settled.
  if inner.cache.borrow().is_closed() {
    return Err(closed());
  }
  if raw::type_of(env, loader) != sys::ValueType::napi_function {
    return Err(not_a_loader());
  }
  // A `status` object is filled after the decision: its setters could run.
  let slot_ok = status.is_none_or(|s| raw::type_of(env, s) != sys::ValueType::napi_object);
  answer_read_key(
    env,
    inner,
    key.as_str(),
    key_js,
    loader,
    options,
    tags,
    status,
    slot_ok,
  )
}

fn not_a_loader() -> Failure {
  Failure::Coded(Error::new(
    Code::InvalidLoader,
    Kind::Type,
    "the loader is not a function; pass ({ key, signal }) => value or an async function",
  ))
}

/// The rest of one key's `getOrLoad` call, once its key is read (`key`,
/// encoded) and its loader known to be a function. `slot_ok`: the caller
/// may be given a value in its slot ([`Given::Slot`]).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn answer_read_key(
  env: Env,
  inner: &Rc<Inner>,
  key: &str,
  key_js: Value,
  loader: Value,
  options: Options,
  tags: Value,
  status: Option<Value>,
  slot_ok: bool,
) -> RawResult<Answer> {
  let Checked {
    refuse_stale,
    policy,
    tiers,
  } = match options {
    Options::Checked(checked) => checked,
    Options::Unread { values, given } => check_options(env, inner, values, given, tags)?,
  };
  let action = decide(env, inner, key, refuse_stale, tiers, slot_ok);
  // What a flight is started with; a hit starts none. A macro, not a
  // closure: the closure's captures were stored on every hit.
  macro_rules! call {
    () => {
      Call {
        key,
        key_js,
        loader,
        policy: policy.unwrap_or_else(|| inner.cache.borrow().config().entry),
        refuse_stale,
        tags,
        tiers,
      }
    };
  }
  let mut stale_reason = None;
  let promise = |promise, outcome| Answer {
    given: Given::Promise(promise),
    outcome,
    remember: Remember::default(),
  };
  let answer = match action {
    Action::Serve(given, outcome, refresh, remember) => {
      if let Some(refresh) = refresh {
        let _ = start_flight(env, inner, &call!(), Some(refresh));
      }
      Answer {
        given,
        outcome,
        remember,
      }
    }
    Action::Stale {
      value,
      refresh,
      join,
      counted,
    } => {
      let (answer, reason) =
        serve_stale(env, inner, &call!(), value, refresh, join, counted, status)?;
      stale_reason = Some(reason);
      answer
    }
    Action::Join(joined) => promise(joined, Outcome::Coalesced),
    Action::Lead => promise(start_flight(env, inner, &call!(), None)?, Outcome::Miss),
  };
  if let Some(status) = status.filter(|&s| raw::type_of(env, s) == sys::ValueType::napi_object) {
    describe_answer(env, inner, key, answer.outcome, stale_reason, status)?;
  }
  Ok(answer)
}

/// The engine's decision for `key`, with the JS values taken out while it
/// was borrowed.
#[inline(always)]
unsafe fn decide(
  env: Env,
  inner: &Inner,
  key: &str,
  refuse_stale: bool,
  tiers: Tiers,
  slot_ok: bool,
) -> Action {
  let mut cache = inner.cache.borrow_mut();
  let (offset, epoch) = (
    cache.local().clock().offset(),
    cache.local().clock().epoch().get(),
  );
  let decision = match tiers.reads_l1() {
    true => cache.decide(key, !refuse_stale),
    false => cache.decide_past_l1(key, tiers),
  };
  match decision {
    Decision::Hit {
      value,
      refresh,
      until,
    } => {
      // In this machine's wall time: the engine's clock is it plus `offset`.
      let remember = Remember {
        until: until.map_or(0.0, |until| (until as i64).saturating_sub(offset) as f64),
        epoch,
      };
      // A refresh starts a leader, whose loader may empty the slot.
      let given = match slot_ok && refresh.is_none() {
        true => Given::Slot(value.slot()),
        false => Given::Value(value.value(env)),
      };
      Action::Serve(given, Outcome::Hit, refresh, remember)
    }
    Decision::Negative { value } => Action::Serve(
      match slot_ok {
        true => Given::Slot(value.slot()),
        false => Given::Value(value.value(env)),
      },
      Outcome::Negative,
      None,
      Remember::default(),
    ),
    Decision::Stale {
      value,
      refresh,
      join,
      counted,
    } => Action::Stale {
      value: value.value(env),
      refresh,
      join: join.and_then(|f| f.promise(env)),
      counted,
    },
    Decision::Join { flight } => match flight.promise(env) {
      Some(promise) => Action::Join(promise),
      None => Action::Lead,
    },
    Decision::Lead => Action::Lead,
  }
}

/// A stale value for the caller: at once, or after a soft wait on the
/// refresh (started here if the decision asked for one, else the one
/// running), and why it was stale.
#[allow(clippy::too_many_arguments)]
unsafe fn serve_stale(
  env: Env,
  inner: &Rc<Inner>,
  call: &Call<'_>,
  value: Value,
  refresh: bool,
  join: Option<Value>,
  counted: bool,
  status: Option<Value>,
) -> RawResult<(Answer, StaleReason)> {
  let flight = if refresh {
    start_flight(env, inner, call, Some(Refresh::Stale)).ok()
  } else {
    join
  };
  let reason = match flight {
    Some(_) => StaleReason::Refresh,
    None => StaleReason::Backoff,
  };
  let given = match flight {
    Some(flight) if !counted => Given::Promise(soft_wait(env, inner, flight, value, status)?),
    _ => {
      if !counted {
        inner.cache.borrow_mut().local_mut().record_soft_wait(true);
      }
      Given::Value(value)
    }
  };
  let answer = Answer {
    given,
    outcome: Outcome::Stale,
    remember: Remember::default(),
  };
  Ok((answer, reason))
}

/// Fills the caller's `status` object for an answer from memory now, or
/// leaves it with the flight that answers it later.
unsafe fn describe_answer(
  env: Env,
  inner: &Inner,
  key: &str,
  outcome: Outcome,
  stale_reason: Option<StaleReason>,
  status: Value,
) -> RawResult<()> {
  match outcome {
    // Answered later, maybe by another instance's value: the flight
    // fills these callers' `status` when it knows (`flight::answer`).
    Outcome::Miss | Outcome::Coalesced => watch_status(env, inner, key, status),
    Outcome::Hit | Outcome::Stale | Outcome::Negative => {
      let meta = {
        let cache = inner.cache.borrow();
        let local = cache.local();
        local.entry_meta(key).map(|meta| (meta, local.now()))
      };
      status::describe(env, status, Source::Memory, None, stale_reason, meta);
      Ok(())
    }
  }
}

/// Keeps a caller's `status` object with the key's flight.
unsafe fn watch_status(env: Env, inner: &Inner, key: &str, status: Value) -> RawResult<()> {
  let mut cache = inner.cache.borrow_mut();
  if let Some(flight) = cache.local_mut().flight_for_key_mut(key) {
    flight.handle.statuses.push(JsRef::strong(env, status)?);
  }
  Ok(())
}

/// `softWait(ctx, flight, stale, status)`: `status` the caller's object, or undefined.
unsafe fn soft_wait(
  env: Env,
  inner: &Rc<Inner>,
  flight: Value,
  stale: Value,
  status: Option<Value>,
) -> RawResult<Value> {
  let ctx = inner.helper(env, |h| &h.ctx)?;
  let wait = inner.helper(env, |h| &h.soft_wait)?;
  let status = match status {
    Some(status) if raw::type_of(env, status) == sys::ValueType::napi_object => status,
    _ => raw::undefined(env),
  };
  raw::call(env, wait, &[ctx, flight, stale, status])
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn the_given_bytes_index_their_names() {
    let named = |byte: u8| GIVEN[byte as usize];
    assert_eq!(
      [named(GIVEN_PROMISE), named(GIVEN_VALUE), named(GIVEN_SLOT)],
      ["promise", "value", "slot"]
    );
  }
}
