//! A deterministic simulation of a fleet (tests only), in the spirit of
//! FoundationDB's and TigerBeetle's: a few instances of the whole engine
//! over one [`MemoryServer`], on a paused tokio runtime whose clock is
//! every instance's and the store's (`clock::simulated`), one seeded
//! scheduler choosing every call, every wait and every fault (slow,
//! silent, refusing and lost replies per instance, the store down, every
//! subscription dropped, clocks skewed, an instance killed mid-load).
//! Calls are `getOrLoad` (a third of them taking stale values, which start
//! background refreshes; one key's values go stale fast), `set`, `delete`
//! and `expire`; one loader run in seven fails.
//! [`check::History`] checks the invariants after every step. A failing
//! seed prints itself and its trace; `HERDCACHE_SIM_SEED=<n>` replays it.

mod check;
mod rng;
mod world;

use self::check::{Bounds, History};
use self::rng::Rng;
use self::world::{Options, World};
use crate::engine::clock::simulated;
use crate::engine::shared::{Faults, MemoryServer};
use std::rc::Rc;
use std::time::Duration;

const KEYS: [&str; 3] = ["a", "b", "c"];
const INSTANCES: usize = 3;
const STEPS: usize = 600;
/// The server's clock at the start of every run (any epoch would do).
const EPOCH: u64 = 1_800_000_000_000;

fn options() -> Options {
  Options {
    ttl: 2_000,
    lock_ttl: 300,
    hard_timeout: 1_500,
    redis_timeout: 100,
    breaker_cooldown: 200,
  }
}

/// What a run found: the invariant broken (with its trace), if any, and
/// a digest of everything it did (two runs of a seed must match).
pub struct Outcome {
  pub violation: Option<String>,
  pub trace: Vec<String>,
}

/// One simulation of `seed`.
pub fn run(seed: u64) -> Outcome {
  let runtime = tokio::runtime::Builder::new_current_thread()
    .enable_time()
    .start_paused(true)
    .build()
    .expect("a runtime");
  let local = tokio::task::LocalSet::new();
  let outcome = local.block_on(&runtime, async move {
    simulated::start(EPOCH);
    let world = simulate(seed).await;
    let history = world.history.replace(History::new(bounds(&options())));
    for instance in world.instances.borrow().iter() {
      instance.cache.borrow_mut().close();
    }
    Outcome {
      violation: history.violation,
      trace: history.trace,
    }
  });
  simulated::stop();
  outcome
}

fn bounds(o: &Options) -> Bounds {
  Bounds {
    lock_ttl: o.lock_ttl,
    hard_timeout: o.hard_timeout,
    breaker_cooldown: o.breaker_cooldown,
    // The longest round trip a slow connection has (below), halved, and
    // a few ms.
    clock_error: SLOW_MS / 2 + 5,
  }
}

/// The slowest a connection gets without failing (below `redisTimeout`).
const SLOW_MS: u64 = 40;

async fn simulate(seed: u64) -> Rc<World> {
  let mut rng = Rng::new(seed);
  let server = MemoryServer::starting_at(EPOCH);
  let o = options();
  let history = History::new(bounds(&o));
  let world = World::new(server, history, o);
  // Faults only in two seeds of three: the others check every invariant
  // at every step, with nothing exempt.
  let faulty = rng.below(3) != 0;
  for _ in 0..INSTANCES {
    let skew = match faulty && rng.percent(50) {
      true => rng.between(0, 6_000) as i64 - 3_000,
      false => 0,
    };
    world.start_instance(skew);
  }
  // The instances measure their clocks and subscribe.
  tokio::time::sleep(Duration::from_millis(50)).await;
  let mut killed = false;
  for _ in 0..STEPS {
    step(&world, &mut rng, faulty, &mut killed).await;
    check(&world);
    if world.history.borrow().violation.is_some() {
      return world;
    }
  }
  // Faults stop; everything in flight ends, and the fleet settles.
  for instance in world.instances.borrow().iter().filter(|i| i.alive.get()) {
    instance.faults.set(Faults::default());
  }
  world.server.set_down(false);
  let settle = world.options.hard_timeout + world.options.lock_ttl + 2_500;
  tokio::time::sleep(Duration::from_millis(settle)).await;
  check(&world);
  last_round(&world).await;
  finish(&world);
  world
}

/// Once the fleet settled: every instance reads every key (one loads, the
/// others take its value), then one instance changes two keys; every L1
/// must hear of it (checked by [`finish`], well within the TTL).
async fn last_round(world: &Rc<World>) {
  world.log("faults over: the last round".into());
  let alive: Vec<usize> = (0..world.instances.borrow().len())
    .filter(|&i| world.instance(i).alive.get())
    .collect();
  for &i in &alive {
    for key in KEYS {
      world::spawn_on(
        world,
        i,
        world::get_or_load(Rc::clone(world), i, key.into(), false),
      );
    }
  }
  // Every call settles by its hardTimeout, whatever faults left behind.
  tokio::time::sleep(Duration::from_millis(world.options.hard_timeout + 100)).await;
  let i = alive[0];
  world::spawn_on(world, i, world::set(Rc::clone(world), i, KEYS[0].into()));
  world::spawn_on(world, i, world::delete(Rc::clone(world), i, KEYS[1].into()));
  tokio::time::sleep(Duration::from_millis(100)).await;
  check(world);
}

/// One choice of the scheduler.
async fn step(world: &Rc<World>, rng: &mut Rng, faulty: bool, killed: &mut bool) {
  let i = rng.below(world.instances.borrow().len() as u64) as usize;
  let key = KEYS[rng.below(KEYS.len() as u64) as usize].to_string();
  let alive = world.instance(i).alive.get();
  let roll = rng.below(100);
  match roll {
    0..=44 if alive => {
      // A third of the callers take stale values (and start refreshes).
      let allow_stale = roll % 3 == 0;
      let call = world::get_or_load(Rc::clone(world), i, key, allow_stale);
      world::spawn_on(world, i, call);
    }
    45..=49 if alive => world::spawn_on(world, i, world::set(Rc::clone(world), i, key)),
    50..=52 if alive => world::spawn_on(world, i, world::delete(Rc::clone(world), i, key)),
    53 if alive => world::spawn_on(world, i, world::expire(Rc::clone(world), i, key)),
    54..=56 if alive => {
      let ms = rng.between(0, SLOW_MS);
      world.log(format!("i{i} connection now takes {ms} ms"));
      world.instance(i).faults.set(Faults {
        latency: Duration::from_millis(ms),
        ..Faults::default()
      });
    }
    57 => {
      world.log("every subscription drops".into());
      world.server.drop_subscriptions();
    }
    58 if faulty => fault(world, rng, i),
    59 if faulty && alive && !*killed && i != 0 => {
      *killed = true;
      world.log(format!("i{i} is killed"));
      world.kill(i);
    }
    _ => {
      let ms = rng.between(0, 25);
      tokio::time::sleep(Duration::from_millis(ms)).await;
    }
  }
  // Every choice lets the tasks it started run to their first wait.
  tokio::task::yield_now().await;
}

/// A fault that stops the store answering (some or all of it) for a while.
fn fault(world: &Rc<World>, rng: &mut Rng, i: usize) {
  let lasts = rng.between(50, 600);
  let now = world.now();
  world.history.borrow_mut().fault(now, lasts);
  let instance = world.instance(i);
  let faults = match rng.below(4) {
    0 => Faults {
      latency: Duration::from_millis(world.options.redis_timeout * 3),
      ..Faults::default()
    },
    1 => Faults {
      refused: true,
      ..Faults::default()
    },
    2 => Faults {
      lose_replies: 1,
      ..Faults::default()
    },
    _ => {
      world.log(format!("the store is down for {lasts} ms"));
      world.server.set_down(true);
      let server = std::sync::Arc::clone(&world.server);
      tokio::task::spawn_local(async move {
        tokio::time::sleep(Duration::from_millis(lasts)).await;
        server.set_down(false);
      });
      return;
    }
  };
  if !instance.alive.get() {
    return;
  }
  world.log(format!("i{i} connection fails for {lasts} ms: {faults:?}"));
  instance.faults.set(faults);
  let restore = async move {
    tokio::time::sleep(Duration::from_millis(lasts)).await;
    // A killed instance stays dead.
    if instance.alive.get() {
      instance.faults.set(Faults::default());
    }
  };
  tokio::task::spawn_local(restore);
}

/// The invariants on the store, after a step.
fn check(world: &Rc<World>) {
  let values: Vec<_> = KEYS
    .iter()
    .map(|key| (key.to_string(), world.stored(key)))
    .collect();
  let locks = world.locks();
  let now = world.now();
  world.history.borrow_mut().check_store(now, &values, &locks);
}

/// The invariants at the end: every call settled, every L1 converged.
fn finish(world: &Rc<World>) {
  let now = world.now();
  world.history.borrow_mut().check_settled(now);
  for (i, instance) in world.instances.borrow().iter().enumerate() {
    if !instance.alive.get() {
      continue;
    }
    for key in KEYS {
      let l1 = instance.cache.borrow_mut().get(key, false).cloned();
      let stored = world.stored(key);
      world
        .history
        .borrow_mut()
        .check_converged(now, i, key, l1.as_deref(), stored.as_ref());
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  /// The default seeds: a thousand runs, each a fleet's few seconds.
  fn seeds(range: std::ops::Range<u64>) {
    if let Ok(seed) = std::env::var("HERDCACHE_SIM_SEED") {
      let seed: u64 = seed.parse().expect("HERDCACHE_SIM_SEED is a number");
      if range.contains(&seed) || range.start == 0 {
        replay(seed);
      }
      return;
    }
    for seed in range {
      let outcome = run(seed);
      if let Some(violation) = outcome.violation {
        let tail = outcome.trace.len().saturating_sub(60);
        panic!(
          "seed {seed} broke an invariant: {violation}\nreplay it: HERDCACHE_SIM_SEED={seed} cargo test --profile tests --lib sim::tests -- --nocapture\nthe trace's end:\n{}",
          outcome.trace[tail..].join("\n")
        );
      }
    }
  }

  fn replay(seed: u64) {
    let outcome = run(seed);
    eprintln!("{}", outcome.trace.join("\n"));
    assert!(
      outcome.violation.is_none(),
      "seed {seed}: {:?}",
      outcome.violation
    );
  }

  #[test]
  fn seeds_0_to_249() {
    seeds(0..250);
  }

  #[test]
  fn seeds_250_to_499() {
    seeds(250..500);
  }

  #[test]
  fn seeds_500_to_749() {
    seeds(500..750);
  }

  #[test]
  fn seeds_750_to_999() {
    seeds(750..1_000);
  }

  /// A seed replays exactly: the same trace, step for step, and the same
  /// outcome.
  #[test]
  fn a_seed_replays_exactly() {
    for seed in [7, 42, 1_234, 9_999, 31_337] {
      let (first, second) = (run(seed), run(seed));
      assert_eq!(first.violation, second.violation, "seed {seed}");
      assert!(
        first.trace == second.trace,
        "seed {seed}: the traces differ"
      );
    }
  }
}
