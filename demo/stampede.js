'use strict'

// npm run demo
//
// A cache stampede, reproduced and stopped. One hot key, a simulated database
// whose query takes ~600 ms and slows down with every other query running at
// the same time (so a stampede makes itself worse), and the very same traffic
// played against two caches:
//
//   (a) a naive cache-aside: a Map with a TTL; get, on a miss run the query,
//       then set. This is how most code does it.
//   (b) herdcache's embedded store: cache.getOrLoad(key, loader).
//
// Three phases of a few hundred requests each, arriving within half a second:
//   1. cold start         the key was never loaded
//   2. steady hits        the key is fresh
//   3. expiry under load  the key's TTL has just passed
//
// Every number printed comes from this run: database queries are counted by
// the simulated database, latencies are measured around each request with
// performance.now(). Nothing is hard-coded. A complete run without REDIS_URL
// writes what it printed to demo/OUTPUT.md, which README.md's figures come from.

const { performance } = require('node:perf_hooks')
const { setTimeout: sleep } = require('node:timers/promises')

const CONFIG = {
  requests: 300, // per phase
  windowMs: 500, // the requests of a phase arrive within this window
  baseQueryMs: 600, // the query alone
  perConcurrentMs: 2, // + this much for every other query running
  noiseMs: 20, // ± random noise on each query
  ttl: 1000, // both caches: a value is fresh for 1 s ...
  hardTtl: 10000, // ... herdcache may serve it stale for up to 10 s
  jitter: 0.1, // herdcache's default TTL spread, passed explicitly
  seed: 0x5eed,
}

const KEY = ['campaign', 'spring-sale', 'landing', 'en']
const KEY_STRING = KEY.join(':')

const PHASES = [
  { id: 'cold', label: 'cold start' },
  { id: 'steady', label: 'steady hits' },
  { id: 'expiry', label: 'expiry under load' },
]

// ---------------------------------------------------------------- output ----

const useColour = (() => {
  const env = process.env
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '' && env.FORCE_COLOR !== '0') return true
  return Boolean(process.stdout.isTTY)
})()
const paint = (code) => (s) => (useColour ? `\x1b[${code}m${s}\x1b[0m` : String(s))
const bold = paint('1')
const dim = paint('2')
const red = paint('31')
const green = paint('32')
const cyan = paint('36')

// What was printed, for demo/OUTPUT.md.
let transcript = ''
const write = (text) => {
  transcript += text
  process.stdout.write(text)
}
const out = (line = '') => write(line + '\n')

// --------------------------------------------------------------- helpers ----

// A seeded PRNG, so both caches see the very same traffic.
const { mulberry32: prng } = require('../scripts/prng')

// Arrival offsets (ms from the start of the phase), sorted.
function arrivals(rand, n, windowMs) {
  const offsets = []
  for (let i = 0; i < n; i++) offsets.push(rand() * windowMs)
  return offsets.sort((a, b) => a - b)
}

// Nearest-rank percentile of an ascending array.
function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length))
  return sorted[rank - 1]
}

function summarise(latencies) {
  const sorted = latencies.filter((x) => Number.isFinite(x)).sort((a, b) => a - b)
  return {
    p50: percentile(sorted, 50),
    p95: percentile(sorted, 95),
    p99: percentile(sorted, 99),
    max: sorted.length ? sorted[sorted.length - 1] : NaN,
  }
}

function fmtMs(ms) {
  if (!Number.isFinite(ms)) return '—'
  if (ms < 10) return ms.toFixed(2)
  if (ms < 100) return ms.toFixed(1)
  return String(Math.round(ms))
}

// ------------------------------------------------------- the database ----

// A database whose query takes baseQueryMs, plus perConcurrentMs for every
// other query already running when it starts: the more identical queries a
// stampede sends, the slower each one gets, the longer the key stays missing.
class Database {
  constructor(rand) {
    this.rand = rand
    this.running = 0
    this.queries = 0
    this.peak = 0
    this.lastQueryEnd = 0 // performance.now() of the last query that finished
    this.idleWaiters = []
  }

  query(signal) {
    return new Promise((resolve, reject) => {
      if (signal && signal.aborted) return reject(signal.reason)
      const version = ++this.queries
      const others = this.running++
      if (this.running > this.peak) this.peak = this.running
      const ms = CONFIG.baseQueryMs + CONFIG.perConcurrentMs * others + (this.rand() * 2 - 1) * CONFIG.noiseMs
      const finish = () => {
        this.running--
        this.lastQueryEnd = performance.now()
        if (this.running === 0) for (const wake of this.idleWaiters.splice(0)) wake()
      }
      const onAbort = () => {
        clearTimeout(timer)
        finish()
        reject(signal.reason)
      }
      const timer = setTimeout(() => {
        if (signal) signal.removeEventListener('abort', onAbort)
        finish()
        resolve({
          campaign: 'spring-sale',
          locale: 'en',
          version, // which query produced this value
          products: Array.from({ length: 12 }, (_, i) => ({ id: 1000 + i, price: 9.99 + i })),
        })
      }, ms)
      if (signal) signal.addEventListener('abort', onAbort, { once: true })
    })
  }

  idle() {
    if (this.running === 0) return Promise.resolve()
    return new Promise((resolve) => this.idleWaiters.push(resolve))
  }
}

// ----------------------------------------------------- the contenders ----

// (a) The usual cache-aside: nothing stops every request that misses from
// running the query itself.
function naiveCache(db) {
  const store = new Map()
  return {
    name: 'naive cache-aside',
    async get() {
      const entry = store.get(KEY_STRING)
      if (entry && entry.expiresAt > Date.now()) return { value: entry.value, outcome: 'hit' }
      const value = await db.query()
      store.set(KEY_STRING, { value, expiresAt: Date.now() + CONFIG.ttl })
      return { value, outcome: 'miss' }
    },
    async close() {},
  }
}

// (b) herdcache. XFetch is turned off (beta: 0) only to keep the phases apart:
// with a 600 ms query and a 1 s TTL, XFetch (on by default) would almost surely
// start one early background refresh during phase 2, before the expiry.
// REDIS_URL: the same run through Redis (the fleet lock, L1 and pub/sub),
// under a prefix of the demo's own, cleared first so the cold start is cold.
const REDIS = process.env.REDIS_URL ? { redis: process.env.REDIS_URL, prefix: 'herdcache-demo:' } : {}

function herdCache(db, Cache) {
  const cache = new Cache({ ttl: CONFIG.ttl, hardTtl: CONFIG.hardTtl, jitter: CONFIG.jitter, beta: 0, ...REDIS })
  const loader = ({ signal }) => db.query(signal)
  return {
    name: 'herdcache',
    async get() {
      const status = {}
      const value = await cache.getOrLoad(KEY, loader, { status })
      return { value, outcome: status.outcome || 'unknown' }
    },
    stats: () => cache.stats(),
    prepare: () => cache.clear(),
    close: () => cache.close(),
  }
}

// ------------------------------------------------------------ the run ----

async function runPhase(cache, db, offsets) {
  const queriesBefore = db.queries
  db.peak = db.running
  const refreshesBefore = cache.stats ? cache.stats().backgroundRefreshes : 0
  const latencies = new Array(offsets.length).fill(NaN)
  const outcomes = {}
  const versions = {}
  const errors = []
  const started = performance.now()

  await new Promise((allAnswered) => {
    let pending = offsets.length
    const done = () => {
      if (--pending === 0) allAnswered()
    }
    offsets.forEach((offset, i) => {
      setTimeout(() => {
        const t0 = performance.now()
        cache.get().then(
          ({ value, outcome }) => {
            latencies[i] = performance.now() - t0
            outcomes[outcome] = (outcomes[outcome] || 0) + 1
            const v = value && value.version
            versions[v] = (versions[v] || 0) + 1
            done()
          },
          (err) => {
            errors.push(err)
            done()
          },
        )
      }, offset)
    })
  })

  // A background refresh started in this phase belongs to this phase.
  await db.idle()
  return {
    queries: db.queries - queriesBefore,
    peak: db.peak,
    refreshes: cache.stats ? cache.stats().backgroundRefreshes - refreshesBefore : 0,
    latencies,
    outcomes,
    versions,
    errors,
    ms: performance.now() - started,
  }
}

async function runScenario(cache, db, schedules) {
  const started = performance.now()
  const results = {}
  results.cold = await runPhase(cache, db, schedules.cold)
  results.steady = await runPhase(cache, db, schedules.steady)
  // Wait until the key is past its TTL (the longest the jitter can make it),
  // counted from the last value the database produced, then hit it again.
  const expired = db.lastQueryEnd + CONFIG.ttl * (1 + CONFIG.jitter) + 50
  const wait = expired - performance.now()
  if (wait > 0) await sleep(wait)
  results.expiry = await runPhase(cache, db, schedules.expiry)
  results.ms = performance.now() - started
  return results
}

function totals(results) {
  const all = PHASES.map((p) => results[p.id])
  return {
    queries: all.reduce((s, r) => s + r.queries, 0),
    peak: Math.max(...all.map((r) => r.peak)),
    refreshes: all.reduce((s, r) => s + r.refreshes, 0),
    latencies: all.flatMap((r) => r.latencies),
    outcomes: all.reduce((acc, r) => {
      for (const [k, v] of Object.entries(r.outcomes)) acc[k] = (acc[k] || 0) + v
      return acc
    }, {}),
    errors: all.flatMap((r) => r.errors),
  }
}

// --------------------------------------------------------------- report ----

function printTable(naive, herd) {
  const rows = [
    ...PHASES.map((p) => ({ label: p.label, a: naive[p.id], b: herd && herd[p.id] })),
    {
      label: 'total',
      a: totals(naive),
      b: herd && totals(herd),
    },
  ]
  const W_LABEL = 18
  const W_Q = 8
  const W_MS = 7
  const groupWidth = W_Q + 4 * W_MS
  const SEP = '  │ '

  const cells = (r) => {
    if (!r) return [W_Q, W_MS, W_MS, W_MS, W_MS].map((w) => '—'.padStart(w))
    const s = summarise(r.latencies)
    return [
      String(r.queries).padStart(W_Q),
      fmtMs(s.p50).padStart(W_MS),
      fmtMs(s.p95).padStart(W_MS),
      fmtMs(s.p99).padStart(W_MS),
      fmtMs(s.max).padStart(W_MS),
    ]
  }
  // Colour the smaller of each pair green, the larger red.
  const compare = (ca, cb) => {
    if (!useColour) return [ca, cb]
    const num = (c) => parseFloat(c)
    return [
      ca
        .map((c, i) => [c, cb[i]])
        .map(([x, y]) => {
          const a = num(x)
          const b = num(y)
          if (!Number.isFinite(a) || !Number.isFinite(b) || a === b) return [x, y]
          return a < b ? [green(x), red(y)] : [red(x), green(y)]
        }),
    ].flatMap((pairs) => [pairs.map((p) => p[0]), pairs.map((p) => p[1])])
  }

  const title = (t) => {
    const inner = ` ${t} `
    const left = Math.floor((groupWidth - inner.length) / 2)
    return '─'.repeat(Math.max(0, left)) + inner + '─'.repeat(Math.max(0, groupWidth - left - inner.length))
  }
  const head = ['DB qry', 'p50', 'p95', 'p99', 'max'].map((h, i) => h.padStart(i === 0 ? W_Q : W_MS)).join('')
  out(' '.repeat(W_LABEL) + bold(title('naive cache-aside')) + SEP + bold(title('herdcache')))
  out(bold('phase'.padEnd(W_LABEL)) + dim(head) + SEP + dim(head))
  for (const row of rows) {
    if (row.label === 'total') out('─'.repeat(W_LABEL + groupWidth) + '──┼─' + '─'.repeat(groupWidth))
    const [ca, cb] = compare(cells(row.a), cells(row.b))
    const label = row.label === 'total' ? bold(row.label.padEnd(W_LABEL)) : row.label.padEnd(W_LABEL)
    out(label + ca.join('') + SEP + cb.join(''))
  }
  out(dim(' '.repeat(W_LABEL) + 'latencies in ms, per request, from arrival to answer'))
}

function describeOutcomes(r) {
  if (!r) return '—'
  const order = ['hit', 'stale', 'negative', 'miss', 'coalesced', 'unknown']
  const parts = order.filter((k) => r.outcomes[k]).map((k) => `${r.outcomes[k]} ${k}`)
  for (const k of Object.keys(r.outcomes)) if (!order.includes(k)) parts.push(`${r.outcomes[k]} ${k}`)
  if (r.errors.length) parts.push(red(`${r.errors.length} failed`))
  return parts.join(', ')
}

function printOutcomes(naive, herd) {
  out()
  out(bold('how each request was answered') + dim('   (peak = most queries running at once)'))
  const W_LABEL = 18
  const W_A = 30
  for (const p of PHASES) {
    const a = naive[p.id]
    const b = herd && herd[p.id]
    const left = `${describeOutcomes(a)}; peak ${a.peak}`
    let right = '—'
    if (b) {
      right = `${describeOutcomes(b)}; peak ${b.peak}`
      if (b.refreshes) right += `; ${b.refreshes} background refresh${b.refreshes === 1 ? '' : 'es'}`
    }
    out(p.label.padEnd(W_LABEL) + left.padEnd(W_A) + ' │ ' + right)
  }
}

function printVerdict(naive, herd) {
  const a = totals(naive)
  out()
  if (!herd) {
    out(red('verdict: herdcache could not be loaded, so there is nothing to compare (see above).'))
    return
  }
  const b = totals(herd)
  const ea = summarise(naive.expiry.latencies)
  const eb = summarise(herd.expiry.latencies)
  const n = CONFIG.requests * PHASES.length
  if (b.errors.length || a.errors.length) {
    out(red(`verdict: ${a.errors.length} naive and ${b.errors.length} herdcache requests failed; see above.`))
    return
  }
  const fewer = b.queries > 0 ? `${(a.queries / b.queries).toFixed(0)}× fewer` : 'none at all'
  if (b.queries < a.queries && eb.p95 < ea.p95) {
    out(
      green(bold('verdict: ')) +
        `same ${n} requests: the naive cache ran ${a.queries} queries (up to ${a.peak} at once), ` +
        `herdcache ran ${b.queries} (${fewer}); when the key expired under load, ` +
        `p95 went from ${fmtMs(ea.p95)} ms (naive) to ${fmtMs(eb.p95)} ms (herdcache).`,
    )
  } else {
    out(
      red(bold('verdict: ')) +
        `herdcache did not stop the stampede in this run: ${b.queries} queries vs ${a.queries}, ` +
        `expiry-phase p95 ${fmtMs(eb.p95)} ms vs ${fmtMs(ea.p95)} ms (naive).`,
    )
  }
}

async function main() {
  let Cache = null
  let loadError = null
  try {
    ;({ Cache } = require('..'))
    if (typeof Cache !== 'function') throw new Error("require('..').Cache is not a class")
  } catch (err) {
    loadError = err
  }

  const rand = prng(CONFIG.seed)
  const schedules = {}
  for (const p of PHASES) schedules[p.id] = arrivals(rand, CONFIG.requests, CONFIG.windowMs)

  out(bold(cyan('herdcache demo: a cache stampede on one hot key')))
  out(
    dim('database  ') +
      `${CONFIG.baseQueryMs} ms per query, +${CONFIG.perConcurrentMs} ms for every other query running (±${CONFIG.noiseMs} ms noise)`,
  )
  out(
    dim('traffic   ') +
      `${PHASES.length} phases × ${CONFIG.requests} requests arriving within ${CONFIG.windowMs} ms on "${KEY_STRING}", the same for both`,
  )
  out(dim('naive     ') + `a Map with a ${CONFIG.ttl} ms TTL: get; on a miss, query, then set`)
  out(
    dim('herdcache ') +
      `new Cache({ ttl: ${CONFIG.ttl}, hardTtl: ${CONFIG.hardTtl}, jitter: ${CONFIG.jitter}, beta: 0${REDIS.redis ? `, redis: '${REDIS.redis}'` : ''} })` +
      dim('  (XFetch off: no early refresh in phase 2)'),
  )
  out()

  write(`running the naive cache-aside ... `)
  const naiveDb = new Database(prng(CONFIG.seed + 1))
  const naive = await runScenario(naiveCache(naiveDb), naiveDb, schedules)
  out(`${(naive.ms / 1000).toFixed(1)} s`)

  let herd = null
  if (loadError) {
    out(red(`herdcache could not be loaded: ${loadError.message.split('\n')[0]}`))
    out(dim('build it first: npm run build (npm run demo does it for you)'))
    process.exitCode = 1
  } else {
    write(`running herdcache ............... `)
    const herdDb = new Database(prng(CONFIG.seed + 1))
    const herdcache = herdCache(herdDb, Cache)
    try {
      await herdcache.prepare()
      herd = await runScenario(herdcache, herdDb, schedules)
    } finally {
      await herdcache.close()
    }
    out(`${(herd.ms / 1000).toFixed(1)} s`)
  }
  out()

  printTable(naive, herd)
  printOutcomes(naive, herd)
  printVerdict(naive, herd)

  for (const [name, r] of [
    ['naive', naive],
    ['herdcache', herd],
  ]) {
    const errs = r ? totals(r).errors : []
    if (errs.length) {
      out(red(`${name}: first error: ${errs[0] && (errs[0].code || '')} ${errs[0] && errs[0].message}`))
      process.exitCode = 1
    }
  }

  // A complete run of the default traffic is the README's: it records it.
  if (herd && !process.exitCode && !REDIS.redis) {
    out()
    require('./output').writeOutput('OUTPUT.md', {
      title: 'npm run demo: the last complete run',
      command: 'npm run demo',
      output: transcript,
    })
  }
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
