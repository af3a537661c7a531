'use strict'

// One seeded PRNG for the tests, the benchmarks, the demo and the soak, so a
// seed means the same sequence everywhere (not a test file itself).

/**
 * mulberry32: a small, fast seeded PRNG.
 * @param {number} seed any 32-bit integer
 * @returns {() => number} floats in [0, 1)
 */
function mulberry32(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

module.exports = { mulberry32 }
