//! The circuit breaker in front of Redis: after `threshold` consecutive
//! failures it opens, and calls skip Redis (served from memory or the loader)
//! instead of each waiting for a timeout; after `cooldown` one probe is let
//! through (the fleet's probe task, never a caller: [`Breaker::closed`]),
//! and its success closes the breaker again.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
  Closed {
    failures: u32,
  },
  Open {
    until: u64,
  },
  /// One probe is out; others keep skipping Redis until it answers.
  HalfOpen,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
  pub state: State,
  pub threshold: u32,
  pub cooldown: u64,
}

impl Breaker {
  pub fn new(threshold: u32, cooldown: u64) -> Breaker {
    Breaker {
      state: State::Closed { failures: 0 },
      threshold: threshold.max(1),
      cooldown,
    }
  }

  /// Whether callers may use Redis: only while closed. Open or half-open,
  /// they skip it, and the probe is [`Breaker::allow`]'s.
  pub fn closed(&self) -> bool {
    matches!(self.state, State::Closed { .. })
  }

  /// Whether a call at `now` may use Redis. Past the cool-down, the first
  /// call becomes the probe.
  pub fn allow(&mut self, now: u64) -> bool {
    match self.state {
      State::Closed { .. } => true,
      State::Open { until } if now >= until => {
        self.state = State::HalfOpen;
        true
      }
      State::Open { .. } | State::HalfOpen => false,
    }
  }

  pub fn success(&mut self) {
    self.state = State::Closed { failures: 0 };
  }

  /// Records a failure; true when this one opened the breaker.
  pub fn failure(&mut self, now: u64) -> bool {
    match self.state {
      State::Closed { failures } if failures + 1 < self.threshold => {
        self.state = State::Closed {
          failures: failures + 1,
        };
        false
      }
      State::Open { .. } => false,
      _ => {
        self.state = State::Open {
          until: now.saturating_add(self.cooldown),
        };
        true
      }
    }
  }

  pub fn is_open(&self) -> bool {
    !matches!(self.state, State::Closed { .. })
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn opens_after_consecutive_failures_only() {
    let mut b = Breaker::new(3, 1_000);
    assert!(!b.failure(0));
    assert!(!b.failure(0));
    b.success();
    assert!(!b.failure(0));
    assert!(!b.failure(0));
    assert!(b.failure(10));
    assert!(b.is_open());
    assert!(!b.allow(500));
  }

  #[test]
  fn lets_one_probe_through_after_the_cooldown() {
    let mut b = Breaker::new(1, 1_000);
    assert!(b.failure(0));
    assert!(!b.allow(999));
    assert!(b.allow(1_000), "the probe");
    assert!(!b.allow(1_001), "only one probe");
    b.success();
    assert!(b.allow(1_002));
    assert!(!b.is_open());
  }

  #[test]
  fn callers_never_become_the_probe() {
    let mut b = Breaker::new(1, 1_000);
    assert!(b.closed());
    b.failure(0);
    assert!(!b.closed(), "open");
    assert!(b.allow(1_000), "the probe's");
    assert!(!b.closed(), "half-open: callers still skip Redis");
    b.success();
    assert!(b.closed());
  }

  #[test]
  fn a_failed_probe_opens_it_again() {
    let mut b = Breaker::new(1, 1_000);
    b.failure(0);
    assert!(b.allow(1_000));
    assert!(b.failure(1_000));
    assert!(!b.allow(1_999));
    assert!(b.allow(2_000));
  }
}
