//! The Redis store: reads and conditional writes of envelopes, the fleet
//! lock (acquire, extend, compare-and-delete release), invalidations, and
//! the events subscriber that delivers fill notices. Async on tokio, through
//! redis-rs; no napi. The protocol that sequences these calls (DESIGN.md §3)
//! is the caller's.

use crate::core::envelope::{DecodeError, Envelope};
use crate::core::lock::{self, Change, Event, RedisKeys};
use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, RedisResult, Script};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, OnceCell};

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

/// What a read found under a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
  Missing,
  Found(Envelope),
  /// Not a herdcache envelope (another program's value, a corrupt write):
  /// treated as a miss, and counted.
  Corrupt(DecodeError),
}

pub struct RedisStore {
  client: Client,
  timeouts: RedisTimeouts,
  manager: OnceCell<ConnectionManager>,
  prefix: String,
  channel: String,
  /// Names this store on the events channel, so it can skip its own notices.
  origin: String,
  release: Script,
  extend: Script,
  write: Script,
}

/// A fresh lock token: random, unique per acquisition.
pub fn lock_token() -> String {
  uuid::Uuid::new_v4().to_string()
}

impl RedisStore {
  /// Checks the URL (`redis://`, `rediss://` with the system's roots, with
  /// user, password and db; `rediss://…/#insecure` skips certificate checks,
  /// for tests); connects on first use.
  pub fn open(url: &str, prefix: &str, timeouts: RedisTimeouts) -> RedisResult<RedisStore> {
    if url.starts_with("rediss://") {
      // rustls needs one process-wide crypto provider; a second install (by
      // another cache, or by the host application) is refused, harmlessly.
      let _ = rustls::crypto::ring::default_provider().install_default();
    }
    Ok(RedisStore {
      client: Client::open(url)?,
      timeouts,
      manager: OnceCell::new(),
      prefix: prefix.to_string(),
      channel: lock::events_channel(prefix),
      origin: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
      release: Script::new(lock::RELEASE_SCRIPT),
      extend: Script::new(lock::EXTEND_SCRIPT),
      write: Script::new(lock::WRITE_SCRIPT),
    })
  }

  pub fn keys(&self, key: &str) -> RedisKeys {
    RedisKeys::new(&self.prefix, key)
  }

  pub fn channel(&self) -> &str {
    &self.channel
  }

  pub fn origin(&self) -> &str {
    &self.origin
  }

  fn event(&self, change: Change) -> String {
    Event::new(&self.origin, change).encode()
  }

  async fn connection(&self) -> RedisResult<ConnectionManager> {
    let manager = self
      .manager
      .get_or_try_init(|| async {
        let config = ConnectionManagerConfig::new()
          .set_number_of_retries(self.timeouts.retries)
          .set_connection_timeout(Some(self.timeouts.connect))
          .set_response_timeout(Some(self.timeouts.command));
        self.client.get_connection_manager_with_config(config).await
      })
      .await?;
    Ok(manager.clone())
  }

  pub async fn read(&self, keys: &RedisKeys) -> RedisResult<Read> {
    let mut c = self.connection().await?;
    let bytes = redis::cmd("GET").arg(&keys.value).query_async(&mut c).await;
    read_reply(bytes)
  }

  /// Reads many keys in one pipeline: one round trip for a whole batch of
  /// loads that found nothing in memory.
  pub async fn read_many(&self, keys: &[RedisKeys]) -> RedisResult<Vec<Read>> {
    let mut c = self.connection().await?;
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for k in keys {
      pipe.cmd("GET").arg(&k.value);
    }
    let replies: Vec<RedisResult<Option<Vec<u8>>>> = pipe.query_async(&mut c).await?;
    replies.into_iter().map(read_reply).collect()
  }

  /// `SET lock token NX PX ttl`: true if this caller now holds the lock.
  pub async fn try_lock(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<bool> {
    let mut c = self.connection().await?;
    let set: Option<String> = redis::cmd("SET")
      .arg(&keys.lock)
      .arg(token)
      .arg("NX")
      .arg("PX")
      .arg(ttl.max(1))
      .query_async(&mut c)
      .await?;
    Ok(set.is_some())
  }

  /// The lock's remaining lease in ms, `None` if nobody holds it.
  pub async fn lock_lease(&self, keys: &RedisKeys) -> RedisResult<Option<u64>> {
    let mut c = self.connection().await?;
    let pttl: i64 = redis::cmd("PTTL")
      .arg(&keys.lock)
      .query_async(&mut c)
      .await?;
    Ok(u64::try_from(pttl).ok())
  }

  pub async fn extend(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<bool> {
    let mut c = self.connection().await?;
    let extended: i64 = self
      .extend
      .key(&keys.lock)
      .arg(token)
      .arg(ttl.max(1))
      .invoke_async(&mut c)
      .await?;
    Ok(extended == 1)
  }

  pub async fn release(&self, keys: &RedisKeys, token: &str) -> RedisResult<bool> {
    let mut c = self.connection().await?;
    let released: i64 = self
      .release
      .key(&keys.lock)
      .arg(token)
      .invoke_async(&mut c)
      .await?;
    Ok(released == 1)
  }

  /// Writes `envelope` for `key` with a hard TTL of `px` ms unless a newer
  /// one is stored, announces the fill, and releases the lock if `token`
  /// still holds it. True if written.
  pub async fn write(
    &self,
    key: &str,
    keys: &RedisKeys,
    envelope: &Envelope,
    px: u64,
    token: Option<&str>,
  ) -> RedisResult<bool> {
    let mut c = self.connection().await?;
    let written: i64 = self
      .write
      .key(&keys.value)
      .key(&keys.lock)
      .arg(envelope.encode())
      .arg(px.max(1))
      .arg(envelope.meta.stamp)
      .arg(token.unwrap_or(""))
      .arg(&self.channel)
      .arg(self.event(Change::Filled(key.to_string())))
      .invoke_async(&mut c)
      .await?;
    Ok(written == 1)
  }

  /// Deletes `key` and tells every instance. True if a value was there.
  pub async fn delete(&self, key: &str, keys: &RedisKeys) -> RedisResult<bool> {
    let mut c = self.connection().await?;
    let (deleted, _): (i64, i64) = redis::pipe()
      .atomic()
      .cmd("DEL")
      .arg(&keys.value)
      .cmd("PUBLISH")
      .arg(&self.channel)
      .arg(self.event(Change::Deleted(key.to_string())))
      .query_async(&mut c)
      .await?;
    Ok(deleted > 0)
  }

  /// Removes every value of this prefix (SCAN, then UNLINK in batches) and
  /// tells every instance. Returns how many keys were removed.
  pub async fn clear(&self) -> RedisResult<u64> {
    let mut c = self.connection().await?;
    let pattern = format!("{{{}*", glob_escape(&self.prefix));
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
        let n: u64 = redis::cmd("UNLINK").arg(&names).query_async(&mut c).await?;
        removed += n;
      }
      if next == 0 {
        break;
      }
      cursor = next;
    }
    let _: i64 = redis::cmd("PUBLISH")
      .arg(&self.channel)
      .arg(self.event(Change::Cleared))
      .query_async(&mut c)
      .await?;
    Ok(removed)
  }
}

/// A GET's reply as a [`Read`]. Another program's list or hash under our
/// key (WRONGTYPE), bytes that are not UTF-8, a header or a value that does
/// not parse: a foreign value, not a Redis failure.
fn read_reply(reply: RedisResult<Option<Vec<u8>>>) -> RedisResult<Read> {
  let bytes = match reply {
    Ok(bytes) => bytes,
    Err(e) if e.code() == Some("WRONGTYPE") => {
      return Ok(Read::Corrupt(DecodeError::NotAnEnvelope))
    }
    Err(e) => return Err(e),
  };
  Ok(match bytes.map(String::from_utf8) {
    None => Read::Missing,
    Some(Err(_)) => Read::Corrupt(DecodeError::NotAnEnvelope),
    Some(Ok(text)) => match Envelope::decode(&text) {
      Ok(envelope) if is_json(&envelope.json) => Read::Found(envelope),
      Ok(_) => Read::Corrupt(DecodeError::BadHeader("value")),
      Err(e) => Read::Corrupt(e),
    },
  })
}

/// Whether `text` is one JSON value: an envelope whose value line is not
/// would fail every reader's `JSON.parse`, so it is treated as corrupt here.
fn is_json(text: &str) -> bool {
  let mut values = serde_json::Deserializer::from_str(text).into_iter::<serde::de::IgnoredAny>();
  matches!(values.next(), Some(Ok(_))) && values.next().is_none()
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

type Handler = Arc<dyn Fn(&Event) + Send + Sync>;

/// Fill notices and invalidations, from one subscription per store. Callers
/// that lost the lock register a waiter *before* they re-read the key, so a
/// fill that lands in between still wakes them.
pub struct Events {
  waiters: Mutex<HashMap<String, Vec<oneshot::Sender<()>>>>,
  handler: Handler,
}

impl Events {
  pub fn new(handler: impl Fn(&Event) + Send + Sync + 'static) -> Arc<Events> {
    Arc::new(Events {
      waiters: Mutex::new(HashMap::new()),
      handler: Arc::new(handler),
    })
  }

  /// Resolves when `key` is filled, deleted or cleared.
  pub fn wait(&self, key: &str) -> oneshot::Receiver<()> {
    let (tx, rx) = oneshot::channel();
    let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
    waiters.entry(key.to_string()).or_default().push(tx);
    rx
  }

  pub fn dispatch(&self, event: &Event) {
    let woken: Vec<oneshot::Sender<()>> = {
      let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
      match event.key() {
        Some(key) => waiters.remove(key).unwrap_or_default(),
        None => waiters.drain().flat_map(|(_, w)| w).collect(),
      }
    };
    for waiter in woken {
      let _ = waiter.send(());
    }
    (self.handler)(event);
  }

  /// Keeps a subscription to `channel` open until the returned handle is
  /// aborted, reconnecting with a capped backoff; `on_connected` tells
  /// whether the subscription is live (while it is not, invalidations from
  /// other instances may be missed, and callers should trust memory less).
  pub fn subscribe(
    self: &Arc<Self>,
    client: Client,
    channel: String,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> tokio::task::JoinHandle<()> {
    let events = Arc::clone(self);
    tokio::spawn(async move {
      let mut backoff = Duration::from_millis(50);
      loop {
        if let Ok(mut pubsub) = client.get_async_pubsub().await {
          if pubsub.subscribe(&channel).await.is_ok() {
            on_connected(true);
            backoff = Duration::from_millis(50);
            let mut messages = pubsub.on_message();
            while let Some(message) = messages.next().await {
              if let Some(event) = message
                .get_payload::<String>()
                .ok()
                .and_then(|m| Event::decode(&m))
              {
                events.dispatch(&event);
              }
            }
            on_connected(false);
          }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
      }
    })
  }
}

impl RedisStore {
  /// The client, for the events subscription (its own connection).
  pub fn client(&self) -> Client {
    self.client.clone()
  }
}
