'use strict'
// R2, R11 across processes: one recompute per key for the whole fleet.
// Loader runs are counted outside the processes (a log file every run appends to).
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const {
  sleep,
  waitFor,
  loaderLog,
  spawnChild,
  total,
  names,
  storedEnvelope,
  lockReleased,
} = require('./fixtures/fleet')

const T = { timeout: 14000 }

// Every answered value of a burst (per instance), and every error.
function collect(bursts) {
  const values = new Map()
  const errors = []
  let calls = 0
  let maxMs = 0
  for (const b of bursts) {
    for (const r of b.perInstance) {
      for (const [json, n] of Object.entries(r.values)) {
        values.set(json, (values.get(json) || 0) + n)
        calls += n
      }
      errors.push(...r.errors)
      calls += r.errors.length
      maxMs = Math.max(maxMs, r.maxMs)
    }
  }
  return { values, errors, calls, maxMs }
}

test('R11: 4 processes × 100 concurrent getOrLoad on one missing key → the loader runs once in total', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const log = loaderLog(t)
  const prefix = 'r11:'
  const options = { redis: redis.url, prefix, ttl: 60000 }
  const kids = await Promise.all([0, 1, 2, 3].map(() => spawnChild(t, { options, log: log.file })))

  const bursts = await Promise.all(
    kids.map((k) => k.call('burst', { key: 'hot', n: 100, loader: { value: 'v1', ms: 300 } })),
  )
  const runs = log.runs('hot')
  assert.equal(
    runs.length,
    1,
    `the loader must run once across 4 processes, ran ${runs.length}: ${JSON.stringify(runs)}`,
  )
  const { values, errors, calls, maxMs } = collect(bursts)
  assert.deepEqual(errors, [], 'no call may reject')
  assert.equal(calls, 400)
  assert.equal(values.size, 1, `every caller in every process gets the one loaded value: ${[...values.keys()]}`)
  const [value] = [...values.keys()].map((j) => JSON.parse(j))
  assert.deepEqual(value, { v: 'v1', pid: runs[0].pid, inst: 0 })
  // Losers are told when the winner wrote (pub/sub), they do not wait out the 5 s lease.
  assert.ok(maxMs < 2500, `slowest caller waited ${maxMs} ms for a 300 ms load`)

  const stats = await Promise.all(kids.map((k) => k.call('stats')))
  assert.equal(total(stats, 'lockAcquired'), 1, 'one lock acquisition fleet-wide')
  const winner = kids.findIndex((k) => k.pid === runs[0].pid)
  assert.ok(winner >= 0)
  stats.forEach(([s], i) => {
    if (i === winner) {
      assert.equal(s.lockAcquired, 1)
      assert.equal(s.loads, 1)
    } else {
      assert.equal(s.loads, 0, `process ${i} ran no loader`)
      assert.ok(s.lockContended >= 1, `process ${i} lost the lock: lockContended ${s.lockContended}`)
      assert.ok(s.lockWaits >= 1, `process ${i} waited for the winner: lockWaits ${s.lockWaits}`)
      assert.ok(s.fillNotices >= 1, `process ${i} was told by a fill notice: fillNotices ${s.fillNotices}`)
    }
  })

  // Redis holds the envelope; the lock is released.
  const key = names(prefix, 'hot')
  const env = await storedEnvelope(redis, key.value)
  assert.deepEqual(env.value, value)
  assert.equal(env.negative, false)
  assert.ok(env.freshUntil > Date.now() + 30000 && env.hardUntil >= env.freshUntil)
  assert.ok(env.computeMs >= 250, `computeMs ${env.computeMs} for a 300 ms load`)
  await lockReleased(redis, key.lock)

  // Delete, wait until every process sees it gone, then stampede again: once more.
  assert.equal(await kids[2].call('delete', { key: 'hot' }), true)
  for (const k of kids)
    await waitFor(async () => (await k.call('get', { key: 'hot' })) == null, `process ${k.pid} seeing the delete`, 2000)
  const again = await Promise.all(
    kids.map((k) => k.call('burst', { key: 'hot', n: 100, loader: { value: 'v2', ms: 200 } })),
  )
  assert.equal(log.runs('hot').length, 2, 'after a delete, the next stampede loads once more, once')
  const second = collect(again)
  assert.deepEqual(second.errors, [])
  assert.equal(second.values.size, 1)
  assert.equal(JSON.parse([...second.values.keys()][0]).v, 'v2')

  // The children close their caches and exit by themselves.
  const exits = await Promise.all(kids.map((k) => k.close()))
  for (const e of exits) assert.deepEqual(e, { code: 0, signal: null })
})

test('seed quiz: 30 instances (3 processes × 10 caches), one hot key expires → at most one recompute', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const log = loaderLog(t)
  const prefix = 'quiz:'
  // No stale window (hardTtl = ttl), no jitter, no early refresh: the key simply expires.
  const options = { redis: redis.url, prefix, ttl: 600, hardTtl: 600, jitter: 0, beta: 0 }
  const kids = await Promise.all([0, 1, 2].map(() => spawnChild(t, { options, instances: 10, log: log.file })))

  // Warm-up: every instance reads the key once (each keeps it in its L1).
  const warm = collect(
    await Promise.all(kids.map((k) => k.call('burst', { key: 'hot', n: 1, loader: { value: 'v1', ms: 50 } }))),
  )
  assert.deepEqual(warm.errors, [])
  assert.equal(warm.calls, 30)
  assert.equal(log.runs('hot').length, 1, 'the cold start is one load for 30 instances')
  const env = await storedEnvelope(redis, names(prefix, 'hot').value)

  // Let it expire everywhere (Redis and every L1), then all 30 instances ask at once.
  const wait = env.hardUntil - Date.now() + 150
  assert.ok(wait < 1500, `hardUntil is ${wait} ms away`)
  await sleep(Math.max(0, wait))
  const bursts = await Promise.all(
    kids.map((k) => k.call('burst', { key: 'hot', n: 10, loader: { value: 'v2', ms: 300 } })),
  )
  const { values, errors, calls, maxMs } = collect(bursts)
  assert.deepEqual(errors, [])
  assert.equal(calls, 300)
  const runs = log.runs('hot')
  assert.ok(runs.length - 1 <= 1, `at most one recompute after the expiry, saw ${runs.length - 1}`)
  assert.equal(runs.length, 2, 'and exactly one: nothing was there to serve')
  assert.equal(values.size, 1, `one value for everyone: ${[...values.keys()]}`)
  assert.equal(JSON.parse([...values.keys()][0]).v, 'v2')
  assert.ok(maxMs < 2500, `slowest caller waited ${maxMs} ms`)
  const stats = await Promise.all(kids.map((k) => k.call('stats')))
  assert.equal(total(stats, 'loads'), 2)
  assert.equal(total(stats, 'lockAcquired'), 2, 'one lock acquisition per load')
  await Promise.all(kids.map((k) => k.close()))
})

test('XFetch fleet-wide: 30 instances (3 processes × 10 caches × 5 callers) read one hot key for 8 TTL periods → at most one loader run per period, never two at once', {
  timeout: 20000,
}, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const log = loaderLog(t)
  const prefix = 'xf:'
  const ttl = 1000
  // Defaults otherwise: beta 1 (XFetch on), jitter ±10 %, hardTtl 10 × ttl.
  const options = { redis: redis.url, prefix, ttl }
  const kids = await Promise.all([0, 1, 2].map(() => spawnChild(t, { options, instances: 10, log: log.file })))
  const loader = { value: 'v', ms: 100, logEnd: true }

  // The cold load, then every instance reads continuously. With one draw per
  // instance the earliest of 30 would refresh ~H(30) = 4 × computeMs early
  // (about 1.5 runs per period here); with the writer's one draw, ~1 per period.
  const cold = collect(await Promise.all(kids.map((k) => k.call('burst', { key: 'hot', n: 1, loader }))))
  assert.deepEqual(cold.errors, [])
  assert.equal(log.runs('hot').length, 1, 'one cold load for 30 instances')
  const periods = 8
  const started = Date.now()
  const reads = await Promise.all(
    kids.map((k) =>
      k.call('readLoop', { key: 'hot', ms: periods * ttl, callers: 5, every: 5, loader }, periods * ttl + 8000),
    ),
  )
  await waitFor(() => log.spans('hot').length === log.runs('hot').length, 'the last loader run to end', 3000)

  const perInstance = reads.flat()
  assert.equal(perInstance.length, 30)
  const errors = perInstance.flatMap((r) => r.errors)
  assert.deepEqual(errors, [], 'no read rejects')
  for (const r of perInstance) assert.ok(r.reads >= 50, `instance ${r.inst} read ${r.reads} times`)
  const during = log.runs('hot').filter((r) => r.at >= started)
  t.diagnostic(
    `${during.length} loader runs in ${periods} TTL periods at ${JSON.stringify(during.map((r) => r.at - started))} (${total(await Promise.all(kids.map((k) => k.call('stats'))), 'earlyRefreshes')} early)`,
  )
  assert.ok(
    during.length <= periods + 1,
    `at most ${periods + 1} loader runs in ${periods} TTL periods, saw ${during.length}: ${JSON.stringify(during.map((r) => r.at - started))}`,
  )
  assert.ok(during.length >= periods - 2, `the key was refreshed as it expired: ${during.length} runs`)

  // Never two loader runs at once, fleet-wide.
  const spans = log.spans('hot').sort((a, b) => a.at - b.at)
  const overlapping = spans.filter((s, i) => i > 0 && s.at < spans[i - 1].ended)
  assert.deepEqual(overlapping, [], `loader runs overlapped: ${JSON.stringify(spans)}`)

  // The refreshes were XFetch's (early, served fresh), and every instance's readers were answered.
  const stats = await Promise.all(kids.map((k) => k.call('stats')))
  assert.ok(total(stats, 'earlyRefreshes') >= 1, 'early refreshes started')
  assert.equal(total(stats, 'loads'), log.runs('hot').length, 'the loads counted are the runs logged')
  await Promise.all(kids.map((k) => k.close()))
})
