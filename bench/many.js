'use strict'

// Batch loads: pages of 50 keys with 30 % of them cold, against a simulated database whose every query takes a
// fixed round trip (5 ms) and counts its queries and rows. Three ways to read a page:
//   (a) cache.getOrLoadMany(keys, loader): the cold keys in one loader call, one query;
//   (b) Promise.all of 50 cache.getOrLoad(key, loader), one loader for all: one query per cold key;
//   (c) DataLoader in front of the same cache (a loader per request, the usual pattern): its batch function
//       reads the cache for every key, queries the missing ones at once and writes them back.
// Then the same cold page asked by 4 concurrent requests (what each way sends to the database), and a fully
// warm page's cost per key.
//
//   node bench/many.js [--quick] [--out=FILE]     (npm run bench:many)
//
// Writes bench/MANY.md (or FILE). The README links to it; it has no figures of it.

const fs = require('node:fs')
const path = require('node:path')
const DataLoader = require('dataloader')
const { Cache } = require('..')
const c = require('./common')

c.rejectUnknownArgs(/^--(quick|out=.+)$/, 'node bench/many.js [--quick] [--out=FILE]')
const QUICK = c.flag('quick')
const OUT = c.opt('out') ?? path.join(__dirname, 'MANY.md')
const PAGE = 50
const COLD = 15 // 30 % of a page
const DB_MS = 5
const PAGES = QUICK ? 10 : 40
const CONCURRENT = 4
const WARM_PAGES = QUICK ? 500 : 4000
const WARM_ROUNDS = QUICK ? 3 : 15

/** The database: one round trip per query, whatever its size. */
function database() {
  const db = {
    queries: 0,
    rows: 0,
    async query(ids) {
      db.queries++
      db.rows += ids.length
      await c.sleep(DB_MS)
      return ids.map((id) => ({ id, name: `user ${id}` }))
    },
  }
  return db
}

const WAYS = {
  getOrLoadMany: (cache, db) => (ids) =>
    cache.getOrLoadMany(ids, async (missing) => {
      ways.calls++
      return db.query(missing)
    }),
  // One loader for every call (it reads its key from ctx): no closure per call, the cheapest way to make them.
  'getOrLoad × 50': (cache, db) => {
    const load = async ({ key }) => {
      ways.calls++
      const [row] = await db.query([key])
      return row
    }
    return (ids) => Promise.all(ids.map((id) => cache.getOrLoad(id, load)))
  },
  'DataLoader + cache': (cache, db) => {
    const loaderOfRequest = () =>
      new DataLoader(async (ids) => {
        ways.calls++
        const cached = await Promise.all(ids.map((id) => cache.get(id)))
        const missing = ids.filter((_, i) => cached[i] === undefined)
        const rows = missing.length === 0 ? [] : await db.query(missing)
        await Promise.all(rows.map((row) => cache.set(row.id, row)))
        const byId = new Map(rows.map((row) => [row.id, row]))
        return ids.map((id, i) => cached[i] ?? byId.get(id) ?? null)
      })
    return (ids) => loaderOfRequest().loadMany(ids)
  },
}
const ways = { calls: 0 }

/** Pages of fresh keys, 35 of each warm: loader calls, queries and ms per page. */
async function coldPages(name) {
  const cache = new Cache({ ttl: 600_000, maxEntries: 100_000 })
  const db = database()
  const read = WAYS[name](cache, db)
  ways.calls = 0
  let ms = 0
  for (let p = 0; p < PAGES; p++) {
    const ids = Array.from({ length: PAGE }, (_, i) => `u${p * PAGE + i}`)
    for (let i = 0; i < PAGE; i++) if (i % 10 >= 3) await cache.set(ids[i], { id: ids[i], name: 'warm' })
    const started = c.now()
    const values = await read(ids)
    ms += c.now() - started
    if (values.length !== PAGE || values.some((v) => v === null || v instanceof Error))
      throw new Error(`${name}: a wrong page`)
  }
  await cache.close()
  return { calls: ways.calls / PAGES, queries: db.queries / PAGES, rows: db.rows / PAGES, ms: ms / PAGES }
}

/** One cold page asked by CONCURRENT requests at once: what reaches the database. */
async function concurrentPage(name) {
  const cache = new Cache({ ttl: 600_000 })
  const db = database()
  const read = WAYS[name](cache, db)
  const ids = Array.from({ length: PAGE }, (_, i) => `c${i}`)
  for (let i = 0; i < PAGE; i++) if (i % 10 >= 3) await cache.set(ids[i], { id: ids[i], name: 'warm' })
  await Promise.all(Array.from({ length: CONCURRENT }, () => read(ids)))
  await cache.close()
  return { queries: db.queries, rows: db.rows }
}

/** A fully warm page, WARM_PAGES times per round, the ways alternating round by round: µs per key (medians). */
async function warm(names) {
  const ids = Array.from({ length: PAGE }, (_, i) => `w${i}`)
  const setups = []
  for (const name of names) {
    const cache = new Cache({ ttl: 600_000 })
    const read = WAYS[name](cache, database())
    await read(ids)
    setups.push({ cache, read, rounds: [] })
  }
  for (let r = 0; r < WARM_ROUNDS; r++) {
    for (const setup of r % 2 === 0 ? setups : [...setups].reverse()) {
      c.gc()
      const started = c.now()
      for (let p = 0; p < WARM_PAGES; p++) await setup.read(ids)
      setup.rounds.push(((c.now() - started) * 1000) / (WARM_PAGES * PAGE))
    }
  }
  await Promise.all(setups.map(({ cache }) => cache.close()))
  return setups.map(({ rounds }) => c.median(rounds))
}

async function main() {
  const started = c.now()
  const loadStart = c.loadAvg()
  const names = Object.keys(WAYS)
  const rows = []
  for (const name of names) rows.push({ name, cold: await coldPages(name), together: await concurrentPage(name) })
  const warmUs = await warm(names)
  rows.forEach((row, i) => {
    row.warmUs = warmUs[i]
  })
  const base = rows.find((r) => r.name === 'getOrLoad × 50').warmUs
  const machine = c.machine()
  const L = []
  L.push('# herdcache batch loads: getOrLoadMany', '')
  L.push(`- date: ${c.isoSeconds()}`)
  L.push(
    `- machine: ${machine.cpu}, ${machine.mem}, ${machine.os}; load average at start ${loadStart}, at end ${machine.load}`,
  )
  L.push(`- node ${process.version}`)
  L.push(
    `- command: \`npm run bench:many\`${QUICK ? ' --quick' : ''} (took ${((c.now() - started) / 1000).toFixed(0)} s)`,
  )
  const build = c.herdcacheBuild(path.join(__dirname, '..'))
  if (build) L.push(`- herdcache build: ${build}`)
  L.push(
    `- what: ${PAGES} pages of ${PAGE} fresh keys, ${COLD} of them (30 %) cold, on the embedded store; the database ` +
      `answers each query after ${DB_MS} ms (a timer), whatever its size, and counts queries and rows. DataLoader ` +
      '(`dataloader` 2) is made per request, as its docs advise, with a batch function that reads the same herdcache ' +
      '(get), queries the missing keys and writes them back (set).',
  )
  L.push('', '## A page with 30 % cold keys', '')
  L.push('| way | loader calls / page | database round trips / page | rows fetched / page | ms / page |')
  L.push('|---|---:|---:|---:|---:|')
  for (const { name, cold } of rows) {
    L.push(
      `| ${name} | ${cold.calls.toFixed(1)} | ${cold.queries.toFixed(1)} | ${cold.rows.toFixed(1)} | ${cold.ms.toFixed(1)} |`,
    )
  }
  L.push('', `## The same cold page asked by ${CONCURRENT} requests at once`, '')
  L.push('| way | database round trips | rows fetched |')
  L.push('|---|---:|---:|')
  for (const { name, together } of rows) L.push(`| ${name} | ${together.queries} | ${together.rows} |`)
  L.push('', '## A fully warm page', '')
  L.push('| way | µs per key | ÷ getOrLoad × 50 |')
  L.push('|---|---:|---:|')
  for (const { name, warmUs } of rows) L.push(`| ${name} | ${warmUs.toFixed(3)} | ${(warmUs / base).toFixed(2)}× |`)
  L.push(
    '',
    `Warm: ${WARM_PAGES} pages per round, median of ${WARM_ROUNDS} rounds (the ways alternating, after a full GC), each page awaited before the next. ` +
      'getOrLoadMany coalesces across requests as getOrLoad does (the concurrent requests join the loads in flight); ' +
      'a DataLoader per request batches within one request only. "ms / page" hardly differs: the simulated ' +
      'database answers parallel queries without contention, so what differs is what reaches it, not the time.',
    '',
  )
  fs.writeFileSync(OUT, L.join('\n'))
  console.log(L.join('\n'))
  console.log(`wrote ${path.relative(process.cwd(), OUT)}`)
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
