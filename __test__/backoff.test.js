'use strict'
// The refresh back-off: after a failed background refresh, the key's next one waits 250 ms, doubling with
// each failure in a row up to refreshBackoff, jittered down by up to 15 %; a success starts again at 250 ms.
// The test clock is an offset on real time, which moves on a few ms between steps: each "not yet" check is made
// MARGIN ms before the back-off ends.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('..')
const h = require('./helpers')

const { T } = h
const MARGIN = 40

/** Serves `key` stale with `loader` and waits for what the background refresh did. */
async function staleRead(cache, key, loader) {
  const status = {}
  await cache.getOrLoad(key, loader, { status })
  assert.equal(status.outcome, 'stale')
  await h.waitFor(() => cache.stats().inFlight === 0, 'the refresh to settle')
}

test('failed refreshes back off 250, 500, 1000 ms… up to refreshBackoff; a success resets', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 1000, hardTtl: 600000, jitter: 0, beta: 0, refreshBackoff: 5000 }))
  h.setRandom(cache, { jitter: 1 }) // the back-off's draw too: no jitter taken off
  await cache.getOrLoad('k', () => 'v1')
  const failing = h.counted(() => {
    throw new Error('db down')
  })
  h.advance(cache, 1000)
  await staleRead(cache, 'k', failing)
  assert.equal(failing.calls, 1)
  for (const [i, delay] of [250, 500, 1000, 2000, 4000, 5000, 5000].entries()) {
    h.advance(cache, delay - MARGIN)
    await staleRead(cache, 'k', failing)
    assert.equal(failing.calls, i + 1, `no refresh before the back-off of ${delay} ms ends`)
    h.advance(cache, MARGIN)
    await staleRead(cache, 'k', failing)
    assert.equal(failing.calls, i + 2, `a refresh once ${delay} ms passed`)
  }
  assert.equal(cache.stats().backgroundErrors, 8)

  // Recovery: the next due refresh succeeds, and the next failure backs off 250 ms again.
  h.advance(cache, 5000)
  await staleRead(cache, 'k', () => 'v2')
  assert.equal(await cache.get('k', { stale: false }), 'v2')
  h.advance(cache, 1000)
  await staleRead(cache, 'k', failing)
  assert.equal(failing.calls, 9)
  h.advance(cache, 250 - MARGIN)
  await staleRead(cache, 'k', failing)
  assert.equal(failing.calls, 9, 'backing off')
  h.advance(cache, MARGIN)
  await staleRead(cache, 'k', failing)
  assert.equal(failing.calls, 10, 'the count started again: 250 ms')
})

test('the back-off jitter takes up to 15 % off each delay', T, async (t) => {
  const cache = h.track(t, new Cache({ ttl: 1000, hardTtl: 600000, jitter: 0, beta: 0 }))
  h.setRandom(cache, { jitter: 0 }) // the earliest draw: 250 ms × 0.85 = 213 ms, then 425 ms
  await cache.getOrLoad('k', () => 'v1')
  const failing = h.counted(() => Promise.reject(new Error('db down')))
  h.advance(cache, 1000)
  await staleRead(cache, 'k', failing)
  for (const [i, delay] of [213, 425].entries()) {
    h.advance(cache, delay - MARGIN)
    await staleRead(cache, 'k', failing)
    assert.equal(failing.calls, i + 1, `no refresh before ${delay} ms`)
    h.advance(cache, MARGIN)
    await staleRead(cache, 'k', failing)
    assert.equal(failing.calls, i + 2, `a refresh at ${delay} ms`)
  }
})

test('refreshBackoff: 0 turns the back-off off; below 250 ms it is every delay', T, async (t) => {
  const off = h.track(t, new Cache({ ttl: 1000, hardTtl: 600000, jitter: 0, beta: 0, refreshBackoff: 0 }))
  await off.getOrLoad('k', () => 'v1')
  const failing = h.counted(() => Promise.reject(new Error('db down')))
  h.advance(off, 1000)
  await staleRead(off, 'k', failing)
  await staleRead(off, 'k', failing)
  assert.equal(failing.calls, 2, 'every stale read may refresh again')

  const short = h.track(t, new Cache({ ttl: 1000, hardTtl: 600000, jitter: 0, beta: 0, refreshBackoff: 100 }))
  h.setRandom(short, { jitter: 1 })
  await short.getOrLoad('k', () => 'v1')
  const failing2 = h.counted(() => Promise.reject(new Error('db down')))
  h.advance(short, 1000)
  for (let i = 1; i <= 3; i++) {
    await staleRead(short, 'k', failing2)
    assert.equal(failing2.calls, i)
    h.advance(short, 100 - MARGIN)
    await staleRead(short, 'k', failing2)
    assert.equal(failing2.calls, i, 'backing off')
    h.advance(short, MARGIN)
  }
})
