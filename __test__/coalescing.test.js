'use strict'
// R1, R11: in-process coalescing (singleflight), caller signals, loader context, key encoding.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h
const det = (opts = {}) => new Cache({ jitter: 0, beta: 0, ...opts })

test('R11: delete the key, 500 concurrent getOrLoad via Promise.all -> the loader runs exactly once', T, async (t) => {
  const cache = h.track(t, det())
  await cache.set('feed:home', { v: 0 })
  assert.equal(await cache.delete('feed:home'), true)

  const loader = h.slowLoader(20, () => ({ v: 1, items: [1, 2, 3] }))
  const results = await Promise.all(Array.from({ length: 500 }, () => cache.getOrLoad('feed:home', loader)))

  assert.equal(loader.calls, 1)
  assert.equal(results.length, 500)
  for (const r of results) assert.deepEqual(r, { v: 1, items: [1, 2, 3] })
  const s = cache.stats()
  assert.equal(s.loads, 1)
  assert.equal(s.misses, 1)
  assert.equal(s.coalesced, 499)

  // The result was stored: the next call is a hit and does not load.
  assert.deepEqual(await cache.getOrLoad('feed:home', loader), { v: 1, items: [1, 2, 3] })
  assert.equal(loader.calls, 1)
})

test('R11: 500 concurrent callers of an array key share one load', T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.slowLoader(20, 'feed-t1-en')
  const results = await Promise.all(Array.from({ length: 500 }, () => cache.getOrLoad(['feed', 't1', 'en'], loader)))
  assert.equal(loader.calls, 1)
  assert.ok(results.every((r) => r === 'feed-t1-en'))
})

test('a synchronous loader is also run once for callers in the same tick', T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.counted(() => ({ sync: true }))
  const results = await Promise.all(Array.from({ length: 100 }, () => cache.getOrLoad('sync', loader)))
  assert.equal(loader.calls, 1)
  for (const r of results) assert.deepEqual(r, { sync: true })
})

test('callers of one flight share the value (the same object)', T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.slowLoader(10, () => ({ shared: [1] }))
  const results = await Promise.all(Array.from({ length: 10 }, () => cache.getOrLoad('shared', loader)))
  assert.equal(loader.calls, 1)
  for (const r of results) assert.equal(r, results[0])
})

test('different keys load independently and concurrently', T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.gatedLoader()
  const pa = cache.getOrLoad('a', loader)
  const pb = cache.getOrLoad('b', loader)
  await h.waitFor(() => loader.calls === 2, 'both loads to start')
  loader.runs[1].resolve('B')
  assert.equal(await pb, 'B')
  loader.runs[0].resolve('A')
  assert.equal(await pa, 'A')
})

test('a rejection reaches every waiter once, as the very same error object, and is not reused', T, async (t) => {
  const cache = h.track(t, det())
  const err = new Error('db down')
  const loader = h.counted(async () => {
    await h.sleep(10)
    throw err
  })
  const settled = await Promise.allSettled(Array.from({ length: 50 }, () => cache.getOrLoad('k', loader)))
  assert.equal(loader.calls, 1)
  for (const s of settled) {
    assert.equal(s.status, 'rejected')
    assert.equal(s.reason, err, 'every waiter gets the loader error object itself')
  }
  assert.equal(await cache.get('k'), undefined, 'an error is never cached')

  // The next call starts a fresh load, and a fresh error is not confused with the old one.
  const err2 = new Error('still down')
  const loader2 = h.counted(async () => {
    await h.sleep(5)
    throw err2
  })
  const settled2 = await Promise.allSettled(Array.from({ length: 5 }, () => cache.getOrLoad('k', loader2)))
  assert.equal(loader2.calls, 1)
  for (const s of settled2) assert.equal(s.reason, err2)

  const ok = h.counted(() => 'ok')
  assert.equal(await cache.getOrLoad('k', ok), 'ok')
  assert.equal(ok.calls, 1)
})

test(
  'a caller AbortSignal rejects only that caller with signal.reason; the load goes on for the others',
  T,
  async (t) => {
    const cache = h.track(t, det())
    const loader = h.gatedLoader()
    const ac = new AbortController()
    const leader = cache.getOrLoad('k', loader, { signal: ac.signal }) // this caller started the load
    const other = cache.getOrLoad('k', loader)
    const other2 = cache.getOrLoad('k', loader)
    await h.waitFor(() => loader.calls === 1, 'the load to start')

    const reason = new Error('client went away')
    ac.abort(reason)
    let got
    try {
      await leader
      assert.fail('the aborted caller must reject')
    } catch (e) {
      got = e
    }
    assert.equal(got, reason, 'rejects with the signal reason itself')
    assert.equal(loader.runs[0].ctx.signal.aborted, false, "a caller's abort never aborts the loader signal")

    loader.runs[0].resolve('value')
    assert.equal(await other, 'value')
    assert.equal(await other2, 'value')
    assert.equal(loader.calls, 1)
    assert.equal(await cache.get('k'), 'value', 'the shared load is stored')
  },
)

test('a joining caller that aborts does not disturb the leader', T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.gatedLoader()
  const leader = cache.getOrLoad('k', loader)
  const ac = new AbortController()
  const joiner = cache.getOrLoad('k', loader, { signal: ac.signal })
  await h.waitFor(() => loader.calls === 1, 'the load to start')
  ac.abort() // default reason (an AbortError DOMException)
  await assert.rejects(joiner, (e) => e === ac.signal.reason)
  assert.equal(loader.runs[0].ctx.signal.aborted, false)
  loader.runs[0].resolve(7)
  assert.equal(await leader, 7)
  assert.equal(loader.calls, 1)
})

test('when the only caller aborts, the load is not cancelled and its result is stored', T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.gatedLoader()
  const ac = new AbortController()
  const p = cache.getOrLoad('solo', loader, { signal: ac.signal })
  await h.waitFor(() => loader.calls === 1, 'the load to start')
  ac.abort(new Error('bye'))
  await assert.rejects(p, /bye/)
  assert.equal(loader.runs[0].ctx.signal.aborted, false)
  loader.runs[0].resolve('landed')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the load to land')
  assert.equal(await cache.get('solo'), 'landed')
  assert.equal(await cache.getOrLoad('solo', loader), 'landed')
  assert.equal(loader.calls, 1)
})

test('an already-aborted signal rejects that call with its reason', T, async (t) => {
  const cache = h.track(t, det())
  const reason = new Error('already gone')
  const loader = h.slowLoader(5, 'x')
  const p = h.callAsync(() => cache.getOrLoad('pre', loader, { signal: AbortSignal.abort(reason) }))
  await assert.rejects(p, (e) => e === reason)
})

test('the loader gets { key, signal } with the key as passed (string and array)', T, async (t) => {
  const cache = h.track(t, det({ prefix: 'ns:' }))
  const loader = h.counted(() => 'v')
  await cache.getOrLoad('user:42', loader)
  const arrayKey = ['feed', 't1', 'en', 7]
  await cache.getOrLoad(arrayKey, loader)
  assert.equal(loader.calls, 2)

  const [c1, c2] = loader.ctxs
  assert.equal(c1.key, 'user:42', 'string key as passed (no prefix, no escaping)')
  assert.deepEqual(c2.key, ['feed', 't1', 'en', 7], 'array key as passed')
  for (const ctx of [c1, c2]) {
    assert.ok(ctx.signal instanceof AbortSignal, 'signal is an AbortSignal')
    assert.equal(ctx.signal.aborted, false)
  }
})

test("the loader's signal aborts on hardTimeout; callers reject with ERR_HERDCACHE_TIMEOUT", T, async (t) => {
  const cache = h.track(t, det({ hardTimeout: 100 }))
  let abortedAt = 0
  const loader = h.counted(
    ({ signal }) =>
      new Promise((_, reject) => {
        signal.addEventListener('abort', () => {
          abortedAt = Date.now()
          reject(signal.reason)
        })
      }),
  )
  const started = Date.now()
  const results = await Promise.allSettled([cache.getOrLoad('slow', loader), cache.getOrLoad('slow', loader)])
  for (const r of results) {
    assert.equal(r.status, 'rejected')
    assert.equal(r.reason.code, 'ERR_HERDCACHE_TIMEOUT')
  }
  assert.equal(loader.calls, 1)
  assert.equal(loader.ctxs[0].signal.aborted, true, 'the loader signal aborted at hardTimeout')
  assert.ok(abortedAt - started >= 80, `aborted after ~100 ms, got ${abortedAt - started}`)
  assert.equal(await cache.get('slow'), undefined)

  // The given-up flight is over: the next call starts a new load.
  const ok = h.counted(() => 'ok')
  assert.equal(await cache.getOrLoad('slow', ok), 'ok')
  assert.equal(ok.calls, 1)
})

test("close() aborts the loader's signal and resolves once the load has settled", T, async (t) => {
  const cache = det()
  let settledAt = 0
  const loader = h.counted(
    ({ signal }) =>
      new Promise((_, reject) => {
        signal.addEventListener('abort', () =>
          setTimeout(() => {
            settledAt = Date.now()
            reject(signal.reason)
          }, 30),
        )
      }),
  )
  const p = cache.getOrLoad('k', loader)
  const outcome = p.then(
    () => 'resolved',
    () => 'rejected',
  )
  await h.waitFor(() => loader.calls === 1, 'the load to start')
  assert.equal(loader.ctxs[0].signal.aborted, false)

  await h.within(cache.close(), 3000, 'close()')
  const closedAt = Date.now()
  assert.equal(loader.ctxs[0].signal.aborted, true, 'close() aborts loads in flight')
  assert.ok(settledAt > 0 && closedAt >= settledAt, 'close() resolves after the load settled')
  assert.equal(await outcome, 'rejected')
})

test('a loader that calls getOrLoad on its own key waits for itself until hardTimeout', T, async (t) => {
  const cache = h.track(t, det({ hardTimeout: 150 }))
  const loader = h.counted(async () => cache.getOrLoad('self', loader))
  const started = Date.now()
  await h.rejectsWith(cache.getOrLoad('self', loader), 'ERR_HERDCACHE_TIMEOUT')
  assert.ok(Date.now() - started >= 120)
  assert.equal(loader.calls, 1)
})

// ---- keys -----------------------------------------------------------------

async function assertDistinct(cache, k1, k2) {
  const l1 = h.counted(() => ({ from: 'first' }))
  const l2 = h.counted(() => ({ from: 'second' }))
  assert.deepEqual(await cache.getOrLoad(k1, l1), { from: 'first' })
  assert.deepEqual(
    await cache.getOrLoad(k2, l2),
    { from: 'second' },
    `${JSON.stringify(k2)} must not read the entry of ${JSON.stringify(k1)}`,
  )
  assert.equal(l1.calls, 1)
  assert.equal(l2.calls, 1)
  // and both are cached under their own key
  assert.deepEqual(await cache.getOrLoad(k1, l2), { from: 'first' })
  assert.deepEqual(await cache.getOrLoad(k2, l1), { from: 'second' })
  assert.equal(l1.calls + l2.calls, 2)
}

test("array keys never collide: ['a:b','c'] vs ['a','b:c']", T, async (t) => {
  const cache = h.track(t, det())
  await assertDistinct(cache, ['a:b', 'c'], ['a', 'b:c'])
})

test("array keys never collide: ['feed','t','en'] vs ['feed','ten']", T, async (t) => {
  const cache = h.track(t, det())
  await assertDistinct(cache, ['feed', 't', 'en'], ['feed', 'ten'])
})

test('array keys never collide: escape characters, empty parts, single parts containing ":"', T, async (t) => {
  const cache = h.track(t, det())
  await assertDistinct(cache, ['a\\', 'b'], ['a', '\\b'])
  await assertDistinct(cache, ['x\\:y'], ['x\\', 'y'])
  await assertDistinct(cache, ['e', ''], ['e'])
  await assertDistinct(cache, ['p:q'], 'p:q') // 'p:q' is ['p','q'], not ['p:q']
})

test("a string key is used as it is: 'a:b' is the same key as ['a','b']", T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.counted(() => 'ab')
  assert.equal(await cache.getOrLoad('a:b', loader), 'ab')
  const other = h.counted(() => 'other')
  assert.equal(await cache.getOrLoad(['a', 'b'], other), 'ab')
  assert.equal(other.calls, 0)

  await cache.set(['feed', 't1', 'en'], 'via-array')
  assert.equal(await cache.get('feed:t1:en'), 'via-array')
  assert.equal(await cache.delete('feed:t1:en'), true)
  assert.equal(await cache.get(['feed', 't1', 'en']), undefined)
})

test('numbers are valid key parts and distinct numbers are distinct keys', T, async (t) => {
  const cache = h.track(t, det())
  const loader = h.counted((ctx) => ({ key: ctx.key }))
  assert.deepEqual(await cache.getOrLoad(['user', 42], loader), { key: ['user', 42] })
  assert.deepEqual(await cache.getOrLoad(['user', 42], loader), { key: ['user', 42] })
  assert.equal(loader.calls, 1, 'the same numeric key is a hit')
  assert.deepEqual(await cache.getOrLoad(['user', 43], loader), { key: ['user', 43] })
  assert.equal(loader.calls, 2)
  await assertDistinct(cache, ['n', 4, 2], ['n', 42])
  await assertDistinct(cache, ['f', 1.5], ['f', 15])
  await assertDistinct(cache, ['z', -1], ['z', 1])
  assert.equal(await cache.getOrLoad([0], () => 'zero'), 'zero')
})
