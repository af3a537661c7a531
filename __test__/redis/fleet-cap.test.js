'use strict'
// fleetMaxConcurrentLoads: one cap on the loaders running at once across every instance sharing the Redis
// (src/engine/slots.rs, LOAD_SLOTS_SCRIPT). The cap holds across caches and processes; slots are leased, so a
// SIGKILLed holder's slots come back within lockTtl; they are handed out in turn, so no instance starves; when
// Redis cannot be asked the loads run under the per-process cap (fail open); close() gives the slots back.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { startCluster } = require('../redis-cluster')
const { Cache } = require('../..')
const { track } = require('../helpers')
const { sleep, waitFor, loaderLog, spawnChild } = require('./fixtures/fleet')

const T = { timeout: 30000 }

/** The most spans (`{ at, ended }`) open at once; an end at the same ms as a start comes first. */
function peakOverlap(spans) {
  const edges = spans.flatMap((s) => [
    [s.at, 1],
    [s.ended, -1],
  ])
  edges.sort((a, b) => a[0] - b[0] || a[1] - b[1])
  let open = 0
  let peak = 0
  for (const [, step] of edges) {
    open += step
    peak = Math.max(peak, open)
  }
  return peak
}

/** A loader that counts how many of its runs overlap (in this process), and ends after `ms`. */
function counting(ms) {
  const c = { running: 0, peak: 0, runs: 0 }
  c.loader = async ({ key }) => {
    c.running++
    c.runs++
    c.peak = Math.max(c.peak, c.running)
    await sleep(ms)
    c.running--
    return { key }
  }
  return c
}

test('two caches share one fleet cap: never more loaders than it between them, each key loaded once', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const options = { redis: redis.url, prefix: 'fcap-two:', fleetMaxConcurrentLoads: 3 }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache(options))
  await Promise.all([a.ready(), b.ready()])
  const c = counting(25)
  const keys = Array.from({ length: 40 }, (_, i) => `k${i}`)
  // Every key asked by both caches, twice each: one load per key for the fleet.
  const values = await Promise.all(keys.flatMap((key) => [a, b, a, b].map((cache) => cache.getOrLoad(key, c.loader))))
  assert.deepEqual(
    values.map((v) => v.key),
    keys.flatMap((key) => [key, key, key, key]),
  )
  assert.equal(c.runs, 40, 'each key loaded once')
  assert.equal(c.peak, 3, 'the cap is reached and never passed, across both caches')
  const [sa, sb] = [a.stats(), b.stats()]
  assert.equal(sa.loads + sb.loads, 40)
  assert.equal(sa.fleetSlotsHeld + sb.fleetSlotsHeld, 0, 'every slot given back')
  assert.equal(sa.fleetCapBypassed + sb.fleetCapBypassed, 0)
  assert.ok(sa.loadsQueued + sb.loadsQueued >= 40, 'every load waited for its fleet slot')
  assert.match(a.metrics(), /^herdcache_fleet_slots_held 0$/m)
  // Nothing of either instance is left in the semaphore but its ticket counter.
  const fields = await redis.cmd('HGETALL', 'fcap-two:loads:{loads}')
  assert.deepEqual(
    fields.filter((_, i) => i % 2 === 0),
    ['#'],
  )
})

test(
  'across 4 processes: the cap holds, a SIGKILLed holder frees its slots within lockTtl, no instance starves',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const cap = 4
    const lockTtl = 1000
    const options = {
      redis: redis.url,
      prefix: 'fcap-procs:',
      fleetMaxConcurrentLoads: cap,
      lockTtl,
      hardTimeout: 20000,
    }
    const log = loaderLog(t)
    const [holder, ...others] = await Promise.all([0, 1, 2, 3].map(() => spawnChild(t, { options, log: log.file })))
    // The holder takes the whole cap with loaders that never settle.
    const holding = holder.call('storm', { keys: ['h0', 'h1', 'h2', 'h3'], loader: { hang: true } }, 25000)
    holding.catch(() => {}) // it is killed mid-call
    await waitFor(() => log.runs().length === cap, 'the holder to run its loaders', 5000)
    const storms = others.map((child, i) =>
      child.call(
        'storm',
        { keys: Array.from({ length: 8 }, (_, k) => `p${i}:k${k}`), loader: { ms: 40, logEnd: true } },
        20000,
      ),
    )
    await sleep(400)
    assert.equal(log.runs().length, cap, 'nobody loads while the holder holds the whole cap')
    const killedAt = Date.now()
    await holder.kill('SIGKILL')
    const results = await Promise.all(storms)
    for (const result of results) assert.deepEqual(result, Array(8).fill({ ok: true }), 'every load answered')
    const pids = new Set(others.map((child) => child.pid))
    const runs = log.runs().filter((r) => pids.has(r.pid))
    assert.equal(runs.length, 24, 'each key loaded once')
    const firstAt = Math.min(...runs.map((r) => r.at))
    const freedAfter = firstAt - killedAt
    t.diagnostic(`the SIGKILLed holder's slots came back after ${freedAfter} ms (lockTtl ${lockTtl} ms)`)
    // Its last renewal was at most lockTtl/3 before the kill; the waiters ask every 250 ms.
    assert.ok(freedAfter >= 300, `the dead holder's slots counted until its lease ended (freed after ${freedAfter} ms)`)
    assert.ok(
      freedAfter <= lockTtl + 250 + 1500,
      `freed within lockTtl (+ a poll, + slack for a busy host): ${freedAfter} ms`,
    )
    const spans = log.spans().filter((s) => pids.has(s.pid))
    assert.equal(spans.length, 24)
    assert.ok(peakOverlap(spans) <= cap, `at most ${cap} loaders at once across the fleet: ${peakOverlap(spans)}`)
    // No starvation: every instance loaded before any instance ran its last load.
    const byPid = [...pids].map((pid) => runs.filter((r) => r.pid === pid).map((r) => r.at))
    const everyFirst = Math.max(...byPid.map((ats) => Math.min(...ats)))
    const anyLast = Math.min(...byPid.map((ats) => Math.max(...ats)))
    assert.ok(everyFirst < anyLast, `each instance got a turn early (${JSON.stringify(byPid)})`)
    const stats = (await Promise.all(others.map((child) => child.call('stats')))).flat()
    assert.deepEqual(
      stats.map((s) => s.fleetSlotsHeld),
      [0, 0, 0],
    )
    await Promise.all(others.map((child) => child.close()))
  },
)

test(
  'Redis unreachable: loads run under the per-process cap (fleetCapBypassed), and the fleet cap is back with Redis',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const cache = track(
      t,
      new Cache({
        redis: redis.url,
        prefix: 'fcap-open:',
        fleetMaxConcurrentLoads: 2,
        maxConcurrentLoads: 4,
        redisTimeout: 200,
        circuitBreakerDuration: 100,
      }),
    )
    await cache.ready()
    redis.pause()
    let c = counting(30)
    const down = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => cache.getOrLoad(`d${i}`, c.loader)))
    assert.deepEqual(
      down.map((r) => r.status),
      Array(12).fill('fulfilled'),
      'nobody fails for the fleet cap',
    )
    assert.equal(c.peak, 4, 'the per-process cap held, not the fleet cap (Redis could not be asked)')
    assert.ok(cache.stats().fleetCapBypassed >= 1)
    redis.resume()
    await waitFor(async () => (await redis.cmd('PING')) === 'PONG', 'Redis to answer')
    // Past the breaker's cool-down a load probes Redis (and may still run uncapped): once one gets its
    // fleet slot from Redis again, the cap holds.
    let probes = 0
    await waitFor(
      async () => {
        const before = cache.stats().fleetCapBypassed
        await cache.getOrLoad(`probe${probes++}`, async () => 1)
        return cache.stats().fleetCapBypassed === before
      },
      'a load to get its fleet slot from Redis again',
      5000,
      50,
    )
    const bypassed = cache.stats().fleetCapBypassed
    c = counting(30)
    await Promise.all(Array.from({ length: 12 }, (_, i) => cache.getOrLoad(`u${i}`, c.loader)))
    assert.equal(c.peak, 2, 'the fleet cap holds again')
    assert.equal(cache.stats().fleetCapBypassed, bypassed)
  },
)

test(
  'a load waiting for a fleet slot: its hardTimeout and signals hold, and close() gives back a slot a loader still holds',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const options = { redis: redis.url, prefix: 'fcap-wait:', fleetMaxConcurrentLoads: 1, lockTtl: 10000 }
    const holder = new Cache({ ...options, hardTimeout: 300 })
    t.after(() => holder.close())
    const hasty = track(t, new Cache({ ...options, hardTimeout: 400 }))
    const waiter = track(t, new Cache({ ...options, hardTimeout: 8000 }))
    await Promise.all([holder.ready(), hasty.ready(), waiter.ready()])
    // A loader that never settles: given up at hardTimeout, it still holds its slot (it still loads the database).
    await assert.rejects(
      holder.getOrLoad('held', () => new Promise(() => {})),
      { code: 'ERR_HERDCACHE_TIMEOUT' },
    )
    assert.equal(holder.stats().fleetSlotsHeld, 1, 'the slot stays with the loader that still runs')
    let ran = false
    const timedOut = hasty.getOrLoad('late', () => {
      ran = true
      return 1
    })
    await assert.rejects(timedOut, { code: 'ERR_HERDCACHE_TIMEOUT' })
    assert.equal(ran, false, 'the loader of a load given up while it waited never runs')
    const controller = new AbortController()
    const next = waiter.getOrLoad('next', async () => 'loaded', { signal: controller.signal })
    await waitFor(() => waiter.stats().loadQueueLength === 1, 'the load to wait for the fleet slot', 3000)
    controller.abort(new Error('the caller left'))
    await assert.rejects(next, /the caller left/)
    // Another caller of the key still gets the load, once the slot is free: closing the holder gives it back.
    const joined = waiter.getOrLoad('next', async () => 'unused')
    await sleep(300)
    assert.equal(waiter.stats().loadQueueLength, 1, 'still waiting: the holder holds the slot')
    const closedAt = Date.now()
    await holder.close()
    assert.equal(await joined, 'loaded')
    assert.ok(Date.now() - closedAt < 3000, 'given back at close, not when the 10 s lease ends')
    await waitFor(() => waiter.stats().fleetSlotsHeld === 0, 'the waiter to give its slot back', 3000)
  },
)

test('on a Redis Cluster the fleet cap holds across caches', T, async (t) => {
  const cluster = await startCluster(t)
  if (!cluster) return
  const options = { redis: { cluster: cluster.urls }, prefix: 'fcap-cluster:', fleetMaxConcurrentLoads: 3 }
  const a = track(t, new Cache(options))
  const b = track(t, new Cache(options))
  await Promise.all([a.ready(), b.ready()])
  const c = counting(25)
  const keys = Array.from({ length: 30 }, (_, i) => `k${i}`)
  await Promise.all(keys.flatMap((key) => [a, b].map((cache) => cache.getOrLoad(key, c.loader))))
  assert.equal(c.runs, 30)
  assert.equal(c.peak, 3)
  assert.equal(a.stats().fleetCapBypassed + b.stats().fleetCapBypassed, 0, 'every load got its slot from the cluster')
})
