//! How long a lock is held and extended, and what a caller that lost it
//! does next.

/// How a lock is held while a load runs: the lease is short, so a crashed
/// holder frees the key quickly, and is extended while the load runs, so a
/// slow load keeps it (up to `hardTimeout`, which bounds every load).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
  /// The lock's TTL, ms, as set and as extended.
  pub ttl: u64,
  /// How often, ms, a running load extends it.
  pub extend_every: u64,
}

impl Lease {
  pub fn new(lock_ttl: u64) -> Lease {
    let ttl = lock_ttl.max(3);
    Lease {
      ttl,
      extend_every: (ttl / 3).max(1),
    }
  }
}

/// What a caller that lost the lock on a cold miss does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoserStep {
  /// Wait up to this many ms for the winner's fill notice.
  Wait(u64),
  /// The load's own deadline has come: load locally.
  LoadLocally,
}

/// `lease`: the holder's remaining lease (ms, > 0, as the lock script
/// reports it); `waited`: how long this caller has waited so far;
/// `hard_timeout`: the bound of any load. A winner that keeps extending its
/// lease is waited for up to `hard_timeout`; a lease that runs out means the
/// winner died, and the next attempt takes the lock. Every step waits, so a
/// loser never spins.
pub fn loser_step(lease: u64, waited: u64, hard_timeout: u64) -> LoserStep {
  match hard_timeout.saturating_sub(waited) {
    0 => LoserStep::LoadLocally,
    left => LoserStep::Wait(lease.clamp(1, left)),
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn leases_are_extended_three_times_per_ttl() {
    assert_eq!(
      Lease::new(6_000),
      Lease {
        ttl: 6_000,
        extend_every: 2_000
      }
    );
    assert_eq!(Lease::new(0).ttl, 3);
  }

  #[test]
  fn losers_wait_for_a_live_lease_then_load_locally() {
    assert_eq!(loser_step(2_000, 0, 30_000), LoserStep::Wait(2_000));
    // Never past the load's own deadline.
    assert_eq!(loser_step(2_000, 29_500, 30_000), LoserStep::Wait(500));
    assert_eq!(loser_step(2_000, 30_000, 30_000), LoserStep::LoadLocally);
    // Every step before the deadline waits at least 1 ms: no spinning.
    assert_eq!(loser_step(0, 100, 30_000), LoserStep::Wait(1));
  }
}
