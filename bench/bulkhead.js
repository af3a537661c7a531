'use strict'

// The cold storm, per process: 1 000 distinct cold keys × 20 callers each, all called in one tick, with a
// loader that takes 20 ms and counts how many loaders run at once (the database's concurrency). Once with
// `maxConcurrentLoads: 50` (the load bulkhead, lib/bulkhead.js) and once without a cap. With a cap of C the
// ideal total is keys / C × the loader's time: the bulkhead is judged by how close it comes to that, with
// the peak at most C and no errors. No peer is measured: none has a bulkhead (every one runs the 1 000
// loads at once, as herdcache does without the cap).
//
// Then the same storm across a fleet: FLEET_PROCS processes sharing a redis-server of the bench's own (on a
// free loopback port, stopped at the end), each calling the 1 000 keys with 20 / FLEET_PROCS callers (20 per
// key in all), every loader one query to a "database" in this process (a TCP server on loopback) that
// counts the queries running at once and answers each after 20 ms. Variants: `fleetMaxConcurrentLoads: 50`
// (one cap for the fleet, src/engine/slots.rs); `maxConcurrentLoads: 12` in each process (the fleet's cap
// split statically: what the fleet cap costs over it, on a load spread evenly, its best case); 50 in each
// process (what a per-process cap lets through); no cap. The fleet lock makes one load per key in every
// variant; the caps decide how many reach the database at once.
//
//   node bench/bulkhead.js [--quick] [--out=FILE]     (npm run bench:bulkhead; also run by npm run bench)
//
// Writes bench/BULKHEAD.md (or FILE), whose figures bench/readme.js puts into the README.

const fs = require('node:fs')
const net = require('node:net')
const path = require('node:path')
const { fork, spawnSync } = require('node:child_process')
const { Cache } = require('..')
const { startRedis, SERVER } = require('../__test__/redis-server')
const c = require('./common')

c.rejectUnknownArgs(/^--(quick|out=.+)$/, 'node bench/bulkhead.js [--quick] [--out=FILE]')
const QUICK = c.flag('quick')
const OUT = c.opt('out') ?? path.join(__dirname, 'BULKHEAD.md')
const KEYS = 1000
const CALLERS = 20
const LOADER_MS = 20
const CAP = 50
const ROUNDS = QUICK ? 1 : 5
const FLEET_PROCS = 4
const FLEET_ROUNDS = QUICK ? 1 : 3
/** The fleet's cap split statically over its processes (rounded down): the per-process cap that stays under it. */
const SPLIT = Math.floor(CAP / FLEET_PROCS)
/** How long after its own part of the keys a fleet process calls the rest. */
const SPREAD_MS = 10

/** One storm on a fresh cache: every call made in one tick, awaited together. */
async function storm(options) {
  const cache = new Cache({ ttl: 60_000, ...options })
  let running = 0
  let peak = 0
  let runs = 0
  const loader = (k) => async () => {
    runs++
    running++
    if (running > peak) peak = running
    await c.sleep(LOADER_MS)
    running--
    return { k }
  }
  const counts = { errors: 0 }
  const started = c.now()
  const calls = []
  for (let k = 0; k < KEYS; k++) c.stormCalls(cache, k, CALLERS, loader(k), calls, counts)
  await Promise.all(calls)
  const ms = c.now() - started
  const s = cache.stats()
  await cache.close()
  return {
    ms,
    peak,
    runs,
    errors: counts.errors,
    queued: s.loadsQueued,
    waitMs: s.loadQueueWaitMs,
    rejected: s.loadsRejected,
  }
}

const VARIANTS = [
  { name: `maxConcurrentLoads: ${CAP}`, options: { maxConcurrentLoads: CAP }, ideal: (KEYS / CAP) * LOADER_MS },
  { name: 'no cap', options: {}, ideal: LOADER_MS },
]

const FLEET_VARIANTS = [
  {
    name: `fleetMaxConcurrentLoads: ${CAP}`,
    options: { fleetMaxConcurrentLoads: CAP },
    ideal: (KEYS / CAP) * LOADER_MS,
  },
  {
    name: `maxConcurrentLoads: ${SPLIT} in each process`,
    options: { maxConcurrentLoads: SPLIT },
    ideal: (KEYS / (SPLIT * FLEET_PROCS)) * LOADER_MS,
  },
  {
    name: `maxConcurrentLoads: ${CAP} in each process`,
    options: { maxConcurrentLoads: CAP },
    ideal: (KEYS / (CAP * FLEET_PROCS)) * LOADER_MS,
  },
  { name: 'no cap', options: {}, ideal: LOADER_MS },
]

/**
 * The database of the fleet storm: one query per line (its id), answered after LOADER_MS; counts the queries
 * running at once.
 */
async function startDatabase() {
  const db = { running: 0, peak: 0, queries: 0, sockets: new Set() }
  db.server = net.createServer((socket) => {
    db.sockets.add(socket)
    socket.setNoDelay(true)
    let buffered = ''
    socket.on('data', (chunk) => {
      buffered += chunk
      let nl
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const id = buffered.slice(0, nl)
        buffered = buffered.slice(nl + 1)
        db.queries++
        if (db.queries === 1) db.first = c.now()
        db.last = c.now()
        db.running++
        if (db.running > db.peak) db.peak = db.running
        setTimeout(() => {
          db.running--
          if (!socket.destroyed) socket.write(`${id}\n`)
        }, LOADER_MS)
      }
    })
    socket.on('error', () => {})
    socket.on('close', () => db.sockets.delete(socket))
  })
  await new Promise((resolve) => db.server.listen(0, '127.0.0.1', resolve))
  db.port = db.server.address().port
  db.reset = () => {
    db.peak = 0
    db.queries = 0
    db.first = Number.NaN
    db.last = Number.NaN
  }
  db.close = () => {
    for (const socket of db.sockets) socket.destroy()
    return new Promise((resolve) => db.server.close(resolve))
  }
  return db
}

/** `redis-server 7.0.15` (or the server the tests were pointed at). */
function serverVersion() {
  const out = spawnSync(SERVER, ['--version'], { encoding: 'utf8' }).stdout ?? ''
  const version = /v=(\S+)/.exec(out)
  return `${path.basename(SERVER)} ${version ? version[1] : '(version unknown)'}`
}

/** The fleet's processes (bench/bulkhead-instance.js), each answering one message at a time. */
async function startInstances(dbPort) {
  const instances = []
  for (let i = 0; i < FLEET_PROCS; i++) {
    const child = fork(path.join(__dirname, 'bulkhead-instance.js'), [String(dbPort)], { stdio: 'inherit' })
    const replies = []
    const waiting = []
    child.on('message', (message) => {
      if (waiting.length > 0) waiting.shift()(message)
      else replies.push(message)
    })
    const next = () => (replies.length > 0 ? Promise.resolve(replies.shift()) : new Promise((r) => waiting.push(r)))
    await next() // ready
    instances.push({
      async ask(message) {
        child.send(message)
        const reply = await next()
        if (reply.failed) throw new Error(`a fleet instance failed: ${reply.failed}`)
        return reply
      },
      exit: () => child.send({ op: 'exit' }),
    })
  }
  return instances
}

/** One fleet storm: every instance makes its Cache, then all storm at once; the database counts. */
async function fleetStorm(instances, db, redisUrl, variant, prefix) {
  const options = { redis: redisUrl, prefix, ttl: 60_000, ...variant.options }
  await Promise.all(instances.map((instance) => instance.ask({ op: 'prepare', options })))
  db.reset()
  const callers = CALLERS / FLEET_PROCS
  const started = c.now()
  // Each process is sent its own part of the keys first, as a balancer spreads requests, then all the others.
  const share = KEYS / FLEET_PROCS
  const go = (i) => ({ op: 'go', keys: KEYS, callers, first: i * share, share, laterMs: SPREAD_MS })
  const results = await Promise.all(instances.map((instance, i) => instance.ask(go(i))))
  const ms = c.now() - started
  const sum = (f) => results.reduce((n, r) => n + f(r), 0)
  return {
    ms,
    // From the first query sent to the last answered: the loads, without the fleet's first reads and locks.
    loading: db.last + LOADER_MS - db.first,
    first: db.first - started,
    peak: db.peak,
    queries: db.queries,
    errors: sum((r) => r.errors + r.stats.loadsRejected),
    bypassed: sum((r) => r.stats.fleetCapBypassed),
    lockAcquired: sum((r) => r.stats.lockAcquired),
  }
}

async function fleetRows() {
  const redis = await startRedis(null)
  if (!redis) throw new Error('the fleet storm needs redis-server (apt-get install redis-server)')
  const db = await startDatabase()
  const instances = await startInstances(db.port)
  try {
    const results = FLEET_VARIANTS.map(() => [])
    await fleetStorm(instances, db, redis.url, FLEET_VARIANTS[0], 'warm:') // warm-up
    for (let round = 0; round < FLEET_ROUNDS; round++) {
      for (const [i, variant] of FLEET_VARIANTS.entries()) {
        results[i].push(await fleetStorm(instances, db, redis.url, variant, `r${round}v${i}:`))
      }
    }
    return FLEET_VARIANTS.map((variant, i) => {
      const rs = results[i]
      const med = (f) => c.median(rs.map(f))
      return {
        variant: variant.name,
        queries: med((r) => r.queries),
        peak: Math.max(...rs.map((r) => r.peak)),
        ms: med((r) => r.ms),
        first: med((r) => r.first),
        loading: med((r) => r.loading),
        ideal: variant.ideal,
        errors: rs.reduce((n, r) => n + r.errors, 0),
        bypassed: rs.reduce((n, r) => n + r.bypassed, 0),
      }
    })
  } finally {
    for (const instance of instances) instance.exit()
    await db.close()
    await redis.stop()
  }
}

async function main() {
  const started = c.now()
  const loadStart = c.loadAvg()
  const results = VARIANTS.map(() => [])
  await storm({}) // warm-up: the addon, the JIT
  for (let round = 0; round < ROUNDS; round++) {
    for (const [i, variant] of VARIANTS.entries()) {
      c.gc()
      results[i].push(await storm(variant.options))
    }
  }
  const fleet = await fleetRows()
  const rows = VARIANTS.map((variant, i) => {
    const rs = results[i]
    const med = (f) => c.median(rs.map(f))
    const ms = med((r) => r.ms)
    return {
      variant: variant.name,
      runs: med((r) => r.runs),
      peak: Math.max(...rs.map((r) => r.peak)),
      ms,
      ideal: variant.ideal,
      errors: rs.reduce((n, r) => n + r.errors + r.rejected, 0),
      queued: med((r) => r.queued),
      meanWait: med((r) => (r.queued === 0 ? 0 : r.waitMs / r.queued)),
    }
  })
  const machine = c.machine()
  const L = []
  L.push('# herdcache load bulkhead: the cold storm, per process', '')
  L.push(`- date: ${c.isoSeconds()}`)
  L.push(
    `- machine: ${machine.cpu}, ${machine.mem}, ${machine.os}; load average at start ${loadStart}, at end ${machine.load}`,
  )
  L.push(`- node ${process.version}`)
  L.push(
    `- command: \`npm run bench:bulkhead\`${QUICK ? ' --quick' : ''} (${ROUNDS} round${ROUNDS === 1 ? '' : 's'} after one warm-up; ` +
      `median time, highest peak, errors summed; took ${((c.now() - started) / 1000).toFixed(0)} s)`,
  )
  const build = c.herdcacheBuild(path.join(__dirname, '..'))
  if (build) L.push(`- herdcache build: ${build}`)
  L.push(
    `- what: ${KEYS.toLocaleString('en')} distinct cold keys × ${CALLERS} callers each, every call made in one tick, on the ` +
      `embedded store; the loader takes ${LOADER_MS} ms (a timer) and counts the loaders running at once`,
  )
  L.push(
    '- peers: none measured. No peer has a load bulkhead: each runs one load per key at once, as herdcache does without a cap.',
  )
  L.push('', '## Results', '')
  L.push(
    '| variant | loader runs | at once, max | total (ms) | ideal (ms) | ÷ ideal | errors | loads queued | mean queue wait (ms) |',
  )
  L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    L.push(
      `| ${r.variant} | ${r.runs} | ${r.peak} | ${r.ms.toFixed(0)} | ${r.ideal.toFixed(0)} | ${(r.ms / r.ideal).toFixed(2)}× | ` +
        `${r.errors} | ${r.queued} | ${r.meanWait.toFixed(1)} |`,
    )
  }
  L.push(
    '',
    `The ideal with a cap of ${CAP} is ${KEYS} / ${CAP} × ${LOADER_MS} ms; without a cap, one loader's time. ` +
      '"errors" counts rejected calls and wrong values.',
    '',
  )
  L.push(`## The cold storm across a fleet of ${FLEET_PROCS} processes`, '')
  L.push(
    `- what: ${FLEET_PROCS} processes sharing one ${serverVersion()}, ` +
      `each calling the ${KEYS.toLocaleString('en')} keys with ${CALLERS / FLEET_PROCS} callers (${CALLERS} per key ` +
      `in all): each process first calls its own ${KEYS / FLEET_PROCS} keys (as a balancer spreads requests), ` +
      `${SPREAD_MS} ms later all the others, every call of a part made in one tick; each loader is one query to a database on loopback that answers after ` +
      `${LOADER_MS} ms and counts the queries running at once; ${FLEET_ROUNDS} round${FLEET_ROUNDS === 1 ? '' : 's'} ` +
      'after one warm-up, the variants alternating (median time, highest peak, errors summed)',
    '',
  )
  L.push(
    '| fleet variant | database queries | queries at once, max | total (ms) | first query at (ms) | queries, first to last (ms) | ideal (ms) | ÷ ideal | errors | loads without a fleet slot |',
  )
  L.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of fleet) {
    L.push(
      `| ${r.variant} | ${r.queries} | ${r.peak} | ${r.ms.toFixed(0)} | ${r.first.toFixed(0)} | ${r.loading.toFixed(0)} | ` +
        `${r.ideal.toFixed(0)} | ${(r.loading / r.ideal).toFixed(2)}× | ${r.errors} | ${r.bypassed} |`,
    )
  }
  L.push(
    '',
    `The ideal with one cap of ${CAP} for the fleet is ${KEYS} / ${CAP} × ${LOADER_MS} ms; with C per process, ` +
      `${KEYS} / (C × ${FLEET_PROCS}) × ${LOADER_MS} ms; without a cap, one query's time. "÷ ideal" compares the ` +
      'queries, from the first sent to the last answered, with it; before the first, every variant does the same ' +
      'fleet work (each process\'s first reads and its lock attempts for the 1,000 keys: "first query at"). ' +
      '"database queries" is one per key when the fleet lock works; "loads without a fleet slot" counts loads run ' +
      'under the per-process cap because Redis could not be asked (0 when Redis answers).',
    '',
  )
  fs.writeFileSync(OUT, L.join('\n'))
  console.log(L.join('\n'))
  console.log(`wrote ${path.relative(process.cwd(), OUT)}`)
  if (OUT === path.join(__dirname, 'BULKHEAD.md') && !QUICK) require('./readme').updateReadmeAfterBench()
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
