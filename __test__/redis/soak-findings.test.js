'use strict'
// Two faults the soak (scripts/soak.js) found in Redis mode, each reduced to a
// test that fails on the build it was found on.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted, hangingLoader } = require('../helpers')
const { sleep, waitFor } = require('./fixtures/fleet')

const T = { timeout: 10000 }

const unhandled = []
process.on('unhandledRejection', (reason) => unhandled.push(reason))

test(
  '[unhandled rejection] an already-aborted signal with a status object: a failing load rejects nobody unhandled',
  T,
  async (t) => {
    // With Redis, `status` makes getOrLoad derive a promise from the flight's
    // (to correct status.outcome when another instance's value answers); an
    // already-aborted signal then returns at once and leaves that derived
    // promise unobserved. Without a listener, Node exits on its rejection.
    const redis = await startRedis(t)
    if (!redis) return
    const cache = track(t, new Cache({ redis: redis.url, prefix: 'abort:', hardTimeout: 300 }))
    const failing = {
      rejects: () => Promise.reject(new Error('boom')),
      throws: () => {
        throw new Error('sync boom')
      },
      unserializable: () => ({ big: 1n }),
      'times out': hangingLoader(),
    }
    for (const [name, loader] of Object.entries(failing)) {
      const status = {}
      const err = await cache.getOrLoad(`k-${name}`, loader, { signal: AbortSignal.abort(), status }).then(
        () => null,
        (e) => e,
      )
      assert.equal(err && err.name, 'AbortError', `${name}: the caller gets the signal's reason`)
    }
    await waitFor(() => cache.stats().inFlight === 0, 'the loads to end', 3000)
    await sleep(50)
    assert.deepEqual(
      unhandled.map((e) => String(e && e.message)),
      [],
      'no unhandled rejection (the process would exit without a listener)',
    )
  },
)

test(
  '[counters] loads counts loader runs: a flight given up while it waited for another instance ran no loader',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'loads:'
    const holder = track(t, new Cache({ redis: redis.url, prefix, hardTimeout: 1500 }))
    const waiter = track(t, new Cache({ redis: redis.url, prefix, hardTimeout: 200 }))
    const held = holder.getOrLoad('k', hangingLoader()).catch((e) => e)
    await waitFor(async () => (await redis.cmd('GET', `{${prefix}k}:lock`)) !== null, "the holder's lock", 2000)
    const loader = counted(() => 'never')
    const err = await waiter.getOrLoad('k', loader).then(
      () => null,
      (e) => e,
    )
    assert.equal(err && err.code, 'ERR_HERDCACHE_TIMEOUT', 'the waiter gives up at its hardTimeout')
    await sleep(400) // the waiter's Redis step ends meanwhile
    assert.equal(loader.calls, 0, 'the waiter never ran its loader')
    const s = waiter.stats()
    assert.equal(s.timeouts, 1)
    assert.equal(s.loads, loader.calls, `loads (${s.loads}) is "loader runs, foreground and background" (README)`)
    await held
  },
)
