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

/// How long a caller that lost the lock on a cold miss waits for the
/// winner's fill notice before it reads and asks for the lock again:
/// `lease`, the holder's remaining lease (ms, as the lock script reports
/// it), at least 1 ms, so a loser never spins. A winner that keeps
/// extending its lease is waited for; a lease that runs out means the
/// winner died, and the next attempt takes the lock. The wait has no clock
/// of its own: the call's `hardTimeout`, counted from the call by its JS
/// leader (`lib/deadlines.js`), gives the flight up, which ends these steps
/// (`Fleet::acquire_steps`). A second clock here, started later (at the
/// lock request), could only ever fire after that one.
pub fn loser_wait(lease: u64) -> u64 {
  lease.max(1)
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
  fn losers_wait_for_the_holders_lease_and_never_spin() {
    assert_eq!(loser_wait(2_000), 2_000);
    assert_eq!(loser_wait(0), 1);
  }
}
