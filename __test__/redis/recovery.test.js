'use strict'
// Auto-recovery: a set or delete made while Redis does not answer (paused with SIGSTOP until the breaker
// opens) is kept, delivered once Redis is back (reconciled by write stamp, so a newer value another
// instance wrote meanwhile stays) and published to the other process; close() reports what it could not
// deliver. Every wait is bounded; the server is our own, on 127.0.0.1.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, within } = require('../helpers')
const { deletedInRedis, sleep, waitFor, parseEnvelope, names, loaderLog, spawnChild } = require('./fixtures/fleet')

const T = { timeout: 20000 }
/** Short bounds: the breaker opens after one 200 ms timeout and Redis is probed again every 300 ms. */
const OUTAGE = { redisTimeout: 200, circuitBreakerDuration: 300 }
/** How long after Redis resumes the calls must have landed (a few probes). */
const DELIVERED_WITHIN = 3000

test(
  'a delete and a set made while Redis is paused reach Redis and the other process once it resumes',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'rec:'
    const options = { redis: redis.url, prefix, ttl: 60000, ...OUTAGE }
    const a = track(t, new Cache(options))
    const b = await spawnChild(t, { options, log: loaderLog(t).file })
    await a.set('k3', 'old')
    const [inB] = (await b.call('burst', { key: 'k3', n: 1, loader: { value: 'WRONG' } })).perInstance
    assert.deepEqual(Object.keys(inB.values), ['"old"'], "B holds A's value")

    redis.pause()
    try {
      assert.equal(await within(a.delete('k3'), 2000, 'delete while paused'), true, 'removed from A’s memory')
      await within(a.set('k4', 'new'), 2000, 'set while paused')
      const kept = a.stats()
      assert.equal(kept.circuitOpen, 1)
      assert.equal(kept.recoveryPending, 2, 'both calls are kept')
      assert.equal(kept.recovered, 0)
    } finally {
      redis.resume()
    }

    await waitFor(
      async () => {
        const [k3, k4] = await Promise.all([
          redis.cmd('GET', names(prefix, 'k3').value),
          redis.cmd('GET', names(prefix, 'k4').value),
        ])
        return deletedInRedis(k3) && parseEnvelope(k4)?.value === 'new'
      },
      'the delete and the set landing in Redis',
      DELIVERED_WITHIN,
    )
    await waitFor(
      async () => (await b.call('get', { key: 'k3' })) === null && (await b.call('get', { key: 'k4' })) === 'new',
      'the other process seeing both',
      DELIVERED_WITHIN,
    )
    // B's L1 dropped the old value: a load there runs its loader instead of serving it.
    const [after] = (await b.call('burst', { key: 'k3', n: 1, loader: { value: 'reloaded' } })).perInstance
    assert.deepEqual(
      Object.keys(after.values).map((json) => JSON.parse(json).v),
      ['reloaded'],
    )
    assert.equal((await a.get('k3'))?.v, 'reloaded', 'A reads the new value, not the old one')
    const s = a.stats()
    assert.deepEqual([s.recoveryPending, s.recovered, s.recoveryDropped], [0, 2, 0])
    assert.match(a.metrics(), /^herdcache_recovered_total 2$/m)
    await b.close()
  },
)

test('a replay does not overwrite a newer value another process set meanwhile', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'rec2:'
  const options = { redis: redis.url, prefix, ttl: 60000, ...OUTAGE }
  const a = track(t, new Cache(options))
  const b = await spawnChild(t, { options, log: loaderLog(t).file })
  await a.set('k', 'first')

  redis.pause()
  try {
    await within(a.set('k', 'from A'), 2000, 'set while paused')
    assert.equal(await within(a.delete('d'), 2000, 'delete while paused'), false)
    assert.equal(a.stats().recoveryPending, 2)
  } finally {
    redis.resume()
  }
  // B writes both keys after A's calls (a tick of the coarse clock later: a tie goes to the delete),
  // before A's replay (A's breaker still skips Redis).
  await sleep(20)
  await b.call('set', { key: 'k', value: 'from B' })
  await b.call('set', { key: 'd', value: 'kept' })
  assert.equal(a.stats().recoveryPending, 2, "B's writes came before A's replay")

  await waitFor(() => a.stats().recoveryPending === 0, "A's replay", DELIVERED_WITHIN)
  assert.equal(a.stats().recovered, 2, 'both delivered, reconciled by stamp')
  assert.equal(parseEnvelope(await redis.cmd('GET', names(prefix, 'k').value))?.value, 'from B')
  assert.equal(parseEnvelope(await redis.cmd('GET', names(prefix, 'd').value))?.value, 'kept')
  await waitFor(async () => (await a.get('k')) === 'from B', "A serving B's newer value", DELIVERED_WITHIN)
  assert.equal(await b.call('get', { key: 'k' }), 'from B')
  await b.close()
})

test('close() with Redis still down reports what it could not deliver, and resolves', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const reported = []
  const options = { redis: redis.url, prefix: 'rec3:', ...OUTAGE }
  const a = track(t, new Cache({ ...options, onError: (error, info) => reported.push({ error, info }) }))
  const quiet = track(t, new Cache(options))
  await a.set('warm', 1)
  await quiet.set('warm', 1)

  redis.pause()
  t.after(() => redis.resume())
  await within(a.delete('x'), 2000, 'delete while paused')
  await within(a.set('y', { n: 1 }), 2000, 'set while paused')
  await within(a.set('x', 2), 2000, 'a later set of x replaces its delete')
  await within(quiet.delete('z'), 2000, 'delete while paused')
  assert.deepEqual([a.stats().recoveryPending, a.stats().recoveryDropped], [2, 0])

  await within(a.close(), 5000, 'close() with Redis down')
  // The outage itself was reported once, when the breaker opened.
  assert.deepEqual(
    reported.map((r) => r.error.code),
    ['ERR_HERDCACHE_REDIS_TIMEOUT', 'ERR_HERDCACHE_UNDELIVERED'],
  )
  const [, { error, info }] = reported
  assert.equal(error.code, 'ERR_HERDCACHE_UNDELIVERED')
  assert.deepEqual(error.operations, [
    { op: 'set', key: 'y' },
    { op: 'set', key: 'x' },
  ])
  assert.deepEqual(error.keys, ['y', 'x'])
  assert.match(error.message, /could not reach Redis/)
  assert.equal(error.cause.code, 'ERR_HERDCACHE_REDIS_TIMEOUT', 'it names the last Redis error')
  assert.deepEqual(info, { key: undefined, background: true })

  // Without onError the report is a process warning: never silent.
  const warned = new Promise((resolve) => {
    const onWarning = (w) => {
      if (w.code !== 'ERR_HERDCACHE_UNDELIVERED') return
      process.off('warning', onWarning)
      resolve(w)
    }
    process.on('warning', onWarning)
  })
  await within(quiet.close(), 5000, 'close() with Redis down')
  const warning = await within(warned, 1000, 'the warning')
  assert.equal(warning.code, 'ERR_HERDCACHE_UNDELIVERED')
  assert.deepEqual(warning.keys, ['z'])
})

test('the recovery bounds are options of the Redis store, checked like the others', () => {
  for (const bad of [-1, 1.5, Number.NaN]) {
    assert.throws(() => new Cache({ redis: 'redis://127.0.0.1:1', recoveryMaxEntries: bad }), {
      code: 'ERR_HERDCACHE_INVALID_OPTION',
    })
  }
  assert.throws(() => new Cache({ redis: 'redis://127.0.0.1:1', recoveryMaxAge: -5 }), {
    code: 'ERR_HERDCACHE_INVALID_OPTION',
  })
  assert.throws(() => new Cache({ recoveryMaxAge: 1000 }), { code: 'ERR_HERDCACHE_INVALID_OPTION' })
})
