//! What the Redis store does differently on a Redis Cluster (or a Valkey
//! cluster). Commands and scripts go through redis-rs's cluster client,
//! which routes each to the primary of its key's slot and follows MOVED and
//! ASK; a key's value, lock and back-off marker share one hash tag, so
//! every script stays on one slot. Three things cannot be sent as on one
//! node, and are done here:
//!
//! - **Batched reads**: a pipeline must stay on one node, so the first
//!   reads of a tick go out as one pipeline per primary (this store's view
//!   of the slot map, `CLUSTER SLOTS`); a key that moved meanwhile answers
//!   MOVED or ASK and is read again on its own, routed by the client.
//! - **`clear`**: a SCAN per primary, and the names it finds removed per
//!   slot (an UNLINK or a script may not cross slots).
//! - **Notices and invalidations** go over sharded pub/sub (`SPUBLISH`,
//!   `SSUBSCRIBE`: Redis 7+, Valkey). The layout is a fixed set of
//!   [`CHANNELS`] channels spread over the slot ranges, every instance
//!   subscribed to all of them, each key's changes on the channel of its
//!   slot's range. Not a per-key fill channel held while waiting: every
//!   fill is also an invalidation every instance's L1 must hear, so the
//!   fixed set is needed anyway, and it then carries the fills too. A
//!   script cannot SPUBLISH to a channel of another slot, so the store
//!   announces right after the script (one more round trip per write,
//!   after the value is readable: a notice never precedes its fill).

use super::redis::{
  explain, plain_port_error, plain_redis, read_reply, subscribe_refused, Connection, RedisStore,
  RedisTimeouts, REFUSED_RETRY,
};
use super::{Events, Read};
use crate::core::fleet::{self as protocol, channel_of, slot, Event, RedisKeys};
use futures_util::future::join_all;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
  MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{ProtocolVersion, PushKind, RedisError, RedisResult, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::task::JoinHandle;

/// How many sharded events channels a prefix has. 16 spreads the notices
/// over the primaries of clusters up to 16 shards (each channel lives on
/// one shard); each instance holds 16 subscriptions.
pub const CHANNELS: u16 = 16;

pub(crate) struct Cluster {
  seeds: Vec<String>,
  timeouts: RedisTimeouts,
  /// The client of the command connection.
  client: ClusterClient,
  channels: Vec<String>,
  /// Which primary serves which slots, as `CLUSTER SLOTS` last said;
  /// `None` until asked, and again once a read found a key moved.
  owners: Mutex<Option<Arc<Owners>>>,
}

/// Slot ranges and their primaries, sorted by the range's first slot.
#[derive(Debug, Default)]
struct Owners {
  ranges: Vec<(u16, u16, usize)>,
  /// Each primary's `host:port`, in the order first seen.
  primaries: Vec<String>,
}

impl Owners {
  /// Parses a `CLUSTER SLOTS` reply.
  fn parse(reply: Value) -> RedisResult<Owners> {
    let mut owners = Owners::default();
    let rows: Vec<Value> = redis::from_redis_value(reply)?;
    for row in rows {
      let fields: Vec<Value> = redis::from_redis_value(row)?;
      let mut fields = fields.into_iter();
      let (Some(start), Some(end), Some(primary)) = (fields.next(), fields.next(), fields.next())
      else {
        continue;
      };
      let (start, end): (u16, u16) = (
        redis::from_redis_value(start)?,
        redis::from_redis_value(end)?,
      );
      let node: Vec<Value> = redis::from_redis_value(primary)?;
      let mut node = node.into_iter();
      let (Some(host), Some(port)) = (node.next(), node.next()) else {
        continue;
      };
      let addr = format!(
        "{}:{}",
        redis::from_redis_value::<String>(host)?,
        redis::from_redis_value::<u16>(port)?
      );
      let index = match owners.primaries.iter().position(|p| *p == addr) {
        Some(i) => i,
        None => {
          owners.primaries.push(addr);
          owners.primaries.len() - 1
        }
      };
      owners.ranges.push((start, end, index));
    }
    owners.ranges.sort_unstable();
    Ok(owners)
  }

  /// The primary serving `slot` (an index into `primaries`).
  fn of(&self, slot: u16) -> Option<usize> {
    let at = self.ranges.partition_point(|&(start, _, _)| start <= slot);
    let (start, end, owner) = *self.ranges.get(at.checked_sub(1)?)?;
    (start..=end).contains(&slot).then_some(owner)
  }

  /// The route to each primary by its address.
  fn addresses(&self) -> Vec<RoutingInfo> {
    self
      .primaries
      .iter()
      .filter_map(|addr| {
        let (host, port) = addr.rsplit_once(':')?;
        Some(RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
          host: host.to_string(),
          port: port.parse().ok()?,
        }))
      })
      .collect()
  }
}

/// The route to the primary serving `slot`.
pub(crate) fn slot_route(slot: u16) -> RoutingInfo {
  RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(Route::new(
    slot,
    SlotAddr::Master,
  )))
}

/// Whether a reply says the key is served elsewhere now (a reshard or a
/// failover in progress): read again on its own, the client follows it.
fn moved(e: &RedisError) -> bool {
  matches!(e.code(), Some("MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN"))
}

impl Cluster {
  pub(crate) fn open(
    seeds: &[String],
    prefix: &str,
    timeouts: RedisTimeouts,
  ) -> RedisResult<Cluster> {
    Ok(Cluster {
      client: builder(seeds, timeouts).build()?,
      seeds: seeds.to_vec(),
      timeouts,
      channels: protocol::sharded_channels(prefix, CHANNELS),
      owners: Mutex::new(None),
    })
  }

  /// The seed nodes' `host:port`, for messages (never the credentials).
  pub(crate) fn seed_addresses(&self) -> String {
    let addr = |url: &String| {
      redis::IntoConnectionInfo::into_connection_info(url.as_str())
        .map(|info| info.addr().to_string())
        .unwrap_or_else(|_| "?".into())
    };
    self.seeds.iter().map(addr).collect::<Vec<_>>().join(", ")
  }

  /// The command connection, bounded by the connect timeout (a future of
  /// its own: the store makes it on a task every waiting caller shares).
  pub(crate) fn connect(
    &self,
  ) -> impl std::future::Future<Output = RedisResult<ClusterConnection>> + Send + 'static {
    let (client, bound) = (self.client.clone(), self.timeouts.connect);
    async move { bounded(bound, client.get_async_connection()).await }
  }

  async fn owners(&self, store: &RedisStore, fresh: bool) -> RedisResult<Arc<Owners>> {
    if !fresh {
      if let Some(owners) = self
        .owners
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
      {
        return Ok(owners);
      }
    }
    // Retried: a read.
    let ask = |c: Connection| async move {
      let Connection::Cluster(mut c) = c else {
        unreachable!("a cluster store's connection is a cluster's")
      };
      let reply = c
        .route_command(
          redis::cmd("CLUSTER").arg("SLOTS").clone(),
          RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await?;
      Owners::parse(reply)
    };
    let owners = Arc::new(store.retried(ask).await?);
    *self.owners.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&owners));
    Ok(owners)
  }

  fn forget_owners(&self) {
    *self.owners.lock().unwrap_or_else(|p| p.into_inner()) = None;
  }

  /// One pipeline of GETs per primary, all in flight at once; the answers
  /// come in `keys`' order. Retried: reads.
  pub(crate) async fn read_many(
    &self,
    store: &RedisStore,
    keys: &[RedisKeys],
  ) -> RedisResult<Vec<Read>> {
    let owners = self.owners(store, false).await?;
    let slots: Vec<u16> = keys.iter().map(|k| slot(k.value.as_bytes())).collect();
    // Keys grouped by primary; a slot no range covers goes on its own.
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); owners.primaries.len()];
    let mut strays = Vec::new();
    for (i, &s) in slots.iter().enumerate() {
      match owners.of(s) {
        Some(owner) => groups[owner].push(i),
        None => strays.push(vec![i]),
      }
    }
    groups.retain(|g| !g.is_empty());
    groups.extend(strays);
    let asked = groups.iter().map(|group| {
      let mut pipe = redis::pipe();
      for &i in group {
        pipe.cmd("GET").arg(&keys[i].value);
      }
      let (pipe, count) = (pipe, group.len());
      // Routed by the group's first key: the client's own slot map picks
      // the node, which this store's grouping agrees with but for a change.
      let route = Route::new(slots[group[0]], SlotAddr::Master);
      let get = move |c: Connection| {
        let pipe = pipe.clone();
        async move {
          let Connection::Cluster(mut c) = c else {
            unreachable!("a cluster store's connection is a cluster's")
          };
          c.route_pipeline(pipe, 0, count, SingleNodeRoutingInfo::SpecificNode(route))
            .await
        }
      };
      async move { store.retried(get).await }
    });
    let answers = join_all(asked).await;
    let mut reads: Vec<Option<Read>> = vec![None; keys.len()];
    let mut again = Vec::new();
    for (group, answer) in groups.iter().zip(answers) {
      let values = match answer {
        Ok(values) => values,
        Err(e) if moved(&e) => {
          again.extend(group.iter().copied());
          continue;
        }
        Err(e) => return Err(e),
      };
      for (&i, value) in group.iter().zip(values) {
        let reply = value
          .extract_error()
          .and_then(|v| Ok(redis::from_redis_value::<Option<Vec<u8>>>(v)?));
        match reply {
          Err(e) if moved(&e) => again.push(i),
          reply => reads[i] = Some(read_reply(reply)?),
        }
      }
    }
    if !again.is_empty() {
      self.forget_owners();
      let read_again = join_all(
        again
          .iter()
          .map(|&i| super::SharedStore::read(store, &keys[i])),
      )
      .await;
      for (&i, read) in again.iter().zip(read_again) {
        reads[i] = Some(read?);
      }
    }
    Ok(
      reads
        .into_iter()
        .map(|r| r.unwrap_or(Read::Missing))
        .collect(),
    )
  }

  /// SCAN on every primary (with `within`, for the names of the keys
  /// starting with it: a namespace's), the names found removed per slot
  /// (all, or with `not_newer_than` all but valid envelopes newer than that
  /// stamp), then the clear announced.
  pub(crate) async fn sweep(
    &self,
    store: &RedisStore,
    within: &str,
    not_newer_than: Option<u64>,
  ) -> RedisResult<u64> {
    let owners = self.owners(store, true).await?;
    let mut c = store.connection().await?;
    let pattern = store.pattern(within);
    let mut removed = 0;
    // Each primary by its address, not by a slot of it: routed by slot, a
    // SCAN whose primary is down (a failover under way) went to another
    // node, which answered with its own names, and the clear "succeeded"
    // with the dead primary's values left. By address it fails, and the
    // clear is kept and delivered once the replica has taken over.
    for primary in owners.addresses() {
      let mut cursor: u64 = 0;
      loop {
        let scan = redis::cmd("SCAN")
          .arg(cursor)
          .arg("MATCH")
          .arg(&pattern)
          .arg("COUNT")
          .arg(500)
          .clone();
        let Connection::Cluster(routed) = &mut c else {
          unreachable!("a cluster store's connection is a cluster's")
        };
        let (next, names): (u64, Vec<String>) =
          redis::from_redis_value(routed.route_command(scan, primary.clone()).await?)?;
        let mut by_slot: Vec<(u16, Vec<String>)> = Vec::new();
        for name in names {
          let s = slot(name.as_bytes());
          match by_slot.iter_mut().find(|(t, _)| *t == s) {
            Some((_, group)) => group.push(name),
            None => by_slot.push((s, vec![name])),
          }
        }
        for (_, group) in by_slot {
          removed += store.remove(&mut c, &group, not_newer_than).await?;
        }
        if next == 0 {
          break;
        }
        cursor = next;
      }
    }
    let event = store.event(super::values::cleared(within));
    self.publish(store, &self.channels[0], &event).await?;
    Ok(removed)
  }

  /// SPUBLISH `event` on the channel of the key whose value name is `value`.
  pub(crate) async fn announce(
    &self,
    store: &RedisStore,
    value: &str,
    event: &str,
  ) -> RedisResult<()> {
    let channel = &self.channels[channel_of(value, CHANNELS)];
    self.publish(store, channel, event).await
  }

  /// Retried: a second notice is harmless. A refusal by the ACL is
  /// reported once, as the single node's refused PUBLISH is.
  async fn publish(&self, store: &RedisStore, channel: &str, event: &str) -> RedisResult<()> {
    let send = |mut c: Connection| async move {
      redis::cmd("SPUBLISH")
        .arg(channel)
        .arg(event)
        .query_async::<i64>(&mut c)
        .await
    };
    match store.retried(send).await {
      Err(e) if e.code() == Some("NOPERM") => {
        store.publish_refused();
        Ok(())
      }
      other => other.map(drop),
    }
  }

  /// The subscription to every sharded channel, on a connection of its own
  /// (RESP3: the messages come as pushes). It is made anew, and reported
  /// down meanwhile (the fleet clears its L1 when it is back), whenever it
  /// may have missed messages: a node's connection closed, a channel's slot
  /// moved (the server unsubscribes it), or a primary did not answer the
  /// liveness probe (a PING to every primary each
  /// [`super::redis::LIVENESS_PROBE`], within `timeout`).
  pub(crate) fn subscribe(
    &self,
    store: &RedisStore,
    events: &Arc<Events>,
    timeout: Duration,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> JoinHandle<()> {
    let events = Arc::clone(events);
    let (seeds, timeouts) = (self.seeds.clone(), self.timeouts);
    let channels = self.channels.clone();
    let problems = Arc::clone(&store.problems);
    let (target, probe_client) = (store.target.clone(), store.client.clone());
    let commands = Arc::clone(&store.manager);
    tokio::spawn(async move {
      let mut backoff = Duration::from_millis(50);
      let mut ever = false;
      loop {
        let (tx, mut pushes) = tokio::sync::mpsc::unbounded_channel();
        let connected = match builder(&seeds, timeouts)
          .use_protocol(ProtocolVersion::RESP3)
          .push_sender(tx)
          .build()
        {
          Ok(client) => bounded(timeout, client.get_async_connection()).await,
          Err(e) => Err(e),
        };
        let conn = match connected {
          Ok(conn) => Some(conn),
          Err(e) => {
            let problem = if e.is_timeout() && target.tls && plain_redis(&target.addr).await {
              target.describe(&plain_port_error())
            } else {
              match explain(&probe_client, &target, &e).await {
                Some(explained) => target.describe(&explained),
                None if e.is_timeout() => target.timed_out(),
                None => target.describe(&e),
              }
            };
            problems.subscription(Some(problem));
            None
          }
        };
        if let Some(conn) = conn {
          let subscribed = join_all(channels.iter().map(|channel| {
            let mut c = conn.clone();
            async move { (channel, bounded(timeout, c.ssubscribe(channel)).await) }
          }))
          .await;
          let refused = subscribed
            .iter()
            .find_map(|(channel, r)| r.as_ref().err().map(|e| (channel, e)));
          // Live once every channel's subscription is confirmed and the
          // cluster is whole (every slot served, every primary answering):
          // a replica confirms the channels of a primary that just died,
          // and until its failover that primary's keys cannot be read, so
          // the L1 (cleared when this comes up) must keep them meanwhile.
          let confirmed = refused.is_none()
            && confirmations(&mut pushes, &channels, &events, timeout).await
            && whole(&conn, &channels, timeout).await;
          match refused {
            None if !confirmed => {
              problems.subscription(Some(target.timed_out()));
            }
            Some((channel, e)) => {
              let refused = subscribe_refused(channel, e);
              problems.subscription(Some(refused.clone()));
              if e.code() == Some("NOPERM") {
                problems.raise("subscribe", refused);
                backoff = REFUSED_RETRY;
              }
            }
            None => {
              problems.subscription(None);
              if std::mem::replace(&mut ever, true) {
                // Made anew after a failover or a reshard: the command
                // connection's slot map may still name a primary that is
                // gone, and the L1 is about to be cleared, so its reads
                // must reach the new one, not fail open into loads. A new
                // connection asks the topology afresh.
                commands.lock().unwrap_or_else(|p| p.into_inner()).take();
              }
              on_connected(true);
              backoff = Duration::from_millis(50);
              listen(&conn, &mut pushes, &events, timeout).await;
              on_connected(false);
            }
          }
        }
        tokio::time::sleep(backoff).await;
        if backoff < REFUSED_RETRY {
          backoff = (backoff * 2).min(Duration::from_secs(2));
        }
      }
    })
  }
}

/// Waits (within `timeout`) until the server confirmed the subscription to
/// every one of `channels`, delivering the messages that come meanwhile.
/// False if it did not, or a connection closed first.
async fn confirmations(
  pushes: &mut tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
  channels: &[String],
  events: &Events,
  timeout: Duration,
) -> bool {
  let mut waiting: std::collections::HashSet<&[u8]> =
    channels.iter().map(|c| c.as_bytes()).collect();
  let deadline = tokio::time::Instant::now() + timeout;
  while !waiting.is_empty() {
    let Ok(Some(push)) = tokio::time::timeout_at(deadline, pushes.recv()).await else {
      return false;
    };
    match push.kind {
      PushKind::SSubscribe => {
        if let Some(Value::BulkString(channel)) = push.data.first() {
          waiting.remove(channel.as_slice());
        }
      }
      PushKind::SMessage => deliver(push, events),
      PushKind::SUnsubscribe | PushKind::Disconnection => return false,
      _ => {}
    }
  }
  true
}

fn deliver(push: redis::PushInfo, events: &Events) {
  let payload = push.data.into_iter().nth(1);
  if let Some(event) = payload
    .and_then(|p| redis::from_redis_value::<String>(p).ok())
    .and_then(|m| Event::decode(&m))
  {
    events.dispatch(&event);
  }
}

/// Delivers the subscription's messages until it may have missed one.
async fn listen(
  conn: &ClusterConnection,
  pushes: &mut tokio::sync::mpsc::UnboundedReceiver<redis::PushInfo>,
  events: &Events,
  timeout: Duration,
) {
  let mut probe = tokio::time::interval(super::redis::LIVENESS_PROBE);
  probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
  probe.tick().await;
  loop {
    tokio::select! {
      push = pushes.recv() => {
        let Some(push) = push else { return };
        match push.kind {
          PushKind::SMessage => deliver(push, events),
          PushKind::SUnsubscribe | PushKind::Disconnection => return,
          _ => {}
        }
      }
      _ = probe.tick() => {
        if !primaries_answer(conn, timeout).await {
          return;
        }
      }
    }
  }
}

/// Whether every primary `conn`'s topology names answers a PING within `timeout`.
async fn primaries_answer(conn: &ClusterConnection, timeout: Duration) -> bool {
  let ping = RoutingInfo::MultiNode((
    MultipleNodeRoutingInfo::AllMasters,
    Some(ResponsePolicy::AllSucceeded),
  ));
  let mut c = conn.clone();
  bounded(timeout, c.route_command(redis::cmd("PING"), ping))
    .await
    .is_ok()
}

/// Whether every slot has a primary (as far as `conn`'s node of the moment
/// can tell: `CLUSTER SLOTS` leaves out the slots of a primary marked
/// failed) and the primary of every channel's slot answers.
async fn whole(conn: &ClusterConnection, channels: &[String], timeout: Duration) -> bool {
  let mut c = conn.clone();
  let slots = redis::cmd("CLUSTER").arg("SLOTS").clone();
  let asked = bounded(
    timeout,
    c.route_command(
      slots,
      RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
    ),
  )
  .await;
  let Ok(owners) = asked.and_then(Owners::parse) else {
    return false;
  };
  let served: u32 = owners
    .ranges
    .iter()
    .map(|&(start, end, _)| u32::from(end.saturating_sub(start)) + 1)
    .sum();
  if served != u32::from(protocol::SLOTS) {
    return false;
  }
  // A command on a name of each channel's slot: it must reach the slot's
  // primary (another node answers MOVED), where a PING routed to a slot
  // is answered by any node while that slot's primary is unreachable.
  let asks = channels.iter().map(|channel| {
    let mut c = conn.clone();
    async move {
      let exists = redis::cmd("EXISTS").arg(channel).clone();
      bounded(timeout, exists.query_async::<i64>(&mut c)).await
    }
  });
  join_all(asks).await.iter().all(Result::is_ok)
}

/// The cluster client's settings: the store's bounds on connecting and on
/// each command (MOVED, ASK and reconnects included: `overall`), and its
/// waits before a command is tried again.
///
/// The waits are short because the bound is: while a slot is migrated, a
/// script naming keys of it some of which have moved already (a value and
/// its lock, not its back-off marker) is answered TRYAGAIN until the rest
/// follow, a few ms to a few hundred later. redis-rs waits at least 1.28 s
/// before trying again by default, past any `redisTimeout` under it: the
/// lock or the write of a key whose slot moves then timed out, and that one
/// failure opened the breaker, so every instance loaded every key by itself
/// for `circuitBreakerDuration`. Tried again every 10–100 ms instead, the
/// command lands within its bound once the migration has moved the keys.
fn builder(seeds: &[String], timeouts: RedisTimeouts) -> redis::cluster::ClusterClientBuilder {
  ClusterClient::builder(seeds.to_vec())
    .connection_timeout(timeouts.connect)
    .response_timeout(timeouts.command)
    .overall_response_timeout(Some(timeouts.command))
    .min_retry_wait(RETRY_WAIT_MS.0)
    .max_retry_wait(RETRY_WAIT_MS.1)
    .retry_wait_formula(RETRY_WAIT_MS.0, 2)
    .retries(RETRIES)
}

/// The wait before a command is tried again (TRYAGAIN, CLUSTERDOWN, a slot
/// no node serves yet), ms: drawn between the first and a doubling bound
/// capped at the second.
const RETRY_WAIT_MS: (u64, u64) = (10, 100);

/// How many times a command is tried again: at about 55 ms apart once the
/// cap is reached, about a second of them, which the command bound cuts
/// short anyway.
const RETRIES: u32 = 20;

/// `future`, failing as a timeout past `bound`.
async fn bounded<T>(
  bound: Duration,
  future: impl std::future::Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
  match tokio::time::timeout(bound, future).await {
    Ok(result) => result,
    Err(_) => Err(RedisError::from(std::io::Error::new(
      std::io::ErrorKind::TimedOut,
      "the cluster did not answer in time",
    ))),
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn reply(rows: &[(u16, u16, &str, u16)]) -> Value {
    Value::Array(
      rows
        .iter()
        .map(|&(start, end, host, port)| {
          Value::Array(vec![
            Value::Int(start.into()),
            Value::Int(end.into()),
            Value::Array(vec![
              Value::BulkString(host.as_bytes().to_vec()),
              Value::Int(port.into()),
            ]),
          ])
        })
        .collect(),
    )
  }

  #[test]
  fn owners_map_every_slot_to_its_primary() {
    let owners = Owners::parse(reply(&[
      (10923, 16383, "127.0.0.1", 7002),
      (0, 5460, "127.0.0.1", 7000),
      (5461, 10922, "127.0.0.1", 7001),
    ]))
    .unwrap();
    let addr = |slot| owners.of(slot).map(|i| owners.primaries[i].as_str());
    assert_eq!(addr(0), Some("127.0.0.1:7000"));
    assert_eq!(addr(5460), Some("127.0.0.1:7000"));
    assert_eq!(addr(5461), Some("127.0.0.1:7001"));
    assert_eq!(addr(16383), Some("127.0.0.1:7002"));
    let ports: Vec<u16> = owners
      .addresses()
      .into_iter()
      .filter_map(|route| match route {
        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { port, .. }) => Some(port),
        _ => None,
      })
      .collect();
    assert_eq!(
      ports,
      [7002, 7000, 7001],
      "each primary once, by its address"
    );
    let gap = Owners::parse(reply(&[(0, 99, "h", 1), (200, 16383, "h", 2)])).unwrap();
    assert_eq!(gap.of(150), None);
    assert_eq!(gap.of(99).map(|i| gap.primaries[i].as_str()), Some("h:1"));
  }
}
