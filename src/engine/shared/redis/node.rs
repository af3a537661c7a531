//! The Redis store on one server (or a Valkey server): the scripts announce
//! their own changes with PUBLISH on the prefix's one events channel, a
//! batch of reads is one pipeline, and a clear is one SCAN.

use super::link::{bounded, Connector, Link};
use super::store::{read_reply, Topology};
use super::subscription::{
  event_of, tracked_of, tracking_on, Received, Subscribed, Subscriber, Subscription, Tracking,
};
use super::RedisTimeouts;
use crate::core::fleet::{self as protocol, Event, RedisKeys};
use crate::engine::shared::{Events, Read};
use futures_util::{FutureExt, StreamExt};
use redis::aio::{
  ConnectionManager, ConnectionManagerConfig, MultiplexedConnection, PubSubSink, PubSubStream,
};
use redis::{
  AsyncConnectionConfig, Client, Cmd, ErrorKind, ProtocolVersion, PushInfo, PushKind, RedisError,
  RedisResult, Value,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedReceiver;

pub(super) struct Node {
  client: Client,
  timeouts: RedisTimeouts,
  /// The events channel of the store's prefix.
  channel: String,
}

impl Node {
  pub(super) fn open(url: &str, prefix: &str, timeouts: RedisTimeouts) -> RedisResult<Node> {
    Ok(Node {
      client: Client::open(url)?,
      timeouts,
      channel: protocol::events_channel(prefix),
    })
  }
}

impl Topology for Node {
  /// Reconnects by itself after a failure (once, `RedisTimeouts::retries`).
  type Connection = ConnectionManager;
  type Subscriber = NodeSubscriber;
  /// A command for one node goes to the only one.
  type Route = ();

  fn seed(&self) -> &Client {
    &self.client
  }

  fn name(&self) -> String {
    format!("Redis at {}", self.client.get_connection_info().addr())
  }

  fn connector(&self) -> Connector<ConnectionManager> {
    let config = ConnectionManagerConfig::new()
      .set_number_of_retries(self.timeouts.retries)
      .set_connection_timeout(Some(self.timeouts.connect))
      .set_response_timeout(Some(self.timeouts.command));
    let client = self.client.clone();
    Box::new(move || {
      let (client, config) = (client.clone(), config.clone());
      async move { client.get_connection_manager_with_config(config).await }.boxed()
    })
  }

  fn subscriber(&self, tracking: bool) -> NodeSubscriber {
    let resp3 = tracking.then(|| {
      let info = self.client.get_connection_info().clone();
      let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
      Client::open(info.set_redis_settings(settings)).expect("the same URL, in RESP3")
    });
    NodeSubscriber {
      client: self.client.clone(),
      resp3,
      resp2_only: AtomicBool::new(false),
      channel: self.channel.clone(),
    }
  }

  fn script_channel(&self) -> &str {
    &self.channel
  }

  /// The script announced it already.
  async fn announce(&self, _: &Link<ConnectionManager>, _: &str, _: &str) -> RedisResult<()> {
    Ok(())
  }

  async fn announce_clear(&self, link: &Link<ConnectionManager>, event: &str) -> RedisResult<()> {
    link.publish("PUBLISH", &self.channel, event).await
  }

  /// One pipeline: one round trip for a whole batch of loads that found
  /// nothing in memory. Retried: reads.
  async fn read_many(
    &self,
    link: &Link<ConnectionManager>,
    keys: &[RedisKeys],
  ) -> RedisResult<Vec<Read>> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for k in keys {
      pipe.cmd("GET").arg(&k.value);
    }
    let pipe = &pipe;
    let get = |mut c: ConnectionManager| async move {
      let replies: Vec<RedisResult<Option<Vec<u8>>>> = pipe.query_async(&mut c).await?;
      replies.into_iter().map(read_reply).collect()
    };
    link.retried(get).await
  }

  async fn primaries(&self, _: &Link<ConnectionManager>) -> RedisResult<Vec<()>> {
    Ok(vec![()])
  }

  fn clock(&self) -> Self::Route {}

  async fn send(c: &mut ConnectionManager, _: &(), command: Cmd) -> RedisResult<Value> {
    command.query_async(c).await
  }

  fn batches(names: Vec<String>) -> Vec<Vec<String>> {
    if names.is_empty() {
      Vec::new()
    } else {
      vec![names]
    }
  }
}

/// SUBSCRIBE to the events channel, on a connection of its own: with
/// tracking, a RESP3 connection, on which the pub/sub messages and the
/// tracking messages both come as pushes; without it, or on a server
/// before Redis 6 (no RESP3), a RESP2 pub/sub connection.
pub(super) struct NodeSubscriber {
  client: Client,
  /// The same server, spoken to in RESP3 (`None`: tracking is not asked).
  resp3: Option<Client>,
  /// Set once the server refused RESP3: later connections do not ask again.
  resp2_only: AtomicBool,
  channel: String,
}

pub(super) enum NodeSubscription {
  Plain {
    sink: PubSubSink,
    messages: PubSubStream,
    channel: String,
  },
  Pushes {
    conn: MultiplexedConnection,
    pushes: UnboundedReceiver<PushInfo>,
    channel: String,
  },
}

impl Subscriber for NodeSubscriber {
  type Subscription = NodeSubscription;

  /// One server's connection serves it still.
  const RENEWS_COMMANDS: bool = false;

  async fn connect(&self, bound: Duration) -> RedisResult<NodeSubscription> {
    if let Some(resp3) = self
      .resp3
      .as_ref()
      .filter(|_| !self.resp2_only.load(Ordering::Relaxed))
    {
      let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
      let config = AsyncConnectionConfig::new()
        .set_push_sender(tx)
        .set_connection_timeout(Some(bound))
        .set_response_timeout(Some(bound));
      match bounded(
        bound,
        resp3.get_multiplexed_async_connection_with_config(&config),
      )
      .await
      {
        Ok(conn) => {
          return Ok(NodeSubscription::Pushes {
            conn,
            pushes,
            channel: self.channel.clone(),
          })
        }
        Err(e) if resp3_refused(&e) => {
          self.resp2_only.store(true, Ordering::Relaxed);
        }
        Err(e) => return Err(e),
      }
    }
    let pubsub = bounded(bound, self.client.get_async_pubsub()).await?;
    let (sink, messages) = pubsub.split();
    Ok(NodeSubscription::Plain {
      sink,
      messages,
      channel: self.channel.clone(),
    })
  }
}

impl Subscription for NodeSubscription {
  /// Live once the server confirmed the SUBSCRIBE.
  async fn subscribe(&mut self, _: &Events, bound: Duration) -> Subscribed {
    let (subscribed, channel) = match self {
      NodeSubscription::Plain { sink, channel, .. } => (
        tokio::time::timeout(bound, sink.subscribe(&*channel)).await,
        channel,
      ),
      NodeSubscription::Pushes { conn, channel, .. } => (
        tokio::time::timeout(bound, conn.subscribe(&*channel)).await,
        channel,
      ),
    };
    match subscribed {
      Ok(Ok(())) => Subscribed::Live,
      Ok(Err(error)) => Subscribed::Refused {
        channel: channel.clone(),
        error,
      },
      Err(_) => Subscribed::Unconfirmed,
    }
  }

  async fn track(&mut self, prefix: &str, bound: Duration) -> Tracking {
    match self {
      NodeSubscription::Plain { .. } => Tracking::Unsupported(
        "the server does not speak RESP3 (Redis 6 or later, or Valkey, does)".to_string(),
      ),
      NodeSubscription::Pushes { conn, .. } => {
        let on = tracking_on(prefix);
        Tracking::of(tokio::time::timeout(bound, on.query_async::<Value>(conn)).await)
      }
    }
  }

  /// A message this version cannot read is passed over.
  async fn next(&mut self) -> Option<Received> {
    match self {
      NodeSubscription::Plain { messages, .. } => loop {
        let message = messages.next().await?;
        let text = message.get_payload::<String>().ok();
        if let Some(event) = text.and_then(|text| Event::decode(&text)) {
          return Some(Received::Event(event));
        }
      },
      NodeSubscription::Pushes { pushes, .. } => loop {
        let push = pushes.recv().await?;
        match push.kind {
          PushKind::Message => {
            if let Some(event) = event_of(push) {
              return Some(Received::Event(event));
            }
          }
          PushKind::Invalidate => return Some(tracked_of(push)),
          PushKind::Unsubscribe | PushKind::Disconnection => return None,
          _ => {}
        }
      },
    }
  }

  /// A PING on the subscription's own connection.
  async fn answers(&mut self, bound: Duration) -> bool {
    let pong = match self {
      NodeSubscription::Plain { sink, .. } => {
        tokio::time::timeout(bound, sink.ping::<Value>()).await
      }
      NodeSubscription::Pushes { conn, .. } => {
        tokio::time::timeout(bound, redis::cmd("PING").query_async::<Value>(conn)).await
      }
    };
    matches!(pong, Ok(Ok(_)))
  }
}

/// Whether connecting failed because the server does not speak RESP3: it
/// does not know `HELLO` (before Redis 6, or renamed away).
fn resp3_refused(e: &RedisError) -> bool {
  e.kind() == ErrorKind::RESP3NotSupported
    || (e.code() == Some("ERR") && e.to_string().contains("'HELLO'"))
}
