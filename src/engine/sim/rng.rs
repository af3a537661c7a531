//! The simulator's one source of randomness: SplitMix64 from the seed, so
//! a seed replays every choice exactly.

pub struct Rng(u64);

impl Rng {
  pub fn new(seed: u64) -> Rng {
    Rng(seed)
  }

  pub fn next(&mut self) -> u64 {
    self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = self.0;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
  }

  /// Uniform in `0..n` (`n > 0`).
  pub fn below(&mut self, n: u64) -> u64 {
    self.next() % n
  }

  /// Uniform in `low..=high`.
  pub fn between(&mut self, low: u64, high: u64) -> u64 {
    low + self.below(high - low + 1)
  }

  /// True `percent` times in 100.
  pub fn percent(&mut self, percent: u64) -> bool {
    self.below(100) < percent
  }
}
