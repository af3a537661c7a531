//! What the simulator saw, and the invariants it checks after every step:
//! one loader per key at a time and none while the store holds a fresh
//! loaded value, no background refresh's loader while the key backs off
//! fleet-wide (each while the store answers), no value of a load begun
//! before an applied `expire` stored fresh after it, no live `set` or `delete`
//! overwritten by an older fill, no lock outliving its holder by more than
//! `lockTtl`, every caller settled, and every L1 agreeing with the store
//! once faults stopped.

use std::collections::HashMap;

/// The bounds the protocol documents, for this simulation's options.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
  pub lock_ttl: u64,
  pub hard_timeout: u64,
  pub breaker_cooldown: u64,
  /// How far two instances' clocks may disagree once measured against
  /// the store's: half the longest round trip, plus a few ms.
  pub clock_error: u64,
}

/// Where a value in the store came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
  /// A loader's, which began at this server time (what it read is at
  /// least that old).
  Fill { began: u64 },
  /// A live `set`'s.
  Set,
}

#[derive(Debug)]
struct LoaderRun {
  instance: usize,
  key: String,
  ended: bool,
}

/// A live call on `key` made at `at` that the store applied: a `set` or
/// `delete` ([`History::applied`]), or an `expire` ([`History::expired`]).
#[derive(Debug)]
struct Applied {
  key: String,
  at: u64,
}

#[derive(Debug)]
struct Call {
  instance: usize,
  key: String,
  flight: Option<u64>,
  settled: bool,
}

/// The store's view of one key, as the checks need it.
#[derive(Debug, Clone)]
pub struct Stored {
  pub json: String,
  pub fresh_until: u64,
  pub stamp: u64,
}

#[derive(Debug)]
pub struct History {
  bounds: Bounds,
  /// Faults make the one-loader checks moot until then (server ms): the
  /// fleet fails open while the store does not answer.
  exempt_until: u64,
  runs: Vec<LoaderRun>,
  origins: HashMap<String, Origin>,
  /// The values a `ctx.keep()` confirmed: when the keeping loader read
  /// its origin (the latest keep).
  confirmed: HashMap<String, u64>,
  applied: Vec<Applied>,
  expired: Vec<Applied>,
  /// Lock tokens the flights won, by token: the instance, and when the
  /// flight that held it ended.
  tokens: HashMap<String, (usize, Option<u64>)>,
  calls: Vec<Call>,
  dead: Vec<usize>,
  /// The first invariant broken, with the moment.
  pub violation: Option<String>,
  /// Every step, for the report of a failing seed.
  pub trace: Vec<String>,
}

impl History {
  pub fn new(bounds: Bounds) -> History {
    History {
      bounds,
      exempt_until: 0,
      runs: Vec::new(),
      origins: HashMap::new(),
      confirmed: HashMap::new(),
      applied: Vec::new(),
      expired: Vec::new(),
      tokens: HashMap::new(),
      calls: Vec::new(),
      dead: Vec::new(),
      violation: None,
      trace: Vec::new(),
    }
  }

  pub fn log(&mut self, now: u64, line: String) {
    self.trace.push(format!("{now:>6} {line}"));
  }

  fn broken(&mut self, now: u64, what: String) {
    self.log(now, format!("VIOLATION {what}"));
    if self.violation.is_none() {
      self.violation = Some(format!("at {now} ms: {what}"));
    }
  }

  /// A fault lasting `lasts` ms starts now: the store may not answer, so
  /// the fleet may load without its lock until every flight begun meanwhile
  /// ended.
  pub fn fault(&mut self, now: u64, lasts: u64) {
    let b = self.bounds;
    let until = now + lasts + b.hard_timeout + b.lock_ttl + b.breaker_cooldown;
    self.exempt_until = self.exempt_until.max(until);
  }

  pub fn exempt(&self, now: u64) -> bool {
    now < self.exempt_until
  }

  pub fn killed(&mut self, now: u64, instance: usize) {
    self.dead.push(instance);
    for run in self.runs.iter_mut().filter(|r| r.instance == instance) {
      run.ended = true;
    }
    for (owner, ended) in self.tokens.values_mut() {
      if *owner == instance && ended.is_none() {
        *ended = Some(now);
      }
    }
  }

  /// A loader starts for `key` on `instance`, the store holding `stored`
  /// (fresh or not); `backing_off`: the loader is a background refresh
  /// nobody waits on, and the key's fleet back-off marker is live. Returns
  /// the run's index.
  pub fn loader_started(
    &mut self,
    now: u64,
    instance: usize,
    key: &str,
    stored: Option<Stored>,
    backing_off: bool,
  ) -> usize {
    if !self.exempt(now) {
      if backing_off {
        let what = format!("instance {instance} refreshes {key:?} while the fleet backs it off");
        self.broken(now, what);
      }
      let running = self
        .runs
        .iter()
        .find(|r| r.key == key && !r.ended && !self.dead.contains(&r.instance));
      if let Some(other) = running {
        let what = format!(
          "two loaders of {key:?} at once: on instance {} and {instance}",
          other.instance
        );
        self.broken(now, what);
      }
      if let Some(stored) = stored {
        let loaded = matches!(self.origins.get(&stored.json), Some(Origin::Fill { .. }));
        if loaded && stored.fresh_until > now + self.bounds.clock_error {
          let what = format!(
            "instance {instance} loads {key:?} while the store holds {} fresh until {}",
            stored.json, stored.fresh_until
          );
          self.broken(now, what);
        }
      }
    }
    self.runs.push(LoaderRun {
      instance,
      key: key.to_string(),
      ended: false,
    });
    self.runs.len() - 1
  }

  pub fn loader_ended(&mut self, run: usize) {
    self.runs[run].ended = true;
  }

  pub fn value(&mut self, json: &str, origin: Origin) {
    self.origins.insert(json.to_string(), origin);
  }

  /// A keep of `json` by a load stamped `stamp` landed, and the store now
  /// holds `stored`: the value kept, or one written since (a greater
  /// stamp). A keep that restamped another value broke the protocol.
  pub fn keep_landed(
    &mut self,
    now: u64,
    key: &str,
    json: &str,
    stamp: u64,
    stored: Option<Stored>,
  ) {
    if let Some(stored) = stored.filter(|s| s.stamp <= stamp && s.json != json) {
      let what = format!(
        "{key:?}: a keep of {json} stamped {stamp} landed, and the store holds {} stamped {}",
        stored.json, stored.stamp
      );
      self.broken(now, what);
    }
  }

  /// A load kept `json`: its origin was read at `at` and found unchanged.
  pub fn kept(&mut self, json: &str, at: u64) {
    let confirmed = self.confirmed.entry(json.to_string()).or_default();
    *confirmed = (*confirmed).max(at);
  }

  /// A live `set` or `delete` of `key` made at `at` is in the store.
  pub fn applied(&mut self, key: &str, at: u64) {
    self.applied.push(Applied {
      key: key.to_string(),
      at,
    });
  }

  /// A live `expire` of `key` at `at` is in the store.
  pub fn expired(&mut self, key: &str, at: u64) {
    self.expired.push(Applied {
      key: key.to_string(),
      at,
    });
  }

  pub fn token(&mut self, token: &str, instance: usize) {
    self.tokens.insert(token.to_string(), (instance, None));
  }

  pub fn token_released(&mut self, now: u64, token: &str) {
    if let Some((_, ended)) = self.tokens.get_mut(token) {
      ended.get_or_insert(now);
    }
  }

  pub fn call(&mut self, instance: usize, key: &str) -> usize {
    self.calls.push(Call {
      instance,
      key: key.to_string(),
      flight: None,
      settled: false,
    });
    self.calls.len() - 1
  }

  pub fn joined(&mut self, call: usize, flight: u64) {
    self.calls[call].flight = Some(flight);
  }

  pub fn settled(&mut self, call: usize) {
    self.calls[call].settled = true;
  }

  /// Flight `flight` ended: every call that waited on it is answered.
  pub fn flight_ended(&mut self, flight: u64) {
    for call in self.calls.iter_mut().filter(|c| c.flight == Some(flight)) {
      call.settled = true;
    }
  }

  /// After every step: what the store holds (`values` by key, `locks` as
  /// token and lease left).
  pub fn check_store(
    &mut self,
    now: u64,
    values: &[(String, Option<Stored>)],
    locks: &[(String, i64)],
  ) {
    let margin = self.bounds.clock_error;
    for (key, stored) in values {
      let Some(stored) = stored else { continue };
      let Some(Origin::Fill { began }) = self.origins.get(&stored.json).copied() else {
        continue;
      };
      let newer = self
        .applied
        .iter()
        .find(|op| op.key == *key && op.at > began + margin);
      if let Some(op) = newer {
        let what = format!(
          "{key:?} holds {} from a load begun at {began}, older than a live set or delete at {}",
          stored.json, op.at
        );
        self.broken(now, what);
      }
      // A load begun before an expire may have read what changed: it is
      // not stored fresh after it, unless a load begun after it confirmed
      // the value (a keep). A keep never outlives a set or a delete: the
      // check above judges the value by its first load.
      let read = self
        .confirmed
        .get(&stored.json)
        .map_or(began, |&at| at.max(began));
      let expired = self
        .expired
        .iter()
        .find(|op| op.key == *key && op.at > read + margin);
      if let Some(op) = expired.filter(|_| stored.fresh_until > now + margin) {
        let what = format!(
          "{key:?} holds {} fresh, from a load begun at {read}, before an expire at {}",
          stored.json, op.at
        );
        self.broken(now, what);
      }
    }
    for (token, lease) in locks {
      if *lease > self.bounds.lock_ttl as i64 {
        self.broken(now, format!("a lease of {lease} ms, over lockTtl"));
      }
      if let Some((owner, Some(ended))) = self.tokens.get(token).copied() {
        if now > ended + self.bounds.lock_ttl + margin {
          let what =
            format!("instance {owner}'s lock outlived its flight (ended at {ended}) past lockTtl");
          self.broken(now, what);
        }
      }
    }
  }

  /// At the end: every call of a live instance was answered.
  pub fn check_settled(&mut self, now: u64) {
    let open: Vec<String> = self
      .calls
      .iter()
      .filter(|c| !c.settled && !self.dead.contains(&c.instance))
      .map(|c| format!("instance {}'s call of {:?}", c.instance, c.key))
      .collect();
    if let Some(first) = open.first() {
      let what = format!("{} call(s) never settled, first {first}", open.len());
      self.broken(now, what);
    }
  }

  /// At the end, faults over: what an L1 answers as fresh is what the
  /// store holds fresh.
  pub fn check_converged(
    &mut self,
    now: u64,
    instance: usize,
    key: &str,
    l1: Option<&str>,
    stored: Option<&Stored>,
  ) {
    let store = stored.filter(|s| s.fresh_until > now + self.bounds.clock_error);
    let agrees = match (l1, store) {
      (None, _) => true,
      (Some(l1), Some(stored)) => l1 == stored.json,
      // Fresh in the store's clock error only: either is right.
      (Some(_), None) => stored.is_some_and(|s| s.fresh_until + self.bounds.clock_error > now),
    };
    if !agrees {
      let what = format!(
        "instance {instance}'s L1 answers {key:?} with {l1:?}, the store holds {:?}",
        stored.map(|s| &s.json)
      );
      self.broken(now, what);
    }
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn history() -> History {
    History::new(Bounds {
      lock_ttl: 300,
      hard_timeout: 1_500,
      breaker_cooldown: 200,
      clock_error: 25,
    })
  }

  fn stored(json: &str, fresh_until: u64) -> Option<Stored> {
    Some(Stored {
      json: json.into(),
      fresh_until,
      stamp: 0,
    })
  }

  /// Each check can fail: the histories a broken protocol would make.
  #[test]
  fn two_loaders_at_once_or_one_over_a_fresh_fill_break_it() {
    let mut h = history();
    let first = h.loader_started(1_000, 0, "k", None, false);
    let second = h.loader_started(1_010, 1, "k", None, false);
    assert!(h.violation.take().unwrap().contains("two loaders"));
    h.loader_ended(first);
    h.loader_ended(second);
    h.value("\"v1\"", Origin::Fill { began: 1_000 });
    h.loader_started(1_100, 2, "k", stored("\"v1\"", 3_000), false);
    assert!(h
      .violation
      .take()
      .unwrap()
      .contains("while the store holds"));
    // A set's value is not a load's: loading over it is no second load.
    h.value("\"v2\"", Origin::Set);
    h.loader_started(1_200, 2, "j", stored("\"v2\"", 3_000), false);
    // Nor is anything while a fault lets the fleet fail open.
    h.fault(1_300, 100);
    h.loader_started(1_310, 0, "k", stored("\"v1\"", 3_000), false);
    assert_eq!(h.violation, None);
  }

  #[test]
  fn a_fresh_fill_from_a_load_begun_before_an_expire_breaks_it() {
    let mut h = history();
    h.value("\"read before\"", Origin::Fill { began: 1_000 });
    h.expired("k", 1_100);
    // Stale in the store (the expire's own rewrite): fine.
    h.check_store(
      1_200,
      &[("k".to_string(), stored("\"read before\"", 1_100))],
      &[],
    );
    assert_eq!(h.violation, None);
    h.check_store(
      1_200,
      &[("k".to_string(), stored("\"read before\"", 9_000))],
      &[],
    );
    assert!(h.violation.take().unwrap().contains("before an expire"));
    // A load begun after it is fine.
    h.value("\"read after\"", Origin::Fill { began: 1_150 });
    h.check_store(
      1_200,
      &[("k".to_string(), stored("\"read after\"", 9_000))],
      &[],
    );
    assert_eq!(h.violation, None);
  }

  #[test]
  fn a_refresh_run_while_the_fleet_backs_the_key_off_breaks_it() {
    let mut h = history();
    h.loader_started(1_000, 0, "k", None, true);
    assert!(h.violation.take().unwrap().contains("backs it off"));
    // Not while a fault lets the fleet fail open.
    h.fault(1_100, 100);
    h.loader_started(1_110, 1, "j", None, true);
    assert_eq!(h.violation, None);
  }

  #[test]
  fn an_older_fill_over_a_delete_or_a_lock_past_its_holder_breaks_it() {
    let mut h = history();
    h.value("\"old\"", Origin::Fill { began: 1_000 });
    h.applied("k", 1_100);
    let values = [("k".to_string(), stored("\"old\"", 3_000))];
    h.check_store(1_200, &values, &[]);
    assert!(h
      .violation
      .take()
      .unwrap()
      .contains("older than a live set or delete"));
    h.token("t", 0);
    h.token_released(1_000, "t");
    h.check_store(1_200, &[], &[("t".into(), 100)]);
    assert_eq!(h.violation, None, "within lockTtl of its end");
    h.check_store(1_400, &[], &[("t".into(), 100)]);
    assert!(h.violation.take().unwrap().contains("outlived"));
    h.check_store(1_400, &[], &[("u".into(), 301)]);
    assert!(h.violation.take().unwrap().contains("over lockTtl"));
  }

  #[test]
  fn a_keep_that_restamped_another_value_breaks_it() {
    let mut h = history();
    let at = |json: &str, stamp: u64| {
      Some(Stored {
        stamp,
        ..stored(json, 9_000).unwrap()
      })
    };
    h.keep_landed(2_000, "k", "\"v1\"", 1_500, at("\"v1\"", 1_500));
    h.keep_landed(2_000, "k", "\"v1\"", 1_500, at("\"v2\"", 1_600));
    h.keep_landed(2_000, "k", "\"v1\"", 1_500, None);
    assert!(h.violation.is_none(), "{:?}", h.violation);
    h.keep_landed(2_000, "k", "\"v1\"", 1_500, at("\"v2\"", 1_500));
    assert!(h.violation.unwrap().contains("a keep of"));
  }

  #[test]
  fn an_unsettled_call_or_a_diverged_l1_breaks_it() {
    let mut h = history();
    let call = h.call(0, "k");
    h.joined(call, 7);
    h.check_settled(5_000);
    assert!(h.violation.take().unwrap().contains("never settled"));
    h.flight_ended(7);
    h.check_settled(5_000);
    assert_eq!(h.violation, None);
    h.check_converged(
      5_000,
      1,
      "k",
      Some("\"a\""),
      stored("\"b\"", 9_000).as_ref(),
    );
    assert!(h.violation.take().unwrap().contains("L1 answers"));
    h.check_converged(5_000, 1, "k", Some("\"a\""), None);
    assert!(h.violation.take().is_some(), "an L1 serving a deleted key");
    h.check_converged(
      5_000,
      1,
      "k",
      Some("\"b\""),
      stored("\"b\"", 9_000).as_ref(),
    );
    assert_eq!(h.violation, None);
  }
}
