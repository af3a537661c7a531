//! The fleet protocol (`engine::fleet`) between instances: `Fleet`s with a
//! store each (so each has its own origin), every case twice: on one real
//! redis-server (or a Redis Cluster: `support::Backend`), `on_redis::*`,
//! and on the in-process store, `in_memory::*` (the unit tier's). One
//! winner per key, losers woken by the fill notice, a dead holder's lease
//! running out, a late writer losing to a newer stamp, invalidations
//! crossing from one instance to the other.

use crate::support;

use herdcache::core::fleet::Change;
use herdcache::engine::clock::Clock;
use herdcache::engine::fleet::{Acquired, Fleet, FleetConfig, Invalidation, Terms};
use herdcache::engine::shared::{lock_token, SharedStore};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{envelope, wall_ms, Backend, InMemory, Inspect, Meeting};

const PREFIX: &str = "fleet:";

fn store<M: Meeting>(server: &M) -> M::Store {
  server.open(PREFIX)
}

fn fleet<M: Meeting>(server: &M, lock_ttl: u64, hard_timeout: u64) -> Arc<Fleet<M::Store>> {
  Fleet::start(
    store(server),
    FleetConfig {
      lock_ttl,
      hard_timeout,
      breaker_cooldown: 1_000,
      clock: Clock::default(),
      recovery_max_entries: 10_000,
      recovery_max_age: 300_000,
      load_slots: None,
      serializer: "json".into(),
    },
  )
}

/// A foreground flight of callers that take fresh values only.
fn terms() -> Terms {
  Terms {
    now: wall_ms(),
    accept_stale: false,
    newer_than: None,
    refresh: false,
  }
}

fn read(counter: &AtomicU64) -> u64 {
  counter.load(Ordering::Relaxed)
}

/// Polls `pred`, for 8 s at most.
async fn wait_until(what: &str, mut pred: impl FnMut() -> bool) {
  let deadline = Instant::now() + Duration::from_secs(8);
  while !pred() {
    assert!(Instant::now() < deadline, "timed out waiting for {what}");
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
}

/// Waits until `to` has heard a change `from` makes (a delete of `probe`),
/// so its subscription is live. Returns what it took from `to`'s queue on
/// the way.
async fn hears<S: SharedStore>(from: &Fleet<S>, to: &Fleet<S>) -> Vec<Invalidation> {
  let deadline = Instant::now() + Duration::from_secs(8);
  let probe = Invalidation::Changed(Change::Deleted("probe".into()));
  let mut taken = Vec::new();
  loop {
    assert!(Instant::now() < deadline, "the subscription never came up");
    from.delete("probe").await.expect("redis answers");
    tokio::time::sleep(Duration::from_millis(20)).await;
    taken.extend(to.invalidations().take());
    if taken.contains(&probe) {
      return taken;
    }
  }
}

/// Concurrent acquires of one key on two instances: exactly one takes the
/// lock, every other waits for its fill notice, and all of them get the
/// winner's value when it lands, long before any lease or timeout ran out.
async fn one_winner_per_key_and_the_losers_wake_on_the_fill_notice<M: Meeting>(server: &M) {
  // Leases that would keep a loser waiting 10 s if no notice came.
  let (lock_ttl, hard_timeout) = (10_000, 30_000);
  let a = fleet(server, lock_ttl, hard_timeout);
  let b = fleet(server, lock_ttl, hard_timeout);
  hears(&a, &b).await;
  hears(&b, &a).await;
  let fleets = [&a, &b];
  let flights: Vec<_> = [(0, 1), (0, 2), (1, 1), (1, 2)]
    .into_iter()
    .map(|(at, id)| {
      let fleet = Arc::clone(fleets[at]);
      let task = tokio::spawn(async move { fleet.acquire("k", id, terms(), true).await });
      (at, id, task)
    })
    .collect();
  let sum = |f: fn(&Fleet<M::Store>) -> u64| f(&a) + f(&b);
  // The winner is answered at once; the losers are in their wait.
  wait_until("one winner and three waiting losers", || {
    flights.iter().filter(|(_, _, t)| t.is_finished()).count() == 1
      && sum(|f| read(&f.counters.lock_waits)) == 3
  })
  .await;
  assert_eq!(sum(|f| read(&f.counters.lock_acquired)), 1);
  assert_eq!(sum(|f| read(&f.counters.lock_contended)), 3);
  assert_eq!(sum(|f| f.waiting_for("k") as u64), 3);
  let mut losers = Vec::new();
  let mut winner = None;
  for (at, id, task) in flights {
    if task.is_finished() {
      winner = Some((at, id, task.await.unwrap()));
    } else {
      losers.push(task);
    }
  }
  let (at, id, won) = winner.unwrap();
  let Acquired::Load { token: Some(token) } = won else {
    panic!("the winner must load under the lock: {won:?}");
  };
  let value = envelope(wall_ms(), "\"winner's\"");
  let filled = Instant::now();
  assert_eq!(
    fleets[at].settle("k", id, value.clone(), Some(token)).await,
    Some(true)
  );
  for loser in losers {
    let got = tokio::time::timeout(Duration::from_millis(lock_ttl / 2), loser)
      .await
      .expect("a loser waited for the lease instead of the fill notice")
      .unwrap();
    assert_eq!(got, Acquired::Value(value.clone()));
  }
  assert!(filled.elapsed() < Duration::from_millis(lock_ttl / 2));
  assert_eq!(sum(|f| read(&f.counters.fill_notices)), 3);
  // Nobody loaded a second time, and nobody waits any more.
  assert_eq!(sum(|f| read(&f.counters.lock_acquired)), 1);
  assert_eq!(sum(|f| f.waiting_for("k") as u64), 0);
  assert_eq!(sum(|f| read(&f.counters.redis_errors)), 0);
  a.stop();
  b.stop();
}

/// A holder that dies (takes the lock with its token, then neither extends
/// it nor fills) holds the key up only until its lease runs out: the other
/// instance then takes the lock and loads, long before hardTimeout.
async fn a_dead_holders_lease_runs_out_and_another_instance_loads<M: Meeting>(server: &M) {
  let (lock_ttl, hard_timeout) = (600, 20_000);
  let b = fleet(server, lock_ttl, hard_timeout);
  // The holder dies (a process killed): its lock stays, with no lease
  // keeper and no write. (A fleet that stops releases its locks instead:
  // `a_stopped_fleet_releases_its_locks_at_once`.)
  let dead = store(server);
  assert!(dead
    .try_lock(&dead.keys("k"), &lock_token(), lock_ttl)
    .await
    .unwrap());
  let started = Instant::now();
  let acquired = b.acquire("k", 1, terms(), true).await;
  let waited = started.elapsed();
  let Acquired::Load { token: Some(token) } = acquired else {
    panic!("the survivor must take the lock: {acquired:?}");
  };
  assert!(waited >= Duration::from_millis(lock_ttl / 2), "{waited:?}");
  assert!(
    waited < Duration::from_millis(hard_timeout / 4),
    "waited {waited:?}: for hardTimeout, not the lease"
  );
  assert_eq!(read(&b.counters.lock_acquired), 1);
  assert_eq!(read(&b.counters.lock_contended), 1);
  assert!(read(&b.counters.lock_waits) >= 1);
  assert_eq!(read(&b.counters.fill_notices), 0);
  // The lock is the survivor's now, and its settle releases it.
  let s = store(server);
  let keys = s.keys("k");
  assert!(!s.release(&keys, &lock_token()).await.unwrap());
  assert_eq!(
    b.settle("k", 1, envelope(wall_ms(), "1"), Some(token))
      .await,
    Some(true)
  );
  assert_eq!(s.lock_lease(&keys).await.unwrap(), None);
  b.stop();
}

/// A fleet that stops (close, the end of its JS environment) releases the
/// locks it holds at once: another instance loads without waiting a lease.
async fn a_stopped_fleet_releases_its_locks_at_once<M: Meeting>(server: &M) {
  let (lock_ttl, hard_timeout) = (5_000, 20_000);
  let a = fleet(server, lock_ttl, hard_timeout);
  let b = fleet(server, lock_ttl, hard_timeout);
  for (id, key) in [(1, "k1"), (2, "k2")] {
    let held = a.acquire(key, id, terms(), true).await;
    assert!(
      matches!(held, Acquired::Load { token: Some(_) }),
      "{held:?}"
    );
  }
  a.stop();
  let s = store(server);
  let deadline = Instant::now() + Duration::from_secs(2);
  while s.lock_lease(&s.keys("k1")).await.unwrap().is_some()
    || s.lock_lease(&s.keys("k2")).await.unwrap().is_some()
  {
    assert!(
      Instant::now() < deadline,
      "the stopped fleet's locks were not released"
    );
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  let started = Instant::now();
  let acquired = b.acquire("k1", 1, terms(), true).await;
  assert!(
    matches!(acquired, Acquired::Load { token: Some(_) }),
    "{acquired:?}"
  );
  assert!(started.elapsed() < Duration::from_millis(lock_ttl / 10));
  // And it takes no lock after it stopped.
  let after = a.acquire("k3", 3, terms(), true).await;
  assert_eq!(after, Acquired::Load { token: None });
  assert_eq!(s.lock_lease(&s.keys("k3")).await.unwrap(), None);
  b.stop();
}

/// A loser waiting on a live lock registers one fill waiter, however many
/// times it re-checks, and none is left once it is done.
async fn a_waiting_loser_holds_one_waiter_and_takes_over_a_dead_lease<M: Meeting>(server: &M) {
  let fleet = Fleet::start(
    store(server),
    FleetConfig {
      lock_ttl: 5_000,
      hard_timeout: 10_000,
      breaker_cooldown: 1_000,
      clock: Clock::default(),
      recovery_max_entries: 10_000,
      recovery_max_age: 300_000,
      load_slots: None,
      serializer: "json".into(),
    },
  );
  let other = store(server);
  let keys = other.keys("k");
  // A "dead holder": its lease runs out in 400 ms and is never extended.
  assert!(other.try_lock(&keys, &lock_token(), 400).await.unwrap());
  let terms = Terms {
    now: 1,
    accept_stale: false,
    newer_than: None,
    refresh: false,
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

/// A holder whose load outlived the value another instance wrote since
/// (from a load that started later) loses its write, and still frees the
/// lock.
async fn a_late_writer_loses_to_a_newer_stamp<M: Meeting>(server: &M) {
  let a = fleet(server, 5_000, 10_000);
  let b = fleet(server, 5_000, 10_000);
  let started = wall_ms();
  let acquired = b.acquire("k", 7, terms(), true).await;
  let Acquired::Load { token: Some(token) } = acquired else {
    panic!("b must hold the lock: {acquired:?}");
  };
  let newer = envelope(started + 1, "\"newer\"");
  assert!(a.write("k", newer.clone()).await);
  let late = envelope(started, "\"late\"");
  assert_eq!(b.settle("k", 7, late, Some(token)).await, Some(false));
  assert_eq!(a.peek("k", wall_ms()).await, Some(newer.clone()));
  assert_eq!(b.peek("k", wall_ms()).await, Some(newer));
  let s = store(server);
  assert_eq!(s.lock_lease(&s.keys("k")).await.unwrap(), None);
  // A load that started later still wins.
  let newest = envelope(started + 2, "\"newest\"");
  assert_eq!(b.settle("k", 8, newest.clone(), None).await, Some(true));
  assert_eq!(a.peek("k", wall_ms()).await, Some(newest));
  a.stop();
  b.stop();
}

/// A flight that read nothing (`read_first: false`: its tick's read found
/// the key missing) and then won the lock finds the value another instance
/// wrote in between: it is answered by it, and neither loads nor keeps the
/// lock. (It used to let its own give-up fire before releasing, and load
/// without the lock.)
async fn a_lock_winner_that_finds_a_value_written_meanwhile_takes_it_and_frees_the_lock<
  M: Meeting,
>(
  server: &M,
) {
  let a = fleet(server, 5_000, 10_000);
  let b = fleet(server, 5_000, 10_000);
  let value = envelope(wall_ms(), "\"written meanwhile\"");
  assert!(a.write("k", value.clone()).await);
  for id in 1..=20 {
    let acquired = b.acquire("k", id, terms(), false).await;
    assert_eq!(acquired, Acquired::Value(value.clone()), "flight {id}");
  }
  let s = store(server);
  for _ in 0..100 {
    if s.lock_lease(&s.keys("k")).await.unwrap().is_none() {
      break;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
  }
  assert_eq!(
    s.lock_lease(&s.keys("k")).await.unwrap(),
    None,
    "no lock left"
  );
  a.stop();
  b.stop();
}

/// What instance `a` changes, `b` is told to forget (and `a` is not: it
/// knows its own changes).
async fn an_invalidation_from_one_instance_reaches_the_other<M: Meeting>(server: &M) {
  let a = fleet(server, 5_000, 10_000);
  let b = fleet(server, 5_000, 10_000);
  hears(&a, &b).await;
  hears(&b, &a).await;
  assert!(a.write("k", envelope(wall_ms(), "1")).await);
  assert_eq!(a.delete("k").await, Some(true));
  assert!(a.clear().await.is_some());
  let expected = [
    Invalidation::Changed(Change::Filled("k".into())),
    Invalidation::Changed(Change::Deleted("k".into())),
    Invalidation::Changed(Change::Cleared),
  ];
  let about_k = |list: Vec<Invalidation>| -> Vec<Invalidation> {
    list
      .into_iter()
      .filter(|i| expected.contains(i))
      .collect::<Vec<_>>()
  };
  let mut at_b = Vec::new();
  wait_until("b to hear a's changes", || {
    at_b.extend(about_k(b.invalidations().take()));
    at_b.len() >= expected.len()
  })
  .await;
  assert_eq!(at_b, expected);
  // Once a has heard a later change of b's, it has had its own three back
  // from the channel, and kept none of them.
  let mut at_a = hears(&b, &a).await;
  at_a.extend(a.invalidations().take());
  assert_eq!(about_k(at_a), []);
  a.stop();
  b.stop();
}

/// A background refresh that failed on one instance backs off the fleet:
/// the other's background refresh runs no loader (and is told for how
/// long), its foreground load still loads, and a write ends the back-off.
async fn a_failed_refresh_backs_off_background_refreshes_fleet_wide<M: Meeting>(server: &M) {
  let a = fleet(server, 5_000, 30_000);
  let b = fleet(server, 5_000, 30_000);
  let refresh = Terms {
    refresh: true,
    ..terms()
  };
  let Acquired::Load { token: Some(token) } = a.acquire("k", 1, refresh, true).await else {
    panic!("A takes the lock");
  };
  a.fail_refresh("k", 1, Some(token), 2, 2_000).await;
  match b.acquire("k", 1, refresh, true).await {
    Acquired::BackOff { failures: 2, ms } => assert!(ms > 1_000 && ms <= 2_000, "{ms}"),
    other => panic!("B's refresh must back off: {other:?}"),
  }
  assert_eq!(read(&b.counters.lock_acquired), 0);
  // A foreground load ignores it.
  let Acquired::Load { token: Some(token) } = b.acquire("k", 2, terms(), true).await else {
    panic!("B's foreground load takes the lock");
  };
  let now = wall_ms();
  assert_eq!(
    b.settle("k", 2, envelope(now, "\"v\""), Some(token)).await,
    Some(true)
  );
  // The write ended the back-off.
  let s = store(server);
  assert_eq!(s.backoff(&s.keys("k")).await.unwrap(), None);
}

/// Each case on Redis and on the memory store: the same protocol over
/// either store is what makes the seam a seam.
/// A holder whose loader failed lets go of its lock with nothing written:
/// the release is announced, so a loser waiting for its fill asks again at
/// once and loads, instead of waiting out the lease (counted as no fill
/// notice). Other instances' L1s hear nothing: no value changed.
async fn a_loser_takes_the_lock_as_soon_as_the_holder_lets_go<M: Meeting>(server: &M) {
  let (lock_ttl, hard_timeout) = (5_000, 20_000);
  let a = fleet(server, lock_ttl, hard_timeout);
  let b = fleet(server, lock_ttl, hard_timeout);
  let Acquired::Load { token: Some(token) } = a.acquire("k", 1, terms(), true).await else {
    panic!("a takes the free lock");
  };
  let waiter = Arc::clone(&b);
  let loser = tokio::spawn(async move { waiter.acquire("k", 2, terms(), true).await });
  wait_until("b waiting for a's fill", || b.waiting_for("k") == 1).await;
  let released = Instant::now();
  a.abandon("k", 1, Some(token)).await;
  let acquired = loser.await.unwrap();
  assert!(
    matches!(acquired, Acquired::Load { token: Some(_) }),
    "{acquired:?}"
  );
  let waited = released.elapsed();
  assert!(
    waited < Duration::from_millis(lock_ttl / 5),
    "b waited {waited:?} after the release (the lease is {lock_ttl} ms)"
  );
  assert_eq!(read(&b.counters.fill_notices), 0, "a release is no fill");
  let heard = b.invalidations().take();
  assert!(
    !heard.iter().any(|i| matches!(i, Invalidation::Changed(_))),
    "a release changes no value: {heard:?}"
  );
  a.stop();
  b.stop();
}

macro_rules! on_every_store {
  ($(#[$flavor:meta] $case:ident),* $(,)?) => {
    mod on_redis {
      $(
        #[$flavor]
        async fn $case() {
          if let Some(backend) = super::Backend::start() {
            super::$case(&backend).await
          }
        }
      )*
    }
    mod in_memory {
      $(
        #[$flavor]
        async fn $case() {
          super::$case(&super::InMemory::new()).await
        }
      )*
    }
  };
}

on_every_store!(
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  one_winner_per_key_and_the_losers_wake_on_the_fill_notice,
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  a_dead_holders_lease_runs_out_and_another_instance_loads,
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  a_stopped_fleet_releases_its_locks_at_once,
  #[tokio::test]
  a_waiting_loser_holds_one_waiter_and_takes_over_a_dead_lease,
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  a_late_writer_loses_to_a_newer_stamp,
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  a_lock_winner_that_finds_a_value_written_meanwhile_takes_it_and_frees_the_lock,
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  an_invalidation_from_one_instance_reaches_the_other,
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  a_failed_refresh_backs_off_background_refreshes_fleet_wide,
  #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
  a_loser_takes_the_lock_as_soon_as_the_holder_lets_go,
);
