'use strict'
// Runs one fault-matrix cell (cells.js) on a real server: the operation of
// its row under its column's fault, asserting the bound, what the caller got,
// and what was kept (in Redis once it answers) or reported. Not a test file.
const assert = require('node:assert/strict')
const { Cache } = require('../../..')
const { sleep, waitFor } = require('../../helpers')
const IORedis = require('ioredis')
const { OPTIONS, LOAD_MS, DELIVERED_WITHIN, TRACKED_WITHIN, boundMs } = require('./cells')

/** ms between the pre-state's write and the call (more than the clocks' error). */
const PRE_STATE_AGE = 50

const loader = (value) => async () => {
  await sleep(LOAD_MS)
  return value
}

/** What the compressed `set` writes: a JSON text zstd shrinks. */
const COMPRESSIBLE = 'new '.repeat(2000)

/** Pre-state in Redis, written by `admin` (a healthy l1: false cache of the same prefix). */
const PRE = {
  delete: (a) => a.set('d', 'old'),
  expire: (a) => a.set('e', 'old'),
  deleteByTag: (a) => a.set('t', 'old', { tags: ['tg'] }),
  clear: (a) => a.set('c', 'old'),
  nsClear: async (a) => {
    await a.namespace('ns').set('n', 'old')
    await a.set('other', 'kept')
  },
}

/** The write is in Redis: read back through `admin` (no L1). */
const DELIVERED = {
  set: async (a) => (await a.get('s')) === 'new',
  setCompressed: async (a) => (await a.get('z')) === COMPRESSIBLE,
  delete: async (a) => (await a.get('d')) === undefined,
  expire: async (a) => (await a.get('e', { stale: false })) === undefined && (await a.get('e')) === 'old',
  deleteByTag: async (a) => (await a.get('t')) === undefined,
  clear: async (a) => (await a.get('c')) === undefined,
  nsClear: async (a) => (await a.namespace('ns').get('n')) === undefined && (await a.get('other')) === 'kept',
}

/** Warm-ups in the cache's own L1, before the fault (or, never reached, during it, by the loader). */
async function warm(c, cache) {
  if (c.row === 'warm' || c.row === 'forceFresh' || c.row === 'tracked') {
    assert.equal(await cache.getOrLoad('w', loader('W')), 'W')
  }
  if (c.row === 'pastL1') {
    assert.equal(await cache.getOrLoad('p', loader('W')), 'W')
    await sleep(150)
  }
  if (c.row === 'stale' || c.row === 'keep') {
    assert.equal(await cache.getOrLoad('st', loader('old'), { ttl: 100, hardTtl: 60000 }), 'old')
    await sleep(150)
  }
}

/** A loader that counts its run in `runs` and answers 'L' after `LOAD_MS`. */
function slowLoad(runs) {
  return async () => {
    runs.n++
    await sleep(LOAD_MS)
    return 'L'
  }
}

/** The call itself; resolves to what the caller got. */
async function call(c, cache, runs) {
  switch (c.row) {
    case 'cold':
      return cache.getOrLoad('k', slowLoad(runs))
    case 'warm':
    case 'tracked':
      return cache.getOrLoad('w', () => {
        runs.n++
        return 'WRONG'
      })
    case 'pastL1':
      return cache.getOrLoad('p', slowLoad(runs))
    case 'pastL1Bytes':
      return cache.getOrLoad('big', slowLoad(runs))
    case 'forceFresh':
    case 'noL1':
    case 'noRedis': {
      const options = { forceFresh: { key: 'w', forceFresh: true }, noL1: { l1: false }, noRedis: { redis: false } }
      const { key = 'k', ...tiers } = options[c.row]
      return cache.getOrLoad(key, slowLoad(runs), tiers)
    }
    case 'stale':
      return cache.getOrLoad('st', loader('new'), { ttl: 100, hardTtl: 60000 })
    case 'keep':
      return cache.getOrLoad(
        'st',
        async (ctx) => {
          runs.n++
          await sleep(LOAD_MS)
          return ctx.keep()
        },
        { ttl: 100, hardTtl: 60000, stale: false },
      )
    case 'get':
      return cache.get('missing')
    case 'set':
      return cache.set('s', 'new')
    case 'setCompressed':
      return cache.set('z', COMPRESSIBLE)
    case 'delete':
      return cache.delete('d')
    case 'expire':
      return cache.expire('e')
    case 'deleteByTag':
      return cache.deleteByTag('tg')
    case 'clear':
      return cache.clear()
    case 'nsClear':
      return cache.namespace('ns').clear()
    case 'many':
      return cache.getOrLoadMany(['m1', 'm2'], async (keys) => {
        await sleep(LOAD_MS)
        return keys.map((k) => `L:${k}`)
      })
    case 'fleetCap':
      return cache.getOrLoad('f', loader('F'))
    case 'ready':
      return cache.ready().then(
        () => ({ resolved: true }),
        (error) => ({ error }),
      )
    case 'close':
      return cache.close()
  }
}

/** What the caller got, checked against the cell. */
function checkGot(c, column, got, runs, reports) {
  const at = `${column.id} × ${c.row}`
  switch (c.gets) {
    case 'loader':
      if (c.row === 'many') assert.deepEqual(got, ['L:m1', 'L:m2'], at)
      else assert.equal(got, c.row === 'fleetCap' ? 'F' : 'L', at)
      break
    case 'l1':
      assert.equal(got, 'W', at)
      assert.equal(runs.n, 0, `${at}: no load`)
      break
    case 'l1OrLoader':
      assert.equal(got, runs.n === 0 ? 'W' : 'L', at)
      if (!column.reached) assert.equal(runs.n, 0, `${at}: Redis never reached: the copy, no load`)
      break
    case 'stale':
      assert.equal(got, 'old', at)
      break
    case 'kept':
      assert.equal(got, 'old', at)
      assert.equal(runs.n, 1, `${at}: one load, which kept the value`)
      break
    case 'undefined':
      assert.equal(got, undefined, at)
      break
    case 'resolved':
      if (c.row === 'delete' || c.row === 'expire') assert.equal(typeof got, 'boolean', at)
      else assert.equal(got, undefined, at)
      break
    case 'ready':
      if (!column.reached) {
        assert.ok(got.error, `${at}: ready() rejects`)
        assert.ok(column.codes.includes(got.error.code), `${at}: ready() rejected with ${got.error.code}`)
      } else if (got.error) {
        assert.match(String(got.error.code), /^ERR_HERDCACHE_REDIS_/, `${at}: a coded rejection`)
      }
      break
    case 'resolves':
      assert.deepEqual(got, { resolved: true }, at)
      break
    case 'closed': {
      const u = reports.find((r) => r.code === 'ERR_HERDCACHE_UNDELIVERED')
      assert.ok(u, `${at}: close() reports what it could not deliver (${reports.map((r) => r.code)})`)
      assert.ok(u.keys.includes('u'), `${at}: names the key: ${u.keys}`)
      break
    }
    case 'closedEither':
      break // checked once Redis answers again (runCell)
    case 'closedDelivered':
      assert.ok(!reports.some((r) => r.code === 'ERR_HERDCACHE_UNDELIVERED'), `${at}: nothing undelivered`)
      break
  }
}

/**
 * The `tracked` row, once Redis answers again: `write()` changes the key
 * `w` outside herdcache, and the cache's L1 lets go of its copy within
 * TRACKED_WITHIN (tracking is back by then).
 */
async function seesOutsideWrite(c, column, cache, write) {
  const at = `${column.id} × ${c.row}`
  const within = boundMs(TRACKED_WITHIN)
  await waitFor(() => cache.stats().redisTracking === 1, `${at}: tracking back`, within)
  await write()
  await waitFor(
    async () => (await cache.getOrLoad('w', () => 'reloaded')) !== 'W',
    `${at}: the outside write seen`,
    within,
  )
}

/**
 * One cell on one node. `env`: { url, adminUrl, inject(), heal(), codes }
 * of the column; a fresh cache per cell, under a prefix of its own.
 */
async function runCell(column, c, env) {
  const prefix = `fm:${column.id}:${c.row}:`
  const reports = []
  const options = { ...OPTIONS, prefix, ttl: 60000, ...(c.options ?? {}), onError: (e) => reports.push(e) }
  const admin = new Cache({ ...OPTIONS, redis: env.adminUrl, prefix, l1: false })
  let cache
  let healed = false
  const heal = async () => {
    if (!healed) await env.heal()
    healed = true
  }
  try {
    await admin.ready()
    if (PRE[c.row]) {
      await PRE[c.row](admin)
      // A kept invalidation is replayed against values not newer than it:
      // `admin`'s clock is synced to Redis and the cache's (never connected)
      // is not, so the pre-state is made clearly older than the call.
      await sleep(PRE_STATE_AGE)
    }
    if (column.reached) {
      cache = new Cache({ ...options, redis: env.url })
      await cache.ready()
      await warm(c, cache)
      await env.inject()
    } else {
      await env.inject()
      cache = new Cache({ ...options, redis: env.url })
      await warm(c, cache)
    }
    if (c.row === 'close') {
      // The write close() must report: made in the fault, kept, before close() is timed.
      await cache.set('u', 'undelivered')
      assert.ok(cache.stats().recoveryPending >= 1, `${column.id} × close: the set is kept`)
    }
    const runs = { n: 0 }
    const bound = boundMs(c.bound)
    const started = performance.now()
    const got = await call(c, cache, runs)
    const ms = performance.now() - started
    assert.ok(ms <= bound, `${column.id} × ${c.row}: answered in ${ms.toFixed(0)} ms, bound ${bound} ms`)
    if (c.write) {
      assert.ok(cache.stats().recoveryPending >= 1, `${column.id} × ${c.row}: kept for auto-recovery`)
    }
    checkGot(c, column, got, runs, reports)
    await heal()
    if (c.write) {
      await waitFor(
        () => DELIVERED[c.row](admin),
        `${column.id} × ${c.row}: delivered to Redis`,
        boundMs(DELIVERED_WITHIN),
      )
      await waitFor(() => cache.stats().recoveryPending === 0, `${column.id} × ${c.row}: nothing left kept`, 2000)
    }
    if (c.tracked) {
      await seesOutsideWrite(c, column, cache, async () => {
        const io = new IORedis(env.adminUrl, { maxRetriesPerRequest: 1 })
        try {
          await io.set(`{${prefix}w}`, 'written outside herdcache')
        } finally {
          io.disconnect()
        }
      })
    }
    if (c.gets === 'closedEither' && !reports.some((r) => r.code === 'ERR_HERDCACHE_UNDELIVERED')) {
      assert.equal(await admin.get('u'), 'undelivered', `${column.id} × close: delivered when not reported`)
    }
    if (c.reported) {
      await waitFor(
        () => reports.some((r) => column.codes.includes(r.code)),
        `${column.id} × ${c.row}: onError got ${column.codes.join(' or ')} (got ${reports.map((r) => r.code)})`,
        3 * OPTIONS.redisTimeout + 500,
      )
    }
    if (c.options?.fleetMaxConcurrentLoads) {
      assert.ok(cache.stats().fleetCapBypassed >= 1, `${column.id} × ${c.row}: counted in fleetCapBypassed`)
    }
    return ms
  } finally {
    await heal()
    await Promise.allSettled([cache?.close(), admin.close()])
  }
}

module.exports = { runCell, PRE, DELIVERED, call, checkGot, warm, loader, seesOutsideWrite }
