//! A key's slot moving to another primary under the cluster store (issue 25,
//! item 5). While a slot is being migrated, a script naming several of its
//! keys, some still on the source and some not there, is answered
//! `TRYAGAIN`; the store must ride that out within its command bound (one
//! such failure opens the fleet's breaker, and every process then loads
//! every key by itself), and once the slot moved, its lock, writes and reads
//! work on the new owner. `HERDCACHE_TEST_SERVER` picks redis-server or
//! valkey-server, as for every server test.

use crate::support;

use herdcache::engine::shared::{lock_token, LockAttempt, Read, RedisTimeouts, SharedStore};
use std::time::{Duration, Instant};
use support::cluster::{query, RedisCluster};

fn setslot(port: u16, slot: u16, how: &str, id: &str) {
  let mut cmd = redis::cmd("CLUSTER");
  cmd.arg("SETSLOT").arg(slot).arg(how).arg(id);
  query::<()>(port, &cmd).unwrap_or_else(|e| panic!("SETSLOT {slot} {how} on {port}: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_in_migration_and_moved_keeps_the_lock_the_writes_and_the_reads() {
  let Some(mut cluster) = RedisCluster::start(3, 0) else {
    return;
  };
  let timeouts = RedisTimeouts::default();
  let store =
    herdcache::engine::shared::RedisStore::open_cluster(&cluster.urls(), "mv:", timeouts).unwrap();
  let keys = store.keys("hot");
  let slot = cluster.slot_of(&keys.value);
  let from = cluster.owner_of(slot).expect("an owner");
  let primaries = cluster.primaries();
  let id = |port: u16| {
    primaries
      .iter()
      .find(|p| p.port == port)
      .unwrap()
      .id
      .clone()
  };
  let to = primaries.iter().find(|p| p.port != from).unwrap().port;

  // The value is there and an instance holds the lock (its load runs).
  let holder = lock_token();
  assert_eq!(
    store.lock(&keys, &holder, 5_000).await.unwrap(),
    LockAttempt::Won
  );
  assert!(store
    .write_over("hot", &keys, &support::envelope(1, "1"), 60_000, None, None)
    .await
    .unwrap());
  assert!(store.lock_lease(&keys).await.unwrap().is_some());

  // The migration starts: the slot's keys are still on `from`, where a
  // script naming the value (or the lock) and the absent back-off marker
  // is answered TRYAGAIN until they are moved, 300 ms later.
  setslot(to, slot, "IMPORTING", &id(from));
  setslot(from, slot, "MIGRATING", &id(to));
  let (src, dst, dst_id) = (from, to, id(to));
  let others: Vec<u16> = primaries
    .iter()
    .map(|p| p.port)
    .filter(|&p| p != src && p != dst)
    .collect();
  let finish = std::thread::spawn(move || {
    std::thread::sleep(Duration::from_millis(300));
    let names: Vec<String> = query(
      src,
      redis::cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100),
    )
    .unwrap();
    assert_eq!(names.len(), 2, "the value and the lock: {names:?}");
    query::<()>(
      src,
      redis::cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(dst)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&names),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    setslot(dst, slot, "NODE", &dst_id);
    setslot(src, slot, "NODE", &dst_id);
    for p in others {
      setslot(p, slot, "NODE", &dst_id);
    }
  });
  tokio::time::sleep(Duration::from_millis(50)).await;

  // Another instance's background refresh asks for the lock (lock and
  // marker), and the holder's load ends with its write (value, lock and
  // marker), both during the migration.
  let begin = Instant::now();
  let refresher = lock_token();
  let landing = support::envelope(2, "2");
  let (refresh, write) = tokio::join!(
    store.lock_refresh(&keys, &refresher, 5_000),
    store.write_over("hot", &keys, &landing, 60_000, Some(&holder), None),
  );
  let took = begin.elapsed();
  eprintln!(
    "lock_refresh {refresh:?} and write {write:?} answered in {took:?} during the migration"
  );
  finish.join().unwrap();
  match refresh {
    // The holder's write may have released the lock first.
    Ok(LockAttempt::Won) => assert!(store.release(&keys, &refresher).await.unwrap()),
    Ok(LockAttempt::Held(_)) => {}
    other => panic!("the refresh's lock during the migration: {other:?} after {took:?}"),
  }
  assert!(
    write.expect("the write during the migration"),
    "the holder's write landed"
  );
  assert!(
    took < timeouts.command + Duration::from_millis(300),
    "within the command bound: {took:?}"
  );

  // Moved: lock, write and read on the new owner.
  cluster.migrate_slot(slot, to);
  assert_eq!(cluster.owner_of(slot), Some(to));
  let next = lock_token();
  assert_eq!(
    store.lock(&keys, &next, 5_000).await.unwrap(),
    LockAttempt::Won
  );
  match store.lock(&keys, &lock_token(), 5_000).await.unwrap() {
    LockAttempt::Held(_) => {}
    other => panic!("the lock was taken twice after the move: {other:?}"),
  }
  assert!(store
    .write_over(
      "hot",
      &keys,
      &support::envelope(3, "3"),
      60_000,
      Some(&next),
      None
    )
    .await
    .unwrap());
  assert_eq!(
    store.lock_lease(&keys).await.unwrap(),
    None,
    "released by the write"
  );
  match store.read(&keys).await.unwrap() {
    Read::Found(envelope) => assert_eq!(envelope.meta.stamp, 3),
    other => panic!("the value after the move: {other:?}"),
  }
  let names: Vec<String> = query(
    to,
    redis::cmd("CLUSTER")
      .arg("GETKEYSINSLOT")
      .arg(slot)
      .arg(100),
  )
  .unwrap();
  assert!(
    names.contains(&keys.value),
    "the value lives on {to}: {names:?}"
  );
  store.close();
}
