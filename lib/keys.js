'use strict'

// The key rules, JavaScript's side of them: src/core/key.rs (what a key is,
// how an array key is encoded, how long it may be) and src/binding/key.rs
// (how a key is read: a lone surrogate refused). The addon checks every key
// it is given; these are for what JavaScript decides before a key reaches
// it (getOrLoadMany's keys, a namespace's prefix, herdcache/nest's string
// keys). __test__/keys.test.js feeds one table of keys to both sides and
// fails when they disagree on one.

const { typeName } = require('./errors')
const { LIMITS } = require('./names')

/** The longest encoded key, in UTF-8 bytes (src/core/key.rs `MAX_KEY_BYTES`). */
const MAX_KEY_BYTES = LIMITS.maxKeyBytes

/**
 * At least the most UTF-8 bytes a number part encodes to (`numberBytes`):
 * `-5e-324` is `-0.`, 323 zeros and `5` (327, as long as any), and
 * `-Number.MAX_VALUE` 310. With a margin: it only bounds the count that
 * decides whether the exact one is taken.
 */
const MAX_NUMBER_BYTES = 330

/** What an array key's part escapes: `:` and `\`. */
const SPECIAL = /[\\:]/g

/**
 * One text per key, for finding a key among others: a string key is
 * itself, an array key its JSON (prefixed, so a string that reads as JSON
 * stays apart).
 */
function keyId(key) {
  return typeof key === 'string' ? key : `\u0000${JSON.stringify(key)}`
}

/**
 * A part as src/core/key.rs escapes it: `:` and `\` get a backslash, so a
 * name with a colon stays one part (`'a:b'` is the parent's `'a\:b:…'`).
 */
function escapePart(part) {
  return part.includes(':') || part.includes('\\') ? part.replace(SPECIAL, '\\$&') : part
}

/** What makes `key` no key (the rules of src/core/key.rs, its length too), or undefined. */
function keyProblem(key) {
  if (typeof key === 'string') {
    if (key === '') return 'an empty string'
    if (!key.isWellFormed()) return 'a string holding a lone surrogate (str.toWellFormed() mends it)'
    return textTooLong(key) ? tooLong(Buffer.byteLength(key)) : undefined
  }
  if (!Array.isArray(key)) return typeName(key)
  if (key.length === 0) return 'an empty array'
  // What the encoded key's length is at most: a UTF-16 unit is 1 to 3 UTF-8
  // bytes, and 3 too when escaped (`:` and `\` are one byte, two escaped);
  // the exact count is only taken when this does not decide.
  let bound = key.length - 1
  for (const part of key) {
    if (typeof part === 'string') {
      if (!part.isWellFormed()) return 'an array holding a lone surrogate'
      bound += part.length * 3
    } else if (typeof part !== 'number' || !Number.isFinite(part)) {
      return `an array holding ${typeof part === 'number' ? part : typeName(part)}`
    } else bound += MAX_NUMBER_BYTES
  }
  if (bound <= MAX_KEY_BYTES) return undefined
  const bytes = encodedBytes(key)
  return bytes > MAX_KEY_BYTES ? tooLong(bytes) : undefined
}

function tooLong(bytes) {
  return `${bytes} bytes long (its encoded UTF-8), over the ${MAX_KEY_BYTES} a key may be (hash large inputs first)`
}

/** Whether a well-formed string is over MAX_KEY_BYTES of UTF-8: its length alone decides most. */
function textTooLong(text) {
  if (text.length * 3 <= MAX_KEY_BYTES) return false
  return text.length > MAX_KEY_BYTES || Buffer.byteLength(text) > MAX_KEY_BYTES
}

/** The UTF-8 length of an array key (of well-formed strings and finite numbers) as src/core/key.rs encodes it. */
function encodedBytes(parts) {
  let bytes = parts.length - 1 // the `:` between parts
  for (const part of parts) {
    bytes += typeof part === 'string' ? Buffer.byteLength(part) + (part.match(SPECIAL)?.length ?? 0) : numberBytes(part)
  }
  return bytes
}

/**
 * The length of a finite number as src/core/key.rs `push_number` writes it:
 * an integer under 1e21 as `String(n)` does (`-0` as `0`); any other number
 * as Rust's `{}` does, its shortest round-trip digits (those of
 * `toExponential()`) without an exponent: `1e21` is 22 digits, `1e-7` is
 * `0.0000001`.
 */
function numberBytes(n) {
  if (Number.isInteger(n) && Math.abs(n) < 1e21) return String(n).length
  const [mantissa, exponent] = n.toExponential().split('e')
  const digits = mantissa.length - (n < 0 ? 1 : 0) - (mantissa.includes('.') ? 1 : 0)
  // Where the decimal point goes: after `point` digits (none or fewer: `0.` and zeros first).
  const point = Number(exponent) + 1
  const unsigned = point <= 0 ? 2 - point + digits : point < digits ? digits + 1 : point
  return (n < 0 ? 1 : 0) + unsigned
}

module.exports = { keyId, keyProblem, escapePart, MAX_KEY_BYTES }
