//! Property tests of the pure core: the envelope decoder, key encoding, the
//! freshness policy and the circuit breaker. `npm test` runs each property
//! for proptest's default 256 cases; a longer run:
//! `PROPTEST_CASES=100000 cargo test --release --test properties`.

use herdcache::core::breaker::{Breaker, State};
use herdcache::core::envelope::{Envelope, Meta, MAX_DIGITS};
use herdcache::core::key::{check_string_key, encode_parts, Part, MAX_KEY_BYTES};
use herdcache::core::policy::{
  classify, deadlines, jittered, xfetch_refresh_at, xfetch_refresh_early, Freshness,
};
use proptest::prelude::*;

/// The largest header number the format allows.
const MAX_NUMBER: u64 = 10u64.pow(MAX_DIGITS as u32) - 1;

fn meta() -> impl Strategy<Value = Meta> {
  (
    0..=MAX_NUMBER,
    0..=MAX_NUMBER,
    0..=MAX_NUMBER,
    0..=MAX_NUMBER,
    0..=MAX_NUMBER,
    any::<bool>(),
  )
    .prop_map(|(a, b, compute_ms, stamp, r, negative)| Meta {
      fresh_until: a.min(b),
      hard_until: a.max(b),
      compute_ms,
      stamp,
      refresh_at: Some(r.min(a.min(b))),
      negative,
    })
}

/// Text that is mostly what headers are made of, so mutations land near
/// the valid format instead of being rejected at the first byte.
fn header_like() -> impl Strategy<Value = String> {
  proptest::collection::vec(
    prop_oneof![
      2 => Just("hc1".to_string()),
      2 => Just("hc2".to_string()),
      4 => Just(" ".to_string()),
      4 => (0u64..=u64::MAX).prop_map(|n| n.to_string()),
      2 => "[0-9]{14,30}",
      2 => Just("v".to_string()),
      1 => Just("n".to_string()),
      2 => Just("\n".to_string()),
      1 => Just("-".to_string()),
      1 => any::<String>(),
    ],
    0..12,
  )
  .prop_map(|parts| parts.concat())
}

/// The inverse of the array-key encoding, written independently: split at
/// unescaped `:`, drop the escapes.
fn decode_parts(encoded: &str) -> Vec<String> {
  let mut parts = vec![String::new()];
  let mut chars = encoded.chars();
  while let Some(ch) = chars.next() {
    match ch {
      '\\' => parts
        .last_mut()
        .unwrap()
        .push(chars.next().expect("a dangling escape")),
      ':' => parts.push(String::new()),
      _ => parts.last_mut().unwrap().push(ch),
    }
  }
  parts
}

/// Key parts drawn from an alphabet heavy in the characters the encoding
/// escapes, so collisions would be found if they could happen.
fn key_text() -> impl Strategy<Value = String> {
  prop_oneof![
    3 => "[a:\\\\b]{0,6}",
    1 => any::<String>(),
  ]
}

fn rank(f: Freshness) -> u8 {
  match f {
    Freshness::Fresh => 0,
    Freshness::Stale => 1,
    Freshness::Expired => 2,
  }
}

proptest! {
  #[test]
  fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
    let _ = Envelope::decode(&*String::from_utf8_lossy(&bytes));
    let _ = Envelope::decode(&bytes);
  }

  #[test]
  fn near_valid_headers_never_panic_and_valid_ones_obey_the_rules(header in header_like(), json in any::<String>()) {
    let text = format!("{header}\n{json}");
    if let Ok(e) = Envelope::decode(&text) {
      prop_assert!(e.meta.fresh_until <= e.meta.hard_until);
      prop_assert!(e.meta.stamp <= MAX_NUMBER && e.meta.hard_until <= MAX_NUMBER);
      prop_assert!(!e.body.is_empty());
      prop_assert!(e.meta.refresh_at.is_none_or(|at| at <= e.meta.fresh_until));
      prop_assert_eq!(e.meta.refresh_at.is_none(), header.starts_with("hc1 "));
      // Whatever decodes encodes back to itself (as hc2: an hc1 entry, which
      // has no moment, is written back as "never early").
      let mut again = e.clone();
      again.meta.refresh_at = e.meta.refresh_at.or(Some(e.meta.fresh_until));
      prop_assert_eq!(Envelope::decode(e.encode()), Ok(again));
    }
  }

  #[test]
  fn encode_then_decode_round_trips(
    meta in meta(),
    json in ".+",
    tags in proptest::collection::vec(".{1,12}", 0..4),
  ) {
    let tags = herdcache::core::tags::Tags::new(tags).unwrap();
    let e = Envelope { meta, body: herdcache::core::body::Body::Json(json), tags, etag: Default::default() };
    prop_assert_eq!(Envelope::decode(e.encode()), Ok(e));
  }

  #[test]
  fn header_numbers_past_the_digit_limit_are_corrupt(meta in meta(), extra in (MAX_NUMBER + 1)..=u64::MAX, field in 0usize..5) {
    let mut numbers = [meta.fresh_until, meta.hard_until, meta.compute_ms, meta.stamp, meta.refresh_at.unwrap()];
    let valid = format!("hc2 {} {} {} {} {} v\n1", numbers[0], numbers[1], numbers[2], numbers[3], numbers[4]);
    prop_assert!(Envelope::decode(&valid).is_ok());
    numbers[field] = extra;
    let text = format!("hc2 {} {} {} {} {} v\n1", numbers[0], numbers[1], numbers[2], numbers[3], numbers[4]);
    prop_assert!(Envelope::decode(&text).is_err());
    if field < 4 {
      let text = format!("hc1 {} {} {} {} v\n1", numbers[0], numbers[1], numbers[2], numbers[3]);
      prop_assert!(Envelope::decode(&text).is_err());
    }
  }

  #[test]
  fn a_refresh_moment_past_fresh_until_is_corrupt(meta in meta(), past in 1u64..1_000) {
    let at = meta.fresh_until + past;
    prop_assume!(at <= MAX_NUMBER);
    let text = format!("hc2 {} {} {} {} {at} v\n1", meta.fresh_until, meta.hard_until, meta.compute_ms, meta.stamp);
    prop_assert!(Envelope::decode(&text).is_err());
  }

  #[test]
  fn the_write_time_moment_is_clamped_and_agrees_with_the_read_time_formula(
    stamp in 0u64..1 << 45, fresh_for in 0u64..1 << 20, now_in in 0.0f64..1.0,
    compute in 0u64..100_000, beta in 0.0f64..10.0, u in 0.0f64..=1.0,
  ) {
    let fresh = stamp + fresh_for;
    let at = xfetch_refresh_at(stamp, fresh, compute, beta, u);
    prop_assert!(stamp <= at && at <= fresh);
    // A reader between the write and freshUntil refreshes from the moment
    // on, exactly when the per-read formula with the same draw would.
    let now = stamp + (fresh_for as f64 * now_in) as u64;
    if now < fresh {
      prop_assert_eq!(now >= at, xfetch_refresh_early(now, fresh, compute, beta, u), "now {} at {}", now, at);
    }
  }

  #[test]
  fn distinct_part_lists_never_encode_alike(
    a in proptest::collection::vec(key_text(), 1..5),
    b in proptest::collection::vec(key_text(), 1..5),
  ) {
    let encode = |parts: &[String]| {
      encode_parts(&parts.iter().map(|p| Part::Text(p)).collect::<Vec<_>>()).unwrap()
    };
    let (ea, eb) = (encode(&a), encode(&b));
    prop_assert_eq!(decode_parts(&ea), a.clone());
    prop_assert_eq!(ea == eb, a == b);
  }

  #[test]
  fn numbers_encode_as_javascript_prints_them(n in -1e15f64..1e15, text in key_text()) {
    let n = n.trunc();
    let encoded = encode_parts(&[Part::Text(&text), Part::Number(n)]).unwrap();
    let printed = if n == 0.0 { "0".to_string() } else { format!("{}", n as i64) };
    prop_assert_eq!(decode_parts(&encoded), vec![text, printed]);
  }

  #[test]
  fn arbitrary_keys_never_panic(text in any::<String>(), n in any::<f64>()) {
    let _ = check_string_key(&text);
    match encode_parts(&[Part::Text(&text), Part::Number(n)]) {
      Ok(encoded) => prop_assert!(n.is_finite() && encoded.len() <= MAX_KEY_BYTES),
      Err(e) => prop_assert!(!n.is_finite() || text.len() > MAX_KEY_BYTES / 2, "{}", e),
    }
  }

  #[test]
  fn classification_only_moves_forward_in_time(meta in meta(), t1 in 0..=MAX_NUMBER, dt in 0..=MAX_NUMBER) {
    let t2 = t1.saturating_add(dt);
    prop_assert!(rank(classify(&meta, t1)) <= rank(classify(&meta, t2)));
    prop_assert_eq!(classify(&meta, t1) == Freshness::Fresh, t1 < meta.fresh_until);
  }

  #[test]
  fn xfetch_with_beta_zero_never_refreshes(now in any::<u64>(), fresh in any::<u64>(), compute in any::<u64>(), u in 0.0f64..=1.0) {
    prop_assert!(!xfetch_refresh_early(now, fresh, compute, 0.0, u));
  }

  #[test]
  fn xfetch_is_monotonic_in_time_and_draw(
    now in 0u64..1 << 45, dt in 0u64..1 << 20, fresh in 0u64..1 << 45,
    compute in 0u64..100_000, beta in 0.0f64..10.0, u in 0.0f64..=1.0, du in 0.0f64..=1.0,
  ) {
    if xfetch_refresh_early(now, fresh, compute, beta, u) {
      // Later, and with a smaller draw (a larger head start), it still refreshes.
      prop_assert!(xfetch_refresh_early(now + dt, fresh, compute, beta, u));
      prop_assert!(xfetch_refresh_early(now, fresh, compute, beta, u * du));
    }
    // u = 1 is no head start: before freshUntil it never refreshes.
    if now < fresh {
      prop_assert!(!xfetch_refresh_early(now, fresh, compute, beta, 1.0));
    }
  }

  #[test]
  fn jitter_stays_within_its_band(ttl in 1u64..1 << 40, jitter in 0.0f64..1.0, u in 0.0f64..=1.0, now in 0u64..1 << 42, factor in 1u64..20) {
    let j = jittered(ttl, jitter, u);
    let (lo, hi) = (ttl as f64 * (1.0 - jitter), ttl as f64 * (1.0 + jitter));
    prop_assert!(j >= 1 && j as f64 >= lo.floor() && j as f64 <= hi.ceil(), "{} not in [{}, {}]", j, lo, hi);
    let (fresh, hard) = deadlines(now, ttl, ttl * factor, jitter, u);
    prop_assert!(now < fresh && fresh <= hard);
  }

  /// The breaker against a model: closed until `threshold` failures in a
  /// row; open for `cooldown` after; then exactly one probe, whose outcome
  /// closes or reopens it.
  #[test]
  fn the_breaker_follows_its_model(
    threshold in 1u32..4,
    cooldown in 0u64..1_000,
    ops in proptest::collection::vec((0u8..3, 0u64..700), 1..60),
  ) {
    let mut breaker = Breaker::new(threshold, cooldown);
    let mut now = 0u64;
    let mut failures = 0u32;
    let mut open_until: Option<u64> = None;
    let mut probe_out = false;
    for (op, dt) in ops {
      now += dt;
      match op {
        0 => {
          let allowed = breaker.allow(now);
          let expected = match open_until {
            None => true,
            Some(until) => !probe_out && now >= until,
          };
          prop_assert_eq!(allowed, expected, "allow at {} in {:?}", now, breaker.state);
          if allowed && open_until.is_some() {
            probe_out = true;
          }
        }
        1 => {
          breaker.success();
          failures = 0;
          open_until = None;
          probe_out = false;
        }
        _ => {
          let opened = breaker.failure(now);
          let expected = match open_until {
            Some(_) if !probe_out => false,
            Some(_) => true,
            None => failures + 1 >= threshold,
          };
          prop_assert_eq!(opened, expected);
          if opened {
            open_until = Some(now + cooldown);
            probe_out = false;
            failures = 0;
          } else if open_until.is_none() {
            failures += 1;
          }
        }
      }
      prop_assert_eq!(breaker.is_open(), open_until.is_some());
      if let State::Open { until } = breaker.state {
        prop_assert_eq!(Some(until), open_until);
      }
    }
  }
}
