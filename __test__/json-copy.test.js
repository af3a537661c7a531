'use strict'
// lib/json-copy.js: the copy a call returns, made without the JSON text on
// the embedded store, must be exactly `JSON.parse(JSON.stringify(value))`
// (the same keys in the same order, the same prototypes, 0 for -0), or
// NOT_COPIED, when the JSON way must decide. Checked against JSON itself on
// seeded random values, on each rule's edge, and through the Cache.
const test = require('node:test')
const assert = require('node:assert/strict')
const { jsonCopy, NOT_COPIED } = require('../lib/json-copy')
const { mulberry32 } = require('../scripts/prng')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h
const MAX = 8 * 1024 * 1024
const roundTrip = (v) => JSON.parse(JSON.stringify(v))

/** `jsonCopy` agrees with JSON: the same value, prototypes, -0/0 and key order (deepStrictEqual uses Object.is). */
function agrees(value, what) {
  const copy = jsonCopy(value, MAX)
  assert.notEqual(copy, NOT_COPIED, `${what}: copied`)
  const expected = roundTrip(value)
  assert.deepStrictEqual(copy, expected, what)
  assert.equal(JSON.stringify(copy), JSON.stringify(expected), `${what}: key order`)
  return copy
}

/** Random JSON-ish values: what `jsonCopy` takes, and (with `odd`) what it must give up on or leave out. */
function generator(seed, odd) {
  const rnd = mulberry32(seed)
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)]
  const strings = ['', 'a', 'héllo', '\u2028', '"quoted"\\', '\ud800', 'x\udc00y', '😀', '\u0000\u001f', 'line\nbreak']
  const numbers = [0, -0, 1, -1.5, 1e21, 1e-7, 2 ** 53, Number.MAX_VALUE, Number.MIN_VALUE, NaN, Infinity, -Infinity]
  const names = ['a', 'b', '0', '10', '2', 'key with space', 'é', '', 'constructor', 'toString', 'length']
  const oddValues = () =>
    pick([undefined, () => 1, Symbol('s'), new Date(Math.floor(rnd() * 2e12)), new Date(Number.NaN)])
  function value(depth) {
    const r = rnd()
    if (depth > 4 || r < 0.35) {
      const p = rnd()
      if (odd && p < 0.1) return oddValues()
      if (p < 0.45) return pick(strings) + pick(strings)
      if (p < 0.8) return pick(numbers)
      if (p < 0.9) return rnd() < 0.5
      return null
    }
    if (r < 0.65) {
      const out = []
      const n = Math.floor(rnd() * 5)
      for (let i = 0; i < n; i++) out.push(value(depth + 1))
      if (odd && rnd() < 0.2) out.length += 2 // holes
      return out
    }
    const out = rnd() < 0.1 ? Object.create(null) : {}
    const n = Math.floor(rnd() * 6)
    for (let i = 0; i < n; i++) out[pick(names)] = value(depth + 1)
    return out
  }
  return () => {
    const v = value(0)
    return typeof v === 'object' && v !== null ? v : { v }
  }
}

test('seeded random plain values: every one copied, equal to the JSON round trip', T, () => {
  const next = generator(0x15, false)
  for (let i = 0; i < 3000; i++) agrees(next(), `value ${i}`)
})

test(
  'seeded random values with undefined, functions, symbols, Dates and holes: copied as JSON writes them, or left to JSON',
  T,
  () => {
    const next = generator(0x28, true)
    let copied = 0
    for (let i = 0; i < 3000; i++) {
      const value = next()
      if (jsonCopy(value, MAX) === NOT_COPIED) continue
      agrees(value, `value ${i}`)
      copied++
    }
    // Only an object member that JSON leaves out (undefined, a function, a symbol) is left to JSON.
    assert.ok(copied > 1500, `${copied} of 3000 copied`)
  },
)

test('what JSON writes as null or 0', T, () => {
  const list = [undefined, () => 1, Symbol('y'), 0, -0, NaN, 1]
  delete list[3] // a hole
  const copy = agrees({ n: -0, nan: NaN, inf: -Infinity, list }, 'null')
  assert.ok(Object.is(copy.n, 0), '-0 is 0')
  assert.deepStrictEqual(copy.list, [null, null, null, null, 0, null, 1])
  assert.ok(Object.is(copy.list[4], 0), '-0 in an array is 0')
  // A member JSON leaves out is left to JSON (spread would keep its key).
  for (const member of [undefined, () => 1, Symbol('x')]) assert.equal(jsonCopy({ a: 1, member }, MAX), NOT_COPIED)
  // Integer-like keys first, ascending, then the others in insertion order: as JSON.parse builds them.
  agrees({ b: 1, 2: 'two', a: 2, 1: 'one', '-1': 'minus' }, 'key order')
  agrees(Object.assign(Object.create(null), { x: 1 }), 'a null prototype becomes Object.prototype')
  agrees([new Date(0), new Date(Number.NaN), { at: new Date(1.7e12) }], 'Dates as their toJSON')
})

test('strings are kept as a JSON round trip keeps them, lone surrogates and all, short and long', T, () => {
  const s = '\ud83d\ude00 \ud800 \udfff "\\ \u0000'
  const long = `${s} ${'é'.repeat(20)} \udc00`
  const copy = agrees({ s, long, list: [long, s, { long }] }, 'strings')
  assert.equal(copy.long, long)
  assert.equal(copy.list[2].long, long)
})

test('a value only JSON can judge is not copied', T, () => {
  class Point {
    constructor() {
      this.x = 1
    }
  }
  const cycle = { a: 1 }
  cycle.self = cycle
  let deep = {}
  for (let i = 0; i < 100; i++) deep = { deep }
  const dateWithOwnISO = new Date(0)
  dateWithOwnISO.toISOString = () => 'mine'
  class MyDate extends Date {}
  const protoKey = JSON.parse('{"__proto__": 1}')
  const cases = {
    'a symbol key': { [Symbol('k')]: 1, a: 1 },
    'a class instance': { p: new Point() },
    'a Map': { m: new Map([[1, 2]]) },
    'a Buffer': { b: Buffer.from('x') },
    'a Uint8Array': [new Uint8Array(2)],
    'a BigInt': { n: 1n },
    'a toJSON of its own': { v: { toJSON: () => 'x' } },
    'a __proto__ key': protoKey,
    'a cycle': cycle,
    'a structure 100 deep': deep,
    'a Date with its own toISOString': { d: dateWithOwnISO },
    'a Date subclass': { d: new MyDate(0) },
    'a boxed string': { s: new String('x') },
  }
  for (const [what, value] of Object.entries(cases)) assert.equal(jsonCopy(value, MAX), NOT_COPIED, what)
  // Still what JSON makes of them where JSON can: the deep one.
  assert.deepStrictEqual(roundTrip(deep), deep)
})

test(
  'with Object.prototype polluted by an enumerable key, nothing is copied (JSON lists no inherited key)',
  T,
  async (t) => {
    const cache = h.track(t, new Cache({ ttl: 60_000 }))
    Object.prototype.polluted = 'inherited'
    try {
      assert.equal(jsonCopy({ a: 1 }, MAX), NOT_COPIED)
      const copy = await cache.getOrLoad('k', () => ({ a: 1 }))
      assert.deepStrictEqual(Object.keys(copy), ['a'])
    } finally {
      delete Object.prototype.polluted
    }
    assert.deepStrictEqual(jsonCopy({ a: 1 }, MAX), { a: 1 })
  },
)

test('a value whose JSON text could pass maxBytes is left to JSON, which measures it', T, () => {
  const value = { text: 'x'.repeat(100) }
  assert.equal(jsonCopy(value, 100), NOT_COPIED, '6 bytes a character could pass 100')
  assert.deepStrictEqual(jsonCopy(value, 1000), value)
  assert.equal(jsonCopy({ list: new Array(1000) }, 1000), NOT_COPIED, 'a sparse array of 1000 holes is 5000 bytes')
})

test('through the cache: the copy, not the loader object, is what every call gets', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 60_000 }))
  const original = { when: new Date(0), list: [1, undefined, -0], n: NaN, text: 'a longer string, copied' }
  const first = await cache.getOrLoad('k', () => original)
  assert.notEqual(first, original)
  assert.deepStrictEqual(first, roundTrip(original))
  original.list.push('later')
  assert.equal(await cache.getOrLoad('k', () => 'WRONG'), first, 'hits share the copy, the loader object is not it')
  assert.deepStrictEqual(first.list, [1, null, 0])
  await cache.set('s', original)
  assert.deepStrictEqual(await cache.getOrLoad('s', () => 'WRONG'), roundTrip(original))
})

test('through the cache: what jsonCopy gives up on is still judged by JSON', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 60_000, maxValueBytes: 100 }))
  const cycle = {}
  cycle.self = cycle
  await assert.rejects(
    cache.getOrLoad('cycle', () => cycle),
    { code: 'ERR_HERDCACHE_UNSERIALIZABLE' },
  )
  // Within 100 bytes of JSON (84), though jsonCopy's bound (6 bytes a character) is not.
  const fits = { text: 'x'.repeat(75) }
  assert.deepStrictEqual(await cache.getOrLoad('fits', () => fits), fits)
  await assert.rejects(
    cache.getOrLoad('big', () => ({ text: 'x'.repeat(200) })),
    {
      code: 'ERR_HERDCACHE_VALUE_TOO_LARGE',
    },
  )
  class Point {
    constructor() {
      this.x = 1
    }
  }
  assert.deepStrictEqual(await cache.getOrLoad('point', () => ({ p: new Point() })), { p: { x: 1 } })
})

test('a cache weighing its values (l1MaxBytes) still makes the text and counts it', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 60_000, l1MaxBytes: 10_000 }))
  const value = { text: 'x'.repeat(100) }
  assert.deepStrictEqual(await cache.getOrLoad('k', () => value), value)
  assert.ok(cache.stats().l1Bytes >= JSON.stringify(value).length, 'weighed by its JSON text')
})
