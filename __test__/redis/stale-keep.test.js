'use strict'
// `ctx.stale`, `ctx.setEtag` and `ctx.keep()` across a fleet, on a real
// redis-server of our own: the validator travels with the value, a keep
// rewrites the stored entry's header only (its bytes are not sent again)
// and the other instances take the kept deadlines, and a keep of a value
// Redis no longer holds does not overwrite the newer one.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track } = require('../helpers')
const { names, waitFor } = require('./fixtures/fleet')

const T = { timeout: 20000 }

/** Two caches on one fresh redis-server. */
async function fleet(t, prefix, options = {}) {
  const redis = await startRedis(t)
  if (!redis) return {}
  const all = { redis: redis.url, prefix, ttl: 60_000, jitter: 0, beta: 0, ...options }
  const [a, b] = [0, 1].map(() => track(t, new Cache(all)))
  await Promise.all([a.ready(), b.ready()])
  return { redis, a, b }
}

/**
 * `cache` holds `key` in memory, then makes it stale (`expire`, in Redis
 * too). The writer's fill notice may reach `cache` after its first read
 * and take that copy out of memory: it reads again until its copy stays.
 */
async function heldStale(cache, key) {
  await waitFor(
    async () => {
      const status = {}
      await cache.getOrLoad(key, () => assert.fail('in Redis already'), { status })
      return status.source === 'memory'
    },
    `${key} held in memory`,
    2000,
  )
  assert.equal(await cache.expire(key), true)
}

/** The stored entry's header line and the bytes after it. */
async function stored(redis, name) {
  const raw = await redis.cmd('GET', name)
  assert.equal(typeof raw, 'string', `${name} is stored`)
  const newline = raw.indexOf('\n')
  return { header: raw.slice(0, newline).split(' '), rest: raw.slice(newline + 1) }
}

test(
  'a validator set on one instance reaches another’s loader, and a keep there refreshes the fleet without resending the value',
  T,
  async (t) => {
    const { redis, a, b } = await fleet(t, 'keep:')
    if (!redis) return
    const key = names('keep:', 'doc')
    const document = { title: 'the same', body: 'x'.repeat(2_000) }
    let runs = 0
    const origin = async (ctx) => {
      runs++
      if (ctx.stale?.etag === '"v1"') return ctx.keep()
      ctx.setEtag('"v1"')
      return document
    }
    assert.deepEqual(await a.getOrLoad('doc', origin), document)
    const before = await stored(redis, key.value)
    assert.equal(before.header[0], 'hc4', 'a value with a validator is hc4')
    assert.ok(before.rest.startsWith('- e json\n"v1"\n{'), before.rest.slice(0, 30))
    assert.deepEqual(await b.getOrLoad('doc', origin), document, 'b reads it from Redis')
    await heldStale(b, 'doc')
    const expired = await stored(redis, key.value)

    const written = b.stats().valueBytesWritten
    const status = {}
    assert.deepEqual(await b.getOrLoad('doc', origin, { stale: false, status }), document)
    assert.equal(runs, 2, 'b’s loader ran, and kept')
    assert.equal(status.outcome, 'miss')
    assert.equal(b.stats().valueBytesWritten, written, 'no value bytes written by the keep')
    const after = await stored(redis, key.value)
    assert.equal(after.rest, before.rest, 'the format line, validator and bytes are untouched (by the expire either)')
    // Two instances' clocks agree within a ms or so: judged against the
    // expire's moment (its freshUntil), not against the other's stamps.
    const freshFor = Number(after.header[1]) - Number(expired.header[1])
    assert.ok(freshFor > 50_000, `fresh for a new TTL from the keep (${freshFor} ms past the expire)`)
    assert.notEqual(after.header[4], before.header[4], 'stamped by the keeping load')
    const pttl = await redis.cmd('PTTL', key.value)
    assert.ok(pttl > 59_000, `lives to its new hard TTL (${pttl} ms)`)
    assert.equal(await redis.cmd('EXISTS', key.lock), 0, 'the lock is released')

    // a's copy had the old deadlines: told, it reads the kept entry, fresh.
    await waitFor(
      async () => {
        const seen = {}
        const value = await a.getOrLoad('doc', origin, { status: seen })
        return seen.outcome === 'hit' && seen.source === 'redis' && value.title === 'the same'
      },
      'a reads the kept entry from Redis',
      2000,
    )
    assert.equal(runs, 2, 'nobody loaded again')
  },
)

test(
  'a keep of a value Redis no longer holds leaves the newer value there, and the keeper lets go of its copy',
  T,
  async (t) => {
    const { redis, a, b } = await fleet(t, 'keep-lost:')
    if (!redis) return
    await a.getOrLoad('k', () => 'old')
    assert.equal(await b.getOrLoad('k', () => 'never'), 'old')
    await heldStale(b, 'k')
    let keepNow
    let loaderStarted
    const kept = new Promise((resolve) => (keepNow = resolve))
    const started = new Promise((resolve) => (loaderStarted = resolve))
    const refresh = b.getOrLoad(
      'k',
      async (ctx) => {
        loaderStarted()
        await kept
        return ctx.keep()
      },
      { stale: false },
    )
    await started
    await a.set('k', 'new') // lands while b's origin says "not modified"
    keepNow()
    assert.equal(await refresh, 'old', 'b’s callers get what its origin confirmed')
    const envelope = await stored(redis, names('keep-lost:', 'k').value)
    assert.equal(envelope.rest, '"new"', 'the newer value stays in Redis')
    await waitFor(async () => (await b.getOrLoad('k', () => 'never')) === 'new', 'b reads the newer value', 2000)
  },
)
