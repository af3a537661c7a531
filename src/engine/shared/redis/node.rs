//! The Redis store on one server (or a Valkey server): the scripts announce
//! their own changes with PUBLISH on the prefix's one events channel, a
//! batch of reads is one pipeline, and a clear is one SCAN.

use super::link::{bounded, Connector, Link};
use super::store::{read_reply, Topology};
use super::subscription::{Subscribed, Subscriber, Subscription};
use super::RedisTimeouts;
use crate::core::fleet::{self as protocol, Event, RedisKeys};
use crate::engine::shared::{Events, Read};
use futures_util::{FutureExt, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSubSink, PubSubStream};
use redis::{Client, Cmd, RedisResult, Value};
use std::time::Duration;

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

  fn subscriber(&self) -> NodeSubscriber {
    NodeSubscriber {
      client: self.client.clone(),
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

/// SUBSCRIBE to the events channel, on a connection of its own.
pub(super) struct NodeSubscriber {
  client: Client,
  channel: String,
}

pub(super) struct NodeSubscription {
  sink: PubSubSink,
  messages: PubSubStream,
  channel: String,
}

impl Subscriber for NodeSubscriber {
  type Subscription = NodeSubscription;

  /// One server's connection serves it still.
  const RENEWS_COMMANDS: bool = false;

  async fn connect(&self, bound: Duration) -> RedisResult<NodeSubscription> {
    let pubsub = bounded(bound, self.client.get_async_pubsub()).await?;
    let (sink, messages) = pubsub.split();
    Ok(NodeSubscription {
      sink,
      messages,
      channel: self.channel.clone(),
    })
  }
}

impl Subscription for NodeSubscription {
  /// Live once the server confirmed the SUBSCRIBE.
  async fn subscribe(&mut self, _: &Events, bound: Duration) -> Subscribed {
    match tokio::time::timeout(bound, self.sink.subscribe(&self.channel)).await {
      Ok(Ok(())) => Subscribed::Live,
      Ok(Err(error)) => Subscribed::Refused {
        channel: self.channel.clone(),
        error,
      },
      Err(_) => Subscribed::Unconfirmed,
    }
  }

  /// A message this version cannot read is passed over.
  async fn next_event(&mut self) -> Option<Event> {
    loop {
      let message = self.messages.next().await?;
      let text = message.get_payload::<String>().ok();
      if let Some(event) = text.and_then(|text| Event::decode(&text)) {
        return Some(event);
      }
    }
  }

  /// A PING on the subscription's own connection.
  async fn answers(&mut self, bound: Duration) -> bool {
    let pong = tokio::time::timeout(bound, self.sink.ping::<Value>()).await;
    matches!(pong, Ok(Ok(_)))
  }
}
