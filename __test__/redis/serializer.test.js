'use strict'
// The `serializer` option (issue 27): an application's serializer (msgpackr,
// a string-based one) stores its bytes in an hc4 entry under its name; a
// value of another serializer is a miss, never a crash; its errors reject
// with coded errors and store nothing.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Packr } = require('msgpackr')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted } = require('../helpers')
const { names } = require('./fixtures/fleet')

const T = { timeout: 20000 }

const packr = new Packr({ mapsAsObjects: false })
/** msgpackr as it is: `pack` returns a Buffer (a view of a buffer it reuses), `unpack` takes one. */
const msgpackr = { name: 'msgpackr', serialize: (v) => packr.pack(v), deserialize: (b) => packr.unpack(b) }

/** A string serializer of the application's: JSON with Dates kept (superjson's shape). */
const dated = {
  name: 'dated-json@1',
  serialize: (v) => JSON.stringify(v, (k, x) => (typeof x === 'string' && k === 'at' ? `D:${x}` : x)),
  deserialize(text) {
    assert.equal(typeof text, 'string', 'a string serializer gets a string back')
    return JSON.parse(text, (_, x) => (typeof x === 'string' && x.startsWith('D:') ? new Date(x.slice(2)) : x))
  },
}

const RECORD = { at: new Date(1_700_000_000_000), tags: new Map([['a', 1]]), blob: Buffer.from([1, 2, 3]) }

test('msgpackr as the serializer: Dates and Maps come back from the L1, Redis and another instance', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const options = { redis: redis.url, prefix: 'mp:', serializer: msgpackr }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache(options))
  const loader = counted(() => RECORD)
  for (const [where, cache] of [
    ['loaded', a],
    ['L1', a],
    ['another instance', b],
  ]) {
    const got = await cache.getOrLoad('r', loader)
    assert.ok(got.at instanceof Date && got.at.getTime() === RECORD.at.getTime(), `${where}: a Date`)
    assert.ok(got.tags instanceof Map && got.tags.get('a') === 1, `${where}: a Map`)
    assert.ok(Buffer.from(got.blob).equals(RECORD.blob), `${where}: the bytes`)
  }
  assert.equal(loader.calls, 1)
  const stored = await redis.cmd('GETRANGE', names('mp:', 'r').value, 0, 200)
  assert.match(stored, /^hc4 [\d ]+ v\n- - msgpackr b\n/, 'an hc4 entry under its name')
  await a.set('s', { at: RECORD.at })
  const direct = track(t, new Cache({ ...options, l1: false }))
  assert.ok((await direct.get('s')).at instanceof Date, 'set() then get() from Redis')
})

test('a string serializer gets its string back', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const options = { redis: redis.url, prefix: 'str:', serializer: dated }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache({ ...options, l1: false }))
  assert.ok((await a.getOrLoad('k', () => ({ at: '2024-01-01T00:00:00.000Z' }))).at instanceof Date)
  assert.ok((await b.getOrLoad('k', () => 'WRONG')).at instanceof Date, 'read from Redis')
  const stored = await redis.cmd('GET', names('str:', 'k').value)
  assert.match(stored, /\n- - dated-json@1 s\n\{"at":"D:2024-01-01T00:00:00.000Z"\}$/)
})

test('a value written with another serializer is a miss, loaded again, never decoded', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const json = track(t, new Cache({ redis: redis.url, prefix: 'mix:' }))
  const packed = track(t, new Cache({ redis: redis.url, prefix: 'mix:', serializer: msgpackr, l1: false }))
  // Its bytes start with its own mark: anything else reaching it would be another serializer's.
  const other = track(
    t,
    new Cache({
      redis: redis.url,
      prefix: 'mix:',
      serializer: {
        name: 'other',
        serialize: (v) => `O:${JSON.stringify(v)}`,
        deserialize(text) {
          assert.ok(text.startsWith('O:'), `never given another serializer's bytes: ${text}`)
          return JSON.parse(text.slice(2))
        },
      },
    }),
  )
  assert.deepEqual(await json.getOrLoad('k', () => ({ by: 'json' })), { by: 'json' })
  const loader = counted(() => ({ by: 'msgpackr' }))
  const status = {}
  assert.deepEqual(await packed.getOrLoad('k', loader, { status }), { by: 'msgpackr' })
  assert.equal(loader.calls, 1, "the json value is not msgpackr's: loaded")
  assert.equal(status.outcome, 'miss')
  assert.equal(await other.get('k'), undefined, "get() of another serializer's value finds nothing")
  assert.deepEqual(await other.getOrLoad('k', () => ({ by: 'other' })), { by: 'other' })
  assert.equal(await redis.cmd('GETRANGE', names('mix:', 'k').value, 0, 2), 'hc4')
  assert.equal(json.stats().redisErrors + packed.stats().redisErrors + other.stats().redisErrors, 0)
})

test('errors of serialize and deserialize reject with coded errors, and nothing is stored', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const url = redis.url
  const failing = (name, fault) => ({
    name,
    serialize: (v) => fault.serialize(v),
    deserialize: (b) => fault.deserialize(b),
  })
  const throwing = track(
    t,
    new Cache({
      redis: url,
      prefix: 'f1:',
      serializer: failing('t', {
        serialize() {
          throw new Error('cannot pack')
        },
        deserialize: (b) => b,
      }),
    }),
  )
  await assert.rejects(
    throwing.getOrLoad('k', () => 1),
    { code: 'ERR_HERDCACHE_SERIALIZE', message: /cannot pack/ },
  )
  await assert.rejects(throwing.set('k', 1), { code: 'ERR_HERDCACHE_SERIALIZE' })
  const wrongType = track(
    t,
    new Cache({
      redis: url,
      prefix: 'f2:',
      serializer: failing('n', {
        serialize: () => 42,
        deserialize: (b) => b,
      }),
    }),
  )
  await assert.rejects(
    wrongType.getOrLoad('k', () => 1),
    { code: 'ERR_HERDCACHE_SERIALIZE', name: 'TypeError' },
  )
  const unreadable = track(
    t,
    new Cache({
      redis: url,
      prefix: 'f3:',
      serializer: failing('u', {
        serialize: (v) => JSON.stringify(v),
        deserialize() {
          throw new Error('cannot unpack')
        },
      }),
    }),
  )
  await assert.rejects(
    unreadable.getOrLoad('k', () => 1),
    { code: 'ERR_HERDCACHE_DESERIALIZE', message: /cannot unpack/ },
  )
  for (const prefix of ['f1:', 'f2:', 'f3:']) {
    assert.equal(await redis.cmd('EXISTS', names(prefix, 'k').value), 0, `${prefix} nothing stored in Redis`)
  }
  const loader = counted(() => 2)
  await assert.rejects(throwing.getOrLoad('k', loader), { code: 'ERR_HERDCACHE_SERIALIZE' })
  assert.equal(loader.calls, 1, 'nothing stored in memory either: the next call loads')
})

test("another instance's value its deserialize cannot read rejects with ERR_HERDCACHE_DESERIALIZE", T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const options = { redis: redis.url, prefix: 'rd:' }
  const writer = track(t, new Cache({ ...options, serializer: msgpackr }))
  const broken = {
    ...msgpackr,
    deserialize: () => {
      throw new RangeError('version 2 data')
    },
  }
  const reader = track(t, new Cache({ ...options, serializer: broken, l1: false }))
  await writer.set('k', { v: 1 })
  const loader = counted(() => ({ v: 2 }))
  await assert.rejects(reader.getOrLoad('k', loader), { code: 'ERR_HERDCACHE_DESERIALIZE', message: /version 2 data/ })
  assert.equal(loader.calls, 0, "the reader's loader did not run")
  await assert.rejects(reader.get('k'), { code: 'ERR_HERDCACHE_DESERIALIZE' })
  // The cache still works: another key loads.
  assert.equal(await track(t, new Cache({ ...options, serializer: msgpackr })).getOrLoad('other', () => 3), 3)
})

test('the serializer option is checked at construction', () => {
  const fns = { serialize: JSON.stringify, deserialize: JSON.parse }
  const bad = [
    ['msgpack', /must be a string \('json'\) or an object/],
    [42, /must be a string \('json'\) or an object/],
    [null, /must be a string \('json'\) or an object/],
    [{ ...fns }, /its name is undefined/],
    [{ ...fns, name: 'json' }, /the name 'json' is the built-in/],
    [{ ...fns, name: 'two words' }, /letters, digits/],
    [{ ...fns, name: '' }, /letters, digits/],
    [{ ...fns, name: 'x'.repeat(65) }, /1 to 64/],
    [{ name: 'x', serialize: JSON.stringify }, /its deserialize is undefined/],
  ]
  for (const [serializer, message] of bad) {
    assert.throws(
      () => new Cache({ serializer }),
      { code: 'ERR_HERDCACHE_INVALID_OPTION', message },
      String(serializer),
    )
  }
  const cache = new Cache({ serializer: { ...fns, name: 'json-v2' } })
  cache.close()
  new Cache({ serializer: 'json' }).close()
})
