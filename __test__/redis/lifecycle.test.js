'use strict'
// Nothing of a cache outlives it or its flights in Redis: a worker thread
// ended mid-load, or close() while loads run and callers wait on another
// instance's locks, leaves no lock key and no connection behind (within
// redisTimeout), and takes no lock afterwards.
const test = require('node:test')
const assert = require('node:assert/strict')
const path = require('node:path')
const { Worker } = require('node:worker_threads')
const { Cache } = require('../..')
const { startRedis } = require('../redis-server')
const { waitFor, sleep, gatedLoader, rejectsWith, track } = require('../helpers')

const T = { timeout: 20000 }
const ROOT = path.resolve(__dirname, '..', '..')
const REDIS_TIMEOUT = 500
const LOCK_TTL = 1000
const HARD_TIMEOUT = 5000

/** The lock keys of `prefix` in Redis. */
async function locks(redis, prefix) {
  const keys = await redis.cmd('KEYS', `{${prefix}*:lock`)
  return keys.filter((k) => k.startsWith(`{${prefix}`))
}

/** The caches' options: one fleet on `redis` under `prefix`. */
function fleetOptions(redis, prefix) {
  return { redis: redis.url, prefix, lockTtl: LOCK_TTL, hardTimeout: HARD_TIMEOUT, redisTimeout: REDIS_TIMEOUT }
}

/** How many clients Redis has (our own admin connection included). */
async function clients(redis) {
  const list = await redis.cmd('CLIENT', 'LIST')
  return String(list).split('\n').filter(Boolean).length
}

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads')
const { Cache } = require(workerData.root)
const cache = new Cache(workerData.options)
let started = 0
for (let i = 0; i < workerData.keys; i++) {
  // A loader that never settles: the worker ends mid-load.
  cache.getOrLoad(workerData.name + ':' + i, () => {
    if (++started === workerData.keys) parentPort.postMessage('loading')
    return new Promise(() => {})
  }).catch(() => {})
}
`

test('worker threads ended mid-load leave no lock and no connection, and their keys load at once', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'life-workers:'
  const options = fleetOptions(redis, prefix)
  const before = await clients(redis)
  const workers = [0, 1, 2, 3].map(
    (w) => new Worker(WORKER, { eval: true, workerData: { root: ROOT, options, name: `w${w}`, keys: 15 } }),
  )
  t.after(() => Promise.all(workers.map((w) => w.terminate())))
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))))
  await waitFor(async () => (await locks(redis, prefix)).length === 60, '60 locks held by the workers', 5000)
  assert.ok((await clients(redis)) > before, 'the workers opened connections')

  const endedAt = Date.now()
  await Promise.all(workers.map((w) => w.terminate()))
  await waitFor(async () => (await locks(redis, prefix)).length === 0, 'no lock key left', 3 * REDIS_TIMEOUT)
  await waitFor(async () => (await clients(redis)) === before, 'the connections closed', 3 * REDIS_TIMEOUT)
  assert.ok(Date.now() - endedAt < LOCK_TTL + 3 * REDIS_TIMEOUT, 'released at once, not left to expire')
  // Nothing kept extending or re-taking them.
  await sleep(LOCK_TTL + 200)
  assert.deepEqual(await locks(redis, prefix), [], 'still no lock a lease later')

  const main = track(t, new Cache(options))
  const started = Date.now()
  const values = await Promise.all(Array.from({ length: 10 }, (_, i) => main.getOrLoad(`w${i % 4}:${i}`, () => 'main')))
  assert.deepEqual(values, Array(10).fill('main'))
  assert.ok(Date.now() - started < LOCK_TTL, `the keys were free at once (${Date.now() - started} ms)`)
})

test('close() with loads in flight and callers waiting on foreign locks keeps nothing in Redis', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'life-close:'
  const options = fleetOptions(redis, prefix)
  const before = await clients(redis)

  // B holds the locks of k1 and k2 while its loaders wait.
  const b = track(t, new Cache(options))
  const bLoader = gatedLoader()
  const bCalls = ['k1', 'k2'].map((k) => b.getOrLoad(k, bLoader))
  await waitFor(() => bLoader.calls === 2, "B's loaders running")
  await waitFor(async () => (await clients(redis)) > before, "B's connections")
  await sleep(100)
  const withB = await clients(redis)

  // A's callers wait on B's locks, and A's own load of k3 holds its lock.
  const a = new Cache(options)
  const aLoader = gatedLoader()
  const waiting = ['k1', 'k2', 'k1'].map((k) => a.getOrLoad(k, () => 'fromA'))
  const own = a.getOrLoad('k3', aLoader)
  await waitFor(() => aLoader.calls === 1, "A's loader of k3 running")
  await waitFor(async () => a.stats().lockContended >= 2, "A's callers contending for B's locks")
  assert.equal((await locks(redis, prefix)).length, 3)

  const closing = a.close()
  for (const call of [...waiting, own]) await rejectsWith(call, 'ERR_HERDCACHE_CLOSED')
  await closing
  await waitFor(
    async () => (await locks(redis, prefix)).length === 2,
    "A's lock released at close; B's stay",
    3 * REDIS_TIMEOUT,
  )
  // B's loads fail, freeing the locks with no value written: A, closed,
  // must not take them.
  for (const run of bLoader.runs) run.reject(new Error('db down'))
  for (const call of bCalls) await assert.rejects(call, /db down/)
  await sleep(300)
  assert.deepEqual(await locks(redis, prefix), [], 'no lock taken by the closed instance')
  await waitFor(async () => (await clients(redis)) === withB, "A's connections closed", 3 * REDIS_TIMEOUT)
  await sleep(LOCK_TTL)
  assert.deepEqual(await locks(redis, prefix), [], 'nothing taken or extended a lease later')
  await b.close()
  await waitFor(async () => (await clients(redis)) === before, "B's connections closed", 3 * REDIS_TIMEOUT)
})

// A flight's first read has no JS leader yet (src/binding/flight.rs
// `Unled`): close() and hardTimeout must still end it.
test(
  'close() while first reads are queued or out: the callers reject with ERR_HERDCACHE_CLOSED, no loader runs',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'life-first-read:'
    let runs = 0
    const loader = () => ++runs
    // Queued: close() in the tick that started them, before the flush.
    const a = new Cache(fleetOptions(redis, prefix))
    await a.ready()
    const queued = ['q1', 'q2', 'q1'].map((k) => a.getOrLoad(k, loader))
    const closingA = a.close()
    for (const call of queued) await rejectsWith(call, 'ERR_HERDCACHE_CLOSED')
    await closingA

    // Out: the read went to a Redis that does not answer.
    const b = new Cache(fleetOptions(redis, prefix))
    await b.ready()
    redis.pause()
    t.after(() => redis.resume())
    const out = ['o1', 'o2'].map((k) => b.getOrLoad(k, loader))
    await sleep(50)
    const t0 = performance.now()
    const closingB = b.close()
    for (const call of out) await rejectsWith(call, 'ERR_HERDCACHE_CLOSED')
    const waited = performance.now() - t0
    assert.ok(
      waited < REDIS_TIMEOUT,
      `the callers rejected at close (${waited.toFixed(0)} ms), not when the read timed out`,
    )
    redis.resume()
    await closingB
    assert.equal(runs, 0, 'no loader ran after close()')
    assert.deepEqual(await locks(redis, prefix), [], 'no lock taken')
  },
)

test(
  'a first read slower than hardTimeout: the callers reject with ERR_HERDCACHE_TIMEOUT at hardTimeout',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const hardTimeout = 300
    const cache = track(t, new Cache({ ...fleetOptions(redis, 'life-slow-read:'), hardTimeout, redisTimeout: 3000 }))
    await cache.ready()
    redis.pause()
    t.after(() => redis.resume())
    let runs = 0
    const t0 = performance.now()
    const calls = ['s1', 's2'].map((k) => cache.getOrLoad(k, () => ++runs))
    for (const call of calls) await rejectsWith(call, 'ERR_HERDCACHE_TIMEOUT')
    const waited = performance.now() - t0
    assert.ok(waited >= hardTimeout - 5, `not before hardTimeout (${waited.toFixed(0)} ms)`)
    assert.ok(waited < 3000, `at hardTimeout (${waited.toFixed(0)} ms), not at redisTimeout (3000 ms)`)
    assert.equal(runs, 0, 'a load past its deadline runs no loader')
    assert.equal(cache.stats().timeouts, 2)
    redis.resume()
  },
)
