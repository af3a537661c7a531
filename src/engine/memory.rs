//! The embedded store: entries by encoded key, bounded by `max_entries`
//! (least recently used evicted first), entries past their hard TTL reclaimed.
//! Generic over the value holder, so the binding can keep JS values in it and
//! tests can keep strings.
//!
//! Laid out for the bytes an entry costs, since a store holds many: the
//! entries live in one array of slots (in fixed chunks), each with its key
//! and its neighbours in the LRU list as slot indices, and a table of slot
//! indices finds a key's slot. An entry is then no allocation of its own (a linked map's
//! node was a 192-byte malloc chunk, with 16 bytes of pointers in it), and
//! the table keeps 4 bytes per entry where a linked map kept an 8-byte
//! pointer. The few fields most entries leave at their default (a refresh's
//! back-off, tags, a validator, `l1Ttl`, a weight in bytes) are boxed apart.

use crate::core::envelope::Meta;
use crate::core::etag::Etag;
use crate::core::policy;
use crate::core::tags::Tags;
use crate::engine::epoch::Epoch;
// hashbrown's default hasher (foldhash, randomly seeded), as the flight
// table's: fast for short keys, and not open to chosen-collision keys.
use hashbrown::{DefaultHashBuilder, HashTable};
use std::hash::BuildHasher;

/// How often at most the whole store is swept for entries past their hard
/// TTL. Lookups and writes drop what they touch; the sweep catches the rest.
pub const SWEEP_INTERVAL_MS: u64 = 1_000;

// `Entry::compute`: the load time in the low 30 bits (ms: ~12 days at most,
// a longer one is kept as that), two flags above it.
const NEGATIVE: u32 = 1 << 31;
/// The entry's `Meta` had no `refresh_at` (an `hc1` entry): `refresh_at`
/// was drawn here, and `Entry::meta` gives `None` again.
const DRAWN_HERE: u32 = 1 << 30;
const COMPUTE_MS: u32 = DRAWN_HERE - 1;

/// A stored entry: its `Meta` (given back by [`Entry::meta`]), its value,
/// and the fields a refresh, `l1Ttl`, `l1MaxBytes`, tags or a validator
/// set, each read through its method.
#[derive(Debug)]
pub struct Entry<V> {
  fresh_until: u64,
  hard_until: u64,
  stamp: u64,
  /// From this moment (epoch ms) the fresh entry is refreshed early
  /// (XFetch): drawn once by its writer (`policy::xfetch_refresh_at`), with
  /// the beta of the call that wrote it, and shared with the fleet in the
  /// envelope. One draw per write, not one per read: per read, a hot key
  /// read millions of times a second would draw a near-zero `u` within
  /// microseconds and refresh as soon as it was written; and not one per
  /// instance: the earliest of N instances' draws would refresh a fleet
  /// `H(N)` times earlier than one instance. Also `Meta::refresh_at`,
  /// unless [`DRAWN_HERE`] says the meta had none.
  refresh_at: u64,
  /// `Meta::compute_ms` (saturated at [`COMPUTE_MS`]), [`NEGATIVE`] and
  /// [`DRAWN_HERE`].
  compute: u32,
  pub value: V,
  /// What few entries set; `None`: every field at its default
  /// ([`Rare::DEFAULT`]).
  rare: Option<Box<Rare>>,
}

/// The fields of an entry that are mostly at their default, boxed apart so
/// that an entry that has them all so does not carry their room.
#[derive(Debug)]
struct Rare {
  /// Failed refreshes in a row since the value was written (the attempt
  /// number of the refresh back-off, `policy::refresh_backoff`); a new
  /// value starts again at 0.
  failures: u32,
  /// What it counts against `l1MaxBytes`: its value's bytes as written
  /// (given with [`Entry::weighing`]; 0, unweighed, without a bound in
  /// bytes), and its key's once stored.
  bytes: u32,
  /// No background refresh before this (epoch ms): set after a refresh
  /// failed, so a dead database is not hammered.
  retry_after: u64,
  /// Past this moment (epoch ms) this process no longer answers from this
  /// copy (`l1Ttl`): a call goes on to Redis, else to the loader, though the
  /// entry's own TTLs run on. `u64::MAX`: no such bound.
  l1_until: u64,
  /// The tags it was written with: judged against their invalidation
  /// stamps on every read (`core::tags`).
  tags: Tags,
  /// Its validator (`ctx.setEtag`), for the loader of its next refresh.
  etag: Etag,
}

impl Rare {
  const DEFAULT: Rare = Rare {
    failures: 0,
    bytes: 0,
    retry_after: 0,
    l1_until: u64::MAX,
    tags: Tags::NONE,
    etag: Etag::NONE,
  };
}

/// What an entry without its box reads.
static NO_RARE: Rare = Rare::DEFAULT;

/// `meta`'s load time and flags, as `Entry::compute` keeps them.
fn compute_bits(meta: &Meta) -> u32 {
  let ms = meta.compute_ms.min(u64::from(COMPUTE_MS)) as u32;
  let negative = if meta.negative { NEGATIVE } else { 0 };
  let drawn_here = if meta.refresh_at.is_none() {
    DRAWN_HERE
  } else {
    0
  };
  ms | negative | drawn_here
}

impl<V> Entry<V> {
  /// A newly written entry: no failed refresh yet. `refresh_at` is
  /// `meta.refresh_at`, or, for an `hc1` entry, which has none, this
  /// process's own draw.
  pub fn new(meta: Meta, value: V, refresh_at: u64) -> Self {
    // One u64 holds both: were they to differ, `meta()` would give this one.
    debug_assert!(
      meta.refresh_at.is_none_or(|at| at == refresh_at),
      "an entry's refresh_at is its meta's when the meta has one"
    );
    Entry {
      fresh_until: meta.fresh_until,
      hard_until: meta.hard_until,
      stamp: meta.stamp,
      refresh_at,
      compute: compute_bits(&meta),
      value,
      rare: None,
    }
  }

  /// This entry, its value `bytes` long (the UTF-8 bytes of its JSON text).
  pub fn weighing(mut self, bytes: usize) -> Self {
    self.set_bytes(u32::try_from(bytes).unwrap_or(u32::MAX));
    self
  }

  /// This entry, used here for at most `l1_ttl` from `now` (`None`: as
  /// long as its TTLs allow).
  pub fn in_l1_for(mut self, l1_ttl: Option<u64>, now: u64) -> Self {
    if let Some(ms) = l1_ttl {
      self.set_rare(now.saturating_add(ms), |rare| &mut rare.l1_until);
    }
    self
  }

  /// Its deadlines, stamp, load time (at most ~12 days) and kind, and its
  /// `refresh_at` as its writer gave it (`None` for an `hc1` entry).
  #[inline]
  pub fn meta(&self) -> Meta {
    Meta {
      fresh_until: self.fresh_until,
      hard_until: self.hard_until,
      compute_ms: u64::from(self.compute & COMPUTE_MS),
      stamp: self.stamp,
      refresh_at: (self.compute & DRAWN_HERE == 0).then_some(self.refresh_at),
      negative: self.compute & NEGATIVE != 0,
    }
  }

  /// Takes `meta`'s deadlines, stamp, load time and kind, and its
  /// `refresh_at` when it has one; without one (`hc1`), the entry's own
  /// draw stays.
  pub fn set_meta(&mut self, meta: Meta) {
    self.fresh_until = meta.fresh_until;
    self.hard_until = meta.hard_until;
    self.stamp = meta.stamp;
    if let Some(at) = meta.refresh_at {
      self.refresh_at = at;
    }
    self.compute = compute_bits(&meta);
  }

  /// From this moment (epoch ms) the fresh entry is refreshed early
  /// (XFetch; the field's doc says why it is drawn once, by its writer).
  #[inline]
  pub fn refresh_at(&self) -> u64 {
    self.refresh_at
  }

  /// Moves the early refresh (and `meta().refresh_at` with it, when the
  /// entry's meta has one).
  pub fn set_refresh_at(&mut self, at: u64) {
    self.refresh_at = at;
  }

  /// Failed refreshes in a row since the value was written (the attempt
  /// number of the refresh back-off, `policy::refresh_backoff`).
  pub fn failures(&self) -> u32 {
    self.rare().failures
  }

  pub fn set_failures(&mut self, failures: u32) {
    self.set_rare(failures, |rare| &mut rare.failures);
  }

  /// No background refresh before this (epoch ms; 0 until a refresh
  /// failed).
  #[inline]
  pub fn retry_after(&self) -> u64 {
    self.rare().retry_after
  }

  pub fn set_retry_after(&mut self, at: u64) {
    self.set_rare(at, |rare| &mut rare.retry_after);
  }

  /// The tags it was written with, judged on every read (`core::tags`).
  #[inline]
  pub fn tags(&self) -> &Tags {
    &self.rare().tags
  }

  pub fn set_tags(&mut self, tags: Tags) {
    self.set_rare(tags, |rare| &mut rare.tags);
  }

  /// Its validator (`ctx.setEtag`), for the loader of its next refresh.
  pub fn etag(&self) -> &Etag {
    &self.rare().etag
  }

  pub fn set_etag(&mut self, etag: Etag) {
    self.set_rare(etag, |rare| &mut rare.etag);
  }

  /// Past this moment (epoch ms) this process no longer answers from this
  /// copy (`l1Ttl`); `u64::MAX`: no such bound.
  #[inline]
  pub fn l1_until(&self) -> u64 {
    self.rare().l1_until
  }

  /// What it counts against `l1MaxBytes`: its value's bytes as written
  /// (0 without a bound in bytes), and its key's once stored.
  pub fn bytes(&self) -> u32 {
    self.rare().bytes
  }

  fn set_bytes(&mut self, bytes: u32) {
    self.set_rare(bytes, |rare| &mut rare.bytes);
  }

  #[inline]
  fn rare(&self) -> &Rare {
    self.rare.as_deref().unwrap_or(&NO_RARE)
  }

  /// Sets the field of the box `field` picks to `value`; the box is made
  /// only for a value other than the field's default.
  fn set_rare<T: PartialEq>(&mut self, value: T, field: impl FnOnce(&mut Rare) -> &mut T) {
    match &mut self.rare {
      Some(rare) => *field(rare) = value,
      None => {
        let mut rare = Rare::DEFAULT;
        let slot = field(&mut rare);
        if *slot != value {
          *slot = value;
          self.rare = Some(Box::new(rare));
        }
      }
    }
  }
}

/// What a sweep or an insert removed, for the counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Reclaimed {
  pub evicted: u64,
  pub expired: u64,
}

/// A stored key: up to [`StoreKey::INLINE`] bytes inside its slot itself,
/// longer ones on the heap. Most cache keys are short (`user:1234`), and a
/// `String` would cost them an allocation (a 32-byte malloc chunk for a
/// 24-byte header's 10 bytes of text).
///
/// Compares as its `str`; the store hashes its `str`.
pub struct StoreKey(KeyRepr);

enum KeyRepr {
  Inline {
    len: u8,
    bytes: [u8; StoreKey::INLINE],
  },
  Heap(Box<str>),
}

impl StoreKey {
  /// The longest key kept inline: what fits next to the length and the
  /// tag in the 24 bytes a `Box<str>` and its tag take anyway.
  pub const INLINE: usize = 22;

  #[inline]
  pub fn as_str(&self) -> &str {
    match &self.0 {
      KeyRepr::Inline { len, bytes } => {
        // SAFETY: an inline key is only made by `From<&str>` below, which
        // copies the whole of a `str` (valid UTF-8) into the first `len`
        // bytes; nothing writes to them afterwards.
        unsafe { std::str::from_utf8_unchecked(&bytes[..*len as usize]) }
      }
      KeyRepr::Heap(text) => text,
    }
  }
}

impl From<&str> for StoreKey {
  fn from(key: &str) -> Self {
    if key.len() <= StoreKey::INLINE {
      let mut bytes = [0u8; StoreKey::INLINE];
      bytes[..key.len()].copy_from_slice(key.as_bytes());
      StoreKey(KeyRepr::Inline {
        len: key.len() as u8,
        bytes,
      })
    } else {
      StoreKey(KeyRepr::Heap(key.into()))
    }
  }
}

impl From<String> for StoreKey {
  fn from(key: String) -> Self {
    if key.len() <= StoreKey::INLINE {
      StoreKey::from(key.as_str())
    } else {
      StoreKey(KeyRepr::Heap(key.into_boxed_str()))
    }
  }
}

impl PartialEq for StoreKey {
  fn eq(&self, other: &Self) -> bool {
    self.as_str() == other.as_str()
  }
}

impl Eq for StoreKey {}

impl std::fmt::Debug for StoreKey {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    self.as_str().fmt(f)
  }
}

/// No slot: the end of a list.
const NIL: u32 = u32::MAX;

/// The most entries a store keeps: a slot index is a `u32` other than
/// [`NIL`], and a store holds one entry past its bound while it evicts.
const MAX_ENTRIES: usize = (NIL - 1) as usize;

/// An entry where it lives: with its key, between its neighbours in the
/// LRU list.
#[derive(Debug)]
struct Slot<V> {
  /// `None`: vacant, on the free list (through `next`); the entry it held
  /// was dropped as it left.
  live: Option<(StoreKey, Entry<V>)>,
  /// The slots of the less and the more recently used entries ([`NIL`]
  /// past either end).
  prev: u32,
  next: u32,
}

/// Slots in chunks of [`CHUNK`] that never move: the store grows by a
/// chunk, not by a `Vec` doubling into a new buffer, whose copy of the old
/// one would leave the old one's pages behind in the allocator (resident,
/// at up to the whole store's size again: bench/memory.js saw the store's
/// bytes per entry vary by ~40 with it).
struct Chunks<T> {
  chunks: Vec<Vec<T>>,
}

/// Slots per chunk (80 KB of 80-byte slots).
const CHUNK_BITS: u32 = 10;
const CHUNK: usize = 1 << CHUNK_BITS;

impl<T> Chunks<T> {
  const fn new() -> Self {
    Chunks { chunks: Vec::new() }
  }

  fn len(&self) -> usize {
    self
      .chunks
      .last()
      .map_or(0, |last| (self.chunks.len() - 1) * CHUNK + last.len())
  }

  fn push(&mut self, item: T) {
    match self.chunks.last_mut() {
      Some(last) if last.len() < CHUNK => last.push(item),
      _ => {
        let mut chunk = Vec::with_capacity(CHUNK);
        chunk.push(item);
        self.chunks.push(chunk);
      }
    }
  }
}

impl<T> std::ops::Index<usize> for Chunks<T> {
  type Output = T;

  #[inline]
  fn index(&self, i: usize) -> &T {
    &self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
  }
}

impl<T> std::ops::IndexMut<usize> for Chunks<T> {
  #[inline]
  fn index_mut(&mut self, i: usize) -> &mut T {
    &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
  }
}

impl<T> std::fmt::Debug for Chunks<T> {
  fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    write!(f, "Chunks({} slots)", self.len())
  }
}

/// The slots, with the LRU list and the free list threaded through them.
#[derive(Debug)]
struct Slots<V> {
  slots: Chunks<Slot<V>>,
  /// The least and the most recently used entries' slots.
  head: u32,
  tail: u32,
  /// A vacant slot, reused before a new one is made.
  free: u32,
}

impl<V> Slots<V> {
  const fn new() -> Self {
    Slots {
      slots: Chunks::new(),
      head: NIL,
      tail: NIL,
      free: NIL,
    }
  }

  #[inline]
  fn live(&self, i: u32) -> (&StoreKey, &Entry<V>) {
    match &self.slots[i as usize].live {
      Some((key, entry)) => (key, entry),
      None => unreachable!("the table holds live slots only"),
    }
  }

  #[inline]
  fn key(&self, i: u32) -> &str {
    self.live(i).0.as_str()
  }

  #[inline]
  fn entry_mut(&mut self, i: u32) -> &mut Entry<V> {
    match &mut self.slots[i as usize].live {
      Some((_, entry)) => entry,
      None => unreachable!("the table holds live slots only"),
    }
  }

  fn unlink(&mut self, i: u32) {
    let Slot { prev, next, .. } = self.slots[i as usize];
    match prev {
      NIL => self.head = next,
      prev => self.slots[prev as usize].next = next,
    }
    match next {
      NIL => self.tail = prev,
      next => self.slots[next as usize].prev = prev,
    }
  }

  fn link_back(&mut self, i: u32) {
    let tail = self.tail;
    let slot = &mut self.slots[i as usize];
    slot.prev = tail;
    slot.next = NIL;
    match tail {
      NIL => self.head = i,
      tail => self.slots[tail as usize].next = i,
    }
    self.tail = i;
  }

  /// Marks slot `i` most recently used.
  #[inline]
  fn move_to_back(&mut self, i: u32) {
    if self.tail != i {
      self.unlink(i);
      self.link_back(i);
    }
  }

  /// Keeps `key`'s entry in a vacant slot, else a new one, as the most
  /// recently used; returns the slot.
  fn occupy(&mut self, key: StoreKey, entry: Entry<V>) -> u32 {
    let live = Some((key, entry));
    let i = match self.free {
      NIL => {
        // `MemoryStore::new` bounds the entries below NIL.
        let i = u32::try_from(self.slots.len()).expect("a slot index below NIL");
        self.slots.push(Slot {
          live,
          prev: NIL,
          next: NIL,
        });
        i
      }
      i => {
        let slot = &mut self.slots[i as usize];
        self.free = slot.next;
        slot.live = live;
        i
      }
    };
    self.link_back(i);
    i
  }

  /// Takes slot `i`'s key and entry out, for the caller to drop, and puts
  /// the slot on the free list.
  fn vacate(&mut self, i: u32) -> (StoreKey, Entry<V>) {
    self.unlink(i);
    let slot = &mut self.slots[i as usize];
    slot.next = self.free;
    self.free = i;
    match slot.live.take() {
      Some(live) => live,
      None => unreachable!("a vacant slot is vacated once"),
    }
  }
}

#[derive(Debug)]
pub struct MemoryStore<V> {
  /// Each entry's slot, by its key's hash. The hash is not kept: a table
  /// that grows hashes the keys again.
  table: HashTable<u32>,
  hasher: DefaultHashBuilder,
  // Front (`head`) = least recently used.
  slots: Slots<V>,
  max_entries: usize,
  /// `l1MaxBytes` (`u64::MAX`: none), and what the entries weigh now.
  max_bytes: u64,
  bytes: u64,
  next_sweep: u64,
  /// Moved by every change to an entry (`engine::epoch`): whatever hands
  /// out an entry to change, or adds or removes one, bumps it.
  epoch: Epoch,
}

impl<V> MemoryStore<V> {
  pub fn new(max_entries: usize, max_bytes: Option<u64>) -> Self {
    MemoryStore {
      table: HashTable::new(),
      hasher: DefaultHashBuilder::default(),
      slots: Slots::new(),
      max_entries: max_entries.clamp(1, MAX_ENTRIES),
      max_bytes: max_bytes.unwrap_or(u64::MAX),
      bytes: 0,
      next_sweep: 0,
      epoch: Epoch::default(),
    }
  }

  /// This store, its changes counted on `epoch`.
  pub fn counting_on(mut self, epoch: Epoch) -> Self {
    self.epoch = epoch;
    self
  }

  pub fn len(&self) -> usize {
    self.table.len()
  }

  /// What the entries weigh (`Entry::bytes`), as `l1MaxBytes` counts.
  pub fn bytes(&self) -> u64 {
    self.bytes
  }

  pub fn is_empty(&self) -> bool {
    self.table.is_empty()
  }

  /// The live entry for `key`, marked most recently used. An entry past
  /// its hard TTL is not returned; the next write or sweep reclaims it.
  /// The one way to an entry that does not move the epoch: a lookup's
  /// (`Engine::decide`, `Engine::get`), which read it and change nothing.
  #[inline]
  pub fn touch(&mut self, key: &str, now: u64) -> (Option<&mut Entry<V>>, Reclaimed) {
    let reclaimed = self.sweep_if_due(now);
    let found = match self.find(key) {
      Some(i) => {
        self.slots.move_to_back(i);
        let entry = self.slots.entry_mut(i);
        policy::alive(&entry.meta(), now).then_some(entry)
      }
      None => None,
    };
    (found, reclaimed)
  }

  /// Looks without reordering or reclaiming.
  pub fn peek(&self, key: &str) -> Option<&Entry<V>> {
    self.find(key).map(|i| self.slots.live(i).1)
  }

  pub fn peek_mut(&mut self, key: &str) -> Option<&mut Entry<V>> {
    self.epoch.bump();
    self.find(key).map(|i| self.slots.entry_mut(i))
  }

  /// Stores `entry` under `key` (a `&str` or a `String`, whose buffer a
  /// long key keeps), replacing what was there; the least recently used
  /// entries leave past `max_entries` or `max_bytes` (never the new one).
  pub fn insert(&mut self, key: impl Into<StoreKey>, mut entry: Entry<V>, now: u64) -> Reclaimed {
    let mut reclaimed = self.sweep_if_due(now);
    self.epoch.bump();
    let key = key.into();
    self.remove(key.as_str());
    if entry.bytes() > 0 {
      let key_bytes = u32::try_from(key.as_str().len()).unwrap_or(u32::MAX);
      entry.set_bytes(entry.bytes().saturating_add(key_bytes));
    }
    self.bytes += u64::from(entry.bytes());
    let hash = self.hasher.hash_one(key.as_str());
    let i = self.slots.occupy(key, entry);
    let (slots, hasher) = (&self.slots, &self.hasher);
    self
      .table
      .insert_unique(hash, i, |&j| hasher.hash_one(slots.key(j)));
    while self.len() > self.max_entries || (self.bytes > self.max_bytes && self.len() > 1) {
      if let Some(evicted) = self.pop_front() {
        self.bytes -= u64::from(evicted.bytes());
      }
      reclaimed.evicted += 1;
    }
    reclaimed
  }

  pub fn remove(&mut self, key: &str) -> Option<Entry<V>> {
    let hash = self.hasher.hash_one(key);
    let slots = &self.slots;
    let (i, _) = self
      .table
      .find_entry(hash, |&i| slots.key(i) == key)
      .ok()?
      .remove();
    let (_, removed) = self.slots.vacate(i);
    self.epoch.bump();
    self.bytes -= u64::from(removed.bytes());
    Some(removed)
  }

  /// Drops every entry, and gives back the memory the store had grown to.
  pub fn clear(&mut self) -> usize {
    let n = self.len();
    self.epoch.bump();
    self.table = HashTable::new();
    self.slots = Slots::new();
    self.bytes = 0;
    n
  }

  /// Removes every entry whose key starts with `prefix` (a namespace's
  /// clear); returns how many. One pass over the store.
  pub fn remove_prefix(&mut self, prefix: &str) -> usize {
    let before = self.len();
    self.retain(|key, _| !key.starts_with(prefix));
    before - self.len()
  }

  /// Keeps the entries `keep` says to, the byte count with them; the others
  /// are dropped as they are found.
  fn retain(&mut self, mut keep: impl FnMut(&str, &Entry<V>) -> bool) {
    let (slots, bytes, before) = (&mut self.slots, &mut self.bytes, self.table.len());
    self.table.retain(|&mut i| {
      let (key, entry) = slots.live(i);
      let kept = keep(key.as_str(), entry);
      if !kept {
        let (_, gone) = slots.vacate(i);
        *bytes -= u64::from(gone.bytes());
      }
      kept
    });
    if self.table.len() != before {
      self.epoch.bump();
    }
  }

  /// `key`'s slot.
  #[inline]
  fn find(&self, key: &str) -> Option<u32> {
    let hash = self.hasher.hash_one(key);
    self
      .table
      .find(hash, |&i| self.slots.key(i) == key)
      .copied()
  }

  /// Takes the least recently used entry out.
  fn pop_front(&mut self) -> Option<Entry<V>> {
    let i = self.slots.head;
    if i == NIL {
      return None;
    }
    let hash = self.hasher.hash_one(self.slots.key(i));
    match self.table.find_entry(hash, |&j| j == i) {
      Ok(found) => drop(found.remove()),
      Err(_) => unreachable!("a live slot is in the table"),
    }
    Some(self.slots.vacate(i).1)
  }

  /// Every lookup asks, so the answer "not yet" is kept inline and cheap:
  /// with the sweep in the same function, the compiler saved its registers
  /// before the comparison (19 instructions on every hit instead of 4).
  #[inline(always)]
  fn sweep_if_due(&mut self, now: u64) -> Reclaimed {
    if now < self.next_sweep {
      return Reclaimed::default();
    }
    self.sweep(now)
  }

  #[cold]
  #[inline(never)]
  fn sweep(&mut self, now: u64) -> Reclaimed {
    self.next_sweep = now.saturating_add(SWEEP_INTERVAL_MS);
    let before = self.len();
    self.retain(|_, entry| policy::alive(&entry.meta(), now));
    Reclaimed {
      evicted: 0,
      expired: (before - self.len()) as u64,
    }
  }
}

#[cfg(test)]
impl<V> MemoryStore<V> {
  /// The keys from the least to the most recently used.
  fn order(&self) -> Vec<&str> {
    let mut keys = Vec::new();
    let mut i = self.slots.head;
    while i != NIL {
      keys.push(self.slots.key(i));
      i = self.slots.slots[i as usize].next;
    }
    keys
  }

  /// Slots made so far, live or vacant.
  fn slot_count(&self) -> usize {
    self.slots.slots.len()
  }

  /// Panics unless the table, the LRU list, the free list and the byte
  /// count agree.
  fn check(&self) {
    let slots = &self.slots.slots;
    let (mut live, mut prev, mut i, mut bytes) = (0, NIL, self.slots.head, 0);
    while i != NIL {
      let slot = &slots[i as usize];
      assert_eq!(slot.prev, prev, "the list runs both ways");
      let (key, entry) = self.slots.live(i);
      assert_eq!(self.find(key.as_str()), Some(i), "the table finds {key:?}");
      bytes += u64::from(entry.bytes());
      (live, prev, i) = (live + 1, i, slot.next);
    }
    assert_eq!(self.slots.tail, prev);
    assert_eq!((live, self.table.len()), (self.len(), self.len()));
    assert_eq!(bytes, self.bytes);
    let (mut vacant, mut i) = (0, self.slots.free);
    while i != NIL {
      assert!(slots[i as usize].live.is_none(), "a free slot is vacant");
      (vacant, i) = (vacant + 1, slots[i as usize].next);
    }
    assert_eq!(live + vacant, slots.len(), "every slot is live or free");
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use proptest::prelude::*;
  use std::cell::Cell;
  use std::collections::VecDeque;
  use std::rc::Rc;

  fn meta(hard_until: u64) -> Meta {
    Meta {
      fresh_until: hard_until / 2,
      hard_until,
      compute_ms: 1,
      stamp: 0,
      refresh_at: Some(hard_until / 2),
      negative: false,
    }
  }

  fn entry(value: &str, hard_until: u64) -> Entry<String> {
    Entry::new(meta(hard_until), value.to_string(), hard_until / 2)
  }

  /// A value that counts how many of its kind were dropped.
  #[derive(Debug)]
  struct Counted(Rc<Cell<usize>>);

  impl Drop for Counted {
    fn drop(&mut self) {
      self.0.set(self.0.get() + 1);
    }
  }

  #[test]
  fn evicts_the_least_recently_used() {
    let mut s = MemoryStore::new(2, None);
    s.insert("a", entry("A", 100), 0);
    s.insert("b", entry("B", 100), 0);
    assert!(s.touch("a", 1).0.is_some());
    let r = s.insert("c", entry("C", 100), 1);
    assert_eq!(r.evicted, 1);
    assert!(s.peek("a").is_some());
    assert!(s.peek("b").is_none());
    assert!(s.peek("c").is_some());
  }

  /// `l1MaxBytes`: values and keys weighed, the least recently used out
  /// first, and every way out of the store (replaced, removed, swept,
  /// cleared) takes its weight with it.
  #[test]
  fn evicts_by_bytes_and_keeps_the_count_true() {
    let mut s = MemoryStore::new(100, Some(250));
    s.insert("a", entry("A", u64::MAX / 2).weighing(99), 0);
    s.insert("b", entry("B", 100).weighing(99), 0);
    assert_eq!(s.bytes(), 200, "each value and its one-byte key");
    assert!(s.touch("a", 1).0.is_some());
    let r = s.insert("c", entry("C", 100).weighing(99), 1);
    assert_eq!((r.evicted, s.bytes()), (1, 200));
    assert!(s.peek("b").is_none(), "the least recently used left");
    s.insert("c", entry("C", 100).weighing(9), 1);
    assert_eq!(s.bytes(), 110, "a replaced value's weight leaves with it");
    s.remove("c");
    assert_eq!(s.bytes(), 100);
    s.insert("long", entry("L", 5).weighing(10), 1);
    assert_eq!(s.remove_prefix("lo"), 1);
    assert_eq!(s.bytes(), 100);
    s.insert("d", entry("D", 5).weighing(10), 1);
    s.touch("a", SWEEP_INTERVAL_MS + 6);
    assert_eq!((s.len(), s.bytes()), (1, 100), "the sweep took d");
    s.check();
    s.clear();
    assert_eq!(s.bytes(), 0);
    // A value heavier than the bound alone is kept (the engine keeps such
    // values out with l1MaxValueBytes), and the rest leave for it.
    s.insert("e", entry("E", 100_000).weighing(10), 1);
    s.insert("big", entry("B", 100_000).weighing(400), 1);
    assert_eq!((s.len(), s.bytes()), (1, 403));
    s.check();
  }

  #[test]
  fn an_expired_entry_is_not_returned_and_is_reclaimed_by_the_sweep() {
    let mut s = MemoryStore::new(10, None);
    s.insert("a", entry("A", 100), 0);
    assert!(s.touch("a", 100).0.is_none());
    assert_eq!(s.touch("a", SWEEP_INTERVAL_MS + 1).1.expired, 1);
    assert!(s.is_empty());
  }

  #[test]
  fn sweeps_reclaim_untouched_expired_entries() {
    let mut s = MemoryStore::new(100, None);
    for i in 0..50 {
      s.insert(format!("k{i}"), entry("v", 500), 0);
    }
    s.insert("long", entry("v", 10_000), 0);
    // Not due yet: nothing reclaimed before the interval passes.
    assert_eq!(s.touch("nothing", 600).1.expired, 0);
    let r = s.touch("nothing", SWEEP_INTERVAL_MS + 1).1;
    assert_eq!(r.expired, 50);
    assert_eq!(s.len(), 1);
  }

  #[test]
  fn keys_short_and_long_are_found_by_their_text() {
    let mut s = MemoryStore::new(10, None);
    let short = "s".repeat(StoreKey::INLINE);
    let long = "l".repeat(StoreKey::INLINE + 1);
    let unicode = "clé:ünïcødé:😀:ключ"; // multi-byte, over the inline size
    s.insert(short.as_str(), entry("short", 100), 0);
    s.insert(long.clone(), entry("long", 100), 0);
    s.insert(unicode, entry("unicode", 100), 0);
    s.insert("", entry("empty", 100), 0);
    assert!(matches!(
      StoreKey::from(short.as_str()).0,
      KeyRepr::Inline { .. }
    ));
    assert!(matches!(StoreKey::from(long.as_str()).0, KeyRepr::Heap(_)));
    assert_eq!(s.peek(&short).unwrap().value, "short");
    assert_eq!(s.peek(&long).unwrap().value, "long");
    assert_eq!(s.peek(unicode).unwrap().value, "unicode");
    assert_eq!(s.peek("").unwrap().value, "empty");
    assert!(s.peek(&short[1..]).is_none());
    assert!(s.peek(&long[1..]).is_none());
    assert_eq!(s.len(), 4);
  }

  #[test]
  fn a_key_takes_no_more_room_than_a_string() {
    assert_eq!(std::mem::size_of::<StoreKey>(), 24);
    assert_eq!(std::mem::size_of::<String>(), 24);
  }

  /// Key 24, the deadlines, stamp and refresh_at 32, load time and flags
  /// 4, the value 4, the links 8, the box 8: a vacant slot takes its
  /// `None` from a niche of the key, and the entry allocates nothing of
  /// its own.
  #[test]
  fn a_slot_takes_80_bytes_for_a_4_byte_value() {
    assert!(std::mem::size_of::<Slot<u32>>() <= 80);
    assert_eq!(
      std::mem::size_of::<Option<(StoreKey, Entry<u32>)>>(),
      std::mem::size_of::<(StoreKey, Entry<u32>)>()
    );
  }

  #[test]
  fn overwriting_keeps_one_entry() {
    let mut s = MemoryStore::new(10, None);
    s.insert("a", entry("1", 100), 0);
    s.insert("a", entry("2", 100), 0);
    assert_eq!(s.len(), 1);
    assert_eq!(s.peek("a").unwrap().value, "2");
  }

  #[test]
  fn an_entry_gives_its_meta_back() {
    let written = Meta {
      fresh_until: 10,
      hard_until: 20,
      compute_ms: 7,
      stamp: 3,
      refresh_at: Some(8),
      negative: true,
    };
    let mut e = Entry::new(written, (), 8);
    assert_eq!((e.meta(), e.refresh_at()), (written, 8));
    // An hc1 entry: refresh_at drawn here, none in its meta.
    let hc1 = Meta {
      refresh_at: None,
      negative: false,
      ..written
    };
    let mut drawn = Entry::new(hc1, (), 9);
    assert_eq!((drawn.meta(), drawn.refresh_at()), (hc1, 9));
    // As `Engine::expire` changes them.
    let expired = hc1.expired_at(5).unwrap();
    drawn.set_meta(expired);
    drawn.set_refresh_at(drawn.refresh_at().min(5));
    assert_eq!((drawn.meta(), drawn.refresh_at()), (expired, 5));
    let expired = written.expired_at(6).unwrap();
    e.set_meta(expired);
    e.set_refresh_at(e.refresh_at().min(6));
    assert_eq!((e.meta(), e.refresh_at()), (expired, 6));
    // A load time past 30 bits is kept as the most they hold.
    let slow = Meta {
      compute_ms: u64::MAX,
      ..written
    };
    let e = Entry::new(slow, (), 8);
    assert_eq!(e.meta().compute_ms, u64::from(COMPUTE_MS));
    assert!(e.meta().negative && e.meta().refresh_at == Some(8));
  }

  #[test]
  fn an_entry_boxes_only_what_is_set_away_from_its_default() {
    let mut e = Entry::new(meta(100), (), 50).weighing(0).in_l1_for(None, 5);
    e.set_failures(0);
    e.set_retry_after(0);
    e.set_tags(Tags::NONE);
    e.set_etag(Etag::NONE);
    assert!(e.rare.is_none(), "defaults make no box");
    assert_eq!(
      (e.failures(), e.retry_after(), e.l1_until(), e.bytes()),
      (0, 0, u64::MAX, 0)
    );
    assert!(e.tags().is_empty() && *e.etag() == Etag::NONE);
    e.set_failures(2);
    assert_eq!(
      (e.failures(), e.retry_after(), e.l1_until()),
      (2, 0, u64::MAX)
    );
    e.set_retry_after(9);
    let tags = Tags::new(vec!["t".to_string()]).unwrap();
    e.set_tags(tags.clone());
    let etag = Etag::new("\"v1\"").unwrap();
    e.set_etag(etag.clone());
    assert_eq!((e.failures(), e.retry_after()), (2, 9));
    assert_eq!((e.tags(), e.etag()), (&tags, &etag));
    let e = Entry::new(meta(100), (), 50)
      .weighing(12)
      .in_l1_for(Some(10), 5);
    assert_eq!((e.bytes(), e.l1_until(), e.failures()), (12, 15, 0));
  }

  #[derive(Debug, Clone)]
  enum Op {
    Insert(usize),
    Touch(usize),
    Peek(usize),
    PeekMut(usize),
    Remove(usize),
    RemovePrefix(usize),
    Clear,
  }

  /// Keys of three kinds (their first letter, for `remove_prefix`), some
  /// inline and some on the heap.
  fn model_key(k: usize) -> String {
    let kind = ["a", "b", "c"][k % 3];
    format!("{kind}{k}{}", "-".repeat(k * 3 % 40))
  }

  fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
      8 => (0..24usize).prop_map(Op::Insert),
      6 => (0..24usize).prop_map(Op::Touch),
      2 => (0..24usize).prop_map(Op::Peek),
      2 => (0..24usize).prop_map(Op::PeekMut),
      4 => (0..24usize).prop_map(Op::Remove),
      1 => (0..3usize).prop_map(Op::RemovePrefix),
      1 => Just(Op::Clear),
    ]
  }

  proptest! {
    /// The store against a `VecDeque` of (key, value), least recently used
    /// first: the same entries in the same order after every operation,
    /// and never a slot more than the entries it held at once.
    #[test]
    fn keeps_the_order_of_a_model(max in 1..12usize, ops in proptest::collection::vec(op(), 1..300)) {
      let mut s = MemoryStore::new(max, None);
      let mut model: VecDeque<(String, String)> = VecDeque::new();
      let mut most = 0;
      for (n, op) in ops.into_iter().enumerate() {
        let at = |model: &VecDeque<(String, String)>, key: &str| model.iter().position(|(k, _)| k == key);
        match op {
          Op::Insert(k) => {
            let (key, value) = (model_key(k), n.to_string());
            let replaced = at(&model, &key).map(|p| model.remove(p));
            model.push_back((key.clone(), value.clone()));
            let mut evicted = 0;
            while model.len() > max {
              model.pop_front();
              evicted += 1;
            }
            let r = s.insert(key, entry(&value, u64::MAX / 2), 0);
            prop_assert_eq!(r.evicted, evicted, "replaced: {:?}", replaced);
          }
          Op::Touch(k) => {
            let key = model_key(k);
            let want = at(&model, &key).map(|p| {
              let e = model.remove(p).unwrap();
              model.push_back(e.clone());
              e.1
            });
            prop_assert_eq!(s.touch(&key, 0).0.map(|e| e.value.clone()), want);
          }
          Op::Peek(k) => {
            let key = model_key(k);
            let want = at(&model, &key).map(|p| model[p].1.clone());
            prop_assert_eq!(s.peek(&key).map(|e| e.value.clone()), want);
          }
          Op::PeekMut(k) => {
            let key = model_key(k);
            let want = at(&model, &key).map(|p| {
              model[p].1.push('!');
              model[p].1.clone()
            });
            let got = s.peek_mut(&key).map(|e| {
              e.value.push('!');
              e.value.clone()
            });
            prop_assert_eq!(got, want);
          }
          Op::Remove(k) => {
            let key = model_key(k);
            let want = at(&model, &key).and_then(|p| model.remove(p)).map(|e| e.1);
            prop_assert_eq!(s.remove(&key).map(|e| e.value), want);
          }
          Op::RemovePrefix(kind) => {
            let prefix = ["a", "b", "c"][kind];
            let before = model.len();
            model.retain(|(k, _)| !k.starts_with(prefix));
            prop_assert_eq!(s.remove_prefix(prefix), before - model.len());
          }
          Op::Clear => {
            prop_assert_eq!(s.clear(), model.len());
            model.clear();
            prop_assert_eq!(s.slot_count(), 0);
            most = 0;
          }
        }
        most = most.max(model.len());
        s.check();
        let keys: Vec<&str> = model.iter().map(|(k, _)| k.as_str()).collect();
        prop_assert_eq!(s.order(), keys);
        // One entry past the bound is stored before the eviction.
        prop_assert!(s.slot_count() <= (most + 1).min(max + 1));
      }
    }
  }

  #[test]
  fn a_vacated_slot_is_used_again() {
    let mut s = MemoryStore::new(10, None);
    for key in ["a", "b", "c"] {
      s.insert(key, entry(key, 100), 0);
    }
    s.remove("b");
    s.insert("d", entry("D", 100), 0);
    assert_eq!((s.slot_count(), s.order()), (3, vec!["a", "c", "d"]));
    s.insert("a", entry("A2", 100), 0);
    assert_eq!((s.slot_count(), s.order()), (3, vec!["c", "d", "a"]));
    s.insert("e", entry("E", 100), 0);
    assert_eq!((s.slot_count(), s.order()), (4, vec!["c", "d", "a", "e"]));
    s.check();
  }

  #[test]
  fn a_cleared_store_gives_its_memory_back_and_fills_again() {
    let mut s = MemoryStore::new(1_000, None);
    for i in 0..300 {
      s.insert(format!("k{i}"), entry("v", 100), 0);
    }
    s.remove("k7");
    assert_eq!(s.clear(), 299);
    assert_eq!((s.slot_count(), s.slots.slots.chunks.capacity()), (0, 0));
    assert_eq!((s.table.capacity(), s.len(), s.bytes()), (0, 0, 0));
    assert!(s.order().is_empty());
    for i in 0..5 {
      s.insert(format!("k{i}"), entry("v", 100), 0);
    }
    s.touch("k0", 1);
    assert_eq!(s.order(), vec!["k1", "k2", "k3", "k4", "k0"]);
    assert_eq!(s.slot_count(), 5);
    s.check();
  }

  #[test]
  fn remove_prefix_keeps_the_others_in_order() {
    let mut s = MemoryStore::new(10, None);
    for key in ["u:1", "p:1", "u:2", "p:2", "u:3"] {
      s.insert(key, entry(key, 100), 0);
    }
    s.touch("p:1", 1);
    assert_eq!(s.remove_prefix("u:"), 3);
    assert_eq!(s.order(), vec!["p:2", "p:1"]);
    assert_eq!(s.remove_prefix("x:"), 0);
    s.check();
    for key in ["v:1", "v:2", "v:3"] {
      s.insert(key, entry(key, 100), 1);
    }
    assert_eq!(s.slot_count(), 5, "the three vacated slots");
    assert_eq!(s.order(), vec!["p:2", "p:1", "v:1", "v:2", "v:3"]);
    s.check();
  }

  #[test]
  fn a_sweep_vacates_slots_that_later_entries_take() {
    let mut s = MemoryStore::new(100, None);
    for i in 0..20 {
      let hard_until = if i % 2 == 0 { 500 } else { 1_000_000 };
      s.insert(format!("k{i:02}"), entry("v", hard_until), 0);
    }
    s.touch("k01", 1);
    assert_eq!(s.touch("k03", SWEEP_INTERVAL_MS).1.expired, 10);
    s.check();
    let survivors = [
      "k05", "k07", "k09", "k11", "k13", "k15", "k17", "k19", "k01", "k03",
    ];
    assert_eq!(s.order(), survivors);
    for i in 0..10 {
      s.insert(format!("n{i}"), entry("v", 1_000_000), SWEEP_INTERVAL_MS);
    }
    assert_eq!((s.slot_count(), s.len()), (20, 20));
    s.insert("n10", entry("v", 1_000_000), SWEEP_INTERVAL_MS);
    assert_eq!(s.slot_count(), 21);
    assert_eq!(&s.order()[..10], survivors);
    s.check();
  }

  #[test]
  fn keys_of_every_length_are_found() {
    let mut s = MemoryStore::new(1_000, None);
    let keys: Vec<String> = (0..=80)
      .map(|n| "k".repeat(n))
      .chain((0..=30).map(|n| "é".repeat(n)))
      .collect();
    for (i, key) in keys.iter().enumerate() {
      if i % 2 == 0 {
        s.insert(key.as_str(), entry(key, 100), 0);
      } else {
        s.insert(key.clone(), entry(key, 100), 0);
      }
    }
    let unique: std::collections::HashSet<&String> = keys.iter().collect();
    assert_eq!(s.len(), unique.len(), "\"\" is written twice");
    for key in &keys {
      assert_eq!(&s.peek(key).unwrap().value, key);
      let inline = matches!(StoreKey::from(key.as_str()).0, KeyRepr::Inline { .. });
      assert_eq!(inline, key.len() <= StoreKey::INLINE);
    }
    for key in keys.iter().filter(|k| k.len() % 2 == 1) {
      assert!(s.remove(key).is_some());
    }
    for key in &keys {
      assert_eq!(s.peek(key).is_some(), key.len() % 2 == 0);
    }
    s.check();
  }

  #[test]
  fn finds_every_key_as_the_table_grows() {
    let mut s = MemoryStore::new(5_000, None);
    let mut capacities = vec![s.table.capacity()];
    for i in 0..5_000 {
      s.insert(format!("key:{i}"), entry(&i.to_string(), 1_000_000), 0);
      if s.table.capacity() != *capacities.last().unwrap() {
        capacities.push(s.table.capacity());
        for j in (0..=i).step_by(7) {
          assert_eq!(s.peek(&format!("key:{j}")).unwrap().value, j.to_string());
        }
      }
    }
    assert!(capacities.len() > 8, "grown through {capacities:?}");
    assert_eq!(s.slots.slots.chunks.len(), 5_000usize.div_ceil(CHUNK));
    s.check();
    // Touched keys are the last to go.
    for i in (0..5_000).step_by(2) {
      assert!(s.touch(&format!("key:{i}"), 1).0.is_some());
    }
    for i in 0..2_500 {
      let r = s.insert(format!("new:{i}"), entry("n", 1_000_000), 1);
      assert_eq!(r.evicted, 1);
    }
    assert!((0..5_000).all(|i| s.peek(&format!("key:{i}")).is_some() == (i % 2 == 0)));
    s.check();
  }

  #[test]
  fn a_value_is_dropped_as_its_entry_leaves() {
    let drops = Rc::new(Cell::new(0));
    let value = || Counted(Rc::clone(&drops));
    let counted = |hard_until| Entry::new(meta(hard_until), value(), hard_until / 2);
    let mut s = MemoryStore::new(3, None);
    s.insert("a", counted(100_000), 0);
    s.insert("a", counted(100_000), 0);
    assert_eq!(drops.get(), 1, "replaced");
    let removed = s.remove("a");
    assert_eq!(drops.get(), 1, "handed to the caller");
    drop(removed);
    assert_eq!(drops.get(), 2, "removed: nothing kept in the slot");
    for key in ["a", "b", "c", "d"] {
      s.insert(key, counted(100_000), 0);
    }
    assert_eq!(drops.get(), 3, "evicted");
    s.insert("x:short", counted(500), 0);
    assert_eq!(drops.get(), 4, "evicted");
    assert_eq!(s.remove_prefix("c"), 1);
    assert_eq!(drops.get(), 5, "removed by prefix");
    assert_eq!(s.touch("d", SWEEP_INTERVAL_MS).1.expired, 1);
    assert_eq!(drops.get(), 6, "swept");
    s.insert("e", counted(100_000), SWEEP_INTERVAL_MS);
    assert_eq!(s.clear(), 2);
    assert_eq!(drops.get(), 8, "cleared");
    s.insert("f", counted(100_000), SWEEP_INTERVAL_MS);
    drop(s);
    assert_eq!(drops.get(), 9, "with the store");
  }
}
