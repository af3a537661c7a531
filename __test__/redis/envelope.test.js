'use strict'
// DESIGN §4: the envelope under the value key. Foreign or corrupt values are a
// counted miss, never a crash; a late lock holder cannot overwrite a newer value.
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { Cache } = require('../..')
const { track, counted, gatedLoader } = require('../helpers')
const { sleep, waitFor, within, parseEnvelope, names, storedEnvelope, lockReleased } = require('./fixtures/fleet')

const T = { timeout: 10000 }

function corruptCases() {
  const now = Date.now()
  const later = now + 600000
  return {
    'plain text': 'hello world',
    'an empty string': '',
    'JSON without a header': '{"a":1}',
    'a truncated header': 'hc1 123',
    'a header without its value line': `hc1 ${later} ${later} 1 ${now} v`,
    'header fields that are not numbers': 'hc1 x y z w v\n1',
    'an unknown flag': `hc1 ${later} ${later} 1 ${now} q\n1`,
    'a future version': `hc9 ${later} ${later} 1 ${now} v\n1`,
    'a value line that is not JSON': `hc1 ${later} ${later} 1 ${now} v\n{not json`,
    'binary bytes': Buffer.from([0xff, 0xfe, 0x00, 0x01, 0x0a, 0x80]),
  }
}

test(
  'a corrupt or foreign value under a key is a miss, counted in corruptValues, then overwritten with an envelope',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'cor:'
    const cache = track(t, new Cache({ redis: redis.url, prefix }))
    const reader = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
    let i = 0
    for (const [name, raw] of Object.entries(corruptCases())) {
      i++
      const key = `c${i}`
      await redis.cmd('SET', names(prefix, key).value, raw)
      const before = cache.stats().corruptValues
      const loader = counted(() => ({ fixed: i }))
      const status = {}
      const v = await within(cache.getOrLoad(key, loader, { status }), 3000, name)
      assert.deepEqual(v, { fixed: i }, `${name}: the loader's value is returned`)
      assert.equal(loader.calls, 1, `${name}: treated as a miss`)
      assert.equal(status.outcome, 'miss', name)
      assert.equal(cache.stats().corruptValues, before + 1, `${name}: counted once in corruptValues`)
      // overwritten with an hc1 envelope
      const env = await storedEnvelope(redis, names(prefix, key).value, (e) => e.value?.fixed === i)
      assert.deepEqual(env.value, { fixed: i }, name)
      // Another instance now reads it from Redis without loading.
      const rs = {}
      assert.deepEqual(
        await reader.getOrLoad(key, () => 'WRONG', { status: rs }),
        { fixed: i },
        `${name}: readable by another instance`,
      )
      assert.equal(rs.outcome, 'hit', name)
    }
    assert.equal(reader.stats().corruptValues, 0)
    assert.equal(reader.stats().redisHits, i)
    assert.equal(cache.stats().redisErrors, 0, 'a corrupt value is not a Redis error')
    assert.equal(cache.stats().circuitOpen, 0)
  },
)

test('get() of a corrupt value is undefined, never a rejection', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'corget:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
  await redis.cmd('SET', names(prefix, 'k').value, 'garbage')
  assert.equal(await cache.get('k'), undefined)
})

test('a value of another Redis type (a list) under a key is a miss, counted, then overwritten', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'type:'
  const cache = track(t, new Cache({ redis: redis.url, prefix }))
  await redis.cmd('RPUSH', names(prefix, 'k').value, 'a', 'b')
  const loader = counted(() => 'ok')
  assert.equal(await within(cache.getOrLoad('k', loader), 3000, 'getOrLoad over a list'), 'ok')
  assert.equal(loader.calls, 1)
  assert.ok(
    cache.stats().corruptValues >= 1,
    `counted as a corrupt value (corruptValues ${cache.stats().corruptValues}, redisErrors ${cache.stats().redisErrors})`,
  )
  await storedEnvelope(redis, names(prefix, 'k').value, (e) => e.value === 'ok') // overwritten with an envelope
})

test('an envelope written by hand in the documented format is read as such (value, negative, stale)', T, async (t) => {
  const redis = await startRedis(t)
  if (!redis) return
  const prefix = 'hand:'
  const cache = track(t, new Cache({ redis: redis.url, prefix, beta: 0 }))
  const now = Date.now()
  await redis.cmd(
    'SET',
    names(prefix, 'fresh').value,
    `hc1 ${now + 60000} ${now + 600000} 5 ${now} v\n{"hand":[1,2]}`,
    'PX',
    600000,
  )
  await redis.cmd(
    'SET',
    names(prefix, 'neg').value,
    `hc1 ${now + 60000} ${now + 600000} 5 ${now} n\nnull`,
    'PX',
    600000,
  )
  await redis.cmd(
    'SET',
    names(prefix, 'stale').value,
    `hc1 ${now - 1000} ${now + 600000} 5 ${now - 2000} v\n"old"`,
    'PX',
    600000,
  )

  const never = counted(() => 'WRONG')
  let status = {}
  assert.deepEqual(await cache.getOrLoad('fresh', never, { status }), { hand: [1, 2] })
  assert.equal(status.outcome, 'hit')
  status = {}
  const neg = await cache.getOrLoad('neg', never, { status })
  assert.ok(neg === undefined || neg === null, `a negative marker reads as "not found": ${neg}`)
  assert.equal(status.outcome, 'negative')
  assert.equal(never.calls, 0)
  assert.equal(cache.stats().redisHits, 2)

  const refresh = counted(() => 'new')
  status = {}
  assert.equal(await cache.getOrLoad('stale', refresh, { status }), 'old')
  assert.equal(status.outcome, 'stale')
  await waitFor(
    async () => parseEnvelope(await redis.cmd('GET', names(prefix, 'stale').value))?.value === 'new',
    'the refresh in Redis',
    3000,
  )
  assert.equal(refresh.calls, 1)
  assert.equal(cache.stats().corruptValues, 0)
})

test(
  'a late lock holder cannot overwrite a newer value: A loads slowly, B sets meanwhile, Redis keeps B',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'late:'
    const key = names(prefix, 'k')
    const a = track(t, new Cache({ redis: redis.url, prefix }))
    const b = track(t, new Cache({ redis: redis.url, prefix }))

    const loader = gatedLoader()
    const pa = a.getOrLoad('k', loader)
    await waitFor(() => loader.calls === 1, "A's loader starting")
    assert.ok(await redis.cmd('GET', key.lock), 'A holds the lock')
    await sleep(30) // B's write is strictly later than the start of A's load (coarse clock)
    await b.set('k', 'fromB')
    assert.equal(parseEnvelope(await redis.cmd('GET', key.value))?.value, 'fromB')

    loader.runs[0].resolve('fromA-late')
    await within(
      pa.catch(() => {}),
      3000,
      "A's call",
    )
    await waitFor(() => a.stats().inFlight === 0, "A's load to finish")
    await lockReleased(redis, key.lock) // A's write (or its refusal) is done
    await sleep(50)
    const env = parseEnvelope(await redis.cmd('GET', key.value))
    assert.equal(env?.value, 'fromB', `GET shows B's newer value, not A's late one: ${JSON.stringify(env)}`)

    // Every instance agrees on B's value, A included (its L1 must not keep its late result).
    const c = track(t, new Cache({ redis: redis.url, prefix }))
    assert.equal(await c.getOrLoad('k', () => 'WRONG'), 'fromB')
    await waitFor(
      async () => (await a.getOrLoad('k', () => 'WRONG')) === 'fromB',
      "A's own callers seeing B's value",
      1000,
    )
    assert.equal(await b.getOrLoad('k', () => 'WRONG'), 'fromB')
  },
)

test(
  'a late writer cannot overwrite a newer value written by another load either (a newer stamp wins)',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'late2:'
    const key = names(prefix, 'k')
    const cache = track(t, new Cache({ redis: redis.url, prefix }))
    const loader = gatedLoader()
    const p = cache.getOrLoad('k', loader)
    await waitFor(() => loader.calls === 1, 'the load starting')
    // Another writer (another instance whose load started later) put a newer envelope there.
    const now = Date.now() + 1000
    const newer = `hc1 ${now + 60000} ${now + 600000} 3 ${now} v\n"newer"`
    await redis.cmd('SET', key.value, newer, 'PX', 600000)
    loader.runs[0].resolve('older')
    await within(
      p.catch(() => {}),
      3000,
      'the call',
    )
    await waitFor(() => cache.stats().inFlight === 0, 'the load to finish')
    await lockReleased(redis, key.lock)
    await sleep(50)
    assert.equal(
      parseEnvelope(await redis.cmd('GET', key.value))?.value,
      'newer',
      'the envelope with the newer stamp is kept',
    )
  },
)

test(
  'a corrupt entry with a stamp the reader rejects, or a newer stamp over a bad value, is overwritten once',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const prefix = 'stamp:'
    const now = Date.now()
    const later = now + 600000
    const cases = {
      'a stamp past u64': `hc1 ${later} ${later} 1 ${'9'.repeat(25)} v\n1`,
      'a stamp past the digit limit': `hc1 ${later} ${later} 1 ${'9'.repeat(16)} v\n1`,
      'a newer stamp over a value that is not JSON': `hc1 ${later} ${later} 1 ${now + 10 ** 9} v\n{not json`,
      'a newer stamp over bytes that are not UTF-8': Buffer.concat([
        Buffer.from(`hc1 ${later} ${later} 1 ${now + 10 ** 9} v\n"`),
        Buffer.from([0xff, 0xfe, 0x22]),
      ]),
    }
    for (const [name, raw] of Object.entries(cases)) {
      const key = `k:${name.length}`
      await redis.cmd('SET', names(prefix, key).value, raw)
      const writer = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
      const loader = counted(() => `fresh for ${name}`)
      assert.equal(await writer.getOrLoad(key, loader), `fresh for ${name}`, name)
      assert.equal(writer.stats().corruptValues, 1, name)
      assert.match(
        await redis.cmd('GET', names(prefix, key).value),
        new RegExp(`fresh for ${name}`),
        `${name}: replaced in Redis`,
      )
      // Every other instance now reads the value instead of reloading it.
      const reader = track(t, new Cache({ redis: redis.url, prefix, l1: false }))
      const again = counted(() => 'reloaded')
      assert.equal(await reader.getOrLoad(key, again), `fresh for ${name}`, name)
      assert.equal(again.calls, 0, name)
      assert.equal(loader.calls, 1, name)
    }
  },
)
