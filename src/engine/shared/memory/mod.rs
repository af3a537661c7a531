//! An in-process [`SharedStore`] with the Redis store's semantics: the
//! scripts' effects (`scripts`, `slots`), pub/sub, TTLs and a server clock
//! (`server`), and faults a test injects per instance (latency, lost
//! replies, refusal) or for the whole server (down, subscriptions
//! dropped). The store contract suite (`tests/server/store_contract.rs`) runs on
//! it as on Redis, and says they are the same; the Rust fleet tests run on
//! it without a server.

mod scripts;
mod server;
mod slots;
#[cfg(test)]
mod tests;

pub use self::server::{Keyspace, MemoryServer, Stored};

use super::{
  values, ClearScope, Deletion, Events, LockAttempt, Problem, Problems, Read, SharedStore,
  SlotCall, SlotGrant,
};
use crate::core::envelope::{DecodeError, Envelope, Meta};
use crate::core::error::Code;
use crate::core::fleet::{self as protocol, Change, Event, RedisKeys};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

/// What one instance's connection does wrong, until changed
/// ([`MemoryStore::set_faults`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
  /// Each call waits this long before the server sees it; at or past the
  /// command timeout it times out unseen (a silent server).
  pub latency: Duration,
  /// Every call fails at once, unseen (connection refused).
  pub refused: bool,
  /// The next this many calls take effect on the server but lose their
  /// reply: each fails as a timeout (the caller cannot know it landed).
  pub lose_replies: u32,
}

/// Sets one connection's [`Faults`] ([`MemoryStore::fault_switch`]).
#[derive(Clone)]
pub struct FaultSwitch(Arc<Mutex<Faults>>);

impl FaultSwitch {
  pub fn set(&self, faults: Faults) {
    *self.0.lock().unwrap_or_else(|p| p.into_inner()) = faults;
  }
}

/// Why a call on the memory store failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryError {
  /// Refused: the server is down, or this connection refuses.
  Refused,
  /// No reply within the command timeout (it may have landed).
  TimedOut,
  /// The store was closed.
  Closed,
  /// A call no store accepts (a namespace's clear without its prefix).
  Invalid(&'static str),
}

/// One instance's connection to a [`MemoryServer`].
pub struct MemoryStore {
  server: Arc<MemoryServer>,
  prefix: String,
  channel: String,
  origin: String,
  load_slots_name: String,
  timeout: Duration,
  faults: Arc<Mutex<Faults>>,
  closed: Arc<AtomicBool>,
  problems: Arc<Problems>,
}

impl MemoryStore {
  fn new(server: Arc<MemoryServer>, prefix: &str, origin: String, faults: Faults) -> MemoryStore {
    MemoryStore {
      server,
      prefix: prefix.to_string(),
      channel: protocol::events_channel(prefix),
      origin,
      load_slots_name: protocol::load_slots(prefix),
      timeout: Duration::from_millis(1_000),
      faults: Arc::new(Mutex::new(faults)),
      closed: Arc::new(AtomicBool::new(false)),
      problems: Arc::default(),
    }
  }

  /// The bound of one call (as `redisTimeout`).
  pub fn with_timeout(mut self, timeout: Duration) -> MemoryStore {
    self.timeout = timeout;
    self
  }

  pub fn prefix(&self) -> &str {
    &self.prefix
  }

  /// This connection's faults from now on.
  pub fn set_faults(&self, faults: Faults) {
    self.fault_switch().set(faults);
  }

  /// What sets this connection's faults once the store is the fleet's.
  pub fn fault_switch(&self) -> FaultSwitch {
    FaultSwitch(Arc::clone(&self.faults))
  }

  /// Inspection (tests): the lock's remaining lease in ms, `None` if
  /// nobody holds it.
  pub async fn lock_lease(&self, keys: &RedisKeys) -> Result<Option<u64>, MemoryError> {
    self.call(|k| u64::try_from(k.pttl(&keys.lock)).ok()).await
  }

  /// Inspection (tests): the key's back-off marker, `(failures, ms
  /// left)`, `None` if there is none or it is not one an instance left.
  pub async fn backoff(&self, keys: &RedisKeys) -> Result<Option<(u32, u64)>, MemoryError> {
    self
      .call(|k| {
        let failures = k
          .text(&keys.backoff)
          .and_then(|f| std::str::from_utf8(f).ok()?.parse::<u32>().ok())?;
        let ms = u64::try_from(k.pttl(&keys.backoff))
          .ok()
          .filter(|&ms| ms > 0)?;
        Some((failures, ms))
      })
      .await
  }

  /// One call: this connection's faults, then `op` run whole on the
  /// server's keyspace.
  async fn call<T>(&self, op: impl FnOnce(&mut Keyspace) -> T) -> Result<T, MemoryError> {
    if self.closed.load(Ordering::SeqCst) {
      return Err(MemoryError::Closed);
    }
    let faults = *self.faults.lock().unwrap_or_else(|p| p.into_inner());
    if faults.refused || self.server.is_down() {
      return Err(MemoryError::Refused);
    }
    if faults.latency >= self.timeout {
      tokio::time::sleep(self.timeout).await;
      return Err(MemoryError::TimedOut);
    }
    if !faults.latency.is_zero() {
      tokio::time::sleep(faults.latency).await;
    }
    if self.server.is_down() {
      return Err(MemoryError::Refused);
    }
    let answer = self.server.with(op);
    // The reply's way back: the subscriptions (tasks of the same runtime)
    // run before the caller goes on, as a network round trip lets them.
    tokio::task::yield_now().await;
    let lost = {
      let mut faults = self.faults.lock().unwrap_or_else(|p| p.into_inner());
      let lost = faults.lose_replies > 0;
      faults.lose_replies = faults.lose_replies.saturating_sub(1);
      lost
    };
    match lost {
      true => Err(MemoryError::TimedOut),
      false => Ok(answer),
    }
  }

  fn event(&self, change: Change) -> String {
    Event::new(&self.origin, change).encode()
  }

  /// One call of a script that may write `key`'s value (`write`'s, `keep`'s):
  /// when it landed, its fill is announced in the same step, as the Redis
  /// scripts do.
  async fn filled(
    &self,
    key: &str,
    script: impl FnOnce(&mut Keyspace) -> bool,
  ) -> Result<bool, MemoryError> {
    let event = self.event(Change::Filled(key.to_string()));
    self
      .call(|k| {
        let landed = script(k);
        if landed {
          k.publish(&self.channel, event);
        }
        landed
      })
      .await
  }

  /// The event a release of `keys`' lock announces.
  fn released_event(&self, keys: &RedisKeys) -> String {
    self.event(Change::Released(keys.key(&self.prefix).to_string()))
  }
}

impl SharedStore for MemoryStore {
  type Keys = RedisKeys;
  type Error = MemoryError;

  fn keys(&self, key: &str) -> RedisKeys {
    RedisKeys::new(&self.prefix, key)
  }

  fn origin(&self) -> &str {
    &self.origin
  }

  fn command_timeout(&self) -> Duration {
    self.timeout
  }

  async fn read(&self, keys: &RedisKeys) -> Result<Read, MemoryError> {
    self.call(|k| read(k, &keys.value)).await
  }

  async fn read_many(&self, keys: &[RedisKeys]) -> Result<Vec<Read>, MemoryError> {
    self
      .call(|k| keys.iter().map(|keys| read(k, &keys.value)).collect())
      .await
  }

  async fn lock(
    &self,
    keys: &RedisKeys,
    token: &str,
    ttl: u64,
  ) -> Result<LockAttempt, MemoryError> {
    self
      .call(|k| scripts::lock(k, &keys.lock, token, ttl))
      .await
  }

  async fn lock_refresh(
    &self,
    keys: &RedisKeys,
    token: &str,
    ttl: u64,
  ) -> Result<LockAttempt, MemoryError> {
    self
      .call(|k| scripts::lock_refresh(k, keys, token, ttl))
      .await
  }

  async fn fail_refresh(
    &self,
    keys: &RedisKeys,
    token: Option<&str>,
    failures: u32,
    ms: u64,
  ) -> Result<bool, MemoryError> {
    let event = self.released_event(keys);
    self
      .call(|k| {
        let released = scripts::fail_refresh(k, keys, token, failures, ms);
        if released {
          k.publish(&self.channel, event);
        }
        released
      })
      .await
  }

  async fn extend(&self, keys: &RedisKeys, token: &str, ttl: u64) -> Result<bool, MemoryError> {
    self
      .call(|k| scripts::extend(k, &keys.lock, token, ttl))
      .await
  }

  async fn release(&self, keys: &RedisKeys, token: &str) -> Result<bool, MemoryError> {
    let event = self.released_event(keys);
    self
      .call(|k| {
        let released = scripts::release(k, &keys.lock, token);
        if released {
          k.publish(&self.channel, event);
        }
        released
      })
      .await
  }

  async fn write_over(
    &self,
    key: &str,
    keys: &RedisKeys,
    envelope: &Envelope,
    px: u64,
    token: Option<&str>,
    corrupt_stamp: Option<u64>,
  ) -> Result<bool, MemoryError> {
    self
      .filled(key, |k| {
        scripts::write(k, keys, envelope, px, token, corrupt_stamp)
      })
      .await
  }

  async fn keep_over(
    &self,
    key: &str,
    keys: &RedisKeys,
    kept: &Meta,
    meta: &Meta,
    px: u64,
    token: Option<&str>,
  ) -> Result<bool, MemoryError> {
    self
      .filled(key, |k| scripts::keep(k, keys, kept, meta, px, token))
      .await
  }

  async fn write_newest(
    &self,
    key: &str,
    keys: &RedisKeys,
    envelope: &Envelope,
    px: u64,
  ) -> Result<u64, MemoryError> {
    let event = self.event(Change::Filled(key.to_string()));
    self
      .call(|k| {
        let stamp = scripts::write_newest(k, keys, envelope, px);
        k.publish(&self.channel, event);
        stamp
      })
      .await
  }

  async fn delete(
    &self,
    key: &str,
    keys: &RedisKeys,
    deletion: Deletion,
  ) -> Result<bool, MemoryError> {
    let event = self.event(Change::Deleted(key.to_string()));
    self
      .call(|k| {
        let answer = scripts::delete(k, &keys.value, deletion);
        // A replay that kept a newer value announces nothing.
        if answer || !deletion.replayed {
          k.publish(&self.channel, event);
        }
        answer
      })
      .await
  }

  async fn expire(
    &self,
    key: &str,
    keys: &RedisKeys,
    at: u64,
    guard: u64,
  ) -> Result<bool, MemoryError> {
    let event = self.event(Change::Expired {
      key: key.to_string(),
      at,
    });
    self
      .call(|k| {
        let expired = scripts::expire(k, keys, at, guard);
        k.publish(&self.channel, event);
        expired
      })
      .await
  }

  async fn invalidate_tag(&self, tag: &str, at: u64, px: u64) -> Result<bool, MemoryError> {
    let name = protocol::tag_stamp(&self.prefix, tag);
    let event = self.event(Change::Tagged {
      tag: tag.to_string(),
      at,
    });
    self
      .call(|k| {
        let raised = scripts::invalidate_tag(k, &name, at, px);
        k.publish(&self.channel, event);
        raised
      })
      .await
  }

  async fn tag_stamps(&self, tags: &[String]) -> Result<Vec<u64>, MemoryError> {
    self
      .call(|k| {
        tags
          .iter()
          .map(|tag| values::parse_stamp(k.text(&protocol::tag_stamp(&self.prefix, tag))))
          .collect()
      })
      .await
  }

  async fn clear(
    &self,
    scope: ClearScope<'_>,
    not_newer_than: Option<u64>,
  ) -> Result<u64, MemoryError> {
    let within = match scope {
      ClearScope::All => "",
      ClearScope::Namespace("") => {
        return Err(MemoryError::Invalid("a namespace's clear needs its prefix"))
      }
      ClearScope::Namespace(prefix) => prefix,
    };
    let start = format!("{{{}{within}", self.prefix);
    let event = self.event(values::cleared(within));
    self
      .call(|k| {
        let removed = scripts::sweep(k, &start, not_newer_than);
        k.publish(&self.channel, event);
        removed
      })
      .await
  }

  async fn load_slots(&self, call: SlotCall) -> Result<SlotGrant, MemoryError> {
    self
      .call(|k| {
        let answer = slots::call(k, &self.load_slots_name, &self.origin, call);
        if answer.up_to > 0 {
          let event = self.event(Change::SlotsFreed {
            up_to: answer.up_to,
          });
          k.publish(&self.channel, event);
        }
        answer.grant
      })
      .await
  }

  fn subscribe(
    &self,
    events: &Arc<Events>,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> JoinHandle<()> {
    let subscriber = Subscriber {
      server: Arc::clone(&self.server),
      channel: self.channel.clone(),
      faults: Arc::clone(&self.faults),
      closed: Arc::clone(&self.closed),
      events: Arc::clone(events),
    };
    tokio::spawn(subscriber.run(on_connected))
  }

  async fn server_time(&self) -> Result<u64, MemoryError> {
    self.call(|k| k.now).await
  }

  fn close(&self) {
    self.closed.store(true, Ordering::SeqCst);
  }

  fn problems(&self) -> &Arc<Problems> {
    &self.problems
  }

  fn describe(&self, error: &MemoryError) -> Problem {
    let (code, message) = match error {
      MemoryError::Refused => (
        Code::RedisUnreachable,
        "the in-memory store refused the call (it is down)".to_string(),
      ),
      MemoryError::TimedOut => (
        Code::RedisTimeout,
        format!(
          "the in-memory store did not answer within {} ms",
          self.timeout.as_millis()
        ),
      ),
      MemoryError::Closed => (Code::RedisFailed, "the store was closed".to_string()),
      MemoryError::Invalid(what) => (Code::RedisFailed, what.to_string()),
    };
    Problem { code, message }
  }

  async fn ready(&self) -> Result<(), MemoryError> {
    self.call(|_| ()).await
  }
}

/// A GET of a key's value, as the fleet reads it: another type there is a
/// foreign value (corrupt), as Redis's WRONGTYPE is.
fn read(keyspace: &mut Keyspace, name: &str) -> Read {
  match keyspace.get(name) {
    None => Read::Missing,
    Some(Stored::Text(bytes)) => values::read_bytes(Some(bytes)),
    Some(_) => Read::Corrupt(DecodeError::NotAnEnvelope),
  }
}

/// One subscription's task: live while the server is up and this
/// connection does not refuse, resubscribing after a drop with a capped
/// back-off, as the Redis store's does.
struct Subscriber {
  server: Arc<MemoryServer>,
  channel: String,
  faults: Arc<Mutex<Faults>>,
  closed: Arc<AtomicBool>,
  events: Arc<Events>,
}

impl Subscriber {
  async fn run(self, on_connected: impl Fn(bool) + Send + Sync + 'static) {
    let mut backoff = Duration::from_millis(50);
    loop {
      if self.can_connect() {
        let mut bus = self.server.listen();
        on_connected(true);
        backoff = Duration::from_millis(50);
        loop {
          match bus.recv().await {
            // The server dropped every subscription.
            Ok(published) if published.channel.is_empty() => break,
            Ok(published) if *published.channel == *self.channel => {
              if let Some(event) = Event::decode(&published.message) {
                self.events.dispatch(&event);
              }
            }
            Ok(_) => {}
            // Fell behind (and missed messages), or the server is gone.
            Err(RecvError::Lagged(_) | RecvError::Closed) => break,
          }
        }
        on_connected(false);
      }
      tokio::time::sleep(backoff).await;
      backoff = (backoff * 2).min(Duration::from_secs(2));
    }
  }

  fn can_connect(&self) -> bool {
    let refused = self
      .faults
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .refused;
    !refused && !self.server.is_down() && !self.closed.load(Ordering::SeqCst)
  }
}
