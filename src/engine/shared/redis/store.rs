//! The Redis store written once, over a [`Topology`]: what a store does
//! the same way on one server and on a cluster (the scripts and their
//! arguments, a clear's sweep, the connection and what its failures say),
//! with the topology supplying what differs.

use super::link::{dropped, Connector, Link};
use super::subscription::{self, Subscriber};
use super::target::Target;
use super::RedisTimeouts;
use crate::core::envelope::{self, DecodeError, Envelope, Meta, MAX_DIGITS};
use crate::core::fleet::{self as protocol, Change, Event, RedisKeys, ANNOUNCE_REFUSED};
use crate::engine::shared::{
  values, ClearScope, Deletion, Events, LockAttempt, Problem, Problems, Read, SharedStore,
  SlotCall, SlotGrant,
};
use redis::aio::ConnectionLike;
use redis::{Client, Cmd, ErrorKind, RedisError, RedisResult, Script, Value};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// What a Redis store does its own way on one server (`node.rs`) or on a
/// Redis Cluster (`cluster.rs`); [`Redis`] does the rest, once, over it.
/// Static: each store knows its topology at compile time (`RedisStore`
/// picks one of the two at run time, once).
pub(super) trait Topology: Send + Sync + Sized + 'static {
  /// The command connection.
  type Connection: ConnectionLike + Clone + Send + Sync + 'static;
  /// What the events subscription connects with.
  type Subscriber: Subscriber;
  /// Where a command that names no key (SCAN, TIME) is sent.
  type Route: Send + Sync;

  /// The node a failure's explanation probes (a cluster's first seed).
  fn seed(&self) -> &Client;

  /// What messages call the store.
  fn name(&self) -> String;

  /// Makes the command connection.
  fn connector(&self) -> Connector<Self::Connection>;

  /// The subscription's own, owned by its task; `tracking`: it will be
  /// asked to have the prefix tracked.
  fn subscriber(&self, tracking: bool) -> Self::Subscriber;

  /// The channel the scripts announce on, in the same step as their change
  /// (`""`: none, [`Topology::announce`] does it after them).
  fn script_channel(&self) -> &str;

  /// Announces `event`, about the name `name`, where its script could not.
  fn announce(
    &self,
    link: &Link<Self::Connection>,
    name: &str,
    event: &str,
  ) -> impl Future<Output = RedisResult<()>> + Send;

  /// Announces a clear (`event`), which names no key.
  fn announce_clear(
    &self,
    link: &Link<Self::Connection>,
    event: &str,
  ) -> impl Future<Output = RedisResult<()>> + Send;

  /// [`SharedStore::read_many`]: the reads of `keys`, in their order.
  fn read_many(
    &self,
    link: &Link<Self::Connection>,
    keys: &[RedisKeys],
  ) -> impl Future<Output = RedisResult<Vec<Read>>> + Send;

  /// Every primary, once: where a clear's SCAN runs.
  fn primaries(
    &self,
    link: &Link<Self::Connection>,
  ) -> impl Future<Output = RedisResult<Vec<Self::Route>>> + Send;

  /// The node whose clock is the fleet's.
  fn clock(&self) -> Self::Route;

  /// `command` on the node `route` names.
  fn send(
    c: &mut Self::Connection,
    route: &Self::Route,
    command: Cmd,
  ) -> impl Future<Output = RedisResult<Value>> + Send;

  /// The names one SCAN found, in the batches one UNLINK or script may
  /// remove together.
  fn batches(names: Vec<String>) -> Vec<Vec<String>>;
}

/// A Redis store on the topology `T`.
pub(super) struct Redis<T: Topology> {
  topology: T,
  link: Link<T::Connection>,
  timeouts: RedisTimeouts,
  prefix: String,
  /// The events channel of the prefix on one node (a cluster's are
  /// sharded: `cluster.rs`).
  channel: String,
  /// Names this store on the events channel, so it can skip its own notices.
  origin: String,
  scripts: Scripts,
  /// The name of the fleet's load slots (`protocol::load_slots`).
  load_slots_name: String,
  /// Whether the events subscription asks the server to track the prefix
  /// (`tracking`).
  pub(super) tracking: bool,
}

/// The scripts of `core::fleet::scripts`, as EVALSHA runs them.
struct Scripts {
  lock: Script,
  refresh_lock: Script,
  fail_refresh: Script,
  release: Script,
  extend: Script,
  write: Script,
  set: Script,
  delete: Script,
  delete_not_newer: Script,
  expire: Script,
  keep: Script,
  tag: Script,
  clear_not_newer: Script,
  load_slots: Script,
}

impl Scripts {
  fn new() -> Scripts {
    Scripts {
      lock: Script::new(protocol::LOCK_SCRIPT),
      refresh_lock: Script::new(protocol::REFRESH_LOCK_SCRIPT),
      fail_refresh: Script::new(protocol::FAIL_REFRESH_SCRIPT),
      release: Script::new(protocol::RELEASE_SCRIPT),
      extend: Script::new(protocol::EXTEND_SCRIPT),
      write: Script::new(protocol::WRITE_SCRIPT),
      set: Script::new(protocol::SET_SCRIPT),
      delete: Script::new(protocol::DELETE_SCRIPT),
      delete_not_newer: Script::new(protocol::DELETE_NOT_NEWER_SCRIPT),
      expire: Script::new(protocol::EXPIRE_SCRIPT),
      keep: Script::new(protocol::KEEP_SCRIPT),
      tag: Script::new(protocol::TAG_SCRIPT),
      clear_not_newer: Script::new(protocol::CLEAR_NOT_NEWER_SCRIPT),
      load_slots: Script::new(protocol::LOAD_SLOTS_SCRIPT),
    }
  }

  /// Every script loaded on `c`, as EVALSHA will need them.
  async fn load(&self, c: &mut impl ConnectionLike) -> RedisResult<()> {
    for script in [
      &self.lock,
      &self.refresh_lock,
      &self.fail_refresh,
      &self.release,
      &self.extend,
      &self.write,
      &self.set,
      &self.delete,
      &self.delete_not_newer,
      &self.expire,
      &self.tag,
      &self.clear_not_newer,
      &self.load_slots,
    ] {
      script.prepare_invoke().load_async(c).await?;
    }
    Ok(())
  }
}

impl<T: Topology> Redis<T> {
  /// The store of `prefix` on `topology`; connects on first use.
  pub(super) fn open(topology: T, prefix: &str, timeouts: RedisTimeouts) -> Redis<T> {
    let channel = protocol::events_channel(prefix);
    let target = Target::new(
      topology.seed(),
      topology.name(),
      timeouts.command.as_millis() as u64,
    );
    let link = Link::new(
      topology.seed().clone(),
      target,
      channel.clone(),
      timeouts.connect,
      topology.connector(),
    );
    Redis {
      topology,
      link,
      timeouts,
      prefix: prefix.to_string(),
      channel,
      origin: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
      scripts: Scripts::new(),
      load_slots_name: protocol::load_slots(prefix),
      tracking: false,
    }
  }

  pub(super) fn prefix(&self) -> &str {
    &self.prefix
  }

  pub(super) fn channel(&self) -> &str {
    &self.channel
  }

  pub(super) fn timeouts(&self) -> RedisTimeouts {
    self.timeouts
  }

  fn event(&self, change: Change) -> String {
    Event::new(&self.origin, change).encode()
  }

  /// The event a release of `keys`' lock announces.
  fn released_event(&self, keys: &RedisKeys) -> String {
    self.event(Change::Released(keys.key(&self.prefix).to_string()))
  }

  /// Where the script could not announce a release that happened
  /// ([`Topology::script_channel`]), the store does.
  async fn announce_release(
    &self,
    keys: &RedisKeys,
    event: &str,
    released: bool,
  ) -> RedisResult<()> {
    if !released {
      return Ok(());
    }
    self.topology.announce(&self.link, &keys.value, event).await
  }

  /// A script's answer with [`ANNOUNCE_REFUSED`] taken out (and reported).
  fn announced(&self, answer: i64) -> i64 {
    if answer >= ANNOUNCE_REFUSED {
      self.link.publish_refused();
      return answer - ANNOUNCE_REFUSED;
    }
    answer
  }

  /// After a script that may write or delete a key's value: when it
  /// `landed`, its `event` (a fill, a deletion) is announced where the
  /// script could not (a cluster's sharded channel, [`Topology::announce`]).
  /// Answers `landed`.
  async fn announce_landed(
    &self,
    landed: bool,
    keys: &RedisKeys,
    event: &str,
  ) -> RedisResult<bool> {
    if landed {
      self
        .topology
        .announce(&self.link, &keys.value, event)
        .await?;
    }
    Ok(landed)
  }

  /// [`SharedStore::subscribe`] with its own bound on connecting,
  /// subscribing and each liveness probe (the trait's uses the command
  /// timeout).
  pub(super) fn subscribe_with(
    &self,
    events: &Arc<Events>,
    bound: Duration,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> JoinHandle<()> {
    let subscriber = self.topology.subscriber(self.tracking);
    let tracking = self.tracking.then(|| self.prefix.clone());
    subscription::run(
      subscriber,
      self.link.clone(),
      events,
      bound,
      tracking,
      on_connected,
    )
  }

  /// Inspection (tests): the key's back-off marker, `(failures, ms left)`,
  /// `None` if there is none or it is not one an instance left. Retried: reads.
  pub(super) async fn backoff(&self, keys: &RedisKeys) -> RedisResult<Option<(u32, u64)>> {
    let read = |mut c: T::Connection| async move {
      redis::pipe()
        .cmd("GET")
        .arg(&keys.backoff)
        .cmd("PTTL")
        .arg(&keys.backoff)
        .query_async::<(Option<String>, i64)>(&mut c)
        .await
    };
    let (failures, pttl) = self.link.retried(read).await?;
    Ok(
      match (failures.and_then(|f| f.parse().ok()), u64::try_from(pttl)) {
        (Some(failures), Ok(ms)) if ms > 0 => Some((failures, ms)),
        _ => None,
      },
    )
  }

  /// Inspection (tests): the lock's remaining lease in ms, `None` if
  /// nobody holds it. Retried: a read.
  pub(super) async fn lock_lease(&self, keys: &RedisKeys) -> RedisResult<Option<u64>> {
    let read = |mut c: T::Connection| async move {
      redis::cmd("PTTL")
        .arg(&keys.lock)
        .query_async::<i64>(&mut c)
        .await
    };
    Ok(u64::try_from(self.link.retried(read).await?).ok())
  }

  /// A replayed delete (`SharedStore::delete`, `replayed`):
  /// `DELETE_NOT_NEWER_SCRIPT`, the conditional tombstone and the PUBLISH
  /// in one round trip.
  /// Retried: conditional on the same stamp, so a repeat changes nothing more.
  async fn delete_not_newer(
    &self,
    key: &str,
    keys: &RedisKeys,
    deletion: Deletion,
  ) -> RedisResult<bool> {
    let event = &self.event(Change::Deleted(key.to_string()));
    let tombstone = &envelope::tombstone(deletion.at);
    let delete = |mut c: T::Connection| async move {
      self
        .scripts
        .delete_not_newer
        .key(&keys.value)
        .arg(deletion.at)
        .arg(self.topology.script_channel())
        .arg(event)
        .arg(MAX_DIGITS)
        .arg(tombstone)
        .arg(deletion.px.max(1))
        .invoke_async::<i64>(&mut c)
        .await
    };
    let deleted = self.announced(self.link.retried(delete).await?) == 1;
    self.announce_landed(deleted, keys, event).await
  }

  /// Removes the prefix's names (with `within`, only those of the keys
  /// starting with it: a namespace's) in batches of a SCAN of each primary
  /// (all of them, or with `not_newer_than`, all but valid envelopes newer
  /// than that stamp), then announces the clear.
  async fn sweep(&self, within: &str, not_newer_than: Option<u64>) -> RedisResult<u64> {
    let primaries = self.topology.primaries(&self.link).await?;
    let mut c = self.link.connection().await?;
    let pattern = format!("{{{}{}*", glob_escape(&self.prefix), glob_escape(within));
    let mut removed = 0;
    for primary in &primaries {
      let mut cursor: u64 = 0;
      loop {
        let scan = redis::cmd("SCAN")
          .arg(cursor)
          .arg("MATCH")
          .arg(&pattern)
          .arg("COUNT")
          .arg(500)
          .clone();
        let (next, names): (u64, Vec<String>) =
          redis::from_redis_value(T::send(&mut c, primary, scan).await?)?;
        for batch in T::batches(names) {
          removed += self.remove(&mut c, &batch, not_newer_than).await?;
        }
        if next == 0 {
          break;
        }
        cursor = next;
      }
    }
    let event = self.event(values::cleared(within));
    self.topology.announce_clear(&self.link, &event).await?;
    Ok(removed)
  }

  /// Removes `names` (one batch of a clear's SCAN): all of them, or with
  /// `not_newer_than` all but valid envelopes newer than that stamp.
  /// Returns how many were removed.
  async fn remove(
    &self,
    c: &mut T::Connection,
    names: &[String],
    not_newer_than: Option<u64>,
  ) -> RedisResult<u64> {
    match not_newer_than {
      None => redis::cmd("UNLINK").arg(names).query_async(c).await,
      Some(stamp) => {
        let mut invocation = self.scripts.clear_not_newer.prepare_invoke();
        for name in names {
          invocation.key(name);
        }
        invocation.arg(stamp).arg(MAX_DIGITS).invoke_async(c).await
      }
    }
  }
}

impl<T: Topology> SharedStore for Redis<T> {
  type Keys = RedisKeys;
  type Error = RedisError;

  fn keys(&self, key: &str) -> RedisKeys {
    RedisKeys::new(&self.prefix, key)
  }

  fn origin(&self) -> &str {
    &self.origin
  }

  fn command_timeout(&self) -> Duration {
    self.timeouts.command
  }

  /// Retried: a read.
  async fn read(&self, keys: &RedisKeys) -> RedisResult<Read> {
    read(&self.link, keys).await
  }

  async fn read_many(&self, keys: &[RedisKeys]) -> RedisResult<Vec<Read>> {
    self.topology.read_many(&self.link, keys).await
  }

  /// `LOCK_SCRIPT`: one round trip whether it wins or not. Retried: a lock
  /// that holds our token already is ours (the script says so), and
  /// nobody else has the token.
  async fn lock(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<LockAttempt> {
    let lock = |mut c: T::Connection| async move {
      self
        .scripts
        .lock
        .key(&keys.lock)
        .arg(token)
        .arg(ttl.max(1))
        .arg(protocol::TOKEN_PATTERN)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let lease = self.link.retried(lock).await?;
    Ok(match u64::try_from(lease) {
      Ok(ms) if ms > 0 => LockAttempt::Held(ms),
      _ => LockAttempt::Won,
    })
  }

  /// `REFRESH_LOCK_SCRIPT`: the marker check and the lock in one round trip.
  /// Retried: as `lock`, and the marker is only read.
  async fn lock_refresh(
    &self,
    keys: &RedisKeys,
    token: &str,
    ttl: u64,
  ) -> RedisResult<LockAttempt> {
    let lock = |mut c: T::Connection| async move {
      self
        .scripts
        .refresh_lock
        .key(&keys.lock)
        .key(&keys.backoff)
        .arg(token)
        .arg(ttl.max(1))
        .arg(protocol::TOKEN_PATTERN)
        .invoke_async::<redis::Value>(&mut c)
        .await
    };
    let reply = self.link.retried(lock).await?;
    Ok(match reply {
      redis::Value::Array(items) => {
        let (failures, ms): (u32, u64) = redis::from_redis_value(redis::Value::Array(items))?;
        LockAttempt::BackingOff { failures, ms }
      }
      other => match u64::try_from(redis::from_redis_value::<i64>(other)?) {
        Ok(ms) if ms > 0 => LockAttempt::Held(ms),
        _ => LockAttempt::Won,
      },
    })
  }

  /// `FAIL_REFRESH_SCRIPT`: the marker and the release in one round trip.
  async fn fail_refresh(
    &self,
    keys: &RedisKeys,
    token: Option<&str>,
    failures: u32,
    ms: u64,
  ) -> RedisResult<bool> {
    // Retried: the marker is set to the same count again, and the release
    // compares our token.
    let event = &self.released_event(keys);
    let fail = |mut c: T::Connection| async move {
      self
        .scripts
        .fail_refresh
        .key(&keys.lock)
        .key(&keys.backoff)
        .arg(token.unwrap_or(""))
        .arg(failures)
        .arg(ms.max(1))
        .arg(self.topology.script_channel())
        .arg(event)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let released = self.announced(self.link.retried(fail).await?) == 1;
    self.announce_release(keys, event, released).await?;
    Ok(released)
  }

  /// Retried: setting the same lease again, and only under our token.
  async fn extend(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<bool> {
    let extend = |mut c: T::Connection| async move {
      self
        .scripts
        .extend
        .key(&keys.lock)
        .arg(token)
        .arg(ttl.max(1))
        .invoke_async::<i64>(&mut c)
        .await
    };
    Ok(self.link.retried(extend).await? == 1)
  }

  /// Retried: a compare-and-delete of our own token (a repeat after the
  /// first landed finds nothing, and says so).
  async fn release(&self, keys: &RedisKeys, token: &str) -> RedisResult<bool> {
    let event = &self.released_event(keys);
    let release = |mut c: T::Connection| async move {
      self
        .scripts
        .release
        .key(&keys.lock)
        .arg(token)
        .arg(self.topology.script_channel())
        .arg(event)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let released = self.announced(self.link.retried(release).await?) == 1;
    self.announce_release(keys, event, released).await?;
    Ok(released)
  }

  /// `WRITE_SCRIPT`: the conditional SET, the PUBLISH and the lock's
  /// release in one round trip.
  async fn write_over(
    &self,
    key: &str,
    keys: &RedisKeys,
    envelope: &Envelope,
    px: u64,
    token: Option<&str>,
    corrupt_stamp: Option<u64>,
  ) -> RedisResult<bool> {
    // Retried: conditional on the stamp, which a repeat carries unchanged
    // (an equal stamp is not newer: the same envelope is written again);
    // the lock is freed only under our token; a second notice is harmless.
    let (text, event) = (
      envelope.encode(),
      self.event(Change::Filled(key.to_string())),
    );
    let corrupt = corrupt_stamp.map(|s| s.to_string()).unwrap_or_default();
    let (text, event, corrupt) = (&text, &event, &corrupt);
    let write = |mut c: T::Connection| async move {
      self
        .scripts
        .write
        .key(&keys.value)
        .key(&keys.lock)
        .key(&keys.backoff)
        .key(&keys.expired)
        .arg(text)
        .arg(px.max(1))
        .arg(envelope.meta.stamp)
        .arg(token.unwrap_or(""))
        .arg(self.topology.script_channel())
        .arg(event)
        .arg(corrupt)
        .arg(MAX_DIGITS)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let written = self.announced(self.link.retried(write).await?) == 1;
    self.announce_landed(written, keys, event).await
  }

  /// `KEEP_SCRIPT`. Retried: a repeat after the first landed finds the
  /// keep's own header and answers not kept (the copy is let go of).
  async fn keep_over(
    &self,
    key: &str,
    keys: &RedisKeys,
    kept: &Meta,
    meta: &Meta,
    px: u64,
    token: Option<&str>,
  ) -> RedisResult<bool> {
    let event = self.event(Change::Filled(key.to_string()));
    let refresh_at = meta.refresh_at.unwrap_or(meta.fresh_until);
    let event = &event;
    let keep = |mut c: T::Connection| async move {
      self
        .scripts
        .keep
        .key(&keys.value)
        .key(&keys.lock)
        .key(&keys.backoff)
        .key(&keys.expired)
        .arg(kept.stamp)
        .arg(kept.fresh_until)
        .arg(kept.hard_until)
        .arg(meta.fresh_until)
        .arg(meta.hard_until)
        .arg(meta.compute_ms)
        .arg(meta.stamp)
        .arg(refresh_at.min(meta.fresh_until))
        .arg(px.max(1))
        .arg(token.unwrap_or(""))
        .arg(self.topology.script_channel())
        .arg(event)
        .arg(MAX_DIGITS)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let landed = self.announced(self.link.retried(keep).await?) == 1;
    self.announce_landed(landed, keys, event).await
  }

  /// `SET_SCRIPT`: the SET, stamped after the stored value, and the
  /// PUBLISH in one round trip. Retried: a repeat after the first landed
  /// writes the same value again, one stamp later.
  async fn write_newest(
    &self,
    key: &str,
    keys: &RedisKeys,
    envelope: &Envelope,
    px: u64,
  ) -> RedisResult<u64> {
    let (text, event) = (
      envelope.encode(),
      self.event(Change::Filled(key.to_string())),
    );
    let (text, event) = (&text, &event);
    let set = |mut c: T::Connection| async move {
      self
        .scripts
        .set
        .key(&keys.value)
        .key(&keys.backoff)
        .arg(text)
        .arg(px.max(1))
        .arg(envelope.meta.stamp)
        .arg(self.topology.script_channel())
        .arg(event)
        .arg(MAX_DIGITS)
        .invoke_async::<(u64, i64)>(&mut c)
        .await
    };
    let (stamp, announce) = self.link.retried(set).await?;
    self.announced(announce);
    self
      .topology
      .announce(&self.link, &keys.value, event)
      .await?;
    Ok(stamp)
  }

  /// `DELETE_SCRIPT`: the tombstone and its announcement in one round
  /// trip. Retried: a repeat lands the tombstone again, one stamp later
  /// (though it answers that no value was there).
  async fn delete(&self, key: &str, keys: &RedisKeys, deletion: Deletion) -> RedisResult<bool> {
    if deletion.replayed {
      return self.delete_not_newer(key, keys, deletion).await;
    }
    let event = &self.event(Change::Deleted(key.to_string()));
    let tombstone = &envelope::tombstone(deletion.at);
    let delete = |mut c: T::Connection| async move {
      self
        .scripts
        .delete
        .key(&keys.value)
        .arg(self.topology.script_channel())
        .arg(event)
        .arg(tombstone)
        .arg(deletion.at)
        .arg(deletion.px.max(1))
        .arg(MAX_DIGITS)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let deleted = self.announced(self.link.retried(delete).await?) > 0;
    self
      .topology
      .announce(&self.link, &keys.value, event)
      .await?;
    Ok(deleted)
  }

  /// `EXPIRE_SCRIPT`: the conditional rewrite of the header and the
  /// PUBLISH in one round trip. Retried: a repeat finds the value stale
  /// already and changes nothing (but announces again: L1s mark by the
  /// same rule, so a second notice changes nothing either).
  async fn expire(&self, key: &str, keys: &RedisKeys, at: u64, guard: u64) -> RedisResult<bool> {
    let event = &self.event(Change::Expired {
      key: key.to_string(),
      at,
    });
    let expire = |mut c: T::Connection| async move {
      self
        .scripts
        .expire
        .key(&keys.value)
        .key(&keys.expired)
        .arg(at)
        .arg(self.topology.script_channel())
        .arg(event)
        .arg(MAX_DIGITS)
        .arg(guard.max(1))
        .invoke_async::<i64>(&mut c)
        .await
    };
    let expired = self.announced(self.link.retried(expire).await?) == 1;
    self
      .topology
      .announce(&self.link, &keys.value, event)
      .await?;
    Ok(expired)
  }

  /// `TAG_SCRIPT`: the stamp raised and announced in one round trip.
  /// Retried: raising to the same stamp again changes nothing.
  async fn invalidate_tag(&self, tag: &str, at: u64, px: u64) -> RedisResult<bool> {
    let name = &protocol::tag_stamp(&self.prefix, tag);
    let event = &self.event(Change::Tagged {
      tag: tag.to_string(),
      at,
    });
    let raise = |mut c: T::Connection| async move {
      self
        .scripts
        .tag
        .key(name)
        .arg(at)
        .arg(px.max(1))
        .arg(self.topology.script_channel())
        .arg(event)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let raised = self.announced(self.link.retried(raise).await?) == 1;
    self.topology.announce(&self.link, name, event).await?;
    Ok(raised)
  }

  /// One GET per tag, sent together: the connection pipelines them (on a
  /// cluster, per node). Retried: reads.
  async fn tag_stamps(&self, tags: &[String]) -> RedisResult<Vec<u64>> {
    let reads = tags.iter().map(|tag| {
      let name = protocol::tag_stamp(&self.prefix, tag);
      let get = move |mut c: T::Connection| {
        let name = name.clone();
        async move {
          redis::cmd("GET")
            .arg(&name)
            .query_async::<Option<Vec<u8>>>(&mut c)
            .await
        }
      };
      async move {
        match self.link.retried(get).await {
          Ok(stamp) => Ok(values::parse_stamp(stamp.as_deref())),
          Err(e) if e.code() == Some("WRONGTYPE") => Ok(0),
          Err(e) => Err(e),
        }
      }
    });
    futures_util::future::join_all(reads)
      .await
      .into_iter()
      .collect()
  }

  /// [`Redis::sweep`]: SCAN, then UNLINK (or, replayed,
  /// `CLEAR_NOT_NEWER_SCRIPT`) in batches, then the announcement. Retried: removing what is gone already is
  /// harmless, and a replay is conditional on the same stamp. A namespace's
  /// empty prefix would be the whole clear: refused, so a namespace's clear
  /// never becomes one.
  async fn clear(&self, scope: ClearScope<'_>, not_newer_than: Option<u64>) -> RedisResult<u64> {
    let within = match scope {
      ClearScope::All => "",
      ClearScope::Namespace("") => {
        return Err(RedisError::from((
          ErrorKind::Client,
          "a namespace's clear needs its prefix",
        )))
      }
      ClearScope::Namespace(prefix) => prefix,
    };
    match self.sweep(within, not_newer_than).await {
      Err(e) if dropped(&e) => self.sweep(within, not_newer_than).await,
      other => other,
    }
  }

  fn subscribe(
    &self,
    events: &Arc<Events>,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> JoinHandle<()> {
    self.subscribe_with(events, self.timeouts.command, on_connected)
  }

  /// `TIME`. Not retried: a sample after a reconnect would be timed from
  /// before it; the next sample is soon enough.
  async fn server_time(&self) -> RedisResult<u64> {
    let mut c = self.link.connection().await?;
    let time = T::send(&mut c, &self.topology.clock(), redis::cmd("TIME")).await?;
    let (seconds, micros): (u64, u64) = redis::from_redis_value(time)?;
    Ok(seconds * 1_000 + micros / 1_000)
  }

  fn close(&self) {
    self.link.close();
  }

  fn problems(&self) -> &Arc<Problems> {
    self.link.problems()
  }

  /// `LOAD_SLOTS_SCRIPT`. Retried: the holding is sent whole, so a repeat
  /// of a call that landed sets it again (what the first granted is
  /// forgotten by the store as by us: only the repeat's answer counts).
  async fn load_slots(&self, call: SlotCall) -> RedisResult<SlotGrant> {
    let (name, head) = (
      &self.load_slots_name,
      &protocol::slots_freed_head(&self.origin),
    );
    let SlotCall {
      held,
      wanted,
      cap,
      lease,
      wait,
    } = call;
    let call = |mut c: T::Connection| async move {
      self
        .scripts
        .load_slots
        .key(name)
        .arg(&self.origin)
        .arg(held)
        .arg(wanted)
        .arg(cap)
        .arg(lease.max(1))
        .arg(wait.max(1))
        .arg(self.topology.script_channel())
        .arg(head)
        .invoke_async::<(u64, u64, u64, i64, u64, u64)>(&mut c)
        .await
    };
    let (granted, free, waiting, refused, up_to, ticket) = self.link.retried(call).await?;
    if refused >= ANNOUNCE_REFUSED {
      self.link.publish_refused();
    }
    if up_to > 0 {
      let event = self.event(Change::SlotsFreed { up_to });
      self.topology.announce(&self.link, name, &event).await?;
    }
    Ok(SlotGrant {
      granted,
      free,
      waiting,
      ticket,
    })
  }

  fn describe(&self, error: &RedisError) -> Problem {
    self.link.target().describe(error)
  }

  /// A connection (authenticated, its db selected), then every script
  /// loaded, as EVALSHA will need them.
  /// Once more on a new connection when the first was closed under it (an
  /// idle connection the server or a proxy dropped), as for `retried`.
  async fn ready(&self) -> RedisResult<()> {
    match self.scripts.load(&mut self.link.reconnect().await?).await {
      Err(e) if dropped(&e) => self.scripts.load(&mut self.link.reconnect().await?).await,
      other => other,
    }
  }
}

/// One key's GET, as the fleet reads it. Retried: a read.
pub(super) async fn read<C: ConnectionLike + Clone + Send + Sync + 'static>(
  link: &Link<C>,
  keys: &RedisKeys,
) -> RedisResult<Read> {
  let get = |mut c: C| async move {
    let bytes = redis::cmd("GET").arg(&keys.value).query_async(&mut c).await;
    read_reply(bytes)
  };
  link.retried(get).await
}

/// A GET's reply as the fleet reads it: another Redis type under the
/// key (WRONGTYPE) is a foreign value, not a Redis failure; the bytes are
/// judged as every store judges them (`values::read_bytes`).
pub(super) fn read_reply(reply: RedisResult<Option<Vec<u8>>>) -> RedisResult<Read> {
  match reply {
    Ok(bytes) => Ok(values::read_bytes(bytes.as_deref())),
    Err(e) if e.code() == Some("WRONGTYPE") => Ok(Read::Corrupt(DecodeError::NotAnEnvelope)),
    Err(e) => Err(e),
  }
}

/// Escapes Redis glob characters, so a prefix matches only itself.
fn glob_escape(text: &str) -> String {
  let mut out = String::with_capacity(text.len());
  for ch in text.chars() {
    if matches!(ch, '*' | '?' | '[' | ']' | '\\') {
      out.push('\\');
    }
    out.push(ch);
  }
  out
}
