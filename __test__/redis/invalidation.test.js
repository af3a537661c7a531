'use strict'
// L1 in front of Redis: delete/set/clear on one instance reach every instance's
// L1 (pub/sub invalidation); l1: false and maxEntries.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted } = require('../helpers')
const {
  deletedInRedis,
  waitFor,
  parseEnvelope,
  names,
  loaderLog,
  spawnChild,
  storedEnvelope,
  heldLoad,
} = require('./fixtures/fleet')

const T = { timeout: 10000 }
const SEEN_WITHIN = 1000

test("delete, set and clear on one instance are seen by another instance's L1 within a short bound", T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'inv:'
  const a = track(t, new Cache({ redis: redis.url, prefix, ttl: 60000 }))
  const b = track(t, new Cache({ redis: redis.url, prefix, ttl: 60000 }))

  assert.equal(await a.getOrLoad('k', () => 'v1'), 'v1')
  let status = {}
  assert.equal(await b.getOrLoad('k', () => 'WRONG', { status }), 'v1')
  assert.equal(b.stats().redisHits, 1, 'B read it from Redis')
  // A's fill notice, published before B's read, may reach B after it and
  // drop B's copy once (one more read from Redis): then the next is an L1 hit.
  await waitFor(
    async () => {
      status = {}
      assert.equal(await b.getOrLoad('k', () => 'WRONG', { status }), 'v1')
      assert.equal(status.outcome, 'hit')
      return b.stats().l1Hits === 1
    },
    "B's read answered from its L1",
    SEEN_WITHIN,
  )
  assert.ok(b.stats().redisHits <= 2, 'at most one more read from Redis')

  // delete on A: B's L1 forgets it (B then loads anew).
  assert.equal(await a.delete('k'), true)
  assert.ok(deletedInRedis(await redis.cmd('GET', names(prefix, 'k').value)), 'deleted in Redis')
  await waitFor(async () => (await b.getOrLoad('k', () => 'v2')) === 'v2', "B seeing A's delete", SEEN_WITHIN)
  await storedEnvelope(redis, names(prefix, 'k').value, (e) => e.value === 'v2')
  // B's L1 holds v2 now.
  status = {}
  assert.equal(await b.getOrLoad('k', () => 'WRONG', { status }), 'v2')
  assert.equal(status.outcome, 'hit')

  // set on A: B's L1 gets the new value.
  await a.set('k', 'v3')
  assert.equal(parseEnvelope(await redis.cmd('GET', names(prefix, 'k').value))?.value, 'v3')
  await waitFor(async () => (await b.getOrLoad('k', () => 'WRONG')) === 'v3', "B seeing A's set", SEEN_WITHIN)
  assert.equal(await b.get('k'), 'v3')

  // clear on A: B's L1 is emptied, and so is Redis for the prefix.
  assert.equal(await a.getOrLoad('other', () => 'o'), 'o')
  assert.equal(await b.getOrLoad('other', () => 'WRONG'), 'o')
  await a.clear()
  await waitFor(
    async () => (await b.get('k')) === undefined && (await b.get('other')) === undefined,
    "B seeing A's clear",
    SEEN_WITHIN,
  )
  assert.equal(await redis.cmd('GET', names(prefix, 'k').value), null)
  assert.equal(await redis.cmd('GET', names(prefix, 'other').value), null)
  const loader = counted(() => 'v4')
  assert.equal(await b.getOrLoad('k', loader), 'v4')
  assert.equal(loader.calls, 1)
})

test('invalidation stays inside its prefix: a delete under another prefix leaves this L1 alone', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const a = track(t, new Cache({ redis: redis.url, prefix: 'p1:' }))
  const other = track(t, new Cache({ redis: redis.url, prefix: 'p2:' }))
  assert.equal(await a.getOrLoad('k', () => 'mine'), 'mine')
  assert.equal(await other.getOrLoad('k', () => 'theirs'), 'theirs')
  await other.delete('k')
  await other.set('k', 'theirs2')
  await new Promise((r) => setTimeout(r, 100))
  const status = {}
  assert.equal(await a.getOrLoad('k', () => 'WRONG', { status }), 'mine')
  assert.equal(status.outcome, 'hit')
  await storedEnvelope(redis, names('p1:', 'k').value, (e) => e.value === 'mine')
})

test('delete in one process is seen by the L1 of another process', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const log = loaderLog(t)
  const options = { redis: redis.url, prefix: 'xinv:', ttl: 60000 }
  const [p, q] = await Promise.all([0, 1].map(() => spawnChild(t, { options, log: log.file })))
  await p.call('burst', { key: 'k', n: 1, loader: { value: 'v1' } })
  const [r] = (await q.call('burst', { key: 'k', n: 2, loader: { value: 'WRONG' } })).perInstance
  assert.deepEqual(
    Object.keys(r.values).map((j) => JSON.parse(j).v),
    ['v1'],
  )
  assert.equal(await p.call('delete', { key: 'k' }), true)
  await waitFor(
    async () => (await q.call('get', { key: 'k' })) == null,
    "the other process's L1 forgetting the key",
    SEEN_WITHIN,
  )
  await p.call('set', { key: 'k', value: 'set-by-p' })
  await waitFor(
    async () => (await q.call('get', { key: 'k' })) === 'set-by-p',
    'the other process seeing the set',
    SEEN_WITHIN,
  )
  assert.equal(log.runs('k').length, 1)
  await Promise.all([p.close(), q.close()])
})

test('l1: false reads Redis on every call; l1 is bounded by maxEntries', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'l1:'
  const noL1 = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
  const loader = counted(() => 'v')
  assert.equal(await noL1.getOrLoad('k', loader), 'v')
  for (let i = 0; i < 3; i++) assert.equal(await noL1.getOrLoad('k', loader), 'v')
  assert.equal(loader.calls, 1)
  assert.equal(noL1.stats().l1Hits, 0)
  assert.equal(noL1.stats().redisHits, 3, 'every read after the load comes from Redis')
  // A raw change in Redis is seen at once without L1.
  const now = Date.now()
  await redis.cmd(
    'SET',
    names(prefix, 'k').value,
    `hc1 ${now + 60000} ${now + 600000} 1 ${now + 1} v\n"raw"`,
    'PX',
    600000,
  )
  assert.equal(await noL1.getOrLoad('k', loader), 'raw')

  const small = track(t, new Cache({ redis: redis.url, prefix, maxEntries: 10 }))
  for (let i = 0; i < 30; i++) assert.equal(await small.getOrLoad(`m${i}`, () => i), i)
  assert.ok(small.stats().size <= 10, `L1 holds ${small.stats().size} entries with maxEntries 10`)
  // Evicted from L1, still in Redis.
  const s = {}
  assert.equal(await small.getOrLoad('m0', () => 'WRONG', { status: s }), 0)
  assert.equal(s.outcome, 'hit')
  assert.ok(small.stats().redisHits >= 1)
})

test("stats() after close() keeps the fleet's counters", T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const a = new Cache({ redis: redis.url, prefix: 'closed-stats:', ttl: 60000 })
  const b = track(t, new Cache({ redis: redis.url, prefix: 'closed-stats:', ttl: 60000 }))
  assert.equal(await a.getOrLoad('k', () => 'v'), 'v')
  assert.equal(await b.getOrLoad('k', () => 'WRONG'), 'v')
  const before = a.stats()
  assert.equal(before.lockAcquired, 1, 'A won the lock')
  await a.close()
  const after = a.stats()
  assert.equal(after.lockAcquired, 1, 'still counted after close()')
  assert.equal(after.loads, before.loads)
  assert.equal(after.circuitOpen, 0)
  assert.equal(b.stats().redisHits, 1)
})

test(
  'a set outlives its hard TTL in Redis until no load begun before it can write: an older fill never lands over it',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'set-guard:'
    // A hard TTL (200 ms) far shorter than a load may run (hardTimeout 3 s).
    const options = { redis: redis.url, prefix, ttl: 100, hardTtl: 200, jitter: 0, hardTimeout: 3000 }
    const a = track(t, new Cache(options))
    const b = track(t, new Cache(options))
    const key = names(prefix, 'k').value
    const { loading: slow, release } = await heldLoad(a, 'k', 'read before the set')
    await b.set('k', 'set')
    // The set's value expires (its hard TTL) before a's older load writes...
    await new Promise((resolve) => setTimeout(resolve, 400))
    release()
    assert.equal(await slow, 'read before the set', "a's callers get their own load")
    // ...and still that load's value does not land: the set's stamp is kept in Redis.
    const stored = parseEnvelope(await redis.cmd('GET', key))
    assert.equal(stored?.value, 'set', `Redis holds the set's (expired) envelope, not the older fill: ${stored?.value}`)
    const pttl = await redis.cmd('PTTL', key)
    assert.ok(pttl > 1000, `kept past its hard TTL while a load begun before it may write (PTTL ${pttl})`)
    // Every reader judges it expired: a new cache loads.
    const c = track(t, new Cache(options))
    assert.equal(await c.getOrLoad('k', () => 'fresh'), 'fresh')
  },
)
