//! The Redis store against a real redis-server started by the test.

mod support;

use herdcache::core::envelope::{Envelope, Meta};
use herdcache::core::lock::{Change, Event};
use herdcache::engine::redis::{lock_token, Events, Read, RedisStore, RedisTimeouts};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use support::RedisServer;

fn envelope(stamp: u64, json: &str) -> Envelope {
  Envelope {
    meta: Meta {
      fresh_until: stamp + 1_000,
      hard_until: stamp + 10_000,
      compute_ms: 12,
      stamp,
      negative: false,
    },
    json: json.into(),
  }
}

fn store(server: &RedisServer, prefix: &str) -> RedisStore {
  RedisStore::open(&server.url(), prefix, RedisTimeouts::default()).unwrap()
}

async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
  let client = redis::Client::open(server.url()).unwrap();
  client.get_multiplexed_async_connection().await.unwrap()
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
async fn an_older_load_never_overwrites_a_newer_value() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
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

#[tokio::test]
async fn foreign_or_corrupt_values_read_as_corrupt_and_are_overwritten() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let keys = s.keys("k");
  let mut c = raw(&server).await;
  for junk in [
    "{\"plain\":\"json\"}",
    "hc1 garbage\n{}",
    "hc1 9 1 0 0 v\n1",
  ] {
    let _: () = redis::cmd("SET")
      .arg(&keys.value)
      .arg(junk)
      .query_async(&mut c)
      .await
      .unwrap();
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

#[tokio::test]
async fn one_holder_at_a_time_and_only_the_holder_releases_or_extends() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let keys = s.keys("hot");
  let (mine, theirs) = (lock_token(), lock_token());
  assert_ne!(mine, theirs);
  assert!(s.try_lock(&keys, &mine, 5_000).await.unwrap());
  assert!(!s.try_lock(&keys, &theirs, 5_000).await.unwrap());
  let lease = s.lock_lease(&keys).await.unwrap().unwrap();
  assert!(lease > 4_000 && lease <= 5_000);
  assert!(!s.release(&keys, &theirs).await.unwrap());
  assert!(!s.extend(&keys, &theirs, 60_000).await.unwrap());
  assert!(s.extend(&keys, &mine, 60_000).await.unwrap());
  assert!(s.lock_lease(&keys).await.unwrap().unwrap() > 50_000);
  assert!(s.release(&keys, &mine).await.unwrap());
  assert_eq!(s.lock_lease(&keys).await.unwrap(), None);
  assert!(s.try_lock(&keys, &theirs, 5_000).await.unwrap());
}

#[tokio::test]
async fn a_lock_expires_by_itself() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let keys = s.keys("k");
  assert!(s.try_lock(&keys, &lock_token(), 50).await.unwrap());
  tokio::time::sleep(Duration::from_millis(120)).await;
  assert!(s.try_lock(&keys, &lock_token(), 50).await.unwrap());
}

#[tokio::test]
async fn a_write_releases_our_lock_but_not_someone_elses() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
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
}

#[tokio::test]
async fn fills_and_deletes_reach_subscribers_and_wake_waiters() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let seen = Arc::new(Mutex::new(Vec::new()));
  let connected = Arc::new(Mutex::new(false));
  let events = {
    let seen = Arc::clone(&seen);
    Events::new(move |e| seen.lock().unwrap().push(e.clone()))
  };
  let task = {
    let connected = Arc::clone(&connected);
    events.subscribe(s.client(), s.channel().to_string(), move |up| {
      *connected.lock().unwrap() = up
    })
  };
  let deadline = Instant::now() + Duration::from_secs(5);
  while !*connected.lock().unwrap() {
    assert!(Instant::now() < deadline, "subscriber never connected");
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  let keys = s.keys("k");
  let waiter = events.wait("k");
  let other = events.wait("other");
  assert!(s
    .write("k", &keys, &envelope(1, "1"), 60_000, None)
    .await
    .unwrap());
  tokio::time::timeout(Duration::from_secs(5), waiter)
    .await
    .unwrap()
    .unwrap();
  assert!(s.delete("k", &keys).await.unwrap());
  assert!(!s.delete("k", &keys).await.unwrap());
  let deadline = Instant::now() + Duration::from_secs(5);
  while seen.lock().unwrap().len() < 3 {
    assert!(
      Instant::now() < deadline,
      "events missing: {:?}",
      seen.lock().unwrap()
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  let origin = s.origin().to_string();
  assert_eq!(
    seen.lock().unwrap()[..3],
    [
      Event::new(&origin, Change::Filled("k".into())),
      Event::new(&origin, Change::Deleted("k".into())),
      Event::new(&origin, Change::Deleted("k".into())),
    ]
  );
  // A waiter on another key is not woken by them.
  let mut other = other;
  assert!(other.try_recv().is_err());
  task.abort();
}

#[tokio::test]
async fn clear_removes_only_this_prefix() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let mine = store(&server, "app*1:");
  let theirs = store(&server, "app:");
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
  assert_eq!(mine.clear().await.unwrap(), 1_200);
  assert_eq!(mine.read(&mine.keys("k0")).await.unwrap(), Read::Missing);
  assert!(matches!(
    theirs.read(&theirs.keys("k0")).await.unwrap(),
    Read::Found(_)
  ));
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
