'use strict'
// The key rules are the addon's (src/core/key.rs, src/binding/key.rs); lib/keys.js is JavaScript's copy, for
// what is decided before a key reaches the addon (getOrLoadMany's keys, a namespace's prefix, herdcache/nest's
// string keys). One table of keys goes through both, and they must agree on every row: a rule changed on one
// side only fails here.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const { codes, LIMITS } = require('../lib/names')
const { keyProblem, escapePart, MAX_KEY_BYTES } = require('../lib/keys')
const { T, track } = require('./helpers')

const MAX = LIMITS.maxKeyBytes
const x = (n) => 'x'.repeat(n)

/** A revoked Proxy over an array: reading it throws. */
function revoked() {
  const { proxy, revoke } = Proxy.revocable([], {})
  revoke()
  return proxy
}

/** `[name, key, isKey]`: what the row is, the key, and whether it is one (both sides must say so). */
const ROWS = [
  ['a short string', 'user:1', true],
  ['a string with `:` and `\\` (a string key is used as it is)', 'a:b\\c:', true],
  ['an empty string', '', false],
  ['a lone high surrogate', '\uD800', false],
  ['a lone low surrogate inside text', 'a\uDC00b', false],
  ['a surrogate pair', 'emoji 😀', true],
  ['an array of strings and finite numbers', ['user', 42, -0, 1.5, -7, 2 ** 53], true],
  ['an array whose parts hold `:` and `\\`', ['a:b', 'c\\', ':\\:'], true],
  ['an array of one empty string', [''], true],
  ['an array of empty strings', ['', ''], true],
  ['an empty array', [], false],
  ['an array holding NaN', ['k', Number.NaN], false],
  ['an array holding Infinity', ['k', Number.POSITIVE_INFINITY], false],
  ['an array holding -Infinity', [Number.NEGATIVE_INFINITY], false],
  ['an array holding an object', ['k', {}], false],
  ['an array holding null', ['k', null], false],
  ['an array holding undefined', ['k', undefined], false],
  ['an array holding a boolean', ['k', true], false],
  ['an array holding a bigint', ['k', 1n], false],
  ['a nested array', ['k', ['nested']], false],
  ['a sparse array (a hole is undefined)', Object.assign(new Array(2), { 1: 'a' }), false],
  ['an array holding a lone surrogate', ['k', '\uDBFF'], false],
  ['a Proxy over an array', new Proxy(['k', 1], {}), true],
  ['a revoked Proxy', revoked(), false],
  ['a number', 42, false],
  ['null', null, false],
  ['undefined', undefined, false],
  ['a boolean', false, false],
  ['an object', { id: 1 }, false],
  ['a symbol', Symbol('k'), false],
  ['a function', () => 'k', false],
  // The length: UTF-8 bytes of the encoded key, at most maxKeyBytes.
  ['a string of maxKeyBytes ASCII', x(MAX), true],
  ['a string one byte longer', x(MAX + 1), false],
  ['a string of `:` (not escaped: a string key is not encoded)', ':'.repeat(MAX), true],
  ['2-byte characters, maxKeyBytes in all', 'é'.repeat(MAX / 2), true],
  ['2-byte characters, one byte over', `${'é'.repeat(MAX / 2)}x`, false],
  ['3-byte characters under the bound', '€'.repeat(Math.floor(MAX / 3)), true],
  ['4-byte characters, maxKeyBytes in all', '😀'.repeat(MAX / 4), true],
  ['4-byte characters, one byte over', `😀${'😀'.repeat(MAX / 4 - 1)}x`, false],
  ['an array part of maxKeyBytes', [x(MAX)], true],
  ['an array part one byte longer', [x(MAX + 1)], false],
  ['two parts and their `:`, maxKeyBytes in all', [x(MAX - 2), 'y'], true],
  ['two parts and their `:`, one byte over', [x(MAX - 1), 'y'], false],
  ['escaped `:`s, maxKeyBytes in all', [':'.repeat(MAX / 2)], true],
  ['escaped `:`s, one byte over', [`${':'.repeat(MAX / 2)}x`], false],
  ['escaped `\\`s and a part, maxKeyBytes in all', ['\\'.repeat(MAX / 2 - 1), 'y'], true],
  ['escaped `\\`s and a part, over', ['\\'.repeat(MAX / 2), 'y'], false],
  ['2-byte characters in a part, maxKeyBytes in all', ['é'.repeat(MAX / 2 - 1), 'y'], true],
  ['2-byte characters in a part, over', ['é'.repeat(MAX / 2), 'y'], false],
  // A number part is as long as src/core/key.rs writes it: not always as String(n) does.
  ['1e21 (22 digits, not "1e+21"), maxKeyBytes in all', [x(MAX - 23), 1e21], true],
  ['1e21, one byte over', [x(MAX - 22), 1e21], false],
  ['1e-7 ("0.0000001"), maxKeyBytes in all', [x(MAX - 10), 1e-7], true],
  ['1e-7, one byte over', [x(MAX - 9), 1e-7], false],
  ['2 ** 69 (21 digits), maxKeyBytes in all', [x(MAX - 22), 2 ** 69], true],
  ['2 ** 69, one byte over', [x(MAX - 21), 2 ** 69], false],
  ['-5e-324 (327 bytes), maxKeyBytes in all', [x(MAX - 328), -5e-324], true],
  ['-5e-324, one byte over', [x(MAX - 327), -5e-324], false],
  ['0.1 + 0.2 (19 bytes), maxKeyBytes in all', [x(MAX - 20), 0.1 + 0.2], true],
  ['0.1 + 0.2, one byte over', [x(MAX - 19), 0.1 + 0.2], false],
  ['210 of -Number.MAX_VALUE (310 bytes each)', Array(210).fill(-Number.MAX_VALUE), true],
  ['211 of -Number.MAX_VALUE', Array(211).fill(-Number.MAX_VALUE), false],
]

/** Whether the addon takes `key`: its getOrLoad loads it, or rejects with ERR_HERDCACHE_INVALID_KEY. */
async function nativeTakes(cache, key) {
  try {
    assert.equal(await cache.getOrLoad(key, () => 'loaded'), 'loaded')
    return true
  } catch (error) {
    assert.equal(error.code, codes.INVALID_KEY, `the addon refused the key with ${error.code}: ${error.message}`)
    return false
  }
}

/** What lib/keys.js says makes `key` no key (undefined: it is one); a key that cannot be read is none. */
function jsProblem(key) {
  try {
    return keyProblem(key)
  } catch {
    return 'unreadable (getOrLoadMany says so)'
  }
}

test('lib/keys.js takes LIMITS.maxKeyBytes from the addon', () => {
  assert.equal(MAX_KEY_BYTES, MAX)
  assert.equal(MAX, 64 * 1024, 'src/core/key.rs MAX_KEY_BYTES')
})

test('keyProblem and the addon agree on every key of the table', T, async (t) => {
  const cache = track(t, new Cache())
  const disagree = []
  for (const [name, key, isKey] of ROWS) {
    const native = await nativeTakes(cache, key)
    const problem = jsProblem(key)
    const js = problem === undefined
    if (native !== isKey || js !== isKey) disagree.push(`${name}: expected ${isKey}, addon ${native}, keyProblem ${js}`)
    if (!js) assert.equal(typeof problem, 'string', `keyProblem says what makes ${name} no key`)
  }
  assert.deepEqual(disagree, [], `the key rules drifted apart:\n${disagree.join('\n')}`)
})

test(
  'getOrLoadMany refuses a bad key of the table before it loads any, however many keys it is given',
  T,
  async (t) => {
    const cache = track(t, new Cache())
    let calls = 0
    const loader = (keys) => {
      calls++
      return keys.map(() => 'v')
    }
    // 300 keys: more than one native call takes (LIMITS.manyKeys), so lib/keys.js alone decides up front.
    const others = Array.from({ length: 300 }, (_, i) => `k${i}`)
    for (const [name, key, isKey] of ROWS) {
      if (isKey) continue
      for (const keys of [[key], [...others, key]]) {
        await assert.rejects(cache.getOrLoadMany(keys, loader), (error) => {
          assert.equal(error.code, codes.INVALID_KEY, `${name} (${keys.length} keys): ${error.message}`)
          return true
        })
      }
    }
    assert.equal(calls, 0, 'nothing was loaded')
    assert.equal(cache.stats().misses, 0, 'nothing was looked up')
  },
)

test("escapePart escapes an array key's part as the addon encodes it", T, async (t) => {
  const cache = track(t, new Cache())
  const parts = ['a:b', 'c\\', ':\\:', 'plain', '']
  await cache.set(parts, 'v')
  assert.equal(await cache.get(parts.map(escapePart).join(':')), 'v')
  assert.equal(escapePart('plain'), 'plain')
  assert.equal(escapePart('a:b\\c'), 'a\\:b\\\\c')
})
