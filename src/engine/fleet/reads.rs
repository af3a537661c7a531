//! Reads of the store: one key or many, judged fresh or stale through
//! `core::policy`, tags and auto-recovery's pending invalidations.

use super::{bump, Acquired, Fleet, Terms};
use crate::core::envelope::{DecodeError, Envelope};
use crate::core::policy::{self, Answers};
use crate::engine::shared::{Read, SharedStore};
use std::time::Duration;

/// Past this many remembered corrupt stamps the memo starts afresh.
const MAX_CORRUPT_STAMPS: usize = 10_000;

impl<S: SharedStore> Fleet<S> {
  pub(super) async fn read(&self, keys: &S::Keys) -> Option<Read> {
    let mut read = self.track(self.store.read(keys).await)?;
    self.judge_serializer(std::slice::from_mut(&mut read));
    self.judge_tags(std::slice::from_mut(&mut read)).await;
    Some(read)
  }

  /// A value another serializer wrote is no value of ours: a bad value,
  /// counted, its stamp kept so that our write replaces it (a fleet that
  /// changes serializer reloads each key once, never decodes the other's).
  fn judge_serializer(&self, reads: &mut [Read]) {
    for read in reads {
      if let Read::Found(e) = read {
        if e.body.serializer() != self.serializer {
          let stamp = e.meta.stamp;
          *read = Read::Corrupt(DecodeError::BadValue { stamp });
        }
      }
    }
  }

  /// Counts a corrupt value where a flight first meets it (re-reads of the
  /// same flight do not count it again), and remembers the stamp of one
  /// with a valid header, for the write that replaces it.
  pub(super) fn note_corrupt(&self, key: &str, read: &Read) {
    match read {
      Read::Corrupt(DecodeError::BadValue { stamp }) => {
        bump(&self.counters.corrupt_values);
        let mut stamps = self
          .corrupt_stamps
          .lock()
          .unwrap_or_else(|p| p.into_inner());
        if stamps.len() >= MAX_CORRUPT_STAMPS {
          stamps.clear();
        }
        stamps.insert(key.to_string(), *stamp);
      }
      Read::Corrupt(_) => bump(&self.counters.corrupt_values),
      _ => {}
    }
  }

  pub(super) fn take_corrupt_stamp(&self, key: &str) -> Option<u64> {
    let mut stamps = self
      .corrupt_stamps
      .lock()
      .unwrap_or_else(|p| p.into_inner());
    if stamps.is_empty() {
      return None;
    }
    stamps.remove(key)
  }

  /// The usable envelope under the key, if any (counted as a Redis hit):
  /// fresh as of `now` (epoch ms), and newer than `newer_than` when given.
  /// `None`: Redis failed.
  pub(super) async fn fresh(
    &self,
    key: &str,
    keys: &S::Keys,
    now: u64,
    newer_than: Option<u64>,
  ) -> Option<Option<Envelope>> {
    Some(match self.read(keys).await? {
      Read::Found(e)
        if policy::answers(&e.meta, now, false, newer_than) == Some(Answers::Value)
          && self.counts(key, &e) =>
      {
        bump(&self.counters.redis_hits);
        Some(e)
      }
      _ => None,
    })
  }

  /// What a read of the key answers a flight with, if anything: a usable
  /// value, or (for callers that accept one) a stale one.
  pub(super) fn answer(&self, key: &str, read: &Read, terms: &Terms) -> Option<Acquired> {
    let Read::Found(e) = read else { return None };
    if !self.counts(key, e) {
      return None;
    }
    let answers = policy::answers(&e.meta, terms.now, terms.accept_stale, terms.newer_than)?;
    bump(&self.counters.redis_hits);
    Some(match answers {
      Answers::Value => Acquired::Value(e.clone()),
      Answers::Stale => Acquired::Stale(e.clone()),
    })
  }

  /// The first step of many flights at once: one pipelined read. Each gets
  /// its answer, or `None`: go on with [`Fleet::acquire`] (no second read).
  pub async fn read_many(&self, requests: &[(String, Terms)]) -> Vec<Option<Acquired>> {
    let local = || Some(Acquired::Load { token: None });
    if !self.allowed() {
      return requests.iter().map(|_| local()).collect();
    }
    let keys: Vec<S::Keys> = requests
      .iter()
      .map(|(key, _)| self.store.keys(key))
      .collect();
    // Bounded by the loads' deadline: the binding may leave a flight without
    // a JS leader (and its hardTimeout timer) while this read is out.
    let bound = Duration::from_millis(self.hard_timeout);
    let judged = async {
      let mut reads = self.track(self.store.read_many(&keys).await)?;
      self.judge_serializer(&mut reads);
      self.judge_tags(&mut reads).await;
      Some(reads)
    };
    let Ok(Some(reads)) = tokio::time::timeout(bound, judged).await else {
      return requests.iter().map(|_| local()).collect();
    };
    reads
      .iter()
      .zip(requests)
      .map(|(read, (key, terms))| {
        self.note_corrupt(key, read);
        self.answer(key, read, terms)
      })
      .collect()
  }

  /// `get` past the L1: the live envelope, if Redis answers.
  pub async fn peek(&self, key: &str, now: u64) -> Option<Envelope> {
    if !self.allowed() {
      return None;
    }
    match self.read(&self.store.keys(key)).await? {
      Read::Found(e) if policy::alive(&e.meta, now) && self.counts(key, &e) => Some(e),
      _ => None,
    }
  }
}
