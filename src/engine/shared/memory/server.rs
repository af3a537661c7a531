//! The in-process server a fleet of [`super::MemoryStore`]s meets in: a
//! keyspace with Redis's types and TTLs, pub/sub, and a clock. Time is
//! tokio's, so under a paused runtime (`tokio::time::pause`, the
//! simulator's) every TTL runs on the scheduler's time.

use super::{Faults, MemoryStore};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::broadcast;
use tokio::time::Instant;

/// A value as Redis types it: what herdcache writes is text and one hash
/// (the load slots); a list is what another program may leave under a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
  Text(Vec<u8>),
  List(Vec<Vec<u8>>),
  Hash(BTreeMap<String, String>),
}

#[derive(Debug)]
struct Entry {
  value: Stored,
  /// Server ms at which it is gone (`None`: no TTL).
  expires_at: Option<u64>,
}

/// One message on a channel; on no channel (empty), the server dropping
/// every subscription ([`MemoryServer::drop_subscriptions`]). (One queue
/// for both, and not a `watch`: its waiters are woken in a random order,
/// and a simulation must replay exactly.)
#[derive(Debug, Clone)]
pub(super) struct Published {
  pub channel: Arc<str>,
  pub message: Arc<str>,
}

/// How many messages a subscriber may fall behind before it is dropped
/// (and resubscribes, as after a lost connection: it missed changes).
const BACKLOG: usize = 4_096;

/// The keyspace, seen by one call at one moment: every call runs whole
/// under the server's lock, as a Lua script runs whole in Redis.
pub struct Keyspace {
  entries: HashMap<String, Entry>,
  /// The server's time of the call, ms.
  pub now: u64,
  bus: broadcast::Sender<Published>,
}

impl Keyspace {
  /// The value under `name`, if it lives.
  pub fn get(&mut self, name: &str) -> Option<&Stored> {
    let now = self.now;
    if self
      .entries
      .get(name)
      .is_some_and(|e| e.expires_at.is_some_and(|at| at <= now))
    {
      self.entries.remove(name);
    }
    self.entries.get(name).map(|e| &e.value)
  }

  /// The text under `name`: `None` when there is none, or another type.
  pub fn text(&mut self, name: &str) -> Option<&[u8]> {
    match self.get(name)? {
      Stored::Text(bytes) => Some(bytes),
      _ => None,
    }
  }

  /// The text under `name` read as a whole number (as the scripts' Lua
  /// `tonumber` reads what herdcache writes there: digits); `None` when
  /// there is none, another type, or other text.
  pub fn number(&mut self, name: &str) -> Option<u64> {
    std::str::from_utf8(self.text(name)?).ok()?.parse().ok()
  }

  /// `SET name value [PX ms]`: any type replaced, the TTL with it.
  pub fn set(&mut self, name: &str, value: Stored, px: Option<u64>) {
    let expires_at = px.map(|ms| self.now + ms.max(1));
    self
      .entries
      .insert(name.to_string(), Entry { value, expires_at });
  }

  /// `SET … KEEPTTL` of a living value.
  pub fn replace_keeping_ttl(&mut self, name: &str, value: Stored) {
    if self.get(name).is_some() {
      if let Some(entry) = self.entries.get_mut(name) {
        entry.value = value;
      }
    }
  }

  /// `DEL`: true if something lived there.
  pub fn del(&mut self, name: &str) -> bool {
    let lived = self.get(name).is_some();
    self.entries.remove(name);
    lived
  }

  /// `PTTL`: ms left, -1 without a TTL, -2 when nothing lives there.
  pub fn pttl(&mut self, name: &str) -> i64 {
    let now = self.now;
    if self.get(name).is_none() {
      return -2;
    }
    match self.entries.get(name).and_then(|e| e.expires_at) {
      Some(at) => i64::try_from(at - now).unwrap_or(i64::MAX),
      None => -1,
    }
  }

  /// `PEXPIRE`: true if something lived there.
  pub fn pexpire(&mut self, name: &str, ms: u64) -> bool {
    let at = self.now + ms.max(1);
    if self.get(name).is_none() {
      return false;
    }
    if let Some(entry) = self.entries.get_mut(name) {
      entry.expires_at = Some(at);
    }
    true
  }

  /// The living names that start with `prefix`, sorted (a SCAN's, in an
  /// order that does not depend on the hasher).
  pub fn names_starting(&mut self, prefix: &str) -> Vec<String> {
    let now = self.now;
    self
      .entries
      .retain(|_, e| e.expires_at.is_none_or(|at| at > now));
    let mut names: Vec<String> = self
      .entries
      .keys()
      .filter(|name| name.starts_with(prefix))
      .cloned()
      .collect();
    names.sort();
    names
  }

  /// `PUBLISH`: delivered to every live subscriber, in order.
  pub fn publish(&self, channel: &str, message: String) {
    let _ = self.bus.send(Published {
      channel: channel.into(),
      message: message.into(),
    });
  }
}

/// The server. Its stores are the fleet's instances (each with an origin
/// and faults of its own); [`MemoryServer::set_down`] fails every one.
pub struct MemoryServer {
  keyspace: Mutex<Keyspace>,
  down: AtomicBool,
  /// The server's epoch ms at `started`.
  epoch: u64,
  started: Instant,
  /// Names each store's origin: `m1`, `m2`, … (the same in every run).
  stores: AtomicU64,
}

impl MemoryServer {
  /// A server whose clock starts at the wall clock's now.
  pub fn new() -> Arc<MemoryServer> {
    let epoch = std::time::SystemTime::now()
      .duration_since(std::time::UNIX_EPOCH)
      .map_or(0, |d| d.as_millis() as u64);
    MemoryServer::starting_at(epoch)
  }

  /// A server whose clock reads `epoch` ms now (a simulation's start).
  pub fn starting_at(epoch: u64) -> Arc<MemoryServer> {
    let (bus, _) = broadcast::channel(BACKLOG);
    Arc::new(MemoryServer {
      keyspace: Mutex::new(Keyspace {
        entries: HashMap::new(),
        now: epoch,
        bus,
      }),
      down: AtomicBool::new(false),
      epoch,
      started: Instant::now(),
      stores: AtomicU64::new(0),
    })
  }

  /// A new connection (an instance of the fleet) under `prefix`.
  pub fn store(self: &Arc<Self>, prefix: &str, faults: Faults) -> MemoryStore {
    let n = self.stores.fetch_add(1, Ordering::Relaxed) + 1;
    MemoryStore::new(Arc::clone(self), prefix, format!("m{n}"), faults)
  }

  /// The server's clock, epoch ms.
  pub fn now(&self) -> u64 {
    self.epoch + self.started.elapsed().as_millis() as u64
  }

  /// Runs `call` on the keyspace at the server's now, alone.
  pub fn with<T>(&self, call: impl FnOnce(&mut Keyspace) -> T) -> T {
    let mut keyspace = self.keyspace.lock().unwrap_or_else(|p| p.into_inner());
    keyspace.now = self.now();
    call(&mut keyspace)
  }

  /// Down (`true`): every call of every store is refused and every
  /// subscription drops, until it is up again.
  pub fn set_down(&self, down: bool) {
    self.down.store(down, Ordering::SeqCst);
    if down {
      self.drop_subscriptions();
    }
  }

  pub fn is_down(&self) -> bool {
    self.down.load(Ordering::SeqCst)
  }

  /// Ends every live subscription (as a dropped connection would): each
  /// reconnects after its back-off, missing what was published meanwhile.
  pub fn drop_subscriptions(&self) {
    self.with(|k| k.publish("", String::new()));
  }

  pub(super) fn listen(&self) -> broadcast::Receiver<Published> {
    self.with(|k| k.bus.subscribe())
  }
}
