'use strict'

// The cold storm, per process: 1 000 distinct cold keys × 20 callers each, all called in one tick, with a
// loader that takes 20 ms and counts how many loaders run at once (the database's concurrency). Once with
// `maxConcurrentLoads: 50` (the load bulkhead, lib/bulkhead.js) and once without a cap. With a cap of C the
// ideal total is keys / C × the loader's time: the bulkhead is judged by how close it comes to that, with
// the peak at most C and no errors. No peer is measured: none has a bulkhead (every one runs the 1 000
// loads at once, as herdcache does without the cap).
//
//   node bench/bulkhead.js [--quick] [--out=FILE]     (npm run bench:bulkhead; also run by npm run bench)
//
// Writes bench/BULKHEAD.md (or FILE), whose figures bench/readme.js puts into the README.

const fs = require('node:fs')
const path = require('node:path')
const { Cache } = require('..')
const c = require('./common')

c.rejectUnknownArgs(/^--(quick|out=.+)$/, 'node bench/bulkhead.js [--quick] [--out=FILE]')
const QUICK = c.flag('quick')
const OUT = c.opt('out') ?? path.join(__dirname, 'BULKHEAD.md')
const KEYS = 1000
const CALLERS = 20
const LOADER_MS = 20
const CAP = 50
const ROUNDS = QUICK ? 1 : 5

/** One storm on a fresh cache: every call made in one tick, awaited together. */
async function storm(options) {
  const cache = new Cache({ ttl: 60_000, ...options })
  let running = 0
  let peak = 0
  let runs = 0
  const loader = (i) => async () => {
    runs++
    running++
    if (running > peak) peak = running
    await c.sleep(LOADER_MS)
    running--
    return { i }
  }
  let errors = 0
  const started = c.now()
  const calls = []
  for (let k = 0; k < KEYS; k++) {
    const load = loader(k)
    for (let j = 0; j < CALLERS; j++) {
      calls.push(
        cache.getOrLoad(['storm', k], load).then(
          (value) => {
            if (value.i !== k) errors++
          },
          () => errors++,
        ),
      )
    }
  }
  await Promise.all(calls)
  const ms = c.now() - started
  const s = cache.stats()
  await cache.close()
  return { ms, peak, runs, errors, queued: s.loadsQueued, waitMs: s.loadQueueWaitMs, rejected: s.loadsRejected }
}

const VARIANTS = [
  { name: `maxConcurrentLoads: ${CAP}`, options: { maxConcurrentLoads: CAP }, ideal: (KEYS / CAP) * LOADER_MS },
  { name: 'no cap', options: {}, ideal: LOADER_MS },
]

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
  fs.writeFileSync(OUT, L.join('\n'))
  console.log(L.join('\n'))
  console.log(`wrote ${path.relative(process.cwd(), OUT)}`)
  if (OUT === path.join(__dirname, 'BULKHEAD.md') && !QUICK) require('./readme').updateReadmeAfterBench()
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
