'use strict'
// R9: Redis is optional at run time. Down, hung, garbage or unreachable: getOrLoad
// never rejects while the loader works; Redis use resumes by itself when it returns.
const test = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { startRedis, freePort } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted, throwsWith } = require('../helpers')
const { sleep, waitFor, within, parseEnvelope, names, storedEnvelope } = require('./fixtures/fleet')

const T = { timeout: 14000 }

test(
  'Redis stopped mid-run and restarted: no rejection, L1 or the loader answer, writes reach Redis again',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'fo:'
    const cache = track(
      t,
      new Cache({ redis: redis.url, prefix, ttl: 60000, redisTimeout: 200, circuitBreakerDuration: 300 }),
    )
    await cache.ready() // the subscription's going live clears the L1
    assert.equal(await cache.getOrLoad('warm', () => 'W'), 'W')
    await storedEnvelope(redis, names(prefix, 'warm').value, (e) => e.value === 'W')

    await redis.stop()
    const outageEnd = Date.now() + 1200
    let round = 0
    let sawOpen = false
    while (Date.now() < outageEnd) {
      round++
      const loader = counted(async () => {
        await sleep(10)
        return `L${round}`
      })
      const started = Date.now()
      const [warm, ...fresh] = await within(
        Promise.all([
          cache.getOrLoad('warm', () => 'WRONG'),
          ...Array.from({ length: 20 }, () => cache.getOrLoad(`k${round}`, loader)),
        ]),
        3000,
        `round ${round} with Redis down`,
      )
      assert.equal(warm, 'W', 'a value in L1 is served while Redis is down')
      assert.deepEqual(new Set(fresh), new Set([`L${round}`]), 'new keys are served by the loader')
      assert.equal(loader.calls, 1, 'loads are still coalesced per process while Redis is down')
      assert.ok(Date.now() - started < 1500, `round ${round} took ${Date.now() - started} ms (redisTimeout 200)`)
      if (cache.stats().circuitOpen === 1) sawOpen = true
      await sleep(20)
    }
    const down = cache.stats()
    assert.ok(down.redisErrors > 0, `redisErrors counts the failures: ${down.redisErrors}`)
    assert.ok(sawOpen, 'the circuit breaker was seen open while Redis was down')

    await redis.restart()
    // Redis use resumes by itself: a load written after the restart is in Redis.
    let n = 0
    await waitFor(
      async () => {
        n++
        const v = await cache.getOrLoad(`after${n}`, () => `A${n}`)
        assert.equal(v, `A${n}`)
        // Any load since the restart reaching Redis (a write may land just after its callers are answered).
        const raws = await redis.cmd(
          'MGET',
          ...Array.from({ length: n }, (_, i) => names(prefix, `after${i + 1}`).value),
        )
        const landed = raws.findIndex((raw, i) => parseEnvelope(raw)?.value === `A${i + 1}`)
        if (landed >= 0) n = landed + 1
        return landed >= 0
      },
      'writes reaching Redis after the restart',
      5000,
      50,
    )
    await waitFor(() => cache.stats().circuitOpen === 0, 'the breaker to close', 2000)
    // And reads too: a second instance finds the value without loading.
    const other = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
    const status = {}
    assert.equal(await other.getOrLoad(`after${n}`, () => 'WRONG', { status }), `A${n}`)
    assert.equal(other.stats().redisHits, 1)
  },
)

test('Redis down, l1: false: every call is served by the loader, coalesced per process', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const cache = track(
    t,
    new Cache({ redis: redis.url, prefix: 'nol1:', l1: false, redisTimeout: 200, circuitBreakerDuration: 2000 }),
  )
  assert.equal(await cache.getOrLoad('k', () => 1), 1)
  await redis.stop()
  const loader = counted(async () => {
    await sleep(30)
    return 2
  })
  const values = await within(
    Promise.all(Array.from({ length: 50 }, () => cache.getOrLoad('k', loader))),
    3000,
    '50 calls with Redis down',
  )
  assert.deepEqual(new Set(values), new Set([2]), 'no L1: the loader answers')
  assert.equal(loader.calls, 1)
  const s = cache.stats()
  assert.ok(s.redisErrors > 0)
  assert.equal(s.circuitOpen, 1)
  assert.equal(s.l1Hits, 0)
})

test(
  'Redis hung (SIGSTOP): calls answer within about redisTimeout, then the breaker skips Redis; it recovers',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'hung:'
    const cache = track(t, new Cache({ redis: redis.url, prefix, redisTimeout: 200, circuitBreakerDuration: 500 }))
    await cache.ready() // the subscription's going live clears the L1
    assert.equal(await cache.getOrLoad('warm', () => 'W'), 'W')

    redis.pause()
    t.after(() => redis.resume())
    let t0 = Date.now()
    assert.equal(
      await within(
        cache.getOrLoad('warm', () => 'WRONG'),
        2000,
        'an L1 hit',
      ),
      'W',
    )
    assert.ok(Date.now() - t0 < 100, 'a fresh L1 value never waits for Redis')
    t0 = Date.now()
    assert.equal(
      await within(
        cache.getOrLoad('cold1', () => 'C1'),
        3000,
        'a cold call with Redis hung',
      ),
      'C1',
    )
    const first = Date.now() - t0
    assert.ok(first < 1000, `the first cold call took ${first} ms (redisTimeout 200)`)
    assert.ok(cache.stats().redisErrors > 0, 'the timeout is counted')
    assert.equal(cache.stats().circuitOpen, 1)
    t0 = Date.now()
    assert.equal(await cache.getOrLoad('cold2', () => 'C2'), 'C2')
    assert.ok(Date.now() - t0 < 150, `with the breaker open, Redis is skipped (took ${Date.now() - t0} ms)`)

    redis.resume()
    let n = 0
    await waitFor(
      async () => {
        n++
        assert.equal(await cache.getOrLoad(`back${n}`, () => n), n)
        const raws = await redis.cmd(
          'MGET',
          ...Array.from({ length: n }, (_, i) => names(prefix, `back${i + 1}`).value),
        )
        return raws.some((raw, i) => parseEnvelope(raw)?.value === i + 1)
      },
      'writes reaching Redis after it resumed',
      5000,
      50,
    )
  },
)

test('a server answering garbage: getOrLoad is served by the loader, counted as Redis errors', T, async (t) => {
  const sockets = new Set()
  const server = net.createServer((s) => {
    sockets.add(s)
    s.on('error', () => {})
    s.on('close', () => sockets.delete(s))
    s.on('data', () => s.write('%%% this is not RESP\r\n\x00\xff*-7\r\n$abc\r\n'))
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => {
    for (const s of sockets) s.destroy()
    return new Promise((resolve) => server.close(resolve))
  })
  const cache = track(
    t,
    new Cache({ redis: `redis://127.0.0.1:${server.address().port}`, redisTimeout: 300, circuitBreakerDuration: 1000 }),
  )
  const loader = counted(() => ({ ok: true }))
  const values = await within(
    Promise.all([1, 2, 3].map(() => cache.getOrLoad('k', loader))),
    5000,
    'calls against a garbage server',
  )
  assert.deepEqual(values, [{ ok: true }, { ok: true }, { ok: true }])
  assert.equal(loader.calls, 1)
  assert.ok(cache.stats().redisErrors > 0)
})

test('an unreachable Redis (nothing listens): getOrLoad answers via the loader within a few seconds', T, async (t) => {
  const port = await freePort()
  const cache = track(t, new Cache({ redis: `redis://127.0.0.1:${port}` }))
  const t0 = Date.now()
  const status = {}
  assert.equal(
    await within(
      cache.getOrLoad('k', () => 'via loader', { status }),
      4000,
      'getOrLoad with Redis unreachable',
    ),
    'via loader',
  )
  assert.ok(Date.now() - t0 < 3000, `took ${Date.now() - t0} ms`)
  assert.equal(status.outcome, 'miss')
  assert.ok(cache.stats().redisErrors > 0)
  assert.equal(cache.stats().circuitOpen, 1)
  // Served from L1 afterwards, at once.
  const t1 = Date.now()
  assert.equal(await cache.getOrLoad('k', () => 'WRONG'), 'via loader')
  assert.ok(Date.now() - t1 < 100)
  await within(cache.close(), 3000, 'close() with Redis unreachable')
})

test('a bad Redis URL throws ERR_HERDCACHE_INVALID_OPTION from new Cache', T, () => {
  for (const redis of ['http://x', 'redis://[::1', 'not a url', '', 42, {}]) {
    const err = throwsWith(() => new Cache({ redis }), 'ERR_HERDCACHE_INVALID_OPTION')
    assert.ok(
      err instanceof TypeError || err instanceof RangeError,
      `${JSON.stringify(redis)}: ${err.constructor.name}`,
    )
    assert.match(err.message, /redis/, `the message names the option (${JSON.stringify(redis)}): ${err.message}`)
  }
})
