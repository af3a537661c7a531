//! Tags: `deleteByTag(tag)` invalidates every entry carrying the tag, on
//! every instance, without finding those entries. Each tag has an
//! invalidation stamp (epoch ms of its last `deleteByTag`); an entry
//! carrying the tag is invalid when it was written (its load started) no
//! later than that stamp. The comparison is made lazily, when the entry is
//! read: FusionCache's design, with the stamps held in memory
//! ([`TagStamps`]) and kept current by the events channel, so a hit on a
//! tagged entry pays no round trip.

use super::error::{Code, Error, Kind};
use hashlink::LinkedHashMap;
use std::sync::Arc;

/// At most this many tags on one entry: tags name what an entry depends on
/// (a user, a tenant), a handful; hundreds would be a bug.
pub const MAX_TAGS: usize = 64;

/// Longest tag accepted, in bytes.
pub const MAX_TAG_BYTES: usize = 1024;

/// How many tags' stamps an instance keeps ([`TagStamps`]): a few MB at
/// most; past it, the least recently used go (into the floor).
pub const TAG_STAMPS_CAPACITY: usize = 50_000;

/// An entry's tags, sorted and without repeats; `None` for an untagged entry
/// (one word: a hit on an untagged entry checks one pointer).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tags(Option<Arc<Box<[String]>>>);

impl Tags {
  pub const NONE: Tags = Tags(None);

  /// The tags given, checked ([`check_tag`], at most [`MAX_TAGS`]), sorted
  /// and without repeats. An empty list is no tags.
  pub fn new(mut tags: Vec<String>) -> Result<Tags, Error> {
    for tag in &tags {
      check_tag(tag)?;
    }
    tags.sort_unstable();
    tags.dedup();
    check_count(tags.len())?;
    Ok(match tags.is_empty() {
      true => Tags(None),
      false => Tags(Some(Arc::new(tags.into_boxed_slice()))),
    })
  }

  pub fn is_empty(&self) -> bool {
    self.0.is_none()
  }

  pub fn as_slice(&self) -> &[String] {
    match &self.0 {
      Some(tags) => tags,
      None => &[],
    }
  }

  pub fn contains(&self, tag: &str) -> bool {
    self.as_slice().iter().any(|t| t == tag)
  }
}

/// At most [`MAX_TAGS`] tags on one entry.
pub fn check_count(count: usize) -> Result<(), Error> {
  match count > MAX_TAGS {
    true => Err(invalid(format!(
      "an entry has {count} tags; at most {MAX_TAGS} are allowed"
    ))),
    false => Ok(()),
  }
}

/// A tag is a non-empty string of at most [`MAX_TAG_BYTES`] bytes.
pub fn check_tag(tag: &str) -> Result<(), Error> {
  if tag.is_empty() {
    return Err(invalid(
      "a tag is an empty string; tags are non-empty strings",
    ));
  }
  if tag.len() > MAX_TAG_BYTES {
    return Err(invalid(format!(
      "a tag is {} bytes long; tags are at most {MAX_TAG_BYTES} bytes",
      tag.len()
    )));
  }
  Ok(())
}

fn invalid(message: impl Into<String>) -> Error {
  Error::new(Code::InvalidOption, Kind::Type, message.into())
}

/// What is known of one tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Known {
  /// Its newest invalidation stamp known here (0: none).
  at: u64,
  /// `at` was read from the shared store while the events subscription was
  /// live, and every event since was applied: `at` is the fleet's. Only
  /// then may a value read from the shared store be judged by it (a
  /// `deleteByTag` made before this instance subscribed reached it by no
  /// event). Values written here need no confirmation: an invalidation
  /// before their load started does not concern them, and one after it
  /// arrives as an event.
  confirmed: bool,
}

/// The invalidation stamps of the tags this instance met, least recently
/// used first, bounded. A tag pushed out leaves its stamp in `floor`: an
/// unknown tag counts as invalidated then, so dropping a stamp can make an
/// entry load again, never serve it past its tag's invalidation.
#[derive(Debug)]
pub struct TagStamps {
  known: LinkedHashMap<String, Known>,
  floor: u64,
  capacity: usize,
  /// Bumped by [`TagStamps::unconfirm_all`]: a read of the shared store's
  /// stamps that began before confirms nothing.
  epoch: u64,
}

impl TagStamps {
  pub fn new(capacity: usize) -> TagStamps {
    TagStamps {
      known: LinkedHashMap::new(),
      floor: 0,
      capacity: capacity.max(1),
      epoch: 0,
    }
  }

  fn at(&self, tag: &str) -> u64 {
    self
      .known
      .get(tag)
      .map_or(self.floor, |k| k.at.max(self.floor))
  }

  /// Whether an entry carrying `tags`, stamped `stamp` (its load's start),
  /// was invalidated: one of its tags' stamps is not older.
  pub fn invalidates(&self, tags: &Tags, stamp: u64) -> bool {
    tags.as_slice().iter().any(|tag| stamp <= self.at(tag))
  }

  /// Whether a value read from the shared store, carrying `tags` and
  /// stamped `stamp`, may be served: every tag's stamp is the fleet's
  /// (confirmed, or among `read_now`: read from the store for this very
  /// value) and none invalidates it.
  pub fn admits_shared(&self, tags: &Tags, stamp: u64, read_now: &[&str]) -> bool {
    tags.as_slice().iter().all(|tag| {
      self.known.get(tag.as_str()).is_some_and(|k| {
        (k.confirmed || read_now.contains(&tag.as_str())) && stamp > k.at.max(self.floor)
      })
    })
  }

  /// The tags among `tags` whose stamp is not confirmed.
  pub fn unconfirmed<'a>(&'a self, tags: &'a Tags) -> impl Iterator<Item = &'a String> + 'a {
    tags
      .as_slice()
      .iter()
      .filter(|tag| !self.known.get(tag.as_str()).is_some_and(|k| k.confirmed))
  }

  /// `tag` was invalidated at `at` (here, or an event says so elsewhere).
  pub fn invalidated(&mut self, tag: &str, at: u64) {
    self.record(tag, at, false);
  }

  /// The epoch to hand back to [`TagStamps::confirm`] with what a read of
  /// the shared store, begun now, answers.
  pub fn epoch(&self) -> u64 {
    self.epoch
  }

  /// The shared store says `tag`'s stamp is `at` (0: none), read from
  /// `epoch` on. Confirmed unless the subscription dropped since.
  pub fn confirm(&mut self, tag: &str, at: u64, epoch: u64) {
    self.record(tag, at, epoch == self.epoch);
  }

  /// The events subscription dropped: invalidations may have been missed,
  /// so no stamp is the fleet's until read again.
  pub fn unconfirm_all(&mut self) {
    self.epoch += 1;
    for (_, known) in self.known.iter_mut() {
      known.confirmed = false;
    }
  }

  fn record(&mut self, tag: &str, at: u64, confirmed: bool) {
    match self.known.to_back(tag) {
      Some(known) => {
        known.at = known.at.max(at);
        known.confirmed |= confirmed;
      }
      None => {
        self.known.insert(tag.to_string(), Known { at, confirmed });
        while self.known.len() > self.capacity {
          if let Some((_, pushed_out)) = self.known.pop_front() {
            self.floor = self.floor.max(pushed_out.at);
          }
        }
      }
    }
  }

  pub fn len(&self) -> usize {
    self.known.len()
  }

  pub fn is_empty(&self) -> bool {
    self.known.is_empty()
  }
}

#[cfg(test)]
mod tests {
  use super::*;

  fn tags(list: &[&str]) -> Tags {
    Tags::new(list.iter().map(|t| t.to_string()).collect()).unwrap()
  }

  #[test]
  fn tags_are_sorted_without_repeats_and_checked() {
    assert_eq!(tags(&["b", "a", "b"]).as_slice(), ["a", "b"]);
    assert!(tags(&[]).is_empty());
    let empty = Tags::new(vec![String::new()]).unwrap_err();
    assert_eq!(empty.code, Code::InvalidOption);
    assert!(Tags::new(vec!["x".repeat(MAX_TAG_BYTES + 1)]).is_err());
    assert!(Tags::new(vec!["x".repeat(MAX_TAG_BYTES)]).is_ok());
    let many: Vec<String> = (0..=MAX_TAGS).map(|i| i.to_string()).collect();
    assert!(Tags::new(many).is_err());
  }

  #[test]
  fn an_entry_written_no_later_than_its_tags_invalidation_is_invalid() {
    let mut stamps = TagStamps::new(10);
    let entry = tags(&["tenant:7", "user:42"]);
    assert!(!stamps.invalidates(&entry, 100));
    stamps.invalidated("user:42", 100);
    assert!(stamps.invalidates(&entry, 99));
    assert!(stamps.invalidates(&entry, 100), "same ms: invalid");
    assert!(!stamps.invalidates(&entry, 101));
    assert!(!stamps.invalidates(&tags(&["tenant:7"]), 50));
    assert!(!stamps.invalidates(&Tags::NONE, 1));
    // An older invalidation arriving late changes nothing.
    stamps.invalidated("user:42", 10);
    assert!(!stamps.invalidates(&entry, 101));
  }

  #[test]
  fn shared_values_need_every_tag_confirmed() {
    let mut stamps = TagStamps::new(10);
    let entry = tags(&["a", "b"]);
    assert!(!stamps.admits_shared(&entry, 100, &[]));
    let epoch = stamps.epoch();
    stamps.confirm("a", 0, epoch);
    assert_eq!(stamps.unconfirmed(&entry).collect::<Vec<_>>(), ["b"]);
    assert!(!stamps.admits_shared(&entry, 100, &[]));
    stamps.confirm("b", 50, epoch);
    assert!(stamps.admits_shared(&entry, 100, &[]));
    assert!(!stamps.admits_shared(&entry, 50, &[]));
    // An event moves a confirmed stamp on, and it stays confirmed.
    stamps.invalidated("a", 200);
    assert!(!stamps.admits_shared(&entry, 150, &[]));
    assert!(stamps.admits_shared(&entry, 201, &[]));
    assert!(stamps.admits_shared(&Tags::NONE, 1, &[]));
  }

  #[test]
  fn a_dropped_subscription_unconfirms_and_voids_reads_begun_before() {
    let mut stamps = TagStamps::new(10);
    let entry = tags(&["a"]);
    let before = stamps.epoch();
    stamps.confirm("a", 5, before);
    stamps.unconfirm_all();
    assert!(!stamps.admits_shared(&entry, 100, &[]));
    // A read that began before the drop answers: not confirmed, but it
    // judges the value it was read for.
    stamps.confirm("a", 5, before);
    assert!(!stamps.admits_shared(&entry, 100, &[]));
    assert!(stamps.admits_shared(&entry, 100, &["a"]));
    assert!(!stamps.admits_shared(&entry, 5, &["a"]));
    // The stamp is still a lower bound for local entries.
    assert!(stamps.invalidates(&entry, 5));
    stamps.confirm("a", 5, stamps.epoch());
    assert!(stamps.admits_shared(&entry, 100, &[]));
  }

  #[test]
  fn a_stamp_pushed_out_raises_the_floor_for_unknown_tags() {
    let mut stamps = TagStamps::new(2);
    stamps.invalidated("old", 500);
    stamps.invalidated("b", 10);
    // Used again: "old" is the most recent now, "b" goes first.
    stamps.invalidated("old", 1);
    stamps.invalidated("c", 20);
    assert_eq!(stamps.len(), 2);
    assert!(stamps.invalidates(&tags(&["never-seen"]), 10), "floor 10");
    assert!(!stamps.invalidates(&tags(&["never-seen"]), 11));
    stamps.invalidated("d", 0);
    // "old" (500) went: the floor is 500 now, for every unknown tag.
    assert!(stamps.invalidates(&tags(&["old"]), 499));
    assert!(stamps.invalidates(&tags(&["never-seen"]), 500));
    assert!(!stamps.invalidates(&tags(&["never-seen"]), 501));
  }
}
