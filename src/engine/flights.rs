//! The flight table: one load in flight per key. A flight is created before
//! its loader is called and gets its handle (the shared promise, in the
//! binding) right after. Ids tell flights of the same key apart, so a flight
//! that was superseded (by `set`, `delete`, `clear`) can neither store its
//! result nor remove its successor.

use crate::core::options::EntryPolicy;
// hashbrown's default hasher (foldhash, randomly seeded): fast for short
// keys, unlike std's SipHash, and not open to chosen-collision keys like FxHash.
use hashbrown::HashMap;

#[derive(Debug)]
pub struct Flight<F> {
  pub id: u64,
  pub handle: Option<F>,
  pub background: bool,
  /// The TTLs the flight's result is written with (the leader's call options).
  pub policy: EntryPolicy,
  /// Epoch ms when the load started: the written entry's stamp.
  pub started_at: u64,
  /// A caller that refuses stale values joined: a stale value found in a
  /// shared store must not answer this flight.
  pub strict: bool,
  /// For an early (XFetch) refresh, the stamp of the value it replaces: a
  /// shared store's value answers the flight only if it is newer.
  pub replaces: Option<u64>,
  /// Callers that joined the flight (counted `coalesced`).
  pub joined: std::cell::Cell<u64>,
}

#[derive(Debug)]
pub struct FlightTable<F> {
  flights: HashMap<String, Flight<F>>,
  next_id: u64,
}

impl<F> Default for FlightTable<F> {
  fn default() -> Self {
    FlightTable {
      flights: HashMap::new(),
      next_id: 1,
    }
  }
}

impl<F> FlightTable<F> {
  pub fn get(&self, key: &str) -> Option<&Flight<F>> {
    self.flights.get(key)
  }

  pub fn len(&self) -> usize {
    self.flights.len()
  }

  pub fn is_empty(&self) -> bool {
    self.flights.is_empty()
  }

  /// Starts a flight; a flight already there (a loader that re-entered its
  /// own key synchronously) is superseded and returned.
  pub fn begin(
    &mut self,
    key: &str,
    background: bool,
    policy: EntryPolicy,
    now: u64,
  ) -> (u64, Option<Flight<F>>) {
    let id = self.next_id;
    self.next_id += 1;
    let flight = Flight {
      id,
      handle: None,
      background,
      policy,
      started_at: now,
      strict: false,
      replaces: None,
      joined: std::cell::Cell::new(0),
    };
    (id, self.flights.insert(key.to_string(), flight))
  }

  pub fn get_mut(&mut self, key: &str) -> Option<&mut Flight<F>> {
    self.flights.get_mut(key)
  }

  /// Gives flight `id` its handle; `Err(handle)` when it is no longer current.
  pub fn attach(&mut self, key: &str, id: u64, handle: F) -> Result<(), F> {
    match self.flights.get_mut(key) {
      Some(flight) if flight.id == id => {
        flight.handle = Some(handle);
        Ok(())
      }
      _ => Err(handle),
    }
  }

  /// The flight `id` of `key`, if it is still current.
  pub fn current(&self, key: &str, id: u64) -> Option<&Flight<F>> {
    self.flights.get(key).filter(|f| f.id == id)
  }

  /// Ends flight `id`; a successor under the same key is left alone.
  pub fn end(&mut self, key: &str, id: u64) -> Option<Flight<F>> {
    if self.current(key, id).is_some() {
      self.flights.remove(key)
    } else {
      None
    }
  }

  /// Detaches whatever flight `key` has: its result will not be stored and
  /// the next caller starts a new load.
  pub fn supersede(&mut self, key: &str) -> Option<Flight<F>> {
    self.flights.remove(key)
  }

  pub fn supersede_all(&mut self) -> Vec<Flight<F>> {
    self.flights.drain().map(|(_, f)| f).collect()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  const POLICY: EntryPolicy = EntryPolicy {
    ttl: 10,
    hard_ttl: 100,
    negative_ttl: 5,
    beta: 1.0,
  };

  #[test]
  fn ids_keep_superseded_flights_from_touching_successors() {
    let mut t: FlightTable<&str> = FlightTable::default();
    let (first, _) = t.begin("k", false, POLICY, 0);
    assert!(t.attach("k", first, "p1").is_ok());
    assert!(t.supersede("k").is_some());
    let (second, _) = t.begin("k", false, POLICY, 1);
    assert!(t.end("k", first).is_none());
    assert_eq!(t.current("k", second).unwrap().id, second);
    assert_eq!(t.attach("k", first, "late"), Err("late"));
    assert!(t.end("k", second).is_some());
    assert!(t.is_empty());
  }

  #[test]
  fn a_reentrant_begin_supersedes_the_outer_flight() {
    let mut t: FlightTable<&str> = FlightTable::default();
    let (outer, _) = t.begin("k", false, POLICY, 0);
    let (inner, replaced) = t.begin("k", false, POLICY, 0);
    assert_eq!(replaced.unwrap().id, outer);
    assert!(t.attach("k", outer, "p").is_err());
    assert!(t.attach("k", inner, "p").is_ok());
  }
}
