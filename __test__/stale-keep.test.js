'use strict'
// The loader sees the value this process holds (`ctx.stale`), stores a
// validator with its value (`ctx.setEtag`) and keeps the held value when the
// origin says it has not changed (`ctx.keep()`), on the embedded store.
// With Redis: __test__/redis/stale-keep.test.js.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const { sleep } = require('./helpers')

/** A cache whose entries go stale after 40 ms and are served stale for a minute. */
function shortLived(t, options = {}) {
  const cache = new Cache({ ttl: 40, hardTtl: 60_000, jitter: 0, beta: 0, ...options })
  t.after(() => cache.close())
  return cache
}

test('ctx.stale is undefined on a cold load and the held value, its age and validator on a refresh', async (t) => {
  const cache = shortLived(t)
  const seen = []
  const loader = async (ctx) => {
    seen.push(ctx.stale)
    if (seen.length === 1) ctx.setEtag('W/"1"')
    return { run: seen.length }
  }
  const first = await cache.getOrLoad('k', loader)
  assert.deepEqual(first, { run: 1 })
  await sleep(60)
  const status = {}
  assert.deepEqual(await cache.getOrLoad('k', loader, { status }), { run: 1 })
  assert.equal(status.outcome, 'stale')
  await waitFor(() => seen.length === 2)
  assert.equal(seen[0], undefined, 'a cold load has nothing held')
  assert.equal(seen[1].value, first, 'the very value callers got')
  assert.equal(seen[1].etag, 'W/"1"')
  assert.ok(seen[1].age >= 55 && seen[1].age < 5_000, `age ${seen[1].age} ms`)
  // The refresh set no validator: its value has none.
  await sleep(60)
  await cache.getOrLoad('k', loader)
  await waitFor(() => seen.length === 3)
  assert.deepEqual(seen[2].value, { run: 2 })
  assert.equal(seen[2].etag, undefined)

  // A value past its hard TTL is nothing to see; a primitive and a string are.
  const values = []
  for (const value of ['text', 7]) {
    await cache.getOrLoad(`p${value}`, () => value)
    await cache.getOrLoad(
      `p${value}`,
      (ctx) => {
        values.push(ctx.stale?.value)
        return value
      },
      { forceFresh: true },
    )
  }
  assert.deepEqual(values, ['text', 7], 'forceFresh sees the value it replaces')
  const brief = shortLived(t, { hardTtl: 50 })
  await brief.getOrLoad('gone', () => 1)
  await sleep(80)
  await brief.getOrLoad('gone', (ctx) => {
    values.push(ctx.stale)
    return 2
  })
  assert.equal(values[2], undefined, 'past its hard TTL: nothing held')
})

test('ctx.keep() answers with the held value, fresh for a new TTL, and the next call is a hit', async (t) => {
  const cache = shortLived(t)
  let runs = 0
  const loader = async (ctx) => {
    runs++
    if (ctx.stale) {
      ctx.setTtl(60_000) // the kept value takes the TTL its loader sets
      return ctx.keep()
    }
    ctx.setEtag('"a"')
    return { n: runs }
  }
  const original = await cache.getOrLoad('k', loader)
  await sleep(60)
  const waited = {}
  assert.equal(await cache.getOrLoad('k', loader, { stale: false, status: waited }), original, 'the same object')
  assert.equal(waited.outcome, 'miss')
  assert.equal(runs, 2)
  const hit = {}
  assert.equal(await cache.getOrLoad('k', loader, { status: hit }), original)
  assert.equal(hit.outcome, 'hit', 'kept fresh')
  assert.equal(runs, 2)
  // Its validator was kept with it (forceFresh shows the fresh value).
  let etag
  await cache.getOrLoad(
    'k',
    (ctx) => {
      etag = ctx.stale.etag
      return ctx.keep()
    },
    { forceFresh: true },
  )
  assert.equal(etag, '"a"')

  // A "not found" marker is kept as one (it is never stale: forceFresh sees it).
  const negatives = shortLived(t, { negativeTtl: 5_000 })
  assert.equal(await negatives.getOrLoad('none', () => null), null)
  let stale
  const status = {}
  const kept = await negatives.getOrLoad(
    'none',
    (ctx) => {
      stale = ctx.stale
      return ctx.keep()
    },
    { forceFresh: true, status },
  )
  assert.equal(kept, null)
  assert.deepEqual({ value: stale.value, etag: stale.etag }, { value: null, etag: undefined })
  assert.equal(status.outcome, 'miss')
  const again = {}
  assert.equal(await negatives.getOrLoad('none', () => 'loaded', { status: again }), null)
  assert.equal(again.outcome, 'negative')
})

test('keep() with nothing held and a bad validator reject the load with coded errors, storing nothing', async (t) => {
  const cache = shortLived(t)
  await assert.rejects(
    cache.getOrLoad('cold', (ctx) => ctx.keep()),
    (error) => error.code === 'ERR_HERDCACHE_INVALID_OPTION' && /no value to keep/.test(error.message),
  )
  for (const [bad, type] of [
    [42, TypeError],
    [undefined, TypeError],
    ['', RangeError],
    ['a\nb', RangeError],
    ['x'.repeat(1025), RangeError],
  ]) {
    await assert.rejects(
      cache.getOrLoad('bad', (ctx) => {
        ctx.setEtag(bad)
        return 1
      }),
      (error) => error instanceof type && error.code === 'ERR_HERDCACHE_INVALID_OPTION',
      JSON.stringify(bad),
    )
  }
  assert.equal(await cache.get('cold'), undefined)
  assert.equal(await cache.get('bad'), undefined)
  // The longest validator, multi-byte, is taken.
  const long = 'é'.repeat(512)
  await cache.getOrLoad('long', (ctx) => {
    ctx.setEtag(long)
    return 1
  })
  await sleep(60)
  let seen
  await cache.getOrLoad(
    'long',
    (ctx) => {
      seen = ctx.stale.etag
      return 2
    },
    { stale: false },
  )
  assert.equal(seen, long)
})

test('a load given up while the held value is fetched never calls its loader, and frees its bulkhead slot', async (t) => {
  const cache = shortLived(t, { maxConcurrentLoads: 1 })
  await cache.getOrLoad('k', () => ({ v: 1 }))
  await sleep(60)
  let ran = 0
  const pending = cache.getOrLoad(
    'k',
    () => {
      ran++
      return { v: 2 }
    },
    { stale: false },
  )
  await cache.close()
  await assert.rejects(pending, (error) => error.code === 'ERR_HERDCACHE_CLOSED')
  assert.equal(ran, 0)
})

async function waitFor(pred, timeout = 2000) {
  const until = Date.now() + timeout
  while (!pred()) {
    if (Date.now() > until) assert.fail('timed out')
    await sleep(5)
  }
}
