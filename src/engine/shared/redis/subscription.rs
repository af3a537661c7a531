//! The events subscription, one loop for both topologies: a connection of
//! its own, made anew with a capped backoff whenever the subscription may
//! have missed a message, and reported down meanwhile (the fleet clears its
//! L1 when it is back). A connection that goes silent (a partition, a
//! paused or blackholed server) ends no stream, so it is probed: every
//! [`LIVENESS_PROBE`], answered within the bound, or the subscription is
//! dropped and made anew. What a topology subscribes with, and how it tells
//! that it is live, is its [`Subscriber`].
//!
//! With tracking (the `tracking` option), the same connection asks the
//! server to tell it of every change under the prefix (`CLIENT TRACKING ON
//! BCAST PREFIX`, RESP3 pushes): tracking lives and dies with the
//! subscription, so losing one is losing the other, and the L1 is cleared
//! when both are back. Its messages go through `core::fleet::tracking`'s
//! [`Echoes`], so a change herdcache announced is not applied twice.

use super::link::Link;
use super::target::{subscribe_refused, tracking_refused};
use crate::core::fleet::tracking::{value_key, Echoes, Tracked};
use crate::core::fleet::{Change, Event, OUTSIDE};
use crate::engine::shared::Events;
use redis::RedisError;
use std::future::Future;
use std::sync::atomic::Ordering;
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

/// The longest wait after an attempt the servers answered but could not
/// confirm (a cluster failing over, not whole yet): asked again soon, so
/// the L1, unwatched meanwhile, is cleared and watched again within a few
/// hundred ms of the new primary's promotion, not seconds after.
const MOST_UNCONFIRMED_BACKOFF: Duration = Duration::from_millis(100);

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

  /// Asks the server to track every name starting with `prefix` for this
  /// connection (after [`Subscription::subscribe`]), within `bound`.
  fn track(&mut self, prefix: &str, bound: Duration) -> impl Future<Output = Tracking> + Send;

  /// The next message; `None` once the subscription may have missed one.
  fn next(&mut self) -> impl Future<Output = Option<Received>> + Send;

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

/// What an attempt to have the prefix tracked came to.
pub(super) enum Tracking {
  /// Every change under the prefix is told from now on.
  On,
  /// The server cannot (before Redis 6: no RESP3, no `CLIENT TRACKING`).
  Unsupported(String),
  /// The server refused `CLIENT TRACKING` (NOPERM: the ACL).
  Refused(RedisError),
  /// Not confirmed within the bound.
  Unconfirmed,
}

/// A message of the subscription's connection.
pub(super) enum Received {
  /// An event on the events channel.
  Event(Event),
  /// The server's tracking: these names changed.
  Tracked(Vec<String>),
  /// The server's tracking: every name may have changed (`FLUSHDB`,
  /// `FLUSHALL`).
  Flushed,
}

impl Tracking {
  /// What `CLIENT TRACKING`'s answer comes to.
  pub(super) fn of(
    answer: Result<redis::RedisResult<redis::Value>, tokio::time::error::Elapsed>,
  ) -> Tracking {
    match answer {
      Ok(Ok(_)) => Tracking::On,
      Ok(Err(error)) if error.code() == Some("NOPERM") => Tracking::Refused(error),
      Ok(Err(error))
        if error.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
      {
        Tracking::Unsupported(error.to_string())
      }
      _ => Tracking::Unconfirmed,
    }
  }
}

/// `CLIENT TRACKING ON BCAST PREFIX <prefix>`: every change to a name
/// starting with `prefix` is told to this connection (RESP3: as an
/// `invalidate` push). No `NOLOOP`: the connection writes nothing.
pub(super) fn tracking_on(prefix: &str) -> redis::Cmd {
  let mut on = redis::cmd("CLIENT");
  on.arg("TRACKING")
    .arg("ON")
    .arg("BCAST")
    .arg("PREFIX")
    .arg(prefix);
  on
}

/// The event a pub/sub push (`message`, `smessage`: channel, payload)
/// carries, if this version can read it.
pub(super) fn event_of(push: redis::PushInfo) -> Option<Event> {
  let payload = push.data.into_iter().nth(1)?;
  let text = redis::from_redis_value::<String>(payload).ok()?;
  Event::decode(&text)
}

/// What an `invalidate` push says: the names that changed, or (null) that
/// every name may have.
pub(super) fn tracked_of(push: redis::PushInfo) -> Received {
  match push.data.into_iter().next() {
    Some(redis::Value::Array(names)) => Received::Tracked(
      names
        .into_iter()
        .filter_map(|name| match name {
          redis::Value::BulkString(bytes) => String::from_utf8(bytes).ok(),
          redis::Value::SimpleString(text) => Some(text),
          _ => None,
        })
        .collect(),
    ),
    _ => Received::Flushed,
  }
}

/// Delivers every event to `events` until the task is aborted,
/// reconnecting as needed; `on_connected` tells whether the subscription is
/// live. `link` is the store's command connection: its target names the
/// failures, its problems hear of them. `tracking`: the cache prefix whose
/// changes the server is asked to tell (`None`: it is not asked).
pub(super) fn run<S: Subscriber, C: Clone + Send + Sync + 'static>(
  subscriber: S,
  link: Link<C>,
  events: &Arc<Events>,
  bound: Duration,
  tracking: Option<String>,
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
      let subscribed = match subscription.subscribe(&events, bound).await {
        Subscribed::Live => match &tracking {
          Some(prefix) => track(&mut subscription, prefix, &link, &events, bound).await,
          None => Subscribed::Live,
        },
        other => other,
      };
      match subscribed {
        Subscribed::Unconfirmed => {
          problems.subscription(Some(link.target().timed_out()));
          backoff = backoff.min(MOST_UNCONFIRMED_BACKOFF);
        }
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
          let prefix = tracking
            .as_deref()
            .filter(|_| events.tracking.live.load(Ordering::Acquire));
          listen(&mut subscription, &events, bound, prefix).await;
          events.tracking.live.store(false, Ordering::Release);
          on_connected(false);
        }
      }
      backoff = next(backoff).await;
    }
  })
}

/// Asks the subscription's server(s) to track `prefix`'s changes: live with
/// tracking, or without it where the server cannot or the ACL refuses
/// (reported once: the L1 then hears of herdcache's changes only, as
/// without the option); not live when the answer does not come.
async fn track<C: Clone + Send + Sync + 'static>(
  subscription: &mut impl Subscription,
  prefix: &str,
  link: &Link<C>,
  events: &Events,
  bound: Duration,
) -> Subscribed {
  let tracked = crate::core::fleet::tracking::tracked_prefix(prefix);
  let live = match subscription.track(&tracked, bound).await {
    Tracking::On => true,
    Tracking::Unconfirmed => return Subscribed::Unconfirmed,
    Tracking::Unsupported(why) => {
      let notice = format!(
        "{} cannot track keys for this instance's memory ({why}): it is told of herdcache's own changes only, not of changes made outside herdcache (redis-cli, other services, evictions), and serves what it holds until its TTL",
        link.target().name()
      );
      link.problems().notice("tracking", notice);
      false
    }
    Tracking::Refused(error) => {
      link.problems().raise("tracking", tracking_refused(&error));
      false
    }
  };
  events.tracking.live.store(live, Ordering::Release);
  Subscribed::Live
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

/// Delivers the subscription's events until it may have missed one. With
/// `tracking` (the cache prefix, when the server tracks it), the server's
/// tracking messages too: each held for its echo, and applied as a change
/// made outside herdcache when none comes.
async fn listen(
  subscription: &mut impl Subscription,
  events: &Events,
  bound: Duration,
  tracking: Option<&str>,
) {
  let mut probe = tokio::time::interval(LIVENESS_PROBE);
  probe.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
  probe.tick().await;
  let started = tokio::time::Instant::now();
  let now = || started.elapsed().as_millis() as u64;
  let mut echoes = Echoes::default();
  loop {
    let due = echoes
      .next_due()
      .map(|at| started + Duration::from_millis(at));
    tokio::select! {
      received = subscription.next() => match received {
        Some(Received::Event(event)) => {
          if tracking.is_some() {
            heard_announced(&mut echoes, &event, events, now());
          }
          events.dispatch(&event);
        }
        Some(Received::Tracked(names)) => {
          let Some(prefix) = tracking else { continue };
          let at = now();
          for name in &names {
            let Some(key) = value_key(prefix, name) else { continue };
            match echoes.tracked(key, at) {
              Tracked::Echo => events.tracking.echoed(1),
              Tracked::Held => {}
              Tracked::Flooded => outside(events, Change::Cleared),
            }
          }
        }
        Some(Received::Flushed) => {
          if tracking.is_some() {
            echoes.reset();
            outside(events, Change::Cleared);
          }
        }
        None => return,
      },
      _ = sleep_until(due), if due.is_some() => {
        for key in echoes.due(now()) {
          outside(events, Change::Filled(key));
        }
      }
      _ = probe.tick() => {
        if !subscription.answers(bound).await {
          return;
        }
      }
    }
  }
}

/// Herdcache announced `event`: a tracking message of the same change,
/// held, is its echo (counted), or the one to come will be.
fn heard_announced(echoes: &mut Echoes, event: &Event, events: &Events, now: u64) {
  let echoed = match &event.change {
    Change::Filled(key) | Change::Deleted(key) | Change::Expired { key, .. } => {
      usize::from(echoes.announced(key, now))
    }
    Change::Cleared => echoes.cleared(None, now),
    Change::PrefixCleared(sub_prefix) => echoes.cleared(Some(sub_prefix), now),
    Change::Tagged { .. } | Change::Released(_) | Change::SlotsFreed { .. } => 0,
  };
  events.tracking.echoed(echoed as u64);
}

/// A change made outside herdcache, heard through tracking: for the L1 as
/// another instance's change (counted).
fn outside(events: &Events, change: Change) {
  events.tracking.changed();
  events.dispatch(&Event::new(OUTSIDE, change));
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
  match at {
    Some(at) => tokio::time::sleep_until(at).await,
    None => std::future::pending().await,
  }
}
