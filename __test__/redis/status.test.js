'use strict'
// A caller's `status` with a fleet: a load that won the lock, a read
// answered by Redis, and a caller whose load found the lock taken and was
// answered by the winner's value. Our own server on 127.0.0.1.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, gatedLoader } = require('../helpers')
const { waitFor } = require('./fixtures/fleet')

const T = { timeout: 20000 }

test('status with Redis: lock won, read from Redis, lock lost and answered by the fleet', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const options = { redis: redis.url, prefix: 'status:', ttl: 60_000, jitter: 0, beta: 0 }
  const [a, b, c] = [0, 1, 2].map(() => track(t, new Cache(options)))
  await Promise.all([a, b, c].map((cache) => cache.ready()))

  // A loads k under the lock; C's load of k finds the lock taken and waits.
  const gate = gatedLoader()
  const won = {}
  const lost = {}
  const loading = a.getOrLoad('k', gate, { status: won })
  await waitFor(() => gate.runs.length === 1, "A's loader running")
  const waiting = c.getOrLoad('k', () => 'WRONG', { status: lost })
  await waitFor(() => c.stats().lockContended === 1, "C's load finding the lock taken")
  gate.runs[0].resolve('v')
  assert.deepEqual(await Promise.all([loading, waiting]), ['v', 'v'])
  assert.deepEqual({ ...won, waitedMs: 0 }, { outcome: 'miss', source: 'load', lock: 'won', waitedMs: 0 })
  assert.deepEqual(
    { outcome: lost.outcome, source: lost.source, lock: lost.lock },
    { outcome: 'hit', source: 'fleet', lock: 'lost' },
  )
  // A's freshUntil read by C's clock: each instance's measure of the server's time, a few ms apart.
  assert.ok(lost.ttl > 55_000 && lost.ttl <= 60_000 + 20, `the winner's value, fresh: ttl ${lost.ttl} ms`)

  // B reads k from Redis (no lock asked), then from its memory.
  const read = {}
  assert.equal(await b.getOrLoad('k', () => 'WRONG', { status: read }), 'v')
  assert.deepEqual([read.outcome, read.source, read.lock], ['hit', 'redis', undefined])
  assert.ok(read.ttl > 55_000, `ttl ${read.ttl} ms`)
  const again = {}
  await b.getOrLoad('k', () => 'WRONG', { status: again })
  assert.deepEqual([again.outcome, again.source], ['hit', 'memory'])
})
