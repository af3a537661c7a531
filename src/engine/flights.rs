//! The flight table: one load in flight per key, each flight addressed by
//! its id. A flight knows its key, so the calls that report on it (its
//! result, its failure, the fleet's answer) take the id alone. A key points
//! to its current flight; `set`, `delete` and `clear` supersede it (the key
//! no longer points to it, and its result will not be stored), but a
//! superseded flight stays in the table until it ends, because its callers
//! still wait for its answer.

use crate::core::options::{EntryPolicy, Tiers};
use crate::core::tags::Tags;
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
  /// The tags its value is written with (its leader's call options).
  pub tags: Tags,
  /// What its callers' `status` says of how it was answered: recorded by
  /// `Cache::step` as the fleet answers.
  pub answered: Answered,
  /// What its leading call asked of the tiers (`forceFresh`, `l1`, `redis`).
  pub tiers: Tiers,
  /// Its JS leader was made (it must be told how the flight ends). With a
  /// fleet, a foreground flight's is made only once the fleet asks for a
  /// lock or a load (`Cache::begin`, `Cache::step`).
  pub led: bool,
}

/// How a flight came by the value it adopts: what its callers' `status`
/// says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
  /// Its first read found it in the store (no lock asked).
  Store,
  /// Asking who loads found it: the lock's holder wrote it while the flight
  /// waited (or just before it asked).
  Holder,
}

/// What the fleet told a flight, for its callers' `status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answered {
  /// Another instance's value answered it (`None`: our load did).
  pub from: Option<Origin>,
  /// What the fleet lock said: `Some(true)` won, `Some(false)` held by
  /// another instance, `None` not asked.
  pub lock_won: Option<bool>,
}

/// The flights, in a slab: an id is a slot and that slot's generation, so a
/// report by id is an index and a compare, and a stale id (its flight ended,
/// the slot reused) finds nothing. Ids stay below 2^53: they cross to JS as
/// numbers.
#[derive(Debug)]
pub struct FlightTable<F> {
  slots: Vec<Slot<F>>,
  free: Vec<u32>,
  /// Each key's current flight, by slot.
  by_key: HashMap<String, u32>,
  len: usize,
}

#[derive(Debug)]
struct Slot<F> {
  generation: u32,
  flight: Option<Flight<F>>,
}

/// Generations wrap below this, keeping ids under 2^53.
const GENERATIONS: u32 = 1 << 21;

fn id_of(slot: u32, generation: u32) -> u64 {
  (u64::from(generation) << 32) | u64::from(slot)
}

impl<F> Default for FlightTable<F> {
  fn default() -> Self {
    FlightTable {
      slots: Vec::new(),
      free: Vec::new(),
      by_key: HashMap::new(),
      len: 0,
    }
  }
}

impl<F> FlightTable<F> {
  /// The key's current flight.
  pub fn for_key(&self, key: &str) -> Option<&Flight<F>> {
    if self.by_key.is_empty() {
      return None;
    }
    let slot = *self.by_key.get(key)?;
    self.slots[slot as usize].flight.as_ref()
  }

  pub fn for_key_mut(&mut self, key: &str) -> Option<&mut Flight<F>> {
    if self.by_key.is_empty() {
      return None;
    }
    let slot = *self.by_key.get(key)?;
    self.slots[slot as usize].flight.as_mut()
  }

  /// Flights in the table, superseded ones included.
  pub fn len(&self) -> usize {
    self.len
  }

  pub fn is_empty(&self) -> bool {
    self.len == 0
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
      tags: Tags::NONE,
      answered: Answered::default(),
      tiers: Tiers::default(),
      led: true,
    };
    let slot = match self.free.pop() {
      Some(slot) => slot,
      None => {
        self.slots.push(Slot {
          generation: 0,
          flight: None,
        });
        (self.slots.len() - 1) as u32
      }
    };
    let entry = &mut self.slots[slot as usize];
    entry.generation = (entry.generation + 1) % GENERATIONS;
    entry.flight = Some(flight);
    let id = id_of(slot, entry.generation);
    self.len += 1;
    if let Some(previous) = self.by_key.insert(key.to_string(), slot) {
      if let Some(flight) = self.slots[previous as usize].flight.as_mut() {
        flight.superseded = true;
      }
    }
    id
  }

  fn slot(&self, id: u64) -> Option<&Slot<F>> {
    let slot = self.slots.get((id & u64::from(u32::MAX)) as usize)?;
    (u64::from(slot.generation) == id >> 32).then_some(slot)
  }

  fn slot_mut(&mut self, id: u64) -> Option<&mut Slot<F>> {
    let slot = self.slots.get_mut((id & u64::from(u32::MAX)) as usize)?;
    (u64::from(slot.generation) == id >> 32).then_some(slot)
  }

  /// Flight `id`, superseded or not, until it ends.
  pub fn get(&self, id: u64) -> Option<&Flight<F>> {
    self.slot(id)?.flight.as_ref()
  }

  pub fn get_mut(&mut self, id: u64) -> Option<&mut Flight<F>> {
    self.slot_mut(id)?.flight.as_mut()
  }

  /// Flight `id`, if it is still its key's current flight.
  pub fn current(&self, id: u64) -> Option<&Flight<F>> {
    self.get(id).filter(|f| !f.superseded)
  }

  /// Ends flight `id`; a successor under the same key is left alone.
  pub fn end(&mut self, id: u64) -> Option<Flight<F>> {
    let flight = self.slot_mut(id)?.flight.take()?;
    let slot = (id & u64::from(u32::MAX)) as u32;
    self.free.push(slot);
    self.len -= 1;
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
    if let Some(slot) = self.by_key.remove(key) {
      if let Some(flight) = self.slots[slot as usize].flight.as_mut() {
        flight.superseded = true;
      }
    }
  }

  /// Supersedes every flight carrying `tag` that started by `at`: its
  /// load may have read what the `deleteByTag` invalidated.
  pub fn supersede_tagged(&mut self, tag: &str, at: u64) {
    if self.by_key.is_empty() {
      return;
    }
    let by_key = &mut self.by_key;
    for flight in self.slots.iter_mut().filter_map(|s| s.flight.as_mut()) {
      if !flight.superseded && flight.started_at <= at && flight.tags.contains(tag) {
        flight.superseded = true;
        by_key.remove(&flight.key);
      }
    }
  }

  /// [`FlightTable::supersede`] for every key starting with `prefix` (a
  /// namespace's clear).
  pub fn supersede_prefix(&mut self, prefix: &str) {
    if self.by_key.is_empty() {
      return;
    }
    let slots = &mut self.slots;
    self.by_key.retain(|key, slot| {
      if !key.starts_with(prefix) {
        return true;
      }
      if let Some(flight) = slots[*slot as usize].flight.as_mut() {
        flight.superseded = true;
      }
      false
    });
  }

  pub fn supersede_all(&mut self) {
    self.by_key.clear();
    for flight in self.slots.iter_mut().filter_map(|s| s.flight.as_mut()) {
      flight.superseded = true;
    }
  }

  /// The flights whose JS leader is not made yet (at close, their callers
  /// are rejected here: no leader's `abort` reaches them).
  pub fn unled(&self) -> Vec<u64> {
    let slots = self.slots.iter().enumerate();
    let unled = slots.filter(|(_, s)| s.flight.as_ref().is_some_and(|f| !f.led));
    unled
      .map(|(slot, s)| id_of(slot as u32, s.generation))
      .collect()
  }

  /// Every flight, for teardown (after `close`, once loads settled).
  pub fn drain(&mut self) -> Vec<Flight<F>> {
    self.by_key.clear();
    self.free.clear();
    self.len = 0;
    let flights = self.slots.drain(..).filter_map(|s| s.flight).collect();
    flights
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
    l1_ttl: None,
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
  fn a_stale_id_finds_nothing_once_its_slot_is_reused() {
    let mut t: FlightTable<&str> = FlightTable::default();
    let first = t.begin("a", "p1", false, POLICY, 0);
    assert!(t.end(first).is_some());
    let second = t.begin("b", "p2", false, POLICY, 0);
    assert_ne!(first, second, "the reused slot has a new generation");
    assert!(t.get(first).is_none() && t.end(first).is_none());
    assert_eq!(t.get(second).unwrap().key, "b");
    assert!(second < 1 << 53);
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
