//! The contract every shared store keeps: each behaviour the fleet protocol
//! (`engine::fleet`) relies on, with an assertion that fails if a store
//! breaks it. [`contract`] runs the whole suite for one store (as
//! bentocache's `registerCacheDriverTestSuite` does for a driver);
//! `the_redis_store_keeps_the_contract` runs it against a real redis-server
//! (and a Redis Cluster), `the_memory_store_keeps_the_contract` against the
//! in-process store: passing the same suite is what makes them the same.
//!
//! A new store gets a [`Fixture`] (how to open one, and how to plant what no
//! herdcache instance writes) and one `#[tokio::test]` calling `contract`.

use crate::support;

use futures_util::FutureExt;
use herdcache::core::envelope::{DecodeError, Envelope, Meta};
use herdcache::core::fleet::{Change, Event};
use herdcache::core::tags::Tags;
use herdcache::engine::shared::memory::Stored;
use herdcache::engine::shared::{
  lock_token, ClearScope, Deletion, Events, Faults, LockAttempt, MemoryServer, MemoryStore, Read,
  RedisStore, RedisTimeouts, SharedStore, SlotCall,
};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::cluster::RedisCluster;
use support::{envelope_at as envelope, Backend, Inspect, RedisServer};

/// What the suite needs from a store's backend beyond the trait.
trait Fixture {
  type Store: SharedStore + Inspect;
  /// A new store on the shared backend under `prefix`, with an origin of
  /// its own (as another instance of the fleet would have).
  fn store(&self, prefix: &str) -> Self::Store;
  /// Stores `bytes` as the value of `key`, as another program (or a corrupt
  /// write) would: no envelope, no TTL.
  async fn plant_value(&self, store: &Self::Store, key: &str, bytes: &[u8]);
  /// Puts `garbage` where `key`'s lock goes.
  async fn plant_lock(&self, store: &Self::Store, key: &str, garbage: Garbage);
  /// Puts `garbage` where `key`'s back-off marker goes.
  async fn plant_backoff(&self, store: &Self::Store, key: &str, garbage: Garbage);
  /// The ms `key`'s value has left to live (-1: no TTL, -2: no value).
  async fn value_ttl(&self, store: &Self::Store, key: &str) -> i64;
  /// Stores `bytes` where `tag`'s invalidation stamp goes, without a TTL.
  async fn plant_tag_stamp(&self, store: &Self::Store, tag: &str, bytes: &[u8]);
  /// The ms `tag`'s invalidation stamp has left to live.
  async fn tag_stamp_ttl(&self, store: &Self::Store, tag: &str) -> i64;
  /// Puts `garbage` where the fleet's load slots go.
  async fn plant_load_slots(&self, store: &Self::Store, garbage: Garbage);
}

/// Lock keys no herdcache instance can have set.
#[derive(Debug, Clone, Copy)]
enum Garbage {
  /// A string that is not a token, without a TTL.
  NoTtl,
  /// A well-formed token without a TTL (every lock has one).
  TokenWithoutTtl,
  /// A string that is not a token, with a TTL.
  NotAToken,
  /// Another type (a list), without a TTL.
  List,
  /// Another type (a hash), with a TTL.
  HashWithTtl,
}

const GARBAGE: [Garbage; 5] = [
  Garbage::NoTtl,
  Garbage::TokenWithoutTtl,
  Garbage::NotAToken,
  Garbage::List,
  Garbage::HashWithTtl,
];

/// Every case, in order. Each runs to its end even when an earlier one
/// failed, and the suite then fails naming every broken case (their panic
/// messages are printed as they happen).
async fn contract<F: Fixture>(f: &F) {
  let mut broken = Vec::new();
  macro_rules! run {
    ($($case:ident),* $(,)?) => {$(
      eprintln!("store contract: {}", stringify!($case));
      if AssertUnwindSafe($case(f)).catch_unwind().await.is_err() {
        broken.push(stringify!($case));
      }
    )*};
  }
  run!(
    reads_tell_absent_found_and_corrupt_apart,
    read_many_answers_in_the_order_asked,
    an_older_load_never_overwrites_a_newer_value,
    a_set_always_lands_stamped_after_the_stored_value,
    a_value_readers_reject_is_replaced_and_a_valid_newer_one_kept,
    the_writer_and_the_reader_agree_on_near_valid_values,
    one_holder_at_a_time_and_only_the_holder_releases_or_extends,
    a_contended_lock_reports_the_holders_lease,
    a_lock_expires_by_itself,
    a_garbage_lock_is_replaced,
    a_write_releases_our_lock_but_not_someone_elses,
    writes_deletes_and_clears_are_announced_and_wake_waiters,
    a_subscription_delivers_other_origins_events_of_its_prefix_only,
    clear_removes_only_this_prefix,
    a_namespace_clear_removes_its_keys_only_and_is_announced,
    replayed_deletes_and_clears_spare_newer_values_and_are_announced,
    a_delete_leaves_a_tombstone_no_older_fill_overwrites,
    an_expire_makes_a_value_stale_and_keeps_it_until_its_hard_ttl,
    an_expire_keeps_out_the_fills_of_loads_begun_before_it,
    tags_are_kept_with_the_value_and_their_stamps_only_rise,
    a_failed_refresh_backs_off_background_refreshes_until_its_marker_expires,
    a_failed_refresh_releases_our_lock_but_not_someone_elses,
    a_write_ends_the_back_off,
    a_garbage_back_off_marker_is_ignored,
    load_slots_are_capped_and_handed_out_in_turn,
    the_load_slots_of_a_silent_instance_come_back,
    garbage_where_the_load_slots_go_is_replaced,
    formatted_and_compressed_values_read_back_and_expire_as_any_other,
    a_keep_restamps_the_value_it_saw_and_nothing_else,
  );
  assert!(
    broken.is_empty(),
    "the store breaks the contract: {broken:?}"
  );
}

#[tokio::test]
async fn the_redis_store_keeps_the_contract() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let connection = redis::Client::open(server.url())
    .unwrap()
    .get_multiplexed_async_connection()
    .await
    .unwrap();
  let fixture = RedisFixture {
    connection: Planter::Node(connection),
    backend: Backend::Server(server),
  };
  contract(&fixture).await;
}

/// The same store on a Redis Cluster of three primaries: every key's
/// calls on its own slot, reads batched per primary, `clear` per primary,
/// and the events over sharded channels.
#[tokio::test]
async fn the_redis_store_keeps_the_contract_on_a_cluster() {
  let Some(cluster) = RedisCluster::start(3, 0) else {
    return;
  };
  let connection = redis::cluster::ClusterClient::new(cluster.urls())
    .unwrap()
    .get_async_connection()
    .await
    .unwrap();
  let fixture = RedisFixture {
    connection: Planter::Cluster(connection),
    backend: Backend::Cluster(cluster),
  };
  contract(&fixture).await;
}

/// The in-process store, with no server to start: the suite's every case
/// on the same semantics (the unit tier runs it).
#[tokio::test]
async fn the_memory_store_keeps_the_contract() {
  let fixture = MemoryFixture {
    server: MemoryServer::new(),
  };
  contract(&fixture).await;
}

struct MemoryFixture {
  server: Arc<MemoryServer>,
}

impl MemoryFixture {
  fn plant(&self, name: &str, value: Stored, px: Option<u64>) {
    self.server.with(|k| k.set(name, value, px));
  }

  fn plant_garbage(&self, name: &str, garbage: Garbage) {
    let text = |t: &[u8]| Stored::Text(t.to_vec());
    let (value, px) = match garbage {
      Garbage::NoTtl => (text(b"foreign"), None),
      Garbage::TokenWithoutTtl => (text(b"0b5a1c9e-8f1d-4a5e-9c1b-2f6b1d3e4a5f"), None),
      Garbage::NotAToken => (text(b"foreign"), Some(60_000)),
      Garbage::List => (Stored::List(vec![b"x".to_vec()]), None),
      Garbage::HashWithTtl => {
        let fields = [("f".to_string(), "v".to_string())].into_iter().collect();
        (Stored::Hash(fields), Some(60_000))
      }
    };
    self.plant(name, value, px);
  }

  fn pttl(&self, name: &str) -> i64 {
    self.server.with(|k| k.pttl(name))
  }
}

impl Fixture for MemoryFixture {
  type Store = MemoryStore;

  fn store(&self, prefix: &str) -> MemoryStore {
    self.server.store(prefix, Faults::default())
  }

  async fn plant_value(&self, store: &MemoryStore, key: &str, bytes: &[u8]) {
    self.plant(&store.keys(key).value, Stored::Text(bytes.to_vec()), None);
  }

  async fn plant_lock(&self, store: &MemoryStore, key: &str, garbage: Garbage) {
    self.plant_garbage(&store.keys(key).lock, garbage);
  }

  async fn plant_backoff(&self, store: &MemoryStore, key: &str, garbage: Garbage) {
    self.plant_garbage(&store.keys(key).backoff, garbage);
  }

  async fn value_ttl(&self, store: &MemoryStore, key: &str) -> i64 {
    self.pttl(&store.keys(key).value)
  }

  async fn plant_tag_stamp(&self, store: &MemoryStore, tag: &str, bytes: &[u8]) {
    let name = herdcache::core::fleet::tag_stamp(store.prefix(), tag);
    self.plant(&name, Stored::Text(bytes.to_vec()), None);
  }

  async fn tag_stamp_ttl(&self, store: &MemoryStore, tag: &str) -> i64 {
    self.pttl(&herdcache::core::fleet::tag_stamp(store.prefix(), tag))
  }

  async fn plant_load_slots(&self, store: &MemoryStore, garbage: Garbage) {
    let name = herdcache::core::fleet::load_slots(store.prefix());
    self.server.with(|k| k.del(&name));
    self.plant_garbage(&name, garbage);
  }
}

struct RedisFixture {
  backend: Backend,
  connection: Planter,
}

/// The fixture's own connection, for what no instance writes.
enum Planter {
  Node(redis::aio::MultiplexedConnection),
  Cluster(redis::cluster_async::ClusterConnection),
}

impl RedisFixture {
  async fn run(&self, command: &[&[u8]]) {
    let _: redis::Value = self.query(command).await;
  }

  async fn query<T: redis::FromRedisValue>(&self, command: &[&[u8]]) -> T {
    let mut cmd = redis::cmd(std::str::from_utf8(command[0]).unwrap());
    for arg in &command[1..] {
      cmd.arg(*arg);
    }
    match &self.connection {
      Planter::Node(c) => cmd.query_async(&mut c.clone()).await,
      Planter::Cluster(c) => cmd.query_async(&mut c.clone()).await,
    }
    .unwrap()
  }
}

impl Fixture for RedisFixture {
  type Store = RedisStore;

  fn store(&self, prefix: &str) -> RedisStore {
    self.backend.store(prefix, RedisTimeouts::default())
  }

  async fn plant_value(&self, store: &RedisStore, key: &str, bytes: &[u8]) {
    self
      .run(&[b"SET", store.keys(key).value.as_bytes(), bytes])
      .await;
  }

  async fn plant_lock(&self, store: &RedisStore, key: &str, garbage: Garbage) {
    self
      .plant_garbage(store.keys(key).lock.as_bytes(), garbage)
      .await
  }

  async fn plant_backoff(&self, store: &RedisStore, key: &str, garbage: Garbage) {
    self
      .plant_garbage(store.keys(key).backoff.as_bytes(), garbage)
      .await
  }

  async fn value_ttl(&self, store: &RedisStore, key: &str) -> i64 {
    self
      .query(&[b"PTTL", store.keys(key).value.as_bytes()])
      .await
  }

  async fn plant_tag_stamp(&self, store: &RedisStore, tag: &str, bytes: &[u8]) {
    let name = herdcache::core::fleet::tag_stamp(store.prefix(), tag);
    self.run(&[b"SET", name.as_bytes(), bytes]).await;
  }

  async fn tag_stamp_ttl(&self, store: &RedisStore, tag: &str) -> i64 {
    let name = herdcache::core::fleet::tag_stamp(store.prefix(), tag);
    self.query(&[b"PTTL", name.as_bytes()]).await
  }

  async fn plant_load_slots(&self, store: &RedisStore, garbage: Garbage) {
    let name = herdcache::core::fleet::load_slots(store.prefix());
    self.run(&[b"DEL", name.as_bytes()]).await;
    self.plant_garbage(name.as_bytes(), garbage).await
  }
}

/// What no instance writes, planted under one name.
impl RedisFixture {
  async fn plant_garbage(&self, name: &[u8], garbage: Garbage) {
    match garbage {
      Garbage::NoTtl => self.run(&[b"SET", name, b"foreign"]).await,
      Garbage::TokenWithoutTtl => {
        let token = b"0b5a1c9e-8f1d-4a5e-9c1b-2f6b1d3e4a5f";
        self.run(&[b"SET", name, token]).await
      }
      Garbage::NotAToken => self.run(&[b"SET", name, b"foreign", b"PX", b"60000"]).await,
      Garbage::List => self.run(&[b"RPUSH", name, b"x"]).await,
      Garbage::HashWithTtl => {
        self.run(&[b"HSET", name, b"f", b"v"]).await;
        self.run(&[b"PEXPIRE", name, b"60000"]).await
      }
    }
  }
}

/// A live delete at `at`, its tombstone living a minute.
fn live(at: u64) -> Deletion {
  Deletion {
    at,
    px: 60_000,
    replayed: false,
  }
}

/// A delete at `at` replayed by auto-recovery.
fn replayed(at: u64) -> Deletion {
  Deletion {
    replayed: true,
    ..live(at)
  }
}

/// What the fleet passes to the write after a read found a corrupt value.
fn corrupt_stamp(read: &Read) -> Option<u64> {
  match read {
    Read::Corrupt(DecodeError::BadValue { stamp }) => Some(*stamp),
    _ => None,
  }
}

/// Polls `pred` (the subscriber shares the runtime), for 8 s at most.
async fn wait_until(what: &str, pred: impl Fn() -> bool) {
  let deadline = Instant::now() + Duration::from_secs(8);
  while !pred() {
    assert!(Instant::now() < deadline, "timed out waiting for {what}");
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
}

/// `events` sorted by key, each key's in the order they came: on a cluster
/// each key's events come in order on its slot range's channel, but two
/// channels' (two shards') interleave as their connections deliver them.
fn in_key_order(mut events: Vec<Event>) -> Vec<Event> {
  events.sort_by(|a, b| a.key().cmp(&b.key()));
  events
}

/// A live subscription of `store` that records every event it delivers.
struct Recorder {
  seen: Arc<Mutex<Vec<Event>>>,
  events: Arc<Events>,
  task: tokio::task::JoinHandle<()>,
}

impl Recorder {
  async fn start<S: SharedStore>(store: &S) -> Recorder {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let connected = Arc::new(AtomicBool::new(false));
    let events = {
      let seen = Arc::clone(&seen);
      Events::new(move |e| seen.lock().unwrap().push(e.clone()))
    };
    let task = {
      let connected = Arc::clone(&connected);
      store.subscribe(&events, move |up| connected.store(up, Ordering::SeqCst))
    };
    wait_until("the subscription", || connected.load(Ordering::SeqCst)).await;
    Recorder { seen, events, task }
  }

  /// Waits for `n` events that `kind` picks, and returns those so far.
  async fn of_kind(&self, n: usize, kind: impl Fn(&Event) -> bool) -> Vec<Event> {
    let picked = || -> Vec<Event> {
      let seen = self.seen.lock().unwrap();
      seen.iter().filter(|e| kind(e)).cloned().collect()
    };
    wait_until(&format!("{n} events of a kind"), || picked().len() >= n).await;
    picked()
  }

  /// Waits for `n` events, and returns the first `n`.
  async fn first(&self, n: usize) -> Vec<Event> {
    wait_until(&format!("{n} events"), || {
      self.seen.lock().unwrap().len() >= n
    })
    .await;
    self.seen.lock().unwrap()[..n].to_vec()
  }
}

impl Drop for Recorder {
  fn drop(&mut self) {
    self.task.abort();
  }
}

async fn reads_tell_absent_found_and_corrupt_apart<F: Fixture>(f: &F) {
  let s = f.store("read:");
  let keys = s.keys("user:1");
  assert_eq!(s.read(&keys).await.unwrap(), Read::Missing);
  let e = envelope(1_000, "{\"a\":1}");
  assert!(s.write("user:1", &keys, &e, 60_000, None).await.unwrap());
  assert_eq!(s.read(&keys).await.unwrap(), Read::Found(e));

  // Foreign or corrupt values read as corrupt, and are overwritten.
  let keys = s.keys("k");
  for junk in [
    "{\"plain\":\"json\"}",
    "hc1 garbage\n{}",
    "hc1 9 1 0 0 v\n1",
    "hc2 1 2 3 4 v\n1",
    "hc2 5 9 0 0 6 v\n1",
    "hc3 1 2 3 4 1 v\n1",
  ] {
    f.plant_value(&s, "k", junk.as_bytes()).await;
    assert!(
      matches!(s.read(&keys).await.unwrap(), Read::Corrupt(_)),
      "{junk}"
    );
  }
  assert!(s
    .write("k", &keys, &envelope(5, "1"), 60_000, None)
    .await
    .unwrap());
  assert_eq!(s.read(&keys).await.unwrap(), Read::Found(envelope(5, "1")));
}

/// `hc4` entries (`core::body`): binary parts and compressed bytes read
/// back as written (a compressed JSON text as its text), tagged or not, an
/// expire keeps their bytes, and a zstd frame that does not decompress is a
/// bad value the next write replaces.
async fn formatted_and_compressed_values_read_back_and_expire_as_any_other<F: Fixture>(f: &F) {
  use herdcache::core::body::{compressed, Body, Formatted};
  let s = f.store("hc4:");
  let json = format!("[{}]", vec!["{\"id\":1,\"name\":\"n\"}"; 300].join(","));
  let binary = Body::Formatted(Formatted {
    format: "json [4,[\"Buffer\",3]]".into(),
    bytes: b"null\x00\xff\n".to_vec(),
    compressed: false,
  });
  let cases = [
    ("binary", binary.clone(), binary),
    (
      "packed",
      compressed(&Body::Json(json.clone()), 3).unwrap(),
      Body::Json(json),
    ),
  ];
  for (key, body, read_back) in cases {
    let keys = s.keys(key);
    let mut e = envelope(100, "1");
    e.tags = herdcache::core::tags::Tags::new(vec!["t".into()]).unwrap();
    e.body = body;
    assert!(
      s.write(key, &keys, &e, 60_000, None).await.unwrap(),
      "{key}"
    );
    let Read::Found(found) = s.read(&keys).await.unwrap() else {
      panic!("{key}: read back");
    };
    assert_eq!(
      (found.body, found.tags),
      (read_back.clone(), e.tags.clone()),
      "{key}"
    );
    assert!(
      s.expire(key, &keys, 500, 60_000).await.unwrap(),
      "{key}: expired"
    );
    let Read::Found(expired) = s.read(&keys).await.unwrap() else {
      panic!("{key}: still there after the expire");
    };
    assert_eq!(
      (expired.meta.fresh_until, expired.body),
      (500, read_back),
      "{key}"
    );
  }
  let header = "hc4 1100 10100 12 100 1000 v\n";
  f.plant_value(
    &s,
    "bad-frame",
    format!("{header}zstd - json\nnot zstd").as_bytes(),
  )
  .await;
  let keys = s.keys("bad-frame");
  let read = s.read(&keys).await.unwrap();
  assert_eq!(read, Read::Corrupt(DecodeError::BadValue { stamp: 100 }));
  let stamp = corrupt_stamp(&read);
  let fill = envelope(50, "\"ours\"");
  assert!(s
    .write_over("bad-frame", &keys, &fill, 60_000, None, stamp)
    .await
    .unwrap());
}

/// `ctx.keep()`: the stored value the loader saw takes new deadlines, its
/// bytes, tags and validator as they were; anything else stored is left.
async fn a_keep_restamps_the_value_it_saw_and_nothing_else<F: Fixture>(f: &F) {
  use herdcache::core::etag::Etag;
  let s = f.store("keep:");
  let (key, keys) = ("k", s.keys("k"));
  let mut original = envelope(100, "{\"a\":[1,2]}");
  original.tags = herdcache::core::tags::Tags::new(vec!["t".into()]).unwrap();
  original.etag = Etag::new("W/\"7\"").unwrap();
  assert!(s.write(key, &keys, &original, 60_000, None).await.unwrap());
  // Longer numbers than stored: the header grows (the rewrite, not SETRANGE).
  let kept = |stamp: u64| Meta {
    fresh_until: 1_700_000_005_000 + stamp,
    hard_until: 1_700_000_009_000 + stamp,
    compute_ms: 12,
    stamp,
    refresh_at: Some(1_700_000_004_000 + stamp),
    negative: false,
  };
  let read_meta = || async {
    match s.read(&keys).await.unwrap() {
      Read::Found(found) => {
        assert_eq!(
          (&found.body, &found.tags, &found.etag),
          (&original.body, &original.tags, &original.etag),
          "bytes, tags and validator untouched"
        );
        found.meta
      }
      other => panic!("not found: {other:?}"),
    }
  };
  s.lock(&keys, "00000000-0000-4000-8000-000000000001", 60_000)
    .await
    .unwrap();
  let token = Some("00000000-0000-4000-8000-000000000001");
  assert!(s
    .keep_over(key, &keys, &original.meta, &kept(300), 60_000, token)
    .await
    .unwrap());
  assert_eq!(read_meta().await, kept(300));
  assert_eq!(
    s.lock(&keys, "00000000-0000-4000-8000-000000000002", 1_000)
      .await
      .unwrap(),
    LockAttempt::Won,
    "the keep released our lock"
  );
  // Same-length numbers: rewritten in place.
  assert!(s
    .keep_over(key, &keys, &kept(300), &kept(400), 60_000, None)
    .await
    .unwrap());
  assert_eq!(read_meta().await, kept(400));
  let same_stamp_other_deadlines = Meta {
    fresh_until: kept(400).fresh_until + 1,
    ..kept(400)
  };
  // The first copy again (the keep repeated after it landed: the keeper
  // lets go of its copy), and another write of the same moment.
  for (copy, what) in [
    (kept(300), "a copy the store no longer holds"),
    (
      same_stamp_other_deadlines,
      "another write of the same moment",
    ),
  ] {
    let landed = s
      .keep_over(key, &keys, &copy, &kept(450), 60_000, None)
      .await
      .unwrap();
    assert!(!landed, "{what}");
    assert_eq!(read_meta().await, kept(400), "{what}: left as it was");
  }
  s.expire(key, &keys, 700, 60_000).await.unwrap();
  let expired = read_meta().await;
  assert!(
    !s.keep_over(key, &keys, &expired, &kept(650), 60_000, None)
      .await
      .unwrap(),
    "expired after the keeping load began"
  );
  assert!(
    s.keep_over(key, &keys, &expired, &kept(750), 60_000, None)
      .await
      .unwrap(),
    "a keep begun after the expire lands"
  );
  assert!(s.delete(key, &keys, live(800)).await.unwrap());
  let tombstone = Meta {
    fresh_until: 0,
    hard_until: 0,
    stamp: 800,
    ..kept(800)
  };
  assert!(
    !s.keep_over(key, &keys, &tombstone, &kept(900), 60_000, None)
      .await
      .unwrap(),
    "a tombstone is nothing to keep"
  );
  assert_eq!(s.read(&keys).await.unwrap(), Read::Missing);
  assert!(!s
    .keep_over(
      "absent",
      &s.keys("absent"),
      &kept(100),
      &kept(200),
      60_000,
      None
    )
    .await
    .unwrap());
}

async fn read_many_answers_in_the_order_asked<F: Fixture>(f: &F) {
  let s = f.store("many:");
  for (key, stamp) in [("one", 1), ("three", 3)] {
    let json = stamp.to_string();
    let e = envelope(stamp, &json);
    assert!(s.write(key, &s.keys(key), &e, 60_000, None).await.unwrap());
  }
  f.plant_value(&s, "junk", b"not an envelope").await;
  let asked = ["three", "two", "one", "junk", "three"];
  let keys: Vec<_> = asked.iter().map(|k| s.keys(k)).collect();
  let reads = s.read_many(&keys).await.unwrap();
  assert_eq!(reads.len(), asked.len());
  assert_eq!(reads[0], Read::Found(envelope(3, "3")));
  assert_eq!(reads[1], Read::Missing);
  assert_eq!(reads[2], Read::Found(envelope(1, "1")));
  assert!(matches!(reads[3], Read::Corrupt(_)), "{:?}", reads[3]);
  assert_eq!(reads[4], Read::Found(envelope(3, "3")));
  assert_eq!(s.read_many(&keys[1..2]).await.unwrap(), [Read::Missing]);
}

async fn an_older_load_never_overwrites_a_newer_value<F: Fixture>(f: &F) {
  let s = f.store("order:");
  let keys = s.keys("k");
  assert!(s
    .write("k", &keys, &envelope(2_000, "\"new\""), 60_000, None)
    .await
    .unwrap());
  assert!(!s
    .write("k", &keys, &envelope(1_999, "\"late\""), 60_000, None)
    .await
    .unwrap());
  assert_eq!(
    s.read(&keys).await.unwrap(),
    Read::Found(envelope(2_000, "\"new\""))
  );
  assert!(s
    .write("k", &keys, &envelope(2_001, "\"newer\""), 60_000, None)
    .await
    .unwrap());
  assert_eq!(
    s.read(&keys).await.unwrap(),
    Read::Found(envelope(2_001, "\"newer\""))
  );
}

/// A live `set` is the newest value whatever is stored: over a value
/// stamped later (another instance's write, its clock ahead within the
/// bound) it lands stamped one past that value, so a late fill or replay of
/// the older stamps still loses to it; over an older, a corrupt or no value
/// it keeps its own stamp. It ends the back-off and is announced.
async fn a_set_always_lands_stamped_after_the_stored_value<F: Fixture>(f: &F) {
  let s = f.store("set:");
  let recorder = Recorder::start(&s).await;
  let keys = s.keys("k");
  let waiter = recorder.events.wait("k");
  assert_eq!(
    s.write_newest("k", &keys, &envelope(1_000, "\"first\""), 60_000)
      .await
      .unwrap(),
    1_000,
    "nothing stored: its own stamp"
  );
  tokio::time::timeout(Duration::from_secs(5), waiter)
    .await
    .expect("the set is announced as a fill")
    .unwrap();
  // Another instance, its clock 50 ms ahead, wrote just before.
  assert!(s
    .write("k", &keys, &envelope(2_050, "\"theirs\""), 60_000, None)
    .await
    .unwrap());
  let ours = envelope(2_000, "\"ours\"");
  assert_eq!(
    s.write_newest("k", &keys, &ours, 60_000).await.unwrap(),
    2_051,
    "stamped one past the stored value"
  );
  let mut landed = ours.clone();
  landed.meta.stamp = 2_051;
  assert_eq!(s.read(&keys).await.unwrap(), Read::Found(landed.clone()));
  // The same stamp stored: still after it.
  assert_eq!(
    s.write_newest("k", &keys, &envelope(2_051, "\"again\""), 60_000)
      .await
      .unwrap(),
    2_052
  );
  // A fill that started before the set still loses to it.
  assert!(!s
    .write("k", &keys, &envelope(2_051, "\"late fill\""), 60_000, None)
    .await
    .unwrap());
  assert_eq!(
    s.read(&keys).await.unwrap(),
    Read::Found({
      let mut e = envelope(2_051, "\"again\"");
      e.meta.stamp = 2_052;
      e
    })
  );
  // Over an older value: its own stamp.
  assert_eq!(
    s.write_newest("k", &keys, &envelope(9_000, "\"later\""), 60_000)
      .await
      .unwrap(),
    9_000
  );
  assert_eq!(
    s.read(&keys).await.unwrap(),
    Read::Found(envelope(9_000, "\"later\""))
  );
  // A tagged envelope (hc3) is restamped the same way, its tags kept.
  let mut tagged = envelope(8_000, "\"tagged\"");
  tagged.tags = Tags::new(vec!["t1".into(), "t2".into()]).unwrap();
  assert_eq!(
    s.write_newest("k", &keys, &tagged, 60_000).await.unwrap(),
    9_001
  );
  tagged.meta.stamp = 9_001;
  assert_eq!(s.read(&keys).await.unwrap(), Read::Found(tagged));
  // Over a value the reader rejects, or another program's: its own stamp.
  for stored in ["hc2 5 2 3 99999999999999 1 v\n1", "plain text"] {
    f.plant_value(&s, "k", stored.as_bytes()).await;
    assert_eq!(
      s.write_newest("k", &keys, &envelope(3_000, "3"), 60_000)
        .await
        .unwrap(),
      3_000,
      "over {stored:?}"
    );
    assert_eq!(
      s.read(&keys).await.unwrap(),
      Read::Found(envelope(3_000, "3"))
    );
  }
}

/// A stored value the reader rejects can never block writes, whatever its
/// stamp says; a valid newer one is kept, up to the largest stamp the
/// format allows.
async fn a_value_readers_reject_is_replaced_and_a_valid_newer_one_kept<F: Fixture>(f: &F) {
  let s = f.store("reject:");
  let far = "9".repeat(25);
  let huge = "9".repeat(16);
  let corrupt_but_newer = [
    format!("hc1 1 2 3 {far} v\n1"),
    format!("hc1 1 2 3 {huge} v\n1"),
    format!("hc1 {far} {far} 3 99999999999999 v\n1"),
    "hc1 5 2 3 99999999999999 v\n1".to_string(),
    "hc1 1 2 3 99999999999999 v\nnot json".to_string(),
    "hc1 1 2 3 99999999999999 v\n".to_string(),
    format!("hc2 1 2 3 {far} 1 v\n1"),
    format!("hc2 1 2 3 99999999999999 {huge} v\n1"),
    "hc2 5 9 3 99999999999999 6 v\n1".to_string(),
    "hc2 5 2 3 99999999999999 1 v\n1".to_string(),
    "hc2 1 2 3 99999999999999 v\n1".to_string(),
    "hc2 1 2 3 99999999999999 1 v\nnot json".to_string(),
  ];
  let keys = s.keys("k");
  for stored in corrupt_but_newer {
    f.plant_value(&s, "k", stored.as_bytes()).await;
    let read = s.read(&keys).await.unwrap();
    assert!(
      matches!(read, Read::Corrupt(_)),
      "the reader rejects {stored:?}"
    );
    let ours = envelope(1_000, "\"ours\"");
    assert!(
      s.write_over("k", &keys, &ours, 60_000, None, corrupt_stamp(&read))
        .await
        .unwrap(),
      "the writer must replace {stored:?}"
    );
    assert_eq!(s.read(&keys).await.unwrap(), Read::Found(ours));
  }
  let newest = envelope(999_999_999_989_999, "\"newest\"");
  assert!(s.write("k", &keys, &newest, 60_000, None).await.unwrap());
  assert!(!s
    .write(
      "k",
      &keys,
      &envelope(999_999_999_989_998, "\"late\""),
      60_000,
      None
    )
    .await
    .unwrap());
  assert_eq!(s.read(&keys).await.unwrap(), Read::Found(newest));
}

/// The writer and the reader agree on every stored value: the writer keeps
/// a value with a newer stamp exactly when the reader accepts it, so no
/// stored value is both unreadable and impossible to overwrite.
async fn the_writer_and_the_reader_agree_on_near_valid_values<F: Fixture>(f: &F) {
  use rand::{Rng, SeedableRng};
  let s = f.store("agree:");
  let seed = 0x5eed_u64;
  let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
  // Mostly valid numbers, so that whole valid headers come up often.
  let numbers = [
    "2000",
    "2000",
    "2000",
    "3000",
    "3000",
    "999999999999999",
    "999999999999999",
    "999999999999999",
    "1000000000000000",
    "99999999999999999999999",
    "-5",
    "",
    "0x10",
    "1e3",
  ];
  // herdcache writes values nested past serde's recursion limit too.
  let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
  let bodies: [&[u8]; 10] = [
    deep.as_bytes(),
    b"1",
    b"{\"a\":[1,2]}",
    b"\"s\"",
    b"null",
    b"not json",
    b"",
    b"[1,",
    b"\"\xff\xfe\"",
    b"1 2",
  ];
  let (mut kept, mut kept_v2, mut kept_v3, mut kept_v4, mut replaced) = (0, 0, 0, 0, 0);
  for case in 0..4_000 {
    let mut pick = |list: &[&str]| list[rng.random_range(0..list.len())].to_string();
    // hc1 has four numbers, hc2, hc3 and hc4 five (refreshAt): both counts
    // with each version, and versions that do not exist.
    let tag = pick(&[
      "hc1", "hc1", "hc2", "hc2", "hc3", "hc3", "hc4", "hc4", "hc9", "HC1",
    ]);
    let matching = if ["hc2", "hc3", "hc4"].contains(&tag.as_str()) {
      5
    } else {
      4
    };
    let count = match pick(&["other", "same", "same", "same", "same"]).as_str() {
      "other" => 9 - matching,
      _ => matching,
    };
    let mut fields: Vec<String> = (0..4).map(|_| pick(&numbers)).collect();
    if count == 5 {
      // refreshAt, mostly at or below freshUntil, sometimes past it.
      fields.push(pick(&[
        "0", "1000", "1000", "2000", "3000", "-5", "", "1e3",
      ]));
    }
    let kind = pick(&["v", "n", "v", "q"]);
    let mut stored = format!("{tag} {} {kind}\n", fields.join(" ")).into_bytes();
    if tag == "hc3" {
      // Its line of tags: mostly valid, sometimes not, sometimes missing.
      let tags = pick(&[
        "[\"t\"]\n",
        "[\"t\",\"u\"]\n",
        "[\"t\"]\n",
        "[]\n",
        "[1]\n",
        "t\n",
        "",
      ]);
      stored.extend_from_slice(tags.as_bytes());
    }
    if tag == "hc4" {
      // Its format line (an application's serializer, whose bytes are its
      // own to judge), with or without tags; sometimes bad or missing.
      let format = pick(&[
        "- - custom b\n",
        "- t custom b\n[\"t\"]\n",
        "- - custom b\n",
        "lz9 - custom b\n",
        "- t custom b\n",
        "",
      ]);
      stored.extend_from_slice(format.as_bytes());
    }
    stored.extend_from_slice(bodies[rng.random_range(0..bodies.len())]);
    let key = format!("agree{case}");
    let keys = s.keys(&key);
    f.plant_value(&s, &key, &stored).await;
    let read = s.read(&keys).await.unwrap();
    let accepted = matches!(read, Read::Found(_));
    let written = s
      .write_over(
        &key,
        &keys,
        &envelope(1_000, "\"ours\""),
        60_000,
        None,
        corrupt_stamp(&read),
      )
      .await
      .unwrap();
    assert_eq!(
      written,
      !accepted,
      "seed {seed:#x} case {case}: {:?} (reader accepts: {accepted})",
      String::from_utf8_lossy(&stored)
    );
    if accepted {
      kept += 1;
      kept_v2 += usize::from(tag == "hc2");
      kept_v3 += usize::from(tag == "hc3");
      kept_v4 += usize::from(tag == "hc4");
    } else {
      replaced += 1;
    }
  }
  // The generator reaches both sides.
  assert!(
    kept >= 10 && kept_v2 >= 5 && kept_v3 >= 3 && kept_v4 >= 3 && replaced >= 300,
    "kept {kept} ({kept_v2} hc2, {kept_v3} hc3, {kept_v4} hc4), replaced {replaced}"
  );
}

async fn one_holder_at_a_time_and_only_the_holder_releases_or_extends<F: Fixture>(f: &F) {
  let s = f.store("holder:");
  let keys = s.keys("hot");
  let (mine, theirs) = (lock_token(), lock_token());
  assert_ne!(mine, theirs);
  assert!(s.try_lock(&keys, &mine, 5_000).await.unwrap());
  assert!(!s.try_lock(&keys, &theirs, 5_000).await.unwrap());
  let lease = s.lock_lease(&keys).await.unwrap().unwrap();
  assert!(lease > 4_000 && lease <= 5_000);
  assert!(!s.release(&keys, &theirs).await.unwrap());
  assert!(!s.extend(&keys, &theirs, 60_000).await.unwrap());
  // The holder's lease is untouched by the others' attempts.
  let lease = s.lock_lease(&keys).await.unwrap().unwrap();
  assert!(lease <= 5_000, "{lease}");
  assert!(s.extend(&keys, &mine, 60_000).await.unwrap());
  assert!(s.lock_lease(&keys).await.unwrap().unwrap() > 50_000);
  assert!(s.release(&keys, &mine).await.unwrap());
  assert_eq!(s.lock_lease(&keys).await.unwrap(), None);
  // A released lock is not released or extended twice.
  assert!(!s.release(&keys, &mine).await.unwrap());
  assert!(!s.extend(&keys, &mine, 5_000).await.unwrap());
  assert!(s.try_lock(&keys, &theirs, 5_000).await.unwrap());
}

async fn a_contended_lock_reports_the_holders_lease<F: Fixture>(f: &F) {
  let s = f.store("contended:");
  let keys = s.keys("k");
  assert_eq!(
    s.lock(&keys, &lock_token(), 5_000).await.unwrap(),
    LockAttempt::Won
  );
  match s.lock(&keys, &lock_token(), 5_000).await.unwrap() {
    LockAttempt::Held(lease) => assert!(lease > 4_000 && lease <= 5_000, "{lease}"),
    other => panic!("the lock was taken twice: {other:?}"),
  }
}

async fn a_lock_expires_by_itself<F: Fixture>(f: &F) {
  let s = f.store("expires:");
  let keys = s.keys("k");
  assert!(s.try_lock(&keys, &lock_token(), 50).await.unwrap());
  tokio::time::sleep(Duration::from_millis(120)).await;
  assert_eq!(s.lock_lease(&keys).await.unwrap(), None);
  assert!(s.try_lock(&keys, &lock_token(), 50).await.unwrap());
}

/// A lock key no instance can have set (no TTL, not a token, another
/// type) is garbage: the next caller takes the lock at once instead of
/// waiting (or, before, spinning) until its hardTimeout.
async fn a_garbage_lock_is_replaced<F: Fixture>(f: &F) {
  let s = f.store("garbage:");
  for (i, garbage) in GARBAGE.into_iter().enumerate() {
    let key = format!("g{i}");
    f.plant_lock(&s, &key, garbage).await;
    let keys = s.keys(&key);
    let mine = lock_token();
    assert_eq!(
      s.lock(&keys, &mine, 5_000).await.unwrap(),
      LockAttempt::Won,
      "{garbage:?}"
    );
    // It is a real lock now: ours, with a lease, released by our token.
    let lease = s.lock_lease(&keys).await.unwrap().unwrap();
    assert!(lease > 4_000 && lease <= 5_000, "{garbage:?}: {lease}");
    assert!(s.release(&keys, &mine).await.unwrap(), "{garbage:?}");
  }
  // Calls that compare our token never fail on another type.
  f.plant_lock(&s, "f", Garbage::List).await;
  let keys = s.keys("f");
  assert!(!s.release(&keys, &lock_token()).await.unwrap());
  assert!(!s.extend(&keys, &lock_token(), 5_000).await.unwrap());
  assert!(s
    .write("f", &keys, &envelope(1, "1"), 60_000, Some(&lock_token()))
    .await
    .unwrap());
}

async fn a_write_releases_our_lock_but_not_someone_elses<F: Fixture>(f: &F) {
  let s = f.store("release:");
  let keys = s.keys("k");
  let mine = lock_token();
  assert!(s.try_lock(&keys, &mine, 5_000).await.unwrap());
  assert!(s
    .write("k", &keys, &envelope(1, "1"), 60_000, Some(&mine))
    .await
    .unwrap());
  assert_eq!(s.lock_lease(&keys).await.unwrap(), None);
  // Our lease ran out and another instance holds the lock now.
  let theirs = lock_token();
  assert!(s.try_lock(&keys, &theirs, 5_000).await.unwrap());
  assert!(s
    .write("k", &keys, &envelope(2, "2"), 60_000, Some(&mine))
    .await
    .unwrap());
  assert!(s.lock_lease(&keys).await.unwrap().is_some());
  assert!(!s.try_lock(&keys, &mine, 5_000).await.unwrap());
  // A write that loses to a newer value still releases the writer's lock:
  // the late loader is done either way.
  assert!(s.release(&keys, &theirs).await.unwrap());
  assert!(s.try_lock(&keys, &mine, 5_000).await.unwrap());
  assert!(!s
    .write("k", &keys, &envelope(1, "late"), 60_000, Some(&mine))
    .await
    .unwrap());
  assert_eq!(s.lock_lease(&keys).await.unwrap(), None);
}

async fn writes_deletes_and_clears_are_announced_and_wake_waiters<F: Fixture>(f: &F) {
  let s = f.store("announce:");
  let recorder = Recorder::start(&s).await;
  let keys = s.keys("k");
  let waiter = recorder.events.wait("k");
  let mut other = recorder.events.wait("other");
  assert!(s
    .write("k", &keys, &envelope(1, "1"), 60_000, None)
    .await
    .unwrap());
  tokio::time::timeout(Duration::from_secs(5), waiter)
    .await
    .expect("the fill notice wakes the waiter")
    .unwrap();
  assert!(s.delete("k", &keys, live(2)).await.unwrap());
  assert!(
    !s.delete("k", &keys, live(3)).await.unwrap(),
    "a tombstone is no value"
  );
  recorder.first(3).await;
  // A clear wakes every waiter (and removes the delete's tombstone).
  let after_clear = recorder.events.wait("k");
  assert_eq!(s.clear(ClearScope::All, None).await.unwrap(), 1);
  let origin = s.origin().to_string();
  assert_eq!(
    recorder.first(4).await,
    [
      Event::new(&origin, Change::Filled("k".into())),
      Event::new(&origin, Change::Deleted("k".into())),
      Event::new(&origin, Change::Deleted("k".into())),
      Event::new(&origin, Change::Cleared),
    ]
  );
  tokio::time::timeout(Duration::from_secs(5), after_clear)
    .await
    .expect("the clear wakes the waiter")
    .unwrap();
  tokio::time::timeout(Duration::from_secs(5), &mut other)
    .await
    .expect("the clear wakes a waiter of any key")
    .unwrap();
  assert_eq!(recorder.events.waiting("k"), 0);
}

/// Another instance's changes reach a subscription, named by that
/// instance's origin (so the fleet can skip its own); another prefix's do
/// not; a key's waiter is woken by that key's events only.
async fn a_subscription_delivers_other_origins_events_of_its_prefix_only<F: Fixture>(f: &F) {
  let a = f.store("fleet:");
  let b = f.store("fleet:");
  let elsewhere = f.store("elsewhere:");
  assert_ne!(a.origin(), b.origin());
  assert!(!a.origin().contains(' ') && !a.origin().is_empty());
  let at_b = Recorder::start(&b).await;
  let at_elsewhere = Recorder::start(&elsewhere).await;
  let mut other_key = at_b.events.wait("other");
  let keys = a.keys("k");
  assert!(a
    .write("k", &keys, &envelope(1, "1"), 60_000, None)
    .await
    .unwrap());
  assert!(a.delete("k", &keys, live(1)).await.unwrap());
  let origin = a.origin().to_string();
  assert_eq!(
    at_b.first(2).await,
    [
      Event::new(&origin, Change::Filled("k".into())),
      Event::new(&origin, Change::Deleted("k".into())),
    ]
  );
  assert!(other_key.try_recv().is_err(), "woken by another key");
  // The other prefix's subscription saw none of it: its first event is its
  // own, published after a's.
  elsewhere
    .delete("k", &elsewhere.keys("k"), live(1))
    .await
    .unwrap();
  assert_eq!(
    at_elsewhere.first(1).await,
    [Event::new(elsewhere.origin(), Change::Deleted("k".into()))]
  );
}

async fn clear_removes_only_this_prefix<F: Fixture>(f: &F) {
  // A glob character in the prefix matches only itself.
  let mine = f.store("app*1:");
  let theirs = f.store("app:");
  for i in 0..1_200 {
    let key = format!("k{i}");
    mine
      .write(&key, &mine.keys(&key), &envelope(1, "1"), 60_000, None)
      .await
      .unwrap();
  }
  theirs
    .write("k0", &theirs.keys("k0"), &envelope(1, "1"), 60_000, None)
    .await
    .unwrap();
  assert_eq!(mine.clear(ClearScope::All, None).await.unwrap(), 1_200);
  assert_eq!(mine.read(&mine.keys("k0")).await.unwrap(), Read::Missing);
  assert!(matches!(
    theirs.read(&theirs.keys("k0")).await.unwrap(),
    Read::Found(_)
  ));
}

/// A namespace's clear (`clear_prefix`): the keys starting with its
/// sub-prefix go, in more than one SCAN batch (on a cluster, from every
/// primary), and no other (a nested namespace's go with it; glob
/// characters match only themselves; another prefix is untouched); it is
/// announced, wakes the waiters of its keys only, and replayed spares
/// newer values.
async fn a_namespace_clear_removes_its_keys_only_and_is_announced<F: Fixture>(f: &F) {
  let s = f.store("ns*1:");
  let elsewhere = f.store("ns:");
  let recorder = Recorder::start(&s).await;
  let put = |key: String, stamp: u64| {
    let s = &s;
    async move {
      assert!(s
        .write(&key, &s.keys(&key), &envelope(stamp, "1"), 60_000, None)
        .await
        .unwrap());
    }
  };
  for i in 0..600 {
    put(format!("users:k{i}"), 1).await;
  }
  put("users:eu:1".into(), 1).await;
  for kept in ["users\\:x", "usersX", "feed:1", "ab:1"] {
    put(kept.into(), 1).await;
  }
  elsewhere
    .write(
      "users:k0",
      &elsewhere.keys("users:k0"),
      &envelope(1, "1"),
      60_000,
      None,
    )
    .await
    .unwrap();
  let woken = recorder.events.wait("users:k1");
  let mut not_woken = recorder.events.wait("feed:1");
  assert_eq!(
    s.clear(ClearScope::Namespace("users:"), None)
      .await
      .unwrap(),
    601
  );
  for gone in ["users:k0", "users:k599", "users:eu:1"] {
    assert_eq!(
      s.read(&s.keys(gone)).await.unwrap(),
      Read::Missing,
      "{gone}"
    );
  }
  for kept in ["users\\:x", "usersX", "feed:1", "ab:1"] {
    assert!(
      matches!(s.read(&s.keys(kept)).await.unwrap(), Read::Found(_)),
      "{kept}"
    );
  }
  assert!(matches!(
    elsewhere.read(&elsewhere.keys("users:k0")).await.unwrap(),
    Read::Found(_)
  ));
  let origin = s.origin().to_string();
  let cleared = Event::new(&origin, Change::PrefixCleared("users:".into()));
  wait_until("the namespace's clear announced", || {
    recorder.seen.lock().unwrap().contains(&cleared)
  })
  .await;
  tokio::time::timeout(Duration::from_secs(5), woken)
    .await
    .expect("the namespace's clear wakes a waiter of its keys")
    .unwrap();
  assert!(
    not_woken.try_recv().is_err(),
    "woken by another namespace's clear"
  );
  // A glob character in the namespace matches only itself.
  assert_eq!(
    s.clear(ClearScope::Namespace("a*:"), None).await.unwrap(),
    0
  );
  assert!(matches!(
    s.read(&s.keys("ab:1")).await.unwrap(),
    Read::Found(_)
  ));
  // Replayed: values newer than the clear are spared.
  put("users:old".into(), 100).await;
  put("users:new".into(), 400).await;
  put("feed:old".into(), 100).await;
  assert_eq!(
    s.clear(ClearScope::Namespace("users:"), Some(250))
      .await
      .unwrap(),
    1
  );
  assert_eq!(s.read(&s.keys("users:old")).await.unwrap(), Read::Missing);
  assert!(matches!(
    s.read(&s.keys("users:new")).await.unwrap(),
    Read::Found(e) if e.meta.stamp == 400
  ));
  assert!(matches!(
    s.read(&s.keys("feed:old")).await.unwrap(),
    Read::Found(_)
  ));
  wait_until("the replayed clear announced", || {
    recorder
      .seen
      .lock()
      .unwrap()
      .iter()
      .filter(|e| **e == cleared)
      .count()
      == 2
  })
  .await;
  assert!(
    s.clear(ClearScope::Namespace(""), None).await.is_err(),
    "an empty prefix is not taken for a whole clear"
  );
}

/// Auto-recovery's replays: a delete or clear made at a stamp removes what
/// is not newer (a corrupt value included) and spares a newer value, and is
/// announced either way.
/// A delete leaves a tombstone stamped with it: read as nothing there, but
/// a fill from a load that began before the delete (an older stamp) cannot
/// land over it, so the delete is not undone by a load in flight. A live
/// delete lands over anything, stamped after what it replaced; a `set` and
/// a later load land over it; it dies after its `px`.
async fn a_delete_leaves_a_tombstone_no_older_fill_overwrites<F: Fixture>(f: &F) {
  let s = f.store("tombstone:");
  let keys = s.keys("k");
  let write = |stamp: u64, json: &'static str| {
    let (s, keys) = (&s, &keys);
    async move {
      s.write("k", keys, &envelope(stamp, json), 60_000, None)
        .await
        .unwrap()
    }
  };
  let json = |read: Read| match read {
    Read::Found(e) => e.body.json().map(String::from),
    _ => None,
  };
  assert!(write(100, "\"old\"").await);
  assert!(s.delete("k", &keys, live(150)).await.unwrap());
  assert_eq!(s.read(&keys).await.unwrap(), Read::Missing);
  assert_eq!(
    s.read_many(std::slice::from_ref(&keys)).await.unwrap(),
    [Read::Missing]
  );
  assert!(
    !s.expire("k", &keys, 150, 60_000).await.unwrap(),
    "nothing to expire"
  );
  assert!(
    !write(120, "\"late\"").await,
    "a load begun before the delete"
  );
  assert_eq!(s.read(&keys).await.unwrap(), Read::Missing);
  let ttl = f.value_ttl(&s, "k").await;
  assert!(
    ttl > 50_000 && ttl <= 60_000,
    "the tombstone lives its px: {ttl}"
  );
  assert!(write(151, "\"after\"").await, "a load begun after it");
  assert_eq!(
    json(s.read(&keys).await.unwrap()).as_deref(),
    Some("\"after\"")
  );
  // A live delete stamped earlier than the value (a clock behind) still
  // lands, one past it: the value's own load cannot write it back.
  assert!(s.delete("k", &keys, live(140)).await.unwrap());
  assert!(!write(151, "\"after\"").await);
  assert_eq!(s.read(&keys).await.unwrap(), Read::Missing);
  let stamp = s
    .write_newest("k", &keys, &envelope(100, "\"set\""), 60_000)
    .await
    .unwrap();
  assert_eq!(stamp, 153, "a set lands over a tombstone, stamped after it");
  assert_eq!(
    json(s.read(&keys).await.unwrap()).as_deref(),
    Some("\"set\"")
  );
  // Replayed: spares a newer value, and otherwise leaves its tombstone.
  assert!(!s.delete("k", &keys, replayed(152)).await.unwrap());
  assert!(s.delete("k", &keys, replayed(200)).await.unwrap());
  assert!(!write(190, "\"late\"").await);
  assert_eq!(s.read(&keys).await.unwrap(), Read::Missing);
  // A tombstone dies after its px.
  let short = Deletion {
    px: 50,
    ..live(300)
  };
  s.delete("k", &keys, short).await.unwrap();
  assert!(f.value_ttl(&s, "k").await > 0);
  tokio::time::sleep(Duration::from_millis(150)).await;
  assert_eq!(f.value_ttl(&s, "k").await, -2);
}

async fn an_expire_makes_a_value_stale_and_keeps_it_until_its_hard_ttl<F: Fixture>(f: &F) {
  let s = f.store("expire:");
  let recorder = Recorder::start(&s).await;
  for (key, stamp) in [("live", 100), ("newer", 300)] {
    assert!(s
      .write(key, &s.keys(key), &envelope(stamp, "[1]"), 60_000, None)
      .await
      .unwrap());
  }
  f.plant_value(&s, "corrupt", b"not an envelope").await;
  f.plant_value(&s, "old-version", b"hc1 1100 10100 12 100 v\n[1]")
    .await;
  let ttl = f.value_ttl(&s, "live").await;
  for (key, at, expired) in [
    ("live", 200, true),
    ("live", 250, false), // stale by then already
    ("newer", 200, false),
    ("corrupt", 200, false),
    ("absent", 200, false),
    ("old-version", 200, true),
  ] {
    assert_eq!(
      s.expire(key, &s.keys(key), at, 60_000).await.unwrap(),
      expired,
      "{key} at {at}"
    );
  }
  let read = |key: &'static str| {
    let s = &s;
    async move { s.read(&s.keys(key)).await.unwrap() }
  };
  let stale = envelope(100, "[1]").meta.expired_at(200).unwrap();
  assert_eq!(
    read("live").await,
    Read::Found(Envelope {
      meta: stale,
      body: herdcache::core::body::Body::Json("[1]".into()),
      tags: Default::default(),
      etag: Default::default(),
    })
  );
  let left = f.value_ttl(&s, "live").await;
  assert!(
    left > 0 && left <= ttl && ttl - left < 5_000,
    "the TTL is kept: {ttl} then {left}"
  );
  assert_eq!(read("newer").await, Read::Found(envelope(300, "[1]")));
  assert!(matches!(read("corrupt").await, Read::Corrupt(_)));
  assert_eq!(read("absent").await, Read::Missing);
  assert!(matches!(
    read("old-version").await,
    Read::Found(e) if e.meta.fresh_until == 200 && e.meta.hard_until == 10_100 && e.meta.stamp == 100
  ));
  assert_eq!(
    f.value_ttl(&s, "old-version").await,
    -1,
    "no TTL was given to a value that had none"
  );
  let origin = s.origin().to_string();
  let notices = recorder
    .of_kind(6, |e| matches!(e.change, Change::Expired { .. }))
    .await;
  let expected = [
    ("live", 200),
    ("live", 250),
    ("newer", 200),
    ("corrupt", 200),
    ("absent", 200),
    ("old-version", 200),
  ]
  .map(|(key, at)| {
    Event::new(
      &origin,
      Change::Expired {
        key: key.into(),
        at,
      },
    )
  });
  assert_eq!(
    in_key_order(notices),
    in_key_order(expected.to_vec()),
    "every expire is announced, expired or not: other L1s may hold copies"
  );

  // The script and `Meta::expired_at` agree.
  let mut stamp = 1_000;
  for fresh in [0, 50, 100] {
    for refresh in [0, 25, 100] {
      for at in [0, 24, 25, 49, 50, 99, 100, 150] {
        stamp += 1_000;
        let meta = Meta {
          fresh_until: stamp + fresh,
          hard_until: stamp + 500,
          compute_ms: 3,
          stamp,
          refresh_at: Some(stamp + refresh.min(fresh)),
          negative: at % 2 == 0,
        };
        let key = "agree";
        let original = Envelope {
          meta,
          body: herdcache::core::body::Body::Json("null".into()),
          tags: Default::default(),
          etag: Default::default(),
        };
        s.write_over(key, &s.keys(key), &original, 60_000, None, Some(stamp))
          .await
          .unwrap();
        let at = stamp + at;
        let expired = s.expire(key, &s.keys(key), at, 60_000).await.unwrap();
        let want = meta.expired_at(at);
        assert_eq!(expired, want.is_some(), "{meta:?} at {at}");
        let Read::Found(e) = read(key).await else {
          panic!("{meta:?}")
        };
        assert_eq!(e.meta, want.unwrap_or(meta), "{meta:?} at {at}");
      }
    }
  }
}

/// A load begun before an expire may have read what changed: its fill is
/// not written after it (kept out for the marker's life), whatever is
/// stored; a load begun after it is. An older expire never lowers the
/// marker.
async fn an_expire_keeps_out_the_fills_of_loads_begun_before_it<F: Fixture>(f: &F) {
  let s = f.store("expire-marker:");
  for key in ["stored", "absent"] {
    if key == "stored" {
      assert!(s
        .write(key, &s.keys(key), &envelope(100, "[1]"), 60_000, None)
        .await
        .unwrap());
    }
    s.expire(key, &s.keys(key), 200, 60_000).await.unwrap();
    // Older expires change nothing.
    s.expire(key, &s.keys(key), 150, 60_000).await.unwrap();
    assert!(
      !s.write(key, &s.keys(key), &envelope(180, "[2]"), 60_000, None)
        .await
        .unwrap(),
      "{key}: a load begun at 180, before the expire at 200, is not written"
    );
    assert!(
      s.write(key, &s.keys(key), &envelope(210, "[3]"), 60_000, None)
        .await
        .unwrap(),
      "{key}: a load begun after the expire is written"
    );
    assert_eq!(
      s.read(&s.keys(key)).await.unwrap(),
      Read::Found(envelope(210, "[3]"))
    );
  }
  // The marker lives as long as it was asked to.
  let key = "short";
  s.expire(key, &s.keys(key), 200, 50).await.unwrap();
  tokio::time::sleep(std::time::Duration::from_millis(120)).await;
  assert!(s
    .write(key, &s.keys(key), &envelope(180, "[2]"), 60_000, None)
    .await
    .unwrap());
}

async fn tags_are_kept_with_the_value_and_their_stamps_only_rise<F: Fixture>(f: &F) {
  let s = f.store("tags:");
  let recorder = Recorder::start(&s).await;
  let tags = |list: &[&str]| Tags::new(list.iter().map(|t| t.to_string()).collect()).unwrap();
  let tagged = Envelope {
    tags: tags(&["user:1", "tenant 7"]),
    etag: Default::default(),
    ..envelope(100, "{\"a\":1}")
  };
  let key = "tagged";
  assert!(s
    .write(key, &s.keys(key), &tagged, 60_000, None)
    .await
    .unwrap());
  assert_eq!(
    s.read(&s.keys(key)).await.unwrap(),
    Read::Found(tagged.clone())
  );
  // An expire rewrites the header and keeps the tags; so do batched reads.
  assert!(s.expire(key, &s.keys(key), 200, 60_000).await.unwrap());
  let expired = Envelope {
    meta: tagged.meta.expired_at(200).unwrap(),
    ..tagged.clone()
  };
  assert_eq!(
    s.read_many(&[s.keys(key), s.keys("none")]).await.unwrap(),
    [Read::Found(expired), Read::Missing]
  );
  // A newer untagged value replaces it, tags and all.
  assert!(s
    .write(key, &s.keys(key), &envelope(300, "2"), 60_000, None)
    .await
    .unwrap());
  assert_eq!(
    s.read(&s.keys(key)).await.unwrap(),
    Read::Found(envelope(300, "2"))
  );
  f.plant_value(&s, "bad-tags", b"hc3 1100 10100 12 100 1000 v\n[\"\"]\n1")
    .await;
  assert!(matches!(
    s.read(&s.keys("bad-tags")).await.unwrap(),
    Read::Corrupt(_)
  ));

  let all = ["user:1".to_string(), "never".to_string()];
  assert_eq!(s.tag_stamps(&all).await.unwrap(), [0, 0]);
  assert!(s.invalidate_tag("user:1", 500, 60_000).await.unwrap());
  assert!(
    !s.invalidate_tag("user:1", 400, 60_000).await.unwrap(),
    "an older stamp never lowers it"
  );
  assert!(s.invalidate_tag("user:1", 600, 1_000).await.unwrap());
  assert_eq!(s.tag_stamps(&all).await.unwrap(), [600, 0]);
  let ttl = f.tag_stamp_ttl(&s, "user:1").await;
  assert!(
    ttl > 50_000 && ttl <= 60_000,
    "a shorter life asked later does not shorten it: {ttl}"
  );
  f.plant_tag_stamp(&s, "junk", b"not a stamp").await;
  assert_eq!(s.tag_stamps(&["junk".to_string()]).await.unwrap(), [0]);
  assert!(s.invalidate_tag("junk", 700, 5_000).await.unwrap());
  assert_eq!(s.tag_stamps(&["junk".to_string()]).await.unwrap(), [700]);

  let origin = s.origin().to_string();
  let notices = recorder
    .of_kind(4, |e| matches!(e.change, Change::Tagged { .. }))
    .await;
  let mut expected: Vec<Event> = [
    ("user:1", 500),
    ("user:1", 400),
    ("user:1", 600),
    ("junk", 700),
  ]
  .map(|(tag, at)| {
    Event::new(
      &origin,
      Change::Tagged {
        tag: tag.into(),
        at,
      },
    )
  })
  .to_vec();
  let by_tag = |e: &Event| match &e.change {
    Change::Tagged { tag, .. } => tag.clone(),
    _ => String::new(),
  };
  let mut notices = notices;
  notices.sort_by_key(by_tag);
  expected.sort_by_key(by_tag);
  assert_eq!(
    notices, expected,
    "every invalidation is announced, raised or not: an instance may hold an older stamp"
  );
}

async fn replayed_deletes_and_clears_spare_newer_values_and_are_announced<F: Fixture>(f: &F) {
  let s = f.store("replay:");
  let recorder = Recorder::start(&s).await;
  let write = |key: &'static str, stamp: u64| {
    let s = &s;
    async move {
      assert!(s
        .write(key, &s.keys(key), &envelope(stamp, "1"), 60_000, None)
        .await
        .unwrap());
    }
  };
  write("older", 100).await;
  write("same", 200).await;
  write("newer", 300).await;
  f.plant_value(&s, "corrupt", b"not an envelope").await;
  for (key, deleted) in [
    ("older", true),
    ("same", true),
    ("newer", false),
    ("corrupt", true),
    ("absent", true),
  ] {
    let answer = s.delete(key, &s.keys(key), replayed(200)).await.unwrap();
    assert_eq!(answer, deleted, "{key}");
  }
  assert_eq!(s.read(&s.keys("older")).await.unwrap(), Read::Missing);
  assert_eq!(s.read(&s.keys("corrupt")).await.unwrap(), Read::Missing);
  assert!(matches!(
    s.read(&s.keys("newer")).await.unwrap(),
    Read::Found(e) if e.meta.stamp == 300
  ));
  let origin = s.origin().to_string();
  let deletes: Vec<Event> = recorder
    .first(7)
    .await
    .into_iter()
    .filter(|e| matches!(e.change, Change::Deleted(_)))
    .collect();
  assert_eq!(
    in_key_order(deletes),
    in_key_order(
      ["older", "same", "corrupt", "absent"]
        .map(|k| Event::new(&origin, Change::Deleted(k.into())))
        .to_vec()
    ),
    "every delete but the spared one is announced"
  );

  write("a", 100).await;
  write("b", 400).await;
  // "a", and the four tombstones the deletes at 200 left: older than 250.
  assert_eq!(s.clear(ClearScope::All, Some(250)).await.unwrap(), 5);
  assert_eq!(s.read(&s.keys("a")).await.unwrap(), Read::Missing);
  assert!(matches!(
    s.read(&s.keys("b")).await.unwrap(),
    Read::Found(_)
  ));
  assert!(matches!(
    s.read(&s.keys("newer")).await.unwrap(),
    Read::Found(_)
  ));
  assert_eq!(
    recorder.first(10).await[9],
    Event::new(&origin, Change::Cleared)
  );
}

/// The fleet's refresh back-off: a marker a failed background refresh
/// leaves, which stops other background refreshes (not foreground loads)
/// from taking the lock until it expires.
async fn a_failed_refresh_backs_off_background_refreshes_until_its_marker_expires<F: Fixture>(
  f: &F,
) {
  let s = f.store("backoff:");
  let keys = s.keys("k");
  let mine = lock_token();
  assert_eq!(s.backoff(&keys).await.unwrap(), None);
  assert!(s.try_lock(&keys, &mine, 5_000).await.unwrap());
  assert!(
    s.fail_refresh(&keys, Some(&mine), 3, 300).await.unwrap(),
    "our lock is released"
  );
  assert_eq!(s.lock_lease(&keys).await.unwrap(), None);
  let (failures, left) = s.backoff(&keys).await.unwrap().unwrap();
  assert_eq!(failures, 3);
  assert!(left > 0 && left <= 300, "{left}");
  match s.lock_refresh(&keys, &lock_token(), 5_000).await.unwrap() {
    LockAttempt::BackingOff { failures: 3, ms } => assert!(ms > 0 && ms <= 300, "{ms}"),
    other => panic!("a background refresh took the lock while backing off: {other:?}"),
  }
  assert_eq!(
    s.lock_lease(&keys).await.unwrap(),
    None,
    "backing off takes no lock"
  );
  // A foreground load ignores the marker.
  let theirs = lock_token();
  assert_eq!(
    s.lock(&keys, &theirs, 5_000).await.unwrap(),
    LockAttempt::Won
  );
  match s.lock_refresh(&keys, &lock_token(), 5_000).await.unwrap() {
    LockAttempt::BackingOff { .. } => {}
    other => panic!("the marker comes first: {other:?}"),
  }
  assert!(s.release(&keys, &theirs).await.unwrap());
  // Once it expired, a background refresh takes the lock as `lock` does.
  tokio::time::sleep(Duration::from_millis(350)).await;
  assert_eq!(s.backoff(&keys).await.unwrap(), None);
  let next = lock_token();
  assert_eq!(
    s.lock_refresh(&keys, &next, 5_000).await.unwrap(),
    LockAttempt::Won
  );
  match s.lock_refresh(&keys, &lock_token(), 5_000).await.unwrap() {
    LockAttempt::Held(lease) => assert!(lease > 4_000 && lease <= 5_000, "{lease}"),
    other => panic!("the lock was taken twice: {other:?}"),
  }
  assert!(s.release(&keys, &next).await.unwrap());
}

async fn a_failed_refresh_releases_our_lock_but_not_someone_elses<F: Fixture>(f: &F) {
  let s = f.store("backoff-lock:");
  let keys = s.keys("k");
  let (mine, theirs) = (lock_token(), lock_token());
  assert!(s.try_lock(&keys, &theirs, 5_000).await.unwrap());
  assert!(!s.fail_refresh(&keys, Some(&mine), 1, 60_000).await.unwrap());
  assert!(
    s.lock_lease(&keys).await.unwrap().is_some(),
    "their lock stays"
  );
  assert_eq!(s.backoff(&keys).await.unwrap().map(|b| b.0), Some(1));
  // Without a lock (Redis was skipped when the load started) the marker is
  // still left; a later failure replaces it with its own count.
  assert!(!s.fail_refresh(&keys, None, 2, 60_000).await.unwrap());
  assert_eq!(s.backoff(&keys).await.unwrap().map(|b| b.0), Some(2));
}

async fn a_write_ends_the_back_off<F: Fixture>(f: &F) {
  let s = f.store("backoff-write:");
  let keys = s.keys("k");
  s.fail_refresh(&keys, None, 4, 60_000).await.unwrap();
  assert!(s.backoff(&keys).await.unwrap().is_some());
  assert!(s
    .write("k", &keys, &envelope(1, "1"), 60_000, None)
    .await
    .unwrap());
  assert_eq!(s.backoff(&keys).await.unwrap(), None);
  assert_eq!(
    s.lock_refresh(&keys, &lock_token(), 5_000).await.unwrap(),
    LockAttempt::Won
  );
}

/// A marker no instance can have left (no TTL, not a count, another type)
/// cannot stop a key's refreshes.
async fn a_garbage_back_off_marker_is_ignored<F: Fixture>(f: &F) {
  let s = f.store("backoff-garbage:");
  for (i, garbage) in GARBAGE.into_iter().enumerate() {
    let key = format!("g{i}");
    f.plant_backoff(&s, &key, garbage).await;
    let keys = s.keys(&key);
    let mine = lock_token();
    assert_eq!(
      s.lock_refresh(&keys, &mine, 5_000).await.unwrap(),
      LockAttempt::Won,
      "{garbage:?}"
    );
    assert!(s.release(&keys, &mine).await.unwrap(), "{garbage:?}");
    // A failure replaces it with a real marker.
    s.fail_refresh(&keys, None, 1, 60_000).await.unwrap();
    assert_eq!(
      s.backoff(&keys).await.unwrap().map(|b| b.0),
      Some(1),
      "{garbage:?}"
    );
  }
}

/// `(granted, free, waiting)` of one call on the load slots: `held` held,
/// `wanted` more wanted, of `cap`, the holding living `lease` ms and a place
/// in the queue `wait` ms.
async fn slots<S: SharedStore>(
  s: &S,
  held: u64,
  wanted: u64,
  cap: u64,
  lease: u64,
  wait: u64,
) -> (u64, u64, u64) {
  let call = SlotCall {
    held,
    wanted,
    cap,
    lease,
    wait,
  };
  let grant = s.load_slots(call).await.unwrap();
  (grant.granted, grant.free, grant.waiting)
}

/// The fleet's load slots: never more granted than the cap; alone, an
/// instance takes all that is free; while others want slots too, it holds
/// no more than an equal share, and what the instances queued before it
/// lack of theirs is kept for them, whoever asks first (and freed slots
/// are announced, so they ask); the holding is sent whole, so a repeat
/// changes nothing.
async fn load_slots_are_capped_and_handed_out_in_turn<F: Fixture>(f: &F) {
  let (x, y, z) = (
    f.store("slots-turn:"),
    f.store("slots-turn:"),
    f.store("slots-turn:"),
  );
  let recorder = Recorder::start(&y).await;
  const CAP: u64 = 4;
  const LONG: u64 = 60_000;
  assert_eq!(
    slots(&x, 0, 8, CAP, LONG, LONG).await,
    (4, 0, 0),
    "alone, x takes all"
  );
  let wants_eight = SlotCall {
    held: 0,
    wanted: 8,
    cap: CAP,
    lease: LONG,
    wait: LONG,
  };
  let at_y = y.load_slots(wants_eight).await.unwrap();
  assert_eq!(
    (at_y.granted, at_y.free, at_y.waiting),
    (0, 0, 1),
    "y queues"
  );
  let at_z = z.load_slots(wants_eight).await.unwrap();
  assert_eq!(
    (at_z.granted, at_z.free, at_z.waiting),
    (0, 0, 2),
    "z queues behind it"
  );
  assert!(0 < at_y.ticket && at_y.ticket < at_z.ticket);
  // x gives two back but wants more: with three wanting, its share (4/3,
  // rounded up) is two, which it holds; the two free slots are announced
  // to the first two waiting, y and z.
  assert_eq!(slots(&x, 2, 4, CAP, LONG, LONG).await, (0, 2, 2));
  let freed = recorder
    .of_kind(1, |e| matches!(e.change, Change::SlotsFreed { .. }))
    .await;
  assert_eq!(
    freed[0],
    Event::new(x.origin(), Change::SlotsFreed { up_to: at_z.ticket })
  );
  assert_eq!(
    slots(&z, 0, 8, CAP, LONG, LONG).await,
    (0, 2, 2),
    "z asks first, but y queued before it: y's share is kept"
  );
  assert_eq!(
    slots(&y, 0, 8, CAP, LONG, LONG).await,
    (2, 0, 2),
    "y gets its share"
  );
  let told = recorder
    .of_kind(2, |e| matches!(e.change, Change::SlotsFreed { .. }))
    .await;
  assert_eq!(
    told[1],
    Event::new(z.origin(), Change::SlotsFreed { up_to: at_y.ticket }),
    "z's call announced the two free slots up to y's place (x's and y's), not z's"
  );
  assert_eq!(
    slots(&y, 2, 6, CAP, LONG, LONG).await,
    (0, 0, 2),
    "a repeat of the holding changes nothing"
  );
  assert_eq!(
    slots(&x, 0, 0, CAP, LONG, LONG).await,
    (0, 2, 2),
    "x is done"
  );
  assert_eq!(
    slots(&y, 2, 6, CAP, LONG, LONG).await,
    (0, 2, 1),
    "y holds its share (two wanting: 2 each): the free slots are z's"
  );
  assert_eq!(slots(&z, 0, 8, CAP, LONG, LONG).await, (2, 0, 1));
  // Everyone gives back: nothing held, nobody waits.
  for s in [&x, &y, &z] {
    slots(s, 0, 0, CAP, LONG, LONG).await;
  }
  assert_eq!(slots(&x, 0, 0, CAP, LONG, LONG).await, (0, CAP, 0));
}

/// An instance that stops calling (it crashed) frees what it held when its
/// lease ends, and its place in the queue when that lapses.
async fn the_load_slots_of_a_silent_instance_come_back<F: Fixture>(f: &F) {
  let (x, y, z) = (
    f.store("slots-silent:"),
    f.store("slots-silent:"),
    f.store("slots-silent:"),
  );
  const CAP: u64 = 2;
  const LONG: u64 = 60_000;
  assert_eq!(slots(&x, 0, 2, CAP, 150, LONG).await, (2, 0, 0));
  assert_eq!(slots(&y, 0, 2, CAP, LONG, LONG).await, (0, 0, 0));
  tokio::time::sleep(Duration::from_millis(300)).await;
  assert_eq!(
    slots(&y, 0, 2, CAP, LONG, LONG).await,
    (2, 0, 0),
    "x's lease ended: its slots are y's"
  );
  // y holds both; z queues and goes silent; x waits behind it.
  assert_eq!(slots(&z, 0, 1, CAP, LONG, 150).await, (0, 0, 0));
  assert_eq!(slots(&x, 0, 1, CAP, LONG, LONG).await, (0, 0, 1));
  assert_eq!(slots(&y, 1, 0, CAP, LONG, LONG).await, (0, 1, 2));
  assert_eq!(
    slots(&x, 0, 1, CAP, LONG, LONG).await,
    (0, 1, 1),
    "z's place holds the freed slot while it lives"
  );
  tokio::time::sleep(Duration::from_millis(300)).await;
  assert_eq!(
    slots(&x, 0, 1, CAP, LONG, LONG).await,
    (1, 0, 0),
    "z's place lapsed: the slot is x's"
  );
  for s in [&x, &y] {
    slots(s, 0, 0, CAP, LONG, LONG).await;
  }
}

/// What no instance writes where the load slots go (another type, a field
/// that is not an instance's) is replaced or dropped: it can neither block
/// the slots nor make a call fail.
async fn garbage_where_the_load_slots_go_is_replaced<F: Fixture>(f: &F) {
  let s = f.store("slots-garbage:");
  for garbage in GARBAGE {
    f.plant_load_slots(&s, garbage).await;
    assert_eq!(
      slots(&s, 0, 2, 2, 60_000, 60_000).await,
      (2, 0, 0),
      "{garbage:?}"
    );
    assert_eq!(
      slots(&s, 0, 0, 2, 60_000, 60_000).await,
      (0, 2, 0),
      "{garbage:?}"
    );
  }
}
