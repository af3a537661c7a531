//! What only the Redis store does, against a real redis-server started by
//! the test: URLs, TLS, failing fast, the hard TTL, the subscription's
//! liveness probe. What every shared store does is `tests/server/store_contract.rs`.

use crate::support;

use herdcache::core::fleet::Change;
use herdcache::engine::shared::{Events, Read, RedisStore, RedisTimeouts, SharedStore};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::{envelope_at as envelope, Inspect, RedisServer};

fn store(server: &RedisServer, prefix: &str) -> RedisStore {
  RedisStore::open(&server.url(), prefix, RedisTimeouts::default()).unwrap()
}

async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
  let client = redis::Client::open(server.url()).unwrap();
  client.get_multiplexed_async_connection().await.unwrap()
}

/// The test helper keeps the server's log (printed when a test fails) in a
/// directory of its own, removed with the server.
#[test]
fn the_test_server_keeps_its_log_until_dropped() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let log = server.log_path();
  let text = std::fs::read_to_string(&log).unwrap();
  // Written before the server listens, so it is there once `start` returns.
  assert!(text.contains(&format!("pid={}", server.pid())), "{text}");
  drop(server);
  assert!(!log.exists(), "{} outlived its server", log.display());
  assert!(!log.parent().unwrap().exists());
}

#[tokio::test]
async fn writes_read_back_with_the_hard_ttl() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let keys = s.keys("user:1");
  assert_eq!(s.read(&keys).await.unwrap(), Read::Missing);
  let e = envelope(1_000, "{\"a\":1}");
  assert!(s.write("user:1", &keys, &e, 60_000, None).await.unwrap());
  assert_eq!(s.read(&keys).await.unwrap(), Read::Found(e));
  let pttl: i64 = redis::cmd("PTTL")
    .arg(&keys.value)
    .query_async(&mut raw(&server).await)
    .await
    .unwrap();
  assert!(pttl > 55_000 && pttl <= 60_000, "{pttl}");
}

#[tokio::test]
async fn a_redis_that_is_down_fails_fast() {
  let port = std::net::TcpListener::bind("127.0.0.1:0")
    .unwrap()
    .local_addr()
    .unwrap()
    .port();
  let s = RedisStore::open(
    &format!("redis://127.0.0.1:{port}/"),
    "t:",
    RedisTimeouts::default(),
  )
  .unwrap();
  let started = Instant::now();
  assert!(s.read(&s.keys("k")).await.is_err());
  assert!(
    started.elapsed() < Duration::from_secs(3),
    "{:?}",
    started.elapsed()
  );
}

/// A Redis that accepts connections and never answers (hung, or a proxy
/// with no backend), asked by 200 callers at once before any connection
/// was made: they share one connection attempt (redis-rs may open a second
/// socket within it), all fail together within the connect bound, and
/// those that come right after the failure get it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_share_one_connection_attempt() {
  let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
  let port = listener.local_addr().unwrap().port();
  let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
  let counted = Arc::clone(&accepted);
  let holder = tokio::spawn(async move {
    let mut held = Vec::new();
    while let Ok((socket, _)) = listener.accept().await {
      counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
      held.push(socket);
    }
  });
  let timeouts = RedisTimeouts {
    connect: Duration::from_millis(300),
    command: Duration::from_millis(300),
    retries: 1,
  };
  let s =
    Arc::new(RedisStore::open(&format!("redis://127.0.0.1:{port}/"), "t:", timeouts).unwrap());
  let started = Instant::now();
  let calls = (0..200).map(|i| {
    let s = Arc::clone(&s);
    tokio::spawn(async move {
      let failed = s.read(&s.keys(&format!("k{i}"))).await.is_err();
      (failed, started.elapsed())
    })
  });
  let answers = futures_util::future::join_all(calls).await;
  for answer in answers {
    let (failed, after) = answer.unwrap();
    assert!(failed);
    assert!(
      after < Duration::from_millis(800),
      "a caller waited {after:?}"
    );
  }
  let opened = accepted.load(std::sync::atomic::Ordering::SeqCst);
  assert!(opened <= 2, "{opened} connections for one attempt");
  let again = Instant::now();
  assert!(s.read(&s.keys("late")).await.is_err());
  assert!(
    again.elapsed() < Duration::from_millis(100),
    "{:?}",
    again.elapsed()
  );
  assert_eq!(
    accepted.load(std::sync::atomic::Ordering::SeqCst),
    opened,
    "no new attempt"
  );
  holder.abort();
}

#[test]
fn bad_urls_are_refused_at_once() {
  for url in ["http://127.0.0.1:6379", "not a url", "redis://[::1"] {
    assert!(
      RedisStore::open(url, "", RedisTimeouts::default()).is_err(),
      "{url}"
    );
  }
  assert!(RedisStore::open(
    "redis://user:secret@127.0.0.1:6390/3",
    "",
    RedisTimeouts::default()
  )
  .is_ok());
}

#[tokio::test]
async fn rediss_urls_speak_tls() {
  let dir = std::env::temp_dir().join(format!("herdcache-tls-{}", std::process::id()));
  std::fs::create_dir_all(&dir).unwrap();
  let Some(server) = RedisServer::start_tls(&dir) else {
    return;
  };
  let url = format!("rediss://127.0.0.1:{}/#insecure", server.port);
  let s = RedisStore::open(&url, "tls:", RedisTimeouts::default()).unwrap();
  let keys = s.keys("k");
  assert!(s
    .write("k", &keys, &envelope(7, "\"secret\""), 60_000, None)
    .await
    .unwrap());
  assert_eq!(
    s.read(&keys).await.unwrap(),
    Read::Found(envelope(7, "\"secret\""))
  );
  // The same port refuses plain text.
  let plain_url = format!("redis://127.0.0.1:{}/", server.port);
  let plain = RedisStore::open(&plain_url, "tls:", RedisTimeouts::default()).unwrap();
  assert!(plain.read(&keys).await.is_err());
  drop(server);
  let _ = std::fs::remove_dir_all(&dir);
}

/// A subscription whose connection goes silent (the server paused: no RST,
/// no end of stream) is noticed by the liveness probe and made anew once the
/// server answers again, so invalidations flow again.
#[tokio::test]
async fn a_silent_subscription_is_probed_and_made_anew() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let seen = Arc::new(Mutex::new(Vec::new()));
  let states = Arc::new(Mutex::new(Vec::new()));
  let events = {
    let seen = Arc::clone(&seen);
    Events::new(move |e| seen.lock().unwrap().push(e.clone()))
  };
  let task = {
    let states = Arc::clone(&states);
    s.subscribe_with(&events, Duration::from_millis(300), move |up| {
      states.lock().unwrap().push(up)
    })
  };
  wait_until("the first subscription", || {
    states.lock().unwrap().as_slice() == [true]
  })
  .await;
  server.pause();
  wait_until("the probe to notice", || states.lock().unwrap().len() >= 2).await;
  assert!(!states.lock().unwrap()[1]);
  server.resume();
  wait_until("the subscription to come back", || {
    let states = states.lock().unwrap();
    states.len() >= 3 && states.last() == Some(&true)
  })
  .await;
  let keys = s.keys("k");
  let deletion = herdcache::engine::shared::Deletion {
    at: support::wall_ms(),
    px: 60_000,
    replayed: false,
  };
  assert!(s.delete("k", &keys, deletion).await.is_ok());
  wait_until("the delete to arrive", || {
    seen
      .lock()
      .unwrap()
      .iter()
      .any(|e| e.change == Change::Deleted("k".into()))
  })
  .await;
  task.abort();
}

/// Polls `pred` on the runtime (which the subscriber shares), for 8 s at most.
async fn wait_until(what: &str, pred: impl Fn() -> bool) {
  let deadline = Instant::now() + Duration::from_secs(8);
  while !pred() {
    assert!(Instant::now() < deadline, "timed out waiting for {what}");
    tokio::time::sleep(Duration::from_millis(20)).await;
  }
}

/// With tracking, a change made outside herdcache (a plain `DEL`) reaches
/// the subscription as a fill from no instance (`OUTSIDE`), once the echo
/// window passed; a write of the store itself is heard twice (its
/// announcement and its tracking message) and comes through once, the
/// tracking message counted as an echo. Names under the prefix that are no
/// value (a lock) are passed over.
#[tokio::test]
async fn tracking_tells_outside_changes_and_pairs_the_stores_own() {
  use herdcache::core::fleet::OUTSIDE;
  use std::sync::atomic::Ordering;
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "trk:").with_tracking(true);
  let seen = Arc::new(Mutex::new(Vec::new()));
  let events = {
    let seen = Arc::clone(&seen);
    Events::new(move |e| seen.lock().unwrap().push(e.clone()))
  };
  let task = s.subscribe_with(&events, Duration::from_millis(500), |_| {});
  wait_until("tracking on", || {
    events.tracking.live.load(Ordering::SeqCst)
  })
  .await;

  let keys = s.keys("mine");
  assert!(s
    .write("mine", &keys, &envelope(1_000, "1"), 60_000, None)
    .await
    .unwrap());
  wait_until("the write's echo", || {
    events.tracking.echoes.load(Ordering::SeqCst) == 1
  })
  .await;

  let other = s.keys("theirs");
  let mut c = raw(&server).await;
  let _: () = redis::cmd("SET")
    .arg(&other.value)
    .arg("x")
    .query_async(&mut c)
    .await
    .unwrap();
  let _: () = redis::cmd("SET")
    .arg(&other.lock)
    .arg("x")
    .query_async(&mut c)
    .await
    .unwrap();
  wait_until("the outside change", || {
    seen
      .lock()
      .unwrap()
      .iter()
      .any(|e| e.origin == OUTSIDE && e.change == Change::Filled("theirs".into()))
  })
  .await;
  tokio::time::sleep(Duration::from_millis(100)).await;
  let outside: Vec<_> = seen
    .lock()
    .unwrap()
    .iter()
    .filter(|e| e.origin == OUTSIDE)
    .cloned()
    .collect();
  assert_eq!(
    outside.len(),
    1,
    "only the value's change, once: {outside:?}"
  );
  assert_eq!(events.tracking.changes.load(Ordering::SeqCst), 1);
  assert_eq!(events.tracking.echoes.load(Ordering::SeqCst), 1);

  let _: () = redis::cmd("FLUSHDB").query_async(&mut c).await.unwrap();
  wait_until("the flush", || {
    seen
      .lock()
      .unwrap()
      .iter()
      .any(|e| e.origin == OUTSIDE && e.change == Change::Cleared)
  })
  .await;
  task.abort();
}
