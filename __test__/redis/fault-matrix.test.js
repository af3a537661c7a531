'use strict'
// The fault matrix (issue 25, item 4) on one node: every operation under a
// Redis refused, silent or refusing the credentials from the start, killed
// after the first connection, paused for 2 × redisTimeout, and answering
// 2 × slower than redisTimeout. The cells, their bounds and what they
// expect are data (fault-matrix/cells.js); each runs on a fresh cache
// against one redis-server (and proxy) per column. The cluster columns are
// in fault-matrix-cluster.test.js. The README's table is checked against
// the rendering of the same data (node __test__/redis/fault-matrix/render.js --write).
const test = require('node:test')
const assert = require('node:assert/strict')
const { startRedis } = require('../redis-server')
const { startProxy } = require('../tcp-proxy')
const { sleep } = require('../helpers')
const { OPTIONS, COLUMNS, ROWS, cell } = require('./fault-matrix/cells')
const { render, inReadme } = require('./fault-matrix/render')
const { runCell } = require('./fault-matrix/run')

const T = { timeout: 60000 }

test('the README’s fault-matrix table is the one rendered from fault-matrix/cells.js', () => {
  const readme = inReadme()
  assert.ok(readme !== null, 'README.md has the <!-- fault-matrix --> … <!-- /fault-matrix --> markers')
  assert.equal(readme, render(), 'run `node __test__/redis/fault-matrix/render.js --write`')
})

/** How each single-node column makes its fault: { url, adminUrl, inject(), heal() }. */
const FAULTS = {
  async refused(t, redis) {
    const proxy = await startProxy(t, redis.port)
    return { url: proxy.url, adminUrl: redis.url, inject: () => proxy.cut({ refuse: true }), heal: () => proxy.heal() }
  },
  async silent(t, redis) {
    const proxy = await startProxy(t, redis.port)
    return { url: proxy.url, adminUrl: redis.url, inject: () => proxy.blackhole(), heal: () => proxy.heal() }
  },
  async auth(_t, redis) {
    const url = `redis://app:pw@127.0.0.1:${redis.port}`
    await redis.cmd('ACL', 'SETUSER', 'app', 'off', 'resetpass', '>pw', '~*', '&*', '+@all')
    return {
      url,
      adminUrl: redis.url,
      inject: () => redis.cmd('ACL', 'SETUSER', 'app', 'off'),
      heal: () => redis.cmd('ACL', 'SETUSER', 'app', 'on'),
    }
  },
  async killed(t, redis) {
    const proxy = await startProxy(t, redis.port)
    return { url: proxy.url, adminUrl: redis.url, inject: () => proxy.cut({ refuse: true }), heal: () => proxy.heal() }
  },
  async paused(t, redis) {
    let resumed = Promise.resolve()
    t.after(() => redis.resume())
    return {
      url: redis.url,
      adminUrl: redis.url,
      inject: () => {
        redis.pause()
        resumed = sleep(2 * OPTIONS.redisTimeout).then(() => redis.resume())
      },
      heal: () => resumed,
    }
  },
  async slow(t, redis) {
    const proxy = await startProxy(t, redis.port)
    return {
      url: proxy.url,
      adminUrl: redis.url,
      inject: () => proxy.delay(2 * OPTIONS.redisTimeout),
      heal: () => proxy.heal(),
    }
  },
}

for (const column of COLUMNS.filter((c) => !c.cluster)) {
  test(`fault matrix, ${column.title}: every operation within its bound`, T, async (t) => {
    const redis = await startRedis(t)
    if (!redis) return
    const env = await FAULTS[column.id](t, redis)
    for (const row of ROWS) {
      const c = cell(column, row)
      await t.test(`${row.title}`, async () => {
        const ms = await runCell(column, c, env)
        t.diagnostic(`${column.id} × ${row.id}: ${ms.toFixed(0)} ms`)
      })
    }
  })
}
