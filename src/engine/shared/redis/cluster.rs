//! The Redis store on a Redis Cluster (or a Valkey cluster). Commands and
//! scripts go through redis-rs's cluster client, which routes each to the
//! primary of its key's slot and follows MOVED and ASK; a key's value, lock
//! and back-off marker share one hash tag, so every script stays on one
//! slot. Three things cannot be done as on one node:
//!
//! - **Batched reads**: a pipeline must stay on one node, so the first
//!   reads of a tick go out as one pipeline per primary (this store's view
//!   of the slot map, `CLUSTER SLOTS`); a key that moved meanwhile answers
//!   MOVED or ASK and is read again on its own, routed by the client.
//! - **`clear`**: its SCAN runs on every primary, and the names it finds
//!   are removed per slot (an UNLINK or a script may not cross slots).
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

use super::link::{bounded, Connector, Link};
use super::store::{read, read_reply, Topology};
use super::subscription::{
  event_of, tracked_of, tracking_on, Received, Subscribed, Subscriber, Subscription, Tracking,
};
use super::RedisTimeouts;
use crate::core::fleet::{self as protocol, channel_of, slot, RedisKeys};
use crate::engine::shared::{Events, Read};
use futures_util::future::join_all;
use futures_util::FutureExt;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{
  MultipleNodeRoutingInfo, ResponsePolicy, Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr,
};
use redis::{Client, Cmd, ProtocolVersion, PushKind, RedisError, RedisResult, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

/// How many sharded events channels a prefix has. 16 spreads the notices
/// over the primaries of clusters up to 16 shards (each channel lives on
/// one shard); each instance holds 16 subscriptions.
const CHANNELS: u16 = 16;

pub(super) struct Cluster {
  seeds: Vec<String>,
  /// The first seed node: what a failure's explanation asks.
  seed: Client,
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

  /// The indexes of `slots` grouped by the primary serving them; a slot no
  /// range covers goes on its own.
  fn groups(&self, slots: &[u16]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); self.primaries.len()];
    let mut strays = Vec::new();
    for (i, &s) in slots.iter().enumerate() {
      match self.of(s) {
        Some(owner) => groups[owner].push(i),
        None => strays.push(vec![i]),
      }
    }
    groups.retain(|g| !g.is_empty());
    groups.extend(strays);
    groups
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
fn slot_route(slot: u16) -> RoutingInfo {
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
  pub(super) fn open(
    seeds: &[String],
    prefix: &str,
    timeouts: RedisTimeouts,
  ) -> RedisResult<Cluster> {
    let first = seeds.first().ok_or_else(|| {
      RedisError::from((
        redis::ErrorKind::InvalidClientConfig,
        "no cluster node given",
      ))
    })?;
    Ok(Cluster {
      seed: Client::open(first.as_str())?,
      client: builder(seeds, timeouts).build()?,
      seeds: seeds.to_vec(),
      timeouts,
      channels: protocol::sharded_channels(prefix, CHANNELS),
      owners: Mutex::new(None),
    })
  }

  async fn owners(&self, link: &Link<ClusterConnection>, fresh: bool) -> RedisResult<Arc<Owners>> {
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
    let ask = |mut c: ClusterConnection| async move {
      let reply = c
        .route_command(
          redis::cmd("CLUSTER").arg("SLOTS").clone(),
          RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
        )
        .await?;
      Owners::parse(reply)
    };
    let owners = Arc::new(link.retried(ask).await?);
    *self.owners.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::clone(&owners));
    Ok(owners)
  }

  fn forget_owners(&self) {
    *self.owners.lock().unwrap_or_else(|p| p.into_inner()) = None;
  }
}

impl Topology for Cluster {
  /// Routes each command to the primary of its key's slot.
  type Connection = ClusterConnection;
  type Subscriber = ClusterSubscriber;
  /// A command for one node is routed to it: by slot, or by address.
  type Route = RoutingInfo;

  fn seed(&self) -> &Client {
    &self.seed
  }

  /// The seed nodes' `host:port`, never the credentials.
  fn name(&self) -> String {
    let addr = |url: &String| {
      redis::IntoConnectionInfo::into_connection_info(url.as_str())
        .map(|info| info.addr().to_string())
        .unwrap_or_else(|_| "?".into())
    };
    let seeds = self.seeds.iter().map(addr).collect::<Vec<_>>().join(", ");
    format!("the Redis Cluster (seed nodes {seeds})")
  }

  fn connector(&self) -> Connector<ClusterConnection> {
    let client = self.client.clone();
    Box::new(move || {
      let client = client.clone();
      async move { client.get_async_connection().await }.boxed()
    })
  }

  fn subscriber(&self, _tracking: bool) -> ClusterSubscriber {
    ClusterSubscriber {
      seeds: self.seeds.clone(),
      timeouts: self.timeouts,
      channels: self.channels.clone(),
    }
  }

  /// None: a script cannot reach a sharded channel of another slot.
  fn script_channel(&self) -> &str {
    ""
  }

  /// SPUBLISH on the channel of the slot of `name`.
  async fn announce(
    &self,
    link: &Link<ClusterConnection>,
    name: &str,
    event: &str,
  ) -> RedisResult<()> {
    let channel = &self.channels[channel_of(name, CHANNELS)];
    link.publish("SPUBLISH", channel, event).await
  }

  /// On the first channel: a clear has no key, and every instance hears
  /// every channel.
  async fn announce_clear(&self, link: &Link<ClusterConnection>, event: &str) -> RedisResult<()> {
    link.publish("SPUBLISH", &self.channels[0], event).await
  }

  /// One pipeline of GETs per primary, all in flight at once; the answers
  /// come in `keys`' order. Retried: reads.
  async fn read_many(
    &self,
    link: &Link<ClusterConnection>,
    keys: &[RedisKeys],
  ) -> RedisResult<Vec<Read>> {
    let owners = self.owners(link, false).await?;
    let slots: Vec<u16> = keys.iter().map(|k| slot(k.value.as_bytes())).collect();
    let groups = owners.groups(&slots);
    let asked = groups
      .iter()
      .map(|group| read_group(link, keys, slots[group[0]], group));
    let answers = join_all(asked).await;
    let mut reads: Vec<Option<Read>> = vec![None; keys.len()];
    let mut again = Vec::new();
    for (group, answer) in groups.iter().zip(answers) {
      match answer {
        Ok(values) => {
          for (&i, value) in group.iter().zip(values) {
            match value {
              Err(e) if moved(&e) => again.push(i),
              reply => reads[i] = Some(read_reply(reply)?),
            }
          }
        }
        Err(e) if moved(&e) => again.extend(group.iter().copied()),
        Err(e) => return Err(e),
      }
    }
    if !again.is_empty() {
      self.forget_owners();
      let read_again = join_all(again.iter().map(|&i| read(link, &keys[i]))).await;
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

  /// Each primary by its address, not by a slot of it: routed by slot, a
  /// SCAN whose primary is down (a failover under way) went to another
  /// node, which answered with its own names, and the clear "succeeded"
  /// with the dead primary's values left. By address it fails, and the
  /// clear is kept and delivered once the replica has taken over.
  async fn primaries(&self, link: &Link<ClusterConnection>) -> RedisResult<Vec<RoutingInfo>> {
    Ok(self.owners(link, true).await?.addresses())
  }

  /// Slot 0's primary: one node's clock for every instance.
  fn clock(&self) -> RoutingInfo {
    slot_route(0)
  }

  async fn send(
    c: &mut ClusterConnection,
    route: &RoutingInfo,
    command: Cmd,
  ) -> RedisResult<Value> {
    c.route_command(command, route.clone()).await
  }

  /// Per slot: an UNLINK or a script may not cross slots.
  fn batches(names: Vec<String>) -> Vec<Vec<String>> {
    let mut by_slot: Vec<(u16, Vec<String>)> = Vec::new();
    for name in names {
      let s = slot(name.as_bytes());
      match by_slot.iter_mut().find(|(t, _)| *t == s) {
        Some((_, batch)) => batch.push(name),
        None => by_slot.push((s, vec![name])),
      }
    }
    by_slot.into_iter().map(|(_, batch)| batch).collect()
  }
}

/// The GETs of the keys `group` names (indexes into `keys`), as one
/// pipeline to the primary of `first_slot`, the group's first key's; each
/// key's reply, or the pipeline's failure.
async fn read_group(
  link: &Link<ClusterConnection>,
  keys: &[RedisKeys],
  first_slot: u16,
  group: &[usize],
) -> RedisResult<Vec<RedisResult<Option<Vec<u8>>>>> {
  let mut pipe = redis::pipe();
  for &i in group {
    pipe.cmd("GET").arg(&keys[i].value);
  }
  // Routed by the group's first key: the client's own slot map picks the
  // node, which this store's grouping agrees with but for a change.
  let route = SingleNodeRoutingInfo::SpecificNode(Route::new(first_slot, SlotAddr::Master));
  let (pipe, count) = (&pipe, group.len());
  let get = |mut c: ClusterConnection| {
    let route = route.clone();
    async move { c.route_pipeline(pipe.clone(), 0, count, route).await }
  };
  let values = link.retried(get).await?;
  Ok(
    values
      .into_iter()
      .map(|value| {
        value
          .extract_error()
          .and_then(|v| Ok(redis::from_redis_value::<Option<Vec<u8>>>(v)?))
      })
      .collect(),
  )
}

/// SSUBSCRIBE to every sharded channel, on a cluster connection of its own
/// (RESP3: the messages come as pushes).
pub(super) struct ClusterSubscriber {
  seeds: Vec<String>,
  timeouts: RedisTimeouts,
  channels: Vec<String>,
}

pub(super) struct ClusterSubscription {
  conn: ClusterConnection,
  pushes: UnboundedReceiver<redis::PushInfo>,
  channels: Vec<String>,
  /// The primaries told to track the prefix (`track`), by address: a
  /// primary not among them (a node that joined) is not tracked, so the
  /// subscription is made anew when they change (`answers`).
  tracked: Option<Vec<String>>,
}

impl Subscriber for ClusterSubscriber {
  type Subscription = ClusterSubscription;

  /// Made anew after a failover or a reshard: the command connection's slot
  /// map may still name a primary that is gone, and the L1 is about to be
  /// cleared, so its reads must reach the new one, not fail open into
  /// loads. A new connection asks the topology afresh.
  const RENEWS_COMMANDS: bool = true;

  async fn connect(&self, bound: Duration) -> RedisResult<ClusterSubscription> {
    let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
    let client = builder(&self.seeds, self.timeouts)
      .use_protocol(ProtocolVersion::RESP3)
      .push_sender(tx)
      .build()?;
    Ok(ClusterSubscription {
      conn: bounded(bound, client.get_async_connection()).await?,
      pushes,
      channels: self.channels.clone(),
      tracked: None,
    })
  }
}

impl Subscription for ClusterSubscription {
  /// Live once every channel's subscription is confirmed and the cluster is
  /// whole (every slot served, every primary answering): a replica confirms
  /// the channels of a primary that just died, and until its failover that
  /// primary's keys cannot be read, so the L1 (cleared when this comes up)
  /// must keep them meanwhile.
  async fn subscribe(&mut self, events: &Events, bound: Duration) -> Subscribed {
    let subscribed = join_all(self.channels.iter().map(|channel| {
      let mut c = self.conn.clone();
      async move { (channel, bounded(bound, c.ssubscribe(channel)).await) }
    }))
    .await;
    if let Some((channel, Err(error))) = subscribed.into_iter().find(|(_, r)| r.is_err()) {
      return Subscribed::Refused {
        channel: channel.clone(),
        error,
      };
    }
    if confirmations(&mut self.pushes, &self.channels, events, bound).await
      && whole(&self.conn, &self.channels, bound).await
    {
      Subscribed::Live
    } else {
      Subscribed::Unconfirmed
    }
  }

  /// Every primary is told, on this connection's own link to it (BCAST is
  /// per node: each tells of the changes to its own slots).
  async fn track(&mut self, prefix: &str, bound: Duration) -> Tracking {
    let Some(primaries) = primaries(&self.conn, bound).await else {
      return Tracking::Unconfirmed;
    };
    let on = self
      .conn
      .route_command(tracking_on(prefix), all_primaries());
    let answer = tokio::time::timeout(bound, on).await;
    let tracking = Tracking::of(answer);
    if matches!(tracking, Tracking::On) {
      self.tracked = Some(primaries);
    }
    tracking
  }

  /// An unsubscribe (the server's, when a channel's slot moved) or a
  /// disconnect ends it.
  async fn next(&mut self) -> Option<Received> {
    loop {
      let push = self.pushes.recv().await?;
      match push.kind {
        PushKind::SMessage => {
          if let Some(event) = event_of(push) {
            return Some(Received::Event(event));
          }
        }
        PushKind::Invalidate => return Some(tracked_of(push)),
        PushKind::SUnsubscribe | PushKind::Disconnection => return None,
        _ => {}
      }
    }
  }

  /// A PING to every primary; tracked, the primaries are the ones told.
  async fn answers(&mut self, bound: Duration) -> bool {
    let pinged = bounded(
      bound,
      self.conn.route_command(redis::cmd("PING"), all_primaries()),
    )
    .await
    .is_ok();
    match &self.tracked {
      Some(tracked) if pinged => primaries(&self.conn, bound).await.as_ref() == Some(tracked),
      _ => pinged,
    }
  }
}

/// Waits (within `bound`) until the server confirmed the subscription to
/// every one of `channels`, delivering the messages that come meanwhile.
/// False if it did not, or a connection closed first.
async fn confirmations(
  pushes: &mut UnboundedReceiver<redis::PushInfo>,
  channels: &[String],
  events: &Events,
  bound: Duration,
) -> bool {
  let mut waiting: std::collections::HashSet<&[u8]> =
    channels.iter().map(|c| c.as_bytes()).collect();
  let deadline = tokio::time::Instant::now() + bound;
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
      PushKind::SMessage => {
        if let Some(event) = event_of(push) {
          events.dispatch(&event);
        }
      }
      PushKind::SUnsubscribe | PushKind::Disconnection => return false,
      _ => {}
    }
  }
  true
}

/// Every primary, each answering.
fn all_primaries() -> RoutingInfo {
  RoutingInfo::MultiNode((
    MultipleNodeRoutingInfo::AllMasters,
    Some(ResponsePolicy::AllSucceeded),
  ))
}

/// The slots' owners as a node of the moment says (`CLUSTER SLOTS`);
/// `None` when it does not answer within `bound`.
async fn owners_now(conn: &ClusterConnection, bound: Duration) -> Option<Owners> {
  let mut c = conn.clone();
  let slots = redis::cmd("CLUSTER").arg("SLOTS").clone();
  let random = RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random);
  let reply = bounded(bound, c.route_command(slots, random)).await.ok()?;
  Owners::parse(reply).ok()
}

/// The primaries' addresses, sorted ([`owners_now`]).
async fn primaries(conn: &ClusterConnection, bound: Duration) -> Option<Vec<String>> {
  let mut primaries = owners_now(conn, bound).await?.primaries;
  primaries.sort();
  Some(primaries)
}

/// Whether every slot has a primary (as far as `conn`'s node of the moment
/// can tell: `CLUSTER SLOTS` leaves out the slots of a primary marked
/// failed) and the primary of every channel's slot answers.
async fn whole(conn: &ClusterConnection, channels: &[String], bound: Duration) -> bool {
  let Some(owners) = owners_now(conn, bound).await else {
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
      bounded(bound, exists.query_async::<i64>(&mut c)).await
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
