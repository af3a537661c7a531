//! The flight table: one load in flight per key, each flight addressed by
//! its id. A flight knows its key, so the calls that report on it (its
//! result, its failure, the fleet's answer) take the id alone. A key points
//! to its current flight; `set`, `delete` and `clear` supersede it (the key
//! no longer points to it, and its result will not be stored), but a
//! superseded flight stays in the table until it ends, because its callers
//! still wait for its answer.

use crate::core::options::EntryPolicy;
// hashbrown's default hasher (foldhash, randomly seeded): fast for short
// keys, unlike std's SipHash, and not open to chosen-collision keys like FxHash.
use hashbrown::HashMap;

#[derive(Debug)]
pub struct Flight<F> {
  /// The encoded key.
  pub key: String,
  /// The binding's handle of the flight (its shared promise).
  pub handle: F,
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
  pub joined: u64,
  /// The fleet lock this flight holds, once won.
  pub lock: Option<String>,
  /// `set`, `delete` or `clear` came while it ran: its result is not stored.
  pub superseded: bool,
}

#[derive(Debug)]
pub struct FlightTable<F> {
  by_id: HashMap<u64, Flight<F>>,
  /// Each key's current flight.
  by_key: HashMap<String, u64>,
  next_id: u64,
}

impl<F> Default for FlightTable<F> {
  fn default() -> Self {
    FlightTable {
      by_id: HashMap::new(),
      by_key: HashMap::new(),
      next_id: 1,
    }
  }
}

impl<F> FlightTable<F> {
  /// The key's current flight.
  pub fn for_key(&self, key: &str) -> Option<&Flight<F>> {
    if self.by_key.is_empty() {
      return None;
    }
    self.by_key.get(key).and_then(|id| self.by_id.get(id))
  }

  pub fn for_key_mut(&mut self, key: &str) -> Option<&mut Flight<F>> {
    if self.by_key.is_empty() {
      return None;
    }
    let id = *self.by_key.get(key)?;
    self.by_id.get_mut(&id)
  }

  /// Flights in the table, superseded ones included.
  pub fn len(&self) -> usize {
    self.by_id.len()
  }

  pub fn is_empty(&self) -> bool {
    self.by_id.is_empty()
  }

  /// Starts a flight and makes it the key's current one; a flight already
  /// there (a loader that re-entered its own key synchronously) is
  /// superseded.
  pub fn begin(
    &mut self,
    key: &str,
    handle: F,
    background: bool,
    policy: EntryPolicy,
    now: u64,
  ) -> u64 {
    let id = self.next_id;
    self.next_id += 1;
    if let Some(previous) = self.by_key.insert(key.to_string(), id) {
      if let Some(flight) = self.by_id.get_mut(&previous) {
        flight.superseded = true;
      }
    }
    let flight = Flight {
      key: key.to_string(),
      handle,
      background,
      policy,
      started_at: now,
      strict: false,
      replaces: None,
      joined: 0,
      lock: None,
      superseded: false,
    };
    self.by_id.insert(id, flight);
    id
  }

  /// Flight `id`, superseded or not, until it ends.
  pub fn get(&self, id: u64) -> Option<&Flight<F>> {
    self.by_id.get(&id)
  }

  pub fn get_mut(&mut self, id: u64) -> Option<&mut Flight<F>> {
    self.by_id.get_mut(&id)
  }

  /// Flight `id`, if it is still its key's current flight.
  pub fn current(&self, id: u64) -> Option<&Flight<F>> {
    self.by_id.get(&id).filter(|f| !f.superseded)
  }

  /// Ends flight `id`; a successor under the same key is left alone.
  pub fn end(&mut self, id: u64) -> Option<Flight<F>> {
    let flight = self.by_id.remove(&id)?;
    if !flight.superseded {
      self.by_key.remove(&flight.key);
    }
    Some(flight)
  }

  /// Detaches whatever flight `key` has: its result will not be stored and
  /// the next caller starts a new load.
  pub fn supersede(&mut self, key: &str) {
    if self.by_key.is_empty() {
      return;
    }
    if let Some(id) = self.by_key.remove(key) {
      if let Some(flight) = self.by_id.get_mut(&id) {
        flight.superseded = true;
      }
    }
  }

  pub fn supersede_all(&mut self) {
    self.by_key.clear();
    for flight in self.by_id.values_mut() {
      flight.superseded = true;
    }
  }

  /// Every flight, for teardown (after `close`, once loads settled).
  pub fn drain(&mut self) -> Vec<Flight<F>> {
    self.by_key.clear();
    self.by_id.drain().map(|(_, f)| f).collect()
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
    let first = t.begin("k", "p1", false, POLICY, 0);
    t.supersede("k");
    assert!(
      t.current(first).is_none(),
      "a superseded flight is not current"
    );
    assert_eq!(
      t.get(first).unwrap().handle,
      "p1",
      "but it stays until it ends"
    );
    let second = t.begin("k", "p2", false, POLICY, 1);
    assert_eq!(t.end(first).unwrap().key, "k");
    assert_eq!(
      t.for_key("k").unwrap().handle,
      "p2",
      "ending the first left the second"
    );
    assert!(t.end(second).is_some());
    assert!(t.is_empty());
    assert!(t.for_key("k").is_none());
  }

  #[test]
  fn a_reentrant_begin_supersedes_the_outer_flight() {
    let mut t: FlightTable<&str> = FlightTable::default();
    let outer = t.begin("k", "outer", false, POLICY, 0);
    let inner = t.begin("k", "inner", false, POLICY, 0);
    assert!(t.current(outer).is_none());
    assert_eq!(t.current(inner).unwrap().handle, "inner");
    assert_eq!(t.len(), 2);
  }
}
