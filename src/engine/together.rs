//! Flights that asked the fleet who loads in one turn of the JS thread (the
//! cold keys of one tick, a `getOrLoadMany` call) are answered in one turn
//! too. Each asks on its own (its own lock, its own re-check), but the
//! answers come back together: once every ask still out is parked (waiting
//! for another instance's fill, which may take as long as that load), or
//! [`TOGETHER_WAIT`] after the first answer. One answer per flight, each on
//! its own tokio wake-up, spread the loads of one batch over several loader
//! calls whenever the host paused the runtime between two of them.

use super::fleet::Acquired;
use super::Pending;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// How long the answers already in wait for the other asks of their turn,
/// from the first answer: what a lock and its re-check take on a busy host,
/// well short of a loader's time.
pub const TOGETHER_WAIT: Duration = Duration::from_millis(20);

/// One flight's ask: who loads its key, and whether it is parked, waiting
/// for the holder of the key's lock to fill it.
pub struct Ask {
  pub future: Pending<(String, Acquired)>,
  pub parked: Arc<AtomicBool>,
}

/// What [`together`] answers: the asks that were answered, by flight id, and
/// the ones still out (every one of them parked, or past the wait), to be
/// answered alone.
pub struct Answered<T> {
  pub answers: Vec<(u64, T)>,
  pub rest: Vec<(u64, Ask)>,
}

/// Drives `asks` until every one still out is parked, or `wait` after the
/// first answer; the asks still out come back unfinished, to be run on.
pub fn together(
  asks: Vec<(u64, Ask)>,
  wait: Duration,
) -> impl Future<Output = Answered<(String, Acquired)>> + Send + 'static {
  gather(asks, move || -> Deadline {
    Box::pin(tokio::time::sleep(wait))
  })
}

/// What ends the wait once it started.
type Deadline = Pin<Box<dyn Future<Output = ()> + Send>>;

/// [`together`] with the wait's clock as a parameter: `start_wait` is called
/// at the first answer, and its future ending ends the wait.
fn gather<W: FnOnce() -> Deadline + Send + Unpin + 'static>(
  asks: Vec<(u64, Ask)>,
  start_wait: W,
) -> Together<W> {
  Together {
    asks: asks.into_iter().map(Some).collect(),
    answers: Vec::new(),
    start_wait: Some(start_wait),
    deadline: None,
  }
}

struct Together<W> {
  asks: Vec<Option<(u64, Ask)>>,
  answers: Vec<(u64, (String, Acquired))>,
  start_wait: Option<W>,
  /// From the first answer.
  deadline: Option<Deadline>,
}

impl<W: FnOnce() -> Deadline + Unpin> Future for Together<W> {
  type Output = Answered<(String, Acquired)>;

  fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
    let this = self.get_mut();
    let mut all_parked = true;
    for slot in this.asks.iter_mut() {
      let Some((id, ask)) = slot else { continue };
      match ask.future.as_mut().poll(cx) {
        Poll::Ready(answer) => {
          this.answers.push((*id, answer));
          *slot = None;
        }
        Poll::Pending => all_parked &= ask.parked.load(Ordering::SeqCst),
      }
    }
    if !this.answers.is_empty() && this.deadline.is_none() {
      if let Some(start_wait) = this.start_wait.take() {
        this.deadline = Some(start_wait());
      }
    }
    let waited = match this.deadline.as_mut() {
      Some(deadline) => deadline.as_mut().poll(cx).is_ready(),
      None => false,
    };
    if !all_parked && !waited {
      return Poll::Pending;
    }
    Poll::Ready(Answered {
      answers: std::mem::take(&mut this.answers),
      rest: this.asks.drain(..).flatten().collect(),
    })
  }
}

#[cfg(test)]
mod tests {
  //! Time is a parameter here: each ask and the wait end when the test says
  //! so (a oneshot each), and the test polls by hand.
  use super::*;
  use std::sync::atomic::AtomicUsize;
  use std::task::Waker;
  use tokio::sync::oneshot;

  /// An ask that answers when its sender is used, and its parked flag.
  fn ask() -> (Ask, oneshot::Sender<()>, Arc<AtomicBool>) {
    let (answer, answered) = oneshot::channel::<()>();
    let parked = Arc::new(AtomicBool::new(false));
    let ask = Ask {
      future: Box::pin(async move {
        let _ = answered.await;
        ("k".to_string(), Acquired::Load { token: None })
      }),
      parked: Arc::clone(&parked),
    };
    (ask, answer, parked)
  }

  /// A wait that ends when its sender is used, and how often it was started.
  fn wait() -> (
    impl FnOnce() -> Deadline + Send + Unpin + 'static,
    oneshot::Sender<()>,
    Arc<AtomicUsize>,
  ) {
    let (end, ended) = oneshot::channel::<()>();
    let started = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&started);
    let start = move || -> Deadline {
      count.fetch_add(1, Ordering::SeqCst);
      Box::pin(async move {
        let _ = ended.await;
      })
    };
    (start, end, started)
  }

  fn poll<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    Pin::new(future).poll(&mut Context::from_waker(Waker::noop()))
  }

  fn ready<T>(poll: Poll<T>) -> T {
    match poll {
      Poll::Ready(value) => value,
      Poll::Pending => panic!("still pending"),
    }
  }

  fn ids(asks: &[(u64, impl Sized)]) -> Vec<u64> {
    let mut ids: Vec<u64> = asks.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    ids
  }

  #[test]
  fn answers_that_come_within_the_wait_come_together() {
    let (a1, s1, _) = ask();
    let (a2, s2, _) = ask();
    let (a3, s3, _) = ask();
    let (start, _end, started) = wait();
    let mut done = gather(vec![(1, a1), (2, a2), (3, a3)], start);
    assert!(poll(&mut done).is_pending());
    assert_eq!(
      started.load(Ordering::SeqCst),
      0,
      "no wait before an answer"
    );
    s1.send(()).unwrap();
    assert!(poll(&mut done).is_pending());
    assert_eq!(
      started.load(Ordering::SeqCst),
      1,
      "the wait starts at the first answer"
    );
    s2.send(()).unwrap();
    assert!(poll(&mut done).is_pending());
    s3.send(()).unwrap();
    let done = ready(poll(&mut done));
    assert_eq!(
      ids(&done.answers),
      vec![1, 2, 3],
      "as soon as the last came"
    );
    assert!(done.rest.is_empty());
    assert_eq!(started.load(Ordering::SeqCst), 1, "started once");
  }

  #[test]
  fn an_ask_parked_behind_another_holder_does_not_hold_back_the_others() {
    let (a1, s1, _) = ask();
    let (a2, s2, parked2) = ask();
    let (a3, s3, _) = ask();
    let (start, _end, _) = wait();
    let mut done = gather(vec![(1, a1), (2, a2), (3, a3)], start);
    s1.send(()).unwrap();
    assert!(poll(&mut done).is_pending());
    parked2.store(true, Ordering::SeqCst);
    s3.send(()).unwrap();
    let done = ready(poll(&mut done));
    assert_eq!(ids(&done.answers), vec![1, 3]);
    assert_eq!(ids(&done.rest), vec![2]);
    // The parked ask goes on where it was.
    let (_, mut rest) = done.rest.into_iter().next().unwrap();
    assert!(poll(&mut rest.future).is_pending());
    s2.send(()).unwrap();
    assert_eq!(ready(poll(&mut rest.future)).0, "k");
  }

  #[test]
  fn a_slow_ask_holds_back_the_answers_for_the_wait_at_most() {
    let (a1, s1, _) = ask();
    let (a2, _s2, _) = ask();
    let (start, end, _) = wait();
    let mut done = gather(vec![(1, a1), (2, a2)], start);
    s1.send(()).unwrap();
    assert!(poll(&mut done).is_pending(), "the slow ask is waited for");
    end.send(()).unwrap();
    let done = ready(poll(&mut done));
    assert_eq!(ids(&done.answers), vec![1]);
    assert_eq!(ids(&done.rest), vec![2]);
  }

  #[test]
  fn asks_all_parked_come_back_at_once_unanswered() {
    let (a1, _s1, parked1) = ask();
    let (a2, _s2, parked2) = ask();
    parked1.store(true, Ordering::SeqCst);
    parked2.store(true, Ordering::SeqCst);
    let (start, _end, started) = wait();
    let done = ready(poll(&mut gather(vec![(1, a1), (2, a2)], start)));
    assert!(done.answers.is_empty());
    assert_eq!(ids(&done.rest), vec![1, 2]);
    assert_eq!(started.load(Ordering::SeqCst), 0, "nothing to wait for");
  }
}
