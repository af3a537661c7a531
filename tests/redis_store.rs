//! The Redis store against a real redis-server started by the test.

mod support;

use herdcache::core::envelope::{DecodeError, Envelope, Meta};
use herdcache::core::fleet::{Change, Event};
use herdcache::engine::fleet::{Acquired, Fleet, FleetConfig, Terms};
use herdcache::engine::shared::{
  lock_token, Events, LockAttempt, Read, RedisStore, RedisTimeouts, SharedStore,
};
use std::sync::atomic::Ordering;
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

/// What the fleet passes to the write after a read found a corrupt value.
fn corrupt_stamp(read: &Read) -> Option<u64> {
  match read {
    Read::Corrupt(DecodeError::BadValue { stamp }) => Some(*stamp),
    _ => None,
  }
}

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
    s.subscribe_with(&events, Duration::from_secs(1), move |up| {
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

#[tokio::test]
async fn a_contended_lock_reports_the_holders_lease() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
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

/// A lock key no instance can have set (no TTL, not a token, another Redis
/// type) is garbage: the next caller takes the lock at once instead of
/// waiting (or, before, spinning) until its hardTimeout.
#[tokio::test]
async fn a_garbage_lock_is_replaced() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let mut c = raw(&server).await;
  let setups: [(&str, &[&str]); 5] = [
    ("no TTL", &["SET", "{t:a}:lock", "foreign"]),
    (
      "a token without a TTL",
      &["SET", "{t:b}:lock", "0b5a1c9e-8f1d-4a5e-9c1b-2f6b1d3e4a5f"],
    ),
    (
      "not a token",
      &["SET", "{t:c}:lock", "foreign", "PX", "60000"],
    ),
    ("a list", &["RPUSH", "{t:d}:lock", "x"]),
    ("a hash with a TTL", &["HSET", "{t:e}:lock", "f", "v"]),
  ];
  for (i, (what, command)) in setups.iter().enumerate() {
    let mut cmd = redis::cmd(command[0]);
    for arg in &command[1..] {
      cmd.arg(*arg);
    }
    let _: redis::Value = cmd.query_async(&mut c).await.unwrap();
    if *what == "a hash with a TTL" {
      let _: i64 = redis::cmd("PEXPIRE")
        .arg(command[1])
        .arg(60_000)
        .query_async(&mut c)
        .await
        .unwrap();
    }
    let key = ["a", "b", "c", "d", "e"][i];
    let keys = s.keys(key);
    let mine = lock_token();
    assert_eq!(
      s.lock(&keys, &mine, 5_000).await.unwrap(),
      LockAttempt::Won,
      "{what}"
    );
    // It is a real lock now: ours, with a lease, released by our token.
    let lease = s.lock_lease(&keys).await.unwrap().unwrap();
    assert!(lease > 4_000 && lease <= 5_000, "{what}: {lease}");
    assert!(s.release(&keys, &mine).await.unwrap(), "{what}");
  }
  // Scripts that compare our token never fail on another type.
  let keys = s.keys("f");
  let _: i64 = redis::cmd("RPUSH")
    .arg(&keys.lock)
    .arg("x")
    .query_async(&mut c)
    .await
    .unwrap();
  assert!(!s.release(&keys, &lock_token()).await.unwrap());
  assert!(!s.extend(&keys, &lock_token(), 5_000).await.unwrap());
}

#[tokio::test]
async fn the_write_script_keeps_only_what_readers_accept() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let mut c = raw(&server).await;
  let far = "9".repeat(25);
  let huge = "9".repeat(16);
  let corrupt_but_newer = [
    format!("hc1 1 2 3 {far} v\n1"),
    format!("hc1 1 2 3 {huge} v\n1"),
    format!("hc1 {far} {far} 3 99999999999999 v\n1"),
    "hc1 5 2 3 99999999999999 v\n1".to_string(),
    "hc1 1 2 3 99999999999999 v\nnot json".to_string(),
    "hc1 1 2 3 99999999999999 v\n".to_string(),
  ];
  for stored in corrupt_but_newer {
    let keys = s.keys("k");
    let _: () = redis::cmd("SET")
      .arg(&keys.value)
      .arg(&stored)
      .query_async(&mut c)
      .await
      .unwrap();
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
  // A valid newer value is kept, at the largest stamp the format allows.
  let keys = s.keys("k");
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

/// A loser waiting on a live lock registers one fill waiter, however many
/// times it re-checks, and none is left once it is done.
#[tokio::test]
async fn a_waiting_loser_holds_one_waiter_and_takes_over_a_dead_lease() {
  let Some(server) = RedisServer::start() else {
    return;
  };
  let fleet = Fleet::start(
    store(&server, "t:"),
    FleetConfig {
      lock_ttl: 5_000,
      hard_timeout: 10_000,
      breaker_cooldown: 1_000,
    },
  );
  let other = store(&server, "t:");
  let keys = other.keys("k");
  // A "dead holder": its lease runs out in 400 ms and is never extended.
  assert!(other.try_lock(&keys, &lock_token(), 400).await.unwrap());
  let terms = Terms {
    now: 1,
    accept_stale: false,
    newer_than: None,
  };
  let started = Instant::now();
  let acquire = {
    let fleet = Arc::clone(&fleet);
    tokio::spawn(async move { fleet.acquire("k", 1, terms, true).await })
  };
  tokio::time::sleep(Duration::from_millis(150)).await;
  assert_eq!(fleet.waiting_for("k"), 1);
  let acquired = acquire.await.unwrap();
  assert!(
    matches!(acquired, Acquired::Load { token: Some(_) }),
    "{acquired:?}"
  );
  assert!(started.elapsed() >= Duration::from_millis(300));
  // One wait for the lease, and at most a couple more if it had 1 ms left.
  let waits = fleet.counters.lock_waits.load(Ordering::Relaxed);
  assert!((1..=3).contains(&waits), "{waits} waits");
  assert_eq!(fleet.waiting_for("k"), 0);
  fleet.stop();
}

/// The write script and the reader agree on every stored value: the script
/// keeps a value with a newer stamp exactly when the reader accepts it, so
/// no stored value is both unreadable and impossible to overwrite.
#[tokio::test]
async fn the_write_script_and_the_reader_agree_on_near_valid_values() {
  use rand::{Rng, SeedableRng};
  let Some(server) = RedisServer::start() else {
    return;
  };
  let s = store(&server, "t:");
  let mut c = raw(&server).await;
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
  let (mut kept, mut replaced) = (0, 0);
  for case in 0..1_000 {
    let mut pick = |list: &[&str]| list[rng.random_range(0..list.len())].to_string();
    let fields = [
      pick(&numbers),
      pick(&numbers),
      pick(&numbers),
      pick(&numbers),
    ];
    let tag = pick(&["hc1", "hc1", "hc1", "hc2", "HC1"]);
    let kind = pick(&["v", "n", "v", "q"]);
    let mut stored = format!(
      "{tag} {} {} {} {} {kind}\n",
      fields[0], fields[1], fields[2], fields[3]
    )
    .into_bytes();
    stored.extend_from_slice(bodies[rng.random_range(0..bodies.len())]);
    let key = format!("agree{case}");
    let keys = s.keys(&key);
    let _: () = redis::cmd("SET")
      .arg(&keys.value)
      .arg(&stored)
      .query_async(&mut c)
      .await
      .unwrap();
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
    } else {
      replaced += 1;
    }
  }
  // The generator reaches both sides.
  assert!(
    kept >= 10 && replaced >= 300,
    "kept {kept}, replaced {replaced}"
  );
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
  assert!(s.delete("k", &keys).await.is_ok());
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
