//! Flights that asked the fleet who loads in one turn of the JS thread (the
//! cold keys of one tick, a `getOrLoadMany` call) are answered in one turn
//! too. Each asks on its own (its own lock, its own re-check), but the
//! answers come back together: once every ask still out is parked (waiting
//! for another instance's fill, which may take as long as that load), or
//! [`TOGETHER_WAIT`] after the first answer. One answer per flight, each on
//! its own tokio wake-up, spread the loads of one batch over several loader
//! calls whenever the host paused the runtime between two of them.

use super::cache::Pending;
use super::fleet::Acquired;
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
  Together {
    asks: asks.into_iter().map(Some).collect(),
    answers: Vec::new(),
    wait,
    deadline: None,
  }
}

struct Together {
  asks: Vec<Option<(u64, Ask)>>,
  answers: Vec<(u64, (String, Acquired))>,
  wait: Duration,
  /// From the first answer.
  deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Future for Together {
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
      this.deadline = Some(Box::pin(tokio::time::sleep(this.wait)));
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
  use super::*;

  fn answer(ms: u64, parked: Option<u64>) -> Ask {
    let flag = Arc::new(AtomicBool::new(false));
    let set = Arc::clone(&flag);
    Ask {
      future: Box::pin(async move {
        if let Some(after) = parked {
          tokio::time::sleep(Duration::from_millis(after)).await;
          set.store(true, Ordering::SeqCst);
        }
        tokio::time::sleep(Duration::from_millis(ms)).await;
        ("k".to_string(), Acquired::Load { token: None })
      }),
      parked: flag,
    }
  }

  fn ids(asks: &[(u64, impl Sized)]) -> Vec<u64> {
    let mut ids: Vec<u64> = asks.iter().map(|(id, _)| *id).collect();
    ids.sort_unstable();
    ids
  }

  #[tokio::test(start_paused = true)]
  async fn answers_that_come_within_the_wait_come_together() {
    let asks = vec![
      (1, answer(1, None)),
      (2, answer(5, None)),
      (3, answer(15, None)),
    ];
    let start = tokio::time::Instant::now();
    let done = together(asks, Duration::from_millis(20)).await;
    assert_eq!(ids(&done.answers), vec![1, 2, 3]);
    assert!(done.rest.is_empty());
    assert_eq!(
      start.elapsed(),
      Duration::from_millis(15),
      "as soon as the last came"
    );
  }

  #[tokio::test(start_paused = true)]
  async fn an_ask_parked_behind_another_holder_does_not_hold_back_the_others() {
    let asks = vec![
      (1, answer(1, None)),
      (2, answer(5_000, Some(2))),
      (3, answer(3, None)),
    ];
    let start = tokio::time::Instant::now();
    let done = together(asks, Duration::from_millis(20)).await;
    assert_eq!(ids(&done.answers), vec![1, 3]);
    assert_eq!(ids(&done.rest), vec![2]);
    assert_eq!(start.elapsed(), Duration::from_millis(3));
    // The parked ask goes on where it was.
    let (_, rest) = done.rest.into_iter().next().unwrap();
    rest.future.await;
    assert_eq!(start.elapsed(), Duration::from_millis(5_002));
  }

  #[tokio::test(start_paused = true)]
  async fn a_slow_ask_holds_back_the_answers_for_the_wait_at_most() {
    let asks = vec![(1, answer(2, None)), (2, answer(900, None))];
    let start = tokio::time::Instant::now();
    let done = together(asks, Duration::from_millis(20)).await;
    assert_eq!(ids(&done.answers), vec![1]);
    assert_eq!(ids(&done.rest), vec![2]);
    assert_eq!(start.elapsed(), Duration::from_millis(22));
  }

  #[tokio::test(start_paused = true)]
  async fn asks_all_parked_come_back_at_once_unanswered() {
    let asks = vec![(1, answer(900, Some(0))), (2, answer(900, Some(1)))];
    let start = tokio::time::Instant::now();
    let done = together(asks, Duration::from_millis(20)).await;
    assert!(done.answers.is_empty());
    assert_eq!(ids(&done.rest), vec![1, 2]);
    assert_eq!(start.elapsed(), Duration::from_millis(1));
  }
}
