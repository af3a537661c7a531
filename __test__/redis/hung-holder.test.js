'use strict'
// A loser whose lock holder hangs (its loader never settles, or its
// process is paused): hardTimeout has one owner, the call's JS leader,
// counted from the call. The loser waits for the holder's fill notice, lease
// after lease, and at its own hardTimeout rejects with ERR_HERDCACHE_TIMEOUT,
// its loader never run (README, hardTimeout). Once the holder gives up at
// its own hardTimeout, its lock is released at once and the next call loads.
const test = require('node:test')
const assert = require('node:assert/strict')
const { Cache } = require('../..')
const { startRedis } = require('../redis-server')
const { rejectsWith, track, waitFor } = require('../helpers')

const T = { timeout: 20000 }

test(
  'a loser whose lock holder hangs rejects at its own hardTimeout from the call; then the next call loads',
  T,
  async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const base = { redis: redis.url, prefix: 'hung:', lockTtl: 600 }
    // A's deadline is later than B's, so A holds the lock, extending its
    // lease, through B's whole wait.
    const a = track(t, new Cache({ ...base, hardTimeout: 4000 }))
    const b = track(t, new Cache({ ...base, hardTimeout: 1200 }))
    await Promise.all([a.ready(), b.ready()])
    let aStarted = false
    const aCall = a.getOrLoad('k', () => {
      aStarted = true
      return new Promise(() => {}) // never settles
    })
    await waitFor(() => aStarted, "A's loader to run (A holds the lock)", 3000)
    let bRuns = 0
    const began = performance.now()
    const err = await rejectsWith(
      b.getOrLoad('k', () => {
        bRuns++
        return 'from b'
      }),
      'ERR_HERDCACHE_TIMEOUT',
    )
    const took = performance.now() - began
    assert.equal(bRuns, 0, "B's loader never ran: the fleet's lock was held all along")
    assert.match(err.message, /another instance held the fleet lock/, 'the error says why')
    // Its own hardTimeout from the call: not earlier, and not a lease or a
    // hardTimeout later (slack for a busy 2-core host).
    assert.ok(took >= 1150, `rejected after ${took.toFixed(0)} ms, at B's hardTimeout (1200 ms)`)
    assert.ok(took < 1200 + 500, `rejected after ${took.toFixed(0)} ms: at B's hardTimeout, not later`)
    assert.ok(b.stats().timeouts >= 1)
    // A gives up at its hardTimeout and releases the lock at once: B's next
    // call runs B's own loader (within a lease of the release).
    await rejectsWith(aCall, 'ERR_HERDCACHE_TIMEOUT')
    const released = performance.now()
    assert.equal(await b.getOrLoad('k', () => 'from b'), 'from b', "B's own loader answers once the holder gave up")
    assert.ok(performance.now() - released < 600 + 500, 'within a lease of the release')
    assert.equal(await a.getOrLoad('k', () => 'WRONG'), 'from b', 'and the fleet reads it')
  },
)
