//! Who loads a key across the fleet, as a machine without I/O: another
//! instance's value, the lock (this instance loads), a wait for the
//! holder's fill notice, or the fleet's back-off. [`Acquisition::step`]
//! takes what was heard (a read's answer, the lock's, the end of a wait)
//! and says what to do next ([`Next`]); `engine::fleet` carries each step
//! out against the store and feeds the answer back. Every decision of the
//! lock and wait loop is here, so it is tested with fixed inputs, and the
//! fleet simulator checks it through the engine.
//!
//! The loop, for one flight:
//!
//! 1. The store unavailable (the breaker open): load locally.
//! 2. Unless the flight's first read just happened (batched per tick), read:
//!    a value that answers the flight's terms ends it.
//! 3. Ask for the lock under one token (the same on every ask, so a
//!    retried command that landed is still ours).
//!    - Won: register the lock and keep its lease, then read again (a value
//!      written between our read and our lock answers the flight, and the
//!      lock is let go of). Nothing there: load under the lock.
//!    - Held by another instance: listen for its fill notice *before*
//!      re-reading (a fill in between still wakes us), then wait for the
//!      notice or the end of the holder's lease ([`loser_wait`]), read
//!      again, and ask for the lock again if nothing came.
//!    - Backing off (a background refresh only): end without a load.
//! 4. A store failure at any step: load locally (fail open).
//! 5. Given up (timed out, the leader gone, the cache closing): end at
//!    once, letting go of a lock won but not yet registered.

use super::lease::loser_wait;
use crate::core::envelope::Envelope;

/// What an attempt to take the fleet lock found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockAttempt {
  /// This caller holds the lock now.
  Won,
  /// Another instance holds it, for this many more ms.
  Held(u64),
  /// Only from a background refresh's lock: the key backs off after
  /// `failures` failed refreshes in a row, for this many more ms.
  BackingOff { failures: u32, ms: u64 },
}

/// What a flight does once the fleet decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
  /// Another instance's fresh value: use it, run no loader.
  Value(Envelope),
  /// A stale value, for a caller that accepts one (a refresh should start).
  Stale(Envelope),
  /// A background refresh while the key backs off fleet-wide (another
  /// instance's refresh failed): run no loader, back off locally as well.
  BackOff { failures: u32, ms: u64 },
  /// Run the loader. `token` is the lock held (`None`: the store is
  /// unavailable or the flight was given up: load without it).
  Load { token: Option<String> },
}

impl Acquired {
  /// Load without the lock.
  pub const LOCAL: Acquired = Acquired::Load { token: None };
}

/// Which read the machine asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
  /// The flight's first read: any value that answers its terms (a stale
  /// one, for callers that accept it).
  Answer,
  /// A re-check around the lock: only a fresh value (newer than the stamp
  /// an early refresh replaces).
  Fresh,
  /// The lock is held elsewhere: listen for the key's fill notice (one
  /// listener per flight, kept across waits), then check as
  /// [`Check::Fresh`]. `first_contention`: the flight's first time.
  BeforeWait { first_contention: bool },
}

/// What a read answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadAnswer {
  /// The store failed.
  Failed,
  /// Nothing there answers the flight.
  Nothing,
  /// This answers it.
  Answers(Acquired),
}

/// What the machine was told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
  /// The steps begin; `allowed`: calls may reach the store (the breaker).
  Began {
    allowed: bool,
  },
  Read(ReadAnswer),
  /// The lock's answer; `None`: the command failed (whoever carries it out
  /// releases the lock later, in case it landed).
  Locked(Option<LockAttempt>),
  /// The won lock was registered with its lease keeper (false: the flight
  /// was given up meanwhile).
  LeaseKept(bool),
  /// The lock asked for by [`Next::Release`] is being let go of.
  Released,
  /// The wait for the holder ended (its notice, or its lease's end).
  Woke,
  /// The flight was given up.
  GivenUp,
}

/// What to carry out next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
  Read(Check),
  /// Ask for the lock under [`Acquisition::token`]; `refresh`: as a
  /// background refresh, which the fleet's back-off marker refuses.
  Lock {
    refresh: bool,
  },
  /// The lock is ours: register it and extend its lease while the flight
  /// runs.
  KeepLease,
  /// Let go of the lock won under [`Acquisition::token`] (not registered).
  Release,
  /// Wait up to `ms` for the holder's fill notice.
  Wait {
    ms: u64,
  },
  /// Decided. An [`Acquired`] other than a load under the lock holds no
  /// lock: one registered is let go of by whoever carries this out.
  Done(Acquired),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
  Begin,
  FirstRead,
  Locking,
  /// The lock is won, not yet registered.
  Won,
  /// Registered; re-reading before the load.
  AfterWin,
  /// Held elsewhere for `lease` ms; re-reading before the wait.
  BeforeWait {
    lease: u64,
  },
  Waiting,
  AfterWait,
  Releasing,
  Done,
}

/// One flight's way to its loader: see the module's doc.
#[derive(Debug)]
pub struct Acquisition {
  state: State,
  /// The lock token (drawn by the caller: a UUID v4).
  token: String,
  read_first: bool,
  refresh: bool,
  contended: bool,
}

impl Acquisition {
  /// `read_first`: no read answered this flight yet; `refresh`: a
  /// background refresh nobody waits on (it honours the fleet's back-off).
  pub fn new(token: String, read_first: bool, refresh: bool) -> Acquisition {
    Acquisition {
      state: State::Begin,
      token,
      read_first,
      refresh,
      contended: false,
    }
  }

  /// The token every lock command of this flight carries.
  pub fn token(&self) -> &str {
    &self.token
  }

  /// Whether the machine has decided (its tests ask).
  #[cfg(test)]
  fn is_done(&self) -> bool {
    self.state == State::Done
  }

  /// What to do after `heard`.
  pub fn step(&mut self, heard: Heard) -> Next {
    use Heard::*;
    use State::*;
    let state = std::mem::replace(&mut self.state, Done);
    match (state, heard) {
      (Won, GivenUp) | (Won, LeaseKept(false)) => self.to(Releasing, Next::Release),
      (Done, _) => Next::Done(Acquired::LOCAL),
      (_, GivenUp) => Next::Done(Acquired::LOCAL),
      (Begin, Began { allowed: false }) => Next::Done(Acquired::LOCAL),
      (Begin, Began { allowed: true }) if self.read_first => {
        self.to(FirstRead, Next::Read(Check::Answer))
      }
      (Begin, Began { allowed: true }) => self.lock(),
      (FirstRead | AfterWait, Read(ReadAnswer::Nothing)) => self.lock(),
      (Locking, Locked(None)) => Next::Done(Acquired::LOCAL),
      (Locking, Locked(Some(LockAttempt::Won))) => self.to(Won, Next::KeepLease),
      (Locking, Locked(Some(LockAttempt::BackingOff { failures, ms }))) => {
        Next::Done(Acquired::BackOff { failures, ms })
      }
      (Locking, Locked(Some(LockAttempt::Held(lease)))) => {
        let first_contention = !self.contended;
        self.contended = true;
        let check = Check::BeforeWait { first_contention };
        self.to(BeforeWait { lease }, Next::Read(check))
      }
      (Won, LeaseKept(true)) => self.to(AfterWin, Next::Read(Check::Fresh)),
      (AfterWin, Read(ReadAnswer::Nothing)) => Next::Done(Acquired::Load {
        token: Some(self.token.clone()),
      }),
      (BeforeWait { lease }, Read(ReadAnswer::Nothing)) => self.to(
        Waiting,
        Next::Wait {
          ms: loser_wait(lease),
        },
      ),
      (Waiting, Woke) => self.to(AfterWait, Next::Read(Check::Fresh)),
      (FirstRead | AfterWin | BeforeWait { .. } | AfterWait, Read(ReadAnswer::Answers(found))) => {
        Next::Done(found)
      }
      (FirstRead | AfterWin | BeforeWait { .. } | AfterWait, Read(ReadAnswer::Failed)) => {
        Next::Done(Acquired::LOCAL)
      }
      (Releasing, Released) => Next::Done(Acquired::LOCAL),
      (state, heard) => {
        // Only a caller that carries out other steps than asked gets here.
        debug_assert!(false, "acquisition in {state:?} heard {heard:?}");
        Next::Done(Acquired::LOCAL)
      }
    }
  }

  fn lock(&mut self) -> Next {
    let refresh = self.refresh;
    self.to(State::Locking, Next::Lock { refresh })
  }

  fn to(&mut self, state: State, next: Next) -> Next {
    self.state = state;
    next
  }
}

#[cfg(test)]
mod tests {
  use super::*;
  use crate::core::envelope::Meta;
  use crate::core::tags::Tags;

  fn machine(read_first: bool, refresh: bool) -> Acquisition {
    Acquisition::new("t".into(), read_first, refresh)
  }

  fn value() -> Acquired {
    Acquired::Value(Envelope {
      meta: Meta {
        fresh_until: 2,
        hard_until: 3,
        compute_ms: 1,
        stamp: 1,
        refresh_at: Some(2),
        negative: false,
      },
      body: crate::core::body::Body::Json("1".into()),
      tags: Tags::NONE,
      etag: Default::default(),
    })
  }

  fn locked() -> Acquired {
    Acquired::Load {
      token: Some("t".into()),
    }
  }

  /// Feeds `heard` in order; returns every step asked for.
  fn run(machine: &mut Acquisition, heard: Vec<Heard>) -> Vec<Next> {
    heard.into_iter().map(|h| machine.step(h)).collect()
  }

  #[test]
  fn an_unavailable_store_loads_locally_without_a_call() {
    let mut m = machine(true, false);
    assert_eq!(
      m.step(Heard::Began { allowed: false }),
      Next::Done(Acquired::LOCAL)
    );
    assert!(m.is_done());
  }

  #[test]
  fn a_first_read_that_answers_ends_the_flight() {
    let mut m = machine(true, false);
    let steps = run(
      &mut m,
      vec![
        Heard::Began { allowed: true },
        Heard::Read(ReadAnswer::Answers(value())),
      ],
    );
    assert_eq!(steps, [Next::Read(Check::Answer), Next::Done(value())]);
  }

  #[test]
  fn the_winner_re_reads_after_taking_the_lock_and_loads_under_it() {
    let mut m = machine(true, false);
    let steps = run(
      &mut m,
      vec![
        Heard::Began { allowed: true },
        Heard::Read(ReadAnswer::Nothing),
        Heard::Locked(Some(LockAttempt::Won)),
        Heard::LeaseKept(true),
        Heard::Read(ReadAnswer::Nothing),
      ],
    );
    assert_eq!(
      steps,
      [
        Next::Read(Check::Answer),
        Next::Lock { refresh: false },
        Next::KeepLease,
        Next::Read(Check::Fresh),
        Next::Done(locked()),
      ]
    );
  }

  #[test]
  fn a_value_written_between_our_read_and_our_lock_answers_the_winner() {
    let mut m = machine(false, false);
    let steps = run(
      &mut m,
      vec![
        Heard::Began { allowed: true },
        Heard::Locked(Some(LockAttempt::Won)),
        Heard::LeaseKept(true),
        Heard::Read(ReadAnswer::Answers(value())),
      ],
    );
    // No first read (the batch read it); the answer holds no lock.
    assert_eq!(steps[0], Next::Lock { refresh: false });
    assert_eq!(steps[3], Next::Done(value()));
  }

  #[test]
  fn a_loser_listens_before_re_reading_then_waits_out_the_lease() {
    let mut m = machine(false, false);
    let steps = run(
      &mut m,
      vec![
        Heard::Began { allowed: true },
        Heard::Locked(Some(LockAttempt::Held(700))),
        Heard::Read(ReadAnswer::Nothing),
        Heard::Woke,
        Heard::Read(ReadAnswer::Answers(value())),
      ],
    );
    assert_eq!(
      steps,
      [
        Next::Lock { refresh: false },
        Next::Read(Check::BeforeWait {
          first_contention: true
        }),
        Next::Wait { ms: 700 },
        Next::Read(Check::Fresh),
        Next::Done(value()),
      ]
    );
  }

  #[test]
  fn a_dead_holders_lock_is_asked_for_again_and_contention_counts_once() {
    let mut m = machine(false, false);
    let steps = run(
      &mut m,
      vec![
        Heard::Began { allowed: true },
        Heard::Locked(Some(LockAttempt::Held(0))),
        Heard::Read(ReadAnswer::Nothing),
        Heard::Woke,
        Heard::Read(ReadAnswer::Nothing),
        Heard::Locked(Some(LockAttempt::Held(5))),
        Heard::Read(ReadAnswer::Nothing),
        Heard::Woke,
        Heard::Read(ReadAnswer::Nothing),
        Heard::Locked(Some(LockAttempt::Won)),
        Heard::LeaseKept(true),
        Heard::Read(ReadAnswer::Nothing),
      ],
    );
    // A lease of 0 still waits 1 ms: a loser never spins.
    assert_eq!(steps[2], Next::Wait { ms: 1 });
    assert_eq!(steps[4], Next::Lock { refresh: false });
    assert_eq!(
      steps[5],
      Next::Read(Check::BeforeWait {
        first_contention: false
      })
    );
    assert_eq!(steps.last(), Some(&Next::Done(locked())));
  }

  #[test]
  fn a_background_refresh_asks_as_one_and_ends_on_the_fleets_back_off() {
    let mut m = machine(false, true);
    let steps = run(
      &mut m,
      vec![
        Heard::Began { allowed: true },
        Heard::Locked(Some(LockAttempt::BackingOff {
          failures: 2,
          ms: 90,
        })),
      ],
    );
    assert_eq!(
      steps,
      [
        Next::Lock { refresh: true },
        Next::Done(Acquired::BackOff {
          failures: 2,
          ms: 90
        })
      ]
    );
  }

  #[test]
  fn every_store_failure_fails_open() {
    let failures = [
      vec![
        Heard::Began { allowed: true },
        Heard::Read(ReadAnswer::Failed),
      ],
      vec![
        Heard::Began { allowed: true },
        Heard::Read(ReadAnswer::Nothing),
        Heard::Locked(None),
      ],
      vec![
        Heard::Began { allowed: true },
        Heard::Read(ReadAnswer::Nothing),
        Heard::Locked(Some(LockAttempt::Won)),
        Heard::LeaseKept(true),
        Heard::Read(ReadAnswer::Failed),
      ],
      vec![
        Heard::Began { allowed: true },
        Heard::Read(ReadAnswer::Nothing),
        Heard::Locked(Some(LockAttempt::Held(9))),
        Heard::Read(ReadAnswer::Failed),
      ],
      vec![
        Heard::Began { allowed: true },
        Heard::Read(ReadAnswer::Nothing),
        Heard::Locked(Some(LockAttempt::Held(9))),
        Heard::Read(ReadAnswer::Nothing),
        Heard::Woke,
        Heard::Read(ReadAnswer::Failed),
      ],
    ];
    for heard in failures {
      let mut m = machine(true, false);
      let last = run(&mut m, heard.clone()).pop();
      assert_eq!(last, Some(Next::Done(Acquired::LOCAL)), "{heard:?}");
      assert!(m.is_done());
    }
  }

  #[test]
  fn a_flight_given_up_ends_and_lets_go_of_an_unregistered_lock() {
    let mut waiting = machine(false, false);
    run(
      &mut waiting,
      vec![
        Heard::Began { allowed: true },
        Heard::Locked(Some(LockAttempt::Held(9))),
        Heard::Read(ReadAnswer::Nothing),
      ],
    );
    assert_eq!(waiting.step(Heard::GivenUp), Next::Done(Acquired::LOCAL));

    for last in [Heard::GivenUp, Heard::LeaseKept(false)] {
      let mut won = machine(false, false);
      run(
        &mut won,
        vec![
          Heard::Began { allowed: true },
          Heard::Locked(Some(LockAttempt::Won)),
        ],
      );
      assert_eq!(won.step(last), Next::Release);
      assert!(!won.is_done());
      assert_eq!(won.step(Heard::Released), Next::Done(Acquired::LOCAL));
    }
  }

  #[test]
  fn the_token_is_the_same_on_every_ask() {
    let m = Acquisition::new("f00".into(), true, false);
    assert_eq!(m.token(), "f00");
  }
}
