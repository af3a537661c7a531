//! The Redis store: reads and conditional writes of envelopes, the fleet
//! lock (acquire, extend, compare-and-delete release), invalidations, and
//! the events subscription that delivers fill notices. Async on tokio,
//! through redis-rs; no napi. The protocol that sequences these calls
//! (ARCHITECTURE.md, section 4) is `engine::fleet`'s.
//!
//! One store, `store::Redis`, written once over a `store::Topology`: one
//! server (`node::Node`) or a Redis Cluster (`cluster::Cluster`), each a
//! static type. The command connection is `link`, what failures say is
//! `target`, the events subscription is `subscription`. [`RedisStore`] is
//! the one place the topology is chosen at run time, by the `redis` option.

mod cluster;
mod link;
mod node;
mod store;
mod subscription;
mod target;

use self::cluster::Cluster;
use self::node::Node;
use self::store::Redis;
use super::{
  ClearScope, Deletion, Events, LockAttempt, Problem, Problems, Read, SharedStore, SlotCall,
  SlotGrant,
};
use crate::core::envelope::{Envelope, Meta};
use crate::core::fleet::RedisKeys;
use redis::{RedisError, RedisResult};
use std::sync::Arc;
use std::time::Duration;
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

/// The Redis store on one server or on a Redis Cluster, whichever it was
/// opened on.
pub struct RedisStore(OnTopology);

/// Boxed: each is a kilobyte or more (the scripts; on a cluster, the
/// client's settings too), of unlike sizes, and made once per cache.
enum OnTopology {
  Node(Box<Redis<Node>>),
  Cluster(Box<Redis<Cluster>>),
}

/// Each member named, run on the store of its topology: the one place the
/// topology is chosen at run time. Every other line of the store knows it
/// statically.
macro_rules! on_topology {
  () => {};
  ($(#[$doc:meta])* $vis:vis async fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty; $($rest:tt)*) => {
    $(#[$doc])*
    $vis async fn $name(&self $(, $arg: $ty)*) -> $ret {
      match &self.0 {
        OnTopology::Node(store) => store.$name($($arg),*).await,
        OnTopology::Cluster(store) => store.$name($($arg),*).await,
      }
    }
    on_topology!($($rest)*);
  };
  ($(#[$doc:meta])* $vis:vis fn $name:ident(&self $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)?; $($rest:tt)*) => {
    $(#[$doc])*
    $vis fn $name(&self $(, $arg: $ty)*) $(-> $ret)? {
      match &self.0 {
        OnTopology::Node(store) => store.$name($($arg),*),
        OnTopology::Cluster(store) => store.$name($($arg),*),
      }
    }
    on_topology!($($rest)*);
  };
}

impl RedisStore {
  /// Checks the URL (`redis://`, `rediss://` with the system's roots, with
  /// user, password and db; `rediss://…/#insecure` skips certificate checks,
  /// for tests); connects on first use.
  pub fn open(url: &str, prefix: &str, timeouts: RedisTimeouts) -> RedisResult<RedisStore> {
    install_tls_provider(url);
    let node = Node::open(url, prefix, timeouts)?;
    let store = Redis::open(node, prefix, timeouts);
    Ok(RedisStore(OnTopology::Node(Box::new(store))))
  }

  /// A store on the Redis Cluster some of whose nodes `seeds` names (URLs
  /// as for [`RedisStore::open`], one scheme for all); connects on first use.
  pub fn open_cluster(
    seeds: &[String],
    prefix: &str,
    timeouts: RedisTimeouts,
  ) -> RedisResult<RedisStore> {
    if let Some(first) = seeds.first() {
      install_tls_provider(first);
    }
    let cluster = Cluster::open(seeds, prefix, timeouts)?;
    let store = Redis::open(cluster, prefix, timeouts);
    Ok(RedisStore(OnTopology::Cluster(Box::new(store))))
  }

  /// The store, whose events subscription asks the server to track the
  /// prefix's changes (`tracking`), or does not (the default).
  pub fn with_tracking(mut self, tracking: bool) -> RedisStore {
    match &mut self.0 {
      OnTopology::Node(store) => store.tracking = tracking,
      OnTopology::Cluster(store) => store.tracking = tracking,
    }
    self
  }

  on_topology! {
    /// The prefix of every name this store uses.
    pub fn prefix(&self) -> &str;
    /// The events channel of this store's prefix (on one node).
    pub fn channel(&self) -> &str;
    pub fn timeouts(&self) -> RedisTimeouts;
    /// [`SharedStore::subscribe`] with its own bound on connecting,
    /// subscribing and each liveness probe (the trait's uses the command
    /// timeout).
    pub fn subscribe_with(&self, events: &Arc<Events>, bound: Duration, on_connected: impl Fn(bool) + Send + Sync + 'static) -> JoinHandle<()>;
    /// Inspection (tests): the key's back-off marker, `(failures, ms left)`,
    /// `None` if there is none or it is not one an instance left.
    pub async fn backoff(&self, keys: &RedisKeys) -> RedisResult<Option<(u32, u64)>>;
    /// Inspection (tests): the lock's remaining lease in ms, `None` if
    /// nobody holds it.
    pub async fn lock_lease(&self, keys: &RedisKeys) -> RedisResult<Option<u64>>;
  }
}

/// rustls needs one process-wide crypto provider; a second install (by
/// another cache, or by the host application) is refused, harmlessly.
fn install_tls_provider(url: &str) {
  if url.starts_with("rediss://") {
    let _ = rustls::crypto::ring::default_provider().install_default();
  }
}

impl SharedStore for RedisStore {
  type Keys = RedisKeys;
  type Error = RedisError;

  on_topology! {
    fn keys(&self, key: &str) -> RedisKeys;
    fn origin(&self) -> &str;
    fn command_timeout(&self) -> Duration;
    async fn read(&self, keys: &RedisKeys) -> RedisResult<Read>;
    async fn read_many(&self, keys: &[RedisKeys]) -> RedisResult<Vec<Read>>;
    async fn lock(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<LockAttempt>;
    async fn lock_refresh(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<LockAttempt>;
    async fn fail_refresh(&self, keys: &RedisKeys, token: Option<&str>, failures: u32, ms: u64) -> RedisResult<bool>;
    async fn extend(&self, keys: &RedisKeys, token: &str, ttl: u64) -> RedisResult<bool>;
    async fn release(&self, keys: &RedisKeys, token: &str) -> RedisResult<bool>;
    async fn write_over(&self, key: &str, keys: &RedisKeys, envelope: &Envelope, px: u64, token: Option<&str>, corrupt_stamp: Option<u64>) -> RedisResult<bool>;
    async fn keep_over(&self, key: &str, keys: &RedisKeys, kept: &Meta, meta: &Meta, px: u64, token: Option<&str>) -> RedisResult<bool>;
    async fn write_newest(&self, key: &str, keys: &RedisKeys, envelope: &Envelope, px: u64) -> RedisResult<u64>;
    async fn delete(&self, key: &str, keys: &RedisKeys, deletion: Deletion) -> RedisResult<bool>;
    async fn expire(&self, key: &str, keys: &RedisKeys, at: u64, guard: u64) -> RedisResult<bool>;
    async fn invalidate_tag(&self, tag: &str, at: u64, px: u64) -> RedisResult<bool>;
    async fn tag_stamps(&self, tags: &[String]) -> RedisResult<Vec<u64>>;
    async fn clear(&self, scope: ClearScope<'_>, not_newer_than: Option<u64>) -> RedisResult<u64>;
    async fn load_slots(&self, call: SlotCall) -> RedisResult<SlotGrant>;
    fn subscribe(&self, events: &Arc<Events>, on_connected: impl Fn(bool) + Send + Sync + 'static) -> JoinHandle<()>;
    async fn server_time(&self) -> RedisResult<u64>;
    fn close(&self);
    fn problems(&self) -> &Arc<Problems>;
    fn describe(&self, error: &RedisError) -> Problem;
    async fn ready(&self) -> RedisResult<()>;
  }
}
