//! A Redis store's command connection, whatever its topology: made on
//! first use, one attempt at a time shared by every caller, a failed
//! attempt explained off their path, and a command run once more when the
//! connection was closed under it.

use super::target::{explain, Target};
use crate::core::error::Code;
use crate::engine::shared::{Problem, Problems};
use futures_util::future::{BoxFuture, Shared};
use futures_util::FutureExt;
use redis::{Client, ErrorKind, RedisError, RedisResult};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Makes a command connection: called once per attempt, whose future runs
/// on a task of its own (so it owns what it needs).
pub(super) type Connector<C> = Box<dyn Fn() -> BoxFuture<'static, RedisResult<C>> + Send + Sync>;

/// The command connection and what its failures are reported to. Every
/// clone is the same connection: an attempt's task and the subscription
/// hold one.
pub(super) struct Link<C>(Arc<State<C>>);

impl<C> Clone for Link<C> {
  fn clone(&self) -> Self {
    Link(Arc::clone(&self.0))
  }
}

struct State<C> {
  /// One node (a cluster's first seed): what a failure's explanation asks.
  seed: Client,
  target: Target,
  problems: Arc<Problems>,
  /// The events channel of one node, for what a refused PUBLISH says.
  channel: String,
  connect: Connector<C>,
  /// The bound of one attempt as a whole, redis-rs's own retry included.
  bound: Duration,
  /// The connection, once made; dropped by `close`, and by
  /// [`Link::renew`].
  made: Mutex<Option<C>>,
  connecting: Mutex<Connecting<C>>,
  closed: AtomicBool,
}

/// The command connection being made ([`Link::connection`]).
struct Connecting<C> {
  /// The attempt in flight, which every caller without a connection joins.
  attempt: Option<Attempt<C>>,
  /// How the last attempt failed (explained, once it is), and when.
  failed: Option<(RedisError, Instant)>,
}

/// One connection attempt, as its callers wait for it.
struct Attempt<C> {
  outcome: Shared<BoxFuture<'static, RedisResult<C>>>,
  /// For a failure, what [`explain`] found (`None`: nothing more).
  explained: Shared<BoxFuture<'static, Option<RedisError>>>,
}

impl<C> Clone for Attempt<C> {
  fn clone(&self) -> Self {
    Attempt {
      outcome: self.outcome.clone(),
      explained: self.explained.clone(),
    }
  }
}

impl<C: Clone + Send + Sync + 'static> Attempt<C> {
  /// An attempt that already made `connection`.
  fn made(connection: C) -> Attempt<C> {
    Attempt {
      outcome: futures_util::future::ready(Ok(connection)).boxed().shared(),
      explained: futures_util::future::ready(None).boxed().shared(),
    }
  }
}

impl<C: Clone + Send + Sync + 'static> Link<C> {
  pub(super) fn new(
    seed: Client,
    target: Target,
    channel: String,
    bound: Duration,
    connect: Connector<C>,
  ) -> Link<C> {
    Link(Arc::new(State {
      seed,
      target,
      problems: Arc::new(Problems::default()),
      channel,
      connect,
      bound,
      made: Mutex::new(None),
      connecting: Mutex::new(Connecting {
        attempt: None,
        failed: None,
      }),
      closed: AtomicBool::new(false),
    }))
  }

  pub(super) fn seed(&self) -> &Client {
    &self.0.seed
  }

  pub(super) fn target(&self) -> &Target {
    &self.0.target
  }

  pub(super) fn problems(&self) -> &Arc<Problems> {
    &self.0.problems
  }

  /// The command connection. Without one, the attempt in flight is joined
  /// (never a second one: a Redis that is down or silent costs every caller
  /// one attempt's time at most, together, not one attempt each), and for
  /// `bound` after an attempt failed, callers get its error at once; past
  /// that a new attempt starts. [`Link::reconnect`] asks afresh.
  pub(super) async fn connection(&self) -> RedisResult<C> {
    if let Some(made) = self.live()? {
      return Ok(made);
    }
    self.attempt(false)?.outcome.await
  }

  /// The connection, with a new attempt unless one is in flight (the
  /// breaker's probe, `ready()`); a failure comes explained ([`explain`]:
  /// the server's own words, a TLS port that speaks plain text), which
  /// only these callers wait for.
  pub(super) async fn reconnect(&self) -> RedisResult<C> {
    if let Some(made) = self.live()? {
      return Ok(made);
    }
    let attempt = self.attempt(true)?;
    match attempt.outcome.await {
      Ok(made) => Ok(made),
      Err(e) => Err(attempt.explained.await.unwrap_or(e)),
    }
  }

  /// Drops the connection: the next command makes a new one (on a
  /// cluster, one that reads the topology afresh).
  pub(super) fn renew(&self) {
    self.0.made.lock().unwrap_or_else(|p| p.into_inner()).take();
  }

  /// Every call after this fails; calls in flight finish within their bound.
  pub(super) fn close(&self) {
    self.0.closed.store(true, Ordering::SeqCst);
    self.renew();
  }

  fn live(&self) -> RedisResult<Option<C>> {
    if self.0.closed.load(Ordering::SeqCst) {
      return Err(closed_error());
    }
    Ok(
      self
        .0
        .made
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone(),
    )
  }

  /// The attempt to join, or a new one; `Err` at once when the last
  /// attempt failed less than `bound` ago (unless `fresh`).
  fn attempt(&self, fresh: bool) -> RedisResult<Attempt<C>> {
    let mut state = self.0.connecting.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(attempt) = &state.attempt {
      return Ok(attempt.clone());
    }
    if let Some(made) = self.live()? {
      // Made while this caller waited for the lock.
      return Ok(Attempt::made(made));
    }
    if let Some((error, at)) = &state.failed {
      if !fresh && at.elapsed() < self.0.bound {
        return Err(error.clone());
      }
    }
    let attempt = self.start_attempt();
    state.attempt = Some(attempt.clone());
    Ok(attempt)
  }

  /// One connection attempt, on a task of its own (a caller that stops
  /// waiting does not end it), bounded as a whole. Its outcome reaches
  /// every caller waiting on it at once; a failure is then explained, off
  /// their path, and the explanation goes to [`Problems`] (`onError`,
  /// `lastRedisError`) and to the callers of [`Link::reconnect`].
  fn start_attempt(&self) -> Attempt<C> {
    let made = bounded(self.0.bound, (self.0.connect)());
    let (outcome_tx, outcome_rx) = tokio::sync::oneshot::channel();
    let (explained_tx, explained_rx) = tokio::sync::oneshot::channel();
    let link = self.clone();
    tokio::spawn(async move {
      let made = made.await;
      let explaining = matches!(&made, Err(e) if link.0.target.needs_explaining(e));
      let made = link.settle(made, explaining);
      let _ = outcome_tx.send(made.clone());
      let explained = match &made {
        Err(e) if explaining => link.explain(e).await,
        _ => None,
      };
      let _ = explained_tx.send(explained);
    });
    Attempt {
      outcome: outcome_rx
        .map(|sent| sent.unwrap_or_else(|_| Err(closed_error())))
        .boxed()
        .shared(),
      explained: explained_rx
        .map(|sent| sent.ok().flatten())
        .boxed()
        .shared(),
    }
  }

  /// Ends the attempt with what it `made`: the connection kept (unless the
  /// store was closed meanwhile), or the failure remembered.
  fn settle(&self, made: RedisResult<C>, explaining: bool) -> RedisResult<C> {
    let mut state = self.0.connecting.lock().unwrap_or_else(|p| p.into_inner());
    state.attempt = None;
    match made {
      Ok(made) => {
        let mut slot = self.0.made.lock().unwrap_or_else(|p| p.into_inner());
        state.failed = None;
        if self.0.closed.load(Ordering::SeqCst) {
          return Err(closed_error());
        }
        *slot = Some(made.clone());
        Ok(made)
      }
      Err(e) => {
        state.failed = Some((e.clone(), Instant::now()));
        if explaining {
          // Before the callers hear of it: the report that opens the
          // breaker waits for the explanation (`Problems::explained`).
          self.0.problems.explaining();
        }
        Err(e)
      }
    }
  }

  /// What [`explain`] finds of the failed attempt's `e`: remembered as its
  /// failure, and reported in place of the one held meanwhile.
  async fn explain(&self, e: &RedisError) -> Option<RedisError> {
    let explained = tokio::time::timeout(self.0.bound, explain(&self.0.seed, &self.0.target, e))
      .await
      .ok()
      .flatten();
    if let Some(explained) = &explained {
      let mut state = self.0.connecting.lock().unwrap_or_else(|p| p.into_inner());
      if let Some((error, _)) = state.failed.as_mut() {
        *error = explained.clone();
      }
    }
    let problem = explained.as_ref().map(|e| self.0.target.describe(e));
    self.0.problems.explained(problem);
    explained
  }
}

impl<C: redis::aio::ConnectionLike + Clone + Send + Sync + 'static> Link<C> {
  /// Runs `command` on the connection, and once more on a new one when the
  /// first failed because the connection was closed under it (a server's
  /// `timeout`, a proxy or a NAT dropping an idle connection): redis-rs
  /// reconnects on such an error, and the command would otherwise fail
  /// with nothing wrong with Redis (and open the breaker). Only commands
  /// safe to repeat go through here: each caller says why. A refused
  /// connection (Redis down) is not retried.
  pub(super) async fn retried<T, F, Fut>(&self, command: F) -> RedisResult<T>
  where
    F: Fn(C) -> Fut,
    Fut: Future<Output = RedisResult<T>>,
  {
    match command(self.connection().await?).await {
      Err(e) if dropped(&e) => command(self.connection().await?).await,
      other => other,
    }
  }

  /// `event` on `channel` by `command` (PUBLISH, or SPUBLISH on a sharded
  /// channel). Retried: a second notice is harmless. A refusal by the ACL
  /// is reported once, as a script's refused PUBLISH is.
  pub(super) async fn publish(&self, command: &str, channel: &str, event: &str) -> RedisResult<()> {
    let send = |mut c: C| async move {
      redis::cmd(command)
        .arg(channel)
        .arg(event)
        .query_async::<i64>(&mut c)
        .await
    };
    match self.retried(send).await {
      Err(e) if e.code() == Some("NOPERM") => {
        self.publish_refused();
        Ok(())
      }
      other => other.map(drop),
    }
  }

  pub(super) fn publish_refused(&self) {
    self.0.problems.raise(
      "publish",
      Problem {
        code: Code::RedisNoPerm,
        message: format!(
          "Redis refused PUBLISH on the events channel `{}` (NOPERM: this ACL user may not publish there). Values are still written and locks released, but other instances are not told: their memory keeps the old values until their TTL, and their waiting loads wait out the lock's lease. Allow the channel (`&herdcache:events:*`, or `allchannels`) and `+publish +subscribe` for this user",
          self.0.channel
        ),
      },
    );
  }
}

/// `future`, failing as a timeout past `bound`.
pub(super) async fn bounded<T>(
  bound: Duration,
  future: impl Future<Output = RedisResult<T>>,
) -> RedisResult<T> {
  match tokio::time::timeout(bound, future).await {
    Ok(result) => result,
    Err(_) => Err(RedisError::from(std::io::Error::new(
      std::io::ErrorKind::TimedOut,
      "no answer within redisTimeout",
    ))),
  }
}

/// What a call on a closed store fails with.
fn closed_error() -> RedisError {
  RedisError::from((ErrorKind::Client, "the store was closed"))
}

/// Whether `e` says the connection was closed under the command (reset,
/// broken pipe, end of stream), not that Redis refused to connect or did
/// not answer in time (a retry would only double the wait).
pub(super) fn dropped(e: &RedisError) -> bool {
  e.is_connection_dropped() && !e.is_connection_refusal() && !e.is_timeout()
}
