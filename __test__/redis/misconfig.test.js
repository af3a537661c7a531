'use strict'
// A misconfigured Redis is never silent: each cause (a wrong password or
// user, no password, no such db, nothing listening, rediss:// to a plain
// port, no answer, an ACL without scripts or pub/sub) reaches onError once,
// coded, with the server's text, when the breaker opens (not once per call);
// without onError, one process warning per code. `ready()` rejects with it;
// a good Redis makes ready() resolve with both connections up.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('../..')
const { startRedis, freePort } = require('../redis-server')
const { track, rejectsWith, sleep, waitFor, within } = require('../helpers')

const T = { timeout: 20000 }
const REDIS_TIMEOUT = 400

/** A cache on `url` that records what reaches onError. */
function watched(t, url, more = {}) {
  const reports = []
  const cache = track(
    t,
    new Cache({
      redis: url,
      prefix: 'misconfig:',
      redisTimeout: REDIS_TIMEOUT,
      circuitBreakerDuration: 200,
      onError: (error) => reports.push(error),
      ...more,
    }),
  )
  return { cache, reports }
}

/** Calls keep being served (fail-open) while the cause is reported once. */
async function reportsOnce(cache, reports, code, text) {
  for (let i = 0; i < 8; i++) {
    assert.equal(await cache.getOrLoad(`k${i}`, () => i), i, 'served by the loader')
    await sleep(60)
  }
  await waitFor(() => reports.length > 0, `the ${code} report`, 3000)
  const coded = reports.filter((r) => r.code === code)
  assert.equal(coded.length, 1, `reported once, not per call: ${reports.map((r) => r.code).join(', ')}`)
  assert.match(coded[0].message, text, 'the message has the server\u2019s text')
  assert.equal(cache.stats().lastRedisError, code)
  assert.equal(cache.stats().redisConnected, 0)
  assert.match(cache.metrics(), new RegExp(`herdcache_redis_last_error\\{code="${code}"\\} 1`))
}

test('each misconfiguration is reported once with its code, and ready() rejects with it', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  // Set once it answers (the helper's start check needs no password); this
  // connection stays authenticated.
  await redis.cmd('CONFIG', 'SET', 'requirepass', 'secret')
  const free = await freePort()
  const at = `127.0.0.1:${redis.port}`
  const cases = [
    ['a wrong password', `redis://:wrong@${at}`, 'ERR_HERDCACHE_REDIS_AUTH', /WRONGPASS|invalid username-password/i],
    ['a wrong user', `redis://nobody:secret@${at}`, 'ERR_HERDCACHE_REDIS_AUTH', /WRONGPASS|invalid username-password/i],
    ['no password', `redis://${at}`, 'ERR_HERDCACHE_REDIS_AUTH', /NOAUTH|Authentication required/i],
    ['no such db', `redis://:secret@${at}/99`, 'ERR_HERDCACHE_REDIS_DB', /DB index is out of range/],
    ['nothing listening', `redis://127.0.0.1:${free}`, 'ERR_HERDCACHE_REDIS_UNREACHABLE', /refused/i],
    ['rediss:// to a plain port', `rediss://:secret@${at}/#insecure`, 'ERR_HERDCACHE_REDIS_TLS', /./],
  ]
  for (const [what, url, code, text] of cases) {
    await t.test(what, async (t) => {
      const { cache, reports } = watched(t, url)
      await within(rejectsWith(cache.ready(), code), 3 * REDIS_TIMEOUT, `ready() with ${what}`)
      await reportsOnce(cache, reports, code, text)
    })
  }
})

test('a Redis that does not answer: ERR_HERDCACHE_REDIS_TIMEOUT within redisTimeout', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  redis.pause()
  t.after(() => redis.resume())
  const { cache, reports } = watched(t, redis.url)
  const started = Date.now()
  await rejectsWith(cache.ready(), 'ERR_HERDCACHE_REDIS_TIMEOUT')
  assert.ok(Date.now() - started < 3 * REDIS_TIMEOUT, `bounded by redisTimeout (${Date.now() - started} ms)`)
  await reportsOnce(cache, reports, 'ERR_HERDCACHE_REDIS_TIMEOUT', /redisTimeout/)
})

test('ACL users without scripts, or without pub/sub: reported, not looped on', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  await redis.cmd('ACL', 'SETUSER', 'noscripts', 'on', '>pw', '~*', '&*', '+@all', '-eval', '-evalsha', '-script')
  await redis.cmd('ACL', 'SETUSER', 'nopubsub', 'on', '>pw', '~*', '&*', '+@all', '-@pubsub')
  const scripts = watched(t, `redis://noscripts:pw@127.0.0.1:${redis.port}`)
  await rejectsWith(scripts.cache.ready(), 'ERR_HERDCACHE_REDIS_NOPERM')
  await reportsOnce(scripts.cache, scripts.reports, 'ERR_HERDCACHE_REDIS_NOPERM', /NOPERM|permission/i)

  const pubsub = watched(t, `redis://nopubsub:pw@127.0.0.1:${redis.port}`)
  const error = await rejectsWith(pubsub.cache.ready(), 'ERR_HERDCACHE_REDIS_NOPERM')
  assert.match(error.message, /SUBSCRIBE/)
  assert.equal(pubsub.cache.stats().redisSubscribed, 0)
  assert.equal(await pubsub.cache.getOrLoad('k', () => 'v'), 'v', 'the cache still works (fail-open)')
  assert.equal(pubsub.cache.stats().redisConnected, 1, 'commands do reach Redis')
})

test('a good Redis: ready() resolves with both connections up; no onError: one warning per code', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const cache = track(t, new Cache({ redis: redis.url, prefix: 'misconfig-ok:' }))
  await within(cache.ready(), 2000, 'ready()')
  const s = cache.stats()
  assert.deepEqual([s.redisConnected, s.redisSubscribed, s.lastRedisError], [1, 1, null])
  assert.equal(await new Cache().ready(), undefined, 'without Redis it resolves at once')

  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  t.after(() => process.off('warning', onWarning))
  const quiet = track(t, new Cache({ redis: redis.url.replace('//', '//:nope@'), circuitBreakerDuration: 100 }))
  for (let i = 0; i < 6; i++) {
    await quiet.getOrLoad(`q${i}`, () => i)
    await sleep(150)
  }
  await waitFor(() => warnings.some((w) => w.code?.startsWith('ERR_HERDCACHE_REDIS_')), 'the warning', 3000)
  const coded = warnings.filter((w) => w.code?.startsWith('ERR_HERDCACHE_REDIS_'))
  assert.equal(coded.length, 1, coded.map((w) => `${w.code}: ${w.message}`).join('\n'))
  // A password the server has none for is the URL's mistake, explained or not (the
  // explanation, a second connection, may time out on a busy host).
  assert.equal(coded[0].code, 'ERR_HERDCACHE_REDIS_AUTH')
})

test('ERR_HERDCACHE_UNDELIVERED names the last Redis error and reads right for one operation', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const reports = []
  const cache = new Cache({
    redis: redis.url,
    prefix: 'misconfig-u:',
    redisTimeout: 300,
    onError: (e) => reports.push(e),
  })
  await cache.set('a', 1)
  redis.pause()
  t.after(() => redis.resume())
  await cache.set('a', 2)
  await cache.close()
  const undelivered = reports.find((r) => r.code === 'ERR_HERDCACHE_UNDELIVERED')
  assert.ok(undelivered, reports.map((r) => r.code).join(', '))
  assert.match(
    undelivered.message,
    /^close\(\): 1 set\(\) call could not reach Redis and was given up \(the last Redis error: ERR_HERDCACHE_REDIS_TIMEOUT/,
  )
  assert.match(undelivered.message, /Keys: a$/)
  assert.equal(undelivered.cause.code, 'ERR_HERDCACHE_REDIS_TIMEOUT')
})

test('without onError, a failed background refresh is one warning per key per failure streak', T, async (t) => {
  const cache = track(t, new Cache({ ttl: 50, hardTtl: 60000 }))
  const warnings = []
  const onWarning = (w) => warnings.push(w)
  process.on('warning', onWarning)
  t.after(() => process.off('warning', onWarning))
  let failing = true
  const loader = () => (failing ? Promise.reject(new Error('db down')) : 'fresh')
  assert.equal(await cache.getOrLoad('k', () => 'first'), 'first')
  for (let i = 0; i < 5; i++) {
    await sleep(70)
    assert.equal(await cache.getOrLoad('k', loader), 'first', 'the stale value is served')
  }
  await sleep(20)
  const mine = () => warnings.filter((w) => w.code === 'HERDCACHE_REFRESH_FAILED')
  assert.equal(mine().length, 1, 'one warning for the streak')
  assert.match(mine()[0].message, /key "k".*db down/)
  failing = false
  await sleep(1100)
  await cache.getOrLoad('k', loader)
  await waitFor(async () => (await cache.getOrLoad('k', loader)) === 'fresh', 'the refresh to succeed', 3000)
  failing = true
  await sleep(70)
  await cache.getOrLoad('k', loader)
  await waitFor(() => mine().length === 2, 'a new streak warns again', 3000)
})

test(
  'without onError, a background refresh that close() gives up while it waits on the fleet is no warning: the application ended it',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const cache = new Cache({ redis: redis.url, prefix: 'cl:', ttl: 50, hardTtl: 60000, beta: 0 })
    const warnings = []
    const onWarning = (w) => warnings.push(w)
    process.on('warning', onWarning)
    t.after(() => process.off('warning', onWarning))
    assert.equal(await cache.getOrLoad('k', () => 'first'), 'first')
    // Another instance holds the key's lock: the refresh waits for its fill.
    await redis.cmd('SET', '{cl:k}:lock', '0b5a1c9e-8f1d-4a5e-9c1b-2f6b1d3e4a5f', 'PX', '10000')
    await sleep(80)
    let loads = 0
    assert.equal(await cache.getOrLoad('k', () => ++loads), 'first', 'the stale value; a refresh starts')
    await waitFor(() => cache.stats().lockContended === 1, 'the refresh to wait on the lock', 3000)
    await cache.close()
    await sleep(50)
    assert.equal(loads, 0)
    assert.deepEqual(
      warnings.filter((w) => w.code === 'HERDCACHE_REFRESH_FAILED').map((w) => w.message),
      [],
    )
  },
)

test(
  'a Redis Cluster none of whose seed nodes answers: ERR_HERDCACHE_REDIS_UNREACHABLE naming the seeds, and the cache serves',
  T,
  async (t) => {
    const free = await freePort()
    const { cache, reports } = watched(t, { cluster: [`redis://:secret@127.0.0.1:${free}`] })
    const error = await within(
      rejectsWith(cache.ready(), 'ERR_HERDCACHE_REDIS_UNREACHABLE'),
      3 * REDIS_TIMEOUT,
      'ready() on an unreachable cluster',
    )
    assert.match(error.message, new RegExp(`Redis Cluster \\(seed nodes 127\\.0\\.0\\.1:${free}\\)`))
    assert.doesNotMatch(error.message, /secret/, 'never the credentials')
    assert.equal(await cache.getOrLoad('k', () => 'v'), 'v', 'fail-open')
    await reportsOnce(cache, reports, 'ERR_HERDCACHE_REDIS_UNREACHABLE', /refused/i)
  },
)
