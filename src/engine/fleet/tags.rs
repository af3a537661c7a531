//! Tag judging: a stored value a `deleteByTag` invalidated is a miss.

use super::{lock, Fleet, SharedTagStamps};
use crate::engine::shared::{Read, SharedStore};
use std::sync::Arc;

impl<S: SharedStore> Fleet<S> {
  /// The tag stamps of this instance (shared with its L1).
  pub fn tag_stamps(&self) -> SharedTagStamps {
    Arc::clone(&self.tags)
  }

  /// Turns every value in `reads` that a `deleteByTag` invalidated into a
  /// miss. The stamps of its tags not known as the fleet's are read first
  /// (one batch for all of `reads`); when they cannot be, such a value is
  /// a miss too: it is never served past an invalidation it could not
  /// check.
  pub(super) async fn judge_tags(&self, reads: &mut [Read]) {
    let tagged = |read: &Read| matches!(read, Read::Found(e) if !e.tags.is_empty());
    if !reads.iter().any(tagged) {
      return;
    }
    let (mut wanted, epoch) = {
      let stamps = lock(&self.tags);
      let mut wanted: Vec<String> = Vec::new();
      for read in reads.iter() {
        if let Read::Found(e) = read {
          wanted.extend(stamps.unconfirmed(&e.tags).cloned());
        }
      }
      (wanted, stamps.epoch())
    };
    wanted.sort_unstable();
    wanted.dedup();
    let live = self.subscription.is_set();
    let just_read = match wanted.is_empty() {
      true => Vec::new(),
      false => {
        let answer = self.store.tag_stamps(&wanted).await;
        match self.track(answer) {
          Some(stamps) => wanted.into_iter().zip(stamps).collect(),
          None => Vec::new(),
        }
      }
    };
    let mut stamps = lock(&self.tags);
    for (tag, at) in &just_read {
      match live {
        true => stamps.confirm(tag, *at, epoch),
        false => stamps.invalidated(tag, *at),
      }
    }
    let read_now: Vec<&str> = just_read.iter().map(|(tag, _)| tag.as_str()).collect();
    for read in reads.iter_mut() {
      if let Read::Found(e) = read {
        if !stamps.admits_shared(&e.tags, e.meta.stamp, &read_now) {
          *read = Read::Missing;
        }
      }
    }
  }
}
