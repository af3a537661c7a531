//! How the embedded store holds a value: in a slot of its env's value
//! table, one JS array per env on this thread ([`table`]). A `Held` is the slot's number, 4 bytes: no
//! Node-API reference per entry (a `napi_ref` is a tracked native object
//! and a V8 global handle, ~70 bytes: bench/RESULTS.md, memory) and no
//! settled promise kept beside the value (~48 bytes of heap). A hit hands
//! the value over, and the JS wrapper makes its promise (index.js; a hot
//! key's promise is remembered there, bench/HITPATH.md).
//!
//! Every kind of value is held the same way, a string as it was (lone
//! surrogates and all), a number without a copy.
//!
//! The table's array has no prototype, so that writing an element never
//! reaches a setter an application put on `Array.prototype`: the engine
//! is borrowed while slots are written and cleared, and must not be
//! re-entered. A slot is cleared when its `Held` is dropped (the entry
//! evicted, replaced, expired or deleted), which lets the value go; the
//! slot is then reused.

use super::raw::{self, Env, Failure, RawResult, Value};
use crate::core::error::{Code, Error, Kind};
use napi::sys;
use std::cell::RefCell;
use std::marker::PhantomData;
use std::ptr;

/// The slots of one table: a `Held` keeps its table's index in its top
/// bits. 2^26 values per env and thread (67 million: far past what a V8
/// heap holds), 64 envs per thread (Node makes one per thread that loads
/// the addon; a test runner that loads it anew per file makes more).
const SLOT_BITS: u32 = 26;
const SLOT_MASK: u32 = (1 << SLOT_BITS) - 1;
const MAX_TABLES: usize = 1 << (32 - SLOT_BITS);

/// Not `Send` (`PhantomData` of a raw pointer): it is cleared on its
/// env's JS thread, where its table is.
#[derive(Debug)]
pub struct Held(u32, PhantomData<*const ()>);

struct Table {
  env: Env,
  /// A strong reference to the array (never deleted: it lives as long as
  /// its env, which deletes it at teardown, after the finalizers that drop
  /// the last `Held`s ran).
  array: sys::napi_ref,
  /// Slots given back, reused first.
  free: Vec<u32>,
  /// Slots handed out so far: the array's length.
  len: u32,
}

thread_local! {
  /// This thread's tables, by the index a `Held` carries. Never borrowed
  /// across a Node-API call, so a `Held` dropped anywhere finds it free.
  static TABLES: RefCell<Vec<Table>> = const { RefCell::new(Vec::new()) };
}

/// `env`'s value table's array (made on its first call, by the env's first
/// cache).
///
/// # Safety
///
/// The module's contract: `env` is the env of the running callback, on its
/// JS thread.
pub unsafe fn table(env: Env) -> RawResult<Value> {
  if let Some(index) = table_of(env) {
    let array = TABLES.with(|tables| tables.borrow()[index].array);
    return raw::reference_value(env, array).ok_or_else(gone);
  }
  if TABLES.with(|tables| tables.borrow().len()) >= MAX_TABLES {
    return Err(Failure::Coded(Error::new(
      Code::Internal,
      Kind::Plain,
      format!("herdcache holds values for at most {MAX_TABLES} Node-API environments per thread"),
    )));
  }
  let mut array = ptr::null_mut();
  raw::napi_try!(env, sys::napi_create_array(env, &mut array));
  let mut global = ptr::null_mut();
  raw::napi_try!(env, sys::napi_get_global(env, &mut global));
  let object = raw::get_property(env, global, c"Object")?;
  let set_prototype = raw::get_property(env, object, c"setPrototypeOf")?;
  raw::call(env, set_prototype, &[array, raw::null(env)])?;
  let reference = raw::create_reference(env, array, 1)?;
  TABLES.with(|tables| {
    tables.borrow_mut().push(Table {
      env,
      array: reference,
      free: Vec::new(),
      len: 0,
    })
  });
  Ok(array)
}

fn table_of(env: Env) -> Option<usize> {
  TABLES.with(|tables| tables.borrow().iter().position(|t| t.env == env))
}

fn gone() -> Failure {
  Failure::Coded(Error::new(
    Code::Internal,
    Kind::Plain,
    "herdcache's value table is gone (its environment is being torn down)",
  ))
}

impl Held {
  /// `value`, held in a slot of `env`'s table.
  ///
  /// # Safety
  ///
  /// The module's contract, and `env`'s table was made ([`table`], at the
  /// cache's install).
  pub unsafe fn from_js(env: Env, value: Value) -> RawResult<Held> {
    let index = table_of(env).ok_or_else(gone)?;
    let taken = TABLES.with(|tables| {
      let table = &mut tables.borrow_mut()[index];
      let slot = match table.free.pop() {
        Some(slot) => slot,
        None if table.len <= SLOT_MASK => {
          table.len += 1;
          table.len - 1
        }
        None => return None,
      };
      Some((slot, table.array))
    });
    let Some((slot, array)) = taken else {
      return Err(Failure::Coded(Error::new(
        Code::Internal,
        Kind::Range,
        format!(
          "herdcache holds at most {} values per thread",
          SLOT_MASK as u64 + 1
        ),
      )));
    };
    let held = Held(((index as u32) << SLOT_BITS) | slot, PhantomData);
    let stored = raw::reference_value(env, array)
      .ok_or_else(gone)
      .and_then(|array| {
        raw::napi_try!(env, sys::napi_set_element(env, array, slot, value));
        Ok(())
      });
    // On failure `held` drops here and gives its slot back.
    stored.map(|()| held)
  }

  /// The value.
  ///
  /// # Safety
  ///
  /// The module's contract, and `env` is the env this was held on (a cache
  /// lives on one).
  #[inline]
  pub unsafe fn value(&self, env: Env) -> Value {
    let array = TABLES.with(|tables| tables.borrow().get(self.table()).map(|t| t.array));
    let mut value = ptr::null_mut();
    if let Some(array) = array.and_then(|array| raw::reference_value(env, array)) {
      sys::napi_get_element(env, array, self.slot(), &mut value);
    }
    if value.is_null() {
      raw::undefined(env)
    } else {
      value
    }
  }

  fn table(&self) -> usize {
    (self.0 >> SLOT_BITS) as usize
  }

  /// Its slot in its table's array.
  #[inline]
  pub fn slot(&self) -> u32 {
    self.0 & SLOT_MASK
  }
}

impl Drop for Held {
  fn drop(&mut self) {
    // At thread teardown the tables may be gone already: nothing to clear.
    let found = TABLES.try_with(|tables| {
      let tables = tables.borrow();
      tables.get(self.table()).map(|t| (t.env, t.array))
    });
    let Ok(Some((env, array))) = found else {
      return;
    };
    // SAFETY: a `Held` is made on its table's env (`from_js`) and is not
    // `Send` (the table's raw pointers are reached through a thread-local
    // of this thread), so this runs on that env's JS thread; its owners are
    // freed in a napi call or a napi finalizer (as `JsRef`'s `Drop`
    // explains), while the env and the table's reference are alive: at
    // teardown Node runs the finalizers before it deletes the references.
    // Writing `undefined` to an element of an array without a prototype
    // runs no JS. Should the write fail (an env that can no longer run
    // JS), the slot is reused all the same, and its next value replaces
    // the old one.
    unsafe {
      if let Some(array) = raw::reference_value(env, array) {
        sys::napi_set_element(env, array, self.slot(), raw::undefined(env));
      }
    }
    let _ = TABLES.try_with(|tables| {
      if let Some(table) = tables.borrow_mut().get_mut(self.table()) {
        table.free.push(self.slot());
      }
    });
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn a_held_value_is_its_slot_number() {
    assert_eq!(std::mem::size_of::<Held>(), 4);
    let held = std::mem::ManuallyDrop::new(Held((3 << SLOT_BITS) | 12, PhantomData));
    assert_eq!((held.table(), held.slot()), (3, 12));
  }
}
