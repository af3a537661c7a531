//! The memory store's own behaviour: its faults, its clock, its
//! subscriptions. (What it shares with Redis is the contract suite's,
//! `tests/server/store_contract.rs`.)

use super::*;
use crate::core::envelope::Meta;
use std::sync::atomic::AtomicUsize;

fn envelope(stamp: u64) -> Envelope {
  Envelope {
    meta: Meta {
      fresh_until: stamp + 1_000,
      hard_until: stamp + 10_000,
      compute_ms: 1,
      stamp,
      refresh_at: Some(stamp + 1_000),
      negative: false,
    },
    body: crate::core::body::Body::Json("1".into()),
    tags: Default::default(),
    etag: Default::default(),
  }
}

const EPOCH: u64 = 1_800_000_000_000;

const DELETION: Deletion = Deletion {
  at: EPOCH,
  px: 1_000,
  replayed: false,
};

#[tokio::test(start_paused = true)]
async fn the_server_clock_runs_on_tokio_time_and_ttls_with_it() {
  let server = MemoryServer::starting_at(EPOCH);
  let store = server.store("p:", Faults::default());
  assert_eq!(store.server_time().await.unwrap(), EPOCH);
  let keys = store.keys("k");
  assert!(store
    .write_over("k", &keys, &envelope(EPOCH), 500, None, None)
    .await
    .unwrap());
  tokio::time::advance(Duration::from_millis(499)).await;
  assert_eq!(store.server_time().await.unwrap(), EPOCH + 499);
  assert!(matches!(store.read(&keys).await.unwrap(), Read::Found(_)));
  tokio::time::advance(Duration::from_millis(1)).await;
  assert_eq!(store.read(&keys).await.unwrap(), Read::Missing);
}

#[tokio::test(start_paused = true)]
async fn a_refused_or_silent_connection_fails_and_changes_nothing() {
  let server = MemoryServer::starting_at(EPOCH);
  let store = server.store("p:", Faults::default());
  let other = server.store("p:", Faults::default());
  let keys = store.keys("k");
  store.set_faults(Faults {
    refused: true,
    ..Faults::default()
  });
  let started = tokio::time::Instant::now();
  let refused = store
    .write_newest("k", &keys, &envelope(EPOCH), 1_000)
    .await;
  assert_eq!(refused, Err(MemoryError::Refused));
  assert_eq!(started.elapsed(), Duration::ZERO, "refused at once");
  assert_eq!(
    store.describe(&MemoryError::Refused).code,
    Code::RedisUnreachable
  );
  store.set_faults(Faults {
    latency: Duration::from_secs(5),
    ..Faults::default()
  });
  let silent = store
    .write_newest("k", &keys, &envelope(EPOCH), 1_000)
    .await;
  assert_eq!(silent, Err(MemoryError::TimedOut));
  assert_eq!(started.elapsed(), store.command_timeout(), "bounded");
  assert_eq!(other.read(&keys).await.unwrap(), Read::Missing);
  // Another instance's connection is not this one's.
  assert!(other
    .write_over("k", &keys, &envelope(EPOCH), 1_000, None, None)
    .await
    .unwrap());
}

#[tokio::test(start_paused = true)]
async fn a_slow_call_lands_after_its_latency_and_a_lost_reply_lands_unseen() {
  let server = MemoryServer::starting_at(EPOCH);
  let store = server.store("p:", Faults::default());
  let keys = store.keys("k");
  store.set_faults(Faults {
    latency: Duration::from_millis(200),
    lose_replies: 1,
    ..Faults::default()
  });
  let started = tokio::time::Instant::now();
  let lost = store
    .write_newest("k", &keys, &envelope(EPOCH), 60_000)
    .await;
  assert_eq!(lost, Err(MemoryError::TimedOut));
  assert_eq!(started.elapsed(), Duration::from_millis(200));
  // It landed: the next call (its reply not lost) reads it.
  assert!(matches!(store.read(&keys).await.unwrap(), Read::Found(_)));
  assert_eq!(started.elapsed(), Duration::from_millis(400));
}

#[tokio::test(start_paused = true)]
async fn a_server_that_goes_down_drops_its_subscriptions_until_it_is_up() {
  let server = MemoryServer::starting_at(EPOCH);
  let store = server.store("p:", Faults::default());
  let writer = server.store("p:", Faults::default());
  let heard = Arc::new(AtomicUsize::new(0));
  let events = {
    let heard = Arc::clone(&heard);
    Events::new(move |_| {
      heard.fetch_add(1, Ordering::SeqCst);
    })
  };
  let live = Arc::new(Mutex::new(Vec::new()));
  let task = {
    let live = Arc::clone(&live);
    store.subscribe(&events, move |up| live.lock().unwrap().push(up))
  };
  tokio::time::sleep(Duration::from_millis(1)).await;
  assert_eq!(*live.lock().unwrap(), [true]);
  let keys = writer.keys("k");
  writer.delete("k", &keys, DELETION).await.unwrap();
  tokio::time::sleep(Duration::from_millis(1)).await;
  assert_eq!(heard.load(Ordering::SeqCst), 1);
  server.set_down(true);
  tokio::time::sleep(Duration::from_millis(1)).await;
  assert_eq!(*live.lock().unwrap(), [true, false]);
  assert_eq!(
    writer.delete("k", &keys, DELETION).await,
    Err(MemoryError::Refused)
  );
  server.set_down(false);
  writer.delete("k", &keys, DELETION).await.unwrap();
  // Published before the subscription came back: missed, as over Redis.
  tokio::time::sleep(Duration::from_secs(3)).await;
  assert_eq!(*live.lock().unwrap(), [true, false, true]);
  assert_eq!(heard.load(Ordering::SeqCst), 1);
  writer.delete("k", &keys, DELETION).await.unwrap();
  tokio::time::sleep(Duration::from_millis(1)).await;
  assert_eq!(heard.load(Ordering::SeqCst), 2);
  task.abort();
}

#[tokio::test]
async fn a_closed_store_fails_every_call() {
  let server = MemoryServer::new();
  let store = server.store("p:", Faults::default());
  store.ready().await.unwrap();
  store.close();
  assert_eq!(store.ready().await, Err(MemoryError::Closed));
  assert_eq!(
    store.clear(ClearScope::All, None).await,
    Err(MemoryError::Closed)
  );
}

#[test]
fn tokens_are_uuids_only() {
  assert!(scripts::is_token(lock_token_bytes().as_slice()));
  for garbage in [
    &b"foreign"[..],
    b"0b5a1c9e-8f1d-4a5e-9c1b-2f6b1d3e4a5",
    b"0b5a1c9e-8f1d-4a5e-9c1b-2f6b1d3e4a5fx",
    b"0b5a1c9e_8f1d-4a5e-9c1b-2f6b1d3e4a5f",
    b"",
  ] {
    assert!(!scripts::is_token(garbage), "{garbage:?}");
  }
}

fn lock_token_bytes() -> Vec<u8> {
  crate::engine::shared::lock_token().into_bytes()
}
