//! The store's health as the fleet sees it: the circuit breaker and its
//! probe, the connection and subscription gauges, what is reported, and
//! `ready()`.

use super::{bump, Fleet};
use crate::core::breaker::State;
use crate::engine::shared::{Problem, SharedStore};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The breaker's probes are at least this far apart (its cool-down may be
/// 0): a store that fails at once is not asked in a busy loop.
const MIN_PROBE_PAUSE: Duration = Duration::from_millis(100);

impl<S: SharedStore> Fleet<S> {
  /// What the store found that the application must be told (each once).
  pub fn problems(&self) -> Vec<Problem> {
    self.store.problems().take()
  }

  /// What the store found that the application should hear of, no failure
  /// (each once).
  pub fn notices(&self) -> Vec<String> {
    self.store.problems().take_notices()
  }

  pub fn circuit_open(&self) -> bool {
    self
      .breaker
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .is_open()
  }

  /// Whether a call may use the store: only while the breaker is closed.
  /// Open, no call waits on the store; [`Fleet::start_prober`] probes it.
  pub(super) fn allowed(&self) -> bool {
    self
      .breaker
      .lock()
      .unwrap_or_else(|p| p.into_inner())
      .closed()
  }

  /// Starts the probe task unless it runs: while the breaker is open, one
  /// attempt per cool-down (at least [`MIN_PROBE_PAUSE`] apart) to reach
  /// the store as the fleet needs it (`SharedStore::ready`: a connection,
  /// and for Redis its scripts), on a task of its own, so no caller waits
  /// on a connection or on a store that does not answer. Its success
  /// closes the breaker and wakes the replay of what was kept meanwhile.
  pub(super) fn start_prober(&self) {
    let mut prober = self.prober.lock().unwrap_or_else(|p| p.into_inner());
    if prober.is_some() || self.stopped.load(Ordering::SeqCst) {
      return;
    }
    let me = self.me.clone();
    *prober = Some(self.runtime.spawn(async move {
      loop {
        let wait = {
          let Some(fleet) = me.upgrade() else { return };
          let now = fleet.clock.now();
          let state = fleet
            .breaker
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .state;
          match state {
            State::Open { until } => until.saturating_sub(now),
            _ => 0,
          }
        };
        tokio::time::sleep(Duration::from_millis(wait).max(MIN_PROBE_PAUSE)).await;
        let Some(fleet) = me.upgrade() else { return };
        if fleet.stopped.load(Ordering::SeqCst) {
          return;
        }
        let probing = {
          let mut breaker = fleet.breaker.lock().unwrap_or_else(|p| p.into_inner());
          breaker.allow(fleet.clock.now()) && !breaker.closed()
        };
        if probing {
          let answer = fleet.store.ready().await;
          fleet.track(answer);
        }
        let mut prober = fleet.prober.lock().unwrap_or_else(|p| p.into_inner());
        if fleet.allowed() {
          *prober = None;
          drop(prober);
          fleet.replay_now.notify_one();
          return;
        }
      }
    }));
  }

  /// Feeds the breaker, the error counter and the connected gauge; a
  /// failure that opens the breaker is reported with its cause (once while
  /// the store keeps failing for it: `Problems::failed`).
  pub(super) fn track<T>(&self, result: Result<T, S::Error>) -> Option<T> {
    let mut breaker = self.breaker.lock().unwrap_or_else(|p| p.into_inner());
    match result {
      Ok(value) => {
        breaker.success();
        drop(breaker);
        if !self.connected.swap(true, Ordering::Relaxed) {
          self.store.problems().answered();
        }
        Some(value)
      }
      Err(error) => {
        bump(&self.counters.redis_errors);
        let opened = breaker.failure(self.clock.now());
        drop(breaker);
        self.connected.store(false, Ordering::Relaxed);
        if opened {
          self.store.problems().failed(self.store.describe(&error));
          self.start_prober();
        }
        None
      }
    }
  }

  /// Whether the last command reached the store, as a flag the engine
  /// reads when it must choose between its L1 copy and the store.
  pub fn reachable(&self) -> Arc<AtomicBool> {
    Arc::clone(&self.connected)
  }

  /// Whether the last command reached the store (the command connection
  /// is up), and whether the events subscription is live.
  pub fn connected(&self) -> (bool, bool) {
    (
      self.connected.load(Ordering::Relaxed),
      self.subscription.is_set(),
    )
  }

  /// The server's client tracking: whether it is on now, the changes made
  /// outside herdcache it told, and herdcache's own it told again.
  pub fn tracking(&self) -> (bool, u64, u64) {
    let t = &self.events.tracking;
    (
      t.live.load(Ordering::Relaxed),
      t.changes.load(Ordering::Relaxed),
      t.echoes.load(Ordering::Relaxed),
    )
  }

  /// The last failure's cause (kept once the store answers again).
  pub fn last_problem(&self) -> Option<Problem> {
    self.store.problems().last()
  }

  /// `cache.ready()`: resolves once the store answers as the fleet needs
  /// (connected, authenticated, db selected, scripts loaded) and the
  /// events subscription is live; else the cause, within twice the
  /// store's command timeout (a connection attempt, then the probe that
  /// explains its failure). Calls made meanwhile fail open as ever.
  pub async fn ready(&self) -> Result<(), Problem> {
    let bound = self.store.command_timeout() * 2;
    let check = async {
      let answered = self.store.ready().await;
      if let Err(error) = answered {
        let problem = self.store.describe(&error);
        self.track(Err::<(), _>(error));
        return Err(problem);
      }
      self.track(Ok::<(), S::Error>(()));
      self.subscription.wait().await;
      Ok(())
    };
    match tokio::time::timeout(bound, check).await {
      Ok(answer) => answer,
      Err(_) => Err(
        self
          .store
          .problems()
          .subscription_problem()
          .unwrap_or_else(|| Problem {
            code: crate::core::error::Code::RedisTimeout,
            message: format!(
              "Redis did not answer (or the events subscription did not go live) within twice redisTimeout ({} ms)",
              bound.as_millis()
            ),
          }),
      ),
    }
  }
}
