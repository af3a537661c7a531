//! The events subscription, one loop for both topologies: a connection of
//! its own, made anew with a capped backoff whenever the subscription may
//! have missed a message, and reported down meanwhile (the fleet clears its
//! L1 when it is back). A connection that goes silent (a partition, a
//! paused or blackholed server) ends no stream, so it is probed: every
//! [`LIVENESS_PROBE`], answered within the bound, or the subscription is
//! dropped and made anew. What a topology subscribes with, and how it tells
//! that it is live, is its [`Subscriber`].

use super::link::Link;
use super::target::subscribe_refused;
use crate::core::fleet::Event;
use crate::engine::shared::Events;
use redis::RedisError;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How often a live events subscription is probed.
pub(super) const LIVENESS_PROBE: Duration = Duration::from_secs(1);

/// How long the subscription waits before asking again after the ACL
/// refused it: an ACL changes rarely, so it is asked now and then, not spun on.
const REFUSED_RETRY: Duration = Duration::from_secs(30);

/// The wait before the first new attempt, doubled after each failure up to
/// [`MOST_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
const MOST_BACKOFF: Duration = Duration::from_secs(2);

/// How a topology subscribes to its events channels (what the loop keeps
/// between attempts).
pub(super) trait Subscriber: Send + Sync + 'static {
  type Subscription: Subscription;

  /// Whether a subscription made anew also renews the command connection
  /// (whose view of the servers may be out of date by then).
  const RENEWS_COMMANDS: bool;

  /// A connection for the subscription, within `bound`.
  fn connect(
    &self,
    bound: Duration,
  ) -> impl Future<Output = redis::RedisResult<Self::Subscription>> + Send;
}

/// One connection of the subscription.
pub(super) trait Subscription: Send {
  /// Subscribes to every events channel, within `bound`; what arrives
  /// meanwhile goes to `events`.
  fn subscribe(
    &mut self,
    events: &Events,
    bound: Duration,
  ) -> impl Future<Output = Subscribed> + Send;

  /// The next event; `None` once the subscription may have missed one.
  fn next_event(&mut self) -> impl Future<Output = Option<Event>> + Send;

  /// Whether the servers it listens to still answer, within `bound`.
  fn answers(&mut self, bound: Duration) -> impl Future<Output = bool> + Send;
}

/// What an attempt to subscribe came to.
pub(super) enum Subscribed {
  /// Every channel subscribed, and nothing missed from now on.
  Live,
  /// The server refused `channel` (NOPERM: the ACL).
  Refused { channel: String, error: RedisError },
  /// Not confirmed within the bound.
  Unconfirmed,
}

/// Delivers every event to `events` until the task is aborted, reconnecting
/// as needed; `on_connected` tells whether the subscription is live. `link`
/// is the store's command connection: its target names the failures, its
/// problems hear of them.
pub(super) fn run<S: Subscriber, C: Clone + Send + Sync + 'static>(
  subscriber: S,
  link: Link<C>,
  events: &Arc<Events>,
  bound: Duration,
  on_connected: impl Fn(bool) + Send + Sync + 'static,
) -> JoinHandle<()> {
  let events = Arc::clone(events);
  tokio::spawn(async move {
    let problems = link.problems();
    let mut backoff = FIRST_BACKOFF;
    let mut ever = false;
    loop {
      let mut subscription = match subscriber.connect(bound).await {
        Ok(subscription) => subscription,
        Err(e) => {
          let failure = link.target().connect_failure(link.seed(), &e).await;
          problems.subscription(Some(failure));
          backoff = next(backoff).await;
          continue;
        }
      };
      match subscription.subscribe(&events, bound).await {
        Subscribed::Unconfirmed => problems.subscription(Some(link.target().timed_out())),
        Subscribed::Refused { channel, error } => {
          let refused = subscribe_refused(&channel, &error);
          problems.subscription(Some(refused.clone()));
          if error.code() == Some("NOPERM") {
            problems.raise("subscribe", refused);
            backoff = REFUSED_RETRY;
          }
        }
        Subscribed::Live => {
          problems.subscription(None);
          if std::mem::replace(&mut ever, true) && S::RENEWS_COMMANDS {
            link.renew();
          }
          on_connected(true);
          backoff = FIRST_BACKOFF;
          listen(&mut subscription, &events, bound).await;
          on_connected(false);
        }
      }
      backoff = next(backoff).await;
    }
  })
}

/// Waits `backoff`, then answers the next one.
async fn next(backoff: Duration) -> Duration {
  tokio::time::sleep(backoff).await;
  if backoff < REFUSED_RETRY {
    (backoff * 2).min(MOST_BACKOFF)
  } else {
    backoff
  }
}

/// Delivers the subscription's events until it may have missed one.
async fn listen(subscription: &mut impl Subscription, events: &Events, bound: Duration) {
  let mut probe = tokio::time::interval(LIVENESS_PROBE);
  probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
  probe.tick().await;
  loop {
    tokio::select! {
      event = subscription.next_event() => match event {
        Some(event) => events.dispatch(&event),
        None => return,
      },
      _ = probe.tick() => {
        if !subscription.answers(bound).await {
          return;
        }
      }
    }
  }
}
