//! The freshness policy: how an entry is classified, when XFetch refreshes
//! early, how TTLs are jittered. All inputs explicit: `now` in epoch ms, `u`
//! a uniform draw in (0, 1].

use super::envelope::Meta;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
  /// Before `fresh_until`: served as is.
  Fresh,
  /// Past `fresh_until`, before `hard_until`: servable while one refresh runs.
  Stale,
  /// Past `hard_until` (or a negative marker past its TTL): a miss.
  Expired,
}

pub fn classify(meta: &Meta, now: u64) -> Freshness {
  if now < meta.fresh_until {
    Freshness::Fresh
  } else if now < meta.hard_until && !meta.negative {
    Freshness::Stale
  } else {
    Freshness::Expired
  }
}

/// Whether the entry `meta` describes is still kept at `now`: before its
/// hard TTL (fresh or stale; a negative marker's two deadlines are one).
/// Past it the entry has expired everywhere: the L1 reclaims it, the store
/// drops the key, and nothing answers with it.
#[inline]
pub fn alive(meta: &Meta, now: u64) -> bool {
  now < meta.hard_until
}

/// How long the entry `meta` describes is still kept from `now` (ms, 0 once
/// expired): the store's TTL for it.
#[inline]
pub fn hard_ttl_left(meta: &Meta, now: u64) -> u64 {
  meta.hard_until.saturating_sub(now)
}

/// Whether a refresh of a kept entry may start at `now`: its local back-off
/// after a failed refresh (`retry_after`, epoch ms) has passed.
#[inline]
pub fn refresh_allowed(retry_after: u64, now: u64) -> bool {
  now >= retry_after
}

/// Whether a fresh entry is refreshed early (XFetch) at `now`: its writer
/// drew the moment `refresh_at` ([`xfetch_refresh_at`]).
#[inline]
pub fn early_refresh_due(refresh_at: u64, now: u64) -> bool {
  now >= refresh_at
}

/// How a value found elsewhere (another instance's write, read from the
/// shared store) may answer a flight: the one judge of such values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answers {
  /// As a value: fresh, and newer than the one an early refresh replaces.
  Value,
  /// As a stale value, to callers that accept one (a refresh should follow).
  Stale,
}

/// What the entry `meta` describes may answer at `now`: fresh values (newer
/// than the stamp `newer_than`, when given: an early refresh must not be
/// answered by the value it replaces); with `accept_stale`, also stale ones
/// and fresh ones that are not newer, unless negative (a stale "not found"
/// is a miss).
pub fn answers(
  meta: &Meta,
  now: u64,
  accept_stale: bool,
  newer_than: Option<u64>,
) -> Option<Answers> {
  match classify(meta, now) {
    Freshness::Fresh if newer_than.is_none_or(|stamp| meta.stamp > stamp) => Some(Answers::Value),
    Freshness::Fresh | Freshness::Stale if accept_stale && !meta.negative => Some(Answers::Stale),
    _ => None,
  }
}

/// XFetch (Vattani, Chierichetti, Lowenstein, 2015): refresh a fresh entry
/// early when `now - computeMs * beta * ln(u) >= freshUntil`. Since
/// `-ln(u)` is exponentially distributed, the chance per read at time-to-expiry
/// `t` is `exp(-t / (beta * computeMs))`: slow keys refresh earlier, cheap ones
/// near expiry, with no coordination between readers.
pub fn xfetch_refresh_early(
  now: u64,
  fresh_until: u64,
  compute_ms: u64,
  beta: f64,
  u: f64,
) -> bool {
  if beta <= 0.0 || compute_ms == 0 {
    return false;
  }
  // -ln(0) is an infinite head start: the draw that always refreshes.
  if u <= 0.0 {
    return true;
  }
  let head_start = compute_ms as f64 * beta * -u.min(1.0).ln();
  now as f64 + head_start >= fresh_until as f64
}

/// XFetch decided once, by the writer: the moment from which the entry is
/// refreshed early, `freshUntil - computeMs * beta * ln(1/u)`, clamped to
/// `[stamp, freshUntil]`. A reader at `now` (in `[stamp, freshUntil)`)
/// refreshes when `now >= refresh_at`, exactly when
/// [`xfetch_refresh_early`] with the same `u` would; but with one draw per
/// write rather than one per instance, every instance reading the entry
/// refreshes at the same moment, so a fleet of N refreshes
/// `computeMs * beta` early on average, not `computeMs * beta * H(N)` (the
/// earliest of N draws). Each write draws anew: keys written together still
/// spread. `beta <= 0` or `compute_ms == 0`: `fresh_until` (never early);
/// `u <= 0`: `stamp` (the first read refreshes).
pub fn xfetch_refresh_at(stamp: u64, fresh_until: u64, compute_ms: u64, beta: f64, u: f64) -> u64 {
  let floor = stamp.min(fresh_until);
  if beta <= 0.0 || compute_ms == 0 {
    return fresh_until;
  }
  if u <= 0.0 {
    return floor;
  }
  let head_start = compute_ms as f64 * beta * -u.min(1.0).ln();
  let at = fresh_until as f64 - head_start;
  if at <= floor as f64 {
    floor
  } else {
    // `at` is below `fresh_until` here; `ceil` keeps `now >= at` exact for
    // integer `now`.
    (at.ceil() as u64).clamp(floor, fresh_until)
  }
}

/// Spreads `ttl` uniformly over `ttl * (1 ± jitter)`; `u = 0.5` is the
/// centre. Never shortens a positive TTL to zero.
pub fn jittered(ttl: u64, jitter: f64, u: f64) -> u64 {
  if ttl == 0 || jitter <= 0.0 {
    return ttl;
  }
  let factor = 1.0 + jitter * (2.0 * u.clamp(0.0, 1.0) - 1.0);
  ((ttl as f64 * factor).round() as u64).max(1)
}

/// The deadlines written for a value loaded at `now`. One draw scales both
/// TTLs, so the hard TTL never falls below the soft one.
pub fn deadlines(now: u64, ttl: u64, hard_ttl: u64, jitter: f64, u: f64) -> (u64, u64) {
  let fresh = jittered(ttl, jitter, u);
  let hard = jittered(hard_ttl, jitter, u).max(fresh);
  (now.saturating_add(fresh), now.saturating_add(hard))
}

/// The first delay of a key's refresh back-off, ms.
pub const BACKOFF_BASE_MS: u64 = 250;

/// How much of the delay the jitter may take off: it stays in
/// `[d * (1 - BACKOFF_SPREAD), d]`.
pub const BACKOFF_SPREAD: f64 = 0.15;

/// How long a key waits before its next background refresh after its
/// `attempt`-th failure in a row (1 = the first): `d = 250 ms * 2^(attempt-1)`,
/// capped at `cap` (`refreshBackoff`), and jittered down by up to 15 % with
/// `u` in [0, 1] (`u = 1`: exactly `d`), so keys that failed together do not
/// retry together. A short first delay sees a recovered backend quickly;
/// the doubling keeps a dead one to a handful of calls: 250, 500, 1000,
/// 2000 ms… The spread is narrow so the schedule stays predictable: with a
/// 15 % spread the fourth retry still comes after 3.1 s of failures at the
/// earliest. `cap = 0` turns the back-off off.
pub fn refresh_backoff(attempt: u32, cap: u64, u: f64) -> u64 {
  if cap == 0 || attempt == 0 {
    return 0;
  }
  let doublings = (attempt - 1).min(40);
  let d = BACKOFF_BASE_MS.saturating_mul(1u64 << doublings).min(cap);
  let spread = BACKOFF_SPREAD * (1.0 - u.clamp(0.0, 1.0));
  ((d as f64 * (1.0 - spread)).round() as u64).max(1)
}

#[cfg(test)]
mod tests {
  use super::*;

  #[test]
  fn an_entry_is_kept_until_its_hard_ttl_and_no_longer() {
    let m = meta(1_000, 2_000, false);
    assert!(alive(&m, 1_500));
    assert!(!alive(&m, 2_000));
    assert_eq!(hard_ttl_left(&m, 1_500), 500);
    assert_eq!(hard_ttl_left(&m, 2_500), 0);
    // Every kept entry classifies as fresh or stale, every other as expired.
    for now in [0, 999, 1_000, 1_999, 2_000, 3_000] {
      assert_eq!(
        alive(&m, now),
        classify(&m, now) != Freshness::Expired,
        "{now}"
      );
    }
    let negative = meta(2_000, 2_000, true);
    for now in [1_999, 2_000] {
      assert_eq!(
        alive(&negative, now),
        classify(&negative, now) != Freshness::Expired
      );
    }
  }

  #[test]
  fn refreshes_wait_for_their_back_off_and_early_ones_for_their_moment() {
    assert!(!refresh_allowed(1_000, 999));
    assert!(refresh_allowed(1_000, 1_000));
    assert!(!early_refresh_due(1_000, 999));
    assert!(early_refresh_due(1_000, 1_000));
  }

  #[test]
  fn answers_judges_a_shared_value_for_a_flight() {
    let at = |stamp, negative| Meta {
      stamp,
      ..meta(1_000, 2_000, negative)
    };
    // Fresh: a value; not newer than an early refresh's: stale at most.
    assert_eq!(
      answers(&at(5, false), 500, false, None),
      Some(Answers::Value)
    );
    assert_eq!(
      answers(&at(5, false), 500, false, Some(4)),
      Some(Answers::Value)
    );
    assert_eq!(answers(&at(5, false), 500, false, Some(5)), None);
    assert_eq!(
      answers(&at(5, false), 500, true, Some(5)),
      Some(Answers::Stale)
    );
    // Stale: only for callers that accept it; expired: never.
    assert_eq!(answers(&at(5, false), 1_500, false, None), None);
    assert_eq!(
      answers(&at(5, false), 1_500, true, None),
      Some(Answers::Stale)
    );
    assert_eq!(answers(&at(5, false), 2_000, true, None), None);
    // A "not found": fresh, a value; never stale.
    assert_eq!(
      answers(&at(5, true), 500, false, None),
      Some(Answers::Value)
    );
    assert_eq!(answers(&at(5, true), 500, true, Some(5)), None);
    assert_eq!(answers(&at(5, true), 1_500, true, None), None);
  }

  fn meta(fresh_until: u64, hard_until: u64, negative: bool) -> Meta {
    Meta {
      fresh_until,
      hard_until,
      compute_ms: 100,
      stamp: 0,
      refresh_at: None,
      negative,
    }
  }

  #[test]
  fn classifies_by_the_two_deadlines() {
    let m = meta(1_000, 10_000, false);
    assert_eq!(classify(&m, 999), Freshness::Fresh);
    assert_eq!(classify(&m, 1_000), Freshness::Stale);
    assert_eq!(classify(&m, 9_999), Freshness::Stale);
    assert_eq!(classify(&m, 10_000), Freshness::Expired);
  }

  #[test]
  fn negative_markers_are_never_served_stale() {
    let m = meta(1_000, 10_000, true);
    assert_eq!(classify(&m, 999), Freshness::Fresh);
    assert_eq!(classify(&m, 1_000), Freshness::Expired);
  }

  #[test]
  fn xfetch_u_near_zero_forces_an_early_refresh() {
    // -ln(1e-300) = 690.8: a 100 ms key starts 69 s ahead.
    assert!(xfetch_refresh_early(0, 69_000, 100, 1.0, 1e-300));
    assert!(!xfetch_refresh_early(0, 70_000, 100, 1.0, 1e-300));
    assert!(xfetch_refresh_early(0, u64::MAX, 1, 1.0, 0.0));
  }

  #[test]
  fn xfetch_u_one_never_refreshes_before_expiry() {
    assert!(!xfetch_refresh_early(999, 1_000, 10_000, 1.0, 1.0));
    assert!(xfetch_refresh_early(1_000, 1_000, 10_000, 1.0, 1.0));
  }

  #[test]
  fn xfetch_beta_zero_or_unknown_compute_time_is_off() {
    assert!(!xfetch_refresh_early(0, 1_000, 500, 0.0, 1e-300));
    assert!(!xfetch_refresh_early(0, 1_000, 0, 1.0, 1e-300));
  }

  #[test]
  fn xfetch_threshold_matches_the_formula() {
    // -ln(0.5) = 0.693..: with computeMs 1000 the head start is 693 ms.
    assert!(xfetch_refresh_early(307, 1_000, 1_000, 1.0, 0.5));
    assert!(!xfetch_refresh_early(306, 1_000, 1_000, 1.0, 0.5));
    // beta 2 doubles the head start.
    assert!(xfetch_refresh_early(0, 1_386, 1_000, 2.0, 0.5));
    assert!(!xfetch_refresh_early(0, 1_387, 1_000, 2.0, 0.5));
    // A slower key refreshes earlier than a cheap one at the same draw.
    assert!(xfetch_refresh_early(0, 5_000, 10_000, 1.0, 0.5));
    assert!(!xfetch_refresh_early(0, 5_000, 10, 1.0, 0.5));
  }

  #[test]
  fn the_write_time_draw_gives_the_refresh_moment() {
    // -ln(0.5) = 0.693..: with computeMs 1000 the head start is 693.1 ms.
    assert_eq!(xfetch_refresh_at(0, 1_000, 1_000, 1.0, 0.5), 307);
    // beta 2 doubles it; a cheap key starts near expiry.
    assert_eq!(xfetch_refresh_at(0, 10_000, 1_000, 2.0, 0.5), 8_614);
    assert_eq!(xfetch_refresh_at(0, 10_000, 10, 1.0, 0.5), 9_994);
    // u = 1: never early; beta 0 or no compute time: never early either.
    assert_eq!(xfetch_refresh_at(500, 1_000, 10_000, 1.0, 1.0), 1_000);
    assert_eq!(xfetch_refresh_at(500, 1_000, 500, 0.0, 1e-300), 1_000);
    assert_eq!(xfetch_refresh_at(500, 1_000, 0, 1.0, 1e-300), 1_000);
    // Clamped to the stamp: u = 0 (or a head start past it) refreshes at the
    // first read, never before the value was loaded.
    assert_eq!(xfetch_refresh_at(500, 1_000, 1, 1.0, 0.0), 500);
    assert_eq!(xfetch_refresh_at(500, 1_000, 100, 1.0, 1e-300), 500);
    assert_eq!(xfetch_refresh_at(0, u64::MAX, 1, 1.0, 0.0), 0);
  }

  #[test]
  fn the_write_time_moment_agrees_with_the_read_time_formula() {
    let draws = [1e-300, 1e-6, 0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.999, 1.0];
    for &u in &draws {
      for (compute, beta) in [(1, 1.0), (100, 1.0), (250, 0.5), (600, 2.0), (5_000, 1.0)] {
        let (stamp, fresh) = (10_000, 12_000);
        let at = xfetch_refresh_at(stamp, fresh, compute, beta, u);
        assert!((stamp..=fresh).contains(&at));
        for now in (stamp..fresh).step_by(7) {
          assert_eq!(
            now >= at,
            xfetch_refresh_early(now, fresh, compute, beta, u),
            "u {u} compute {compute} beta {beta} now {now} at {at}"
          );
        }
      }
    }
  }

  #[test]
  fn each_write_draws_anew_so_keys_written_together_spread() {
    let distinct: std::collections::BTreeSet<u64> = (0..100)
      .map(|i| xfetch_refresh_at(0, 60_000, 1_000, 1.0, (i as f64 + 0.5) / 100.0))
      .collect();
    assert_eq!(distinct.len(), 100);
  }

  #[test]
  fn jitter_stays_within_bounds() {
    assert_eq!(jittered(10_000, 0.1, 0.0), 9_000);
    assert_eq!(jittered(10_000, 0.1, 0.5), 10_000);
    assert_eq!(jittered(10_000, 0.1, 1.0), 11_000);
    for i in 0..=1000 {
      let u = i as f64 / 1000.0;
      let t = jittered(60_000, 0.1, u);
      assert!((54_000..=66_000).contains(&t), "{u} -> {t}");
    }
    assert_eq!(jittered(10_000, 0.0, 0.9), 10_000);
    assert_eq!(jittered(1, 0.5, 0.0), 1);
    assert_eq!(jittered(0, 0.5, 1.0), 0);
  }

  #[test]
  fn jitter_spreads_keys_written_together() {
    let distinct: std::collections::BTreeSet<u64> = (0..100)
      .map(|i| jittered(60_000, 0.1, (i as f64 + 0.5) / 100.0))
      .collect();
    assert!(distinct.len() > 90);
  }

  #[test]
  fn hard_deadline_never_precedes_the_soft_one() {
    let (fresh, hard) = deadlines(1_000, 100, 100, 0.5, 1.0);
    assert_eq!((fresh, hard), (1_150, 1_150));
    let (fresh, hard) = deadlines(1_000, 100, 1_000, 0.1, 0.0);
    assert_eq!((fresh, hard), (1_090, 1_900));
    assert_eq!(
      deadlines(u64::MAX - 1, 100, 1000, 0.0, 0.5),
      (u64::MAX, u64::MAX)
    );
  }

  #[test]
  fn refresh_backoff_doubles_from_250_ms_up_to_the_cap() {
    let seq: Vec<u64> = (1..=8).map(|n| refresh_backoff(n, 10_000, 1.0)).collect();
    assert_eq!(seq, [250, 500, 1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
    assert_eq!(refresh_backoff(u32::MAX, 10_000, 1.0), 10_000);
    // A cap below the first step is the only delay.
    assert_eq!(refresh_backoff(1, 100, 1.0), 100);
    assert_eq!(
      refresh_backoff(3, 0, 1.0),
      0,
      "refreshBackoff 0: no back-off"
    );
    assert_eq!(refresh_backoff(0, 10_000, 1.0), 0, "no failure yet");
  }

  #[test]
  fn refresh_backoff_jitter_stays_within_the_spread() {
    assert_eq!(refresh_backoff(1, 10_000, 0.0), 213);
    assert_eq!(refresh_backoff(3, 10_000, 0.0), 850);
    assert_eq!(refresh_backoff(3, 10_000, 0.5), 925);
    for n in 1..=10 {
      let d = refresh_backoff(n, 10_000, 1.0);
      for i in 0..=100 {
        let got = refresh_backoff(n, 10_000, i as f64 / 100.0);
        assert!(
          got <= d && got as f64 >= d as f64 * 0.85 - 0.5,
          "{n} {i} {got}"
        );
      }
    }
    // Four failures in a row, at the earliest draws, still span > 3 s.
    let earliest: u64 = (1..=4).map(|n| refresh_backoff(n, 10_000, 0.0)).sum();
    assert!(earliest > 3_000, "{earliest}");
  }
}
