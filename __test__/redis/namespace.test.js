'use strict'
// Namespaces with Redis: a view's clear() removes its keys from Redis (SCAN + UNLINK, past one SCAN batch) and from
// every instance's L1 (another Cache on the same Redis, and another process), and no other key; made while Redis
// does not answer it is kept and delivered once it is back (sparing values written after it), and close() reports
// it when it could not be.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { startCluster } = require('../redis-cluster')
const { Cache } = require('../..')
const { track, within } = require('../helpers')
const { waitFor, parseEnvelope, names, loaderLog, spawnChild } = require('./fixtures/fleet')

const T = { timeout: 20000 }
const SEEN_WITHIN = 2000
/** Short bounds: the breaker opens after one 200 ms timeout and Redis is probed again every 300 ms. */
const OUTAGE = { redisTimeout: 200, circuitBreakerDuration: 300 }

/** `cache`'s answer for `key` and where it came from. */
async function answer(cache, key, loaded) {
  const status = {}
  const value = await cache.getOrLoad(key, () => loaded, { status })
  return { value, source: status.source }
}

test(
  "a view's clear() on one cache empties its namespace in Redis and in the other cache's and process's L1",
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'nsr:'
    const options = { redis: redis.url, prefix, ttl: 60000 }
    const a = track(t, new Cache(options))
    const b = track(t, new Cache(options))
    const child = await spawnChild(t, { options, log: loaderLog(t).file })
    const users = a.namespace('users')
    // More keys than one SCAN batch (500), a nested namespace's, and keys outside it.
    await Promise.all(Array.from({ length: 700 }, (_, i) => users.set(`k${i}`, i)))
    await users.namespace('eu').set('1', 'eu')
    for (const key of ['usersX', 'feed:1']) await a.set(key, key)
    await a.set(['users:y'], 'one part')
    // B and the child hold copies in their L1.
    for (const key of ['users:k1', 'users:eu:1', 'feed:1']) {
      await waitFor(async () => (await answer(b, key, 'WRONG')).source === 'memory', `B holding ${key}`, SEEN_WITHIN)
    }
    const [held] = (await child.call('burst', { key: 'users:k2', n: 1, loader: { value: 'WRONG' } })).perInstance
    assert.deepEqual(Object.keys(held.values), ['2'], 'the child read it from Redis')

    await users.clear()
    const left = await redis.cmd('KEYS', `{${prefix}*`)
    assert.deepEqual(
      left.sort(),
      [`{${prefix}feed:1}`, `{${prefix}usersX}`, `{${prefix}users\\:y}`],
      'Redis keeps only the keys outside the namespace',
    )
    await waitFor(
      async () => (await answer(b, 'users:k1', 'new')).value === 'new',
      "B's L1 dropping the namespace's keys",
      SEEN_WITHIN,
    )
    assert.deepEqual(await answer(b, 'users:eu:1', 'new eu'), { value: 'new eu', source: 'load' })
    assert.deepEqual(await answer(b, 'feed:1', 'WRONG'), { value: 'feed:1', source: 'memory' }, 'B keeps the others')
    await waitFor(
      async () => {
        const [after] = (await child.call('burst', { key: 'users:k2', n: 1, loader: { value: 'reloaded' } }))
          .perInstance
        return Object.keys(after.values).map((json) => JSON.parse(json).v)[0] === 'reloaded'
      },
      "the child's L1 dropping them",
      SEEN_WITHIN,
    )
    // And a namespace clear from the other process reaches this one.
    await b.set('users:z', 'z')
    await waitFor(
      async () => (await answer(a, 'users:z', 'WRONG')).source === 'memory',
      'A holding users:z',
      SEEN_WITHIN,
    )
    await child.call('clearNamespace', { names: ['users'] })
    await waitFor(
      async () => (await answer(a, 'users:z', 'gone')).value === 'gone',
      "A seeing the child's clear",
      SEEN_WITHIN,
    )
    assert.equal(await a.get('usersX'), 'usersX')
    await child.close()
  },
)

test(
  'a namespace clear made while Redis is paused is delivered once it is back, sparing newer values',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'nsrec:'
    const options = { redis: redis.url, prefix, ttl: 60000, ...OUTAGE }
    const a = track(t, new Cache(options))
    const b = track(t, new Cache(options))
    const users = a.namespace('users')
    await users.set('old', 1)
    await a.set('feed:1', 1)
    redis.pause()
    try {
      await within(users.clear(), 2000, 'clear while paused')
      assert.equal(await users.get('old'), undefined, 'gone from memory at once')
      assert.equal(a.stats().recoveryPending, 1, 'the clear is kept')
    } finally {
      redis.resume()
    }
    // B writes a key of the namespace after A's clear, before A's replay: the replay spares it.
    await b.set('users:new', 'after')
    await waitFor(() => a.stats().recoveryPending === 0, "A's replay", 3000)
    assert.equal(a.stats().recovered, 1)
    assert.equal(await redis.cmd('GET', names(prefix, 'users:old').value), null)
    assert.equal(parseEnvelope(await redis.cmd('GET', names(prefix, 'users:new').value))?.value, 'after')
    assert.equal(parseEnvelope(await redis.cmd('GET', names(prefix, 'feed:1').value))?.value, 1)
  },
)

test('close() with Redis down reports an undelivered namespace clear by its namespace', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const reported = []
  const options = { redis: redis.url, prefix: 'nsclose:', ...OUTAGE }
  const a = track(t, new Cache({ ...options, onError: (error) => reported.push(error) }))
  await a.set('warm', 1)
  redis.pause()
  t.after(() => redis.resume())
  await within(a.set('users:k', 1), 2000, 'set while paused')
  await within(a.namespace('users').namespace('e:u').clear(), 2000, 'a nested clear while paused')
  await within(a.namespace('users').clear(), 2000, 'clear while paused')
  await within(a.set('feed:k', 1), 2000, 'set while paused')
  assert.equal(a.stats().recoveryPending, 2, "users' clear superseded what was queued under it")
  await within(a.close(), 5000, 'close() with Redis down')
  const error = reported.find((e) => e.code === 'ERR_HERDCACHE_UNDELIVERED')
  assert.ok(error, 'close() reported what it gave up')
  assert.deepEqual(error.operations, [
    { op: 'clear', namespace: 'users' },
    { op: 'set', key: 'feed:k' },
  ])
  assert.deepEqual(error.keys, ['feed:k'])
  assert.match(error.message, /Namespaces cleared: users/)
  assert.equal(a.stats().recoveryDropped, 2)
})

test(
  "on a Redis Cluster a view's clear() removes its keys from every primary and every instance's L1",
  T,
  async (t) => {
    const cluster = await startCluster(t)
    if (!cluster) return
    const options = { redis: { cluster: cluster.urls }, prefix: 'nsc:', ttl: 60000 }
    const a = track(t, new Cache(options))
    const b = track(t, new Cache(options))
    await Promise.all([a.ready(), b.ready()])
    await waitFor(() => a.stats().redisSubscribed + b.stats().redisSubscribed === 2, 'the subscriptions', 5000)
    const users = a.namespace('users')
    const keys = Array.from({ length: 60 }, (_, i) => `k${i}`) // spread over the slots of all three primaries
    const owners = new Set(
      await Promise.all(keys.map(async (k) => cluster.ownerOf(await cluster.slotOf(`{nsc:users:${k}}`)))),
    )
    assert.equal(owners.size, 3, 'the keys live on every primary')
    await Promise.all(keys.map((k) => users.set(k, k)))
    await a.set('feed:1', 'kept')
    await waitFor(
      async () => (await answer(b, 'users:k0', 'WRONG')).source === 'memory',
      'B holding users:k0',
      SEEN_WITHIN,
    )
    await users.clear()
    const fresh = track(t, new Cache({ ...options, l1: false }))
    const read = await Promise.all(keys.map((k) => fresh.get(`users:${k}`)))
    assert.deepEqual(
      read.filter((v) => v !== undefined),
      [],
      'no key of the namespace is left on any primary',
    )
    assert.equal(await fresh.get('feed:1'), 'kept')
    await waitFor(async () => (await answer(b, 'users:k0', 'new')).value === 'new', "B's L1 dropping it", SEEN_WITHIN)
  },
)
