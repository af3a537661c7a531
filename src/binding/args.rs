//! The readers of a call's arguments that more than one entry point takes:
//! its options and its tags, checked with coded errors.

use super::raw::{self, napi_try, Env, Failure, RawResult, Value};
use crate::core::error::{Code, Error, Kind};
use crate::core::options::{RawCallOptions, Tiers};
use crate::core::tags::{self, Tags};
use napi::sys;

/// The per-call options, passed positionally by the JS wrapper (it reads
/// the options object, where property access is cheap).
#[derive(Default)]
pub(super) struct CallOptions {
  pub refuse_stale: bool,
  pub overrides: RawCallOptions,
  pub tiers: Tiers,
}

fn option_type(name: &str, rule: &str) -> Failure {
  Failure::Coded(Error::new(
    Code::InvalidOption,
    Kind::Type,
    format!("call option `{name}` must be {rule}"),
  ))
}

pub(super) unsafe fn optional_number(env: Env, value: Value, name: &str) -> RawResult<Option<f64>> {
  match raw::type_of(env, value) {
    sys::ValueType::napi_undefined => Ok(None),
    sys::ValueType::napi_number => Ok(Some(raw::get_number(env, value))),
    _ => Err(option_type(name, "a number")),
  }
}

/// `stale, ttl, hardTtl, negativeTtl, beta, l1Ttl, tiers`, each possibly
/// undefined (`tiers`: the bits of `Tiers`, which the JS wrapper made of the
/// boolean options it checked).
pub(super) unsafe fn read_call_options(
  env: Env,
  [stale, ttl, hard_ttl, negative_ttl, beta, l1_ttl, tiers]: [Value; 7],
) -> RawResult<CallOptions> {
  let refuse_stale = match raw::type_of(env, stale) {
    sys::ValueType::napi_undefined => false,
    sys::ValueType::napi_boolean => !raw::get_bool(env, stale),
    _ => return Err(option_type("stale", "a boolean")),
  };
  Ok(CallOptions {
    refuse_stale,
    overrides: RawCallOptions {
      ttl: optional_number(env, ttl, "ttl")?,
      hard_ttl: optional_number(env, hard_ttl, "hardTtl")?,
      negative_ttl: optional_number(env, negative_ttl, "negativeTtl")?,
      beta: optional_number(env, beta, "beta")?,
      l1_ttl: optional_number(env, l1_ttl, "l1Ttl")?,
    },
    tiers: match optional_number(env, tiers, "tiers")? {
      Some(bits) => Tiers::from_bits(bits as u32),
      None => Tiers::default(),
    },
  })
}

/// Whether `tags` is undefined or an array: what a call checks before its
/// entry is known (a hit reads no tags: they are read when a flight starts).
pub(super) unsafe fn check_tags_shape(env: Env, value: Value) -> RawResult<()> {
  if raw::type_of(env, value) == sys::ValueType::napi_undefined {
    return Ok(());
  }
  let mut is_array = false;
  napi_try!(env, sys::napi_is_array(env, value, &mut is_array));
  match is_array {
    true => Ok(()),
    false => Err(option_type("tags", "an array of strings")),
  }
}

/// `tags`: undefined (none), or an array of tags (`core::tags` checks them).
pub(super) unsafe fn read_tags(env: Env, value: Value) -> RawResult<Tags> {
  raw::coded_throw(env, read_tags_js(env, value), || {
    Error::new(
      Code::InvalidOption,
      Kind::Type,
      "call option `tags` must be an array of strings; reading it threw (the error is this one's `cause`)",
    )
  })
}

unsafe fn read_tags_js(env: Env, value: Value) -> RawResult<Tags> {
  if raw::type_of(env, value) == sys::ValueType::napi_undefined {
    return Ok(Tags::NONE);
  }
  check_tags_shape(env, value)?;
  let mut len = 0u32;
  napi_try!(env, sys::napi_get_array_length(env, value, &mut len));
  // Refused before reading them: a runaway list is a bug.
  tags::check_count(len as usize)?;
  let mut tags = Vec::with_capacity(len as usize);
  for i in 0..len {
    let mut tag = std::ptr::null_mut();
    napi_try!(env, sys::napi_get_element(env, value, i, &mut tag));
    if raw::type_of(env, tag) != sys::ValueType::napi_string {
      return Err(option_type("tags", "an array of strings"));
    }
    tags.push(raw::get_string(env, tag)?);
  }
  Ok(Tags::new(tags)?)
}
