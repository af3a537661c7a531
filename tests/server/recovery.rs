//! Auto-recovery (`engine::recovery`, `Fleet::write`/`delete`/`clear`): the
//! calls that could not reach Redis are kept, replayed once it answers
//! again (reconciled by write stamp, announced), bounded, hidden from reads
//! meanwhile, and reported at close. Fleets on one real redis-server, which
//! is paused (SIGSTOP) for the outage.

use crate::support;

use herdcache::core::envelope::Envelope;
use herdcache::core::fleet::Change;
use herdcache::engine::clock::Clock;
use herdcache::engine::fleet::{Acquired, Fleet, FleetConfig, Invalidation, Terms, Undelivered};
use herdcache::engine::shared::{
  ClearScope, Deletion, Events, LockAttempt, Read, RedisStore, RedisTimeouts, SharedStore,
};
use redis::{RedisError, RedisResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{envelope, wall_ms, RedisServer};

const PREFIX: &str = "recovery:";
/// Short bounds, so an outage opens the breaker fast and a replay comes soon.
const TIMEOUT: Duration = Duration::from_millis(300);
const COOLDOWN: u64 = 300;

fn store(server: &RedisServer) -> RedisStore {
  let timeouts = RedisTimeouts {
    connect: TIMEOUT,
    command: TIMEOUT,
    retries: 1,
  };
  RedisStore::open(&server.url(), PREFIX, timeouts).unwrap()
}

fn config(max_entries: usize) -> FleetConfig {
  FleetConfig {
    lock_ttl: 5_000,
    hard_timeout: 10_000,
    breaker_cooldown: COOLDOWN,
    clock: Clock::default(),
    recovery_max_entries: max_entries,
    recovery_max_age: 300_000,
    load_slots: None,
    serializer: "json".into(),
  }
}

fn fleet(server: &RedisServer) -> Arc<Fleet> {
  Fleet::start(store(server), config(10_000))
}

fn terms() -> Terms {
  Terms {
    now: wall_ms(),
    accept_stale: false,
    newer_than: None,
    refresh: false,
  }
}

/// Polls `pred`, for 8 s at most.
async fn wait_until(what: &str, mut pred: impl FnMut() -> bool) {
  let deadline = Instant::now() + Duration::from_secs(8);
  while !pred() {
    assert!(Instant::now() < deadline, "timed out waiting for {what}");
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
}

/// Waits until `to` hears `from`'s changes (its subscription is live).
async fn hears<S: SharedStore>(from: &Fleet<S>, to: &Fleet) {
  let deadline = Instant::now() + Duration::from_secs(8);
  let probe = Invalidation::Changed(Change::Deleted("probe".into()));
  loop {
    assert!(Instant::now() < deadline, "the subscription never came up");
    from.delete("probe").await.expect("redis answers");
    tokio::time::sleep(Duration::from_millis(20)).await;
    if to.invalidations().take().contains(&probe) {
      return;
    }
  }
}

/// What Redis holds under `key`'s value name: the envelope's JSON line
/// (nothing for a delete's tombstone).
async fn stored(server: &RedisServer, key: &str) -> Option<String> {
  let mut c = redis::Client::open(server.url())
    .unwrap()
    .get_multiplexed_async_connection()
    .await
    .unwrap();
  let name = herdcache::core::fleet::RedisKeys::new(PREFIX, key).value;
  let bytes: Option<String> = redis::cmd("GET")
    .arg(name)
    .query_async(&mut c)
    .await
    .unwrap();
  let tombstone = |text: &str| {
    text
      .split_once('\n')
      .and_then(|(header, _)| Envelope::decode_header(header).ok())
      .is_some_and(|meta| meta.is_tombstone())
  };
  bytes.filter(|text| !tombstone(text)).map(|text| {
    text
      .split_once('\n')
      .map_or(text.clone(), |(_, json)| json.to_string())
  })
}

async fn plant(server: &RedisServer, key: &str, bytes: &str) {
  let mut c = redis::Client::open(server.url())
    .unwrap()
    .get_multiplexed_async_connection()
    .await
    .unwrap();
  let name = herdcache::core::fleet::RedisKeys::new(PREFIX, key).value;
  let _: () = redis::cmd("SET")
    .arg(name)
    .arg(bytes)
    .query_async(&mut c)
    .await
    .unwrap();
}

fn recovered<S: SharedStore>(f: &Fleet<S>) -> u64 {
  f.counters.recovered.load(Ordering::Relaxed)
}

fn dropped<S: SharedStore>(f: &Fleet<S>) -> u64 {
  f.counters.recovery_dropped.load(Ordering::Relaxed)
}

/// The outage: a `delete` and a `set` made while Redis is paused
/// are kept, and once it resumes they land in Redis and reach the other
/// instance, without anybody calling again. A corrupt value under a
/// deleted key is deleted too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_made_while_redis_is_paused_are_delivered_and_published_after_it_resumes() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let (a, b) = (fleet(&server), fleet(&server));
  hears(&a, &b).await;
  let before = wall_ms() - 1_000;
  assert!(a.write("k3", envelope(before, "\"old\"")).await);
  plant(&server, "junk", "not an envelope").await;
  b.invalidations().take();

  server.pause();
  assert_eq!(a.delete("k3").await, None, "Redis did not answer");
  assert!(a.circuit_open());
  assert!(!a.write("s", envelope(wall_ms(), "\"new\"")).await);
  assert_eq!(a.delete("junk").await, None);
  assert_eq!(a.recovery_pending(), 3, "all three kept");
  server.resume();

  wait_until("the replay", || a.recovery_pending() == 0).await;
  assert_eq!((recovered(&a), dropped(&a)), (3, 0));
  assert_eq!(
    stored(&server, "k3").await,
    None,
    "the delete reached Redis"
  );
  assert_eq!(
    stored(&server, "junk").await,
    None,
    "a corrupt value is deleted"
  );
  assert_eq!(stored(&server, "s").await.as_deref(), Some("\"new\""));
  let mut heard = Vec::new();
  wait_until("b hears the replayed calls", || {
    heard.extend(b.invalidations().take());
    [
      Change::Deleted("k3".into()),
      Change::Filled("s".into()),
      Change::Deleted("junk".into()),
    ]
    .into_iter()
    .all(|c| heard.contains(&Invalidation::Changed(c)))
  })
  .await;
  assert_eq!(b.peek("k3", wall_ms()).await, None);
}

/// `deleteByTag` over the fleet: a value carrying the tag is served by
/// every instance until the tag is invalidated, then by none — neither by
/// one that heard the notice nor by one that never met the tag (it reads
/// the tag's stamp first) — and a value written after it is served again.
/// An invalidation made while Redis is paused lands once it resumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tag_invalidation_hides_its_values_everywhere_and_outlives_an_outage() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let (a, b) = (fleet(&server), fleet(&server));
  hears(&a, &b).await;
  let tagged = |stamp: u64, json: &str| Envelope {
    tags: herdcache::core::tags::Tags::new(vec!["user:1".into(), "other".into()]).unwrap(),
    etag: Default::default(),
    ..envelope(stamp, json)
  };
  let written = wall_ms() - 1_000;
  assert!(a.write("k", tagged(written, "\"old\"")).await);
  let json = |e: Option<Envelope>| e.and_then(|e| e.body.json().map(String::from));
  assert_eq!(
    json(b.peek("k", wall_ms()).await).as_deref(),
    Some("\"old\"")
  );

  server.pause();
  let at = wall_ms();
  assert_eq!(a.invalidate_tag("user:1", at, 60_000).await, None);
  assert_eq!(a.recovery_pending(), 1, "kept");
  server.resume();
  wait_until("the replay", || a.recovery_pending() == 0).await;
  assert_eq!((recovered(&a), dropped(&a)), (1, 0));
  let deadline = Instant::now() + Duration::from_secs(8);
  while b.peek("k", wall_ms()).await.is_some() {
    assert!(
      Instant::now() < deadline,
      "b still serves the invalidated value"
    );
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
  let c = fleet(&server);
  assert_eq!(
    c.peek("k", wall_ms()).await,
    None,
    "a newcomer reads the stamp"
  );
  assert!(a.write("k", tagged(at + 1, "\"new\"")).await);
  for f in [&b, &c] {
    assert_eq!(
      json(f.peek("k", wall_ms()).await).as_deref(),
      Some("\"new\"")
    );
  }
}

/// A replay is reconciled by stamp: what another instance wrote after the
/// kept call stays — a replayed `set` does not overwrite it, a replayed
/// `delete` or `clear` does not delete it — while what is older goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_does_not_undo_what_another_instance_wrote_meanwhile() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let (a, b) = (fleet(&server), fleet(&server));
  let before = wall_ms() - 1_000;
  assert!(a.write("d", envelope(before, "\"old\"")).await);
  assert!(a.write("gone", envelope(before, "\"old\"")).await);

  server.pause();
  assert!(!a.write("k", envelope(wall_ms(), "\"from a\"")).await);
  assert_eq!(a.delete("d").await, None);
  server.resume();
  // Redis is back: b writes both keys, newer than a's calls, before a's
  // replay comes (a's breaker still skips Redis for its cool-down).
  tokio::time::sleep(Duration::from_millis(5)).await;
  let later = wall_ms() + 1;
  assert!(b.write("k", envelope(later, "\"from b\"")).await);
  assert!(b.write("d", envelope(later, "\"from b\"")).await);
  assert_eq!(a.recovery_pending(), 2, "b wrote before a's replay");
  wait_until("the replay", || a.recovery_pending() == 0).await;
  assert_eq!(recovered(&a), 2, "both were delivered (and reconciled)");
  assert_eq!(stored(&server, "k").await.as_deref(), Some("\"from b\""));
  assert_eq!(stored(&server, "d").await.as_deref(), Some("\"from b\""));

  // A kept clear removes what is older than it, and spares what is newer.
  server.pause();
  assert_eq!(a.clear().await, None);
  server.resume();
  tokio::time::sleep(Duration::from_millis(5)).await;
  assert!(b.write("new", envelope(wall_ms() + 1, "\"after\"")).await);
  assert_eq!(a.recovery_pending(), 1, "b wrote before a's replay");
  wait_until("the replayed clear", || a.recovery_pending() == 0).await;
  assert_eq!(recovered(&a), 3);
  assert_eq!(stored(&server, "gone").await, None);
  assert_eq!(stored(&server, "new").await.as_deref(), Some("\"after\""));
  assert_eq!(
    stored(&server, "k").await,
    None,
    "b's value is older than the clear"
  );
}

/// The latest call per key is kept, within the bounds; what falls out is
/// counted. At close, with Redis still down, one bounded attempt, then the
/// rest is returned for the report and counted as dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bounds_count_what_falls_out_and_close_reports_the_rest() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let a = Fleet::start(store(&server), config(2));
  assert!(a.write("warm", envelope(wall_ms(), "1")).await);
  server.pause();
  assert_eq!(a.delete("x").await, None);
  assert_eq!(a.delete("y").await, None);
  assert!(!a.write("x", envelope(wall_ms(), "2")).await);
  assert_eq!(a.recovery_pending(), 2, "x's set replaced its delete");
  assert_eq!(dropped(&a), 0);
  assert_eq!(a.delete("z").await, None);
  assert_eq!((a.recovery_pending(), dropped(&a)), (2, 1), "y fell out");
  let left = a.flush_recovery().await;
  assert_eq!(
    left,
    [
      Undelivered {
        op: "set",
        key: Some("x".into()),
        tag: None,
        namespace: None,
      },
      Undelivered {
        op: "delete",
        key: Some("z".into()),
        tag: None,
        namespace: None,
      },
    ]
  );
  assert_eq!(
    (a.recovery_pending(), dropped(&a), recovered(&a)),
    (0, 3, 0)
  );
  server.resume();
}

/// A store whose deletes fail on demand, over Redis: a kept delete can be
/// made to stay kept while reads succeed.
struct FlakyDeletes {
  inner: RedisStore,
  fail: Arc<AtomicBool>,
}

impl FlakyDeletes {
  fn check(&self) -> RedisResult<()> {
    if self.fail.load(Ordering::Relaxed) {
      return Err(RedisError::from((redis::ErrorKind::Io, "injected")));
    }
    Ok(())
  }
}

impl SharedStore for FlakyDeletes {
  type Keys = <RedisStore as SharedStore>::Keys;
  type Error = RedisError;

  fn keys(&self, key: &str) -> Self::Keys {
    self.inner.keys(key)
  }
  fn origin(&self) -> &str {
    self.inner.origin()
  }
  fn command_timeout(&self) -> Duration {
    self.inner.command_timeout()
  }
  async fn server_time(&self) -> RedisResult<u64> {
    self.inner.server_time().await
  }
  fn close(&self) {
    self.inner.close()
  }
  fn problems(&self) -> &std::sync::Arc<herdcache::engine::shared::Problems> {
    self.inner.problems()
  }
  fn describe(&self, error: &RedisError) -> herdcache::engine::shared::Problem {
    self.inner.describe(error)
  }
  async fn ready(&self) -> RedisResult<()> {
    self.inner.ready().await
  }
  async fn keep_over(
    &self,
    key: &str,
    keys: &Self::Keys,
    kept: &herdcache::core::envelope::Meta,
    meta: &herdcache::core::envelope::Meta,
    px: u64,
    token: Option<&str>,
  ) -> RedisResult<bool> {
    self.inner.keep_over(key, keys, kept, meta, px, token).await
  }
  async fn read(&self, keys: &Self::Keys) -> RedisResult<Read> {
    self.inner.read(keys).await
  }
  async fn read_many(&self, keys: &[Self::Keys]) -> RedisResult<Vec<Read>> {
    self.inner.read_many(keys).await
  }
  async fn lock(&self, keys: &Self::Keys, token: &str, ttl: u64) -> RedisResult<LockAttempt> {
    self.inner.lock(keys, token, ttl).await
  }
  async fn lock_refresh(
    &self,
    keys: &Self::Keys,
    token: &str,
    ttl: u64,
  ) -> RedisResult<LockAttempt> {
    self.inner.lock_refresh(keys, token, ttl).await
  }
  async fn fail_refresh(
    &self,
    keys: &Self::Keys,
    token: Option<&str>,
    failures: u32,
    ms: u64,
  ) -> RedisResult<bool> {
    self.inner.fail_refresh(keys, token, failures, ms).await
  }
  async fn extend(&self, keys: &Self::Keys, token: &str, ttl: u64) -> RedisResult<bool> {
    self.inner.extend(keys, token, ttl).await
  }
  async fn release(&self, keys: &Self::Keys, token: &str) -> RedisResult<bool> {
    self.inner.release(keys, token).await
  }
  async fn write_over(
    &self,
    key: &str,
    keys: &Self::Keys,
    envelope: &Envelope,
    px: u64,
    token: Option<&str>,
    corrupt_stamp: Option<u64>,
  ) -> RedisResult<bool> {
    (self.inner)
      .write_over(key, keys, envelope, px, token, corrupt_stamp)
      .await
  }
  async fn write_newest(
    &self,
    key: &str,
    keys: &Self::Keys,
    envelope: &Envelope,
    px: u64,
  ) -> RedisResult<u64> {
    self.inner.write_newest(key, keys, envelope, px).await
  }
  async fn delete(&self, key: &str, keys: &Self::Keys, deletion: Deletion) -> RedisResult<bool> {
    self.check()?;
    self.inner.delete(key, keys, deletion).await
  }
  async fn clear(&self, scope: ClearScope<'_>, not_newer_than: Option<u64>) -> RedisResult<u64> {
    self.check()?;
    self.inner.clear(scope, not_newer_than).await
  }
  async fn invalidate_tag(&self, tag: &str, at: u64, px: u64) -> RedisResult<bool> {
    self.check()?;
    self.inner.invalidate_tag(tag, at, px).await
  }
  async fn tag_stamps(&self, tags: &[String]) -> RedisResult<Vec<u64>> {
    self.inner.tag_stamps(tags).await
  }
  async fn load_slots(
    &self,
    call: herdcache::engine::shared::SlotCall,
  ) -> RedisResult<herdcache::engine::shared::SlotGrant> {
    self.inner.load_slots(call).await
  }
  async fn expire(&self, key: &str, keys: &Self::Keys, at: u64, guard: u64) -> RedisResult<bool> {
    self.check()?;
    self.inner.expire(key, keys, at, guard).await
  }
  fn subscribe(
    &self,
    events: &Arc<Events>,
    on_connected: impl Fn(bool) + Send + Sync + 'static,
  ) -> tokio::task::JoinHandle<()> {
    self.inner.subscribe(events, on_connected)
  }
}

/// While a delete of a key waits, this instance does not take the value it
/// deleted back from Redis (neither as a flight's answer nor for `get`), but
/// does take a newer one another instance wrote; the replay spares that one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_delete_hides_the_values_it_deleted_until_it_is_delivered() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let fail = Arc::new(AtomicBool::new(false));
  let flaky = FlakyDeletes {
    inner: store(&server),
    fail: Arc::clone(&fail),
  };
  let a = Fleet::start(flaky, config(10_000));
  let b = fleet(&server);
  let before = wall_ms() - 1_000;
  assert!(a.write("k", envelope(before, "\"old\"")).await);
  assert!(a.peek("k", wall_ms()).await.is_some());

  fail.store(true, Ordering::Relaxed);
  assert_eq!(a.delete("k").await, None);
  assert_eq!(a.recovery_pending(), 1);
  // Past the cool-down reads reach Redis again (the replay keeps failing).
  tokio::time::sleep(Duration::from_millis(COOLDOWN + 50)).await;
  assert_eq!(
    stored(&server, "k").await.as_deref(),
    Some("\"old\""),
    "still in Redis"
  );
  let deadline = Instant::now() + Duration::from_secs(8);
  loop {
    // A read may land while the failing replay reopened the breaker: then it
    // skips Redis (`Load`, `None`) — the old value must never come back.
    let acquired = a.acquire("k", 1, terms(), true).await;
    if let Acquired::Load { token: Some(token) } = &acquired {
      a.abandon("k", 1, Some(token.clone())).await;
      break;
    }
    assert!(
      matches!(acquired, Acquired::Load { token: None }),
      "{acquired:?}"
    );
    assert!(Instant::now() < deadline, "no read reached Redis");
    // The breaker's probe closes the breaker, and the replay it wakes fails
    // at once and opens it again: reads reach Redis once `ready()` closed it
    // (the replay asks again 100 ms later).
    let _ = a.ready().await;
  }
  assert_eq!(
    a.peek("k", wall_ms()).await,
    None,
    "the deleted value is hidden"
  );

  // Another instance writes a newer value: that one counts.
  assert!(b.write("k", envelope(wall_ms() + 1, "\"newer\"")).await);
  let deadline = Instant::now() + Duration::from_secs(8);
  while a
    .peek("k", wall_ms())
    .await
    .and_then(|e| e.body.json().map(String::from))
    .as_deref()
    != Some("\"newer\"")
  {
    assert!(
      Instant::now() < deadline,
      "the newer value was never served"
    );
    // As above: reads reach Redis once `ready()` closed the breaker.
    let _ = a.ready().await;
  }

  fail.store(false, Ordering::Relaxed);
  wait_until("the replay", || a.recovery_pending() == 0).await;
  assert_eq!(recovered(&a), 1);
  assert_eq!(
    stored(&server, "k").await.as_deref(),
    Some("\"newer\""),
    "spared"
  );
}
