'use strict'
// Values as applications have them (issue 27): binary values (Buffer,
// Uint8Array, ArrayBuffer, at the top and nested) come back as the same type
// with the same bytes from the L1, from Redis and from another instance, and
// are stored as raw bytes (an hc4 entry, src/core/body.rs).
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted } = require('../helpers')
const { names, assertCorruptMisses } = require('./fixtures/fleet')

const T = { timeout: 20000 }

/** A record with binaries in it, at several depths and of each type. */
function record() {
  return {
    id: 7,
    thumbnail: Buffer.from([0, 1, 2, 0x0a, 0xff]),
    raw: new Uint8Array([9, 8, 7]),
    block: new Uint8Array([5, 6]).buffer,
    nested: { list: [Buffer.from('a'), 'text', { deep: new Uint8Array(0) }] },
    empty: {},
    __proto__: null,
  }
}

/** Asserts `actual` is `expected` with every binary of the same type and bytes. */
function sameValue(actual, expected, where) {
  if (expected instanceof ArrayBuffer) {
    assert.ok(actual instanceof ArrayBuffer, `${where}: an ArrayBuffer`)
    return assert.deepEqual(Buffer.from(actual), Buffer.from(expected), where)
  }
  if (Buffer.isBuffer(expected)) {
    assert.ok(Buffer.isBuffer(actual), `${where}: a Buffer`)
    return assert.ok(actual.equals(expected), where)
  }
  if (expected instanceof Uint8Array) {
    assert.ok(actual instanceof Uint8Array && !Buffer.isBuffer(actual), `${where}: a Uint8Array, not a Buffer`)
    return assert.deepEqual([...actual], [...expected], where)
  }
  if (expected === null || typeof expected !== 'object') return assert.equal(actual, expected, where)
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort(), `${where}: keys`)
  for (const key of Object.keys(expected)) sameValue(actual[key], expected[key], `${where}.${key}`)
}

const VALUES = {
  record: record(),
  'a Buffer': Buffer.from('top level \u00e9'),
  'a Uint8Array': new Uint8Array([1, 2, 3]),
  'an ArrayBuffer': new Uint8Array([4, 5]).buffer,
  'an array of Buffers': [Buffer.from([1]), Buffer.alloc(0)],
}

test('binary values come back as the same type and bytes from the L1, Redis and another instance', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const options = { redis: redis.url, prefix: 'bin:' }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache(options))
  const direct = track(t, new Cache({ ...options, l1: false }))
  for (const [name, value] of Object.entries(VALUES)) {
    const loader = counted(() => value)
    sameValue(await a.getOrLoad(name, loader), value, `${name} (loaded)`)
    sameValue(await a.getOrLoad(name, loader), value, `${name} (L1)`)
    sameValue(await b.getOrLoad(name, loader), value, `${name} (another instance)`)
    sameValue(await direct.getOrLoad(name, loader), value, `${name} (Redis)`)
    sameValue(await direct.get(name), value, `${name} (get, from Redis)`)
    assert.equal(loader.calls, 1, `${name}: loaded once for the fleet`)
    const stored = await redis.cmd('GETRANGE', names('bin:', name).value, 0, 2)
    assert.equal(stored, 'hc4', `${name}: stored as an hc4 entry`)
  }
  await a.set('set', record())
  sameValue(await a.get('set'), record(), 'set() then get() (L1)')
  sameValue(await direct.get('set'), record(), 'set() then get() (Redis)')
  sameValue(await b.getOrLoad('set', () => 'WRONG'), record(), 'set() then getOrLoad elsewhere')
  assert.equal(a.stats().corruptValues + b.stats().corruptValues + direct.stats().corruptValues, 0)
})

test('a plain JSON value is stored as before: an hc2 entry of its JSON text', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const cache = track(t, new Cache({ redis: redis.url, prefix: 'plain:' }))
  const value = { a: [1, {}, { 0: 'x' }], type: 'Buffer', data: [1] }
  assert.deepEqual(await cache.getOrLoad('k', () => value), value)
  const stored = await redis.cmd('GET', names('plain:', 'k').value)
  assert.match(stored, /^hc2 \d+ \d+ \d+ \d+ \d+ v\n/)
  assert.equal(stored.slice(stored.indexOf('\n') + 1), JSON.stringify(value))
})

test('a 1 MB Buffer costs about 1 MB in Redis: raw bytes, no base64 or number arrays', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const cache = track(t, new Cache({ redis: redis.url, prefix: 'mb:' }))
  const big = Buffer.alloc(1 << 20)
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) & 0xff
  const got = await cache.getOrLoad('big', () => ({ image: big, name: 'x.png' }))
  assert.ok(got.image.equals(big))
  const name = names('mb:', 'big').value
  const length = await redis.cmd('STRLEN', name)
  assert.ok(length >= big.length && length < big.length + 512, `STRLEN ${length}: the bytes and a header`)
  // The allocator rounds a string of just over 1 MB up to its 1.25 MB size
  // class; the Buffer's JSON (a number per byte) would be about 3.6 MB.
  const usage = await redis.cmd('MEMORY', 'USAGE', name)
  assert.ok(usage < big.length * 1.3, `MEMORY USAGE ${usage} of a ${big.length}-byte Buffer`)
  assert.ok(JSON.stringify(big).length > big.length * 3)
})

test('an entry of a version this reader does not know is a counted miss, then replaced', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'unknown:'
  const writer = track(t, new Cache({ redis: redis.url, prefix }))
  const reader = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
  await writer.getOrLoad('k', () => Buffer.from('bytes'))
  const name = names(prefix, 'k').value
  // What an older reader sees in an hc4 entry: a version it does not know.
  await redis.cmd('SETRANGE', name, 0, 'hc5')
  const loader = counted(() => Buffer.from('reloaded'))
  const status = {}
  assert.ok((await reader.getOrLoad('k', loader, { status })).equals(Buffer.from('reloaded')))
  assert.equal(loader.calls, 1, 'a miss: the loader ran')
  assert.equal(status.outcome, 'miss')
  assert.equal(reader.stats().corruptValues, 1, 'counted in corruptValues')
  assert.equal(await redis.cmd('GETRANGE', name, 0, 2), 'hc4', 'replaced by this version')
})

test('an hc4 entry whose bytes do not fit its layout is a counted corrupt miss, not a crash', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'badlayout:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
  const later = Date.now() + 600_000
  const header = `hc4 ${later} ${later} 1 ${Date.now()} ${later} v\n`
  const cases = {
    'too few bytes': '- - json [4,["Buffer",9]]\nnullab',
    'too many bytes': '- - json [4,["Buffer",1]]\nnullab',
    'a layout that is not JSON': '- - json [4,\nnull',
    'an unknown part type': '- - json [4,["Blob",1]]\nnulla',
    'a text that is not JSON': '- - json [4,["Buffer",1]]\nnul!a',
    'an unknown compression': 'br - json [4]\nnull',
    'no format line': '',
  }
  await assertCorruptMisses(redis, cache, prefix, header, cases)
})
