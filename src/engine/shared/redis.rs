//! The Redis store: reads and conditional writes of envelopes, the fleet
//! lock (acquire, extend, compare-and-delete release), invalidations, and
//! the events subscription that delivers fill notices. Async on tokio,
//! through redis-rs; no napi. The protocol that sequences these calls
//! (DESIGN.md §3) is `engine::fleet`'s.

use super::{
  values, ClearScope, Deletion, Events, LockAttempt, Problem, Problems, Read, SharedStore,
  SlotCall, SlotGrant,
};
use crate::core::envelope::{self, DecodeError, Envelope, MAX_DIGITS};
use crate::core::error::Code;
use crate::core::fleet::{self as protocol, Change, Event, RedisKeys, ANNOUNCE_REFUSED};
use futures_util::future::{BoxFuture, Shared};
use futures_util::StreamExt;
use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster_async::ClusterConnection;
use redis::{
  Client, Cmd, ErrorKind, Pipeline, RedisError, RedisFuture, RedisResult, Script, Value,
};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// Timeouts and retries of the connection: bounded, so a Redis that is down
/// or slow costs a caller at most these, never redis-rs's defaults (a bad URL
/// took 9.4 s to fail with them).
#[derive(Debug, Clone, Copy)]
pub struct RedisTimeouts {
  pub connect: Duration,
  pub command: Duration,
  pub retries: usize,
}

impl Default for RedisTimeouts {
  fn default() -> Self {
    RedisTimeouts {
      connect: Duration::from_millis(1_000),
      command: Duration::from_millis(1_000),
      retries: 1,
    }
  }
}

pub struct RedisStore {
  /// The server, or for a cluster its first seed node (what a failure's
  /// explanation probes).
  pub(super) client: Client,
  /// A Redis Cluster's client and what only a cluster needs (`cluster.rs`).
  pub(super) cluster: Option<super::cluster::Cluster>,
  timeouts: RedisTimeouts,
  /// The command connection, made on first use (one attempt at a time,
  /// shared by every caller: [`Connecting`]), dropped by `close` (and on a
  /// cluster, by a resubscription: `cluster.rs`).
  pub(super) manager: Arc<Mutex<Option<Connection>>>,
  connecting: Arc<Mutex<Connecting>>,
  closed: Arc<AtomicBool>,
  pub(super) problems: Arc<Problems>,
  /// Where it connects, for messages: `host:port` (never the credentials),
  /// and whether over TLS.
  pub(super) target: Target,
  pub(super) prefix: String,
  channel: String,
  /// Names this store on the events channel, so it can skip its own notices.
  origin: String,
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
  tag: Script,
  clear_not_newer: Script,
  load_slots: Script,
  /// The name of the fleet's load slots (`protocol::load_slots`).
  load_slots_name: String,
}

/// The command connection: to one server, or to a cluster (whose client
/// routes each command to the primary of its key's slot and follows
/// MOVED and ASK).
#[derive(Clone)]
pub(super) enum Connection {
  Node(ConnectionManager),
  Cluster(ClusterConnection),
}

impl ConnectionLike for Connection {
  fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
    match self {
      Connection::Node(c) => c.req_packed_command(cmd),
      Connection::Cluster(c) => c.req_packed_command(cmd),
    }
  }

  fn req_packed_commands<'a>(
    &'a mut self,
    pipeline: &'a Pipeline,
    offset: usize,
    count: usize,
  ) -> RedisFuture<'a, Vec<Value>> {
    match self {
      Connection::Node(c) => c.req_packed_commands(pipeline, offset, count),
      Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
    }
  }

  fn get_db(&self) -> i64 {
    match self {
      Connection::Node(c) => c.get_db(),
      Connection::Cluster(c) => c.get_db(),
    }
  }
}

impl RedisStore {
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
    let delete = |mut c: Connection| async move {
      self
        .delete_not_newer
        .key(&keys.value)
        .arg(deletion.at)
        .arg(self.script_channel())
        .arg(event)
        .arg(MAX_DIGITS)
        .arg(tombstone)
        .arg(deletion.px.max(1))
        .invoke_async::<i64>(&mut c)
        .await
    };
    let deleted = self.announced(self.retried(delete).await?) == 1;
    if deleted {
      self.announce_on_cluster(&keys.value, event).await?;
    }
    Ok(deleted)
  }

  /// Checks the URL (`redis://`, `rediss://` with the system's roots, with
  /// user, password and db; `rediss://…/#insecure` skips certificate checks,
  /// for tests); connects on first use.
  pub fn open(url: &str, prefix: &str, timeouts: RedisTimeouts) -> RedisResult<RedisStore> {
    Self::open_at(url, None, prefix, timeouts)
  }

  /// A store on the Redis Cluster some of whose nodes `seeds` names (URLs
  /// as for [`RedisStore::open`], one scheme for all); connects on first use.
  pub fn open_cluster(
    seeds: &[String],
    prefix: &str,
    timeouts: RedisTimeouts,
  ) -> RedisResult<RedisStore> {
    let first = seeds
      .first()
      .ok_or_else(|| RedisError::from((ErrorKind::InvalidClientConfig, "no cluster node given")))?;
    if first.starts_with("rediss://") {
      install_tls_provider();
    }
    let cluster = super::cluster::Cluster::open(seeds, prefix, timeouts)?;
    Self::open_at(first, Some(cluster), prefix, timeouts)
  }

  fn open_at(
    url: &str,
    cluster: Option<super::cluster::Cluster>,
    prefix: &str,
    timeouts: RedisTimeouts,
  ) -> RedisResult<RedisStore> {
    if url.starts_with("rediss://") {
      install_tls_provider();
    }
    let client = Client::open(url)?;
    let addr = client.get_connection_info().addr().to_string();
    let name = match &cluster {
      Some(cluster) => format!(
        "the Redis Cluster (seed nodes {})",
        cluster.seed_addresses()
      ),
      None => format!("Redis at {addr}"),
    };
    let target = Target {
      addr,
      name,
      tls: url.starts_with("rediss://"),
      timeout_ms: timeouts.command.as_millis() as u64,
    };
    Ok(RedisStore {
      client,
      cluster,
      target,
      timeouts,
      manager: Arc::new(Mutex::new(None)),
      connecting: Arc::new(Mutex::new(Connecting::default())),
      closed: Arc::new(AtomicBool::new(false)),
      problems: Arc::new(Problems::default()),
      prefix: prefix.to_string(),
      channel: protocol::events_channel(prefix),
      origin: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
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
      tag: Script::new(protocol::TAG_SCRIPT),
      clear_not_newer: Script::new(protocol::CLEAR_NOT_NEWER_SCRIPT),
      load_slots: Script::new(protocol::LOAD_SLOTS_SCRIPT),
      load_slots_name: protocol::load_slots(prefix),
    })
  }

  /// The prefix of every name this store uses.
  pub fn prefix(&self) -> &str {
    &self.prefix
  }

  /// The events channel of this store's prefix.
  pub fn channel(&self) -> &str {
    &self.channel
  }

  pub fn timeouts(&self) -> RedisTimeouts {
    self.timeouts
  }

  pub(super) fn event(&self, change: Change) -> String {
    Event::new(&self.origin, change).encode()
  }

  /// The channel the scripts announce on: none on a cluster, whose sharded
  /// channels a script cannot reach from another slot (the store announces
  /// after the script there, `Cluster::announce`).
  fn script_channel(&self) -> &str {
    match self.cluster {
      Some(_) => "",
      None => &self.channel,
    }
  }

  /// The command connection. Without one, the attempt in flight is joined
  /// (never a second one: a Redis that is down or silent costs every caller
  /// one attempt's time at most, together, not one attempt each), and for
  /// `connect` after an attempt failed, callers get its error at once; past
  /// that a new attempt starts. [`RedisStore::reconnect`] asks afresh.
  pub(super) async fn connection(&self) -> RedisResult<Connection> {
    if let Some(manager) = self.live_manager()? {
      return Ok(manager);
    }
    self.attempt(false)?.outcome.await
  }

  /// The connection, with a new attempt unless one is in flight (the
  /// breaker's probe, `ready()`); a failure comes explained ([`explain`]:
  /// the server's own words, a TLS port that speaks plain text), which
  /// only these callers wait for.
  async fn reconnect(&self) -> RedisResult<Connection> {
    if let Some(manager) = self.live_manager()? {
      return Ok(manager);
    }
    let attempt = self.attempt(true)?;
    match attempt.outcome.await {
      Ok(manager) => Ok(manager),
      Err(e) => Err(attempt.explained.await.unwrap_or(e)),
    }
  }

  /// The attempt to join, or a new one; `Err` at once when the last
  /// attempt failed less than `connect` ago (unless `fresh`).
  fn attempt(&self, fresh: bool) -> RedisResult<Attempt> {
    let mut state = self.connecting.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(attempt) = &state.attempt {
      return Ok(attempt.clone());
    }
    if let Some(manager) = self.live_manager()? {
      // Made while this caller waited for the lock.
      return Ok(Attempt::made(manager));
    }
    if let Some((error, at)) = &state.failed {
      if !fresh && at.elapsed() < self.timeouts.connect {
        return Err(error.clone());
      }
    }
    let attempt = self.start_attempt();
    state.attempt = Some(attempt.clone());
    Ok(attempt)
  }

  /// One connection attempt, on a task of its own (a caller that stops
  /// waiting does not end it), bounded by the connect timeout as a whole
  /// (redis-rs's own retry included). Its outcome reaches every caller
  /// waiting on it at once; a failure is then explained, off their path,
  /// and the explanation goes to [`Problems`] (`onError`, `lastRedisError`)
  /// and to the callers of [`RedisStore::reconnect`].
  fn start_attempt(&self) -> Attempt {
    use futures_util::FutureExt;
    let bound = self.timeouts.connect;
    let made: futures_util::future::BoxFuture<'static, RedisResult<Connection>> = match &self
      .cluster
    {
      Some(cluster) => cluster
        .connect()
        .map(|c| c.map(Connection::Cluster))
        .boxed(),
      None => {
        let config = ConnectionManagerConfig::new()
          .set_number_of_retries(self.timeouts.retries)
          .set_connection_timeout(Some(self.timeouts.connect))
          .set_response_timeout(Some(self.timeouts.command));
        let client = self.client.clone();
        async move {
          match tokio::time::timeout(bound, client.get_connection_manager_with_config(config)).await
          {
            Ok(made) => made.map(Connection::Node),
            Err(_) => Err(connect_timed_out()),
          }
        }
        .boxed()
      }
    };
    let (outcome_tx, outcome_rx) = tokio::sync::oneshot::channel();
    let (explained_tx, explained_rx) = tokio::sync::oneshot::channel();
    let (state, manager, closed) = (
      Arc::clone(&self.connecting),
      Arc::clone(&self.manager),
      Arc::clone(&self.closed),
    );
    let (client, target, problems) = (
      self.client.clone(),
      self.target.clone(),
      Arc::clone(&self.problems),
    );
    tokio::spawn(async move {
      let made = made.await;
      let explaining = matches!(&made, Err(e) if needs_explaining(&target, e));
      let made = {
        let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
        state.attempt = None;
        match made {
          Ok(made) => {
            let mut slot = manager.lock().unwrap_or_else(|p| p.into_inner());
            state.failed = None;
            if closed.load(Ordering::SeqCst) {
              Err(closed_error())
            } else {
              *slot = Some(made.clone());
              Ok(made)
            }
          }
          Err(e) => {
            state.failed = Some((e.clone(), Instant::now()));
            if explaining {
              // Before the callers hear of it: the report that opens the
              // breaker waits for the explanation (`Problems::explained`).
              problems.explaining();
            }
            Err(e)
          }
        }
      };
      let _ = outcome_tx.send(made.clone());
      let explained = match &made {
        Err(e) if explaining => tokio::time::timeout(bound, explain(&client, &target, e))
          .await
          .ok()
          .flatten(),
        _ => None,
      };
      if explaining {
        if let Some(explained) = &explained {
          let mut state = state.lock().unwrap_or_else(|p| p.into_inner());
          if let Some((error, _)) = state.failed.as_mut() {
            *error = explained.clone();
          }
        }
        problems.explained(explained.as_ref().map(|e| target.describe(e)));
      }
      let _ = explained_tx.send(explained);
    });
    Attempt {
      outcome: outcome_rx
        .map(|sent| sent.unwrap_or_else(|_| Err(closed_error())))
        .boxed()
        .shared(),
      explained: explained_rx
        .map(|sent| sent.ok().flatten())
        .boxed()
        .shared(),
    }
  }

  fn live_manager(&self) -> RedisResult<Option<Connection>> {
    if self.closed.load(Ordering::SeqCst) {
      return Err(closed_error());
    }
    Ok(
      self
        .manager
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone(),
    )
  }

  /// Runs `command` on the connection, and once more on a new one when the
  /// first failed because the connection was closed under it (a server's
  /// `timeout`, a proxy or a NAT dropping an idle connection): redis-rs
  /// reconnects on such an error, and the command would otherwise fail
  /// with nothing wrong with Redis (and open the breaker). Only commands
  /// safe to repeat go through here: each caller says why. A refused
  /// connection (Redis down) is not retried.
  pub(super) async fn retried<T, F, Fut>(&self, command: F) -> RedisResult<T>
  where
    F: Fn(Connection) -> Fut,
    Fut: Future<Output = RedisResult<T>>,
  {
    match command(self.connection().await?).await {
      Err(e) if dropped(&e) => command(self.connection().await?).await,
      other => other,
    }
  }

  /// Inspection (tests): the key's back-off marker, `(failures, ms left)`,
  /// `None` if there is none or it is not one an instance left. Retried: reads.
  pub async fn backoff(&self, keys: &RedisKeys) -> RedisResult<Option<(u32, u64)>> {
    let read = |mut c: Connection| async move {
      redis::pipe()
        .cmd("GET")
        .arg(&keys.backoff)
        .cmd("PTTL")
        .arg(&keys.backoff)
        .query_async::<(Option<String>, i64)>(&mut c)
        .await
    };
    let (failures, pttl) = self.retried(read).await?;
    Ok(
      match (failures.and_then(|f| f.parse().ok()), u64::try_from(pttl)) {
        (Some(failures), Ok(ms)) if ms > 0 => Some((failures, ms)),
        _ => None,
      },
    )
  }

  /// Inspection (tests): the lock's remaining lease in ms, `None` if
  /// nobody holds it. Retried: a read.
  pub async fn lock_lease(&self, keys: &RedisKeys) -> RedisResult<Option<u64>> {
    let read = |mut c: Connection| async move {
      redis::cmd("PTTL")
        .arg(&keys.lock)
        .query_async::<i64>(&mut c)
        .await
    };
    Ok(u64::try_from(self.retried(read).await?).ok())
  }

  /// A script's answer with [`ANNOUNCE_REFUSED`] taken out (and reported).
  pub(super) fn announced(&self, answer: i64) -> i64 {
    if answer >= ANNOUNCE_REFUSED {
      self.publish_refused();
      return answer - ANNOUNCE_REFUSED;
    }
    answer
  }

  pub(super) fn publish_refused(&self) {
    self.problems.raise(
      "publish",
      Problem {
        code: Code::RedisNoPerm,
        message: format!(
          "Redis refused PUBLISH on the events channel `{}` (NOPERM: this ACL user may not publish there). Values are still written and locks released, but other instances are not told: their memory keeps the old values until their TTL, and their waiting loads wait out the lock's lease. Allow the channel (`&herdcache:events:*`, or `allchannels`) and `+publish +subscribe` for this user",
          self.channel
        ),
      },
    );
  }

  /// [`SharedStore::subscribe`] with its own bound on connecting,
  /// subscribing and each liveness probe (the trait's uses the command
  /// timeout).
  ///
  /// The subscription has a connection of its own and reconnects with a
  /// capped backoff. A connection that goes silent (a partition, a paused
  /// or blackholed server) ends no stream, so it is probed: a PING every
  /// [`LIVENESS_PROBE`], answered within `timeout`, or the subscription is
  /// dropped and made anew.
  pub fn subscribe_with(
    &self,
    events: &Arc<Events>,
    timeout: Duration,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> JoinHandle<()> {
    let events = Arc::clone(events);
    let client = self.client.clone();
    let channel = self.channel.clone();
    let problems = Arc::clone(&self.problems);
    let target = self.target.clone();
    tokio::spawn(async move {
      let mut backoff = Duration::from_millis(50);
      loop {
        let connected = tokio::time::timeout(timeout, client.get_async_pubsub()).await;
        let failed = match &connected {
          Ok(Err(e)) => Some(match explain(&client, &target, e).await {
            Some(explained) => target.describe(&explained),
            None => target.describe(e),
          }),
          Err(_) if target.tls && plain_redis(&target.addr).await => {
            Some(target.describe(&plain_port_error()))
          }
          Err(_) => Some(target.timed_out()),
          Ok(Ok(_)) => None,
        };
        if failed.is_some() {
          problems.subscription(failed);
        }
        if let Ok(Ok(pubsub)) = connected {
          let (mut sink, mut messages) = pubsub.split();
          let subscribed = tokio::time::timeout(timeout, sink.subscribe(&channel)).await;
          if let Ok(Err(e)) = &subscribed {
            let refused = subscribe_refused(&channel, e);
            problems.subscription(Some(refused.clone()));
            if e.code() == Some("NOPERM") {
              problems.raise("subscribe", refused);
              // An ACL changes rarely: asked again now and then, not spun on.
              backoff = REFUSED_RETRY;
            }
          }
          if let Ok(Ok(())) = subscribed {
            problems.subscription(None);
            on_connected(true);
            backoff = Duration::from_millis(50);
            let mut probe = tokio::time::interval(LIVENESS_PROBE);
            probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            probe.tick().await;
            loop {
              tokio::select! {
                message = messages.next() => {
                  let Some(message) = message else { break };
                  if let Some(event) = message
                    .get_payload::<String>()
                    .ok()
                    .and_then(|m| Event::decode(&m))
                  {
                    events.dispatch(&event);
                  }
                }
                _ = probe.tick() => {
                  let pong = tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await;
                  if !matches!(pong, Ok(Ok(_))) {
                    break;
                  }
                }
              }
            }
            on_connected(false);
          }
        }
        tokio::time::sleep(backoff).await;
        if backoff < REFUSED_RETRY {
          backoff = (backoff * 2).min(Duration::from_secs(2));
        }
      }
    })
  }

  /// Removes the prefix's names (with `within`, only those of the keys
  /// starting with it: a namespace's) in batches of a SCAN (all of them, or
  /// with `not_newer_than`, all but valid envelopes newer than that stamp),
  /// then announces the clear.
  async fn sweep(&self, within: &str, not_newer_than: Option<u64>) -> RedisResult<u64> {
    if let Some(cluster) = &self.cluster {
      return cluster.sweep(self, within, not_newer_than).await;
    }
    let mut c = self.connection().await?;
    let pattern = self.pattern(within);
    let mut cursor: u64 = 0;
    let mut removed = 0;
    loop {
      let (next, names): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(cursor)
        .arg("MATCH")
        .arg(&pattern)
        .arg("COUNT")
        .arg(500)
        .query_async(&mut c)
        .await?;
      if !names.is_empty() {
        removed += self.remove(&mut c, &names, not_newer_than).await?;
      }
      if next == 0 {
        break;
      }
      cursor = next;
    }
    let published: RedisResult<i64> = redis::cmd("PUBLISH")
      .arg(&self.channel)
      .arg(self.event(values::cleared(within)))
      .query_async(&mut c)
      .await;
    match published {
      Err(e) if e.code() == Some("NOPERM") => self.publish_refused(),
      other => {
        other?;
      }
    }
    Ok(removed)
  }
}

impl RedisStore {
  /// Removes `names` (one batch of a clear's SCAN; on a cluster, of one
  /// slot): all of them, or with `not_newer_than` all but valid envelopes
  /// newer than that stamp. Returns how many were removed.
  pub(super) async fn remove(
    &self,
    c: &mut Connection,
    names: &[String],
    not_newer_than: Option<u64>,
  ) -> RedisResult<u64> {
    match not_newer_than {
      None => redis::cmd("UNLINK").arg(names).query_async(c).await,
      Some(stamp) => {
        let mut invocation = self.clear_not_newer.prepare_invoke();
        for name in names {
          invocation.key(name);
        }
        invocation.arg(stamp).arg(MAX_DIGITS).invoke_async(c).await
      }
    }
  }

  /// The SCAN pattern of the prefix's names (with `within`, of the names of
  /// the keys starting with it).
  pub(super) fn pattern(&self, within: &str) -> String {
    format!("{{{}{}*", glob_escape(&self.prefix), glob_escape(within))
  }

  /// On a cluster, announces `event` about the key whose value name is
  /// `value` on its sharded channel (the script could not); a refusal is
  /// reported as the script's is.
  async fn announce_on_cluster(&self, value: &str, event: &str) -> RedisResult<()> {
    match &self.cluster {
      Some(cluster) => cluster.announce(self, value, event).await,
      None => Ok(()),
    }
  }
}

impl SharedStore for RedisStore {
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
    let get = |mut c: Connection| async move {
      let bytes = redis::cmd("GET").arg(&keys.value).query_async(&mut c).await;
      read_reply(bytes)
    };
    self.retried(get).await
  }

  /// One pipeline: one round trip for a whole batch of loads that found
  /// nothing in memory. Retried: reads.
  async fn read_many(&self, keys: &[RedisKeys]) -> RedisResult<Vec<Read>> {
    if let Some(cluster) = &self.cluster {
      return cluster.read_many(self, keys).await;
    }
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for k in keys {
      pipe.cmd("GET").arg(&k.value);
    }
    let pipe = &pipe;
    let get = |mut c: Connection| async move {
      let replies: Vec<RedisResult<Option<Vec<u8>>>> = pipe.query_async(&mut c).await?;
      replies.into_iter().map(read_reply).collect()
    };
    self.retried(get).await
  }

  /// `LOCK_SCRIPT`: one round trip whether it wins or not. Retried: a lock
  /// that holds our token already is ours (the script says so), and
  /// nobody else has the token.
  async fn lock(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<LockAttempt> {
    let lock = |mut c: Connection| async move {
      self
        .lock
        .key(&keys.lock)
        .arg(token)
        .arg(ttl.max(1))
        .arg(protocol::TOKEN_PATTERN)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let lease = self.retried(lock).await?;
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
    let lock = |mut c: Connection| async move {
      self
        .refresh_lock
        .key(&keys.lock)
        .key(&keys.backoff)
        .arg(token)
        .arg(ttl.max(1))
        .arg(protocol::TOKEN_PATTERN)
        .invoke_async::<redis::Value>(&mut c)
        .await
    };
    let reply = self.retried(lock).await?;
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
    let fail = |mut c: Connection| async move {
      self
        .fail_refresh
        .key(&keys.lock)
        .key(&keys.backoff)
        .arg(token.unwrap_or(""))
        .arg(failures)
        .arg(ms.max(1))
        .invoke_async::<i64>(&mut c)
        .await
    };
    Ok(self.retried(fail).await? == 1)
  }

  /// Retried: setting the same lease again, and only under our token.
  async fn extend(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<bool> {
    let extend = |mut c: Connection| async move {
      self
        .extend
        .key(&keys.lock)
        .arg(token)
        .arg(ttl.max(1))
        .invoke_async::<i64>(&mut c)
        .await
    };
    Ok(self.retried(extend).await? == 1)
  }

  /// Retried: a compare-and-delete of our own token (a repeat after the
  /// first landed finds nothing, and says so).
  async fn release(&self, keys: &RedisKeys, token: &str) -> RedisResult<bool> {
    let release = |mut c: Connection| async move {
      self
        .release
        .key(&keys.lock)
        .arg(token)
        .invoke_async::<i64>(&mut c)
        .await
    };
    Ok(self.retried(release).await? == 1)
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
    let write = |mut c: Connection| async move {
      self
        .write
        .key(&keys.value)
        .key(&keys.lock)
        .key(&keys.backoff)
        .arg(text)
        .arg(px.max(1))
        .arg(envelope.meta.stamp)
        .arg(token.unwrap_or(""))
        .arg(self.script_channel())
        .arg(event)
        .arg(corrupt)
        .arg(MAX_DIGITS)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let written = self.announced(self.retried(write).await?) == 1;
    if written {
      self.announce_on_cluster(&keys.value, event).await?;
    }
    Ok(written)
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
    let set = |mut c: Connection| async move {
      self
        .set
        .key(&keys.value)
        .key(&keys.backoff)
        .arg(text)
        .arg(px.max(1))
        .arg(envelope.meta.stamp)
        .arg(self.script_channel())
        .arg(event)
        .arg(MAX_DIGITS)
        .invoke_async::<(u64, i64)>(&mut c)
        .await
    };
    let (stamp, announce) = self.retried(set).await?;
    self.announced(announce);
    self.announce_on_cluster(&keys.value, event).await?;
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
    let delete = |mut c: Connection| async move {
      self
        .delete
        .key(&keys.value)
        .arg(self.script_channel())
        .arg(event)
        .arg(tombstone)
        .arg(deletion.at)
        .arg(deletion.px.max(1))
        .arg(MAX_DIGITS)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let deleted = self.announced(self.retried(delete).await?) > 0;
    self.announce_on_cluster(&keys.value, event).await?;
    Ok(deleted)
  }

  /// `EXPIRE_SCRIPT`: the conditional rewrite of the header and the
  /// PUBLISH in one round trip. Retried: a repeat finds the value stale
  /// already and changes nothing (but announces again: L1s mark by the
  /// same rule, so a second notice changes nothing either).
  async fn expire(&self, key: &str, keys: &RedisKeys, at: u64) -> RedisResult<bool> {
    let event = &self.event(Change::Expired {
      key: key.to_string(),
      at,
    });
    let expire = |mut c: Connection| async move {
      self
        .expire
        .key(&keys.value)
        .arg(at)
        .arg(self.script_channel())
        .arg(event)
        .arg(MAX_DIGITS)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let expired = self.announced(self.retried(expire).await?) == 1;
    self.announce_on_cluster(&keys.value, event).await?;
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
    let raise = |mut c: Connection| async move {
      self
        .tag
        .key(name)
        .arg(at)
        .arg(px.max(1))
        .arg(self.script_channel())
        .arg(event)
        .invoke_async::<i64>(&mut c)
        .await
    };
    let raised = self.announced(self.retried(raise).await?) == 1;
    self.announce_on_cluster(name, event).await?;
    Ok(raised)
  }

  /// One GET per tag, sent together: the connection pipelines them (on a
  /// cluster, per node). Retried: reads.
  async fn tag_stamps(&self, tags: &[String]) -> RedisResult<Vec<u64>> {
    let reads = tags.iter().map(|tag| {
      let name = protocol::tag_stamp(&self.prefix, tag);
      let get = move |mut c: Connection| {
        let name = name.clone();
        async move {
          redis::cmd("GET")
            .arg(&name)
            .query_async::<Option<Vec<u8>>>(&mut c)
            .await
        }
      };
      async move {
        match self.retried(get).await {
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

  /// SCAN, then UNLINK (or, replayed, `CLEAR_NOT_NEWER_SCRIPT`) in
  /// batches, then PUBLISH. Retried: removing what is gone already is
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
    match &self.cluster {
      Some(cluster) => cluster.subscribe(self, events, self.timeouts.command, on_connected),
      None => self.subscribe_with(events, self.timeouts.command, on_connected),
    }
  }

  /// `TIME`. Not retried: a sample after a reconnect would be timed from
  /// before it; the next sample is soon enough.
  async fn server_time(&self) -> RedisResult<u64> {
    let (seconds, micros): (u64, u64) = match self.connection().await? {
      Connection::Node(mut c) => redis::cmd("TIME").query_async(&mut c).await?,
      // One node's clock for every instance: slot 0's primary.
      Connection::Cluster(mut c) => redis::from_redis_value(
        c.route_command(redis::cmd("TIME"), super::cluster::slot_route(0))
          .await?,
      )?,
    };
    Ok(seconds * 1_000 + micros / 1_000)
  }

  fn close(&self) {
    self.closed.store(true, Ordering::SeqCst);
    self
      .manager
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .take();
  }

  fn problems(&self) -> &Arc<Problems> {
    &self.problems
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
    let call = |mut c: Connection| async move {
      self
        .load_slots
        .key(name)
        .arg(&self.origin)
        .arg(held)
        .arg(wanted)
        .arg(cap)
        .arg(lease.max(1))
        .arg(wait.max(1))
        .arg(self.script_channel())
        .arg(head)
        .invoke_async::<(u64, u64, u64, i64, u64, u64)>(&mut c)
        .await
    };
    let (granted, free, waiting, refused, up_to, ticket) = self.retried(call).await?;
    if refused >= ANNOUNCE_REFUSED {
      self.publish_refused();
    }
    if up_to > 0 {
      let event = self.event(Change::SlotsFreed { up_to });
      self.announce_on_cluster(name, &event).await?;
    }
    Ok(SlotGrant {
      granted,
      free,
      waiting,
      ticket,
    })
  }

  fn describe(&self, error: &RedisError) -> Problem {
    self.target.describe(error)
  }

  /// A connection (authenticated, its db selected), then every script
  /// loaded, as EVALSHA will need them.
  /// Once more on a new connection when the first was closed under it (an
  /// idle connection the server or a proxy dropped), as for `retried`.
  async fn ready(&self) -> RedisResult<()> {
    match self.load_scripts(self.reconnect().await?).await {
      Err(e) if dropped(&e) => self.load_scripts(self.reconnect().await?).await,
      other => other,
    }
  }
}

impl RedisStore {
  async fn load_scripts(&self, mut c: Connection) -> RedisResult<()> {
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
      script.prepare_invoke().load_async(&mut c).await?;
    }
    Ok(())
  }
}

/// rustls needs one process-wide crypto provider; a second install (by
/// another cache, or by the host application) is refused, harmlessly.
fn install_tls_provider() {
  let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Where a store connects, for what its failures say.
#[derive(Debug, Clone)]
pub(super) struct Target {
  /// One node's `host:port` (a cluster's first seed), for probes.
  pub(super) addr: String,
  /// What messages call it: `Redis at host:port`, or the cluster and its seeds.
  name: String,
  pub(super) tls: bool,
  timeout_ms: u64,
}

impl Target {
  /// A failure's cause (`core::error::Code`'s Redis codes), with the
  /// server's text and what to check.
  pub(super) fn describe(&self, e: &RedisError) -> Problem {
    let text = e.to_string();
    let at = &self.name;
    let (code, hint) = if matches!(e.code(), Some("WRONGPASS" | "NOAUTH"))
      || e.kind() == ErrorKind::AuthenticationFailed
    {
      (
        Code::RedisAuth,
        "check the user and password of the `redis` URL (redis://user:password@host:port)",
      )
    } else if e.code() == Some("NOPERM") {
      (
        Code::RedisNoPerm,
        "the ACL user lacks a command or key herdcache needs (README, \"Production's everyday events\")",
      )
    } else if text.contains("DB index is out of range") {
      (
        Code::RedisDb,
        "the db of the URL (redis://host:port/N) must be below the server's `databases`",
      )
    } else if self.tls && text.contains(PLAIN_PORT) {
      (
        Code::RedisTls,
        "this port is not TLS: use redis:// for it, or the server's TLS port with rediss://",
      )
    } else if e.is_timeout() {
      return self.timed_out();
    } else if e.is_connection_refusal() {
      (
        Code::RedisUnreachable,
        "is Redis running there, and is the URL's host and port right?",
      )
    } else if self.tls && e.is_io_error() {
      (
        Code::RedisTls,
        "rediss:// needs the server's TLS port and a certificate the system trusts; a plain port wants redis://",
      )
    } else if e.is_io_error() {
      (
        Code::RedisUnreachable,
        "is Redis running there, and is the URL's host and port right?",
      )
    } else {
      (
        Code::RedisFailed,
        "herdcache serves without Redis meanwhile",
      )
    };
    Problem {
      code,
      message: format!("{at} failed: {text}; {hint}"),
    }
  }

  pub(super) fn timed_out(&self) -> Problem {
    Problem {
      code: Code::RedisTimeout,
      message: format!(
        "{} did not answer within redisTimeout ({} ms); herdcache serves without it meanwhile",
        self.name, self.timeout_ms
      ),
    }
  }
}

/// Explains a connection that could not be made where redis-rs's error
/// hides the cause: a refused password is asked again by hand for the
/// server's own words (WRONGPASS …), and a TLS handshake that got no answer
/// (`e` None: it timed out) is checked for a plain-text Redis on that port.
pub(super) async fn explain(
  client: &Client,
  target: &Target,
  e: &RedisError,
) -> Option<RedisError> {
  if e.kind() == ErrorKind::AuthenticationFailed {
    return auth_reply(client).await;
  }
  if target.tls && (e.is_timeout() || e.is_io_error()) && plain_redis(&target.addr).await {
    return Some(plain_port_error());
  }
  None
}

pub(super) fn plain_port_error() -> RedisError {
  RedisError::from((
    ErrorKind::Client,
    "TLS handshake failed",
    PLAIN_PORT.to_string(),
  ))
}

/// The server's answer to the client's credentials, on a connection made
/// without them.
async fn auth_reply(client: &Client) -> Option<RedisError> {
  let info = client.get_connection_info();
  let settings = info.redis_settings();
  let password = settings.password()?;
  let bare = info
    .clone()
    .set_redis_settings(redis::RedisConnectionInfo::default());
  let mut c = Client::open(bare)
    .ok()?
    .get_multiplexed_async_connection()
    .await
    .ok()?;
  let mut auth = redis::cmd("AUTH");
  if let Some(user) = settings.username() {
    auth.arg(user);
  }
  auth.arg(password).query_async::<()>(&mut c).await.err()
}

/// What a TLS store's failure says when its port speaks plain Redis.
const PLAIN_PORT: &str = "the server at this address answers plain-text Redis, not TLS";

/// Whether `addr` answers a plain-text PING as Redis does (`+PONG`, or an
/// error such as `-NOAUTH`).
pub(super) async fn plain_redis(addr: &str) -> bool {
  use tokio::io::{AsyncReadExt, AsyncWriteExt};
  let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
    return false;
  };
  if stream.write_all(b"PING\r\n").await.is_err() {
    return false;
  }
  let mut reply = [0u8; 16];
  match stream.read(&mut reply).await {
    Ok(n) if n > 0 => matches!(reply[0], b'+' | b'-'),
    _ => false,
  }
}

/// What a call on a closed store fails with.
fn closed_error() -> RedisError {
  RedisError::from((ErrorKind::Client, "the store was closed"))
}

/// A connection attempt that ran out of its bound.
fn connect_timed_out() -> RedisError {
  RedisError::from(std::io::Error::new(
    std::io::ErrorKind::TimedOut,
    "no connection within redisTimeout",
  ))
}

/// Whether [`explain`] may say more of `e` than `e` does.
fn needs_explaining(target: &Target, e: &RedisError) -> bool {
  e.kind() == ErrorKind::AuthenticationFailed || (target.tls && (e.is_timeout() || e.is_io_error()))
}

/// The command connection being made ([`RedisStore::connection`]).
#[derive(Default)]
struct Connecting {
  /// The attempt in flight, which every caller without a connection joins.
  attempt: Option<Attempt>,
  /// How the last attempt failed (explained, once it is), and when.
  failed: Option<(RedisError, Instant)>,
}

/// One connection attempt, as its callers wait for it.
#[derive(Clone)]
struct Attempt {
  outcome: Shared<BoxFuture<'static, RedisResult<Connection>>>,
  /// For a failure, what [`explain`] found (`None`: nothing more).
  explained: Shared<BoxFuture<'static, Option<RedisError>>>,
}

impl Attempt {
  /// An attempt that already made `manager`.
  fn made(manager: Connection) -> Attempt {
    use futures_util::FutureExt;
    Attempt {
      outcome: futures_util::future::ready(Ok(manager)).boxed().shared(),
      explained: futures_util::future::ready(None).boxed().shared(),
    }
  }
}

/// Whether `e` says the connection was closed under the command (reset,
/// broken pipe, end of stream), not that Redis refused to connect or did
/// not answer in time (a retry would only double the wait).
pub(super) fn dropped(e: &RedisError) -> bool {
  e.is_connection_dropped() && !e.is_connection_refusal() && !e.is_timeout()
}

/// The subscription's answer when the ACL forbids the channel.
pub(super) fn subscribe_refused(channel: &str, e: &RedisError) -> Problem {
  Problem {
    code: Code::RedisNoPerm,
    message: format!(
      "Redis refused SUBSCRIBE to the events channel `{channel}` ({e}): this instance is not told of other instances' fills and invalidations, so its memory may serve values changed elsewhere until their TTL, and its waiting loads wait out the lock's lease. Allow the channel (`&herdcache:events:*`, or `allchannels`) and `+publish +subscribe` for this user"
    ),
  }
}

/// How long the subscription waits before asking again after the ACL refused it.
pub(super) const REFUSED_RETRY: Duration = Duration::from_secs(30);

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

/// How often a live events subscription is probed.
pub const LIVENESS_PROBE: Duration = Duration::from_secs(1);
