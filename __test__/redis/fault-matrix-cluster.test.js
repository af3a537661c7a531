'use strict'
// The fault matrix's cluster columns (fault-matrix/cells.js): every operation
// while the primary of its key fails over, and after the slot of its key
// moved to another primary, on one 3 + 3 Redis Cluster the test starts. The
// cells of a column run at once, in one disturbance (a failover takes 1.5–3 s).
const test = require('node:test')
const assert = require('node:assert/strict')
const { startCluster } = require('../redis-cluster')
const { Cache } = require('../..')
const { sleep, waitFor } = require('../helpers')
const { OPTIONS, COLUMNS, ROWS, cell, boundMs } = require('./fault-matrix/cells')
const { PRE, DELIVERED, call, checkGot, warm, seesOutsideWrite } = require('./fault-matrix/run')

const T = { timeout: 90000 }
/** The key each row's call is about (its slot is the one disturbed). */
const KEY = { cold: 'k', warm: 'w', tracked: 'w', stale: 'st', get: 'missing', set: 's', delete: 'd', expire: 'e' }
Object.assign(KEY, {
  deleteByTag: 't',
  clear: 'c',
  nsClear: 'other',
  setCompressed: 'z',
  many: 'm1',
  fleetCap: 'f',
  close: 'u',
  ready: 'k',
})

/** A prefix for `row` under which its key's slot is served by `port` (when given). */
async function prefixOn(cluster, column, row, port) {
  for (let i = 0; ; i++) {
    const prefix = `fm:${column.id}:${row.id}:${i}:`
    const slot = await cluster.slotOf(`{${prefix}${KEY[row.id]}}`)
    if (port === undefined || (await cluster.ownerOf(slot)) === port) return { prefix, slot }
  }
}

/** Sets up every cell of `column` (caches ready, pre-state, L1 warm), disturbs, runs every call at once, checks. */
async function column(t, cluster, column, { pick, disturb, heal }) {
  const urls = { cluster: cluster.urls }
  const victim = await pick()
  const cells = []
  for (const row of ROWS) {
    const c = cell(column, row)
    const { prefix, slot } = await prefixOn(cluster, column, row, victim)
    const reports = []
    const options = {
      ...OPTIONS,
      redis: urls,
      prefix,
      ttl: 60000,
      ...(c.options ?? {}),
      onError: (e) => reports.push(e),
    }
    const admin = new Cache({ ...OPTIONS, redis: urls, prefix, l1: false })
    await admin.ready()
    if (PRE[c.row]) await PRE[c.row](admin)
    await admin.close()
    const cache = new Cache(options)
    const second = c.fleetOnce ? new Cache(options) : null
    t.after(() => Promise.allSettled([cache.close(), second?.close()]))
    await Promise.all([cache.ready(), second?.ready()])
    await warm(c, cache)
    cells.push({ c, prefix, slot, cache, second, reports, options })
  }
  await disturb(cells)
  const results = await Promise.all(
    cells.map(async (x) => {
      const runs = { n: 0 }
      // The write close() must report is made in the fault, before close() is timed.
      if (x.c.row === 'close') await x.cache.set('u', 'undelivered').catch(() => {})
      const started = performance.now()
      try {
        let got
        if (x.second) {
          const [a] = await Promise.all([call(x.c, x.cache, runs), call(x.c, x.second, runs)])
          got = a
        } else {
          got = await call(x.c, x.cache, runs)
        }
        const ms = performance.now() - started
        return { x, got, runs, ms, pending: x.cache.stats().recoveryPending }
      } catch (error) {
        return { x, error, ms: performance.now() - started }
      }
    }),
  )
  await heal()
  for (const { x, got, runs, ms, error, pending } of results) {
    const { c } = x
    await t.test(ROWS.find((r) => r.id === c.row).title, async () => {
      t.diagnostic(`${column.id} × ${c.row}: ${ms.toFixed(0)} ms`)
      assert.ifError(error)
      const bound = boundMs(c.bound)
      assert.ok(ms <= bound, `${column.id} × ${c.row}: answered in ${ms.toFixed(0)} ms, bound ${bound} ms`)
      checkGot(c, column, got, runs, x.reports)
      if (c.fleetOnce) assert.equal(runs.n, 1, `${column.id} × ${c.row}: one load for 2 instances (the fleet lock)`)
      if (c.write) {
        const admin = new Cache({ ...OPTIONS, redis: { cluster: cluster.urls }, prefix: x.prefix, l1: false })
        try {
          await waitFor(() => DELIVERED[c.row](admin), `${column.id} × ${c.row}: in Redis`, 6000)
        } finally {
          await admin.close()
        }
        await waitFor(() => x.cache.stats().recoveryPending === 0, `${column.id} × ${c.row}: nothing left kept`, 3000)
      }
      // After the check in Redis, so a failing cell says whether the write was lost or only not counted.
      if (c.tracked) {
        await seesOutsideWrite(c, column, x.cache, async () => {
          const name = `{${x.prefix}w}`
          await cluster.cmd(await cluster.ownerOf(await cluster.slotOf(name)), 'SET', name, 'written outside herdcache')
        })
      }
      if (c.write && !c.live) {
        assert.ok(pending >= 1, `${column.id} × ${c.row}: kept for auto-recovery (recoveryPending ${pending})`)
      }
      if (c.reported && column.codes.length) {
        await waitFor(
          () => x.reports.some((r) => column.codes.includes(r.code)),
          `${column.id} × ${c.row}: onError got ${column.codes.join(' or ')} (got ${x.reports.map((r) => r.code)})`,
          2000,
        )
      }
    })
  }
}

test('fault matrix on a 3 + 3 cluster: a primary failing over, then a slot moving', T, async (t) => {
  const cluster = await startCluster(t, { replicas: 1 })
  if (!cluster) return
  t.diagnostic(`the cluster started in ${cluster.startMs} ms`)
  const [failover, slotMove] = ['failover', 'slotMove'].map((id) => COLUMNS.find((c) => c.id === id))

  let victim
  await t.test(failover.title, async (t) => {
    await column(t, cluster, failover, {
      // The primary of the tags' slot (`<prefix>tag:{tg}`, whatever the prefix): every cell's key is put there.
      pick: async () => {
        victim = await cluster.ownerOf(await cluster.slotOf('tg'))
        return victim
      },
      disturb: async () => {
        await sleep(200) // the replicas hold the pre-state
        await cluster.killPrimary(victim)
      },
      heal: async () => {
        const { ms } = await cluster.waitFailover()
        t.diagnostic(`the replica took over in ${ms} ms`)
        // The slot-move column runs on a whole cluster: the killed node rejoins, as a replica.
        await cluster.restartNode(victim)
      },
    })
  })

  await t.test(slotMove.title, async (t) => {
    let from
    await column(t, cluster, slotMove, {
      pick: async () => {
        from = (await cluster.primaries())[0].port
        return from
      },
      disturb: async (cells) => {
        const to = (await cluster.primaries()).find((p) => p.port !== from).port
        const slots = new Set([...cells.map((x) => x.slot), await cluster.slotOf('tg')])
        for (const slot of slots) await cluster.migrateSlot(slot, to)
      },
      heal: async () => {},
    })
  })
})
